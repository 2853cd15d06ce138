/*
 * test_attach.c - memtop attach and memtop detach on programs started bare
 * (never linked with libmemstats nor run under the preload).
 *
 * tests/progs/at_alloc on 8 threads that allocate all the time: cycles of
 * attach and detach with the program working throughout; at each, the
 * agent's HeapInuse and HeapSys (glibc's mallinfo2, read by the agent)
 * within 1% of the same figures the program reads itself with its workers
 * parked, the tracked fields unavailable, the socket gone after the
 * detach, and the program still counting and exiting normally at the end.
 * python3's http.server answering a client that requests all the time
 * through attach and detach cycles: no failed request. redis-server
 * under redis-benchmark through cycles (MT_ATTACH_CYCLES): no failed run,
 * HeapInuse within 1% of jemalloc's own figure as redis reads it, the
 * same data as a redis never attached. The heap profile after attach
 * --track, read by the real go tool pprof. sqlite3 inside one
 * transaction through cycles, inserting between them: its commit holds
 * every row, and it said nothing else. The calls made while a thread is
 * stopped, counted: dlopen and the entry point at the first attach, the
 * entry point alone once the library is mapped; every thread's
 * scheduling policy and nice value as they were. The refusals: a
 * static program, a process another tracer holds, another user's process
 * (memtop as nobody).
 *
 * Everything is skipped, with the reason, where ptrace is not permitted
 * (Yama's scope, a container without CAP_SYS_PTRACE).
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <pwd.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/fetch.h"
#include "support/host.h"
#include "support/pprof_top.h"
#include "support/run.h"
#include "support/target.h"

/* make check's cycles; MT_ATTACH_CYCLES=50 for the long run. */
#define CYCLES 12

static char build_dir[1024], memtop[1200], prog[1200], dir[64];
static char skip_why[256];

/* Whether this process may ptrace a child of its own user: the kernel is
 * asked (a child seized and let go), so that Yama, a missing
 * CAP_SYS_PTRACE in a container and seccomp are all covered. */
static int ptrace_allowed(void) {
  pid_t c = fork();
  if (c == 0) {
    pause();
    _exit(0);
  }
  if (c < 0)
    return 0;
  int ok = ptrace(PTRACE_SEIZE, c, NULL, NULL) == 0;
  int e = errno;
  if (ok)
    ptrace(PTRACE_DETACH, c, NULL, NULL);
  kill(c, SIGKILL);
  waitpid(c, NULL, 0);
  if (!ok)
    snprintf(skip_why, sizeof skip_why,
             "ptrace is not permitted here (%s): Yama's ptrace_scope, or a "
             "container without CAP_SYS_PTRACE",
             strerror(e));
  return ok;
}

static int setup(void **state) {
  (void)state;
  assert_int_equal(host_build_dir(build_dir, sizeof build_dir), 0);
  snprintf(memtop, sizeof memtop, "%s/memtop", build_dir);
  snprintf(prog, sizeof prog, "%s/progs/at_alloc", build_dir);
  assert_int_equal(target_dir_setup(dir, sizeof dir, "/tmp/test_attach.XXXXXX"),
                   0);
  setenv("MEMSTATS_DIR", dir, 1);
  /* The preload memtop attach loads: under a sanitizer build, the plain
   * one (the programs are not instrumented). */
  char preload[1300];
  if (host_preload_path(build_dir, preload, sizeof preload) != 0)
    fail_msg("%s is missing: build it with `make` first", preload);
  setenv("MEMTOP_PRELOAD", preload, 1);
  (void)ptrace_allowed();
  return 0;
}

static int teardown(void **state) {
  (void)state;
  target_dir_remove(dir);
  return 0;
}

#define SKIP_IF_NO_PTRACE()                                                    \
  do {                                                                         \
    if (skip_why[0]) {                                                         \
      print_message("skipped: %s\n", skip_why);                                \
      skip();                                                                  \
    }                                                                          \
  } while (0)

/* memtop attach|detach PID, as user `as` (NULL: this one). */
static int memtop_cmd(run_result_t *res, const char *cmd, pid_t pid,
                      const struct passwd *as) {
  char p[32];
  snprintf(p, sizeof p, "%d", (int)pid);
  char *argv[] = {memtop, (char *)cmd, p, NULL};
  return run_capture_as(res, argv, -1, as);
}

/* memtop attach --track PID. */
static int memtop_track(run_result_t *res, pid_t pid) {
  char p[32];
  snprintf(p, sizeof p, "%d", (int)pid);
  char *argv[] = {memtop, (char *)"attach", (char *)"--track", p, NULL};
  return run_capture(res, argv, -1);
}

/* path THREADS started bare, with env2's changes to its environment
 * (NULL: none; see target_launch), until it says "ready". */
static int start_alloc_env(target_t *t, const char *path, const char *threads,
                           const char *const *env2) {
  const char *argv[] = {path, threads, NULL};
  static const char *const env[] = {"LD_PRELOAD", NULL};
  return target_launch_argv_ready(t, argv, dir, env, env2);
}

static int start_alloc(target_t *t, const char *path, const char *threads) {
  return start_alloc_env(t, path, threads, NULL);
}

static int within_1pct(uint64_t a, uint64_t b) {
  uint64_t d = a > b ? a - b : b - a;
  return d * 100 <= b;
}

/* A snapshot of pid, read again (every 100 ms, up to 90 s) until ok(s,
 * arg) holds. */
#define snapshot_until(pid, s, ok, arg)                                        \
  fetch_snapshot_until(pid, s, ok, arg, 100, 900, 10000)

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- 8 threads allocating ----------------------------------------------*/

