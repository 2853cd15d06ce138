/*
 * shard.c - consistent heap statistics without stopping threads.
 *
 * A C port of Go's consistentHeapStats (runtime/mstats.go), with one
 * change: Go's writers are Ps that add atomically into one shared block;
 * here every thread owns a shard (a block of three generations), so the hot
 * path is plain stores to a cache line nobody else writes.
 *
 * Writer (any thread, on every accounted event):
 *   seq = seq + 1            (now odd: "I am writing")
 *   g = gen                  (the generation being written)
 *   stats[g] += delta        (every field of one event, in one slot)
 *   seq = seq + 1            (even again, release)
 *
 * Reader (one at a time, under the snapshot lock):
 *   cur = gen; gen = cur + 1 (mod 3)
 *   heavy barrier            (membarrier(2): see below)
 *   wait until every shard's seq is even (writers caught mid-update)
 *   per shard: stats[cur] += stats[prev]; stats[prev] = 0
 *   the snapshot is the sum over shards of stats[cur]
 *
 * Three generations: one being written, one holding each shard's total as of
 * the last read, and one already zero so writers can move into it the moment
 * gen turns. Every event lands whole in one slot, so a snapshot never shows
 * half of one, and since a reader's cut is a single store to gen, an event
 * that happened after another (a free after its malloc, on any thread) is
 * never in the cut without it: Mallocs - Frees never goes negative.
 *
 * The barrier. A writer's odd seq store must be visible to the reader before
 * the writer's load of gen, or a reader could miss a writer that is about to
 * write into the old slot. That needs a StoreLoad fence, which costs tens of
 * cycles on every malloc. Instead the reader pays: after turning gen it calls
 * membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED), which runs a full barrier on
 * every CPU running one of our threads. Afterwards each writer either has its
 * odd seq visible to us (and we wait for it) or will load the new gen. Where
 * membarrier is missing, writers fall back to a real fence.
 *
 * Representation (hotpath.h): gen is stored as the byte offset of its slot
 * in a shard, with the "writers must fence" flag in bit 0, so the writer's
 * one load of gen also tells it whether to fence (it then fences and loads
 * gen again: the load it uses still follows the fence). A thread without a
 * shard points at ms__shard_none, whose seq is always odd, so the test for
 * "nested in a signal handler" sends it to the slow path as well.
 *
 * Threads that have no shard (not yet registered, exited, or nested inside
 * a signal handler that interrupted an update) write to the global shard
 * with atomic adds, bracketed by a per-generation in-flight count that the
 * reader waits on.
 *
 * Thread exit marks the shard DEAD; the next new thread adopts it, counts
 * and all, so nothing is lost and a program that starts 10,000 threads uses
 * a handful of shards. fork() marks every shard but the forking thread's
 * DEAD in the child: the child starts from the parent's totals.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
/* glibc 2.32's __libc_single_threaded. */
#if defined(__GLIBC__) &&                                                      \
    (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
#include <sys/single_threaded.h>
#define MS_HAVE_SINGLE_THREADED 1
#endif

#include "core/feed.h"
#include "core/shard.h"

#ifndef MEMBARRIER_CMD_PRIVATE_EXPEDITED
#define MEMBARRIER_CMD_PRIVATE_EXPEDITED (1 << 3)
#define MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED (1 << 4)
#endif

#define RLX __ATOMIC_RELAXED
#define ACQ __ATOMIC_ACQUIRE
#define REL __ATOMIC_RELEASE
#define SC __ATOMIC_SEQ_CST

enum { SHARD_LIVE = 1, SHARD_DEAD = 2 };

#define DELTA_WORDS (sizeof(ms__delta_t) / sizeof(uint64_t))

/* The class table of ms__size_class (sizeclass.h), generated from its
 * arithmetic: entry i is the class of size 8 * i (0 for i = 0). Read by
 * every allocation, a fork child's first ones included: kept with the
 * relocated read-only data (RELRO) rather than in .rodata. A fork copies
 * the page table entries of that segment (the loader wrote in it), not
 * those of .rodata, whose page a child faulted in again at its first
 * malloc or free. */
const uint8_t ms__class_by8[MS__CLASS_TABLE_MAX / 8 + 1]
    __attribute__((section(".data.rel.ro.ms_class_by8"))) = {
        0,  0,  1,  2,  2,  3,  3,  4,  4,  5,  5,  6,  6,  7,  7,  8,  8,
        9,  9,  9,  9,  10, 10, 10, 10, 11, 11, 11, 11, 12, 12, 12, 12, 13,
        13, 13, 13, 13, 13, 13, 13, 14, 14, 14, 14, 14, 14, 14, 14, 15, 15,
        15, 15, 15, 15, 15, 15, 16, 16, 16, 16, 16, 16, 16, 16, 17, 17, 17,
        17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 18, 18, 18, 18,
        18, 18, 18, 18, 18, 18, 18, 18, 18, 18, 18, 18, 19, 19, 19, 19, 19,
        19, 19, 19, 19, 19, 19, 19, 19, 19, 19, 19, 20, 20, 20, 20, 20, 20,
        20, 20, 20, 20, 20, 20, 20, 20, 20, 20};

/* Thread state (hotpath.h): the shard, or ms__shard_none whose seq is odd
 * and never changes, so a thread without a shard fails the fast path's
 * one test. */
ms__shard_t ms__shard_none = {.seq = 1};
__thread ms__tls_t ms__tls = {.shard = &ms__shard_none};

/* The generation writers use, as a slot offset (hotpath.h); writers fence
 * until membarrier is registered. */
uint64_t ms__gen_word = MS__GEN_OFF(0) | MS__GEN_FENCE;

static inline uint32_t gen_index(uint64_t w) {
  return (uint32_t)(((w & ~(uint64_t)MS__GEN_FENCE) - MS__GEN_OFF(0)) /
                    sizeof(ms__delta_t));
}

static inline ms__delta_t *slot_at(ms__shard_t *s, uint64_t w) {
  return (ms__delta_t *)((char *)s + (w & ~(uint64_t)MS__GEN_FENCE));
}

static ms__shard_t g_global;
static ms__shard_t *g_shards; /* every shard ever made (a list) */
/* The first shard made (the main thread's, nearly always: the preload's
 * first allocations are the loader's and the constructors'), in the fork
 * section (core/feed.h) rather than mapped: the page a fork child writes
 * in its fork handlers is then the page its first malloc writes, and the
 * one a parent writes in its handlers the one its next malloc writes: a
 * copy-on-write fault fewer in each, every fork. The others are mapped. */
static ms__shard_t g_first MS__FORK_DATA;
static int g_first_taken;
unsigned ms__fed; /* MS__FEED_* flags (engine.h) */
static pthread_key_t g_key;
static int g_key_ok;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static uint64_t g_reads, g_spins, g_shards_total;

/* ---- helpers --------------------------------------------------------------*/

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
#endif
}

