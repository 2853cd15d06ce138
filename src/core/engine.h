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
/* The class of every size up to MS__CLASS_TABLE_MAX, indexed by
 * (size + 7) / 8: every class boundary up to there is a multiple of 8, so
 * one byte load replaces the arithmetic below on the common sizes. */
#define MS__CLASS_TABLE_MAX 1024u
extern const uint8_t ms__class_by8[MS__CLASS_TABLE_MAX / 8 + 1]
    __attribute__((visibility("hidden")));
/* The class of a size above 128 bytes, by arithmetic: size is in
 * (2^b, 2^(b+1)]: four classes of 2^(b-2) each. */
static inline int ms__size_class_log(uint64_t size) {
  int b = 63 - __builtin_clzll(size - 1);
  uint64_t off = (size - 1 - (1ull << b)) >> (b - 2);
  return 9 + (b - 7) * 4 + (int)off;
}
/* Returns the class of a size (0 .. MS__NCLASSES-1), or -1 if large.
 * Inline: it runs on every tracked malloc and free. */
static inline int ms__size_class(uint64_t size) {
  if (__builtin_expect(size <= MS__CLASS_TABLE_MAX, 1))
    return ms__class_by8[(size + 7) >> 3];
  if (size > MS__MAX_SMALL)
    return -1;
  return ms__size_class_log(size);
}
/* The largest size in a class. */
uint64_t ms__class_size(int cls);

/* ---- feeding flags: what the engine has been told about ----
 * The engine reports a field as exact only once something feeds it. */
#define MS__FEED_OBJECTS 0x1u           /* ms_object_alloc/free (tracking) */
#define MS__FEED_HEAP 0x2u              /* ms_heap_move */
#define MS__FEED_GC 0x4u                /* ms_gc_* or a collector provider */
#define MS__FEED_API 0x8u               /* a public accounting call was made */
#define MS__FEED_TRACKED 0x10u          /* the preload tracks every malloc */
#define MS__FEED_SYS(c) (0x100u << (c)) /* ms_sys_add(c, ...) */
unsigned ms__engine_fed(void);
void ms__feed(unsigned flags);
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
 * quality. Serialised with other readers; no writer waits. */
void ms__engine_read(ms_snapshot_t *snap);

/* ---- the hot path ----------------------------------------------------------
 * One object event (a tracked malloc or free) is a few plain stores into
 * the calling thread's shard, bracketed by the shard's sequence number; see
 * the comment at the top of shard.c for why that gives a consistent cut.
 * The layout is here so that the fast path can be inlined into the
 * preload's malloc and free (no call, one TLS address for everything). */

/* What changes together. Every member is a uint64_t so a slot can be
 * walked as an array of words (two's complement makes signed deltas work).
 */
typedef struct ms__delta_s {
  uint64_t heap[MS_SPAN__COUNT]; /* bytes per span state (NONE unused) */
  uint64_t alloc_bytes, free_bytes;
  uint64_t large_allocs, large_frees;
  uint64_t small_allocs[MS__NCLASSES];
  uint64_t small_frees[MS__NCLASSES];
  /* Blocks that are mappings of their own (glibc's mmapped chunks): their
   * usable bytes (also in alloc_bytes/free_bytes) and the bytes mapped
   * for them, allocated and freed (ms__track_mapped). */
  uint64_t mapped_alloc_usable, mapped_free_usable;
  uint64_t mapped_alloc, mapped_free;
} ms__delta_t;

typedef struct ms__shard_s {
  uint64_t seq;             /* odd while its owner writes */
  uint32_t state;           /* SHARD_LIVE, or DEAD: free to adopt */
  struct ms__shard_s *next; /* registry list; set once, before publish */
  uint64_t inflight[3];     /* global shard only: writers per gen */
  ms__delta_t stats[3] __attribute__((aligned(64)));
} __attribute__((aligned(64))) ms__shard_t;

/* Everything the library keeps per thread, in one initial-exec TLS block:
 * the hot path computes its address once. */
typedef struct ms__tls_s {
  /* This thread's shard. Never NULL: a thread without one points at
   * ms__shard_none, whose seq is odd, so the one test of the bracket sends
   * it to the slow path too. */
  ms__shard_t *shard;
  int mode;  /* 0 unregistered, 1 has a shard, 2 registering or exited */
  int guard; /* the preload's re-entry guard (see src/preload/preload.h) */
  /* The preload on jemalloc (src/preload/preload.h): this thread's
   * thread.deallocated counter once looked up, and the state that keeps a
   * signal handler's free apart from the one it interrupted. */
  uint64_t *je_freed;
  uint64_t je_nested; /* bytes freed by signal handlers inside a window */
  int je_window;      /* nonzero while a free reads the counter around */
  /* Nonzero while this thread is inside an update off the fast path (the
   * global shard, the pause ring): see ms__engine_busy_here(). */
  int busy;
  /* The heap profiler's countdown: bytes until this thread's next sample
   * (src/profile/sampler.c); the preload's malloc subtracts from it. */
  int64_t prof_left;
} ms__tls_t;
extern __thread ms__tls_t ms__tls
    __attribute__((tls_model("initial-exec"), visibility("hidden")));
