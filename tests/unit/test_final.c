/*
 * test_final.c - the final-snapshot channel of `memtop run`, both ends:
 * the library's exit-time writer (src/agent/final_send.c) into a real socket
 * pair, read back by memtop's collector (src/targets/final_recv.c); the
 * writer's filters (PID, parent PID, a descriptor that is not the socket it
 * was); a reader that went away (no SIGPIPE); the collector on split, foreign
 * and garbage input; and the environment `memtop run` gives the command.
 */
#include <errno.h>
#include <fcntl.h>
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

#include <cmocka.h>

#include "agent/agent.h"
#include "core/engine.h"
#include "core/hotpath.h"
#include "targets/final_recv.h"
#include "memtop/run.h"

static mt_final_t fin;

static void setup_fd(int fd, const char *pid, const char *ppid) {
  char s[32];

  snprintf(s, sizeof s, "%d", fd);
  ms__final_setup(s, pid, ppid);
}

static void pidstr(char *buf, size_t len, int pid) {
  snprintf(buf, len, "%d", pid);
}

static void test_write_and_collect(void **state) {
  int sv[2];
  char me[32], parent[32];

  (void)state;
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  pidstr(me, sizeof me, (int)getpid());
  pidstr(parent, sizeof parent, (int)getppid());
  setup_fd(sv[1], me, parent);
  assert_int_equal(ms__final_write(), 0);
  /* Once per process. */
  assert_int_equal(ms__final_write(), MS_ENOENT);
  close(sv[1]);

  mt_final_init(&fin, (int)getpid());
  fin.fd = sv[0];
  assert_int_equal(mt_final_drain(&fin), 1); /* read all, then EOF */
  assert_true(fin.have);
  assert_false(fin.bad);
  assert_true(fin.eof);
  assert_int_equal(fin.snap.pid, (int)getpid());
  assert_true(fin.snap.seq > 0);
  mt_final_close(&fin);
  assert_int_equal(fin.fd, -1);
}

/* Nothing is written for another PID or parent, to a descriptor that is
 * not a socket, or to one that is no longer the socket it was. */
static void test_filters(void **state) {
  int sv[2], other[2], p[2];
  char buf[64], me[32], parent[32], notme[32];

  (void)state;
  pidstr(me, sizeof me, (int)getpid());
  pidstr(parent, sizeof parent, (int)getppid());
  pidstr(notme, sizeof notme, (int)getpid() + 1);
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);

  setup_fd(sv[1], notme, NULL);
  assert_int_equal(ms__final_write(), MS_ENOENT);
  setup_fd(sv[1], NULL, me); /* our parent is not ourselves */
  assert_int_equal(ms__final_write(), MS_ENOENT);
  setup_fd(sv[1], "12x", parent);
  assert_int_equal(ms__final_write(), MS_ENOENT);
  ms__final_setup("", NULL, NULL);
  assert_int_equal(ms__final_write(), MS_ENOENT);
  ms__final_setup("nonsense", NULL, NULL);
  assert_int_equal(ms__final_write(), MS_ENOENT);
  assert_int_equal(recv(sv[0], buf, sizeof buf, MSG_DONTWAIT), -1);
  assert_int_equal(errno, EAGAIN);

  /* A pipe under the number: refused at setup. */
  assert_int_equal(pipe(p), 0);
  setup_fd(p[1], NULL, NULL);
  assert_int_equal(ms__final_write(), MS_ENOENT);
  assert_int_equal(fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
  assert_int_equal(read(p[0], buf, sizeof buf), -1);

  /* The program closed the socket and another one took its number. */
  setup_fd(sv[1], NULL, NULL);
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, other), 0);
  assert_int_equal(dup2(other[1], sv[1]), sv[1]);
  assert_int_equal(ms__final_write(), MS_ENOENT);
  assert_int_equal(recv(other[0], buf, sizeof buf, MSG_DONTWAIT), -1);
  assert_int_equal(errno, EAGAIN);

  close(p[0]);
  close(p[1]);
  close(other[0]);
  close(other[1]);
  close(sv[0]);
  close(sv[1]);
}

/* _exit() in a signal handler that interrupted an update of the counters
 * on this thread (its shard's seq odd, or inside the global shard or the
 * pause ring): a snapshot would wait for that update forever, so none is
 * taken, at once; afterwards the write goes through. The alarm turns a
 * hang into a failure. */
