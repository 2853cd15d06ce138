/*
 * preload.h - the malloc interposer of libmemstats-preload.so (internal to
 * src/preload).
 *
 * The preload defines malloc, free, ... and every C++ operator new/delete,
 * forwards each call to the next definition in the search order (glibc,
 * jemalloc, tcmalloc, mimalloc: found with dlsym(RTLD_NEXT)), and counts
 * every block by its usable size (the underlying allocator's
 * malloc_usable_size) into the engine's per-thread shards. Counting usable
 * bytes at both ends makes HeapAlloc exact on any allocator without a
 * header in front of the block, so memory allocated before us or by an
 * allocator's own entry points (mallocx, tc_new, ...) is freed safely.
 *
 * resolve.c  finds the next allocator lazily and serves dlsym's own
 *            allocations from a static bootstrap buffer meanwhile;
 * malloc.c   the C allocation functions;
 * cxx.c      the C++ operators, written in C under their mangled names;
 * record.h   what is done with each block measured (a part of this file);
 * preload.c  the constructor (agent start) and the opt-in exit report;
 * attach.c   loaded late by memtop attach: inert until told to start;
 * got.c      memtop attach --track: the modules' GOT entries rewritten.
 */
#ifndef MS_PRELOAD_PRELOAD_H
#define MS_PRELOAD_PRELOAD_H

#include <stddef.h>
#include <stdint.h>

#include "core/engine.h"
#include "core/hotpath.h"
#include "core/util.h"
#include "profile/profile.h"

/* make bench also builds the preload with MS__PRELOAD_PROFILER 0: the heap
 * profiler's hooks compiled out, the preload as it was before the
 * profiler. It is the baseline of what MEMSTATS_PROFILE_RATE=0 may cost:
 * nothing more (tests/bench/bench_preload.c). */
#ifndef MS__PRELOAD_PROFILER
#define MS__PRELOAD_PROFILER 1
#endif

/* What the preload exports: the library is built with hidden visibility. */
#define MS__PRELOAD_API __attribute__((visibility("default")))
/* Its own globals, declared hidden so the hot path reads them
 * %rip-relative instead of through the GOT. */
#define MS__PRELOAD_HIDDEN __attribute__((visibility("hidden")))

/* The next allocator's entry points. Set once by ms__preload_resolve(),
 * read without locks after ms__preload_complete() returned true. */
typedef struct ms__real_s {
  void *(*malloc)(size_t);
  void (*free)(void *);
  void *(*calloc)(size_t, size_t);
  void *(*realloc)(void *, size_t);
  int (*posix_memalign)(void **, size_t, size_t);
  void *(*aligned_alloc)(size_t, size_t); /* may be NULL: emulated */
  void *(*memalign)(size_t, size_t);      /* may be NULL: emulated */
  void *(*valloc)(size_t);                /* may be NULL: emulated */
  void *(*pvalloc)(size_t);               /* may be NULL: emulated */
  size_t (*usable)(void *);               /* the block's usable size */
  /* How ms__preload_usable() finds it: MS__USABLE_* below, read and
   * written with relaxed atomics (ms__preload_size_init changes it while
   * other threads may run; both ways give the same figure). */
  int usable_kind;
  int is_glibc; /* the next malloc is glibc's own */
  /* jemalloc: its mallctl, and 1 once ms__preload_size_init has checked
   * that its per-thread thread.deallocated counter moves by each freed
   * block's usable size (see ms__preload_free_by_counter). */
  int (*mallctl)(const char *, void *, size_t *, void *, size_t);
  int free_by_counter;
} ms__real_t;

enum {
  /* Call usable(): it only reads the allocator's own metadata (glibc,
   * jemalloc, mimalloc). */
  MS__USABLE_CALL = 0,
  /* Read glibc's chunk header in front of the block, as glibc's own
   * malloc_usable_size does; set only after ms__preload_size_init has
   * checked, on real blocks of every kind, that it gives glibc's answer. */
  MS__USABLE_GLIBC = 1,
  /* Call usable() with the guard set: it may allocate (any other
   * allocator, debugging mallocs included). */
  MS__USABLE_GUARDED = 2
};

extern ms__real_t ms__real MS__PRELOAD_HIDDEN;

