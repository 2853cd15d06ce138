/*
 * format.c - how single figures are written: IEC byte sizes, durations,
 * fields with their quality marks, Go's float64 JSON form and JSON strings.
 * Every emitter formats through these, so a figure looks the same in the
 * one-line summary, the report and the live view.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fields.h"
#include "common/sanitize.h"
#include "emit/emit.h"

/* ------------------------------------------------------------------------
 * Byte sizes
 * ------------------------------------------------------------------------ */

static const char *const iec_units[] = {"B",   "KiB", "MiB", "GiB",
                                        "TiB", "PiB", "EiB"};

/* snprintf(buf, len, "%s%s", a, b) (len > 0), and u's decimal digits
 * into d (21 bytes): without printf's machinery, as a report formats a
 * hundred figures and these were half of `memtop --once`'s formatting
 * instructions. */
static void cat2(char *buf, size_t len, const char *a, const char *b) {
  size_t n = 0;
  for (; *a != '\0' && n + 1 < len; a++)
    buf[n++] = *a;
  for (; *b != '\0' && n + 1 < len; b++)
    buf[n++] = *b;
  buf[n] = '\0';
}

static const char *digits_of(char d[21], uint64_t u) {
  char *p = d + 20;
  *p = '\0';
  do
    *--p = (char)('0' + u % 10);
  while ((u /= 10) != 0);
  return p;
}

/* The magnitude of a signed value, defined for INT64_MIN too. */
static uint64_t magnitude(int64_t v) {
  return v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
}

/* Rounds n / 2^shift to tenths, half to even (as printf's "%.1f" rounds the
 * exact value), in 128-bit integers so that no size loses precision. */
static uint64_t tenths_of(uint64_t n, unsigned shift) {
  unsigned __int128 x = (unsigned __int128)n * 10u;
  if (shift == 0)
    return (uint64_t)x;
  unsigned __int128 q = x >> shift;
  unsigned __int128 r = x - (q << shift);
  unsigned __int128 half = (unsigned __int128)1 << (shift - 1);
  if (r > half || (r == half && (q & 1u)))
    q++;
  return (uint64_t)q;
}

char *mt_fmt_iec(char *buf, size_t len, int64_t bytes) {
  if (!buf || len == 0)
    return buf;
  uint64_t n = magnitude(bytes);
  /* The unit is chosen after rounding, so that 1 GiB - 1 byte reads
   * "1.0GiB", never "1024.0MiB": the figure always stays below 1024. */
  unsigned k = 0;
  uint64_t t = n * 10u; /* plain bytes: whole numbers, and n < 1024 here */
  if (n >= 1024u) {
    k = 1;
    while (k + 1 < sizeof iec_units / sizeof iec_units[0] &&
           tenths_of(n, 10 * k) >= 10240u)
      k++;
    t = tenths_of(n, 10 * k);
  }
  /* "%s%" PRIu64 ".%u%s": the sign, the whole part, the tenth, the unit. */
  char d[21], num[48], *p = num;
  const char *w = digits_of(d, t / 10);
  if (bytes < 0)
    *p++ = '-';
  while (*w != '\0')
    *p++ = *w++;
  *p++ = '.';
  *p++ = (char)('0' + t % 10);
  *p = '\0';
  cat2(buf, len, num, iec_units[k]);
  return buf;
}

const char *mt_quality_mark(ms_quality_t q) {
  return q == MS_Q_ESTIMATED ? "~" : "";
}

char *mt_fmt_bytes_q(char *buf, size_t len, int64_t bytes, ms_quality_t q) {
  if (!buf || len == 0)
    return buf;
  if (q == MS_Q_EXACT)
    return mt_fmt_iec(buf, len, bytes);
  if (q == MS_Q_ESTIMATED && len > 1) {
    char num[48];
    snprintf(buf, len, "%s%s", mt_quality_mark(q),
             mt_fmt_iec(num, sizeof num, bytes));
    return buf;
  }
  /* Unavailable, or a quality we do not know: show no number. */
  snprintf(buf, len, "-");
  return buf;
}

