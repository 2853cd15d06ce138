/*
 * pv_tcmalloc.c - the tcmalloc provider on gperftools' tcmalloc (linked
 * -ltcmalloc), under the preload: HeapInuse, HeapReleased and HeapAlloc
 * equal tcmalloc's own properties, and the tracked counts follow the known
 * pattern. Tracked HeapAlloc also equals tcmalloc's current_allocated_bytes
 * in absolute terms, from the first snapshot on (check_first_snapshot).
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

static uint64_t tc_allocated(void) {
  return prop("generic.current_allocated_bytes");
}

/* The first snapshot of a process detects the providers (registry.c), and
 * detection allocates: a failed dlsym leaves glibc's dlerror state (a
 * result object and the message) on the heap until the thread's next
 * dlsym that succeeds. Detection runs before the engine's figures are
 * read, so even the first snapshot's tracked HeapAlloc is tcmalloc's
 * current_allocated_bytes read right after it (GetNumericProperty does not
 * allocate), and the next snapshot, after a dlsym that frees that state,
 * agrees again. Runs before anything else has taken a snapshot. */
static void check_first_snapshot(void) {
  static ms_snapshot_t s1, s2;
  /* Looked up now: the lookup in pv_snap() would come between the first
   * snapshot and tcmalloc's figure. */
  pv_read_p = (pv_read_fn)dlsym(RTLD_DEFAULT, "ms_snapshot_read");
  uint64_t before = tc_allocated();
  pv_snap(&s1); /* the first: detection */
  uint64_t after = tc_allocated();
  void *found = dlsym(RTLD_DEFAULT, "MallocExtension_GetNumericProperty");
  pv_snap(&s2);
  uint64_t freed = tc_allocated();
  PV_CHECK(s1.heap_alloc == after,
           "first snapshot: tracked HeapAlloc = current_allocated_bytes",
           "tracked %llu, tcmalloc %llu (%llu before detection)",
           (unsigned long long)s1.heap_alloc, (unsigned long long)after,
           (unsigned long long)before);
  PV_CHECK(found && s2.heap_alloc == freed,
           "after a dlsym that succeeds: tracked HeapAlloc = "
           "current_allocated_bytes",
           "tracked %llu, tcmalloc %llu", (unsigned long long)s2.heap_alloc,
           (unsigned long long)freed);
}

int main(void) {
  static ms_snapshot_t s;
  check_first_snapshot();
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
  /* g_tc was read just before s (matches_tc): nothing allocated between. */
  PV_CHECK(s.heap_alloc == g_tc.alloc,
           "tracked HeapAlloc = current_allocated_bytes (absolute)",
           "tracked %llu, tcmalloc %llu", (unsigned long long)s.heap_alloc,
           (unsigned long long)g_tc.alloc);
  pv_check_quality(&s, MS_F_HEAP_INUSE, MS_Q_EXACT, "tcmalloc");
  pv_check_quality(&s, MS_F_HEAP_RELEASED, MS_Q_EXACT, "tcmalloc");
  pv_check_quality(&s, MS_F_MSPAN_SYS, MS_Q_EXACT, "tcmalloc");
  pv_check_identities(&s);
  pv_pattern_free();
  return pv_finish("pv_tcmalloc");
}
