/*
 * profile.h - the heap profiler inside the target (internal): sampling,
 * stacks, buckets. Serving is the agent's (src/agent/profile_reply.c).
 *
 * sampler.c  the per-thread byte countdown (Go's and tcmalloc's sampler:
 *            exponential intervals of mean MEMSTATS_PROFILE_RATE), the
 *            slow paths the preload calls for a sampled malloc and for the
 *            free of a possibly sampled block, start-up and fork;
 * buckets.c  the bucket table: counts by (stack, size) with Go's three
 *            stages, the table of sampled addresses, all in one mapping;
 * unwind.c   the stack capture (glibc's backtrace(): libgcc_s's DWARF
 *            unwinder; unwind.c says why not libunwind);
 * cfi.c      the capture's fast path: the same rules, kept per return
 *            address;
 * linked.c   the public ms_object_alloc_at/ms_object_free_at, which
 *            sample a linked program's own objects the same way, and the
 *            sampler's start-up in a program that links libmemstats.
 *
 * The hot path's part is inline in src/preload/preload.h (and written
 * out again in linked.c): one subtract from ms__tls.prof_left per malloc,
 * one load of ms__prof_live per free.
 */
#ifndef MS_PROFILE_PROFILE_H
#define MS_PROFILE_PROFILE_H

#include <stddef.h>
#include <pthread.h>
#include <stdint.h>

#include "core/engine.h"
#include "core/hotpath.h"
#include "core/util.h"
#include "wire/profile.h"

#define MS__PROFILE_DEFAULT_RATE 524288u
#define MS__PROFILE_DEFAULT_DEPTH 64u
#define MS__PROFILE_DEFAULT_BUCKETS 4096u

/* ---- the sampler (sampler.c) ---- */

/* A per-thread PRNG (xorshift64*): never zero once seeded. */
typedef struct ms__prof_rng_s {
  uint64_t s;
} ms__prof_rng_t;
uint64_t ms__prof_rng_next(ms__prof_rng_t *r);
/* log2(x) for x >= 1, to within 0.01 (Go's fastlog2: a 64-entry table and
 * linear interpolation), with no libm. */
double ms__prof_fastlog2(double x);
/* The bytes until the next sample: an exponential draw of mean rate (as
 * Go's nextSample), at least 1; rate 1 gives 1 (every allocation); rate 0
 * gives INT64_MAX (never). */
int64_t ms__prof_next_interval(ms__prof_rng_t *r, uint64_t rate);

/* Nonzero while some sampled block may be live: a free pays one load of
 * this word (hot, read-mostly) before anything else. Written under the
 * table's lock. */
extern uint64_t ms__prof_live __attribute__((visibility("hidden")));
/* The table's filter (buckets.c): 1 << MS__PROF_FILTER_BITS saturating
 * counts of live sampled addresses by hash; an all-zero static array
 * until the table exists, so the free path may read it unconditionally. */
#define MS__PROF_FILTER_BITS 16
extern uint8_t *ms__prof_filter __attribute__((visibility("hidden")));
/* Fibonacci hashing of the address's low 32 bits: two instructions on
 * every free while a sample is live (blocks 4 GiB apart share a byte, and
 * then cost the table's lookup, never a wrong answer). */
static inline uint32_t ms__prof_filter_index(const void *p) {
  return ((uint32_t)(uintptr_t)p * 0x9e3779b1u) >> (32 - MS__PROF_FILTER_BITS);
}

/* Reads MEMSTATS_PROFILE_RATE, _DEPTH, _BUCKETS (the table's size: it is
 * mapped later, by the first sample or the first profile asked for), loads
 * the unwinder and installs the fork handlers (at rate 0 it reads the
 * environment only); from the preload's constructor, or in a program that
 * links libmemstats from linked.c's, before any sample (so no capture
 * ever runs a first-use initialisation from inside an allocation).
 * Idempotent. */
void ms__prof_init(void);
/* The rate in effect (0: off, or detached: ms__prof_end_late). */
uint64_t ms__prof_rate(void);
/* memtop attach --track (src/preload/attach.c): sampling starts now,
 * in a library loaded after the program's start. Sets the sampler up as
 * ms__prof_init does (the rate is this process's MEMSTATS_PROFILE_RATE,
 * read once), records the time (ms__prof_since_unix_ns), and has the
 * table forget what an earlier attach sampled: while detached, the frees
 * of those blocks went unseen, and their addresses may now be other
 * blocks'. ms__prof_end_late (memtop detach) makes the rate read 0 until
 * the next ms__prof_begin_late: no profile is served meanwhile. Neither
 * takes a lock. */
