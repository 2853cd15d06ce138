/*
 * test_agent_fds.c - the agent never touches the program's descriptors
 * and never spins for want of its own (issue 9, items 1 and 2): real
 * programs (tests/progs/fd_target, linked with -lmemstats; bash under the
 * preload) close, replace and use up descriptors while the agent runs,
 * and memtop's client fetches over the real socket.
 *
 * The agent's CPU time is read from /proc/PID/task/TID/stat (its thread
 * is named memstats-agent); "idle" is a generous bound (a fifth of the
 * time waited), far from the whole core a spinning agent takes.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "client/client.h"
#include "support/fetch.h"
#include "support/host.h"
#include "support/target.h"
#include "wire/wire.h"

static char g_dir[64];
static char g_build[1024];
static char g_preload[1200];

/* ------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------ */
/* How the tests run the agent: with a descriptor table of its own (the
 * normal case), or with unshare(2) forbidden (a seccomp filter, as in
 * containers), its descriptors then in the program's table: the state
 * of the *_shared tests. */
static const char k_shared[] = "FD_TARGET_NO_UNSHARE=1";
#define SHARED(state) (*(state) != NULL)

/* Starts fd_target with extra environment "K=V" strings (NULL-ended),
 * in the mode the test's state names, with descriptors keep[] left open
 * in it (at their numbers). */
static void target_start(target_t *t, void **state, const char *const *env,
                         const int *keep, int nkeep) {
  static const char *const shared[] = {k_shared, NULL};
  char prog[1200], line[128];
  snprintf(prog, sizeof prog, "%s/progs/fd_target", g_build);
  target_spawn(t, prog, g_dir, env,
               state != NULL && SHARED(state) ? shared : NULL, keep, nkeep,
               line, sizeof line);
  if (strncmp(line, "ready ", 6) != 0)
    fail_msg("fd_target: %s", line);
}

/* The agent thread's TID in pid, or -1. */
static int agent_tid(int pid) {
  char path[384], comm[64];
  snprintf(path, sizeof path, "/proc/%d/task", pid);
  DIR *d = opendir(path);
  if (d == NULL)
    return -1;
  struct dirent *e;
  int tid = -1;
  while ((e = readdir(d)) != NULL && tid < 0) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9')
      continue;
    snprintf(path, sizeof path, "/proc/%d/task/%s/comm", pid, e->d_name);
    FILE *f = fopen(path, "r");
    if (f == NULL)
      continue;
    if (fgets(comm, sizeof comm, f) != NULL &&
        strncmp(comm, "memstats-agent", 14) == 0)
      tid = atoi(e->d_name);
    fclose(f);
  }
  closedir(d);
  return tid;
}

/* CPU time (clock ticks, user + system) of a thread. */
static long thread_ticks(int pid, int tid) {
  char path[128], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/task/%d/stat", pid, tid);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  char *p = strrchr(buf, ')');
  assert_non_null(p);
  unsigned long ut = 0, st = 0;
  /* After the name: state (3), then fields 4..13, utime (14), stime. */
  assert_int_equal(sscanf(p + 2,
                          "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu "
                          "%lu",
                          &ut, &st),
                   2);
  return (long)(ut + st);
}

/* The agent's CPU time over 2 s stays near zero: at most a fifth of it
 * (a spinning agent takes all of it). */
static void assert_agent_idle(int pid) {
  int tid = agent_tid(pid);
  assert_true(tid > 0);
  long hz = sysconf(_SC_CLK_TCK);
  long before = thread_ticks(pid, tid);
  struct timespec ts = {2, 0};
  nanosleep(&ts, NULL);
  long used = thread_ticks(pid, tid) - before;
  if (used > 2 * hz / 5)
    fail_msg("the agent used %ld of %ld clock ticks in 2 s: it spins", used,
             2 * hz);
}

static void good_fetch(int pid) {
  static ms_snapshot_t s;
  char err[512];
  int r = fetch_snapshot(pid, &s, 5000, err, sizeof err);
  if (r != 0)
    fail_msg("fetch_snapshot(%d): %d %s", pid, r, err);
  assert_int_equal(s.pid, pid);
}

/* Adds to v the numbers (3 and up) open in /proc/<dir>/fd; returns the
 * new count. */
static int list_fds(const char *dir, int *v, int n, int cap) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9')
      continue;
    int fd = atoi(e->d_name);
    int seen = fd < 3;
    for (int i = 0; i < n; i++)
      seen |= v[i] == fd;
    if (!seen && n < cap)
      v[n++] = fd;
  }
  closedir(d);
  return n;
}

