/*
 * test_serve.c - `memtop serve` over real targets and a real socket:
 * memtop serve --listen 127.0.0.1:0 is started on a private socket
 * directory, and /metrics is read with a small HTTP client here (curl for
 * TLS, a real Prometheus for the end-to-end scrape; each skipped when not
 * installed).
 *
 *   - the figures served are the target's own: memstats_heap_alloc_bytes
 *     equals HeapAlloc of memtop --once --json at the same quiescent
 *     point; a Boehm target's pause histogram counts its NumGC
 *     collections and sums its PauseTotalNs;
 *   - HTTP: 404 for other paths, 405 with Allow for other methods, HEAD,
 *     a huge header refused, OpenMetrics when Accept asks for it, gzip
 *     when Accept-Encoding allows it, 24 scrapers at once all answered;
 *   - basic auth from a web config: 401 with WWW-Authenticate without or
 *     with a wrong password, 200 with the right one; TLS: curl gets 200
 *     over https, plain HTTP to the TLS port gets no answer;
 *   - a stopped target (SIGSTOP) does not hold a scrape: with
 *     MEMTOP_TIMEOUT_MS at two minutes, every scrape still returns (the
 *     client gives up after one minute), with the stopped target's last
 *     figures, older than the others', served as late
 *     (memtop_scrape_late_targets) rather than waited for;
 *   - a scrape waits for no target: it is answered with the answer the
 *     last round prepared (the same bytes, though a target's figures
 *     have moved since), and the round it asks for serves later ones;
 *   - targets that start while serving appear; targets that exit
 *     disappear (no series for a dead PID);
 *   - Prometheus itself scrapes memtop serve and its query API returns
 *     memstats_heap_alloc_bytes equal to the target's figure, and the
 *     Boehm target's memstats_gc_pause_seconds_count equal to its NumGC;
 *     a target in a cgroup named as Docker names a container's is found
 *     by its container label (memstats_ready_bytes{container="<id>"}).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>
#include <cmocka.h>

#include "support/host.h"
#include "support/target.h"

static char build_dir[1024], memtop[1200], target[1200], gc_prog[1200];
static char preload[1200], dir[256], data_dir[1200];

/* A client that waits this long for an answer has been kept waiting by
 * something the test is about (a hung target): it fails the test. */
#define CLIENT_GIVE_UP_MS 60000

/* ------------------------------------------------------------------------
 * Processes
 * ------------------------------------------------------------------------ */

/* Every child a test starts, so that a failing test (cmocka leaves it
 * by a long jump) leaves none behind: the per-test teardown ends them. */
static pid_t kids[32];
static size_t nkids;

static void kid(pid_t pid) {
  if (nkids < sizeof kids / sizeof kids[0])
    kids[nkids++] = pid;
}

static void reaped(pid_t pid) {
  for (size_t i = 0; i < nkids; i++)
    if (kids[i] == pid)
      kids[i] = kids[--nkids];
}

static int end_kids(void **state) {
  (void)state;
  for (size_t i = 0; i < nkids; i++) {
    int st;
    kill(kids[i], SIGCONT);
    kill(kids[i], SIGKILL);
    waitpid(kids[i], &st, 0);
  }
  nkids = 0;
  return 0;
}

typedef struct proc_s {
  pid_t pid;
  int in; /* its stdin: closing it ends the program */
} proc_t;

/* Starts prog [arg] (with the preload if asked) and waits for its
 * "ready <pid>". */
static proc_t start_prog(const char *prog, const char *arg, int preloaded) {
  char ld[1300], line[128] = "";
  const char *argv[] = {prog, arg, NULL};
  const char *env[] = {ld, NULL};
  target_t t;
  snprintf(ld, sizeof ld, "LD_PRELOAD=%s", preload);
  assert_int_equal(
      target_launch(&t, argv, NULL, preloaded ? env : NULL, NULL, NULL, 0), 0);
  kid(t.pid);
  if (target_read_line(t.out, line, sizeof line) != 0 ||
      strncmp(line, "ready ", 6) != 0)
    fail_msg("%s did not start: '%s'", prog, line);
  close(t.out);
  assert_int_equal(atoi(line + 6), t.pid);
  return (proc_t){t.pid, t.in};
}

static void stop_prog(proc_t p) {
  int st;
  close(p.in);
  kill(p.pid, SIGCONT);
  kill(p.pid, SIGTERM);
  waitpid(p.pid, &st, 0);
  reaped(p.pid);
}

typedef struct server_s {
  pid_t pid;
  int port;
  int err; /* its stderr */
} server_t;

/* Starts argv (memtop serve ...) with its stdout on /dev/null and its
 * stderr on a pipe, whose read end goes into *said; end_kids reaps it
 * if the test does not. */
static pid_t serve_start_stderr(char *const argv[], int *said) {
  int pe[2];
  assert_int_equal(pipe2(pe, O_CLOEXEC), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(pe[1], 2);
    execv(argv[0], argv);
    _exit(126);
  }
  kid(pid);
  close(pe[1]);
  *said = pe[0];
  return pid;
}

/* Starts memtop serve --listen 127.0.0.1:0 with the extra arguments
 * (NULL-terminated; --unsafe-no-auth added unless they give a
 * --web-config; no --listen if they give --web.listen-address) and reads
 * the port from its "serving" line. */
static server_t start_serve(const char *first, ...) {
  char *argv[24];
  int argc = 0;
  argv[argc++] = memtop;
  argv[argc++] = (char *)"serve";
  va_list ap;
  va_start(ap, first);
  int web = 0, listen = 0;
  for (const char *a = first; a && argc < 20; a = va_arg(ap, const char *)) {
    web |=
        strcmp(a, "--web-config") == 0 || strcmp(a, "--web.config.file") == 0;
    listen |= strcmp(a, "--web.listen-address") == 0;
    argv[argc++] = (char *)a;
  }
  va_end(ap);
  if (!listen) {
    argv[argc++] = (char *)"--listen";
    argv[argc++] = (char *)"127.0.0.1:0";
  }
  /* As root, serving without a password takes this flag (the tests'
   * targets are their own). */
  if (!web)
    argv[argc++] = (char *)"--unsafe-no-auth";
  argv[argc] = NULL;
  server_t s;
  s.pid = serve_start_stderr(argv, &s.err);
  char line[512] = {0};
  size_t len = 0;
  while (len < sizeof line - 1 && !strchr(line, '\n')) {
    ssize_t n = read(s.err, line + len, sizeof line - 1 - len);
    if (n <= 0)
      break;
    len += (size_t)n;
  }
  const char *at = strstr(line, "serving http");
  if (!at)
    fail_msg("memtop serve did not start: '%s'", line);
  const char *colon = strstr(at, "127.0.0.1:");
  assert_non_null(colon);
  s.port = atoi(colon + strlen("127.0.0.1:"));
  assert_true(s.port > 0);
  return s;
}

static void stop_serve(server_t s) {
  int st;
  kill(s.pid, SIGTERM);
  assert_int_equal(waitpid(s.pid, &st, 0), s.pid);
  reaped(s.pid);
  close(s.err);
  /* SIGTERM is a clean stop: exit status 0. */
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
}

/* ------------------------------------------------------------------------
 * A small HTTP client
 * ------------------------------------------------------------------------ */

typedef struct reply_s {
  int status; /* 0: no HTTP answer (closed, or not HTTP) */
  char head[8192];
  char *body; /* malloc'd, NUL-terminated */
  size_t body_len;
} reply_t;

/* A socket connected to 127.0.0.1:port from the loopback address src
 * (NULL: 127.0.0.1; Linux routes all of 127/8 to lo). */
static int connect_from(const char *src, int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(fd >= 0);
  if (src) {
    struct sockaddr_in me = {0};
    me.sin_family = AF_INET;
    assert_int_equal(inet_pton(AF_INET, src, &me.sin_addr), 1);
    assert_int_equal(bind(fd, (struct sockaddr *)&me, sizeof me), 0);
  }
  struct sockaddr_in sa = {0};
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
  return fd;
}

/* Sends the raw request from src and reads the answer until the server
 * closes. */
static void http_raw_from(const char *src, int port, const char *req,
                          size_t req_len, reply_t *r) {
  memset(r, 0, sizeof *r);
  int fd = connect_from(src, port);
  size_t off = 0;
  while (off < req_len) {
    ssize_t n = send(fd, req + off, req_len - off, MSG_NOSIGNAL);
    if (n <= 0)
      break; /* the server may refuse before reading everything */
    off += (size_t)n;
  }
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap);
  assert_non_null(buf);
  for (;;) {
    struct pollfd p = {fd, POLLIN, 0};
    int pr = poll(&p, 1, CLIENT_GIVE_UP_MS);
    if (pr == 0)
      fail_msg("no answer from memtop serve in %d ms", CLIENT_GIVE_UP_MS);
    if (len + 4096 > cap) {
      cap *= 2;
      buf = realloc(buf, cap);
      assert_non_null(buf);
    }
    ssize_t n = recv(fd, buf + len, cap - len - 1, 0);
    if (n <= 0)
      break;
    len += (size_t)n;
  }
  close(fd);
  buf[len] = '\0';
  char *end = strstr(buf, "\r\n\r\n");
  if (strncmp(buf, "HTTP/1.", 7) == 0 && end) {
    r->status = atoi(buf + 9);
    size_t hl = (size_t)(end - buf);
    if (hl >= sizeof r->head)
      hl = sizeof r->head - 1;
    memcpy(r->head, buf, hl);
    r->head[hl] = '\0';
    r->body_len = len - (size_t)(end + 4 - buf);
    r->body = malloc(r->body_len + 1);
    assert_non_null(r->body);
    memcpy(r->body, end + 4, r->body_len);
    r->body[r->body_len] = '\0';
  }
  free(buf);
}

