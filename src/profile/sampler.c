/*
 * sampler.c - which allocations are sampled, as Go's and tcmalloc's
 * samplers choose them.
 *
 * Each thread counts down the bytes until its next sample
 * (ms__tls.prof_left, beside the counters, so the hot path computes one
 * TLS address): every tracked allocation subtracts its size, and only the
 * one that takes the count below zero leaves the fast path. The distance
 * to the next sample is drawn from an exponential distribution of mean
 * MEMSTATS_PROFILE_RATE bytes (Go's nextSample), so every byte allocated
 * has the same chance of being sampled whatever the pattern of sizes, and
 * memtop can unsample a bucket exactly as Go does (1/(1-exp(-size/rate))).
 * With the rate at 0 the preload never switches to its profiling copies
 * (ms__preload_profile_on, src/preload/preload.h): its malloc and free run
 * the code they ran before the profiler existed, instruction for
 * instruction (tests/integration/test_hotpath_cost.c). Should a count be
 * asked for anyway, it starts at INT64_MAX and never runs out.
 *
 * A thread's first allocation finds the count at 0 (TLS starts zeroed) and
 * seeds its PRNG here. A sampled allocation captures its stack with the
 * thread marked busy (see unwind.c), then records it under the bucket
 * table's lock. A thread that is busy (capturing, or holding the table's
 * lock) and allocates again, from the unwinder or from a signal handler,
 * skips the sample, so no capture nests and the lock is never taken twice
 * by one thread. A busy thread's free of a sampled block (a signal handler
 * again) cannot take the lock either: it is counted in lost_frees, and the
 * block stays live in the profile until its address is sampled again.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/env.h"
#include "core/sysstat.h"
#include "memstats.h"
#include "profile/profile.h"

uint64_t ms__prof_live __attribute__((aligned(64)));
static uint8_t g_no_filter[1u << MS__PROF_FILTER_BITS];
uint8_t *ms__prof_filter = g_no_filter;

/* Everything else the sampler keeps per thread: off the hot path. */
typedef struct prof_thread_s {
  ms__prof_rng_t rng;
  int seeded;
  int busy;
} prof_thread_t;
static __thread prof_thread_t g_th __attribute__((tls_model("initial-exec")));

static ms__prof_table_t g_table MS__FORK_DATA;
enum { TABLE_NONE, TABLE_MAKING, TABLE_READY, TABLE_FAILED };
static int g_table_state;            /* atomic: see table_ready() */
static uint32_t g_buckets, g_slots;  /* its size, from the environment */
static uint64_t *g_gate, g_gate_bit; /* ms__prof_set_gate */
static int g_ready; /* ms__prof_init() has run (acquire/release) */
static uint64_t g_rate = MS__PROFILE_DEFAULT_RATE;
static uint32_t g_depth = MS__PROFILE_DEFAULT_DEPTH;
static uint64_t g_lost; /* atomic: frees a busy thread could not record */
/* memtop attach --track (ms__prof_begin_late): when sampling began, by
 * the wall clock (0: with the process); whether the table is to forget
 * what it holds, done by the next thread that takes its lock; and 1 while
 * a late-loaded library is detached (no profile then). Atomics. */
static uint64_t g_since_unix_ns;
static int g_forget, g_late_off;
/* ms__prof_pin's range: set before any table can be made, read when it
 * is made. */
static uintptr_t g_pin_lo;
static size_t g_pin_len;

/* ---- the PRNG and the exponential draw ---------------------------------- */

uint64_t ms__prof_rng_next(ms__prof_rng_t *r) {
  uint64_t x = r->s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  r->s = x;
  return x * 0x2545f4914f6cdd1dull;
}

/* log2(1 + i/32), i = 0..32. */
static const double k_log2_table[33] = {0,
                                        0.044394119358453436,
                                        0.087462841250339401,
                                        0.12928301694496647,
                                        0.16992500144231237,
                                        0.20945336562894978,
                                        0.24792751344358549,
                                        0.28540221886224837,
                                        0.32192809488736235,
                                        0.35755200461808367,
                                        0.39231742277876031,
                                        0.42626475470209796,
                                        0.45943161863729726,
                                        0.49185309632967472,
                                        0.52356195605701283,
                                        0.55458885167763738,
                                        0.58496250072115619,
                                        0.61470984411520824,
                                        0.6438561897747247,
                                        0.67242534197149562,
                                        0.70043971814109218,
                                        0.7279204545631992,
                                        0.75488750216346856,
                                        0.7813597135246596,
                                        0.80735492205760406,
                                        0.83289001416474162,
                                        0.85798099512757209,
                                        0.88264304936184124,
                                        0.90689059560851848,
                                        0.93073733756288624,
                                        0.95419631038687525,
                                        0.97727992349991644,
                                        1};