/* The state every C entry point tests first. READY and PROF both say that
 * ms__real is complete; PROF also says that the heap profiler samples
 * (MEMSTATS_PROFILE_RATE not 0), set once by ms__preload_profile_on()
 * from the constructor and never cleared. Folding the profiler into this
 * one test is what makes MEMSTATS_PROFILE_RATE=0 cost nothing: in READY
 * the entry points run code that has no profiler in it at all (each is
 * compiled twice, see ms__preload_mode), and the profiling copy is reached
 * by the branch that is not taken. PROF is the one state above READY, so
 * that the compare with READY tells the profiling copy too (one jump more
 * than the plain copy's, not a compare and a jump: MS__REAL_IS_PROF). */
enum {
  MS__REAL_NONE = 0,      /* nobody looked yet */
  MS__REAL_RESOLVING = 1, /* a thread is inside dlsym */
  MS__REAL_FAILED = 2,    /* no next malloc: only the bootstrap buffer */
  /* READY or PROF in a fork child whose agent is still to be started
   * (preload.c, ms__preload_forked): every allocation entry point takes
   * its slow path until then, the fork handler having only stored this. */
  MS__REAL_FORKED = 3,
  MS__REAL_FORKED_PROF = 4,
  MS__REAL_READY = 5, /* ms__real is complete; not profiling */
  MS__REAL_PROF = 6   /* ms__real is complete; profiling */
};
/* st, not READY, is PROF (the entry points' second test). */
#define MS__REAL_IS_PROF(st) ((st) > MS__REAL_READY)
/* st is FORKED or FORKED_PROF. */
#define MS__REAL_IS_FORKED(st)                                                 \
  ((st) == MS__REAL_FORKED || (st) == MS__REAL_FORKED_PROF)
extern int ms__real_state MS__PRELOAD_HIDDEN;

/* The preload's state per thread. It lives in the room the engine keeps
 * for it in its initial-exec TLS block (ms__tls.preload, core/hotpath.h):
 * a plain %fs-relative access, no __tls_get_addr (which can allocate), and
 * one TLS address for the guard test and the count. That room is an array
 * of words to the engine, which never reads it; here it is read and
 * written only as this type, declared may_alias so that the compiler
 * treats those accesses as it would accesses through a char pointer.
 *
 * guard: nonzero while this thread runs inside a real C++ operator that
 * may come back into our malloc/free (libstdc++'s operator new calls
 * malloc): the nested call passes straight through, uncounted, so one
 * object is counted once. The je_* members are the preload on jemalloc's
 * (ms__preload_free_by_counter below): this thread's thread.deallocated
 * counter once looked up, and the state that keeps a signal handler's free
 * apart from the one it interrupted. */
typedef struct __attribute__((may_alias)) ms__pl_tls_s {
  int guard;
  int je_window;      /* nonzero while a free reads the counter around */
  uint64_t *je_freed; /* NULL until looked up; MS__JE_UNUSABLE */
  uint64_t je_nested; /* bytes freed by signal handlers inside a window */
} ms__pl_tls_t;
_Static_assert(sizeof(ms__pl_tls_t) <= MS__TLS_PRELOAD_SIZE,
               "the preload's per-thread state outgrew ms__tls.preload");
_Static_assert(_Alignof(ms__pl_tls_t) <= _Alignof(uint64_t),
               "ms__tls.preload is aligned for words only");

/* The preload's state in the thread state t (normally &ms__tls). */
static inline __attribute__((always_inline)) ms__pl_tls_t *
ms__pl(ms__tls_t *t) {
  return (ms__pl_tls_t *)(void *)t->preload;
}

/* What free tests first, one word for three questions: whether ms__real
 * is complete (MS__GATE_NOT_READY clear), whether a sampled block is live
 * (MS__GATE_LIVE: the profiling copy must run; clear, the plain copy is
 * right: the profiler off, or on with nothing sampled alive, so nothing
 * to unsample) and whether blocks are measured by glibc's chunk header
 * (MS__GATE_NOT_GLIBC clear: ms__real.usable_kind is MS__USABLE_GLIBC,
 * which then need not be loaded). The profile's table keeps the LIVE bit
 * (one of three, by allocator: ms__prof_set_gate), resolve.c the others.
 * On glibc with MEMSTATS_PROFILE_RATE=0 it is 0 from the lookup on: one
 * compare. */
#define MS__GATE_NOT_READY 1u
#define MS__GATE_NOT_GLIBC 4u
/* LIVE on glibc: the sign bit, so that free's test for 0 tells it too
 * (malloc.c, free_body). */
#define MS__GATE_LIVE ((uint64_t)1 << 63)
/* LIVE on an allocator whose frees are measured by its own counter
 * (jemalloc: ms__preload_free_by_counter), set with NOT_GLIBC: free then
 * reads the profile's filter and goes straight to free_by_counter's plain
 * copy, with neither the bootstrap buffer's test (its blocks are pinned
 * in the filter: ms__preload_profile_on) nor the counter's. */
