/*
 * malloc.c - the C allocation functions of libmemstats-preload.so.
 *
 * Each one forwards to the next allocator and counts the block by its
 * usable size: ms__track_alloc(usable) after a successful allocation,
 * ms__track_free(usable) before the block is released. The hot path is a
 * function-pointer call, one malloc_usable_size and a few plain stores into
 * this thread's shard: no lock, no allocation, no system call.
 *
 * Semantics follow the next allocator, not glibc's documentation: whatever
 * it returns is returned unchanged (errno included), and only what really
 * happened is counted. realloc counts as one free and one malloc;
 * realloc(NULL, n) is a malloc; realloc(p, 0) that returns NULL has freed p
 * (glibc and jemalloc's default), one that returns a block has moved it.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "core/util.h"
#include "preload/preload.h"

/* The exported names, declared here once (glibc's headers declare most of
 * them without our visibility attribute). */
MS__PRELOAD_API void *malloc(size_t size);
MS__PRELOAD_API void free(void *p);
MS__PRELOAD_API void *calloc(size_t n, size_t size);
MS__PRELOAD_API void *realloc(void *p, size_t size);
MS__PRELOAD_API void *reallocarray(void *p, size_t n, size_t size);
MS__PRELOAD_API int posix_memalign(void **out, size_t align, size_t size);
MS__PRELOAD_API void *aligned_alloc(size_t align, size_t size);
MS__PRELOAD_API void *memalign(size_t align, size_t size);
MS__PRELOAD_API void *valloc(size_t size);
MS__PRELOAD_API void *pvalloc(size_t size);
MS__PRELOAD_API size_t malloc_usable_size(void *p);

/* An aligned block from the bootstrap buffer, with malloc's errno. */
MS__FORK_TEXT static void *boot(size_t size, size_t align) {
  void *p = ms__bootstrap_alloc(size, align);
  if (!p)
    errno = ENOMEM;
  return p;
}

/* ---- malloc, free, calloc ------------------------------------------------*/

/* Each entry point is an always-inline body with a constant last argument
 * prof, instantiated twice (MS__PL_COPIES, preload.h): with
 * MEMSTATS_PROFILE_RATE=0 the plain copy runs, which has no profiler in
 * it; the profiling copy samples and unsamples. */

/* malloc on glibc: nothing but the block lives across the real call. */
static inline __attribute__((always_inline)) void *malloc_glibc_in(size_t size,
                                                                   int prof) {
  void *p = ms__real.malloc(size);
  ms__tls_t *t = &ms__tls;
  if (__builtin_expect(p != NULL, 1) && ms__preload_counts(t))
    ms__preload_record_glibc(t, p, ms__glibc_block(p), 0, prof);
  return p;
}

/* malloc on an allocator whose blocks glibc's chunk header does not
 * measure. */
static inline __attribute__((always_inline)) void *
malloc_measured_in(size_t size, int prof) {
  void *p = ms__real.malloc(size);
  ms__preload_count_alloc_n(p, size, prof);
  return p;
}

static inline __attribute__((always_inline)) void *malloc_in(size_t size,
                                                             int prof) {
  if (ms__preload_glibc_kind())
    return malloc_glibc_in(size, prof);
  return malloc_measured_in(size, prof);
}

/* malloc when the state is neither READY nor PROF: the next allocator is
 * looked up (and the state read again), or the bootstrap buffer serves. */
MS__FORK_TEXT static __attribute__((noinline)) void *malloc_other(size_t size) {
  int m = ms__preload_mode();
  if (m == MS__PL_BOOT)
    return boot(size, 16);
  return MS__PL_COPIES(m == MS__PL_PROF, malloc_in, size);
}

/* malloc on an allocator whose blocks glibc's chunk header does not
 * measure: its two copies each a function of its own, so that the
 * registers they keep across the real call (the size among them) are not
 * saved on glibc's path, and each is laid out for itself (in one function
 * with the plain copy, the profiling copy ran 1.7 instructions a pair
 * more than its countdown and test on jemalloc: bench_preload random). */
MS__FORK_TEXT static __attribute__((noinline)) void *
malloc_by_kind(size_t size) {
  return malloc_measured_in(size, 0);
}
MS__FORK_TEXT static __attribute__((noinline)) void *
malloc_by_kind_prof(size_t size) {
  return malloc_measured_in(size, 1);
}

