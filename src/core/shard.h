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

#endif
