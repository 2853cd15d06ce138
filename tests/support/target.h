/*
 * target.h - test helper: a target program under test's control (one of
 * tests/progs with the agent linked in, or any program under the
 * preload), its socket directory, and raw connections to it. The program
 * reads its stdin and writes lines on its stdout (tests/progs' programs:
 * commands and a line of answer each, the first line saying it is
 * ready). Include after <cmocka.h>; header only, like the other helpers
 * here.
 */
#ifndef MS_TESTS_SUPPORT_TARGET_H
#define MS_TESTS_SUPPORT_TARGET_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client/client.h"

typedef struct target_s {
  pid_t pid;
  int in;  /* its stdin */
  int out; /* its stdout */
  char sock[MSC_PATH_MAX];
} target_t;

/* One line from fd, without its newline. Returns 0, or -1 at the end. */
static inline int target_read_line(int fd, char *buf, size_t len) {
  size_t n = 0;
  while (n + 1 < len) {
    ssize_t r = read(fd, buf + n, 1);
    if (r <= 0)
      return -1;
    if (buf[n] == '\n')
      break;
    n++;
  }
  buf[n] = '\0';
  return 0;
}

/* Applies one environment change in a child about to exec: "NAME=VALUE"
 * is set (putenv: the string must live until the exec), a bare "NAME"
 * is removed. */
static inline void target_env_apply(const char *e) {
  if (strchr(e, '=') != NULL)
    putenv((char *)e);
  else
    unsetenv(e);
}

/* Starts argv (argv[0] looked up in PATH as execvp does) with its stdin
 * and stdout piped to t, MEMSTATS_DIR=dir unless dir is NULL, the
 * environment changes of env and then env2 (each NULL-ended, or NULL; see
 * target_env_apply), and descriptors keep[] left open in it at their
 * numbers. Reads nothing: the caller reads its lines from t->out. */
static inline void target_exec(target_t *t, const char *const argv[],
                               const char *dir, const char *const *env,
                               const char *const *env2, const int *keep,
                               int nkeep) {
  int in[2], out[2];
  assert_int_equal(pipe2(in, O_CLOEXEC), 0);
  assert_int_equal(pipe2(out, O_CLOEXEC), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    for (int i = 0; i < nkeep; i++)
      fcntl(keep[i], F_SETFD, 0);
    if (dir != NULL)
      setenv("MEMSTATS_DIR", dir, 1);
    for (; env != NULL && *env != NULL; env++)
      target_env_apply(*env);
    for (; env2 != NULL && *env2 != NULL; env2++)
      target_env_apply(*env2);
    execvp(argv[0], (char *const *)argv);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  t->pid = pid;
  t->in = in[1];
  t->out = out[0];
  snprintf(t->sock, sizeof t->sock, "%s/%d.sock", dir != NULL ? dir : ".",
           (int)pid);
}

/* Starts prog (no arguments) as target_exec does, and waits for its
 * first line, which it leaves in line. */
static inline void target_spawn(target_t *t, const char *prog, const char *dir,
                                const char *const *env, const char *const *env2,
                                const int *keep, int nkeep, char *line,
                                size_t linelen) {
  const char *argv[] = {prog, NULL};
  target_exec(t, argv, dir, env, env2, keep, nkeep);
  assert_int_equal(target_read_line(t->out, line, linelen), 0);
}

/* Closes its stdin (the program exits) and reaps it; its wait status. */
static inline int target_wait(target_t *t) {
  int st = 0;
  close(t->in);
  while (waitpid(t->pid, &st, 0) < 0 && errno == EINTR) {
  }
  close(t->out);
  return st;
}

static inline void target_kill(target_t *t) {
  kill(t->pid, SIGKILL);
  target_wait(t);
}

/* A plain connection to a socket path, reads timing out after 10 s.
 * Returns the fd or a negative errno. */
static inline int target_connect(const char *path) {
  struct sockaddr_un sa;
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -errno;
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    int e = errno;
    close(fd);
    return -e;
  }
  struct timeval tv = {10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

/* A fresh socket directory from the mkdtemp template tmpl (in dir, of
 * len bytes), made the process's MEMSTATS_DIR, with the agent's other
 * settings at their defaults. Returns 0 or -1. */
static inline int target_dir_setup(char *dir, size_t len, const char *tmpl) {
  snprintf(dir, len, "%s", tmpl);
  if (mkdtemp(dir) == NULL)
    return -1;
  setenv("MEMSTATS_DIR", dir, 1);
  unsetenv("MEMSTATS_AGENT");
  unsetenv("MEMSTATS_MIN_INTERVAL_MS");
  signal(SIGPIPE, SIG_IGN);
  return 0;
}

/* Removes a directory and everything below it. */
static inline int target_dir_remove(const char *dir) {
  DIR *d = opendir(dir);
  if (d == NULL)
    return unlink(dir);
  struct dirent *e;
  char p[1024];
  while ((e = readdir(d)) != NULL) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
      continue;
    int n = snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    if (n < 0 || (size_t)n >= sizeof p)
      continue;
    struct stat st;
    if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
      target_dir_remove(p);
    else
      unlink(p);
  }
  closedir(d);
  return rmdir(dir);
}

#endif
