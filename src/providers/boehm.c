/*
 * boehm.c - the Boehm-Demers-Weiser collector (bdwgc) provider.
 *
 * Pauses: every stop-the-world pause is timed from GC_EVENT_PRE_STOP_WORLD
 * to GC_EVENT_POST_START_WORLD through GC_set_on_collection_event (START and
 * END never fire in incremental mode). The callback runs with the world
 * stopped and the collector's lock held: it only reads the clock and
 * records into the engine's pause ring (no lock, no allocation), then calls
 * the callback the program had set, if any. The hook is installed as early
 * as possible (a library constructor, then again at every snapshot in case
 * the collector was loaded later or the program set its own callback over
 * ours), because pauses before installation are lost.
 *
 * Heap (GC_get_prof_stats; it waits for a collection in progress, on the
 * reader's thread only):
 *   HeapSys      = heapsize_full                         exact
 *   HeapIdle     = free_bytes_full (unmapped included)   exact
 *   HeapReleased = unmapped_bytes                        exact
 *   HeapInuse    = heapsize_full - free_bytes_full       exact
 *   HeapAlloc    = bytes allocated - bytes reclaimed, over the collector's
 *                  life, at most HeapInuse               estimated
 *   GCSys        = obtained_from_os_bytes - heapsize_full: the collector's
 *                  own tables                            exact
 * GC: NumGC is gc_no; NumForcedGC is unavailable (the collector does not
 * say which collections GC_gcollect asked for); NextGC is unavailable (the
 * trigger depends on the root and pointer-containing sizes, not exposed);
 * GCCPUFraction is the engine's estimate from the pauses.
 */
#include <dlfcn.h>
#include <string.h>

#include "core/engine.h"
#include "core/util.h"
#include "core/pause.h"
#include "providers/provider_int.h"

/* bdwgc's GC_EventType values (gc.h, stable since 7.6). */
enum { EV_PRE_STOP_WORLD = 6, EV_POST_START_WORLD = 9 };

/* bdwgc's struct GC_prof_stats_s, which GC_get_prof_stats fills up to the
 * size passed (so an older or newer collector is fine). */
struct ms__gc_prof_stats {
  unsigned long heapsize_full, free_bytes_full, unmapped_bytes,
      bytes_allocd_since_gc, allocd_bytes_before_gc, non_gc_bytes, gc_no,
      markers_m1, bytes_reclaimed_since_gc, reclaimed_bytes_before_gc,
      expl_freed_bytes_since_gc, obtained_from_os_bytes;
};

typedef void (*event_fn)(int);
typedef void (*set_event_fn)(event_fn);
typedef event_fn (*get_event_fn)(void);
typedef size_t (*prof_stats_fn)(struct ms__gc_prof_stats *, size_t);
typedef unsigned long (*gc_no_fn)(void);
typedef int (*int_fn)(void);

static struct {
  set_event_fn set_event;
  get_event_fn get_event;
  prof_stats_fn prof_stats;
  gc_no_fn gc_no;
  int_fn is_incremental, is_disabled;
  event_fn prev;        /* the program's own callback, chained */
  uint64_t stop_ns;     /* PRE_STOP_WORLD of the pause in progress */
  unsigned long missed; /* collections before the hook was installed */
  int installed;
} g_gc;

/* ---- the pause hook
 * --------------------------------------------------------*/

static void on_collection_event(int ev) {
  if (ev == EV_PRE_STOP_WORLD) {
    g_gc.stop_ns = ms__now_mono_ns();
  } else if (ev == EV_POST_START_WORLD && g_gc.stop_ns != 0) {
    ms__gc_record(g_gc.stop_ns, ms__now_mono_ns(), 0);
    g_gc.stop_ns = 0;
  }
  event_fn prev = __atomic_load_n(&g_gc.prev, __ATOMIC_ACQUIRE);
  if (prev)
    prev(ev);
}