void ms__prof_begin_late(void);
void ms__prof_end_late(void);
/* When sampling began by the wall clock (ns since the epoch), if after
 * the program's start (ms__prof_begin_late); 0: with the process. */
uint64_t ms__prof_since_unix_ns(void);
/* A malloc'd block p of size bytes whose countdown ran out (the preload's
 * slow path): draws the next interval and records p with this stack. */
void ms__prof_sampled(ms__tls_t *t, void *p, uint64_t size);
/* Keeps bit in *gate set while any sampled block is live, cleared while
 * none is (set and cleared under the table's lock, with a release: a
 * block sampled on one thread and freed on another that got it from the
 * first sees the bit). The preload's free tests one word for this and
 * for being ready (src/preload/malloc.c). Called before the first
 * sample. */
void ms__prof_set_gate(uint64_t *gate, uint64_t bit);

/* Addresses [lo, lo + len) (16-byte aligned blocks) that frees reaching
 * the profile's filter without any other test must find held: the
 * preload's bootstrap buffer, whose blocks its free on jemalloc then
 * tells apart on the filter's slow path only (src/preload/malloc.c). Each
 * 16-byte step's byte of the filter is set for good (saturated: never
 * counted down, kept by a forget), now if the table exists, else when it
 * is made. Called before the gate can be set (before ms__prof_set_gate)
 * and before any table can be made (the preload's constructor, memtop
 * attach's start); replaces an earlier range. */
void ms__prof_pin(const void *lo, size_t len);

/* A block about to be freed (or realloc'ed) while ms__prof_live != 0:
 * if it was sampled, its bucket counts it freed. */
void ms__prof_freed(void *p);

/* A block about to be realloc'ed while ms__prof_live != 0: if it was
 * sampled, its address leaves the table (so that, once realloc has moved
 * it, the address can be handed out and sampled again meanwhile) and a
 * nonzero word is returned for ms__prof_realloced, which says whether the
 * realloc gave the block back: then its bucket counts it freed; if not
 * (a realloc that failed keeps the block), its address goes back. */
uint64_t ms__prof_realloc_begin(void *p);
void ms__prof_realloced(void *p, uint64_t taken, int freed);

/* Frees of sampled blocks that could not be recorded (see sampler.c),
 * since the process started: sent with each profile (frees_lost,
 * agent/profile_reply.c), and said in the pprof file's comment and the
 * top list (src/pprof). */
uint64_t ms__prof_lost_frees(void);
/* The agent thread is never sampled: an unwinder's first capture on a
 * thread may create or replace descriptors of its own (libunwind's
 * memory-validation pipe), which in the agent's private descriptor table
 * would be numbers the agent owns. It calls this first. */
void ms__prof_exclude_thread(void);
/* The agent's access to the process's table (from the excluded thread,
 * so a signal handler's malloc there never waits on the lock it holds):
 * ms__prof_release() unlocks. */
void ms__prof_hold(void);
void ms__prof_release(void);

/* ---- the bucket table (buckets.c) ---- */

typedef struct ms__prof_cycle_s {
  uint64_t allocs, frees, alloc_bytes, free_bytes;
} ms__prof_cycle_t;

typedef struct ms__prof_bucket_s {
  uint64_t hash;
  uint64_t size;
  uint32_t depth, truncated;
  uint32_t stack_off;         /* into the table's stack words */
  uint32_t next;              /* hash chain: index + 1, 0 ends */
  ms__prof_cycle_t active;    /* as of the last cut */
  ms__prof_cycle_t future[3]; /* by cycle % 3 (see buckets.c) */
} ms__prof_bucket_t;

typedef struct ms__prof_addr_s {
  uint64_t p;      /* 0: empty slot */
  uint64_t bucket; /* index */
} ms__prof_addr_t;

