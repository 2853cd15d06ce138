/*
 * sanitize.c - strings from outside made safe to show (see sanitize.h).
 */
#include "common/sanitize.h"

#include <string.h>

size_t ms__utf8_decode(const unsigned char *p, size_t n, uint32_t *cp) {
  unsigned char c = p[0];
  size_t need;
  unsigned char lo = 0x80, hi = 0xbf;
  uint32_t v;
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  /* The well-formed sequences of Unicode's table 3-7: the second byte's
   * range excludes overlong forms (e0, f0), surrogates (ed) and code
   * points past U+10FFFF (f4). */
  if (c >= 0xc2 && c <= 0xdf) {
    need = 1;
    v = c & 0x1fu;
  } else if (c >= 0xe0 && c <= 0xef) {
    need = 2;
    v = c & 0x0fu;
    if (c == 0xe0)
      lo = 0xa0;
    else if (c == 0xed)
      hi = 0x9f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    need = 3;
    v = c & 0x07u;
    if (c == 0xf0)
      lo = 0x90;
    else if (c == 0xf4)
      hi = 0x8f;
  } else {
    return 0;
  }
  if (n < need + 1 || p[1] < lo || p[1] > hi)
    return 0;
  for (size_t i = 1; i <= need; i++) {
    if (i > 1 && (p[i] < 0x80 || p[i] > 0xbf))
      return 0;
    v = v << 6 | (p[i] & 0x3fu);
  }
  *cp = v;
  return need + 1;
}

int ms__cp_unsafe(uint32_t cp) {
  /* Ranges of code points that act, or show nothing, instead of printing:
   * controls, bidi controls and marks, and the invisible format
   * characters (Unicode's Cc, Cf and Default_Ignorable_Code_Point
   * classes, as far as they are assigned), and noncharacters. */
  static const struct {
    uint32_t lo, hi;
  } bad[] = {
      {0x0000, 0x001f},   {0x007f, 0x009f},   /* C0, DEL, C1 */
      {0x00ad, 0x00ad},                       /* soft hyphen */
      {0x034f, 0x034f},                       /* grapheme joiner */
      {0x061c, 0x061c},                       /* Arabic letter mark */
      {0x115f, 0x1160},                       /* Hangul fillers */
      {0x17b4, 0x17b5},                       /* Khmer invisible vowels */
      {0x180b, 0x180f},                       /* Mongolian selectors */
      {0x200b, 0x200f},                       /* ZW space/joiners, LRM, RLM */
      {0x2028, 0x202e},                       /* separators, bidi controls */
      {0x2060, 0x206f},                       /* word joiner, isolates */
      {0x3164, 0x3164},                       /* Hangul filler */
      {0xfdd0, 0xfdef},                       /* noncharacters */
      {0xfe00, 0xfe0f},                       /* variation selectors */
      {0xfeff, 0xfeff},                       /* BOM, ZW no-break space */
      {0xffa0, 0xffa0},                       /* halfwidth Hangul filler */
      {0xfff0, 0xfffb},                       /* interlinear annotation */
      {0x110bd, 0x110bd}, {0x110cd, 0x110cd}, /* Kaithi number signs */
      {0x13430, 0x1343f},                     /* hieroglyph format controls */
      {0x1bca0, 0x1bca3},                     /* shorthand format controls */
      {0x1d173, 0x1d17a},                     /* musical format controls */
      {0xe0000, 0xe0fff},                     /* tags, variation selectors */
  };
  /* Printable ASCII first: most of every name and every blank cell of
   * the live view. */
  if (cp >= 0x20 && cp < 0x7f)
    return 0;
  if (cp < 0xa0)
    return 1;
  /* U+xxFFFE and U+xxFFFF are noncharacters in every plane. */
  if ((cp & 0xfffeu) == 0xfffeu)
    return 1;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    if (cp >= bad[i].lo && cp <= bad[i].hi)
      return 1;
  return 0;
}

