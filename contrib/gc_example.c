/*
 * gc_example.c - a Boehm-GC program to watch under the preload:
 *
 *   LD_PRELOAD=build/libmemstats-preload.so build/contrib/gc_example 30
 *   memtop            (or: memtop run -- build/contrib/gc_example 30)
 *
 * It builds and drops binary trees on the collector's heap (allocation
 * churn, so the collector runs by itself), keeps a long-lived tree, makes a
 * few malloc'd buffers too (counted by the preload), and asks for an
 * explicit collection (GC_gcollect) every second. memtop then shows the
 * collector's heap, every pause (timed from stop-world to start-world by
 * the Boehm provider), NumGC and the pause percentiles.
 *
 * Usage: gc_example SECONDS [--incremental]. Prints nothing.
 */
#include <gc/gc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct node_s {
  struct node_s *left, *right;
  long payload[2];
} node_t;

static node_t *tree(int depth) {
  node_t *n = GC_MALLOC(sizeof *n);
  if (depth > 0) {
    n->left = tree(depth - 1);
    n->right = tree(depth - 1);
  }
  n->payload[0] = depth;
  return n;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    static const char usage[] = "usage: gc_example SECONDS [--incremental]\n";
    fwrite(usage, 1, sizeof usage - 1, stderr);
    return 2;
  }
  double seconds = strtod(argv[1], NULL);
  GC_INIT();
  if (argc > 2 && strcmp(argv[2], "--incremental") == 0)
    GC_enable_incremental();

  node_t *long_lived = tree(16);
  void *buffers[64] = {0};
  double start = now_s(), last = start;
  unsigned round = 0;
  while (now_s() - start < seconds) {
    for (int i = 0; i < 8; i++)
      (void)tree(12); /* garbage as soon as it is built */
    /* Some malloc'd memory beside the collector's heap. */
    unsigned b = round++ % 64;
    free(buffers[b]);
    buffers[b] = malloc(1024 + (size_t)(round % 32) * 512);
    if (buffers[b])
      memset(buffers[b], (int)b, 1024);
    if (now_s() - last >= 1.0) {
      GC_gcollect();
      last = now_s();
    }
  }
  for (int i = 0; i < 64; i++)
    free(buffers[i]);
  return long_lived->payload[0] == 16 ? 0 : 1;
}
