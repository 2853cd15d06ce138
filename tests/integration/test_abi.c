/*
 * test_abi.c - the public ABI can grow: a program built against 0.1's
 * header (tests/progs/abi_old.c, tests/data/abi/0.1/memstats.h) runs
 * against this library and reads 0.1's layout, and a caller of this
 * layout gets the fields it has.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "compose/snapshot.h"
#include "memstats.h"
#include "support/host.h"

static char build[1024];

static int setup(void **state) {
  (void)state;
  return host_build_dir(build, sizeof build);
}

/* The 0.1 program: its snapshot is right, nothing past its struct is
 * written, and its sizeof is the layout the library converts to. */
static void test_caller_built_against_0_1(void **state) {
  (void)state;
  char cmd[1200], out[8192];
  snprintf(cmd, sizeof cmd, "%s/progs/abi_old 2>&1", build);
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  size_t n = fread(out, 1, sizeof out - 1, p);
  out[n] = '\0';
  int st = pclose(p);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
    fail_msg("abi_old failed:\n%s", out);
  assert_non_null(strstr(out, "abi_old: 0 failed"));
  size_t size = 0;
  assert_int_equal(sscanf(out, "sizeof %zu", &size), 1);
  assert_int_equal(size, ms__snapshot_size_0_1());
  /* 0.1's breakdown ends where this one's struct_size begins. */
  const char *bs = strstr(out, "breakdown sizeof ");
  assert_non_null(bs);
  assert_int_equal(sscanf(bs, "breakdown sizeof %zu", &size), 1);
  assert_int_equal(size, offsetof(ms_breakdown_t, struct_size));
}

/* The breakdown grows like the snapshot: a caller's struct gets what it
 * has room for and struct_size says how much, a newer caller's larger
 * struct is filled as far as this library knows, and nothing past the
 * size passed is written. */
static void test_breakdown_grows_at_the_end(void **state) {
  (void)state;
  static ms_snapshot_t s;
  assert_int_equal(ms_snapshot_read(&s, sizeof s), 0);
  ms_breakdown_t whole;
  memset(&whole, 0x5a, sizeof whole);
  assert_int_equal(ms_breakdown(&s, &whole), 0);
  assert_int_equal(whole.struct_size, sizeof whole);

  /* A caller built against a later header: more figures after ours. */
  struct {
    ms_breakdown_t b;
    unsigned char later[64];
  } newer;
  memset(&newer, 0x5a, sizeof newer);
  assert_int_equal(ms_breakdown_read(&s, &newer.b, sizeof newer), 0);
  assert_int_equal(newer.b.struct_size, sizeof newer.b);
  assert_memory_equal(&newer.b, &whole, offsetof(ms_breakdown_t, struct_size));
  for (size_t i = 0; i < sizeof newer.later; i++)
    assert_int_equal(newer.later[i], 0x5a);

  /* 0.1's size, through ms_breakdown_read and through 0.1's symbol:
   * its figures, nothing from struct_size on. */
  size_t old = offsetof(ms_breakdown_t, struct_size);
  for (int sym = 0; sym < 2; sym++) {
    ms_breakdown_t part;
    memset(&part, 0x5a, sizeof part);
    assert_int_equal(
        sym ? (ms_breakdown)(&s, &part) : ms_breakdown_read(&s, &part, old), 0);
    assert_memory_equal(&part, &whole, old);
    const unsigned char *tail = (const unsigned char *)&part + old;
    for (size_t i = 0; i < sizeof part - old; i++)
      assert_int_equal(tail[i], 0x5a);
  }
  assert_int_equal(ms_breakdown_read(&s, &whole, old - 1), MS_EINVAL);
  /* Between two layouts: no header's struct. */
  assert_int_equal(ms_breakdown_read(&s, &whole, old + 4), MS_EINVAL);
  assert_int_equal(ms_breakdown_read(NULL, &whole, sizeof whole), MS_EINVAL);
}

/* Quality and source have room to grow, and new fields come after them:
 * a caller whose struct ends with the last field it knows gets a prefix
 * of the whole snapshot. */
static void test_layout_grows_at_the_end(void **state) {
  (void)state;
  assert_true(MS_F__COUNT <= MS_F_CAPACITY);
  assert_true(offsetof(ms_snapshot_t, kernel_anon_rss) >
              offsetof(ms_snapshot_t, source));
  static ms_snapshot_t whole, part;
  assert_int_equal(ms_snapshot_read(&whole, sizeof whole), 0);
  assert_int_equal(whole.struct_size, sizeof whole);
  size_t cut = offsetof(ms_snapshot_t, off_heap_released) +
               sizeof whole.off_heap_released;
  memset(&part, 0x5a, sizeof part);
  assert_int_equal(ms_snapshot_read(&part, cut), 0);
  assert_int_equal(part.struct_size, cut);
  assert_int_equal(part.pid, whole.pid);
  /* 0.2's layouts keep OffHeapReleased outside the classes (each holds its
   * backed bytes only): their breakdown, which cannot see the per-class
   * parts, still finds Sys = the sum of its terms. */
  ms_breakdown_t b;
  assert_int_equal(ms_breakdown(&part, &b), 0);
  assert_false(b.sys_mismatch);
  assert_int_equal(part.stack_sys, part.stack_inuse);
  /* The layout that ended with Python's arena fields, before their
   * in-use figures: filled up to them, nothing past. */
  cut = offsetof(ms_snapshot_t, python_arena_resident) +
        sizeof whole.python_arena_resident;
  memset(&part, 0x5a, sizeof part);
  assert_int_equal(ms_snapshot_read(&part, cut), 0);
  assert_int_equal(part.struct_size, cut);
  assert_int_equal(part.pid, whole.pid);
  assert_true(part.python_arena_inuse == 0x5a5a5a5a5a5a5a5aull);
  assert_int_equal(ms_snapshot_read(&part, cut + 1), MS_EINVAL);
  assert_int_equal(ms_breakdown(&part, &b), 0);
  assert_false(b.sys_mismatch);
  /* This layout: the classes hold their unbacked parts. */
  assert_int_equal(whole.stack_sys, whole.stack_inuse + whole.stack_released);
  assert_int_equal(ms_breakdown(&whole, &b), 0);
  assert_false(b.sys_mismatch);
  assert_int_equal(ms_snapshot_read(&part, 100), MS_EINVAL);
  assert_int_equal(ms_snapshot_read(NULL, sizeof part), MS_EINVAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_caller_built_against_0_1),
      cmocka_unit_test(test_layout_grows_at_the_end),
      cmocka_unit_test(test_breakdown_grows_at_the_end),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
