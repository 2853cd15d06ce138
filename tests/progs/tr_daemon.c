/*
 * tr_daemon.c - a server that daemonizes as redis-server --daemonize yes
 * and nginx's `daemon on;` do (issue 21): fork, setsid, fork again; the
 * first two exit at once (the first without waiting for the second, so
 * the middle one is an orphan too), and the daemon allocates 8 MiB and
 * lives until the file argv[1] exists (checked every 50 ms, with a
 * small allocation each time), then exits
 * 0. It writes its PID and the middle one's to argv[2] (if given) first,
 * "PID MIDDLE".
 *
 * With argv[3] "linger", the middle one ends its main thread first and
 * its process from a second thread once the file argv[1].middle exists
 * (60 s at most): meanwhile the daemon is still its child, and the middle
 * one shows no mapping in /proc/PID/maps (its main thread's memory is
 * gone), as an ending process does between the kernel's exit_mm and
 * exit_notify. The daemon then writes its PID file first and allocates
 * nothing until the middle one has ended.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static char g_release[4096];

/* The middle one's second thread: the process ends once g_release
 * exists. */
static void *end_later(void *arg) {
  (void)arg;
  for (int i = 0; i < 1200 && access(g_release, F_OK) != 0; i++)
    usleep(50000);
  _exit(0);
}

/* Writes "PID MIDDLE" to path (through path.tmp, renamed), with no
 * allocation: in linger mode the daemon allocates nothing (and so starts
 * no agent) before the middle one has ended. */
static void write_pid(const char *path, pid_t middle) {
  char tmp[4096], line[64];
  int n = snprintf(line, sizeof line, "%d %d\n", (int)getpid(), (int)middle);

  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0)
    return;
  if (write(fd, line, (size_t)n) == n)
    rename(tmp, path);
  close(fd);
}

int main(int argc, char **argv) {
  static void *keep[128];
  int linger = argc > 3 && strcmp(argv[3], "linger") == 0;

  if (argc < 2)
    return 2;
  if (fork() != 0)
    _exit(0); /* the command: ends at once */
  setsid();
  pid_t middle = getpid(); /* the daemon's parent until that one ends */
  if (fork() != 0) {
    /* The middle one. */
    pthread_t th;
    snprintf(g_release, sizeof g_release, "%s.middle", argv[1]);
    if (linger && pthread_create(&th, NULL, end_later, NULL) == 0)
      syscall(SYS_exit, 0); /* this thread only */
    _exit(0);
  }
  if (linger) {
    if (argc > 2)
      write_pid(argv[2], middle);
    for (int i = 0; i < 1300 && getppid() == middle; i++)
      usleep(50000);
  }
  for (int b = 0; b < 128; b++) {
    keep[b] = malloc(64 * 1024);
    if (keep[b] != NULL)
      memset(keep[b], 3, 64 * 1024);
  }
  if (argc > 2 && !linger)
    write_pid(argv[2], middle);
  /* A small allocation each time, as a server's loop makes: a fork
   * child's agent starts at an allocation after the preload's grace. */
  while (access(argv[1], F_OK) != 0) {
    /* volatile: a malloc/free pair left unused is deleted by the compiler. */
    void *volatile q = malloc(100);
    free(q);
    usleep(50000);
  }
  return 0;
}