/* ------------------------------------------------------------------------
 * Durations
 * ------------------------------------------------------------------------ */

char *mt_fmt_utc(char *buf, size_t len, uint64_t unix_ns) {
  uint64_t secs = unix_ns / 1000000000u, day = secs % 86400u;
  /* The civil date of a day count (days since 1970-01-01), in eras of 400
   * years that begin on 0000-03-01 (H. Hinnant's civil_from_days). */
  uint64_t z = secs / 86400u + 719468u, era = z / 146097u;
  unsigned doe = (unsigned)(z - era * 146097u);
  unsigned yoe = (doe - doe / 1460u + doe / 36524u - doe / 146096u) / 365u;
  unsigned doy = doe - (365u * yoe + yoe / 4u - yoe / 100u);
  unsigned mp = (5u * doy + 2u) / 153u;
  unsigned mday = doy - (153u * mp + 2u) / 5u + 1u;
  unsigned mon = mp < 10u ? mp + 3u : mp - 9u;
  uint64_t year = era * 400u + yoe + (mon <= 2u);

  if (buf == NULL || len == 0)
    return buf;
  snprintf(buf, len, "%" PRIu64 "-%02u-%02u %02u:%02u:%02u UTC", year, mon,
           mday, (unsigned)(day / 3600u), (unsigned)(day / 60u % 60u),
           (unsigned)(day % 60u));
  return buf;
}

char *mt_fmt_duration(char *buf, size_t len, int64_t ns) {
  if (!buf || len == 0)
    return buf;
  const char *sign = ns < 0 ? "-" : "";
  uint64_t n = magnitude(ns);
  static const struct {
    uint64_t div;
    const char *unit;
  } small[] = {{1000u, "us"}, {1000000u, "ms"}, {1000000000u, "s"}};
  if (n < 1000u) {
    snprintf(buf, len, "%s%" PRIu64 "ns", sign, n);
    return buf;
  }
  /* Below a minute: one decimal, unit chosen after rounding so the figure
   * stays below 1000 ("999.96us" reads "1.0ms"). */
  for (size_t i = 0; i < sizeof small / sizeof small[0]; i++) {
    uint64_t t = (n / small[i].div) * 10u +
                 ((n % small[i].div) * 10u + small[i].div / 2) / small[i].div;
    if (t < 10000u && (small[i].div < 1000000000u || t < 600u)) {
      snprintf(buf, len, "%s%" PRIu64 ".%u%s", sign, t / 10, (unsigned)(t % 10),
               small[i].unit);
      return buf;
    }
  }
  /* A minute and more: two whole units, as uptime-style tools do. */
  uint64_t s = (n + 500000000u) / 1000000000u;
  if (s < 3600u)
    snprintf(buf, len, "%s%" PRIu64 "m%02us", sign, s / 60, (unsigned)(s % 60));
  else if (s < 86400u)
    snprintf(buf, len, "%s%" PRIu64 "h%02um", sign, s / 3600,
             (unsigned)(s % 3600 / 60));
  else
    snprintf(buf, len, "%s%" PRIu64 "d%02uh", sign, s / 86400,
             (unsigned)(s % 86400 / 3600));
  return buf;
}

/* ------------------------------------------------------------------------
 * A field as shown to people
 * ------------------------------------------------------------------------ */