static void http_raw(int port, const char *req, size_t req_len, reply_t *r) {
  http_raw_from(NULL, port, req, req_len, r);
}

static void http_from(const char *src, int port, const char *method,
                      const char *path, const char *headers, reply_t *r) {
  char req[4096];
  int n = snprintf(req, sizeof req,
                   "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%sConnection: "
                   "close\r\n\r\n",
                   method, path, headers ? headers : "");
  http_raw_from(src, port, req, (size_t)n, r);
}

static void http(int port, const char *method, const char *path,
                 const char *headers, reply_t *r) {
  http_from(NULL, port, method, path, headers, r);
}

static void reply_free(reply_t *r) {
  free(r->body);
  r->body = NULL;
}

/* The value of a header, case-insensitive name; NULL if absent. */
static const char *header(const reply_t *r, const char *name, char *buf,
                          size_t len) {
  size_t n = strlen(name);
  for (const char *l = strstr(r->head, "\r\n"); l; l = strstr(l + 2, "\r\n")) {
    if (strncasecmp(l + 2, name, n) == 0 && l[2 + n] == ':') {
      const char *v = l + 3 + n;
      while (*v == ' ')
        v++;
      size_t vl = strcspn(v, "\r");
      snprintf(buf, len, "%.*s", (int)vl, v);
      return buf;
    }
  }
  return NULL;
}

/* GET /metrics, 200 expected; the body (caller frees). */
static double mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static char *scrape(int port, const char *headers) {
  reply_t r;
  http(port, "GET", "/metrics", headers, &r);
  if (r.status != 200)
    fail_msg("GET /metrics: status %d\n%s", r.status, r.head);
  return r.body;
}

/* The value of the sample `name{pid="PID",...}`; -1 if absent. */
static double sample(const char *body, const char *name, int pid) {
  char key[160];
  snprintf(key, sizeof key, "\n%s{pid=\"%d\",", name, pid);
  const char *l = strstr(body, key);
  if (!l)
    return -1;
  const char *v = strstr(l + 1, "} ");
  return v ? strtod(v + 2, NULL) : -1;
}

static int has_pid(const char *body, int pid) {
  char key[64];
  snprintf(key, sizeof key, "{pid=\"%d\"", pid);
  return strstr(body, key) != NULL;
}

/* ------------------------------------------------------------------------
 * The target's own figures
 * ------------------------------------------------------------------------ */

/* memtop --once --json PID: the memstats object's field f. */
static double json_field(int pid, const char *f) {
  char cmd[1600];
  snprintf(cmd, sizeof cmd, "%s --once --json %d", memtop, pid);
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  static char buf[1 << 20];
  size_t n = fread(buf, 1, sizeof buf - 1, p);
  buf[n] = '\0';
  assert_int_equal(pclose(p), 0);
  json_error_t e;
  json_t *root = json_loads(buf, JSON_DISABLE_EOF_CHECK, &e);
  assert_non_null(root);
  json_t *v = json_object_get(json_object_get(root, "memstats"), f);
  if (!v)
    fail_msg("--json of %d has no %s", pid, f);
  double d = json_number_value(v);
  json_decref(root);
  return d;
}

/* ------------------------------------------------------------------------
 * Tests
 * ------------------------------------------------------------------------ */

static void test_figures_are_the_targets(void **state) {
  (void)state;
  proc_t a = start_prog(target, NULL, 0), b = start_prog(target, NULL, 0);
  server_t s = start_serve(NULL);
  char *body = scrape(s.port, NULL);
  for (int i = 0; i < 2; i++) {
    int pid = i ? b.pid : a.pid;
    double got = sample(body, "memstats_heap_alloc_bytes", pid);
    double want = json_field(pid, "HeapAlloc");
    if (got != want)
      fail_msg("pid %d: served %.0f, --json %.0f", pid, got, want);
    assert_true(sample(body, "memstats_snapshot_age_seconds", pid) >= 0);
    assert_true(sample(body, "memstats_ready_bytes", pid) > 0);
  }
  /* Both counted (as root, memtop serves every user's processes, so
   * others' may be counted too). */
  const char *nt = strstr(body, "\nmemtop_targets ");
  assert_non_null(nt);
  assert_true(atoi(nt + 16) >= 2);
  assert_non_null(strstr(body, "\nmemtop_build_info{version=\""));
  free(body);
  stop_serve(s);
  stop_prog(a);
  stop_prog(b);
}

static void test_http(void **state) {
  (void)state;
  proc_t a = start_prog(target, NULL, 0);
  server_t s = start_serve(NULL);
  reply_t r;
  char v[256];

  /* A landing page at /, as node_exporter has (test_node_exporter_flags
   * reads it). */
  http(s.port, "GET", "/", NULL, &r);
  assert_int_equal(r.status, 200);
  reply_free(&r);
  http(s.port, "GET", "/metricsx", NULL, &r);
  assert_int_equal(r.status, 404);
  reply_free(&r);
  http(s.port, "POST", "/metrics", NULL, &r);
  assert_int_equal(r.status, 405);
  assert_non_null(header(&r, "Allow", v, sizeof v));
  assert_string_equal(v, "GET, HEAD");
  reply_free(&r);
  http(s.port, "DELETE", "/metrics", NULL, &r);
  assert_int_equal(r.status, 405);
  reply_free(&r);

  /* HEAD: the headers of a GET, no body. */
  http(s.port, "HEAD", "/metrics", NULL, &r);
  assert_int_equal(r.status, 200);
  assert_int_equal(r.body_len, 0);
  reply_free(&r);

  /* The text format unless OpenMetrics is asked for. */
  http(s.port, "GET", "/metrics", NULL, &r);
  assert_int_equal(r.status, 200);
  assert_non_null(header(&r, "Content-Type", v, sizeof v));
  assert_string_equal(v, "text/plain; version=0.0.4; charset=utf-8");
  assert_null(strstr(r.body, "# EOF"));
  reply_free(&r);
  http(s.port, "GET", "/metrics",
       "Accept: application/openmetrics-text;version=1.0.0,text/plain;"
       "version=0.0.4;q=0.5\r\n",
       &r);
  assert_int_equal(r.status, 200);
  assert_non_null(header(&r, "Content-Type", v, sizeof v));
  assert_string_equal(
      v, "application/openmetrics-text; version=1.0.0; charset=utf-8");
  assert_true(r.body_len > 6);
  assert_string_equal(r.body + r.body_len - 6, "# EOF\n");
  reply_free(&r);

  /* gzip when accepted: the same exposition, compressed. */
  http(s.port, "GET", "/metrics", "Accept-Encoding: gzip\r\n", &r);
  assert_int_equal(r.status, 200);
  assert_non_null(header(&r, "Content-Encoding", v, sizeof v));
  assert_string_equal(v, "gzip");
  static unsigned char plain[1 << 20];
  z_stream z = {0};
  assert_int_equal(inflateInit2(&z, 15 + 16), Z_OK);
  z.next_in = (unsigned char *)r.body;
  z.avail_in = (uInt)r.body_len;
  z.next_out = plain;
  z.avail_out = sizeof plain - 1;
  assert_int_equal(inflate(&z, Z_FINISH), Z_STREAM_END);
  plain[z.total_out] = '\0';
  inflateEnd(&z);
  assert_true(sample((char *)plain, "memstats_heap_alloc_bytes", a.pid) > 0);
  reply_free(&r);

  /* A header larger than the server takes: refused, not served. */
  size_t big = 256 * 1024;
  char *req = malloc(big + 256);
  assert_non_null(req);
  int n = snprintf(req, 256, "GET /metrics HTTP/1.1\r\nX-Big: ");
  memset(req + n, 'a', big);
  memcpy(req + n + big, "\r\n\r\n", 5);
  http_raw(s.port, req, (size_t)n + big + 4, &r);
  assert_true(r.status == 0 || r.status == 413 || r.status == 431 ||
              r.status == 400);
  reply_free(&r);
  free(req);
  /* Not HTTP at all. */
  http_raw(s.port, "\x16\x03\x01garbage\r\n\r\n", 13, &r);
  assert_true(r.status == 0 || r.status == 400);
  reply_free(&r);

  /* Many scrapers at once: every one answered, with the figures. */
  enum { NCONC = 24 };
  int fds[NCONC];
  static const char conc_req[] =
      "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  for (int i = 0; i < NCONC; i++) {
    fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {0};
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)s.port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fds[i], (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(write(fds[i], conc_req, sizeof conc_req - 1),
                     sizeof conc_req - 1);
  }
  for (int i = 0; i < NCONC; i++) {
    static char got[1 << 20];
    size_t len = 0;
    ssize_t k;
    struct pollfd p = {fds[i], POLLIN, 0};
    while (poll(&p, 1, CLIENT_GIVE_UP_MS) > 0 &&
           (k = read(fds[i], got + len, sizeof got - 1 - len)) > 0)
      len += (size_t)k;
    got[len] = '\0';
    close(fds[i]);
    assert_true(strncmp(got, "HTTP/1.1 200", 12) == 0);
    assert_true(sample(got, "memstats_heap_alloc_bytes", a.pid) > 0);
  }

  /* Still serving after all that. */
  free(scrape(s.port, NULL));
  stop_serve(s);
  stop_prog(a);
}

/* "s3cret", bcrypt cost 4. */
#define HASH "$2y$04$cF9RwSEtD0rMHdRC6By.SeT5NEogdNKIpubymmZ/QCHAEfwcRsNuq"

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  assert_int_equal(fclose(f), 0);
}

