/*
 * pl_loop.c - the malloc/free microbenchmark loop, run by
 * tests/bench/bench_preload.c under each configuration (bare, preloaded,
 * jemalloc, heaptrack).
 *
 *   pl_loop THREADS PAIRS [random|calloc]
 *
 * Each thread keeps a ring of 64 live blocks and, PAIRS times, frees the
 * oldest and allocates a new one of a mixed small size (16..512 bytes, a
 * fixed pseudo-random sequence), so the allocator sees a realistic mix
 * rather than one size bouncing on its fastest path. With "random": a
 * ring of 256 blocks of sizes spread evenly over 16..4096 bytes (issue
 * 24's loop, where the heap profiler samples every 256th pair or so at
 * its default rate, so what a sample costs shows). With "calloc": the
 * small loop, each block from calloc(1, n). Prints the median
 * thread's nanoseconds per malloc/free pair: "ns_per_pair=12.34".
 *
 * PL_LOOP_ATTACH=LIB (tests/bench/bench_attach.c): before the threads
 * start, the program makes itself the calls memtop attach --track makes
 * in a running program (src/attach/attach.c's calls(): dlopen(LIB,
 * RTLD_NOW | RTLD_LOCAL), dlsym "ms__attach_start", called with
 * MS__ATTACH_TRACK), so that the loop runs as an attached program's does
 * where ptrace cannot reach it: under valgrind. PL_LOOP_WAIT=1: says
 * "ready PID" and waits for a line on stdin before the threads start
 * (the real memtop attach --track in between).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RING_MAX 256
#define NSIZES 256
#define MAX_THREADS 16

static size_t sizes[NSIZES];
static long pairs;
static int use_calloc; /* "calloc": calloc(1, n) instead of malloc(n) */
static unsigned ring_len = 64;
static pthread_barrier_t go;
static double thread_ns[MAX_THREADS];
/* The ring escapes, so the compiler cannot pair up and drop malloc/free. */
static void *volatile rings[MAX_THREADS][RING_MAX];

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void *loop(void *arg) {
  int me = (int)(long)arg;
  void *volatile *ring = rings[me];
  for (unsigned i = 0; i < ring_len; i++)
    ring[i] = malloc(sizes[i]);
  pthread_barrier_wait(&go);
  double t0 = now_ns();
  /* Two loops, so that malloc's pays no test for calloc's. */
  if (use_calloc) {
    for (long i = 0; i < pairs; i++) {
      unsigned slot = (unsigned)i % ring_len;
      free(ring[slot]);
      ring[slot] = calloc(1, sizes[(unsigned)i % NSIZES]);
    }
  } else {
    for (long i = 0; i < pairs; i++) {
      unsigned slot = (unsigned)i % ring_len;
      free(ring[slot]);
      ring[slot] = malloc(sizes[(unsigned)i % NSIZES]);
    }
  }
  thread_ns[me] = (now_ns() - t0) / (double)pairs;
  for (unsigned i = 0; i < ring_len; i++)
    free(ring[i]);
  return NULL;
}

/* memtop attach --track's calls, made by the program itself. Returns 0,
 * or -1 (said on stderr). */
static int self_attach(const char *lib) {
  void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  int (*start)(unsigned) = NULL;
  if (h)
    *(void **)&start = dlsym(h, "ms__attach_start");
  int r = start ? start(1u) : -1;
  if (r != 0)
    fprintf(stderr, "pl_loop: attaching %s: %s (%d)\n", lib,
            h ? "ms__attach_start failed" : dlerror(), r);
  return r == 0 ? 0 : -1;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 1;
  pairs = argc > 2 ? atol(argv[2]) : 10000000;
  int random = argc > 3 && strcmp(argv[3], "random") == 0;
  use_calloc = argc > 3 && strcmp(argv[3], "calloc") == 0;
  if (threads < 1 || threads > MAX_THREADS || pairs < 1 ||
      (argc > 3 && !random && !use_calloc)) {
    fprintf(stderr, "usage: pl_loop THREADS(1..%d) PAIRS [random|calloc]\n",
            MAX_THREADS);
    return 2;
  }
  if (random)
    ring_len = RING_MAX;
  uint32_t x = 2463534242u;
  for (int i = 0; i < NSIZES; i++) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    /* Mostly small: three in four under 128 bytes. */
    sizes[i] = random ? 16 + x % 4081 : (x & 3) ? 16 + x % 112 : 128 + x % 385;
  }
  const char *wait = getenv("PL_LOOP_WAIT");
  if (wait && strcmp(wait, "1") == 0) {
    char line[16];
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    if (!fgets(line, sizeof line, stdin))
      return 1;
  }
  const char *attach = getenv("PL_LOOP_ATTACH");
  if (attach && attach[0] && self_attach(attach) != 0)
    return 1;
  pthread_t t[MAX_THREADS];
  pthread_barrier_init(&go, NULL, (unsigned)threads);
  for (int i = 0; i < threads; i++)
    pthread_create(&t[i], NULL, loop, (void *)(long)i);
  for (int i = 0; i < threads; i++)
    pthread_join(t[i], NULL);
  qsort(thread_ns, (size_t)threads, sizeof thread_ns[0], cmp_double);
  printf("ns_per_pair=%.2f\n", thread_ns[threads / 2]);
  return 0;
}