/* The inode of a socket listening at path (from /proc/net/unix), other
 * than `not`; 0 if none. The file at the path cannot tell a new socket
 * from the old: the filesystem may give it the same inode number. The
 * kernel names a socket by the path it was bound to: the agent binds
 * <dir>/.<pid>.new and renames it to <dir>/<pid>.sock once listening. */
static unsigned long listener_ino(const char *path, unsigned long not ) {
  char line[512], p[300], bound[300];
  unsigned long flags, ino, found = 0;
  const char *slash = strrchr(path, '/');
  assert_non_null(slash);
  snprintf(bound, sizeof bound, "%.*s/.%.*s.new", (int)(slash - path), path,
           (int)strcspn(slash + 1, "."), slash + 1);
  FILE *f = fopen("/proc/net/unix", "r");
  assert_non_null(f);
  while (found == 0 && fgets(line, sizeof line, f) != NULL) {
    if (sscanf(line, "%*s %*s %*s %lx %*s %*s %lu %299s", &flags, &ino, p) ==
            3 &&
        (flags & 0x10000) != 0 &&
        ino != not &&(strcmp(p, path) == 0 || strcmp(p, bound) == 0))
      found = ino;
  }
  fclose(f);
  return found;
}

/* In the program's table, an agent whose socket the program closed or
 * replaced makes a new one at the same path when it next wakes: waits
 * (10 s at most) until it listens, so that a fetch does not meet the old
 * one (refused, and removed as stale). */
static void wait_new_socket(void **state, const char *path, unsigned long old) {
  if (!SHARED(state))
    return;
  for (int i = 0; i < 1000; i++) {
    if (listener_ino(path, old) != 0)
      return;
    usleep(10000);
  }
  fail_msg("the agent made no new socket at %s", path);
}

/* Counts the sockets in pid's own table but except. */
static int count_sockets(int pid, int except) {
  char dir[64], p[384], link[128];
  int n = 0;
  snprintf(dir, sizeof dir, "/proc/%d/fd", pid);
  DIR *d = opendir(dir);
  assert_non_null(d);
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9' || atoi(e->d_name) == except)
      continue;
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    ssize_t l = readlink(p, link, sizeof link - 1);
    if (l > 0) {
      link[l] = '\0';
      n += strncmp(link, "socket:", 7) == 0;
    }
  }
  closedir(d);
  return n;
}

/* ------------------------------------------------------------------------
 * Tests
 * ------------------------------------------------------------------------ */

/* Runs script.sh under bash (with the preload or not) reading file from
 * its descriptor 4; the agent is poked between `exec 4<file` and the
 * reading. Returns what the script printed after "ready". */
static char *run_bash_fd4(const char *script, const char *file, int preload,
                          size_t *len) {
  const char *argv[] = {"bash", script, file, NULL};
  char env_preload[1300];
  const char *env[] = {preload ? env_preload : NULL, NULL};
  target_t t;
  snprintf(env_preload, sizeof env_preload, "LD_PRELOAD=%s", g_preload);
  target_exec(&t, argv, g_dir, env, NULL, NULL, 0);
  char line[64];
  assert_int_equal(target_read_line(t.out, line, sizeof line), 0);
  assert_string_equal(line, "ready");
  if (preload)
    good_fetch(t.pid); /* wakes the agent, as memtop polling it would */
  assert_int_equal(write(t.in, "go\n", 3), 3);
  size_t cap = 1 << 20, have = 0;
  char *buf = malloc(cap);
  for (;;) {
    if (have == cap)
      buf = realloc(buf, cap *= 2);
    ssize_t r = read(t.out, buf + have, cap - have);
    if (r <= 0)
      break;
    have += (size_t)r;
  }
  int st = target_wait(&t);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  *len = have;
  return buf;
}

/* A shell script reading 100,000 lines from its descriptor 4 (`exec
 * 4<file` after the preload's agent started) reads every byte, exactly
 * as without the preload. */
