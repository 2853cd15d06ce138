/*
 * engine.h - the statistics engine inside libmemstats (internal).
 *
 * Counters live in per-thread shards and are merged on read (Go's
 * consistentHeapStats, ported: see shard.c). Off-heap classes are atomic
 * counters (Go's sysMemStat, sysstat.c). Pauses go to a ring and a
 * histogram (pause.c). ms__engine_read() (engine.c) takes the consistent
 * cut of all of it into the engine's fields of a snapshot; the whole
 * snapshot (the providers' figures, the mappings, the kernel's, the
 * identity) is composed a layer up, in src/compose. The hot path (what a
 * tracked malloc runs) is in hotpath.h, the size classes in sizeclass.h,
 * clocks and debug output in util.h. What every part feeds (the feeding
 * flags, the fork sections) is feed.h; each part's own calls are in its
 * header (shard.h, pause.h, sysstat.h), which this one includes for the
 * layers above.
 */
#ifndef MS_CORE_ENGINE_H
#define MS_CORE_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "memstats.h"
#include "core/feed.h"
#include "core/pause.h"
#include "core/shard.h"

/* The mapped-block counters (ms__track_mapped) of the last cut that
 * ms__engine_read() took: the providers' merge, which runs right after it
 * under the same reader lock, reads them here (the public snapshot has no
 * field for them). */
typedef struct ms__mapped_s {
  uint64_t alloc_usable, free_usable; /* usable bytes of such blocks */
  uint64_t alloc, free;               /* bytes mapped for them */
} ms__mapped_t;
void ms__engine_last_mapped(ms__mapped_t *out);

/* Takes the consistent cut of the shards and fills the engine's fields of
 * *snap (objects, heap span states, off-heap classes, pauses) and their
 * quality. The caller holds the reader lock; no writer waits. */
void ms__engine_read(ms_snapshot_t *snap);

/* The reader lock: ms__engine_read() and whatever a snapshot reads beside
 * it from caches of its own (the providers' samples, the mappings) run
 * with it held, one reader at a time. ms__read_trylock() returns 0 or
 * MS_EAGAIN (held elsewhere). */
void ms__read_lock(void);
int ms__read_trylock(void);
void ms__read_unlock(void);

/* memtop attach --track: the preload counts from now on, in a process
 * whose earlier blocks it never saw. Mallocs, Frees and TotalAlloc count
 * from the first such attach; HeapAlloc is estimated as inuse (the
 * allocator's in-use bytes now, -1 unknown: HeapAlloc unavailable) plus
 * what was allocated minus what was freed since, which a free of an
 * earlier block brings down as it should; HeapObjects and the size
 * classes, which need every block's allocation, are unavailable. The
 * provider is named "tracked(since attach)". Takes the reader lock. */
void ms__track_since(int64_t inuse);

/* Appends a provider name to snap->providers (once) and returns its index,
 * or -1 if the list is full: -1 is the "no provider" index every caller
 * already passes for a figure with no source, not an error code. */
int ms__snapshot_add_provider(ms_snapshot_t *snap, const char *name);

#endif
