/*
 * jemalloc.c - the jemalloc provider: mallctl() after writing "epoch"
 * (jemalloc refreshes its merged statistics only then).
 *
 * Mapping (see ../shared/notes/allocators.md; exact unless said):
 *   HeapInuse    = stats.active
 *   HeapIdle     = (pdirty + pmuzzy) * page + stats.retained
 *   HeapReleased = stats.retained + pmuzzy * page, and the dirty pages the
 *                  kernel does not hold (estimated: see je_sample)
 *   HeapSys      = HeapInuse + HeapIdle
 *   Sys          = stats.mapped + stats.retained
 *   MSpanSys     = what jemalloc maps for itself (its base allocator:
 *                  extent structures, rtree, tcache structures), Sys -
 *                  HeapSys
 *   OffHeapReleased = the part of MSpanSys it has not backed: MSpanSys -
 *                  (stats.resident - active - dirty) (estimated: jemalloc
 *                  counts its metadata pages as resident once they are in
 *                  use, not by asking the kernel), reserved and never
 *                  touched (its base allocator maps in large steps);
 *                  Prepared, like Go's unbacked memory, so that Ready is
 *                  jemalloc's stats.resident,
 *                  or less: under the preload, the resident pages of
 *                  jemalloc's own mappings bound it (je_sample)
 *   MSpanInuse   = stats.metadata, at most MSpanSys
 *   HeapAlloc    = stats.allocated - tcache_bytes (objects cached in thread
 *                  caches are free from the program's point of view)
 * Size classes: the small bins and the large extents, as jemalloc has them.
 * Mallocs/Frees/HeapObjects from the bins are estimates: bins count what
 * they hand to thread caches, not the program's calls.
 *
 * Which BySize wins: when the preload tracks objects, the tracked classes
 * are exact for every call and agree with Mallocs/Frees, so they stay and
 * jemalloc's bins are not even read; without tracking, jemalloc's real
 * classes are the best there is.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "providers/mappings.h"
#include "providers/provider_int.h"

typedef int (*mallctl_fn)(const char *, void *, size_t *, void *, size_t);
typedef int (*nametomib_fn)(const char *, size_t *, size_t *);
typedef int (*bymib_fn)(const size_t *, size_t, void *, size_t *, void *,
                        size_t);

static mallctl_fn g_ctl;
static nametomib_fn g_nametomib;
static bymib_fn g_bymib;

static int je_detect(void) {
  /* Debian's libjemalloc exports the unprefixed names; a build configured
   * with --with-jemalloc-prefix=je_ exports je_mallctl. */
  static const char *const prefixes[] = {"", "je_"};
  for (size_t i = 0; i < 2; i++) {
    char name[64];
    snprintf(name, sizeof name, "%smallctl", prefixes[i]);
    g_ctl = (mallctl_fn)dlsym(RTLD_DEFAULT, name);
    if (!g_ctl)
      continue;
    snprintf(name, sizeof name, "%smallctlnametomib", prefixes[i]);
    g_nametomib = (nametomib_fn)dlsym(RTLD_DEFAULT, name);
    snprintf(name, sizeof name, "%smallctlbymib", prefixes[i]);
    g_bymib = (bymib_fn)dlsym(RTLD_DEFAULT, name);
    return 1;
  }
  return 0;
}

/* mallctl returns 0 or a positive errno; these return 0 or its negation
 * (MS_EINVAL for a value of another size). */
static int refresh(void) {
  uint64_t epoch = 1;
  size_t len = sizeof epoch;
  return -g_ctl("epoch", &epoch, &len, &epoch, len);
}

static int read_size(const char *name, uint64_t *out) {
  size_t v = 0, len = sizeof v;
  int e = g_ctl(name, &v, &len, NULL, 0);
  if (e != 0)
    return -e;
  if (len != sizeof v)
    return MS_EINVAL;
  *out = v;
  return 0;
}

/* malloc reaches jemalloc if stats.allocated moves by a probe's size. */
static int je_confirm(void) {
  for (int i = 0; i < 3; i++) {
    size_t size = MS__PV_PROBE_SIZE + (size_t)i * 4096;
    uint64_t a, b;
    if (refresh() != 0 || read_size("stats.allocated", &a) != 0)
      return 0;
    void *p = ms__pv_probe_alloc(size);
    if (!p)
      return 0;
    int ok = refresh() == 0 && read_size("stats.allocated", &b) == 0;
    ms__pv_probe_free(p);
    if (ok && b >= a + size && b < a + size + size / 4)
      return 1;
  }
  return 0;
}

/* ---- size classes ---------------------------------------------------------
 * Class sizes never change; their MIBs are looked up once. Per class, the
 * counters are read by MIB with the class index patched in. */
static struct {
  int ready; /* 1 ok, -1 unavailable */
  unsigned nbins, nlext;
  uint64_t size[MS_MAX_SIZE_CLASSES];
  size_t mib_bin[3][8], mib_lext[3][8]; /* nmalloc, ndalloc, cur */
  size_t miblen_bin, miblen_lext;
} g_cls;

