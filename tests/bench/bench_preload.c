/*
 * bench_preload.c - what the preload costs (make bench).
 *
 * 1. The malloc/free microbenchmark (tests/progs/pl_loop.c: mixed small
 *    sizes, a ring of live blocks), 1 and 2 threads, each configuration in
 *    its own child process: glibc bare and preloaded, jemalloc bare
 *    (LD_PRELOAD=libjemalloc.so.2) and preloaded (the preload first, so
 *    that its RTLD_NEXT is jemalloc: LD_PRELOAD=preload:libjemalloc.so.2),
 *    and heaptrack on the same loop when it is installed. Runs are
 *    interleaved; the fastest and the median of BENCH_RUNS (default 5) are
 *    printed, in ns per malloc/free pair, and the fastest as a ratio to the
 *    fastest bare run of the same allocator. Beside each allocator run the
 *    preload's floors (make bench builds them): forwarding only, and
 *    forwarding plus measuring each block's usable size without recording
 *    it, which is what any exact interposer pays before it counts a thing;
 *    and the naive exact counter (forwarding, measuring, adding to plain
 *    per-thread counters with no consistency). The goal: the preload at
 *    most 1.25x the naive exact counter. tcmalloc and mimalloc, bare and
 *    preloaded, for information; an allocator that is not installed is
 *    said so.
 * 2. A real workload: sqlite3 building and querying a 200,000-row database,
 *    bare vs preloaded, wall time, median of BENCH_RUNS. The goal is 1.02x.
 *
 * Figures only: nothing here fails on a slow machine.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "support/host.h"

#define MAX_RUNS 15

static char build_dir[1024];
static char preload[1200];
static char loop_exe[1200];
static char floor_so[4][1200]; /* [1]..[3]: the preload's floors */
static int runs = 5;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int find_build_dir(void) {
  const char *env = getenv("BUILD");
  if (env && env[0])
    snprintf(build_dir, sizeof build_dir, "%s", env);
  else if (host_build_dir(build_dir, sizeof build_dir) != 0)
    return -1;
  snprintf(preload, sizeof preload, "%s/libmemstats-preload.so", build_dir);
  snprintf(loop_exe, sizeof loop_exe, "%s/progs/pl_loop", build_dir);
  for (int f = 1; f <= 3; f++) {
    snprintf(floor_so[f], sizeof floor_so[f],
             "%s/bench/floor%d/libmemstats-preload.so", build_dir, f);
    if (access(floor_so[f], R_OK) != 0) {
      fprintf(stderr, "bench_preload: %s is missing: run `make bench`\n",
              floor_so[f]);
      return -1;
    }
  }
  if (access(preload, R_OK) != 0 || access(loop_exe, X_OK) != 0) {
    fprintf(stderr,
            "bench_preload: %s or %s is missing: run `make bench` (it builds "
            "both)\n",
            preload, loop_exe);
    return -1;
  }
  return 0;
}

/* Runs argv with LD_PRELOAD=ld_preload (NULL: none), stdout into out
 * (NULL: /dev/null), stdin from in (NULL: /dev/null). Returns the wall
 * time in seconds, or -1 if the command failed. */
