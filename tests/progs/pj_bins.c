/*
 * pj_bins.c - jemalloc's own size classes when nothing tracks objects: a
 * program linked with -ljemalloc and -lmemstats (no preload; progs.mk),
 * so the snapshot's BySize can only come from jemalloc's bins and large
 * extents (src/providers/jemalloc.c).
 *
 * Checks: the providers are "jemalloc" and not "tracked"; BySize, Mallocs
 * and Frees are jemalloc's estimates (source = jemalloc's index); there is
 * one class per bin (arenas.nbins) and per large extent class
 * (arenas.nlextents), in jemalloc's order, each class's Size being what
 * this program reads itself through mallctl (arenas.bin.<j>.size,
 * arenas.lextent.<k>.size); once a fresh sample is in, the 48-, 3072-
 * and 112 KiB-classes' counters equal jemalloc's own (stats.arenas.4096.
 * bins.<j>.nmalloc/ndalloc, lextents.<k>.*), and across a known pattern
 * each class's Mallocs - Frees grew by at least the pattern's live count.
 *
 * What is exact and what is not: a bin counts the regions it hands to
 * (nmalloc) and takes back from (ndalloc) the thread caches, not the
 * program's calls, so objects the program freed but its thread cache
 * still holds count as live in the bin. "thread.tcache.flush" before each
 * reading returns them, which makes nmalloc - ndalloc of a bin the live
 * regions of the class exactly, but other code in the process (the C
 * library, jemalloc's own bookkeeping) may hold regions of the same class:
 * hence "at least" for the pattern. Large extents above tcache_max (32 KiB
 * by default) are not cached at all.
 */
/* pv_check.h's pattern and preload helpers are for the pv_* programs. */
#pragma GCC diagnostic ignored "-Wunused-function"
#include "pv_check.h"

int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp,
            size_t newlen);

#define N48 1000
#define N3000 500
#define NBIG 10
#define BIG 100000

static void *g_48[N48], *g_3000[N3000], *g_big[NBIG];

static uint64_t ctl_size(const char *name) {
  size_t v = 0, len = sizeof v;
  if (mallctl(name, &v, &len, NULL, 0) != 0) {
    pv_say("FAIL mallctl %s", name);
    pv_failures++;
  }
  return v;
}

static uint64_t ctl_u64(const char *name) {
  uint64_t v = 0;
  size_t len = sizeof v;
  if (mallctl(name, &v, &len, NULL, 0) != 0) {
    pv_say("FAIL mallctl %s", name);
    pv_failures++;
  }
  return v;
}

static unsigned ctl_unsigned(const char *name) {
  unsigned v = 0;
  size_t len = sizeof v;
  if (mallctl(name, &v, &len, NULL, 0) != 0) {
    pv_say("FAIL mallctl %s", name);
    pv_failures++;
  }
  return v;
}

/* The class index in the snapshot (bins first, then large extents) of
 * the class that holds size bytes. */
static unsigned nbins, nlext;
static unsigned class_of(size_t size) {
  char name[64];
  for (unsigned j = 0; j < nbins + nlext; j++) {
    if (j < nbins)
      snprintf(name, sizeof name, "arenas.bin.%u.size", j);
    else
      snprintf(name, sizeof name, "arenas.lextent.%u.size", j - nbins);
    if (ctl_size(name) >= size)
      return j;
  }
  return ~0u;
}

/* jemalloc's own counters of snapshot class j, merged over the arenas. */
static void je_counts(unsigned j, uint64_t *nmalloc, uint64_t *ndalloc) {
  char name[96];
  const char *kind = j < nbins ? "bins" : "lextents";
  unsigned k = j < nbins ? j : j - nbins;
  snprintf(name, sizeof name, "stats.arenas.4096.%s.%u.nmalloc", kind, k);
  *nmalloc = ctl_u64(name);
  snprintf(name, sizeof name, "stats.arenas.4096.%s.%u.ndalloc", kind, k);
  *ndalloc = ctl_u64(name);
}

