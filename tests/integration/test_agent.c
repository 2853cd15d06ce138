/*
 * test_agent.c - the agent in a real child process (tests/progs/
 * target_basic, linked with -lmemstats) over a real socket, driven by
 * memtop's client code and by hand-made hostile clients.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <grp.h>
#include <pwd.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/agent.h"
#include "client/client.h"
#include "common/fields.h"
#include "common/procfs.h"
#include "support/fetch.h"
#include "support/host.h"
#include "support/target.h"
#include "wire/wire.h"

static char g_dir[64];

/* ------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------ */
static void prog_path(char *buf, size_t len) {
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  assert_true(n > 0);
  exe[n] = '\0';
  *strrchr(exe, '/') = '\0'; /* $BUILD/tests */
  snprintf(buf, len, "%s/../progs/target_basic", exe);
}

static void read_all(int fd, void *p, size_t n) {
  char *c = p;
  while (n > 0) {
    ssize_t r = read(fd, c, n);
    assert_true(r > 0);
    c += r;
    n -= (size_t)r;
  }
}

/* Starts the target with extra environment "K=V" strings (NULL-ended). */
static void target_start(target_t *t, const char *const *env) {
  char prog[4200], line[128];
  prog_path(prog, sizeof prog);
  target_spawn(t, prog, g_dir, env, NULL, NULL, 0, line, sizeof line);
}

static void target_cmd(target_t *t, const char *cmd) {
  assert_int_equal(write(t->in, cmd, strlen(cmd)), (ssize_t)strlen(cmd));
}

static int alive(pid_t pid) {
  return kill(pid, 0) == 0;
}

/* Reads one whole frame into buf; returns its type, or -1 at EOF. */
static int read_frame(int fd, uint8_t *buf, size_t cap, ms__frame_t *f) {
  size_t have = 0;
  for (;;) {
    const char *why;
    int r = ms__wire_frame(buf, have, MS__WIRE_MAX_PAYLOAD, f, &why);
    if (r == 0)
      return f->type;
    if (r != MS_EAGAIN)
      return -2;
    if (have == cap)
      return -2;
    ssize_t n = recv(fd, buf + have, cap - have > 1 ? 1 : 1, 0);
    if (n <= 0)
      return -1;
    have += (size_t)n;
  }
}

static void good_fetch(int pid, ms_snapshot_t *s) {
  char err[512];
  int r = fetch_snapshot(pid, s, 5000, err, sizeof err);
  if (r != 0)
    fail_msg("fetch_snapshot(%d): %d %s", pid, r, err);
  assert_int_equal(s->pid, pid);
}

static int file_exists(const char *p) {
  struct stat st;
  return lstat(p, &st) == 0;
}

/* ------------------------------------------------------------------------
 * Tests
 * ------------------------------------------------------------------------ */

/* Figures arrive exactly as the target's own snapshot has them. */
static void test_round_trip_exact(void **state) {
  (void)state;
  static const char *const env[] = {"MEMSTATS_MIN_INTERVAL_MS=3600000", NULL};
  target_t t;
  target_start(&t, env);
  static ms_snapshot_t wire1, own, wire2;
  good_fetch(t.pid, &wire1);
  target_cmd(&t, "snap\n");
  uint64_t len;
  read_all(t.out, &len, sizeof len);
  assert_int_equal(len, sizeof own);
  read_all(t.out, &own, sizeof own);

  /* Identity. */
  assert_int_equal(wire1.pid, own.pid);
  assert_int_equal(wire1.start_time, own.start_time);
  assert_string_equal(wire1.comm, "target_basic");
  assert_string_equal(wire1.comm, own.comm);
  assert_int_equal(wire1.lib_version, own.lib_version);
  assert_int_equal(wire1.nproviders, own.nproviders);
  for (uint32_t i = 0; i < own.nproviders; i++)
    assert_string_equal(wire1.providers[i], own.providers[i]);
  /* Every field, with its quality and source. The target is idle, so
   * its own later snapshot must agree but for the clock-like fields. */
  for (int f = 0; f < MS_F__COUNT; f++) {
    assert_int_equal(wire1.quality[f], own.quality[f]);
    assert_int_equal(wire1.source[f], own.source[f]);
    /* The kernel's resident figures, and libmemstats's own (its agent's
     * stack), move with the reading itself. */
    if (f == MS_F_KERNEL_RSS || f == MS_F_KERNEL_VSZ ||
        f == MS_F_KERNEL_ANON_RSS || f == MS_F_KERNEL_RSS_FILE ||
        f == MS_F_KERNEL_RSS_SHMEM || f == MS_F_MEMSTATS_SELF)
      continue;
    if (ms__fields[f].ctype != MS__CT_NONE &&
        ms__field_u64(&wire1, (ms_field_t)f) !=
            ms__field_u64(&own, (ms_field_t)f))
      fail_msg("field %s: wire %llu, target %llu", ms__fields[f].go_name,
               (unsigned long long)ms__field_u64(&wire1, (ms_field_t)f),
               (unsigned long long)ms__field_u64(&own, (ms_field_t)f));
  }
  assert_memory_equal(wire1.pause_ns, own.pause_ns, sizeof own.pause_ns);
  assert_memory_equal(wire1.pause_end, own.pause_end, sizeof own.pause_end);
  assert_int_equal(wire1.nsize_classes, own.nsize_classes);
  assert_memory_equal(wire1.by_size, own.by_size,
                      own.nsize_classes * sizeof own.by_size[0]);
  assert_memory_equal(&wire1.pause_hist, &own.pause_hist,
                      sizeof own.pause_hist);
  /* The target's known accounting. */
  assert_int_equal(wire1.mallocs, 1000);
  assert_int_equal(wire1.frees, 200);
  assert_int_equal(wire1.heap_objects, 800);
  assert_int_equal(wire1.heap_inuse, 4u << 20);
  assert_int_equal(wire1.heap_released, 1u << 20);
  assert_int_equal(wire1.num_gc, 3);
  assert_int_equal(wire1.num_forced_gc, 1);
  assert_int_equal(wire1.pause_total_ns, 50000 + 100000 + 20000);
  assert_int_equal(wire1.pause_ns[2], 20000);
  assert_int_equal(wire1.next_gc, 16u << 20);
  assert_int_equal(wire1.enable_gc, 1);

  /* Within the interval the same snapshot comes back, aged. */
  good_fetch(t.pid, &wire2);
  assert_int_equal(wire2.seq, wire1.seq);
  assert_true(wire2.age_ns > 0);
  wire2.age_ns = wire1.age_ns;
  assert_memory_equal(&wire1, &wire2, sizeof wire1);
  /* The target ends on its own, and cleanly: under ThreadSanitizer (make
   * tsan) a race it reported between its own snapshot and the agent's
   * makes it exit 66. */
  int st = target_wait(&t);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
}