static void test_alloc8_cycles(void **state) {
  (void)state;
  SKIP_IF_NO_PTRACE();
  static run_result_t res;
  target_t t;
  char ans[128];
  int cycles = CYCLES;
  const char *env = getenv("MT_ATTACH_CYCLES");
  if (env && atoi(env) > 0)
    cycles = atoi(env);
  assert_int_equal(start_alloc(&t, prog, "8"), 0);
  unsigned long last = 0;
  for (int i = 0; i < cycles; i++) {
    if (memtop_cmd(&res, "attach", t.pid, NULL) != 0)
      fail_msg("cycle %d: memtop attach exited %d: %s", i, res.status, res.err);
    assert_non_null(strstr(res.out, "attached to process"));
    if (i == 0) {
      /* A second attach finds it serving. */
      if (memtop_cmd(&res, "attach", t.pid, NULL) != 0)
        fail_msg("memtop attach again exited %d: %s", res.status, res.err);
      assert_non_null(strstr(res.out, "serves already"));
    }
    /* The allocator's own figures, read by the program itself with its
     * workers parked, against the agent's. The agent samples mallinfo2
     * at most once a second and a detached one's last figures stay in the
     * library: so read until a fresh sample is there. */
    /* The workers parked: mallinfo2 takes every arena's lock, which 8
     * threads that do nothing but allocate hold nearly all the time. A
     * first snapshot then: the agent's thread has made its own arena,
     * which both reads count. */
    target_ask(&t, "pause\n", ans, sizeof ans);
    assert_string_equal(ans, "paused");
    static ms_snapshot_t s;
    char err[256];
    if (fetch_snapshot(t.pid, &s, 10000, err, sizeof err) != 0)
      fail_msg("cycle %d: no snapshot: %s", i, err);
    unsigned long long inuse = 0, sys = 0;
    unsigned long count = 0;
    target_ask(&t, "info\n", ans, sizeof ans);
    assert_int_equal(
        sscanf(ans, "inuse %llu sys %llu count %lu", &inuse, &sys, &count), 3);
    assert_true(count > last); /* it worked since the last cycle */
    last = count;
    int ok = 0;
    for (int k = 0; k < 40 && !ok; k++) {
      if (k)
        usleep(100 * 1000);
      if (fetch_snapshot(t.pid, &s, 10000, err, sizeof err) != 0)
        fail_msg("cycle %d: no snapshot: %s", i, err);
      ok = within_1pct(s.heap_inuse, inuse) && within_1pct(s.heap_sys, sys);
    }
    if (!ok)
      fail_msg("cycle %d: agent HeapInuse %llu HeapSys %llu, mallinfo2 "
               "%llu %llu",
               i, (unsigned long long)s.heap_inuse,
               (unsigned long long)s.heap_sys, inuse, sys);
    assert_int_equal(s.quality[MS_F_HEAP_INUSE], MS_Q_EXACT);
    assert_int_equal(s.quality[MS_F_HEAP_ALLOC], MS_Q_UNAVAILABLE);
    assert_int_equal(s.quality[MS_F_MALLOCS], MS_Q_UNAVAILABLE);
    if (i == 0) {
      /* No heap profile, and memtop says why. */
      char p[32];
      snprintf(p, sizeof p, "%d", (int)t.pid);
      char *argv[] = {
          memtop, (char *)"profile", (char *)"--format", (char *)"text", p,
          NULL};
      assert_int_equal(run_capture(&res, argv, -1), 1);
      assert_non_null(strstr(res.err, "loaded by memtop attach"));
    }
    target_ask(&t, "resume\n", ans, sizeof ans);
    assert_string_equal(ans, "resumed");
    if (memtop_cmd(&res, "detach", t.pid, NULL) != 0)
      fail_msg("cycle %d: memtop detach exited %d: %s", i, res.status, res.err);
    struct stat st;
    assert_int_not_equal(lstat(t.sock, &st), 0); /* the socket is gone */
    if (i == 0) {
      /* memtop says what happened to it. */
      char p[32];
      snprintf(p, sizeof p, "%d", (int)t.pid);
      char *argv[] = {memtop, (char *)"--once", p, NULL};
      assert_int_equal(run_capture(&res, argv, -1), 1);
      assert_non_null(strstr(res.err, "`memtop detach` stopped it"));
    }
  }
  /* Still working, and ends normally. */
  target_ask(&t, "info\n", ans, sizeof ans);
  unsigned long long a, b;
  unsigned long count;
  assert_int_equal(sscanf(ans, "inuse %llu sys %llu count %lu", &a, &b, &count),
                   3);
  assert_true(count > last);
  assert_int_equal(target_wait(&t), 0);
}

/* ---- python3's http.server ---------------------------------------------*/

typedef struct client_s {
  int port;
  volatile int stop;
  unsigned long ok, failed;
} client_t;

static int http_get(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -1;
  struct sockaddr_in sa = {.sin_family = AF_INET,
                           .sin_port = htons((uint16_t)port)};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  struct timeval tv = {10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  int r = -1;
  static const char req[] = "GET / HTTP/1.0\r\nHost: x\r\n\r\n";
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
      write(fd, req, sizeof req - 1) == (ssize_t)(sizeof req - 1)) {
    char buf[4096];
    ssize_t n, got = 0;
    int status_ok = 0;
    while ((n = read(fd, buf, sizeof buf)) > 0) {
      if (got == 0 && n >= 12 && memcmp(buf, "HTTP/1.0 200", 12) == 0)
        status_ok = 1;
      got += n;
    }
    r = n == 0 && status_ok ? 0 : -1;
  }
  close(fd);
  return r;
}

static void *client(void *arg) {
  client_t *c = arg;
  while (!c->stop) {
    if (http_get(c->port) == 0)
      c->ok++;
    else
      c->failed++;
  }
  return NULL;
}

/* Five cycles of attach (with --track: track 1) and detach, a client
 * requesting all the time. */
static void http_cycles(int track) {
  SKIP_IF_NO_PTRACE();
  if (run_sh("python3 -c 'import http.server' >/dev/null 2>&1 && "
             "setpriv --pdeathsig KILL true") != 0) {
    print_message("skipped: no python3 with http.server, or no setpriv\n");
    skip();
  }
  target_t t;
  /* exec: the PID is python's itself, not a shell's (or pyenv's shim's). */
  /* Killed with the test, whichever way it ends (a failed assertion
   * leaves this function at once). */
  const char *argv[] = {
      "setpriv",
      "--pdeathsig",
      "KILL",
      "sh",
      "-c",
      "cd \"$MEMSTATS_DIR\" && exec python3 -u -c 'import http.server as h, "
      "sys; s = h.ThreadingHTTPServer((\"127.0.0.1\", 0), "
      "h.SimpleHTTPRequestHandler); print(\"port\", s.server_address[1]); "
      "sys.stderr = open(\"/dev/null\", \"w\"); s.serve_forever()'",
      NULL};
  static const char *const env[] = {"LD_PRELOAD", NULL};
  assert_int_equal(target_launch(&t, argv, dir, env, NULL, NULL, 0), 0);
  char line[64];
  assert_int_equal(target_read_line(t.out, line, sizeof line), 0);
  /* Static: the client thread outlives a failed assertion. */
  static client_t c;
  memset(&c, 0, sizeof c);
  assert_int_equal(sscanf(line, "port %d", &c.port), 1);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, client, &c), 0);
  static run_result_t res;
  for (int i = 0; i < 5; i++) {
    unsigned long before = c.ok;
    if ((track ? memtop_track(&res, t.pid)
               : memtop_cmd(&res, "attach", t.pid, NULL)) != 0)
      fail_msg("cycle %d: memtop attach exited %d: %s", i, res.status, res.err);
    static ms_snapshot_t s;
    char err[256];
    if (fetch_snapshot(t.pid, &s, 5000, err, sizeof err) != 0)
      fail_msg("cycle %d: no snapshot: %s", i, err);
    assert_true(s.sys > 0);
    if (track) {
      /* Python's requests counted: a later snapshot has more. */
      uint64_t m0 = s.mallocs;
      assert_int_equal(s.quality[MS_F_MALLOCS], MS_Q_EXACT);
      for (int k = 0; k < 50 && s.mallocs <= m0; k++) {
        usleep(100 * 1000);
        if (fetch_snapshot(t.pid, &s, 5000, err, sizeof err) != 0)
          fail_msg("cycle %d: no snapshot: %s", i, err);
      }
      if (s.mallocs <= m0)
        fail_msg("cycle %d: Mallocs stayed at %llu", i, (unsigned long long)m0);
    }
    if (memtop_cmd(&res, "detach", t.pid, NULL) != 0)
      fail_msg("cycle %d: memtop detach exited %d: %s", i, res.status, res.err);
    /* Served on meanwhile. */
    for (int k = 0; k < 100 && c.ok == before; k++)
      usleep(20 * 1000);
    assert_true(c.ok > before);
  }
  c.stop = 1;
  pthread_join(th, NULL);
  assert_true(c.ok > 0);
  assert_int_equal(c.failed, 0);
  target_kill(&t);
}

