/*
 * pause.h - the GC pause ring and histogram (internal to src/core).
 */
#ifndef MS_CORE_PAUSE_H
#define MS_CORE_PAUSE_H

#include "memstats.h"

/* Copies the ring, counters and histogram into *snap (consistent for the
 * ring and its counters; the histogram is copied bucket by bucket, as
 * Go's). Sets the GC fields' quality. */
void ms__pause_read(ms_snapshot_t *snap);

#endif
