/*
 * test_agent_defer.c - ms__snapshot_defer (src/compose/snapshot.c): work that
 * memtop attach's call leaves to the agent's thread (the --track
 * estimate's base, a mallinfo2 read that waits for every arena's lock) is
 * done once, before the next snapshot is computed, never in the call.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "agent/agent.h"
#include "compose/snapshot.h"
#include "memstats.h"
#include "wire/wire.h"

static int g_ran;

static void work(void) {
  g_ran++;
}

static void snapshot(void) {
  static uint8_t buf[MS__WIRE_SNAPSHOT_MAX];
  ms__wire_writer_t w;
  ms__wire_writer_init(&w, buf, sizeof buf);
  assert_int_equal(ms__agent_snapshot_flags(&w, 0), 0);
  assert_true(w.len > 0);
}

static void test_runs_once_before_snapshot(void **state) {
  (void)state;
  g_ran = 0;
  ms__snapshot_defer(work);
  assert_int_equal(g_ran, 0); /* not where it was handed over */
  ms__agent_cache_reset();
  snapshot();
  assert_int_equal(g_ran, 1);
  ms__agent_cache_reset();
  snapshot();
  assert_int_equal(g_ran, 1); /* once */
}

/* A second hand-over before any snapshot replaces the first (memtop's
 * calls come one at a time: the latest is the one that holds). */
static void test_latest_kept(void **state) {
  (void)state;
  g_ran = 0;
  ms__snapshot_defer(work);
  ms__snapshot_defer(work);
  ms__agent_cache_reset();
  snapshot();
  assert_int_equal(g_ran, 1);
}

/* The program's own ms_snapshot_read, made before the agent computes
 * one, does the work first: a snapshot never shows the tracked fields
 * without it (at_got under qemu read +0 mallocs after attach --track);
 * the _exit path's cached read never runs it. */
static void test_program_read_runs_it(void **state) {
  (void)state;
  static ms_snapshot_t s;
  g_ran = 0;
  ms__snapshot_defer(work);
  assert_int_equal(ms__snapshot_read_opts(&s, sizeof s, MS__READ_CACHED), 0);
  assert_int_equal(g_ran, 0);
  assert_int_equal(ms_snapshot_read(&s, sizeof s), 0);
  assert_int_equal(g_ran, 1);
  assert_int_equal(ms_snapshot_read(&s, sizeof s), 0);
  assert_int_equal(g_ran, 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_runs_once_before_snapshot),
      cmocka_unit_test(test_latest_kept),
      cmocka_unit_test(test_program_read_runs_it),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