double ms__prof_fastlog2(double x) {
  uint64_t bits;
  memcpy(&bits, &x, sizeof bits);
  int64_t exp = (int64_t)((bits >> 52) & 0x7ff) - 1023;
  uint64_t idx = (bits >> (52 - 5)) & 31;
  uint64_t frac = (bits >> (52 - 5 - 20)) & ((1u << 20) - 1);
  double lo = k_log2_table[idx], hi = k_log2_table[idx + 1];
  return (double)exp + lo + (hi - lo) * (double)frac * (1.0 / (1 << 20));
}

int64_t ms__prof_next_interval(ms__prof_rng_t *r, uint64_t rate) {
  if (rate == 0)
    return INT64_MAX;
  if (rate == 1)
    return 1;
  /* q uniform in [1, 2^26]: -ln(q / 2^26) * rate is exponential of mean
   * rate (Go's nextSample, with its 26 random bits). */
  uint64_t q = (ms__prof_rng_next(r) >> 38) + 1;
  double qlog = ms__prof_fastlog2((double)q) - 26;
  if (qlog > 0)
    qlog = 0;
  double x = qlog * (-0.6931471805599453 * (double)rate);
  if (x > (double)(INT64_MAX / 2))
    return INT64_MAX / 2;
  return (int64_t)x + 1;
}

/* ---- start-up -------------------------------------------------------------
 */

/* A decimal from the environment, or def; garbage reads as def. */
static uint64_t env_uint(const char *name, uint64_t def, uint64_t max) {
  const char *s = ms__env(name);
  if (s == NULL || *s == '\0')
    return def;
  uint64_t v = 0;
  for (const char *c = s; *c; c++) {
    if (*c < '0' || *c > '9' || v > (max - (uint64_t)(*c - '0')) / 10) {
      ms__debug("profile: %s is not a number up to %llu; using %llu", name,
                (unsigned long long)max, (unsigned long long)def);
      return def;
    }
    v = v * 10 + (uint64_t)(*c - '0');
  }
  return v;
}

