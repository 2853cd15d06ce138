/*
 * strbuf.h - a growable string for emitters (memtop side only: the target
 * never builds text). Appending never writes past the buffer: each append
 * grows it to what it needs or, when that fails, sets oom and writes
 * nothing, so callers need not check every step.
 */
#ifndef MS_COMMON_STRBUF_H
#define MS_COMMON_STRBUF_H

#include <stdarg.h>
#include <stddef.h>

typedef struct ms__strbuf_s {
  char *data; /* NUL-terminated; NULL until the first append */
  size_t len;
  size_t cap;
  int oom; /* set once an allocation failed; appends then do nothing */
} ms__strbuf_t;

#define MS_STRBUF_INIT                                                         \
  { NULL, 0, 0, 0 }

int ms__strbuf_append(ms__strbuf_t *b, const char *s, size_t n);
int ms__strbuf_puts(ms__strbuf_t *b, const char *s);
int ms__strbuf_printf(ms__strbuf_t *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
int ms__strbuf_vprintf(ms__strbuf_t *b, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
/* Appends the safe form of s (at most n bytes, up to a NUL; see
 * sanitize.h): what every string from outside goes through before it is
 * shown. Returns the columns appended; on allocation failure b->oom is
 * set, as for every append. */
size_t ms__strbuf_put_safe(ms__strbuf_t *b, const char *s, size_t n);
/* The same, at most max_cols characters of output ((size_t)-1: no limit),
 * then padded with blanks to min_cols: a column of a table, never cut
 * inside an escape or a UTF-8 sequence (as printf's "%-16.16s" would cut
 * one). Returns the columns appended, padding included. */
size_t ms__strbuf_put_safe_col(ms__strbuf_t *b, const char *s, size_t n,
                               size_t min_cols, size_t max_cols);
void ms__strbuf_reset(ms__strbuf_t *b);
void ms__strbuf_free(ms__strbuf_t *b);

#endif