/* Sends a request on an open connection and reads frames up to the
 * snapshot reply. */
static void session_snapshot_flags(int fd, msc_session_t *s, uint64_t flags,
                                   ms_snapshot_t *snap) {
  const uint8_t *req;
  size_t len;
  assert_int_equal(msc_session_request_snapshot_flags(s, flags, &req, &len), 0);
  assert_int_equal(send(fd, req, len, MSG_NOSIGNAL), (ssize_t)len);
  static uint8_t buf[1 << 16];
  for (;;) {
    ms__frame_t f;
    int type = read_frame(fd, buf, sizeof buf, &f);
    assert_true(type > 0);
    size_t used;
    msc_event_t ev;
    int r =
        msc_session_feed(s, buf, MS__WIRE_HEADER + f.length, &used, snap, &ev);
    if (r != 0)
      fail_msg("%s", ev.msg);
    assert_int_equal(used, MS__WIRE_HEADER + f.length);
    if (ev.type == MSC_EV_SNAPSHOT)
      return;
  }
}

static void session_snapshot(int fd, msc_session_t *s, ms_snapshot_t *snap) {
  session_snapshot_flags(fd, s, 0, snap);
}

static void assert_smaps(const ms_snapshot_t *s, ms_quality_t want) {
  assert_int_equal(s->quality[MS_F_KERNEL_LAZYFREE], want);
  assert_int_equal(s->quality[MS_F_KERNEL_ANON_HUGE], want);
  assert_int_equal(s->quality[MS_F_KERNEL_SWAP], want);
  /* RSS is there either way: from statm, or from smaps_rollup. */
  assert_int_equal(s->quality[MS_F_KERNEL_RSS], MS_Q_EXACT);
  assert_int_equal(s->quality[MS_F_KERNEL_VSZ], MS_Q_EXACT);
  assert_true(s->kernel_rss > 0);
}

/* Starts a target with env and opens a session to it on a raw
 * connection (*fd). */
static msc_session_t *start_with_session(target_t *t, const char *const env[],
                                         int *fd) {
  uint64_t st;
  target_start(t, env);
  assert_int_equal(msc_proc_start_time(t->pid, &st), 0);
  *fd = target_connect(t->sock);
  assert_true(*fd >= 0);
  return msc_session_new(t->pid, st);
}

/* A plain request gets no smaps figures; a smaps request gets them exact,
 * even inside the interval of a cached plain snapshot (a fresh one is
 * computed with smaps), and that snapshot then answers both kinds. */
static void test_smaps_request(void **state) {
  (void)state;
  static const char *const env[] = {"MEMSTATS_MIN_INTERVAL_MS=3600000", NULL};
  target_t t;
  int fd;
  msc_session_t *s = start_with_session(&t, env, &fd);
  static ms_snapshot_t a, b, c, d;
  session_snapshot_flags(fd, s, 0, &a);
  assert_smaps(&a, MS_Q_UNAVAILABLE);
  assert_true(msc_session_hello(s)->capabilities & MS__CAP_SMAPS);

  session_snapshot_flags(fd, s, MS__REQ_SMAPS, &b);
  assert_smaps(&b, MS_Q_EXACT);
  assert_true(b.seq > a.seq);

  session_snapshot_flags(fd, s, 0, &c);
  assert_int_equal(c.seq, b.seq);
  assert_smaps(&c, MS_Q_EXACT);
  session_snapshot_flags(fd, s, MS__REQ_SMAPS, &d);
  assert_int_equal(d.seq, b.seq);
  assert_int_equal(d.kernel_swap, b.kernel_swap);
  assert_int_equal(d.kernel_lazyfree, b.kernel_lazyfree);
  msc_session_free(s);
  close(fd);

  /* The blocking helper passes the flag too. */
  static ms_snapshot_t e;
  char err[512];
  assert_int_equal(
      fetch_snapshot_flags(t.pid, MS__REQ_SMAPS, &e, 5000, err, sizeof err), 0);
  assert_smaps(&e, MS_Q_EXACT);
  target_kill(&t);
}

