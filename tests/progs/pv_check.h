/*
 * pv_check.h - shared by the provider test programs (tests/progs/pv_*.c).
 *
 * Each program runs under the preload (LD_PRELOAD=libmemstats-preload.so,
 * MEMSTATS_AGENT=0), linked with one allocator, and checks its own
 * snapshot (ms_snapshot_read found with dlsym, as the pl_* programs do:
 * linking -lmemstats would put a second engine in the process) against
 * the allocator's own figures and against a known allocation pattern.
 * It prints "ok <what>" or "FAIL <what>: ..." lines through write(2) (no
 * allocation between two snapshots) and exits 1 if anything failed.
 */
#ifndef PV_CHECK_H
#define PV_CHECK_H

#include <dlfcn.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "memstats.h"
#include "say.h"

typedef int (*pv_read_fn)(ms_snapshot_t *, size_t);
static pv_read_fn pv_read_p;
static int pv_failures;

#define pv_say prog_say

#define PV_CHECK(cond, what, fmt, ...)                                         \
  do {                                                                         \
    if (cond) {                                                                \
      pv_say("ok   %s", what);                                                 \
    } else {                                                                   \
      pv_failures++;                                                           \
      pv_say("FAIL %s: " fmt, what, __VA_ARGS__);                              \
    }                                                                          \
  } while (0)

/* A snapshot of this process; exits if the library is not preloaded. */
static void pv_snap(ms_snapshot_t *s) {
  if (!pv_read_p)
    pv_read_p = (pv_read_fn)dlsym(RTLD_DEFAULT, "ms_snapshot_read");
  if (!pv_read_p) {
    pv_say("FAIL setup: ms_snapshot_read not found; run under "
           "LD_PRELOAD=libmemstats-preload.so");
    exit(2);
  }
  if (pv_read_p(s, sizeof *s) != 0) {
    pv_say("FAIL setup: ms_snapshot_read failed");
    exit(2);
  }
}

static int pv_provider(const ms_snapshot_t *s, const char *name) {
  for (uint32_t i = 0; i < s->nproviders && i < MS_MAX_PROVIDERS; i++)
    if (strcmp(s->providers[i], name) == 0)
      return (int)i;
  return -1;
}

static void pv_sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* The identities of DESIGN.md that a provider keeps by construction: Sys
 * is the sum of the *Sys fields (each class holds its unbacked part, so
 * OffHeapReleased is no term of its own). */
static void pv_check_identities(const ms_snapshot_t *s) {
  uint64_t parts = s->heap_sys + s->stack_sys + s->mspan_sys + s->mcache_sys +
                   s->buck_hash_sys + s->gc_sys + s->other_sys;
  PV_CHECK(s->sys == parts, "Sys = sum of *Sys", "Sys %llu, parts %llu",
           (unsigned long long)s->sys, (unsigned long long)parts);
  PV_CHECK(s->heap_sys == s->heap_idle + s->heap_inuse,
           "HeapSys = HeapIdle + HeapInuse",
           "HeapSys %llu, Idle %llu + Inuse %llu",
           (unsigned long long)s->heap_sys, (unsigned long long)s->heap_idle,
           (unsigned long long)s->heap_inuse);
  PV_CHECK(s->heap_released <= s->heap_idle, "HeapReleased <= HeapIdle",
           "Released %llu > Idle %llu", (unsigned long long)s->heap_released,
           (unsigned long long)s->heap_idle);
}

/* Checks a field's quality and source (names from the macro: the
 * programs do not link the library, so ms_field_name is not theirs). */