static int resolve(void) {
  if (g_gc.set_event)
    return 1;
  set_event_fn set =
      (set_event_fn)dlsym(RTLD_DEFAULT, "GC_set_on_collection_event");
  if (!set)
    return 0;
  g_gc.get_event =
      (get_event_fn)dlsym(RTLD_DEFAULT, "GC_get_on_collection_event");
  g_gc.prof_stats = (prof_stats_fn)dlsym(RTLD_DEFAULT, "GC_get_prof_stats");
  g_gc.gc_no = (gc_no_fn)dlsym(RTLD_DEFAULT, "GC_get_gc_no");
  g_gc.is_incremental = (int_fn)dlsym(RTLD_DEFAULT, "GC_is_incremental_mode");
  g_gc.is_disabled = (int_fn)dlsym(RTLD_DEFAULT, "GC_is_disabled");
  if (!g_gc.get_event || !g_gc.gc_no)
    return 0; /* a collector older than 7.6: no events to chain */
  __atomic_store_n(&g_gc.set_event, set, __ATOMIC_RELEASE);
  return 1;
}

/* Installs (or re-installs, if the program replaced it) the hook. */
static void hook(void) {
  event_fn cur = g_gc.get_event();
  if (cur == on_collection_event)
    return;
  /* The previous callback is published before ours goes in, so the first
   * event already chains to it. */
  __atomic_store_n(&g_gc.prev, cur, __ATOMIC_RELEASE);
  g_gc.set_event(on_collection_event);
  if (!g_gc.installed) {
    g_gc.missed = g_gc.gc_no();
    g_gc.installed = 1;
    ms__gc_attach();
  }
}

int ms__boehm_install(void) {
  if (!resolve())
    return 0;
  hook();
  return 1;
}

/* The earliest moment the library runs: pauses of a program that collects
 * before anyone takes a snapshot are recorded too. */
__attribute__((constructor)) static void boehm_early(void) {
  ms__boehm_install();
}

/* ---- the provider
 * ----------------------------------------------------------*/

static int gc_detect(void) {
  return ms__boehm_install();
}

static int gc_confirm(void) {
  return 1; /* the collector has its own heap: nothing to confirm */
}

static int gc_sample(ms__pv_sample_t *out, unsigned flags) {
  (void)flags;
  hook();
  out->v[MS_F_NUM_GC] = g_gc.gc_no();
  out->q[MS_F_NUM_GC] = MS_Q_EXACT;
  if (g_gc.is_disabled)
    ms__pv_set(out, MS_F_ENABLE_GC, !g_gc.is_disabled(), MS_Q_EXACT);
  if (!g_gc.prof_stats)
    return 0;
  struct ms__gc_prof_stats st;
  memset(&st, 0, sizeof st);
  size_t got = g_gc.prof_stats(&st, sizeof st);
  if (got < offsetof(struct ms__gc_prof_stats, non_gc_bytes) ||
      st.heapsize_full == 0)
    return 0; /* not initialised yet: no heap to report */
  uint64_t inuse = st.heapsize_full - st.free_bytes_full;
  ms__pv_set(out, MS_F_HEAP_SYS, st.heapsize_full, MS_Q_EXACT);
  ms__pv_set(out, MS_F_HEAP_IDLE, st.free_bytes_full, MS_Q_EXACT);
  ms__pv_set(out, MS_F_HEAP_RELEASED, st.unmapped_bytes, MS_Q_EXACT);
  ms__pv_set(out, MS_F_HEAP_INUSE, inuse, MS_Q_EXACT);
  if (got >= offsetof(struct ms__gc_prof_stats, expl_freed_bytes_since_gc)) {
    uint64_t allocd =
        (uint64_t)st.allocd_bytes_before_gc + st.bytes_allocd_since_gc;
    uint64_t reclaimed =
        (uint64_t)st.reclaimed_bytes_before_gc + st.bytes_reclaimed_since_gc;
    uint64_t live = allocd > reclaimed ? allocd - reclaimed : 0;
    ms__pv_set(out, MS_F_HEAP_ALLOC, live < inuse ? live : inuse,
               MS_Q_ESTIMATED);
  }
  uint64_t sys = st.heapsize_full;
  if (got >= sizeof st && st.obtained_from_os_bytes >= st.heapsize_full) {
    ms__pv_set(out, MS_F_GC_SYS, st.obtained_from_os_bytes - st.heapsize_full,
               MS_Q_EXACT);
    sys = st.obtained_from_os_bytes;
  }
  ms__pv_set(out, MS_F_SYS, sys,
             out->q[MS_F_GC_SYS] ? MS_Q_EXACT : MS_Q_ESTIMATED);
  return 0;
}

