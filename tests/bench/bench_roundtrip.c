/*
 * bench_roundtrip.c - the latency of a snapshot request over the agent's
 * socket (p50/p99), and the CPU the agent thread spends per request, for
 * cached snapshots (the rate limit's common case) and freshly computed
 * ones (MEMSTATS_MIN_INTERVAL_MS=0).
 *
 * The baseline, measured in the same run: a bare Unix-socket echo server
 * thread that answers the same request with as many bytes as a snapshot
 * reply. The ratio is what the agent costs beyond moving the bytes.
 * Goals (issue 3): p50 under 50 us, p99 under 200 us.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "client/client.h"
#include "core/util.h"
#include "wire/wire.h"

#define ITER 20000
#define WARM 500

static uint64_t g_lat[ITER];
static uint8_t g_buf[1 << 16];
static size_t g_reply_len;
static char g_echo_path[108];

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

static void percentiles(uint64_t *p50, uint64_t *p99) {
  qsort(g_lat, ITER, sizeof g_lat[0], cmp_u64);
  *p50 = g_lat[ITER / 2];
  *p99 = g_lat[ITER * 99 / 100];
}

static int connect_to(const char *path) {
  struct sockaddr_un sa;
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    perror(path);
    exit(1);
  }
  return fd;
}

static void send_all(int fd, const void *p, size_t n) {
  const uint8_t *c = p;
  while (n > 0) {
    ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
    if (w <= 0)
      exit(1);
    c += w;
    n -= (size_t)w;
  }
}

static void recv_all(int fd, void *p, size_t n) {
  uint8_t *c = p;
  while (n > 0) {
    ssize_t r = recv(fd, c, n, 0);
    if (r <= 0)
      exit(1);
    c += r;
    n -= (size_t)r;
  }
}

/* ---- the baseline: an echo server with the same byte counts ---- */
static void *echo_main(void *arg) {
  int lfd = *(int *)arg;
  int fd = accept(lfd, NULL, NULL);
  static uint8_t in[64], out[1 << 16];
  ms__wire_writer_t w;
  ms__wire_writer_init(&w, in, sizeof in);
  ms__wire_encode_request(&w, MS__MSG_SNAPSHOT_REQ, 0);
  size_t req = w.len;
  for (;;) {
    size_t got = 0;
    while (got < req) {
      ssize_t r = recv(fd, in + got, req - got, 0);
      if (r <= 0) {
        close(fd);
        return NULL;
      }
      got += (size_t)r;
    }
    send_all(fd, out, g_reply_len);
  }
}

static void bench_echo(uint64_t *p50, uint64_t *p99) {
  int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un sa;
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s", g_echo_path);
  if (bind(lfd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(lfd, 4)) {
    perror("echo");
    exit(1);
  }
  pthread_t th;
  pthread_create(&th, NULL, echo_main, &lfd);
  int fd = connect_to(g_echo_path);
  uint8_t req[64];
  ms__wire_writer_t w;
  ms__wire_writer_init(&w, req, sizeof req);
  ms__wire_encode_request(&w, MS__MSG_SNAPSHOT_REQ, 0);
  for (int i = -WARM; i < ITER; i++) {
    uint64_t t0 = ms__now_mono_ns();
    send_all(fd, req, w.len);
    recv_all(fd, g_buf, g_reply_len);
    if (i >= 0)
      g_lat[i] = ms__now_mono_ns() - t0;
  }
  close(fd);
  pthread_join(th, NULL);
  close(lfd);
  unlink(g_echo_path);
  percentiles(p50, p99);
}

/* ---- the agent ---- */
static void bench_agent(const char *interval_ms, uint64_t *p50, uint64_t *p99,
                        double *cpu_ns, size_t *reply_len) {
  setenv("MEMSTATS_MIN_INTERVAL_MS", interval_ms, 1);
  if (ms_agent_start() != 0) {
    fprintf(stderr, "bench: the agent did not start\n");
    exit(1);
  }
  char path[MSC_PATH_MAX];
  msc_socket_path((int)getpid(), path, sizeof path);
  int fd = connect_to(path);
  msc_session_t *s = msc_session_new((int)getpid(), 0);
  static ms_snapshot_t snap;
  uint64_t cpu0 = 0;
  for (int i = -WARM; i < ITER; i++) {
    if (i == 0)
      cpu0 = ms__agent_cpu_ns();
    uint64_t t0 = ms__now_mono_ns();
    const uint8_t *req;
    size_t len, have = 0;
    msc_session_request_snapshot(s, &req, &len);
    send_all(fd, req, len);
    for (;;) {
      ssize_t r = recv(fd, g_buf + have, sizeof g_buf - have, 0);
      if (r <= 0)
        exit(1);
      have += (size_t)r;
      size_t used;
      msc_event_t ev;
      int done = 0;
      do {
        if (msc_session_feed(s, g_buf, have, &used, &snap, &ev) != 0) {
          fprintf(stderr, "bench: %s\n", ev.msg);
          exit(1);
        }
        memmove(g_buf, g_buf + used, have - used);
        have -= used;
        if (ev.type == MSC_EV_SNAPSHOT) {
          done = 1;
          *reply_len = used;
        }
      } while (used > 0 && !done);
      if (done)
        break;
    }
    if (i >= 0)
      g_lat[i] = ms__now_mono_ns() - t0;
  }
  *cpu_ns = (double)(ms__agent_cpu_ns() - cpu0) / ITER;
  msc_session_free(s);
  close(fd);
  ms_agent_stop();
  percentiles(p50, p99);
}

int main(void) {
  char dir[] = "/tmp/ms-bench-XXXXXX";
  if (mkdtemp(dir) == NULL)
    return 1;
  setenv("MEMSTATS_DIR", dir, 1);
  unsetenv("MEMSTATS_AGENT");
  snprintf(g_echo_path, sizeof g_echo_path, "%s/echo.sock", dir);
  /* Some figures to carry, as a real program would have. */
  for (int i = 0; i < 1000; i++)
    ms_object_alloc((uint64_t)(16 + i % 4096));
  ms_gc_pause(1000, 2000, 0);

  uint64_t c50, c99, f50, f99, e50, e99;
  double ccpu, fcpu;
  size_t reply = 0;
  bench_agent("100000", &c50, &c99, &ccpu, &reply);
  g_reply_len = reply;
  bench_agent("0", &f50, &f99, &fcpu, &reply);
  bench_echo(&e50, &e99);
  rmdir(dir);

  printf("snapshot round trip over the agent's socket, %d requests, reply "
         "%zu bytes\n",
         ITER, g_reply_len);
  printf("  %-34s p50 %7.1f us  p99 %7.1f us\n",
         "baseline: bare Unix-socket echo", e50 / 1e3, e99 / 1e3);
  printf("  %-34s p50 %7.1f us  p99 %7.1f us  (x%.2f / x%.2f of baseline)"
         "  agent CPU %.1f us/request\n",
         "agent, cached (rate-limited)", c50 / 1e3, c99 / 1e3,
         (double)c50 / (double)e50, (double)c99 / (double)e99, ccpu / 1e3);
  printf("  %-34s p50 %7.1f us  p99 %7.1f us  (x%.2f / x%.2f of baseline)"
         "  agent CPU %.1f us/snapshot\n",
         "agent, computed each time", f50 / 1e3, f99 / 1e3,
         (double)f50 / (double)e50, (double)f99 / (double)e99, fcpu / 1e3);
  printf("  goal: p50 < 50 us, p99 < 200 us: %s\n",
         (f50 < 50000 && f99 < 200000) ? "met" : "NOT met");
  return 0;
}
