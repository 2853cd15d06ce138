/*
 * tr_workers.c - a server that forks workers, as nginx or a Python Pool
 * does (issue 21: process trees): the parent allocates, forks
 * argv[1] workers (3 by default) that each allocate 8 MiB in 64 KiB
 * blocks, touched, and keep it; every one then allocates a little every
 * 20 ms (see hold) until standard input reaches its end (the test closes its
 * end of the pipe), and the parent waits for its workers before it returns.
 * With argv[2] "idle", the workers allocate nothing after the fork: they
 * wait for the end of standard input in poll, as an idle server's worker
 * waits in epoll_wait, so their preload never starts an agent of its own
 * (memtop wakes them: issue 21). With "idle-nobody" (run as root), idle
 * workers that switch to user nobody first, as nginx's do.
 */
#include <grp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define BLOCK (64 * 1024)
#define BLOCKS 128

/* Until standard input ends, a small allocation every 20 ms, as a
 * server's request loop makes: a fork child's agent starts at an
 * allocation of the child's after the preload's grace (MS__FORK_GRACE_NS),
 * so a child that never allocates again is never attachable. */
static void hold(void) {
  struct pollfd pfd = {.fd = 0, .events = POLLIN};
  char c;

  for (;;) {
    /* volatile: a malloc/free pair left unused is deleted by the compiler. */
    void *volatile q = malloc(100);
    free(q);
    if (poll(&pfd, 1, 20) > 0 && read(0, &c, 1) <= 0)
      return;
  }
}

/* Until standard input ends, nothing but the wait: no allocation. */
static void idle(void) {
  struct pollfd pfd = {.fd = 0, .events = POLLIN};
  char c;

  for (;;)
    if (poll(&pfd, 1, -1) > 0 && read(0, &c, 1) <= 0)
      return;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 3;
  int nobody = argc > 2 && strcmp(argv[2], "idle-nobody") == 0;
  int idle_workers = nobody || (argc > 2 && strcmp(argv[2], "idle") == 0);
  static void *keep[BLOCKS];
  void *p = malloc(BLOCK);

  memset(p, 1, BLOCK);
  for (int i = 0; i < n; i++) {
    pid_t c = fork();
    if (c < 0)
      return 1;
    if (c == 0 && idle_workers) {
      if (nobody &&
          (setgroups(0, NULL) != 0 || setresgid(65534, 65534, 65534) != 0 ||
           setresuid(65534, 65534, 65534) != 0))
        _exit(1);
      idle();
      _exit(0);
    }
    if (c == 0) {
      for (int b = 0; b < BLOCKS; b++) {
        keep[b] = malloc(BLOCK);
        if (keep[b] != NULL)
          memset(keep[b], 2, BLOCK);
      }
      hold();
      _exit(0);
    }
  }
  hold();
  for (int i = 0; i < n; i++)
    wait(NULL);
  free(p);
  return 0;
}
