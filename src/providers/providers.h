/*
 * providers.h - where the figures come from: the registry's interface to
 * the layers above (src/compose, src/agent). A provider itself is a table
 * of functions (provider_int.h, internal to src/providers).
 *
 * A provider knows one allocator (glibc, jemalloc, ...) or source. It is
 * detected at run time, and sampled from the reader's thread at its own
 * cadence; its last sample is cached and merged into every snapshot.
 * See src/providers/.
 */
#ifndef MS_PROVIDERS_PROVIDERS_H
#define MS_PROVIDERS_PROVIDERS_H

#include <stdint.h>

#include "memstats.h"

/* Looks for the allocators and the collector in the process (once for
 * the allocators; the collector again whenever a library was loaded).
 * Called by ms_snapshot_read() with the reader lock held (core/engine.h),
 * before the engine's figures are read: what the lookups allocate (a failed
 * dlsym leaves glibc's dlerror state on the heap) is then in the same
 * snapshot's tracked figures as in the allocator's own. */
void ms__providers_detect(void);

/* Fills the providers' figures (cached or fresh, by each provider's
 * cadence) into *snap after the engine's, appending their names to
 * snap->providers and setting the quality and source of each field they
 * give. With cached_only no provider is sampled: the samples cached so far
 * are merged whatever their age (ms__snapshot_read_opts, MS__READ_CACHED).
 * Called by ms_snapshot_read() with the reader lock held. */
void ms__providers_fill(ms_snapshot_t *snap, int cached_only);

/* The number of fields the last ms__providers_fill() left exact although
 * they came from a sample cached from an earlier snapshot and the tracked
 * heap has moved since (0 when all is well: see ms__snapshot_check). */
unsigned ms__providers_stale_exact(void);

/* 1 if the chosen malloc provider cannot tell backed memory from
 * committed memory (ms__provider_t.backing_unknown): its heap's backed
 * part is then measured from its mappings (ms__offheap_fill's
 * heap_backing, src/compose/offheap.c). */
int ms__providers_backing_unknown(void);

/* How the kernel's view can bound the chosen malloc provider's heap
 * figures in the last ms__providers_fill(): MS__PV_VIEW_ARENAS if that
 * provider owns the heap fields and its heaps are glibc's (their backed
 * part is at most the resident pages of [heap] and the arena heaps, plus
 * its mapped blocks), else 0. *sampled_ns: when its cached sample was
 * taken (CLOCK_MONOTONIC); *blocks: the bytes of its blocks mapped on
 * their own now (the sample's, moved by the tracked mapped blocks since). */
#define MS__PV_VIEW_ARENAS 0x1u
unsigned ms__providers_kernel_view(uint64_t *sampled_ns, uint64_t *blocks);

/* Forgets the cached samples, so that the next snapshot samples every
 * provider afresh, a provider waiting out a failure back-off included (one
 * more try; if it fails, the back-off goes on from where it was, the
 * count of failures in a row is kept). The final snapshot at exit
 * (src/agent/final_send.c) calls it, with the reader lock held: figures from up
 * to a cadence ago must not be merged with the engine's figures of the
 * program's last moment. */
void ms__providers_expire(void);

#endif
