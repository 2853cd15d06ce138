/*
 * test_listcost.c - what keeps the live list of many processes cheap
 * (issue 24): work done once and kept, counted so that it cannot be
 * dropped unnoticed.
 *
 *   - the list's column widths (PROVIDER, USER) are measured when a
 *     target's provider list or user changes, not for every target at
 *     every frame (mt_model_provider_joins: a frame joins the providers
 *     of the rows it shows, not of all 200 targets);
 *   - the live view's rescan (the target set's listing, mt_tset_io_uv's
 *     discover: msc_list_reuse) reads the socket directory and /proc
 *     again only when the directory changed (msc_list_reads), and still
 *     finds a new socket at once;
 *   - that listing's look through /proc for processes in other
 *     namespaces asks a process of memtop's own namespaces once, not at
 *     every listing (msc_ns_checks), and a new process at once;
 *   - pause percentiles are the same for a snapshot whose pauses did not
 *     change, and follow a new pause;
 *   - the list is drawn at most once per half refresh delay, however
 *     many targets ask for a frame (mt_view_frame_due), and at once after
 *     a key, on other screens and for the first frame.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "memstats.h"
#include "client/client.h"
#include "targets/targetset.h"
#include "tui/grid.h"
#include "tui/model.h"
#include "tui/view.h"

static ms_snapshot_t snap;

static const ms_snapshot_t *make(int pid, double mono_s, const char *prov) {
  memset(&snap, 0, sizeof snap);
  snap.struct_size = sizeof snap;
  snap.pid = pid;
  snap.start_time = 1000;
  snprintf(snap.comm, sizeof snap.comm, "p%d", pid);
  snap.time_mono_ns = (uint64_t)(mono_s * 1e9);
  snap.heap_sys = snap.sys = 10u << 20;
  snap.heap_inuse = 6u << 20;
  snap.heap_alloc = 5u << 20;
  snap.heap_idle = 4u << 20;
  snap.heap_objects = 100;
  snap.nproviders = 1;
  snprintf(snap.providers[0], sizeof snap.providers[0], "%s", prov);
  memset(snap.quality, MS_Q_EXACT, sizeof snap.quality);
  return &snap;
}

static void render(const mt_model_t *m) {
  mt_grid_t g;
  assert_int_equal(mt_grid_init(&g, 40, 120), 0);
  mt_view_render(m, &g);
  mt_grid_free(&g);
}

/* 200 processes on a 40-row screen: a frame joins the providers of the
 * rows it shows (at most 40), not of every target (600 and more for
 * three frames when each frame measured every target's); a snapshot
 * with the same providers joins nothing; a new provider list is joined
 * once, and the column grows to it. */
static void test_widths_kept(void **state) {
  mt_model_t m;
  (void)state;
  mt_model_init(&m);
  for (int pid = 1; pid <= 200; pid++)
    mt_model_update(&m, mt_model_target(&m, pid), make(pid, 1.0, "glibc"));
  mt_model_sort(&m);
  unsigned long before = mt_model_provider_joins;
  render(&m);
  render(&m);
  render(&m);
  assert_true(mt_model_provider_joins - before <= 3 * 40);
  before = mt_model_provider_joins;
  for (int pid = 1; pid <= 200; pid++)
    mt_model_update(&m, mt_model_find(&m, pid), make(pid, 2.0, "glibc"));
  assert_int_equal(mt_model_provider_joins - before, 0);
  mt_target_t *t = mt_model_find(&m, 7);
  mt_model_update(&m, t, make(7, 3.0, "tracked+jemalloc-wide"));
  assert_int_equal(mt_model_provider_joins - before, 1);
  assert_int_equal(t->prov_width, (int)strlen("tracked+jemalloc-wide"));
  mt_model_free(&m);
}

/* A target built by hand (no mt_model_update) is measured by the list
 * itself: its provider column is still as wide as its providers. */