static void test_http_server(void **state) {
  (void)state;
  http_cycles(0);
}

static void test_http_server_track(void **state) {
  (void)state;
  http_cycles(1);
}

/* ---- redis-server under redis-benchmark ----------------------------------*/

/* One inline command to the redis-server listening at sock; its reply
 * (a status's or an integer's text, a bulk string's bytes) into out.
 * Returns 0, or -1 (no answer within 10 s, an error reply, or a reply
 * longer than out). */
static int redis_cmd(const char *sock, const char *cmd, char *out, size_t len) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -1;
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock);
  struct timeval tv = {10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char req[256];
  int n = snprintf(req, sizeof req, "%s\r\n", cmd);
  size_t got = 0;
  int r = -1;
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
      write(fd, req, (size_t)n) == n) {
    for (;;) {
      ssize_t k = got < len - 1 ? read(fd, out + got, len - 1 - got) : 0;
      if (k <= 0)
        break;
      got += (size_t)k;
      out[got] = '\0';
      char *eol = strstr(out, "\r\n");
      if (!eol)
        continue;
      if (out[0] == '+' || out[0] == ':') {
        *eol = '\0';
        memmove(out, out + 1, (size_t)(eol - out));
        r = 0;
        break;
      }
      if (out[0] != '$')
        break; /* an error */
      size_t body = (size_t)strtoul(out + 1, NULL, 10);
      size_t head = (size_t)(eol + 2 - out);
      if (got < head + body)
        continue;
      memmove(out, out + head, body);
      out[body] = '\0';
      r = 0;
      break;
    }
  }
  close(fd);
  return r;
}

/* A figure "name:N" of redis's INFO text; -1 if it is not there. */
static long long info_figure(const char *info, const char *name) {
  char key[64];
  snprintf(key, sizeof key, "\n%s:", name);
  const char *p = strstr(info, key);
  return p ? atoll(p + strlen(key)) : -1;
}

/* redis-server started bare, on a socket of its own (no TCP), killed with
 * the test. Returns 0, or -1 if it did not answer PING within 20 s. */
static int redis_start(target_t *t, const char *name, char *sock,
                       size_t socklen) {
  char log[128];
  snprintf(sock, socklen, "%s/%s.sock", dir, name);
  snprintf(log, sizeof log, "%s/%s.log", dir, name);
  const char *argv[] = {"setpriv",
                        "--pdeathsig",
                        "KILL",
                        "redis-server",
                        "--port",
                        "0",
                        "--unixsocket",
                        sock,
                        "--save",
                        "",
                        "--appendonly",
                        "no",
                        "--dir",
                        dir,
                        "--logfile",
                        log,
                        "--enable-debug-command",
                        "yes",
                        NULL};
  static const char *const env[] = {"LD_PRELOAD", NULL};
  if (target_launch(t, argv, dir, env, NULL, NULL, 0) != 0)
    return -1;
  char ans[64];
  for (int k = 0; k < 200; k++) {
    if (redis_cmd(sock, "PING", ans, sizeof ans) == 0 &&
        strcmp(ans, "PONG") == 0)
      return 0;
    usleep(100 * 1000);
  }
  target_kill(t);
  return -1;
}

/* redis-benchmark, run again and again against one server from a thread
 * of the test: fixed keys (no -r) and fixed values, so that after the same
 * number of runs two servers hold the same data (DEBUG DIGEST). */
typedef struct bench_s {
  char sock[128], out[128];
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int paused, stop;
  pid_t cur;          /* the run under way, 0 between runs */
  int runs, bad, max; /* max: stop after so many (0: until told) */
  char why[512];
} bench_t;

/* One run of redis-benchmark against b->sock, its output in b->out;
 * started by fork, its PID in b->cur for the pauses. Returns 0, or -1
 * with the reason in b->why (a status not 0, or an error in its output).
 */
static int bench_once(bench_t *b) {
  pthread_mutex_lock(&b->lock);
  while (b->paused && !b->stop)
    pthread_cond_wait(&b->cond, &b->lock);
  pid_t pid = b->stop ? -1 : fork();
  if (pid == 0) {
    int fd = open(b->out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
      _exit(126);
    dup2(fd, 1);
    dup2(fd, 2);
    execlp("redis-benchmark", "redis-benchmark", "-s", b->sock, "-c", "8", "-n",
           "2000", "--csv", "-t",
           "set,get,incr,lpush,rpush,sadd,hset,lrange_100,mset", (char *)NULL);
    _exit(127);
  }
  b->cur = pid > 0 ? pid : 0;
  pthread_mutex_unlock(&b->lock);
  if (pid < 0)
    return 1; /* stopped, or no fork: said by the caller's count */
  int st;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  pthread_mutex_lock(&b->lock);
  b->cur = 0;
  pthread_mutex_unlock(&b->lock);
  char text[8192];
  FILE *f = fopen(b->out, "r");
  size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
  if (f)
    fclose(f);
  text[n] = '\0';
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || strstr(text, "rror") ||
      !strstr(text, "\"MSET (10 keys)\"")) {
    snprintf(b->why, sizeof b->why, "redis-benchmark: status %d: %.400s", st,
             text);
    return -1;
  }
  return 0;
}

static void *bench_thread(void *arg) {
  bench_t *b = arg;
  for (;;) {
    pthread_mutex_lock(&b->lock);
    int done = b->stop || (b->max > 0 && b->runs >= b->max);
    pthread_mutex_unlock(&b->lock);
    if (done)
      break;
    int r = bench_once(b);
    if (r > 0)
      break;
    pthread_mutex_lock(&b->lock);
    b->runs++;
    b->bad += r < 0;
    pthread_mutex_unlock(&b->lock);
  }
  return NULL;
}