static void test_bash_fd4(void **state) {
  (void)state;
  if (!host_have_program("bash")) {
    print_message("skipped: no bash\n");
    skip();
  }
  char file[128], script[128];
  snprintf(file, sizeof file, "%s/lines.txt", g_dir);
  snprintf(script, sizeof script, "%s/read4.sh", g_dir);
  FILE *f = fopen(file, "w");
  assert_non_null(f);
  for (int i = 0; i < 100000; i++)
    fprintf(f, "line %d of the program's own file\n", i);
  fclose(f);
  f = fopen(script, "w");
  assert_non_null(f);
  fputs("exec 4<\"$1\"\n"
        "echo ready\n"
        "read -r go\n"
        "while IFS= read -r line <&4; do printf '%s\\n' \"$line\"; done\n",
        f);
  fclose(f);
  struct stat st;
  assert_int_equal(stat(file, &st), 0);

  size_t bare_len, pre_len;
  char *bare = run_bash_fd4(script, file, 0, &bare_len);
  char *pre = run_bash_fd4(script, file, 1, &pre_len);
  assert_int_equal(bare_len, (size_t)st.st_size);
  if (pre_len != bare_len)
    fail_msg("under the preload the script read %zu bytes of %zu", pre_len,
             bare_len);
  assert_memory_equal(pre, bare, bare_len);
  free(bare);
  free(pre);
}

/* min(RLIMIT_NOFILE, 1024): the top of the numbers the agent places its
 * descriptors under when they are in the program's table (fds.c). */
static int high_top(void) {
  struct rlimit rl;
  int top = 1024;
  assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
  if (rl.rlim_cur < (rlim_t)top)
    top = (int)rl.rlim_cur;
  return top;
}

/* bash treats an open number as one to save and restore: `exec 961<file`
 * over the wake pipe's write end the agent kept in the program's table
 * put the pipe back, and `read x <&961` then failed (EBADF). Under the
 * preload a script may use any number near the top of the table (where
 * descriptors placed high went), as without it. */
static void test_bash_high_numbers(void **state) {
  (void)state;
  if (!host_have_program("bash")) {
    print_message("skipped: no bash\n");
    skip();
  }
  char file[128], script[128];
  snprintf(file, sizeof file, "%s/one.txt", g_dir);
  snprintf(script, sizeof script, "%s/high.sh", g_dir);
  FILE *f = fopen(file, "w");
  assert_non_null(f);
  fputs("line one\n", f);
  fclose(f);
  int top = high_top();
  f = fopen(script, "w");
  assert_non_null(f);
  fprintf(f,
          "echo ready\n"
          "read -r go\n"
          "for n in $(seq %d %d); do\n"
          "  x=\n"
          "  eval \"exec $n<\\\"\\$1\\\"\" || echo \"exec $n<file failed\"\n"
          "  eval \"read -r x <&$n\"\n"
          "  [ \"$x\" = 'line one' ] || echo \"read <&$n got '$x'\"\n"
          "  eval \"exec $n<&-\"\n"
          "done\n"
          "echo done\n",
          top > 80 ? top - 80 : 10, top - 1);
  fclose(f);
  size_t len;
  char *out = run_bash_fd4(script, file, 1, &len);
  out = realloc(out, len + 1);
  out[len] = '\0';
  if (strcmp(out, "done\n") != 0)
    fail_msg("bash under the preload:\n%s", out);
  free(out);
}

/* The program's descriptor table holds nothing of the agent's when the
 * agent has a table of its own (its socket, its clients and its wake pipe
 * are all there); in the program's table (unshare forbidden), only
 * numbers at the top of the table, where scripts and shells do not go. */
static void test_program_table(void **state) {
  target_t t;
  target_start(&t, state, NULL, NULL, 0);
  good_fetch(t.pid);
  int client = target_connect(t.sock); /* one client stays connected */
  assert_true(client >= 0);
  good_fetch(t.pid);
  char dir[64];
  int v[64];
  snprintf(dir, sizeof dir, "/proc/%d/fd", t.pid);
  int n = list_fds(dir, v, 0, 64);
  int top = high_top();
  int ours = 0;
  for (int i = 0; i < n; i++) {
    /* What the program inherited from this test (its runner's open
     * descriptors) is the program's own. */
    char a[96], b[96], la[256], lb[256];
    snprintf(a, sizeof a, "/proc/%d/fd/%d", t.pid, v[i]);
    snprintf(b, sizeof b, "/proc/self/fd/%d", v[i]);
    ssize_t na = readlink(a, la, sizeof la - 1),
            nb = readlink(b, lb, sizeof lb - 1);
    if (na > 0 && na == nb && memcmp(la, lb, (size_t)na) == 0)
      continue;
    ours++;
    if (!SHARED(state))
      fail_msg("descriptor %d of the program's table is the agent's", v[i]);
    if (v[i] < top - 64 || v[i] >= top)
      fail_msg("the agent's descriptor %d is not at the top of the table "
               "(%d to %d)",
               v[i], top - 64, top - 1);
  }
  if (SHARED(state))
    assert_true(ours >= 3); /* its socket, its client, its wake pipe */
  close(client);
  target_kill(&t);
}

