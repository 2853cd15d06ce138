/*
 * mimalloc.c - the mimalloc provider, with what mimalloc 2.0 offers a
 * process-wide reader: mi_process_info() (committed bytes, an atomic
 * counter) and the "reserved" line of mi_stats_print_out() (printed with
 * three significant digits). Its per-heap figures are the calling thread's
 * only, so they are not used.
 *
 * Mapping (all estimated):
 *   Sys = HeapSys = reserved (or committed, if mimalloc's counters say more)
 *   HeapReleased  = reserved - committed
 *   HeapInuse     = committed (mimalloc keeps free pages committed for a
 *                   while: an upper bound of what holds objects)
 *   HeapIdle      = HeapReleased, so HeapSys = HeapIdle + HeapInuse
 * HeapAlloc, objects and classes come only from tracking (the preload).
 *
 * Committed is not backed: mimalloc commits whole segments up front (33 MB
 * committed for a program whose RSS is 2 MB), and the kernel backs a page
 * only when it is first touched. Under the preload, whose mmap interposer
 * lists mimalloc's own mappings, the snapshot replaces that split with the
 * resident pages of those mappings (backing_unknown below, and
 * src/compose/offheap.c): Ready is then what is backed, and the
 * untouched rest is Prepared. Linked without the preload, the figures
 * above stand (estimated, and an upper bound of Ready).
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "providers/provider_int.h"

typedef void(mi_out_fn)(const char *msg, void *arg);
typedef void (*process_info_fn)(size_t *, size_t *, size_t *, size_t *,
                                size_t *, size_t *, size_t *, size_t *);
typedef void (*stats_print_fn)(mi_out_fn *, void *);
typedef _Bool (*in_heap_fn)(const void *);

static process_info_fn g_pinfo;
static stats_print_fn g_print;
static in_heap_fn g_in_heap;

static int mi_detect(void) {
  g_pinfo = (process_info_fn)dlsym(RTLD_DEFAULT, "mi_process_info");
  g_in_heap = (in_heap_fn)dlsym(RTLD_DEFAULT, "mi_is_in_heap_region");
  g_print = (stats_print_fn)dlsym(RTLD_DEFAULT, "mi_stats_print_out");
  return g_pinfo != NULL && g_in_heap != NULL;
}

/* malloc reaches mimalloc if what it returns lies in mimalloc's heap. */
static int mi_confirm(void) {
  void *p = ms__pv_probe_alloc(MS__PV_PROBE_SIZE);
  if (!p)
    return 0;
  int ok = g_in_heap(p) ? 1 : 0;
  ms__pv_probe_free(p);
  return ok;
}

/* ---- the statistics text --------------------------------------------------
 * mi_stats_print_out() hands its text to a callback in pieces; it is
 * collected in a static buffer (no allocation), then the "reserved:" line's
 * current column is parsed: "reserved: <peak> <total> <freed> <current>",
 * each a number with an optional unit (KiB, MiB, GiB, TiB). */
static struct {
  char buf[8192];
  size_t len;
} g_text;

static void collect(const char *msg, void *arg) {
  (void)arg;
  size_t n = strlen(msg);
  if (n > sizeof g_text.buf - 1 - g_text.len)
    n = sizeof g_text.buf - 1 - g_text.len;
  memcpy(g_text.buf + g_text.len, msg, n);
  g_text.len += n;
  g_text.buf[g_text.len] = '\0';
}

/* Parses "<number> [unit]" at *p, advancing it; returns -1 if no number. */
static double parse_amount(const char **p) {
  char *end;
  double v = strtod(*p, &end);
  if (end == *p)
    return -1;
  const char *q = end;
  while (*q == ' ')
    q++;
  static const struct {
    const char *unit;
    double mul;
  } units[] = {{"KiB", 1024.0},
               {"MiB", 1024.0 * 1024},
               {"GiB", 1024.0 * 1024 * 1024},
               {"TiB", 1024.0 * 1024 * 1024 * 1024},
               {"B ", 1.0}};
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
    size_t n = strlen(units[i].unit);
    if (strncmp(q, units[i].unit, n) == 0) {
      *p = q + n;
      return v * units[i].mul;
    }
  }
  *p = end;
  return v;
}

/* Returns the current value of a counter line ("reserved"), or -1. */
static double stat_current(const char *text, const char *label) {
  const char *l = strstr(text, label);
  if (!l)
    return -1;
  const char *p = l + strlen(label);
  double v = -1;
  for (int col = 0; col < 4; col++) {
    while (*p == ' ')
      p++;
    v = parse_amount(&p);
    if (v < 0)
      return -1;
  }
  return v;
}

static int mi_sample(ms__pv_sample_t *out, unsigned flags) {
  (void)flags;
  size_t elapsed, user, sys, rss, peak_rss, commit, peak_commit, faults;
  g_pinfo(&elapsed, &user, &sys, &rss, &peak_rss, &commit, &peak_commit,
          &faults);
  double reserved = -1;
  if (g_print) {
    g_text.len = 0;
    g_text.buf[0] = '\0';
    g_print(collect, NULL);
    reserved = stat_current(g_text.buf, "reserved:");
  }
  if (reserved < 0)
    return MS_ENOSYS;
  uint64_t res = (uint64_t)reserved, com = commit;
  uint64_t heap = res > com ? res : com;
  ms__pv_set(out, MS_F_SYS, heap, MS_Q_ESTIMATED);
  ms__pv_set(out, MS_F_HEAP_SYS, heap, MS_Q_ESTIMATED);
  ms__pv_set(out, MS_F_HEAP_INUSE, com, MS_Q_ESTIMATED);
  ms__pv_set(out, MS_F_HEAP_IDLE, heap - com, MS_Q_ESTIMATED);
  ms__pv_set(out, MS_F_HEAP_RELEASED, heap - com, MS_Q_ESTIMATED);
  return 0;
}

const ms__provider_t ms__provider_mimalloc = {
    .name = "mimalloc",
    .kind = MS__PV_MALLOC,
    .min_interval_ns = 10000000ull,
    .detect = mi_detect,
    .confirm = mi_confirm,
    .sample = mi_sample,
    .backing_unknown = 1,
};