static void busy_enter(void) {
  g_th.busy = 1;
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

static void busy_leave(void) {
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  g_th.busy = 0;
}

/* fork: the table is copied with the address space, live samples and
 * all, so the child's profile starts from the parent's; the lock is held
 * across the fork so that the copy is whole, and is free in both after. */
MS__FORK_TEXT static void fork_prepare(void) {
  busy_enter();
  ms__prof_table_lock(&g_table);
}

MS__FORK_TEXT static void fork_parent(void) {
  ms__prof_table_unlock(&g_table);
  busy_leave();
}

MS__FORK_TEXT static void fork_child(void) {
  ms__prof_table_after_fork(&g_table);
  busy_leave();
}

void ms__prof_init(void) {
  if (__atomic_load_n(&g_ready, __ATOMIC_ACQUIRE))
    return;
  g_rate = env_uint("MEMSTATS_PROFILE_RATE", MS__PROFILE_DEFAULT_RATE,
                    (uint64_t)1 << 40);
  uint64_t depth = env_uint("MEMSTATS_PROFILE_DEPTH", MS__PROFILE_DEFAULT_DEPTH,
                            MS__PROFILE_MAX_DEPTH);
  g_depth = depth == 0 ? 1 : (uint32_t)depth;
  /* At most 2^18 buckets of 32 stack words each on average: an encoded
   * profile is then at most about 82 MB, inside what a reader accepts
   * (MS__PROFILE_MAX_TOTAL), so the agent never sends one it refuses. */
  uint32_t buckets = (uint32_t)env_uint("MEMSTATS_PROFILE_BUCKETS",
                                        MS__PROFILE_DEFAULT_BUCKETS, 1u << 18);
  /* BuckHashSys is this table's: known exactly, 0 until it is made (or
   * with profiling off), whatever else is known of the program. */
  ms__sys_add_internal(MS_SYS_BUCKHASH, 0);
  if (g_rate != 0) {
    /* Room for the live samples of a heap of some 6 GiB at the default
     * rate (3/4 of 16,384 slots), for more with a larger table. */
    g_buckets = buckets;
    g_slots = buckets * 4 > 16384 ? buckets * 4 : 16384;
    ms__prof_unwind_init();
    pthread_atfork(fork_prepare, fork_parent, fork_child);
  }
  __atomic_store_n(&g_ready, 1, __ATOMIC_RELEASE);
}

/* The table is made when it is first needed, by the first sample or the
 * first profile the agent is asked for: a program that never samples (a
 * linked one whose runtime reports no addresses, one that allocates
 * little) never has its 380 KiB of filter, heads and address slots
 * backed. It is mapped with a system call and touched, nothing else: a
 * sample may make it from inside malloc. One thread makes it; one that
 * finds another making it goes without (returns 0), as a sample that
 * finds its thread busy does. */
static int table_ready(void) {
  int st = __atomic_load_n(&g_table_state, __ATOMIC_ACQUIRE);
  if (__builtin_expect(st == TABLE_READY, 1))
    return 1;
  if (st != TABLE_NONE)
    return 0;
  if (!__atomic_compare_exchange_n(&g_table_state, &st, TABLE_MAKING, 0,
                                   __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    return 0;
  if (ms__prof_table_init(&g_table, g_buckets, g_slots, g_buckets * 32) != 0) {
    ms__debug("profile: no memory for the bucket table; no samples");
    __atomic_store_n(&g_table_state, TABLE_FAILED, __ATOMIC_RELEASE);
    return 0;
  }
  g_table.live = &ms__prof_live;
  g_table.gate = g_gate;
  g_table.gate_bit = g_gate_bit;
  ms__prof_table_pin(&g_table, __atomic_load_n(&g_pin_lo, __ATOMIC_ACQUIRE),
                     __atomic_load_n(&g_pin_len, __ATOMIC_ACQUIRE));
  /* Read by every free while a sample is live, and the table made while
   * the program runs: an atomic store (the frees' loads are too). */
  __atomic_store_n(&ms__prof_filter, g_table.filter, __ATOMIC_RELEASE);
  __atomic_store_n(&g_table_state, TABLE_READY, __ATOMIC_RELEASE);
  return 1;
}

uint64_t ms__prof_rate(void) {
  return __atomic_load_n(&g_ready, __ATOMIC_ACQUIRE) &&
                 !__atomic_load_n(&g_late_off, __ATOMIC_ACQUIRE)
             ? g_rate
             : 0;
}

/* Takes the table's lock, and does first a forget that
 * ms__prof_begin_late asked for. A table being made (TABLE_MAKING, by a
 * thread that does not hold the lock) is left alone: it is new, it holds
 * nothing. */
static void lock_table(void) {
  ms__prof_table_lock(&g_table);
  if (__builtin_expect(__atomic_load_n(&g_forget, __ATOMIC_ACQUIRE) != 0, 0) &&
      __atomic_load_n(&g_table_state, __ATOMIC_ACQUIRE) != TABLE_MAKING) {
    __atomic_store_n(&g_forget, 0, __ATOMIC_RELAXED);
    if (__atomic_load_n(&g_table_state, __ATOMIC_ACQUIRE) == TABLE_READY)
      ms__prof_table_forget(&g_table); /* the pins stay */
  }
}

void ms__prof_pin(const void *lo, size_t len) {
  ms__prof_table_lock(&g_table);
  __atomic_store_n(&g_pin_lo, (uintptr_t)lo, __ATOMIC_RELEASE);
  __atomic_store_n(&g_pin_len, len, __ATOMIC_RELEASE);
  if (__atomic_load_n(&g_table_state, __ATOMIC_ACQUIRE) == TABLE_READY)
    ms__prof_table_pin(&g_table, (uintptr_t)lo, len);
  ms__prof_table_unlock(&g_table);
}

/* Called on the thread memtop's ptrace call runs on, interrupted
 * wherever it was: perhaps inside a sample of an earlier attach's, holding
 * the table's lock. So no lock here: the forget is left to the next
 * thread that takes it (lock_table), before anything it records. */
void ms__prof_begin_late(void) {
  ms__prof_init();
  __atomic_store_n(&g_since_unix_ns, ms__now_unix_ns(), __ATOMIC_RELAXED);
  __atomic_store_n(&g_forget, 1, __ATOMIC_RELEASE);
  __atomic_store_n(&g_late_off, 0, __ATOMIC_RELEASE);
}

void ms__prof_end_late(void) {
  __atomic_store_n(&g_late_off, 1, __ATOMIC_RELEASE);
}

uint64_t ms__prof_since_unix_ns(void) {
  return __atomic_load_n(&g_since_unix_ns, __ATOMIC_RELAXED);
}

uint32_t ms__prof_depth(void) {
  return g_depth;
}

void ms__prof_set_gate(uint64_t *gate, uint64_t bit) {
  ms__prof_table_lock(&g_table);
  g_gate = gate;
  g_gate_bit = bit;
  if (__atomic_load_n(&g_table_state, __ATOMIC_ACQUIRE) == TABLE_READY) {
    g_table.gate = gate;
    g_table.gate_bit = bit;
    if (g_table.naddr != 0)
      __atomic_fetch_or(gate, bit, __ATOMIC_RELEASE);
  }
  ms__prof_table_unlock(&g_table);
}

ms__prof_table_t *ms__prof_table(void) {
  if (ms__prof_rate() == 0)
    return NULL;
  /* The agent's thread: made here if nothing has sampled yet (an empty
   * profile, at the process's rate); NULL only if it cannot be. */
  return table_ready() ? &g_table : NULL;
}

uint64_t ms__prof_lost_frees(void) {
  return __atomic_load_n(&g_lost, __ATOMIC_RELAXED);
}

/* ---- the slow paths -------------------------------------------------------
 */

void ms__prof_sampled(ms__tls_t *t, void *p, uint64_t size) {
  if (!__atomic_load_n(&g_ready, __ATOMIC_ACQUIRE)) {
    t->prof_left = 0; /* asked again once the sampler is ready */
    return;
  }
  prof_thread_t *th = &g_th;
  if (g_rate == 0) {
    t->prof_left = INT64_MAX;
    return;
  }
  if (!th->seeded) {
    uint64_t seed = (uint64_t)(uintptr_t)th ^ (uint64_t)ms__now_mono_ns() ^
                    ((uint64_t)(uintptr_t)p << 17);
    th->rng.s = seed ? seed : 0x9e3779b97f4a7c15ull;
    th->seeded = 1;
    /* The first allocation of the thread starts its count. */
    t->prof_left = ms__prof_next_interval(&th->rng, g_rate) - (int64_t)size;
    if (t->prof_left >= 0)
      return;
  }
  if (th->busy) {
    t->prof_left = 0; /* nested: the next allocation is sampled instead */
    return;
  }
  t->prof_left = ms__prof_next_interval(&th->rng, g_rate);
  if (p == NULL)
    return;
  if (!table_ready())
    return; /* no table (yet): this one goes unsampled */
  busy_enter();
  uint64_t stack[MS__PROFILE_MAX_DEPTH];
  int truncated = 0;
  uint32_t depth = ms__prof_backtrace(stack, g_depth, &truncated);
  lock_table();
  ms__prof_table_alloc(&g_table, stack, depth, truncated, size, p);
  ms__prof_table_unlock(&g_table);
  busy_leave();
}

void ms__prof_freed(void *p) {
  /* The published filter is all zero until the table is ready (and
   * stays so at rate 0): one load says both that there is a table and
   * that p may be in it. */
  if (p == NULL ||
      __atomic_load_n(
          &__atomic_load_n(&ms__prof_filter,
                           __ATOMIC_ACQUIRE)[ms__prof_filter_index(p)],
          __ATOMIC_RELAXED) == 0)
    return;
  if (g_th.busy) {
    __atomic_fetch_add(&g_lost, 1, __ATOMIC_RELAXED);
    return;
  }
  busy_enter();
  lock_table();
  ms__prof_table_free(&g_table, p);
  ms__prof_table_unlock(&g_table);
  busy_leave();
}

uint64_t ms__prof_realloc_begin(void *p) {
  if (p == NULL || !__atomic_load_n(&g_ready, __ATOMIC_ACQUIRE) ||
      g_rate == 0 ||
      __atomic_load_n(&g_table_state, __ATOMIC_ACQUIRE) != TABLE_READY ||
      !ms__prof_table_maybe(&g_table, p))
    return 0;
  if (g_th.busy) {
    __atomic_fetch_add(&g_lost, 1, __ATOMIC_RELAXED);
    return 0;
  }
  busy_enter();
  lock_table();
  uint64_t taken = ms__prof_table_take(&g_table, p);
  ms__prof_table_unlock(&g_table);
  busy_leave();
  return taken;
}

void ms__prof_realloced(void *p, uint64_t taken, int freed) {
  if (taken == 0)
    return;
  busy_enter();
  lock_table();
  if (freed)
    ms__prof_table_count_free(&g_table, taken);
  else
    ms__prof_table_put(&g_table, p, taken);
  ms__prof_table_unlock(&g_table);
  busy_leave();
}

void ms__prof_exclude_thread(void) {
  busy_enter(); /* and never left */
}

/* The agent's access: the table locked, this thread marked busy (a signal
 * handler's malloc on it then skips its sample instead of waiting on the
 * lock this thread holds). */
void ms__prof_hold(void) {
  lock_table();
}

void ms__prof_release(void) {
  ms__prof_table_unlock(&g_table);
  /* The agent thread stays excluded (ms__prof_exclude_thread). */
}
