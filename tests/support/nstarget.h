/*
 * nstarget.h - test helper: a program started in namespaces of its own,
 * as containers and systemd services start theirs: a mount namespace with
 * a private tmpfs on /tmp (PrivateTmp=), optionally a PID namespace in
 * which it is PID 1 with its own /proc (unshare --pid --mount --fork
 * --mount-proc), optionally a user namespace whose root is a host uid
 * that is not memtop's (a rootless container: root inside is uid
 * NST_HOST_UID..+65535 outside). Its stdin and stdout are piped to a
 * target_t as target_launch() does. Needs root; header only, like the
 * other helpers here. Include after <cmocka.h>.
 *
 * The build stays reachable inside when it lies under /tmp (a fresh clone
 * in /tmp): its directory is held before the tmpfs hides it and bound
 * back at its path.
 */
#ifndef MS_TESTS_SUPPORT_NSTARGET_H
#define MS_TESTS_SUPPORT_NSTARGET_H

#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/target_proc.h"

#define NST_MOUNT 0x1 /* a mount namespace, a tmpfs on /tmp */
#define NST_PID 0x2   /* and a PID namespace, the program its PID 1 */
#define NST_USER 0x4  /* and a user namespace, root inside NST_HOST_UID */
#define NST_HOST_UID 200000

/* Why namespaces cannot be made here (not root, no unshare(2) allowed),
 * or NULL if they can. */
static inline const char *nst_unavailable(void) {
  if (geteuid() != 0)
    return "not root";
  pid_t p = fork();
  if (p == 0)
    _exit(unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUSER) == 0 ? 0 : 1);
  int st = 0;
  if (p < 0 || waitpid(p, &st, 0) != p || !WIFEXITED(st) ||
      WEXITSTATUS(st) != 0)
    return "unshare(CLONE_NEWNS|CLONE_NEWPID|CLONE_NEWUSER) is refused here";
  return NULL;
}