static void flush_and_refresh(void) {
  if (mallctl("thread.tcache.flush", NULL, NULL, NULL, 0) != 0)
    pv_say("note: thread.tcache.flush failed (no thread cache?)");
  uint64_t epoch = 1;
  size_t len = sizeof epoch;
  mallctl("epoch", &epoch, &len, &epoch, len);
}

/* The classes the pattern uses. */
static unsigned c48, c3000, cbig;

/* A snapshot is fresh when its classes agree with jemalloc's counters
 * read just before: the provider's sample is cached for up to its
 * cadence, so the first snapshot may predate what the program just did.
 * The program is quiet meanwhile, so a fresh one must agree. */
static int matches_je(const ms_snapshot_t *s) {
  const unsigned cls[3] = {c48, c3000, cbig};
  uint64_t m[3], d[3];
  flush_and_refresh();
  for (int i = 0; i < 3; i++)
    je_counts(cls[i], &m[i], &d[i]);
  pv_snap((ms_snapshot_t *)s);
  if (s->nsize_classes != nbins + nlext)
    return 0;
  for (int i = 0; i < 3; i++)
    if (s->by_size[cls[i]].mallocs != m[i] || s->by_size[cls[i]].frees != d[i])
      return 0;
  return 1;
}

static uint64_t live(const ms_snapshot_t *s, unsigned j) {
  return s->by_size[j].mallocs - s->by_size[j].frees;
}