char *mt_fmt_field(char *buf, size_t len, const ms_snapshot_t *s,
                   ms_field_t f) {
  if (!buf || len == 0)
    return buf;
  buf[0] = '\0';
  if (!s || (unsigned)f >= (unsigned)MS_F__COUNT)
    return buf;
  const ms__field_info_t *fi = &ms__fields[f];
  if (fi->unit == MS__UNIT_ARRAY)
    return buf;
  ms_quality_t q = ms__field_quality(s, f);
  if (q == MS_Q_UNAVAILABLE) {
    snprintf(buf, len, "-");
    return buf;
  }
  const char *mark = mt_quality_mark(q);
  uint64_t u = ms__field_u64(s, f);
  char tmp[48];
  switch (fi->unit) {
  case MS__UNIT_BYTES:
    cat2(buf, len, mark,
         mt_fmt_iec(tmp, sizeof tmp, u > INT64_MAX ? INT64_MAX : (int64_t)u));
    break;
  case MS__UNIT_COUNT:
    cat2(buf, len, mark, digits_of(tmp, u));
    break;
  case MS__UNIT_NS:
    snprintf(buf, len, "%s%s", mark,
             mt_fmt_duration(tmp, sizeof tmp,
                             u > INT64_MAX ? INT64_MAX : (int64_t)u));
    break;
  case MS__UNIT_UNIX_NS:
    /* Relative to the snapshot, not to "now", so that a report says the
     * same thing whenever it is printed. */
    if (u == 0)
      snprintf(buf, len, "%snever", mark);
    else if (s->time_unix_ns >= u)
      snprintf(buf, len, "%s%s ago", mark,
               mt_fmt_duration(tmp, sizeof tmp,
                               (int64_t)(s->time_unix_ns - u > INT64_MAX
                                             ? INT64_MAX
                                             : s->time_unix_ns - u)));
    else
      snprintf(buf, len, "%s%s after", mark,
               mt_fmt_duration(tmp, sizeof tmp,
                               (int64_t)(u - s->time_unix_ns > INT64_MAX
                                             ? INT64_MAX
                                             : u - s->time_unix_ns)));
    break;
  case MS__UNIT_RATIO:
    snprintf(buf, len, "%s%.2f%%", mark, ms__field_double(s, f) * 100.0);
    break;
  case MS__UNIT_BOOL:
    snprintf(buf, len, "%s%s", mark, u ? "yes" : "no");
    break;
  case MS__UNIT_ARRAY:
    break;
  }
  return buf;
}

/* ------------------------------------------------------------------------
 * Go's float64 JSON form
 * ------------------------------------------------------------------------ */

/* The shortest decimal that reads back as v (v finite and > 0): its digits
 * (no trailing zeros) and the exponent of the first digit, so that
 * v == 0.d1d2d3... * 10^(exp10+1). Among the candidates of the shortest
 * length the one nearest v wins, as in Go's strconv: printf's correctly
 * rounded "%.*e" is the nearest, and its neighbours one unit away are tried
 * only for the rare doubles (powers of two) whose rounding interval is
 * lopsided. */
static void shortest_digits(double v, char digits[24], int *exp10) {
  char tmp[40];
  for (int p = 1; p <= 17; p++) {
    snprintf(tmp, sizeof tmp, "%.*e", p - 1, v);
    /* tmp is "d.ddde[+-]xx": gather the digits and the exponent. */
    uint64_t m = 0;
    const char *c = tmp;
    for (; *c && *c != 'e'; c++)
      if (*c >= '0' && *c <= '9')
        m = m * 10u + (uint64_t)(*c - '0');
    int e = *c == 'e' ? atoi(c + 1) : 0;
    int scale = e - (p - 1); /* v ~= m * 10^scale */
    uint64_t cands[3] = {m, m - 1, m + 1};
    for (int i = 0; i < 3; i++) {
      if (cands[i] == 0)
        continue;
      char back[48];
      snprintf(back, sizeof back, "%" PRIu64 "e%d", cands[i], scale);
      if (strtod(back, NULL) != v)
        continue;
      int n = snprintf(digits, 24, "%" PRIu64, cands[i]);
      *exp10 = scale + n - 1;
      while (n > 1 && digits[n - 1] == '0')
        digits[--n] = '\0';
      return;
    }
  }
  /* Seventeen significant digits always round-trip a double, so the loop
   * has returned by now; this keeps the function total all the same. */
  snprintf(tmp, sizeof tmp, "%.16e", v);
  int n = 0;
  const char *c = tmp;
  for (; *c && *c != 'e'; c++)
    if (*c >= '0' && *c <= '9' && n < 23)
      digits[n++] = *c;
  digits[n] = '\0';
  *exp10 = *c == 'e' ? atoi(c + 1) : 0;
}