static void bench_init(bench_t *b, const char *sock, const char *name,
                       int max) {
  memset(b, 0, sizeof *b);
  snprintf(b->sock, sizeof b->sock, "%s", sock);
  snprintf(b->out, sizeof b->out, "%s/%s.bench", dir, name);
  pthread_mutex_init(&b->lock, NULL);
  pthread_cond_init(&b->cond, NULL);
  b->max = max;
}

/* Holds the benchmark (the run under way stopped, no new one started), or
 * lets it go on. */
static void bench_pause(bench_t *b, int pause) {
  pthread_mutex_lock(&b->lock);
  b->paused = pause;
  if (b->cur > 0)
    kill(b->cur, pause ? SIGSTOP : SIGCONT);
  pthread_cond_broadcast(&b->cond);
  pthread_mutex_unlock(&b->lock);
}

static int bench_runs(bench_t *b) {
  pthread_mutex_lock(&b->lock);
  int n = b->runs;
  pthread_mutex_unlock(&b->lock);
  return n;
}

/* Whether the allocator's figures in s were sampled since *arg (a
 * CLOCK_MONOTONIC time): the snapshot's time less the sample's age, not
 * the time of the reading (a cached snapshot is older than that). */
static int sampled_since(const ms_snapshot_t *s, const void *arg) {
  uint64_t since = *(const uint64_t *)arg;
  return s->time_mono_ns >= since &&
         s->time_mono_ns - s->heap_sample_age_ns >= since;
}

/* redis-server (on jemalloc, Debian's) under redis-benchmark run again
 * and again, through cycles of attach and detach (every other one with
 * --track; MT_ATTACH_CYCLES, default 6): at each, the benchmark held,
 * the agent's HeapInuse within 1% of jemalloc's stats.active as redis's
 * own INFO memory reads it, Mallocs counted exactly under --track. At the
 * end no run of redis-benchmark saw an error, redis answers and exits
 * normally, and its data after those runs is what a second redis-server,
 * never attached, holds after as many runs (DEBUG DIGEST). */
static void test_redis_benchmark(void **state) {
  (void)state;
  SKIP_IF_NO_PTRACE();
  if (!host_have_program("redis-server") ||
      !host_have_program("redis-benchmark") ||
      run_sh("setpriv --pdeathsig KILL true") != 0) {
    print_message("skipped: no redis-server and redis-benchmark "
                  "(apt-get install redis-server), or no setpriv\n");
    skip();
  }
  int cycles = 6;
  const char *env = getenv("MT_ATTACH_CYCLES");
  if (env && atoi(env) > 0)
    cycles = atoi(env);
  target_t t, base;
  char sock[128], base_sock[128], ans[64];
  static char info[16384];
  if (redis_start(&t, "redis", sock, sizeof sock) != 0)
    fail_msg("redis-server did not answer on %s", sock);
  /* Static: the thread outlives a failed assertion. */
  static bench_t b;
  bench_init(&b, sock, "redis", 0);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, bench_thread, &b), 0);
  static run_result_t res;
  for (int i = 0; i < cycles; i++) {
    int track = i % 2;
    if ((track ? memtop_track(&res, t.pid)
               : memtop_cmd(&res, "attach", t.pid, NULL)) != 0)
      fail_msg("cycle %d: memtop attach%s exited %d: %s", i,
               track ? " --track" : "", res.status, res.err);
    /* The benchmark held, the agent's sample taken since against
     * redis's own figure, which its cron refreshes every 100 ms: read
     * once that has run since. */
    bench_pause(&b, 1);
    static ms_snapshot_t s;
    long long active = -1;
    int ok = 0;
    for (int k = 0; k < 5 && !ok; k++) {
      usleep(300 * 1000);
      uint64_t paused = mono_ns();
      if (!snapshot_until(t.pid, &s, sampled_since, &paused))
        fail_msg("cycle %d: no heap sample since the benchmark was held", i);
      assert_int_equal(redis_cmd(sock, "INFO memory", info, sizeof info), 0);
      active = info_figure(info, "allocator_active");
      assert_true(active > 0);
      ok = within_1pct(s.heap_inuse, (uint64_t)active);
    }
    if (!ok)
      fail_msg("cycle %d: agent HeapInuse %llu, redis's allocator_active "
               "%lld",
               i, (unsigned long long)s.heap_inuse, active);
    assert_int_equal(s.quality[MS_F_HEAP_INUSE], MS_Q_EXACT);
    /* Counted from the attach under --track; else jemalloc's estimate. */
    if (track)
      assert_int_equal(s.quality[MS_F_MALLOCS], MS_Q_EXACT);
    bench_pause(&b, 0);
    int runs = bench_runs(&b);
    if (memtop_cmd(&res, "detach", t.pid, NULL) != 0)
      fail_msg("cycle %d: memtop detach exited %d: %s", i, res.status, res.err);
    /* Served on meanwhile: one more run done. */
    for (int k = 0; k < 600 && bench_runs(&b) == runs; k++)
      usleep(100 * 1000);
    assert_true(bench_runs(&b) > runs);
  }
  pthread_mutex_lock(&b.lock);
  b.stop = 1;
  pthread_mutex_unlock(&b.lock);
  pthread_join(th, NULL);
  if (b.bad)
    fail_msg("%d of %d runs failed; the last: %s", b.bad, b.runs, b.why);
  print_message("%d cycles, %d runs of redis-benchmark, none failed\n", cycles,
                b.runs);
  /* As many runs against a redis-server never attached. */
  if (redis_start(&base, "base", base_sock, sizeof base_sock) != 0)
    fail_msg("redis-server did not answer on %s", base_sock);
  static bench_t b2;
  bench_init(&b2, base_sock, "base", b.runs);
  bench_thread(&b2);
  assert_int_equal(b2.bad, 0);
  char digest[64], base_digest[64];
  assert_int_equal(redis_cmd(sock, "DEBUG DIGEST", digest, sizeof digest), 0);
  assert_int_equal(
      redis_cmd(base_sock, "DEBUG DIGEST", base_digest, sizeof base_digest), 0);
  /* Data there, and the same. */
  assert_string_not_equal(digest, "0000000000000000000000000000000000000000");
  assert_string_equal(digest, base_digest);
  assert_int_equal(redis_cmd(sock, "PING", ans, sizeof ans), 0);
  assert_string_equal(ans, "PONG");
  /* Both end as SIGTERM ends redis: status 0. */
  int st = target_stop(&t, SIGTERM);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  target_kill(&base);
}

/* ---- sqlite3 in the middle of a transaction ------------------------------*/