#define MS__GATE_LIVE_BC 8u
/* LIVE on any other allocator, set with NOT_GLIBC. */
#define MS__GATE_LIVE_OTHER 2u
extern uint64_t ms__free_gate MS__PRELOAD_HIDDEN;

/* What malloc and calloc go to: the copy for one word of four bits (the
 * state and the kind, as the entry points read them one by one before):
 * ms__real is not complete (NONE, RESOLVING, FAILED), blocks are not
 * measured by glibc's chunk header, the profiler samples (PROF), a fork
 * child's agent is still to start (FORKED). Each bit is set or cleared
 * by ms__malloc_gate_change, once the state or the kind it stands for has
 * changed (set in the fork child's handler before it returns), which
 * points malloc and calloc at the copy for the whole word: each is one
 * indirect jump (malloc.c). A copy that is
 * not the fastest one for the state reads the state and the kind again
 * (malloc_other, malloc_by_kind, calloc_other), so a word that lags a
 * change only ever sends a call the long way; the one change that must
 * not lag, FORKED, is made by the only thread the child has. */
#define MS__MGATE_NOT_READY 1u
#define MS__MGATE_NOT_GLIBC 2u
#define MS__MGATE_PROF 4u
#define MS__MGATE_FORKED 8u
void ms__malloc_gate_change(unsigned set, unsigned clear);

/* Whether ms__real is complete, the profiler on or off. */
static inline int ms__preload_complete(void) {
  int st = __atomic_load_n(&ms__real_state, __ATOMIC_ACQUIRE);
  return st >= MS__REAL_FORKED;
}

/* Whether the profiler samples (then ms__real is complete too). */
static inline int ms__preload_profiling(void) {
  int st = __atomic_load_n(&ms__real_state, __ATOMIC_ACQUIRE);
  return MS__PRELOAD_PROFILER &&
         (st == MS__REAL_PROF || st == MS__REAL_FORKED_PROF);
}

/* The slow path of a fork child (FORKED or FORKED_PROF, read as st):
 * once MS__FORK_GRACE_NS have passed since the fork (the coarse clock),
 * the state goes back to READY or PROF and the child's agent is started;
 * until then it answers the copy to run. preload.c. */
int ms__preload_forked(int st);

/* What an entry point runs: the bootstrap buffer (no next allocator yet,
 * or none), its plain copy, or its profiling copy. An entry point is
 *     int m = ms__preload_mode();
 *     if (m == MS__PL_BOOT) return <bootstrap>;
 *     return MS__PL_COPIES(m == MS__PL_PROF, body, ...);
 * with body always inline and its last argument prof: the plain copy is
 * the code of the preload without a profiler, reached by the one compare
 * and branch the entry point paid before the profiler existed. */
enum { MS__PL_BOOT = -1, MS__PL_PLAIN = 0, MS__PL_PROF = 1 };

/* The two copies of body, written once: body(args..., 1) where prof is
 * true, body(args..., 0) where it is not, each with its last argument a
 * constant that the compiler folds (an always-inline body then has no
 * profiler in its plain copy at all). */
#define MS__PL_COPIES(prof, body, ...)                                         \
  ((prof) ? body(__VA_ARGS__, 1) : body(__VA_ARGS__, 0))

/* The same out of line: defines name(p), body(p, 0), and name##_prof(p),
 * body(p, 1), each a function of its own so that the registers one copy
 * needs are not saved on the way into the other (a tail call away). */
#define MS__PL_OUT_OF_LINE(name, body)                                         \
  MS__FORK_TEXT static __attribute__((noinline)) void name(void *p) {          \
    body(p, 0);                                                                \
  }                                                                            \
  MS__FORK_TEXT static __attribute__((noinline)) void name##_prof(void *p) {   \
    body(p, 1);                                                                \
  }
int ms__preload_mode_slow(void);
static inline __attribute__((always_inline)) int ms__preload_mode(void) {
  int st = __atomic_load_n(&ms__real_state, __ATOMIC_ACQUIRE);
  if (__builtin_expect(st == MS__REAL_READY, 1))
    return MS__PL_PLAIN;
  if (MS__PRELOAD_PROFILER && __builtin_expect(MS__REAL_IS_PROF(st), 1))
    return MS__PL_PROF;
  return ms__preload_mode_slow();
}

/* Turns the profiling copies on (READY to PROF), once the profiler is
 * set up with a rate that is not 0: from the constructor. */
