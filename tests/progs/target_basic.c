/*
 * target_basic.c - a target for the agent tests: links -lmemstats, starts
 * the agent, makes known accounting calls through the public API, says
 * "ready <pid>" on stdout, then obeys one-line commands on stdin:
 *
 *   snap   write its own snapshot: 8-byte length, then the raw struct
 *   fork   fork a child that lives until this process ends, having started
 *          its agent (ms_agent_start(), as a program linked with
 *          -lmemstats does in its children); "child <pid>"
 *   forkthreads
 *          fork a child that, doing nothing but async-signal-safe calls,
 *          says how many threads it has ("threads N") and exits; this
 *          process waits for it
 *   forkalloc
 *          fork a child that lives until this process ends, allocating
 *          (malloc, free) every 10 ms; "child <pid>"
 *   exit   exit(0) (the agent removes its socket at exit)
 *
 * EOF on stdin also exits. If ms_agent_start() fails it says
 * "agent-error <code>" instead of "ready" and still obeys commands.
 *
 * With TARGET_AS=UID in its environment (started as root) it first becomes
 * that user and group, dumpable again (a change of user makes a process
 * not dumpable), or not with TARGET_NODUMP=1.
 */
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "memstats.h"

static void say(const char *s) {
  size_t n = strlen(s);
  while (n > 0) {
    ssize_t w = write(1, s, n);
    if (w <= 0)
      exit(1);
    s += w;
    n -= (size_t)w;
  }
}

static void write_all(const void *p, size_t n) {
  const char *c = p;
  while (n > 0) {
    ssize_t w = write(1, c, n);
    if (w <= 0)
      exit(1);
    c += w;
    n -= (size_t)w;
  }
}

/* In a fork child, right after fork() returned: "threads N" from
 * /proc/self/status, with open, read, write and _exit only (what a
 * multithreaded program's child may call before exec). */
static void say_threads(void) {
  char buf[4096];
  ssize_t n = 0;
  int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ssize_t r;
    while (n < (ssize_t)sizeof buf - 1 &&
           (r = read(fd, buf + n, sizeof buf - 1 - (size_t)n)) > 0)
      n += r;
    close(fd);
  }
  buf[n > 0 ? n : 0] = '\0';
  char out[32] = "threads ";
  size_t len = 8;
  const char *t = strstr(buf, "\nThreads:");
  if (t != NULL) {
    for (t += 9; *t == '\t' || *t == ' '; t++) {
    }
    while (*t >= '0' && *t <= '9' && len < sizeof out - 2)
      out[len++] = *t++;
  } else {
    out[len++] = '?';
  }
  out[len++] = '\n';
  ssize_t w = write(1, out, len);
  (void)w;
  _exit(0);
}

static void account(void) {
  ms_heap_move(MS_SPAN_NONE, MS_SPAN_IDLE, 8u << 20);
  ms_heap_move(MS_SPAN_IDLE, MS_SPAN_INUSE, 4u << 20);
  ms_heap_move(MS_SPAN_IDLE, MS_SPAN_RELEASED, 1u << 20);
  for (int i = 0; i < 1000; i++)
    ms_object_alloc(48);
  for (int i = 0; i < 200; i++)
    ms_object_free(48);
  ms_sys_add(MS_SYS_STACK, 256 << 10, 128 << 10);
  ms_sys_add(MS_SYS_OTHER, 64 << 10, 0);
  ms_gc_set_enabled(1);
  ms_gc_set_next(16u << 20);
  ms_gc_pause(1000000, 1050000, 0);
  ms_gc_pause(2000000, 2100000, 1);
  ms_gc_pause(3000000, 3020000, 0);
}

int main(void) {
  char line[256];
  const char *as = getenv("TARGET_AS");
  if (as != NULL) {
    unsigned id = (unsigned)atoi(as);
    if (setgroups(0, NULL) != 0 || setgid(id) != 0 || setuid(id) != 0)
      return 3;
    prctl(PR_SET_DUMPABLE, getenv("TARGET_NODUMP") ? 0 : 1, 0, 0, 0);
  }
  int r = ms_agent_start();
  account();
  if (r == 0)
    snprintf(line, sizeof line, "ready %d\n", (int)getpid());
  else
    snprintf(line, sizeof line, "agent-error %d\n", r);
  say(line);
  size_t have = 0;
  for (;;) {
    ssize_t n = read(0, line + have, sizeof line - 1 - have);
    if (n <= 0)
      return 0;
    have += (size_t)n;
    line[have] = '\0';
    char *nl;
    while ((nl = strchr(line, '\n')) != NULL) {
      *nl = '\0';
      if (strcmp(line, "snap") == 0) {
        static ms_snapshot_t s;
        uint64_t len = sizeof s;
        ms_snapshot_read(&s, sizeof s);
        write_all(&len, sizeof len);
        write_all(&s, sizeof s);
      } else if (strcmp(line, "fork") == 0) {
        pid_t parent = getpid();
        pid_t c = fork();
        if (c == 0) {
          /* Live as long as the parent, whatever happens to the test. */
          prctl(PR_SET_PDEATHSIG, SIGKILL);
          if (getppid() != parent)
            _exit(0);
          close(0);
          ms_agent_start();
          for (;;)
            pause();
        }
        char msg[64];
        snprintf(msg, sizeof msg, "child %d\n", (int)c);
        say(msg);
      } else if (strcmp(line, "forkthreads") == 0) {
        pid_t c = fork();
        if (c == 0)
          say_threads();
        waitpid(c, NULL, 0);
      } else if (strcmp(line, "forkalloc") == 0) {
        pid_t parent = getpid();
        pid_t c = fork();
        if (c == 0) {
          prctl(PR_SET_PDEATHSIG, SIGKILL);
          if (getppid() != parent)
            _exit(0);
          close(0);
          for (;;) {
            char *volatile p = malloc(64);
            free(p);
            usleep(10000);
          }
        }
        char msg[64];
        snprintf(msg, sizeof msg, "child %d\n", (int)c);
        say(msg);
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