static void test_write_inside_update(void **state) {
  int sv[2];
  char buf[64], me[32];

  (void)state;
  ms__track_alloc(16); /* this thread has a shard of its own */
  ms__track_free(16);
  assert_ptr_not_equal(ms__tls.shard, &ms__shard_none);
  pidstr(me, sizeof me, (int)getpid());
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  setup_fd(sv[1], me, NULL);
  alarm(20);

  ms__tls.shard->seq++; /* as if interrupted inside the bracket */
  assert_true(ms__engine_busy_here());
  assert_int_equal(ms__final_write(), MS_EAGAIN);
  ms__tls.shard->seq++; /* the update "ends" (no counter moved) */
  ms__tls.busy++;       /* as if inside a global or pause-ring update */
  assert_true(ms__engine_busy_here());
  assert_int_equal(ms__final_write(), MS_EAGAIN);
  ms__tls.busy--;
  assert_false(ms__engine_busy_here());
  assert_int_equal(recv(sv[0], buf, sizeof buf, MSG_DONTWAIT), -1);
  assert_int_equal(errno, EAGAIN);

  assert_int_equal(ms__final_write(), 0);
  mt_final_init(&fin, (int)getpid());
  fin.fd = sv[0];
  close(sv[1]);
  assert_int_equal(mt_final_drain(&fin), 1);
  assert_true(fin.have);
  assert_int_equal(fin.snap.pid, (int)getpid());
  alarm(0);
  mt_final_close(&fin);
}

/* memtop went away: the write fails quietly (this process does not
 * ignore SIGPIPE, so a signal would end the test), errno unchanged. */
static void test_reader_gone(void **state) {
  int sv[2];

  (void)state;
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  close(sv[0]);
  setup_fd(sv[1], NULL, NULL);
  errno = 1234;
  assert_true(ms__final_write() != 0);
  assert_int_equal(errno, 1234);
  close(sv[1]);
}

static int g_swap_from, g_swap_to;

static void *swap_later(void *arg) {
  struct timespec ts = {0, 300 * 1000000L};
  (void)arg;
  nanosleep(&ts, NULL);
  dup2(g_swap_from, g_swap_to);
  return NULL;
}

/* The reader stops reading, and while exit waits for room another thread
 * of the program closes the socket and puts another one under its
 * number: nothing is written to that one (the descriptor is checked again
 * after each wait). If the thread comes too early or too late, nothing is
 * written either way: the test cannot fail wrongly. */
static void test_replaced_while_waiting(void **state) {
  int sv[2], other[2];
  char buf[4096];
  int small = 4096;
  pthread_t th;

  (void)state;
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, other), 0);
  setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
  memset(buf, 'x', sizeof buf);
  while (send(sv[1], buf, sizeof buf, MSG_DONTWAIT) > 0) {
  }
  setup_fd(sv[1], NULL, NULL);
  g_swap_from = other[1];
  g_swap_to = sv[1];
  assert_int_equal(pthread_create(&th, NULL, swap_later, NULL), 0);
  assert_true(ms__final_write() != 0);
  pthread_join(th, NULL);
  assert_int_equal(recv(other[0], buf, sizeof buf, MSG_DONTWAIT), -1);
  assert_int_equal(errno, EAGAIN);
  close(sv[0]);
  close(sv[1]);
  close(other[0]);
  close(other[1]);
}

static size_t encode(uint8_t *buf, size_t cap, int pid, uint64_t mallocs) {
  static ms_snapshot_t s;
  ms__wire_writer_t w;

  assert_int_equal(ms_snapshot_read(&s, sizeof s), 0);
  s.pid = pid;
  s.mallocs = mallocs;
  ms__wire_writer_init(&w, buf, cap);
  assert_int_equal(ms__wire_encode_snapshot(&w, &s, NULL), 0);
  return w.len;
}

static uint8_t frames[4 * MS__WIRE_SNAPSHOT_MAX];

/* Frames split anywhere, several in a row (the command's last wins),
 * other PIDs' skipped, other types skipped. */
