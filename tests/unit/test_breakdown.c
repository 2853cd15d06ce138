/*
 * test_breakdown.c - ms_breakdown() against real Go runtime figures.
 *
 * For every Go vector the breakdown must reproduce the vector's "derived"
 * values exactly, and every identity listed in its "checks" is recomputed
 * here from our snapshot (not taken on trust from the vector). Then
 * quality propagation, sys_mismatch and signed results on broken input.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "support/govec.h"

/* Go's /memory/classes tree computed from our snapshot, as the Go runtime
 * computes it from MemStats (notes/go-runtime.md). */
static json_t *classes_of(const ms_snapshot_t *s) {
  json_t *o = json_object();
  json_object_set_new(
      o, "/memory/classes/heap/free:bytes",
      json_integer((json_int_t)(s->heap_idle - s->heap_released)));
  json_object_set_new(o, "/memory/classes/heap/objects:bytes",
                      json_integer((json_int_t)s->heap_alloc));
  json_object_set_new(o, "/memory/classes/heap/released:bytes",
                      json_integer((json_int_t)s->heap_released));
  json_object_set_new(o, "/memory/classes/heap/stacks:bytes",
                      json_integer((json_int_t)s->stack_inuse));
  json_object_set_new(
      o, "/memory/classes/heap/unused:bytes",
      json_integer((json_int_t)(s->heap_inuse - s->heap_alloc)));
  json_object_set_new(
      o, "/memory/classes/metadata/mcache/free:bytes",
      json_integer((json_int_t)(s->mcache_sys - s->mcache_inuse)));
  json_object_set_new(o, "/memory/classes/metadata/mcache/inuse:bytes",
                      json_integer((json_int_t)s->mcache_inuse));
  json_object_set_new(
      o, "/memory/classes/metadata/mspan/free:bytes",
      json_integer((json_int_t)(s->mspan_sys - s->mspan_inuse)));
  json_object_set_new(o, "/memory/classes/metadata/mspan/inuse:bytes",
                      json_integer((json_int_t)s->mspan_inuse));
  json_object_set_new(o, "/memory/classes/metadata/other:bytes",
                      json_integer((json_int_t)s->gc_sys));
  json_object_set_new(
      o, "/memory/classes/os-stacks:bytes",
      json_integer((json_int_t)(s->stack_sys - s->stack_inuse)));
  json_object_set_new(o, "/memory/classes/other:bytes",
                      json_integer((json_int_t)s->other_sys));
  json_object_set_new(o, "/memory/classes/profiling/buckets:bytes",
                      json_integer((json_int_t)s->buck_hash_sys));
  json_object_set_new(o, "/memory/classes/total:bytes",
                      json_integer((json_int_t)s->sys));
  return o;
}

static json_int_t leaves_sum(json_t *classes) {
  json_int_t sum = 0;
  const char *k;
  json_t *v;
  json_object_foreach(classes, k, v) {
    if (strcmp(k, "/memory/classes/total:bytes") != 0)
      sum += json_integer_value(v);
  }
  return sum;
}

static json_int_t get_int(json_t *o, const char *k) {
  json_t *v = json_object_get(o, k);
  if (!json_is_integer(v))
    fail_msg("vector lacks integer %s", k);
  return json_integer_value(v);
}

