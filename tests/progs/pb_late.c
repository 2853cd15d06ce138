/*
 * pb_late.c - the Boehm provider's late-install path (src/providers/
 * boehm.c, gc_finish): a collector that collected before the pause hook
 * went in.
 *
 * The library's constructor installs the hook as soon as the collector is
 * in the process, so a program linked with -lgc never misses a pause. A
 * collector loaded later does: this program is linked with -lmemstats only
 * (no preload) and dlopen()s libgc.so.1 (RTLD_GLOBAL, so that the
 * provider's dlsym(RTLD_DEFAULT, ...) finds it), collects M times, and only
 * then takes a snapshot, whose detection (a new object was loaded) installs
 * the hook with those M collections missed. Then it collects K times more.
 *
 * Checks, after the M missed collections and after the K recorded ones:
 * NumGC equals the collector's gc_no; the ring is laid out for it, the M
 * missed pauses zero and the K recorded ones not; PauseTotalNs is the sum
 * of the ring; the histogram counts the K recorded pauses only; LastGC is
 * the newest PauseEnd; and the pause figures are marked estimated (they
 * lack the missed collections) while NumGC stays exact.
 */
#include <dlfcn.h>

/* pv_check.h's pattern and preload helpers are for the pv_* programs. */
#pragma GCC diagnostic ignored "-Wunused-function"
#include "pv_check.h"

#define K 3

typedef void (*void_fn)(void);
typedef void *(*malloc_fn)(size_t);
typedef unsigned long (*gc_no_fn)(void);

static void_fn gc_init, gc_collect;
static malloc_fn gc_malloc;
static gc_no_fn gc_no;

static void churn_and_collect(int n) {
  for (int c = 0; c < n; c++) {
    void **keep = gc_malloc(sizeof(void *) * 100);
    for (int i = 0; i < 5000; i++) {
      void *p = gc_malloc(16 + (size_t)(i % 32) * 8);
      if (i % 50 == 0)
        keep[(i / 50) % 100] = p;
    }
    gc_collect();
  }
}

/* The checks that hold after any number of recorded pauses: missed zero
 * pauses first, then recorded ones. */
static void check_ring(const ms_snapshot_t *s, uint64_t missed,
                       uint64_t recorded, const char *when) {
  char what[160];
  uint64_t want = gc_no();
  snprintf(what, sizeof what, "%s: NumGC = gc_no", when);
  PV_CHECK(s->num_gc == want && want == missed + recorded, what,
           "NumGC %u, gc_no %llu, missed %llu + recorded %llu", s->num_gc,
           (unsigned long long)want, (unsigned long long)missed,
           (unsigned long long)recorded);
  uint64_t zero = 0, nonzero = 0, sum = 0;
  for (uint64_t i = 0; i < s->num_gc && i < MS_PAUSE_RING; i++) {
    if (i < missed)
      zero += s->pause_ns[i] == 0 && s->pause_end[i] == 0;
    else
      nonzero += s->pause_ns[i] != 0 && s->pause_end[i] != 0;
    sum += s->pause_ns[i];
  }
  snprintf(what, sizeof what,
           "%s: the missed pauses are zero, the recorded ones are not", when);
  PV_CHECK(zero == missed && nonzero == recorded, what,
           "%llu zero of %llu missed, %llu non-zero of %llu recorded",
           (unsigned long long)zero, (unsigned long long)missed,
           (unsigned long long)nonzero, (unsigned long long)recorded);
  snprintf(what, sizeof what, "%s: PauseTotalNs = sum of the ring", when);
  PV_CHECK(s->pause_total_ns == sum, what, "%llu vs %llu",
           (unsigned long long)s->pause_total_ns, (unsigned long long)sum);
  uint64_t hist = 0;
  for (int i = 0; i < MS_PAUSE_HIST_BUCKETS; i++)
    hist += s->pause_hist.counts[i];
  snprintf(what, sizeof what, "%s: the histogram counts the recorded pauses",
           when);
  PV_CHECK(hist == recorded, what, "histogram %llu, recorded %llu",
           (unsigned long long)hist, (unsigned long long)recorded);
  if (recorded > 0) {
    snprintf(what, sizeof what, "%s: LastGC is the newest PauseEnd", when);
    PV_CHECK(s->last_gc != 0 &&
                 s->last_gc == s->pause_end[(s->num_gc - 1) % MS_PAUSE_RING],
             what, "LastGC %llu", (unsigned long long)s->last_gc);
  }
  pv_check_quality(s, MS_F_NUM_GC, MS_Q_EXACT, "boehm");
  pv_check_quality(s, MS_F_PAUSE_NS, MS_Q_ESTIMATED, "boehm");
  pv_check_quality(s, MS_F_PAUSE_TOTAL_NS, MS_Q_ESTIMATED, "boehm");
  pv_check_quality(s, MS_F_PAUSE_HIST, MS_Q_ESTIMATED, "boehm");
}

int main(void) {
  static ms_snapshot_t s;
  /* Linked with -lmemstats: the library's own ms_snapshot_read (a direct
   * reference, so the linker keeps libmemstats even with --as-needed). */
  pv_read_p = ms_snapshot_read;

  pv_snap(&s);
  PV_CHECK(pv_provider(&s, "boehm") < 0, "no collector before the dlopen",
           "providers: %u", s.nproviders);

  void *gc = dlopen("libgc.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!gc) {
    pv_say("FAIL setup: dlopen libgc.so.1: %s (install libgc1)", dlerror());
    return 2;
  }
  gc_init = (void_fn)dlsym(gc, "GC_init");
  gc_collect = (void_fn)dlsym(gc, "GC_gcollect");
  gc_malloc = (malloc_fn)dlsym(gc, "GC_malloc");
  gc_no = (gc_no_fn)dlsym(gc, "GC_get_gc_no");
  if (!gc_init || !gc_collect || !gc_malloc || !gc_no) {
    pv_say("FAIL setup: libgc.so.1 lacks GC_init, GC_gcollect, GC_malloc or "
           "GC_get_gc_no");
    return 2;
  }
  gc_init();
  churn_and_collect(4);
  uint64_t missed = gc_no();
  PV_CHECK(missed >= 4, "collections before the hook", "gc_no %llu",
           (unsigned long long)missed);

  /* Detection at this snapshot installs the hook, too late for those. */
  pv_snap(&s);
  PV_CHECK(pv_provider(&s, "boehm") >= 0, "collector found after the dlopen",
           "providers: %u", s.nproviders);
  check_ring(&s, missed, 0, "before any recorded pause");

  churn_and_collect(K);
  uint64_t recorded = gc_no() - missed;
  pv_snap(&s);
  PV_CHECK(recorded >= K, "collections after the hook", "%llu",
           (unsigned long long)recorded);
  check_ring(&s, missed, recorded, "after recorded pauses");
  return pv_finish("pb_late");
}
