/*
 * bench_attach.c - how long memtop attach and memtop detach hold the
 * program (issue 22 item 5: at most 50 ms at attach), p50/p99/max over
 * BENCH_ATTACH_N cycles (default 100), on tests/progs/at_alloc started
 * bare: idle (its main thread waiting in read, no other thread), and with
 * 8 threads allocating all the time (attach, and attach --track, each
 * followed by a detach). The figure is memtop's own measure,
 * as it prints it: from the first thread interrupted (in the stop that
 * kept one: each thread found busy before was let go before the next) to
 * the last let go, the calling thread's registers put back; any thread of
 * the program is held only within it (the others are never stopped
 * together, src/attach/inject.h). Unraised (not root, or
 * MEMTOP_ATTACH_NOBOOST=1) the calling thread waits for a CPU at each
 * step on a loaded machine, so the load is printed too; run as root, the
 * rows come twice, raised and then unraised.
 *
 * And what a program attached with --track pays afterwards (issue 22 item
 * 5: the same overhead as the preload), in instructions per malloc/free
 * pair under valgrind's callgrind, as bench_preload counts the preload's:
 * (I(300,000 pairs) - I(100,000)) / 200,000 of bench_preload's loop
 * (tests/progs/pl_loop 1, glibc), bare, under the preload, and attached
 * with --track, each at the heap profiler's default rate and each as a
 * ratio to this run's bare figure. ptrace cannot reach a program under
 * valgrind, so the attached program makes memtop's calls itself
 * (pl_loop's PL_LOOP_ATTACH: the same dlopen and ms__attach_start(TRACK)),
 * before its loop. Beside it, timed (for information: a shared machine's
 * timings move by more than the difference), the same loop attached by
 * the real memtop attach --track before it starts, bare and under the
 * preload, interleaved, the median of BENCH_RUNS (default 5) of 10M pairs
 * each. `bench_attach stops` or `bench_attach overhead` runs one half.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support/callgrind.h"
#include "support/host.h"
#include "support/target_proc.h"

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Runs memtop CMD PID; returns the stop it printed in ms, or -1. */
static double one(const char *memtop, const char *cmd, pid_t pid) {
  char line[1024];
  snprintf(line, sizeof line, "%s %s %d 2>&1", memtop, cmd, (int)pid);
  FILE *p = popen(line, "r");
  if (!p)
    return -1;
  double ms = -1;
  while (fgets(line, sizeof line, p)) {
    const char *s = strstr(line, "one thread stopped ");
    if (s)
      ms = atof(s + strlen("one thread stopped "));
    else
      fputs(line, stderr);
  }
  return pclose(p) == 0 ? ms : -1;
}

static void row(const char *what, double *v, int n) {
  qsort(v, (size_t)n, sizeof v[0], cmp_d);
  printf("  %-30s p50 %7.2f ms  p99 %7.2f ms  max %7.2f ms  (n=%d)\n", what,
         v[n / 2], v[(n * 99 + 99) / 100 - 1], v[n - 1], n);
}

static int run(const char *build, const char *dir, const char *threads,
               const char *attach, const char *label, int n) {
  char prog[1200], memtop[1200];
  snprintf(prog, sizeof prog, "%s/progs/at_alloc", build);
  snprintf(memtop, sizeof memtop, "%s/memtop", build);
  const char *argv[] = {prog, threads, NULL};
  static const char *const env[] = {"LD_PRELOAD", NULL};
  target_t t;
  char line[64];
  if (target_launch(&t, argv, dir, env, NULL, NULL, 0) != 0 ||
      target_read_line(t.out, line, sizeof line) != 0) {
    fprintf(stderr, "bench_attach: cannot start %s\n", prog);
    return 1;
  }
  double *a = calloc((size_t)n, sizeof *a), *d = calloc((size_t)n, sizeof *d);
  int ok = a && d;
  for (int i = 0; ok && i < n; i++) {
    a[i] = one(memtop, attach, t.pid);
    d[i] = one(memtop, "detach", t.pid);
    ok = a[i] >= 0 && d[i] >= 0;
  }
  if (ok) {
    char what[96];
    snprintf(what, sizeof what, "%s %s", label, attach);
    row(what, a, n);
    snprintf(what, sizeof what, "%s detach", label);
    row(what, d, n);
  } else
    fprintf(stderr, "bench_attach: an attach or detach failed\n");
  free(a);
  free(d);
  target_kill(&t);
  return ok ? 0 : 1;
}