static void test_sqlite_transaction(void **state) {
  (void)state;
  SKIP_IF_NO_PTRACE();
  if (run_sh("sqlite3 -version >/dev/null 2>&1") != 0) {
    print_message("skipped: no sqlite3\n");
    skip();
  }
  char db[128];
  snprintf(db, sizeof db, "%s/t.db", dir);
  target_t t;
  const char *argv[] = {"sqlite3", "-batch", db, NULL};
  static const char *const env[] = {"LD_PRELOAD", NULL};
  assert_int_equal(target_launch(&t, argv, dir, env, NULL, NULL, 0), 0);
  static const char begin[] = "CREATE TABLE t(x INTEGER, s TEXT);\nBEGIN;\n";
  assert_true(write(t.in, begin, sizeof begin - 1) ==
              (ssize_t)sizeof begin - 1);
  /* Started: the table's creation made the file. */
  struct stat dbst;
  for (int k = 0; k < 1000 && stat(db, &dbst) != 0; k++)
    usleep(10 * 1000);
  static run_result_t res;
  int rows = 0;
  for (int i = 0; i < 5; i++) {
    /* Rows inserted inside the transaction between the cycles. */
    for (int k = 0; k < 200; k++, rows++) {
      char ins[96];
      int n =
          snprintf(ins, sizeof ins,
                   "INSERT INTO t VALUES(%d, hex(randomblob(64)));\n", rows);
      assert_true(write(t.in, ins, (size_t)n) == n);
    }
    if (memtop_cmd(&res, "attach", t.pid, NULL) != 0)
      fail_msg("cycle %d: memtop attach exited %d: %s", i, res.status, res.err);
    static ms_snapshot_t s;
    char err[256];
    if (fetch_snapshot(t.pid, &s, 10000, err, sizeof err) != 0)
      fail_msg("cycle %d: no snapshot: %s", i, err);
    assert_true(s.heap_inuse > 0);
    if (memtop_cmd(&res, "detach", t.pid, NULL) != 0)
      fail_msg("cycle %d: memtop detach exited %d: %s", i, res.status, res.err);
  }
  static const char end[] = "COMMIT;\nSELECT 'rows', count(*) FROM t;\n";
  assert_true(write(t.in, end, sizeof end - 1) == (ssize_t)sizeof end - 1);
  close(t.in);
  /* Everything it printed: the one answer, no error. */
  char out[4096];
  size_t got = 0;
  ssize_t n;
  while (got < sizeof out - 1 &&
         (n = read(t.out, out + got, sizeof out - 1 - got)) > 0)
    got += (size_t)n;
  out[got] = '\0';
  int st;
  assert_int_equal(waitpid(t.pid, &st, 0), t.pid);
  close(t.out);
  char want[64];
  snprintf(want, sizeof want, "rows|%d\n", rows);
  assert_string_equal(out, want);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* ---- attach --track ------------------------------------------------------*/

static int mallocs_above(const ms_snapshot_t *s, const void *arg) {
  return s->mallocs > *(const uint64_t *)arg;
}

/* HeapAlloc's estimate beside mallinfo2's in-use bytes (uordblks +
 * hblkhd) read in-process: never above them by more than 10%, never
 * under three quarters. It cannot be held to 1%: its base is mallinfo2
 * at the attach, which counts the chunks the threads' tcaches hold
 * (freed, but not in glibc's bins) and each chunk's header, and the
 * tcaches of at_alloc's workers fill over minutes; read in the same
 * instant by mallinfo2 and by counting, the two differ by what the
 * tcaches took or gave back since. The counting itself is checked
 * exactly where the base plays no part: Mallocs (test_track_dlopen). A
 * base lost or a free of an earlier block counted against nothing would
 * put it near 0 or past the in-use bytes. */
typedef struct near_s {
  uint64_t inuse;     /* mallinfo2's, read in-process, workers parked */
  uint64_t paused_ns; /* a time they were all parked (CLOCK_MONOTONIC) */
} near_t;

static int alloc_near(const ms_snapshot_t *s, const void *arg) {
  const near_t *n = arg;
  uint64_t inuse = n->inuse;
  /* HeapInuse is glibc's mallinfo2, sampled by the agent at most once a
   * second (or every 100 times the CPU the last sample cost): only a
   * sample begun after the workers parked can be held to 1%. Its start is
   * the snapshot's own time less the sample's age (a snapshot the agent
   * computed earlier and serves from its cache is as old as it is). */
  if (s->time_mono_ns < n->paused_ns ||
      s->time_mono_ns - s->heap_sample_age_ns < n->paused_ns)
    return 0;
  return within_1pct(s->heap_inuse, inuse) &&
         s->quality[MS_F_HEAP_ALLOC] == MS_Q_ESTIMATED &&
         s->heap_alloc * 4 >= inuse * 3 && s->heap_alloc <= inuse + inuse / 10;
}

static int has_provider(const ms_snapshot_t *s, const char *name) {
  for (uint32_t i = 0; i < s->nproviders && i < MS_MAX_PROVIDERS; i++)
    if (strcmp(s->providers[i], name) == 0)
      return 1;
  return 0;
}

/* Where at_alloc's GOT entry for malloc points ("libc.so.6", ...). */
static void where(target_t *t, char *ans, size_t len) {
  target_ask(t, "where\n", ans, len);
  assert_int_equal(strncmp(ans, "malloc ", 7), 0);
}

/* at_alloc on 8 threads whose blocks from before the attach are freed
 * all the time after it: Mallocs counted from the attach and growing,
 * HeapInuse within 1% of mallinfo2 read in-process and HeapAlloc
 * estimated near it (alloc_near), HeapObjects
 * unavailable (never a negative count), and the GOT entry of malloc the
 * program's own back on libc after the detach; twice (a second attach
 * reuses the loaded library). */
static void test_track_alloc8(void **state) {
  (void)state;
  SKIP_IF_NO_PTRACE();
  static run_result_t res;
  target_t t;
  char ans[256];
  assert_int_equal(start_alloc(&t, prog, "8"), 0);
  where(&t, ans, sizeof ans);
  assert_string_equal(ans, "malloc libc.so.6");
  for (int cycle = 0; cycle < 2; cycle++) {
    if (memtop_track(&res, t.pid) != 0)
      fail_msg("cycle %d: memtop attach --track exited %d: %s", cycle,
               res.status, res.err);
    assert_non_null(strstr(res.out, "with --track"));
    where(&t, ans, sizeof ans);
    if (!strstr(ans, "libmemstats"))
      fail_msg("cycle %d: malloc's GOT entry after attach --track: %s", cycle,
               ans);
    static ms_snapshot_t s;
    uint64_t zero = 0;
    assert_true(snapshot_until(t.pid, &s, mallocs_above, &zero));
    assert_true(has_provider(&s, "tracked(since attach)"));
    assert_int_equal(s.quality[MS_F_MALLOCS], MS_Q_EXACT);
    assert_int_equal(s.quality[MS_F_HEAP_OBJECTS], MS_Q_UNAVAILABLE);
    uint64_t m0 = s.mallocs;
    if (!snapshot_until(t.pid, &s, mallocs_above, &m0))
      fail_msg("cycle %d: Mallocs stayed at %llu", cycle,
               (unsigned long long)m0);
    /* The workers parked (mallinfo2 takes every arena's lock): the
     * estimate against the allocator's own figure, read in-process. */
    near_t want = {0};
    target_ask(&t, "pause\n", ans, sizeof ans);
    assert_string_equal(ans, "paused");
    want.paused_ns = mono_ns(); /* all parked by now */
    unsigned long long inuse = 0, sys = 0;
    unsigned long count = 0;
    target_ask(&t, "info\n", ans, sizeof ans);
    assert_int_equal(
        sscanf(ans, "inuse %llu sys %llu count %lu", &inuse, &sys, &count), 3);
    want.inuse = inuse;
    if (!snapshot_until(t.pid, &s, alloc_near, &want))
      fail_msg("cycle %d: HeapAlloc %llu (quality %d) HeapInuse %llu "
               "(quality %d), mallinfo2 in-use %llu",
               cycle, (unsigned long long)s.heap_alloc,
               (int)s.quality[MS_F_HEAP_ALLOC],
               (unsigned long long)s.heap_inuse,
               (int)s.quality[MS_F_HEAP_INUSE], inuse);
    assert_true(within_1pct(s.heap_inuse, inuse));
    print_message("cycle %d: HeapAlloc ~%llu, mallinfo2 in-use %llu, Mallocs "
                  "%llu Frees %llu since the attach\n",
                  cycle, (unsigned long long)s.heap_alloc, inuse,
                  (unsigned long long)s.mallocs, (unsigned long long)s.frees);
    target_ask(&t, "resume\n", ans, sizeof ans);
    assert_string_equal(ans, "resumed");
    if (memtop_cmd(&res, "detach", t.pid, NULL) != 0)
      fail_msg("cycle %d: memtop detach exited %d: %s", cycle, res.status,
               res.err);
    where(&t, ans, sizeof ans);
    assert_string_equal(ans, "malloc libc.so.6");
  }
  target_ask(&t, "info\n", ans, sizeof ans);
  assert_int_equal(target_wait(&t), 0);
}

static int mallocs_past(const ms_snapshot_t *s, const void *arg) {
  return s->mallocs >= *(const uint64_t *)arg;
}

/* A module dlopen'ed after attach --track has its GOT rewritten too: its
 * 100000 malloc/free pairs are counted (the workers parked meanwhile). */
static void test_track_dlopen(void **state) {
  (void)state;
  SKIP_IF_NO_PTRACE();
  static run_result_t res;
  target_t t;
  char ans[256];
  assert_int_equal(start_alloc(&t, prog, "2"), 0);
  target_ask(&t, "pause\n", ans, sizeof ans);
  assert_string_equal(ans, "paused");
  if (memtop_track(&res, t.pid) != 0)
    fail_msg("memtop attach --track exited %d: %s", res.status, res.err);
  static ms_snapshot_t s;
  char err[256];
  if (fetch_snapshot(t.pid, &s, 10000, err, sizeof err) != 0)
    fail_msg("no snapshot: %s", err);
  uint64_t want = s.mallocs + 100000;
  char cmd[1400];
  snprintf(cmd, sizeof cmd, "dlopen %s/progs/libatmod.so\n", build_dir);
  target_ask(&t, cmd, ans, sizeof ans);
  assert_string_equal(ans, "churned 100000");
  if (!snapshot_until(t.pid, &s, mallocs_past, &want))
    fail_msg("Mallocs %llu, wanted at least %llu: the module's calls were "
             "not counted",
             (unsigned long long)s.mallocs, (unsigned long long)want);
  target_ask(&t, "resume\n", ans, sizeof ans);
  if (memtop_cmd(&res, "detach", t.pid, NULL) != 0)
    fail_msg("memtop detach exited %d: %s", res.status, res.err);
  assert_int_equal(target_wait(&t), 0);
}

/* A C++ program's new and delete (array, scalar, sized, aligned) counted
 * after attach --track, and the program ends normally after the detach,
 * deleting what it made while tracked. */
static void test_track_cxx(void **state) {
  (void)state;
  SKIP_IF_NO_PTRACE();
  char path[1300];
  snprintf(path, sizeof path, "%s/progs/at_cxx", build_dir);
  static run_result_t res;
  target_t t;
  char ans[256];
  assert_int_equal(start_alloc(&t, path, "2"), 0);
  if (memtop_track(&res, t.pid) != 0)
    fail_msg("memtop attach --track exited %d: %s", res.status, res.err);
  static ms_snapshot_t s;
  uint64_t zero = 0;
  assert_true(snapshot_until(t.pid, &s, mallocs_above, &zero));
  uint64_t m0 = s.mallocs;
  assert_true(snapshot_until(t.pid, &s, mallocs_above, &m0));
  assert_true(s.frees > 0);
  if (memtop_cmd(&res, "detach", t.pid, NULL) != 0)
    fail_msg("memtop detach exited %d: %s", res.status, res.err);
  unsigned long c0 = 0, c1 = 0;
  target_ask(&t, "info\n", ans, sizeof ans);
  assert_int_equal(sscanf(ans, "count %lu", &c0), 1);
  for (int k = 0; k < 100 && c1 <= c0; k++) {
    usleep(20 * 1000);
    target_ask(&t, "info\n", ans, sizeof ans);
    assert_int_equal(sscanf(ans, "count %lu", &c1), 1);
  }
  assert_true(c1 > c0);
  assert_int_equal(target_wait(&t), 0);
}

/* ---- the heap profile after attach --track --------------------------------*/

/* Whether text names one of the seconds in [from, to] as the heap
 * profile's "since" does ("2026-11-27 14:08:39 UTC"). */
static int names_second(const char *text, time_t from, time_t to) {
  for (time_t s = from; s <= to; s++) {
    struct tm tm;
    char at[40];
    gmtime_r(&s, &tm);
    strftime(at, sizeof at, "at %Y-%m-%d %H:%M:%S UTC", &tm);
    if (strstr(text, at))
      return 1;
  }
  return 0;
}

/* memtop profile ARGS... PID, which must succeed. */
static void memtop_profile(run_result_t *res, pid_t pid, const char *a,
                           const char *b) {
  char p[32];
  snprintf(p, sizeof p, "%d", (int)pid);
  char *argv[] = {memtop, (char *)"profile", (char *)a, (char *)b, p, NULL};
  if (run_capture(res, argv, -1) != 0)
    fail_msg("memtop profile %s %s exited %d: %s", a, b, res->status, res->err);
}

/* `go tool pprof -top` of file for sample type si: fn's flat bytes (0
 * where pprof lists no line for it). */
static long long pprof_flat(const char *file, const char *si, const char *fn) {
  static char top[65536];
  if (pprof_top(file, si, dir, top, sizeof top) != 0)
    fail_msg("go tool pprof -top -sample_index=%s %s failed: %s", si, file,
             top);
  long long flat = 0, cum = 0;
  if (pprof_top_values(top, fn, &flat, &cum) != 0)
    return 0;
  return flat;
}

/* at_alloc with no workers, at MEMSTATS_PROFILE_RATE=1 (every allocation
 * sampled, so the figures are exact), whose `sites` command allocates at
 * known call sites and first frees what the last one kept. Twice: attach
 * --track, `sites` (freeing blocks made before the attach, or while
 * detached), the profile; detach, `sites` again while detached. Each
 * profile holds what was allocated since its attach, exactly: at_big 48
 * blocks of 1000 bytes in use, at_small 16, at_freed 16 allocated and
 * none in use, as the real `go tool pprof -top` reads them; its comment
 * and memtop's own top list say since when it samples; the frees of the
 * earlier blocks changed nothing (the second attach's at_big allocated
 * 48,000 bytes, not the first's too). */
static void test_track_profile(void **state) {
  (void)state;
  SKIP_IF_NO_PTRACE();
  static run_result_t res;
  static const char *const rate1[] = {"MEMSTATS_PROFILE_RATE=1", NULL};
  target_t t;
  char ans[256];
  assert_int_equal(start_alloc_env(&t, prog, "0", rate1), 0);
  int go = host_have_program("go");
  if (!go)
    print_message("go (golang-go) is not installed: memtop's own top list "
                  "only\n");
  target_ask(&t, "sites\n", ans, sizeof ans);
  assert_string_equal(ans, "sites");
  for (int cycle = 0; cycle < 2; cycle++) {
    time_t t0 = time(NULL);
    if (memtop_track(&res, t.pid) != 0)
      fail_msg("cycle %d: memtop attach --track exited %d: %s", cycle,
               res.status, res.err);
    time_t t1 = time(NULL);
    target_ask(&t, "sites\n", ans, sizeof ans);
    assert_string_equal(ans, "sites");
    /* memtop's own top list (as the live view's sites panel reads it). */
    memtop_profile(&res, t.pid, "--format", "text");
    if (!strstr(res.out, "Samples since memtop attach --track") ||
        !names_second(res.out, t0, t1) || !strstr(res.out, "at_big") ||
        !strstr(res.out, "at_small"))
      fail_msg("cycle %d: memtop profile --format text:\n%s", cycle, res.out);
    char file[128];
    snprintf(file, sizeof file, "%s/track%d.pb.gz", dir, cycle);
    memtop_profile(&res, t.pid, "-o", file);
    if (go) {
      assert_int_equal(pprof_flat(file, "inuse_space", "at_big"), 48000);
      assert_int_equal(pprof_flat(file, "inuse_space", "at_small"), 16000);
      assert_int_equal(pprof_flat(file, "inuse_space", "at_freed"), 0);
      assert_int_equal(pprof_flat(file, "alloc_space", "at_big"), 48000);
      assert_int_equal(pprof_flat(file, "alloc_space", "at_freed"), 16000);
      assert_int_equal(pprof_flat(file, "alloc_objects", "at_small"), 16);
      /* The comment, as pprof reads it. */
      char cmd[1400];
      snprintf(cmd, sizeof cmd,
               "HOME='%s' GOCACHE='%s/gocache' go tool pprof -comments '%s' "
               "2>&1",
               dir, dir, file);
      FILE *pp = popen(cmd, "r");
      assert_non_null(pp);
      static char comments[4096];
      size_t n = fread(comments, 1, sizeof comments - 1, pp);
      comments[n] = '\0';
      assert_int_equal(pclose(pp), 0);
      if (!strstr(comments, "samples since memtop attach --track") ||
          !names_second(comments, t0, t1))
        fail_msg("cycle %d: the profile's comments: %s", cycle, comments);
    }
    if (memtop_cmd(&res, "detach", t.pid, NULL) != 0)
      fail_msg("cycle %d: memtop detach exited %d: %s", cycle, res.status,
               res.err);
    /* Detached: these frees and blocks are never seen. */
    target_ask(&t, "sites\n", ans, sizeof ans);
    assert_string_equal(ans, "sites");
  }
  assert_int_equal(target_wait(&t), 0);
}

/* ---- refusals -----------------------------------------------------------*/

static void test_refuses_static(void **state) {
  (void)state;
  SKIP_IF_NO_PTRACE();
  char path[1300];
  snprintf(path, sizeof path, "%s/progs/at_static", build_dir);
  if (access(path, X_OK) != 0) {
    print_message("skipped: no %s (the C library's archive, libc.a, is not "
                  "installed)\n",
                  path);
    skip();
  }
  target_t t;
  assert_int_equal(start_alloc(&t, path, "2"), 0);
  static run_result_t res;
  assert_int_equal(memtop_cmd(&res, "attach", t.pid, NULL), 1);
  assert_non_null(strstr(res.err, "statically linked"));
  assert_non_null(strstr(res.err, "-lmemstats"));
  assert_int_equal(target_wait(&t), 0);
}

static void test_refuses_traced(void **state) {
  (void)state;
  SKIP_IF_NO_PTRACE();
  target_t t;
  assert_int_equal(start_alloc(&t, prog, "1"), 0);
  /* This test is its tracer now. */
  assert_int_equal(ptrace(PTRACE_SEIZE, t.pid, NULL, NULL), 0);
  static run_result_t res;
  assert_int_equal(memtop_cmd(&res, "attach", t.pid, NULL), 1);
  assert_non_null(strstr(res.err, "being traced by process"));
  assert_non_null(strstr(res.err, "Detach that one"));
  /* A seized tracee is detached stopped. */
  int st;
  assert_int_equal(ptrace(PTRACE_INTERRUPT, t.pid, NULL, NULL), 0);
  assert_int_equal(waitpid(t.pid, &st, __WALL), t.pid);
  assert_int_equal(ptrace(PTRACE_DETACH, t.pid, NULL, NULL), 0);
  /* And once let go, the attach works. */
  if (memtop_cmd(&res, "attach", t.pid, NULL) != 0)
    fail_msg("memtop attach exited %d: %s", res.status, res.err);
  assert_int_equal(target_wait(&t), 0);
}

static void test_refuses_other_user(void **state) {
  (void)state;
  SKIP_IF_NO_PTRACE();
  const struct passwd *pw = getpwnam("nobody");
  if (geteuid() != 0 || pw == NULL) {
    print_message("skipped: running memtop as another user needs root and "
                  "a user `nobody`\n");
    skip();
  }
  target_t t;
  assert_int_equal(start_alloc(&t, prog, "1"), 0);
  static run_result_t res;
  /* memtop as nobody, the program root's. */
  int st = memtop_cmd(&res, "attach", t.pid, pw);
  if (st == 125 || st == 126) {
    target_kill(&t);
    print_message("skipped: cannot run %s as nobody (status %d)\n", memtop, st);
    skip();
  }
  assert_int_equal(st, 1);
  assert_non_null(strstr(res.err, "another user's"));
  assert_int_equal(target_wait(&t), 0);
}

/* ---- what is done while a thread is stopped ------------------------------*/

/* Asserts that memtop's line says its thread was stopped for n calls. */
static void assert_calls(const run_result_t *res, int n) {
  char want[64];
  snprintf(want, sizeof want, "ms for %d call%s", n, n == 1 ? "" : "s");
  if (!strstr(res->out, want))
    fail_msg("expected \"%s\" in: %s%s", want, res->out, res->err);
}

/* Every thread of pid: the policy (SCHED_OTHER, 0) and nice value in
 * /proc/PID/task/TID/stat, and how many are named memstats-agent. */
static void assert_sched(pid_t pid, int nice, int agents) {
  char path[320], text[1024];
  DIR *d;
  snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
  assert_non_null(d = opendir(path));
  struct dirent *e;
  int seen = 0, named = 0;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9')
      continue;
    snprintf(path, sizeof path, "/proc/%d/task/%s/stat", (int)pid, e->d_name);
    FILE *f = fopen(path, "re");
    if (!f)
      continue;
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    const char *close = strrchr(text, ')');
    assert_non_null(close);
    named += strstr(text, "(memstats-agent)") != NULL;
    /* After the name: field 3 (state) ... 19 nice ... 41 policy. */
    long v[40];
    const char *p = close + 2;
    int k = 0;
    for (; k < 40 && *p; k++) {
      if (k == 0) {
        v[k] = 0;
        p += 1;
      } else {
        char *end;
        v[k] = strtol(p, &end, 10);
        p = end;
      }
      while (*p == ' ')
        p++;
    }
    assert_true(k >= 39);
    if (v[16] != nice || v[38] != 0)
      fail_msg("thread %s: nice %ld policy %ld, expected nice %d policy 0",
               e->d_name, v[16], v[38], nice);
    seen++;
  }
  closedir(d);
  assert_true(seen >= 2);
  assert_int_equal(named, agents);
}

