/*
 * target_basic.c - a target for the agent tests: links -lmemstats, starts
 * the agent, makes known accounting calls through the public API, says
 * "ready <pid>" on stdout, then obeys one-line commands on stdin:
 *
 *   snap   write its own snapshot: 8-byte length, then the raw struct
 *   fork   fork a child that lives until this process ends; "child <pid>"
 *   exit   exit(0) (the agent removes its socket at exit)
 *
 * EOF on stdin also exits. If ms_agent_start() fails it says
 * "agent-error <code>" instead of "ready" and still obeys commands.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
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
          for (;;)
            pause();
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
