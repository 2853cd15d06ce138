/*
 * snapshot.c - ms_snapshot_read(): a snapshot composed of the process's
 * identity, the engine's consistent cut (src/core), the providers'
 * figures (src/providers), the mappings the allocator does not see and the
 * kernel's view, in one caller-owned struct; its finishing step (Alloc,
 * Sys), its self-checks, and the older layouts a caller may ask for.
 */
#include <fcntl.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/env.h"
#include "common/fields.h"
#include "common/procfs.h"
#include "compose/compose_int.h"
#include "compose/snapshot.h"
#include "core/engine.h"
#include "core/util.h"
#include "providers/mappings.h"
#include "providers/providers.h"

/* Snapshots taken in this process, under the reader lock. */
static uint64_t g_seq;

/* Forks this process's image has been through (counted by the child
 * handler): the caches below hold the count they were filled at, so that
 * a child never takes its parent's for its own (a PID alone could be an
 * ancestor's that was reused), and the child handler writes nothing but
 * this count and its lock, on the fork section's page: the caches are
 * not in that section, and a child that takes no snapshot never copies
 * their pages. */
static unsigned g_forks MS__FORK_DATA;

/* Identity changes only with fork: cached per PID and fork, under the
 * reader lock. */
static struct {
  int pid;
  unsigned forks;
  uint64_t start_time;
  char comm[MS_NAME_MAX];
} g_ident;

/* The smaps_rollup cache: its own lock, because a read can take tens of
 * milliseconds (10 ms per GiB resident) and must not hold up the rest of a
 * snapshot's readers. Its figures belong to one PID: a forked child reads
 * its own. */
static pthread_mutex_t g_smaps_lock MS__FORK_DATA = PTHREAD_MUTEX_INITIALIZER;
static struct {
  int pid;          /* whose figures these are; 0: none yet */
  unsigned forks;   /* g_forks when they were read */
  uint64_t read_at; /* CLOCK_MONOTONIC of the last read */
  uint64_t cost_ns; /* how long it took */
  uint64_t floor_ns;
  uint64_t reads;
  ms__smaps_t figures;
} g_smaps = {0, 0, 0, 0, 1000000000ull, 0, {0, 0, 0, 0, 0}};

/* The reader lock's fork handlers are the engine's (core/engine.c); the
 * smaps cache's lock is never held with it, so the order in which the two
 * are taken around a fork does not matter. */
MS__FORK_TEXT static void atfork_prepare(void) {
  pthread_mutex_lock(&g_smaps_lock);
}
MS__FORK_TEXT static void atfork_parent(void) {
  pthread_mutex_unlock(&g_smaps_lock);
}
/* A plain store, not pthread_mutex_unlock: a fork child's handlers may
 * only do async-signal-safe work, and the page of libc's code the unlock
 * is on is one more fault in every child. */
MS__FORK_TEXT static void atfork_child(void) {
  g_forks++;
  g_smaps_lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
}

