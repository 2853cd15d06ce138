/*
 * test_install.c - the Makefile as a packager drives it, read from what it
 * would run (make -n, into a build directory of the test's own, so nothing
 * of the build under test is touched):
 *
 *   - CPPFLAGS reaches every compile, as CFLAGS does;
 *   - make install puts the preload in a directory of its own,
 *     LIBDIR/memtop (it carries libmemstats' soname: beside
 *     libmemstats.so.0 ldconfig would pick one of the two), and memtop is
 *     built to look there; make uninstall removes it; DESTDIR and PREFIX
 *     are honoured.
 *
 * A real staged install, its memtop running a program under its preload and
 * a pkg-config consumer of its libmemstats, is `make installcheck`
 * (tests/installcheck.sh), which CI runs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/run.h"

static char out[1 << 20];
static char tmp[] = "/tmp/test_install.XXXXXX";

static int setup(void **state) {
  (void)state;
  /* Run from the source tree (make check does). */
  if (access("Makefile", R_OK) != 0 || access("tests/unit", R_OK) != 0)
    return -1;
  return mkdtemp(tmp) != NULL ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  run_sh("rm -rf '%s'", tmp);
  return 0;
}

/* What `make -n ARGS` would run, into out, with a build directory of the
 * test's own; the make running the suite (its MAKEFLAGS: jobserver,
 * BUILD=) and the install directories of the environment are not passed
 * on. */
static void dry_run(const char *args) {
  char cmd[4096];
  int rc;

  snprintf(cmd, sizeof cmd,
           "env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u BUILD -u LIBDIR "
           "-u PRELOADDIR -u BINDIR -u DESTDIR -u CPPFLAGS make -n "
           "--no-print-directory BUILD='%s/build' %s",
           tmp, args);
  rc = run_output(cmd, out, sizeof out);
  if (rc != 0)
    fail_msg("%s: exit %d\n%s", cmd, rc, out);
}

/* The lines of out holding `what`; each line's count in *lines. */
static int count_lines(const char *what, const char *also, int *lines) {
  int n = 0, all = 0;
  char *save = NULL, *line;
  static char copy[sizeof out];

  memcpy(copy, out, sizeof copy);
  for (line = strtok_r(copy, "\n", &save); line != NULL;
       line = strtok_r(NULL, "\n", &save)) {
    if (strstr(line, what) == NULL)
      continue;
    all++;
    if (also == NULL || strstr(line, also) != NULL)
      n++;
  }
  *lines = all;
  return n;
}

/* CPPFLAGS reaches every compile: the library's, the preload's, memtop's,
 * the tests', the generated protobuf code's. */
static void test_cppflags_reach_every_compile(void **state) {
  int compiles, with;

  (void)state;
  dry_run("CPPFLAGS=-DMS_TEST_CPPFLAGS_PROBE all test-build");
  /* Every compiler run that compiles (links alone take no -std=). */
  with = count_lines("-std=gnu", "-DMS_TEST_CPPFLAGS_PROBE", &compiles);
  assert_true(compiles > 50);
  if (with != compiles)
    fail_msg("%d of %d compiler runs lack CPPFLAGS", compiles - with, compiles);
}

/* The preload goes to LIBDIR/memtop, under DESTDIR; memtop is built to look
 * there; uninstall removes it and its directory. */
static void test_preload_in_private_dir(void **state) {
  char stage[256], want[512];
  int lines;

  (void)state;
  snprintf(stage, sizeof stage, "%s/stage", tmp);
  snprintf(want, sizeof want, "DESTDIR='%s' PREFIX=/opt/mt install", stage);
  dry_run(want);

  snprintf(want, sizeof want,
           "libmemstats-preload.so %s/opt/mt/lib/memtop/libmemstats-preload.so",
           stage);
  assert_int_equal(count_lines("install ", want, &lines), 1);
  /* Not beside libmemstats.so.0. */
  snprintf(want, sizeof want, "%s/opt/mt/lib/libmemstats-preload.so", stage);
  assert_int_equal(count_lines(want, NULL, &lines), 0);
  /* memtop looks there once installed. */
  assert_true(count_lines("src/memtop/run.c",
                          "-DMT_PRELOAD_DIR='\"/opt/mt/lib/memtop\"'",
                          &lines) == 1);
  /* The library and its pkg-config file under DESTDIR/PREFIX. */
  snprintf(want, sizeof want, "%s/opt/mt/lib/libmemstats.so.", stage);
  assert_true(count_lines("install ", want, &lines) >= 1);
  snprintf(want, sizeof want, "%s/opt/mt/lib/pkgconfig/memstats.pc", stage);
  assert_true(count_lines("memstats.pc.in > ", want, &lines) >= 1);

  snprintf(want, sizeof want, "DESTDIR='%s' PREFIX=/opt/mt uninstall", stage);
  dry_run(want);
  snprintf(want, sizeof want, "%s/opt/mt/lib/memtop/libmemstats-preload.so",
           stage);
  assert_int_equal(count_lines(want, NULL, &lines), 1);
  snprintf(want, sizeof want, "rmdir %s/opt/mt/lib/memtop", stage);
  assert_int_equal(count_lines(want, NULL, &lines), 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cppflags_reach_every_compile),
      cmocka_unit_test(test_preload_in_private_dir),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