static void test_basic_auth(void **state) {
  (void)state;
  char cfg[512];
  snprintf(cfg, sizeof cfg, "%s/web.yml", dir);
  write_text(cfg, "basic_auth_users:\n  alice: " HASH "\n");
  server_t s = start_serve("--web-config", cfg, NULL);
  reply_t r;
  char v[256];
  http(s.port, "GET", "/metrics", NULL, &r);
  assert_int_equal(r.status, 401);
  assert_non_null(header(&r, "WWW-Authenticate", v, sizeof v));
  assert_non_null(strstr(v, "Basic"));
  reply_free(&r);
  /* alice:wrong, alice:s3cret, bob:s3cret (base64). */
  http(s.port, "GET", "/metrics", "Authorization: Basic YWxpY2U6d3Jvbmc=\r\n",
       &r);
  assert_int_equal(r.status, 401);
  reply_free(&r);
  http(s.port, "GET", "/metrics", "Authorization: Basic Ym9iOnMzY3JldA==\r\n",
       &r);
  assert_int_equal(r.status, 401);
  reply_free(&r);
  http(s.port, "GET", "/metrics", "Authorization: Basic !!!\r\n", &r);
  assert_int_equal(r.status, 401);
  reply_free(&r);
  http(s.port, "GET", "/metrics", "Authorization: Basic YWxpY2U6czNjcmV0\r\n",
       &r);
  assert_int_equal(r.status, 200);
  assert_non_null(strstr(r.body, "memtop_targets "));
  reply_free(&r);
  /* Other paths are 404 whoever asks: nothing to protect there. */
  stop_serve(s);
  unlink(cfg);
}

static void test_tls(void **state) {
  (void)state;
  if (!host_have_program("curl")) {
    print_message("skipped: curl is not installed (contrib/setup-deps.sh)\n");
    skip();
  }
  char cfg[512];
  snprintf(cfg, sizeof cfg, "%s/web.yml", dir);
  char text[4096];
  snprintf(text, sizeof text,
           "tls_server_config:\n  cert_file: %s/serve/test.crt\n"
           "  key_file: %s/serve/test.key\n"
           "basic_auth_users:\n  alice: " HASH "\n",
           data_dir, data_dir);
  write_text(cfg, text);
  server_t s = start_serve("--web-config", cfg, NULL);

  /* Plain HTTP to the TLS port: no HTTP answer. */
  reply_t r;
  http(s.port, "GET", "/metrics", NULL, &r);
  assert_int_equal(r.status, 0);
  reply_free(&r);

  char cmd[4096];
  static const struct {
    const char *user;
    int want;
  } cases[] = {{"", 401}, {"-u alice:wrong", 401}, {"-u alice:s3cret", 200}};
  for (size_t i = 0; i < 3; i++) {
    snprintf(cmd, sizeof cmd,
             "curl -s -o /dev/null -w '%%{http_code}' --max-time 60 "
             "--cacert %s/serve/test.crt %s https://127.0.0.1:%d/metrics",
             data_dir, cases[i].user, s.port);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char out[64] = {0};
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    pclose(p);
    if (atoi(out) != cases[i].want)
      fail_msg("%s: got '%s', want %d", cmd, out, cases[i].want);
  }
  stop_serve(s);
  unlink(cfg);
}

/* As root, with no password, memtop serve refuses to start (it would
 * show every user's processes to every local user) and says why and what
 * to do; --unsafe-no-auth (every other test) starts it anyway. */
static void test_root_needs_auth(void **state) {
  (void)state;
  if (geteuid() != 0) {
    print_message("skipped: the refusal is for root\n");
    skip();
  }
  char *argv[] = {memtop, (char *)"serve", (char *)"--listen",
                  (char *)"127.0.0.1:0", NULL};
  int said;
  pid_t pid = serve_start_stderr(argv, &said);
  char err[4096] = {0};
  size_t len = 0;
  for (;;) {
    struct pollfd p = {said, POLLIN, 0};
    if (poll(&p, 1, CLIENT_GIVE_UP_MS) <= 0)
      fail_msg("memtop serve neither refused nor said anything");
    ssize_t n = read(said, err + len, sizeof err - 1 - len);
    if (n <= 0)
      break;
    len += (size_t)n;
    if (strstr(err, "serving http"))
      fail_msg("memtop serve started as root with no password: %s", err);
  }
  close(said);
  int st;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  reaped(pid);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 1);
  assert_non_null(strstr(err, "every user's processes"));
  assert_non_null(strstr(err, "basic_auth_users"));
  assert_non_null(strstr(err, "--unsafe-no-auth"));
}

/* openssl s_client's handshake with the server: 1 if it agreed on a
 * protocol and a suite. */
static int tls_handshake(int port, const char *args) {
  char cmd[1024], out[16384];
  snprintf(cmd, sizeof cmd,
           "timeout 60 openssl s_client -connect 127.0.0.1:%d %s "
           "</dev/null 2>&1",
           port, args);
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  size_t n = fread(out, 1, sizeof out - 1, p);
  out[n] = '\0';
  pclose(p);
  return strstr(out, "Cipher is ") && !strstr(out, "Cipher is (NONE)");
}

/* The real openssl s_client against memtop's TLS: TLS 1.2 and 1.3 by
 * default, nothing older, no CBC-SHA1 suite; the web config's
 * min_version and cipher_suites applied. */
static void test_tls_versions(void **state) {
  (void)state;
  if (!host_have_program("openssl") || !host_have_program("timeout")) {
    print_message("skipped: openssl is not installed "
                  "(contrib/setup-deps.sh)\n");
    skip();
  }
  char cfg[512], text[4096];
  snprintf(cfg, sizeof cfg, "%s/web.yml", dir);
  static const char *const extra[] = {
      "", "  min_version: TLS13\n",
      "  cipher_suites:\n    - TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256\n"};
  for (int i = 0; i < 3; i++) {
    snprintf(text, sizeof text,
             "tls_server_config:\n  cert_file: %s/serve/test.crt\n"
             "  key_file: %s/serve/test.key\n%s"
             "basic_auth_users:\n  alice: " HASH "\n",
             data_dir, data_dir, extra[i]);
    write_text(cfg, text);
    server_t s = start_serve("--web-config", cfg, NULL);
    /* @SECLEVEL=0: this openssl offers what is asked, old or not. */
    int v10 = tls_handshake(s.port, "-tls1 -cipher DEFAULT@SECLEVEL=0");
    int v11 = tls_handshake(s.port, "-tls1_1 -cipher DEFAULT@SECLEVEL=0");
    int v12 = tls_handshake(s.port, "-tls1_2");
    int v13 = tls_handshake(s.port, "-tls1_3");
    int cbc = tls_handshake(s.port, "-tls1_2 -cipher "
                                    "'ECDHE-ECDSA-AES128-SHA:AES128-SHA:"
                                    "AES256-SHA@SECLEVEL=0'");
    int chacha =
        tls_handshake(s.port, "-tls1_2 -cipher ECDHE-ECDSA-CHACHA20-POLY1305");
    stop_serve(s);
    if (v10 || v11)
      fail_msg("config %d: TLS 1.0 %s, TLS 1.1 %s", i, v10 ? "taken" : "no",
               v11 ? "taken" : "no");
    if (cbc)
      fail_msg("config %d: a CBC-SHA1 suite was taken", i);
    if (i == 0 && !(v12 && v13 && chacha))
      fail_msg("defaults: TLS 1.2 %d, TLS 1.3 %d, ChaCha20 %d", v12, v13,
               chacha);
    if (i == 1 && (v12 || !v13))
      fail_msg("min_version TLS13: TLS 1.2 %d, TLS 1.3 %d", v12, v13);
    if (i == 2 && (!v12 || chacha))
      fail_msg("one suite listed: TLS 1.2 %d, ChaCha20 %d", v12, chacha);
  }
  unlink(cfg);
}

/* A TLS handshake costs memtop's loop milliseconds before any password is
 * seen: 48 connections at once from one address, beyond the 32 it may
 * open at once, are closed as they come (the ones a scraper's answer
 * came after were let in or closed already); the scraper is served. */
static void test_tls_handshake_rate(void **state) {
  (void)state;
  if (!host_have_program("curl")) {
    print_message("skipped: curl is not installed (contrib/setup-deps.sh)\n");
    skip();
  }
  char cfg[512], text[4096], cmd[4096];
  snprintf(cfg, sizeof cfg, "%s/web.yml", dir);
  snprintf(text, sizeof text,
           "tls_server_config:\n  cert_file: %s/serve/test.crt\n"
           "  key_file: %s/serve/test.key\n"
           "basic_auth_users:\n  alice: " HASH "\n",
           data_dir, data_dir);
  write_text(cfg, text);
  server_t s = start_serve("--web-config", cfg, NULL);
  enum { N = 48 };
  int fds[N];
  for (int i = 0; i < N; i++)
    fds[i] = connect_from("127.0.0.9", s.port);
  snprintf(cmd, sizeof cmd,
           "curl -s -o /dev/null -w '%%{http_code}' --max-time 60 "
           "--cacert %s/serve/test.crt -u alice:s3cret "
           "https://127.0.0.1:%d/metrics",
           data_dir, s.port);
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  char out[64] = {0};
  size_t n = fread(out, 1, sizeof out - 1, p);
  out[n] = '\0';
  pclose(p);
  int closed = 0;
  for (int i = 0; i < N; i++) {
    char b[64];
    ssize_t got = recv(fds[i], b, sizeof b, MSG_DONTWAIT);
    closed += got == 0 || (got < 0 && errno != EAGAIN);
    close(fds[i]);
  }
  stop_serve(s);
  unlink(cfg);
  if (atoi(out) != 200)
    fail_msg("the scraper got '%s'", out);
  if (closed < 1 || closed > N - 32)
    fail_msg("%d of %d connections from one address closed at once", closed, N);
}