__attribute__((constructor)) static void snapshot_init(void) {
  pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

static void fill_identity(ms_snapshot_t *s) {
  int pid = (int)getpid();
  if (g_ident.pid != pid || g_ident.forks != g_forks) {
    char buf[1024];
    g_ident.start_time = 0;
    g_ident.comm[0] = '\0';
    if (ms__read_small_file("/proc/self/stat", buf, sizeof buf) > 0)
      ms__parse_proc_stat(buf, g_ident.comm, sizeof g_ident.comm,
                          &g_ident.start_time);
    g_ident.pid = pid;
    g_ident.forks = g_forks;
  }
  s->pid = pid;
  s->start_time = g_ident.start_time;
  memcpy(s->comm, g_ident.comm, sizeof s->comm);
}

static void fill_kernel(ms_snapshot_t *s) {
  char buf[256];
  if (ms__read_small_file("/proc/self/statm", buf, sizeof buf) <= 0)
    return;
  unsigned long long vsz, rss;
  if (sscanf(buf, "%llu %llu", &vsz, &rss) != 2)
    return;
  uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
  s->kernel_vsz = vsz * page;
  s->kernel_rss = rss * page;
  ms__set_quality(s, MS_F_KERNEL_VSZ, MS_Q_EXACT, -1);
  ms__set_quality(s, MS_F_KERNEL_RSS, MS_Q_EXACT, -1);
  /* statm's third figure is the file and shmem pages of RSS: the rest is
   * RssAnon of /proc/self/status, from the same read (task_statm). */
  unsigned long long shared;
  if (sscanf(buf, "%*u %*u %llu", &shared) == 1 && shared <= rss) {
    s->kernel_anon_rss = (rss - shared) * page;
    ms__set_quality(s, MS_F_KERNEL_ANON_RSS, MS_Q_EXACT, -1);
  }
  /* statm's third figure splits in /proc/self/status into the file-backed
   * and the shared memory: what RssAnon leaves out, said. */
  char st[4096];
  if (ms__read_small_file("/proc/self/status", st, sizeof st) <= 0)
    return;
  if (ms__proc_kb(st, "RssFile", &s->kernel_rss_file))
    ms__set_quality(s, MS_F_KERNEL_RSS_FILE, MS_Q_EXACT, -1);
  if (ms__proc_kb(st, "RssShmem", &s->kernel_rss_shmem))
    ms__set_quality(s, MS_F_KERNEL_RSS_SHMEM, MS_Q_EXACT, -1);
}

/* ---- smaps_rollup ---------------------------------------------------- */

uint64_t ms__smaps_interval_ns(uint64_t last_cost_ns) {
  uint64_t floor_ns = g_smaps.floor_ns;
  uint64_t scaled =
      last_cost_ns > UINT64_MAX / 100 ? UINT64_MAX : last_cost_ns * 100;
  return scaled > floor_ns ? scaled : floor_ns;
}

void ms__smaps_set_floor(uint64_t ns) {
  pthread_mutex_lock(&g_smaps_lock);
  g_smaps.floor_ns = ns;
  pthread_mutex_unlock(&g_smaps_lock);
}

uint64_t ms__smaps_reads(void) {
  pthread_mutex_lock(&g_smaps_lock);
  uint64_t n = g_smaps.reads;
  pthread_mutex_unlock(&g_smaps_lock);
  return n;
}

/* Adds the smaps_rollup figures, read now or, inside the cadence, those of
 * the last read. Figures read for this snapshot are exact; cached ones are
 * as old as max(1 s, 100 x the cost of a read) and are marked estimated:
 * the program may have released or touched memory since (the 0.1 snapshot
 * layout has no field for their age; growing the struct would make
 * ms_snapshot_read() refuse callers built against 0.1). RSS stays statm's,
 * read fresh for every snapshot (1.4 us): smaps_rollup's Rss supersedes
 * it only where statm could not be read. */
static void fill_smaps(ms_snapshot_t *s) {
  pthread_mutex_lock(&g_smaps_lock);
  int pid = (int)getpid();
  uint64_t now = ms__now_mono_ns();
  int fresh = 0;
  if (g_smaps.pid != pid || g_smaps.forks != g_forks ||
      now - g_smaps.read_at >= ms__smaps_interval_ns(g_smaps.cost_ns)) {
    /* About 25 lines of at most 40 bytes: 4 KiB leaves room for kernels
     * that add lines. Reading it whole keeps the kernel's walk to one. */
    char buf[4096];
    ms__smaps_t fig;
    if (ms__read_small_file("/proc/self/smaps_rollup", buf, sizeof buf) > 0)
      ms__parse_smaps_rollup(buf, &fig);
    else
      memset(&fig, 0, sizeof fig); /* no smaps_rollup (before Linux 4.14) */
    uint64_t done = ms__now_mono_ns();
    g_smaps.figures = fig;
    g_smaps.cost_ns = done - now;
    g_smaps.read_at = now;
    g_smaps.pid = pid;
    g_smaps.forks = g_forks;
    g_smaps.reads++;
    fresh = 1;
  }
  ms__smaps_t fig = g_smaps.figures;
  pthread_mutex_unlock(&g_smaps_lock);

  static const struct {
    ms_field_t field;
    size_t snap_off, fig_off;
  } map[] = {
      {MS_F_KERNEL_RSS, offsetof(ms_snapshot_t, kernel_rss),
       offsetof(ms__smaps_t, rss)},
      {MS_F_KERNEL_LAZYFREE, offsetof(ms_snapshot_t, kernel_lazyfree),
       offsetof(ms__smaps_t, lazyfree)},
      {MS_F_KERNEL_ANON_HUGE, offsetof(ms_snapshot_t, kernel_anon_huge),
       offsetof(ms__smaps_t, anon_huge)},
      {MS_F_KERNEL_SWAP, offsetof(ms_snapshot_t, kernel_swap),
       offsetof(ms__smaps_t, swap)},
  };
  for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
    if (!(fig.have & (1u << (map[i].field - MS_F_KERNEL_RSS))))
      continue;
    if (s->quality[map[i].field] == MS_Q_EXACT)
      continue; /* statm's RSS, read just now */
    *(uint64_t *)((char *)s + map[i].snap_off) =
        *(const uint64_t *)((const char *)&fig + map[i].fig_off);
    ms__set_quality(s, map[i].field, fresh ? MS_Q_EXACT : MS_Q_ESTIMATED, -1);
  }
}

