/*
 * test_model.c - memtop's model (src/tui/model.c): rates from the last
 * two samples, the history ring and its wrap-around, sorting that keeps
 * the selection on the same process, the states (an exited process keeps
 * its last figures), and pause percentiles from the histogram.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "memstats.h"
#include "tui/model.h"

static ms_snapshot_t snap;

/* A snapshot with every field exact, taken at `mono_s` seconds. */
static const ms_snapshot_t *make(int pid, double mono_s, uint64_t mallocs,
                                 uint64_t total_alloc, uint32_t num_gc) {
  memset(&snap, 0, sizeof snap);
  snap.struct_size = sizeof snap;
  snap.pid = pid;
  snap.start_time = 1000;
  snprintf(snap.comm, sizeof snap.comm, "p%d", pid);
  snap.time_mono_ns = (uint64_t)(mono_s * 1e9);
  snap.mallocs = mallocs;
  snap.frees = mallocs / 2;
  snap.total_alloc = total_alloc;
  snap.num_gc = num_gc;
  snap.heap_sys = snap.sys = 10u << 20;
  snap.heap_inuse = 6u << 20;
  snap.heap_alloc = 5u << 20;
  snap.heap_idle = 4u << 20;
  snap.heap_released = 1u << 20;
  snap.heap_objects = mallocs - snap.frees;
  memset(snap.quality, MS_Q_EXACT, sizeof snap.quality);
  return &snap;
}

static void test_rates(void **state) {
  mt_model_t m;
  mt_target_t *t;

  (void)state;
  mt_model_init(&m);
  t = mt_model_target(&m, 10);
  assert_non_null(t);
  assert_int_equal(t->state, MT_CONNECTING);
  mt_model_update(&m, t, make(10, 100.0, 1000, 1u << 20, 3));
  assert_int_equal(t->state, MT_LIVE);
  /* One sample: no rate can be told yet. */
  assert_true(t->mallocs_per_s < 0);
  assert_true(t->bytes_per_s < 0);
  mt_model_update(&m, t, make(10, 102.0, 5000, 3u << 20, 7));
  assert_true(t->mallocs_per_s > 1999.9 && t->mallocs_per_s < 2000.1);
  assert_true(t->frees_per_s > 999.9 && t->frees_per_s < 1000.1);
  assert_true(t->bytes_per_s > 1048575.0 && t->bytes_per_s < 1048577.0);
  assert_true(t->gcs_per_s > 1.99 && t->gcs_per_s < 2.01);
  /* A counter that goes back (a provider restarted) gives no rate rather
   * than a huge one. */
  mt_model_update(&m, t, make(10, 103.0, 10, 3u << 20, 7));
  assert_true(t->mallocs_per_s < 0);
  assert_true(t->bytes_per_s > -0.001 && t->bytes_per_s < 0.001);
  /* Unavailable counters give no rate either. */
  make(10, 104.0, 20, 4u << 20, 7);
  snap.quality[MS_F_MALLOCS] = MS_Q_UNAVAILABLE;
  mt_model_update(&m, t, &snap);
  assert_true(t->mallocs_per_s < 0);
  assert_true(t->bytes_per_s > 0);
  mt_model_free(&m);
}

static void test_same_snapshot_twice_is_one_sample(void **state) {
  mt_model_t m;
  mt_target_t *t;

  (void)state;
  mt_model_init(&m);
  t = mt_model_target(&m, 10);
  mt_model_update(&m, t, make(10, 1.0, 100, 100, 0));
  mt_model_update(&m, t, make(10, 2.0, 200, 200, 0));
  /* The agent's cache served the same snapshot again. */
  mt_model_update(&m, t, make(10, 2.0, 200, 200, 0));
  assert_int_equal(t->nhist, 2);
  assert_true(t->mallocs_per_s > 99.9 && t->mallocs_per_s < 100.1);
  mt_model_free(&m);
}

