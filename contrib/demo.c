/*
 * demo.c - a workload whose memory visibly changes shape, for trying
 * memtop:
 *
 *   make demo                      (builds, then: memtop run -- demo)
 *   build/contrib/demo & memtop $!
 *
 * It loops through four phases, a few seconds each:
 *
 *   growth         allocates objects of mixed sizes up to the target size:
 *                  data grows, Ready follows;
 *   fragmentation  a "collection" frees every other object (recorded as a
 *                  GC pause through the public API): data halves but the
 *                  pages stay in use, so fragOverhead and idle grow;
 *   refill         allocates small objects into the holes: data comes back
 *                  without Ready growing much;
 *   release        frees everything and calls malloc_trim(0): Ready drops
 *                  and the pages handed back show up as Prepared (with
 *                  allocators that keep them mapped).
 *
 * Usage: demo [SECONDS [MIB]] - run for SECONDS (default: until killed),
 * growing to about MIB mebibytes (default 64). It is a plain C program:
 * under `memtop run` the preloaded library counts every allocation; run on
 * its own, ms_agent_start() serves the allocator's own figures.
 */
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "memstats.h"

#define STEP_MS 50 /* one step of a phase */

static volatile sig_atomic_t stop;

static void on_signal(int sig) {
  (void)sig;
  stop = 1;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void nap(void) {
  struct timespec ts = {0, STEP_MS * 1000000L};
  nanosleep(&ts, NULL);
}

/* A cheap, deterministic random number generator (xorshift). */
static unsigned long rnd(void) {
  static unsigned long x = 88172645463325252ul;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return x;
}

/* Object sizes like a real program's: mostly small, a few large. */
static size_t object_size(void) {
  unsigned long r = rnd() % 100;
  if (r < 60)
    return 16 + rnd() % 112;
  if (r < 90)
    return 128 + rnd() % 896;
  if (r < 99)
    return 1024 + rnd() % 7168;
  return 64 * 1024 + rnd() % (192 * 1024);
}

typedef struct heap_s {
  void **obj;
  size_t *size;
  size_t n, cap;
  size_t live_bytes;
} heap_t;

static int heap_add(heap_t *h, size_t size) {
  void *p;

  if (h->n == h->cap) {
    size_t cap = h->cap ? h->cap * 2 : 4096;
    void **o = realloc(h->obj, cap * sizeof *o);
    size_t *s;
    if (o == NULL)
      return -1;
    h->obj = o;
    s = realloc(h->size, cap * sizeof *s);
    if (s == NULL)
      return -1;
    h->size = s;
    h->cap = cap;
  }
  p = malloc(size);
  if (p == NULL)
    return -1;
  memset(p, 0xa5, size); /* touch it: backed memory, as in real use */
  h->obj[h->n] = p;
  h->size[h->n] = size;
  h->n++;
  h->live_bytes += size;
  return 0;
}

/* Frees every other object and compacts the table. */
static void heap_free_every_other(heap_t *h) {
  size_t i, j = 0;

  for (i = 0; i < h->n; i++) {
    if (i % 2 == 1) {
      h->live_bytes -= h->size[i];
      free(h->obj[i]);
    } else {
      h->obj[j] = h->obj[i];
      h->size[j] = h->size[i];
      j++;
    }
  }
  h->n = j;
}

static void heap_free_all(heap_t *h) {
  size_t i;

  for (i = 0; i < h->n; i++)
    free(h->obj[i]);
  h->n = 0;
  h->live_bytes = 0;
}

static void say(const char *phase, const heap_t *h) {
  printf("demo %d: %-13s %6zu objects, %7.1f MiB live\n", (int)getpid(), phase,
         h->n, (double)h->live_bytes / (1 << 20));
  fflush(stdout);
}

int main(int argc, char **argv) {
  double seconds = 0, end, phase_s = 4;
  size_t target, per_step;
  long mib = 64;
  heap_t h = {0};
  char *e;
  int rc, steps, i;

  if (argc > 1) {
    errno = 0;
    seconds = strtod(argv[1], &e);
    if (errno || *e || seconds < 0) {
      fprintf(stderr, "usage: demo [SECONDS [MIB]]\n");
      return 2;
    }
  }
  if (argc > 2) {
    mib = strtol(argv[2], &e, 10);
    if (*e || mib < 1 || mib > 65536) {
      fprintf(stderr, "usage: demo [SECONDS [MIB]] (MIB from 1 to 65536)\n");
      return 2;
    }
  }
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);

  /* Under `memtop run` the preload has started the agent already
   * (MS_EEXIST); on its own, this starts it. */
  rc = ms_agent_start();
  if (rc != 0 && rc != MS_EEXIST)
    fprintf(stderr, "demo: the memstats agent did not start: %s\n",
            ms_strerror(rc));
  ms_gc_set_enabled(1);

  target = (size_t)mib << 20;
  steps = (int)(phase_s * 1000 / STEP_MS);
  per_step = target / (size_t)steps;
  end = seconds > 0 ? now_s() + seconds : 0;
  printf("demo %d: growing to %ld MiB in phases of %.0f s; watch it with "
         "`memtop %d`\n",
         (int)getpid(), mib, phase_s, (int)getpid());
  while (!stop && (end == 0 || now_s() < end)) {
    say("growth", &h);
    for (i = 0; i < steps && !stop; i++) {
      size_t goal = h.live_bytes + per_step;
      while (h.live_bytes < goal && heap_add(&h, object_size()) == 0)
        ;
      nap();
    }

    /* The "collection": a stop-the-world pause as a runtime would
     * report it. */
    ms_gc_set_next(h.live_bytes);
    ms_gc_begin(0);
    heap_free_every_other(&h);
    ms_gc_end();
    say("fragmentation", &h);
    for (i = 0; i < steps && !stop; i++)
      nap();

    say("refill", &h);
    for (i = 0; i < steps && !stop; i++) {
      size_t goal = h.live_bytes + per_step / 4;
      while (h.live_bytes < goal && heap_add(&h, 16 + rnd() % 240) == 0)
        ;
      nap();
    }

    ms_gc_begin(1);
    heap_free_all(&h);
    ms_gc_end();
    malloc_trim(0);
    say("release", &h);
    for (i = 0; i < steps && !stop; i++)
      nap();
  }
  heap_free_all(&h);
  free(h.obj);
  free(h.size);
  return 0;
}
