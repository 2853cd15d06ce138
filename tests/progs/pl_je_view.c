/*
 * pl_je_view.c - a program on jemalloc (linked with -ljemalloc), for
 * tests/integration/test_kernel_view.c: jemalloc's own count of its resident
 * pages (stats.resident) against the kernel's. It makes a few small
 * allocations, as a server does at start, reads its own snapshot
 * (ms_snapshot_read, found at run time: pl_snap.h) and /proc/self/status,
 * and says, one "key=value" a line: ready, anon (RssAnon), mspan_sys,
 * off_heap_released, heap_sys, heap_released, je_resident (jemalloc's
 * stats.resident), then "done".
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pl_snap.h"

int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp,
            size_t newlen);

typedef int (*pl_breakdown_fn)(const ms_snapshot_t *, ms_breakdown_t *, size_t);

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

int main(void) {
  (void)pl_say_delta;
  enum { N = 1000 };
  static char *blocks[N];
  for (int i = 0; i < N; i++) {
    blocks[i] = malloc(16 + (size_t)(i % 64) * 8);
    if (!blocks[i])
      return 1;
    memset(blocks[i], 1, 16);
  }
  pl_snap_init();
  pl_breakdown_fn breakdown =
      (pl_breakdown_fn)dlsym(RTLD_DEFAULT, "ms_breakdown_read");
  static ms_snapshot_t s;
  ms_breakdown_t b;
  memset(&b, 0, sizeof b);
  pl_snap(&s);
  if (breakdown)
    breakdown(&s, &b, sizeof b);
  long long anon = rss_anon();
  uint64_t epoch = 1;
  size_t sz = sizeof epoch, resident = 0;
  mallctl("epoch", &epoch, &sz, &epoch, sz);
  sz = sizeof resident;
  mallctl("stats.resident", &resident, &sz, NULL, 0);
  pl_say("ready=%lld", (long long)b.ready);
  pl_say("anon=%lld", anon);
  pl_say("mspan_sys=%llu", (unsigned long long)s.mspan_sys);
  pl_say("off_heap_released=%llu", (unsigned long long)s.off_heap_released);
  pl_say("heap_sys=%llu", (unsigned long long)s.heap_sys);
  pl_say("heap_released=%llu", (unsigned long long)s.heap_released);
  pl_say("je_resident=%zu", resident);
  pl_say("done");
  for (int i = 0; i < N; i++)
    free(blocks[i]);
  return 0;
}
