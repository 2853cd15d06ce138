/*
 * test_trees.c - process trees (issue 21 item 3): `memtop run` follows
 * its command's whole tree (forked workers, a daemon that double-forks,
 * a Python Pool, nginx's master and workers, redis-server --daemonize
 * yes), reaps what is re-parented to it, ends when the command and its
 * library-running descendants have ended, with the command's status;
 * `memtop PID --tree --once --json` lists a running parent and its
 * descendants with their parent PIDs, in tree order. Idle processes
 * (issue 21's leftover): a forked child that allocates nothing after the
 * fork has the preload mapped but no agent; memtop following a tree wakes
 * it (src/memtop/wake.c), as `memtop attach PID` does, so nginx's master
 * in sigsuspend, its idle workers, PostgreSQL's idle backends and
 * tr_workers' idle workers are all reported.
 *
 * Each test has its own MEMSTATS_DIR. A worker is attachable once its
 * agent runs (started at an allocation of the child's after the fork's
 * grace): the test programs allocate a little every 20-50 ms, as servers
 * do. The tests wait for sockets and files, with deadlines; the one
 * wait they cannot turn into an event is memtop's first read of a
 * worker, given a few of its 250 ms listings (a worker never read is
 * then not reported, and the test says so).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <pwd.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "support/host.h"
#include "support/run.h"

static char build[1024], memtop[1200], workers[1200], daemon_prog[1200];
static char preload[1300];
static char dir[64];

/* How long memtop is given to see a new process and read it: a few of
 * its 250 ms listings and -d 0.2 reads (not a threshold: a wait). */
#define SEE_US 2000000

/* ---- running memtop with a pipe as its stdin ---- */

typedef struct mt_proc_s {
  pid_t pid;
  int in;             /* memtop's (and so the command's) stdin */
  char out[128];      /* its stdout, a file in dir */
  char err[128];      /* its stderr */
  char text[1 << 18]; /* stdout once it ended */
  int status;
} mt_proc_t;