static inline uint64_t ld(const uint64_t *p) {
  return __atomic_load_n(p, RLX);
}
static inline void st(uint64_t *p, uint64_t v) {
  __atomic_store_n(p, v, RLX);
}
/* The owner is the only writer of its slot: load and store, no RMW. */
static inline void add_own(uint64_t *p, uint64_t d) {
  st(p, ld(p) + d);
}

unsigned ms__engine_fed(void) {
  return __atomic_load_n(&ms__fed, RLX);
}

static void thread_exit(void *arg) {
  ms__shard_t *s = arg;
  /* Frees that come after this destructor go to the global shard. */
  ms__tls.mode = 2;
  ms__tls.shard = &ms__shard_none;
  if (s)
    __atomic_store_n(&s->state, SHARD_DEAD, REL);
}

/* 1 when engine_init left membarrier's registration to the first cut:
 * in a process with threads already (the library dlopen'ed late, by
 * memtop attach with one of the program's threads held stopped for it) the
 * kernel waits for an RCU grace period to register, 7 to 12 ms with 8
 * threads busy on 2 CPUs; the first cut is the agent's thread's, the
 * program running. Writers fence until then. */
static int g_register_at_cut;

static int single_threaded(void) {
#ifdef MS_HAVE_SINGLE_THREADED
  return __libc_single_threaded;
#else
  return 1;
#endif
}

