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
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/nstarget.h"
#include "support/run.h"

static char build[1024], memtop[1200], target[PATH_MAX];
static char dir[64], decoydir[64];
static run_result_t res;

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

static int teardown(void **state) {
  char cmd[256];
  (void)state;
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

/* mt_target in namespaces of `kinds`; its "ready N" says N. */
static void start_in(nst_t *n, int kinds, int *nspid) {
  const char *argv[] = {target, NULL};
  char line[64];
  assert_int_equal(nst_launch(n, kinds, argv, dir), 0);
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
  nst_t n;
  int nspid;
  (void)state;
  skip_unless_namespaces();
  start_in(&n, NST_MOUNT | NST_PID, &nspid);
  assert_int_equal(nspid, 1);
  assert_true(n.t.pid != 1);
  assert_found(n.t.pid, "root");
  nst_stop(&n);
}

static void test_private_tmp_only(void **state) {
  nst_t n;
  int nspid;
  (void)state;
  skip_unless_namespaces();
  start_in(&n, NST_MOUNT, &nspid);
  assert_int_equal(nspid, n.t.pid);
  assert_found(n.t.pid, "root");
  nst_stop(&n);
}

static void test_user_namespace(void **state) {
  nst_t n;
  int nspid;
  char uid[16];
  (void)state;
  skip_unless_namespaces();
  start_in(&n, NST_MOUNT | NST_PID | NST_USER, &nspid);
  assert_int_equal(nspid, 1);
  /* Root inside is NST_HOST_UID outside: the agent takes memtop (whose
   * uid has no name in there) as the host's root, and USER is the owner
   * memtop sees. */
  snprintf(uid, sizeof uid, "%d", NST_HOST_UID);
  assert_found(n.t.pid, uid);
  char want[32];
  snprintf(want, sizeof want, "\"uid\":%d", NST_HOST_UID);
  assert_int_equal(mt("--once", "--json", run_pidstr(n.t.pid), NULL), 0);
  if (strstr(res.out, want) == NULL)
    fail_msg("no %s in %.200s", want, res.out);
  nst_stop(&n);
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
    nst_t n;
    if (i == 0)
      snprintf(script, sizeof script, "ln -s %s/1.sock %s/1.sock", decoydir,
               dir);
    else
      snprintf(script, sizeof script, "rmdir %s && ln -s %s %s", dir, decoydir,
               dir);
    start_script(&n, script);
    /* The shell is what memtop is asked about: it has no agent, and its
     * link must not lead memtop to one outside. */
    assert_int_not_equal(mt("--once", run_pidstr(n.t.pid), NULL), 0);
    if (strstr(res.err, "symbolic link") == NULL)
      fail_msg("%s a link: %s", what[i], res.err);
    assert_int_equal(mt("ps", NULL), 0);
    assert_null(ps_line(n.t.pid));
    assert_untouched(fd);
    nst_stop(&n);
  }
  close(fd);
}

static void test_socket_of_another_process(void **state) {
  char script[2 * PATH_MAX];
  nst_t n;
  (void)state;
  skip_unless_namespaces();
  /* mt_target (PID 2 in there) makes its socket; the shell (PID 1) takes
   * it as its own name. */
  snprintf(script, sizeof script,
           "exec 3<&0; %s 0<&3 >/dev/null & i=0; "
           "while [ ! -S %s/2.sock ] && [ $i -lt 500 ]; do sleep 0.02; "
           "i=$((i+1)); done; mv %s/2.sock %s/1.sock",
           target, dir, dir, dir);
  start_script(&n, script);
  assert_int_not_equal(mt("--once", run_pidstr(n.t.pid), NULL), 0);
  if (strstr(res.err, "not trusting") == NULL)
    fail_msg("a socket served by another process was taken: %s", res.err);
  assert_int_equal(mt("ps", NULL), 0);
  assert_null(ps_line(n.t.pid));
  nst_stop(&n);
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