void ms__preload_profile_on(void);

/* Looks up the next allocator if nobody has. Returns 1 when ms__real is
 * ready, 0 when the caller must use the bootstrap buffer (this thread is
 * itself inside the lookup, another thread is, or there is no next malloc).
 * Never blocks. */
int ms__preload_resolve(void);

/* The bootstrap buffer: a static bump allocator for what dlsym allocates
 * before the real malloc is known. Blocks are never reused; freeing one is
 * a no-op. ms__bootstrap_alloc returns NULL when the buffer is exhausted. */
#define MS__BOOT_SIZE (64 * 1024)
extern unsigned char ms__boot_buf[MS__BOOT_SIZE] MS__PRELOAD_HIDDEN;
void *ms__bootstrap_alloc(size_t size, size_t align);
size_t ms__bootstrap_size(const void *p);
/* Closes the buffer: ms__bootstrap_alloc returns NULL from then on.
 * Returns how many bytes from its start may hold blocks given out. */
size_t ms__bootstrap_close(void);
/* Inline: realloc, malloc_usable_size and free's slow paths ask (free's
 * fast path on glibc leaves a bootstrap block to them by its header:
 * resolve.c). One compare (the subtraction wraps for addresses below the
 * buffer). */
static inline int ms__bootstrap_owns(const void *p) {
  return (uintptr_t)p - (uintptr_t)ms__boot_buf < MS__BOOT_SIZE;
}

/* The usable size of a block of the next allocator. Where the lookup may
 * itself allocate (gperftools' malloc_usable_size creates a
 * MallocExtension with operator new on first use, which is our operator
 * new), it runs with this thread's guard set, so whatever it allocates is
 * passed through uncounted instead of being counted by a lookup of its
 * own, and so on until the stack runs out. The caller has checked that the
 * guard was clear. */
/* glibc's chunk header (malloc/malloc.c): the word before the block holds
 * the chunk size with three flag bits, IS_MMAPPED among them; the usable
 * part is the chunk less one header word, or two for an mmapped chunk
 * (musable() in glibc). */
static inline size_t ms__glibc_usable(const void *p) {
  size_t h = ((const size_t *)p)[-1];
  return (h & ~(size_t)7) - (h & 2 ? 2 * sizeof(size_t) : sizeof(size_t));
}

/* A glibc block as the counters want it: its usable size, and for an
 * mmapped chunk (IS_MMAPPED, 0x2) the bytes of its mapping, the chunk and
 * the alignment offset in front of it (prev_size of an mmapped chunk),
 * which is what glibc adds to and takes from its hblkhd; 0 otherwise. */
typedef struct ms__glibc_block_s {
  size_t usable, mapped;
} ms__glibc_block_t;

static inline __attribute__((always_inline)) ms__glibc_block_t
ms__glibc_block(const void *p) {
  size_t h = ((const size_t *)p)[-1];
  ms__glibc_block_t b;
  if (__builtin_expect(h & 2, 0)) {
    b.usable = (h & ~(size_t)7) - 2 * sizeof(size_t);
    b.mapped = (h & ~(size_t)7) + ((const size_t *)p)[-2];
  } else {
    b.usable = (h & ~(size_t)7) - sizeof(size_t);
    b.mapped = 0;
  }
  return b;
}

/* The same with the kind already loaded (kind: ms__real.usable_kind). */
static inline __attribute__((always_inline)) size_t
ms__preload_usable_of(ms__tls_t *t, void *p, int kind) {
  if (__builtin_expect(kind == MS__USABLE_GLIBC, 1))
    return ms__glibc_usable(p);
  if (__builtin_expect(kind == MS__USABLE_CALL, 1))
    return ms__real.usable(p);
  ms__pl(t)->guard = 1;
  size_t n = ms__real.usable(p);
  ms__pl(t)->guard = 0;
  return n;
}

static inline size_t ms__preload_usable(ms__tls_t *t, void *p) {
  return ms__preload_usable_of(
      t, p, __atomic_load_n(&ms__real.usable_kind, __ATOMIC_RELAXED));
}

/* Sizes known without asking the allocator. jemalloc's usable size for
 * malloc(n) depends on n alone (its size classes: 8, then 16-byte steps to
 * 128, then four classes per power of two), and asking it for the block's
 * size costs as much as the malloc itself. ms__preload_size_init() checks
 * that the next allocator's nallocx agrees with ms__class_round() at every
 * class boundary up to some size and stores that size here; 0 (the
 * default, and every other allocator) means: always ask. Before the check
 * has run the block is asked for, which gives the same figure. For glibc
 * it checks instead that the chunk header gives malloc_usable_size's
 * answer and then reads it (MS__USABLE_GLIBC): blocks are still measured
 * one by one, without the call. */
