/*
 * pl_pattern.c - a known allocation pattern, for the preload's tests.
 *
 * Between two snapshots it makes exactly PATTERN_MALLOCS allocations through
 * every entry point of the malloc family (and strdup, which allocates inside
 * libc, and a signal handler) and PATTERN_FREES frees, then prints the
 * deltas and the sum of malloc_usable_size over the blocks it keeps, which
 * the HeapAlloc delta must equal. Then it frees everything and prints the
 * deltas again (all balanced). tests/integration/test_preload.c holds the
 * expected counts; pl_pattern_je.c is this program linked with jemalloc,
 * which has no pvalloc (glibc's would hand jemalloc's free a block it does
 * not own, bare as well as preloaded): PL_NO_PVALLOC leaves it out.
 */
#include <malloc.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pl_snap.h"

#define NMALLOC 100
#define NCALLOC 10

static void *live[256];
static int nlive;
static void *volatile sig_block;
/* Blocks stored here escape, so the compiler cannot drop a malloc/free
 * pair (GCC removes a malloc whose block is only freed). */
static void *volatile escape;

static void keep(void *p) {
  if (p)
    live[nlive++] = p;
}

/* Allocation from a signal handler: raised synchronously, outside any
 * malloc, which is as far as glibc's malloc allows. */
static void on_signal(int sig) {
  (void)sig;
  escape = malloc(40);
  sig_block = malloc(72);
  free(escape);
}

static ms_snapshot_t s0, s1, s2;

int main(void) {
  int have = pl_snap_init();
  pl_say("preload=%d", have);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGUSR1, &sa, NULL);
  pl_snap(&s0); /* warm-up: whatever a first snapshot allocates once */
  pl_snap(&s0);

  /* ---- the pattern ---- */
  void *blocks[NMALLOC];
  for (int i = 0; i < NMALLOC; i++)
    blocks[i] = malloc((size_t)(i * 37 % 1000) + 1);
  for (int i = 0; i < 80; i += 2) /* 40 frees */
    free(blocks[i]);
  for (int i = 1; i < 80; i += 2)
    keep(blocks[i]);
  for (int i = 80; i < NMALLOC; i++)
    keep(blocks[i]);
  for (int i = 0; i < NCALLOC; i++)
    keep(calloc((size_t)i + 1, 24));
  void *r = realloc(NULL, 100); /* a malloc */
  r = realloc(r, 5000);         /* a free and a malloc */
  keep(r);
  void *z = malloc(50);
  escape = z;
  z = realloc(z, 0); /* glibc: frees, returns NULL */
  int realloc0_null = z == NULL;
  keep(z);
  void *pm = NULL;
  if (posix_memalign(&pm, 64, 300) == 0)
    keep(pm);
  keep(aligned_alloc(128, 256));
  keep(memalign(32, 100));
  keep(valloc(100));
#ifndef PL_NO_PVALLOC
  keep(pvalloc(100));
#endif
  keep(reallocarray(NULL, 10, 8));
  keep(strdup("a string duplicated by libc"));
  raise(SIGUSR1);
  keep(sig_block);

  pl_snap(&s1);
  uint64_t usable = 0;
  for (int i = 0; i < nlive; i++)
    usable += malloc_usable_size(live[i]);
  pl_say("realloc0_null=%d", realloc0_null);
  pl_say("live=%d", nlive);
  pl_say("live_usable=%llu", (unsigned long long)usable);
  pl_say_delta("pattern", &s0, &s1);

  for (int i = 0; i < nlive; i++)
    free(live[i]);
  pl_snap(&s2);
  pl_say_delta("all", &s0, &s2);
  return 0;
}
