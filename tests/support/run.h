/*
 * run.h - test helper: runs a program (memtop, mostly) with stdin from
 * /dev/null and its stdout and stderr captured, and checks what reaches
 * the terminal. Include after <cmocka.h>; header only, like the other
 * helpers here.
 */
#ifndef MS_TESTS_SUPPORT_RUN_H
#define MS_TESTS_SUPPORT_RUN_H

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "support/hostile.h"

/* A program still running after this long is hung, not slow: the test
 * fails instead of waiting for the suite's own limit. */
#define RUN_LIMIT_S 30

/* Waits until cond holds, looking every 20 ms; after RUN_LIMIT_S fails
 * the test with the message (fail_msg's printf form, evaluated then). */
#define RUN_WAIT_UNTIL(cond, ...)                                              \
  do {                                                                         \
    time_t run_wait_start_ = time(NULL);                                       \
    while (!(cond)) {                                                          \
      if (time(NULL) - run_wait_start_ > RUN_LIMIT_S)                          \
        fail_msg(__VA_ARGS__);                                                 \
      usleep(20000);                                                           \
    }                                                                          \
  } while (0)

typedef struct run_result_s {
  int status; /* exit status, or 128+signal */
  char out[256 * 1024];
  char err[64 * 1024];
  size_t nout, nerr;
} run_result_t;

/* Runs argv (NULL-terminated) into *res, closing descriptor close_fd (one
 * of 0, 1, 2, or -1 for none) in the child after setting up its standard
 * ones, as user `as` (NULL: as this process; the child exits 125 if it
 * cannot become that user). Returns its status (res->status). */
static inline int run_capture_as(run_result_t *res, char *const argv[],
                                 int close_fd, const struct passwd *as) {
  int po[2], pe[2], st;
  struct pollfd pfd[2];
  time_t start = time(NULL);

  memset(res, 0, sizeof *res);
  assert_int_equal(pipe2(po, O_CLOEXEC), 0);
  assert_int_equal(pipe2(pe, O_CLOEXEC), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int null = open("/dev/null", O_RDONLY);
    dup2(null, 0);
    dup2(po[1], 1);
    dup2(pe[1], 2);
    if (close_fd >= 0)
      close(close_fd);
    if (as != NULL && (setgroups(0, NULL) != 0 ||
                       setresgid(as->pw_gid, as->pw_gid, as->pw_gid) != 0 ||
                       setresuid(as->pw_uid, as->pw_uid, as->pw_uid) != 0))
      _exit(125);
    execv(argv[0], argv);
    _exit(126);
  }
  close(po[1]);
  close(pe[1]);
  pfd[0].fd = po[0];
  pfd[1].fd = pe[0];
  pfd[0].events = pfd[1].events = POLLIN;
  while (pfd[0].fd >= 0 || pfd[1].fd >= 0) {
    if (time(NULL) - start > RUN_LIMIT_S) {
      kill(pid, SIGKILL);
      fail_msg("%s did not finish within %d s (hung)", argv[0], RUN_LIMIT_S);
    }
    if (poll(pfd, 2, 1000) <= 0)
      continue;
    for (int i = 0; i < 2; i++) {
      char *b = i ? res->err : res->out;
      size_t *nb = i ? &res->nerr : &res->nout;
      size_t cap = i ? sizeof res->err : sizeof res->out;
      if (!pfd[i].revents)
        continue;
      ssize_t n = read(pfd[i].fd, b + *nb, cap - 1 - *nb);
      if (n <= 0) {
        close(pfd[i].fd);
        pfd[i].fd = -1;
      } else {
        *nb += (size_t)n;
      }
    }
  }
  assert_int_equal(waitpid(pid, &st, 0), pid);
  res->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return res->status;
}

static inline int run_capture(run_result_t *res, char *const argv[],
                              int close_fd) {
  return run_capture_as(res, argv, close_fd, NULL);
}

/* run_capture_as() of prog with the arguments from first on (NULL-ended). */
static inline int run_capture_va(run_result_t *res, const char *prog,
                                 int close_fd, const struct passwd *as,
                                 const char *first, va_list ap) {
  char *argv[32];
  int argc = 0;
  argv[argc++] = (char *)prog;
  for (const char *a = first; a != NULL && argc < 31;
       a = va_arg(ap, const char *))
    argv[argc++] = (char *)a;
  argv[argc] = NULL;
  return run_capture_as(res, argv, close_fd, as);
}

/* Runs a shell command made like printf's; its exit status, or -1 if it
 * did not exit. */
static inline int run_sh(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static inline int run_sh(const char *fmt, ...) {
  char cmd[8192];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  int st = system(cmd);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Runs the shell command cmd with its stdout and stderr into out (len
 * bytes, NUL-terminated, what does not fit is left out). Returns its exit
 * status, or -1 if it did not exit normally. */
static inline int run_output(const char *cmd, char *out, size_t len) {
  char full[8192];
  size_t n = 0, r;
  snprintf(full, sizeof full, "(%s) 2>&1", cmd);
  FILE *p = popen(full, "r");
  assert_non_null(p);
  while (n < len - 1 && (r = fread(out + n, 1, len - 1 - n, p)) > 0)
    n += r;
  out[n] = '\0';
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A PID as an argument; eight stay valid at a time. */
static inline char *run_pidstr(pid_t pid) {
  static char b[8][16];
  static int i;
  i = (i + 1) % 8;
  snprintf(b[i], sizeof b[i], "%d", (int)pid);
  return b[i];
}

/* Writes all of p, for a child that serves a fake agent: it exits if the
 * peer is gone. */
static inline void run_send_all(int fd, const void *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w <= 0)
      _exit(1);
    p = (const char *)p + w;
    n -= (size_t)w;
  }
}

/* Fails unless the n bytes of s are safe on a terminal (no escape or
 * control sequence a target could have planted). */
static inline void assert_no_terminal_codes(const char *what, const char *s,
                                            size_t n) {
  size_t bad = terminal_unsafe_at(s, n, 1);
  if (bad != n)
    fail_msg("%s: byte 0x%02x at %zu reaches the terminal: %.60s", what,
             (unsigned char)s[bad], bad, s + bad);
}

#endif
