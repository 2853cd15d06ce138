/*
 * test_provider_merge.c - how the providers' figures combine with the
 * engine's (src/providers/registry.c, ms__providers_merge): who owns the
 * heap fields, what goes to OtherSys, which BySize wins, and that nothing
 * a provider lacks is ever filled in.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/fields.h"
#include "core/engine.h"
#include "core/hotpath.h"
#include "compose/snapshot.h"
#include "providers/provider_int.h"

static const ms__provider_t fake_malloc = {.name = "fakemalloc",
                                           .kind = MS__PV_MALLOC};
static const ms__provider_t fake_gc = {.name = "fakegc",
                                       .kind = MS__PV_COLLECTOR};

static ms_snapshot_t g_snap;
static ms__pv_sample_t g_ms, g_gs;

static int setup(void **state) {
  (void)state;
  memset(&g_snap, 0, sizeof g_snap);
  memset(g_snap.source, 0xff, sizeof g_snap.source);
  memset(&g_ms, 0, sizeof g_ms);
  memset(&g_gs, 0, sizeof g_gs);
  /* Samples start as if taken at the engine's last cut (mapped blocks). */
  ms__engine_last_mapped(&g_ms.tracked_mapped);
  return 0;
}

/* What the engine puts in with the preload tracking objects. */
static void engine_tracked(void) {
  int t = ms__snapshot_add_provider(&g_snap, "tracked");
  g_snap.heap_alloc = 1000;
  g_snap.mallocs = 10;
  g_snap.nsize_classes = 3;
  ms__set_quality(&g_snap, MS_F_HEAP_ALLOC, MS_Q_EXACT, t);
  ms__set_quality(&g_snap, MS_F_MALLOCS, MS_Q_EXACT, t);
  ms__set_quality(&g_snap, MS_F_BY_SIZE, MS_Q_EXACT, t);
}

/* A glibc-like malloc sample: Sys = HeapSys, no metadata. */
static void malloc_sample(void) {
  ms__pv_set(&g_ms, MS_F_SYS, 8000, MS_Q_EXACT);
  ms__pv_set(&g_ms, MS_F_HEAP_SYS, 8000, MS_Q_EXACT);
  ms__pv_set(&g_ms, MS_F_HEAP_INUSE, 5000, MS_Q_EXACT);
  ms__pv_set(&g_ms, MS_F_HEAP_IDLE, 3000, MS_Q_EXACT);
  ms__pv_set(&g_ms, MS_F_HEAP_RELEASED, 1000, MS_Q_ESTIMATED);
  ms__pv_set(&g_ms, MS_F_HEAP_ALLOC, 4444, MS_Q_EXACT);
}

static void test_malloc_owns_heap_tracking_kept(void **state) {
  (void)state;
  engine_tracked();
  malloc_sample();
  ms__providers_merge(&g_snap, MS__FEED_OBJECTS, &fake_malloc, &g_ms, NULL,
                      NULL);
  assert_int_equal(g_snap.nproviders, 2);
  assert_string_equal(g_snap.providers[1], "fakemalloc");
  assert_int_equal(g_snap.heap_inuse, 5000);
  assert_int_equal(g_snap.heap_idle, 3000);
  assert_int_equal(g_snap.heap_sys, 8000);
  assert_int_equal(g_snap.heap_released, 1000);
  assert_int_equal(g_snap.quality[MS_F_HEAP_RELEASED], MS_Q_ESTIMATED);
  assert_int_equal(g_snap.source[MS_F_HEAP_INUSE], 1);
  /* The tracked HeapAlloc stays, with its source. */
  assert_int_equal(g_snap.heap_alloc, 1000);
  assert_int_equal(g_snap.source[MS_F_HEAP_ALLOC], 0);
  /* Sys = HeapSys: nothing left over for OtherSys, and Sys is left to
   * the sum of the parts. */
  assert_int_equal(g_snap.other_sys, 0);
  assert_int_equal(g_snap.quality[MS_F_SYS], MS_Q_UNAVAILABLE);
  /* The classes the heap's owner does not map are exactly 0 (memory it has
   * not mapped), credited to the owner: the breakdown can be computed. */
  static const ms_field_t zero[] = {MS_F_MSPAN_SYS, MS_F_MCACHE_SYS,
                                    MS_F_STACK_SYS, MS_F_GC_SYS,
                                    MS_F_OTHER_SYS, MS_F_BUCK_HASH_SYS};
  for (size_t i = 0; i < sizeof zero / sizeof zero[0]; i++) {
    assert_int_equal(g_snap.quality[zero[i]], MS_Q_EXACT);
    assert_int_equal(ms__field_u64(&g_snap, zero[i]), 0);
    assert_int_equal(g_snap.source[zero[i]], 1);
  }
  assert_int_equal(g_snap.quality[MS_F_HEAP_OBJECTS], MS_Q_UNAVAILABLE);
}

