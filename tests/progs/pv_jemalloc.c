/*
 * pv_jemalloc.c - the jemalloc provider on jemalloc (linked -ljemalloc),
 * under the preload: HeapInuse, HeapReleased, HeapIdle equal jemalloc's own
 * mallctl figures, HeapAlloc moves exactly as jemalloc's allocated minus
 * its thread caches, the allocator's part of Ready is at most its
 * stats.resident and the kernel's anonymous RSS (its metadata mapped but
 * not backed is Prepared, in OffHeapReleased), and the tracked counts
 * follow the known pattern.
 */
#include "pv_check.h"

int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp,
            size_t newlen);

static size_t ctl(const char *name) {
  size_t v = 0, len = sizeof v;
  if (mallctl(name, &v, &len, NULL, 0) != 0)
    pv_say("FAIL mallctl %s", name);
  return v;
}

static struct { uint64_t active, released, idle, alloc, resident; } g_je;

static void read_je(void) {
  uint64_t epoch = 1;
  size_t len = sizeof epoch;
  mallctl("epoch", &epoch, &len, &epoch, len);
  size_t page = ctl("arenas.page");
  g_je.active = ctl("stats.active");
  g_je.released =
      ctl("stats.retained") + ctl("stats.arenas.4096.pmuzzy") * page;
  g_je.idle =
      (ctl("stats.arenas.4096.pdirty") + ctl("stats.arenas.4096.pmuzzy")) *
          page +
      ctl("stats.retained");
  g_je.alloc = ctl("stats.allocated") - ctl("stats.arenas.4096.tcache_bytes");
  g_je.resident = ctl("stats.resident");
}

/* jemalloc's part of Ready: its heap's backed memory and its metadata's
 * (the stacks and the program's own mappings are the rest of Ready).
 * MSpanSys holds the metadata's unbacked part too: what of OffHeapReleased
 * the stacks and the mappings do not hold. */
static uint64_t allocator_ready(const ms_snapshot_t *s) {
  uint64_t meta_unbacked =
      s->off_heap_released - s->stack_released - s->other_released;
  return s->heap_sys - s->heap_released + s->mspan_sys - meta_unbacked +
         s->mcache_sys;
}

/* At most jemalloc's stats.resident (2% over: read a moment apart), which
 * counts its metadata's pages from its own books and so is an upper bound;
 * at most what the kernel holds for the whole process (KernelAnonRSS, read
 * in the same snapshot): jemalloc's own mappings, listed by the preload,
 * bound it (at start-up stats.resident read 3.4 MB, the whole process's
 * anonymous RSS 1.0 MB); and at least the active pages. */
static void check_ready(const ms_snapshot_t *s, const char *when) {
  uint64_t ready = allocator_ready(s), res = g_je.resident;
  PV_CHECK(ready <= res + res / 50 && ready <= s->kernel_anon_rss &&
               ready >= s->heap_inuse,
           "jemalloc's Ready between its active pages and both "
           "stats.resident and the kernel's anonymous RSS",
           "%s: Ready %llu, stats.resident %llu, KernelAnonRSS %llu, "
           "HeapInuse %llu (MSpanSys %llu, OffHeapReleased %llu)",
           when, (unsigned long long)ready, (unsigned long long)res,
           (unsigned long long)s->kernel_anon_rss,
           (unsigned long long)s->heap_inuse, (unsigned long long)s->mspan_sys,
           (unsigned long long)s->off_heap_released);
}

/* HeapReleased is jemalloc's retained + muzzy, exact, or more, estimated:
 * dirty pages the kernel does not hold for jemalloc's mappings are
 * released too (never more than HeapIdle). */
static int released_matches(const ms_snapshot_t *s) {
  if (s->quality[MS_F_HEAP_RELEASED] == MS_Q_EXACT)
    return s->heap_released == g_je.released;
  return s->quality[MS_F_HEAP_RELEASED] == MS_Q_ESTIMATED &&
         s->heap_released > g_je.released && s->heap_released <= s->heap_idle;
}

static int matches_je(const ms_snapshot_t *s) {
  read_je();
  pv_snap((ms_snapshot_t *)s);
  return s->heap_inuse == g_je.active && released_matches(s) &&
         s->heap_idle == g_je.idle;
}

int main(void) {
  static ms_snapshot_t s;
  pv_start("jemalloc");
  /* At start-up, where most of what jemalloc maps for itself is reserved
   * and untouched (Ready read 16.9 MB against 13.3 MB of the whole
   * process's RSS). */
  PV_CHECK(pv_until_fresh(&s, matches_je), "a snapshot of the start-up heap",
           "HeapInuse %llu, jemalloc %llu", (unsigned long long)s.heap_inuse,
           (unsigned long long)g_je.active);
  check_ready(&s, "at start-up");
  read_je();
  uint64_t alloc0 = g_je.alloc;
  pv_check_pattern();
  read_je();
  PV_CHECK(g_je.alloc - alloc0 == pv_live_bytes,
           "jemalloc's allocated - tcache_bytes moved as tracked HeapAlloc",
           "jemalloc moved %lld, tracked %llu",
           (long long)(g_je.alloc - alloc0), (unsigned long long)pv_live_bytes);

  int fresh = pv_until_fresh(&s, matches_je);
  PV_CHECK(fresh,
           "HeapInuse = active, HeapReleased = retained + muzzy (or more, "
           "estimated), HeapIdle = dirty + muzzy + retained",
           "snapshot %llu/%llu/%llu, jemalloc %llu/%llu/%llu",
           (unsigned long long)s.heap_inuse,
           (unsigned long long)s.heap_released, (unsigned long long)s.heap_idle,
           (unsigned long long)g_je.active, (unsigned long long)g_je.released,
           (unsigned long long)g_je.idle);
  pv_check_quality(&s, MS_F_HEAP_INUSE, MS_Q_EXACT, "jemalloc");
  pv_check_quality(&s, MS_F_HEAP_RELEASED,
                   (ms_quality_t)(s.heap_released == g_je.released
                                      ? MS_Q_EXACT
                                      : MS_Q_ESTIMATED),
                   "jemalloc");
  check_ready(&s, "after the pattern");
  /* Split from stats.resident, which jemalloc keeps by its own count. */
  pv_check_quality(&s, MS_F_MSPAN_SYS, MS_Q_ESTIMATED, "jemalloc");
  /* Tracking is on: its exact classes win over jemalloc's bins. */
  pv_check_quality(&s, MS_F_BY_SIZE, MS_Q_EXACT, "tracked");
  pv_check_identities(&s);
  PV_CHECK(s.sys >= ctl("stats.mapped"), "Sys covers stats.mapped", "Sys %llu",
           (unsigned long long)s.sys);
  pv_pattern_free();
  return pv_finish("pv_jemalloc");
}
