/*
 * registry.c - the providers, their detection, their cadence, and how
 * their figures combine with the engine's (see providers.h and DESIGN.md).
 *
 * Detection happens at the first snapshot: the malloc providers are tried
 * most specific first (jemalloc, tcmalloc, mimalloc, then glibc), each
 * found with dlsym(RTLD_DEFAULT, ...) (no link-time dependency) and
 * confirmed by watching its counters move around a test allocation; the
 * first confirmed one is the process's malloc. That first snapshot makes one
 * malloc/free pair of MS__PV_PROBE_SIZE bytes, and dlsym's failed lookups
 * make a few more: programs that count their own allocations take one
 * snapshot before they start counting. The last failed lookup's error
 * state (glibc's dlerror: two blocks, a result object and the message)
 * stays allocated until the thread's next dlsym that succeeds. Detection
 * (ms__providers_detect) runs before the engine's figures are read, so
 * the preload has counted those blocks by then: even the first snapshot's
 * tracked HeapAlloc is the allocator's own figure (pinned by
 * tests/progs/pv_tcmalloc.c). A collector (Boehm GC) is looked for
 * again whenever the process has loaded a new object since the last look
 * (dl_iterate_phdr's load counter), so a collector dlopen()ed later is
 * found without a failing dlsym at every snapshot.
 *
 * Cadence: each provider is sampled at most every min_interval_ns, and at
 * most every 100 times the cost of its last sample, so a slow read (glibc's
 * mallinfo2 on a large fragmented heap) backs off by itself. The cost is
 * the CPU time the sampling thread spent (CLOCK_THREAD_CPUTIME_ID), not
 * the time it took: on a loaded machine a read of microseconds of work
 * waits for a CPU and for arena locks whose holders wait for one too, and
 * a second so spent would put the next sample 100 s away, every snapshot
 * until then serving figures from before (test_attach test_track_alloc8
 * missed its 1% that way at load 20). Between two
 * samples the cached one is merged into every snapshot. A failed sample
 * caches nothing (the snapshots until the next try have no figures from
 * that provider, never the last good ones shown as current), but it keeps
 * the cadence all the same: a read that is slow and fails is not retried
 * at every snapshot. Each further failure in a row doubles the wait, up to
 * MS__PV_FAIL_BACKOFF_MAX_NS (or the cadence itself, if that is longer);
 * the first success returns to the plain cadence.
 *
 * Combining (ms__providers_merge), in this order:
 *   1. The engine's figures stay: tracked objects from the preload
 *      (Mallocs, Frees, HeapObjects, HeapAlloc, TotalAlloc, BySize: exact
 *      for every call) and whatever the runtime API was told.
 *   2. One provider owns the heap fields (HeapSys, HeapIdle, HeapInuse,
 *      HeapReleased, metadata, thread caches): the runtime API if the
 *      program reports its heap with ms_heap_move(), else a collector with
 *      a heap (the program's objects live there), else the malloc
 *      provider. The owner fills every field the engine does not have.
 *   3. A provider that does not own the heap still has memory: its Sys
 *      goes to OtherSys, so Sys still covers it.
 *   4. A collector owning the heap also gives HeapAlloc (its estimate):
 *      tracked malloc bytes do not live in its heap. The tracked counts
 *      stay and count malloc calls.
 *   5. Sys is left to the snapshot's finishing step, which sums the *Sys
 *      fields: the identity Sys = sum of *Sys holds by construction. A
 *      provider's memory that fits no class goes to OtherSys; if a provider
 *      says Sys is less than its parts, its Sys is reported as it is and
 *      the mismatch shows in the breakdown.
 * Each field's source is the provider that gave it.
 */
#include <link.h>
#include <string.h>
#include <time.h>

#include "common/fields.h"
#include "core/engine.h"
#include "core/util.h"
#include "providers/provider_int.h"