static void test_malloc_fills_objects_without_tracking(void **state) {
  (void)state;
  malloc_sample();
  ms__pv_set(&g_ms, MS_F_MALLOCS, 77, MS_Q_ESTIMATED);
  ms__pv_set(&g_ms, MS_F_BY_SIZE, 0, MS_Q_ESTIMATED);
  g_ms.nsize_classes = 2;
  g_ms.by_size[0] = (ms_size_class_t){8, 5, 1};
  g_ms.by_size[1] = (ms_size_class_t){16, 9, 2};
  ms__providers_merge(&g_snap, 0, &fake_malloc, &g_ms, NULL, NULL);
  assert_int_equal(g_snap.heap_alloc, 4444);
  assert_int_equal(g_snap.quality[MS_F_HEAP_ALLOC], MS_Q_EXACT);
  assert_int_equal(g_snap.mallocs, 77);
  assert_int_equal(g_snap.quality[MS_F_MALLOCS], MS_Q_ESTIMATED);
  assert_int_equal(g_snap.nsize_classes, 2);
  assert_int_equal(g_snap.by_size[1].size, 16);
  assert_int_equal(g_snap.by_size[1].mallocs, 9);
  assert_int_equal(g_snap.quality[MS_F_BY_SIZE], MS_Q_ESTIMATED);
}

static void test_tracked_classes_win(void **state) {
  (void)state;
  engine_tracked();
  malloc_sample();
  ms__pv_set(&g_ms, MS_F_BY_SIZE, 0, MS_Q_ESTIMATED);
  g_ms.nsize_classes = 40;
  ms__providers_merge(&g_snap, MS__FEED_OBJECTS, &fake_malloc, &g_ms, NULL,
                      NULL);
  assert_int_equal(g_snap.nsize_classes, 3);
  assert_int_equal(g_snap.quality[MS_F_BY_SIZE], MS_Q_EXACT);
  assert_int_equal(g_snap.source[MS_F_BY_SIZE], 0);
}

static void test_unclassified_memory_goes_to_other(void **state) {
  (void)state;
  malloc_sample();
  g_ms.v[MS_F_SYS] = 9000; /* 1000 the provider cannot place */
  ms__providers_merge(&g_snap, 0, &fake_malloc, &g_ms, NULL, NULL);
  assert_int_equal(g_snap.other_sys, 1000);
  assert_int_equal(g_snap.quality[MS_F_OTHER_SYS], MS_Q_EXACT);
  assert_int_equal(g_snap.quality[MS_F_SYS], MS_Q_UNAVAILABLE);
}

static void test_sys_below_parts_is_shown_as_is(void **state) {
  (void)state;
  malloc_sample();
  g_ms.v[MS_F_SYS] = 7000; /* less than HeapSys: the mismatch must show */
  ms__providers_merge(&g_snap, 0, &fake_malloc, &g_ms, NULL, NULL);
  assert_int_equal(g_snap.sys, 7000);
  assert_int_equal(g_snap.quality[MS_F_SYS], MS_Q_EXACT);
  assert_int_equal(g_snap.heap_sys, 8000);
}

static void test_runtime_heap_wins(void **state) {
  (void)state;
  int r = ms__snapshot_add_provider(&g_snap, "runtime");
  g_snap.heap_sys = 1 << 20;
  g_snap.heap_inuse = 1 << 20;
  ms__set_quality(&g_snap, MS_F_HEAP_SYS, MS_Q_EXACT, r);
  ms__set_quality(&g_snap, MS_F_HEAP_INUSE, MS_Q_EXACT, r);
  ms__set_quality(&g_snap, MS_F_HEAP_IDLE, MS_Q_EXACT, r);
  malloc_sample();
  ms__providers_merge(&g_snap, MS__FEED_HEAP | MS__FEED_API, &fake_malloc,
                      &g_ms, NULL, NULL);
  assert_int_equal(g_snap.heap_sys, 1 << 20);
  assert_int_equal(g_snap.source[MS_F_HEAP_SYS], r);
  /* malloc's memory is other memory of this program. */
  assert_int_equal(g_snap.other_sys, 8000);
  assert_int_equal(g_snap.source[MS_F_OTHER_SYS], 1);
  /* The runtime did not report released memory; malloc's is not its. */
  assert_int_equal(g_snap.quality[MS_F_HEAP_RELEASED], MS_Q_UNAVAILABLE);
}

