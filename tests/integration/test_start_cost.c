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
#include "support/run.h"

/* Skips the test where its counts cannot be taken: a sanitized build
 * (valgrind cannot run a sanitized preload), or no valgrind. */
#define SKIP_UNLESS_CALLGRIND()                                                \
  do {                                                                         \
    CG_SKIP_IF_SANITIZED("valgrind cannot run a sanitized preload");           \
    CG_SKIP_UNLESS_VALGRIND();                                                 \
  } while (0)

static char g_build[1024], g_preload[1200];

static void test_start_lookups(void **state) {
  char ld[1300], why[512];
  unsigned long long total = 0;
  long long n[3];

  (void)state;
  SKIP_UNLESS_CALLGRIND();
  snprintf(ld, sizeof ld, "LD_PRELOAD=%s", g_preload);
  const char *argv[] = {"/bin/true", NULL};
  const char *env[] = {ld, "MEMSTATS_AGENT=0", "MEMSTATS_PROFILE_RATE", NULL};
  const char *fns[] = {"_dl_addr", "_dl_exception_create_format",
                       "__libc_unwind_link_get"};
  if (cg_run_calls("test_start_cost", argv, env, fns, n, 3, &total, why,
                   sizeof why) != 0)
    fail_msg("/bin/true under callgrind: %s", why);
  long long addr = n[0], failed = n[1], unwinder = n[2];
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
  char ld[1300], prog[1300];
  cg_profile_t cg;

  (void)state;
  SKIP_UNLESS_CALLGRIND();
  snprintf(ld, sizeof ld, "LD_PRELOAD=%s", g_preload);
  snprintf(prog, sizeof prog, "%s/progs/pl_forkexit", g_build);
  const char *argv[] = {prog, NULL};
  const char *env[] = {ld, "MEMSTATS_AGENT=0", "MEMSTATS_PROFILE_RATE", NULL};
  assert_int_equal(cg_profile_begin(&cg, "test_start_cost"), 0);
  int rc = cg_profile_run(&cg, argv, env, 1);
  cg_files_t f;
  cg_files(cg.dir, &f);
  long long sys[8], clk[8];
  for (int i = 0; i < f.n; i++) {
    sys[i] = cg_calls(f.path[i], "syscall");
    clk[i] = cg_calls(f.path[i], "clock_gettime");
  }
  cg_profile_end(&cg);
  if (rc != 0)
    fail_msg("pl_forkexit under callgrind: %s", cg.why);
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

/* Runs tests/progs/pl_forkfaults with one child under callgrind, its
 * costs zeroed at each fork (--zero-before=_Fork), so that the child's
 * profile counts what the child ran from the fork on and nothing of its
 * parent's; the child's profile's path into child (the profile that
 * counts no waitpid), in cg's directory (the socket directory too), which
 * the caller removes with cg_profile_end. preload NULL: bare. */
static void run_fork_child(cg_profile_t *cg, const char *preload, int agent,
                           char child[320], unsigned long long *instr) {
  char ld[1300], prog[1300], sockdir[100];
  assert_int_equal(cg_profile_begin(cg, "test_start_cost"), 0);
  snprintf(ld, sizeof ld, "LD_PRELOAD=%s", preload ? preload : "");
  snprintf(prog, sizeof prog, "%s/progs/pl_forkfaults", g_build);
  snprintf(sockdir, sizeof sockdir, "MEMSTATS_DIR=%s", cg->dir);
  const char *argv[] = {prog, "1", NULL};
  const char *env[] = {preload ? ld : "LD_PRELOAD",
                       agent ? "MEMSTATS_AGENT" : "MEMSTATS_AGENT=0",
                       sockdir,
                       "MEMSTATS_PROFILE_RATE",
                       "VALGRIND_OPTS=--zero-before=_Fork",
                       NULL};
  int rc = cg_profile_run(cg, argv, env, 1);
  cg_files_t f;
  cg_files(cg->dir, &f);
  child[0] = '\0';
  for (int i = 0; i < f.n && child[0] == '\0'; i++)
    if (cg_calls(f.path[i], "waitpid") == 0 && cg_calls(f.path[i], "exit") > 0)
      snprintf(child, 320, "%s", f.path[i]);
  if (rc != 0)
    fail_msg("pl_forkfaults under callgrind: %s", cg->why);
  if (child[0] == '\0')
    fail_msg("pl_forkfaults under callgrind: no profile of its child");
  FILE *c = fopen(child, "r");
  char line[256];
  *instr = 0;
  while (c != NULL && fgets(line, sizeof line, c) != NULL)
    if (strncmp(line, "summary: ", 9) == 0)
      *instr = strtoull(line + 9, NULL, 10);
  if (c != NULL)
    fclose(c);
}

/* A fork child that allocates and ends with exit(), as a subshell does,
 * runs nothing of the preload's that touches a page of code the bare
 * child does not (each such page is a fault in every child: a fork does
 * not copy the page table entries of code): no syscall() (the PID is
 * asked for only when the child's agent is to start), no
 * pthread_mutex_unlock() (the fork handlers reset their locks with
 * stores), and the preload's DT_FINI is not crti's _fini, alone on the
 * last page of its code, but a function of the fork text (ms__fini). */
static void check_fork_child_code(int agent) {
  char bare[320], pre[320];
  unsigned long long ib = 0, ip = 0;
  cg_profile_t cb, cp;

  run_fork_child(&cb, NULL, agent, bare, &ib);
  run_fork_child(&cp, g_preload, agent, pre, &ip);
  const char *fns[] = {"syscall", "pthread_mutex_unlock", "_fini",
                       "clock_gettime"};
  long long nb[4], np[4];
  for (int i = 0; i < 4; i++) {
    nb[i] = cg_calls(bare, fns[i]);
    np[i] = cg_calls(pre, fns[i]);
  }
  cg_profile_end(&cb);
  cg_profile_end(&cp);
  print_message("a fork child that allocates and calls exit(): %llu "
                "instructions bare, %llu under the preload (agent %s)\n",
                ib, ip, agent ? "on" : "off");
  for (int i = 0; i < 4; i++) {
    print_message("  calls of %s: %lld bare, %lld under the preload\n", fns[i],
                  nb[i], np[i]);
    assert_true(nb[i] >= 0 && np[i] >= 0);
    assert_int_equal(np[i], nb[i]);
  }
}

/* ... and with the agent on in its parent, no clock read either: before
 * its agent starts the child looks at the clock from its 64th allocation
 * on only (src/preload/preload.c). */
static void test_fork_child_pages_of_code(void **state) {
  (void)state;
  SKIP_UNLESS_CALLGRIND();
  check_fork_child_code(0);
  check_fork_child_code(1);
}

/* A program that ends before its agent's delay (MEMSTATS_AGENT_DELAY_MS,
 * made long here so that valgrind's slowness cannot outlast it) has
 * created the agent's thread and nothing more: no socket made, bound,
 * listened on or unlinked, and its exit does not wait
 * for the thread (a compiler's passes, a shell's commands: each paid
 * some 40 system calls for a socket nobody read, and on a disk
 * filesystem an inode a bind()). */
static void test_short_process_makes_no_socket(void **state) {
  char ld[1300], sockdir[100];
  cg_profile_t cg;

  (void)state;
  SKIP_UNLESS_CALLGRIND();
  assert_int_equal(cg_profile_begin(&cg, "test_start_cost"), 0);
  snprintf(sockdir, sizeof sockdir, "MEMSTATS_DIR=%s", cg.dir);
  snprintf(ld, sizeof ld, "LD_PRELOAD=%s", g_preload);
  const char *argv[] = {"/bin/true", NULL};
  const char *env[] = {ld,
                       sockdir,
                       "MEMSTATS_AGENT",
                       "MEMSTATS_AGENT_DELAY_MS=600000",
                       "MEMSTATS_PROFILE_RATE",
                       NULL};
  int rc = cg_profile_run(&cg, argv, env, 0);
  /* Prefixes: "listen" counts listen_open too (and "unlink" would count
   * glibc malloc's unlink_chunk). */
  const char *fns[] = {"bind", "listen", "rename", "pthread_join",
                       "pthread_timedjoin_np"};
  long long n[5];
  for (int i = 0; i < 5; i++)
    n[i] = cg_calls(cg.out, fns[i]);
  long long threads = cg_calls(cg.out, "pthread_create");
  cg_profile_end(&cg);
  if (rc != 0)
    fail_msg("/bin/true under callgrind: %s", cg.why);
  print_message("/bin/true, agent on, ended before its agent's delay: %llu "
                "instructions\n",
                cg.total);
  assert_true(threads >= 1); /* the agent's thread was made */
  for (int i = 0; i < 5; i++) {
    print_message("  calls of %s: %lld\n", fns[i], n[i]);
    assert_int_equal(n[i], 0);
  }
}

/* tests/progs/pl_forkfaults' 40 children's page faults and its own over
 * the same loop, with address-space randomization off (setarch -R: where
 * the stack and the heap fall against page boundaries moves a run's
 * count by one a child), the fewest of three runs; bare, or with the
 * preload (its agent off, or on and started: no delay, its socket in
 * dir). The bare run is given variables of the same lengths under names
 * nothing reads, so that both start with the same environment's size and
 * their stacks fall alike against page boundaries: a CI's environment
 * once put the preloaded run's stack where its loop wrote two pages a
 * fork and the bare run's one (+40 faults in the parent, failing the
 * bound by the layout alone). thread: the program makes an idle thread of
 * its own first (pl_forkfaults thread). */
static void fork_faults(const char *preload, int bare, const char *dir,
                        int thread, long *child, long *parent) {
  char cmd[4096], out[512], env[600];
  *child = *parent = -1;
  if (dir != NULL)
    snprintf(env, sizeof env,
             "%cEMSTATS_AGENT=1 %cEMSTATS_AGENT_DELAY_MS=0 %cEMSTATS_DIR=%s "
             "%cEMSTATS_PROFILE_RATE=524288 %cD_PRELOAD=",
             bare ? 'X' : 'M', bare ? 'X' : 'M', bare ? 'X' : 'M', dir,
             bare ? 'X' : 'M', bare ? 'X' : 'L');
  else
    snprintf(env, sizeof env,
             "%cEMSTATS_AGENT=0 %cEMSTATS_PROFILE_RATE=524288 %cD_PRELOAD=",
             bare ? 'X' : 'M', bare ? 'X' : 'M', bare ? 'X' : 'L');
  for (int run = 0; run < 3; run++) {
    snprintf(cmd, sizeof cmd,
             "setarch -R env -u LD_PRELOAD %s%s %s/progs/pl_forkfaults%s", env,
             preload, g_build, thread ? " thread" : "");
    if (run_output(cmd, out, sizeof out) != 0)
      fail_msg("%s: %s", cmd, out);
    const char *c = strstr(out, "fork.child_faults=");
    const char *p = strstr(out, "fork.parent_faults=");
    if (c == NULL || p == NULL || strstr(out, "fork.children=40") == NULL)
      fail_msg("%s: %s", cmd, out);
    long nc = strtol(c + 18, NULL, 10), np = strtol(p + 19, NULL, 10);
    if (*child < 0 || nc < *child)
      *child = nc;
    if (*parent < 0 || np < *parent)
      *parent = np;
  }
}

/* The fork-fault tests' needs: the plain programs (which take no
 * sanitized preload) and setarch, for the same layout every run. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SKIP_UNLESS_FAULTS()                                                   \
  do {                                                                         \
    print_message("skipped: the plain programs take no sanitized preload\n");  \
    skip();                                                                    \
  } while (0)
#else
#define SKIP_UNLESS_FAULTS()                                                   \
  do {                                                                         \
    if (!host_have_program("setarch")) {                                       \
      print_message("skipped: setarch (util-linux) is not installed\n");       \
      skip();                                                                  \
    }                                                                          \
  } while (0)
#endif

/* The copy-on-write faults a fork costs under the preload (agent off),
 * counted by the kernel (the same under any load). What every layer's
 * fork handlers write is on one page (core/feed.h, MS__FORK_DATA), and
 * the first shard, which the main thread's allocations write, is on that
 * page too: a parent that forks and allocates writes one page of the
 * preload's between two forks, not two. A child that allocates and exits
 * faults in a page of the fork text, the fork section's, the loader's
 * page with the preload's link map (which exit writes) and, depending on
 * the layout, one or two more (on this machine 4; 7 before). */
static void test_fork_faults(void **state) {
  long bc, bp, pc, pp;
  (void)state;
  SKIP_UNLESS_FAULTS();
  fork_faults(g_preload, 1, NULL, 0, &bc, &bp);
  fork_faults(g_preload, 0, NULL, 0, &pc, &pp);
  print_message("40 forks: the children's page faults %ld bare, %ld under "
                "the preload; the parent's %ld bare, %ld under the preload\n",
                bc, pc, bp, pp);
  assert_true(pc <= bc + 40 * 5);
  /* The parent: one page a fork here (160 bare, 200 preloaded), but two
   * in a fresh clone's CI run (240), twice, under no condition found
   * since (the stacks' layout, load, a fresh page cache, make's
   * environment, a tmux test beside it: 200 each time). Two is what the
   * fork handlers' page and the first shard's cost apart, as before they
   * shared one: more is a regression. */
  assert_true(pp <= bp + 40 * 2);
}

/* With the agent on (started, its socket made), a fork costs what it
 * costs with the agent off plus what any second thread costs: glibc's
 * fork takes its multi-threaded path in a process that has ever made a
 * thread (every malloc arena's and stdio's locks taken and reset, the
 * other threads' stacks reclaimed in the child, the thread library's
 * state reset): on this machine 4 more faults a child and 3 a parent,
 * bare, for an idle thread of the program's own (pl_forkfaults thread:
 * 30 and 7 a fork against 26 and 4), the agent on 32 and 8. The bound is
 * the agent-off test's over the bare program with its idle thread: the
 * agent's thread may cost a fork what a thread costs, nothing of its
 * own (issue 18 item 12: what is left of the 1.05x goal with the agent
 * on is this floor of glibc's; see tests/bench/bench_preload.c). */
static void test_fork_faults_agent(void **state) {
  long bc, bp, pc, pp;
  char dir[] = "/tmp/test_start_cost_XXXXXX";
  (void)state;
  SKIP_UNLESS_FAULTS();
  assert_non_null(mkdtemp(dir));
  fork_faults(g_preload, 1, dir, 1, &bc, &bp);
  fork_faults(g_preload, 0, dir, 0, &pc, &pp);
  char cmd[200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
  print_message("40 forks: the children's page faults %ld bare with an idle "
                "thread, %ld with the agent on; the parent's %ld and %ld\n",
                bc, pc, bp, pp);
  assert_true(pc <= bc + 40 * 5);
  assert_true(pp <= bp + 40 * 2);
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
      cmocka_unit_test(test_fork_child_pages_of_code),
      cmocka_unit_test(test_short_process_makes_no_socket),
      cmocka_unit_test(test_fork_faults),
      cmocka_unit_test(test_fork_faults_agent),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
