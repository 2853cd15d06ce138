/*
 * hotpath.h - what a tracked malloc and free run (internal to the target
 * side): the per-thread shard's layout, the thread's state in one TLS
 * block, and the inline fast path that the preload's malloc and free call.
 * The reader's side, the cut, is in engine.h and shard.c.
 */
#ifndef MS_CORE_HOTPATH_H
#define MS_CORE_HOTPATH_H

#include <stddef.h>
#include <stdint.h>

#include "core/sizeclass.h"
#include "memstats.h"

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

/* Room the preload keeps per thread in ms__tls (its re-entry guard and its
 * jemalloc counter's state: ms__pl_tls_t, src/preload/preload.h). The
 * engine never reads it; it is here so that the hot path computes one TLS
 * address for everything. The preload checks that its state fits. */
#define MS__TLS_PRELOAD_SIZE 32

/* Everything the library keeps per thread, in one initial-exec TLS block:
 * the hot path computes its address once. */
typedef struct ms__tls_s {
  /* This thread's shard. Never NULL: a thread without one points at
   * ms__shard_none, whose seq is odd, so the one test of the bracket sends
   * it to the slow path too. */
  ms__shard_t *shard;
  int mode; /* 0 unregistered, 1 has a shard, 2 registering or exited */
  /* Nonzero while this thread is inside an update off the fast path (the
   * global shard, the pause ring): see ms__engine_busy_here(). */
  int busy;
  /* The heap profiler's countdown: bytes until this thread's next sample
   * (src/profile/sampler.c); the preload's malloc subtracts from it. */
  int64_t prof_left;
  /* The preload's, opaque here (MS__TLS_PRELOAD_SIZE). */
  uint64_t preload[MS__TLS_PRELOAD_SIZE / sizeof(uint64_t)];
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

/* The slow path: no shard yet, nested in a signal handler, large sizes
 * (over MS__MAX_SMALL). */
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
  /* Every class has the fast path (ms__size_class_small): the table up
   * to 1 KiB, a few instructions of arithmetic above, so no small block
   * goes to the slow path. The class first, in its own branch: a block up
   * to 1 KiB then pays one size test; with the class worked out after the
   * bracket opens it would pay a second (test_hotpath_cost's loops count
   * them). */
  uint64_t c; /* a word: indexes the counters with no widening */
  if (__builtin_expect(size > MS__CLASS_TABLE_MAX, 0)) {
    if (size > MS__MAX_SMALL)
      return 0;
    c = (uint64_t)ms__size_class_log(size);
  } else {
    c = ms__class_by8[(size + 7) >> 3];
  }
  if (__builtin_expect(q & 1, 0))
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

/* Inline versions for the preload: the caller passes &ms__tls. */
static inline void ms__track_alloc_in(ms__tls_t *t, uint64_t size) {
  if (__builtin_expect(!ms__track_fast(t, size, 0), 0))
    ms__track_slow(size, 0);
}
static inline void ms__track_free_in(ms__tls_t *t, uint64_t size) {
  if (__builtin_expect(!ms__track_fast(t, size, 1), 0))
    ms__track_slow(size, 1);
}

#endif