typedef struct ms__prof_table_s {
  /* Held for a sample or an unsample (a few hundred instructions) and by
   * the agent for the cut and its copy (a bounded table, ~1 ms at 20,000
   * buckets): a lock whose waiter sleeps in the kernel rather than spins
   * (a futex word: 0 free, 1 held, 2 held with waiters; see
   * ms__prof_table_lock). 0 is free, so a zeroed table is unlocked. */
  uint32_t lock;
  uint64_t cycle;
  uint32_t slot; /* cycle % 3, kept by the cut: the future[] events go to */
  uint32_t nbuckets, cap_buckets;
  uint32_t nheads; /* power of two */
  uint32_t stack_used, stack_cap;
  uint32_t naddr, cap_addr; /* cap_addr: power of two */
  uint64_t dropped;         /* samples not recorded: a table was full */
  uint64_t *live;           /* the live counter to keep (may be NULL) */
  /* A word whose gate_bit is set while any sampled block is live, kept
   * with the count (ms__prof_set_gate; gate may be NULL). */
  uint64_t *gate;
  uint64_t gate_bit;
  uint32_t *heads;
  ms__prof_bucket_t *buckets;
  uint64_t *stacks;
  ms__prof_addr_t *addrs;
  uint8_t *filter; /* 1 << 16 saturating counts of live addresses */
  void *map;
  size_t map_len;
  size_t touched; /* bytes of the mapping counted in BuckHashSys */
  size_t prefix;  /* of which the buckets' and stacks' used prefixes */
  /* Pages of the filter, the heads and the address table, and which of
   * them have been written (counted in BuckHashSys; one only read is the
   * kernel's zero page, backed by nothing): a bit a page, at the start
   * of the mapping (the table itself is in the fork section's page). */
  uint8_t *seen;
  uint32_t fixed_pages;
} ms__prof_table_t;

/* Maps the table's memory (one anonymous mapping, never malloc). Returns 0
 * or MS_ENOMEM. The sizes are rounded up where they must be powers of
 * two. */
int ms__prof_table_init(ms__prof_table_t *t, uint32_t buckets,
                        uint32_t addr_slots, uint32_t stack_words);
void ms__prof_table_destroy(ms__prof_table_t *t);
/* The table's lock, taken twice for every sample (its record and its
 * free), inline: one compare-and-swap to take it and one exchange to
 * give it back while no one waits (glibc's pthread_mutex_lock and unlock
 * cost some 110 instructions a pair of calls: callgrind); the waits go
 * through the kernel (futex), out of line. */
void ms__prof_table_lock_wait(ms__prof_table_t *t);
void ms__prof_table_wake(ms__prof_table_t *t);
static inline void ms__prof_table_lock(ms__prof_table_t *t) {
  uint32_t free_ = 0;
  if (!__builtin_expect(__atomic_compare_exchange_n(&t->lock, &free_, 1, 0,
                                                    __ATOMIC_ACQUIRE,
                                                    __ATOMIC_RELAXED),
                        1))
    ms__prof_table_lock_wait(t);
}
static inline void ms__prof_table_unlock(ms__prof_table_t *t) {
  if (__builtin_expect(__atomic_exchange_n(&t->lock, 0, __ATOMIC_RELEASE) == 2,
                       0))
    ms__prof_table_wake(t);
}
/* Whether p may be in the table (the filter; no lock). */
int ms__prof_table_maybe(const ms__prof_table_t *t, const void *p);
/* With the lock held: records p as a sampled block of size bytes from
 * stack[0, depth). Returns 0, or MS_ENOSPC when the bucket, stack or
 * address table is full (counted in dropped). */
int ms__prof_table_alloc(ms__prof_table_t *t, const uint64_t *stack,
                         uint32_t depth, int truncated, uint64_t size,
                         const void *p);
/* With the lock held: if p was sampled, counts it freed and forgets it.
 * Returns 1 if it was, 0 if not. */
int ms__prof_table_free(ms__prof_table_t *t, const void *p);
/* With the lock held, the two halves of ms__prof_table_free, for a block
 * that realloc may move or keep: take p's address out of the table
 * (returns what ms__prof_table_put and _count_free take, 0 if p was not
 * sampled), then either count the block freed or put its address back
 * into the same bucket. Both do nothing with 0. */
uint64_t ms__prof_table_take(ms__prof_table_t *t, const void *p);
void ms__prof_table_put(ms__prof_table_t *t, const void *p, uint64_t taken);
void ms__prof_table_count_free(ms__prof_table_t *t, uint64_t taken);
/* With the lock held: the filter's bytes of every 16-byte step of
 * [lo, lo + len) set for good (ms__prof_pin). */
void ms__prof_table_pin(ms__prof_table_t *t, uintptr_t lo, size_t len);
/* With the lock held: the profile cut. Counts of the cycle that ends are
 * folded into each bucket's active record, and a new cycle begins. */
void ms__prof_table_cut(ms__prof_table_t *t);
/* With the lock held: every bucket, stack and sampled address dropped,
 * the filter cleared but for its saturated bytes (pinned, or never to be
 * counted down), the table's mapping and its size kept: a profile that
 * starts again, as memtop attach --track's second attach does. */
