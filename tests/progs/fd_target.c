/*
 * fd_target.c - a program that does to its descriptors what real programs
 * do, for test_agent_fds: links -lmemstats, starts the agent, says
 * "ready <pid>" on stdout, then obeys one-line commands on stdin:
 *
 *   dup2 N        a pipe of its own, holding "canary N\n", put over
 *                 descriptor N (as `exec N<file` or dup2 would); "ok"
 *   check         each canary still there, unread: "intact", else
 *                 "lost N"
 *   forkcheck     forks; the child looks at each canary's descriptor
 *                 (still the pipe put there, not read): "fork intact",
 *                 else "fork lost N"
 *   closefrom     closes every descriptor from 3 up (close_range), then
 *                 listens on TCP 127.0.0.1 (it gets descriptor 3) and
 *                 says "port P fd F"; from then on it answers each TCP
 *                 client's line "X\n" with "pong X\n", and obeys "stop"
 *                 on stdin ("served N") with the rest of the commands
 *   limit K       sets its RLIMIT_NOFILE to K and opens /dev/null until
 *                 the table is full: "filled N"
 *   dupfd A B     dup2(A, B): "ok"
 *   exit          exit(0)
 *
 * EOF on stdin also exits. With FD_TARGET_NO_UNSHARE=1 in its environment
 * it first forbids itself unshare(2) and close_range's CLOSE_RANGE_UNSHARE
 * with a seccomp filter: the agent then keeps its descriptors in the
 * program's table.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "memstats.h"

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
  char line[128];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (n > 0 && write(1, line, (size_t)n) != n)
    exit(1);
}

static int g_canary[64];
static ino_t g_canary_ino[64];
static int g_ncanary;
static int g_tcp = -1;
static int g_served;

static void put_canary(int n) {
  int p[2];
  char msg[32];
  if (pipe(p) != 0)
    exit(2);
  int len = snprintf(msg, sizeof msg, "canary %d\n", n);
  if (write(p[1], msg, (size_t)len) != len || dup2(p[0], n) != n)
    exit(3);
  if (p[0] != n)
    close(p[0]);
  /* The write end stays open (somewhere above), so an empty pipe reads
   * EAGAIN, not EOF. */
  struct stat st;
  if (g_ncanary < 64 && fstat(n, &st) == 0) {
    g_canary_ino[g_ncanary] = st.st_ino;
    g_canary[g_ncanary++] = n;
  }
  say("ok\n");
}

static void check(void) {
  for (int i = 0; i < g_ncanary; i++) {
    char want[32], got[64];
    int n = g_canary[i];
    int len = snprintf(want, sizeof want, "canary %d\n", n);
    int fl = fcntl(n, F_GETFL);
    fcntl(n, F_SETFL, fl | O_NONBLOCK);
    ssize_t r = read(n, got, sizeof got);
    if (r != len || memcmp(got, want, (size_t)len) != 0) {
      say("lost %d\n", n);
      return;
    }
  }
  say("intact\n");
}

/* After fork() (the library's fork handlers run in the child), each
 * canary's number is still the program's pipe. */
