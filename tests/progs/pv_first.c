/*
 * pv_first.c - an allocator that the program calls instead of the
 * preload's malloc: preloaded ahead of it (LD_PRELOAD="libjemalloc.so.2:
 * libmemstats-preload.so", or tcmalloc's), or linked into the program
 * itself (pv_first_static: jemalloc linked statically). The preload's
 * malloc is then never called, so it must not claim the object figures:
 * "tracked" is not among the providers, "tracked(off: ...)" says why, and
 * HeapAlloc is the allocator's own, as it has it, never tracking's zeros.
 *
 * Usage: pv_first ALLOCATOR (the provider expected: jemalloc, tcmalloc).
 */
/* pv_check.h has more helpers than this program uses. */
#pragma GCC diagnostic ignored "-Wunused-function"
#include "pv_check.h"

#define NBLK 512
#define BLK 16384
static void *g_blk[NBLK];

/* The index of the provider whose name starts with prefix, or -1. */
static int provider_prefix(const ms_snapshot_t *s, const char *prefix) {
  for (uint32_t i = 0; i < s->nproviders && i < MS_MAX_PROVIDERS; i++)
    if (strncmp(s->providers[i], prefix, strlen(prefix)) == 0)
      return (int)i;
  return -1;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    pv_say("usage: pv_first ALLOCATOR");
    return 2;
  }
  const char *alloc = argv[1];
  static ms_snapshot_t a, b;
  pv_snap(&a);
  PV_CHECK(pv_provider(&a, alloc) >= 0, "the allocator's provider",
           "providers: %u (%s %s %s)", a.nproviders, a.providers[0],
           a.nproviders > 1 ? a.providers[1] : "",
           a.nproviders > 2 ? a.providers[2] : "");
  PV_CHECK(pv_provider(&a, "tracked") < 0, "no tracking claimed", "%s",
           "\"tracked\" is a provider, yet the preload's malloc is not called");
  int off = provider_prefix(&a, "tracked(off: ");
  PV_CHECK(off >= 0, "the snapshot says tracking is off", "%s",
           "no \"tracked(off: ...)\" provider");
  if (off >= 0)
    pv_say("say  %s", a.providers[off]);

  uint64_t bytes = 0;
  for (int i = 0; i < NBLK; i++) {
    g_blk[i] = malloc(BLK);
    memset(g_blk[i], 3, BLK);
    bytes += BLK;
  }
  /* The allocator's sample is cached for its cadence (10 ms for
   * jemalloc): snapshots until one covers the blocks (100 tries bound the
   * wait: a failure, not a timing threshold). */
  for (int i = 0; i < 100; i++) {
    pv_snap(&b);
    if (b.heap_alloc >= bytes)
      break;
    pv_sleep_ms(50);
  }
  /* jemalloc's HeapAlloc is exact (allocated - tcache_bytes), tcmalloc's
   * too; whichever, it is the allocator's. */
  PV_CHECK(b.source[MS_F_HEAP_ALLOC] == pv_provider(&b, alloc),
           "HeapAlloc from the allocator", "source %d, quality %d",
           b.source[MS_F_HEAP_ALLOC], b.quality[MS_F_HEAP_ALLOC]);
  PV_CHECK(b.quality[MS_F_HEAP_ALLOC] != MS_Q_UNAVAILABLE &&
               b.heap_alloc >= bytes,
           "HeapAlloc covers the live blocks", "HeapAlloc %llu, live %llu",
           (unsigned long long)b.heap_alloc, (unsigned long long)bytes);
  PV_CHECK(b.heap_objects != 0 || b.quality[MS_F_HEAP_OBJECTS] != MS_Q_EXACT,
           "no exact zero HeapObjects", "HeapObjects %llu, quality %d",
           (unsigned long long)b.heap_objects, b.quality[MS_F_HEAP_OBJECTS]);
  pv_check_quality(&b, MS_F_HEAP_INUSE, MS_Q_EXACT, alloc);
  PV_CHECK(b.heap_inuse >= bytes, "HeapInuse covers the live blocks",
           "HeapInuse %llu, live %llu", (unsigned long long)b.heap_inuse,
           (unsigned long long)bytes);
  pv_check_identities(&b);
  for (int i = 0; i < NBLK; i++)
    free(g_blk[i]);
  return pv_finish("pv_first");
}
