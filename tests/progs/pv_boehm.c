/*
 * pv_boehm.c - the Boehm GC provider on bdwgc (linked -lgc), under the
 * preload: N explicit collections give NumGC >= N (equal to the
 * collector's gc_no), one non-zero pause per collection in the ring,
 * PauseTotalNs equal to their sum, a histogram that counts every one; the
 * heap figures equal GC_get_prof_stats'; malloc is still tracked exactly.
 */
#include <gc/gc.h>

#include "pv_check.h"

#define NCOLLECT 5

static struct GC_prof_stats_s g_ps;

static int matches_gc(const ms_snapshot_t *s) {
  GC_get_prof_stats(&g_ps, sizeof g_ps);
  pv_snap((ms_snapshot_t *)s);
  return s->heap_sys == g_ps.heapsize_full &&
         s->heap_idle == g_ps.free_bytes_full &&
         s->heap_released == g_ps.unmapped_bytes;
}

int main(void) {
  static ms_snapshot_t s;
  GC_INIT();
  pv_start("boehm");
  /* Tracked malloc counts stay exact; HeapAlloc is the collector's. */
  pv_check_pattern_(0);

  /* Churn, then collect explicitly, NCOLLECT times. */
  for (int c = 0; c < NCOLLECT; c++) {
    void **keep = GC_MALLOC(sizeof(void *) * 1000);
    for (int i = 0; i < 20000; i++) {
      void *p = GC_MALLOC(16 + (size_t)(i % 64) * 8);
      if (i % 20 == 0)
        keep[(i / 20) % 1000] = p;
    }
    GC_gcollect();
  }

  int fresh = pv_until_fresh(&s, matches_gc);
  PV_CHECK(
      fresh, "HeapSys, HeapIdle, HeapReleased = GC_get_prof_stats'",
      "snapshot %llu/%llu/%llu, collector %lu/%lu/%lu",
      (unsigned long long)s.heap_sys, (unsigned long long)s.heap_idle,
      (unsigned long long)s.heap_released, (unsigned long)g_ps.heapsize_full,
      (unsigned long)g_ps.free_bytes_full, (unsigned long)g_ps.unmapped_bytes);
  pv_check_quality(&s, MS_F_HEAP_SYS, MS_Q_EXACT, "boehm");
  pv_check_quality(&s, MS_F_HEAP_INUSE, MS_Q_EXACT, "boehm");
  pv_check_quality(&s, MS_F_HEAP_ALLOC, MS_Q_ESTIMATED, "boehm");
  pv_check_quality(&s, MS_F_NUM_GC, MS_Q_EXACT, "boehm");
  pv_check_quality(&s, MS_F_PAUSE_NS, MS_Q_EXACT, "boehm");
  PV_CHECK(s.quality[MS_F_NUM_FORCED_GC] == MS_Q_UNAVAILABLE,
           "NumForcedGC unavailable", "quality %d",
           s.quality[MS_F_NUM_FORCED_GC]);
  pv_check_identities(&s);

  uint64_t gc_no = GC_get_gc_no();
  PV_CHECK(s.num_gc >= NCOLLECT && s.num_gc == gc_no, "NumGC >= N and = gc_no",
           "NumGC %u, gc_no %llu, N %d", s.num_gc, (unsigned long long)gc_no,
           NCOLLECT);
  uint32_t n = s.num_gc < MS_PAUSE_RING ? s.num_gc : MS_PAUSE_RING;
  uint64_t nonzero = 0, sum = 0;
  for (uint32_t i = 0; i < n; i++) {
    nonzero += s.pause_ns[i] != 0;
    sum += s.pause_ns[i];
  }
  PV_CHECK(nonzero == n && n >= NCOLLECT, "one non-zero pause per collection",
           "%llu non-zero of %u", (unsigned long long)nonzero, n);
  if (s.num_gc <= MS_PAUSE_RING)
    PV_CHECK(s.pause_total_ns == sum, "PauseTotalNs = sum of the ring",
             "%llu vs %llu", (unsigned long long)s.pause_total_ns,
             (unsigned long long)sum);
  uint64_t hist = 0;
  for (int i = 0; i < MS_PAUSE_HIST_BUCKETS; i++)
    hist += s.pause_hist.counts[i];
  PV_CHECK(hist == s.num_gc, "histogram counts every pause",
           "histogram %llu, NumGC %u", (unsigned long long)hist, s.num_gc);
  PV_CHECK(s.last_gc != 0 && s.pause_end[(s.num_gc + 255) % 256] == s.last_gc,
           "LastGC is the newest PauseEnd", "LastGC %llu",
           (unsigned long long)s.last_gc);
  pv_pattern_free();
  return pv_finish("pv_boehm");
}