static void engine_init(void) {
  if (!single_threaded())
    g_register_at_cut = 1;
  else if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0,
                   0) == 0)
    __atomic_fetch_and(&ms__gen_word, ~(uint64_t)MS__GEN_FENCE, REL);
  if (pthread_key_create(&g_key, thread_exit) == 0)
    g_key_ok = 1;
}

void ms__engine_init(void) {
  pthread_once(&g_once, engine_init);
}

/* Finds a DEAD shard to adopt or maps a new one. Lock-free (it may run in
 * a fork child or inside malloc); never calls malloc. A shard's counts are
 * deltas that the reader sums over every shard, whoever wrote them: a new
 * thread simply adopts a dead thread's shard, counts and all, and goes on
 * adding to it. Nothing is folded or lost, and a program that starts
 * 10,000 threads uses as many shards as it ever had threads at once. */
static ms__shard_t *shard_acquire(void) {
  for (ms__shard_t *s = __atomic_load_n(&g_shards, ACQ); s; s = s->next) {
    uint32_t expect = SHARD_DEAD;
    if (__atomic_load_n(&s->state, RLX) == SHARD_DEAD &&
        __atomic_compare_exchange_n(&s->state, &expect, SHARD_LIVE, 0, ACQ,
                                    RLX))
      return s;
  }
  int taken = 0;
  void *mem = &g_first; /* zeroes, as a mapping */
  if (__atomic_load_n(&g_first_taken, RLX) ||
      !__atomic_compare_exchange_n(&g_first_taken, &taken, 1, 0, ACQ, RLX)) {
    mem = mmap(NULL, sizeof(ms__shard_t), PROT_READ | PROT_WRITE,
               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED)
      return NULL;
  }
  ms__shard_t *s = mem; /* mmap gives zeroes */
  s->state = SHARD_LIVE;
  ms__shard_t *head = __atomic_load_n(&g_shards, RLX);
  do {
    s->next = head;
  } while (!__atomic_compare_exchange_n(&g_shards, &head, s, 1, REL, RLX));
  __atomic_fetch_add(&g_shards_total, 1, RLX);
  return s;
}

/* The slow path of a writer with no shard yet. */
static ms__shard_t *shard_register(void) {
  ms__tls.mode = 2; /* what we cause meanwhile goes to the global shard */
  if (pthread_once(&g_once, engine_init) != 0)
    return NULL;
  ms__shard_t *s = shard_acquire();
  if (!s)
    return NULL; /* keep using the global shard */
  if (g_key_ok && pthread_setspecific(g_key, s) != 0) {
    __atomic_store_n(&s->state, SHARD_DEAD, REL);
    return NULL;
  }
  ms__tls.shard = s;
  ms__tls.mode = 1;
  return s;
}

/* ---- writers
 * ---------------------------------------------------------------*/

/* An update of the global shard: atomic adds, counted in flight per
 * generation (the re-check of gen after announcing closes the race with a
 * reader turning it in between). */
static ms__delta_t *global_begin(uint32_t *gp) {
  ms__tls.busy++;
  __atomic_signal_fence(SC);
  for (;;) {
    uint64_t w = __atomic_load_n(&ms__gen_word, SC);
    uint32_t g = gen_index(w);
    __atomic_fetch_add(&g_global.inflight[g], 1, SC);
    if (gen_index(__atomic_load_n(&ms__gen_word, SC)) == g) {
      *gp = g;
      return &g_global.stats[g];
    }
    __atomic_fetch_sub(&g_global.inflight[g], 1, SC);
  }
}

static void global_end(uint32_t g) {
  __atomic_fetch_sub(&g_global.inflight[g], 1, REL);
  __atomic_signal_fence(SC);
  ms__tls.busy--;
}

int ms__engine_busy_here(void) {
  ms__shard_t *s = ms__tls.shard;
  if (__atomic_load_n(&ms__tls.busy, RLX) != 0)
    return 1;
  /* ms__shard_none's seq is odd by design (hotpath.h): no update there. */
  return s != &ms__shard_none && (ld(&s->seq) & 1) != 0;
}