extern size_t ms__preload_by_request_max MS__PRELOAD_HIDDEN;
/* Whose classes those are, told by the limit itself: jemalloc's
 * (MS__BY_REQUEST_JE_MAX, ms__class_round), mimalloc's (64 KiB,
 * ms__mi_class_round with ms__preload_mi_min_shift, checked against its
 * mi_good_size the same way), or those read from another allocator's
 * nallocx (tcmalloc), up to MS__REQ_TABLE_MAX only. Whichever it is, the
 * classes up to MS__REQ_TABLE_MAX are in ms__preload_req_table by 8-byte
 * steps (a load is cheaper than either formula); both are written before
 * ms__preload_by_request_max is published (release; the hot path loads it
 * with acquire). */
extern int ms__preload_mi_min_shift MS__PRELOAD_HIDDEN;
#define MS__REQ_TABLE_MAX 1024u
extern uint16_t
    ms__preload_req_table[MS__REQ_TABLE_MAX / 8 + 1] MS__PRELOAD_HIDDEN;
void ms__preload_size_init(void);

static inline size_t ms__class_round(size_t n) {
  /* n is in (2^b, 2^(b+1)]: four classes of 2^(b-2) each, and never
   * steps under 16 (up to 128); 8 for n <= 8. Without branches: the sizes
   * a program asks for in a row are mixed, and a mispredicted branch here
   * cost more than all the rest of the sum (make bench). */
  int b = 63 - __builtin_clzll((unsigned long long)((n - 1) | 1));
  int shift = b - 2 > 4 ? b - 2 : 4;
  size_t step = (size_t)1 << shift;
  size_t r = (n + step - 1) & ~(step - 1);
  return n <= 8 ? 8 : r;
}

/* mimalloc's usable size for malloc(n) (its bins, _mi_bin in mimalloc):
 * n in 8-byte words, w; up to 8 words w rounded to a multiple of
 * 2^min_shift (1 word, or 2 where mimalloc is built to align blocks to two
 * words, as Debian's is), then four bins per power of two of words; n <= 8
 * takes one word. Without branches, as above. */
static inline size_t ms__mi_class_round(size_t n, int min_shift) {
  size_t w = (n + 7) >> 3;
  int b = 63 - __builtin_clzll((unsigned long long)((w - 1) | 1));
  int shift = b - 2 > min_shift ? b - 2 : min_shift;
  size_t step = (size_t)1 << shift;
  size_t r = ((w + step - 1) & ~(step - 1)) << 3;
  return n <= 8 ? 8 : r;
}

/* Past the table, mimalloc's classes (out of line: rare sizes; tcmalloc's
 * limit is the table's). */
size_t ms__request_round_other(size_t n);
/* jemalloc's limit, which no other allocator's is: the limit already
 * loaded tells whose classes they are. */
#define MS__BY_REQUEST_JE_MAX ((size_t)1 << 32)
/* The usable size of malloc(n) by the classes found at start; max is
 * ms__preload_by_request_max as loaded, and n <= max. */
static inline size_t ms__request_round(size_t n, size_t max) {
  if (__builtin_expect(n <= MS__REQ_TABLE_MAX, 1))
    return ms__preload_req_table[(n + 7) >> 3];
  if (__builtin_expect(max == MS__BY_REQUEST_JE_MAX, 1))
    return ms__class_round(n);
  return ms__request_round_other(n);
}

/* The heap profiler's part of the hot path (src/profile/sampler.c), in
 * the profiling copies only (prof 1; with MEMSTATS_PROFILE_RATE=0 the
 * plain copies run, which have none of it: ms__preload_mode). An
 * allocation subtracts its size from this thread's countdown, in the TLS
 * block the counters live in: one subtract and a branch taken once per
 * sample. A free loads one read-mostly word, nonzero only while sampled
 * blocks are live; then the table's filter tells almost every unsampled
 * block apart without a lock. A free is unsampled before the block goes
 * back to the allocator, so its address cannot be handed out and sampled
 * again in between. */
static inline __attribute__((always_inline)) void
ms__preload_sample(ms__tls_t *t, void *p, uint64_t size, int prof) {
  if (MS__PRELOAD_PROFILER && prof &&
      __builtin_expect((t->prof_left -= (int64_t)size) < 0, 0))
    ms__prof_sampled(t, p, size);
}
/* Whether the profile's filter holds p's slot: an all-zero array until
 * the table exists, so it may be read at any time. On x86-64 the byte is
 * compared where it lies (one load, as a relaxed atomic load is), which
 * the compilers do not do with an atomic load (a load and a test): one
 * instruction less on every free while a sample is live. */
