/*
 * pv_tcmalloc.c - the tcmalloc provider on gperftools' tcmalloc (linked
 * -ltcmalloc), under the preload: HeapInuse, HeapReleased and HeapAlloc
 * equal tcmalloc's own properties, and the tracked counts follow the known
 * pattern.
 */
#include "pv_check.h"

int MallocExtension_GetNumericProperty(const char *property, size_t *value);

static size_t prop(const char *name) {
  size_t v = 0;
  if (!MallocExtension_GetNumericProperty(name, &v))
    pv_say("FAIL property %s", name);
  return v;
}

static struct { uint64_t inuse, released, alloc; } g_tc;

static void read_tc(void) {
  size_t heap = prop("generic.heap_size");
  size_t free_b = prop("tcmalloc.pageheap_free_bytes");
  g_tc.released = prop("tcmalloc.pageheap_unmapped_bytes");
  g_tc.inuse = heap - free_b - g_tc.released;
  g_tc.alloc = prop("generic.current_allocated_bytes");
}

static int matches_tc(const ms_snapshot_t *s) {
  read_tc();
  pv_snap((ms_snapshot_t *)s);
  /* The provider's HeapAlloc is not the snapshot's (tracking wins), so it
   * is compared through the pattern below. */
  return s->heap_inuse == g_tc.inuse && s->heap_released == g_tc.released;
}

int main(void) {
  static ms_snapshot_t s;
  pv_start("tcmalloc");
  read_tc();
  uint64_t alloc0 = g_tc.alloc;
  pv_check_pattern();
  read_tc();
  PV_CHECK(g_tc.alloc - alloc0 == pv_live_bytes,
           "current_allocated_bytes moved as tracked HeapAlloc",
           "tcmalloc moved %lld, tracked %llu",
           (long long)(g_tc.alloc - alloc0), (unsigned long long)pv_live_bytes);
  int fresh = pv_until_fresh(&s, matches_tc);
  PV_CHECK(fresh, "HeapInuse and HeapReleased = tcmalloc's",
           "snapshot %llu/%llu, tcmalloc %llu/%llu",
           (unsigned long long)s.heap_inuse,
           (unsigned long long)s.heap_released, (unsigned long long)g_tc.inuse,
           (unsigned long long)g_tc.released);
  pv_check_quality(&s, MS_F_HEAP_INUSE, MS_Q_EXACT, "tcmalloc");
  pv_check_quality(&s, MS_F_HEAP_RELEASED, MS_Q_EXACT, "tcmalloc");
  pv_check_quality(&s, MS_F_MSPAN_SYS, MS_Q_EXACT, "tcmalloc");
  pv_check_identities(&s);
  pv_pattern_free();
  return pv_finish("pv_tcmalloc");
}