static int lookup_mib(const char *name, size_t *mib, size_t *len) {
  *len = 8;
  return -g_nametomib(name, mib, len);
}

/* Looks the classes' sizes and MIBs up. Returns 0, MS_ENOSYS where this
 * jemalloc has no MIB interface, or mallctl's error, negated. */
static int classes_init(void) {
  if (!g_nametomib || !g_bymib)
    return MS_ENOSYS;
  unsigned n;
  size_t len = sizeof n;
  int e = g_ctl("arenas.nbins", &n, &len, NULL, 0);
  if (e != 0)
    return -e;
  g_cls.nbins = n;
  len = sizeof n;
  e = g_ctl("arenas.nlextents", &n, &len, NULL, 0);
  if (e != 0)
    return -e;
  g_cls.nlext = n;
  if (g_cls.nbins > MS_MAX_SIZE_CLASSES)
    g_cls.nbins = MS_MAX_SIZE_CLASSES;
  if (g_cls.nbins + g_cls.nlext > MS_MAX_SIZE_CLASSES)
    g_cls.nlext = MS_MAX_SIZE_CLASSES - g_cls.nbins; /* the largest are lost */
  for (unsigned j = 0; j < g_cls.nbins + g_cls.nlext; j++) {
    char name[64];
    if (j < g_cls.nbins)
      snprintf(name, sizeof name, "arenas.bin.%u.size", j);
    else
      snprintf(name, sizeof name, "arenas.lextent.%u.size", j - g_cls.nbins);
    int r = read_size(name, &g_cls.size[j]);
    if (r != 0)
      return r;
  }
  static const char *const bin_names[3] = {"stats.arenas.4096.bins.0.nmalloc",
                                           "stats.arenas.4096.bins.0.ndalloc",
                                           "stats.arenas.4096.bins.0.curregs"};
  static const char *const lext_names[3] = {
      "stats.arenas.4096.lextents.0.nmalloc",
      "stats.arenas.4096.lextents.0.ndalloc",
      "stats.arenas.4096.lextents.0.curlextents"};
  for (int k = 0; k < 3; k++) {
    int r = lookup_mib(bin_names[k], g_cls.mib_bin[k], &g_cls.miblen_bin);
    if (r == 0)
      r = lookup_mib(lext_names[k], g_cls.mib_lext[k], &g_cls.miblen_lext);
    if (r != 0)
      return r;
  }
  return 0;
}

/* Reads counter k of class j; "cur" counters are size_t, the rest uint64. */
static uint64_t class_counter(unsigned j, int k) {
  size_t *mib;
  size_t miblen;
  if (j < g_cls.nbins) {
    mib = g_cls.mib_bin[k];
    miblen = g_cls.miblen_bin;
    mib[4] = j;
  } else {
    mib = g_cls.mib_lext[k];
    miblen = g_cls.miblen_lext;
    mib[4] = j - g_cls.nbins;
  }
  union {
    uint64_t u64;
    size_t sz;
  } v = {0};
  size_t len = k == 2 ? sizeof v.sz : sizeof v.u64;
  if (g_bymib(mib, miblen, &v, &len, NULL, 0) != 0)
    return 0;
  return k == 2 ? (uint64_t)v.sz : v.u64;
}

static void sample_classes(ms__pv_sample_t *out) {
  if (g_cls.ready == 0)
    g_cls.ready = classes_init() == 0 ? 1 : -1;
  if (g_cls.ready < 0)
    return;
  uint64_t mallocs = 0, frees = 0, objects = 0;
  unsigned n = g_cls.nbins + g_cls.nlext;
  for (unsigned j = 0; j < n; j++) {
    ms_size_class_t *c = &out->by_size[j];
    c->size = g_cls.size[j];
    c->mallocs = class_counter(j, 0);
    c->frees = class_counter(j, 1);
    mallocs += c->mallocs;
    frees += c->frees;
    objects += class_counter(j, 2);
  }
  out->nsize_classes = n;
  /* Counted per bin, including objects resting in thread caches. */
  ms__pv_set(out, MS_F_BY_SIZE, 0, MS_Q_ESTIMATED);
  ms__pv_set(out, MS_F_MALLOCS, mallocs, MS_Q_ESTIMATED);
  ms__pv_set(out, MS_F_FREES, frees, MS_Q_ESTIMATED);
  ms__pv_set(out, MS_F_HEAP_OBJECTS, objects, MS_Q_ESTIMATED);
}

