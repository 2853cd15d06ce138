/*
 * bench_attach.c - how long memtop attach and memtop detach hold the
 * program (issue 22 item 5: at most 50 ms at attach), p50/p99/max over
 * BENCH_ATTACH_N cycles (default 100), on tests/progs/at_alloc started
 * bare: idle (its main thread waiting in read, no other thread), and with
 * 8 threads allocating all the time. The figure is memtop's own measure,
 * as it prints it: from the first thread interrupted (in the stop that
 * kept one: each thread found busy before was let go before the next) to
 * the last let go, the calling thread's registers put back; any thread of
 * the program is held only within it (the others are never stopped
 * together, src/attach/inject.h). Unraised (not root, or
 * MEMTOP_ATTACH_NOBOOST=1) the calling thread waits for a CPU at each
 * step on a loaded machine, so the load is printed too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
  printf("  %-28s p50 %7.2f ms  p99 %7.2f ms  max %7.2f ms  (n=%d)\n", what,
         v[n / 2], v[(n * 99 + 99) / 100 - 1], v[n - 1], n);
}

static int run(const char *build, const char *dir, const char *threads,
               const char *label, int n) {
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
    a[i] = one(memtop, "attach", t.pid);
    d[i] = one(memtop, "detach", t.pid);
    ok = a[i] >= 0 && d[i] >= 0;
  }
  if (ok) {
    char what[96];
    snprintf(what, sizeof what, "%s attach", label);
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

int main(void) {
  char build[1024], dir[64] = "/tmp/bench_attach.XXXXXX";
  if (host_build_dir(build, sizeof build) != 0 || mkdtemp(dir) == NULL)
    return 1;
  char preload[1200];
  if (host_preload_path(build, preload, sizeof preload) == 0)
    setenv("MEMTOP_PRELOAD", preload, 1);
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
  int r = run(build, dir, "0", "idle program,", n);
  if (r == 0)
    r = run(build, dir, "8", "8 threads allocating,", n);
  rmdir(dir);
  return r;
}