void ms__prof_table_forget(ms__prof_table_t *t);
/* After fork, in the child: the lock is free again (the table itself was
 * copied with the address space, live samples and all). */
void ms__prof_table_after_fork(ms__prof_table_t *t);

/* The process's table (NULL when profiling is off). */
ms__prof_table_t *ms__prof_table(void);
/* The configured depth (<= MS__PROFILE_MAX_DEPTH). */
uint32_t ms__prof_depth(void);

/* ---- the unwinder (unwind.c) ---- */

/* Sets the unwinder up (from ms__prof_init, outside malloc): cfi.c's,
 * and libgcc's only where there is no cfi.c's (unwind.c). */
void ms__prof_unwind_init(void);
/* Loads libgcc's unwinder (libgcc_s, through glibc's backtrace()), cfi.c's
 * fallback, if it is not loaded: never from inside an allocation (it
 * allocates and takes the loader's lock). The agent thread calls it
 * before its first profile, and once it has run
 * MS__PROF_LIBGCC_AFTER_NS; ms__prof_unwind_pending() says whether it is
 * still to be loaded. */
void ms__prof_unwind_load(void);
int ms__prof_unwind_pending(void);
#define MS__PROF_LIBGCC_AFTER_NS (1000ull * 1000000ull)
/* "cached-cfi+glibc-backtrace" (cfi.c's unwinder, libgcc's where it
 * gives up), "cached-cfi" (libgcc's not loaded yet: a stack cfi.c gives
 * up on is recorded empty, truncated), "glibc-backtrace", or "none" (no
 * stacks: records of depth 0). */
const char *ms__prof_unwinder(void);

/* ---- the cached CFI unwinder (cfi.c) ---- */

/* Reads the main thread's stack bounds. Returns 0, or MS_ENOSYS where
 * there is no such unwinder (not x86-64, or no _dl_find_object):
 * ms__prof_cfi_unwind() then always returns MS_ENOSYS. From
 * ms__prof_unwind_init. */
int ms__prof_cfi_init(void);
/* Stores the calling thread's return addresses, innermost first (out[0]
 * the return address into the caller), as glibc's backtrace() does, at
 * most max. Returns how many, or MS_ENOSYS if it gave up (a frame it does
 * not handle, a stack it cannot bound): the caller then unwinds with
 * libgcc.
 * Takes no lock, allocates nothing, loads only inside the thread's
 * stack. */
int ms__prof_cfi_unwind(uintptr_t *out, uint32_t max);
/* The sampler's capture by the same walk: the return addresses in
 * [skip_lo, skip_lo + skip_len) at the start of the stack (this library's
 * frames, at most 16) are walked but not stored, then at most max are
 * stored in out, and *truncated says whether the stack went on above
 * them. Returns how many were stored, or MS_ENOSYS as
 * ms__prof_cfi_unwind. */
int ms__prof_cfi_capture(uint64_t *out, uint32_t max, uintptr_t skip_lo,
                         uintptr_t skip_len, int *truncated);

/* ---- the capture (unwind.c, cfi.c) ---- */

/* cfi.c's unwinder is tried first (ms__prof_unwind_init), and this
 * library's text, whose frames a capture leaves out. */
extern int ms__prof_cfi_first __attribute__((visibility("hidden")));
extern uintptr_t ms__prof_self_lo __attribute__((visibility("hidden")));
extern uintptr_t ms__prof_self_len __attribute__((visibility("hidden")));
/* libgcc's capture (unwind.c): where cfi.c's gives up or is not built. */
uint32_t ms__prof_backtrace_libgcc(uint64_t *out, uint32_t max, int *truncated);
/* Captures the calling thread's return addresses, innermost first, with
 * the library's own frames left out. Returns the number stored (at most
 * max); *truncated is set when the stack was deeper. Inline, so that the
 * sampler's call is the walk's first frame (every frame of this library
 * the walk climbs costs it a rule's lookup). */
static inline uint32_t ms__prof_backtrace(uint64_t *out, uint32_t max,
                                          int *truncated) {
  if (__builtin_expect(ms__prof_cfi_first, 1)) {
    int n = ms__prof_cfi_capture(out, max, ms__prof_self_lo, ms__prof_self_len,
                                 truncated);
    if (__builtin_expect(n >= 0, 1))
      return (uint32_t)n;
  }
  return ms__prof_backtrace_libgcc(out, max, truncated);
}

#endif