/* Our own verdict on one of the vector's named identities. */
static int check_identity(const char *name, const ms_snapshot_t *s,
                          const ms_breakdown_t *b, json_t *root) {
  uint64_t sum_sys = s->heap_sys + s->stack_sys + s->mspan_sys + s->mcache_sys +
                     s->buck_hash_sys + s->gc_sys + s->other_sys;
  if (strcmp(name, "HeapObjects==Mallocs-Frees") == 0)
    return s->heap_objects == s->mallocs - s->frees;
  if (strcmp(name, "HeapReleased<=HeapIdle") == 0)
    return s->heap_released <= s->heap_idle;
  if (strcmp(name, "HeapSys==HeapIdle+HeapInuse") == 0)
    return s->heap_sys == s->heap_idle + s->heap_inuse;
  if (strcmp(name, "Ready+Prepared==Sys") == 0)
    return (uint64_t)(b->ready + b->prepared) == s->sys;
  if (strcmp(name, "Sys==sum(XSys)") == 0)
    return s->sys == sum_sys && !b->sys_mismatch;
  if (strcmp(name, "data+fragOverhead==inuse") == 0)
    return b->data + b->frag_overhead == b->inuse;
  if (strcmp(name, "idle==(HeapIdle-HeapReleased)+(StackSys-StackInuse)+"
                   "(MSpanSys-MSpanInuse)+(MCacheSys-MCacheInuse)") == 0)
    return (uint64_t)b->idle == (s->heap_idle - s->heap_released) +
                                    (s->stack_sys - s->stack_inuse) +
                                    (s->mspan_sys - s->mspan_inuse) +
                                    (s->mcache_sys - s->mcache_inuse);
  if (strcmp(name, "inuse+idle==Ready") == 0)
    return b->inuse + b->idle == b->ready;
  if (strcmp(name, "metrics.total==sum(metrics.leaves)") == 0) {
    json_t *m = json_object_get(root, "metrics_memory_classes");
    return leaves_sum(m) == get_int(m, "/memory/classes/total:bytes");
  }
  if (strcmp(name, "metrics==classesFromMemStats") == 0) {
    /* Ours, computed from the snapshot, must equal both the vector's
     * computed classes and what Go's runtime/metrics said. */
    json_t *ours = classes_of(s);
    int ok =
        json_equal(ours, json_object_get(root, "metrics_memory_classes")) &&
        json_equal(ours, json_object_get(root, "memory_classes_from_memstats"));
    json_decref(ours);
    return ok;
  }
  fail_msg("unknown check \"%s\": teach test_breakdown.c to verify it", name);
  return 0;
}

static void test_go_vectors(void **state) {
  (void)state;
  glob_t g;
  size_t n = govec_list(&g);
  assert_true(n >= 6);
  for (size_t i = 0; i < n; i++) {
    ms_snapshot_t *s = malloc(sizeof *s);
    assert_non_null(s);
    govec_t v;
    char err[GOVEC_ERR_MAX];
    if (govec_load(g.gl_pathv[i], s, &v, err, sizeof err) != 0)
      fail_msg("%s", err);

    ms_breakdown_t b;
    assert_int_equal(ms_breakdown(s, &b), 0);
    const struct {
      const char *name;
      int64_t ours;
      ms_quality_t q;
    } figs[] = {
        {"Ready", b.ready, b.q_ready},
        {"Prepared", b.prepared, b.q_prepared},
        {"Inuse", b.inuse, b.q_inuse},
        {"FragOverhead", b.frag_overhead, b.q_frag_overhead},
        {"Data", b.data, b.q_data},
        {"Idle", b.idle, b.q_idle},
    };
    for (size_t k = 0; k < sizeof figs / sizeof figs[0]; k++) {
      json_int_t want = get_int(v.derived, figs[k].name);
      if (figs[k].ours != want)
        fail_msg("%s: %s = %lld, Go vector says %lld", v.label, figs[k].name,
                 (long long)figs[k].ours, (long long)want);
      assert_int_equal(figs[k].q, MS_Q_EXACT);
    }
    assert_int_equal(json_object_size(v.derived), 6);
    assert_false(b.sys_mismatch);

    /* Every identity the vector lists holds in our figures too. */
    const char *name;
    json_t *val;
    size_t nchecks = 0;
    json_object_foreach(v.checks, name, val) {
      assert_true(json_is_true(val));
      if (!check_identity(name, s, &b, v.root))
        fail_msg("%s: identity %s does not hold on our side", v.label, name);
      nchecks++;
    }
    assert_int_equal(nchecks, 10);

    /* Our classes' leaves sum to Sys, and map onto the breakdown. */
    json_t *c = classes_of(s);
    assert_int_equal(leaves_sum(c), (json_int_t)s->sys);
    assert_int_equal(b.prepared,
                     get_int(c, "/memory/classes/heap/released:bytes"));
    assert_int_equal(b.frag_overhead,
                     get_int(c, "/memory/classes/heap/unused:bytes"));
    assert_int_equal(
        b.idle, get_int(c, "/memory/classes/heap/free:bytes") +
                    get_int(c, "/memory/classes/os-stacks:bytes") +
                    get_int(c, "/memory/classes/metadata/mspan/free:bytes") +
                    get_int(c, "/memory/classes/metadata/mcache/free:bytes"));
    json_decref(c);

    govec_free(&v);
    free(s);
  }
  globfree(&g);
}

