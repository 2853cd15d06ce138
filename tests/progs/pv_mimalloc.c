/*
 * pv_mimalloc.c - the mimalloc provider on mimalloc (linked -lmimalloc),
 * under the preload: HeapSys is mimalloc's reserve, and what of it is Ready
 * is what the kernel backs, not what mimalloc calls committed (it commits
 * whole segments before anything touches them: issue 10, item 4). The
 * backed part holds at least the pattern's live blocks (each written) and
 * at most the process's anonymous RSS; HeapInuse is at most committed; all
 * three estimated, as the provider says; the tracked counts follow the
 * known pattern.
 */
#include "pv_check.h"

void mi_process_info(size_t *elapsed_msecs, size_t *user_msecs,
                     size_t *system_msecs, size_t *current_rss,
                     size_t *peak_rss, size_t *current_commit,
                     size_t *peak_commit, size_t *page_faults);

static size_t g_commit;
static uint64_t g_anon_before, g_anon_after;

/* RssAnon of /proc/self/status, in bytes (0 if unreadable). */
static uint64_t rss_anon(void) {
  char line[256];
  unsigned long long kb = 0;
  FILE *f = fopen("/proc/self/status", "r");
  if (!f)
    return 0;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "RssAnon: %llu kB", &kb) == 1)
      break;
  fclose(f);
  return (uint64_t)kb * 1024;
}

static uint64_t backed(const ms_snapshot_t *s) {
  return s->heap_sys - s->heap_released;
}

/* A snapshot whose sample and mappings read are both from after the
 * pattern: the backed heap then holds its live blocks. */
static int matches_mi(const ms_snapshot_t *s) {
  size_t e, u, sy, rss, prss, pc, pf;
  mi_process_info(&e, &u, &sy, &rss, &prss, &g_commit, &pc, &pf);
  g_anon_before = rss_anon();
  pv_snap((ms_snapshot_t *)s);
  g_anon_after = rss_anon();
  return s->heap_sys >= g_commit && backed(s) >= pv_live_bytes;
}

int main(void) {
  static ms_snapshot_t s;
  pv_start("mimalloc");
  pv_check_pattern();
  int fresh = pv_until_fresh(&s, matches_mi);
  PV_CHECK(fresh, "backed heap holds the live blocks",
           "HeapSys %llu - HeapReleased %llu < live %llu (committed %zu)",
           (unsigned long long)s.heap_sys, (unsigned long long)s.heap_released,
           (unsigned long long)pv_live_bytes, g_commit);
  uint64_t anon = g_anon_before > g_anon_after ? g_anon_before : g_anon_after;
  PV_CHECK(backed(&s) <= anon, "backed heap within the anonymous RSS",
           "HeapSys - HeapReleased %llu > RssAnon %llu (committed %zu)",
           (unsigned long long)backed(&s), (unsigned long long)anon, g_commit);
  PV_CHECK(s.heap_inuse <= g_commit && s.heap_inuse <= backed(&s),
           "HeapInuse within committed and backed",
           "HeapInuse %llu, committed %zu, backed %llu",
           (unsigned long long)s.heap_inuse, g_commit,
           (unsigned long long)backed(&s));
  pv_check_quality(&s, MS_F_HEAP_INUSE, MS_Q_ESTIMATED, "mimalloc");
  pv_check_quality(&s, MS_F_HEAP_RELEASED, MS_Q_ESTIMATED, "mimalloc");
  pv_check_quality(&s, MS_F_HEAP_SYS, MS_Q_ESTIMATED, "mimalloc");
  pv_check_identities(&s);
  pv_pattern_free();
  return pv_finish("pv_mimalloc");
}