/* Opens an update bracket. Returns the slot to write, and whether it is the
 * caller's own shard (plain stores) or the global one (atomic adds). */
typedef struct bracket_s {
  ms__shard_t *own;
  ms__delta_t *d;
  uint64_t seq;
  uint32_t g;
} bracket_t;

static inline void bracket_begin(bracket_t *b) {
  ms__shard_t *s = ms__tls.shard;
  if (__builtin_expect(s == &ms__shard_none, 0)) {
    s = ms__tls.mode == 0 ? shard_register() : NULL;
    if (!s) {
      b->own = NULL;
      b->d = global_begin(&b->g);
      return;
    }
  }
  uint64_t q = ld(&s->seq);
  if (__builtin_expect(q & 1, 0)) {
    /* A signal handler interrupted our own update: do not touch the slot
     * the interrupted code is in the middle of writing. */
    b->own = NULL;
    b->d = global_begin(&b->g);
    return;
  }
  st(&s->seq, q + 1);
  __atomic_signal_fence(SC);
  uint64_t w = __atomic_load_n(&ms__gen_word, ACQ);
  if (__builtin_expect(w & MS__GEN_FENCE, 0)) {
    __atomic_thread_fence(SC);
    w = __atomic_load_n(&ms__gen_word, ACQ);
  }
  b->own = s;
  b->seq = q;
  b->d = slot_at(s, w);
}

static inline void bracket_add(bracket_t *b, uint64_t *field, uint64_t d) {
  if (b->own)
    add_own(field, d);
  else
    __atomic_fetch_add(field, d, RLX);
}

static inline void bracket_end(bracket_t *b) {
  if (b->own)
    __atomic_store_n(&b->own->seq, b->seq + 2, REL);
  else
    global_end(b->g);
}

/* One object event off the fast path (hotpath.h): a thread with no shard
 * yet, a signal handler nested in an update, a large size (over
 * MS__MAX_SMALL). */
void ms__track_slow(uint64_t size, int is_free) {
  bracket_t b;
  bracket_begin(&b);
  int c = ms__size_class(size);
  if (is_free) {
    bracket_add(&b, c >= 0 ? &b.d->small_frees[c] : &b.d->large_frees, 1);
    bracket_add(&b, &b.d->free_bytes, size);
  } else {
    bracket_add(&b, c >= 0 ? &b.d->small_allocs[c] : &b.d->large_allocs, 1);
    bracket_add(&b, &b.d->alloc_bytes, size);
  }
  bracket_end(&b);
}

void ms__track_mapped(uint64_t usable, uint64_t mapped, int is_free) {
  bracket_t b;
  bracket_begin(&b);
  int c = ms__size_class(usable);
  if (is_free) {
    bracket_add(&b, c >= 0 ? &b.d->small_frees[c] : &b.d->large_frees, 1);
    bracket_add(&b, &b.d->free_bytes, usable);
    bracket_add(&b, &b.d->mapped_free_usable, usable);
    bracket_add(&b, &b.d->mapped_free, mapped);
  } else {
    bracket_add(&b, c >= 0 ? &b.d->small_allocs[c] : &b.d->large_allocs, 1);
    bracket_add(&b, &b.d->alloc_bytes, usable);
    bracket_add(&b, &b.d->mapped_alloc_usable, usable);
    bracket_add(&b, &b.d->mapped_alloc, mapped);
  }
  bracket_end(&b);
}

void ms__track_alloc(uint64_t size) {
  ms__track_alloc_in(&ms__tls, size);
}

void ms__track_free(uint64_t size) {
  ms__track_free_in(&ms__tls, size);
}

void ms__track_enable(void) {
  ms__feed(MS__FEED_OBJECTS | MS__FEED_TRACKED);
}

/* Why tracking is off, as a provider name (engine.h); empty: it is not. */
static char g_track_off[MS_NAME_MAX];

