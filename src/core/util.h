/*
 * util.h - clocks, the page size, the one mincore walker and the
 * library's only way to speak (internal to the target side; see util.c).
 */
#ifndef MS_CORE_UTIL_H
#define MS_CORE_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* Time helpers. */
uint64_t ms__now_mono_ns(void);
uint64_t ms__now_unix_ns(void);

/* The system's page size, asked once (4096 if sysconf cannot tell);
 * async-signal-safe after the first call, allocates nothing. */
size_t ms__page_size(void);

/* The resident bytes of [start, end) by mincore, in steps of 256 MiB (one
 * static page vector: one caller at a time, the snapshot's reader lock). A
 * step no longer mapped (ENOMEM) counts neither as resident nor as
 * unbacked: *mapped (if not NULL) gets only the bytes mincore could see.
 * Never touches the memory itself. Every page count of the target side
 * (the mappings, glibc's heaps, the library's own, the madvised ranges)
 * goes through it. */
uint64_t ms__resident(uintptr_t start, uintptr_t end, uint64_t *mapped);

/* Library-wide debug message, printed to stderr only if MEMSTATS_DEBUG=1. */
void ms__debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
