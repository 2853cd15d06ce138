/*
 * vm_attach.c - memtop attach, attach --track and detach on an aarch64
 * Linux kernel: built for aarch64 by `make vm-aarch64-files` and run
 * inside the VM tests/cross/vm-aarch64.sh boots (qemu-system-aarch64,
 * -cpu max), as $BUILD/tests/vm_attach beside $BUILD/memtop
 * (tests/cross/at_memtop.c: memtop's attach code), the aarch64 preload
 * and $BUILD/progs/{at_alloc,libatmod.so,at_sve}. What test_attach checks
 * on x86-64, on the real ptrace of an aarch64 kernel:
 *   - at_alloc on 4 threads allocating all the time: cycles of attach and
 *     detach, the agent answering after each attach (HeapInuse within 1%
 *     of mallinfo2 read in-process, workers parked) and gone after each
 *     detach, the program's read(2) on stdin (the thread the calls are
 *     made on) issued again and answering, and its exit normal; the stop
 *     times printed ("stop ms: p50 ... max ..."; software emulation);
 *   - attach --track: malloc's GOT entry the preload's (JUMP_SLOT), the
 *     agent counting, a module dlopen'ed after it (the aarch64 dlopen
 *     stub) counted exactly, and the entry the C library's again after
 *     the detach;
 *   - at_cxx (tests/progs/at_cxx.cc, where the aarch64 C++ compiler is)
 *     under attach --track: counted, and working on after the detach;
 *   - at_sve (tests/cross/at_sve.c), one thread looping with SVE's
 *     registers live (z0-z29 whole, predicates, FFR, FPCR, x19-x28): an
 *     attach, a detach, an attach --track and a detach while it runs,
 *     and every register it holds unchanged after them. What it cannot
 *     tell on this kernel under QEMU: a restore of the FP/SIMD part alone
 *     (NT_PRFPREG) passes too (tried), since SVE's bits above it survive
 *     the calls (their system calls, at_sve's own too, left them as
 *     they were) and glibc 2.36's calls use none of them;
 *   - at_pac (tests/cross/at_pac.c): a live frame record returning into
 *     malloc, signed with PAC, makes its thread busy; the same address
 *     plain in a frame's locals (a stale one) does not;
 *   - at_sleep (tests/cross/at_sleep.c), one thread in clock_nanosleep
 *     (restarted through the kernel's restart block, NT_ARM_SYSTEM_CALL):
 *     attached and detached while it sleeps, no sleep ended early.
 * cmocka's output goes to the VM's console, which the host script reads.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/fetch.h"
#include "support/host.h"
#include "support/run.h"
#include "support/target.h"

/* The attach/detach cycles; VM_CYCLES (1 to 1000) on the kernel's
 * command line for more (tests/cross/vm-aarch64.sh passes it). */
#define CYCLES 10
#define CYCLES_MAX 1000

static char build_dir[1024], memtop[1200], prog[1200], dir[64];

static int setup(void **state) {
  (void)state;
  assert_int_equal(host_build_dir(build_dir, sizeof build_dir), 0);
  snprintf(memtop, sizeof memtop, "%s/memtop", build_dir);
  snprintf(prog, sizeof prog, "%s/progs/at_alloc", build_dir);
  assert_int_equal(target_dir_setup(dir, sizeof dir, "/tmp/vm_attach.XXXXXX"),
                   0);
  char preload[1300];
  if (host_preload_path(build_dir, preload, sizeof preload) != 0)
    fail_msg("%s is missing", preload);
  setenv("MEMTOP_PRELOAD", preload, 1);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  target_dir_remove(dir);
  return 0;
}

/* memtop attach|detach [--track] PID. */
static int memtop_cmd(run_result_t *res, const char *cmd, int track,
                      pid_t pid) {
  char p[32];
  snprintf(p, sizeof p, "%d", (int)pid);
  char *argv[] = {memtop, (char *)cmd, (char *)"--track", p, NULL};
  if (!track)
    argv[2] = p, argv[3] = NULL;
  return run_capture(res, argv, -1);
}

/* path [ARG] started bare, until it says "ready". */
static int start_prog(target_t *t, const char *path, const char *arg) {
  const char *argv[] = {path, arg, NULL};
  static const char *const env[] = {"LD_PRELOAD", NULL};
  return target_launch_argv_ready(t, argv, dir, env, NULL);
}

static int within_1pct(uint64_t a, uint64_t b) {
  uint64_t d = a > b ? a - b : b - a;
  return d * 100 <= b;
}

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A snapshot of pid, read again (every 200 ms, up to 120 s: software
 * emulation) until ok(s, arg) holds. */