void ms__track_off(const char *why) {
  static const char head[] = "tracked(off: ";
  size_t n = sizeof head - 1;
  memcpy(g_track_off, head, n);
  /* The name comes from the loader (a library's file name): printable
   * characters only, and room kept for the closing parenthesis. */
  for (; why && *why && n + 2 < sizeof g_track_off; why++)
    g_track_off[n++] = (*why >= 0x20 && *why < 0x7f) ? *why : '?';
  g_track_off[n++] = ')';
  g_track_off[n] = '\0';
}

const char *ms__track_off_reason(void) {
  return g_track_off[0] ? g_track_off : NULL;
}

MS_EXTERN void ms_object_alloc(uint64_t size) {
  ms__feed(MS__FEED_OBJECTS | MS__FEED_API);
  ms__track_alloc(size);
}

MS_EXTERN void ms_object_free(uint64_t size) {
  ms__feed(MS__FEED_OBJECTS | MS__FEED_API);
  ms__track_free(size);
}

MS_EXTERN int ms_heap_move(ms_span_state_t from, ms_span_state_t to,
                           uint64_t bytes) {
  if ((unsigned)from >= MS_SPAN__COUNT || (unsigned)to >= MS_SPAN__COUNT)
    return MS_EINVAL;
  ms__feed(MS__FEED_HEAP | MS__FEED_API);
  if (from == to || bytes == 0)
    return 0;
  bracket_t b;
  bracket_begin(&b);
  if (from != MS_SPAN_NONE)
    bracket_add(&b, &b.d->heap[from], (uint64_t)0 - bytes);
  if (to != MS_SPAN_NONE)
    bracket_add(&b, &b.d->heap[to], bytes);
  bracket_end(&b);
  return 0;
}

/* ---- the reader
 * ------------------------------------------------------------*/

static void wait_even(ms__shard_t *s) {
  unsigned spins = 0;
  while (__atomic_load_n(&s->seq, ACQ) & 1) {
    if (++spins > 64)
      sched_yield(); /* the writer was preempted mid-update */
    else
      cpu_relax();
  }
  if (spins)
    __atomic_fetch_add(&g_spins, spins, RLX);
}

static void slot_merge(ms__delta_t *dst, ms__delta_t *src) {
  uint64_t *d = (uint64_t *)dst, *s = (uint64_t *)src;
  for (size_t i = 0; i < DELTA_WORDS; i++) {
    uint64_t v = ld(&s[i]);
    if (v) {
      st(&d[i], ld(&d[i]) + v);
      st(&s[i], 0);
    }
  }
}

static void slot_sum(ms__delta_t *acc, const ms__delta_t *src) {
  uint64_t *a = (uint64_t *)acc;
  const uint64_t *s = (const uint64_t *)src;
  for (size_t i = 0; i < DELTA_WORDS; i++)
    a[i] += ld(&s[i]);
}

/* membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED); if the process is not
 * registered (a fork child, on a kernel that would not carry the
 * parent's registration over), registered first. Returns 0, or the
 * system call's negative errno. */
static int heavy_barrier(void) {
  if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0)
    return 0;
  if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0,
              0) != 0)
    return -errno;
  return syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0
             ? 0
             : -errno;
}

