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
 *
 * And what a fork child that ends at once without allocating (most of a
 * shell's and of make's) runs of the preload's: no system call (its PID
 * was asked for in the fork handler, and again in _exit()) and no clock
 * read (the grace before a child's agent starts runs from its first
 * allocation), in tests/progs/pl_forkexit's two children.
 */
#include <dlfcn.h> /* DLFO_STRUCT_HAS_EH_DBASE: _dl_find_object is there */
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
  long long failed = cg_calls(out, "_dl_exception_create_format");
  long long unwinder = cg_calls(out, "__libc_unwind_link_get");
  unlink(out);
  rmdir(dir);
  if (rc != 0)
    fail_msg("/bin/true under callgrind: %s", why);
  print_message("/bin/true under the preload: %llu instructions, %lld "
                "dladdr searches, %lld failed symbol lookups, %lld loads "
                "of libgcc's unwinder\n",
                total, addr, failed, unwinder);
#if defined(DLFO_STRUCT_HAS_EH_DBASE)
  assert_int_equal(addr, 0); /* else there is no _dl_find_object */
#endif
  /* Boehm's collector, tcmalloc's size function, jemalloc's nallocx: the
   * allocators and collectors that are not there (24 failed lookups
   * before). */
  assert_true(failed <= 6);
  assert_int_equal(unwinder, 0);
}

/* The profiles callgrind wrote into dir (one a process: the parent's
 * and each fork child's, which starts with the parent's counts at the
 * fork). The parent's is the one that counts both waitpid() calls. */
typedef struct cg_files_s {
  char path[8][320];
  int n, parent;
} cg_files_t;

static void cg_files(const char *dir, cg_files_t *f) {
  char cmd[400];
  snprintf(cmd, sizeof cmd, "ls %s", dir);
  FILE *ls = popen(cmd, "r");
  assert_non_null(ls);
  char name[256];
  f->n = 0;
  f->parent = -1;
  while (f->n < 8 && fgets(name, sizeof name, ls) != NULL) {
    name[strcspn(name, "\n")] = '\0';
    snprintf(f->path[f->n], sizeof f->path[f->n], "%s/%s", dir, name);
    if (cg_calls(f->path[f->n], "waitpid") == 2)
      f->parent = f->n;
    f->n++;
  }
  pclose(ls);
}

static void test_fork_child_quiet(void **state) {
  char dir[] = "/tmp/test_start_cost.XXXXXX", out[64], ld[1300], why[512];
  char prog[1300];
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
  snprintf(out, sizeof out, "%s/cg.%%p", dir);
  snprintf(ld, sizeof ld, "LD_PRELOAD=%s", g_preload);
  snprintf(prog, sizeof prog, "%s/progs/pl_forkexit", g_build);
  const char *argv[] = {prog, NULL};
  const char *env[] = {ld, "MEMSTATS_AGENT=0", "MEMSTATS_PROFILE_RATE", NULL};
  int rc = cg_run(argv, env, out, &total, why, sizeof why);
  cg_files_t f;
  cg_files(dir, &f);
  long long sys[8], clk[8];
  for (int i = 0; i < f.n; i++) {
    sys[i] = cg_calls(f.path[i], "syscall");
    clk[i] = cg_calls(f.path[i], "clock_gettime");
    unlink(f.path[i]);
  }
  rmdir(dir);
  if (rc != 0)
    fail_msg("pl_forkexit under callgrind: %s", why);
  assert_int_equal(f.n, 3);
  assert_true(f.parent >= 0);
  for (int i = 0; i < f.n; i++) {
    if (i == f.parent)
      continue;
    print_message("a fork child: %lld calls of syscall(), %lld clock reads "
                  "(the parent had made %lld and %lld at the fork)\n",
                  sys[i], clk[i], sys[f.parent], clk[f.parent]);
    assert_true(sys[i] <= sys[f.parent]);
    assert_true(clk[i] <= clk[f.parent]);
  }
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
      cmocka_unit_test(test_fork_child_quiet),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