static void test_program_table_shared(void **state) {
  *state = (void *)k_shared;
  test_program_table(state);
}

/* A server that closes every descriptor from 3 up and then listens on TCP
 * (descriptor 3) answers all of its clients itself, and the agent still
 * serves memtop, idle in between. */
static void test_closefrom_server(void **state) {
  enum { N = 200 };
  target_t t;
  char line[128];
  int port, fd;
  target_start(&t, state, NULL, NULL, 0);
  good_fetch(t.pid);
  unsigned long ino = listener_ino(t.sock, 0);
  target_ask(&t, "closefrom\n", line, sizeof line);
  assert_int_equal(sscanf(line, "port %d fd %d", &port, &fd), 2);
  if (!SHARED(state)) {
    /* With a table of its own, the agent never takes a number the
     * program was about to get. */
    assert_int_equal(fd, 3);
  } else {
    /* In the program's table it cannot promise that: what it opens
     * (its socket made again, its spare, a client, a /proc file) takes the
     * lowest free number for an instant before going high, and the
     * program's close_range itself wakes it (the write end of its wake
     * pipe closed), so that it makes its socket again while the program
     * makes its own: descriptor 4 in 1 run of 6 under load. What it does
     * promise is that nothing of its own stays low: the program's socket
     * is below the numbers the agent places high at (64 under
     * min(RLIMIT_NOFILE, 1024), fds.c). */
    struct rlimit rl;
    long top = 1024;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_cur < (rlim_t)top)
      top = (long)rl.rlim_cur;
    if (fd < 3 || fd >= top - 64)
      fail_msg("the program's socket is descriptor %d", fd);
  }
  /* Wake the agent as a memtop poll would (it may not answer: whatever
   * happens to this one connection is not the point). */
  int poke = target_connect(t.sock);
  int ok = 0;
  for (int i = 0; i < N; i++) {
    int c = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {10, 0};
    setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    assert_int_equal(connect(c, (struct sockaddr *)&sa, sizeof sa), 0);
    char msg[32], want[48], got[64];
    int n = snprintf(msg, sizeof msg, "ping %d\n", i);
    snprintf(want, sizeof want, "pong %s", msg);
    assert_int_equal(write(c, msg, (size_t)n), n);
    ssize_t r = 0, have = 0;
    while (have < (ssize_t)sizeof got - 1 &&
           (r = read(c, got + have, sizeof got - 1 - (size_t)have)) > 0)
      have += r;
    got[have] = '\0';
    ok += strcmp(got, want) == 0;
    close(c);
  }
  if (poke >= 0)
    close(poke);
  if (ok != N)
    fail_msg("the server answered %d of its %d clients", ok, N);
  target_ask(&t, "stop\n", line, sizeof line);
  assert_string_equal(line, "served 200");
  wait_new_socket(state, t.sock, ino);
  good_fetch(t.pid);
  assert_agent_idle(t.pid);
  good_fetch(t.pid);
  target_kill(&t);
}

/* The program puts its own pipes (with data in them) over every number
 * the agent uses, in the program's table or the agent's: its listening
 * socket, its wake pipe, a client's connection, and the final-snapshot
 * socket of `memtop run`. The agent reads, accepts on, writes to and
 * closes none of them (nor does its fork handler in a child, nor its
 * exit), stays idle, and still serves at the same path. */