/* Wrong passwords from one address: 401 until it has used its tries,
 * then 429 with Retry-After and no bcrypt; a scraper from another address
 * is served all along, and the right password from the flooding address
 * too once proven (the cache costs no bcrypt). */
static void test_wrong_password_flood(void **state) {
  (void)state;
  char cfg[512];
  snprintf(cfg, sizeof cfg, "%s/web.yml", dir);
  write_text(cfg, "basic_auth_users:\n  alice: " HASH "\n");
  server_t s = start_serve("--web-config", cfg, NULL);
  reply_t r;
  char v[64];
  static const char right[] = "Authorization: Basic YWxpY2U6czNjcmV0\r\n";
  static const char wrong[] = "Authorization: Basic YWxpY2U6d3Jvbmc=\r\n";
  http_from("127.0.0.3", s.port, "GET", "/metrics", right, &r);
  assert_int_equal(r.status, 200);
  reply_free(&r);
  int n401 = 0, n429 = 0;
  for (int i = 0; i < 40; i++) {
    http_from("127.0.0.3", s.port, "GET", "/metrics", wrong, &r);
    if (r.status == 401) {
      n401++;
      assert_int_equal(n429, 0); /* no 401 once limited */
    } else if (r.status == 429) {
      n429++;
      assert_non_null(header(&r, "Retry-After", v, sizeof v));
      assert_true(atoi(v) >= 1);
    } else {
      fail_msg("wrong password: status %d", r.status);
    }
    reply_free(&r);
  }
  /* Ten tries, a few more while the first ones were checked at most. */
  if (n401 < 5 || n401 > 15 || n429 < 25)
    fail_msg("%d times 401, %d times 429", n401, n429);
  /* Another address, and the proven password from the same one. */
  http_from("127.0.0.4", s.port, "GET", "/metrics", right, &r);
  assert_int_equal(r.status, 200);
  reply_free(&r);
  http_from("127.0.0.3", s.port, "GET", "/metrics", right, &r);
  assert_int_equal(r.status, 200);
  reply_free(&r);
  stop_serve(s);
  unlink(cfg);
}

/* A child that holds n connections from the loopback addresses srcs,
 * each a request line and then one header line every second, as a
 * slowloris does: it writes "R\n" once they are all sending, then, every
 * second, how many the server has not closed, and exits when none is
 * left (or after CLIENT_GIVE_UP_MS). */
static pid_t slow_clients(int port, const char *const *srcs, int nsrc, int n,
                          int *report) {
  int pr[2];
  assert_int_equal(pipe2(pr, O_CLOEXEC), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid) {
    close(pr[1]);
    *report = pr[0];
    return pid;
  }
  close(pr[0]);
  signal(SIGPIPE, SIG_IGN);
  int *fds = calloc((size_t)n, sizeof *fds);
  if (!fds)
    _exit(1);
  static const char line[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < n; i++) {
    fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in me = {0}, sa = {0};
    me.sin_family = sa.sin_family = AF_INET;
    inet_pton(AF_INET, srcs[i % nsrc], &me.sin_addr);
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fds[i], (struct sockaddr *)&me, sizeof me) != 0 ||
        connect(fds[i], (struct sockaddr *)&sa, sizeof sa) != 0)
      _exit(2);
    if (send(fds[i], line, sizeof line - 1, MSG_NOSIGNAL) < 0)
      _exit(3);
  }
  int open_n = n;
  for (int round = 0; round < CLIENT_GIVE_UP_MS / 1000 && open_n > 0; round++) {
    sleep(1);
    open_n = 0;
    for (int i = 0; i < n; i++) {
      if (fds[i] < 0)
        continue;
      char b[512];
      ssize_t got = recv(fds[i], b, sizeof b, MSG_DONTWAIT);
      int closed = got == 0 || (got < 0 && errno != EAGAIN);
      if (!closed && send(fds[i], "X-Slow: 1\r\n", 11, MSG_NOSIGNAL) < 0)
        closed = 1;
      if (closed) {
        close(fds[i]);
        fds[i] = -1;
      } else {
        open_n++;
      }
    }
    char msg[32];
    int len = round == 0 ? snprintf(msg, sizeof msg, "R\n%d\n", open_n)
                         : snprintf(msg, sizeof msg, "%d\n", open_n);
    if (write(pr[1], msg, (size_t)len) < 0)
      _exit(4);
  }
  _exit(open_n == 0 ? 0 : 5);
}

/* Reads the child's reports until the line want is seen (1), or until it
 * exits (want NULL: 1, else 0). The last count in *last. */
static int slow_wait(int fd, const char *want, int *last) {
  static char buf[8192];
  static size_t len;
  for (;;) {
    char *nl;
    while ((nl = memchr(buf, '\n', len))) {
      *nl = '\0';
      int match = want && strcmp(buf, want) == 0;
      if (buf[0] >= '0' && buf[0] <= '9')
        *last = atoi(buf);
      size_t used = (size_t)(nl + 1 - buf);
      memmove(buf, nl + 1, len - used);
      len -= used;
      if (match)
        return 1;
    }
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 2 * CLIENT_GIVE_UP_MS) <= 0)
      return 0;
    ssize_t n = read(fd, buf + len, sizeof buf - len);
    if (n <= 0)
      return want == NULL && n == 0;
    len += (size_t)n;
  }
}

/* 192 connections from three addresses, each trickling a header line
 * every second (the idle timeout never fires): a scraper from an address
 * with no connection is still served, and every slow connection is
 * closed by the deadline for its headers although it keeps sending. */
static void test_slowloris(void **state) {
  (void)state;
  proc_t a = start_prog(target, NULL, 0);
  server_t s = start_serve(NULL);
  static const char *const srcs[] = {"127.0.0.2", "127.0.0.3", "127.0.0.4"};
  int report, last = -1;
  pid_t slow = slow_clients(s.port, srcs, 3, 192, &report);
  kid(slow);
  assert_true(slow_wait(report, "R", &last));
  /* Every slot taken (128), and 64 more waiting to be let in. */
  char *body = scrape(s.port, NULL);
  assert_true(sample(body, "memstats_heap_alloc_bytes", a.pid) > 0);
  free(body);
  /* The slow ones are closed, all of them, while still sending. */
  assert_true(slow_wait(report, NULL, &last));
  int st;
  assert_int_equal(waitpid(slow, &st, 0), slow);
  reaped(slow);
  close(report);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
    fail_msg("slow clients: %d of 192 still open (status %d)", last, st);
  free(scrape(s.port, NULL));
  stop_serve(s);
  stop_prog(a);
}

/* The figures of memtop_figures_timestamp_seconds; -1 if absent. */
static double figures_time(const char *body) {
  const char *l = strstr(body, "\nmemtop_figures_timestamp_seconds ");
  return l ? strtod(l + strlen("\nmemtop_figures_timestamp_seconds "), NULL)
           : -1;
}

static void test_hung_target(void **state) {
  (void)state;
  proc_t a = start_prog(target, NULL, 0), b = start_prog(target, NULL, 0);
  /* A request to a hung target would wait two minutes: only the round's
   * own bound can end it before the client gives up. -d 0.1: every
   * scrape below asks for a new round. */
  setenv("MEMTOP_TIMEOUT_MS", "120000", 1);
  server_t s = start_serve("-d", "0.1", NULL);
  unsetenv("MEMTOP_TIMEOUT_MS");
  char *body = scrape(s.port, NULL);
  double before = sample(body, "memstats_heap_alloc_bytes", a.pid);
  assert_true(before > 0);
  free(body);

  kill(a.pid, SIGSTOP);
  double stopped = mono_s();
  /* Every scrape is answered (the client gives up after a minute), with
   * the stopped target's last figures and the other's; the first ones
   * may be those of a round made before the stop, then a round made
   * since serves the stopped target late, its figures older than the
   * running one's, which were read after the stop. */
  int late = 0;
  for (int i = 0; i < 100 && !late; i++) {
    struct timespec ts = {0, 200000000};
    nanosleep(&ts, NULL);
    body = scrape(s.port, NULL);
    assert_true(sample(body, "memstats_heap_alloc_bytes", a.pid) == before);
    assert_true(sample(body, "memstats_heap_alloc_bytes", b.pid) > 0);
    const char *l = strstr(body, "\nmemtop_scrape_late_targets ");
    assert_non_null(l);
    late = atoi(l + 28);
    if (late) {
      double age_a = sample(body, "memstats_snapshot_age_seconds", a.pid);
      double age_b = sample(body, "memstats_snapshot_age_seconds", b.pid);
      if (!(age_a > age_b))
        fail_msg("stopped target's age %g, running one's %g", age_a, age_b);
      /* The running target was read again after the stop; the stopped
       * one, still asked from before, was not waited for. */
      if (!(age_b < mono_s() - stopped))
        fail_msg("running target's figures %g s old, but the stop was %g s "
                 "ago",
                 age_b, mono_s() - stopped);
    }
    free(body);
  }
  if (!late)
    fail_msg("the stopped target was never served as late");
  kill(a.pid, SIGCONT);
  stop_serve(s);
  stop_prog(a);
  stop_prog(b);
}

/* A scrape waits for no target (issue 24): once a round has been made,
 * it is answered with the answer that round prepared, the same bytes for
 * every scrape until the next round ends, and a scrape that finds them
 * older than -d starts that next round, served to the scrapes after it.
 * A target that allocates all the time (mt_target churn) shows it: the
 * scrape after the first, more than -d later, has the same figures
 * (memstats_mallocs_total, and memtop_figures_timestamp_seconds: when
 * they were gathered), where a scrape that read the targets would have
 * new ones; a later scrape has the next round's. */