static void test_rate_limit(void **state) {
  (void)state;
  static const char *const env[] = {"MEMSTATS_MIN_INTERVAL_MS=1000", NULL};
  target_t t;
  int fd;
  msc_session_t *s = start_with_session(&t, env, &fd);
  static ms_snapshot_t a, b, c;
  session_snapshot(fd, s, &a);
  session_snapshot(fd, s, &b);
  /* The hello computed the snapshot (identity, providers): both requests
   * fall in the same interval, so they share one sequence number. */
  assert_int_equal(a.seq, b.seq);
  assert_true(b.age_ns > a.age_ns);
  assert_int_equal(b.time_mono_ns, a.time_mono_ns);
  assert_non_null(msc_session_hello(s));
  assert_string_equal(msc_session_hello(s)->comm, "target_basic");
  assert_string_equal(msc_session_hello(s)->lib_version, MS_VERSION_STRING);
  struct timespec ts = {1, 100 * 1000000};
  nanosleep(&ts, NULL);
  session_snapshot(fd, s, &c);
  assert_true(c.seq > a.seq);
  assert_true(c.time_mono_ns > a.time_mono_ns);
  assert_true(c.age_ns < b.age_ns || c.age_ns < 1000000000ull);
  msc_session_free(s);
  close(fd);
  target_kill(&t);
}

/* Bytes that must get an error and a closed socket, never a crash. */
static void expect_error_and_close(const char *path, const void *bytes,
                                   size_t n, int want_code) {
  int fd = target_connect(path);
  assert_true(fd >= 0);
  if (n > 0)
    assert_int_equal(send(fd, bytes, n, MSG_NOSIGNAL), (ssize_t)n);
  static uint8_t buf[1 << 16];
  ms__frame_t f;
  assert_int_equal(read_frame(fd, buf, sizeof buf, &f), MS__MSG_HELLO);
  int type = read_frame(fd, buf, sizeof buf, &f);
  assert_int_equal(type, MS__MSG_ERROR);
  int code;
  char reason[256];
  assert_int_equal(ms__wire_decode_error(buf + MS__WIRE_HEADER, f.length, &code,
                                         reason, sizeof reason, NULL),
                   0);
  assert_int_equal(code, want_code);
  assert_true(reason[0] != '\0');
  assert_int_equal(read_frame(fd, buf, sizeof buf, &f), -1); /* closed */
  close(fd);
}

static void test_garbage(void **state) {
  (void)state;
  target_t t;
  /* Without a heap profile: its request is then one the agent cannot
   * answer (below). A linked program profiles at the default rate. */
  const char *env[] = {"MEMSTATS_PROFILE_RATE=0", NULL};
  target_start(&t, env);
  ms_snapshot_t *snap = malloc(sizeof *snap);

  /* Random bytes. */
  uint8_t junk[512];
  srand(42);
  for (size_t i = 0; i < sizeof junk; i++)
    junk[i] = (uint8_t)rand();
  junk[0] = 'X';
  expect_error_and_close(t.sock, junk, sizeof junk, MS_EPROTO);

  /* Wrong magic, version 0, a newer version, an oversized length. */
  uint8_t h[MS__WIRE_HEADER] = {'M', 'S', 'T', 'X', 1, 0, 2, 0};
  expect_error_and_close(t.sock, h, sizeof h, MS_EPROTO);
  memcpy(h, "MSTW", 4);
  h[4] = 0;
  expect_error_and_close(t.sock, h, sizeof h, MS_EPROTO);
  h[4] = 99;
  expect_error_and_close(t.sock, h, sizeof h, MS_EVERSION);
  h[4] = 1;
  h[8] = 0xff, h[9] = 0xff, h[10] = 0xff, h[11] = 0x7f;
  expect_error_and_close(t.sock, h, sizeof h, MS_EPROTO);

  /* A truncated frame, then the client goes away. */
  int fd = target_connect(t.sock);
  uint8_t req[128];
  ms__wire_writer_t w;
  ms__wire_writer_init(&w, req, sizeof req);
  ms__wire_encode_request(&w, MS__MSG_SNAPSHOT_REQ, 0);
  assert_int_equal(send(fd, req, w.len - 3, MSG_NOSIGNAL),
                   (ssize_t)(w.len - 3));
  close(fd);

  /* A request whose record runs past the frame. */
  req[MS__WIRE_HEADER + 2] = 0xff;
  expect_error_and_close(t.sock, req, w.len, MS_EPROTO);

  /* A client that never sends, kept open while a good one is served. */
  int silent = target_connect(t.sock);
  assert_true(silent >= 0);

  /* Clients that close in the middle of a reply. */
  ms__wire_writer_init(&w, req, sizeof req);
  ms__wire_encode_request(&w, MS__MSG_SNAPSHOT_REQ, 0);
  for (int i = 0; i < 20; i++) {
    fd = target_connect(t.sock);
    assert_int_equal(send(fd, req, w.len, MSG_NOSIGNAL), (ssize_t)w.len);
    char few[10];
    assert_true(recv(fd, few, sizeof few, 0) > 0);
    close(fd);
  }
  /* A profile request to a process that does not profile, and a
   * reserved request type, get "not supported", and the connection stays
   * usable. */
  fd = target_connect(t.sock);
  ms__wire_writer_init(&w, req, sizeof req);
  ms__wire_encode_request(&w, MS__MSG_PROFILE_REQ, 0);
  ms__wire_encode_request(&w, (ms__msg_type_t)77, 0);
  ms__wire_encode_request(&w, MS__MSG_SNAPSHOT_REQ, 0);
  assert_int_equal(send(fd, req, w.len, MSG_NOSIGNAL), (ssize_t)w.len);
  static uint8_t buf[1 << 16];
  ms__frame_t f;
  assert_int_equal(read_frame(fd, buf, sizeof buf, &f), MS__MSG_HELLO);
  for (int i = 0; i < 2; i++) {
    int code;
    assert_int_equal(read_frame(fd, buf, sizeof buf, &f), MS__MSG_ERROR);
    ms__wire_decode_error(buf + MS__WIRE_HEADER, f.length, &code, NULL, 0,
                          NULL);
    assert_int_equal(code, MS_ENOSYS);
  }
  assert_int_equal(read_frame(fd, buf, sizeof buf, &f), MS__MSG_SNAPSHOT);
  close(fd);

  assert_true(alive(t.pid));
  good_fetch(t.pid, snap);
  close(silent);
  good_fetch(t.pid, snap);
  free(snap);
  target_kill(&t);
}