static int je_sample(ms__pv_sample_t *out, unsigned flags) {
  static uint64_t page;
  uint64_t allocated, active, metadata, mapped, retained, pdirty, pmuzzy,
      tcache = 0;
  if (!page && read_size("arenas.page", &page) != 0)
    return MS_ENOSYS;
  if (refresh() != 0 || read_size("stats.allocated", &allocated) != 0 ||
      read_size("stats.active", &active) != 0 ||
      read_size("stats.metadata", &metadata) != 0 ||
      read_size("stats.mapped", &mapped) != 0 ||
      read_size("stats.retained", &retained) != 0 ||
      read_size("stats.arenas.4096.pdirty", &pdirty) != 0 ||
      read_size("stats.arenas.4096.pmuzzy", &pmuzzy) != 0)
    return MS_ENOSYS; /* a build without --enable-stats */
  int have_tcache = read_size("stats.arenas.4096.tcache_bytes", &tcache) == 0;
  uint64_t resident = 0;
  int have_resident = read_size("stats.resident", &resident) == 0;

  uint64_t idle = (pdirty + pmuzzy) * page + retained;
  uint64_t heap_sys = active + idle;
  uint64_t sys = mapped + retained;
  uint64_t released = retained + pmuzzy * page;
  ms_quality_t q_released = MS_Q_EXACT;
  ms__pv_set(out, MS_F_HEAP_INUSE, active, MS_Q_EXACT);
  ms__pv_set(out, MS_F_HEAP_IDLE, idle, MS_Q_EXACT);
  ms__pv_set(out, MS_F_HEAP_SYS, heap_sys, MS_Q_EXACT);
  if (sys >= heap_sys) {
    uint64_t meta_sys = sys - heap_sys, unbacked = 0;
    ms_quality_t q_meta = MS_Q_EXACT;
    /* resident = active + dirty + the metadata pages in use; the rest of
     * the metadata mapping is reserved and untouched. */
    uint64_t heap_backed = active + pdirty * page;
    if (have_resident && resident >= heap_backed &&
        resident - heap_backed < meta_sys) {
      unbacked = meta_sys - (resident - heap_backed);
      meta_sys = resident - heap_backed;
      q_meta = MS_Q_ESTIMATED;
    }
    /* stats.resident is an upper bound (jemalloc counts a page resident
     * from its own books, not by asking the kernel): Redis at start read
     * Ready 5.27 MB against 3.51 MB of anonymous RSS for the whole
     * process. Where the interposer listed every mapping jemalloc made
     * (as much as Sys: mapped and retained), their resident pages bound the
     * backed part: what is over comes out of the metadata first (to
     * OffHeapReleased), then out of the dirty pages (to HeapReleased: a
     * page handed out and freed that the program never wrote is dirty to
     * jemalloc and not backed); never out of the active ones, which
     * HeapInuse holds whatever the kernel backs (a large class's tail
     * never written stays over: no class of the model holds in-use
     * memory that is not backed). */
    uint64_t k_res, k_mapped;
    if (ms__mappings_alloc_view(&k_res, &k_mapped) == 0 && k_mapped >= sys &&
        heap_backed + meta_sys > k_res) {
      uint64_t x = heap_backed + meta_sys - k_res;
      uint64_t m = x < meta_sys ? x : meta_sys;
      meta_sys -= m;
      unbacked += m;
      x -= m;
      uint64_t d = x < pdirty * page ? x : pdirty * page;
      released += d;
      if (m)
        q_meta = MS_Q_ESTIMATED;
      if (d)
        q_released = MS_Q_ESTIMATED;
    }
    ms__pv_set(out, MS_F_SYS, sys, MS_Q_EXACT);
    /* MSpanSys holds its unbacked part, as HeapSys holds HeapReleased. */
    ms__pv_set(out, MS_F_MSPAN_SYS, meta_sys + unbacked, q_meta);
    ms__pv_set(out, MS_F_OFF_HEAP_RELEASED, unbacked, q_meta);
    ms__pv_set(out, MS_F_MSPAN_INUSE, metadata < meta_sys ? metadata : meta_sys,
               metadata <= meta_sys ? q_meta : MS_Q_ESTIMATED);
  } else {
    /* Should not happen (mapped covers the active, dirty and muzzy
     * extents); if it does, say Sys as jemalloc has it and leave the
     * metadata unknown, so the mismatch shows instead of a made-up part. */
    ms__pv_set(out, MS_F_SYS, sys, MS_Q_EXACT);
  }
  ms__pv_set(out, MS_F_HEAP_RELEASED, released, q_released);
  if (have_tcache && allocated >= tcache)
    ms__pv_set(out, MS_F_HEAP_ALLOC, allocated - tcache, MS_Q_EXACT);
  else
    ms__pv_set(out, MS_F_HEAP_ALLOC, allocated, MS_Q_ESTIMATED);
  if (flags & MS__PV_WANT_CLASSES)
    sample_classes(out);
  return 0;
}

const ms__provider_t ms__provider_jemalloc = {
    .name = "jemalloc",
    .kind = MS__PV_MALLOC,
    .min_interval_ns = 10000000ull, /* 10 ms: a read costs 6-50 us */
    .detect = je_detect,
    .confirm = je_confirm,
    .sample = je_sample,
};