static void test_history_ring_wraps(void **state) {
  mt_model_t m;
  mt_target_t *t;
  const mt_sample_t *s;
  size_t i, n = MT_HISTORY + 37;

  (void)state;
  mt_model_init(&m);
  t = mt_model_target(&m, 10);
  for (i = 0; i < n; i++)
    mt_model_update(&m, t, make(10, 1.0 + (double)i, i * 10, i, 0));
  assert_int_equal(t->nhist, n);
  s = mt_target_sample(t, 0);
  assert_non_null(s);
  assert_int_equal(s->mallocs, (n - 1) * 10);
  s = mt_target_sample(t, 1);
  assert_int_equal(s->mallocs, (n - 2) * 10);
  /* The oldest sample kept is MT_HISTORY-1 back; older ones are gone. */
  s = mt_target_sample(t, MT_HISTORY - 1);
  assert_non_null(s);
  assert_int_equal(s->mallocs, (n - MT_HISTORY) * 10);
  assert_null(mt_target_sample(t, MT_HISTORY));
  /* Samples carry the breakdown. */
  assert_int_equal(s->frag_overhead, 1 << 20);
  assert_int_equal(s->prepared, 1 << 20);
  mt_model_free(&m);
}

static void test_short_history(void **state) {
  mt_model_t m;
  mt_target_t *t;

  (void)state;
  mt_model_init(&m);
  t = mt_model_target(&m, 10);
  assert_null(mt_target_sample(t, 0));
  mt_model_update(&m, t, make(10, 1.0, 1, 1, 0));
  assert_non_null(mt_target_sample(t, 0));
  assert_null(mt_target_sample(t, 1));
  mt_model_free(&m);
}

static void test_new_start_time_resets_history(void **state) {
  mt_model_t m;
  mt_target_t *t;

  (void)state;
  mt_model_init(&m);
  t = mt_model_target(&m, 10);
  mt_model_update(&m, t, make(10, 1.0, 100, 100, 0));
  mt_model_update(&m, t, make(10, 2.0, 200, 200, 0));
  make(10, 3.0, 5, 5, 0);
  snap.start_time = 2000; /* another process with the same PID */
  mt_model_update(&m, t, &snap);
  assert_int_equal(t->nhist, 1);
  assert_true(t->mallocs_per_s < 0);
  assert_int_equal(t->start_time, 2000);
  mt_model_free(&m);
}

static void add(mt_model_t *m, int pid, int64_t heap_mib, uint64_t objects) {
  mt_target_t *t = mt_model_target(m, pid);
  make(pid, 1.0, objects * 2, 1, 0);
  snap.sys = snap.heap_sys = (uint64_t)heap_mib << 20;
  snap.heap_inuse = snap.heap_alloc = snap.heap_idle = 0;
  snap.heap_released = 0;
  mt_model_update(m, t, &snap);
}

static void test_sort_keeps_selection(void **state) {
  mt_model_t m;

  (void)state;
  mt_model_init(&m);
  add(&m, 30, 5, 10);
  add(&m, 10, 50, 30);
  add(&m, 20, 20, 20);
  mt_model_target(&m, 40); /* no figures yet */
  m.sort = MT_SORT_PID;
  mt_model_sort(&m);
  assert_int_equal(m.targets[0]->pid, 10);
  assert_int_equal(m.targets[3]->pid, 40);
  m.selected = 2; /* PID 30 */
  assert_int_equal(m.targets[m.selected]->pid, 30);

  m.sort = MT_SORT_READY; /* largest first */
  mt_model_sort(&m);
  assert_int_equal(m.targets[0]->pid, 10);
  assert_int_equal(m.targets[1]->pid, 20);
  assert_int_equal(m.targets[2]->pid, 30);
  assert_int_equal(m.targets[3]->pid, 40); /* no figures: last */
  assert_int_equal(m.targets[m.selected]->pid, 30);

  m.sort_reverse = 1;
  mt_model_sort(&m);
  assert_int_equal(m.targets[0]->pid, 30);
  assert_int_equal(m.targets[2]->pid, 10);
  assert_int_equal(m.targets[3]->pid, 40); /* still last */
  assert_int_equal(m.targets[m.selected]->pid, 30);

  m.sort = MT_SORT_NAME;
  m.sort_reverse = 0;
  mt_model_sort(&m);
  assert_string_equal(m.targets[0]->comm, "p10");
  assert_int_equal(m.targets[m.selected]->pid, 30);

  m.sort = MT_SORT_OBJECTS;
  mt_model_sort(&m);
  assert_int_equal(m.targets[0]->pid, 10);
  assert_int_equal(m.targets[m.selected]->pid, 30);
  mt_model_free(&m);
}

