/*
 * test_selfcheck.c - the snapshot self-checks (src/compose/snapshot.c,
 * ms__snapshot_check) and what feeds them (src/providers/registry.c,
 * ms__providers_stale_exact):
 *   - the identities, and Ready against the kernel's RSS with its bound;
 *   - no exact field from an allocator sample cached from an earlier
 *     snapshot once the tracked heap moved: a fake malloc provider on a
 *     fake clock, the engine tracking objects as under the preload.
 * Every snapshot a provider test program takes is also checked
 * (tests/integration/test_providers.c, MEMSTATS_DEBUG=1).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/fields.h"
#include "core/engine.h"
#include "providers/providers.h"
#include "compose/snapshot.h"
#include "providers/provider_int.h"

#define MIB ((uint64_t)1 << 20)

static ms_snapshot_t g_s;

/* A consistent glibc-like snapshot: Sys = HeapSys = 100 MiB, 10 MiB
 * released, RSS 95 MiB. */
static void good(ms_snapshot_t *s) {
  memset(s, 0, sizeof *s);
  memset(s->source, 0xff, sizeof s->source);
  s->heap_sys = s->sys = 100 * MIB;
  s->heap_inuse = 60 * MIB;
  s->heap_idle = 40 * MIB;
  s->heap_released = 10 * MIB;
  s->kernel_rss = 95 * MIB;
  static const ms_field_t f[] = {
      MS_F_SYS,       MS_F_HEAP_SYS,      MS_F_HEAP_INUSE,    MS_F_HEAP_IDLE,
      MS_F_STACK_SYS, MS_F_MSPAN_SYS,     MS_F_MCACHE_SYS,    MS_F_GC_SYS,
      MS_F_OTHER_SYS, MS_F_BUCK_HASH_SYS, MS_F_HEAP_RELEASED, MS_F_KERNEL_RSS};
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
    ms__set_quality(s, f[i], MS_Q_EXACT, -1);
}

static void test_check_identities(void **state) {
  (void)state;
  char why[200];
  good(&g_s);
  assert_int_equal(ms__snapshot_check(&g_s, 0, why, sizeof why), 0);
  g_s.other_sys = 1;
  assert_int_equal(ms__snapshot_check(&g_s, 0, why, sizeof why), MS_EPROTO);
  assert_non_null(strstr(why, "Sys"));
  good(&g_s);
  g_s.heap_idle--;
  assert_int_equal(ms__snapshot_check(&g_s, 0, why, sizeof why), MS_EPROTO);
  good(&g_s);
  g_s.heap_released = g_s.heap_idle + 1;
  assert_int_equal(ms__snapshot_check(&g_s, 0, why, sizeof why), MS_EPROTO);
}

/* Ready = Sys - HeapReleased = 90 MiB; it may exceed RSS by 4 MiB + RSS/8,
 * no more (the stale glibc sample of issue 10: Ready 224 MB over RSS). */
static void test_check_ready_over_rss(void **state) {
  (void)state;
  char why[200];
  good(&g_s);
  g_s.kernel_rss = 80 * MIB; /* bound: 4 + 10 MiB */
  assert_int_equal(ms__snapshot_check(&g_s, 0, why, sizeof why), 0);
  g_s.kernel_rss = 76 * MIB; /* 14 MiB over, bound 13.5 MiB */
  assert_int_equal(ms__snapshot_check(&g_s, 0, why, sizeof why), MS_EPROTO);
  assert_non_null(strstr(why, "Ready"));
  /* Without an exact RSS there is nothing to compare with. */
  g_s.quality[MS_F_KERNEL_RSS] = MS_Q_UNAVAILABLE;
  assert_int_equal(ms__snapshot_check(&g_s, 0, why, sizeof why), 0);
}

static void test_check_stale_exact(void **state) {
  (void)state;
  char why[200];
  good(&g_s);
  assert_int_equal(ms__snapshot_check(&g_s, 2, why, sizeof why), MS_EPROTO);
  assert_non_null(strstr(why, "cached"));
}

