/*
 * pv_mimalloc.c - the mimalloc provider on mimalloc (linked -lmimalloc),
 * under the preload: HeapInuse is mimalloc's committed bytes and HeapSys
 * its reserve, both marked estimated as the provider says, and the tracked
 * counts follow the known pattern.
 */
#include "pv_check.h"

void mi_process_info(size_t *elapsed_msecs, size_t *user_msecs,
                     size_t *system_msecs, size_t *current_rss,
                     size_t *peak_rss, size_t *current_commit,
                     size_t *peak_commit, size_t *page_faults);

static size_t g_commit;

static int matches_mi(const ms_snapshot_t *s) {
  size_t e, u, sy, rss, prss, pc, pf;
  mi_process_info(&e, &u, &sy, &rss, &prss, &g_commit, &pc, &pf);
  pv_snap((ms_snapshot_t *)s);
  return s->heap_inuse == g_commit;
}

int main(void) {
  static ms_snapshot_t s;
  pv_start("mimalloc");
  pv_check_pattern();
  int fresh = pv_until_fresh(&s, matches_mi);
  PV_CHECK(fresh, "HeapInuse = committed", "snapshot %llu, mimalloc %zu",
           (unsigned long long)s.heap_inuse, g_commit);
  PV_CHECK(s.heap_sys >= g_commit && s.heap_released == s.heap_sys - g_commit,
           "HeapReleased = reserved - committed",
           "HeapSys %llu, HeapReleased %llu, committed %zu",
           (unsigned long long)s.heap_sys, (unsigned long long)s.heap_released,
           g_commit);
  pv_check_quality(&s, MS_F_HEAP_INUSE, MS_Q_ESTIMATED, "mimalloc");
  pv_check_quality(&s, MS_F_HEAP_RELEASED, MS_Q_ESTIMATED, "mimalloc");
  pv_check_quality(&s, MS_F_HEAP_SYS, MS_Q_ESTIMATED, "mimalloc");
  pv_check_identities(&s);
  pv_pattern_free();
  return pv_finish("pv_mimalloc");
}