static void test_collector_owns_heap(void **state) {
  (void)state;
  engine_tracked();
  malloc_sample();
  ms__pv_set(&g_gs, MS_F_HEAP_SYS, 64000, MS_Q_EXACT);
  ms__pv_set(&g_gs, MS_F_HEAP_INUSE, 40000, MS_Q_EXACT);
  ms__pv_set(&g_gs, MS_F_HEAP_IDLE, 24000, MS_Q_EXACT);
  ms__pv_set(&g_gs, MS_F_HEAP_RELEASED, 4000, MS_Q_EXACT);
  ms__pv_set(&g_gs, MS_F_HEAP_ALLOC, 30000, MS_Q_ESTIMATED);
  ms__pv_set(&g_gs, MS_F_GC_SYS, 2000, MS_Q_EXACT);
  ms__pv_set(&g_gs, MS_F_SYS, 66000, MS_Q_EXACT);
  ms__pv_set(&g_gs, MS_F_ENABLE_GC, 1, MS_Q_EXACT);
  ms__providers_merge(&g_snap, MS__FEED_OBJECTS, &fake_malloc, &g_ms, &fake_gc,
                      &g_gs);
  assert_int_equal(g_snap.nproviders, 3);
  assert_string_equal(g_snap.providers[2], "fakegc");
  assert_int_equal(g_snap.heap_sys, 64000);
  assert_int_equal(g_snap.gc_sys, 2000);
  assert_int_equal(g_snap.source[MS_F_HEAP_SYS], 2);
  /* The collector's HeapAlloc replaces the tracked malloc bytes. */
  assert_int_equal(g_snap.heap_alloc, 30000);
  assert_int_equal(g_snap.quality[MS_F_HEAP_ALLOC], MS_Q_ESTIMATED);
  assert_int_equal(g_snap.source[MS_F_HEAP_ALLOC], 2);
  /* Tracked call counts stay. */
  assert_int_equal(g_snap.mallocs, 10);
  assert_int_equal(g_snap.source[MS_F_MALLOCS], 0);
  /* malloc's whole heap is OtherSys. */
  assert_int_equal(g_snap.other_sys, 8000);
  assert_int_equal(g_snap.source[MS_F_OTHER_SYS], 1);
  assert_int_equal(g_snap.enable_gc, 1);
}

static void test_collector_without_heap_leaves_malloc_owner(void **state) {
  (void)state;
  malloc_sample();
  ms__pv_set(&g_gs, MS_F_ENABLE_GC, 1, MS_Q_EXACT); /* not initialised */
  ms__providers_merge(&g_snap, 0, &fake_malloc, &g_ms, &fake_gc, &g_gs);
  assert_int_equal(g_snap.heap_sys, 8000);
  assert_int_equal(g_snap.source[MS_F_HEAP_SYS], 0);
  /* The collector without a heap adds nothing to OtherSys. */
  assert_int_equal(g_snap.other_sys, 0);
}

static void test_no_sample_no_figures(void **state) {
  (void)state;
  /* A provider whose read failed: its name is listed, nothing is filled. */
  ms__providers_merge(&g_snap, 0, &fake_malloc, NULL, NULL, NULL);
  assert_int_equal(g_snap.nproviders, 1);
  for (int f = 0; f < MS_F__COUNT; f++)
    assert_int_equal(g_snap.quality[f], MS_Q_UNAVAILABLE);
}

/* A cached sample taken when the tracked HeapAlloc was 1000 meets a
 * snapshot in which the program has since allocated more: the heap figures
 * shift by the change, marked estimated, and fragOverhead stays >= 0.
 * HeapSys and Sys are estimates too: whether the arena grew (or trimmed
 * its top) meanwhile, the sample cannot say. */
