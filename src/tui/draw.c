/*
 * draw.c - the helpers every screen of the live view shares (draw.h).
 */
#include <stdio.h>
#include <string.h>

#include "common/sanitize.h"
#include "emit/emit.h"
#include "memstats.h"
#include "tui/draw.h"

char *mt_draw_fmt_bytes(char *buf, size_t len, int64_t bytes, ms_quality_t q,
                        int width) {
  mt_fmt_bytes_q(buf, len, bytes, q);
  /* "~1023.9MiB" is ten columns: in a narrow column, give up the decimal
   * rather than cut the unit off. */
  char *dot = strchr(buf, '.');
  if (width > 0 && (int)strlen(buf) > width && dot != NULL && dot[1] != '\0')
    memmove(dot, dot + 2, strlen(dot + 2) + 1);
  return buf;
}

char *mt_draw_fmt_count(char *buf, size_t len, double v) {
  if (v < 0)
    snprintf(buf, len, "-");
  else if (v < 10000)
    snprintf(buf, len, "%.0f", v);
  else if (v < 1e6)
    snprintf(buf, len, "%.1fk", v / 1e3);
  else if (v < 1e9)
    snprintf(buf, len, "%.1fM", v / 1e6);
  else
    snprintf(buf, len, "%.1fG", v / 1e9);
  return buf;
}

void mt_draw_safe_name(char *out, size_t len, const char *name) {
  /* A program name is whatever bytes the program chose: it is drawn in
   * its safe form (common/sanitize.h), cut whole to the buffer. */
  ms__sanitize(out, len, name, (size_t)-1, (size_t)-1);
}

const char *mt_draw_state_mark(const mt_target_t *t) {
  switch (t->state) {
  case MT_EXITED:
    return "[exited]";
  case MT_UNREACHABLE:
    return "[unreachable]";
  case MT_CONNECTING:
    return "[connecting]";
  case MT_LIVE:
  default:
    return "";
  }
}

uint32_t mt_draw_fill(int part, int utf8) {
  /* Distinct fill characters, so the parts stay apart without colour:
   * full, dark, medium and light shade blocks, or # = . ~ in ASCII. */
  static const uint32_t u[4] = {0x2588, 0x2593, 0x2592, 0x2591};
  static const char a[4] = {'#', '=', '.', '~'};
  if (part < 0 || part > 3)
    return ' ';
  return utf8 ? u[part] : (uint32_t)a[part];
}
