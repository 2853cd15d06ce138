/*
 * bench_serve.c - `memtop serve`'s cost, as Prometheus sees it:
 *
 *   1. scrape latency (p50, p99 of BENCH_SCRAPES scrapes, memtop serve
 *      -d 0.1 and scrapes 0.15 s apart, so that rounds of reads go on all
 *      the time: a scrape is answered with the last round's figures and
 *      asks for the next when they are older than -d) with 1, 50 and
 *      200 targets, against a baseline measured in the same run: this
 *      process reading the same targets one after the other with the
 *      blocking client (fetch_snapshot), the floor a serial exporter
 *      would have; and node_exporter's own scrape of this machine when it
 *      is installed
 *      (Debian's prometheus-node-exporter, started here on a free port);
 *   2. memtop serve's CPU (% of one core) and RSS while scraped every 15 s
 *      with 200 targets, over BENCH_WINDOW_S (default 30 s).
 *
 * Goals (issue 13): 200 targets in under 50 ms p99, under 1% of a core.
 * Figures are printed, not asserted, each with the load average then.
 *
 * BENCH_TRACE=1 runs memtop serve with MEMTOP_SERVE_TRACE=1 and says
 * where the slowest scrapes' time went (serve.c's trace: the wait for the
 * targets, rendering, gzip, listings, the loop's other work, the loop
 * thread's wait for a CPU, and what the client saw beyond serve's own
 * span: accepting, the request, the send).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "memstats.h"
#include "support/fetch.h"
#include "support/target_proc.h"

static char memtop[1200], target[1200];
static int trace; /* BENCH_TRACE */

static double load1(void) {
  double l[1] = {-1};
  return getloadavg(l, 1) == 1 ? l[0] : -1;
}

/* One scrape as serve's trace saw it (ms), and as the client did. */
typedef struct trace_s {
  double client, total, wait, render, gzip, listing, other, sched, late, age;
  /* CLOCK_MONOTONIC ns: the client's connect and end, serve's arrival,
   * the last round's and prepare's spans (round_to 0: running). */
  unsigned long long t0, t1, arrive, round_from, round_to, prep_from, prep_to;
} trace_t;

static unsigned long long last_t0, last_t1; /* the last scrape's */

static unsigned long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (unsigned long long)ts.tv_sec * 1000000000ull +
         (unsigned long long)ts.tv_nsec;
}
enum { TR_FIELDS = 9 };
static const char *const tr_names[TR_FIELDS] = {
    "total",      "wait",  "render", "gzip",       "listing",
    "loop_other", "sched", "late",   "figures_age"};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_s(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  nanosleep(&ts, NULL);
}

/* CPU time of a process, from /proc/PID/schedstat (ns). */
static double proc_cpu_s(pid_t pid) {
  char path[64];
  unsigned long long ns = 0;
  snprintf(path, sizeof path, "/proc/%d/schedstat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f)
    return -1;
  int ok = fscanf(f, "%llu", &ns) == 1;
  fclose(f);
  return ok ? (double)ns / 1e9 : -1;
}

static long proc_rss_kib(pid_t pid) {
  char path[64], line[256];
  long rss = -1;
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f)
    return -1;
  while (fgets(line, sizeof line, f))
    sscanf(line, "VmRSS: %ld", &rss);
  fclose(f);
  return rss;
}

/* memtop serve on a free port, -d 0.1; its PID and port; with trace on,
 * its stderr in *err_fd (non-blocking), else closed. */
static pid_t start_serve(int *port, int *err_fd) {
  int pe[2];
  if (pipe2(pe, O_CLOEXEC) != 0)
    return -1;
  pid_t pid = fork();
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(pe[1], 2);
    if (trace)
      setenv("MEMTOP_SERVE_TRACE", "1", 1);
    execl(memtop, memtop, "serve", "--listen", "127.0.0.1:0", "-d", "0.1",
          "--unsafe-no-auth", (char *)NULL);
    _exit(126);
  }
  close(pe[1]);
  char line[256] = {0};
  ssize_t n = read(pe[0], line, sizeof line - 1);
  *err_fd = -1;
  if (trace) {
    fcntl(pe[0], F_SETFL, O_NONBLOCK);
    *err_fd = pe[0];
  } else {
    close(pe[0]);
  }
  const char *at = n > 0 ? strstr(line, "127.0.0.1:") : NULL;
  *port = at ? atoi(at + 10) : 0;
  return *port > 0 ? pid : -1;
}