static void test_dup2_over_agent_fds(void **state) {
  int fin[2], spy[2];
  char env_fd[64], line[128], cmd[64];
  /* The final-snapshot socket, and a pipe of the test's own that the
   * program will put over its number: at exit, nothing may arrive here. */
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fin), 0);
  assert_int_equal(pipe2(spy, O_CLOEXEC), 0);
  snprintf(env_fd, sizeof env_fd, "MEMSTATS_FINAL_FD=%d", fin[1]);
  const char *env[] = {env_fd, NULL};
  int keep[] = {fin[1], spy[1]};
  target_t t;
  target_start(&t, state, env, keep, 2);
  close(fin[1]);
  close(spy[1]);
  /* The mode is the one asked for: the agent's socket is in the
   * program's table, or not. */
  if (SHARED(state))
    assert_true(count_sockets(t.pid, fin[1]) > 0);
  else
    assert_int_equal(count_sockets(t.pid, fin[1]), 0);
  unsigned long ino = listener_ino(t.sock, 0);

  /* A client with its connection open (after the hello). */
  int client = target_connect(t.sock);
  assert_true(client >= 0);
  static uint8_t buf[1 << 16];
  ms__frame_t f;
  size_t have = 0;
  for (;;) {
    const char *why;
    if (ms__wire_frame(buf, have, MS__WIRE_MAX_PAYLOAD, &f, &why) == 0)
      break;
    ssize_t r = recv(client, buf + have, sizeof buf - have, 0);
    assert_true(r > 0);
    have += (size_t)r;
  }
  assert_int_equal(f.type, MS__MSG_HELLO);

  /* Every number the agent holds, in either table. */
  int tid = agent_tid(t.pid);
  assert_true(tid > 0);
  char dir[128];
  int v[64], n = 0;
  snprintf(dir, sizeof dir, "/proc/%d/task/%d/fd", t.pid, tid);
  n = list_fds(dir, v, n, 64);
  snprintf(dir, sizeof dir, "/proc/%d/fd", t.pid);
  n = list_fds(dir, v, n, 64);
  for (int i = 0; i < n; i++) {
    if (v[i] == fin[1] || v[i] == spy[1])
      continue;
    snprintf(cmd, sizeof cmd, "dup2 %d\n", v[i]);
    target_ask(&t, cmd, line, sizeof line);
    assert_string_equal(line, "ok");
  }
  snprintf(cmd, sizeof cmd, "dupfd %d %d\n", spy[1], fin[1]);
  target_ask(&t, cmd, line, sizeof line);
  assert_string_equal(line, "ok");

  /* The agent gets work: the open client asks, new ones connect. */
  uint8_t req[64];
  ms__wire_writer_t w;
  ms__wire_writer_init(&w, req, sizeof req);
  ms__wire_encode_request(&w, MS__MSG_SNAPSHOT_REQ, 0);
  ssize_t sent = send(client, req, w.len, MSG_NOSIGNAL);
  (void)sent;
  int poke = target_connect(t.sock);
  wait_new_socket(state, t.sock, ino);
  good_fetch(t.pid);
  assert_agent_idle(t.pid);
  /* A child of the program: the library's fork handler leaves the
   * program's descriptors alone there too. */
  target_ask(&t, "forkcheck\n", line, sizeof line);
  assert_string_equal(line, "fork intact");
  target_ask(&t, "check\n", line, sizeof line);
  assert_string_equal(line, "intact");
  good_fetch(t.pid);
  if (poke >= 0)
    close(poke);
  close(client);

  /* At exit the final snapshot goes nowhere: the number is the
   * program's pipe now, and the test's end of it stays empty. */
  assert_int_equal(write(t.in, "exit\n", 5), 5);
  int st = target_wait(&t);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  assert_int_equal(read(spy[0], buf, sizeof buf), 0);
  assert_int_equal(read(fin[0], buf, sizeof buf), 0);
  close(spy[0]);
  close(fin[0]);
}

/* At the descriptor limit the agent does not spin, and a client is told
 * that the target is out of file descriptors. The agent has a table of
 * its own, so a program that fills its table does not starve it (first
 * case); it runs out only when the limit is below the handful of
 * descriptors it holds itself (second case: a limit of 4, with 0-2 held
 * in the agent's table, its spare descriptor at 3, its socket at 4). */