static void test_scrape_waits_for_no_target(void **state) {
  (void)state;
  proc_t a = start_prog(target, "churn", 0);
  server_t s = start_serve("-d", "0.1", NULL);
  char *first = scrape(s.port, NULL);
  double m0 = sample(first, "memstats_mallocs_total", a.pid);
  double t0 = figures_time(first);
  assert_true(m0 > 0);
  struct timespec ts = {0, 300000000};
  nanosleep(&ts, NULL);
  char *second = scrape(s.port, NULL);
  if (strcmp(first, second) != 0)
    fail_msg("the second scrape was not the first round's answer: mallocs "
             "%.0f then %.0f, figures of %.6f then %.6f",
             m0, sample(second, "memstats_mallocs_total", a.pid), t0,
             figures_time(second));
  free(second);
  assert_true(t0 > 0);
  /* The next round, which that scrape asked for, is served later. */
  double m = m0, t = t0;
  for (int i = 0; i < 300 && m == m0; i++) {
    nanosleep(&ts, NULL);
    char *body = scrape(s.port, NULL);
    m = sample(body, "memstats_mallocs_total", a.pid);
    t = figures_time(body);
    free(body);
  }
  if (!(m > m0 && t > t0))
    fail_msg("no later round served: mallocs %.0f then %.0f, figures of "
             "%.6f then %.6f",
             m0, m, t0, t);
  free(first);
  stop_serve(s);
  stop_prog(a);
}

static void test_targets_come_and_go(void **state) {
  (void)state;
  server_t s = start_serve("-d", "0.1", NULL);
  free(scrape(s.port, NULL)); /* a round before the target exists */
  proc_t a = start_prog(target, NULL, 0);
  /* memtop lists the processes every few seconds: the new one is served
   * by a scrape within a minute (the test fails after that). */
  struct timespec ts = {0, 200000000};
  char *body = NULL;
  for (int i = 0; i < 300; i++) {
    nanosleep(&ts, NULL);
    free(body);
    body = scrape(s.port, NULL);
    if (sample(body, "memstats_heap_alloc_bytes", a.pid) > 0)
      break;
  }
  assert_true(sample(body, "memstats_heap_alloc_bytes", a.pid) > 0);
  free(body);

  stop_prog(a); /* exited and reaped */
  nanosleep(&ts, NULL);
  body = scrape(s.port, NULL);
  if (has_pid(body, a.pid))
    fail_msg("pid %d exited but is still served:\n%s", a.pid, body);
  free(body);
  stop_serve(s);
}

/* A socket directory of the user's own that is not safe (open to group
 * or others) is skipped by the listing: serve says so when it starts,
 * with the fix, since its scrapes would only lack those processes. */
static void test_unsafe_dir_said(void **state) {
  (void)state;
  char *argv[] = {memtop,
                  (char *)"serve",
                  (char *)"--listen",
                  (char *)"127.0.0.1:0",
                  (char *)"--unsafe-no-auth",
                  NULL};
  int said;
  assert_int_equal(chmod(dir, 0755), 0);
  pid_t pid = serve_start_stderr(argv, &said);
  char err[4096] = {0};
  size_t len = 0;
  struct pollfd p = {said, POLLIN, 0};
  /* Its first lines, up to the refusal (or a generous limit). */
  for (int i = 0; i < 300 && !strstr(err, "not served") && len < sizeof err - 1;
       i++) {
    if (poll(&p, 1, 100) <= 0)
      continue;
    ssize_t n = read(said, err + len, sizeof err - 1 - len);
    if (n <= 0)
      break;
    len += (size_t)n;
  }
  kill(pid, SIGTERM);
  int st;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  close(said);
  assert_int_equal(chmod(dir, 0700), 0);
  assert_non_null(strstr(err, "serving http"));
  assert_non_null(strstr(err, "not trusting the socket directory"));
  assert_non_null(strstr(err, "open to group or others"));
  assert_non_null(strstr(err, "chmod 700"));
}

static void test_boehm_pauses(void **state) {
  (void)state;
  if (access(gc_prog, X_OK) != 0) {
    print_message("skipped: %s not built (libgc-dev)\n", gc_prog);
    skip();
  }
  proc_t g = start_prog(gc_prog, NULL, 1);
  server_t s = start_serve(NULL);
  char *body = scrape(s.port, NULL);
  double count = sample(body, "memstats_gc_pause_seconds_count", g.pid);
  double sum = sample(body, "memstats_gc_pause_seconds_sum", g.pid);
  double num_gc = json_field(g.pid, "NumGC");
  double total_ns = json_field(g.pid, "PauseTotalNs");
  if (count != num_gc || num_gc < 7)
    fail_msg("histogram count %g, NumGC %g (7 collections at least)", count,
             num_gc);
  assert_true(fabs(sum - total_ns / 1e9) <= 1e-9 * total_ns / 1e9 + 1e-12);
  char key[96];
  snprintf(key, sizeof key, "memstats_gc_pause_seconds_bucket{pid=\"%d\",",
           g.pid);
  assert_non_null(strstr(body, key));
  snprintf(key, sizeof key, "\nmemstats_gc_cycles_total{pid=\"%d\",", g.pid);
  assert_non_null(strstr(body, key));
  free(body);
  stop_serve(s);
  stop_prog(g);
}

/* Sends GET path n times on one connection, each after the answer
 * before it has been read whole (by its Content-Length): the statuses in
 * status[] (0: the server had closed); the last body into *last
 * (malloc'd). Returns how many were answered. */
static int keepalive(int port, const char *path, int n, int *status,
                     char **last) {
  int fd = connect_from(NULL, port), answered = 0;
  static char buf[1 << 21];
  *last = NULL;
  for (int i = 0; i < n; i++) {
    char req[512];
    int rl =
        snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path);
    status[i] = 0;
    if (send(fd, req, (size_t)rl, MSG_NOSIGNAL) != rl)
      break;
    size_t len = 0;
    char *end = NULL;
    long want = -1;
    for (;;) {
      if (end && want >= 0 && len >= (size_t)(end + 4 - buf) + (size_t)want)
        break;
      struct pollfd p = {fd, POLLIN, 0};
      if (poll(&p, 1, CLIENT_GIVE_UP_MS) <= 0)
        fail_msg("no answer from memtop serve in %d ms", CLIENT_GIVE_UP_MS);
      ssize_t k = recv(fd, buf + len, sizeof buf - 1 - len, 0);
      if (k <= 0)
        break;
      len += (size_t)k;
      buf[len] = '\0';
      if (!end && (end = strstr(buf, "\r\n\r\n")) != NULL) {
        const char *cl = strcasestr(buf, "\r\nContent-Length:");
        want = cl && cl < end ? strtol(cl + 17, NULL, 10) : -1;
      }
    }
    if (!end || want < 0 || strncmp(buf, "HTTP/1.1 ", 9) != 0)
      break;
    status[i] = atoi(buf + 9);
    answered++;
    free(*last);
    *last = strndup(end + 4, (size_t)want);
  }
  close(fd);
  return answered;
}

/* node_exporter's flags and manners: --web.listen-address,
 * --web.telemetry-path, a landing page at / linking to the metrics,
 * keep-alive (two scrapes on one connection, the first of them waiting
 * for the target), SIGHUP survived, memtop's own process_* metrics and a
 * read duration per target, all valid for promtool; --no-size-classes and
 * --group-by comm shape the series. */
static void test_node_exporter_flags(void **state) {
  (void)state;
  proc_t a = start_prog(target, NULL, 0);
  server_t s = start_serve("--web.listen-address", "127.0.0.1:0",
                           "--web.telemetry-path", "/node/metrics",
                           "--group-by", "comm", "--no-size-classes", NULL);
  reply_t r;
  char v[256];
  http(s.port, "GET", "/", NULL, &r);
  assert_int_equal(r.status, 200);
  assert_non_null(header(&r, "Content-Type", v, sizeof v));
  assert_string_equal(v, "text/html; charset=utf-8");
  assert_non_null(strstr(r.body, "<a href=\"/node/metrics\">"));
  reply_free(&r);
  http(s.port, "GET", "/metrics", NULL, &r);
  assert_int_equal(r.status, 404);
  reply_free(&r);

  /* Keep-alive: both answered on the one connection. */
  int st[2];
  char *body = NULL;
  int answered = keepalive(s.port, "/node/metrics", 2, st, &body);
  if (answered != 2)
    fail_msg("%d of 2 scrapes answered on one connection", answered);
  assert_int_equal(st[0], 200);
  assert_int_equal(st[1], 200);
  assert_non_null(body);

  /* SIGHUP, as a closed terminal or a service manager sends: served on. */
  assert_int_equal(kill(s.pid, SIGHUP), 0);
  struct timespec ts = {0, 200000000};
  nanosleep(&ts, NULL);
  int wst;
  assert_int_equal(waitpid(s.pid, &wst, WNOHANG), 0);
  free(body);
  http(s.port, "GET", "/node/metrics", NULL, &r);
  assert_int_equal(r.status, 200);
  body = r.body;

  static const char *const self[] = {"\nprocess_cpu_seconds_total ",
                                     "\nprocess_resident_memory_bytes ",
                                     "\nprocess_virtual_memory_bytes ",
                                     "\nprocess_start_time_seconds ",
                                     "\nprocess_open_fds ",
                                     "\nprocess_max_fds "};
  for (size_t i = 0; i < sizeof self / sizeof self[0]; i++)
    if (!strstr(body, self[i]))
      fail_msg("no%s in the exposition", self[i]);
  const char *rss = strstr(body, "\nprocess_resident_memory_bytes ");
  assert_true(strtod(rss + 31, NULL) > 0);
  assert_true(sample(body, "memtop_scrape_duration_seconds", a.pid) >= 0);
  char want[128];
  snprintf(want, sizeof want, "memstats_heap_alloc_bytes{pid=\"%d\",comm=\"",
           a.pid);
  const char *line = strstr(body, want);
  assert_non_null(line);
  assert_non_null(strstr(line, ",group=\"mt_target\"}"));
  assert_null(strstr(body, "memstats_size_class_"));
  if (host_have_program("promtool")) {
    char path[512], cmd[700];
    snprintf(path, sizeof path, "%s/exposition.txt", dir);
    write_text(path, body);
    snprintf(cmd, sizeof cmd, "promtool check metrics < '%s'", path);
    if (system(cmd) != 0)
      fail_msg("promtool check metrics refused the exposition (%s)", path);
    unlink(path);
  } else {
    print_message("promtool is not installed: its check skipped\n");
  }
  reply_free(&r);
  stop_serve(s);
  stop_prog(a);
}