static void test_remove_keeps_selection(void **state) {
  mt_model_t m;

  (void)state;
  mt_model_init(&m);
  add(&m, 1, 1, 1);
  add(&m, 2, 1, 1);
  add(&m, 3, 1, 1);
  m.selected = 2; /* PID 3 */
  mt_model_remove(&m, 1);
  assert_int_equal(m.ntargets, 2);
  assert_int_equal(m.targets[m.selected]->pid, 3);
  mt_model_remove(&m, 3); /* the selected one, at the end */
  assert_int_equal(m.ntargets, 1);
  assert_int_equal(m.selected, 0);
  assert_null(mt_model_find(&m, 3));
  mt_model_remove(&m, 2);
  assert_int_equal(m.ntargets, 0);
  mt_model_free(&m);
}

static void test_exited_keeps_figures(void **state) {
  mt_model_t m;
  mt_target_t *t;

  (void)state;
  mt_model_init(&m);
  t = mt_model_target(&m, 10);
  mt_model_update(&m, t, make(10, 1.0, 100, 100, 0));
  mt_model_update(&m, t, make(10, 2.0, 300, 200, 0));
  assert_true(t->mallocs_per_s > 0);

  mt_model_fail(&m, t, 0, "PID 10: no answer within 2000 ms");
  assert_int_equal(t->state, MT_UNREACHABLE);
  assert_string_equal(t->error, "PID 10: no answer within 2000 ms");
  assert_true(t->have_snapshot);
  assert_int_equal(t->snap.mallocs, 300);

  m.now_mono_ns = 5000000000ull;
  mt_model_fail(&m, t, 1, "exited with status 3");
  assert_int_equal(t->state, MT_EXITED);
  assert_int_equal(t->exited_mono_ns, 5000000000ull);
  assert_true(t->have_snapshot);
  assert_int_equal(t->snap.mallocs, 300);
  assert_int_equal(t->bd.frag_overhead, 1 << 20);
  assert_int_equal(t->nhist, 2);
  assert_true(t->mallocs_per_s < 0); /* a dead process has no rate */

  /* A late failure from a read that was in flight does not turn it back
   * into "unreachable". */
  mt_model_fail(&m, t, 0, "late");
  assert_int_equal(t->state, MT_EXITED);
  assert_string_equal(t->error, "exited with status 3");

  /* A read that succeeds again (it was a false alarm) makes it live. */
  mt_model_update(&m, t, make(10, 3.0, 400, 300, 0));
  assert_int_equal(t->state, MT_LIVE);
  assert_string_equal(t->error, "");
  assert_int_equal(t->exited_mono_ns, 0);
  mt_model_free(&m);
}

static void test_pause_percentiles(void **state) {
  mt_model_t m;
  mt_target_t *t;
  int i;

  (void)state;
  mt_model_init(&m);
  t = mt_model_target(&m, 10);
  mt_model_update(&m, t, make(10, 1.0, 1, 1, 0));
  assert_int_equal(t->pause_p50_ns, -1);
  assert_int_equal(t->pause_p99_ns, -1);

  /* 100 pauses: 98 of 10us, one of 1ms, one of 5ms. */
  make(10, 2.0, 1, 1, 100);
  for (i = 0; i < 98; i++)
    snap.pause_hist.counts[ms_pause_hist_bucket(10000)]++;
  snap.pause_hist.counts[ms_pause_hist_bucket(1000000)]++;
  snap.pause_hist.counts[ms_pause_hist_bucket(5000000)]++;
  for (i = 0; i < 100; i++)
    snap.pause_ns[i] = 10000;
  snap.pause_ns[50] = 1000000;
  snap.pause_ns[99] = 5000000;
  mt_model_update(&m, t, &snap);
  /* Percentiles are bucket upper edges: at most 25% above the truth. */
  assert_true(t->pause_p50_ns >= 10000 && t->pause_p50_ns <= 12500);
  assert_true(t->pause_p99_ns >= 1000000 && t->pause_p99_ns <= 1250000);
  /* All pauses are still in the ring: the maximum is exact. */
  assert_int_equal(t->pause_max_ns, 5000000);

  /* With one pause the percentiles cannot exceed the exact maximum. */
  make(10, 3.0, 1, 1, 1);
  snap.pause_hist.counts[ms_pause_hist_bucket(100000)] = 1;
  snap.pause_ns[0] = 100000;
  mt_model_update(&m, t, &snap);
  assert_int_equal(t->pause_max_ns, 100000);
  assert_int_equal(t->pause_p99_ns, 100000);
  assert_int_equal(t->pause_p50_ns, 100000);
  mt_model_free(&m);
}

