/*
 * pl_arenas.c - four threads, each filling its own glibc arena with 1 KiB
 * blocks past one 64 MiB heap, for tests/integration/test_kernel_view.c. An
 * arena's next heap is often mapped right above a full one (glibc's
 * new_heap tries the address after the last heap first), and the kernel
 * then shows the two as one read-write line of /proc/self/maps above a
 * PROT_NONE one: what a thread stack looks like.
 *
 * Usage: pl_arenas [MiB per thread, default 72]. With the threads still
 * alive, it reads its own snapshot (ms_snapshot_read, found at run time:
 * pl_snap.h) and /proc/self/status, and says, one "key=value" a line:
 * stack_inuse, stack_sys, heap_alloc, heap_sys, heap_released, ready, data,
 * anon (RssAnon). With "trim" after the size, the threads then free their
 * blocks, the program calls malloc_trim(0) and says the same figures
 * (trim.*) from a snapshot made between two of glibc's samples
 * (trim_report). Then "done".
 */
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "pl_snap.h"

#define NTHREADS 4
#define BLOCK 1024

static pthread_barrier_t g_filled, g_end;
static size_t g_per_thread;

/* The threads fill their arenas in turn: an arena's second heap is then
 * made while its first is full, and lands right above it more often
 * (about one run in three) than when all four grow at once (one in
 * ten). Each thread's first malloc is its turn's: its arena is made
 * then too. */
static pthread_mutex_t g_turn = PTHREAD_MUTEX_INITIALIZER;

static void *fill(void *arg) {
  (void)arg;
  pthread_mutex_lock(&g_turn);
  size_t n = g_per_thread / BLOCK;
  char **blocks = malloc(n * sizeof *blocks);
  if (!blocks)
    abort();
  for (size_t i = 0; i < n; i++) {
    blocks[i] = malloc(BLOCK);
    if (!blocks[i])
      abort();
    memset(blocks[i], (int)i, BLOCK);
  }
  pthread_mutex_unlock(&g_turn);
  pthread_barrier_wait(&g_filled);
  pthread_barrier_wait(&g_end);
  for (size_t i = 0; i < n; i++)
    free(blocks[i]);
  free(blocks);
  return NULL;
}

static long long rss_anon(void) {
  char buf[4096];
  FILE *f = fopen("/proc/self/status", "r");
  long long kb = -1;
  if (!f)
    return -1;
  while (fgets(buf, sizeof buf, f))
    if (sscanf(buf, "RssAnon: %lld kB", &kb) == 1)
      break;
  fclose(f);
  return kb * 1024;
}

typedef int (*pl_breakdown_fn)(const ms_snapshot_t *, ms_breakdown_t *, size_t);

/* After the trim: the first snapshot whose mappings were read after it
 * (StackSys exact: read less than 100 ms before, and the trim was 300 ms
 * before the first try) while glibc's figures are still those of the
 * sample taken before it, shifted (HeapInuse estimated; glibc is sampled
 * at most once a second). "trim.shifted=0" if the sample was taken again
 * first: then nothing was shifted. */
static void trim_report(pl_breakdown_fn breakdown) {
  static ms_snapshot_t s;
  ms_breakdown_t b;
  usleep(300000);
  for (int i = 0; i < 100; i++, usleep(50000)) {
    memset(&b, 0, sizeof b);
    pl_snap(&s);
    if (s.quality[MS_F_HEAP_INUSE] == MS_Q_EXACT) {
      pl_say("trim.shifted=0");
      return;
    }
    if (s.quality[MS_F_STACK_SYS] != MS_Q_EXACT)
      continue;
    if (breakdown)
      breakdown(&s, &b, sizeof b);
    long long anon = rss_anon();
    pl_say("trim.shifted=1");
    pl_say("trim.heap_alloc=%llu", (unsigned long long)s.heap_alloc);
    pl_say("trim.heap_inuse=%llu", (unsigned long long)s.heap_inuse);
    pl_say("trim.heap_sys=%llu", (unsigned long long)s.heap_sys);
    pl_say("trim.heap_released=%llu", (unsigned long long)s.heap_released);
    pl_say("trim.ready=%lld", (long long)b.ready);
    pl_say("trim.sample_age_ns=%llu",
           s.quality[MS_F_HEAP_SAMPLE_AGE] == MS_Q_EXACT
               ? (unsigned long long)s.heap_sample_age_ns
               : 0ull);
    pl_say("trim.anon=%lld", anon);
    return;
  }
  pl_say("trim.shifted=0");
}

int main(int argc, char **argv) {
  long mib = argc > 1 ? atol(argv[1]) : 72;
  if (mib <= 0)
    return 2;
  g_per_thread = (size_t)mib << 20;
  (void)pl_say_delta;
  pl_snap_init();
  pl_breakdown_fn breakdown =
      (pl_breakdown_fn)dlsym(RTLD_DEFAULT, "ms_breakdown_read");
  pthread_t t[NTHREADS];
  pthread_barrier_init(&g_filled, NULL, NTHREADS + 1);
  pthread_barrier_init(&g_end, NULL, NTHREADS + 1);
  for (int i = 0; i < NTHREADS; i++)
    if (pthread_create(&t[i], NULL, fill, NULL) != 0)
      return 1;
  pthread_barrier_wait(&g_filled);

  static ms_snapshot_t s;
  ms_breakdown_t b;
  memset(&b, 0, sizeof b);
  pl_snap(&s);
  if (breakdown)
    breakdown(&s, &b, sizeof b);
  long long anon = rss_anon();
  pl_say("stack_inuse=%llu", (unsigned long long)s.stack_inuse);
  pl_say("stack_sys=%llu", (unsigned long long)s.stack_sys);
  pl_say("heap_alloc=%llu", (unsigned long long)s.heap_alloc);
  pl_say("heap_sys=%llu", (unsigned long long)s.heap_sys);
  pl_say("heap_released=%llu", (unsigned long long)s.heap_released);
  pl_say("ready=%lld", (long long)b.ready);
  pl_say("data=%lld", (long long)b.data);
  pl_say("anon=%lld", anon);
  if (argc > 2 && strcmp(argv[2], "trim") == 0) {
    pthread_barrier_wait(&g_end);
    for (int i = 0; i < NTHREADS; i++)
      pthread_join(t[i], NULL);
    malloc_trim(0);
    trim_report(breakdown);
  } else {
    pthread_barrier_wait(&g_end);
    for (int i = 0; i < NTHREADS; i++)
      pthread_join(t[i], NULL);
  }
  pl_say("done");
  return 0;
}