static void test_burst(void **state) {
  (void)state;
  target_t t;
  target_start(&t, NULL);
  enum { N = 200 };
  int fds[N];
  int opened = 0;
  for (int i = 0; i < N; i++) {
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", t.sock);
    fds[i] = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (connect(fds[i], (struct sockaddr *)&sa, sizeof sa) == 0)
      opened++;
  }
  assert_true(opened > 0);
  ms_snapshot_t *snap = malloc(sizeof *snap);
  good_fetch(t.pid, snap); /* while all 200 are still open */
  for (int i = 0; i < N; i++)
    close(fds[i]);
  assert_true(alive(t.pid));
  good_fetch(t.pid, snap);
  free(snap);
  target_kill(&t);
}

/* Raises CAP_DAC_OVERRIDE after setuid, so that the test can reach a
 * 0700 directory as another uid and meet the agent's own check. */
static int keep_dac_override(void) {
  struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[2];
  memset(data, 0, sizeof data);
  data[0].permitted = data[0].effective = 1u << CAP_DAC_OVERRIDE;
  return (int)syscall(SYS_capset, &hdr, data);
}

static void test_other_uid_refused(void **state) {
  (void)state;
  if (geteuid() != 0) {
    print_message("skipped: not root, so no other uid can be switched to "
                  "for the SO_PEERCRED check\n");
    skip();
  }
  struct passwd *pw = getpwnam("nobody");
  if (pw == NULL) {
    print_message("skipped: no user 'nobody' to switch to\n");
    skip();
  }
  target_t t;
  target_start(&t, NULL);
  pid_t c = fork();
  if (c == 0) {
    /* 1: past the directory with CAP_DAC_OVERRIDE, the agent refuses. */
    prctl(PR_SET_KEEPCAPS, 1);
    if (setgroups(0, NULL) != 0 || setgid(pw->pw_gid) != 0 ||
        setuid(pw->pw_uid) != 0)
      _exit(10);
    if (keep_dac_override() != 0)
      _exit(77);
    int fd = target_connect(t.sock);
    if (fd < 0)
      _exit(11);
    static uint8_t buf[4096];
    ms__frame_t f;
    if (read_frame(fd, buf, sizeof buf, &f) != MS__MSG_REFUSED)
      _exit(12);
    int code;
    char reason[256];
    ms__wire_decode_error(buf + MS__WIRE_HEADER, f.length, &code, reason,
                          sizeof reason, NULL);
    if (code != MS_EREFUSED || strstr(reason, "permission") == NULL)
      _exit(13);
    if (read_frame(fd, buf, sizeof buf, &f) != -1)
      _exit(14);
    close(fd);
    /* 2: without the capability, memtop's client says permission. */
    struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct none[2];
    memset(none, 0, sizeof none);
    syscall(SYS_capset, &hdr, none);
    static ms_snapshot_t s;
    char err[512];
    int r = fetch_snapshot(t.pid, &s, 2000, err, sizeof err);
    if (r != MS_EACCES || strstr(err, "permission") == NULL)
      _exit(15);
    _exit(0);
  }
  int st;
  waitpid(c, &st, 0);
  assert_true(WIFEXITED(st));
  if (WEXITSTATUS(st) == 77) {
    target_kill(&t);
    print_message("skipped: capset() not permitted here\n");
    skip();
  }
  assert_int_equal(WEXITSTATUS(st), 0);
  assert_true(alive(t.pid));
  ms_snapshot_t *snap = malloc(sizeof *snap);
  good_fetch(t.pid, snap);
  free(snap);
  target_kill(&t);
}

/* What a client running as uid 65534 gets from the agent at sock: the
 * first frame's type (MS__MSG_HELLO, MS__MSG_REFUSED), or -1. */
static int first_frame_as_nobody(const char *sock) {
  pid_t c = fork();
  if (c == 0) {
    if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0)
      _exit(100);
    int fd = target_connect(sock);
    if (fd < 0)
      _exit(101);
    static uint8_t buf[4096];
    ms__frame_t f;
    int type = read_frame(fd, buf, sizeof buf, &f);
    if (type == MS__MSG_REFUSED) {
      int code;
      char reason[256];
      ms__wire_decode_error(buf + MS__WIRE_HEADER, f.length, &code, reason,
                            sizeof reason, NULL);
      if (strstr(reason, "dumpable") == NULL)
        _exit(102);
    }
    _exit(type == MS__MSG_HELLO ? 0 : type == MS__MSG_REFUSED ? 1 : 103);
  }
  int st;
  waitpid(c, &st, 0);
  assert_true(WIFEXITED(st));
  int code = WEXITSTATUS(st);
  if (code >= 100)
    fail_msg("the client as uid 65534 failed (%d)", code);
  return code == 0 ? MS__MSG_HELLO : MS__MSG_REFUSED;
}