#define pv_check_quality(s, f, q, provider)                                    \
  pv_check_quality_((s), (f), #f, (q), #q, (provider))
static void pv_check_quality_(const ms_snapshot_t *s, ms_field_t f,
                              const char *fname, ms_quality_t q,
                              const char *qname, const char *provider) {
  char what[128];
  snprintf(what, sizeof what, "%s is %s from %s", fname + 5, qname + 5,
           provider);
  int idx = pv_provider(s, provider);
  PV_CHECK(s->quality[f] == q && idx >= 0 && s->source[f] == idx, what,
           "quality %d source %d (want %d from index %d)", s->quality[f],
           s->source[f], (int)q, idx);
}

/* ---- the known pattern ------------------------------------------------------
 * PV_N blocks of assorted sizes (small, medium, a few large), then every
 * third freed. The tracked counts must move by exactly this. */
#define PV_N 3000
static void *pv_blocks[PV_N];
static uint64_t pv_live_bytes, pv_total_bytes, pv_nfreed;

static void pv_pattern(void) {
  pv_live_bytes = pv_total_bytes = pv_nfreed = 0;
  for (int i = 0; i < PV_N; i++) {
    size_t size =
        (i % 100 == 7) ? 200000 + (size_t)i : 8 + (size_t)(i % 97) * 24;
    pv_blocks[i] = malloc(size);
    memset(pv_blocks[i], 1, size);
    pv_total_bytes += malloc_usable_size(pv_blocks[i]);
  }
  for (int i = 0; i < PV_N; i++) {
    if (i % 3 == 0) {
      free(pv_blocks[i]);
      pv_blocks[i] = NULL;
      pv_nfreed++;
    } else {
      pv_live_bytes += malloc_usable_size(pv_blocks[i]);
    }
  }
}

static void pv_pattern_free(void) {
  for (int i = 0; i < PV_N; i++) {
    free(pv_blocks[i]);
    pv_blocks[i] = NULL;
  }
}

/* Runs the pattern between two snapshots and checks the tracked deltas.
 * heap_alloc_tracked is 0 where a collector owns the heap: HeapAlloc is
 * then the collector's, and malloc's bytes are not in it. */
static void pv_check_pattern_(int heap_alloc_tracked) {
  static ms_snapshot_t a, b;
  pv_snap(&a);
  pv_pattern();
  pv_snap(&b);
  PV_CHECK(b.mallocs - a.mallocs == PV_N, "pattern Mallocs",
           "moved by %llu, want %d",
           (unsigned long long)(b.mallocs - a.mallocs), PV_N);
  PV_CHECK(b.frees - a.frees == pv_nfreed, "pattern Frees",
           "moved by %llu, want %llu", (unsigned long long)(b.frees - a.frees),
           (unsigned long long)pv_nfreed);
  PV_CHECK(b.heap_objects - a.heap_objects == PV_N - pv_nfreed,
           "pattern HeapObjects", "moved by %lld, want %llu",
           (long long)(b.heap_objects - a.heap_objects),
           (unsigned long long)(PV_N - pv_nfreed));
  if (heap_alloc_tracked) {
    PV_CHECK(b.heap_alloc - a.heap_alloc == pv_live_bytes, "pattern HeapAlloc",
             "moved by %lld, want %llu",
             (long long)(b.heap_alloc - a.heap_alloc),
             (unsigned long long)pv_live_bytes);
    PV_CHECK(b.total_alloc - a.total_alloc == pv_total_bytes,
             "pattern TotalAlloc", "moved by %llu, want %llu",
             (unsigned long long)(b.total_alloc - a.total_alloc),
             (unsigned long long)pv_total_bytes);
    pv_check_quality(&b, MS_F_HEAP_ALLOC, MS_Q_EXACT, "tracked");
  }
  pv_check_quality(&b, MS_F_MALLOCS, MS_Q_EXACT, "tracked");
}
#define pv_check_pattern() pv_check_pattern_(1)

/* Takes snapshots until one agrees with the allocator's own figures
 * (read by match() just before): a provider's sample is cached for its
 * cadence (a second for glibc), so the first may predate the pattern. The
 * program is quiet meanwhile, so a fresh sample must agree; 100 tries
 * bound the wait (a failure, not a timing threshold). */
static int pv_until_fresh(ms_snapshot_t *s,
                          int (*match)(const ms_snapshot_t *s)) {
  for (int i = 0; i < 100; i++) {
    if (match(s))
      return 1;
    pv_sleep_ms(50);
  }
  return 0;
}

/* The warm-up snapshot: detection happens at the first snapshot (with a
 * probe allocation), so counting starts after it. */
static void pv_start(const char *provider) {
  static ms_snapshot_t s;
  pv_snap(&s);
  int idx = pv_provider(&s, provider);
  char what[96];
  snprintf(what, sizeof what, "provider %s detected", provider);
  PV_CHECK(idx >= 0, what, "providers: %u (%s %s %s)", s.nproviders,
           s.nproviders > 0 ? s.providers[0] : "",
           s.nproviders > 1 ? s.providers[1] : "",
           s.nproviders > 2 ? s.providers[2] : "");
  PV_CHECK(pv_provider(&s, "tracked") >= 0, "preload tracking", "%s",
           "no \"tracked\" provider");
}

static int pv_finish(const char *name) {
  pv_say("%s: %d failed", name, pv_failures);
  return pv_failures ? 1 : 0;
}

#endif