char *mt_fmt_go_float(char *buf, size_t len, double v) {
  if (!buf || len == 0)
    return buf;
  if (isnan(v) || isinf(v)) {
    snprintf(buf, len, "null");
    return buf;
  }
  char out[MT_GO_FLOAT_MAX + 16];
  size_t o = 0;
  if (__builtin_signbit(v)) {
    out[o++] = '-';
    v = -v;
  }
  if (v == 0) {
    out[o++] = '0';
    out[o] = '\0';
    snprintf(buf, len, "%s", out);
    return buf;
  }
  char d[24];
  int e;
  shortest_digits(v, d, &e);
  int nd = (int)strlen(d);
  if (v < 1e-6 || v >= 1e21) {
    /* Go: strconv 'e' with the shortest digits ("1.5e-07"), then the
     * exponent's leading zero dropped when negative ("1.5e-7"). */
    out[o++] = d[0];
    if (nd > 1) {
      out[o++] = '.';
      for (int i = 1; i < nd; i++)
        out[o++] = d[i];
    }
    int ae = e < 0 ? -e : e;
    /* At most "e-324" after at most 19 characters: it fits, but the step
     * is clamped like every other, never trusted. */
    int w = snprintf(out + o, sizeof out - o, e < 0 ? "e-%d" : "e+%02d", ae);
    if (w > 0)
      o += (size_t)w < sizeof out - o ? (size_t)w : sizeof out - o - 1;
  } else if (e >= 0) {
    /* 'f' with the point after digit e+1; pad the integer part with zeros
     * when the digits run out before it. */
    for (int i = 0; i <= e; i++)
      out[o++] = i < nd ? d[i] : '0';
    if (nd > e + 1) {
      out[o++] = '.';
      for (int i = e + 1; i < nd; i++)
        out[o++] = d[i];
    }
  } else {
    out[o++] = '0';
    out[o++] = '.';
    for (int i = 0; i < -e - 1; i++)
      out[o++] = '0';
    for (int i = 0; i < nd; i++)
      out[o++] = d[i];
  }
  out[o] = '\0';
  snprintf(buf, len, "%s", out);
  return buf;
}

/* ------------------------------------------------------------------------
 * JSON strings
 * ------------------------------------------------------------------------ */

int mt_json_string(ms__strbuf_t *out, const char *s, size_t n) {
  if (!out || (!s && n))
    return MS_EINVAL;
  const unsigned char *p = (const unsigned char *)s;
  ms__strbuf_append(out, "\"", 1);
  size_t run = 0; /* bytes copied as they are, flushed in one append */
  for (size_t i = 0; i < n;) {
    unsigned char c = p[i];
    const char *esc = NULL;
    char ubuf[16];
    uint32_t cp = c;
    size_t ul = c >= 0x80 ? ms__utf8_decode(p + i, n - i, &cp) : 1;
    if (c == '"')
      esc = "\\\"";
    else if (c == '\\')
      esc = "\\\\";
    else if (c == '\n')
      esc = "\\n";
    else if (c == '\r')
      esc = "\\r";
    else if (c == '\t')
      esc = "\\t";
    else if (c == '\b')
      esc = "\\b";
    else if (c == '\f')
      esc = "\\f";
    else if (c < 0x20) {
      snprintf(ubuf, sizeof ubuf, "\\u%04x", c);
      esc = ubuf;
    } else if (ul == 0) {
      esc = "\\ufffd";
    } else if (ms__cp_unsafe(cp)) {
      /* DEL, C1 controls, bidi controls, invisible format characters:
       * still the same string to a JSON reader, but never raw bytes that
       * a terminal showing the JSON would act on. Past the BMP as a
       * surrogate pair, as JSON spells it. */
      if (cp > 0xffffu)
        snprintf(ubuf, sizeof ubuf, "\\u%04x\\u%04x",
                 0xd800u + ((cp - 0x10000u) >> 10),
                 0xdc00u + ((cp - 0x10000u) & 0x3ffu));
      else
        snprintf(ubuf, sizeof ubuf, "\\u%04x", cp);
      esc = ubuf;
    }
    if (!esc) {
      run += ul;
      i += ul;
      continue;
    }
    if (run)
      ms__strbuf_append(out, s + i - run, run);
    run = 0;
    ms__strbuf_puts(out, esc);
    i += ul ? ul : 1;
  }
  if (run)
    ms__strbuf_append(out, s + n - run, run);
  ms__strbuf_append(out, "\"", 1);
  return out->oom ? MS_ENOMEM : 0;
}