static void copy_file(const char *from, const char *to) {
  char tmp[600];
  FILE *in = fopen(from, "r");
  assert_non_null(in);
  snprintf(tmp, sizeof tmp, "%s.tmp", to);
  FILE *out = fopen(tmp, "w");
  assert_non_null(out);
  char buf[8192];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, in)) > 0)
    assert_int_equal(fwrite(buf, 1, n, out), n);
  fclose(in);
  assert_int_equal(fclose(out), 0);
  /* Renamed over, as a certificate manager does. */
  assert_int_equal(rename(tmp, to), 0);
}

/* curl's status code for GET /metrics over https, trusting the
 * certificate ca; 0 when no HTTP answer came (the handshake failed). */
static int curl_code(int port, const char *ca, const char *user) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd,
           "curl -s -o /dev/null -w '%%{http_code}' --max-time 60 "
           "--cacert %s/serve/%s %s https://127.0.0.1:%d/metrics",
           data_dir, ca, user, port);
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  char out[64] = {0};
  size_t n = fread(out, 1, sizeof out - 1, p);
  out[n] = '\0';
  pclose(p);
  return atoi(out);
}

/* The web config read again when it changes, as exporter-toolkit reads
 * it: a certificate rotated (renamed over) is served from the next
 * connection, a user removed needs no password from the next request, a
 * file that no longer parses is refused (and said on stderr) until it is
 * fixed; memtop never restarts. */
static void test_web_config_reread(void **state) {
  (void)state;
  if (!host_have_program("curl")) {
    print_message("skipped: curl is not installed (contrib/setup-deps.sh)\n");
    skip();
  }
  char cfg[512], crt[512], key[512], from[1400], text[1024];
  snprintf(cfg, sizeof cfg, "%s/web.yml", dir);
  snprintf(crt, sizeof crt, "%s/server.crt", dir);
  snprintf(key, sizeof key, "%s/server.key", dir);
  snprintf(from, sizeof from, "%s/serve/test.crt", data_dir);
  copy_file(from, crt);
  snprintf(from, sizeof from, "%s/serve/test.key", data_dir);
  copy_file(from, key);
  /* Paths relative to the config's folder. */
  static const char with_users[] =
      "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
      "basic_auth_users:\n  alice: " HASH "\n";
  static const char without_users[] =
      "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n";
  write_text(cfg, with_users);
  server_t s = start_serve("--web.config.file", cfg, NULL);
  assert_int_equal(curl_code(s.port, "test.crt", "-u alice:s3cret"), 200);
  assert_int_equal(curl_code(s.port, "test.crt", ""), 401);
  assert_int_equal(curl_code(s.port, "rotated.crt", "-u alice:s3cret"), 0);

  /* The rotation: key, then certificate. */
  snprintf(from, sizeof from, "%s/serve/rotated.key", data_dir);
  copy_file(from, key);
  snprintf(from, sizeof from, "%s/serve/rotated.crt", data_dir);
  copy_file(from, crt);
  assert_int_equal(curl_code(s.port, "rotated.crt", "-u alice:s3cret"), 200);
  assert_int_equal(curl_code(s.port, "test.crt", "-u alice:s3cret"), 0);

  /* The users: none any more, no password asked. */
  snprintf(text, sizeof text, "%s", without_users);
  write_text(cfg, text);
  assert_int_equal(curl_code(s.port, "rotated.crt", ""), 200);

  /* A file that no longer parses: refused, said, then fixed. */
  write_text(cfg, "tls_server_config: [\n");
  assert_int_equal(curl_code(s.port, "rotated.crt", ""), 0);
  write_text(cfg, with_users);
  assert_int_equal(curl_code(s.port, "rotated.crt", ""), 401);
  assert_int_equal(curl_code(s.port, "rotated.crt", "-u alice:s3cret"), 200);
  char err[4096] = {0};
  struct pollfd p = {s.err, POLLIN, 0};
  size_t len = 0;
  while (len < sizeof err - 1 && poll(&p, 1, 0) > 0) {
    ssize_t n = read(s.err, err + len, sizeof err - 1 - len);
    if (n <= 0)
      break;
    len += (size_t)n;
  }
  assert_non_null(strstr(err, "the web config changed and cannot be used"));
  stop_serve(s);
  unlink(cfg);
  unlink(crt);
  unlink(key);
}

/* `go tool pprof -top` on URL (SSL_CERT_FILE trusting ca, HOME and
 * GOCACHE under the test's directory): its output (malloc'd); fails the
 * test if pprof does. */
static char *go_pprof_top(const char *url, const char *ca) {
  char cmd[3000], out[600];
  snprintf(out, sizeof out, "%s/pprof-top.txt", dir);
  snprintf(cmd, sizeof cmd,
           "SSL_CERT_FILE='%s/serve/%s' HOME='%s' GOCACHE='%s/gocache' "
           "PPROF_TMPDIR='%s' TZ=UTC timeout 120 go tool pprof -top "
           "-symbolize=none '%s' >'%s' 2>&1",
           data_dir, ca, dir, dir, dir, url, out);
  int st = system(cmd);
  FILE *f = fopen(out, "r");
  assert_non_null(f);
  static char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  fclose(f);
  unlink(out);
  if (st != 0)
    fail_msg("go tool pprof %s failed: %s", url, buf);
  return strdup(buf);
}

/* /debug/pprof/heap?pid=N[&seconds=S] behind the same TLS and basic auth
 * as the metrics: the real `go tool pprof` reads a profiled program's
 * heap over https with a user and password in the URL, by function name
 * (the profile resolved by memtop, as `memtop profile` resolves it), and
 * its growth over a second; without the password 401, a bad pid 400, a
 * process that runs no libmemstats an error that says so. */
static void test_pprof_heap(void **state) {
  (void)state;
  if (!host_have_program("go") || !host_have_program("curl")) {
    print_message("skipped: go (golang-go) or curl is not installed\n");
    skip();
  }
  char prog[1300], ld[1300], line[256] = "";
  snprintf(prog, sizeof prog, "%s/progs/pl_prof", build_dir);
  snprintf(ld, sizeof ld, "LD_PRELOAD=%s", preload);
  const char *argv[] = {prog, "sites", NULL};
  const char *env[] = {ld, "MEMSTATS_PROFILE_RATE=1", NULL};
  target_t t;
  assert_int_equal(target_launch(&t, argv, NULL, env, NULL, NULL, 0), 0);
  kid(t.pid);
  while (strncmp(line, "ready ", 6) != 0)
    if (target_read_line(t.out, line, sizeof line) != 0)
      fail_msg("pl_prof did not start");
  close(t.out);
  proc_t p = {t.pid, t.in};

  char cfg[512], text[4096];
  snprintf(cfg, sizeof cfg, "%s/web.yml", dir);
  snprintf(text, sizeof text,
           "tls_server_config:\n  cert_file: %s/serve/test.crt\n"
           "  key_file: %s/serve/test.key\n"
           "basic_auth_users:\n  alice: " HASH "\n",
           data_dir, data_dir);
  write_text(cfg, text);
  server_t s = start_serve("--web.config.file", cfg, NULL);

  char url[512];
  snprintf(url, sizeof url,
           "https://alice:s3cret@127.0.0.1:%d/debug/pprof/heap?pid=%d", s.port,
           p.pid);
  char *top = go_pprof_top(url, "test.crt");
  assert_non_null(strstr(top, "Type: inuse_space"));
  assert_non_null(strstr(top, " f_big\n"));
  assert_non_null(strstr(top, " f_small\n"));
  free(top);
  snprintf(url, sizeof url,
           "https://alice:s3cret@127.0.0.1:%d/debug/pprof/heap?pid=%d"
           "&seconds=1",
           s.port, p.pid);
  top = go_pprof_top(url, "test.crt");
  assert_non_null(strstr(top, "(growth over the interval)"));
  free(top);

  /* The same door as the metrics: no password, no profile. */
  char cmd[2048], out[256];
  static const struct {
    const char *user, *query;
    int want;
  } cases[] = {{"", "?pid=1", 401},
               {"-u alice:s3cret", "?pid=x", 400},
               {"-u alice:s3cret", "", 400},
               {"-u alice:s3cret", "?pid=1&seconds=100000", 400}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    snprintf(cmd, sizeof cmd,
             "curl -s -o /dev/null -w '%%{http_code}' --max-time 60 "
             "--cacert %s/serve/test.crt %s "
             "'https://127.0.0.1:%d/debug/pprof/heap%s'",
             data_dir, cases[i].user, s.port, cases[i].query);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    size_t n = fread(out, 1, sizeof out - 1, f);
    out[n] = '\0';
    pclose(f);
    if (atoi(out) != cases[i].want)
      fail_msg("%s: got '%s', want %d", cmd, out, cases[i].want);
  }
  /* This test's own process runs no libmemstats: said, not served. */
  snprintf(cmd, sizeof cmd,
           "curl -s --max-time 60 --cacert %s/serve/test.crt -u alice:s3cret "
           "'https://127.0.0.1:%d/debug/pprof/heap?pid=%d'",
           data_dir, s.port, (int)getpid());
  FILE *f = popen(cmd, "r");
  assert_non_null(f);
  size_t n = fread(text, 1, sizeof text - 1, f);
  text[n] = '\0';
  pclose(f);
  assert_non_null(strstr(text, "libmemstats"));
  stop_serve(s);
  stop_prog(p);
  unlink(cfg);
}

