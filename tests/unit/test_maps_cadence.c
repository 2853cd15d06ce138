/*
 * test_maps_cadence.c - how often the mappings provider reads
 * /proc/self/maps (src/providers/mappings.c): at most every
 * MS__MAPS_MIN_INTERVAL_NS and at most every 100 times the CPU its last
 * read cost, never 100 times the time it took. On a loaded machine a read
 * of a millisecond of work may wait a second for a CPU and for the mmap
 * lock; counted on the wall clock, the next read went 100 s away and
 * every snapshot until then served the mappings of before.
 *
 * The cost clock is a fake that moves a set amount at each reading (a
 * read reads it twice), and the read's start is given as a second before
 * its end: no sleeping, no timing thresholds, each expectation is whether
 * ms__mappings_update() read or not.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/engine.h"
#include "core/util.h"
#include "providers/mappings.h"

#define MS_ 1000000ull

static uint64_t g_fake_cpu, g_step;

static uint64_t fake_cpu(void) {
  return g_fake_cpu += g_step;
}

/* A read that took a second, for the given CPU; returns when it ended. */
static uint64_t read_waiting(uint64_t cpu_ns) {
  g_step = cpu_ns;
  ms__read_lock();
  int r = ms__mappings_update(0, ms__now_mono_ns() - 1000 * MS_);
  ms__read_unlock();
  assert_int_equal(r, 1);
  return ms__now_mono_ns();
}

static int read_at(uint64_t now) {
  ms__read_lock();
  int r = ms__mappings_update(0, now);
  ms__read_unlock();
  return r;
}

/* A read that waited a second for 50 us of work: the next one after the
 * minimum interval, not 100 s later. */
static void test_waiting_read_costs_its_cpu(void **state) {
  (void)state;
  ms__mappings_cost_clock_for_test(fake_cpu);
  uint64_t done = read_waiting(50000);
  assert_int_equal(read_at(done + MS__MAPS_MIN_INTERVAL_NS + 1 * MS_), 1);
  ms__mappings_cost_clock_for_test(NULL);
}

/* The back-off still holds for real work: a read of 10 ms of CPU puts
 * the next one a second later. */
static void test_costly_read_backs_off(void **state) {
  (void)state;
  ms__mappings_cost_clock_for_test(fake_cpu);
  uint64_t done = read_waiting(10 * MS_);
  assert_int_equal(read_at(done + 300 * MS_), 0);
  assert_int_equal(read_at(done + 1100 * MS_), 1);
  ms__mappings_cost_clock_for_test(NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_waiting_read_costs_its_cpu),
      cmocka_unit_test(test_costly_read_backs_off),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
