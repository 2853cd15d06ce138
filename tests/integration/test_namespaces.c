/*
 * test_namespaces.c - memtop finds targets in other namespaces (issue 21
 * item 1): a private /tmp (mount namespace only, as PrivateTmp= makes),
 * a PID and mount namespace with its own /proc (unshare --pid --mount
 * --fork --mount-proc), and a user namespace whose root is another host
 * uid (a rootless container). `memtop --once PID`, `--json` and `memtop
 * ps` name the target by the PID memtop sees, and USER is its real owner.
 *
 * And what a hostile process in a namespace may not do: make memtop
 * follow a symbolic link out of its root (at the socket, or at the
 * socket directory), or pass a socket served by another process off as
 * its own.
 *
 * Needs root (skipped otherwise, with the reason). The socket directory
 * is this run's own (mkdtemp), at the same path inside the namespaces:
 * memtop with MEMSTATS_DIR set looks at that path in each root only.
 */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/nstarget.h"
#include "support/run.h"

static char build[1024], memtop[1200], target[PATH_MAX];
static char dir[64], decoydir[64];
static run_result_t res;
/* What a test started, ended by teardown even when the test failed. */
static nst_t live;
static int live_on;
static pid_t server, dropped; /* memtop serve; mt_target dropuid */
static char cg_top[256], cg_path[512];

static void live_stop(void) {
  if (live_on)
    nst_stop(&live);
  live_on = 0;
}

static int mt(const char *first, ...) {
  va_list ap;
  va_start(ap, first);
  int r = run_capture_va(&res, memtop, -1, NULL, first, ap);
  va_end(ap);
  return r;
}

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/test_ns.XXXXXX");
  snprintf(decoydir, sizeof decoydir, "/tmp/test_ns_decoy.XXXXXX");
  if (mkdtemp(dir) == NULL || mkdtemp(decoydir) == NULL)
    return -1;
  setenv("MEMSTATS_DIR", dir, 1);
  return 0;
}

static void remove_container_cgroup(void);

static int teardown(void **state) {
  char cmd[256];
  (void)state;
  live_stop();
  if (server > 0) {
    kill(server, SIGTERM);
    waitpid(server, NULL, 0);
    server = 0;
  }
  /* Killed, not stopped: an agent whose process dropped its privileges
   * cannot be woken for ms_agent_stop() (its socket directory and
   * /proc/self/task are root's now), which would wait for the thread's
   * idle poll (5 min). */
  if (dropped > 0) {
    kill(dropped, SIGKILL);
    waitpid(dropped, NULL, 0);
    dropped = 0;
  }
  remove_container_cgroup();
  snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", dir, decoydir);
  return system(cmd) == 0 ? 0 : -1;
}

static void skip_unless_namespaces(void) {
  const char *why = nst_unavailable();
  if (why != NULL) {
    print_message("skipped: %s\n", why);
    skip();
  }
}

/* mt_target in namespaces of `kinds` (in `live`); its "ready N" says N. */
static void start_in(nst_t *n, int kinds, int *nspid) {
  const char *argv[] = {target, NULL};
  char line[64];
  assert_int_equal(nst_launch(n, kinds, argv, dir), 0);
  live_on = 1;
  assert_int_equal(target_read_line(n->t.out, line, sizeof line), 0);
  assert_true(strncmp(line, "ready ", 6) == 0);
  *nspid = atoi(line + 6);
}

/* The ps line of pid, or NULL. */
static const char *ps_line(pid_t pid) {
  char want[16];
  snprintf(want, sizeof want, "%7d ", (int)pid);
  for (const char *l = res.out; l != NULL && *l;) {
    if (strncmp(l, want, strlen(want)) == 0)
      return l;
    l = strchr(l, '\n');
    if (l != NULL)
      l++;
  }
  return NULL;
}

/* --once, --json and ps all find pid, by that PID; ps says `user`. */
static void assert_found(pid_t pid, const char *user) {
  char head[64], json[64];
  snprintf(head, sizeof head, "%d mt_target: Ready+Prepared=", (int)pid);
  if (mt("--once", run_pidstr(pid), NULL) != 0)
    fail_msg("memtop --once %d: %s", (int)pid, res.err);
  assert_true(strncmp(res.out, head, strlen(head)) == 0);

  snprintf(json, sizeof json, "{\"pid\":%d,", (int)pid);
  assert_int_equal(mt("--once", "--json", run_pidstr(pid), NULL), 0);
  assert_true(strncmp(res.out, json, strlen(json)) == 0);

  assert_int_equal(mt("ps", NULL), 0);
  const char *l = ps_line(pid);
  if (l == NULL)
    fail_msg("memtop ps does not list %d:\n%s%s", (int)pid, res.out, res.err);
  char col[32];
  snprintf(col, sizeof col, "%7d %-10s ", (int)pid, user);
  if (strncmp(l, col, strlen(col)) != 0)
    fail_msg("memtop ps: USER of %d is not %s: %.80s", (int)pid, user, l);
}