static inline __attribute__((always_inline)) int
ms__preload_filter_holds(const void *p) {
  const uint8_t *f = __atomic_load_n(&ms__prof_filter, __ATOMIC_RELAXED);
#if defined(__x86_64__)
  /* ms__prof_filter_index(p), which clang computed in three instructions
   * here (the constant moved to a register first). */
  uint64_t i;
  __asm__(
      "imul %[c], %k[p], %k[i]\n\tshr %[s], %k[i]"
      : [i] "=r"(i)
      : [p] "r"(p), [c] "i"(0x9e3779b1u), [s] "i"(32 - MS__PROF_FILTER_BITS));
  __asm__ goto("cmpb $0, (%0,%1)\n\tjne %l[held]"
               :
               : "r"(f), "r"(i)
               : "cc"
               : held);
  return 0;
held:
  return 1;
#else
  return __atomic_load_n(&f[ms__prof_filter_index(p)], __ATOMIC_RELAXED) != 0;
#endif
}
/* Whether p may be a sampled block: some sample is live, and the filter's
 * byte for p's slot is set (a free or realloc asks before the table). */
static inline __attribute__((always_inline)) int
ms__preload_maybe_sampled(const void *p) {
  return __builtin_expect(
             __atomic_load_n(&ms__prof_live, __ATOMIC_RELAXED) != 0, 0) &&
         ms__preload_filter_holds(p);
}
static inline __attribute__((always_inline)) void
ms__preload_unsample(void *p, int prof) {
  if (MS__PRELOAD_PROFILER && prof && ms__preload_maybe_sampled(p))
    ms__prof_freed(p);
}
/* The same for a free that the free gate (ms__free_gate) sent to its
 * profiling copy: the gate said a sampled block is live, so the filter is
 * asked at once (ms__prof_live read again would be three instructions
 * more on every such free; a free_other that takes this copy while none
 * is live finds the filter's byte clear, or asks the table for nothing). */
static inline __attribute__((always_inline)) void
ms__preload_unsample_gated(void *p, int prof) {
  if (MS__PRELOAD_PROFILER && prof && ms__preload_filter_holds(p))
    ms__prof_freed(p);
}

/* realloc's part, in the profiling copies: the sample of p, if p is one,
 * leaves the profile's table of addresses before the realloc (once the
 * block has moved, its old address can be handed out and sampled again by
 * another thread), and ms__preload_realloced then counts it freed if the
 * realloc gave the block up, or puts it back if not: a realloc that fails
 * leaves its block, and the block's sample, where they were. */
static inline __attribute__((always_inline)) uint64_t
ms__preload_realloc_begin(void *p, int prof) {
  if (MS__PRELOAD_PROFILER && prof && ms__preload_maybe_sampled(p))
    return ms__prof_realloc_begin(p);
  return 0;
}
static inline __attribute__((always_inline)) void
ms__preload_realloced(void *p, uint64_t taken, int freed) {
  if (__builtin_expect(taken != 0, 0))
    ms__prof_realloced(p, taken, freed);
}

/* Counts and samples the block p of size bytes, which ran this thread's
 * countdown out (resolve.c). */
void ms__preload_alloc_sampled(ms__tls_t *t, void *p, uint64_t size);

/* A glibc block that is a mapping of its own, in a profiling copy:
 * unsampled, counted, sampled, in one call out of line (resolve.c), so
 * that nothing but p lives across it (with the three calls inline, clang
 * saved two more registers in malloc, and the plain copy paid for them:
 * test_hotpath_cost). */
void ms__preload_mapped_prof(ms__tls_t *t, void *p, ms__glibc_block_t b,
                             int is_free);

/* What is done with each block the entry points measure: counted into the
 * engine, sampled, unsampled (ms__preload_counts, ms__preload_record,
 * ms__preload_record_glibc). make bench's floor builds put their own
 * header of that name ahead of this one (tests/bench/floor/preload/
 * record.h), so this file and the entry points hold no bench variant. */
#include "preload/record.h"

/* Counting, shared by malloc.c and cxx.c: one object of the block's
 * usable size, unless this thread is nested inside a real C++ operator or
 * a size lookup (then the outer hook counts it, or nobody: see above).
 * prof: the caller's copy (ms__preload_mode), a constant. */
