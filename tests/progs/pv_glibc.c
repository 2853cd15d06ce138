/*
 * pv_glibc.c - the glibc provider on glibc's malloc, under the preload:
 * HeapInuse and HeapIdle equal mallinfo2's, HeapReleased (estimated from
 * mincore) covers what malloc_trim handed back, and the tracked counts
 * follow the known pattern exactly. See pv_check.h.
 */
#include "pv_check.h"

static struct mallinfo2 g_mi;

static int matches_mallinfo(const ms_snapshot_t *s) {
  g_mi = mallinfo2();
  pv_snap((ms_snapshot_t *)s);
  return s->heap_inuse == g_mi.uordblks + g_mi.hblkhd &&
         s->heap_idle == g_mi.fordblks;
}

#define NBIG 200
#define BIG 100000
static void *g_big[NBIG];

int main(void) {
  static ms_snapshot_t s;
  pv_start("glibc");
  pv_check_pattern();

  int fresh = pv_until_fresh(&s, matches_mallinfo);
  PV_CHECK(fresh, "HeapInuse = uordblks + hblkhd, HeapIdle = fordblks",
           "snapshot %llu/%llu, mallinfo2 %zu/%zu",
           (unsigned long long)s.heap_inuse, (unsigned long long)s.heap_idle,
           g_mi.uordblks + g_mi.hblkhd, g_mi.fordblks);
  PV_CHECK(s.heap_sys == g_mi.arena + g_mi.hblkhd, "HeapSys = arena + hblkhd",
           "%llu vs %zu", (unsigned long long)s.heap_sys,
           g_mi.arena + g_mi.hblkhd);
  pv_check_quality(&s, MS_F_HEAP_INUSE, MS_Q_EXACT, "glibc");
  pv_check_quality(&s, MS_F_HEAP_IDLE, MS_Q_EXACT, "glibc");
  pv_check_quality(&s, MS_F_HEAP_SYS, MS_Q_EXACT, "glibc");
  pv_check_identities(&s);

  /* Released memory: free every other large block (they cannot merge),
   * then malloc_trim hands their pages back with MADV_DONTNEED. */
  for (int i = 0; i < NBIG; i++) {
    g_big[i] = malloc(BIG);
    memset(g_big[i], 7, BIG);
  }
  uint64_t freed = 0;
  for (int i = 0; i < NBIG; i += 2) {
    free(g_big[i]);
    g_big[i] = NULL;
    freed += BIG;
  }
  malloc_trim(0);
  fresh = pv_until_fresh(&s, matches_mallinfo);
  PV_CHECK(fresh, "fresh sample after malloc_trim", "%s", "never agreed");
  pv_check_quality(&s, MS_F_HEAP_RELEASED, MS_Q_ESTIMATED, "glibc");
  PV_CHECK(s.heap_released >= freed * 8 / 10,
           "HeapReleased covers the trimmed blocks",
           "HeapReleased %llu, trimmed %llu",
           (unsigned long long)s.heap_released, (unsigned long long)freed);
  pv_check_identities(&s);

  for (int i = 0; i < NBIG; i++)
    free(g_big[i]);
  pv_pattern_free();
  return pv_finish("pv_glibc");
}