/* ------------------------------------------------------------------------
 * A real Prometheus
 * ------------------------------------------------------------------------ */

static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in sa = {0};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof sa;
  assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
  assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
  close(fd);
  return ntohs(sa.sin_port);
}

/* Asks Prometheus's query API for `query`; the first result's value, or
 * -1 while there is none; its label `label` into lab (when both are
 * given; "" if absent). */
static double prom_query_label(int port, const char *query, const char *label,
                               char *lab, size_t lablen) {
  char path[512], enc[400];
  size_t o = 0;
  if (lab)
    lab[0] = '\0';
  for (const char *c = query; *c && o + 4 < sizeof enc; c++) {
    if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
        (*c >= '0' && *c <= '9') || *c == '_')
      enc[o++] = *c;
    else
      o += (size_t)snprintf(enc + o, 4, "%%%02X", (unsigned char)*c);
  }
  enc[o] = '\0';
  snprintf(path, sizeof path, "/api/v1/query?query=%s", enc);
  reply_t r;
  http(port, "GET", path, NULL, &r);
  double v = -1;
  if (r.status == 200) {
    json_error_t e;
    json_t *root = json_loads(r.body, 0, &e);
    json_t *res = json_object_get(json_object_get(root, "data"), "result");
    json_t *first = json_array_get(res, 0);
    json_t *value = json_array_get(json_object_get(first, "value"), 1);
    if (json_is_string(value))
      v = strtod(json_string_value(value), NULL);
    json_t *l =
        label ? json_object_get(json_object_get(first, "metric"), label) : NULL;
    if (lab && json_is_string(l))
      snprintf(lab, lablen, "%s", json_string_value(l));
    json_decref(root);
  }
  reply_free(&r);
  return v;
}

static double prom_query(int port, const char *query) {
  return prom_query_label(port, query, NULL, NULL, 0);
}

/* A real Prometheus scraping memtop serve on serve_port every second at
 * metrics_path, its API on a free port (*pport), its files in dir. */
static pid_t prom_start(int serve_port, const char *metrics_path, int *pport) {
  *pport = free_port();
  char cfg[512], tsdb[512], addr[64], flag_cfg[600], flag_tsdb[600],
      flag_addr[128];
  snprintf(cfg, sizeof cfg, "%s/prometheus.yml", dir);
  snprintf(tsdb, sizeof tsdb, "%s/tsdb", dir);
  char text[1024];
  snprintf(text, sizeof text,
           "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
           "scrape_configs:\n  - job_name: memtop\n"
           "    metrics_path: %s\n    static_configs:\n"
           "      - targets: ['127.0.0.1:%d']\n",
           metrics_path, serve_port);
  write_text(cfg, text);
  snprintf(addr, sizeof addr, "127.0.0.1:%d", *pport);
  snprintf(flag_cfg, sizeof flag_cfg, "--config.file=%s", cfg);
  snprintf(flag_tsdb, sizeof flag_tsdb, "--storage.tsdb.path=%s", tsdb);
  snprintf(flag_addr, sizeof flag_addr, "--web.listen-address=%s", addr);
  pid_t prom = fork();
  assert_true(prom >= 0);
  if (prom == 0) {
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    execlp("prometheus", "prometheus", flag_cfg, flag_tsdb, flag_addr,
           (char *)NULL);
    _exit(126);
  }
  kid(prom);
  return prom;
}

/* Prometheus starts, scrapes every second, and answers: the first value
 * of `query` (a minute at most, then the test fails), its label `label`
 * into lab. */
static double prom_wait(pid_t prom, int pport, const char *query,
                        const char *label, char *lab, size_t lablen) {
  double got = -1;
  for (int i = 0; i < 600 && got < 0; i++) {
    struct timespec ts = {0, 100000000};
    nanosleep(&ts, NULL);
    int st;
    if (waitpid(prom, &st, WNOHANG) == prom)
      fail_msg("prometheus exited (status %d)", st);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {0};
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)pport);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int up = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    close(fd);
    if (up)
      got = prom_query_label(pport, query, label, lab, lablen);
  }
  return got;
}

static void prom_stop(pid_t prom) {
  int st;
  kill(prom, SIGTERM);
  waitpid(prom, &st, 0);
  reaped(prom);
  char rm[700], cfg[512];
  snprintf(rm, sizeof rm, "rm -rf '%s/tsdb'", dir);
  assert_int_equal(system(rm), 0);
  snprintf(cfg, sizeof cfg, "%s/prometheus.yml", dir);
  unlink(cfg);
}

static void test_prometheus_scrapes(void **state) {
  (void)state;
  if (!host_have_program("prometheus")) {
    print_message("skipped: prometheus is not installed "
                  "(contrib/setup-deps.sh)\n");
    skip();
  }
  proc_t a = start_prog(target, NULL, 0);
  int have_gc = access(gc_prog, X_OK) == 0;
  proc_t g = {0, -1};
  if (have_gc)
    g = start_prog(gc_prog, NULL, 1);
  /* With node_exporter's flags (issue 23): Prometheus scrapes the
   * telemetry path it is given, and the stable `group` label is there. */
  server_t s =
      start_serve("--web.listen-address", "127.0.0.1:0", "--web.telemetry-path",
                  "/node/metrics", "--group-by", "comm", NULL);
  int pport;
  pid_t prom = prom_start(s.port, "/node/metrics", &pport);
  double want = json_field(a.pid, "HeapAlloc");
  char q[128];
  snprintf(q, sizeof q,
           "memstats_heap_alloc_bytes{pid=\"%d\",group=\"mt_target\"}", a.pid);
  double got = prom_wait(prom, pport, q, NULL, NULL, 0);
  /* The scrape was OpenMetrics (Prometheus asks for it) and healthy. */
  double healthy = prom_query(pport, "up{job=\"memtop\"}");
  /* The Boehm target's pause histogram counts its collections. */
  double gc_count = -1, num_gc = 0;
  if (have_gc) {
    num_gc = json_field(g.pid, "NumGC");
    snprintf(q, sizeof q, "memstats_gc_pause_seconds_count{pid=\"%d\"}", g.pid);
    gc_count = prom_query(pport, q);
  }
  prom_stop(prom);
  if (got != want)
    fail_msg("Prometheus has %.0f, the target says %.0f", got, want);
  assert_true(healthy == 1);
  if (have_gc) {
    if (gc_count != num_gc)
      fail_msg("Prometheus counts %g pauses, the target %g collections",
               gc_count, num_gc);
    stop_prog(g);
  }
  stop_serve(s);
  stop_prog(a);
}

/* A container as Docker names its cgroup (systemd driver:
 * docker-<64 hex>.scope), made under a slice of this test's in the
 * cgroup2 hierarchy, without a container engine. */
#define DOCKER_ID                                                              \
  "d0c4e4a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d"
static char cg_top[300], cg_leaf[400];

/* Makes the cgroup; NULL, or why it cannot be made here. */
static const char *make_docker_cgroup(void) {
  static const char *const roots[] = {"/sys/fs/cgroup/unified",
                                      "/sys/fs/cgroup"};
  for (size_t i = 0; i < 2; i++) {
    char probe[128];
    snprintf(probe, sizeof probe, "%s/cgroup.controllers", roots[i]);
    if (access(probe, F_OK) != 0)
      continue;
    snprintf(cg_top, sizeof cg_top, "%s/memtop-test-serve-%d.slice", roots[i],
             (int)getpid());
    snprintf(cg_leaf, sizeof cg_leaf, "%s/docker-" DOCKER_ID ".scope", cg_top);
    if (mkdir(cg_top, 0755) != 0) {
      cg_top[0] = '\0';
      return "cannot make a cgroup here (not root, or a read-only cgroupfs)";
    }
    if (mkdir(cg_leaf, 0755) != 0)
      return "cannot make a cgroup in our own slice";
    return NULL;
  }
  return "no cgroup2 hierarchy mounted";
}

