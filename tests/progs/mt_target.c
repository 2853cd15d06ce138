/*
 * mt_target.c - a target for memtop's integration tests and benchmark:
 * links -lmemstats, starts the agent, makes known accounting calls
 * through the public API (so its report has known figures), says
 * "ready <pid>" on stdout, then waits:
 *
 *   mt_target            until stdin reaches EOF (or a signal)
 *   mt_target churn      the same, allocating and freeing 1000 tracked
 *                        objects every 10 ms, so that rates move
 *   mt_target lazyfree   the same, after writing 64 MiB of anonymous memory
 *                        and handing it back with MADV_FREE, so that the
 *                        kernel counts it as LazyFree (until reclaimed)
 *   mt_target dropuid    the same, started as root, after becoming uid and
 *                        gid 65534 once the agent listens (a server's
 *                        workers after they drop their privileges: the
 *                        socket stays root's)
 *   mt_target dropuid JAIL the same, after also changing its root to the
 *                        directory JAIL (a daemon that locks itself in an
 *                        empty directory: neither its socket nor /proc is
 *                        there)
 *
 * If ms_agent_start() fails it says "agent-error <code>" and exits 1.
 */
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <grp.h>
#include <unistd.h>

#include "memstats.h"

int main(int argc, char **argv) {
  int churn = argc > 1 && strcmp(argv[1], "churn") == 0;
  struct pollfd pfd = {.fd = 0, .events = POLLIN};
  char buf[256];
  int rc;

  rc = ms_agent_start();
  if (rc != 0) {
    printf("agent-error %d\n", rc);
    return 1;
  }
  /* 8 MiB mapped: 4 MiB in use holding 3 MiB of objects, 1 MiB released. */
  ms_heap_move(MS_SPAN_NONE, MS_SPAN_IDLE, 8u << 20);
  ms_heap_move(MS_SPAN_IDLE, MS_SPAN_INUSE, 4u << 20);
  ms_heap_move(MS_SPAN_IDLE, MS_SPAN_RELEASED, 1u << 20);
  for (int i = 0; i < 3072; i++)
    ms_object_alloc(1024);
  ms_sys_add(MS_SYS_STACK, 256 << 10, 128 << 10);
  ms_gc_set_enabled(1);
  ms_gc_pause(1000000, 1050000, 0);
  ms_gc_pause(2000000, 2100000, 1);
  if (argc > 1 && strcmp(argv[1], "lazyfree") == 0) {
    size_t len = 64u << 20;
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    /* A kernel without MADV_FREE (before 4.5) fails the madvise: the test
     * then finds LazyFree at 0 and says why it skips. */
    if (p != MAP_FAILED) {
      memset(p, 1, len);
#ifdef MADV_FREE
      madvise(p, len, MADV_FREE);
#endif
    }
  }
  if (argc > 2 && strcmp(argv[1], "dropuid") == 0 &&
      (chroot(argv[2]) != 0 || chdir("/") != 0)) {
    printf("chroot-error\n");
    return 1;
  }
  if (argc > 1 && strcmp(argv[1], "dropuid") == 0 &&
      (setgroups(0, NULL) != 0 || setresgid(65534, 65534, 65534) != 0 ||
       setresuid(65534, 65534, 65534) != 0)) {
    printf("dropuid-error\n");
    return 1;
  }
  printf("ready %d\n", (int)getpid());
  fflush(stdout);
  for (;;) {
    if (poll(&pfd, 1, churn ? 10 : -1) > 0) {
      ssize_t n = read(0, buf, sizeof buf);
      if (n <= 0)
        break;
    }
    if (churn) {
      for (int i = 0; i < 1000; i++)
        ms_object_alloc(64);
      for (int i = 0; i < 1000; i++)
        ms_object_free(64);
    }
  }
  ms_agent_stop();
  return 0;
}