static void test_cached_sample_shifted_by_tracked(void **state) {
  (void)state;
  engine_tracked();
  malloc_sample();
  g_ms.have_tracked = 1;
  g_ms.tracked_heap_alloc = 1000;
  g_snap.heap_alloc = 2500; /* +1500 since the sample */
  ms__providers_merge(&g_snap, MS__FEED_OBJECTS | MS__FEED_TRACKED,
                      &fake_malloc, &g_ms, NULL, NULL);
  assert_int_equal(g_snap.heap_inuse, 6500);
  assert_int_equal(g_snap.heap_idle, 1500);
  assert_int_equal(g_snap.heap_sys, 8000);
  assert_int_equal(g_snap.quality[MS_F_HEAP_INUSE], MS_Q_ESTIMATED);
  assert_int_equal(g_snap.quality[MS_F_HEAP_IDLE], MS_Q_ESTIMATED);
  assert_int_equal(g_snap.quality[MS_F_HEAP_SYS], MS_Q_ESTIMATED);
  assert_true(g_snap.heap_inuse >= g_snap.heap_alloc);
}

/* Since the cached sample the program freed only blocks that were mappings
 * of their own (glibc's mmapped chunks, counted apart by the preload): they
 * went back to the OS, so HeapInuse, HeapSys and Sys shrink by their
 * mappings, exactly, and HeapIdle does not grow (it did before: HeapSys
 * stayed at the sample's, Ready above RSS). */
static void test_cached_sample_mapped_frees(void **state) {
  (void)state;
  engine_tracked();
  malloc_sample();
  ms__pv_set(&g_ms, MS_F_SYS, 20000, MS_Q_EXACT);
  ms__pv_set(&g_ms, MS_F_HEAP_SYS, 20000, MS_Q_EXACT);
  ms__pv_set(&g_ms, MS_F_HEAP_INUSE, 17000, MS_Q_EXACT);
  g_ms.have_tracked = 1;
  ms__engine_last_mapped(&g_ms.tracked_mapped);
  g_ms.tracked_total_alloc = 50000;
  g_ms.tracked_heap_alloc = 13000;
  /* Two mmapped chunks of 4096 + 16 bytes (4080 usable) freed. */
  ms__track_mapped(4080, 4096, 1);
  ms__track_mapped(4080, 4096, 1);
  static ms_snapshot_t cut;
  ms__engine_read(&cut); /* the engine's counters as the snapshot's */
  g_snap.total_alloc = 50000;
  g_snap.heap_alloc = 13000 - 2 * 4080;
  ms__providers_merge(&g_snap, MS__FEED_OBJECTS | MS__FEED_TRACKED,
                      &fake_malloc, &g_ms, NULL, NULL);
  assert_int_equal(g_snap.heap_inuse, 17000 - 2 * 4096);
  assert_int_equal(g_snap.heap_sys, 20000 - 2 * 4096);
  assert_int_equal(g_snap.heap_idle, 3000);
  assert_int_equal(g_snap.quality[MS_F_HEAP_SYS], MS_Q_EXACT);
  assert_int_equal(g_snap.quality[MS_F_HEAP_INUSE], MS_Q_EXACT);
  /* Sys is the sum of the parts (finished by the snapshot), all exact. */
  assert_int_equal(g_snap.heap_sys, g_snap.heap_inuse + g_snap.heap_idle);
}

/* Past the free backed memory (HeapIdle - HeapReleased = 2000), the growth
 * came from new mappings: HeapSys grows, estimated. */
static void test_cached_sample_growth_maps_more(void **state) {
  (void)state;
  engine_tracked();
  malloc_sample();
  g_ms.have_tracked = 1;
  g_ms.tracked_heap_alloc = 1000;
  g_snap.heap_alloc = 4000; /* +3000 */
  ms__providers_merge(&g_snap, MS__FEED_OBJECTS | MS__FEED_TRACKED,
                      &fake_malloc, &g_ms, NULL, NULL);
  assert_int_equal(g_snap.heap_inuse, 8000);
  assert_int_equal(g_snap.heap_idle, 1000); /* = HeapReleased */
  assert_int_equal(g_snap.heap_sys, 9000);
  assert_int_equal(g_snap.heap_sys, g_snap.heap_inuse + g_snap.heap_idle);
  assert_int_equal(g_snap.quality[MS_F_HEAP_SYS], MS_Q_ESTIMATED);
}

/* The walk of a cached sample saw frees that the tracked HeapAlloc paired
 * with it (read before the walk) did not: the shift takes them off again,
 * and HeapInuse would fall below HeapAlloc (90.7 MB below it for 14 s on
 * a large heap). HeapInuse is raised to HeapAlloc from the free memory,
 * estimated, and HeapSys = HeapInuse + HeapIdle still holds. */
