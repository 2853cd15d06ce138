/*
 * test_start_cost.c - what every process started under the preload pays
 * before its main(), in calls counted by callgrind (the same on a loaded
 * machine as on a quiet one; a timing is not). A shell script or make runs
 * hundreds of short programs, each of which loads the preload and runs its
 * constructors (issue 18, item 12: a fork-heavy script at most 1.05x
 * bare). Checked on /bin/true, at the default profiling rate:
 *
 * - no dladdr(): it searches the whole symbol table of the object for the
 *   nearest symbol, and the allocator's lookup (src/preload/resolve.c)
 *   called it a dozen times, two thirds of the instructions of the run;
 *   the object of an address is found with _dl_find_object;
 * - few failed symbol lookups (each formats and allocates an error):
 *   with no C++ runtime loaded, the 22 operators are not looked up one by
 *   one (src/preload/cxx.c);
 * - libgcc_s not loaded: the profiler's fallback unwinder is loaded by the
 *   agent thread later (src/profile/unwind.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/callgrind.h"
#include "support/host.h"

static char g_build[1024], g_preload[1200];

static void test_start_lookups(void **state) {
  char dir[] = "/tmp/test_start_cost.XXXXXX", out[64], ld[1300], why[512];
  unsigned long long total = 0;

  (void)state;
  if (!host_have_program("valgrind")) {
    print_message("skipped: valgrind is not installed\n");
    skip();
  }
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  print_message("skipped: valgrind cannot run a sanitized preload\n");
  skip();
#endif
  assert_non_null(mkdtemp(dir));
  snprintf(out, sizeof out, "%s/cg.out", dir);
  snprintf(ld, sizeof ld, "LD_PRELOAD=%s", g_preload);
  const char *argv[] = {"/bin/true", NULL};
  const char *env[] = {ld, "MEMSTATS_AGENT=0", "MEMSTATS_PROFILE_RATE", NULL};
  int rc = cg_run(argv, env, out, &total, why, sizeof why);
  long long addr = cg_calls(out, "_dl_addr");
  long long failed = cg_calls(out, "_dl_exception_create");
  long long unwinder = cg_calls(out, "__libc_unwind_link_get");
  unlink(out);
  rmdir(dir);
  if (rc != 0)
    fail_msg("/bin/true under callgrind: %s", why);
  print_message("/bin/true under the preload: %llu instructions, %lld "
                "dladdr searches, %lld failed symbol lookups, %lld loads "
                "of libgcc's unwinder\n",
                total, addr, failed, unwinder);
  assert_int_equal(addr, 0);
  /* Boehm's collector, tcmalloc's size function, jemalloc's nallocx: the
   * allocators and collectors that are not there. */
  assert_true(failed <= 4);
  assert_int_equal(unwinder, 0);
}

static int setup(void **state) {
  (void)state;
  if (host_build_dir(g_build, sizeof g_build) != 0 ||
      host_preload_path(g_build, g_preload, sizeof g_preload) != 0)
    return -1;
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_start_lookups),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