int main(void) {
  static ms_snapshot_t a, b;

  /* Linked with -lmemstats: the library's own ms_snapshot_read (a direct
   * reference, so the linker keeps libmemstats even with --as-needed). */
  pv_read_p = ms_snapshot_read;
  /* The first snapshot detects the allocator (with a probe allocation). */
  pv_snap(&a);
  int je = pv_provider(&a, "jemalloc");
  PV_CHECK(je >= 0, "provider jemalloc detected", "%u providers, first %s",
           a.nproviders, a.nproviders ? a.providers[0] : "-");
  PV_CHECK(pv_provider(&a, "tracked") < 0, "nothing tracks objects", "%s",
           "a \"tracked\" provider is there: is the preload loaded?");
  if (je < 0)
    return pv_finish("pj_bins");

  nbins = ctl_unsigned("arenas.nbins");
  nlext = ctl_unsigned("arenas.nlextents");
  c48 = class_of(48);
  c3000 = class_of(3000);
  cbig = class_of(BIG);
  PV_CHECK(nbins + nlext <= MS_MAX_SIZE_CLASSES && c48 < nbins &&
               c3000 < nbins && cbig >= nbins && cbig < nbins + nlext,
           "jemalloc's classes fit and the pattern's sizes are in them",
           "nbins %u nlextents %u, classes %u %u %u", nbins, nlext, c48, c3000,
           cbig);
  if (pv_failures)
    return pv_finish("pj_bins");

  int fresh = pv_until_fresh(&a, matches_je);
  PV_CHECK(fresh, "before: classes' counters = jemalloc's nmalloc/ndalloc",
           "48-class %llu/%llu", (unsigned long long)a.by_size[c48].mallocs,
           (unsigned long long)a.by_size[c48].frees);

  /* The pattern: every 4th 48-byte block and every 2nd 3000-byte block
   * freed, the large blocks all kept. */
  uint64_t live48 = 0, live3000 = 0;
  for (int i = 0; i < N48; i++)
    g_48[i] = malloc(48);
  for (int i = 0; i < N3000; i++)
    g_3000[i] = malloc(3000);
  for (int i = 0; i < NBIG; i++)
    g_big[i] = malloc(BIG);
  for (int i = 0; i < N48; i++) {
    if (i % 4 == 0) {
      free(g_48[i]);
      g_48[i] = NULL;
    } else {
      live48++;
    }
  }
  for (int i = 0; i < N3000; i++) {
    if (i % 2 == 0) {
      free(g_3000[i]);
      g_3000[i] = NULL;
    } else {
      live3000++;
    }
  }

  fresh = pv_until_fresh(&b, matches_je);
  PV_CHECK(fresh, "after: classes' counters = jemalloc's nmalloc/ndalloc",
           "48-class %llu/%llu", (unsigned long long)b.by_size[c48].mallocs,
           (unsigned long long)b.by_size[c48].frees);

  pv_check_quality(&b, MS_F_BY_SIZE, MS_Q_ESTIMATED, "jemalloc");
  pv_check_quality(&b, MS_F_MALLOCS, MS_Q_ESTIMATED, "jemalloc");
  pv_check_quality(&b, MS_F_FREES, MS_Q_ESTIMATED, "jemalloc");
  pv_check_identities(&b);
  PV_CHECK(b.nsize_classes == nbins + nlext,
           "one class per bin and per large extent class",
           "nsize_classes %u, nbins %u + nlextents %u", b.nsize_classes, nbins,
           nlext);

  /* Every class's size, as jemalloc says it. */
  unsigned wrong = 0, first_wrong = 0;
  for (unsigned j = 0; j < b.nsize_classes && j < nbins + nlext; j++) {
    char name[64];
    if (j < nbins)
      snprintf(name, sizeof name, "arenas.bin.%u.size", j);
    else
      snprintf(name, sizeof name, "arenas.lextent.%u.size", j - nbins);
    if (b.by_size[j].size != ctl_size(name) && wrong++ == 0)
      first_wrong = j;
  }
  PV_CHECK(wrong == 0, "every class's Size = arenas.bin/lextent.<j>.size",
           "%u wrong, first class %u: Size %llu", wrong, first_wrong,
           (unsigned long long)b.by_size[first_wrong].size);
  PV_CHECK(b.by_size[c48].size == 48, "the 48-byte class", "Size %llu",
           (unsigned long long)b.by_size[c48].size);

  PV_CHECK(live(&b, c48) - live(&a, c48) >= live48,
           "48-byte class: Mallocs - Frees grew by >= the live count",
           "grew by %lld, %llu live",
           (long long)(live(&b, c48) - live(&a, c48)),
           (unsigned long long)live48);
  PV_CHECK(live(&b, c3000) - live(&a, c3000) >= live3000,
           "3000-byte class: Mallocs - Frees grew by >= the live count",
           "grew by %lld, %llu live",
           (long long)(live(&b, c3000) - live(&a, c3000)),
           (unsigned long long)live3000);
  PV_CHECK(live(&b, cbig) - live(&a, cbig) >= NBIG,
           "large class: Mallocs - Frees grew by >= the live count",
           "grew by %lld, %d live",
           (long long)(live(&b, cbig) - live(&a, cbig)), NBIG);
  pv_say("note: 48-byte class grew by %llu for %llu live, 3000-byte by %llu "
         "for %llu, large by %llu for %d",
         (unsigned long long)(live(&b, c48) - live(&a, c48)),
         (unsigned long long)live48,
         (unsigned long long)(live(&b, c3000) - live(&a, c3000)),
         (unsigned long long)live3000,
         (unsigned long long)(live(&b, cbig) - live(&a, cbig)), NBIG);
  PV_CHECK(b.mallocs >= b.frees && b.mallocs - a.mallocs >= N48 + N3000 + NBIG,
           "Mallocs moved by at least the pattern's allocations",
           "moved by %llu", (unsigned long long)(b.mallocs - a.mallocs));

  for (int i = 0; i < N48; i++)
    free(g_48[i]);
  for (int i = 0; i < N3000; i++)
    free(g_3000[i]);
  for (int i = 0; i < NBIG; i++)
    free(g_big[i]);
  return pv_finish("pj_bins");
}