/* A fresh copy of the fragmented vector (every Go field exact). */
static ms_snapshot_t *load_fragmented(void) {
  ms_snapshot_t *s = malloc(sizeof *s);
  assert_non_null(s);
  char path[1024], err[GOVEC_ERR_MAX];
  snprintf(path, sizeof path, "%s/go/04_fragmented.json", govec_data_dir());
  govec_t v;
  if (govec_load(path, s, &v, err, sizeof err) != 0)
    fail_msg("%s", err);
  govec_free(&v);
  return s;
}

static void test_estimated_released(void **state) {
  (void)state;
  ms_snapshot_t *s = load_fragmented();
  ms_breakdown_t exact, b;
  ms_breakdown(s, &exact);
  ms__set_quality(s, MS_F_HEAP_RELEASED, MS_Q_ESTIMATED, 0);
  assert_int_equal(ms_breakdown(s, &b), 0);
  assert_int_equal(b.q_prepared, MS_Q_ESTIMATED);
  assert_int_equal(b.q_ready, MS_Q_ESTIMATED);
  assert_int_equal(b.q_idle, MS_Q_ESTIMATED);
  assert_int_equal(b.q_inuse, MS_Q_EXACT);
  assert_int_equal(b.q_frag_overhead, MS_Q_EXACT);
  assert_int_equal(b.q_data, MS_Q_EXACT);
  /* An estimate is still shown, with its value. */
  assert_int_equal(b.prepared, exact.prepared);
  assert_int_equal(b.ready, exact.ready);
  assert_int_equal(b.idle, exact.idle);
  free(s);
}

static void test_estimated_inuse_term(void **state) {
  (void)state;
  ms_snapshot_t *s = load_fragmented();
  ms_breakdown_t b;
  ms__set_quality(s, MS_F_GC_SYS, MS_Q_ESTIMATED, 0);
  ms_breakdown(s, &b);
  assert_int_equal(b.q_inuse, MS_Q_ESTIMATED);
  assert_int_equal(b.q_data, MS_Q_ESTIMATED);
  assert_int_equal(b.q_idle, MS_Q_ESTIMATED);
  assert_int_equal(b.q_ready, MS_Q_EXACT);
  assert_int_equal(b.q_prepared, MS_Q_EXACT);
  assert_int_equal(b.q_frag_overhead, MS_Q_EXACT);
  free(s);
}

/* Python's arenas inside OtherSys (issue 19, item 2): 100 MiB resident,
 * 80 MiB of it in pools in use, 40 MiB in allocated blocks. Counted as a
 * heap: the 20 MiB of empty pools are idle, the 40 MiB of free blocks in
 * pools in use fragOverhead, and data holds the allocated blocks only
 * (before, all 100 MiB were data, exact). */