static void test_fd_limit(void **state) {
  target_t t;
  char line[128], err[512];
  static ms_snapshot_t s;

  target_start(&t, state, NULL, NULL, 0);
  target_ask(&t, "limit 64\n", line, sizeof line);
  assert_non_null(strstr(line, "filled"));
  if (SHARED(state)) {
    /* In the program's table the agent's spare descriptor is above the
     * new limit, so the queued connection cannot be taken: it waits
     * (memtop times out), and the agent does not spin. */
    int q = target_connect(t.sock);
    assert_agent_idle(t.pid);
    /* memtop, timing out, tells why from the target's descriptor table
     * (/proc/PID/fd against its limit), not "hung or stopped". */
    int r0 = fetch_snapshot(t.pid, &s, 500, err, sizeof err);
    if (r0 != MS_ETIMEDOUT || strstr(err, "out of file descriptors") == NULL)
      fail_msg("fetch_snapshot: %d %s", r0, err);
    char cmd0[1400], out0[1024];
    snprintf(cmd0, sizeof cmd0, "%s/memtop --once %d 2>&1", g_build,
             (int)t.pid);
    FILE *m0 = popen(cmd0, "r");
    assert_non_null(m0);
    size_t got0 = fread(out0, 1, sizeof out0 - 1, m0);
    out0[got0] = '\0';
    int st0 = pclose(m0);
    if (strstr(out0, "out of file descriptors") == NULL)
      fail_msg("memtop said: %s", out0);
    assert_true(WIFEXITED(st0) && WEXITSTATUS(st0) == 1);
    close(q);
    target_kill(&t);
    return;
  }
  good_fetch(t.pid);
  assert_agent_idle(t.pid);
  target_kill(&t);

  target_start(&t, state, NULL, NULL, 0);
  target_ask(&t, "limit 4\n", line, sizeof line);
  assert_non_null(strstr(line, "filled"));
  int q[8];
  for (int i = 0; i < 8; i++)
    q[i] = target_connect(t.sock); /* queued, as memtop's would be */
  int r = fetch_snapshot(t.pid, &s, 5000, err, sizeof err);
  if (r != MS_EMFILE)
    fail_msg("fetch_snapshot: %d %s", r, err);
  assert_non_null(strstr(err, "out of file descriptors"));
  assert_non_null(strstr(err, "ulimit -n"));
  /* memtop says so too, and exits 1. */
  char cmd[1400], out[1024];
  snprintf(cmd, sizeof cmd, "%s/memtop --once %d 2>&1", g_build, (int)t.pid);
  FILE *m = popen(cmd, "r");
  assert_non_null(m);
  size_t got = fread(out, 1, sizeof out - 1, m);
  out[got] = '\0';
  int mst = pclose(m);
  if (strstr(out, "out of file descriptors") == NULL)
    fail_msg("memtop said: %s", out);
  assert_true(WIFEXITED(mst) && WEXITSTATUS(mst) == 1);
  assert_agent_idle(t.pid);
  for (int i = 0; i < 8; i++) {
    /* Each queued connection was told too, and closed. */
    ms__frame_t f;
    static uint8_t buf[4096];
    size_t have = 0;
    for (;;) {
      const char *why;
      if (ms__wire_frame(buf, have, MS__WIRE_MAX_PAYLOAD, &f, &why) == 0)
        break;
      ssize_t n = recv(q[i], buf + have, sizeof buf - have, 0);
      assert_true(n > 0);
      have += (size_t)n;
    }
    assert_int_equal(f.type, MS__MSG_REFUSED);
    close(q[i]);
  }
  assert_string_equal(ms_strerror(MS_EMFILE),
                      "the target is out of file descriptors (raise its "
                      "limit with ulimit -n, or find what holds them in "
                      "/proc/PID/fd)");
  target_kill(&t);
}

/* The same, with the agent's descriptors in the program's table. */
static void test_closefrom_server_shared(void **state) {
  *state = (void *)k_shared;
  test_closefrom_server(state);
}

static void test_dup2_over_agent_fds_shared(void **state) {
  *state = (void *)k_shared;
  test_dup2_over_agent_fds(state);
}

static void test_fd_limit_shared(void **state) {
  *state = (void *)k_shared;
  test_fd_limit(state);
}

static int setup(void **state) {
  (void)state;
  if (host_build_dir(g_build, sizeof g_build) != 0 ||
      host_preload_path(g_build, g_preload, sizeof g_preload) != 0)
    return -1;
  unsetenv("MEMSTATS_FINAL_FD");
  return target_dir_setup(g_dir, sizeof g_dir, "/tmp/ms-agentfd-test-XXXXXX");
}

static int teardown(void **state) {
  (void)state;
  target_dir_remove(g_dir);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bash_fd4),
      cmocka_unit_test(test_bash_high_numbers),
      cmocka_unit_test(test_program_table),
      cmocka_unit_test(test_closefrom_server),
      cmocka_unit_test(test_dup2_over_agent_fds),
      cmocka_unit_test(test_fd_limit),
      cmocka_unit_test(test_closefrom_server_shared),
      cmocka_unit_test(test_dup2_over_agent_fds_shared),
      cmocka_unit_test(test_fd_limit_shared),
      cmocka_unit_test(test_program_table_shared),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