static void test_find_and_add(void **state) {
  mt_model_t m;
  mt_target_t *a, *b;
  int i;

  (void)state;
  mt_model_init(&m);
  a = mt_model_target(&m, 5);
  b = mt_model_target(&m, 5);
  assert_ptr_equal(a, b);
  assert_int_equal(m.ntargets, 1);
  for (i = 100; i < 400; i++) /* grows past the first allocation */
    assert_non_null(mt_model_target(&m, i));
  assert_int_equal(m.ntargets, 301);
  assert_non_null(mt_model_find(&m, 399));
  assert_null(mt_model_find(&m, 7));
  mt_model_free(&m);
  assert_int_equal(m.ntargets, 0);
}

/* The sites' allocation rate: growth since the same site in the previous
 * profile over the time between; unknown on the first; a new site grew
 * from nothing; a site whose count fell (a restarted bucket) reads 0. */
static void test_sites_rate(void **state) {
  mt_target_t t;
  mt_site_t *a = calloc(2, sizeof *a), *b = calloc(3, sizeof *b);

  (void)state;
  memset(&t, 0, sizeof t);
  assert_non_null(a);
  assert_non_null(b);
  a[0] = (mt_site_t){strdup("f"), strdup("f.c"), 10, strdup(""), 0, 0, 100,
                     1,           1000,          0,  NULL,       0};
  a[1] = (mt_site_t){NULL, strdup(""), 0,   strdup(""), 0,    0x42,
                     5,    1,          500, 0,          NULL, 0};
  mt_model_set_sites(&t, a, 2, 0, 1000000000ull);
  assert_true(t.sites[0].alloc_rate < 0);
  b[0] = (mt_site_t){strdup("f"), strdup("f.c"), 10, strdup(""), 0, 0, 100,
                     1,           5000,          0,  NULL,       0};
  b[1] = (mt_site_t){NULL, strdup(""), 0,   strdup(""), 0,    0x42,
                     5,    1,          100, 0,          NULL, 0};
  b[2] = (mt_site_t){strdup("g"), strdup("g.c"), 3, strdup(""), 0, 0, 0,
                     0,           600,           0, NULL,       0};
  mt_model_set_sites(&t, b, 3, 0, 3000000000ull);
  assert_true(t.sites[0].alloc_rate == 2000.0); /* 4000 B over 2 s */
  assert_true(t.sites[1].alloc_rate == 0.0);
  assert_true(t.sites[2].alloc_rate == 300.0);
  assert_int_equal(t.nsites, 3);
  mt_model_sites_error(&t, "gone");
  assert_string_equal(t.sites_error, "gone");
  assert_int_equal(t.nsites, 3); /* the last sites stay */
  mt_sites_free(t.sites, t.nsites);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rates),
      cmocka_unit_test(test_same_snapshot_twice_is_one_sample),
      cmocka_unit_test(test_history_ring_wraps),
      cmocka_unit_test(test_short_history),
      cmocka_unit_test(test_new_start_time_resets_history),
      cmocka_unit_test(test_sort_keeps_selection),
      cmocka_unit_test(test_remove_keeps_selection),
      cmocka_unit_test(test_exited_keeps_figures),
      cmocka_unit_test(test_pause_percentiles),
      cmocka_unit_test(test_find_and_add),
      cmocka_unit_test(test_sites_rate),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