/* One GET /metrics; its wall time in seconds, -1 on failure. */
static double scrape(int port) {
  static const char req[] =
      "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: "
      "application/openmetrics-text;version=1.0.0\r\n"
      "Accept-Encoding: gzip\r\nConnection: close\r\n\r\n";
  double t0 = now_s();
  last_t0 = now_ns();
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in sa = {0};
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
      write(fd, req, sizeof req - 1) != (ssize_t)(sizeof req - 1)) {
    close(fd);
    return -1;
  }
  char buf[65536], first[16] = {0};
  size_t total = 0;
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) {
    if (total == 0)
      memcpy(first, buf, n < 15 ? (size_t)n : 15);
    total += (size_t)n;
  }
  close(fd);
  last_t1 = now_ns();
  if (strncmp(first, "HTTP/1.1 200", 12) != 0)
    return -1;
  return now_s() - t0;
}

/* The trace line of the scrape just answered (serve writes it before
 * the answer goes): 0 and *t filled, or -1. */
static int read_trace(int fd, trace_t *t) {
  static char buf[1 << 16];
  static size_t len;
  for (int tries = 0; tries < 50; tries++) {
    ssize_t n = read(fd, buf + len, sizeof buf - 1 - len);
    if (n > 0)
      len += (size_t)n;
    buf[len] = '\0';
    char *nl = strchr(buf, '\n');
    if (nl) {
      *nl = '\0';
      const char *m = strstr(buf, "memtop-trace: ");
      int ok = m && sscanf(m,
                           "memtop-trace: scrapes=%*u targets=%*u total=%lf "
                           "wait=%lf render=%lf gzip=%lf listing=%lf "
                           "loop_other=%lf sched=%lf late=%lf age=%lf "
                           "arrive=%llu round=%llu-%llu prep=%llu-%llu",
                           &t->total, &t->wait, &t->render, &t->gzip,
                           &t->listing, &t->other, &t->sched, &t->late, &t->age,
                           &t->arrive, &t->round_from, &t->round_to,
                           &t->prep_from, &t->prep_to) == 14;
      size_t used = (size_t)(nl + 1 - buf);
      memmove(buf, nl + 1, len - used);
      len -= used;
      if (ok)
        return 0;
      tries--; /* another line: read on */
      continue;
    }
    sleep_s(0.001);
  }
  return -1;
}

/* How much of [a, b) falls in [from, to), in ms. */
static double overlap_ms(unsigned long long a, unsigned long long b,
                         unsigned long long from, unsigned long long to) {
  unsigned long long lo = a > from ? a : from, hi = b < to ? b : to;
  return hi > lo ? (double)(hi - lo) / 1e6 : 0;
}

static int cmp_client(const void *a, const void *b) {
  double x = ((const trace_t *)a)->client, y = ((const trace_t *)b)->client;
  return x < y ? -1 : x > y;
}

/* Where the slowest 2% of the scrapes (at least 2) spent their time,
 * beside the median scrape's. */