/* ---- the kernel's view of glibc's heaps ---------------------------------
 * glibc's figures come from a sample taken at most every max(1 s, 100 x
 * its cost): 17-24 s on a 1.3 GB heap. In between they are shifted by what
 * the program allocated and freed (providers/registry.c), which cannot see
 * a trim: 470 MB handed back stayed in HeapSys, and Ready, until the next
 * sample. The mappings are read more often (providers/mappings.c); when a read
 * is newer than the sample, what the kernel holds of glibc's heaps bounds
 * the shifted figures: HeapSys at most the heaps' read-write size, the
 * backed part (HeapSys - HeapReleased) at most their resident pages, plus
 * the blocks mapped on their own either way. What is over comes out of
 * HeapIdle (mapped) or goes to HeapReleased (backed), never out of
 * HeapInuse; a field so bounded is estimated. */
static void cap_by_arenas(ms_snapshot_t *s, uint64_t sampled_ns,
                          uint64_t blocks, int cached_only) {
  uint64_t read_ns;
  const ms__maps_figures_t *f = ms__mappings_cached(&read_ns);
  if (!f || !f->have_arenas || read_ns < sampled_ns ||
      !ms__field_known(s, MS_F_HEAP_SYS) ||
      !ms__field_known(s, MS_F_HEAP_IDLE) ||
      !ms__field_known(s, MS_F_HEAP_RELEASED))
    return;
  uint64_t sys = s->heap_sys, idle = s->heap_idle, rel = s->heap_released;
  uint64_t sys_max = f->arena_mapped + blocks;
  uint64_t backed_max = f->arena_resident + blocks;
  if (sys > sys_max) {
    uint64_t x = sys - sys_max < idle ? sys - sys_max : idle;
    sys -= x;
    idle -= x;
    if (rel > idle)
      rel = idle;
  }
  if (sys - rel > backed_max) {
    uint64_t x = sys - rel - backed_max;
    rel += x < idle - rel ? x : idle - rel;
  }
  if (sys == s->heap_sys && rel == s->heap_released)
    return;
  if (!cached_only) /* a cached read may come from a signal handler */
    ms__debug("memstats: glibc's heaps bounded by the kernel's view: "
              "HeapSys %llu -> %llu, HeapReleased %llu -> %llu\n",
              (unsigned long long)s->heap_sys, (unsigned long long)sys,
              (unsigned long long)s->heap_released, (unsigned long long)rel);
  if (ms__field_known(s, MS_F_SYS) && s->sys >= s->heap_sys - sys)
    s->sys -= s->heap_sys - sys;
  s->heap_sys = sys;
  s->heap_idle = idle;
  s->heap_released = rel;
  static const ms_field_t moved[] = {MS_F_HEAP_SYS, MS_F_HEAP_IDLE,
                                     MS_F_HEAP_RELEASED, MS_F_SYS};
  for (size_t i = 0; i < sizeof moved / sizeof moved[0]; i++)
    if (s->quality[moved[i]] == MS_Q_EXACT)
      s->quality[moved[i]] = MS_Q_ESTIMATED;
}

