/*
 * pause.c - GC pauses: Go's circular PauseNs/PauseEnd ring and its counters,
 * and a histogram of every pause since start laid out as Go 1.20's
 * timeHistogram (see memstats.h), so percentiles stay honest when more than
 * 256 collections happen between two reads.
 *
 * A collector records one pause at a time, usually with the world stopped:
 * no lock, no allocation. The ring and its counters are published with a
 * sequence lock (the reader retries if a pause was being recorded while it
 * copied); the histogram's buckets are independent atomic counters, copied
 * one at a time, as Go does.
 */
#include <string.h>
#include <unistd.h>

#include "core/feed.h"
#include "core/shard.h"
#include "core/hotpath.h"
#include "core/util.h"
#include "common/fields.h"
#include "core/pause.h"

#define RLX __ATOMIC_RELAXED

static struct {
  uint64_t seq; /* odd while a pause is being recorded */
  uint64_t pause_ns[MS_PAUSE_RING];
  uint64_t pause_end[MS_PAUSE_RING];
  uint64_t num_gc, num_forced, pause_total, last_gc;
} g_ring;

static uint64_t g_hist[MS_PAUSE_HIST_BUCKETS];
static uint64_t g_begin_mono, g_begin_forced; /* ms_gc_begin .. ms_gc_end */
static uint64_t g_cpu_ns, g_next_gc;
static int g_attached, g_enabled = -1, g_cpu_fed, g_next_fed;
static uint64_t g_start_mono;

__attribute__((constructor)) static void pause_start(void) {
  g_start_mono = ms__now_mono_ns();
}

/* ---- recording
 * -------------------------------------------------------------*/

void ms__gc_attach(void) {
  __atomic_store_n(&g_attached, 1, RLX);
  ms__feed(MS__FEED_GC);
}

void ms__gc_record(uint64_t start, uint64_t end, int forced) {
  uint64_t d = end - start;
  uint64_t end_unix = ms__now_unix_ns() - (ms__now_mono_ns() - end);
  ms__feed(MS__FEED_GC);
  __atomic_fetch_add(&g_hist[ms_pause_hist_bucket((int64_t)d)], 1, RLX);

  ms__tls.busy++; /* ms__engine_busy_here() */
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  uint64_t q = __atomic_load_n(&g_ring.seq, RLX);
  __atomic_store_n(&g_ring.seq, q + 1, RLX);
  __atomic_thread_fence(__ATOMIC_RELEASE);
  uint64_t n = __atomic_load_n(&g_ring.num_gc, RLX);
  __atomic_store_n(&g_ring.pause_ns[n % MS_PAUSE_RING], d, RLX);
  __atomic_store_n(&g_ring.pause_end[n % MS_PAUSE_RING], end_unix, RLX);
  __atomic_store_n(&g_ring.pause_total,
                   __atomic_load_n(&g_ring.pause_total, RLX) + d, RLX);
  __atomic_store_n(&g_ring.last_gc, end_unix, RLX);
  if (forced)
    __atomic_store_n(&g_ring.num_forced,
                     __atomic_load_n(&g_ring.num_forced, RLX) + 1, RLX);
  __atomic_store_n(&g_ring.num_gc, n + 1, RLX);
  __atomic_store_n(&g_ring.seq, q + 2, __ATOMIC_RELEASE);
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  ms__tls.busy--;
}

MS_EXTERN int ms_gc_pause(uint64_t start_mono_ns, uint64_t end_mono_ns,
                          int forced) {
  if (end_mono_ns < start_mono_ns)
    return MS_EINVAL;
  ms__feed(MS__FEED_API);
  ms__gc_record(start_mono_ns, end_mono_ns, forced);
  return 0;
}

MS_EXTERN int ms_gc_begin(int forced) {
  __atomic_store_n(&g_begin_forced, forced ? 1 : 0, RLX);
  __atomic_store_n(&g_begin_mono, ms__now_mono_ns(), __ATOMIC_RELEASE);
  return 0;
}

MS_EXTERN int ms_gc_end(void) {
  uint64_t begin = __atomic_exchange_n(&g_begin_mono, 0, __ATOMIC_ACQUIRE);
  if (begin == 0)
    return MS_EINVAL; /* no ms_gc_begin() */
  int forced = (int)__atomic_load_n(&g_begin_forced, RLX);
  return ms_gc_pause(begin, ms__now_mono_ns(), forced);
}

