/*
 * record.h - what the preload does with each block it measured: a part of
 * preload.h, which includes it at one place (after the sampler's inline
 * part and the glibc block's type); nothing else includes it.
 *
 * The entry points (malloc.c, cxx.c, preload.h's counting helpers) ask
 * ms__preload_counts() whether a call is counted at all,
 * ms__preload_glibc_kind() and ms__preload_by_counter() how the block is
 * measured, measure it, and hand it to ms__preload_record() or
 * ms__preload_record_glibc() (free's fast path on glibc:
 * ms__preload_free_glibc_fast()). These six are the whole difference
 * between the product and make bench's floors: the floor builds find
 * their own header of this name first (tests/bench/floor/preload/
 * record.h, by -iquote), so neither this file nor the entry points carry
 * a bench variant.
 */
#ifndef MS_PRELOAD_RECORD_H
#define MS_PRELOAD_RECORD_H

/* Whether blocks are measured by glibc's chunk header (MS__USABLE_GLIBC):
 * malloc and free take that path first and ask nothing else (not
 * jemalloc's modes), which the common case pays for on every call
 * otherwise. */
static inline int ms__preload_glibc_kind(void) {
  return __builtin_expect(__atomic_load_n(&ms__real.usable_kind,
                                          __ATOMIC_RELAXED) == MS__USABLE_GLIBC,
                          1);
}

/* Whether frees are measured by jemalloc's own counter
 * (ms__preload_free_by_counter, preload.h). */
static inline int ms__preload_by_counter(void) {
  return __atomic_load_n(&ms__real.free_by_counter, __ATOMIC_RELAXED);
}

/* Whether this thread's call is counted: not while it runs nested inside
 * a real C++ operator or a size lookup (the guard, preload.h), where the
 * outer hook counts the block, or nobody does. */
static inline __attribute__((always_inline)) int
ms__preload_counts(ms__tls_t *t) {
  return !ms__pl(t)->guard;
}

/* Records one tracked block p of size bytes (is_free: about to be given
 * back; p NULL when the caller has unsampled it already). This is the one
 * place every counted allocation and free passes: malloc, calloc,
 * realloc, the aligned forms and every C++ operator. */
static inline __attribute__((always_inline)) void
ms__preload_record(ms__tls_t *t, void *p, uint64_t size, int is_free,
                   int prof) {
  if (is_free) {
    if (p != NULL)
      ms__preload_unsample(p, prof);
    ms__track_free_in(t, size);
  } else if (MS__PRELOAD_PROFILER && prof) {
    /* An allocation that runs the countdown out is counted and sampled in
     * one call out of line, and the others counted as in the plain copy:
     * nothing but p lives across a call here, as in the plain copy (with
     * the count and then the sample, clang kept the size and the thread's
     * state across the engine's slow path in two more saved registers,
     * which the plain copy in the same function paid for:
     * test_hotpath_cost). */
    if (__builtin_expect((t->prof_left -= (int64_t)size) < 0, 0))
      ms__preload_alloc_sampled(t, p, size);
    else
      ms__track_alloc_in(t, size);
  } else {
    ms__track_alloc_in(t, size);
  }
}

/* Records one glibc block (ms__glibc_block): a mmapped one apart, on the
 * engine's slow path (it is large anyway), so that the OS's part of the
 * heap is known (registry.c); the others as any block. */
static inline __attribute__((always_inline)) void
ms__preload_record_glibc(ms__tls_t *t, void *p, ms__glibc_block_t b,
                         int is_free, int prof) {
  if (__builtin_expect(b.mapped != 0, 0)) {
    if (MS__PRELOAD_PROFILER && prof)
      ms__preload_mapped_prof(t, p, b, is_free);
    else
      ms__track_mapped(b.usable, b.mapped, is_free);
  } else {
    ms__preload_record(t, p, b.usable, is_free, prof);
  }
}

/* The free of glibc block b on free's fast path: recorded, returning 1;
 * or nothing done, returning 0, and then the caller records it with
 * ms__preload_record_glibc, out of line (a mapped chunk, a large block, a
 * shard this thread cannot write now). Nothing here calls out, so free
 * keeps nothing across a call of its own: every call it makes is a tail
 * call, and it saves no register. */
static inline __attribute__((always_inline)) int
ms__preload_free_glibc_fast(ms__tls_t *t, ms__glibc_block_t b) {
  return __builtin_expect(b.mapped == 0, 1) && ms__track_fast(t, b.usable, 1);
}

#endif