/* The GC fields: the engine has the pauses our hook recorded; here they
 * are attributed to the collector, NumGC is reconciled with gc_no, and
 * what the collector cannot say is marked so. */
static void gc_finish(ms_snapshot_t *s, int idx) {
  static const ms_field_t gc_fields[] = {
      MS_F_LAST_GC,         MS_F_PAUSE_TOTAL_NS, MS_F_PAUSE_NS,  MS_F_NUM_GC,
      MS_F_GC_CPU_FRACTION, MS_F_PAUSE_HIST,     MS_F_ENABLE_GC, MS_F_DEBUG_GC};
  if (!g_gc.installed)
    return;
  if (s->quality[MS_F_NUM_GC] == MS_Q_UNAVAILABLE) {
    /* The hook went in during this very snapshot (the collector was found
     * by its detection: dlopen()ed after start), after the engine had read
     * its pause ring unattached. Read it again, now attached, so that the
     * GC fields are there (no pause recorded yet) instead of a NumGC
     * value marked unavailable. The collector's EnableGC stays. */
    int enable = s->enable_gc;
    uint8_t enable_q = s->quality[MS_F_ENABLE_GC];
    ms__pause_read(s);
    if (enable_q != MS_Q_UNAVAILABLE) {
      s->enable_gc = enable;
      s->quality[MS_F_ENABLE_GC] = enable_q;
    }
  }
  for (size_t i = 0; i < sizeof gc_fields / sizeof gc_fields[0]; i++)
    if (s->quality[gc_fields[i]] != MS_Q_UNAVAILABLE)
      s->source[gc_fields[i]] = (uint8_t)idx;
  s->num_forced_gc = 0;
  s->quality[MS_F_NUM_FORCED_GC] = MS_Q_UNAVAILABLE;
  s->source[MS_F_NUM_FORCED_GC] = 0xff;

  uint64_t gc_no = g_gc.gc_no();
  if (g_gc.is_incremental && g_gc.is_incremental()) {
    /* Several stop-the-world increments per cycle: NumGC counts pauses
     * (the ring's layout), not the collector's cycles. */
    s->quality[MS_F_NUM_GC] = MS_Q_ESTIMATED;
    return;
  }
  if (g_gc.missed > 0 && gc_no >= s->num_gc + g_gc.missed) {
    /* The first collections ran before the hook: NumGC is the collector's
     * count, the ring is laid out for it (the missed pauses are zero), and
     * the pause figures lack those collections. */
    unsigned shift = (unsigned)(g_gc.missed % MS_PAUSE_RING);
    if (shift) {
      uint64_t ns[MS_PAUSE_RING], end[MS_PAUSE_RING];
      for (unsigned i = 0; i < MS_PAUSE_RING; i++) {
        ns[(i + shift) % MS_PAUSE_RING] = s->pause_ns[i];
        end[(i + shift) % MS_PAUSE_RING] = s->pause_end[i];
      }
      memcpy(s->pause_ns, ns, sizeof ns);
      memcpy(s->pause_end, end, sizeof end);
    }
    s->num_gc = (uint32_t)(s->num_gc + g_gc.missed);
    s->quality[MS_F_PAUSE_NS] = MS_Q_ESTIMATED;
    s->quality[MS_F_PAUSE_TOTAL_NS] = MS_Q_ESTIMATED;
    s->quality[MS_F_PAUSE_HIST] = MS_Q_ESTIMATED;
    s->quality[MS_F_GC_CPU_FRACTION] = MS_Q_ESTIMATED;
  }
}

const ms__provider_t ms__provider_boehm = {
    .name = "boehm",
    .kind = MS__PV_COLLECTOR,
    /* GC_get_prof_stats is cheap but waits for a collection in progress:
     * the back-off takes care of that. */
    .min_interval_ns = 100000000ull,
    .detect = gc_detect,
    .confirm = gc_confirm,
    .sample = gc_sample,
    .finish = gc_finish,
};
