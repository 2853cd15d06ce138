/*
 * parse.c - strict number parsing (parse.h).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/parse.h"
#include "memstats.h"

int ms__parse_double(const char *s, double min, double max, double *out) {
  char *end;
  double v;

  if (s == NULL || *s == '\0' || out == NULL)
    return MS_EINVAL;
  /* strtod skips leading blanks and accepts "nan", "inf" and hex floats;
   * a delay is none of those, so only plain decimal notation passes. */
  if (strspn(s, "0123456789.eE+-") != strlen(s))
    return MS_EINVAL;
  errno = 0;
  v = strtod(s, &end);
  if (errno != 0 || end == s || *end != '\0' || !isfinite(v))
    return MS_EINVAL;
  if (v < min || v > max)
    return MS_EINVAL;
  *out = v;
  return 0;
}

int ms__parse_long(const char *s, long min, long max, long *out) {
  char *end;
  long v;

  if (s == NULL || *s == '\0' || out == NULL)
    return MS_EINVAL;
  /* Digits only (an optional leading '-'): strtol would also take blanks,
   * '+', and "0x" prefixes, which no one means in a PID or a count. */
  if (strspn(s + (s[0] == '-'), "0123456789") != strlen(s + (s[0] == '-')) ||
      s[s[0] == '-'] == '\0')
    return MS_EINVAL;
  errno = 0;
  v = strtol(s, &end, 10);
  if (errno != 0 || *end != '\0' || v < min || v > max)
    return MS_EINVAL;
  *out = v;
  return 0;
}