static void put_python(ms_snapshot_t *s, uint64_t res, uint64_t inuse,
                       uint64_t alloc) {
  s->other_sys += res;
  s->sys += res;
  s->python_arenas = res >> 20;
  s->python_arena_sys = res;
  s->python_arena_resident = res;
  s->python_arena_inuse = inuse;
  s->python_arena_alloc = alloc;
  ms_field_t fs[] = {MS_F_PYTHON_ARENAS, MS_F_PYTHON_ARENA_SYS,
                     MS_F_PYTHON_ARENA_RESIDENT, MS_F_PYTHON_ARENA_INUSE,
                     MS_F_PYTHON_ARENA_ALLOC};
  for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++)
    ms__set_quality(s, fs[i], MS_Q_EXACT, 0);
}

static void test_python_arenas_as_a_heap(void **state) {
  (void)state;
  const int64_t M = 1 << 20;
  ms_snapshot_t *s = load_fragmented();
  ms_breakdown_t go, b;
  ms_breakdown(s, &go);
  put_python(s, 100 * M, 80 * M, 40 * M);
  assert_int_equal(ms_breakdown(s, &b), 0);
  assert_int_equal(b.data, go.data + 40 * M);
  assert_int_equal(b.frag_overhead, go.frag_overhead + 40 * M);
  assert_int_equal(b.idle, go.idle + 20 * M);
  assert_int_equal(b.inuse, go.inuse + 80 * M);
  assert_int_equal(b.ready, go.ready + 100 * M);
  assert_int_equal(b.data + b.frag_overhead + b.idle, b.ready);
  assert_int_equal(b.q_data, MS_Q_EXACT);
  assert_int_equal(b.q_frag_overhead, MS_Q_EXACT);
  assert_int_equal(b.q_idle, MS_Q_EXACT);
  assert_false(b.sys_mismatch);
  /* An arena whose headers could not be read makes the in-use figures
   * estimates, and with them data. */
  ms__set_quality(s, MS_F_PYTHON_ARENA_ALLOC, MS_Q_ESTIMATED, 0);
  ms_breakdown(s, &b);
  assert_int_equal(b.data, go.data + 40 * M);
  assert_int_equal(b.q_data, MS_Q_ESTIMATED);
  assert_int_equal(b.q_frag_overhead, MS_Q_ESTIMATED);
  assert_int_equal(b.q_ready, MS_Q_EXACT);
  free(s);
}

/* Arenas whose in-use part is not known (an older library's snapshot, or
 * figures that contradict each other) count whole, as before, but data
 * says it is an estimate. */
static void test_python_arenas_unknown(void **state) {
  (void)state;
  const int64_t M = 1 << 20;
  ms_snapshot_t *s = load_fragmented();
  ms_breakdown_t go, b;
  ms_breakdown(s, &go);
  put_python(s, 100 * M, 80 * M, 40 * M);
  ms__set_quality(s, MS_F_PYTHON_ARENA_INUSE, MS_Q_UNAVAILABLE, -1);
  ms__set_quality(s, MS_F_PYTHON_ARENA_ALLOC, MS_Q_UNAVAILABLE, -1);
  ms_breakdown(s, &b);
  assert_int_equal(b.data, go.data + 100 * M);
  assert_int_equal(b.q_data, MS_Q_ESTIMATED);
  assert_int_equal(b.q_inuse, MS_Q_ESTIMATED);
  assert_int_equal(b.q_idle, MS_Q_ESTIMATED);
  assert_int_equal(b.q_ready, MS_Q_EXACT);
  /* More allocated than in use: not trusted. */
  put_python(s, 0, 0, 0);
  s->python_arenas = 100;
  s->python_arena_resident = 100 * M;
  s->python_arena_inuse = 50 * M;
  s->python_arena_alloc = 60 * M;
  ms_breakdown(s, &b);
  assert_int_equal(b.q_data, MS_Q_ESTIMATED);
  /* A caller's struct that ends before the in-use figures (0.2 with the
   * arena fields only): they are not read. */
  s->struct_size =
      (uint32_t)(offsetof(ms_snapshot_t, python_arena_resident) + 8);
  s->python_arena_alloc = 10 * M;
  ms_breakdown(s, &b);
  assert_int_equal(b.q_data, MS_Q_ESTIMATED);
  /* No arenas: nothing changes. */
  s->struct_size = (uint32_t)sizeof *s;
  ms__set_quality(s, MS_F_PYTHON_ARENAS, MS_Q_UNAVAILABLE, -1);
  ms_breakdown(s, &b);
  assert_int_equal(b.q_data, MS_Q_EXACT);
  free(s);
}