/* The two copies of malloc on glibc, each a function of its own, reached
 * by a tail call before anything is saved: each saves what it needs and
 * no more (inline in one function, clang's profiling copy took two more
 * registers than the plain one, and the plain copy saved them too:
 * test_hotpath_cost). */
MS__FORK_TEXT static __attribute__((noinline)) void *malloc_glibc(size_t size) {
  return malloc_glibc_in(size, 0);
}
MS__FORK_TEXT static __attribute__((noinline)) void *
malloc_glibc_prof(size_t size) {
  return malloc_glibc_in(size, 1);
}

/* calloc's copy for the word the entry points start with (below). */
MS__FORK_TEXT static __attribute__((noinline)) void *calloc_other(size_t n,
                                                                  size_t size);

/* The copies malloc and calloc run, as ms__malloc_gate_change last set
 * them (preload.h): in the fork section, as the state is, since the fork
 * child's handler writes them. Until the allocator is known, the copies
 * that look it up. */
typedef void *malloc_fn(size_t);
typedef void *calloc_fn(size_t, size_t);
static malloc_fn *malloc_impl MS__FORK_DATA = malloc_other;
static calloc_fn *calloc_impl MS__FORK_DATA = calloc_other;

/* The body of malloc, inlined both into the exported function and into
 * the internal one that the rest of the preload calls without going
 * through the PLT: one indirect jump to the copy the state and the kind
 * ask for, before anything is saved (ms__malloc_gate_change). It was the
 * kind and the state read and compared one by one, three instructions
 * more at MEMSTATS_PROFILE_RATE=0 and five at the default rate on glibc
 * (test_hotpath_cost). */
static inline __attribute__((always_inline)) void *malloc_body(size_t size) {
  return __atomic_load_n(&malloc_impl, __ATOMIC_ACQUIRE)(size);
}

/* free on an allocator that counts what it frees (jemalloc): its own
 * function, so that the registers it needs are not saved on every other
 * allocator's free; reached by a tail call. */
static inline __attribute__((always_inline)) void free_by_counter_in(void *p,
                                                                     int prof) {
  ms__tls_t *t = &ms__tls;
  if (ms__preload_counts(t) && ms__preload_free_by_counter(t, p, prof))
    return;
  ms__preload_count_free(p, prof);
  ms__real.free(p);
}
MS__PL_OUT_OF_LINE(free_by_counter, free_by_counter_in)

/* free on jemalloc while a sampled block is live (MS__GATE_LIVE_BC) of a
 * block the profile's filter holds: a bootstrap block (pinned there), or
 * one to match against the profile's table, which the profiling copy
 * does. */
MS__FORK_TEXT static __attribute__((noinline)) void
free_by_counter_held(void *p) {
  if (ms__bootstrap_owns(p))
    return;
  free_by_counter_prof(p);
}

/* free on any other allocator: measured, counted, freed; out of line for
 * the same reason. */
static inline __attribute__((always_inline)) void free_measured_in(void *p,
                                                                   int prof) {
  ms__preload_count_free(p, prof);
  ms__real.free(p);
}
MS__PL_OUT_OF_LINE(free_measured, free_measured_in)

/* free() on glibc of a block the profile's filter holds while sampled
 * blocks are live: the block is matched against the profile's table
 * before it goes back to glibc. */
MS__FORK_TEXT static __attribute__((noinline)) void
free_glibc_sampled(ms__tls_t *t, void *p) {
  if (ms__bootstrap_owns(p))
    return;
  ms__prof_freed(p); /* the filter was read: straight to the table */
  ms__preload_record_glibc(t, NULL, ms__glibc_block(p), 1, 1);
  ms__real.free(p);
}

/* free() on glibc of a block its fast path did not record (a mapped
 * chunk, a large block, a shard this thread cannot write now, a block of
 * the bootstrap buffer, whose header says mapped): recorded here, out of
 * line, and freed. */
MS__FORK_TEXT static __attribute__((noinline)) void
free_glibc_slow(ms__tls_t *t, void *p, ms__glibc_block_t b, int prof) {
  if (ms__bootstrap_owns(p))
    return;
  MS__PL_COPIES(prof, ms__preload_record_glibc, t, NULL, b, 1);
  ms__real.free(p);
}

