/*
 * tr_daemon.c - a server that daemonizes as redis-server --daemonize yes
 * and nginx's `daemon on;` do (issue 21): fork, setsid, fork again; the
 * first two exit at once (the first without waiting for the second, so
 * the middle one is an orphan too), and the daemon allocates 8 MiB and
 * lives until the file argv[1] exists (checked every 50 ms, with a
 * small allocation each time), then exits
 * 0. It writes its PID to argv[2] (if given) first.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
  static void *keep[128];

  if (argc < 2)
    return 2;
  if (fork() != 0)
    _exit(0); /* the command: ends at once */
  setsid();
  if (fork() != 0)
    _exit(0); /* the middle one */
  for (int b = 0; b < 128; b++) {
    keep[b] = malloc(64 * 1024);
    if (keep[b] != NULL)
      memset(keep[b], 3, 64 * 1024);
  }
  if (argc > 2) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", argv[2]);
    FILE *f = fopen(tmp, "w");
    if (f != NULL) {
      fprintf(f, "%d\n", (int)getpid());
      fclose(f);
      rename(tmp, argv[2]);
    }
  }
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
