/*
 * sv_gc.c - a Boehm-GC target for test_serve, run under the preload (and
 * built like the pv_* programs, tests/progs/progs.mk):
 * makes garbage, collects NCOLLECT times explicitly, says "ready <pid>"
 * and then does nothing at all until its stdin reaches EOF, so that every
 * snapshot from then on has the same figures (NumGC, the pause histogram,
 * the heap) whoever reads it: memtop --once --json and memtop serve agree.
 */
#include <gc/gc.h>
#include <poll.h>
#include <stdio.h>
#include <unistd.h>

#define NCOLLECT 7

int main(void) {
  GC_INIT();
  for (int c = 0; c < NCOLLECT; c++) {
    for (int i = 0; i < 2000; i++) {
      void *volatile p = GC_MALLOC(256);
      (void)p;
    }
    GC_gcollect();
  }
  printf("ready %d\n", (int)getpid());
  fflush(stdout);
  struct pollfd pfd = {.fd = 0, .events = POLLIN};
  char buf[256];
  for (;;) {
    if (poll(&pfd, 1, -1) < 0)
      continue;
    if (read(0, buf, sizeof buf) <= 0)
      return 0;
  }
}
