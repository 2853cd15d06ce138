/*
 * record.h - the preload built as its own floors, for make bench only
 * (tests/bench/bench_preload.c). The floor builds compile src/preload with
 * -iquote tests/bench/floor and MS__PRELOAD_FLOOR set, so that preload.h's
 * #include "preload/record.h" finds this header instead of
 * src/preload/record.h; it defines the same six functions:
 *   1  forwarding only: every call goes through the preload's functions to
 *      the next allocator, as a call nested in a real C++ operator does,
 *      and nothing is measured or counted;
 *   2  forwarding and measuring: each block's usable size is found exactly
 *      as the product finds it, and then dropped instead of recorded;
 *   3  the naive exact counter: forwarding, measuring each block, and
 *      adding its size and one object to plain per-thread counters
 *      (ms__naive: no size classes, no sequence bracket, so no consistent
 *      cut; the counters are never read). The preload's goal is set
 *      against this one: at most 1.25x its malloc/free loop.
 */
#ifndef MS_PRELOAD_RECORD_H
#define MS_PRELOAD_RECORD_H

#if !defined(MS__PRELOAD_FLOOR) || MS__PRELOAD_FLOOR < 1 ||                    \
    MS__PRELOAD_FLOOR > 3
#error "the floors' record.h is for make bench's floor builds only"
#endif

/* Floor 1 measures nothing, so it has no way of measuring either. */
static inline int ms__preload_glibc_kind(void) {
  return MS__PRELOAD_FLOOR != 1 &&
         __builtin_expect(__atomic_load_n(&ms__real.usable_kind,
                                          __ATOMIC_RELAXED) == MS__USABLE_GLIBC,
                          1);
}

static inline int ms__preload_by_counter(void) {
  return MS__PRELOAD_FLOOR != 1 &&
         __atomic_load_n(&ms__real.free_by_counter, __ATOMIC_RELAXED);
}

static inline __attribute__((always_inline)) int
ms__preload_counts(ms__tls_t *t) {
  return MS__PRELOAD_FLOOR != 1 && !ms__pl(t)->guard;
}

#if MS__PRELOAD_FLOOR == 3
/* One per compilation unit: they are never read. */
typedef struct ms__naive_s {
  uint64_t bytes[2], objects[2]; /* [0] allocated, [1] freed */
} ms__naive_t;
static __thread ms__naive_t ms__naive
    __attribute__((tls_model("initial-exec"), unused));
#endif

static inline __attribute__((always_inline)) void
ms__preload_record(ms__tls_t *t, void *p, uint64_t size, int is_free,
                   int prof) {
  (void)t;
  (void)p;
  (void)prof;
#if MS__PRELOAD_FLOOR == 3
  ms__naive.bytes[is_free] += size; /* counted, naively */
  ms__naive.objects[is_free] += 1;
#else
  (void)is_free;
  __asm__ volatile("" ::"r"(size)); /* measured, not recorded */
#endif
}

static inline __attribute__((always_inline)) void
ms__preload_record_glibc(ms__tls_t *t, void *p, ms__glibc_block_t b,
                         int is_free, int prof) {
#if MS__PRELOAD_FLOOR == 3
  ms__preload_record(t, p, b.usable, is_free, prof); /* no mapped split */
#else
  (void)t;
  (void)p;
  (void)is_free;
  (void)prof;
  __asm__ volatile("" ::"r"(b.usable), "r"(b.mapped)); /* measured only */
#endif
}

/* free's fast path on glibc: measured (and counted naively in floor 3)
 * as ms__preload_record_glibc does; a mapped chunk (a bootstrap block's
 * header says one) goes out of line, as in the product. */
static inline __attribute__((always_inline)) int
ms__preload_free_glibc_fast(ms__tls_t *t, ms__glibc_block_t b) {
  if (__builtin_expect(b.mapped != 0, 0))
    return 0;
  ms__preload_record_glibc(t, NULL, b, 1, 0);
  return 1;
}

#endif
