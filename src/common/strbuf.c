/*
 * strbuf.c - a growable string (see strbuf.h).
 */
#include "common/strbuf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sanitize.h"
#include "memstats.h"

static int grow(ms__strbuf_t *b, size_t extra) {
  if (b->oom)
    return MS_ENOMEM;
  /* A size that does not fit in size_t is as impossible as one that does
   * not fit in memory. */
  if (extra > SIZE_MAX / 2 - 1 - b->len) {
    b->oom = 1;
    return MS_ENOMEM;
  }
  if (b->len + extra + 1 <= b->cap)
    return 0;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + extra + 1)
    cap *= 2;
  char *p = realloc(b->data, cap);
  if (!p) {
    b->oom = 1;
    return MS_ENOMEM;
  }
  b->data = p;
  b->cap = cap;
  return 0;
}

int ms__strbuf_append(ms__strbuf_t *b, const char *s, size_t n) {
  int rc = grow(b, n);
  if (rc)
    return rc;
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = '\0';
  return 0;
}

int ms__strbuf_puts(ms__strbuf_t *b, const char *s) {
  return ms__strbuf_append(b, s, strlen(s));
}

/* Formatted straight into the room the buffer has, and again after
 * growing it only when it did not fit: one formatting per call rather
 * than a measuring one and a writing one (memtop --once's report makes
 * hundreds of these calls, half its instructions were formatting). */
int ms__strbuf_vprintf(ms__strbuf_t *b, const char *fmt, va_list ap) {
  va_list ap2;
  if (b->oom)
    return MS_ENOMEM;
  size_t room = b->data != NULL && b->cap > b->len ? b->cap - b->len : 0;
  va_copy(ap2, ap);
  int n = vsnprintf(room > 0 ? b->data + b->len : NULL, room, fmt, ap2);
  va_end(ap2);
  if (n >= 0 && (size_t)n < room) {
    b->len += (size_t)n;
    return 0;
  }
  /* What did not fit (or failed) is taken back. */
  if (room > 0)
    b->data[b->len] = '\0';
  if (n < 0)
    return MS_EINVAL;
  int rc = grow(b, (size_t)n);
  if (rc)
    return rc;
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
  b->len += (size_t)n;
  return 0;
}

int ms__strbuf_printf(ms__strbuf_t *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = ms__strbuf_vprintf(b, fmt, ap);
  va_end(ap);
  return rc;
}

size_t ms__strbuf_put_safe(ms__strbuf_t *b, const char *s, size_t n) {
  return ms__strbuf_put_safe_col(b, s, n, 0, (size_t)-1);
}

size_t ms__strbuf_put_safe_col(ms__strbuf_t *b, const char *s, size_t n,
                               size_t min_cols, size_t max_cols) {
  size_t cols = 0, i = 0, ul, w;
  char unit[MS__SAFE_UNIT_MAX];
  while ((ul = ms__safe_next(s, n, &i, unit, &w)) > 0) {
    if (max_cols != (size_t)-1 && cols + w > max_cols)
      break;
    ms__strbuf_append(b, unit, ul);
    cols += w;
  }
  for (; cols < min_cols; cols++)
    ms__strbuf_append(b, " ", 1);
  return cols;
}

void ms__strbuf_reset(ms__strbuf_t *b) {
  b->len = 0;
  if (b->data)
    b->data[0] = '\0';
  b->oom = 0;
}

void ms__strbuf_free(ms__strbuf_t *b) {
  free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
  b->oom = 0;
}