/* Sets every thread of pid to nice value nice. */
static void renice_all(pid_t pid, int nice) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
  DIR *d = opendir(path);
  assert_non_null(d);
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] >= '1' && e->d_name[0] <= '9')
      assert_int_equal(setpriority(PRIO_PROCESS, (id_t)atoi(e->d_name), nice),
                       0);
  closedir(d);
}

/* The first attach makes two calls while its thread is stopped (dlopen
 * and ms__attach_start, found in the library's own symbols: no dlsym);
 * once the library is mapped, attach and detach make one. The boost of
 * the calls (root) leaves every thread's scheduling as it was, the agent's
 * thread too, made as its creator was: nice 7, SCHED_OTHER. */
static void test_calls_counted(void **state) {
  (void)state;
  SKIP_IF_NO_PTRACE();
  target_t t;
  assert_int_equal(start_alloc(&t, prog, "2"), 0);
  renice_all(t.pid, 7);
  static run_result_t res;
  assert_int_equal(memtop_cmd(&res, "attach", t.pid, NULL), 0);
  assert_calls(&res, 2);
  assert_sched(t.pid, 7, 1);
  assert_int_equal(memtop_cmd(&res, "attach", t.pid, NULL), 0);
  assert_non_null(strstr(res.out, "serves already"));
  assert_calls(&res, 1);
  assert_int_equal(memtop_cmd(&res, "detach", t.pid, NULL), 0);
  assert_calls(&res, 1);
  assert_sched(t.pid, 7, 0);
  assert_int_equal(memtop_track(&res, t.pid), 0);
  assert_calls(&res, 1);
  assert_sched(t.pid, 7, 1);
  assert_int_equal(memtop_cmd(&res, "detach", t.pid, NULL), 0);
  assert_calls(&res, 1);
  assert_sched(t.pid, 7, 0);
  assert_int_equal(target_wait(&t), 0);
}