/* ---- the registry: a cached sample after the heap moved --------------- */

static uint64_t g_clock;
static unsigned g_calls;

static uint64_t fake_now(void) {
  return g_clock;
}

static int fake_sample(ms__pv_sample_t *out, unsigned flags) {
  (void)flags;
  g_calls++;
  /* Small enough for Ready to be within this process's RSS bound. */
  ms__pv_set(out, MS_F_SYS, 2 * MIB, MS_Q_EXACT);
  ms__pv_set(out, MS_F_HEAP_SYS, 2 * MIB, MS_Q_EXACT);
  ms__pv_set(out, MS_F_HEAP_INUSE, MIB, MS_Q_EXACT);
  ms__pv_set(out, MS_F_HEAP_IDLE, MIB, MS_Q_EXACT);
  ms__pv_set(out, MS_F_HEAP_RELEASED, MIB / 2, MS_Q_EXACT);
  return 0;
}

static int never(void) {
  return 0;
}

static const ms__provider_t fake_malloc = {
    .name = "fakemalloc",
    .kind = MS__PV_MALLOC,
    .min_interval_ns = 1000000000ull, /* glibc's: a second */
    .detect = never,
    .confirm = never,
    .sample = fake_sample,
};

static void test_registry_cached_sample_after_moves(void **state) {
  (void)state;
  static ms_snapshot_t a, b, c;
  g_clock = 1000000000000ull;
  ms__providers_clock_for_test(fake_now);
  ms__providers_set_for_test(&fake_malloc, NULL);
  ms__track_enable(); /* as the preload does */

  assert_int_equal(ms_snapshot_read(&a, sizeof a), 0);
  assert_int_equal(g_calls, 1);
  assert_int_equal(ms__providers_stale_exact(), 0);
  assert_int_equal(a.quality[MS_F_HEAP_SYS], MS_Q_EXACT);

  /* Nothing moved: the cached sample is still the allocator's figure. */
  g_clock += 200000000ull;
  assert_int_equal(ms_snapshot_read(&b, sizeof b), 0);
  assert_int_equal(g_calls, 1);
  assert_int_equal(ms__providers_stale_exact(), 0);
  assert_int_equal(b.quality[MS_F_HEAP_SYS], MS_Q_EXACT);

  /* The program allocated in the arenas: the sample, 400 ms old, cannot
   * say whether they grew: nothing of it stays exact. */
  ms__track_alloc(5000);
  ms__track_free(64);
  g_clock += 200000000ull;
  assert_int_equal(ms_snapshot_read(&c, sizeof c), 0);
  assert_int_equal(g_calls, 1);
  assert_int_equal(ms__providers_stale_exact(), 0);
  static const ms_field_t f[] = {MS_F_HEAP_SYS, MS_F_HEAP_INUSE, MS_F_HEAP_IDLE,
                                 MS_F_HEAP_RELEASED, MS_F_SYS};
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
    assert_int_equal(c.quality[f[i]], MS_Q_ESTIMATED);
  char why[200];
  assert_int_equal(
      ms__snapshot_check(&c, ms__providers_stale_exact(), why, sizeof why), 0);

  /* A fresh sample is exact again. */
  g_clock += 1000000000ull;
  assert_int_equal(ms_snapshot_read(&c, sizeof c), 0);
  assert_int_equal(g_calls, 2);
  assert_int_equal(c.quality[MS_F_HEAP_SYS], MS_Q_EXACT);
  ms__track_free(5000 - 64);
  ms__providers_set_for_test(NULL, NULL);
  ms__providers_clock_for_test(NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_check_identities),
      cmocka_unit_test(test_check_ready_over_rss),
      cmocka_unit_test(test_check_stale_exact),
      cmocka_unit_test(test_registry_cached_sample_after_moves),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