static void test_pid_mount_namespace(void **state) {
  int nspid;
  (void)state;
  skip_unless_namespaces();
  start_in(&live, NST_MOUNT | NST_PID, &nspid);
  assert_int_equal(nspid, 1);
  assert_true(live.t.pid != 1);
  assert_found(live.t.pid, "root");
  live_stop();
}

static void test_private_tmp_only(void **state) {
  int nspid;
  (void)state;
  skip_unless_namespaces();
  start_in(&live, NST_MOUNT, &nspid);
  assert_int_equal(nspid, live.t.pid);
  assert_found(live.t.pid, "root");
  live_stop();
}

static void test_user_namespace(void **state) {
  int nspid;
  char uid[16];
  (void)state;
  skip_unless_namespaces();
  start_in(&live, NST_MOUNT | NST_PID | NST_USER, &nspid);
  assert_int_equal(nspid, 1);
  /* Root inside is NST_HOST_UID outside: the agent takes memtop (whose
   * uid has no name in there) as the host's root, and USER is the owner
   * memtop sees. */
  snprintf(uid, sizeof uid, "%d", NST_HOST_UID);
  assert_found(live.t.pid, uid);
  char want[32];
  snprintf(want, sizeof want, "\"uid\":%d", NST_HOST_UID);
  assert_int_equal(mt("--once", "--json", run_pidstr(live.t.pid), NULL), 0);
  if (strstr(res.out, want) == NULL)
    fail_msg("no %s in %.200s", want, res.out);
  live_stop();
}

/* A listening socket outside every namespace, at decoydir/name: what a
 * link planted inside would point at. */
static int decoy(const char *name) {
  struct sockaddr_un sa;
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s/%s", decoydir, name);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  assert_true(fd >= 0);
  assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
  assert_int_equal(listen(fd, 8), 0);
  return fd;
}

/* Nobody connected to the decoy. */
static void assert_untouched(int fd) {
  int c = accept(fd, NULL, NULL);
  if (c >= 0)
    fail_msg("memtop followed a link out of the namespace's root to %s",
             decoydir);
  assert_int_equal(errno, EAGAIN);
}

/* A shell as PID 1 of its namespaces runs script (after the socket
 * directory is made), says "ready" and waits for its stdin to close. */
static void start_script(nst_t *n, const char *script) {
  char full[3 * PATH_MAX], line[128];
  snprintf(full, sizeof full, "%s && echo ready && exec cat", script);
  const char *argv[] = {"/bin/sh", "-c", full, NULL};
  assert_int_equal(nst_launch(n, NST_MOUNT | NST_PID, argv, dir), 0);
  live_on = 1;
  do
    assert_int_equal(target_read_line(n->t.out, line, sizeof line), 0);
  while (strcmp(line, "ready") != 0);
}

static void test_link_out_of_root(void **state) {
  (void)state;
  skip_unless_namespaces();
  int fd = decoy("1.sock");
  for (int i = 0; i < 2; i++) {
    static const char *const what[] = {"the socket", "the socket directory"};
    char script[512];
    if (i == 0)
      snprintf(script, sizeof script, "ln -s %s/1.sock %s/1.sock", decoydir,
               dir);
    else
      snprintf(script, sizeof script, "rmdir %s && ln -s %s %s", dir, decoydir,
               dir);
    start_script(&live, script);
    /* The shell is what memtop is asked about: it has no agent, and its
     * link must not lead memtop to one outside. */
    assert_int_not_equal(mt("--once", run_pidstr(live.t.pid), NULL), 0);
    if (strstr(res.err, "symbolic link") == NULL)
      fail_msg("%s a link: %s", what[i], res.err);
    assert_int_equal(mt("ps", NULL), 0);
    assert_null(ps_line(live.t.pid));
    assert_untouched(fd);
    live_stop();
  }
  close(fd);
}

static void test_socket_of_another_process(void **state) {
  char script[2 * PATH_MAX];
  (void)state;
  skip_unless_namespaces();
  /* mt_target (PID 2 in there) makes its socket; the shell (PID 1) takes
   * it as its own name. */
  snprintf(script, sizeof script,
           "exec 3<&0; %s 0<&3 >/dev/null & i=0; "
           "while [ ! -S %s/2.sock ] && [ $i -lt 500 ]; do sleep 0.02; "
           "i=$((i+1)); done; mv %s/2.sock %s/1.sock",
           target, dir, dir, dir);
  start_script(&live, script);
  assert_int_not_equal(mt("--once", run_pidstr(live.t.pid), NULL), 0);
  if (strstr(res.err, "not trusting") == NULL)
    fail_msg("a socket served by another process was taken: %s", res.err);
  assert_int_equal(mt("ps", NULL), 0);
  assert_null(ps_line(live.t.pid));
  live_stop();
}