/* Derived fields: Alloc is HeapAlloc; Sys, where no provider gave it, is the
 * sum of the *Sys fields that are known, as exact as the least exact of
 * them (unknown classes are memory the model does not see, not zero). */
static void finish(ms_snapshot_t *s) {
  s->alloc = s->heap_alloc;
  s->quality[MS_F_ALLOC] = s->quality[MS_F_HEAP_ALLOC];
  s->source[MS_F_ALLOC] = s->source[MS_F_HEAP_ALLOC];
  if (!ms__field_known(s, MS_F_SYS) && ms__field_known(s, MS_F_HEAP_SYS)) {
    static const ms_field_t parts[] = {
        MS_F_HEAP_SYS,      MS_F_STACK_SYS, MS_F_MSPAN_SYS, MS_F_MCACHE_SYS,
        MS_F_BUCK_HASH_SYS, MS_F_GC_SYS,    MS_F_OTHER_SYS};
    uint64_t sum = 0;
    ms_quality_t q = MS_Q_EXACT;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
      if (s->quality[parts[i]] == MS_Q_UNAVAILABLE)
        continue;
      sum += ms__field_u64(s, parts[i]);
      q = ms__quality_worst(q, (ms_quality_t)s->quality[parts[i]]);
    }
    s->sys = sum;
    ms__set_quality(s, MS_F_SYS, q, s->source[MS_F_HEAP_SYS]);
  }
}

/* ---- self-checks (snapshot.h) ------------------------------------------*/

int ms__snapshot_check(const ms_snapshot_t *s, unsigned stale_exact, char *why,
                       size_t len) {
  /* Sys = the sum of its terms, and Ready, as the breakdown computes them
   * (one definition of both). */
  ms_breakdown_t b;
  ms_breakdown(s, &b);
  if (b.sys_mismatch) {
    snprintf(why, len, "Sys %llu != sum of the *Sys fields",
             (unsigned long long)s->sys);
    return MS_EPROTO;
  }
  if (ms__field_known(s, MS_F_HEAP_SYS) && ms__field_known(s, MS_F_HEAP_IDLE) &&
      ms__field_known(s, MS_F_HEAP_INUSE) &&
      s->heap_sys != s->heap_idle + s->heap_inuse) {
    snprintf(why, len, "HeapSys %llu != HeapIdle %llu + HeapInuse %llu",
             (unsigned long long)s->heap_sys, (unsigned long long)s->heap_idle,
             (unsigned long long)s->heap_inuse);
    return MS_EPROTO;
  }
  if (ms__field_known(s, MS_F_HEAP_RELEASED) &&
      ms__field_known(s, MS_F_HEAP_IDLE) && s->heap_released > s->heap_idle) {
    snprintf(why, len, "HeapReleased %llu > HeapIdle %llu",
             (unsigned long long)s->heap_released,
             (unsigned long long)s->heap_idle);
    return MS_EPROTO;
  }
  if (b.q_ready != MS_Q_UNAVAILABLE &&
      s->quality[MS_F_KERNEL_RSS] == MS_Q_EXACT) {
    uint64_t ready = b.ready > 0 ? (uint64_t)b.ready : 0;
    uint64_t rss = s->kernel_rss;
    if (ready > rss + MS__READY_OVER_RSS_MAX(rss)) {
      snprintf(why, len,
               "Ready %llu exceeds RSS %llu by more than %llu (4 MiB + RSS/8)",
               (unsigned long long)ready, (unsigned long long)rss,
               (unsigned long long)MS__READY_OVER_RSS_MAX(rss));
      return MS_EPROTO;
    }
  }
  if (stale_exact) {
    snprintf(why, len,
             "%u field(s) exact from an allocator sample cached from an "
             "earlier snapshot, though the tracked heap moved since",
             stale_exact);
    return MS_EPROTO;
  }
  return 0;
}

