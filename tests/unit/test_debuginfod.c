/*
 * test_debuginfod.c - the debuginfod fetch's bounds (pprof/debuginfod.h),
 * against servers of this test's own on 127.0.0.1 (ports of the kernel's
 * choosing): one that takes the connection and never answers, one that
 * closes every connection at once. DEBUGINFOD_TIMEOUT is set to an hour,
 * so only memtop's own deadline, or a cancel, ends a fetch: without them
 * the test would hang (and the run's timeout fail it). A build id that
 * found nothing is not asked of the servers again. The names a fetched
 * file gives are checked end to end by test_profile_cmd's test_debuginfod.
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "pprof/debuginfod.h"
#include "support/target.h"

static char dir[64];

/* A server on 127.0.0.1: its socket, and the URL to it. */
typedef struct server_s {
  int fd;
  char url[64];
  pthread_t thread;
  int closing;  /* accept and close at once (else never answer) */
  int accepted; /* connections taken */
  int stop;
} server_t;

static void *serve(void *arg) {
  server_t *s = arg;

  for (;;) {
    int c = accept(s->fd, NULL, NULL);

    if (c < 0 || __atomic_load_n(&s->stop, __ATOMIC_SEQ_CST)) {
      if (c >= 0)
        close(c);
      return NULL;
    }
    __atomic_add_fetch(&s->accepted, 1, __ATOMIC_SEQ_CST);
    if (s->closing)
      close(c); /* else kept open, unanswered, until the test ends */
  }
}

static void server_start(server_t *s, int closing) {
  struct sockaddr_in sa;
  socklen_t len = sizeof sa;

  memset(s, 0, sizeof *s);
  s->closing = closing;
  s->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(s->fd >= 0);
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(bind(s->fd, (struct sockaddr *)&sa, sizeof sa), 0);
  assert_int_equal(getsockname(s->fd, (struct sockaddr *)&sa, &len), 0);
  assert_int_equal(listen(s->fd, 16), 0);
  snprintf(s->url, sizeof s->url, "http://127.0.0.1:%d", ntohs(sa.sin_port));
  assert_int_equal(pthread_create(&s->thread, NULL, serve, s), 0);
}

static void server_stop(server_t *s) {
  __atomic_store_n(&s->stop, 1, __ATOMIC_SEQ_CST);
  shutdown(s->fd, SHUT_RDWR);
  pthread_join(s->thread, NULL);
  close(s->fd);
}

static int have_lib(void) {
  void *h = dlopen("libdebuginfod.so.1", RTLD_LAZY | RTLD_LOCAL);

  if (h == NULL)
    return 0;
  dlclose(h);
  return 1;
}

static const unsigned char id1[20] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
static const unsigned char id2[20] = {2, 2, 3, 4, 5, 6, 7, 8, 9, 10};
static const unsigned char id3[20] = {3, 2, 3, 4, 5, 6, 7, 8, 9, 10};

/* Without DEBUGINFOD_URLS nothing is asked. */
static void test_no_urls(void **state) {
  server_t s;

  (void)state;
  server_start(&s, 1);
  unsetenv("DEBUGINFOD_URLS");
  assert_int_equal(mt_debuginfod_find(id1, sizeof id1, "/bin/x"), -1);
  setenv("DEBUGINFOD_URLS", "", 1);
  assert_int_equal(mt_debuginfod_find(id1, sizeof id1, "/bin/x"), -1);
  assert_int_equal(__atomic_load_n(&s.accepted, __ATOMIC_SEQ_CST), 0);
  server_stop(&s);
}

/* A server that never answers: the fetch ends at memtop's deadline. */
static void test_deadline(void **state) {
  server_t s;

  (void)state;
  if (!have_lib()) {
    print_message("skipped: libdebuginfod1 is not installed\n");
    skip();
  }
  server_start(&s, 0);
  setenv("DEBUGINFOD_URLS", s.url, 1);
  mt_debuginfod_configure(300, 0);
  assert_int_equal(mt_debuginfod_find(id1, sizeof id1, "/bin/x"), -1);
  assert_true(__atomic_load_n(&s.accepted, __ATOMIC_SEQ_CST) >= 1);
  server_stop(&s);
}

/* A build id that found nothing is not asked again (for ten minutes). */
static void test_failure_remembered(void **state) {
  server_t s;
  int n;

  (void)state;
  if (!have_lib()) {
    print_message("skipped: libdebuginfod1 is not installed\n");
    skip();
  }
  server_start(&s, 1);
  setenv("DEBUGINFOD_URLS", s.url, 1);
  mt_debuginfod_configure(10000, 0);
  assert_int_equal(mt_debuginfod_find(id2, sizeof id2, "/bin/y"), -1);
  n = __atomic_load_n(&s.accepted, __ATOMIC_SEQ_CST);
  assert_true(n >= 1);
  assert_int_equal(mt_debuginfod_find(id2, sizeof id2, "/bin/y"), -1);
  assert_int_equal(__atomic_load_n(&s.accepted, __ATOMIC_SEQ_CST), n);
  server_stop(&s);
}

static void *cancel_soon(void *arg) {
  server_t *s = arg;

  /* Once the fetch has reached the server. */
  while (__atomic_load_n(&s->accepted, __ATOMIC_SEQ_CST) == 0)
    usleep(10000);
  mt_debuginfod_cancel();
  return NULL;
}

/* The live view quitting: a cancel ends the fetch under way (the
 * deadline an hour away), and every later one returns at once. */
static void test_cancel(void **state) {
  server_t s;
  pthread_t t;

  (void)state;
  if (!have_lib()) {
    print_message("skipped: libdebuginfod1 is not installed\n");
    skip();
  }
  server_start(&s, 0);
  setenv("DEBUGINFOD_URLS", s.url, 1);
  mt_debuginfod_configure(3600 * 1000, 0);
  assert_int_equal(pthread_create(&t, NULL, cancel_soon, &s), 0);
  assert_int_equal(mt_debuginfod_find(id3, sizeof id3, "/bin/z"), -1);
  pthread_join(t, NULL);
  assert_int_equal(mt_debuginfod_find(id1, sizeof id1, "/bin/x"), -1);
  server_stop(&s);
}

static int setup(void **state) {
  char cache[128];

  (void)state;
  if (target_dir_setup(dir, sizeof dir, "/tmp/test_debuginfod.XXXXXX") != 0)
    return -1;
  snprintf(cache, sizeof cache, "%s/cache", dir);
  setenv("DEBUGINFOD_CACHE_PATH", cache, 1);
  setenv("DEBUGINFOD_TIMEOUT", "3600", 1);
  setenv("DEBUGINFOD_RETRY_LIMIT", "0", 1);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  return target_dir_remove(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_no_urls),
      cmocka_unit_test(test_deadline),
      cmocka_unit_test(test_failure_remembered),
      cmocka_unit_test(test_cancel),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