/* The consistent cut. Caller holds the snapshot lock. */
static void take_cut(ms__delta_t *out) {
  pthread_once(&g_once, engine_init);
  /* Readers are serialised and the only writers of the word (but for
   * engine_init, done by now, and the fork child, single-threaded). */
  uint64_t w = __atomic_load_n(&ms__gen_word, RLX);
  /* Registered now (engine_init left it here): this cut is the first
   * without the fence flag, its heavy barrier the first membarrier. A
   * writer that still saw the flag fences as well, which is only more. */
  if ((w & MS__GEN_FENCE) && g_register_at_cut) {
    g_register_at_cut = 0;
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0,
                0) == 0)
      w &= ~(uint64_t)MS__GEN_FENCE;
  }
  uint64_t fence = w & MS__GEN_FENCE;
  uint32_t cur = gen_index(w);
  uint32_t next = (cur + 1) % 3, prev = (cur + 2) % 3;
  __atomic_store_n(&ms__gen_word, MS__GEN_OFF(next) | fence, SC);
  if (fence || heavy_barrier() != 0) {
    /* No membarrier: writers fence themselves from now on. A writer that
     * loaded gen before it saw the fence flag is waited for below only if
     * its odd seq is visible, so the flag is set before any cut relies on
     * it. */
    __atomic_store_n(&ms__gen_word, MS__GEN_OFF(next) | MS__GEN_FENCE, SC);
    __atomic_thread_fence(SC);
  }

  /* Wait for writers caught mid-update in the old generation. */
  for (ms__shard_t *s = __atomic_load_n(&g_shards, ACQ); s; s = s->next)
    wait_even(s);
  unsigned spins = 0;
  while (__atomic_load_n(&g_global.inflight[cur], ACQ) != 0) {
    if (++spins > 64)
      sched_yield();
  }

  memset(out, 0, sizeof *out);
  /* The global shard: merge like any other. Its writers are in `next`. */
  slot_merge(&g_global.stats[cur], &g_global.stats[prev]);
  for (ms__shard_t *s = __atomic_load_n(&g_shards, ACQ); s; s = s->next) {
    slot_merge(&s->stats[cur], &s->stats[prev]);
    slot_sum(out, &s->stats[cur]);
  }
  slot_sum(out, &g_global.stats[cur]);
  __atomic_fetch_add(&g_reads, 1, RLX);
}

void ms__shards_read(ms__shard_totals_t *t) {
  ms__delta_t d;
  take_cut(&d);
  memset(t, 0, sizeof *t);
  for (int i = 0; i < MS_SPAN__COUNT; i++)
    t->heap[i] = (int64_t)d.heap[i];
  t->alloc_bytes = d.alloc_bytes;
  t->free_bytes = d.free_bytes;
  t->mapped_alloc_usable = d.mapped_alloc_usable;
  t->mapped_free_usable = d.mapped_free_usable;
  t->mapped_alloc = d.mapped_alloc;
  t->mapped_free = d.mapped_free;
  t->mallocs = d.large_allocs;
  t->frees = d.large_frees;
  for (int c = 0; c < MS__NCLASSES; c++) {
    t->class_allocs[c] = d.small_allocs[c];
    t->class_frees[c] = d.small_frees[c];
    t->mallocs += d.small_allocs[c];
    t->frees += d.small_frees[c];
  }
}

/* ---- fork
 * ------------------------------------------------------------------*/

/* In the child only the forking thread lives on. Every other shard is
 * DEAD (its totals are the parent's and stay counted); a writer the fork
 * caught mid-update will never finish, so its seq is made even. */
MS__FORK_TEXT void ms__shards_after_fork_child(void) {
  ms__shard_t *mine = ms__tls.shard;
  for (ms__shard_t *s = __atomic_load_n(&g_shards, ACQ); s; s = s->next) {
    if (s == mine)
      continue;
    uint64_t q = ld(&s->seq);
    if (q & 1)
      st(&s->seq, q + 1);
    if (__atomic_load_n(&s->state, RLX) == SHARD_LIVE)
      __atomic_store_n(&s->state, SHARD_DEAD, REL);
  }
  for (int g = 0; g < 3; g++)
    if (__atomic_load_n(&g_global.inflight[g], RLX) != 0)
      __atomic_store_n(&g_global.inflight[g], 0, RLX);
  /* No system call here: the child's mm carries the registration over
   * (a fork copies it; an exec clears it), and a kernel that did not is
   * registered at the child's first cut (heavy_barrier). Most children
   * never take one. */
}

void ms__engine_stats(ms__engine_stats_t *out) {
  memset(out, 0, sizeof *out);
  out->reads = __atomic_load_n(&g_reads, RLX);
  out->wait_spins = __atomic_load_n(&g_spins, RLX);
  out->shards_total = __atomic_load_n(&g_shards_total, RLX);
  for (ms__shard_t *s = __atomic_load_n(&g_shards, ACQ); s; s = s->next)
    if (__atomic_load_n(&s->state, RLX) == SHARD_LIVE)
      out->shards_live++;
}