/* ---- container identity (issue 21 item 2) ---- */

#define CT_ID "c0ffee0123456789abcdef0123456789abcdef0123456789abcdef0123456789"
#define CT_POD "5f2c0d0e-1b2a-4c3d-9e8f-0a1b2c3d4e5f"

/* A cgroup named as kubelet and containerd name a container's, made in
 * the cgroup2 hierarchy: its path in *path (the leaf) and *top (what to
 * remove). Returns NULL, or why it cannot be made here. */
static const char *make_container_cgroup(void) {
  char *top = cg_top, *path = cg_path;
  size_t tlen = sizeof cg_top, plen = sizeof cg_path;
  static const char *const roots[] = {"/sys/fs/cgroup/unified",
                                      "/sys/fs/cgroup"};
  for (size_t i = 0; i < 2; i++) {
    char probe[128];
    snprintf(probe, sizeof probe, "%s/cgroup.controllers", roots[i]);
    if (access(probe, F_OK) != 0)
      continue;
    snprintf(top, tlen, "%s/memtop-test-%d.slice", roots[i], (int)getpid());
    snprintf(path, plen,
             "%s/kubepods-pod%s.slice/cri-containerd-" CT_ID ".scope", top,
             "5f2c0d0e_1b2a_4c3d_9e8f_0a1b2c3d4e5f");
    if (mkdir(top, 0755) != 0) {
      top[0] = path[0] = '\0';
      return "cannot make a cgroup here";
    }
    char mid[512];
    snprintf(mid, sizeof mid, "%s", path);
    *strrchr(mid, '/') = '\0';
    if (mkdir(mid, 0755) != 0 || mkdir(path, 0755) != 0)
      return "cannot make a cgroup here";
    return NULL;
  }
  return "no cgroup2 hierarchy mounted";
}

static void remove_container_cgroup(void) {
  char mid[512], procs[300];
  if (cg_top[0] == '\0')
    return;
  /* Anything left in it goes back to the top first. */
  snprintf(procs, sizeof procs, "%s/../cgroup.procs", cg_top);
  if (live_on) {
    char pidtext[16];
    snprintf(pidtext, sizeof pidtext, "%d", (int)live.t.pid);
    nst_write_file(procs, pidtext);
  }
  snprintf(mid, sizeof mid, "%s", cg_path);
  *strrchr(mid, '/') = '\0';
  rmdir(cg_path);
  rmdir(mid);
  rmdir(cg_top);
  cg_top[0] = cg_path[0] = '\0';
}

/* GET /metrics from 127.0.0.1:port into body (len bytes, NUL-ended). */
static void http_get(int port, char *body, size_t len) {
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(fd >= 0);
  assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
  static const char req[] = "GET /metrics HTTP/1.0\r\n\r\n";
  assert_int_equal(write(fd, req, sizeof req - 1), (ssize_t)(sizeof req - 1));
  size_t n = 0;
  ssize_t r;
  while (n + 1 < len && (r = read(fd, body + n, len - 1 - n)) > 0)
    n += (size_t)r;
  body[n] = '\0';
  close(fd);
}

/* memtop serve's exposition, once it has a sample of pid's (the server
 * in `server`). */
static char *scrape_for(pid_t pid) {
  static char body[1 << 20];
  int pe[2];
  assert_int_equal(pipe2(pe, O_CLOEXEC), 0);
  server = fork();
  assert_true(server >= 0);
  if (server == 0) {
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(pe[1], 2);
    execl(memtop, memtop, "serve", "--listen", "127.0.0.1:0",
          "--unsafe-no-auth", (char *)NULL);
    _exit(126);
  }
  close(pe[1]);
  char line[512] = {0};
  assert_int_equal(target_read_line(pe[0], line, sizeof line), 0);
  close(pe[0]);
  const char *at = strstr(line, "127.0.0.1:");
  if (at == NULL)
    fail_msg("memtop serve did not start: %s", line);
  int port = atoi(at + strlen("127.0.0.1:"));
  char want[32];
  snprintf(want, sizeof want, "pid=\"%d\"", (int)pid);
  /* The first scrapes may come before discovery has read it. */
  for (int tries = 0; tries < 300; tries++) {
    http_get(port, body, sizeof body);
    if (strstr(body, want) != NULL)
      return body;
    usleep(100000);
  }
  fail_msg("memtop serve never served PID %d", (int)pid);
  return NULL;
}