static void mt_start(mt_proc_t *p, const char *const argv[]) {
  int pi[2];

  snprintf(p->out, sizeof p->out, "%s.out", dir);
  snprintf(p->err, sizeof p->err, "%s.err", dir);
  assert_int_equal(pipe2(pi, O_CLOEXEC), 0);
  p->pid = fork();
  assert_true(p->pid >= 0);
  if (p->pid == 0) {
    int o = open(p->out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int e = open(p->err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(pi[0], 0);
    dup2(o, 1);
    dup2(e, 2);
    execv(argv[0], (char *const *)argv);
    _exit(126);
  }
  close(pi[0]);
  p->in = pi[1];
}

/* Whether memtop still runs (not reaped). */
static int mt_running(mt_proc_t *p) {
  int st;
  pid_t r = waitpid(p->pid, &st, WNOHANG);

  if (r == 0)
    return 1;
  p->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  p->pid = -1;
  return 0;
}

/* Waits for memtop's end (RUN_LIMIT_S at most: then it is killed and the
 * test fails) and reads its stdout. Returns its status. */
static int mt_wait(mt_proc_t *p) {
  time_t start = time(NULL);
  FILE *f;
  size_t n;

  if (p->in >= 0)
    close(p->in);
  p->in = -1;
  while (p->pid > 0 && mt_running(p)) {
    if (time(NULL) - start > RUN_LIMIT_S) {
      kill(p->pid, SIGKILL);
      waitpid(p->pid, NULL, 0);
      fail_msg("memtop did not end within %d s", RUN_LIMIT_S);
    }
    usleep(20000);
  }
  f = fopen(p->out, "r");
  assert_non_null(f);
  n = fread(p->text, 1, sizeof p->text - 1, f);
  p->text[n] = '\0';
  fclose(f);
  return p->status;
}

/* The one mt_proc_t, cleared for a test (static: a failed or skipped
 * test leaves nothing behind, and its 256 KiB are no stack's). */
static mt_proc_t *mt_new(void) {
  static mt_proc_t proc;
  return memset(&proc, 0, sizeof proc);
}

/* Gives memtop SEE_US to see and read what runs, then checks that it
 * still runs. Returns its PID. */
static pid_t mt_seen(mt_proc_t *p) {
  usleep(SEE_US);
  assert_true(mt_running(p));
  return p->pid;
}

/* ---- what is in the socket directory ---- */

/* How many sockets dir holds. */
static int sockets(void) {
  DIR *d = opendir(dir);
  struct dirent *e;
  int n = 0;

  assert_non_null(d);
  while ((e = readdir(d)) != NULL)
    n += strstr(e->d_name, ".sock") != NULL;
  closedir(d);
  return n;
}

/* Waits until dir holds at least n sockets (RUN_LIMIT_S at most). */
static void wait_sockets(int n) {
  RUN_WAIT_UNTIL(sockets() >= n, "%d sockets in %s after %d s, wanted %d",
                 sockets(), dir, RUN_LIMIT_S, n);
}

/* ---- the JSON lines ---- */

typedef struct line_s {
  int pid, ppid;
  char comm[32];
} line_t;

/* Parses memtop's JSON lines into v (at most cap). Returns how many. */
static size_t parse_lines(const char *text, line_t *v, size_t cap) {
  size_t n = 0;
  const char *s = text;

  while (*s != '\0' && n < cap) {
    const char *nl = strchr(s, '\n');
    size_t len = nl != NULL ? (size_t)(nl - s) : strlen(s);
    json_error_t jerr;
    json_t *j = json_loadb(s, len, 0, &jerr);
    if (j == NULL)
      fail_msg("not a JSON line (%s): %.*s", jerr.text, (int)len, s);
    v[n].pid = (int)json_integer_value(json_object_get(j, "pid"));
    v[n].ppid = (int)json_integer_value(json_object_get(j, "ppid"));
    snprintf(v[n].comm, sizeof v[n].comm, "%s",
             json_string_value(json_object_get(j, "comm")) != NULL
                 ? json_string_value(json_object_get(j, "comm"))
                 : "");
    json_decref(j);
    n++;
    s = nl != NULL ? nl + 1 : s + len;
  }
  return n;
}

/* Waits for memtop's end, which must be status 0, and parses its JSON
 * lines into v (at most cap). Returns how many. */
static size_t mt_lines(mt_proc_t *p, line_t *v, size_t cap) {
  assert_int_equal(mt_wait(p), 0);
  return parse_lines(p->text, v, cap);
}

/* Whether pid is listed; fails the test if it is listed under another
 * parent than ppid. */
static int listed_under(const line_t *v, size_t n, int pid, int ppid) {
  int seen = 0;

  for (size_t i = 0; i < n; i++)
    if (v[i].pid == pid) {
      seen = 1;
      assert_int_equal(v[i].ppid, ppid);
    }
  return seen;
}

/* How many lines have ppid. */
static int children_of(const line_t *v, size_t n, int ppid) {
  int k = 0;

  for (size_t i = 0; i < n; i++)
    k += v[i].ppid == ppid;
  return k;
}

/* Each line's parent, when it is listed, comes before it. */
static void assert_tree_order(const line_t *v, size_t n) {
  for (size_t i = 0; i < n; i++)
    for (size_t j = i + 1; j < n; j++)
      if (v[j].pid == v[i].ppid)
        fail_msg("PID %d is listed before its parent %d", v[i].pid, v[j].pid);
}

/* ---- memtop's children ---- */

/* How many children of pid are zombies (from /proc/PID/task/T/children
 * and each one's state). */
static int zombie_children(pid_t pid) {
  char path[96], buf[4096];
  int z = 0;
  DIR *d;
  struct dirent *e;

  snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
  d = opendir(path);
  if (d == NULL)
    return 0;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.')
      continue;
    snprintf(path, sizeof path, "/proc/%d/task/%.20s/children", (int)pid,
             e->d_name);
    FILE *f = fopen(path, "r");
    int c;
    if (f == NULL)
      continue;
    while (fscanf(f, "%d", &c) == 1) {
      snprintf(path, sizeof path, "/proc/%d/stat", c);
      FILE *s = fopen(path, "r");
      if (s == NULL)
        continue;
      size_t n = fread(buf, 1, sizeof buf - 1, s);
      buf[n] = '\0';
      fclose(s);
      const char *close_paren = strrchr(buf, ')');
      z +=
          close_paren != NULL && close_paren[1] == ' ' && close_paren[2] == 'Z';
    }
    fclose(f);
  }
  closedir(d);
  return z;
}

static int ppid_of(int pid) {
  char path[64], buf[4096];
  FILE *f;
  size_t n;
  const char *p;

  snprintf(path, sizeof path, "/proc/%d/status", pid);
  f = fopen(path, "r");
  if (f == NULL)
    return -1;
  n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  fclose(f);
  p = strstr(buf, "\nPPid:");
  return p != NULL ? atoi(p + 6) : -1;
}

/* Reads a PID from a file the program writes (RUN_LIMIT_S at most): a
 * daemon may create the file before it writes its PID (redis does). */
static int wait_pid_file(const char *path) {
  time_t start = time(NULL);

  for (;;) {
    FILE *f = fopen(path, "r");
    int pid = 0;
    if (f != NULL) {
      int ok = fscanf(f, "%d\n", &pid) == 1 && pid > 0;
      fclose(f);
      if (ok)
        return pid;
    }
    if (time(NULL) - start > RUN_LIMIT_S)
      fail_msg("%s has no PID after %d s", path, RUN_LIMIT_S);
    usleep(20000);
  }
}

static int have_preload(void) {
  return preload[0] != '\0' && access(preload, R_OK) == 0;
}

/* Whether this process may ptrace a child of its own (Yama's scope, a
 * container without CAP_SYS_PTRACE): the kernel is asked. memtop may
 * then wake its own descendants. */
static int ptrace_ok(void) {
  pid_t c = fork();
  int ok;

  if (c == 0) {
    pause();
    _exit(0);
  }
  if (c < 0)
    return 0;
  ok = ptrace(PTRACE_SEIZE, c, NULL, NULL) == 0;
  if (ok)
    ptrace(PTRACE_DETACH, c, NULL, NULL);
  kill(c, SIGKILL);
  waitpid(c, NULL, 0);
  if (!ok)
    fprintf(stderr, "test_trees: skipped: ptrace is not permitted here (Yama's "
                    "ptrace_scope 3, or a container without "
                    "CAP_SYS_PTRACE): memtop cannot wake idle processes\n");
  return ok;
}

/* Whether pid has its socket in dir. */
static int has_socket(int pid) {
  char path[128];

  snprintf(path, sizeof path, "%s/%d.sock", dir, pid);
  return access(path, F_OK) == 0;
}

/* pid's children (its main thread's), at most cap. Returns how many. */
static size_t children(int pid, int *v, size_t cap) {
  char path[96];
  size_t n = 0;
  FILE *f;

  snprintf(path, sizeof path, "/proc/%d/task/%d/children", pid, pid);
  f = fopen(path, "r");
  if (f == NULL)
    return 0;
  while (n < cap && fscanf(f, "%d", &v[n]) == 1)
    n++;
  fclose(f);
  return n;
}

/* tr_workers with the arguments count and mode (NULL: none from there
 * on) under the preload, its stdin a pipe whose end is *in. Returns its
 * PID. */
static pid_t spawn_workers(const char *count, const char *mode, int *in) {
  char env[1400];
  int pi[2];

  assert_int_equal(pipe2(pi, O_CLOEXEC), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    snprintf(env, sizeof env, "%s", preload);
    setenv("LD_PRELOAD", env, 1);
    dup2(pi[0], 0);
    execl(workers, workers, count, mode, (char *)NULL);
    _exit(126);
  }
  close(pi[0]);
  *in = pi[1];
  return pid;
}

/* tr_workers with n idle workers (they allocate nothing after the fork),
 * as spawn_workers starts it. Returns its PID once its own socket is
 * there and its n workers are forked. */
static pid_t start_idle(int n, int *in) {
  char count[16];
  int kids[16];

  snprintf(count, sizeof count, "%d", n);
  pid_t pid = spawn_workers(count, "idle", in);
  RUN_WAIT_UNTIL(has_socket(pid) && children(pid, kids, 16) >= (size_t)n,
                 "tr_workers %d idle: no socket or workers after %d s", n,
                 RUN_LIMIT_S);
  return pid;
}

/* ---- fixtures ---- */

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/test_trees.XXXXXX");
  if (mkdtemp(dir) == NULL)
    return -1;
  setenv("MEMSTATS_DIR", dir, 1);
  return 0;
}

