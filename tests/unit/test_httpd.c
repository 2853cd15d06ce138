/*
 * test_httpd.c - httpd.c in this process, on a libuv loop of its own
 * thread: passwords are checked on libuv's workers, never on the loop.
 *
 * crypt_r is this file's: the executable's definition wins over
 * libcrypt's, so every hash webconfig.c computes comes here (and goes on
 * to libcrypt's). It counts
 * the calls made on the loop's thread (there must be none) and holds a
 * bcrypt of the wrong password until the test lets it go, as a slow hash
 * would: while the bcrypt workers are held by a flood of wrong passwords,
 * the loop still answers, and a scraper whose password was proven before
 * is still served (the cache of proven passwords is checked first, on
 * other workers). No timing is measured: each wait is for an event, with
 * a deadline only to fail instead of hanging.
 *
 * Scrapes answered together share one answer (mt_answer_t): a body made
 * once, gzipped once, sent to each, and freed when the last is sent
 * (ASan sees a leak or a double free).
 */
#include <arpa/inet.h>
#include <crypt.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>
#include <cmocka.h>

#include "memstats.h"
#include "common/strbuf.h"
#include "exporter/httpd.h"
#include "exporter/webconfig.h"

/* "s3cret", bcrypt cost 4. */
#define HASH "$2y$04$cF9RwSEtD0rMHdRC6By.SeT5NEogdNKIpubymmZ/QCHAEfwcRsNuq"
#define RIGHT "Authorization: Basic YWxpY2U6czNjcmV0\r\n" /* alice:s3cret */
#define WRONG "Authorization: Basic YWxpY2U6d3Jvbmc=\r\n" /* alice:wrong */
#define GIVE_UP_S 60

/* ------------------------------------------------------------------------
 * crypt_r, watched
 * ------------------------------------------------------------------------ */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static pthread_t loop_thread;
static int loop_running;
static int on_loop;  /* hashes computed on the loop's thread */
static int held;     /* bcrypts of "wrong" waiting to be let go */
static int released; /* let them go */

char *crypt_r(const char *phrase, const char *setting,
              struct crypt_data *data) {
  static char *(*real)(const char *, const char *, struct crypt_data *);
  /* libcrypt itself: the link left it out (nothing else in this program
   * needs it, this definition having taken its place). */
  if (!real) {
    void *lib = dlopen("libcrypt.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib)
      *(void **)&real = dlsym(lib, "crypt_r");
    if (!real)
      abort();
  }
  pthread_mutex_lock(&mu);
  if (loop_running && pthread_equal(pthread_self(), loop_thread)) {
    on_loop++;
    pthread_cond_broadcast(&cv);
  } else if (strcmp(phrase, "wrong") == 0 && strncmp(setting, "$2", 2) == 0) {
    held++;
    pthread_cond_broadcast(&cv);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += GIVE_UP_S;
    while (!released && pthread_cond_timedwait(&cv, &mu, &until) != ETIMEDOUT)
      ;
    held--;
  }
  pthread_mutex_unlock(&mu);
  return real(phrase, setting, data);
}

/* Waits until held reaches n or a hash ran on the loop; 1 if held did. */
static int wait_held(int n) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += GIVE_UP_S;
  pthread_mutex_lock(&mu);
  while (held < n && on_loop == 0 &&
         pthread_cond_timedwait(&cv, &mu, &until) != ETIMEDOUT)
    ;
  int ok = held >= n;
  pthread_mutex_unlock(&mu);
  return ok;
}

/* ------------------------------------------------------------------------
 * The server, on its own thread
 * ------------------------------------------------------------------------ */

static uv_loop_t loop;
static uv_async_t stop_async;
static mt_httpd_t *server;
static mt_webconfig_t web;
static char url[160];
static int port;

/* 0: every scrape answered at once; n: held until n have come, then all
 * answered with one shared answer per format. */
static size_t hold_n;
static mt_scrape_t *held_scrapes[16];
static size_t nheld_scrapes;

static void on_scrape(void *arg, mt_scrape_t *s) {
  (void)arg;
  ms__strbuf_t body = MS_STRBUF_INIT;
  if (hold_n == 0) {
    ms__strbuf_printf(&body, "ok\n");
    mt_scrape_answer(s, &body);
    ms__strbuf_free(&body);
    return;
  }
  held_scrapes[nheld_scrapes++] = s;
  if (nheld_scrapes < hold_n)
    return;
  mt_answer_t *a[2] = {NULL, NULL};
  for (size_t i = 0; i < nheld_scrapes; i++) {
    int om = mt_scrape_openmetrics(held_scrapes[i]) != 0;
    if (!a[om]) {
      for (int k = 0; k < 2000; k++)
        ms__strbuf_printf(&body, "line %d of %s\n", k, om ? "om" : "text");
      a[om] = mt_answer_new(&body, om);
      assert_non_null(a[om]);
      assert_null(body.data); /* taken over */
    }
    mt_scrape_answer_with(held_scrapes[i], a[om]);
  }
  mt_answer_release(a[0]);
  mt_answer_release(a[1]);
  nheld_scrapes = 0;
}

