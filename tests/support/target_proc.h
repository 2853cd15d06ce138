/*
 * target_proc.h - test and benchmark helper: a target program as a child
 * process (one of tests/progs with the agent linked in, or any program
 * under the preload) with its stdin and stdout piped. The program reads
 * its stdin and writes lines on its stdout (tests/progs' programs:
 * commands and a line of answer each, the first line saying it is
 * ready). No cmocka here, so that the benchmarks start their targets with
 * the same code as the tests (target.h adds the asserting forms, the
 * socket directory and raw connections). Header only, like the other
 * helpers here.
 */
#ifndef MS_TESTS_SUPPORT_TARGET_PROC_H
#define MS_TESTS_SUPPORT_TARGET_PROC_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
 * numbers. Reads nothing: the caller reads its lines from t->out.
 * Returns 0, or -1 if it could not be started (then nothing is left
 * open). */
static inline int target_launch(target_t *t, const char *const argv[],
                                const char *dir, const char *const *env,
                                const char *const *env2, const int *keep,
                                int nkeep) {
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0)
    return -1;
  if (pipe2(out, O_CLOEXEC) != 0) {
    close(in[0]);
    close(in[1]);
    return -1;
  }
  pid_t pid = fork();
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
  if (pid < 0) {
    close(in[1]);
    close(out[0]);
    return -1;
  }
  t->pid = pid;
  t->in = in[1];
  t->out = out[0];
  snprintf(t->sock, sizeof t->sock, "%s/%d.sock", dir != NULL ? dir : ".",
           (int)pid);
  return 0;
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

/* Sends it sig, then as target_wait. */
static inline int target_stop(target_t *t, int sig) {
  kill(t->pid, sig);
  return target_wait(t);
}

static inline void target_kill(target_t *t) {
  target_stop(t, SIGKILL);
}

/* argv started as target_launch does (its environment changes env and
 * env2, no descriptors kept), for a program whose first line is
 * "ready ..." (tests/progs/mt_target, at_alloc). Returns 0, or -1 if it
 * could not be started or said anything else (then it is reaped). */
static inline int
target_launch_argv_ready(target_t *t, const char *const argv[], const char *dir,
                         const char *const *env, const char *const *env2) {
  char line[64];
  if (target_launch(t, argv, dir, env, env2, NULL, 0) != 0)
    return -1;
  if (target_read_line(t->out, line, sizeof line) == 0 &&
      strncmp(line, "ready ", 6) == 0)
    return 0;
  target_kill(t);
  return -1;
}

/* The same for prog with no arguments, nothing else in its environment
 * but MEMSTATS_DIR=dir. */
static inline int target_launch_ready(target_t *t, const char *prog,
                                      const char *dir) {
  const char *argv[] = {prog, NULL};
  return target_launch_argv_ready(t, argv, dir, NULL, NULL);
}

#endif