static void test_shift_never_below_heap_alloc(void **state) {
  (void)state;
  engine_tracked();
  malloc_sample();
  g_ms.have_tracked = 1;
  g_ms.tracked_total_alloc = 20000;
  g_ms.tracked_heap_alloc = 9000; /* 4500 freed during the walk */
  g_snap.total_alloc = 20000;
  g_snap.heap_alloc = 4500;
  ms__providers_merge(&g_snap, MS__FEED_OBJECTS | MS__FEED_TRACKED,
                      &fake_malloc, &g_ms, NULL, NULL);
  assert_true(g_snap.heap_inuse >= g_snap.heap_alloc);
  assert_int_equal(g_snap.heap_inuse, 4500);
  assert_int_equal(g_snap.heap_sys, 8000);
  assert_int_equal(g_snap.heap_sys, g_snap.heap_inuse + g_snap.heap_idle);
  assert_true(g_snap.heap_released <= g_snap.heap_idle);
  assert_int_equal(g_snap.quality[MS_F_HEAP_INUSE], MS_Q_ESTIMATED);
}

/* A sample as fresh as the snapshot stays exact. */
static void test_fresh_sample_not_shifted(void **state) {
  (void)state;
  engine_tracked();
  malloc_sample();
  g_ms.have_tracked = 1;
  g_ms.tracked_heap_alloc = 1000;
  ms__providers_merge(&g_snap, MS__FEED_OBJECTS | MS__FEED_TRACKED,
                      &fake_malloc, &g_ms, NULL, NULL);
  assert_int_equal(g_snap.heap_inuse, 5000);
  assert_int_equal(g_snap.quality[MS_F_HEAP_INUSE], MS_Q_EXACT);
}

/* memtop attach --track: HeapAlloc is an estimate (the allocator's in-use
 * at the attach plus the counted delta, since the attach). Above the
 * allocator's own HeapInuse, the estimate gives way: HeapAlloc comes down
 * to HeapInuse, which stays the allocator's exact figure. */
static void test_estimated_alloc_yields_to_inuse(void **state) {
  (void)state;
  int t = ms__snapshot_add_provider(&g_snap, "tracked(since attach)");
  g_snap.heap_alloc = 5100; /* HeapInuse is 5000 */
  ms__set_quality(&g_snap, MS_F_HEAP_ALLOC, MS_Q_ESTIMATED, t);
  malloc_sample();
  ms__providers_merge(&g_snap, MS__FEED_OBJECTS | MS__FEED_TRACKED,
                      &fake_malloc, &g_ms, NULL, NULL);
  assert_int_equal(g_snap.heap_inuse, 5000);
  assert_int_equal(g_snap.quality[MS_F_HEAP_INUSE], MS_Q_EXACT);
  assert_int_equal(g_snap.heap_alloc, 5000);
  assert_int_equal(g_snap.quality[MS_F_HEAP_ALLOC], MS_Q_ESTIMATED);
  assert_int_equal(g_snap.heap_sys, 8000);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_malloc_owns_heap_tracking_kept, setup),
      cmocka_unit_test_setup(test_malloc_fills_objects_without_tracking, setup),
      cmocka_unit_test_setup(test_tracked_classes_win, setup),
      cmocka_unit_test_setup(test_unclassified_memory_goes_to_other, setup),
      cmocka_unit_test_setup(test_sys_below_parts_is_shown_as_is, setup),
      cmocka_unit_test_setup(test_runtime_heap_wins, setup),
      cmocka_unit_test_setup(test_collector_owns_heap, setup),
      cmocka_unit_test_setup(test_collector_without_heap_leaves_malloc_owner,
                             setup),
      cmocka_unit_test_setup(test_no_sample_no_figures, setup),
      cmocka_unit_test_setup(test_cached_sample_shifted_by_tracked, setup),
      cmocka_unit_test_setup(test_cached_sample_growth_maps_more, setup),
      cmocka_unit_test_setup(test_cached_sample_mapped_frees, setup),
      cmocka_unit_test_setup(test_fresh_sample_not_shifted, setup),
      cmocka_unit_test_setup(test_shift_never_below_heap_alloc, setup),
      cmocka_unit_test_setup(test_estimated_alloc_yields_to_inuse, setup),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