int ms__cp_columns(uint32_t cp) {
  /* The wide ranges of Unicode's EastAsianWidth (W and F), the large
   * blocks only, and the combining blocks that every script shares. */
  static const struct {
    uint32_t lo, hi;
  } wide[] = {
      {0x1100, 0x115f},   {0x2e80, 0x303e},   {0x3041, 0x33ff},
      {0x3400, 0x4dbf},   {0x4e00, 0x9fff},   {0xa000, 0xa4cf},
      {0xa960, 0xa97f},   {0xac00, 0xd7a3},   {0xf900, 0xfaff},
      {0xfe10, 0xfe19},   {0xfe30, 0xfe6f},   {0xff00, 0xff60},
      {0xffe0, 0xffe6},   {0x16fe0, 0x16fe4}, {0x17000, 0x18aff},
      {0x1b000, 0x1b2ff}, {0x1f300, 0x1f64f}, {0x1f680, 0x1f6ff},
      {0x1f900, 0x1f9ff}, {0x1fa70, 0x1faff}, {0x20000, 0x2fffd},
      {0x30000, 0x3fffd},
  };
  static const struct {
    uint32_t lo, hi;
  } zero[] = {
      {0x0300, 0x036f}, {0x0483, 0x0489}, {0x0591, 0x05bd}, {0x0610, 0x061a},
      {0x064b, 0x065f}, {0x0670, 0x0670}, {0x06d6, 0x06dc}, {0x06df, 0x06e4},
      {0x0e31, 0x0e31}, {0x0e34, 0x0e3a}, {0x0e47, 0x0e4e}, {0x1160, 0x11ff},
      {0x1ab0, 0x1aff}, {0x1dc0, 0x1dff}, {0x20d0, 0x20ff}, {0x302a, 0x302f},
      {0x3099, 0x309a}, {0xfe20, 0xfe2f},
  };
  if (cp < 0x300)
    return 1;
  for (size_t i = 0; i < sizeof zero / sizeof zero[0]; i++)
    if (cp >= zero[i].lo && cp <= zero[i].hi)
      return 0;
  for (size_t i = 0; i < sizeof wide / sizeof wide[0]; i++)
    if (cp >= wide[i].lo && cp <= wide[i].hi)
      return 2;
  return 1;
}

static const char hex[] = "0123456789abcdef";

size_t ms__safe_unit(const char *s, size_t n, char unit[MS__SAFE_UNIT_MAX],
                     size_t *used) {
  const unsigned char *p = (const unsigned char *)s;
  uint32_t cp;
  size_t len = ms__utf8_decode(p, n, &cp);
  if (len == 0 || cp < 0x20 || cp == 0x7f) {
    /* Not text, or a C0 control or DEL: the byte itself, in hex. */
    unit[0] = '\\';
    unit[1] = 'x';
    unit[2] = hex[p[0] >> 4];
    unit[3] = hex[p[0] & 0xfu];
    *used = 1;
    return 4;
  }
  *used = len;
  if (cp == '\\') {
    unit[0] = unit[1] = '\\';
    return 2;
  }
  if (!ms__cp_unsafe(cp)) {
    memcpy(unit, s, len);
    return len;
  }
  /* Text that acts: the code point, as C and JSON write it. */
  size_t digits = cp > 0xffffu ? 8 : 4;
  unit[0] = '\\';
  unit[1] = cp > 0xffffu ? 'U' : 'u';
  for (size_t i = 0; i < digits; i++)
    unit[2 + i] = hex[(cp >> (4 * (digits - 1 - i))) & 0xfu];
  return 2 + digits;
}

size_t ms__safe_unit_columns(const char *unit, size_t len) {
  uint32_t cp;
  if (len == 0)
    return 0;
  if (unit[0] == '\\')
    return len;
  if (ms__utf8_decode((const unsigned char *)unit, len, &cp) == 0)
    return len; /* not a unit of ms__safe_unit(): counted as bytes */
  return (size_t)ms__cp_columns(cp);
}

size_t ms__safe_next(const char *s, size_t n, size_t *at,
                     char unit[MS__SAFE_UNIT_MAX], size_t *cols) {
  size_t i = *at, used;
  if (i >= n || s[i] == '\0')
    return 0;
  /* A sequence stops at the NUL: strnlen bounds what may be read. */
  size_t avail = strnlen(s + i, n - i < 4 ? n - i : 4);
  size_t ul = ms__safe_unit(s + i, avail, unit, &used);
  *cols = ms__safe_unit_columns(unit, ul);
  *at = i + used;
  return ul;
}

size_t ms__sanitize(char *out, size_t cap, const char *s, size_t n,
                    size_t max_cols) {
  size_t o = 0, cols = 0, i = 0, ul, w;
  char unit[MS__SAFE_UNIT_MAX];
  if (cap == 0)
    return 0;
  while ((ul = ms__safe_next(s, n, &i, unit, &w)) > 0) {
    if (o + ul + 1 > cap || (max_cols != (size_t)-1 && cols + w > max_cols))
      break;
    memcpy(out + o, unit, ul);
    o += ul;
    cols += w;
  }
  out[o] = '\0';
  return cols;
}