/* Kills what a failed test left running: the daemons by their PID files,
 * tr_daemon by its stop file. */
static void stop_left(const char *name, int sig) {
  char path[256];
  FILE *f;
  int pid;

  snprintf(path, sizeof path, "%s/%s", dir, name);
  f = fopen(path, "r");
  if (f == NULL)
    return;
  if (fscanf(f, "%d", &pid) == 1 && pid > 1)
    kill(pid, sig);
  fclose(f);
}

static int teardown(void **state) {
  char cmd[256];
  int fd;

  (void)state;
  stop_left("nginx/nginx.pid", SIGTERM);
  stop_left("redis.pid", SIGTERM);
  stop_left("pg/postmaster.pid", SIGINT);
  snprintf(cmd, sizeof cmd, "%s/stop", dir);
  fd = open(cmd, O_WRONLY | O_CREAT, 0600);
  if (fd >= 0)
    close(fd);
  snprintf(cmd, sizeof cmd, "%s/stop.middle", dir);
  fd = open(cmd, O_WRONLY | O_CREAT, 0600);
  if (fd >= 0)
    close(fd);
  usleep(200000); /* tr_daemon looks every 50 ms */
  snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'.*", dir, dir);
  return system(cmd) == 0 ? 0 : -1;
}

/* ---- the tests ---- */

/* A server that forks 3 workers that allocate: all 4 are reported by
 * `run --once --json`, the workers under the command, the command under
 * memtop, in tree order; the text report names each one's parent. */
static void test_run_workers(void **state) {
  static line_t v[16];
  mt_proc_t *p = mt_new();
  size_t n;

  (void)state;
  if (!have_preload())
    skip();
  const char *argv[] = {memtop, "run", "--once", "--json", "-d",
                        "0.2",  "--",  workers,  NULL};
  mt_start(p, argv);
  wait_sockets(4);
  pid_t mpid = mt_seen(p);
  n = mt_lines(p, v, 16);
  if (n != 4)
    fail_msg("%zu JSON lines, wanted the command and 3 workers:\n%s", n,
             p->text);
  assert_int_equal(v[0].ppid, mpid); /* the command, first */
  assert_string_equal(v[0].comm, "tr_workers");
  assert_int_equal(children_of(v, n, v[0].pid), 3);
  assert_tree_order(v, n);

  /* The text report: each names its parent on its second line. */
  const char *targv[] = {memtop, "run", "--once", "-d",
                         "0.2",  "--",  workers,  NULL};
  mt_start(p, targv);
  wait_sockets(4);
  usleep(SEE_US);
  mpid = p->pid;
  assert_int_equal(mt_wait(p), 0);
  char want[64];
  snprintf(want, sizeof want, "\n  parent PID %d\n", (int)mpid);
  assert_non_null(strstr(p->text, want));
  const char *c = strstr(p->text, " tr_workers: Ready+Prepared=");
  assert_non_null(c);
  while (c > p->text && c[-1] != '\n')
    c--;
  snprintf(want, sizeof want, "\n  parent PID %d\n", atoi(c));
  const char *w = p->text;
  int k = 0;
  while ((w = strstr(w, want)) != NULL) {
    k++;
    w++;
  }
  assert_int_equal(k, 3);
}

/* The second PID of tr_daemon's PID file: the middle process of its
 * double fork, the daemon's parent until it ends. */
static int middle_of(const char *path) {
  FILE *f = fopen(path, "r");
  int pid = 0, ppid = 0;

  if (f == NULL)
    return -1;
  if (fscanf(f, "%d %d", &pid, &ppid) != 2)
    ppid = -1;
  fclose(f);
  return ppid;
}

/* A server that daemonizes (fork, setsid, fork; the command exits at
 * once): run goes on while the daemon lives, the daemon is re-parented
 * to memtop (its subreaper), the middle process is reaped (no zombie
 * child of memtop), and when the daemon ends run ends with the command's
 * status, reporting both. mode is tr_daemon's third argument, or NULL. */
static void run_daemon(const char *mode) {
  static line_t v[16];
  mt_proc_t *p = mt_new();
  char stop[256], pidfile[256];
  size_t n;

  if (!have_preload())
    skip();
  snprintf(stop, sizeof stop, "%s/stop", dir);
  snprintf(pidfile, sizeof pidfile, "%s/daemon.pid", dir);
  const char *argv[] = {memtop, "run",       "--once", "--json", "-d", "0.2",
                        "--",   daemon_prog, stop,     pidfile,  mode, NULL};
  mt_start(p, argv);
  int dpid = wait_pid_file(pidfile);
  int mid = middle_of(pidfile);
  assert_true(mid > 0);
  if (mode != NULL) {
    /* The middle process ends its main thread and waits for the file
     * STOP.middle: memtop, whose command has ended, waits too. */
    char release[300];
    mt_seen(p);
    snprintf(release, sizeof release, "%s.middle", stop);
    int rfd = open(release, O_WRONLY | O_CREAT, 0600);
    assert_true(rfd >= 0);
    close(rfd);
  }
  /* The daemon may write its file before the middle process has ended:
   * its parent is read once that one has (RUN_LIMIT_S at most). */
  RUN_WAIT_UNTIL(ppid_of(dpid) != mid, "the middle process %d did not end",
                 mid);
  assert_int_equal(ppid_of(dpid), p->pid); /* re-parented to memtop */
  /* The command and the middle process have ended: reaped, not left as
   * zombies (memtop reaps on SIGCHLD: wait for it, with a deadline). */
  RUN_WAIT_UNTIL(zombie_children(p->pid) == 0,
                 "memtop leaves %d zombie children", zombie_children(p->pid));
  /* The command's exit was not the end. */
  pid_t mpid = mt_seen(p);
  assert_int_equal(zombie_children(p->pid), 0);
  int fd = open(stop, O_WRONLY | O_CREAT, 0600);
  assert_true(fd >= 0);
  close(fd);
  n = mt_lines(p, v, 16);
  if (n != 2)
    fail_msg("%zu JSON lines, wanted the command and its daemon:\n%s", n,
             p->text);
  assert_int_equal(v[0].ppid, mpid);
  assert_int_equal(v[1].pid, dpid);
  assert_int_equal(v[1].ppid, mpid);
}