extern ms__shard_t ms__shard_none __attribute__((visibility("hidden")));

/* The generation writers use, as the byte offset of its slot from the
 * start of a shard (the writer adds it to its shard pointer: no multiply),
 * with MS__GEN_FENCE or'ed in while writers must fence (no membarrier).
 * One load answers both questions. */
#define MS__GEN_FENCE 1u
#define MS__GEN_OFF(g)                                                         \
  ((uint64_t)(offsetof(ms__shard_t, stats) + (g) * sizeof(ms__delta_t)))
extern uint64_t ms__gen_word __attribute__((visibility("hidden")));

/* Nonzero if this thread is in the middle of an update of the engine's
 * counters or pause ring: it is then running a signal handler that
 * interrupted one, and a snapshot taken now would wait for that update,
 * which cannot finish before the handler returns, forever. The exit paths
 * that may run in a handler (_exit, and exit() from one) ask first. */
int ms__engine_busy_here(void);

/* The slow path: no shard yet, nested in a signal handler, large sizes. */
void ms__track_slow(uint64_t size, int is_free);

/* Records one event on this thread's shard and returns 1, or returns 0
 * without touching anything when the slow path must do it. The owner is
 * the only writer of its shard, so the counters are plain loads and
 * stores; the compiler barrier and the acquire load of the generation keep
 * them after the odd seq store, the release store keeps them before the
 * even one. */
static inline int ms__track_fast(ms__tls_t *t, uint64_t size, int is_free) {
  ms__shard_t *s = t->shard;
  uint64_t q = __atomic_load_n(&s->seq, __ATOMIC_RELAXED);
  if (__builtin_expect((q & 1) | (size > MS__CLASS_TABLE_MAX), 0))
    return 0;
  __atomic_store_n(&s->seq, q + 1, __ATOMIC_RELAXED);
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  uint64_t w = __atomic_load_n(&ms__gen_word, __ATOMIC_ACQUIRE);
  if (__builtin_expect(w & MS__GEN_FENCE, 0)) {
    /* No membarrier: the odd seq must be visible before gen is read. */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    w = __atomic_load_n(&ms__gen_word, __ATOMIC_ACQUIRE) & ~(uint64_t)1;
  }
  ms__delta_t *d = (ms__delta_t *)((char *)s + w);
  unsigned c = ms__class_by8[(size + 7) >> 3];
  if (is_free) {
    d->small_frees[c] += 1;
    d->free_bytes += size;
  } else {
    d->small_allocs[c] += 1;
    d->alloc_bytes += size;
  }
  __atomic_store_n(&s->seq, q + 2, __ATOMIC_RELEASE);
  return 1;
}

/* One tracked block that is a mapping of its own (a glibc mmapped chunk):
 * counted as an object of `usable` bytes like any other, and its `mapped`
 * bytes (the whole mapping) apart, so that a cached allocator sample can
 * be moved by what went to and came back from the OS (providers/
 * registry.c). Off the fast path: such blocks are large. */
void ms__track_mapped(uint64_t usable, uint64_t mapped, int is_free);

/* The same as ms_object_alloc/free, out of line (tests, benchmarks). */
void ms__track_alloc(uint64_t size);
void ms__track_free(uint64_t size);

/* Inline versions for the preload: the caller passes &ms__tls. */
static inline void ms__track_alloc_in(ms__tls_t *t, uint64_t size) {
  if (__builtin_expect(!ms__track_fast(t, size, 0), 0))
    ms__track_slow(size, 0);
}
static inline void ms__track_free_in(ms__tls_t *t, uint64_t size) {
  if (__builtin_expect(!ms__track_fast(t, size, 1), 0))
    ms__track_slow(size, 1);
}

/* Statistics about the engine itself, for benchmarks and tests. */
typedef struct ms__engine_stats_s {
  uint64_t reads;        /* snapshots taken */
  uint64_t shards_live;  /* registered threads */
  uint64_t shards_total; /* shards ever allocated */
  uint64_t wait_spins;   /* reader spins on writers caught mid-update */
} ms__engine_stats_t;
void ms__engine_stats(ms__engine_stats_t *out);

/* Time helpers. */
uint64_t ms__now_mono_ns(void);
uint64_t ms__now_unix_ns(void);

/* Library-wide debug message, printed to stderr only if MEMSTATS_DEBUG=1. */
void ms__debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
