/*
 * strbuf.c - a growable string (see strbuf.h).
 */
#include "common/strbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memstats.h"

static int grow(ms_strbuf_t *b, size_t extra) {
  if (b->oom)
    return MS_ENOMEM;
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

int ms_strbuf_append(ms_strbuf_t *b, const char *s, size_t n) {
  int rc = grow(b, n);
  if (rc)
    return rc;
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = '\0';
  return 0;
}

int ms_strbuf_puts(ms_strbuf_t *b, const char *s) {
  return ms_strbuf_append(b, s, strlen(s));
}

int ms_strbuf_vprintf(ms_strbuf_t *b, const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (n < 0)
    return MS_EINVAL;
  int rc = grow(b, (size_t)n);
  if (rc)
    return rc;
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
  b->len += (size_t)n;
  return 0;
}

int ms_strbuf_printf(ms_strbuf_t *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = ms_strbuf_vprintf(b, fmt, ap);
  va_end(ap);
  return rc;
}

void ms_strbuf_reset(ms_strbuf_t *b) {
  b->len = 0;
  if (b->data)
    b->data[0] = '\0';
  b->oom = 0;
}

void ms_strbuf_free(ms_strbuf_t *b) {
  free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
  b->oom = 0;
}