#define snapshot_until(pid, s, ok, arg)                                        \
  fetch_snapshot_until(pid, s, ok, arg, 200, 600, 20000)

/* The stop memtop said ("one thread stopped 1.23 ms ..."), in ms. */
static double stop_ms(const char *out) {
  const char *p = strstr(out, "stopped ");
  return p ? strtod(p + 8, NULL) : -1;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void say_stops(const char *what, double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  print_message("stop ms (%s, %d stops, TCG): p50 %.2f p99 %.2f max %.2f\n",
                what, n, v[n / 2], v[n * 99 / 100], v[n - 1]);
}

/* ---- attach and detach --------------------------------------------------*/

typedef struct near_s {
  uint64_t inuse, paused_ns;
} near_t;

/* HeapInuse (glibc's mallinfo2, read by the agent) within 1% of the
 * program's own, in a sample begun after its workers parked. */
static int inuse_near(const ms_snapshot_t *s, const void *arg) {
  const near_t *n = arg;
  if (s->time_mono_ns < n->paused_ns ||
      s->time_mono_ns - s->heap_sample_age_ns < n->paused_ns)
    return 0;
  return within_1pct(s->heap_inuse, n->inuse);
}

static void where(target_t *t, char *ans, size_t len) {
  target_ask(t, "where\n", ans, len);
  assert_int_equal(strncmp(ans, "malloc ", 7), 0);
}

static void test_attach_cycles(void **state) {
  (void)state;
  static run_result_t res;
  target_t t;
  char ans[256];
  static double stops[CYCLES_MAX];
  const char *env = getenv("VM_CYCLES");
  int cycles = env ? atoi(env) : CYCLES;
  if (cycles < 1 || cycles > CYCLES_MAX)
    cycles = CYCLES;
  assert_int_equal(start_prog(&t, prog, "4"), 0);
  for (int cycle = 0; cycle < cycles; cycle++) {
    if (memtop_cmd(&res, "attach", 0, t.pid) != 0)
      fail_msg("cycle %d: memtop attach exited %d: %s", cycle, res.status,
               res.err);
    stops[cycle] = stop_ms(res.out);
    if (cycle == 0)
      print_message("%s", res.out);
    /* The interrupted read(2) answers (issued again). */
    where(&t, ans, sizeof ans);
    assert_string_equal(ans, "malloc libc.so.6");
    if (cycle % 3 == 0) {
      near_t want;
      target_ask(&t, "pause\n", ans, sizeof ans);
      assert_string_equal(ans, "paused");
      want.paused_ns = mono_ns();
      unsigned long long inuse = 0, sys = 0;
      unsigned long count = 0;
      target_ask(&t, "info\n", ans, sizeof ans);
      assert_int_equal(
          sscanf(ans, "inuse %llu sys %llu count %lu", &inuse, &sys, &count),
          3);
      want.inuse = inuse;
      static ms_snapshot_t s;
      if (!snapshot_until(t.pid, &s, inuse_near, &want))
        fail_msg("cycle %d: HeapInuse %llu, mallinfo2 in-use %llu", cycle,
                 (unsigned long long)s.heap_inuse, inuse);
      target_ask(&t, "resume\n", ans, sizeof ans);
      assert_string_equal(ans, "resumed");
    }
    if (memtop_cmd(&res, "detach", 0, t.pid) != 0)
      fail_msg("cycle %d: memtop detach exited %d: %s", cycle, res.status,
               res.err);
    assert_int_not_equal(access(t.sock, F_OK), 0);
  }
  say_stops("attach, 4 threads allocating", stops, cycles);
  target_ask(&t, "info\n", ans, sizeof ans);
  assert_int_equal(strncmp(ans, "inuse ", 6), 0);
  assert_int_equal(target_wait(&t), 0);
}

/* ---- attach --track ------------------------------------------------------*/

static int mallocs_past(const ms_snapshot_t *s, const void *arg) {
  return s->mallocs >= *(const uint64_t *)arg;
}

static void test_track(void **state) {
  (void)state;
  static run_result_t res;
  target_t t;
  char ans[256], cmd[1400];
  assert_int_equal(start_prog(&t, prog, "2"), 0);
  where(&t, ans, sizeof ans);
  assert_string_equal(ans, "malloc libc.so.6");
  for (int cycle = 0; cycle < 2; cycle++) {
    if (memtop_cmd(&res, "attach", 1, t.pid) != 0)
      fail_msg("cycle %d: memtop attach --track exited %d: %s", cycle,
               res.status, res.err);
    assert_non_null(strstr(res.out, "with --track"));
    where(&t, ans, sizeof ans);
    if (!strstr(ans, "libmemstats"))
      fail_msg("cycle %d: malloc's GOT entry after attach --track: %s", cycle,
               ans);
    static ms_snapshot_t s;
    uint64_t one = 1;
    assert_true(snapshot_until(t.pid, &s, mallocs_past, &one));
    assert_int_equal(s.quality[MS_F_MALLOCS], MS_Q_EXACT);
    /* The workers parked: the module's 100000 pairs are all that can be
     * counted meanwhile, through its own GOT (the dlopen stub's). */
    target_ask(&t, "pause\n", ans, sizeof ans);
    assert_string_equal(ans, "paused");
    assert_int_equal(fetch_snapshot(t.pid, &s, 20000, ans, sizeof ans), 0);
    uint64_t m0 = s.mallocs;
    snprintf(cmd, sizeof cmd, "dlopen %s/progs/libatmod.so\n", build_dir);
    target_ask(&t, cmd, ans, sizeof ans);
    assert_string_equal(ans, "churned 100000");
    uint64_t want = m0 + 100000;
    if (!snapshot_until(t.pid, &s, mallocs_past, &want))
      fail_msg("cycle %d: Mallocs %llu, wanted %llu", cycle,
               (unsigned long long)s.mallocs, (unsigned long long)want);
    print_message("cycle %d: Mallocs %llu -> %llu around the module's "
                  "100000\n",
                  cycle, (unsigned long long)m0, (unsigned long long)s.mallocs);
    target_ask(&t, "resume\n", ans, sizeof ans);
    assert_string_equal(ans, "resumed");
    if (memtop_cmd(&res, "detach", 0, t.pid) != 0)
      fail_msg("cycle %d: memtop detach exited %d: %s", cycle, res.status,
               res.err);
    where(&t, ans, sizeof ans);
    assert_string_equal(ans, "malloc libc.so.6");
  }
  assert_int_equal(target_wait(&t), 0);
}

/* A C++ program (tests/progs/at_cxx.cc: two threads in new and delete,
 * scalar, array, sized and aligned) under attach --track: counted, and
 * working on after the detach (the C++ entries of every module's GOT
 * rewritten and put back). */
static void test_track_cxx(void **state) {
  (void)state;
  static run_result_t res;
  target_t t;
  char path[1300], ans[128];
  snprintf(path, sizeof path, "%s/progs/at_cxx", build_dir);
  if (access(path, X_OK) != 0) {
    print_message("skipped: no %s (the build had no aarch64-linux-gnu-g++; "
                  "Debian: g++-aarch64-linux-gnu)\n",
                  path);
    skip();
  }
  assert_int_equal(start_prog(&t, path, NULL), 0);
  if (memtop_cmd(&res, "attach", 1, t.pid) != 0)
    fail_msg("memtop attach --track exited %d: %s", res.status, res.err);
  static ms_snapshot_t s;
  uint64_t one = 1;
  assert_true(snapshot_until(t.pid, &s, mallocs_past, &one));
  uint64_t m1 = s.mallocs + 1;
  assert_true(snapshot_until(t.pid, &s, mallocs_past, &m1));
  assert_true(s.frees > 0);
  print_message("at_cxx: Mallocs %llu Frees %llu since the attach\n",
                (unsigned long long)s.mallocs, (unsigned long long)s.frees);
  if (memtop_cmd(&res, "detach", 0, t.pid) != 0)
    fail_msg("memtop detach exited %d: %s", res.status, res.err);
  unsigned long c0 = 0, c1 = 0;
  target_ask(&t, "info\n", ans, sizeof ans);
  assert_int_equal(sscanf(ans, "count %lu", &c0), 1);
  for (int k = 0; k < 200 && c1 <= c0; k++) {
    usleep(50 * 1000);
    target_ask(&t, "info\n", ans, sizeof ans);
    assert_int_equal(sscanf(ans, "count %lu", &c1), 1);
  }
  assert_true(c1 > c0);
  assert_int_equal(target_wait(&t), 0);
}

/* at_pac (tests/cross/at_pac.c) MODE started, its "ready" line parsed:
 * returns whether the processor signed the address. */
static int start_pac(target_t *t, const char *mode) {
  char path[1300], line[128];
  snprintf(path, sizeof path, "%s/progs/at_pac", build_dir);
  const char *argv[] = {path, mode, NULL};
  assert_int_equal(target_launch(t, argv, dir, NULL, NULL, NULL, 0), 0);
  assert_int_equal(target_read_line(t->out, line, sizeof line), 0);
  int pid = 0, pac = -1;
  if (sscanf(line, "ready %d pac %d", &pid, &pac) != 2)
    fail_msg("at_pac: %s", line);
  return pac;
}

/* A live frame whose record returns into malloc, signed with PAC: the
 * thread is busy, as with it unsigned; attach refuses after its stops,
 * having called nothing. */
static void test_pac_signed_busy(void **state) {
  (void)state;
  static run_result_t res;
  target_t t;
  if (start_pac(&t, "record") != 1) {
    target_wait(&t);
    print_message("skipped: this processor signs no return address\n");
    skip();
  }
  int st = memtop_cmd(&res, "attach", 0, t.pid);
  print_message("attach: exit %d: %s", st, res.err);
  assert_int_equal(st, 1);
  assert_non_null(
      strstr(res.err, "inside the dynamic loader or the allocator"));
  assert_int_not_equal(access(t.sock, F_OK), 0);
  assert_int_equal(target_wait(&t), 0);
}

/* The same address, plain, in a live frame's locals (where a stale one
 * lies): no record returns there, so the thread is clear and attached. */
static void test_stale_local_clear(void **state) {
  (void)state;
  static run_result_t res;
  target_t t;
  (void)start_pac(&t, "local");
  if (memtop_cmd(&res, "attach", 0, t.pid) != 0)
    fail_msg("memtop attach exited %d: %s", res.status, res.err);
  if (memtop_cmd(&res, "detach", 0, t.pid) != 0)
    fail_msg("memtop detach exited %d: %s", res.status, res.err);
  assert_int_equal(target_wait(&t), 0);
}

/* ---- the registers -------------------------------------------------------*/

static void test_sve_held(void **state) {
  (void)state;
  static run_result_t res;
  target_t t;
  char path[1300], ans[128];
  snprintf(path, sizeof path, "%s/progs/at_sve", build_dir);
  const char *argv[] = {path, NULL};
  assert_int_equal(target_launch(&t, argv, dir, NULL, NULL, NULL, 0), 0);
  assert_int_equal(target_read_line(t.out, ans, sizeof ans), 0);
  if (strcmp(ans, "no sve") == 0) {
    target_wait(&t);
    print_message("skipped: this processor has no SVE\n");
    skip();
  }
  print_message("at_sve: %s\n", ans);
  assert_int_equal(strncmp(ans, "ready ", 6), 0);
  double stops[4];
  for (int i = 0; i < 4; i++) {
    int detach = i % 2;
    if (memtop_cmd(&res, detach ? "detach" : "attach", i == 2, t.pid) != 0)
      fail_msg("%s%s exited %d: %s", detach ? "detach" : "attach",
               i == 2 ? " --track" : "", res.status, res.err);
    stops[i] = stop_ms(res.out);
  }
  say_stops("attach/detach, SVE live", stops, 4);
  kill(t.pid, SIGUSR1);
  assert_int_equal(target_read_line(t.out, ans, sizeof ans), 0);
  print_message("at_sve: %s\n", ans);
  if (strncmp(ans, "held ", 5) != 0)
    fail_msg("at_sve: %s", ans);
  assert_int_equal(target_wait(&t), 0);
}

/* A thread stopped in clock_nanosleep (restarted through the restart
 * block): attach, attach --track and detach while it sleeps 50 ms at a
 * time, and no sleep of it ended early. */
static void test_sleep_restarted(void **state) {
  (void)state;
  static run_result_t res;
  target_t t;
  char path[1300], ans[128];
  snprintf(path, sizeof path, "%s/progs/at_sleep", build_dir);
  assert_int_equal(start_prog(&t, path, NULL), 0);
  for (int i = 0; i < 4; i++) {
    int detach = i % 2;
    if (memtop_cmd(&res, detach ? "detach" : "attach", i == 2, t.pid) != 0)
      fail_msg("%s exited %d: %s", detach ? "detach" : "attach", res.status,
               res.err);
    if (i == 0)
      print_message("%s", res.out);
  }
  kill(t.pid, SIGUSR1);
  assert_int_equal(target_read_line(t.out, ans, sizeof ans), 0);
  print_message("at_sleep: %s\n", ans);
  if (strncmp(ans, "slept ", 6) != 0)
    fail_msg("at_sleep: %s", ans);
  assert_int_equal(target_wait(&t), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_attach_cycles),
      cmocka_unit_test(test_track),
      cmocka_unit_test(test_track_cxx),
      cmocka_unit_test(test_sve_held),
      cmocka_unit_test(test_sleep_restarted),
      cmocka_unit_test(test_pac_signed_busy),
      cmocka_unit_test(test_stale_local_clear),
  };
  /* VM_TESTS=GLOB on the kernel's command line: those tests only. */
  const char *only = getenv("VM_TESTS");
  if (only && *only)
    cmocka_set_test_filter(only);
  return cmocka_run_group_tests(tests, setup, teardown);
}
