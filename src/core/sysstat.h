/*
 * sysstat.h - off-heap counters (internal to src/core).
 */
#ifndef MS_CORE_SYSSTAT_H
#define MS_CORE_SYSSTAT_H

#include <stdint.h>

#include "memstats.h"

void ms__sys_read(int64_t sys[MS_SYS__COUNT], int64_t inuse[MS_SYS__COUNT]);

/* The library's own off-heap memory (the profiler's bucket table): like
 * ms_sys_add(cls, delta, 0), without marking the public API as used. */
void ms__sys_add_internal(ms_sys_class_t cls, int64_t sys_delta);

#endif