/* MEMSTATS_DEBUG=1: every snapshot is checked, and a failure said. The
 * program's threads and the agent's take snapshots at once: the cached
 * answer is read and set atomically (each computes the same value). */
static void self_check(const ms_snapshot_t *s, unsigned stale_exact) {
  static int cached = -1;
  int debug = __atomic_load_n(&cached, __ATOMIC_RELAXED);
  if (debug < 0) {
    debug = ms__env_is_1("MEMSTATS_DEBUG");
    __atomic_store_n(&cached, debug, __ATOMIC_RELAXED);
  }
  char why[200];
  if (debug && ms__snapshot_check(s, stale_exact, why, sizeof why) != 0)
    ms__debug("self-check failed on snapshot %llu: %s",
              (unsigned long long)s->seq, why);
}

MS_EXTERN int ms_snapshot_read(ms_snapshot_t *s, size_t size) {
  return ms__snapshot_read_opts(s, size, 0);
}

/* ---- older layouts ----------------------------------------------------
 * 0.1 ended the struct with quality[] and source[] sized by its own
 * MS_F__COUNT (every field up to KernelSwap), right after kernel_swap:
 * everything before quality[] is laid out as today. From 0.2 on, new
 * fields are appended after fixed-capacity arrays, so a smaller struct of
 * 0.2 or later is a prefix of this one. */
#define MS__F_COUNT_0_1 ((size_t)MS_F_KERNEL_ANON_RSS)
#define MS__SNAPSHOT_SIZE_0_1                                                  \
  ((offsetof(ms_snapshot_t, quality) + 2 * MS__F_COUNT_0_1 + 7) & ~(size_t)7)
/* 0.2 as it first shipped ended with off_heap_released; the Python
 * arena fields came after it, and the per-class unbacked parts after
 * those. */
#define MS__SNAPSHOT_SIZE_0_2 (offsetof(ms_snapshot_t, off_heap_released) + 8)
/* Then it ended with python_arena_resident, before the Python arenas'
 * in-use figures and HeapSampleAge. */
#define MS__SNAPSHOT_SIZE_0_2_PY                                               \
  (offsetof(ms_snapshot_t, python_arena_resident) + 8)
_Static_assert(MS_F__COUNT <= MS_F_CAPACITY,
               "more fields than the snapshot has room for");

size_t ms__snapshot_size_0_1(void) {
  return MS__SNAPSHOT_SIZE_0_1;
}

/* The classes as the layouts before the per-class unbacked parts had them:
 * each holds only its backed bytes (OffHeapReleased outside them, a term
 * of Sys of its own), which is what a caller of those layouts computes
 * its breakdown from. The mappings' parts are known (StackReleased,
 * OtherReleased); the rest of OffHeapReleased is the allocator's untouched
 * metadata, in MSpanSys. */
static void classes_backed_only(ms_snapshot_t *h, const ms_snapshot_t *full) {
  uint64_t rest = full->off_heap_released;
  if (!ms__field_known(full, MS_F_OFF_HEAP_RELEASED))
    return;
  if (ms__field_known(full, MS_F_STACK_RELEASED) &&
      full->stack_released <= h->stack_sys && full->stack_released <= rest) {
    h->stack_sys -= full->stack_released;
    rest -= full->stack_released;
  }
  if (ms__field_known(full, MS_F_OTHER_RELEASED) &&
      full->other_released <= h->other_sys && full->other_released <= rest) {
    h->other_sys -= full->other_released;
    rest -= full->other_released;
  }
  if (rest <= h->mspan_sys)
    h->mspan_sys -= rest;
}

/* A snapshot for a caller built against 0.1: its fields, its arrays. Sys
 * is what 0.1 meant by it, the sum of the *Sys fields that 0.1 has, each
 * class holding its backed bytes only, so OffHeapReleased (unknown to it)
 * is left out of Sys: Ready = Sys - HeapReleased then stays the backed
 * memory. */