static void stop_cb(uv_async_t *a) {
  mt_httpd_stop(server);
  uv_close((uv_handle_t *)a, NULL);
}

static void *loop_main(void *arg) {
  (void)arg;
  pthread_mutex_lock(&mu);
  loop_thread = pthread_self();
  loop_running = 1;
  pthread_mutex_unlock(&mu);
  uv_run(&loop, UV_RUN_DEFAULT);
  return NULL;
}

static pthread_t start_server(void) {
  char err[512];
  assert_int_equal(
      mt_webconfig_parse("basic_auth_users:\n  alice: " HASH "\n",
                         strlen("basic_auth_users:\n  alice: " HASH "\n"), NULL,
                         &web, err, sizeof err),
      0);
  assert_int_equal(uv_loop_init(&loop), 0);
  mt_httpd_hooks_t hooks = {.scrape = on_scrape};
  if (mt_httpd_start(&loop, "127.0.0.1:0", &web, &hooks, &server, err,
                     sizeof err) != 0)
    fail_msg("mt_httpd_start: %s", err);
  assert_int_equal(uv_async_init(&loop, &stop_async, stop_cb), 0);
  mt_httpd_url(server, url, sizeof url);
  const char *colon = strrchr(url, ':');
  assert_non_null(colon);
  port = atoi(colon + 1);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, loop_main, NULL), 0);
  return t;
}

static void stop_server(pthread_t t) {
  uv_async_send(&stop_async);
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_int_equal(uv_loop_close(&loop), 0);
  mt_webconfig_free(&web);
}

/* ------------------------------------------------------------------------
 * A client
 * ------------------------------------------------------------------------ */

/* Sends GET path with the extra headers from the loopback address src. */
static int request(const char *src, const char *path, const char *headers) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(fd >= 0);
  struct sockaddr_in me = {0}, sa = {0};
  me.sin_family = sa.sin_family = AF_INET;
  assert_int_equal(inet_pton(AF_INET, src, &me.sin_addr), 1);
  assert_int_equal(bind(fd, (struct sockaddr *)&me, sizeof me), 0);
  sa.sin_port = htons((uint16_t)port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
  char req[512];
  int n = snprintf(req, sizeof req,
                   "GET %s HTTP/1.1\r\nHost: x\r\n%sConnection: close\r\n\r\n",
                   path, headers ? headers : "");
  assert_int_equal(send(fd, req, (size_t)n, MSG_NOSIGNAL), n);
  return fd;
}

/* The answer on fd, read to its end (fd is closed): its status (0: none),
 * and its body into body (NUL-terminated, up to cap). */
static int answer_of(int fd, char *body, size_t cap, size_t *body_len) {
  static char buf[1 << 20];
  size_t len = 0;
  for (;;) {
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, GIVE_UP_S * 1000) <= 0)
      fail_msg("no answer in %d s", GIVE_UP_S);
    ssize_t n = recv(fd, buf + len, sizeof buf - 1 - len, 0);
    if (n <= 0)
      break;
    len += (size_t)n;
    if (len == sizeof buf - 1)
      break;
  }
  close(fd);
  buf[len] = '\0';
  if (body) {
    const char *end = strstr(buf, "\r\n\r\n");
    size_t off = end ? (size_t)(end + 4 - buf) : len;
    *body_len = len - off < cap ? len - off : cap - 1;
    memcpy(body, buf + off, *body_len);
    body[*body_len] = '\0';
  }
  return strncmp(buf, "HTTP/1.", 7) == 0 ? atoi(buf + 9) : 0;
}

static int status_of(int fd) {
  return answer_of(fd, NULL, 0, NULL);
}

/* ------------------------------------------------------------------------
 * Tests
 * ------------------------------------------------------------------------ */