static void fork_check(void) {
  pid_t c = fork();
  if (c == 0) {
    for (int i = 0; i < g_ncanary; i++) {
      struct stat st;
      if (fstat(g_canary[i], &st) != 0 || st.st_ino != g_canary_ino[i])
        _exit(10 + i);
    }
    _exit(0);
  }
  int status = 0;
  waitpid(c, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
    say("fork intact\n");
  else if (WIFEXITED(status) && WEXITSTATUS(status) >= 10)
    say("fork lost %d\n", g_canary[WEXITSTATUS(status) - 10]);
  else
    say("fork failed\n");
}

static void closefrom_and_listen(void) {
  struct sockaddr_in sa;
  socklen_t sl = sizeof sa;
  if (syscall(SYS_close_range, 3u, ~0u, 0u) != 0)
    exit(4);
  g_ncanary = 0;
  g_tcp = socket(AF_INET, SOCK_STREAM, 0);
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (g_tcp < 0 || bind(g_tcp, (struct sockaddr *)&sa, sizeof sa) != 0 ||
      listen(g_tcp, 64) != 0 ||
      getsockname(g_tcp, (struct sockaddr *)&sa, &sl) != 0)
    exit(5);
  say("port %d fd %d\n", ntohs(sa.sin_port), g_tcp);
}

/* One TCP client: its line back with "pong ". A connection taken by
 * someone else first is no error here (accept says EAGAIN). */
static void serve_one(void) {
  int c = accept4(g_tcp, NULL, NULL, SOCK_NONBLOCK);
  if (c < 0)
    return;
  fcntl(c, F_SETFL, 0);
  char buf[128] = "pong ";
  size_t have = 5;
  while (have < sizeof buf - 1) {
    ssize_t r = read(c, buf + have, 1);
    if (r <= 0)
      break;
    have++;
    if (buf[have - 1] == '\n')
      break;
  }
  if (write(c, buf, have) == (ssize_t)have)
    g_served++;
  close(c);
}

static void fill_to(int k) {
  struct rlimit rl;
  int n = 0;
  getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = (rlim_t)k;
  if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
    exit(6);
  while (open("/dev/null", O_RDONLY) >= 0)
    n++;
  say("filled %d\n", n);
}

/* unshare(2), and close_range(2) with CLOSE_RANGE_UNSHARE, fail with
 * EPERM from now on, in every thread made after. */
static void forbid_unshare(void) {
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_unshare, 3, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_close_range, 0, 3),
      /* The low half of the flags (little-endian x86-64 and arm64). */
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
               offsetof(struct seccomp_data, args[2])),
      BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 1u << 1, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {(unsigned short)(sizeof f / sizeof f[0]), f};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
    exit(7);
}

int main(void) {
  char line[256];
  const char *no_unshare = getenv("FD_TARGET_NO_UNSHARE");
  if (no_unshare != NULL && strcmp(no_unshare, "1") == 0)
    forbid_unshare();
  int r = ms_agent_start();
  if (r != 0) {
    say("agent-error %d\n", r);
    return 1;
  }
  say("ready %d\n", (int)getpid());
  size_t have = 0;
  for (;;) {
    struct pollfd p[2] = {{0, POLLIN, 0}, {g_tcp, POLLIN, 0}};
    if (poll(p, g_tcp >= 0 ? 2 : 1, -1) < 0)
      continue;
    if (g_tcp >= 0 && (p[1].revents & POLLIN))
      serve_one();
    if (!(p[0].revents & (POLLIN | POLLHUP)))
      continue;
    ssize_t n = read(0, line + have, sizeof line - 1 - have);
    if (n <= 0)
      return 0;
    have += (size_t)n;
    line[have] = '\0';
    char *nl;
    while ((nl = strchr(line, '\n')) != NULL) {
      int a, b;
      *nl = '\0';
      if (sscanf(line, "dup2 %d", &a) == 1) {
        put_canary(a);
      } else if (strcmp(line, "check") == 0) {
        check();
      } else if (strcmp(line, "forkcheck") == 0) {
        fork_check();
      } else if (strcmp(line, "closefrom") == 0) {
        closefrom_and_listen();
      } else if (strcmp(line, "stop") == 0) {
        say("served %d\n", g_served);
      } else if (sscanf(line, "limit %d", &a) == 1) {
        fill_to(a);
      } else if (sscanf(line, "dupfd %d %d", &a, &b) == 2) {
        say("%s", dup2(a, b) == b ? "ok\n" : "error\n");
      } else if (strcmp(line, "exit") == 0) {
        exit(0);
      }
      size_t used = (size_t)(nl + 1 - line);
      memmove(line, nl + 1, have - used + 1);
      have -= used;
    }
    if (have >= sizeof line - 1)
      have = 0;
  }
}