static void test_widths_unknown_measured(void **state) {
  mt_model_t m;
  (void)state;
  mt_model_init(&m);
  mt_target_t *t = mt_model_target(&m, 5);
  t->snap = *make(5, 1.0, "glibc");
  t->have_snapshot = 1;
  t->state = MT_LIVE;
  mt_model_sort(&m);
  unsigned long before = mt_model_provider_joins;
  render(&m);
  assert_true(mt_model_provider_joins - before >= 1);
  assert_int_equal(t->widths_known, 0);
  mt_model_free(&m);
}

/* The same pauses keep their percentiles; a new pause moves them. */
static void test_pauses_follow(void **state) {
  mt_model_t m;
  (void)state;
  mt_model_init(&m);
  mt_target_t *t = mt_model_target(&m, 3);
  ms_snapshot_t s = *make(3, 1.0, "go");
  s.num_gc = 1;
  s.pause_ns[0] = 1000;
  s.pause_total_ns = 1000;
  s.pause_hist.counts[ms_pause_hist_bucket(1000)] = 1;
  mt_model_update(&m, t, &s);
  int64_t max1 = t->pause_max_ns;
  assert_int_equal(max1, 1000);
  s.time_mono_ns += 1000000000u;
  mt_model_update(&m, t, &s);
  assert_int_equal(t->pause_max_ns, max1);
  s.num_gc = 2;
  s.pause_ns[1] = 5000000;
  s.pause_total_ns += 5000000;
  s.pause_hist.counts[ms_pause_hist_bucket(5000000)]++;
  s.time_mono_ns += 1000000000u;
  mt_model_update(&m, t, &s);
  assert_int_equal(t->pause_max_ns, 5000000);
  mt_model_free(&m);
}

/* 200 targets whose reads have drifted apart ask for a frame every 5 ms
 * over 10 s at -d 1: the list is drawn 20 times at most (it was 2,000);
 * the detail view, a key and the first frame are drawn at once. */
static void test_frames_capped(void **state) {
  mt_model_t m;
  (void)state;
  mt_model_init(&m);
  m.delay_s = 1.0;
  uint64_t last = 0;
  int drawn = 0;
  for (int i = 0; i < 2000; i++) {
    m.now_mono_ns = 1000000000ull + (uint64_t)i * 5000000u;
    if (mt_view_frame_due(&m, last, 0)) {
      last = m.now_mono_ns;
      drawn++;
    }
  }
  assert_true(drawn >= 10 && drawn <= 20);
  m.now_mono_ns = last + 1000000u;
  assert_false(mt_view_frame_due(&m, last, 0));
  assert_true(mt_view_frame_due(&m, last, 1)); /* a key */
  assert_true(mt_view_frame_due(&m, 0, 0));    /* the first frame */
  m.screen = MT_SCREEN_DETAIL;
  assert_true(mt_view_frame_due(&m, last, 0));
  m.screen = MT_SCREEN_LIST;
  m.now_mono_ns = last + 500000000u; /* half the delay */
  assert_true(mt_view_frame_due(&m, last, 0));
  mt_model_free(&m);
}

/* ----------------------------------------------------------- listing -- */

static char dir[] = "/tmp/test_listcost.XXXXXX";

static int bind_sock(int pid) {
  struct sockaddr_un sa;
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s/%d.sock", dir, pid);
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0)
    return -1;
  listen(fd, 4);
  return fd;
}

/* The live view's listing: the target set's, as mt_tset_io_uv gives it. */
static size_t list_reuse(msc_target_t **v) {
  mt_tset_io_t io;
  size_t n = 0;
  memset(&io, 0, sizeof io);
  mt_tset_io_uv(&io, NULL);
  assert_int_equal(io.discover(io.ctx, v, &n), 0);
  return n;
}

/* An unchanged directory is not read again; a socket added is found by
 * the next listing; msc_list (one-off reports) always reads. */