/* A process that is not dumpable (a setuid or setgid program, one whose
 * user changed, or one that said so, as ssh-agent does) is one the kernel
 * lets only root trace or read: its agent answers root only, even its own
 * user. The same program, dumpable, answers its user. */
static void test_not_dumpable_answers_root_only(void **state) {
  (void)state;
  if (geteuid() != 0) {
    print_message("skipped: not root, so no target can run as another "
                  "user\n");
    skip();
  }
  /* Its own directory, which uid 65534 can reach (g_dir is root's). */
  char dir[] = "/tmp/ms-agent-nobody-XXXXXX", prog[4200], line[128];
  assert_non_null(mkdtemp(dir));
  assert_int_equal(chown(dir, 65534, 65534), 0);
  prog_path(prog, sizeof prog);
  static const char *const dumpable[] = {"TARGET_AS=65534", NULL};
  static const char *const nodump[] = {"TARGET_AS=65534", "TARGET_NODUMP=1",
                                       NULL};
  for (int i = 0; i < 2; i++) {
    target_t t;
    target_spawn(&t, prog, dir, i == 0 ? dumpable : nodump, NULL, NULL, 0, line,
                 sizeof line);
    if (strncmp(line, "ready ", 6) != 0)
      fail_msg("target_basic as uid 65534: %s", line);
    int want = i == 0 ? MS__MSG_HELLO : MS__MSG_REFUSED;
    if (first_frame_as_nobody(t.sock) != want)
      fail_msg("a %s process of uid 65534 %s its own user",
               i == 0 ? "dumpable" : "non-dumpable",
               i == 0 ? "refused" : "answered");
    /* Root is answered either way (over a plain connection: memtop's
     * client itself trusts no directory of another user). */
    int fd = target_connect(t.sock);
    assert_true(fd >= 0);
    static uint8_t buf[4096];
    ms__frame_t f;
    assert_int_equal(read_frame(fd, buf, sizeof buf, &f), MS__MSG_HELLO);
    close(fd);
    target_kill(&t);
  }
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

/* The output on stderr of `mt_target dropuid [JAIL]` (linked with
 * -lmemstats), started as root with MEMSTATS_DEBUG=1 in a socket directory
 * of root's, in err: it starts its agent, becomes uid 65534 (after a
 * chroot to JAIL), and at the end of its stdin calls ms_agent_stop() and
 * exits. With profiling off, nothing but a wake ends the agent's poll()
 * before its idle timeout (300 s): a stop that could not wake it would
 * wait that long, so the program must have exited (status 0) well before
 * the 60 s after which it is killed and the test fails. */
static void stop_after_drop(const char *jail, char *err, size_t len) {
  char prog[4200], dir[128], logp[160], line[128];
  prog_path(prog, sizeof prog);
  snprintf(strrchr(prog, '/'), sizeof prog - strlen(prog), "/mt_target");
  snprintf(dir, sizeof dir, "%s/drop", g_dir);
  snprintf(logp, sizeof logp, "%s/stderr", g_dir);
  int in[2], out[2];
  assert_int_equal(pipe2(in, O_CLOEXEC), 0);
  assert_int_equal(pipe2(out, O_CLOEXEC), 0);
  pid_t pid = fork();
  if (pid == 0) {
    int e = open(logp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (e < 0 || dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0 || dup2(e, 2) < 0)
      _exit(127);
    setenv("MEMSTATS_DIR", dir, 1);
    setenv("MEMSTATS_DEBUG", "1", 1);
    setenv("MEMSTATS_PROFILE_RATE", "0", 1);
    if (jail != NULL) {
      /* A sanitizer build's leak check at exit reads /proc, which the
       * chroot has not. */
      static char asan[512];
      const char *was = getenv("ASAN_OPTIONS");
      snprintf(asan, sizeof asan, "%.400s%sdetect_leaks=0",
               was != NULL ? was : "", was != NULL && was[0] ? ":" : "");
      setenv("ASAN_OPTIONS", asan, 1);
    }
    execl(prog, prog, "dropuid", jail, (char *)NULL);
    _exit(127);
  }
  assert_true(pid > 0);
  close(in[0]);
  close(out[1]);
  assert_int_equal(target_read_line(out[0], line, sizeof line), 0);
  if (strncmp(line, "ready ", 6) != 0)
    fail_msg("mt_target dropuid: %s", line);
  close(in[1]); /* its stdin ends: it stops its agent, then exits */
  int st = 0, done = 0;
  for (int i = 0; i < 6000 && !done; i++) {
    pid_t w = waitpid(pid, &st, WNOHANG);
    done = w == pid;
    if (!done) {
      struct timespec ts = {0, 10 * 1000000};
      nanosleep(&ts, NULL);
    }
  }
  if (!done) {
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
  }
  close(out[0]);
  int fd = open(logp, O_RDONLY | O_CLOEXEC);
  assert_true(fd >= 0);
  ssize_t n = read(fd, err, len - 1);
  close(fd);
  err[n > 0 ? n : 0] = '\0';
  if (!done)
    fail_msg("ms_agent_stop() did not return within 60 s after the program "
             "became nobody; its stderr:\n%s",
             err);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
    fail_msg("mt_target dropuid ended with status %#x; its stderr:\n%s", st,
             err);
  if (strstr(err, "stop could not wake") != NULL ||
      strstr(err, "stop woke the agent thread through") == NULL)
    fail_msg("the stop did not wake the agent thread; its stderr:\n%s", err);
}

/* A program that drops its privileges once its agent runs (a server's
 * workers: root to nobody) can no longer connect to its socket (root's
 * 0700 directory) nor open the agent's wake pipe, which root made: its
 * ms_agent_stop() and exit must wake the agent thread all the same, not
 * wait for the thread's next timeout (up to 300 s; 1 s at exit). */
static void test_stop_after_privilege_drop(void **state) {
  (void)state;
  if (geteuid() != 0) {
    print_message("skipped: not root, so the target cannot become another "
                  "user\n");
    skip();
  }
  static char err[8192];
  stop_after_drop(NULL, err, sizeof err);
}

#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL
#endif

/* The same in a chroot: neither the socket's path nor /proc is there, and
 * the wake goes through a pidfd of the agent's thread (Linux 6.9). */
static void test_stop_after_privilege_drop_chroot(void **state) {
  (void)state;
  if (geteuid() != 0) {
    print_message("skipped: not root, so the target cannot chroot\n");
    skip();
  }
#ifdef SYS_pidfd_open
  int pfd =
      (int)syscall(SYS_pidfd_open, (int)syscall(SYS_gettid), PIDFD_THREAD);
#else
  int pfd = -1;
#endif
  if (pfd < 0) {
    print_message("skipped: no pidfd of a thread here (Linux 6.9)\n");
    skip();
  }
  close(pfd);
  char jail[128];
  snprintf(jail, sizeof jail, "%s/jail", g_dir);
  assert_int_equal(mkdir(jail, 0755), 0);
  static char err[8192];
  stop_after_drop(jail, err, sizeof err);
  rmdir(jail);
  if (strstr(err, "pidfd_getfd") == NULL)
    fail_msg("the stop in a chroot did not wake the agent through a pidfd; "
             "its stderr:\n%s",
             err);
}

static void expect_unsafe(const char *dir) {
  setenv("MEMSTATS_DIR", dir, 1);
  assert_int_equal(ms_agent_start(), MS_EUNSAFE);
  setenv("MEMSTATS_DIR", g_dir, 1);
}

static void test_unsafe_dirs(void **state) {
  (void)state;
  char p[80];
  /* A symlink to a private directory. */
  snprintf(p, sizeof p, "%s/link", g_dir);
  assert_int_equal(symlink(g_dir, p), 0);
  expect_unsafe(p);
  /* Mode 0777. */
  snprintf(p, sizeof p, "%s/open", g_dir);
  assert_int_equal(mkdir(p, 0700), 0);
  assert_int_equal(chmod(p, 0777), 0);
  expect_unsafe(p);
  chmod(p, 0750);
  expect_unsafe(p);
  /* Owned by someone else. */
  if (geteuid() == 0) {
    snprintf(p, sizeof p, "%s/theirs", g_dir);
    assert_int_equal(mkdir(p, 0700), 0);
    assert_int_equal(chown(p, 65534, 65534), 0);
    expect_unsafe(p);
  } else {
    print_message("note: not root, the other-owner case is not tested\n");
  }
  /* memtop's client will not trust an unsafe directory either. */
  snprintf(p, sizeof p, "%s/open", g_dir);
  chmod(p, 0777);
  char sp[MSC_PATH_MAX];
  snprintf(sp, sizeof sp, "%s/%d.sock", p, (int)getpid());
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un sa = {AF_UNIX, {0}};
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sp);
  assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
  listen(fd, 1);
  setenv("MEMSTATS_DIR", p, 1);
  static ms_snapshot_t s;
  char err[512];
  assert_int_equal(fetch_snapshot(getpid(), &s, 1000, err, sizeof err),
                   MS_EUNSAFE);
  assert_non_null(strstr(err, "not trusting"));
  setenv("MEMSTATS_DIR", g_dir, 1);
  close(fd);
  /* A safe directory (created 0700 if missing) works, and stop removes
   * the socket. */
  snprintf(p, sizeof p, "%s/fresh", g_dir);
  setenv("MEMSTATS_DIR", p, 1);
  assert_int_equal(ms_agent_start(), 0);
  assert_int_equal(ms_agent_start(), MS_EEXIST);
  struct stat st;
  assert_int_equal(lstat(p, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0700);
  snprintf(sp, sizeof sp, "%s/%d.sock", p, (int)getpid());
  assert_int_equal(lstat(sp, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0600);
  assert_int_equal(fetch_snapshot(getpid(), &s, 2000, err, sizeof err), 0);
  assert_int_equal(ms_agent_stop(), 0);
  assert_false(file_exists(sp));
  assert_int_equal(ms_agent_stop(), 0);
  setenv("MEMSTATS_DIR", g_dir, 1);
}

static void test_stale_and_reuse(void **state) {
  (void)state;
  /* A dead PID's socket. */
  target_t t;
  target_start(&t, NULL);
  int dead = t.pid;
  char dead_sock[MSC_PATH_MAX];
  snprintf(dead_sock, sizeof dead_sock, "%s", t.sock);
  target_kill(&t);
  assert_true(file_exists(dead_sock));

  /* A live PID that is not a libmemstats process, with a socket file
   * nobody listens on (as if a dead target's PID had been reused). */
  pid_t other = fork();
  if (other == 0) {
    for (;;)
      pause();
  }
  char other_sock[MSC_PATH_MAX];
  snprintf(other_sock, sizeof other_sock, "%s/%d.sock", g_dir, (int)other);
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un sa = {AF_UNIX, {0}};
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s", other_sock);
  assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
  close(fd);

  target_t live;
  target_start(&live, NULL);

  msc_target_t *v;
  size_t n;
  assert_int_equal(msc_discover(&v, &n), 0);
  int found = 0;
  for (size_t i = 0; i < n; i++) {
    assert_int_not_equal(v[i].pid, dead);
    assert_int_not_equal(v[i].pid, other);
    if (v[i].pid == live.pid) {
      found = 1;
      assert_string_equal(v[i].comm, "target_basic");
      assert_string_equal(v[i].path, live.sock);
      uint64_t st;
      assert_int_equal(msc_proc_start_time(live.pid, &st), 0);
      assert_int_equal(v[i].start_time, st);
    }
  }
  free(v);
  assert_true(found);
  assert_false(file_exists(dead_sock));
  assert_false(file_exists(other_sock));

  /* memtop's words for each case (msc_explain_connect). */
  static ms_snapshot_t s;
  char err[512];
  assert_int_equal(fetch_snapshot(dead, &s, 1000, err, sizeof err), MS_ESRCH);
  assert_non_null(strstr(err, "no such process"));
  assert_int_equal(fetch_snapshot(other, &s, 1000, err, sizeof err), MS_ENOENT);
  assert_non_null(strstr(err, "does not run libmemstats"));
  assert_non_null(strstr(err, "memtop run"));
  fd = socket(AF_UNIX, SOCK_STREAM, 0);
  assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
  close(fd);
  assert_int_equal(fetch_snapshot(other, &s, 1000, err, sizeof err),
                   MS_ECONNREFUSED);
  assert_non_null(strstr(err, "refuses connections"));
  assert_false(file_exists(other_sock));
  kill(other, SIGKILL);
  waitpid(other, NULL, 0);

  /* The PID answers, but not with the start time we knew: reused. */
  uint64_t st;
  assert_int_equal(msc_proc_start_time(live.pid, &st), 0);
  fd = target_connect(live.sock);
  msc_session_t *ses = msc_session_new(live.pid, st + 1);
  const uint8_t *req;
  size_t len;
  msc_session_request_snapshot(ses, &req, &len);
  assert_int_equal(send(fd, req, len, MSG_NOSIGNAL), (ssize_t)len);
  static uint8_t buf[1 << 16];
  ms__frame_t f;
  assert_int_equal(read_frame(fd, buf, sizeof buf, &f), MS__MSG_HELLO);
  size_t used;
  msc_event_t ev;
  assert_int_equal(
      msc_session_feed(ses, buf, MS__WIRE_HEADER + f.length, &used, &s, &ev),
      MS_ESTALE);
  assert_int_equal(ev.type, MSC_EV_ERROR);
  assert_non_null(strstr(ev.msg, "reused"));
  assert_null(msc_session_hello(ses));
  msc_session_free(ses);
  close(fd);
  target_kill(&live);
}

static void test_fork_and_exit(void **state) {
  (void)state;
  target_t t;
  target_start(&t, NULL);
  target_cmd(&t, "fork\n");
  char line[64];
  assert_int_equal(target_read_line(t.out, line, sizeof line), 0);
  int child = 0;
  assert_int_equal(sscanf(line, "child %d", &child), 1);
  char csock[MSC_PATH_MAX];
  snprintf(csock, sizeof csock, "%s/%d.sock", g_dir, child);
  /* The child (linked with -lmemstats, no preload) starts its agent with
   * ms_agent_start(): the fork handler starts none (see below); give the
   * scheduler a bounded while to run it. */
  for (int i = 0; i < 1000 && !file_exists(csock); i++)
    usleep(10000);
  ms_snapshot_t *snap = malloc(sizeof *snap);
  good_fetch(child, snap);
  assert_int_equal(snap->mallocs, 1000); /* inherited figures */
  good_fetch(t.pid, snap);
  /* Exit removes the socket (the child dies with its parent). */
  target_cmd(&t, "exit\n");
  int st = target_wait(&t);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  assert_false(file_exists(t.sock));
  free(snap);
}

/* The preload (the target program run under it: it is linked with
 * libmemstats.so.0, the preload's soname, so the preload serves it); NULL
 * in a sanitizer build, whose target program cannot take a preload before
 * the sanitizer's runtime. */
static const char *preload_env(void) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return NULL;
#endif
  static char env[1300];
  char build[1024];
  if (host_build_dir(build, sizeof build) != 0)
    return NULL;
  char so[1200];
  if (host_preload_path(build, so, sizeof so) != 0)
    return NULL;
  snprintf(env, sizeof env, "LD_PRELOAD=%s", so);
  return env;
}

/* A fork child of a program running the agent has no thread but the one
 * that forked, as fork() returns in it: the fork handler starts no agent
 * (it may only do async-signal-safe work; pthread_create, mmap and the
 * wait for the thread are not). The child looks with open and read only.
 * Linked, and under the preload. */
static void test_fork_handler_starts_no_thread(void **state) {
  (void)state;
  const char *pre = preload_env();
  const char *const under[] = {pre, NULL};
  if (pre == NULL)
    print_message("note: sanitizer build: the preloaded case is not run\n");
  for (int i = 0; i < (pre != NULL ? 2 : 1); i++) {
    target_t t;
    target_start(&t, i == 0 ? NULL : under);
    static ms_snapshot_t snap;
    good_fetch(t.pid, &snap); /* its agent runs */
    target_cmd(&t, "forkthreads\n");
    char line[64];
    assert_int_equal(target_read_line(t.out, line, sizeof line), 0);
    if (strcmp(line, "threads 1") != 0)
      fail_msg("%s: the fork child had \"%s\" as fork() returned in it",
               i == 0 ? "linked" : "preloaded", line);
    target_kill(&t);
  }
}

/* Under the preload the agent makes its socket a while after the start
 * (MEMSTATS_AGENT_DELAY_MS; here far longer than the test), so that a
 * program that ends at once never makes one; a program that calls
 * ms_agent_start() itself (the target does, before it says it is ready)
 * gets it at once. */
static void test_start_call_does_not_wait_for_delay(void **state) {
  (void)state;
  const char *pre = preload_env();
  if (pre == NULL) {
    print_message("skipped: sanitizer build: no preload in its target\n");
    skip();
  }
  const char *const under[] = {pre, "MEMSTATS_AGENT_DELAY_MS=600000", NULL};
  target_t t;
  target_start(&t, under);
  static ms_snapshot_t snap;
  good_fetch(t.pid, &snap);
  target_kill(&t);
}

/* Under the preload, a fork child that lives and allocates gets its own
 * agent and socket, started by an allocation of its own outside the fork
 * handler (a while after the fork: src/preload/preload.c), and serves its
 * figures. */
static void test_fork_child_allocates_gets_agent(void **state) {
  (void)state;
  const char *pre = preload_env();
  if (pre == NULL) {
    print_message("skipped: sanitizer build: no preload in its target\n");
    skip();
  }
  const char *const under[] = {pre, NULL};
  target_t t;
  target_start(&t, under);
  target_cmd(&t, "forkalloc\n");
  char line[64];
  assert_int_equal(target_read_line(t.out, line, sizeof line), 0);
  int child = 0;
  assert_int_equal(sscanf(line, "child %d", &child), 1);
  char csock[MSC_PATH_MAX];
  snprintf(csock, sizeof csock, "%s/%d.sock", g_dir, child);
  for (int i = 0; i < 1000 && !file_exists(csock); i++)
    usleep(10000);
  if (!file_exists(csock))
    fail_msg("the allocating fork child %d made no socket in 10 s", child);
  ms_snapshot_t *snap = malloc(sizeof *snap);
  good_fetch(child, snap);
  assert_int_equal(snap->pid, child);
  assert_true(snap->mallocs > 0);
  good_fetch(t.pid, snap);
  free(snap);
  target_kill(&t);
}

static void test_env(void **state) {
  (void)state;
  /* MEMSTATS_AGENT=0: statistics, no socket. */
  static const char *const off[] = {"MEMSTATS_AGENT=0", NULL};
  target_t t;
  target_start(&t, off);
  assert_false(file_exists(t.sock));
  static ms_snapshot_t s;
  char err[512];
  assert_int_equal(fetch_snapshot(t.pid, &s, 1000, err, sizeof err), MS_ENOENT);
  target_kill(&t);
  /* Garbage in the interval falls back to the default. */
  static const char *const junk[] = {"MEMSTATS_MIN_INTERVAL_MS=12abc",
                                     "MEMSTATS_AGENT=yes please", NULL};
  target_start(&t, junk);
  assert_true(file_exists(t.sock));
  good_fetch(t.pid, &s);
  target_kill(&t);

  uint64_t v;
  assert_int_equal(ms__parse_uint("100", 1000, &v), 0);
  assert_int_equal(v, 100);
  assert_int_equal(ms__parse_uint(" 7 ", 1000, &v), 0);
  assert_int_equal(v, 7);
  assert_int_equal(ms__parse_uint("1001", 1000, &v), MS_EINVAL);
  assert_int_equal(ms__parse_uint("", 1000, &v), MS_EINVAL);
  assert_int_equal(ms__parse_uint("-1", 1000, &v), MS_EINVAL);
  assert_int_equal(ms__parse_uint("1e3", 1000, &v), MS_EINVAL);
  assert_int_equal(ms__parse_uint("99999999999999999999999", UINT64_MAX, &v),
                   MS_EINVAL);
  assert_int_equal(ms__parse_uint("18446744073709551615", UINT64_MAX, &v), 0);
  assert_int_equal(v, UINT64_MAX);
}

static int setup(void **state) {
  (void)state;
  return target_dir_setup(g_dir, sizeof g_dir, "/tmp/ms-agent-test-XXXXXX");
}

static int teardown(void **state) {
  (void)state;
  target_dir_remove(g_dir);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trip_exact),
      cmocka_unit_test(test_rate_limit),
      cmocka_unit_test(test_smaps_request),
      cmocka_unit_test(test_garbage),
      cmocka_unit_test(test_burst),
      cmocka_unit_test(test_other_uid_refused),
      cmocka_unit_test(test_not_dumpable_answers_root_only),
      cmocka_unit_test(test_stop_after_privilege_drop),
      cmocka_unit_test(test_stop_after_privilege_drop_chroot),
      cmocka_unit_test(test_unsafe_dirs),
      cmocka_unit_test(test_stale_and_reuse),
      cmocka_unit_test(test_fork_and_exit),
      cmocka_unit_test(test_fork_handler_starts_no_thread),
      cmocka_unit_test(test_start_call_does_not_wait_for_delay),
      cmocka_unit_test(test_fork_child_allocates_gets_agent),
      cmocka_unit_test(test_env),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
