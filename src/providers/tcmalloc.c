/*
 * tcmalloc.c - the gperftools tcmalloc provider, through its C API
 * (MallocExtension_GetNumericProperty; each property is one pass over
 * tcmalloc's statistics under its page-heap lock, microseconds).
 *
 * Mapping (all exact, from the properties of gperftools 2.x):
 *   HeapSys      = generic.heap_size (the page heap, unmapped included)
 *   HeapReleased = tcmalloc.pageheap_unmapped_bytes
 *   HeapIdle     = tcmalloc.pageheap_free_bytes + HeapReleased
 *   HeapInuse    = HeapSys - HeapIdle (spans holding objects, including the
 *                  objects waiting in thread, central and transfer caches)
 *   HeapAlloc    = generic.current_allocated_bytes
 *   MSpanSys     = MSpanInuse = metadata, which tcmalloc counts in
 *                  generic.total_physical_bytes = heap_size - unmapped
 *                  + metadata
 *   Sys          = HeapSys + MSpanSys
 * Thread caches hold free objects inside HeapInuse, not memory of their
 * own, so MCache* stays unavailable rather than counting them twice.
 */
#include <dlfcn.h>
#include <stdlib.h>

#include "providers/provider_int.h"

typedef int (*getprop_fn)(const char *, size_t *);
static getprop_fn g_prop;

static int tc_detect(void) {
  g_prop =
      (getprop_fn)dlsym(RTLD_DEFAULT, "MallocExtension_GetNumericProperty");
  return g_prop != NULL;
}

/* Reads one of tcmalloc's numeric properties. Returns 0, or MS_ENOSYS if
 * this tcmalloc does not know the property. */
static int prop(const char *name, uint64_t *out) {
  size_t v = 0;
  if (!g_prop(name, &v))
    return MS_ENOSYS;
  *out = v;
  return 0;
}

/* malloc reaches tcmalloc if current_allocated_bytes moves by a probe. */
static int tc_confirm(void) {
  for (int i = 0; i < 3; i++) {
    size_t size = MS__PV_PROBE_SIZE + (size_t)i * 4096;
    uint64_t a, b;
    if (prop("generic.current_allocated_bytes", &a) != 0)
      return 0;
    void *p = ms__pv_probe_alloc(size);
    if (!p)
      return 0;
    int ok = prop("generic.current_allocated_bytes", &b) == 0;
    ms__pv_probe_free(p);
    if (ok && b >= a + size && b < a + size + size / 4)
      return 1;
  }
  return 0;
}

static int tc_sample(ms__pv_sample_t *out, unsigned flags) {
  (void)flags;
  uint64_t heap, alloc, pfree, unmapped, phys;
  if (prop("generic.heap_size", &heap) != 0 ||
      prop("generic.current_allocated_bytes", &alloc) != 0 ||
      prop("tcmalloc.pageheap_free_bytes", &pfree) != 0 ||
      prop("tcmalloc.pageheap_unmapped_bytes", &unmapped) != 0)
    return MS_ENOSYS;
  uint64_t idle = pfree + unmapped;
  if (idle > heap)
    return MS_EAGAIN; /* not one consistent cut: try again next time */
  ms__pv_set(out, MS_F_HEAP_SYS, heap, MS_Q_EXACT);
  ms__pv_set(out, MS_F_HEAP_RELEASED, unmapped, MS_Q_EXACT);
  ms__pv_set(out, MS_F_HEAP_IDLE, idle, MS_Q_EXACT);
  ms__pv_set(out, MS_F_HEAP_INUSE, heap - idle, MS_Q_EXACT);
  ms__pv_set(out, MS_F_HEAP_ALLOC, alloc, MS_Q_EXACT);
  if (prop("generic.total_physical_bytes", &phys) == 0 &&
      phys + unmapped >= heap) {
    uint64_t meta = phys + unmapped - heap;
    ms__pv_set(out, MS_F_MSPAN_SYS, meta, MS_Q_EXACT);
    ms__pv_set(out, MS_F_MSPAN_INUSE, meta, MS_Q_EXACT);
    ms__pv_set(out, MS_F_SYS, heap + meta, MS_Q_EXACT);
  } else {
    ms__pv_set(out, MS_F_SYS, heap, MS_Q_ESTIMATED); /* metadata unknown */
  }
  return 0;
}

const ms__provider_t ms__provider_tcmalloc = {
    .name = "tcmalloc",
    .kind = MS__PV_MALLOC,
    .min_interval_ns = 10000000ull, /* 10 ms: a read costs a few us */
    .detect = tc_detect,
    .confirm = tc_confirm,
    .sample = tc_sample,
};