static void test_detach_without_attach(void **state) {
  (void)state;
  SKIP_IF_NO_PTRACE();
  target_t t;
  assert_int_equal(start_alloc(&t, prog, "1"), 0);
  static run_result_t res;
  assert_int_equal(memtop_cmd(&res, "detach", t.pid, NULL), 1);
  assert_non_null(strstr(res.err, "nothing to detach"));
  assert_int_equal(target_wait(&t), 0);
}

/* A second detach finds no agent to stop: it says so (the call is made,
 * which puts back any GOT entry left), rather than that it stopped one. */
static void test_detach_twice(void **state) {
  (void)state;
  SKIP_IF_NO_PTRACE();
  target_t t;
  assert_int_equal(start_alloc(&t, prog, "1"), 0);
  static run_result_t res;
  if (memtop_cmd(&res, "attach", t.pid, NULL) != 0)
    fail_msg("memtop attach exited %d: %s", res.status, res.err);
  static ms_snapshot_t s;
  char err[256];
  if (fetch_snapshot(t.pid, &s, 10000, err, sizeof err) != 0)
    fail_msg("no snapshot: %s", err);
  assert_int_equal(memtop_cmd(&res, "detach", t.pid, NULL), 0);
  assert_non_null(strstr(res.out, "its agent stopped"));
  assert_int_equal(memtop_cmd(&res, "detach", t.pid, NULL), 0);
  assert_null(strstr(res.out, "its agent stopped"));
  assert_non_null(strstr(res.out, "ran no agent (detached already?)"));
  assert_int_equal(target_wait(&t), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_alloc8_cycles),
      cmocka_unit_test(test_http_server),
      cmocka_unit_test(test_http_server_track),
      cmocka_unit_test(test_redis_benchmark),
      cmocka_unit_test(test_track_alloc8),
      cmocka_unit_test(test_track_dlopen),
      cmocka_unit_test(test_track_cxx),
      cmocka_unit_test(test_track_profile),
      cmocka_unit_test(test_sqlite_transaction),
      cmocka_unit_test(test_refuses_static),
      cmocka_unit_test(test_refuses_traced),
      cmocka_unit_test(test_refuses_other_user),
      cmocka_unit_test(test_detach_without_attach),
      cmocka_unit_test(test_detach_twice),
      cmocka_unit_test(test_calls_counted),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