static void test_run_daemon(void **state) {
  (void)state;
  run_daemon(NULL);
}

/* The middle process ends slowly: its main thread first, its process
 * when the test says. Meanwhile it shows no mapping (as any ending process does
 * between dropping its memory and handing its children on) and the
 * daemon is still its child: memtop, whose command has ended, waits for
 * it rather than ending with no daemon of its own in sight (it did: the
 * daemon was re-parented to init, 4 runs in 30 of test_run_daemon at
 * load 9-12). */
static void test_run_daemon_slow_middle(void **state) {
  (void)state;
  run_daemon("linger");
}

/* A signal to memtop while its command runs and a daemon it started is
 * followed: passed to the command, and memtop ends when the command does
 * (after the report, with the command's status 128+15), leaving the
 * daemon, which the signal did not reach, running. */
static void test_run_signal_leaves_daemon(void **state) {
  static line_t v[16];
  mt_proc_t *p = mt_new();
  char stop[256], pidfile[256], script[2048];

  (void)state;
  if (!have_preload())
    skip();
  snprintf(stop, sizeof stop, "%s/stop", dir);
  snprintf(pidfile, sizeof pidfile, "%s/daemon.pid", dir);
  /* The shell starts the daemon, then waits in sleep: it is still
   * running when memtop is signalled. */
  snprintf(script, sizeof script, "'%s' '%s' '%s'; exec sleep 60", daemon_prog,
           stop, pidfile);
  const char *argv[] = {memtop, "run",     "--once", "--json", "-d", "0.2",
                        "--",   "/bin/sh", "-c",     script,   NULL};
  mt_start(p, argv);
  int dpid = wait_pid_file(pidfile);
  wait_sockets(1);
  mt_seen(p);
  kill(p->pid, SIGTERM);
  assert_int_equal(mt_wait(p), 128 + SIGTERM);
  assert_int_equal(kill(dpid, 0), 0); /* the daemon runs on */
  size_t n = parse_lines(p->text, v, 16);
  assert_true(n >= 1);
}

/* python3's multiprocessing.Pool(3) (fork): the workers appear. */
static void test_run_python_pool(void **state) {
  static line_t v[16];
  mt_proc_t *p = mt_new();
  size_t n;

  (void)state;
  if (!have_preload() || access("/usr/bin/python3", X_OK) != 0)
    skip();
  /* Each worker allocates until the test closes stdin (the parent then
   * ends the pool). */
  const char *script =
      "import multiprocessing as mp, os, sys, time, threading\n"
      "def work(i):\n"
      "    while not os.path.exists(sys.argv[1]):\n"
      "        x = [bytearray(1000) for _ in range(100)]\n"
      "        time.sleep(0.02)\n"
      "    return i\n"
      "if __name__ == '__main__':\n"
      "    mp.set_start_method('fork')\n"
      "    with mp.Pool(3) as pool:\n"
      "        r = pool.map_async(work, range(3))\n"
      "        sys.stdin.read()\n"
      "        open(sys.argv[1], 'w').close()\n"
      "        r.get()\n";
  char stop[256];
  snprintf(stop, sizeof stop, "%s/stop", dir);
  const char *argv[] = {memtop, "run",  "--once", "--json",
                        "-d",   "0.2",  "--",     "/usr/bin/python3",
                        "-c",   script, stop,     NULL};
  mt_start(p, argv);
  wait_sockets(4);
  mt_seen(p);
  n = mt_lines(p, v, 16);
  if (n < 4)
    fail_msg("%zu JSON lines, wanted python3 and its 3 workers:\n%s", n,
             p->text);
  assert_true(children_of(v, n, v[0].pid) >= 3);
  assert_tree_order(v, n);
}

/* A port nothing listens on now (bound to port 0, then closed). */
static int free_port(void) {
  struct sockaddr_in a = {.sin_family = AF_INET};
  socklen_t len = sizeof a;
  int fd = socket(AF_INET, SOCK_STREAM, 0), port;

  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_true(fd >= 0);
  assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
  port = ntohs(a.sin_port);
  close(fd);
  return port;
}

/* One HTTP request to 127.0.0.1:port, its answer read and dropped. */
static void http_get(int port) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  static const char req[] = "GET / HTTP/1.0\r\n\r\n";
  char buf[4096];
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0)
    return;
  if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
      write(fd, req, sizeof req - 1) > 0)
    while (read(fd, buf, sizeof buf) > 0)
      ;
  close(fd);
  usleep(5000);
}

/* Stops a daemon from its PID file (RUN_LIMIT_S at most). */
static void stop_daemon(const char *pidfile, int sig) {
  int pid = wait_pid_file(pidfile);
  kill(pid, sig);
}

/* nginx, if it can run here (root: its workers switch user); else the
 * test is skipped, with the reason. */
static const char *nginx_or_skip(void) {
  const char *nginx =
      access("/usr/sbin/nginx", X_OK) == 0 ? "/usr/sbin/nginx" : NULL;

  if (nginx == NULL) {
    fprintf(stderr, "test_trees: skipped: nginx is not installed "
                    "(apt-get install nginx-light)\n");
    skip();
  }
  if (geteuid() != 0) {
    fprintf(stderr, "test_trees: skipped: nginx's workers switch user "
                    "(root only)\n");
    skip();
  }
  return nginx;
}

/* nginx's configuration in dir/nginx (the prefix): `daemon on;
 * master_process on; worker_processes 3;`, listening on a free port of
 * 127.0.0.1 (returned). */
