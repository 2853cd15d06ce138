/*
 * engine.h - the statistics engine inside libmemstats (internal).
 *
 * Counters live in per-thread shards and are merged on read (Go's
 * consistentHeapStats, ported: see shard.c). Off-heap classes are atomic
 * counters (Go's sysMemStat, sysstat.c). Pauses go to a ring and a
 * histogram (pause.c). snapshot.c puts it all, the providers' figures and
 * the process identity into an ms_snapshot_t.
 */
#ifndef MS_CORE_ENGINE_H
#define MS_CORE_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "memstats.h"

/* ---- size classes of tracked objects ----
 * 16-byte steps up to 128 bytes, then four classes per power of two up to
 * MS__MAX_SMALL; larger objects are "large" (counted, not classed). */
#define MS__NCLASSES 61
#define MS__MAX_SMALL (1u << 20)
/* Returns the class of a size (0 .. MS__NCLASSES-1), or -1 if large.
 * Inline: it runs on every tracked malloc and free. */
static inline int ms__size_class(uint64_t size) {
  if (size <= 128)
    return size <= 8 ? 0 : (int)((size + 15) / 16);
  if (size > MS__MAX_SMALL)
    return -1;
  /* size is in (2^b, 2^(b+1)]: four classes of 2^(b-2) each. */
  int b = 63 - __builtin_clzll(size - 1);
  uint64_t off = (size - 1 - (1ull << b)) >> (b - 2);
  return 9 + (b - 7) * 4 + (int)off;
}
/* The largest size in a class. */
uint64_t ms__class_size(int cls);

/* ---- feeding flags: what the engine has been told about ----
 * The engine reports a field as exact only once something feeds it. */
#define MS__FEED_OBJECTS 0x1u /* ms_object_alloc/free (tracking) */
#define MS__FEED_HEAP 0x2u    /* ms_heap_move */
#define MS__FEED_GC 0x4u      /* ms_gc_* or a collector provider */
#define MS__FEED_API 0x8u     /* a public accounting call was made */
#define MS__FEED_TRACKED 0x10u /* the preload tracks every malloc */
#define MS__FEED_SYS(c) (0x100u << (c)) /* ms_sys_add(c, ...) */
unsigned ms__engine_fed(void);
void ms__feed(unsigned flags);
/* Initialises the engine (membarrier registration, thread-exit key). Called
 * lazily; idempotent. */
void ms__engine_init(void);
/* The preload calls this once: objects are tracked from now on. */
void ms__track_enable(void);
/* A collector provider calls this once it records pauses (EnableGC). */
void ms__gc_attach(void);
/* Records one pause without marking the public API as used. */
void ms__gc_record(uint64_t start_mono_ns, uint64_t end_mono_ns, int forced);

/* Takes the consistent cut of the shards and fills the engine's fields of
 * *snap (objects, heap span states, off-heap classes, pauses) and their
 * quality. Serialised with other readers; no writer waits. */
void ms__engine_read(ms_snapshot_t *snap);

/* The hot path used by the preload: same as ms_object_alloc/free. */
void ms__track_alloc(uint64_t size);
void ms__track_free(uint64_t size);

/* Statistics about the engine itself, for benchmarks and tests. */
typedef struct ms__engine_stats_s {
  uint64_t reads;          /* snapshots taken */
  uint64_t shards_live;    /* registered threads */
  uint64_t shards_total;   /* shards ever allocated */
  uint64_t wait_spins;     /* reader spins on writers caught mid-update */
} ms__engine_stats_t;
void ms__engine_stats(ms__engine_stats_t *out);

/* Time helpers. */
uint64_t ms__now_mono_ns(void);
uint64_t ms__now_unix_ns(void);

/* Library-wide debug message, printed to stderr only if MEMSTATS_DEBUG=1. */
void ms__debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