static inline __attribute__((always_inline)) void
ms__preload_count_alloc(void *p, int prof) {
  ms__tls_t *t = &ms__tls;
  if (p && ms__preload_counts(t)) {
    int kind = __atomic_load_n(&ms__real.usable_kind, __ATOMIC_RELAXED);
    if (kind == MS__USABLE_GLIBC)
      ms__preload_record_glibc(t, p, ms__glibc_block(p), 0, prof);
    else
      ms__preload_record(t, p, ms__preload_usable_of(t, p, kind), 0, prof);
  }
}
/* The same for a block just returned by a plain malloc(n) or operator
 * new(n) (no alignment): by n when the allocator's classes are known. */
static inline __attribute__((always_inline)) void
ms__preload_count_n(void *p, size_t n, int is_free, int prof) {
  ms__tls_t *t = &ms__tls;
  if (ms__preload_counts(t)) {
    size_t max = __atomic_load_n(&ms__preload_by_request_max, __ATOMIC_ACQUIRE);
    if (n <= max) {
      ms__preload_record(t, p, ms__request_round(n, max), is_free, prof);
    } else {
      int kind = __atomic_load_n(&ms__real.usable_kind, __ATOMIC_RELAXED);
      if (kind == MS__USABLE_GLIBC)
        ms__preload_record_glibc(t, p, ms__glibc_block(p), is_free, prof);
      else
        ms__preload_record(t, p, ms__preload_usable_of(t, p, kind), is_free,
                           prof);
    }
  }
}
static inline __attribute__((always_inline)) void
ms__preload_count_alloc_n(void *p, size_t n, int prof) {
  if (__builtin_expect(p != NULL, 1))
    ms__preload_count_n(p, n, 0, prof);
}
static inline __attribute__((always_inline)) void
ms__preload_count_free(void *p, int prof) {
  ms__tls_t *t = &ms__tls;
  if (ms__preload_counts(t)) {
    int kind = __atomic_load_n(&ms__real.usable_kind, __ATOMIC_RELAXED);
    if (kind == MS__USABLE_GLIBC)
      ms__preload_record_glibc(t, p, ms__glibc_block(p), 1, prof);
    else
      ms__preload_record(t, p, ms__preload_usable_of(t, p, kind), 1, prof);
  }
}
/* The same for a sized operator delete(p, n) (no alignment): n is the size
 * the block was asked with (the C++ rule for sized deallocation), so its
 * usable size is known without asking where the allocator's classes are. */
static inline __attribute__((always_inline)) void
ms__preload_count_free_n(void *p, size_t n, int prof) {
  ms__preload_count_n(p, n, 1, prof);
}

/* ---- jemalloc: a free measured by jemalloc's own counter -------------------
 * Asking jemalloc for a block's usable size costs a lookup of the block's
 * extent, which its free does again. jemalloc keeps, per thread, the total
 * of the usable sizes it has freed (thread.deallocated, updated on its fast
 * path too); reading that counter before and after the free gives the
 * block's usable size for two loads. ms__preload_size_init turns this on
 * only after real blocks gave malloc_usable_size's answer this way.
 *
 * A signal handler that frees between the two reads moves the counter too.
 * While a free reads it, je_window is set; a free that finds it set (a
 * handler's) measures its block the ordinary way and adds its size to
 * je_nested. Each read of the counter is paired with a read of je_nested
 * that no handler ran across (it is retried if one did), so the handler
 * frees between the two reads are exactly the growth of je_nested. */
#define MS__JE_UNUSABLE ((uint64_t *)1) /* the thread's lookup failed */
/* This thread's counter, looked up once (mallctl, with the guard set);
 * MS__JE_UNUSABLE if it cannot be had. */
uint64_t *ms__preload_je_counter(ms__tls_t *t);
/* A free inside another one's window (a signal handler's). */
void ms__preload_je_free_nested(ms__tls_t *t, void *p);

/* Reads *d and ms__pl(t)->je_nested at one instant: no handler ran between. */
static inline __attribute__((always_inline)) uint64_t
ms__preload_je_read(ms__tls_t *t, const uint64_t *d, uint64_t *nested) {
  uint64_t n, v;
  do {
    n = __atomic_load_n(&ms__pl(t)->je_nested, __ATOMIC_RELAXED);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    v = __atomic_load_n(d, __ATOMIC_RELAXED);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
  } while (__builtin_expect(
      __atomic_load_n(&ms__pl(t)->je_nested, __ATOMIC_RELAXED) != n, 0));
  *nested = n;
  return v;
}