/* free() on glibc from inside a real C++ operator or a size lookup (the
 * guard set): passed on uncounted, unless it is a bootstrap block. */
MS__FORK_TEXT static __attribute__((noinline)) void
free_glibc_guarded(void *p) {
  if (!ms__bootstrap_owns(p))
    ms__real.free(p);
}

/* free on glibc (the gate's NOT_GLIBC bit clear). Every call out of it is
 * a tail call, so it keeps nothing across one and saves no register. In
 * the profiling copy (the gate said sampled blocks are live) a block the
 * profile's filter holds goes the long way, out of line; the filter is
 * read here, before the call, so that the other blocks freed meanwhile
 * (nearly all) take the plain path (test_hotpath_cost counts the calls
 * out). A bootstrap block is told apart on the way out of line only: its
 * header says a mapped chunk (resolve.c), which the fast path leaves to
 * free_glibc_slow. */
static inline __attribute__((always_inline)) void free_glibc_in(void *p,
                                                                int prof) {
  ms__tls_t *t = &ms__tls;
  if (__builtin_expect(!ms__preload_counts(t), 0)) {
    free_glibc_guarded(p);
    return;
  }
  if (MS__PRELOAD_PROFILER && prof &&
      __builtin_expect(ms__preload_filter_holds(p), 0)) {
    free_glibc_sampled(t, p);
    return;
  }
  ms__glibc_block_t b = ms__glibc_block(p);
  if (__builtin_expect(!ms__preload_free_glibc_fast(t, b), 0)) {
    free_glibc_slow(t, p, b, prof);
    return;
  }
  ms__real.free(p);
}

/* free on an allocator whose blocks glibc's header does not measure. */
static inline __attribute__((always_inline)) void free_by_kind_in(void *p,
                                                                  int prof) {
  /* Bootstrap blocks are never given back; nor are they counted. */
  if (__builtin_expect(ms__bootstrap_owns(p), 0))
    return;
  if (ms__preload_by_counter()) {
    if (prof)
      free_by_counter_prof(p);
    else
      free_by_counter(p);
    return;
  }
  if (prof)
    free_measured_prof(p);
  else
    free_measured(p);
}

/* free on any allocator, the kind read here (free_other's case). */
static inline __attribute__((always_inline)) void free_in(void *p, int prof) {
  if (ms__preload_glibc_kind()) {
    free_glibc_in(p, prof);
    return;
  }
  free_by_kind_in(p, prof);
}

/* free when the gate says none of its cases (see malloc_other). */
MS__FORK_TEXT static __attribute__((noinline)) void free_other(void *p) {
  if (ms__bootstrap_owns(p))
    return;
  int m = ms__preload_mode();
  if (m != MS__PL_BOOT)
    MS__PL_COPIES(m == MS__PL_PROF, free_in, p);
}

/* free with the gate's LIVE set in a preload built without the profiler,
 * which never sets it: free_other's, a function of its own so that the
 * compilers keep the test that leads here, and the build runs the
 * compares the profiling build runs (test_hotpath_cost). */
MS__FORK_TEXT static __attribute__((noinline)) void free_live_noprof(void *p) {
  free_other(p);
}

