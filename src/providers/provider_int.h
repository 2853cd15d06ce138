/*
 * provider_int.h - the interface between the provider registry and each
 * allocator provider (internal to src/providers/).
 *
 * A provider is a table of three functions. detect() looks the allocator's
 * functions up with dlsym(RTLD_DEFAULT, ...) and nothing else, so it is cheap
 * and safe early. confirm() checks that malloc really reaches that allocator
 * (it may make one test allocation, so it runs once, at the first snapshot).
 * sample() reads the allocator's own figures into a sample; the registry
 * calls it at the provider's cadence, from the reader's thread, and caches
 * the result. Samples never allocate through malloc.
 */
#ifndef MS_PROVIDERS_PROVIDER_INT_H
#define MS_PROVIDERS_PROVIDER_INT_H

#include <stdint.h>
#include <stdlib.h>

#include "core/engine.h"
#include "providers/providers.h"
#include "memstats.h"

/* One reading of an allocator: a value and a quality per scalar field
 * (q[f] == MS_Q_UNAVAILABLE means the provider does not have it), and the
 * allocator's own size classes if it has them and was asked for them. */
typedef struct ms__pv_sample_s {
  uint64_t v[MS_F__COUNT];
  uint8_t q[MS_F__COUNT];
  uint32_t nsize_classes;
  ms_size_class_t by_size[MS_MAX_SIZE_CLASSES];
  /* The tracked HeapAlloc (preload) at the moment of the sample, if there
   * was one: later snapshots that reuse the sample shift its heap figures
   * by what the program allocated since (see registry.c). */
  int have_tracked;
  uint64_t tracked_heap_alloc;
  uint64_t tracked_total_alloc;
  /* The engine's mapped-block counters then (glibc's mmapped chunks, which
   * go to and come back from the OS on their own: core/hotpath.h). */
  ms__mapped_t tracked_mapped;
  /* Bytes of HeapInuse in blocks mapped on their own (glibc's hblkhd), for
   * the kernel's view of the rest (kernel_view below); 0 if none. */
  uint64_t mapped_blocks;
} ms__pv_sample_t;

/* What a provider's memory is: the C allocator behind malloc (one at most
 * is chosen), or a garbage collector with a heap of its own. */
typedef enum ms__pv_kind_e {
  MS__PV_MALLOC = 0,
  MS__PV_COLLECTOR
} ms__pv_kind_t;

/* Flags for sample(). */
#define MS__PV_WANT_CLASSES 0x1u /* nobody else has size classes: read them */

typedef struct ms__provider_s {
  const char *name; /* as in snapshot->providers: "glibc", "jemalloc" ... */
  ms__pv_kind_t kind;
  /* Shortest interval between two samples; the registry stretches it to
   * 100 times the cost of the last sample (back-off when reads are slow),
   * and doubles that after each failed sample in a row (see registry.c). */
  uint64_t min_interval_ns;
  int (*detect)(void);  /* 1 if the allocator's API is in the process */
  int (*confirm)(void); /* 1 if malloc really reaches it */
  /* Fills *out (zeroed by the caller). Returns 0, or a negative MS_E* code
   * if the allocator could not be read this time. */
  int (*sample)(ms__pv_sample_t *out, unsigned flags);
  /* Optional: adjusts the merged snapshot after the engine's figures and
   * the samples are in (the collector provider uses it for its GC fields).
   * idx is the provider's index in snap->providers. */
  void (*finish)(ms_snapshot_t *snap, int idx);
  /* 1 if the allocator counts memory as committed before anything touched
   * it (mimalloc: a commit is an mprotect or nothing at all on Linux, the
   * kernel backs pages on first touch), so that its figures would make
   * untouched memory Ready. The snapshot then takes the backed part of
   * HeapSys from the resident pages of the allocator's own mappings, where
   * the preload's mmap interposer lists them (ms__offheap_fill's
   * heap_backing, src/compose/offheap.c). */
  int backing_unknown;
  /* Where the kernel shows the allocator's memory, to check figures
   * shifted since a sample against (providers.h): MS__PV_VIEW_ARENAS,
   * glibc's heaps in /proc/self/maps; 0: nowhere. */
  unsigned kernel_view;
} ms__provider_t;

extern const ms__provider_t ms__provider_glibc;
extern const ms__provider_t ms__provider_jemalloc;
extern const ms__provider_t ms__provider_tcmalloc;
extern const ms__provider_t ms__provider_mimalloc;
extern const ms__provider_t ms__provider_boehm;

/* Sets one field of a sample. */
static inline void ms__pv_set(ms__pv_sample_t *s, ms_field_t f, uint64_t v,
                              ms_quality_t q) {
  s->v[f] = v;
  s->q[f] = (uint8_t)q;
}

