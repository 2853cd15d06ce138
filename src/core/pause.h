/*
 * pause.h - the GC pause ring and histogram (internal to src/core).
 */
#ifndef MS_CORE_PAUSE_H
#define MS_CORE_PAUSE_H

#include <stdint.h>

#include "memstats.h"

/* Copies the ring, counters and histogram into *snap (consistent for the
 * ring and its counters; the histogram is copied bucket by bucket, as
 * Go's). Sets the GC fields' quality. */
void ms__pause_read(ms_snapshot_t *snap);

/* A collector provider calls this once it records pauses (EnableGC). */
void ms__gc_attach(void);
/* Records one pause without marking the public API as used. */
void ms__gc_record(uint64_t start_mono_ns, uint64_t end_mono_ns, int forced);

#endif
