/*
 * strbuf.h - a growable string for emitters (memtop side only: the target
 * never builds text).
 */
#ifndef MS_COMMON_STRBUF_H
#define MS_COMMON_STRBUF_H

#include <stdarg.h>
#include <stddef.h>

typedef struct ms_strbuf_s {
  char *data; /* NUL-terminated; NULL until the first append */
  size_t len;
  size_t cap;
  int oom; /* set once an allocation failed; appends then do nothing */
} ms_strbuf_t;

#define MS_STRBUF_INIT                                                         \
  { NULL, 0, 0, 0 }

int ms_strbuf_append(ms_strbuf_t *b, const char *s, size_t n);
int ms_strbuf_puts(ms_strbuf_t *b, const char *s);
int ms_strbuf_printf(ms_strbuf_t *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
int ms_strbuf_vprintf(ms_strbuf_t *b, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
void ms_strbuf_reset(ms_strbuf_t *b);
void ms_strbuf_free(ms_strbuf_t *b);

#endif