static int nginx_conf(char *prefix, size_t plen, char *conf, size_t clen,
                      char *pidfile, size_t pidlen) {
  FILE *f;
  int port;

  snprintf(prefix, plen, "%s/nginx", dir);
  mkdir(prefix, 0700);
  snprintf(conf, clen, "%s/nginx.conf", prefix);
  snprintf(pidfile, pidlen, "%s/nginx.pid", prefix);
  f = fopen(conf, "w");
  assert_non_null(f);
  /* user root: the workers' sockets go in this test's directory, which
   * is root's and 0700 (another user's agent would refuse it). env
   * MEMSTATS_DIR: nginx clears its environment but for what `env`
   * names, and the agent of each forked process reads it then. */
  port = free_port();
  fprintf(f,
          "daemon on; master_process on; worker_processes 3; user root;\n"
          "env MEMSTATS_DIR;\n"
          "pid %s; error_log %s/error.log;\n"
          "events { worker_connections 64; }\n"
          "http { access_log off;\n"
          "  server { listen 127.0.0.1:%d reuseport; root %s; } }\n",
          pidfile, prefix, port, prefix);
  fclose(f);
  return port;
}

/* nginx with `daemon on; master_process on; worker_processes 3;`: the
 * command (nginx) exits at once; run follows the master, re-parented to
 * memtop, and its 3 workers under it; it ends when nginx is stopped. */
static void test_run_nginx(void **state) {
  static line_t v[16];
  mt_proc_t *p = mt_new();
  char conf[256], pidfile[256], prefix[128];
  const char *nginx;
  size_t n;
  int port;

  (void)state;
  if (!have_preload())
    skip();
  nginx = nginx_or_skip();
  port = nginx_conf(prefix, sizeof prefix, conf, sizeof conf, pidfile,
                    sizeof pidfile);
  const char *argv[] = {memtop, "run", "--once", "--json", "-d", "0.2", "--",
                        nginx,  "-p",  prefix,   "-c",     conf, NULL};
  mt_start(p, argv);
  int master = wait_pid_file(pidfile);
  /* An idle worker waits in epoll_wait and allocates nothing, so its
   * agent (started at an allocation after the fork's grace) waits too:
   * requests until the 3 workers are attachable (reuseport spreads them
   * over the workers). The master, in sigsuspend, allocates nothing
   * after its fork: it gets no agent (and is not reported), but as a
   * child of memtop with the preload mapped it keeps run going. */
  time_t start = time(NULL);
  while (sockets() < 3) {
    if (time(NULL) - start > RUN_LIMIT_S)
      fail_msg("%d sockets in %s after %d s of requests, wanted nginx's "
               "3 workers",
               sockets(), dir, RUN_LIMIT_S);
    http_get(port);
  }
  pid_t mpid = mt_seen(p); /* nginx itself exited at once */
  assert_int_equal(ppid_of(master), mpid);
  stop_daemon(pidfile, SIGQUIT); /* nginx's graceful stop */
  n = mt_lines(p, v, 16);
  listed_under(v, n, master, mpid);
  if (children_of(v, n, master) != 3)
    fail_msg("wanted the master %d's 3 workers:\n%s", master, p->text);
  assert_tree_order(v, n);
}

/* nginx with `daemon on` and 3 workers, and not one request: the master
 * waits in sigsuspend and the workers in epoll_wait, none allocating
 * after its fork, so none starts an agent itself. memtop wakes each one
 * (issue 21): the master is reported under memtop, its 3 workers under
 * it. */
static void test_run_nginx_idle(void **state) {
  static line_t v[16];
  mt_proc_t *p = mt_new();
  char conf[256], pidfile[256], prefix[128];
  const char *nginx;
  size_t n;

  (void)state;
  if (!have_preload() || !ptrace_ok())
    skip();
  nginx = nginx_or_skip();
  (void)nginx_conf(prefix, sizeof prefix, conf, sizeof conf, pidfile,
                   sizeof pidfile);
  const char *argv[] = {memtop, "run", "--once", "--json", "-d", "0.2", "--",
                        nginx,  "-p",  prefix,   "-c",     conf, NULL};
  mt_start(p, argv);
  int master = wait_pid_file(pidfile);
  wait_sockets(4); /* the master and its 3 workers, woken */
  pid_t mpid = mt_seen(p);
  stop_daemon(pidfile, SIGQUIT);
  n = mt_lines(p, v, 16);
  int seen = listed_under(v, n, master, mpid);
  if (!seen || children_of(v, n, master) != 3)
    fail_msg("wanted the master %d and its 3 idle workers:\n%s", master,
             p->text);
  assert_tree_order(v, n);
}

/* ---- PostgreSQL ---- */

/* The newest PostgreSQL's bin directory (Debian's
 * /usr/lib/postgresql/N/bin), or "" if none is installed. */
static void pg_bindir(char *buf, size_t len) {
  static const char base[] = "/usr/lib/postgresql/";
  glob_t g;
  long best = -1;

  buf[0] = '\0';
  if (glob("/usr/lib/postgresql/*/bin/postgres", 0, NULL, &g) != 0)
    return;
  for (size_t i = 0; i < g.gl_pathc; i++) {
    long v = strtol(g.gl_pathv[i] + sizeof base - 1, NULL, 10);
    if (v > best && access(g.gl_pathv[i], X_OK) == 0) {
      best = v;
      snprintf(buf, len, "%s%ld/bin", base, v);
    }
  }
  globfree(&g);
}

/* A directory of uid's, mode 0700. */
static void own_dir(const char *path, uid_t uid, gid_t gid) {
  assert_int_equal(mkdir(path, 0700), 0);
  assert_int_equal(chown(path, uid, gid), 0);
}

/* Runs argv (the first element a path) with stdout and stderr to log,
 * stdin from /dev/null, in /; returns its exit status. */