MS_EXTERN void ms_gc_set_next(uint64_t bytes) {
  __atomic_store_n(&g_next_gc, bytes, RLX);
  __atomic_store_n(&g_next_fed, 1, RLX);
}

MS_EXTERN void ms_gc_add_cpu(uint64_t ns) {
  __atomic_fetch_add(&g_cpu_ns, ns, RLX);
  __atomic_store_n(&g_cpu_fed, 1, RLX);
}

MS_EXTERN void ms_gc_set_enabled(int enabled) {
  __atomic_store_n(&g_enabled, enabled ? 1 : 0, RLX);
  ms__feed(MS__FEED_API);
}

/* ---- reading
 * ---------------------------------------------------------------*/

void ms__pause_read(ms_snapshot_t *s) {
  int fed = (ms__engine_fed() & MS__FEED_GC) || g_attached;
  int enabled = __atomic_load_n(&g_enabled, RLX);

  for (unsigned tries = 0;; tries++) {
    uint64_t q1 = __atomic_load_n(&g_ring.seq, __ATOMIC_ACQUIRE);
    if (q1 & 1) {
      if (tries > 64)
        usleep(10);
      continue;
    }
    for (int i = 0; i < MS_PAUSE_RING; i++) {
      s->pause_ns[i] = __atomic_load_n(&g_ring.pause_ns[i], RLX);
      s->pause_end[i] = __atomic_load_n(&g_ring.pause_end[i], RLX);
    }
    s->num_gc = (uint32_t)__atomic_load_n(&g_ring.num_gc, RLX);
    s->num_forced_gc = (uint32_t)__atomic_load_n(&g_ring.num_forced, RLX);
    s->pause_total_ns = __atomic_load_n(&g_ring.pause_total, RLX);
    s->last_gc = __atomic_load_n(&g_ring.last_gc, RLX);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(&g_ring.seq, RLX) == q1)
      break;
  }
  for (int i = 0; i < MS_PAUSE_HIST_BUCKETS; i++)
    s->pause_hist.counts[i] = __atomic_load_n(&g_hist[i], RLX);

  if (enabled >= 0) {
    s->enable_gc = enabled;
    ms__set_quality(s, MS_F_ENABLE_GC, MS_Q_EXACT, -1);
  } else if (fed) {
    s->enable_gc = 1;
    ms__set_quality(s, MS_F_ENABLE_GC, MS_Q_EXACT, -1);
  }
  if (!fed)
    return;
  static const ms_field_t exact[] = {MS_F_LAST_GC,       MS_F_PAUSE_TOTAL_NS,
                                     MS_F_PAUSE_NS,      MS_F_NUM_GC,
                                     MS_F_NUM_FORCED_GC, MS_F_PAUSE_HIST};
  for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++)
    ms__set_quality(s, exact[i], MS_Q_EXACT, -1);
  s->debug_gc = 0;
  ms__set_quality(s, MS_F_DEBUG_GC, MS_Q_EXACT, -1);
  if (__atomic_load_n(&g_next_fed, RLX)) {
    s->next_gc = __atomic_load_n(&g_next_gc, RLX);
    ms__set_quality(s, MS_F_NEXT_GC, MS_Q_EXACT, -1);
  }
  /* GCCPUFraction, as Go defines it: the collector's CPU time over the
   * CPU time available since start (elapsed x CPUs). Given the collector's
   * CPU time, that is exact; from stop-the-world pauses alone (every thread
   * stopped for the pause) it is PauseTotalNs / elapsed: an estimate. */
  uint64_t elapsed = ms__now_mono_ns() - g_start_mono;
  if (elapsed == 0)
    return;
  if (__atomic_load_n(&g_cpu_fed, RLX)) {
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (ncpu < 1)
      ncpu = 1;
    s->gc_cpu_fraction = (double)__atomic_load_n(&g_cpu_ns, RLX) /
                         ((double)elapsed * (double)ncpu);
    ms__set_quality(s, MS_F_GC_CPU_FRACTION, MS_Q_EXACT, -1);
  } else {
    s->gc_cpu_fraction = (double)s->pause_total_ns / (double)elapsed;
    ms__set_quality(s, MS_F_GC_CPU_FRACTION, MS_Q_ESTIMATED, -1);
  }
}
