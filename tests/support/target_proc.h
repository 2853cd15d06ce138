/*
 * target_proc.h - test and benchmark helper: a target program as a child
 * process (one of tests/progs, with the agent linked in). It reads
 * commands on its stdin and answers a line each on its stdout; its first
 * line says it is ready. No cmocka here, so that the benchmarks start
 * their targets with the same code as the tests (target.h adds the
 * asserting start and raw connections). Header only, like the other
 * helpers here.
 */
#ifndef MS_TESTS_SUPPORT_TARGET_PROC_H
#define MS_TESTS_SUPPORT_TARGET_PROC_H

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

/* Starts prog with MEMSTATS_DIR=dir and the extra environment "K=V"
 * strings of env and env2 (each NULL-ended, or NULL), descriptors keep[]
 * left open in it at their numbers, and waits for its first line, which
 * it leaves in line. Returns 0, or -1 if it could not be started or said
 * nothing (then nothing is left open, and a child is reaped). */
static inline int target_launch(target_t *t, const char *prog, const char *dir,
                                const char *const *env, const char *const *env2,
                                const int *keep, int nkeep, char *line,
                                size_t linelen) {
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
    setenv("MEMSTATS_DIR", dir, 1);
    for (; env != NULL && *env != NULL; env++)
      putenv((char *)*env);
    for (; env2 != NULL && *env2 != NULL; env2++)
      putenv((char *)*env2);
    execl(prog, prog, (char *)NULL);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  t->pid = pid;
  t->in = in[1];
  t->out = out[0];
  snprintf(t->sock, sizeof t->sock, "%s/%d.sock", dir, (int)pid);
  if (pid < 0 || target_read_line(t->out, line, linelen) != 0) {
    close(t->in);
    close(t->out);
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, NULL, 0);
    }
    return -1;
  }
  return 0;
}

/* Closes its stdin (the program exits) and reaps it; its wait status. */
static inline int target_wait(target_t *t);

/* target_launch with no extra environment or descriptors, for a program
 * whose first line is "ready PID" (tests/progs/mt_target). Returns 0, or
 * -1 if it could not be started or said anything else (then it is
 * reaped). */
static inline int target_launch_ready(target_t *t, const char *prog,
                                      const char *dir) {
  char line[64];
  if (target_launch(t, prog, dir, NULL, NULL, NULL, 0, line, sizeof line) != 0)
    return -1;
  if (strncmp(line, "ready ", 6) == 0)
    return 0;
  kill(t->pid, SIGKILL);
  target_wait(t);
  return -1;
}

/* Closes its stdin (the program exits) and reaps it; its wait status. */
static inline int target_wait(target_t *t) {
  int st = 0;
  close(t->in);
  waitpid(t->pid, &st, 0);
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

#endif
