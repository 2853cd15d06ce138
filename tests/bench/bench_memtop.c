/*
 * bench_memtop.c - memtop's own cost, as a user would see it:
 *
 *   1. CPU (% of one core) and memory of the live view at 1 Hz watching
 *      one target, and watching 200 targets in the list view (memtop runs
 *      on a pseudo-terminal, drawing for real);
 *   2. the wall time of `memtop --once PID`.
 *
 * Each figure is printed with a baseline measured in the same run: for
 * CPU, this process fetching the same snapshots at the same rate with the
 * blocking client (fetch_snapshot: connect, handshake, read, close); for wall
 * time, exec'ing /bin/true and one in-process fetch_snapshot. Goals (issue 5):
 * under 0.5% of a core for 1 target, under 5% for 200, under 20 ms for
 * --once. Figures are printed, not asserted.
 *
 * BENCH_WINDOW_S sets the measuring window (default 10 s);
 * BENCH_TARGETS the number of targets of the second case (default 200).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client/client.h"
#include "memstats.h"
#include "support/fetch.h"
#include "support/target_proc.h"

static char memtop[1200], target[1200];

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU time of a process, in seconds: from /proc/PID/schedstat (ns)
 * where the kernel has it, else utime+stime (clock ticks, 10 ms: too
 * coarse for a process that wakes once a second). */