/* ------------------------------------------------------------------------
 * The unbacked parts of the off-heap classes
 * ------------------------------------------------------------------------ */

ms_quality_t mt_mspan_released(const ms_snapshot_t *s, uint64_t *v) {
  ms_quality_t q = ms__quality_worst(
      ms__field_quality(s, MS_F_OFF_HEAP_RELEASED),
      ms__quality_worst(ms__field_quality(s, MS_F_STACK_RELEASED),
                        ms__field_quality(s, MS_F_OTHER_RELEASED)));
  uint64_t parts = s->stack_released + s->other_released;
  *v = 0;
  if (q == MS_Q_UNAVAILABLE || parts < s->stack_released ||
      parts > s->off_heap_released)
    return MS_Q_UNAVAILABLE;
  *v = s->off_heap_released - parts;
  return q;
}

int mt_off_heap_outside(const ms_snapshot_t *s) {
  return ms__field_known(s, MS_F_OFF_HEAP_RELEASED) &&
         !ms__field_known(s, MS_F_OTHER_RELEASED);
}

int64_t mt_self_outside(const ms_snapshot_t *s) {
  if (!ms__field_known(s, MS_F_MEMSTATS_SELF))
    return 0;
  uint64_t buck = ms__field_known(s, MS_F_BUCK_HASH_SYS) ? s->buck_hash_sys : 0;
  uint64_t v = s->memstats_self > buck ? s->memstats_self - buck : 0;
  return v > INT64_MAX ? INT64_MAX : (int64_t)v;
}

void mt_pauses(const ms_snapshot_t *s, mt_pauses_t *out) {
  out->p50 = out->p99 = out->max = -1;
  out->q_p50 = out->q_p99 = out->q_max = MS_Q_UNAVAILABLE;
  ms_quality_t hq = ms__field_quality(s, MS_F_PAUSE_HIST);
  if (hq != MS_Q_UNAVAILABLE && ms_pause_hist_total(&s->pause_hist) > 0) {
    out->p50 = ms_pause_hist_quantile(&s->pause_hist, 0.50);
    out->p99 = ms_pause_hist_quantile(&s->pause_hist, 0.99);
    out->max = ms_pause_hist_quantile(&s->pause_hist, 1.0);
    out->q_p50 = out->q_p99 = out->q_max = hq;
  }
  if (!ms__field_known(s, MS_F_PAUSE_NS) || s->num_gc == 0 ||
      (s->num_gc > MS_PAUSE_RING && out->max >= 0))
    return;
  uint32_t n = s->num_gc < MS_PAUSE_RING ? s->num_gc : MS_PAUSE_RING;
  uint64_t ring_max = 0;
  for (uint32_t i = 0; i < n; i++) {
    uint64_t v =
        s->pause_ns[(s->num_gc + MS_PAUSE_RING - 1 - i) % MS_PAUSE_RING];
    if (v > ring_max)
      ring_max = v;
  }
  out->max = ring_max > INT64_MAX ? INT64_MAX : (int64_t)ring_max;
  out->q_max = ms__field_quality(s, MS_F_PAUSE_NS);
  if (out->p50 > out->max)
    out->p50 = out->max;
  if (out->p99 > out->max)
    out->p99 = out->max;
}