static void test_collect_split_and_foreign(void **state) {
  size_t n = 0, i;

  (void)state;
  n += encode(frames + n, sizeof frames - n, 77, 1);
  {
    ms__wire_writer_t w;
    ms__wire_writer_init(&w, frames + n, sizeof frames - n);
    assert_int_equal(ms__wire_encode_error(&w, MS__MSG_ERROR, MS_EPROTO, "x"),
                     0);
    n += w.len;
  }
  n += encode(frames + n, sizeof frames - n, 42, 2);
  n += encode(frames + n, sizeof frames - n, 42, 3);
  n += encode(frames + n, sizeof frames - n, 78, 4);

  mt_final_init(&fin, 42);
  for (i = 0; i < n; i++)
    assert_int_equal(mt_final_feed(&fin, frames + i, 1), 1);
  assert_true(fin.have);
  assert_false(fin.bad);
  assert_int_equal(fin.snap.pid, 42);
  assert_int_equal(fin.snap.mallocs, 3);
  assert_int_equal(fin.len, 0);

  /* All at once: the same. */
  mt_final_init(&fin, 42);
  assert_int_equal(mt_final_feed(&fin, frames, n), n);
  assert_int_equal(fin.snap.mallocs, 3);

  /* Nobody's frame but others': nothing. */
  mt_final_init(&fin, 43);
  mt_final_feed(&fin, frames, n);
  assert_false(fin.have);
  assert_false(fin.bad);
}

static void test_collect_garbage(void **state) {
  static const uint8_t junk[] = "GET / HTTP/1.0\r\n\r\n";
  size_t n;

  (void)state;
  mt_final_init(&fin, 42);
  mt_final_feed(&fin, junk, sizeof junk);
  assert_true(fin.bad);
  assert_false(fin.have);
  assert_int_equal(mt_final_feed(&fin, junk, sizeof junk), 0);

  /* A good frame, then junk: the frame counts, then reading stops. */
  n = encode(frames, sizeof frames, 42, 9);
  memcpy(frames + n, junk, sizeof junk);
  mt_final_init(&fin, 42);
  mt_final_feed(&fin, frames, n + sizeof junk);
  assert_true(fin.have);
  assert_true(fin.bad);
  assert_int_equal(fin.snap.mallocs, 9);
}

static void test_run_env_final(void **state) {
  char *env1[] = {(char *)"PATH=/bin", (char *)"MEMSTATS_FINAL_FD=9",
                  (char *)"MEMSTATS_FINAL_PID=5", (char *)"HOME=/h", NULL};
  char fd[] = "MEMSTATS_FINAL_FD=3", ppid[] = "MEMSTATS_FINAL_PPID=100";
  char **e;
  size_t i, nfd = 0, nppid = 0, n;

  (void)state;
  e = mt_run_env(env1, "/p/libmemstats-preload.so");
  assert_non_null(e);
  mt_run_env_final(e, fd, ppid);
  for (n = 0; e[n] != NULL; n++) {
    if (strncmp(e[n], "MEMSTATS_FINAL_", 15) == 0) {
      nfd += strcmp(e[n], fd) == 0;
      nppid += strcmp(e[n], ppid) == 0;
      assert_true(e[n] == fd || e[n] == ppid);
    }
  }
  assert_int_equal(nfd, 1);
  assert_int_equal(nppid, 1);
  assert_int_equal(n, 5); /* LD_PRELOAD, PATH, HOME, and the two */
  for (i = 0; i < n; i++)
    if (strcmp(e[i], "PATH=/bin") == 0 || strcmp(e[i], "HOME=/h") == 0)
      nfd++;
  assert_int_equal(nfd, 3);
  assert_string_equal(e[0], "LD_PRELOAD=/p/libmemstats-preload.so");
  mt_run_env_free(e);

  /* An empty environment has room too. */
  e = mt_run_env(NULL, "/p/x.so");
  assert_non_null(e);
  mt_run_env_final(e, fd, ppid);
  assert_string_equal(e[1], fd);
  assert_string_equal(e[2], ppid);
  assert_null(e[3]);
  mt_run_env_free(e);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_write_and_collect),
      cmocka_unit_test(test_filters),
      cmocka_unit_test(test_reader_gone),
      cmocka_unit_test(test_replaced_while_waiting),
      cmocka_unit_test(test_write_inside_update),
      cmocka_unit_test(test_collect_split_and_foreign),
      cmocka_unit_test(test_collect_garbage),
      cmocka_unit_test(test_run_env_final),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
