/*
 * util.h - clocks and the library's only way to speak (internal to the
 * target side; see util.c).
 */
#ifndef MS_CORE_UTIL_H
#define MS_CORE_UTIL_H

#include <stdint.h>

/* Time helpers. */
uint64_t ms__now_mono_ns(void);
uint64_t ms__now_unix_ns(void);

/* Library-wide debug message, printed to stderr only if MEMSTATS_DEBUG=1. */
void ms__debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