/* Combines the engine's figures (already in *snap) with the chosen malloc
 * provider's sample and a collector's sample (either may be NULL), as the
 * registry does; names are appended to snap->providers. Exposed for the
 * unit tests. See registry.c for the rules. */
void ms__providers_merge(ms_snapshot_t *snap, unsigned engine_fed,
                         const ms__provider_t *mpv, const ms__pv_sample_t *ms,
                         const ms__provider_t *gpv, const ms__pv_sample_t *gs);

/* For the unit tests only (tests/unit/test_provider_cadence.c); the
 * library never calls these. ms__providers_set_for_test() makes the
 * registry use mpv as the process's malloc and gpv as its collector (either
 * may be NULL), as if detection had chosen them, with nothing cached;
 * ms__providers_clock_for_test() replaces the cadence's monotonic clock
 * (NULL restores the real one), so a fake provider's sample() can "cost"
 * a chosen time by advancing it, without sleeping; the sample's cost is
 * read on the same clock unless ms__providers_cpu_clock_for_test() gives
 * it one of its own (the CPU time, which a sample that waits does not
 * spend; NULL: the cadence's clock again, or the real thread CPU clock). */
void ms__providers_set_for_test(const ms__provider_t *mpv,
                                const ms__provider_t *gpv);
void ms__providers_clock_for_test(uint64_t (*now)(void));
void ms__providers_cpu_clock_for_test(uint64_t (*cpu)(void));
/* Makes detection start over with list[0..n-1] (n at least 1, at most the
 * four real ones; the last fills the rest) as the malloc providers to
 * look for, in order; NULL restores the real ones. */
void ms__providers_detect_for_test(const ms__provider_t *const *list, size_t n);

/* ---- what the providers share ---- */

/* One line of /proc/self/maps: "start-end perms offset dev inode path". */
typedef struct ms__vma_s {
  uintptr_t start, end;
  char perms[5];
  int anon;     /* inode 0 and no path (or an [anon:...] name) */
  int pathless; /* no path at all */
  int stack;    /* the main thread's [stack] */
  int brk;      /* [heap]: the main arena's, where malloc is glibc's */
} ms__vma_t;

/* Reads /proc/self/maps and calls fn for each line in the kernel's format,
 * in order (procmaps.c: the one reader of the file on the target side).
 * Returns 0, or the negative errno of the open or read that failed (the
 * lines read before were handed over). One caller at a time (the
 * snapshot's reader lock); no allocation. */
int ms__maps_walk(void (*fn)(const ms__vma_t *v, void *arg), void *arg);

/* Whether [start, end), a read-write mapping of this process, starts
 * with one of glibc's arena heaps (64 MiB-aligned, starting with a
 * heap_info that points at its arena or at the previous heap). A line of
 * the maps file longer than 64 MiB that starts so is several heaps, each
 * full but the last, which the kernel shows merged. Reads the first words
 * without touching them (process_vm_readv): the mapping may be gone
 * meanwhile, and is then not a heap. glibc's knowledge (glibc.c), which
 * the mappings reader needs too: a heap is not a thread stack. */
int ms__arena_heap_at(uintptr_t start, uintptr_t end);
/* Whether the mapping [start, end) starts with one of glibc's own mapped
 * blocks (a large malloc, which glibc maps and moves with mremap through
 * no interposed call): read with process_vm_readv, never a fault. */
int ms__mmapped_chunk_at(uintptr_t start, uintptr_t end);
/* The size and alignment of glibc's arena heaps (HEAP_MAX, 64 MiB on
 * 64-bit). */
#define MS__HEAP_MAX ((uintptr_t)64 << 20)

/* Installs the collector provider's pause hook if the collector is in the
 * process (cheap dlsym only; also run from a library constructor). Returns 1
 * if installed. */
int ms__boehm_install(void);

/* A distinctive allocation size for confirm(): above glibc's tcache and
 * jemalloc's default tcache_max (so the allocation reaches the arena and
 * moves its counters), below every mmap threshold. */
#define MS__PV_PROBE_SIZE 40000u

/* The test allocation of confirm(). A malloc whose block is never used may
 * be deleted with its free (clang -O2 does: the probe then sees no counter
 * move and no allocator is ever detected), so the block escapes into an
 * empty asm statement that the compiler must assume reads it and any
 * memory. Every provider's probe goes through these two. */
static inline void *ms__pv_probe_alloc(size_t size) {
  void *p = malloc(size);
  __asm__ volatile("" : : "r"(p) : "memory");
  return p;
}

static inline void ms__pv_probe_free(void *p) {
  __asm__ volatile("" : : "r"(p) : "memory");
  free(p);
}

#endif