typedef struct ms__pv_slot_s {
  const ms__provider_t *pv;
  int active;
  int have;          /* a good sample is cached */
  int fresh;         /* that sample was taken for the current snapshot */
  unsigned failures; /* failed samples in a row since the last good one */
  /* The last try began at start_ns and ended at last_ns (monotonic) and
   * cost cost_ns of CPU; the next is due interval_ns after its end. */
  uint64_t start_ns, last_ns, interval_ns, cost_ns;
  ms__pv_sample_t sample;
} ms__pv_slot_t;

/* The longest a failing provider's back-off grows to by doubling: a
 * provider that recovers is read again within a minute. A cadence longer
 * than this (a read costing more than 600 ms) is kept as it is. */
#define MS__PV_FAIL_BACKOFF_MAX_NS 60000000000ull

static ms__pv_slot_t g_malloc[] = {
    {.pv = &ms__provider_jemalloc},
    {.pv = &ms__provider_tcmalloc},
    {.pv = &ms__provider_mimalloc},
    {.pv = &ms__provider_glibc},
};
#define NMALLOC (sizeof g_malloc / sizeof g_malloc[0])
static ms__pv_slot_t g_collector = {.pv = &ms__provider_boehm};

/* Snapshots that looked for the malloc provider so far. A provider whose
 * API is there but whose confirm() failed (glibc's compares its counters
 * around a probe allocation, which another thread's malloc in between
 * upsets) is looked for again at the next snapshots, up to
 * MS__PV_DETECT_TRIES: one unlucky first snapshot must not leave the
 * process without its allocator's figures for the rest of its life. */