static int run_logged(const char *const argv[], const char *log) {
  pid_t pid = fork();
  int st;

  assert_true(pid >= 0);
  if (pid == 0) {
    int o = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int in = open("/dev/null", O_RDONLY);
    dup2(in, 0);
    dup2(o, 1);
    dup2(o, 2);
    if (chdir("/") != 0)
      _exit(126);
    execv(argv[0], (char *const *)argv);
    _exit(126);
  }
  assert_int_equal(waitpid(pid, &st, 0), pid);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Whether the file at path holds the text want. */
static int file_has(const char *path, const char *want) {
  char buf[4096];
  FILE *f = fopen(path, "r");
  size_t n;

  if (f == NULL)
    return 0;
  n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  fclose(f);
  return strstr(buf, want) != NULL;
}

/* A psql session to the server's socket in sockdir, kept open (an idle
 * backend waits for its next query): its PID; *in is its stdin. */
static pid_t psql_session(const char *bindir, const char *sockdir, int *in) {
  char psql[1200];
  int pi[2];

  snprintf(psql, sizeof psql, "%s/psql", bindir);
  assert_int_equal(pipe2(pi, O_CLOEXEC), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    dup2(pi[0], 0);
    dup2(null, 1);
    dup2(null, 2);
    unsetenv("LD_PRELOAD");
    execl(psql, psql, "-X", "-q", "-h", sockdir, "-p", "5432", "-U", "postgres",
          "-d", "postgres", (char *)NULL);
    _exit(126);
  }
  close(pi[0]);
  *in = pi[1];
  /* One query: the backend is made and has answered by the time psql
   * reads the next line. */
  assert_true(write(*in, "select 1;\n", 10) == 10);
  return pid;
}

/* The postmaster's children that serve a client ("postgres: USER DB
 * [local] ..." in their command line), at most cap. */
static size_t pg_backends(int postmaster, int *v, size_t cap) {
  int kids[64];
  size_t n = children(postmaster, kids, 64), k = 0;

  for (size_t i = 0; i < n && k < cap; i++) {
    char path[64], cmd[256] = "";
    snprintf(path, sizeof path, "/proc/%d/cmdline", kids[i]);
    FILE *f = fopen(path, "r");
    if (f == NULL)
      continue;
    size_t len = fread(cmd, 1, sizeof cmd - 1, f);
    cmd[len] = '\0';
    fclose(f);
    if (strstr(cmd, "[local]") != NULL)
      v[k++] = kids[i];
  }
  return k;
}

/* Whether pid has its socket in the directory sdir. */
static int socket_in(const char *sdir, int pid) {
  char path[256];

  snprintf(path, sizeof path, "%s/%d.sock", sdir, pid);
  return access(path, F_OK) == 0;
}

/* PostgreSQL, for real: initdb in this test's directory, then `memtop
 * run` of the postmaster (as nobody, memtop included: PostgreSQL refuses
 * root, and the socket directory must be its user's), on a Unix socket
 * in the test's directory and no TCP port; two psql sessions make two
 * backends, which answer a query and then wait idle, as the postmaster's
 * own helpers (checkpointer, background writer, walwriter ...) do:
 * memtop wakes those that allocate nothing after their fork, and every
 * backend is reported under the postmaster, the postmaster under memtop
 * (JSON ppid). */
static void test_run_postgres(void **state) {
  static line_t v[32];
  mt_proc_t *p = mt_new();
  char bindir[1024], postgres[1200], initdb[1200], pg[128], ms[128], run[128];
  char log[160], pidfile[160], ruid[32], rgid[32];
  int in[2], back[8];
  pid_t psql[2];

  (void)state;
  if (!have_preload() || !ptrace_ok())
    skip();
  pg_bindir(bindir, sizeof bindir);
  if (bindir[0] == '\0') {
    fprintf(stderr, "test_trees: skipped: PostgreSQL is not installed "
                    "(apt-get install postgresql)\n");
    skip();
  }
  const struct passwd *pw = getpwnam("nobody");
  if (geteuid() != 0 || pw == NULL || access("/usr/bin/setpriv", X_OK) != 0) {
    fprintf(stderr, "test_trees: skipped: PostgreSQL is run as nobody, "
                    "which needs root, a user nobody and setpriv\n");
    skip();
  }
  snprintf(postgres, sizeof postgres, "%s/postgres", bindir);
  snprintf(initdb, sizeof initdb, "%s/initdb", bindir);
  snprintf(ruid, sizeof ruid, "--reuid=%u", (unsigned)pw->pw_uid);
  snprintf(rgid, sizeof rgid, "--regid=%u", (unsigned)pw->pw_gid);
  /* nobody goes through this test's directory to its own three: the
   * cluster, the socket directory (MEMSTATS_DIR) and PostgreSQL's. */
  assert_int_equal(chmod(dir, 0711), 0);
  snprintf(pg, sizeof pg, "%s/pg", dir);
  snprintf(ms, sizeof ms, "%s/ms", dir);
  snprintf(run, sizeof run, "%s/run", dir);
  own_dir(pg, pw->pw_uid, pw->pw_gid);
  own_dir(ms, pw->pw_uid, pw->pw_gid);
  own_dir(run, pw->pw_uid, pw->pw_gid);
  snprintf(log, sizeof log, "%s/initdb.log", dir);
  setenv("LC_ALL", "C", 1);
  const char *init[] = {"/usr/bin/setpriv",
                        ruid,
                        rgid,
                        "--clear-groups",
                        initdb,
                        "-D",
                        pg,
                        "-U",
                        "postgres",
                        "--auth=trust",
                        "--no-sync",
                        NULL};
  if (run_logged(init, log) != 0)
    fail_msg("initdb failed: see %s", log);
  const char *argv[] = {"/usr/bin/setpriv",
                        ruid,
                        rgid,
                        "--clear-groups",
                        memtop,
                        "run",
                        "--once",
                        "--json",
                        "-d",
                        "0.2",
                        "--",
                        postgres,
                        "-D",
                        pg,
                        "-k",
                        run,
                        "-c",
                        "listen_addresses=",
                        "-c",
                        "port=5432",
                        NULL};
  setenv("MEMSTATS_DIR", ms, 1);
  mt_start(p, argv);
  setenv("MEMSTATS_DIR", dir, 1);
  snprintf(pidfile, sizeof pidfile, "%s/postmaster.pid", pg);
  int postmaster = wait_pid_file(pidfile);
  RUN_WAIT_UNTIL(file_has(pidfile, "ready"),
                 "the postmaster is not ready after %d s", RUN_LIMIT_S);
  psql[0] = psql_session(bindir, run, &in[0]);
  psql[1] = psql_session(bindir, run, &in[1]);
  size_t nb;
  RUN_WAIT_UNTIL((nb = pg_backends(postmaster, back, 8)) >= 2 &&
                     socket_in(ms, postmaster) && socket_in(ms, back[0]) &&
                     socket_in(ms, back[1]),
                 "after %d s: %zu backends; sockets: postmaster %d, "
                 "backends %d %d",
                 RUN_LIMIT_S, nb, socket_in(ms, postmaster),
                 nb > 0 && socket_in(ms, back[0]),
                 nb > 1 && socket_in(ms, back[1]));
  pid_t mpid = mt_seen(p);
  close(in[0]);
  close(in[1]);
  waitpid(psql[0], NULL, 0);
  waitpid(psql[1], NULL, 0);
  kill(postmaster, SIGINT); /* the fast shutdown */
  size_t n = mt_lines(p, v, 32);
  int seen[3] = {listed_under(v, n, postmaster, mpid),
                 listed_under(v, n, back[0], postmaster),
                 listed_under(v, n, back[1], postmaster)};
  if (!seen[0] || !seen[1] || !seen[2])
    fail_msg("wanted the postmaster %d and its backends %d %d:\n%s", postmaster,
             back[0], back[1], p->text);
  assert_tree_order(v, n);
}

/* redis-server --daemonize yes: the command exits at once, run follows
 * the daemon and ends when it is shut down. */
static void test_run_redis(void **state) {
  static line_t v[16];
  mt_proc_t *p = mt_new();
  char pidfile[256], sock[256];
  const char *redis = access("/usr/bin/redis-server", X_OK) == 0
                          ? "/usr/bin/redis-server"
                          : NULL;
  size_t n;

  (void)state;
  if (!have_preload())
    skip();
  if (redis == NULL) {
    fprintf(stderr, "test_trees: skipped: redis-server is not installed "
                    "(apt-get install redis-server)\n");
    skip();
  }
  snprintf(pidfile, sizeof pidfile, "%s/redis.pid", dir);
  snprintf(sock, sizeof sock, "%s/redis.sock", dir);
  const char *argv[] = {
      memtop,         "run", "--once",      "--json", "-d",     "0.2",
      "--",           redis, "--daemonize", "yes",    "--port", "0",
      "--unixsocket", sock,  "--pidfile",   pidfile,  "--dir",  dir,
      "--save",       "",    NULL};
  mt_start(p, argv);
  int dpid = wait_pid_file(pidfile);
  pid_t mpid = mt_seen(p);
  assert_int_equal(ppid_of(dpid), mpid);
  stop_daemon(pidfile, SIGTERM);
  n = mt_lines(p, v, 16);
  if (!listed_under(v, n, dpid, mpid))
    fail_msg("the daemon %d is not reported:\n%s", dpid, p->text);
}

/* memtop PID --tree --once --json: a running parent and its 3 workers,
 * in tree order with their parent PIDs; --tree needs one PID. */
static void test_pid_tree(void **state) {
  static line_t v[16];
  static run_result_t res;
  char pidstr[16];
  int in;
  size_t n;

  (void)state;
  if (!have_preload())
    skip();
  pid_t pid = spawn_workers(NULL, NULL, &in);
  wait_sockets(4);
  snprintf(pidstr, sizeof pidstr, "%d", (int)pid);
  char tree[] = "--tree", json[] = "--json", once[] = "--once";
  char *argv[] = {memtop, pidstr, tree, json, NULL};
  assert_int_equal(run_capture_as(&res, argv, -1, NULL), 0);
  n = parse_lines(res.out, v, 16);
  if (n != 4)
    fail_msg("%zu JSON lines, wanted the parent and 3 workers:\n%s", n,
             res.out);
  assert_int_equal(v[0].pid, pid);
  assert_int_equal(children_of(v, n, pid), 3);
  assert_tree_order(v, n);
  /* A worker alone: itself only. */
  snprintf(pidstr, sizeof pidstr, "%d", v[1].pid);
  assert_int_equal(run_capture_as(&res, argv, -1, NULL), 0);
  assert_int_equal(parse_lines(res.out, v, 16), 1);
  close(in);
  waitpid(pid, NULL, 0);
  /* --tree needs one PID. */
  char *none[] = {memtop, tree, once, NULL};
  assert_int_equal(run_capture_as(&res, none, -1, NULL), 2);
  assert_non_null(strstr(res.err, "--tree"));
}

/* `memtop attach PID` on a preloaded fork child that has allocated
 * nothing since the fork (no agent, no socket): the library it maps is
 * woken, with no dlopen, in the preload's full counting ("tracked", not
 * "tracked(off: attached late)"); a second attach finds it serving, and
 * so does one on its parent. */
static void test_attach_wakes_idle_child(void **state) {
  static run_result_t res;
  char cpid[16], ppid_s[16];
  int in, kid;

  (void)state;
  if (!have_preload() || !ptrace_ok())
    skip();
  pid_t pid = start_idle(1, &in);
  assert_int_equal(children(pid, &kid, 1), 1);
  assert_false(has_socket(kid)); /* it never allocates: no agent */
  snprintf(cpid, sizeof cpid, "%d", kid);
  char attach[] = "attach", once[] = "--once", json[] = "--json";
  char *argv[] = {memtop, attach, cpid, NULL};
  if (run_capture_as(&res, argv, -1, NULL) != 0)
    fail_msg("memtop attach %d: %s", kid, res.err);
  assert_non_null(strstr(res.out, "woke process"));
  assert_true(has_socket(kid));
  /* Serving now, as any preloaded process. */
  char *watch[] = {memtop, cpid, once, json, NULL};
  assert_int_equal(run_capture_as(&res, watch, -1, NULL), 0);
  assert_non_null(strstr(res.out, "\"providers\":[\"tracked\","));
  assert_int_equal(run_capture_as(&res, argv, -1, NULL), 0);
  assert_non_null(strstr(res.out, "serves already"));
  snprintf(ppid_s, sizeof ppid_s, "%d", (int)pid);
  char *parent[] = {memtop, attach, ppid_s, NULL};
  assert_int_equal(run_capture_as(&res, parent, -1, NULL), 0);
  assert_non_null(strstr(res.out, "serves already"));
  close(in);
  assert_int_equal(waitpid(pid, NULL, 0), pid);
  /* Woken, its _exit took its socket away as any agent's. */
  assert_false(has_socket(kid));
}

/* pid's effective uid, or -1. */
static long proc_euid(int pid) {
  char path[64], line[256];
  long r = -1, e;
  FILE *f;

  snprintf(path, sizeof path, "/proc/%d/status", pid);
  f = fopen(path, "r");
  if (f == NULL)
    return -1;
  while (fgets(line, sizeof line, f) != NULL)
    if (sscanf(line, "Uid: %*d %ld", &e) == 1)
      r = e;
  fclose(f);
  return r;
}

/* An idle worker that switched to user nobody, as nginx's do as root,
 * with the socket directory (MEMSTATS_DIR) root's: it cannot be woken,
 * and memtop attach (as memtop run's wake) says it is the directory's
 * owner, not the worker's user, and what to do, not only "socket
 * directory is unsafe". */
static void test_wake_worker_of_another_user(void **state) {
  static run_result_t res;
  char cpid[16];
  int in, kid = 0;

  (void)state;
  if (geteuid() != 0 || !have_preload() || !ptrace_ok())
    skip();
  pid_t pid = spawn_workers("1", "idle-nobody", &in);
  RUN_WAIT_UNTIL(
      has_socket(pid) && children(pid, &kid, 1) == 1 && proc_euid(kid) == 65534,
      "tr_workers 1 idle-nobody: no socket or worker after %d s", RUN_LIMIT_S);
  snprintf(cpid, sizeof cpid, "%d", kid);
  char attach[] = "attach";
  char *argv[] = {memtop, attach, cpid, NULL};
  assert_int_equal(run_capture_as(&res, argv, -1, NULL), 1);
  if (strstr(res.err, "runs as uid 65534") == NULL ||
      strstr(res.err, "without MEMSTATS_DIR") == NULL)
    fail_msg("memtop attach %d: %s", kid, res.err);
  assert_false(has_socket(kid));
  close(in);
  assert_int_equal(waitpid(pid, NULL, 0), pid);
}

/* `memtop run` of a server whose 3 workers allocate nothing after the
 * fork: memtop wakes them, and all 4 are reported in tree order. */
static void test_run_idle_workers(void **state) {
  static line_t v[16];
  mt_proc_t *p = mt_new();
  size_t n;

  (void)state;
  if (!have_preload() || !ptrace_ok())
    skip();
  const char *argv[] = {memtop, "run",   "--once", "--json", "-d", "0.2",
                        "--",   workers, "3",      "idle",   NULL};
  mt_start(p, argv);
  wait_sockets(4);
  pid_t mpid = mt_seen(p);
  n = mt_lines(p, v, 16);
  if (n != 4)
    fail_msg("%zu JSON lines, wanted the command and its 3 idle workers:\n%s",
             n, p->text);
  assert_int_equal(v[0].ppid, mpid);
  assert_int_equal(children_of(v, n, v[0].pid), 3);
  assert_tree_order(v, n);
}

/* memtop PID --tree --once --json on a running server whose 3 workers
 * are idle: woken at once (they are older than the grace), all 4
 * reported; a second look finds them serving. */
static void test_pid_tree_idle(void **state) {
  static line_t v[16];
  static run_result_t res;
  char pidstr[16];
  int in;
  size_t n;

  (void)state;
  if (!have_preload() || !ptrace_ok())
    skip();
  pid_t pid = start_idle(3, &in);
  /* The workers may still start an agent themselves while younger than
   * memtop's grace (MT_WAKE_GRACE_MS, 750 ms): it is waited out. */
  usleep(1000000);
  snprintf(pidstr, sizeof pidstr, "%d", (int)pid);
  char tree[] = "--tree", json[] = "--json";
  char *argv[] = {memtop, pidstr, tree, json, NULL};
  for (int round = 0; round < 2; round++) {
    assert_int_equal(run_capture_as(&res, argv, -1, NULL), 0);
    n = parse_lines(res.out, v, 16);
    if (n != 4)
      fail_msg("%zu JSON lines, wanted the parent and 3 idle workers:\n%s%s", n,
               res.out, res.err);
    assert_int_equal(v[0].pid, pid);
    assert_int_equal(children_of(v, n, pid), 3);
    assert_tree_order(v, n);
  }
  close(in);
  waitpid(pid, NULL, 0);
}

int main(void) {
  const char *b = getenv("BUILD");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_run_workers, setup, teardown),
      cmocka_unit_test_setup_teardown(test_run_daemon, setup, teardown),
      cmocka_unit_test_setup_teardown(test_run_daemon_slow_middle, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_run_signal_leaves_daemon, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_run_python_pool, setup, teardown),
      cmocka_unit_test_setup_teardown(test_run_nginx, setup, teardown),
      cmocka_unit_test_setup_teardown(test_run_nginx_idle, setup, teardown),
      cmocka_unit_test_setup_teardown(test_run_redis, setup, teardown),
      cmocka_unit_test_setup_teardown(test_run_postgres, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pid_tree, setup, teardown),
      cmocka_unit_test_setup_teardown(test_attach_wakes_idle_child, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_wake_worker_of_another_user, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_run_idle_workers, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pid_tree_idle, setup, teardown),
  };

  snprintf(build, sizeof build, "%s", b != NULL && b[0] ? b : "build");
  snprintf(memtop, sizeof memtop, "%s/memtop", build);
  snprintf(workers, sizeof workers, "%s/progs/tr_workers", build);
  snprintf(daemon_prog, sizeof daemon_prog, "%s/progs/tr_daemon", build);
  if (access(memtop, X_OK) != 0 || access(workers, X_OK) != 0 ||
      access(daemon_prog, X_OK) != 0) {
    fprintf(stderr, "test_trees: %s, %s or %s is missing (make test-build)\n",
            memtop, workers, daemon_prog);
    return 1;
  }
  (void)host_preload_path(build, preload, sizeof preload);
  setenv("MEMTOP_PRELOAD", preload, 1);
  signal(SIGPIPE, SIG_IGN);
  /* TEST_FILTER=test_run_daemon* runs only the tests it matches (a loop
   * over a flaky one). */
  if (getenv("TEST_FILTER") != NULL)
    cmocka_set_test_filter(getenv("TEST_FILTER"));
  return cmocka_run_group_tests(tests, NULL, NULL);
}
