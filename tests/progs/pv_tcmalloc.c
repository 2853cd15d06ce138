/*
 * pv_tcmalloc.c - the tcmalloc provider on gperftools' tcmalloc (linked
 * -ltcmalloc), under the preload: HeapInuse, HeapReleased and HeapAlloc
 * equal tcmalloc's own properties, and the tracked counts follow the known
 * pattern. Tracked HeapAlloc also equals tcmalloc's current_allocated_bytes
 * in absolute terms, except in the first snapshot, by exactly the bytes
 * its own detection left behind (check_first_snapshot below).
 */
#include <gnu/libc-version.h>

#include "pv_check.h"

int MallocExtension_GetNumericProperty(const char *property, size_t *value);
size_t nallocx(size_t size, int flags);

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
 * its engine figures are read before that. Every lookup of an allocator or
 * collector that is not in the process fails, and a failed dlsym leaves
 * glibc's per-thread dlerror state allocated through malloc: here the
 * last one, the collector's GC_set_on_collection_event, keeps (glibc 2.34
 * and later) a 24-byte result object and one block holding the message
 * "undefined symbol: GC_set_on_collection_event" and the name of the
 * object that looked (the preload's path). The preload counts both, so
 * the next snapshot has them, but the first snapshot's HeapAlloc is below
 * tcmalloc's figure read after it by their usable sizes (96 + 32 = 128
 * bytes with a 35-character path). The state lives until the thread's next
 * dlsym that succeeds, which frees it. Nothing else separates the two: no
 * allocation of tcmalloc's or of the preload's own goes uncounted.
 *
 * Runs before anything else has taken a snapshot; reads tcmalloc's figure
 * only through GetNumericProperty (which does not allocate) and writes
 * nothing until the last snapshot. */
static void check_first_snapshot(void) {
  static ms_snapshot_t s1, s2, s3;
  static const char msg[] = "undefined symbol: GC_set_on_collection_event";
  /* Looked up now: the lookup in pv_snap() would come between the first
   * figure and the first snapshot. */
  pv_read_p = (pv_read_fn)dlsym(RTLD_DEFAULT, "ms_snapshot_read");
  Dl_info di;
  int have_path = pv_read_p && dladdr((void *)pv_read_p, &di) && di.dli_fname;
  uint64_t before = tc_allocated();
  pv_snap(&s1); /* the first: detection */
  uint64_t after = tc_allocated();
  pv_snap(&s2);
  /* A lookup that succeeds frees this thread's dlerror state. */
  void *found = dlsym(RTLD_DEFAULT, "MallocExtension_GetNumericProperty");
  uint64_t freed = tc_allocated();
  pv_snap(&s3);

  PV_CHECK(s1.heap_alloc == before,
           "first snapshot: tracked HeapAlloc = current_allocated_bytes "
           "before detection",
           "tracked %llu, tcmalloc %llu", (unsigned long long)s1.heap_alloc,
           (unsigned long long)before);
  PV_CHECK(after > before && s2.heap_alloc == after &&
               s2.heap_objects > s1.heap_objects,
           "detection leaves live blocks, tracked from the next snapshot",
           "tcmalloc %llu -> %llu, tracked %llu -> %llu, objects %llu -> "
           "%llu",
           (unsigned long long)before, (unsigned long long)after,
           (unsigned long long)s1.heap_alloc, (unsigned long long)s2.heap_alloc,
           (unsigned long long)s1.heap_objects,
           (unsigned long long)s2.heap_objects);
  PV_CHECK(found && freed == before && s3.heap_alloc == freed &&
               s3.heap_objects == s1.heap_objects,
           "they are dlerror's state: a dlsym that succeeds frees all of them",
           "tcmalloc %llu after the dlsym (%llu before detection), tracked "
           "%llu, objects %llu (%llu before detection)",
           (unsigned long long)freed, (unsigned long long)before,
           (unsigned long long)s3.heap_alloc,
           (unsigned long long)s3.heap_objects,
           (unsigned long long)s1.heap_objects);
  /* Their sizes, where dlerror keeps a result object (glibc 2.34 on). */
  unsigned major = 0, minor = 0;
  if (sscanf(gnu_get_libc_version(), "%u.%u", &major, &minor) != 2 ||
      major < 2 || (major == 2 && minor < 34) || !have_path) {
    pv_say("skip dlerror's block sizes: glibc %s", gnu_get_libc_version());
    return;
  }
  size_t msg_block = strlen(msg) + 1 + strlen(di.dli_fname) + 1;
  uint64_t want = nallocx(msg_block, 0) + nallocx(24, 0);
  PV_CHECK(s2.heap_objects - s1.heap_objects == 2 && after - before == want,
           "the first snapshot's gap = dlerror's result object + message",
           "gap %llu in %llu objects, want %llu in 2 (message %zu bytes: "
           "\"%s: %s\")",
           (unsigned long long)(after - before),
           (unsigned long long)(s2.heap_objects - s1.heap_objects),
           (unsigned long long)want, msg_block, di.dli_fname, msg);
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