static void attribute(trace_t *tr, int n) {
  if (n < 4)
    return;
  qsort(tr, (size_t)n, sizeof *tr, cmp_client);
  int slow = n / 50 > 2 ? n / 50 : 2;
  for (int part = 0; part < 2; part++) {
    const trace_t *from = part ? tr + n - slow : tr + n / 2;
    int k = part ? slow : 1;
    double sum[TR_FIELDS + 1] = {0};
    for (int i = 0; i < k; i++) {
      const double *f = &from[i].total;
      for (int j = 0; j < TR_FIELDS; j++)
        sum[j] += f[j];
      sum[TR_FIELDS] += from[i].client - from[i].total;
    }
    double c = 0, before = 0, in_prep = 0, in_round = 0;
    for (int i = 0; i < k; i++) {
      const trace_t *x = &from[i];
      c += x->client;
      if (x->arrive <= x->t0)
        continue;
      before += (double)(x->arrive - x->t0) / 1e6;
      double p = overlap_ms(x->t0, x->arrive, x->prep_from, x->prep_to);
      double r = x->round_from
                     ? overlap_ms(x->t0, x->arrive, x->round_from,
                                  x->round_to ? x->round_to : x->arrive)
                     : 0;
      in_prep += p;
      /* A round ends with its prepare: counted once, as the prepare. */
      in_round += r > p ? r - p : 0;
    }
    printf("    %s: client %.1f ms = outside serve %.1f (before it reached "
           "serve %.1f: the loop in a prepare %.1f, in a round %.1f) + serve",
           part ? "slowest 2% (mean)" : "median", c / k, sum[TR_FIELDS] / k,
           before / k, in_prep / k, in_round / k);
    for (int j = 0; j < TR_FIELDS; j++)
      printf(" %s %.1f", tr_names[j], sum[j] / k);
    printf("\n");
  }
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* How old the figures served were (serve's trace), p50 and p99. */
static void figures_age(const trace_t *tr, int n) {
  if (n < 2)
    return;
  double *v = calloc((size_t)n, sizeof *v);
  if (!v)
    return;
  for (int i = 0; i < n; i++)
    v[i] = tr[i].age;
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  printf("    figures served: age p50 %.1f ms, p99 %.1f ms (since their "
         "round ended)\n",
         v[n / 2], v[(int)(0.99 * (n - 1) + 0.5)]);
  free(v);
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double pct(double *v, int n, double p) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  int i = (int)(p * (n - 1) + 0.5);
  return v[i];
}

/* The serial floor: every target read once, one after the other, by the
 * blocking client. */
static double serial_fetch_s(target_t *t, int n) {
  static ms_snapshot_t s;
  char err[256];
  double t0 = now_s();
  for (int i = 0; i < n; i++)
    fetch_snapshot(t[i].pid, &s, 2000, err, sizeof err);
  return now_s() - t0;
}

static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in sa = {0};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof sa;
  int port = -1;
  if (bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
      getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
    port = ntohs(sa.sin_port);
  close(fd);
  return port;
}

/* Starts Debian's prometheus-node-exporter on a free loopback port and
 * scrapes it as memtop serve was scraped. */
static void node_exporter(double *lat, int scrapes) {
  const char *exe = "/usr/bin/prometheus-node-exporter";
  if (access(exe, X_OK) != 0) {
    printf("  node_exporter: not installed (prometheus-node-exporter), no "
           "comparison\n");
    return;
  }
  int port = free_port();
  char flag[64];
  snprintf(flag, sizeof flag, "--web.listen-address=127.0.0.1:%d", port);
  pid_t pid = fork();
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    execl(exe, exe, flag, (char *)NULL);
    _exit(126);
  }
  int ok = 0;
  for (int i = 0; i < 100 && scrape(port) < 0; i++)
    sleep_s(0.1);
  for (int i = 0; i < scrapes; i++) {
    sleep_s(0.15);
    double l = scrape(port);
    if (l >= 0)
      lat[ok++] = l;
  }
  if (ok > 1)
    printf("  node_exporter (this machine, same run): p50 %6.1f ms  p99 "
           "%6.1f ms\n",
           pct(lat, ok, 0.5) * 1e3, pct(lat, ok, 0.99) * 1e3);
  else
    printf("  node_exporter: did not answer on 127.0.0.1:%d\n", port);
  int st;
  kill(pid, SIGTERM);
  waitpid(pid, &st, 0);
}

int main(void) {
  char build[1024];
  const char *b = getenv("BUILD");
  snprintf(build, sizeof build, "%s", b && *b ? b : "build");
  snprintf(memtop, sizeof memtop, "%s/memtop", build);
  snprintf(target, sizeof target, "%s/progs/mt_target", build);
  int scrapes = getenv("BENCH_SCRAPES") ? atoi(getenv("BENCH_SCRAPES")) : 40;
  double window =
      getenv("BENCH_WINDOW_S") ? atof(getenv("BENCH_WINDOW_S")) : 30.0;
  if (scrapes < 2)
    scrapes = 2;
  char dir[] = "/tmp/bench_serve.XXXXXX";
  if (!mkdtemp(dir))
    return 1;
  setenv("MEMSTATS_DIR", dir, 1);
  signal(SIGPIPE, SIG_IGN);

  static target_t t[200];
  int have = 0;
  static const int counts[] = {1, 50, 200};
  double *lat = calloc((size_t)scrapes, sizeof *lat);
  trace_t *tr = calloc((size_t)scrapes, sizeof *tr);
  trace = getenv("BENCH_TRACE") && atoi(getenv("BENCH_TRACE")) == 1;
  printf("scrape latency, scrapes 0.15 s apart, -d 0.1 (%d scrapes):\n",
         scrapes);
  for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
    while (have < counts[c])
      if (target_launch_ready(&t[have++], target, dir) != 0) {
        fprintf(stderr, "bench_serve: cannot start mt_target\n");
        return 1;
      }
    int port, err_fd;
    pid_t sv = start_serve(&port, &err_fd);
    if (sv < 0) {
      fprintf(stderr, "bench_serve: cannot start memtop serve\n");
      return 1;
    }
    scrape(port); /* connections made, targets discovered */
    trace_t scratch;
    if (trace)
      read_trace(err_fd, &scratch);
    int ok = 0, traced = 0;
    double load_from = load1();
    for (int i = 0; i < scrapes; i++) {
      sleep_s(0.15);
      double l = scrape(port);
      if (l >= 0)
        lat[ok++] = l;
      if (trace && l >= 0 && read_trace(err_fd, &tr[traced]) == 0) {
        tr[traced].t0 = last_t0;
        tr[traced].t1 = last_t1;
        tr[traced++].client = l * 1e3;
      }
    }
    double load_to = load1();
    double serial[5];
    for (int i = 0; i < 5; i++)
      serial[i] = serial_fetch_s(t, have);
    double p50 = pct(lat, ok, 0.5), p99 = pct(lat, ok, 0.99);
    double floor50 = pct(serial, 5, 0.5);
    printf(
        "  %3d targets: p50 %6.1f ms  p99 %6.1f ms   serial fetch_snapshot of "
        "all: %6.1f ms (p99/serial %.2fx; load %.1f-%.1f)%s\n",
        have, p50 * 1e3, p99 * 1e3, floor50 * 1e3, p99 / floor50, load_from,
        load_to,
        have == 200
            ? (p99 < 0.050 ? "  goal <50 ms: met" : "  goal <50 ms: NOT met")
            : "");
    if (trace) {
      attribute(tr, traced);
      figures_age(tr, traced);
    }
    if (have == 200) {
      /* Scraped every 15 s, as Prometheus does by default. */
      double c0 = proc_cpu_s(sv), t0 = now_s();
      int n = 0;
      while (now_s() - t0 < window) {
        scrape(port);
        n++;
        double next = t0 + 15.0 * n;
        double left = next - now_s();
        if (left > 0)
          sleep_s(left < window - (now_s() - t0) ? left
                                                 : window - (now_s() - t0));
      }
      double cpu = (proc_cpu_s(sv) - c0) / (now_s() - t0);
      printf("  200 targets scraped every 15 s for %.0f s: memtop serve "
             "%.2f%% of a core, RSS %ld KiB (load %.1f)%s\n",
             window, cpu * 100, proc_rss_kib(sv), load1(),
             cpu < 0.01 ? "  goal <1%: met" : "  goal <1%: NOT met");
    }
    kill(sv, SIGTERM);
    int st;
    waitpid(sv, &st, 0);
    if (err_fd >= 0)
      close(err_fd);
  }
  /* node_exporter's scrape of this machine, same run, when installed. */
  node_exporter(lat, scrapes);
  for (int i = 0; i < have; i++)
    target_stop(&t[i], SIGTERM);
  free(lat);
  free(tr);
  char rm[128];
  snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
  return system(rm) == 0 ? 0 : 1;
}
