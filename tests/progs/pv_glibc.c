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

/* Large blocks (256 KiB - 2 MiB) are mmapped chunks: freeing them unmaps
 * them, so HeapSys and Sys shrink at once. A cached mallinfo2 sample (up to
 * a second old) must follow, exactly: the preload counts those chunks'
 * mappings apart. Before, HeapSys stayed at the sample's figure (1,043 MB
 * against glibc's 814 MB for seconds after freeing 228 MB) and marked
 * exact, and Ready exceeded RSS. */
#define NMAP 100
static void *g_map[NMAP];

static void check_mmapped_frees(void) {
  static ms_snapshot_t s;
  uint64_t bytes = 0;
  for (int i = 0; i < NMAP; i++) {
    size_t size = ((size_t)256 << 10) + (size_t)(i % 8) * (256 << 10);
    g_map[i] = malloc(size);
    memset(g_map[i], 5, size);
    bytes += size;
  }
  /* A sample that has the blocks: the frees below meet a cached one. */
  int fresh = pv_until_fresh(&s, matches_mallinfo);
  PV_CHECK(fresh, "fresh sample with the mmapped blocks", "%s", "never agreed");
  PV_CHECK(g_mi.hblkhd >= bytes, "the large blocks are mmapped",
           "hblkhd %zu, blocks %llu", g_mi.hblkhd, (unsigned long long)bytes);
  for (int i = 0; i < NMAP; i++)
    free(g_map[i]);
  pv_snap(&s);
  struct mallinfo2 m = mallinfo2();
  PV_CHECK(s.heap_sys == m.arena + m.hblkhd,
           "HeapSys = arena + hblkhd right after freeing mmapped blocks",
           "HeapSys %llu (%s), mallinfo2 %zu, freed %llu",
           (unsigned long long)s.heap_sys,
           s.quality[MS_F_HEAP_SYS] == MS_Q_EXACT ? "exact" : "estimated",
           m.arena + m.hblkhd, (unsigned long long)bytes);
  PV_CHECK(s.heap_inuse == m.uordblks + m.hblkhd && s.heap_idle == m.fordblks,
           "HeapInuse and HeapIdle right after freeing mmapped blocks",
           "snapshot %llu/%llu, mallinfo2 %zu/%zu",
           (unsigned long long)s.heap_inuse, (unsigned long long)s.heap_idle,
           m.uordblks + m.hblkhd, m.fordblks);
  pv_check_quality(&s, MS_F_HEAP_SYS, MS_Q_EXACT, "glibc");
  pv_check_identities(&s);
}

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
  check_mmapped_frees();
  pv_pattern_free();
  return pv_finish("pv_glibc");
}
