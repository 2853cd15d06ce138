/*
 * sysstat.h - off-heap counters (internal to src/core).
 */
#ifndef MS_CORE_SYSSTAT_H
#define MS_CORE_SYSSTAT_H

#include <stdint.h>

#include "memstats.h"

void ms__sys_read(int64_t sys[MS_SYS__COUNT], int64_t inuse[MS_SYS__COUNT]);

#endif