/* ---- the overhead of --track, in instructions ---------------------------*/

/* One timed run of pl_loop 1 10000000: how 0 bare, 1 under the preload,
 * 2 attached by memtop attach --track once it waits. Its ns per pair, or
 * -1. */
static double timed(const char *build, const char *dir, const char *preload,
                    int how) {
  char loop[1200], memtop[1200], ld[1300], line[128];
  snprintf(loop, sizeof loop, "%s/progs/pl_loop", build);
  snprintf(memtop, sizeof memtop, "%s/memtop", build);
  snprintf(ld, sizeof ld, "LD_PRELOAD=%s", preload);
  const char *argv[] = {loop, "1", "10000000", NULL};
  const char *env[] = {how == 1 ? ld : "LD_PRELOAD", "PL_LOOP_WAIT=1",
                       "PL_LOOP_ATTACH", "MEMSTATS_PROFILE_RATE", NULL};
  target_t t;
  if (target_launch(&t, argv, dir, env, NULL, NULL, 0) != 0)
    return -1;
  double ns = -1;
  int ok = target_read_line(t.out, line, sizeof line) == 0 &&
           strncmp(line, "ready ", 6) == 0;
  if (ok && how == 2) {
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "%s attach --track %d >/dev/null", memtop,
             (int)t.pid);
    ok = system(cmd) == 0;
  }
  if (ok && write(t.in, "go\n", 3) == 3 &&
      target_read_line(t.out, line, sizeof line) == 0 &&
      strncmp(line, "ns_per_pair=", 12) == 0)
    ns = atof(line + 12);
  target_wait(&t);
  return ns;
}

static void timed_rows(const char *build, const char *dir,
                       const char *preload) {
  int runs = getenv("BENCH_RUNS") ? atoi(getenv("BENCH_RUNS")) : 5;
  if (runs < 1 || runs > 101)
    runs = 5;
  double v[3][101];
  for (int r = 0; r < runs; r++)
    for (int how = 0; how < 3; how++)
      v[how][r] = timed(build, dir, preload, how);
  double med[3];
  for (int how = 0; how < 3; how++) {
    qsort(v[how], (size_t)runs, sizeof v[how][0], cmp_d);
    med[how] = v[how][0] < 0 ? -1 : v[how][runs / 2];
  }
  printf("  timed, the real memtop attach --track (pl_loop 1, 10M pairs, "
         "median of %d, for information):\n",
         runs);
  if (med[0] <= 0 || med[1] <= 0 || med[2] <= 0) {
    printf("    failed\n");
    return;
  }
  printf("    bare %.2f ns, preload %.2f ns (%.3fx), attached %.2f ns "
         "(%.3fx bare, %.3fx the preload)\n",
         med[0], med[1], med[1] / med[0], med[2], med[2] / med[0],
         med[2] / med[1]);
}

/* Instructions per pair of pl_loop 1 run with env (cg_count's form), by
 * the difference of two lengths; -1 if a run failed (said on stderr). */
static double per_pair(const char *loop, const char *const env[]) {
  const long lo = 100000, hi = 300000;
  unsigned long long ir[2];
  for (int i = 0; i < 2; i++) {
    char pairs[32], why[512];
    snprintf(pairs, sizeof pairs, "%ld", i ? hi : lo);
    const char *argv[] = {loop, "1", pairs, NULL};
    if (cg_count(argv, env, &ir[i], why, sizeof why) != 0) {
      fprintf(stderr, "bench_attach: %s\n", why);
      return -1;
    }
  }
  return ((double)ir[1] - (double)ir[0]) / (double)(hi - lo);
}