static inline __attribute__((always_inline)) void free_body(void *p) {
  if (!p)
    return;
  /* Bootstrap blocks are never given back; nor are they counted: each
   * copy below tells them apart (on glibc, off the fast path). A block
   * that is not one was allocated by the next allocator, so ms__real is
   * ready. */
  /* One word says whether the next allocator is known, whether a sampled
   * block is live and whether it is glibc's (ms__free_gate): with none
   * live, even with the profiler on, nothing is to be unsampled and the
   * plain copy runs. glibc's LIVE is the word's sign bit, which no other
   * value has: the test for 0 tells it too (gcc and clang: test, jne,
   * jns), one instruction more on every free while a sample is live on
   * glibc, where a second compare was two (test_hotpath_cost's default
   * rate on random sizes). The other allocators' plain copy pays that jns
   * (jemalloc's small loop: 216.55 instructions a pair, 215.55 before).
   * The same compares with no profiler (MS__PRELOAD_PROFILER 0), so that
   * MEMSTATS_PROFILE_RATE=0 runs the compares the preload without the
   * profiler runs. */
  uint64_t g = __atomic_load_n(&ms__free_gate, __ATOMIC_ACQUIRE);
  if (__builtin_expect(g == 0, 1)) {
    free_glibc_in(p, 0);
  } else if (__builtin_expect((int64_t)g < 0, 1)) {
    /* g is LIVE, never set without the profiler */
    if (MS__PRELOAD_PROFILER)
      free_glibc_in(p, 1);
    else
      free_live_noprof(p);
  } else if (__builtin_expect(g == MS__GATE_NOT_GLIBC, 1)) {
    free_by_kind_in(p, 0);
  } else if (MS__PRELOAD_PROFILER &&
             __builtin_expect(g == (MS__GATE_NOT_GLIBC | MS__GATE_LIVE_BC),
                              1)) {
    /* jemalloc with a sample live: the filter is all the profiling copy
     * asks of a block, and the bootstrap blocks are held there too; any
     * other block goes to the plain copy, its counter known to be used. */
    if (__builtin_expect(ms__preload_filter_holds(p), 0))
      free_by_counter_held(p);
    else
      free_by_counter(p);
  } else if (MS__PRELOAD_PROFILER &&
             g == (MS__GATE_NOT_GLIBC | MS__GATE_LIVE_OTHER)) {
    free_by_kind_in(p, 1);
  } else {
    free_other(p);
  }
}

MS__FORK_TEXT void *ms__preload_malloc(size_t size) {
  return malloc_body(size);
}

MS__FORK_TEXT void *malloc(size_t size) {
  return malloc_body(size);
}

MS__FORK_TEXT void ms__preload_free(void *p) {
  free_body(p);
}

MS__FORK_TEXT void free(void *p) {
  free_body(p);
}

static inline __attribute__((always_inline)) void *
calloc_in(size_t n, size_t size, int prof) {
  void *p = ms__real.calloc(n, size);
  ms__preload_count_alloc(p, prof);
  return p;
}

/* calloc on glibc, as malloc: its two copies each a function of its own,
 * keeping nothing but the block across glibc's calloc, reached by a tail
 * call before anything is saved. */
static inline __attribute__((always_inline)) void *
calloc_glibc_in(size_t n, size_t size, int prof) {
  void *p = ms__real.calloc(n, size);
  ms__tls_t *t = &ms__tls;
  if (__builtin_expect(p != NULL, 1) && ms__preload_counts(t))
    ms__preload_record_glibc(t, p, ms__glibc_block(p), 0, prof);
  return p;
}
MS__FORK_TEXT static __attribute__((noinline)) void *calloc_glibc(size_t n,
                                                                  size_t size) {
  return calloc_glibc_in(n, size, 0);
}
MS__FORK_TEXT static __attribute__((noinline)) void *
calloc_glibc_prof(size_t n, size_t size) {
  return calloc_glibc_in(n, size, 1);
}

/* calloc on any other allocator, or before the next one is known, or in
 * a fork child until its agent starts. */