/* Frees p and counts it by jemalloc's counter. Returns 0 without freeing
 * when this thread has no counter (the caller measures and frees). The
 * caller has checked free_by_counter and that the guard is clear. */
static inline __attribute__((always_inline)) int
ms__preload_free_by_counter(ms__tls_t *t, void *p, int prof) {
  uint64_t *d = ms__pl(t)->je_freed;
  if (__builtin_expect(!d, 0))
    d = ms__preload_je_counter(t);
  if (__builtin_expect(d == MS__JE_UNUSABLE, 0))
    return 0;
  if (__builtin_expect(ms__pl(t)->je_window != 0, 0)) {
    ms__preload_je_free_nested(t, p);
    return 1;
  }
  ms__preload_unsample_gated(p, prof); /* reached by the free gate only */
  ms__pl(t)->je_window = 1;
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  uint64_t n0, n1;
  uint64_t before = ms__preload_je_read(t, d, &n0);
  ms__real.free(p);
  uint64_t after = ms__preload_je_read(t, d, &n1);
  ms__pl(t)->je_window = 0;
  ms__preload_record(t, NULL, after - before - (n1 - n0), 1, prof);
  return 1;
}

/* The C entry points without the PLT (cxx.c falls back to them). */
void *ms__preload_malloc(size_t size);
void ms__preload_free(void *p);
int ms__preload_posix_memalign(void **out, size_t align, size_t size);

/* Looks up the C++ operators of the runtimes loaded so far (cxx.c). */
void ms__preload_cxx_resolve(void);
/* Sends the C++ operators to their profiling copies (cxx.c); from
 * ms__preload_profile_on. */
void ms__preload_cxx_profile_on(void);

/* ---- loaded into a running program (attach.c) ---------------------------*/

/* Whether the library was loaded after the program started (dlopen with
 * RTLD_LOCAL, by memtop attach): called once, first, by the constructor,
 * which then does nothing. */
int ms__preload_loaded_late(void);
/* What memtop attach and detach call in the program: start the agent,
 * serving the allocator's figures (flags 0) and with MS__ATTACH_TRACK
 * counting from now on (other bits: MS_ENOSYS), or stop it (and restore
 * the GOT entries). 0 or a negative MS_E* code; MS_EEXIST from
 * start if it runs already or the library was not loaded late. */
MS__PRELOAD_API int ms__attach_start(unsigned flags);
MS__PRELOAD_API extern int ms__attach_late; /* loaded by memtop attach */
MS__PRELOAD_API int ms__attach_stop(void);
/* ms__attach_start's flag: count from now on (memtop attach --track), by
 * the rewritten GOT entries (got.c). The tool's side names the same bit
 * MT_ATTACH_TRACK (src/attach/attach.h). */
#define MS__ATTACH_TRACK 0x1u
/* What memtop calls in a process started with the preload whose agent is
 * not running (a fork() child that has not allocated since: issue 21):
 * starts it, with the preload's counting (flags 0; others MS_ENOSYS).
 * 0, MS_EEXIST if it runs already, MS_EINVAL if the library was loaded
 * late (ms__attach_start's), MS_EACCES if MEMSTATS_AGENT=0 says not to,
 * or ms_agent_start()'s code. */
MS__PRELOAD_API int ms__attach_wake(unsigned flags);
/* After a wake's start (preload.c): the fork child's state put back and
 * its PID noted, as its agent's start from an allocation would. */
void ms__preload_woken(void);

/* The next definition of name: dlsym(RTLD_NEXT) when started with the
 * program; loaded late, the definition the global scope bound the program
 * to, never an executable's PLT stub nor this library's (resolve.c). */
void *ms__preload_next(const char *name);
/* Loaded late: finds the allocator the program runs on (as the GOT
 * entries are bound) and makes the entry points forward to it, without
 * counting yet. 0, MS_EAGAIN (a lookup under way), MS_ENOENT (none). */
int ms__preload_resolve_late(void);

/* ---- the GOT entries, rewritten (got.c) -----------------------------------*/

/* Points every loaded module's GOT entries of the malloc family, the C++
 * operators and dlopen at this library, and keeps each old value. Returns
 * how many entries it rewrote, or MS_ENOSYS (no GOT to rewrite on this
 * machine, or no dlopen), MS_ENOENT (this library not found). */
int ms__got_hook(void);
/* Writes back every entry that still holds ours, in modules still loaded;
 * returns how many. After it, modules dlopen'ed later are not rewritten. */
int ms__got_restore(void);

#endif