static int overhead(const char *build, const char *dir, const char *preload) {
  if (!host_have_program("valgrind")) {
    printf("memtop attach --track's overhead: valgrind not installed, "
           "skipped\n");
    return 0;
  }
  char loop[1200], ld[1300], self[1300], sockdir[128];
  snprintf(loop, sizeof loop, "%s/progs/pl_loop", build);
  snprintf(ld, sizeof ld, "LD_PRELOAD=%s", preload);
  snprintf(self, sizeof self, "PL_LOOP_ATTACH=%s", preload);
  snprintf(sockdir, sizeof sockdir, "MEMSTATS_DIR=%s", dir);
  /* The heap profiler at its default rate in both, the agent on in both
   * (in its own socket directory). */
  const char *bare[] = {"LD_PRELOAD", "PL_LOOP_ATTACH", NULL};
  const char *pre[] = {ld, "PL_LOOP_ATTACH", sockdir, "MEMSTATS_PROFILE_RATE",
                       NULL};
  const char *att[] = {"LD_PRELOAD", self, sockdir, "MEMSTATS_PROFILE_RATE",
                       NULL};
  double b = per_pair(loop, bare), p = per_pair(loop, pre),
         a = per_pair(loop, att);
  printf("memtop attach --track's overhead: instructions per malloc/free "
         "pair (callgrind, pl_loop 1, glibc, (I(300,000 pairs) - "
         "I(100,000)) / 200,000; default profile rate):\n");
  if (b <= 0 || p <= 0 || a <= 0) {
    printf("  failed (bare %.2f, preload %.2f, attached %.2f)\n", b, p, a);
    return 1;
  }
  printf("  %-34s %8.2f\n", "bare", b);
  printf("  %-34s %8.2f   %.3fx bare, %+.2f\n", "preload (LD_PRELOAD)", p,
         p / b, p - b);
  printf("  %-34s %8.2f   %.3fx bare, %+.2f\n",
         "attached (memtop attach --track)", a, a / b, a - b);
  /* The same overhead: what it adds to the bare pair, within 5%. */
  double ratio = (a - b) / (p - b);
  printf("  attached vs preload: %.3fx the pair, %.3fx the overhead (goal: "
         "the same overhead as the preload, <= 1.05x: %s)\n",
         a / p, ratio, ratio <= 1.05 ? "met" : "MISSED");
  timed_rows(build, dir, preload);
  return 0;
}

int main(int argc, char **argv) {
  char build[1024], dir[64] = "/tmp/bench_attach.XXXXXX";
  if (host_build_dir(build, sizeof build) != 0 || mkdtemp(dir) == NULL)
    return 1;
  const char *only = argc > 1 ? argv[1] : "";
  char preload[1200];
  if (host_preload_path(build, preload, sizeof preload) == 0)
    setenv("MEMTOP_PRELOAD", preload, 1);
  if (strcmp(only, "overhead") == 0) {
    int r = overhead(build, dir, preload);
    rmdir(dir);
    return r;
  }
  int n = getenv("BENCH_ATTACH_N") ? atoi(getenv("BENCH_ATTACH_N")) : 100;
  if (n < 1)
    n = 100;
  char load[64] = "?";
  FILE *f = fopen("/proc/loadavg", "r");
  if (f) {
    if (fscanf(f, "%63s", load) != 1)
      strcpy(load, "?");
    fclose(f);
  }
  printf("memtop attach: the calling thread's stop (goal: at most 50 ms; "
         "load %s on %ld CPUs)\n",
         load, sysconf(_SC_NPROCESSORS_ONLN));
  int r = run(build, dir, "0", "attach", "idle,", n);
  if (r == 0)
    r = run(build, dir, "8", "attach", "8 threads,", n);
  if (r == 0)
    r = run(build, dir, "8", "attach --track", "8 threads,", n);
  /* As root memtop raises the threads it waits on for the calls
   * (src/attach): the same rows without that, as any other user gets. */
  const char *nb = getenv("MEMTOP_ATTACH_NOBOOST");
  if (r == 0 && geteuid() == 0 && !(nb && nb[0] && strcmp(nb, "0") != 0)) {
    printf(" unraised (MEMTOP_ATTACH_NOBOOST=1, as a user other than root "
           "gets it):\n");
    setenv("MEMTOP_ATTACH_NOBOOST", "1", 1);
    r = run(build, dir, "0", "attach", "idle,", n);
    if (r == 0)
      r = run(build, dir, "8", "attach", "8 threads,", n);
    if (r == 0)
      r = run(build, dir, "8", "attach --track", "8 threads,", n);
    unsetenv("MEMTOP_ATTACH_NOBOOST");
  }
  if (r == 0 && strcmp(only, "stops") != 0)
    r = overhead(build, dir, preload);
  rmdir(dir);
  return r;
}