MS__FORK_TEXT static __attribute__((noinline)) void *calloc_other(size_t n,
                                                                  size_t size) {
  int m = ms__preload_mode();
  if (__builtin_expect(m != MS__PL_BOOT, 1))
    return MS__PL_COPIES(m == MS__PL_PROF, calloc_in, n, size);
  size_t total;
  if (__builtin_mul_overflow(n, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  return boot(total, 16); /* zeroed: see ms__bootstrap_alloc */
}

MS__FORK_TEXT void *calloc(size_t n, size_t size) {
  return __atomic_load_n(&calloc_impl, __ATOMIC_ACQUIRE)(n, size);
}

/* ---- the word malloc and calloc start with -------------------------------*/

/* The copies for each value of the word (preload.h): glibc's two when the
 * allocator is glibc, known, and no fork child waits for its agent; the
 * copies that read the state and the kind again otherwise. */
static unsigned gate_word MS__FORK_DATA =
    MS__MGATE_NOT_READY | MS__MGATE_NOT_GLIBC;

MS__FORK_TEXT static malloc_fn *malloc_for(unsigned g) {
  /* Not resolved yet, or a fork child waiting for its agent: the copy
   * that reads the state (and may hand out the bootstrap buffer). */
  if (g & (MS__MGATE_NOT_READY | MS__MGATE_FORKED))
    return malloc_other;
  /* Another allocator (or glibc's header not checked yet): each of its
   * two copies a function of its own. */
  if (g & MS__MGATE_NOT_GLIBC)
    return MS__PRELOAD_PROFILER && (g & MS__MGATE_PROF) ? malloc_by_kind_prof
                                                        : malloc_by_kind;
  if (g == 0)
    return malloc_glibc;
  if (MS__PRELOAD_PROFILER && g == MS__MGATE_PROF)
    return malloc_glibc_prof;
  return malloc_other;
}

MS__FORK_TEXT static calloc_fn *calloc_for(unsigned g) {
  if (g == 0)
    return calloc_glibc;
  if (MS__PRELOAD_PROFILER && g == MS__MGATE_PROF)
    return calloc_glibc_prof;
  return calloc_other;
}

/* Sets the bits set and clears the bits clear, then points malloc and
 * calloc at the copies for the word. Two threads changing bits at once
 * each store the copies for the word they read, and store again if it has
 * changed since: the last store is for the last word. It runs a handful of
 * times in a process (the lookup, glibc's header checked, the profiler on,
 * a fork and its agent's start), so the loop ends at once. Atomics only:
 * the fork child's handler calls it. */
MS__FORK_TEXT void ms__malloc_gate_change(unsigned set, unsigned clear) {
  if (set)
    __atomic_fetch_or(&gate_word, set, __ATOMIC_SEQ_CST);
  if (clear)
    __atomic_fetch_and(&gate_word, ~clear, __ATOMIC_SEQ_CST);
  unsigned g;
  do {
    g = __atomic_load_n(&gate_word, __ATOMIC_SEQ_CST);
    __atomic_store_n(&malloc_impl, malloc_for(g), __ATOMIC_SEQ_CST);
    __atomic_store_n(&calloc_impl, calloc_for(g), __ATOMIC_SEQ_CST);
  } while (__atomic_load_n(&gate_word, __ATOMIC_SEQ_CST) != g);
}

/* ---- realloc
 * ---------------------------------------------------------------*/

/* A bootstrap block cannot be resized in place: move it to the real heap
 * (or to a new bootstrap block while the lookup is still running). */
MS__FORK_TEXT static void *realloc_bootstrap(void *p, size_t size) {
  if (size == 0)
    return NULL; /* freed, as glibc does; bootstrap frees are no-ops */
  void *q = ms__preload_malloc(size);
  if (q) {
    size_t old = ms__bootstrap_size(p);
    memcpy(q, p, old < size ? old : size);
  }
  return q;
}

static inline __attribute__((always_inline)) void *
realloc_in(void *p, size_t size, int prof) {
  ms__tls_t *t = &ms__tls;
  if (!ms__preload_counts(t))
    return ms__real.realloc(p, size);
  if (ms__preload_glibc_kind()) {
    /* A mmapped chunk may be moved or resized by mremap: its mapping is
     * counted out and in like any block's. */
    ms__glibc_block_t ob = ms__glibc_block(p);
    uint64_t taken = ms__preload_realloc_begin(p, prof);
    void *q = ms__real.realloc(p, size);
    ms__preload_realloced(p, taken, q != NULL || size == 0);
    if (q) {
      ms__preload_record_glibc(t, NULL, ob, 1, prof);
      ms__preload_record_glibc(t, q, ms__glibc_block(q), 0, prof);
    } else if (size == 0) {
      /* realloc(p, 0) freed p */
      ms__preload_record_glibc(t, NULL, ob, 1, prof);
    }
    return q;
  }
  size_t old = ms__preload_usable(t, p);
  uint64_t taken = ms__preload_realloc_begin(p, prof);
  void *q = ms__real.realloc(p, size);
  ms__preload_realloced(p, taken, q != NULL || size == 0);
  if (q) {
    ms__preload_record(t, NULL, old, 1, prof);
    ms__preload_record(t, q, ms__preload_usable(t, q), 0, prof);
  } else if (size == 0) {
    ms__preload_record(t, NULL, old, 1, prof); /* realloc(p, 0) freed p */
  }
  return q;
}

MS__FORK_TEXT static void *realloc_impl(void *p, size_t size) {
  if (!p)
    return ms__preload_malloc(size);
  if (__builtin_expect(ms__bootstrap_owns(p), 0))
    return realloc_bootstrap(p, size);
  int m = ms__preload_mode();
  if (__builtin_expect(m == MS__PL_BOOT, 0))
    return NULL;
  return MS__PL_COPIES(m == MS__PL_PROF, realloc_in, p, size);
}

MS__FORK_TEXT void *realloc(void *p, size_t size) {
  return realloc_impl(p, size);
}

/* glibc's own reallocarray calls its internal realloc, which we would not
 * see, so it is implemented here on top of the next realloc. */
MS__FORK_TEXT void *reallocarray(void *p, size_t n, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(n, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  return realloc_impl(p, total);
}

/* ---- aligned allocation
 * ----------------------------------------------------*/

MS__FORK_TEXT int ms__preload_posix_memalign(void **out, size_t align,
                                             size_t size) {
  int m = ms__preload_mode();
  if (__builtin_expect(m == MS__PL_BOOT, 0)) {
    if (align < sizeof(void *) || (align & (align - 1)))
      return EINVAL;
    void *p = ms__bootstrap_alloc(size, align);
    if (!p)
      return ENOMEM;
    *out = p;
    return 0;
  }
  int r = ms__real.posix_memalign(out, align, size);
  if (r == 0)
    MS__PL_COPIES(m == MS__PL_PROF, ms__preload_count_alloc, *out);
  return r;
}

MS__FORK_TEXT int posix_memalign(void **out, size_t align, size_t size) {
  return ms__preload_posix_memalign(out, align, size);
}

/* memalign, aligned_alloc, valloc and pvalloc go to the next allocator's
 * own function when it has one (its checks and errno are then the ones the
 * program expects), else they are built on posix_memalign. */
static void *aligned_fallback(size_t align, size_t size) {
  if (align < sizeof(void *))
    align = sizeof(void *);
  void *p = NULL;
  int r = ms__preload_posix_memalign(&p, align, size);
  if (r != 0) {
    errno = r;
    return NULL;
  }
  return p;
}

/* A block from one of the next allocator's aligned functions, counted by
 * the copy m says. */
static void *count_aligned(void *p, int m) {
  MS__PL_COPIES(m == MS__PL_PROF, ms__preload_count_alloc, p);
  return p;
}

void *aligned_alloc(size_t align, size_t size) {
  int m = ms__preload_mode();
  if (__builtin_expect(m == MS__PL_BOOT, 0))
    return boot(size, align);
  if (!ms__real.aligned_alloc)
    return aligned_fallback(align, size);
  return count_aligned(ms__real.aligned_alloc(align, size), m);
}

void *memalign(size_t align, size_t size) {
  int m = ms__preload_mode();
  if (__builtin_expect(m == MS__PL_BOOT, 0))
    return boot(size, align);
  if (!ms__real.memalign)
    return aligned_fallback(align, size);
  return count_aligned(ms__real.memalign(align, size), m);
}

void *valloc(size_t size) {
  int m = ms__preload_mode();
  if (__builtin_expect(m == MS__PL_BOOT, 0))
    return boot(size, ms__page_size());
  if (!ms__real.valloc)
    return aligned_fallback(ms__page_size(), size);
  return count_aligned(ms__real.valloc(size), m);
}

void *pvalloc(size_t size) {
  size_t ps = ms__page_size();
  int m = ms__preload_mode();
  if (m != MS__PL_BOOT && ms__real.pvalloc)
    return count_aligned(ms__real.pvalloc(size), m);
  /* Rounded up to whole pages here: a size within a page of SIZE_MAX would
   * wrap to a block of 0 bytes. */
  size_t rounded;
  if (__builtin_add_overflow(size, ps - 1, &rounded)) {
    errno = ENOMEM;
    return NULL;
  }
  rounded &= ~(ps - 1);
  if (__builtin_expect(m == MS__PL_BOOT, 0))
    return boot(rounded, ps);
  return aligned_fallback(ps, rounded);
}

MS__FORK_TEXT size_t malloc_usable_size(void *p) {
  if (!p)
    return 0;
  if (ms__bootstrap_owns(p))
    return ms__bootstrap_size(p);
  if (__builtin_expect(ms__preload_mode() == MS__PL_BOOT, 0))
    return 0;
  return ms__real.usable(p);
}