static void test_container_identity(void **state) {
  char procs[600], pidtext[16];
  int nspid;
  (void)state;
  skip_unless_namespaces();
  const char *why = make_container_cgroup();
  if (why != NULL) {
    print_message("skipped: %s\n", why);
    skip();
  }
  /* A container: its own PID and mount namespaces and its own cgroup. */
  start_in(&live, NST_MOUNT | NST_PID, &nspid);
  snprintf(procs, sizeof procs, "%s/cgroup.procs", cg_path);
  snprintf(pidtext, sizeof pidtext, "%d", (int)live.t.pid);
  assert_int_equal(nst_write_file(procs, pidtext), 0);

  assert_int_equal(mt("ps", NULL), 0);
  const char *l = ps_line(live.t.pid);
  assert_non_null(l);
  if (strstr(l, " c0ffee012345 ") == NULL)
    fail_msg("no CONTAINER in: %.100s", l);

  assert_int_equal(mt("--once", "--json", run_pidstr(live.t.pid), NULL), 0);
  assert_non_null(strstr(res.out, "\"ns_pid\":1,"));
  assert_non_null(strstr(res.out, "\"container\":\"" CT_ID "\""));
  assert_non_null(strstr(res.out, "\"engine\":\"containerd\""));
  assert_non_null(strstr(res.out, "\"pod\":\"" CT_POD "\""));

  const char *body = scrape_for(live.t.pid);
  char want[256];
  snprintf(want, sizeof want,
           "memstats_heap_alloc_bytes{pid=\"%d\",comm=\"mt_target\",exe=",
           (int)live.t.pid);
  const char *sample = strstr(body, want);
  if (sample == NULL)
    fail_msg("no %s in the scrape", want);
  const char *eol = strchr(sample, '\n');
  const char *lab =
      strstr(sample, ",container=\"" CT_ID "\",pod=\"" CT_POD "\"}");
  assert_true(lab != NULL && lab < eol);
  print_message("%.*s\n", (int)(eol - sample), sample);
  /* teardown stops the server, takes the target out of the cgroup and
   * removes it. */
}

/* USER is the process's real owner (issue 21 item 4): a server that
 * drops to nobody after its agent listens keeps root's socket, and ps and
 * --json say nobody (65534), not root. */
static void test_user_is_real_owner(void **state) {
  int pi[2], po[2];
  char line[64];
  (void)state;
  if (geteuid() != 0) {
    print_message("skipped: not root\n");
    skip();
  }
  assert_int_equal(pipe2(pi, O_CLOEXEC), 0);
  assert_int_equal(pipe2(po, O_CLOEXEC), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dup2(pi[0], 0);
    dup2(po[1], 1);
    execl(target, target, "dropuid", (char *)NULL);
    _exit(126);
  }
  dropped = pid; /* teardown ends it */
  close(pi[0]);
  close(po[1]);
  assert_int_equal(target_read_line(po[0], line, sizeof line), 0);
  assert_true(strncmp(line, "ready ", 6) == 0);

  assert_int_equal(mt("ps", NULL), 0);
  const char *l = ps_line(pid);
  if (l == NULL)
    fail_msg("memtop ps does not list %d:\n%s%s", (int)pid, res.out, res.err);
  char col[32];
  const struct passwd *pw = getpwuid(65534);
  snprintf(col, sizeof col, "%7d %-10s ", (int)pid,
           pw != NULL ? pw->pw_name : "65534");
  if (strncmp(l, col, strlen(col)) != 0)
    fail_msg("USER is not the real owner: %.60s", l);
  assert_int_equal(mt("--once", "--json", run_pidstr(pid), NULL), 0);
  assert_non_null(strstr(res.out, "\"uid\":65534,"));
  close(pi[1]);
  close(po[0]);
}

int main(void) {
  const char *b = getenv("BUILD");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_pid_mount_namespace, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_private_tmp_only, setup, teardown),
      cmocka_unit_test_setup_teardown(test_user_namespace, setup, teardown),
      cmocka_unit_test_setup_teardown(test_link_out_of_root, setup, teardown),
      cmocka_unit_test_setup_teardown(test_socket_of_another_process, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_container_identity, setup, teardown),
      cmocka_unit_test_setup_teardown(test_user_is_real_owner, setup, teardown),
  };

  snprintf(build, sizeof build, "%s", b != NULL && b[0] ? b : "build");
  snprintf(memtop, sizeof memtop, "%s/memtop", build);
  snprintf(target, sizeof target, "%s/progs/mt_target", build);
  if (access(memtop, X_OK) != 0 || access(target, X_OK) != 0) {
    fprintf(stderr, "test_namespaces: %s or %s is missing (make test-build)\n",
            memtop, target);
    return 1;
  }
  /* The programs are started by path from inside the namespaces. */
  char abs[PATH_MAX];
  if (realpath(target, abs) != NULL)
    memcpy(target, abs, sizeof target);
  signal(SIGPIPE, SIG_IGN);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