static void to_0_1(const ms_snapshot_t *full, void *dst) {
  uint8_t *d = dst;
  size_t head = offsetof(ms_snapshot_t, quality);
  memset(d, 0, MS__SNAPSHOT_SIZE_0_1);
  memcpy(d, full, head);
  ms_snapshot_t *h = dst; /* the head is laid out as today */
  h->struct_size = (uint32_t)MS__SNAPSHOT_SIZE_0_1;
  classes_backed_only(h, full);
  if (ms__field_known(full, MS_F_OFF_HEAP_RELEASED) &&
      full->sys >= full->off_heap_released)
    h->sys = full->sys - full->off_heap_released;
  memcpy(d + head, full->quality, MS__F_COUNT_0_1);
  memcpy(d + head + MS__F_COUNT_0_1, full->source, MS__F_COUNT_0_1);
}

/* ms__snapshot_defer's work, taken before the next snapshot is read. */
static void (*g_deferred)(void);

void ms__snapshot_defer(void (*fn)(void)) {
  __atomic_store_n(&g_deferred, fn, __ATOMIC_RELEASE);
}

int ms__snapshot_read_opts(ms_snapshot_t *s, size_t size, unsigned flags) {
  if (!s)
    return MS_EINVAL;
  /* Whichever thread reads first (the agent's, or the program's own
   * ms_snapshot_read) does the work handed over, once; never the _exit
   * path's cached read, which may run inside the allocator. */
  if (!(flags & MS__READ_CACHED)) {
    void (*deferred)(void) =
        __atomic_exchange_n(&g_deferred, NULL, __ATOMIC_ACQ_REL);
    if (deferred)
      deferred();
  }
  if (size < sizeof(ms_snapshot_t)) {
    /* An older caller: fill a whole snapshot on this thread's stack (no
     * allocation: this may be a preloaded malloc's process), then give it
     * what its struct has. */
    /* Only the sizes a header ever had: a size between two of them is
     * not a struct anyone was built with. */
    if (size != MS__SNAPSHOT_SIZE_0_1 && size != MS__SNAPSHOT_SIZE_0_2 &&
        size != MS__SNAPSHOT_SIZE_0_2_PY)
      return MS_EINVAL;
    ms_snapshot_t full;
    int r = ms__snapshot_read_opts(&full, sizeof full, flags);
    if (r != 0)
      return r;
    if (size == MS__SNAPSHOT_SIZE_0_1) {
      to_0_1(&full, s);
    } else {
      /* 0.2's layouts: OffHeapReleased outside the classes, its rule. */
      memcpy(s, &full, size);
      classes_backed_only(s, &full);
    }
    s->struct_size = (uint32_t)size;
    return 0;
  }
  memset(s, 0, sizeof *s);
  memset(s->source, 0xff, sizeof s->source);
  s->struct_size = (uint32_t)sizeof *s;
  s->lib_version =
      (MS_VERSION_MAJOR << 16) | (MS_VERSION_MINOR << 8) | MS_VERSION_PATCH;
  ms__read_lock();
  fill_identity(s); /* its cache is shared: under the lock */
  s->seq = ++g_seq;
  s->time_mono_ns = ms__now_mono_ns();
  s->time_unix_ns = ms__now_unix_ns();
  if (!(flags & MS__READ_CACHED))
    ms__providers_detect();
  ms__engine_read(s);
  ms__providers_fill(s, (flags & MS__READ_CACHED) != 0);
  uint64_t sampled_ns = 0, blocks = 0;
  unsigned view = ms__providers_kernel_view(&sampled_ns, &blocks);
  if ((view & MS__PV_VIEW_ARENAS) && !(flags & MS__READ_CACHED))
    ms__mappings_want(MS__MAPS_ARENAS);
  ms__offheap_fill(s, (flags & MS__READ_CACHED) != 0,
                   ms__providers_backing_unknown());
  if (view & MS__PV_VIEW_ARENAS)
    cap_by_arenas(s, sampled_ns, blocks, (flags & MS__READ_CACHED) != 0);
  unsigned stale_exact = ms__providers_stale_exact();
  ms__read_unlock();

  fill_kernel(s);
  if (flags & MS__READ_SMAPS)
    fill_smaps(s);
  finish(s);
  if (!(flags & MS__READ_CACHED)) /* not from a signal handler */
    self_check(s, stale_exact);
  return 0;
}