static double run(const char *ld_preload, const char *const argv[],
                  const char *out, const char *in) {
  double t0 = now_s();
  pid_t pid = fork();
  if (pid < 0)
    return -1;
  if (pid == 0) {
    if (ld_preload)
      setenv("LD_PRELOAD", ld_preload, 1);
    else
      unsetenv("LD_PRELOAD");
    setenv("MEMSTATS_AGENT", "0", 1);
    int i = open(in ? in : "/dev/null", O_RDONLY);
    int o = open(out ? out : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int e = open("/dev/null", O_WRONLY);
    if (i < 0 || o < 0 || e < 0)
      _exit(126);
    dup2(i, 0);
    dup2(o, 1);
    dup2(e, 2);
    execvp(argv[0], (char *const *)argv);
    _exit(127);
  }
  int st;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  double t = now_s() - t0;
  return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? t : -1;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- the microbenchmark
 * ----------------------------------------------------*/

/* The floors are the preload built to forward only (floor1) and to
 * forward and measure each block without recording it (floor2): what any
 * interposer pays before it counts anything; floor3 is the naive exact
 * counter the goal is set against (src/preload/preload.h,
 * MS__PRELOAD_FLOOR). */
enum {
  GLIBC,
  GLIBC_F1,
  GLIBC_F2,
  GLIBC_F3,
  GLIBC_PRE,
  JE,
  JE_F1,
  JE_F2,
  JE_F3,
  JE_PRE,
  TC,
  TC_PRE,
  MI,
  MI_PRE,
  HEAPTRACK,
  NCONF
};
static const char *const conf_name[NCONF] = {
    "glibc bare",           "  forwarding only",  "  + measuring blocks",
    "  naive exact counter", "glibc + preload",   "jemalloc bare",
    "  forwarding only",    "  + measuring blocks", "  naive exact counter",
    "jemalloc + preload",   "tcmalloc bare",
    "tcmalloc + preload",   "mimalloc bare",      "mimalloc + preload",
    "glibc + heaptrack"};
/* For information (the goal is set for glibc and jemalloc): the other two
 * allocators, whose blocks are measured by a call per free. */
static const char *const alloc_so[NCONF] = {[TC] = "libtcmalloc.so.4",
                                            [TC_PRE] = "libtcmalloc.so.4",
                                            [MI] = "libmimalloc.so.2",
                                            [MI_PRE] = "libmimalloc.so.2"};

/* One run of pl_loop in configuration c; returns ns per pair or -1. */
static double loop_once(int c, int threads, long pairs) {
  char t[16], p[32], out[64], pre[2500], ht_out[64];
  snprintf(t, sizeof t, "%d", threads);
  snprintf(p, sizeof p, "%ld", pairs);
  snprintf(out, sizeof out, "/tmp/bench_preload.%d.out", (int)getpid());
  snprintf(ht_out, sizeof ht_out, "/tmp/bench_preload.%d.heaptrack",
           (int)getpid());
  const char *ld = NULL;
  if (c == GLIBC_PRE)
    ld = preload;
  else if (c == GLIBC_F1 || c == GLIBC_F2 || c == GLIBC_F3)
    ld = floor_so[c - GLIBC];
  else if (c == JE)
    ld = "libjemalloc.so.2";
  else if (c == JE_PRE || c == JE_F1 || c == JE_F2 || c == JE_F3) {
    snprintf(pre, sizeof pre, "%s:libjemalloc.so.2",
             c == JE_PRE ? preload : floor_so[c - JE]);
    ld = pre;
  } else if (c == TC || c == MI) {
    ld = alloc_so[c];
  } else if (c == TC_PRE || c == MI_PRE) {
    snprintf(pre, sizeof pre, "%s:%s", preload, alloc_so[c]);
    ld = pre;
  }
  double r;
  if (c == HEAPTRACK) {
    const char *argv[] = {"heaptrack", "-o", ht_out, loop_exe, t, p, NULL};
    r = run(NULL, argv, out, NULL);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -f %s*", ht_out);
    if (system(cmd) != 0)
      fprintf(stderr, "bench_preload: could not remove %s*\n", ht_out);
  } else {
    const char *argv[] = {loop_exe, t, p, NULL};
    r = run(ld, argv, out, NULL);
  }
  double ns = -1;
  FILE *f = fopen(out, "r");
  if (f) {
    char line[128];
    while (fgets(line, sizeof line, f))
      if (strncmp(line, "ns_per_pair=", 12) == 0)
        ns = strtod(line + 12, NULL);
    fclose(f);
  }
  unlink(out);
  return r < 0 ? -1 : ns;
}

static void bench_loop(int threads, int with_heaptrack) {
  const long pairs = 10000000;
  double v[NCONF][MAX_RUNS];
  int n[NCONF] = {0};
  int have[NCONF];
  for (int c = 0; c < NCONF; c++) {
    const char *lib = c >= JE && c <= JE_PRE ? "libjemalloc.so.2" : alloc_so[c];
    have[c] = !lib || host_have_library(lib);
  }
  for (int r = 0; r < runs; r++) {
    for (int c = 0; c < NCONF; c++) {
      if (!have[c])
        continue;
      if (c == HEAPTRACK && (!with_heaptrack || r >= 3))
        continue; /* about 25x slower: three runs, a tenth of the pairs */
      double ns = loop_once(c, threads, c == HEAPTRACK ? pairs / 10 : pairs);
      if (ns > 0)
        v[c][n[c]++] = ns;
    }
  }
  /* The ratios are of the fastest runs: on a shared machine noise only
   * ever adds time, so the minimum is the steadiest estimate of what a
   * configuration costs; the median is printed beside it. */
  printf("malloc/free pairs, mixed 16..512 bytes, %d thread%s (fastest and "
         "median of %d runs; ratios of the fastest):\n",
         threads, threads > 1 ? "s" : "", runs);
  double best[NCONF], mid[NCONF];
  for (int c = 0; c < NCONF; c++) {
    mid[c] = n[c] ? median(v[c], n[c]) : -1; /* sorts v[c] */
    best[c] = n[c] ? v[c][0] : -1;
  }
  for (int c = 0; c < NCONF; c++) {
    if (best[c] < 0) {
      if (!have[c])
        printf("  %-22s not installed\n", conf_name[c]);
      else if (c != HEAPTRACK || with_heaptrack)
        printf("  %-22s failed\n", conf_name[c]);
      continue;
    }
    int ref = c >= JE && c <= JE_PRE ? JE
              : c == TC_PRE          ? TC
              : c == MI_PRE          ? MI
                                     : GLIBC;
    static const char *const ref_name[NCONF] = {[GLIBC] = "glibc",
                                                [JE] = "jemalloc",
                                                [TC] = "tcmalloc",
                                                [MI] = "mimalloc"};
    printf("  %-22s %8.2f ns/pair (median %6.2f)", conf_name[c], best[c],
           mid[c]);
    if (c != ref && c != TC && c != MI && best[ref] > 0)
      printf("   %6.2fx %s bare", best[c] / best[ref], ref_name[ref]);
    printf("\n");
  }
  /* The goal: the preload within 1.25x of the naive exact counter on the
   * same allocator, in the same run. */
  static const int goal[][2] = {{GLIBC_PRE, GLIBC_F3}, {JE_PRE, JE_F3}};
  for (size_t i = 0; i < sizeof goal / sizeof goal[0]; i++) {
    int c = goal[i][0], naive = goal[i][1];
    if (best[c] > 0 && best[naive] > 0)
      printf("  %s preload vs naive exact counter: %.2fx (goal <= 1.25x: "
             "%s)\n",
             c == GLIBC_PRE ? "glibc" : "jemalloc", best[c] / best[naive],
             best[c] / best[naive] <= 1.25 ? "met" : "MISSED");
  }
}

/* ---- the real workload
 * -----------------------------------------------------*/

static const char sqlite_sql[] =
    "CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, v REAL, grp INT);\n"
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c "
    "WHERE x < 200000)\n"
    "INSERT INTO t SELECT x, 'name' || (x * 7919 % 200000), x * 0.5, x % 997 "
    "FROM c;\n"
    "CREATE INDEX t_name ON t(name);\n"
    "SELECT grp, count(*), sum(v), min(name), max(name) FROM t GROUP BY grp "
    "ORDER BY grp LIMIT 5;\n"
    "SELECT count(DISTINCT name), length(group_concat(name)) FROM t;\n"
    "SELECT a.grp, count(*) FROM t a JOIN t b ON a.id = b.id + 1 GROUP BY "
    "a.grp ORDER BY 2 DESC LIMIT 3;\n";

static void bench_sqlite(void) {
  if (!host_have_program("sqlite3")) {
    printf("sqlite3 workload: sqlite3 not installed, skipped\n");
    return;
  }
  char sql[64], db[64];
  snprintf(sql, sizeof sql, "/tmp/bench_preload.%d.sql", (int)getpid());
  snprintf(db, sizeof db, "/tmp/bench_preload.%d.db", (int)getpid());
  FILE *f = fopen(sql, "w");
  if (!f)
    return;
  fputs(sqlite_sql, f);
  fclose(f);
  double v[2][MAX_RUNS];
  int n[2] = {0, 0};
  for (int r = 0; r < runs; r++) {
    for (int c = 0; c < 2; c++) {
      unlink(db);
      const char *argv[] = {"sqlite3", db, NULL};
      double t = run(c ? preload : NULL, argv, NULL, sql);
      if (t > 0)
        v[c][n[c]++] = t;
    }
  }
  unlink(db);
  unlink(sql);
  if (!n[0] || !n[1]) {
    printf("sqlite3 workload: failed\n");
    return;
  }
  double bare = median(v[0], n[0]), pre = median(v[1], n[1]);
  printf("sqlite3, 200,000 rows built, indexed, queried (median of %d):\n",
         runs);
  printf("  %-22s %8.3f s\n", "bare", bare);
  printf("  %-22s %8.3f s   %6.3fx bare (goal <= 1.02x: %s)\n", "preload",
         pre, pre / bare, pre / bare <= 1.02 ? "met" : "MISSED");
}

int main(void) {
  const char *env = getenv("BENCH_RUNS");
  if (env && atoi(env) > 0)
    runs = atoi(env) < MAX_RUNS ? atoi(env) : MAX_RUNS;
  if (find_build_dir() != 0)
    return 1;
  int ht = host_have_program("heaptrack");
  bench_loop(1, ht);
  bench_loop(2, 0);
  bench_sqlite();
  if (!ht)
    printf("heaptrack not installed: no comparison\n");
  return 0;
}