static void test_unavailable_heap_alloc(void **state) {
  (void)state;
  ms_snapshot_t *s = load_fragmented();
  ms_breakdown_t exact, b;
  ms_breakdown(s, &exact);
  ms__set_quality(s, MS_F_HEAP_ALLOC, MS_Q_UNAVAILABLE, -1);
  ms_breakdown(s, &b);
  assert_int_equal(b.q_frag_overhead, MS_Q_UNAVAILABLE);
  assert_int_equal(b.q_data, MS_Q_UNAVAILABLE);
  /* No number is invented for what cannot be known. */
  assert_int_equal(b.frag_overhead, 0);
  assert_int_equal(b.data, 0);
  /* The figures that do not depend on HeapAlloc are untouched. */
  assert_int_equal(b.q_ready, MS_Q_EXACT);
  assert_int_equal(b.q_prepared, MS_Q_EXACT);
  assert_int_equal(b.q_inuse, MS_Q_EXACT);
  assert_int_equal(b.q_idle, MS_Q_EXACT);
  assert_int_equal(b.ready, exact.ready);
  assert_int_equal(b.idle, exact.idle);
  free(s);
}

static void test_unavailable_sys(void **state) {
  (void)state;
  ms_snapshot_t *s = load_fragmented();
  ms_breakdown_t b;
  ms__set_quality(s, MS_F_SYS, MS_Q_UNAVAILABLE, -1);
  s->sys = 0;
  ms_breakdown(s, &b);
  assert_int_equal(b.q_ready, MS_Q_UNAVAILABLE);
  assert_int_equal(b.q_idle, MS_Q_UNAVAILABLE);
  assert_int_equal(b.ready, 0);
  assert_int_equal(b.idle, 0);
  assert_int_equal(b.q_prepared, MS_Q_EXACT);
  assert_int_equal(b.q_data, MS_Q_EXACT);
  /* Sys == sum(*Sys) cannot be checked without Sys: not a mismatch. */
  assert_false(b.sys_mismatch);
  free(s);
}

static void test_unknown_quality_is_unavailable(void **state) {
  (void)state;
  ms_snapshot_t *s = load_fragmented();
  ms_breakdown_t b;
  s->quality[MS_F_HEAP_RELEASED] = 7; /* not a quality this library knows */
  ms_breakdown(s, &b);
  assert_int_equal(b.q_prepared, MS_Q_UNAVAILABLE);
  assert_int_equal(b.q_ready, MS_Q_UNAVAILABLE);
  free(s);
}

static void test_sys_mismatch(void **state) {
  (void)state;
  ms_snapshot_t *s = load_fragmented();
  ms_breakdown_t exact, b;
  ms_breakdown(s, &exact);
  s->sys += 4096;
  ms_breakdown(s, &b);
  assert_true(b.sys_mismatch);
  /* The extra page is shown where the formulas put it, not hidden. */
  assert_int_equal(b.ready, exact.ready + 4096);
  assert_int_equal(b.idle, exact.idle + 4096);
  s->sys -= 4096;
  s->other_sys += 1;
  ms_breakdown(s, &b);
  assert_true(b.sys_mismatch);
  /* An estimated term still takes part in the check. */
  s->other_sys -= 1;
  ms__set_quality(s, MS_F_GC_SYS, MS_Q_ESTIMATED, 0);
  s->gc_sys += 8;
  ms_breakdown(s, &b);
  assert_true(b.sys_mismatch);
  /* An unavailable term makes it uncheckable. */
  ms__set_quality(s, MS_F_GC_SYS, MS_Q_UNAVAILABLE, -1);
  ms_breakdown(s, &b);
  assert_false(b.sys_mismatch);
  free(s);
}