/* pid moved into the cgroup at path (its cgroup.procs); 0 or -1. */
static int cgroup_move(const char *path, pid_t pid) {
  char procs[512], text[16];
  snprintf(procs, sizeof procs, "%s/cgroup.procs", path);
  snprintf(text, sizeof text, "%d", (int)pid);
  int fd = open(procs, O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  ssize_t n = write(fd, text, strlen(text));
  close(fd);
  return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* Ends what is left in the cgroup (the teardown has killed the target if
 * the test failed) and removes it. */
static int end_docker_cgroup(void **state) {
  end_kids(state);
  if (cg_top[0]) {
    char parent[300];
    snprintf(parent, sizeof parent, "%s", cg_top);
    *strrchr(parent, '/') = '\0';
    for (int i = 0; i < 50 && rmdir(cg_leaf) != 0 && errno == EBUSY; i++) {
      struct timespec ts = {0, 20000000};
      nanosleep(&ts, NULL);
    }
    rmdir(cg_top);
    cg_top[0] = cg_leaf[0] = '\0';
  }
  return 0;
}

/* Issue 21: a target in a container is served with its `container`
 * label, and a real Prometheus, scraping memtop serve, finds it by that
 * label: memstats_ready_bytes{container="<id>"} through its query API is
 * the target's, under its pid. The container is its cgroup alone, named
 * as Docker names it (memtop reads the id from /proc/PID/cgroup). */
static void test_prometheus_container_labels(void **state) {
  (void)state;
  if (!host_have_program("prometheus")) {
    print_message("skipped: prometheus is not installed "
                  "(contrib/setup-deps.sh)\n");
    skip();
  }
  const char *why = make_docker_cgroup();
  if (why) {
    print_message("skipped: %s\n", why);
    skip();
  }
  proc_t a = start_prog(target, NULL, 0), b = start_prog(target, NULL, 0);
  if (cgroup_move(cg_leaf, a.pid) != 0) {
    print_message("skipped: cannot move a process into %s: %s\n", cg_leaf,
                  strerror(errno));
    skip();
  }
  server_t s = start_serve(NULL);
  int pport;
  pid_t prom = prom_start(s.port, "/metrics", &pport);
  char pid_label[32], other[32];
  double ready = prom_wait(prom, pport,
                           "memstats_ready_bytes{container=\"" DOCKER_ID "\"}",
                           "pid", pid_label, sizeof pid_label);
  /* The target outside the container has no such label. */
  char q[160];
  snprintf(q, sizeof q, "memstats_ready_bytes{pid=\"%d\",container=\"\"}",
           b.pid);
  double outside = prom_query_label(pport, q, "pid", other, sizeof other);
  prom_stop(prom);
  if (!(ready > 0))
    fail_msg("Prometheus has no memstats_ready_bytes with container "
             "\"%s\" (got %g)",
             DOCKER_ID, ready);
  if (atoi(pid_label) != a.pid)
    fail_msg("the container's series is pid \"%s\", the target is %d",
             pid_label, a.pid);
  if (!(outside > 0) || atoi(other) != b.pid)
    fail_msg("the target outside the container: %g (pid \"%s\")", outside,
             other);
  print_message("memstats_ready_bytes{container=\"%.12s...\"} = %.0f, pid %s\n",
                DOCKER_ID, ready, pid_label);
  stop_serve(s);
  stop_prog(a);
  stop_prog(b);
}

/* contrib/systemd: the unit's ExecStart is a command line this memtop
 * takes (its flags, in the --flag=value form systemd passes them), with
 * the address and the web config made the test's own; the drop-in
 * preloads the library this build installs. */
static void test_contrib_systemd(void **state) {
  (void)state;
  char path[1500];
  snprintf(path, sizeof path, "%s/../../contrib/systemd/memtop-serve.service",
           data_dir);
  char *unit = host_read_all(path, NULL);
  assert_non_null(unit);
  const char *exec = strstr(unit, "\nExecStart=");
  assert_non_null(exec);
  exec += strlen("\nExecStart=");
  char line[1024];
  snprintf(line, sizeof line, "%.*s", (int)strcspn(exec, "\n"), exec);
  free(unit);
  char cfg[512];
  snprintf(cfg, sizeof cfg, "%s/web.yml", dir);
  write_text(cfg, "basic_auth_users:\n  alice: " HASH "\n");
  /* memtop serve ARGS... */
  char *words[8] = {NULL}, *save = NULL, args[8][600];
  int n = 0;
  for (char *w = strtok_r(line, " ", &save); w && n < 8;
       w = strtok_r(NULL, " ", &save))
    words[n++] = w;
  assert_true(n >= 2);
  assert_non_null(strstr(words[0], "/memtop"));
  assert_string_equal(words[1], "serve");
  const char *a[8] = {NULL};
  for (int i = 2; i < n; i++) {
    if (strncmp(words[i], "--web.listen-address=", 21) == 0)
      snprintf(args[i], sizeof args[i], "--web.listen-address=127.0.0.1:0");
    else if (strncmp(words[i], "--web.config.file=", 18) == 0)
      snprintf(args[i], sizeof args[i], "--web.config.file=%s", cfg);
    else
      snprintf(args[i], sizeof args[i], "%s", words[i]);
    a[i - 2] = args[i];
  }
  server_t s = start_serve(a[0], a[1], a[2], a[3], a[4], a[5], NULL);
  reply_t r;
  http(s.port, "GET", "/metrics", NULL, &r);
  assert_int_equal(r.status, 401); /* the unit's web config asks for one */
  reply_free(&r);
  /* ExecReload's SIGHUP. */
  assert_int_equal(kill(s.pid, SIGHUP), 0);
  http(s.port, "GET", "/metrics", "Authorization: Basic YWxpY2U6czNjcmV0\r\n",
       &r);
  assert_int_equal(r.status, 200);
  reply_free(&r);
  stop_serve(s);
  unlink(cfg);

  snprintf(path, sizeof path, "%s/../../contrib/systemd/preload.conf",
           data_dir);
  char *dropin = host_read_all(path, NULL);
  assert_non_null(dropin);
  assert_non_null(strstr(dropin, "\nEnvironment=LD_PRELOAD=" MT_PRELOAD_DIR
                                 "/libmemstats-preload.so\n"));
  free(dropin);
}

/* contrib/prometheus: the scrape example is a valid config, the rules
 * pass their own tests (promtool test rules), and the Grafana dashboard
 * is JSON with the breakdown stacked and the pauses as a heatmap. */
static void test_contrib_prometheus(void **state) {
  (void)state;
  char cdir[1400], cmd[3000], path[1500];
  snprintf(cdir, sizeof cdir, "%s/../../contrib/prometheus", data_dir);
  snprintf(path, sizeof path, "%s/grafana-dashboard.json", cdir);
  json_error_t e;
  json_t *dash = json_load_file(path, 0, &e);
  if (!dash)
    fail_msg("%s: line %d: %s", path, e.line, e.text);
  int stacked = 0, heatmap = 0;
  json_t *panel;
  size_t i;
  json_array_foreach(json_object_get(dash, "panels"), i, panel) {
    const char *type = json_string_value(json_object_get(panel, "type"));
    json_t *stacking = json_object_get(
        json_object_get(
            json_object_get(json_object_get(panel, "fieldConfig"), "defaults"),
            "custom"),
        "stacking");
    const char *mode = json_string_value(json_object_get(stacking, "mode"));
    char *text = json_dumps(panel, 0);
    if (mode && strcmp(mode, "normal") == 0 &&
        strstr(text, "memstats_frag_overhead_bytes"))
      stacked = 1;
    if (type && strcmp(type, "heatmap") == 0 &&
        strstr(text, "memstats_gc_pause_seconds_bucket"))
      heatmap = 1;
    free(text);
  }
  json_decref(dash);
  assert_true(stacked);
  assert_true(heatmap);

  if (!host_have_program("promtool")) {
    print_message("skipped the promtool checks: promtool is not installed "
                  "(contrib/setup-deps.sh)\n");
    return;
  }
  snprintf(cmd, sizeof cmd,
           "cd '%s' && promtool check config prometheus.yml >/dev/null && "
           "promtool test rules memtop.rules.test.yml",
           cdir);
  assert_int_equal(system(cmd), 0);
}

static int setup(void **state) {
  (void)state;
  assert_int_equal(host_build_dir(build_dir, sizeof build_dir), 0);
  snprintf(memtop, sizeof memtop, "%s/memtop", build_dir);
  snprintf(target, sizeof target, "%s/progs/mt_target", build_dir);
  snprintf(gc_prog, sizeof gc_prog, "%s/progs/sv_gc", build_dir);
  assert_int_equal(host_preload_path(build_dir, preload, sizeof preload), 0);
  const char *d = getenv("MS_TEST_DATA");
  if (d && *d) {
    snprintf(data_dir, sizeof data_dir, "%s", d);
  } else {
    char cwd[1024];
    assert_non_null(getcwd(cwd, sizeof cwd));
    snprintf(data_dir, sizeof data_dir, "%s/tests/data", cwd);
  }
  return target_dir_setup(dir, sizeof dir, "/tmp/test_serve.XXXXXX");
}

static int teardown(void **state) {
  (void)state;
  return target_dir_remove(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_figures_are_the_targets, end_kids),
      cmocka_unit_test_teardown(test_http, end_kids),
      cmocka_unit_test_teardown(test_basic_auth, end_kids),
      cmocka_unit_test_teardown(test_tls, end_kids),
      cmocka_unit_test_teardown(test_root_needs_auth, end_kids),
      cmocka_unit_test_teardown(test_tls_versions, end_kids),
      cmocka_unit_test_teardown(test_tls_handshake_rate, end_kids),
      cmocka_unit_test_teardown(test_wrong_password_flood, end_kids),
      cmocka_unit_test_teardown(test_slowloris, end_kids),
      cmocka_unit_test_teardown(test_hung_target, end_kids),
      cmocka_unit_test_teardown(test_scrape_waits_for_no_target, end_kids),
      cmocka_unit_test_teardown(test_targets_come_and_go, end_kids),
      cmocka_unit_test_teardown(test_unsafe_dir_said, end_kids),
      cmocka_unit_test_teardown(test_boehm_pauses, end_kids),
      cmocka_unit_test_teardown(test_node_exporter_flags, end_kids),
      cmocka_unit_test_teardown(test_web_config_reread, end_kids),
      cmocka_unit_test_teardown(test_pprof_heap, end_kids),
      cmocka_unit_test_teardown(test_prometheus_scrapes, end_kids),
      cmocka_unit_test_teardown(test_prometheus_container_labels,
                                end_docker_cgroup),
      cmocka_unit_test(test_contrib_prometheus),
      cmocka_unit_test_teardown(test_contrib_systemd, end_kids),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