static void test_listing_reused(void **state) {
  msc_target_t *v = NULL;
  (void)state;
  assert_non_null(mkdtemp(dir));
  setenv("MEMSTATS_DIR", dir, 1);
  int fd1 = bind_sock((int)getpid());
  assert_true(fd1 >= 0);
  /* A directory changed within the last second is read every time (the
   * kernel's coarse clock): let it age. */
  sleep(2);
  unsigned long long r0 = msc_list_reads();
  assert_int_equal(list_reuse(&v), 1);
  assert_int_equal(v[0].pid, (int)getpid());
  free(v);
  assert_int_equal(msc_list_reads() - r0, 1);
  for (int i = 0; i < 5; i++) {
    assert_int_equal(list_reuse(&v), 1);
    assert_int_equal(v[0].pid, (int)getpid());
    assert_true(v[0].start_time > 0);
    free(v);
  }
  assert_int_equal(msc_list_reads() - r0, 1);

  /* A one-off listing reads. */
  size_t n = 0;
  assert_int_equal(msc_list(&v, &n), 0);
  assert_int_equal(n, 1);
  free(v);
  assert_int_equal(msc_list_reads() - r0, 2);

  /* A new process's socket is listed at once. */
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    pause();
    _exit(0);
  }
  int fd2 = bind_sock((int)child);
  assert_true(fd2 >= 0);
  assert_int_equal(list_reuse(&v), 2);
  free(v);
  assert_int_equal(msc_list_reads() - r0, 3);

  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  close(fd1);
  close(fd2);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

/* The live view's listing (msc_list_reuse) asks a process of memtop's
 * own namespaces which they are once (two readlinks), not at every
 * listing; a one-off listing asks again, a new process is asked at once. */
static void test_namespaces_asked_once(void **state) {
  msc_target_t *v = NULL;
  size_t n = 0;
  char own[] = "/tmp/test_listcost_ns.XXXXXX";
  (void)state;
  assert_non_null(mkdtemp(own));
  setenv("MEMSTATS_DIR", own, 1);
  pid_t a = fork();
  assert_true(a >= 0);
  if (a == 0) {
    pause();
    _exit(0);
  }
  assert_int_equal(msc_list_reuse(&v, &n), 0);
  free(v);
  assert_int_equal(msc_ns_checks((int)a), 1);
  for (int i = 0; i < 5; i++) {
    assert_int_equal(msc_list_reuse(&v, &n), 0);
    free(v);
  }
  assert_int_equal(msc_ns_checks((int)a), 1);

  /* A one-off listing (--once, ps) asks every process. */
  assert_int_equal(msc_list(&v, &n), 0);
  free(v);
  assert_int_equal(msc_ns_checks((int)a), 2);

  /* A new process is asked at the next listing. */
  pid_t b = fork();
  assert_true(b >= 0);
  if (b == 0) {
    pause();
    _exit(0);
  }
  assert_int_equal(msc_ns_checks((int)b), 0);
  assert_int_equal(msc_list_reuse(&v, &n), 0);
  free(v);
  assert_int_equal(msc_ns_checks((int)b), 1);
  assert_int_equal(msc_ns_checks((int)a), 2);

  /* One gone is forgotten. */
  kill(a, SIGKILL);
  waitpid(a, NULL, 0);
  assert_int_equal(msc_list_reuse(&v, &n), 0);
  free(v);
  assert_int_equal(msc_ns_checks((int)a), 0);

  kill(b, SIGKILL);
  waitpid(b, NULL, 0);
  assert_int_equal(rmdir(own), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_widths_kept),
      cmocka_unit_test(test_widths_unknown_measured),
      cmocka_unit_test(test_pauses_follow),
      cmocka_unit_test(test_frames_capped),
      cmocka_unit_test(test_listing_reused),
      cmocka_unit_test(test_namespaces_asked_once),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
