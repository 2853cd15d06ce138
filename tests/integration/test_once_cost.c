/*
 * test_once_cost.c - what `memtop --once PID` does besides connecting,
 * reading the snapshot and printing it (issue 23: --once within 1 ms of
 * /bin/true), in counts, the same on a loaded machine as on a quiet one
 * (a timing is not):
 *
 * - no file under /etc but the loader's (ld.so.cache, ld.so.preload): the
 *   text report names no user, so nothing asks NSS (/etc/nsswitch.conf,
 *   /etc/passwd, nscd's socket), and its time, in UTC, reads no time zone
 *   (/etc/localtime);
 * - who the target is, read once: the target set reads its /proc files
 *   when the PID is added and hands them to the first connect, which read
 *   them again (/proc/PID/cgroup, the namespace links); /proc/PID/status
 *   twice: that read and the check of who answered the connect;
 * - the report formatted once, mostly without printf: a line is written
 *   straight into the buffer's room (it was measured by one vsnprintf,
 *   then written by another), the figures' bytes, counts and marks, and
 *   the padded columns of its cells and tables, by hand;
 * - in all, under callgrind (the loader's work included): 1,154,000
 *   instructions with libuv and libm loaded and the above, 971,000 with
 *   libc alone (test_build checks the libraries), 579,000 now.
 *
 * strace and valgrind are needed; a test without its tool skips.
 */
#include <setjmp.h>
#include <signal.h>
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
#include "support/target_proc.h"

static char g_build[1024], g_memtop[1200], g_target[1200];
static char g_dir[] = "/tmp/test_once_cost.XXXXXX";
static target_t g_t;
static char out[65536];

/* The instructions `memtop --once PID` may run, the loader's included
 * (579,000 here; 971,000 before, 1,154,000 with libuv and libm loaded). */
#define ONCE_MAX_INSTRUCTIONS 750000ull
/* printf-family formattings in it (vsnprintf and snprintf, each one pass
 * of glibc's __vsnprintf_internal): 58 here; 349 before. */
#define ONCE_MAX_FORMATS 100

static int setup(void **state) {
  (void)state;
  if (host_build_dir(g_build, sizeof g_build) != 0 || mkdtemp(g_dir) == NULL)
    return -1;
  snprintf(g_memtop, sizeof g_memtop, "%s/memtop", g_build);
  snprintf(g_target, sizeof g_target, "%s/progs/mt_target", g_build);
  setenv("MEMSTATS_DIR", g_dir, 1);
  unsetenv("MEMSTATS_AGENT");
  setenv("MEMSTATS_AGENT_DELAY_MS", "0", 1);
  signal(SIGPIPE, SIG_IGN);
  return target_launch_ready(&g_t, g_target, g_dir);
}

static int teardown(void **state) {
  char cmd[256];
  (void)state;
  target_stop(&g_t, SIGTERM);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  return run_sh("%s", cmd) == 0 ? 0 : -1;
}

/* `memtop --once PID` under strace -f, tracing the calls named (strace's
 * -e trace=), its trace into out. */
static void strace_once(const char *calls) {
  char cmd[4096];
  if (!host_have_program("strace")) {
    print_message("skipped: strace is not installed\n");
    skip();
  }
  /* LeakSanitizer cannot run under ptrace (a sanitized build's memtop). */
  snprintf(cmd, sizeof cmd,
           "ASAN_OPTIONS=detect_leaks=0 strace -f -qq -e trace=%s -o "
           "'%s/strace.txt' '%s' --once %d >/dev/null 2>&1 && cat "
           "'%s/strace.txt'",
           calls, g_dir, g_memtop, (int)g_t.pid, g_dir);
  assert_int_equal(run_output(cmd, out, sizeof out), 0);
}

/* The lines of out that hold s. */
static int lines_with(const char *s) {
  int n = 0;
  for (const char *l = out; *l != '\0';) {
    const char *nl = strchr(l, '\n');
    const char *hit = strstr(l, s);
    if (hit != NULL && (nl == NULL || hit < nl))
      n++;
    if (nl == NULL)
      break;
    l = nl + 1;
  }
  return n;
}

static void test_once_reads_nothing_in_etc(void **state) {
  (void)state;
  strace_once("openat,open,connect,newfstatat,stat");
  /* The trace is there (else this could never fail). */
  if (lines_with("/etc/ld.so.cache") < 1)
    fail_msg("no trace of the loader's files:\n%.2000s", out);
  int etc = lines_with("\"/etc/") - lines_with("\"/etc/ld.so.");
  if (etc != 0 || lines_with("nscd") != 0)
    fail_msg("memtop --once reads %d files under /etc:\n%.6000s", etc, out);
}

static void test_once_reads_who_once(void **state) {
  char status[64], cgroup[64], mnt[64];
  (void)state;
  strace_once("openat,open,readlink,readlinkat");
  snprintf(status, sizeof status, "/proc/%d/status\"", (int)g_t.pid);
  snprintf(cgroup, sizeof cgroup, "/proc/%d/cgroup\"", (int)g_t.pid);
  snprintf(mnt, sizeof mnt, "/proc/%d/ns/mnt\"", (int)g_t.pid);
  print_message("memtop --once: %d reads of status, %d of cgroup, %d of the "
                "mount namespace\n",
                lines_with(status), lines_with(cgroup), lines_with(mnt));
  if (lines_with(cgroup) != 1 || lines_with(mnt) != 1 ||
      lines_with(status) != 2)
    fail_msg("memtop --once reads who PID %d is more than once:\n%.6000s",
             (int)g_t.pid, out);
}

static void test_once_instructions(void **state) {
  char dir[] = "/tmp/test_once_cost.cg.XXXXXX", cg[64], why[512];
  unsigned long long total = 0;

  (void)state;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  print_message("skipped: valgrind cannot run a sanitized memtop\n");
  skip();
#endif
  if (!host_have_program("valgrind")) {
    print_message("skipped: valgrind is not installed\n");
    skip();
  }
  assert_non_null(mkdtemp(dir));
  snprintf(cg, sizeof cg, "%s/cg.out", dir);
  const char *argv[] = {g_memtop, "--once", run_pidstr(g_t.pid), NULL};
  int rc = cg_run(argv, NULL, cg, &total, why, sizeof why);
  long long formats = cg_calls(cg, "__vsnprintf_internal");
  long long reports = cg_calls(cg, "mt_emit_report");
  unlink(cg);
  rmdir(dir);
  if (rc != 0)
    fail_msg("memtop --once under callgrind: %s", why);
  print_message("memtop --once: %llu instructions, %lld formattings\n", total,
                formats);
  /* Counted, the report made (else this could never fail). */
  assert_int_equal(reports, 1);
  if (formats > ONCE_MAX_FORMATS)
    fail_msg("memtop --once formats %lld times (at most %d)", formats,
             ONCE_MAX_FORMATS);
  if (total > ONCE_MAX_INSTRUCTIONS)
    fail_msg("memtop --once runs %llu instructions (at most %llu)", total,
             ONCE_MAX_INSTRUCTIONS);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_once_reads_nothing_in_etc),
      cmocka_unit_test(test_once_reads_who_once),
      cmocka_unit_test(test_once_instructions),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