#define MS__PV_DETECT_TRIES 8u
static unsigned g_malloc_tries;
static ms__pv_slot_t *g_malloc_slot; /* the confirmed one, or NULL */
static unsigned long long g_loads_seen = ~0ull;
/* The CPU time of the calling thread, ns. */
static uint64_t thread_cpu_ns(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
    return 0;
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The cadence's clock and the clock a sample's cost is read on; only the
 * unit tests replace them. */
static uint64_t (*g_now)(void) = ms__now_mono_ns;
static uint64_t (*g_cpu)(void) = thread_cpu_ns;

/* ---- detection
 * -------------------------------------------------------------*/

static int count_loads(struct dl_phdr_info *info, size_t size, void *arg) {
  if (size >= offsetof(struct dl_phdr_info, dlpi_adds) + sizeof info->dlpi_adds)
    *(unsigned long long *)arg = info->dlpi_adds;
  return 1; /* the counter is the same in every entry: one is enough */
}

void ms__providers_detect(void) {
  if (!g_malloc_slot && g_malloc_tries < MS__PV_DETECT_TRIES) {
    int present = 0;
    g_malloc_tries++;
    for (size_t i = 0; i < NMALLOC; i++) {
      if (!g_malloc[i].pv->detect())
        continue;
      present = 1;
      if (g_malloc[i].pv->confirm()) {
        g_malloc[i].active = 1;
        g_malloc_slot = &g_malloc[i];
        ms__debug("memstats: malloc is %s\n", g_malloc[i].pv->name);
        break;
      }
    }
    if (!present) /* no allocator's API at all: nothing to try again */
      g_malloc_tries = MS__PV_DETECT_TRIES;
    else if (!g_malloc_slot)
      ms__debug("memstats: no allocator confirmed (try %u of %u)\n",
                g_malloc_tries, MS__PV_DETECT_TRIES);
  }
  if (!g_collector.active) {
    unsigned long long loads = 0;
    dl_iterate_phdr(count_loads, &loads);
    if (loads != g_loads_seen) {
      g_loads_seen = loads;
      if (g_collector.pv->detect() && g_collector.pv->confirm())
        g_collector.active = 1;
    }
  }
}

/* ---- cadence
 * ---------------------------------------------------------------*/

/* The wait after the failures-th failed sample in a row, from the
 * cadence (the wait after a good sample of the same cost): the cadence
 * after the first failure, doubled after each further one, the doubling
 * stopping at MS__PV_FAIL_BACKOFF_MAX_NS. */
static uint64_t failed_interval(uint64_t cadence, unsigned failures) {
  uint64_t iv = cadence;
  for (unsigned i = 1; i < failures && iv < MS__PV_FAIL_BACKOFF_MAX_NS; i++)
    iv *= 2;
  if (iv > MS__PV_FAIL_BACKOFF_MAX_NS && cadence < MS__PV_FAIL_BACKOFF_MAX_NS)
    iv = MS__PV_FAIL_BACKOFF_MAX_NS;
  return iv;
}

static const ms__pv_sample_t *sample(ms__pv_slot_t *s, uint64_t now,
                                     unsigned flags, const ms_snapshot_t *snap,
                                     int cached_only) {
  if (!s || !s->active)
    return NULL;
  s->fresh = 0;
  if (cached_only)
    return s->have ? &s->sample : NULL;
  /* Between two tries: the cached sample, or nothing after a failure. */
  if ((s->have || s->failures) && now - s->last_ns < s->interval_ns)
    return s->have ? &s->sample : NULL;
  memset(&s->sample, 0, sizeof s->sample);
  uint64_t t0 = g_now(), c0 = g_cpu();
  int rc = s->pv->sample(&s->sample, flags);
  uint64_t t1 = g_now(), c1 = g_cpu();
  s->cost_ns = c1 >= c0 ? c1 - c0 : 0;
  s->start_ns = t0;
  s->last_ns = t1;
  s->interval_ns = s->pv->min_interval_ns;
  if (s->cost_ns * 100 > s->interval_ns)
    s->interval_ns = s->cost_ns * 100;
  /* A failed read leaves nothing cached: stale figures are not shown as
   * current ones. It still waits its cadence, longer after each failure in
   * a row (the counter stops well past the doubling's cap). */
  s->have = rc == 0;
  s->fresh = rc == 0;
  if (rc == 0) {
    s->failures = 0;
  } else {
    if (s->failures < 64)
      s->failures++;
    s->interval_ns = failed_interval(s->interval_ns, s->failures);
  }
  s->sample.have_tracked = (ms__engine_fed() & MS__FEED_TRACKED) &&
                           snap->quality[MS_F_HEAP_ALLOC] == MS_Q_EXACT;
  s->sample.tracked_heap_alloc = snap->heap_alloc;
  s->sample.tracked_total_alloc = snap->total_alloc;
  ms__engine_last_mapped(&s->sample.tracked_mapped);
  return s->have ? &s->sample : NULL;
}

/* Makes the slot's next snapshot try a sample whatever its cadence. A
 * failure back-off is cut short too (the final snapshot is worth one more
 * try, and it is one read), but the count of failures in a row is kept: if
 * that try fails as well, the back-off goes on growing from where it was
 * rather than starting over. */
static void expire(ms__pv_slot_t *s) {
  s->have = 0;
  s->interval_ns = 0;
}

void ms__providers_expire(void) {
  for (size_t i = 0; i < NMALLOC; i++)
    expire(&g_malloc[i]);
  if (g_malloc_slot) /* also the tests' slot (ms__providers_set_for_test) */
    expire(g_malloc_slot);
  expire(&g_collector);
}

/* ---- test seam
 * -------------------------------------------------------------*/

void ms__providers_set_for_test(const ms__provider_t *mpv,
                                const ms__provider_t *gpv) {
  static ms__pv_slot_t test_malloc;
  memset(&test_malloc, 0, sizeof test_malloc);
  test_malloc.pv = mpv;
  test_malloc.active = mpv != NULL;
  for (size_t i = 0; i < NMALLOC; i++)
    g_malloc[i].active = g_malloc[i].have = 0;
  g_malloc_tries = MS__PV_DETECT_TRIES;
  g_malloc_slot = mpv ? &test_malloc : NULL;
  memset(&g_collector, 0, sizeof g_collector);
  g_collector.pv = gpv ? gpv : &ms__provider_boehm;
  g_collector.active = gpv != NULL;
}

void ms__providers_detect_for_test(const ms__provider_t *const *list,
                                   size_t n) {
  static const ms__provider_t *const real[] = {
      &ms__provider_jemalloc, &ms__provider_tcmalloc, &ms__provider_mimalloc,
      &ms__provider_glibc};
  for (size_t i = 0; i < NMALLOC; i++) {
    memset(&g_malloc[i], 0, sizeof g_malloc[i]);
    g_malloc[i].pv = list ? (i < n ? list[i] : list[n - 1]) : real[i];
  }
  g_malloc_tries = 0;
  g_malloc_slot = NULL;
}

void ms__providers_clock_for_test(uint64_t (*now)(void)) {
  g_now = now ? now : ms__now_mono_ns;
  g_cpu = now ? now : thread_cpu_ns;
}

void ms__providers_cpu_clock_for_test(uint64_t (*cpu)(void)) {
  g_cpu = cpu ? cpu : g_now == ms__now_mono_ns ? thread_cpu_ns : g_now;
}

static unsigned g_stale_exact;
/* Whether the malloc provider's figures are the heap's in this snapshot
 * (the last ms__providers_fill): ms__providers_kernel_view. */
static int g_malloc_owns;

unsigned ms__providers_stale_exact(void) {
  return g_stale_exact;
}

static int arena_moved(const ms_snapshot_t *snap, const ms__pv_sample_t *s);

/* The self-check's count (providers.h): fields the malloc provider left
 * exact from a sample cached from an earlier snapshot, though the tracked
 * heap moved in the allocator's arenas since (what shift_by_tracked must
 * have marked). Without tracking nothing tells whether the heap moved:
 * not counted. */
static unsigned count_stale_exact(const ms_snapshot_t *snap,
                                  const ms__pv_slot_t *slot,
                                  const ms__pv_sample_t *s) {
  if (!slot || !s || slot->fresh || !s->have_tracked ||
      snap->quality[MS_F_HEAP_ALLOC] != MS_Q_EXACT || !arena_moved(snap, s))
    return 0;
  int idx = -1;
  for (uint32_t i = 0; i < snap->nproviders; i++)
    if (strcmp(snap->providers[i], slot->pv->name) == 0)
      idx = (int)i;
  unsigned n = 0;
  static const ms_field_t f[] = {MS_F_HEAP_SYS, MS_F_HEAP_IDLE, MS_F_HEAP_INUSE,
                                 MS_F_HEAP_RELEASED};
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
    n += idx >= 0 && snap->source[f[i]] == (uint8_t)idx &&
         snap->quality[f[i]] == MS_Q_EXACT;
  return n;
}

void ms__providers_fill(ms_snapshot_t *snap, int cached_only) {
  unsigned fed = ms__engine_fed();
  unsigned flags = (fed & MS__FEED_OBJECTS) ? 0 : MS__PV_WANT_CLASSES;
  uint64_t now = g_now();
  const ms__pv_sample_t *ms =
      sample(g_malloc_slot, now, flags, snap, cached_only);
  const ms__pv_sample_t *gs =
      sample(&g_collector, now, flags, snap, cached_only);
  ms__providers_merge(snap, fed, g_malloc_slot ? g_malloc_slot->pv : NULL, ms,
                      g_collector.active ? g_collector.pv : NULL, gs);
  g_stale_exact = count_stale_exact(snap, g_malloc_slot, ms);
  g_malloc_owns = 0;
  for (uint32_t i = 0; ms && i < snap->nproviders; i++)
    if (strcmp(snap->providers[i], g_malloc_slot->pv->name) == 0) {
      g_malloc_owns = snap->source[MS_F_HEAP_SYS] == (uint8_t)i;
      /* How old the figures behind the heap are: a sample taken for this
       * snapshot is 0 old. */
      if (g_malloc_owns) {
        uint64_t at = g_malloc_slot->start_ns;
        ms__field_set_u64(snap, MS_F_HEAP_SAMPLE_AGE,
                          g_malloc_slot->fresh || now < at ? 0 : now - at);
        ms__set_quality(snap, MS_F_HEAP_SAMPLE_AGE, MS_Q_EXACT, (int)i);
      }
    }
}

unsigned ms__providers_kernel_view(uint64_t *sampled_ns, uint64_t *blocks) {
  const ms__pv_slot_t *s = g_malloc_slot;
  if (!s || !s->have || !g_malloc_owns || !s->pv->kernel_view)
    return 0;
  *sampled_ns = s->start_ns;
  *blocks = s->sample.mapped_blocks;
  if (s->sample.have_tracked) {
    ms__mapped_t now;
    ms__engine_last_mapped(&now);
    const ms__mapped_t *then = &s->sample.tracked_mapped;
    *blocks += (now.alloc - then->alloc) - (now.free - then->free);
  }
  return s->pv->kernel_view;
}

int ms__providers_backing_unknown(void) {
  return g_malloc_slot && g_malloc_slot->pv->backing_unknown;
}

/* ---- combining
 * -------------------------------------------------------------*/

/* The fields of the memory a heap owner describes. */
static const ms_field_t heap_fields[] = {
    MS_F_HEAP_SYS,  MS_F_HEAP_IDLE,   MS_F_HEAP_INUSE,       MS_F_HEAP_RELEASED,
    MS_F_MSPAN_SYS, MS_F_MSPAN_INUSE, MS_F_MCACHE_SYS,       MS_F_MCACHE_INUSE,
    MS_F_GC_SYS,    MS_F_OTHER_SYS,   MS_F_OFF_HEAP_RELEASED};
/* The terms of Sys a provider may fill (Sys is their sum). OffHeapReleased
 * (the owner's metadata that is mapped but not backed: jemalloc's, to which
 * the mappings add their own, providers/mappings.c) is no term: its class holds
 * it. */
static const ms_field_t sys_parts[] = {MS_F_HEAP_SYS, MS_F_MSPAN_SYS,
                                       MS_F_MCACHE_SYS, MS_F_GC_SYS,
                                       MS_F_OTHER_SYS};

static void put(ms_snapshot_t *snap, ms_field_t f, uint64_t v, ms_quality_t q,
                int idx) {
  ms__field_set_u64(snap, f, v);
  ms__set_quality(snap, f, q, idx);
}

/* Fills field f from sample s if the snapshot does not have it yet. */
static void fill(ms_snapshot_t *snap, const ms__pv_sample_t *s, ms_field_t f,
                 int idx) {
  if (!ms__field_known(snap, f) && s->q[f] != MS_Q_UNAVAILABLE)
    put(snap, f, s->v[f], (ms_quality_t)s->q[f], idx);
}

/* Adds bytes of memory the heap fields do not describe to OtherSys. */
static void add_other(ms_snapshot_t *snap, uint64_t bytes, ms_quality_t q,
                      int idx) {
  if (!ms__field_known(snap, MS_F_OTHER_SYS)) {
    put(snap, MS_F_OTHER_SYS, bytes, q, idx);
  } else {
    snap->other_sys += bytes;
    snap->quality[MS_F_OTHER_SYS] = (uint8_t)ms__quality_worst(
        (ms_quality_t)snap->quality[MS_F_OTHER_SYS], q);
  }
}

/* The heap owner's figures. */
static void own_heap(ms_snapshot_t *snap, const ms__pv_sample_t *s, int idx) {
  uint64_t parts = 0;
  for (size_t i = 0; i < sizeof heap_fields / sizeof heap_fields[0]; i++)
    fill(snap, s, heap_fields[i], idx);
  for (size_t i = 0; i < sizeof sys_parts / sizeof sys_parts[0]; i++)
    if (s->q[sys_parts[i]] != MS_Q_UNAVAILABLE)
      parts += s->v[sys_parts[i]];
  if (s->q[MS_F_SYS] == MS_Q_UNAVAILABLE)
    return;
  if (s->v[MS_F_SYS] > parts)
    add_other(snap, s->v[MS_F_SYS] - parts, (ms_quality_t)s->q[MS_F_SYS], idx);
  else if (s->v[MS_F_SYS] < parts && !ms__field_known(snap, MS_F_SYS))
    put(snap, MS_F_SYS, s->v[MS_F_SYS], (ms_quality_t)s->q[MS_F_SYS], idx);
}

static void own_objects(ms_snapshot_t *snap, const ms__pv_sample_t *s,
                        int idx) {
  static const ms_field_t f[] = {MS_F_HEAP_ALLOC, MS_F_HEAP_OBJECTS,
                                 MS_F_MALLOCS, MS_F_FREES};
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
    fill(snap, s, f[i], idx);
  if (!ms__field_known(snap, MS_F_BY_SIZE) &&
      s->q[MS_F_BY_SIZE] != MS_Q_UNAVAILABLE && s->nsize_classes > 0) {
    snap->nsize_classes = s->nsize_classes;
    memcpy(snap->by_size, s->by_size,
           s->nsize_classes * sizeof snap->by_size[0]);
    ms__set_quality(snap, MS_F_BY_SIZE, (ms_quality_t)s->q[MS_F_BY_SIZE], idx);
  }
}

/* Sys is everything the heap's owner has mapped. A class the owner does
 * not have is memory it has not mapped: glibc keeps its metadata and thread
 * caches inside heap chunks (counted in HeapInuse), maps no stacks and has
 * no collector, so its MSpanSys, MCacheSys, StackSys, GCSys and the rest
 * are exactly 0, not unknown; the same holds for what a runtime did not
 * report through ms_sys_add(). Without this every breakdown figure that
 * sums the classes would read as unavailable. */
static void zero_unmapped_classes(ms_snapshot_t *snap, int engine_heap, int idx,
                                  int have_owner) {
  static const ms_field_t classes[] = {
      MS_F_STACK_INUSE,    MS_F_STACK_SYS,     MS_F_MSPAN_INUSE,
      MS_F_MSPAN_SYS,      MS_F_MCACHE_INUSE,  MS_F_MCACHE_SYS,
      MS_F_BUCK_HASH_SYS,  MS_F_GC_SYS,        MS_F_OTHER_SYS,
      MS_F_STACK_RELEASED, MS_F_OTHER_RELEASED};
  if (!have_owner || !ms__field_known(snap, MS_F_HEAP_SYS))
    return;
  if (engine_heap)
    idx =
        snap->source[MS_F_HEAP_SYS] == 0xff ? -1 : snap->source[MS_F_HEAP_SYS];
  for (size_t i = 0; i < sizeof classes / sizeof classes[0]; i++)
    if (snap->quality[classes[i]] == MS_Q_UNAVAILABLE)
      put(snap, classes[i], 0, MS_Q_EXACT, idx);
}

/* A cached sample (glibc's is up to a second old) meets tracked figures of
 * this instant: while the program allocates, HeapAlloc could exceed the
 * sample's HeapInuse and fragOverhead turn negative. So the sample's heap
 * is moved by what the program did since, in two parts:
 *   - blocks mapped on their own (glibc's mmapped chunks, which the preload
 *     sees and counts apart with their mappings' sizes): glibc adds each
 *     one's mapping to hblkhd, HeapInuse, HeapSys and Sys, and takes it
 *     back at munmap. This part is exact.
 *   - everything else, in the allocator's arenas: in-use grows (or shrinks,
 *     on frees) by the tracked change, taken from the free backed memory
 *     first and from new mappings past that. Whether the arena grew,
 *     or trimmed its top on those frees, the sample cannot say: once the
 *     arenas saw any call since the sample, HeapInuse, HeapIdle, HeapSys,
 *     HeapReleased and Sys are estimates, and marked so.
 * A sample with nothing since (fresh, or a quiet program) stays exact. */
/* What the tracked heap did since sample s: the usable bytes allocated and
 * freed in the arenas (*alloc, *freed), and the bytes mapped less unmapped
 * for blocks of their own (returned). Unsigned differences wrap: they are
 * signed deltas in two's complement. */
static int64_t tracked_since(const ms_snapshot_t *snap,
                             const ms__pv_sample_t *s, uint64_t *alloc,
                             uint64_t *freed) {
  ms__mapped_t now;
  ms__engine_last_mapped(&now);
  const ms__mapped_t *then = &s->tracked_mapped;
  uint64_t d_alloc = snap->total_alloc - s->tracked_total_alloc;
  uint64_t d_freed = (snap->total_alloc - snap->heap_alloc) -
                     (s->tracked_total_alloc - s->tracked_heap_alloc);
  *alloc = d_alloc - (now.alloc_usable - then->alloc_usable);
  *freed = d_freed - (now.free_usable - then->free_usable);
  return (int64_t)((now.alloc - then->alloc) - (now.free - then->free));
}

static int arena_moved(const ms_snapshot_t *snap, const ms__pv_sample_t *s) {
  uint64_t alloc, freed;
  tracked_since(snap, s, &alloc, &freed);
  return alloc != 0 || freed != 0;
}

static void shift_by_tracked(ms_snapshot_t *snap, const ms__pv_sample_t *s,
                             int idx) {
  if (!s->have_tracked || snap->quality[MS_F_HEAP_ALLOC] != MS_Q_EXACT ||
      !ms__field_known(snap, MS_F_HEAP_INUSE) ||
      !ms__field_known(snap, MS_F_HEAP_IDLE) ||
      snap->source[MS_F_HEAP_INUSE] != (uint8_t)idx)
    return;
  uint64_t arena_alloc, arena_freed;
  int64_t mapped = tracked_since(snap, s, &arena_alloc, &arena_freed);
  int arena_moved = arena_alloc != 0 || arena_freed != 0;
  if (!arena_moved && mapped == 0)
    return;

  /* The mapped blocks: in use and mapped, exactly. */
  if (mapped != 0) {
    snap->heap_inuse = (uint64_t)((int64_t)snap->heap_inuse + mapped);
    snap->heap_sys = (uint64_t)((int64_t)snap->heap_sys + mapped);
    if (ms__field_known(snap, MS_F_SYS))
      snap->sys = (uint64_t)((int64_t)snap->sys + mapped);
  }
  if (!arena_moved)
    return;

  /* The arenas: their net change, an estimate. */
  int64_t delta = (int64_t)(arena_alloc - arena_freed);
  int64_t inuse = (int64_t)snap->heap_inuse + delta;
  if (inuse < 0)
    inuse = 0;
  delta = inuse - (int64_t)snap->heap_inuse;
  int64_t backed_free = (int64_t)snap->heap_idle - (int64_t)snap->heap_released;
  int64_t grow = delta > backed_free ? delta - backed_free : 0;
  snap->heap_inuse = (uint64_t)inuse;
  snap->heap_idle = (uint64_t)((int64_t)snap->heap_idle - (delta - grow));
  snap->heap_sys += (uint64_t)grow;
  if (ms__field_known(snap, MS_F_SYS))
    snap->sys += (uint64_t)grow;
  static const ms_field_t moved[] = {MS_F_HEAP_INUSE, MS_F_HEAP_IDLE,
                                     MS_F_HEAP_SYS, MS_F_HEAP_RELEASED,
                                     MS_F_SYS};
  for (size_t i = 0; i < sizeof moved / sizeof moved[0]; i++)
    if (snap->quality[moved[i]] == MS_Q_EXACT)
      snap->quality[moved[i]] = MS_Q_ESTIMATED;
}

/* HeapInuse is never below HeapAlloc: fragOverhead (HeapInuse - HeapAlloc)
 * cannot be negative. A shifted sample can put it there: mallinfo2 walks
 * the arenas one after the other, seconds on a large heap, while the
 * tracked HeapAlloc it is paired with was read before the walk; frees the
 * walk already saw are then taken off again by the next shift (HeapInuse
 * 90.7 MB below HeapAlloc until the next sample, 14 s later). What is
 * missing is taken back from the free memory, the backed part first, as
 * the shift gave it there, and from new mappings past that; every field
 * so moved is an estimate. */
static void inuse_at_least_alloc(ms_snapshot_t *snap) {
  if (!ms__field_known(snap, MS_F_HEAP_INUSE) ||
      !ms__field_known(snap, MS_F_HEAP_ALLOC) ||
      snap->heap_inuse >= snap->heap_alloc)
    return;
  /* HeapAlloc estimated (counted since memtop attach --track, from the
   * allocator's in-use at the attach): the estimate gives way to the
   * allocator's figure, not the other way round. */
  if (snap->quality[MS_F_HEAP_ALLOC] == MS_Q_ESTIMATED) {
    snap->heap_alloc = snap->heap_inuse;
    return;
  }
  uint64_t d = snap->heap_alloc - snap->heap_inuse, grow = d;
  snap->heap_inuse += d;
  if (ms__field_known(snap, MS_F_HEAP_IDLE)) {
    uint64_t take = d < snap->heap_idle ? d : snap->heap_idle;
    snap->heap_idle -= take;
    grow = d - take;
    if (ms__field_known(snap, MS_F_HEAP_RELEASED) &&
        snap->heap_released > snap->heap_idle)
      snap->heap_released = snap->heap_idle;
  }
  if (ms__field_known(snap, MS_F_HEAP_SYS))
    snap->heap_sys += grow;
  if (ms__field_known(snap, MS_F_SYS))
    snap->sys += grow;
  static const ms_field_t moved[] = {MS_F_HEAP_INUSE, MS_F_HEAP_IDLE,
                                     MS_F_HEAP_SYS, MS_F_HEAP_RELEASED,
                                     MS_F_SYS};
  for (size_t i = 0; i < sizeof moved / sizeof moved[0]; i++)
    if (snap->quality[moved[i]] == MS_Q_EXACT)
      snap->quality[moved[i]] = MS_Q_ESTIMATED;
}

void ms__providers_merge(ms_snapshot_t *snap, unsigned fed,
                         const ms__provider_t *mpv, const ms__pv_sample_t *ms,
                         const ms__provider_t *gpv, const ms__pv_sample_t *gs) {
  int midx = mpv ? ms__snapshot_add_provider(snap, mpv->name) : -1;
  int gidx = gpv ? ms__snapshot_add_provider(snap, gpv->name) : -1;
  int engine_heap = (fed & MS__FEED_HEAP) != 0;
  int gc_heap = !engine_heap && gs && gs->q[MS_F_HEAP_SYS] != MS_Q_UNAVAILABLE;

  if (ms) {
    if (!engine_heap && !gc_heap) {
      own_heap(snap, ms, midx);
      own_objects(snap, ms, midx);
      shift_by_tracked(snap, ms, midx);
      inuse_at_least_alloc(snap);
    } else if (ms->q[MS_F_SYS] != MS_Q_UNAVAILABLE) {
      add_other(snap, ms->v[MS_F_SYS], (ms_quality_t)ms->q[MS_F_SYS], midx);
    }
  }
  if (gs) {
    if (gc_heap) {
      own_heap(snap, gs, gidx);
      if (gs->q[MS_F_HEAP_ALLOC] != MS_Q_UNAVAILABLE)
        put(snap, MS_F_HEAP_ALLOC, gs->v[MS_F_HEAP_ALLOC],
            (ms_quality_t)gs->q[MS_F_HEAP_ALLOC], gidx);
    } else if (engine_heap && gs->q[MS_F_SYS] != MS_Q_UNAVAILABLE) {
      add_other(snap, gs->v[MS_F_SYS], (ms_quality_t)gs->q[MS_F_SYS], gidx);
    }
    if (gs->q[MS_F_ENABLE_GC] != MS_Q_UNAVAILABLE) {
      snap->enable_gc = (int)gs->v[MS_F_ENABLE_GC];
      ms__set_quality(snap, MS_F_ENABLE_GC, (ms_quality_t)gs->q[MS_F_ENABLE_GC],
                      gidx);
    }
  }
  if (gpv && gpv->finish)
    gpv->finish(snap, gidx);
  zero_unmapped_classes(snap, engine_heap, gc_heap ? gidx : midx,
                        engine_heap || gc_heap || ms);
}
