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
 * clocks and debug output in util.h.
 */
#ifndef MS_CORE_ENGINE_H
#define MS_CORE_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "memstats.h"

/* ---- feeding flags: what the engine has been told about ----
 * The engine reports a field as exact only once something feeds it. */
#define MS__FEED_OBJECTS 0x1u           /* ms_object_alloc/free (tracking) */
#define MS__FEED_HEAP 0x2u              /* ms_heap_move */
#define MS__FEED_GC 0x4u                /* ms_gc_* or a collector provider */
#define MS__FEED_API 0x8u               /* a public accounting call was made */
#define MS__FEED_TRACKED 0x10u          /* the preload tracks every malloc */
#define MS__FEED_SYS(c) (0x100u << (c)) /* ms_sys_add(c, ...) */
unsigned ms__engine_fed(void);
/* Marks flags as fed: one load and a branch once they are, so the
 * accounting API's per-object calls may pay it on every call (inline, so
 * that an entry point outside src/core, ms_object_alloc_at's in
 * src/profile, pays what ms_object_alloc pays). */
extern unsigned ms__fed __attribute__((visibility("hidden")));
static inline void ms__feed(unsigned flags) {
  if (__builtin_expect(
          (__atomic_load_n(&ms__fed, __ATOMIC_RELAXED) & flags) != flags, 0))
    __atomic_fetch_or(&ms__fed, flags, __ATOMIC_RELAXED);
}
/* What the fork handlers write (each layer's prepare/parent/child: the
 * locks they hold across a fork, the child's flags) lives in one section,
 * "ms_fork", which agent.c (first in the library's link order) aligns to
 * a page: a forked child copies one page of the library for them, not one
 * a variable (each page of ours a child writes is a copy-on-write fault,
 * and a parent that forks again faults on it too, which a fork-heavy
 * shell's subshells pay each time). Only small variables go there; a child
 * handler that finds nothing to change writes nothing. */
#define MS__FORK_DATA __attribute__((section("ms_fork")))
/* And the code a fork child runs in the library (the fork handlers, the
 * allocation entry points, the exit path): with the hot text, which the
 * linker puts at the start of .text beside the PLT. A fork does not copy
 * the page table entries of code: each 64 KiB window of it a child runs
 * is a fault (with fault-around) in every child; spread over the library
 * they cost a subshell four or five. */
#define MS__FORK_TEXT __attribute__((section(".text.hot.ms_fork")))

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
/* A collector provider calls this once it records pauses (EnableGC). */
void ms__gc_attach(void);
/* Records one pause without marking the public API as used. */
void ms__gc_record(uint64_t start_mono_ns, uint64_t end_mono_ns, int forced);

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

/* Appends a provider name to snap->providers (once) and returns its index,
 * or -1 if the list is full: -1 is the "no provider" index every caller
 * already passes for a figure with no source, not an error code. */
int ms__snapshot_add_provider(ms_snapshot_t *snap, const char *name);

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
