/*
 * liblistenpause.c - liblistenpause.so: holds a program's first listen()
 * on a Unix socket, so that a test can look at the socket directory in
 * the instant between the agent's bind and its listen. Loaded with
 * LD_PRELOAD ahead of libmemstats. At that listen() it creates
 * $MEMSTATS_DIR/listen-paused, then waits until $MEMSTATS_DIR/listen-go
 * exists (at most a minute: a test that died must not leave it waiting),
 * then listens. Files only, no timing: the test says when to go on.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define API __attribute__((visibility("default")))

API int listen(int fd, int backlog);

static int paused;

API int listen(int fd, int backlog) {
  int (*real)(int, int) = (int (*)(int, int))dlsym(RTLD_NEXT, "listen");
  const char *dir = getenv("MEMSTATS_DIR");
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;

  if (!paused && dir != NULL &&
      getsockname(fd, (struct sockaddr *)&ss, &len) == 0 &&
      ss.ss_family == AF_UNIX) {
    char p[512], go[512];
    struct stat st;
    paused = 1;
    snprintf(p, sizeof p, "%s/listen-paused", dir);
    snprintf(go, sizeof go, "%s/listen-go", dir);
    int f = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (f >= 0)
      close(f);
    for (int i = 0; i < 60 * 100 && stat(go, &st) != 0; i++) {
      struct timespec ts = {0, 10 * 1000 * 1000};
      nanosleep(&ts, NULL);
    }
  }
  return real != NULL ? real(fd, backlog) : -1;
}
