/*
 * shard.h - the consistent per-thread counters (internal to src/core).
 */
#ifndef MS_CORE_SHARD_H
#define MS_CORE_SHARD_H

#include <stdint.h>

#include "core/hotpath.h"

/* The totals of one consistent cut. */
typedef struct ms__shard_totals_s {
  int64_t heap[MS_SPAN__COUNT]; /* bytes per span state */
  uint64_t alloc_bytes, free_bytes;
  uint64_t mallocs, frees; /* all objects, small and large */
  uint64_t class_allocs[MS__NCLASSES], class_frees[MS__NCLASSES];
  /* Blocks mapped on their own (hotpath.h, ms__track_mapped). */
  uint64_t mapped_alloc_usable, mapped_free_usable;
  uint64_t mapped_alloc, mapped_free;
} ms__shard_totals_t;

/* Takes the cut. The caller holds the reader lock (engine.h). */
void ms__shards_read(ms__shard_totals_t *t);
/* The provider name ms__track_off() made, or NULL if tracking is not off. */
const char *ms__track_off_reason(void);
/* Called in a fork child (with the reader lock held). */
void ms__shards_after_fork_child(void);

/* Initialises the engine (membarrier registration, thread-exit key). Called
 * lazily; idempotent. */
void ms__engine_init(void);

/* The preload calls this once: objects are tracked from now on. */
void ms__track_enable(void);
/* Or this, when its malloc is not the one the program calls (an allocator
 * preloaded ahead of it, or defined by the program itself): nothing is
 * tracked, and the snapshot's provider list says so and why, as the
 * provider "tracked(off: <why>)". why is copied (bounded, sanitised). */
void ms__track_off(const char *why);

/* Nonzero if this thread is in the middle of an update of the engine's
 * counters or pause ring: it is then running a signal handler that
 * interrupted one, and a snapshot taken now would wait for that update,
 * which cannot finish before the handler returns, forever. The exit paths
 * that may run in a handler (_exit, and exit() from one) ask first. */
int ms__engine_busy_here(void);

/* The same as ms_object_alloc/free, out of line (tests, benchmarks). */
void ms__track_alloc(uint64_t size);
void ms__track_free(uint64_t size);

/* Statistics about the engine itself, for benchmarks and tests. */
typedef struct ms__engine_stats_s {
  uint64_t reads;        /* snapshots taken */
  uint64_t shards_live;  /* registered threads */
  uint64_t shards_total; /* shards ever allocated */
  uint64_t wait_spins;   /* reader spins on writers caught mid-update */
} ms__engine_stats_t;
void ms__engine_stats(ms__engine_stats_t *out);

#endif
