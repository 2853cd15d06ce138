/*
 * test_run.c - where `memtop run` looks for the preload once installed
 * (src/memtop/run.c): beside the binary, in ../lib/memtop, and in the
 * preload directory the build was configured with (LIBDIR/memtop: under
 * /usr/lib64, a multiarch directory), which the Makefile passes as
 * MT_PRELOAD_DIR. (The build-tree and override cases are in test_cli.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "memstats.h"
#include "memtop/run.h"

#ifndef MT_PRELOAD_DIR
#error "the Makefile passes MT_PRELOAD_DIR (its PRELOADDIR) to the tests"
#endif

static void touch(const char *path) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fclose(f);
}

/* memtop installed in /usr/bin, the library in /usr/lib64 (or
 * /usr/lib/x86_64-linux-gnu): not in ../lib, found in the libdir. */
static void test_found_in_libdir(void **state) {
  char dir[] = "/tmp/test_run.XXXXXX", bin[64], lib[64], exe[128];
  char so[4096], out[4096], msg[1024];

  (void)state;
  assert_non_null(mkdtemp(dir));
  snprintf(bin, sizeof bin, "%s/bin", dir);
  snprintf(lib, sizeof lib, "%s/lib64", dir);
  assert_int_equal(mkdir(bin, 0700), 0);
  assert_int_equal(mkdir(lib, 0700), 0);
  snprintf(exe, sizeof exe, "%s/memtop", bin);
  snprintf(so, sizeof so, "%s/" MT_PRELOAD_NAME, lib);

  /* Not there yet: the message names the libdir too. */
  assert_int_equal(
      mt_run_find_preload_in(exe, NULL, lib, out, sizeof out, msg, sizeof msg),
      MS_ENOENT);
  assert_non_null(strstr(msg, so));
  assert_non_null(strstr(msg, "MEMTOP_PRELOAD"));

  touch(so);
  assert_int_equal(
      mt_run_find_preload_in(exe, NULL, lib, out, sizeof out, msg, sizeof msg),
      0);
  assert_string_equal(out, so);
  /* No libdir given: only the places relative to the binary. */
  assert_int_equal(
      mt_run_find_preload_in(exe, NULL, NULL, out, sizeof out, msg, sizeof msg),
      MS_ENOENT);

  unlink(so);
  rmdir(lib);
  rmdir(bin);
  rmdir(dir);
}

/* The plain entry point looks in the LIBDIR memtop was built for: where it
 * looked, said when nothing is found, includes it. */
static void test_default_libdir_is_the_configured_one(void **state) {
  char dir[] = "/tmp/test_run.XXXXXX", exe[4096], out[4096], msg[2048];
  const char *want = MT_PRELOAD_DIR "/" MT_PRELOAD_NAME;

  (void)state;
  if (access(want, R_OK) == 0)
    skip(); /* installed on this machine: found, no message to read */
  assert_non_null(mkdtemp(dir));
  snprintf(exe, sizeof exe, "%s/memtop", dir);
  assert_int_equal(
      mt_run_find_preload(exe, NULL, out, sizeof out, msg, sizeof msg),
      MS_ENOENT);
  assert_non_null(strstr(msg, want));
  rmdir(dir);
}

/* The preload is installed in a directory of its own, LIBDIR/memtop, not
 * in LIBDIR beside libmemstats.so.0, whose soname it carries (ldconfig
 * would link one of the two for that name). The Makefile says so. */
static void test_preload_dir_is_private(void **state) {
  const char *d = MT_PRELOAD_DIR;
  size_t n = strlen(d);

  (void)state;
  assert_true(n > strlen("/memtop"));
  assert_string_equal(d + n - strlen("/memtop"), "/memtop");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_found_in_libdir),
      cmocka_unit_test(test_default_libdir_is_the_configured_one),
      cmocka_unit_test(test_preload_dir_is_private),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