static void test_signed_results(void **state) {
  (void)state;
  ms_snapshot_t *s = calloc(1, sizeof *s);
  assert_non_null(s);
  for (int f = 0; f < MS_F__COUNT; f++)
    ms__set_quality(s, (ms_field_t)f, MS_Q_EXACT, 0);
  /* A provider reporting more allocated than in use, and more released
   * than it has: the breakdown shows negative figures, not 2^64 - x. */
  s->heap_alloc = 5000;
  s->heap_inuse = 4096;
  s->heap_released = 10000;
  s->sys = 8192;
  s->heap_sys = 8192;
  ms_breakdown_t b;
  ms_breakdown(s, &b);
  assert_int_equal(b.frag_overhead, -904);
  assert_int_equal(b.prepared, 10000);
  assert_int_equal(b.ready, -1808);
  assert_int_equal(b.inuse, 4096);
  assert_int_equal(b.data, 5000);
  assert_int_equal(b.idle, -1808 - 4096);
  assert_false(b.sys_mismatch);
  /* Values past INT64_MAX read as negative rather than overflowing. */
  s->sys = UINT64_MAX;
  s->heap_released = 0;
  ms_breakdown(s, &b);
  assert_int_equal(b.ready, -1);
  assert_true(b.sys_mismatch);
  free(s);
}

static void test_all_zero_unavailable(void **state) {
  (void)state;
  ms_snapshot_t *s = calloc(1, sizeof *s); /* quality 0: all unavailable */
  assert_non_null(s);
  s->sys = 123; /* a placeholder value must not leak into a figure */
  ms_breakdown_t b;
  assert_int_equal(ms_breakdown(s, &b), 0);
  assert_int_equal(b.q_ready, MS_Q_UNAVAILABLE);
  assert_int_equal(b.q_prepared, MS_Q_UNAVAILABLE);
  assert_int_equal(b.q_inuse, MS_Q_UNAVAILABLE);
  assert_int_equal(b.q_frag_overhead, MS_Q_UNAVAILABLE);
  assert_int_equal(b.q_data, MS_Q_UNAVAILABLE);
  assert_int_equal(b.q_idle, MS_Q_UNAVAILABLE);
  assert_int_equal(b.ready, 0);
  assert_false(b.sys_mismatch);
  free(s);
}

static void test_invalid_arguments(void **state) {
  (void)state;
  ms_snapshot_t s;
  ms_breakdown_t b;
  memset(&s, 0, sizeof s);
  assert_int_equal(ms_breakdown(NULL, &b), MS_EINVAL);
  assert_int_equal(ms_breakdown_read(&s, NULL, sizeof b), MS_EINVAL);
  /* The name without the header's macro: 0.1's exported symbol. */
  assert_int_equal((ms_breakdown)(NULL, &b), MS_EINVAL);
  assert_int_equal((ms_breakdown)(&s, NULL), MS_EINVAL);
  /* A struct smaller than 0.1's is no layout at all. */
  assert_int_equal(ms_breakdown_read(&s, &b, offsetof(ms_breakdown_t, total)),
                   MS_EINVAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_go_vectors),
      cmocka_unit_test(test_estimated_released),
      cmocka_unit_test(test_estimated_inuse_term),
      cmocka_unit_test(test_python_arenas_as_a_heap),
      cmocka_unit_test(test_python_arenas_unknown),
      cmocka_unit_test(test_unavailable_heap_alloc),
      cmocka_unit_test(test_unavailable_sys),
      cmocka_unit_test(test_unknown_quality_is_unavailable),
      cmocka_unit_test(test_sys_mismatch),
      cmocka_unit_test(test_signed_results),
      cmocka_unit_test(test_all_zero_unavailable),
      cmocka_unit_test(test_invalid_arguments),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