static void test_checks_off_the_loop(void **state) {
  (void)state;
  pthread_t t = start_server();
  /* The right password, proven once (one bcrypt, on a worker). */
  assert_int_equal(status_of(request("127.0.0.1", "/metrics", RIGHT)), 200);

  /* Wrong passwords from another address: the bcrypt workers are held
   * (MT_HTTPD_BCRYPTS of them, the others wait their turn). */
  enum { NWRONG = MT_HTTPD_CHECKS_PER_ADDR };
  int fds[NWRONG];
  for (int i = 0; i < NWRONG; i++)
    fds[i] = request("127.0.0.2", "/metrics", WRONG);
  int all_held = wait_held(MT_HTTPD_BCRYPTS);

  /* Meanwhile the loop answers, and the proven password is served. */
  int free_loop = 0, scraped = 0;
  if (all_held) {
    free_loop = status_of(request("127.0.0.1", "/nope", NULL)) == 404;
    scraped = status_of(request("127.0.0.1", "/metrics", RIGHT)) == 200;
  }
  pthread_mutex_lock(&mu);
  int held_now = held;
  released = 1;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  int n401 = 0;
  for (int i = 0; i < NWRONG; i++)
    n401 += status_of(fds[i]) == 401;
  pthread_mutex_lock(&mu);
  int loop_hashes = on_loop;
  pthread_mutex_unlock(&mu);
  if (loop_hashes)
    fail_msg("%d password hashes computed on the loop's thread", loop_hashes);
  assert_true(all_held);
  assert_true(free_loop);
  assert_true(scraped);
  /* No more bcrypts at once than the workers allowed them. */
  assert_int_equal(held_now, MT_HTTPD_BCRYPTS);
  assert_int_equal(n401, NWRONG);
  stop_server(t);
}

/* Every slot taken by wrong passwords from 32 addresses, waiting for the
 * two held bcrypts: a scraper from another address, whose password was
 * proven before, is let in (a waiting check makes room) and served. */
static void test_checks_hold_no_slot(void **state) {
  (void)state;
  pthread_mutex_lock(&mu);
  released = 0;
  on_loop = 0;
  pthread_mutex_unlock(&mu);
  pthread_t t = start_server();
  assert_int_equal(status_of(request("127.0.0.1", "/metrics", RIGHT)), 200);
  enum { NFLOOD = MT_HTTPD_CONNECTIONS };
  static int fds[NFLOOD];
  for (int i = 0; i < NFLOOD; i++) {
    char src[32];
    snprintf(src, sizeof src, "127.0.2.%d", i / MT_HTTPD_CHECKS_PER_ADDR + 1);
    fds[i] = request(src, "/metrics", WRONG);
  }
  int all_held = wait_held(MT_HTTPD_BCRYPTS);
  int scraped =
      all_held && status_of(request("127.0.3.1", "/metrics", RIGHT)) == 200;
  pthread_mutex_lock(&mu);
  released = 1;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  /* Each flooder is refused (401, 429 if it made room) or closed. */
  for (int i = 0; i < NFLOOD; i++) {
    int st = status_of(fds[i]);
    if (st != 401 && st != 429 && st != 0)
      fail_msg("flooder %d: status %d", i, st);
  }
  assert_true(all_held);
  assert_true(scraped);
  assert_int_equal(on_loop, 0);
  stop_server(t);
}

/* Eight scrapes answered together, in both formats, plain and gzipped:
 * each gets the whole body of its format. */
static void test_shared_answer(void **state) {
  (void)state;
  hold_n = 8;
  pthread_t t = start_server();
  static const char *const hdrs[4] = {
      RIGHT, RIGHT "Accept-Encoding: gzip\r\n",
      RIGHT "Accept: application/openmetrics-text;version=1.0.0\r\n",
      RIGHT "Accept: application/openmetrics-text;version=1.0.0\r\n"
            "Accept-Encoding: gzip\r\n"};
  int fds[8];
  for (int i = 0; i < 8; i++) {
    char src[32];
    snprintf(src, sizeof src, "127.0.1.%d", i + 1); /* 4 checks per address */
    fds[i] = request(src, "/metrics", hdrs[i % 4]);
  }
  static char body[1 << 20], plain[1 << 20];
  for (int i = 0; i < 8; i++) {
    size_t n = 0;
    assert_int_equal(answer_of(fds[i], body, sizeof body, &n), 200);
    const char *text = body;
    if (i % 2) {
      z_stream z;
      memset(&z, 0, sizeof z);
      assert_int_equal(inflateInit2(&z, 15 + 16), Z_OK);
      z.next_in = (unsigned char *)body;
      z.avail_in = (uInt)n;
      z.next_out = (unsigned char *)plain;
      z.avail_out = sizeof plain - 1;
      assert_int_equal(inflate(&z, Z_FINISH), Z_STREAM_END);
      plain[z.total_out] = '\0';
      inflateEnd(&z);
      text = plain;
    }
    const char *want = i % 4 >= 2 ? "line 1999 of om\n" : "line 1999 of text\n";
    assert_non_null(strstr(text, want));
    assert_true(strncmp(text, "line 0 of ", 10) == 0);
  }
  stop_server(t);
  hold_n = 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_checks_off_the_loop),
      cmocka_unit_test(test_checks_hold_no_slot),
      cmocka_unit_test(test_shared_answer),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