static double proc_cpu_s(pid_t pid) {
  char path[64], buf[2048], *p;
  unsigned long long ut = 0, st = 0, ns;
  FILE *f;
  int field;

  snprintf(path, sizeof path, "/proc/%d/schedstat", (int)pid);
  f = fopen(path, "r");
  if (f != NULL) {
    int ok = fscanf(f, "%llu", &ns) == 1;
    fclose(f);
    if (ok)
      return (double)ns / 1e9;
  }
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  f = fopen(path, "r");
  if (f == NULL)
    return -1;
  if (fgets(buf, sizeof buf, f) == NULL) {
    fclose(f);
    return -1;
  }
  fclose(f);
  p = strrchr(buf, ')');
  if (p == NULL)
    return -1;
  p += 2;
  /* p is at field 3; utime and stime are fields 14 and 15. */
  for (field = 3; field < 14 && p != NULL; field++) {
    p = strchr(p, ' ');
    if (p != NULL)
      p++;
  }
  if (p == NULL || sscanf(p, "%llu %llu", &ut, &st) != 2)
    return -1;
  return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* A process's VmRSS and VmHWM, in KiB. */
static void proc_mem_kib(pid_t pid, long *rss, long *hwm) {
  char path[64], line[256];
  FILE *f;

  *rss = *hwm = -1;
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  f = fopen(path, "r");
  if (f == NULL)
    return;
  while (fgets(line, sizeof line, f) != NULL) {
    sscanf(line, "VmRSS: %ld", rss);
    sscanf(line, "VmHWM: %ld", hwm);
  }
  fclose(f);
}

static double self_cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
         (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* Starts memtop on a pseudo-terminal of 120x40 with `args`. */
static pid_t start_live(char *const args[], int *master) {
  struct winsize ws = {.ws_row = 40, .ws_col = 120};
  pid_t pid = forkpty(master, NULL, NULL, &ws);

  if (pid == 0) {
    setenv("TERM", "xterm-256color", 1);
    execv(memtop, args);
    _exit(126);
  }
  return pid;
}

/* Reads and discards the terminal's output for `secs` seconds. */
static void drain(int fd, double secs) {
  char buf[65536];
  double end = now_s() + secs;
  struct pollfd p = {.fd = fd, .events = POLLIN};

  while (now_s() < end) {
    if (poll(&p, 1, 100) > 0 && read(fd, buf, sizeof buf) <= 0)
      return;
  }
}

/* memtop's CPU over the window, as % of a core, and its memory. */
static void measure_live(const char *what, char *const args[], double window,
                         double *pct) {
  int master, st;
  pid_t pid = start_live(args, &master);
  double c0, c1, t0, t1;
  long rss, hwm;

  drain(master, 3.0); /* start-up: first connects, first frame */
  c0 = proc_cpu_s(pid);
  t0 = now_s();
  drain(master, window);
  c1 = proc_cpu_s(pid);
  t1 = now_s();
  proc_mem_kib(pid, &rss, &hwm);
  if (waitpid(pid, &st, WNOHANG) == pid) {
    printf("  %-34s memtop exited early (status %d): no figure\n", what,
           WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    close(master);
    *pct = -1;
    return;
  }
  kill(pid, SIGTERM);
  drain(master, 0.3);
  waitpid(pid, &st, 0);
  close(master);
  *pct = (c1 - c0) / (t1 - t0) * 100.0;
  printf("  %-34s %7.3f%% of a core   RSS %6.1f MiB (peak %.1f MiB)\n", what,
         *pct, (double)rss / 1024, (double)hwm / 1024);
}

/* This process fetching each target once a second with the blocking
 * client, for the window: the least any poller could spend. */
static double measure_bare(const target_t *t, size_t n, double window) {
  static ms_snapshot_t snap;
  double c0 = self_cpu_s(), t0 = now_s(), next = t0;
  char err[512];
  size_t i;

  while (now_s() - t0 < window) {
    for (i = 0; i < n; i++)
      fetch_snapshot(t[i].pid, &snap, 2000, err, sizeof err);
    next += 1.0;
    while (now_s() < next && now_s() - t0 < window)
      usleep(10000);
  }
  return (self_cpu_s() - c0) / (now_s() - t0) * 100.0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The median wall time (ms) of running argv, output to /dev/null. */
static double median_exec_ms(char *const argv[], int runs) {
  double t[64], t0;
  int i, st;
  pid_t pid;

  for (i = 0; i < runs && i < 64; i++) {
    t0 = now_s();
    pid = fork();
    if (pid == 0) {
      int null = open("/dev/null", O_WRONLY);
      dup2(null, 1);
      dup2(null, 2);
      execv(argv[0], argv);
      _exit(126);
    }
    waitpid(pid, &st, 0);
    t[i] = (now_s() - t0) * 1000;
  }
  qsort(t, (size_t)i, sizeof t[0], cmp_double);
  return t[i / 2];
}

int main(void) {
  const char *b = getenv("BUILD"), *w = getenv("BENCH_WINDOW_S"),
             *nt = getenv("BENCH_TARGETS");
  char dir[] = "/tmp/bench_memtop.XXXXXX", pidbuf[16], cmd[128];
  double window = w != NULL ? atof(w) : 10.0, pct1, pctn, bare1, baren;
  size_t n = nt != NULL ? (size_t)atol(nt) : 200, i, started = 0;
  target_t *t;
  static ms_snapshot_t snap;
  char err[512];
  double t0, fetch[31], once_ms, true_ms;

  if (window <= 0)
    window = 10.0;
  if (n < 1)
    n = 1;
  snprintf(memtop, sizeof memtop, "%s/memtop", b != NULL ? b : "build");
  snprintf(target, sizeof target, "%s/progs/mt_target",
           b != NULL ? b : "build");
  if (access(memtop, X_OK) != 0 || access(target, X_OK) != 0) {
    fprintf(stderr, "bench_memtop: %s or %s is missing\n", memtop, target);
    return 1;
  }
  if (mkdtemp(dir) == NULL)
    return 1;
  setenv("MEMSTATS_DIR", dir, 1);
  signal(SIGPIPE, SIG_IGN);
  t = calloc(n, sizeof *t);
  if (t == NULL)
    return 1;

  printf("memtop's own cost (window %.0f s, 1 Hz, live view on a 120x40 "
         "pty)\n",
         window);
  if (target_launch_ready(&t[0], target, dir) != 0) {
    fprintf(stderr, "bench_memtop: cannot start %s\n", target);
    return 1;
  }
  started = 1;
  snprintf(pidbuf, sizeof pidbuf, "%d", (int)t[0].pid);

  /* ---- 1 target ---- */
  {
    char *args[] = {memtop, (char *)"-d", (char *)"1", pidbuf, NULL};
    measure_live("memtop PID, 1 target", args, window, &pct1);
  }
  bare1 = measure_bare(t, 1, window);
  printf("  %-34s %7.3f%% of a core\n", "baseline: fetch 1/s, 1 target", bare1);
  printf("  ratio %.2fx the baseline; goal under 0.5%% of a core: %s\n",
         bare1 > 0 ? pct1 / bare1 : 0.0, pct1 < 0.5 ? "met" : "NOT met");

  /* ---- n targets ---- */
  for (i = 1; i < n; i++, started++)
    if (target_launch_ready(&t[i], target, dir) != 0)
      break;
  {
    char *args[] = {memtop, (char *)"-d", (char *)"1", NULL};
    char what[64];
    snprintf(what, sizeof what, "memtop (list), %zu targets", started);
    measure_live(what, args, window, &pctn);
  }
  baren = measure_bare(t, started, window);
  printf("  %-34s %7.3f%% of a core\n", "baseline: fetch 1/s each", baren);
  printf("  ratio %.2fx the baseline; goal under 5%% of a core: %s\n",
         baren > 0 ? pctn / baren : 0.0, pctn < 5.0 ? "met" : "NOT met");

  /* ---- --once wall time ---- */
  {
    char *once[] = {memtop, (char *)"--once", pidbuf, NULL};
    char *tru[] = {(char *)"/bin/true", NULL};
    once_ms = median_exec_ms(once, 31);
    true_ms = median_exec_ms(tru, 31);
    for (i = 0; i < 31; i++) {
      t0 = now_s();
      fetch_snapshot(t[0].pid, &snap, 2000, err, sizeof err);
      fetch[i] = (now_s() - t0) * 1000;
    }
    qsort(fetch, 31, sizeof fetch[0], cmp_double);
    printf("memtop --once PID wall time (median of 31)\n");
    printf("  %-34s %7.2f ms\n", "memtop --once PID", once_ms);
    printf("  %-34s %7.2f ms\n", "baseline: exec /bin/true", true_ms);
    printf("  %-34s %7.2f ms\n", "baseline: one blocking fetch", fetch[15]);
    printf("  memtop --once costs %.2f ms over exec+fetch; goal under 20 "
           "ms: %s\n",
           once_ms - true_ms - fetch[15], once_ms < 20 ? "met" : "NOT met");
  }

  for (i = 0; i < started; i++)
    target_stop(&t[i], SIGTERM);
  free(t);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system(cmd) == 0 ? 0 : 1;
}