static inline int nst_write_file(const char *path, const char *text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  ssize_t n = write(fd, text, strlen(text));
  close(fd);
  return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* In the child: the namespaces, the tmpfs, the build bound back, and
 * mkdir -m 700 `mkdir` inside (NULL: none). Returns 0 or -1. */
static inline int nst_enter(int kinds, const char *build, const char *mkdir_in,
                            int sync_w, int sync_r) {
  int flags = CLONE_NEWNS | ((kinds & NST_PID) ? CLONE_NEWPID : 0) |
              ((kinds & NST_USER) ? CLONE_NEWUSER : 0);
  char c = 0;
  if (unshare(flags) != 0)
    return -1;
  if (kinds & NST_USER) {
    /* The parent writes our maps (it is root outside); then we are root
     * inside, which is NST_HOST_UID outside. */
    if (write(sync_w, "u", 1) != 1 || read(sync_r, &c, 1) != 1 || c != 'm')
      return -1;
    if (setresgid(0, 0, 0) != 0 || setresuid(0, 0, 0) != 0)
      return -1;
  }
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
    return -1;
  int held = -1;
  if (build != NULL && strncmp(build, "/tmp/", 5) == 0)
    held = open(build, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (mount("tmpfs", "/tmp", "tmpfs", 0, "mode=1777") != 0)
    return -1;
  if (held >= 0) {
    char path[PATH_MAX], src[64];
    snprintf(path, sizeof path, "%s", build);
    for (char *p = path + 1; *p; p++)
      if (*p == '/') {
        *p = '\0';
        mkdir(path, 0755);
        *p = '/';
      }
    mkdir(path, 0755);
    snprintf(src, sizeof src, "/proc/self/fd/%d", held);
    if (mount(src, path, NULL, MS_BIND | MS_REC, NULL) != 0)
      return -1;
    close(held);
  }
  if (mkdir_in != NULL && mkdir(mkdir_in, 0700) != 0)
    return -1;
  return 0;
}

/* Starts argv (argv[0] a path) in new namespaces of `kinds` with stdin
 * and stdout piped to t (see target_launch), after `mkdir -m 700 dir`
 * inside and with MEMSTATS_DIR=dir (dir NULL: neither). t->pid is the
 * program's PID as memtop sees it. Returns 0 or -1. */
typedef struct nst_s {
  target_t t;  /* t.pid: the program, as memtop sees it */
  pid_t outer; /* our child: the program, or the one that waits for it */
} nst_t;

static inline int nst_launch(nst_t *n, int kinds, const char *const argv[],
                             const char *dir) {
  target_t *t = &n->t;
  int in[2], out[2], up[2], down[2], report[2];
  char build[PATH_MAX];

  /* The build: the parent of the directory argv[0] is in ($BUILD/progs);
   * for another program (a shell that starts one of the build's), $BUILD
   * itself, so that what it starts from there is not hidden by the tmpfs
   * when the checkout is under /tmp. */
  if (realpath(argv[0], build) == NULL)
    return -1;
  for (int i = 0; i < 2; i++) {
    char *slash = strrchr(build, '/');
    if (slash == NULL)
      return -1;
    *slash = '\0';
    if (i == 1 && strcmp(slash + 1, "progs") != 0) {
      const char *b = getenv("BUILD");
      if (realpath(b != NULL && b[0] != '\0' ? b : "build", build) == NULL)
        return -1;
      break;
    }
  }
  if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) || pipe2(up, O_CLOEXEC) ||
      pipe2(down, O_CLOEXEC) || pipe2(report, O_CLOEXEC))
    return -1;
  pid_t outer = fork();
  if (outer < 0)
    return -1;
  if (outer == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    if (nst_enter(kinds, build, dir, up[1], down[0]) != 0)
      _exit(121);
    if (dir != NULL)
      setenv("MEMSTATS_DIR", dir, 1);
    if (kinds & NST_PID) {
      /* unshare --fork --mount-proc: the program is the namespace's
       * first process, with its own /proc; we wait for it. */
      pid_t inner = fork();
      if (inner == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                  NULL) != 0)
          _exit(122);
        execv(argv[0], (char *const *)argv);
        _exit(127);
      }
      int pid = (int)inner;
      if (write(report[1], &pid, sizeof pid) != (ssize_t)sizeof pid)
        _exit(123);
      close(0);
      close(1);
      int st = 0;
      while (waitpid(inner, &st, 0) < 0 && errno == EINTR) {
      }
      _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    }
    int pid = (int)getpid();
    if (write(report[1], &pid, sizeof pid) != (ssize_t)sizeof pid)
      _exit(123);
    execv(argv[0], (char *const *)argv);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  close(up[1]);
  close(down[0]);
  close(report[1]);
  int ok = 1;
  if (kinds & NST_USER) {
    char c = 0, path[64], map[64];
    ok = read(up[0], &c, 1) == 1 && c == 'u';
    snprintf(map, sizeof map, "0 %d 65536\n", NST_HOST_UID);
    snprintf(path, sizeof path, "/proc/%d/uid_map", (int)outer);
    ok = ok && nst_write_file(path, map) == 0;
    snprintf(path, sizeof path, "/proc/%d/gid_map", (int)outer);
    ok = ok && nst_write_file(path, map) == 0;
    ok = ok && write(down[1], "m", 1) == 1;
  }
  int pid = 0;
  ok = ok && read(report[0], &pid, sizeof pid) == (ssize_t)sizeof pid;
  close(up[0]);
  close(down[1]);
  close(report[0]);
  if (!ok || pid <= 0) {
    close(in[1]);
    close(out[0]);
    kill(outer, SIGKILL);
    waitpid(outer, NULL, 0);
    return -1;
  }
  t->pid = pid;
  t->in = in[1];
  t->out = out[0];
  t->sock[0] = '\0';
  n->outer = outer;
  return 0;
}

/* Ends it: its stdin closed (the program exits), then SIGKILL to both if
 * it does not, and the outer one reaped. */
static inline void nst_stop(nst_t *n) {
  int st;
  close(n->t.in);
  for (int i = 0; i < 50; i++) {
    if (waitpid(n->outer, &st, WNOHANG) == n->outer) {
      close(n->t.out);
      return;
    }
    usleep(20000);
  }
  kill(n->t.pid, SIGKILL);
  kill(n->outer, SIGKILL);
  waitpid(n->outer, &st, 0);
  close(n->t.out);
}

#endif
