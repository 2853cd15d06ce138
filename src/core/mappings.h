/*
 * mappings.h - memory the allocator does not see: thread stacks and the
 * anonymous mappings a program makes itself (internal; see mappings.c).
 */
#ifndef MS_CORE_MAPPINGS_H
#define MS_CORE_MAPPINGS_H

#include <stddef.h>
#include <stdint.h>

#include "memstats.h"

/* ---- the foreign-mapping table, filled by the preload's mmap interposer.
 * Lock-free and allocation-free: any thread, any time. */

/* A private anonymous mapping [addr, addr+len) was made by code at ra (the
 * caller's return address). */
void ms__map_note(void *addr, size_t len, const void *ra);
/* [addr, addr+len) is about to be unmapped (or mapped over): whatever the
 * table holds of it goes. Called before the real munmap, so the range
 * cannot be handed to another thread's mmap while it is still listed. */
void ms__map_forget(void *addr, size_t len);
/* The table's caller address of the entry holding addr, or NULL. */
const void *ms__map_owner(void *addr);
/* The allocator's malloc (the preload's next one): mappings made from its
 * object are the allocator's own, counted by its provider. */
void ms__map_set_allocator(const void *malloc_fn);

/* ---- the snapshot side ---- */

/* Adds the stacks and the foreign mappings to *snap: their size to
 * StackSys and OtherSys, resident stack bytes to StackInuse, the rest of
 * their size to StackReleased, OtherReleased and OffHeapReleased; appends "mappings" (and "python" when the program's
 * Python object allocator has arenas) to snap->providers. Reads
 * /proc/self/maps and mincore() at most once per
 * max(MS__MAPS_MIN_INTERVAL_NS, 100 x the cost of the last read); between
 * two reads the last figures are used, marked estimated once older than
 * MS__MAPS_EXACT_NS. With cached_only
 * nothing is read. With heap_backing (the chosen malloc provider cannot
 * tell backed memory from committed memory: mimalloc) the allocator's own
 * mappings are measured too, and the heap figures its provider set are
 * re-split by their resident pages (HeapReleased = HeapSys - backed,
 * HeapInuse at most backed, HeapIdle the rest), estimated; without the
 * preload no such mapping is listed and the provider's figures stand.
 * Called by ms_snapshot_read() with the reader lock held, after the
 * providers. */
void ms__mappings_fill(ms_snapshot_t *snap, int cached_only,
                       int heap_backing);

#define MS__MAPS_MIN_INTERVAL_NS 250000000ull
/* Cached figures younger than this are still exact: 100 ms, the default
 * MEMSTATS_MIN_INTERVAL_MS. */
#define MS__MAPS_EXACT_NS 100000000ull

/* The figures of one read, for the tests. */
typedef struct ms__maps_figures_s {
  uint64_t stack_resident, stack_unbacked; /* main and thread stacks */
  uint64_t other_resident, other_unbacked; /* mappings outside the allocator */
  uint64_t other_lazy; /* of other_unbacked: resident, but MADV_FREE'd */
  uint64_t python_resident, python_mapped; /* of which Python's arenas */
  uint32_t python_arenas;                  /* how many */
  /* Of their resident bytes: in pools holding a block at least, and in
   * allocated blocks, by the pool headers (src/core/pymalloc.c); an arena
   * whose headers could not be read counts whole in both, and in
   * python_unknown. */
  uint64_t python_in_use, python_alloc;
  uint32_t python_unknown;
  uint32_t python_walked; /* arenas whose headers were read */
  /* The allocator's own mappings (counted by its provider, not here):
   * their resident and listed bytes, read only while the chosen provider
   * asks (ms__mappings_fill's heap_backing), since they can be large. */
  uint64_t alloc_resident, alloc_mapped;
  uint32_t threads_stacks;                 /* stacks found (main included) */
  /* glibc's heaps ([heap] and the arena heaps): their read-write size and
   * resident bytes, read only while asked (MS__MAPS_ARENAS). */
  uint64_t arena_mapped, arena_resident;
  int have_alloc, have_arenas; /* which of the two were measured */
  /* What libmemstats itself holds (core/self.h): the agent thread's stack,
   * the mappings the library made, its data and bss; in no class above. */
  uint64_t self_resident, self_mapped;
  /* The program's shared anonymous mappings (core/ranges.h): shared
   * memory, in no class of Sys. */
  uint64_t shared_resident, shared_mapped;
  int lost; /* the table overflowed: some mappings are not counted */
} ms__maps_figures_t;
/* Reads now (under the caller's serialisation) and returns the figures. */
void ms__mappings_read(ms__maps_figures_t *out);

/* What the reads measure beyond the stacks and the foreign mappings, from
 * now on (a cached read made without it is taken again at the next
 * ms__mappings_fill): the allocator's own mappings, listed by the
 * interposer (MS__MAPS_ALLOC), and glibc's heaps in /proc/self/maps
 * (MS__MAPS_ARENAS). Under the reader lock. */
#define MS__MAPS_ALLOC 0x1u
#define MS__MAPS_ARENAS 0x2u
void ms__mappings_want(unsigned what);
/* The figures of the last read and its CLOCK_MONOTONIC time (*read_ns),
 * or NULL if there is none. Under the reader lock; valid until the next
 * ms__mappings_fill. */
const ms__maps_figures_t *ms__mappings_cached(uint64_t *read_ns);

/* The kernel's view of the allocator's own mappings, as the interposer
 * listed them (the mappings made from the malloc's object, see
 * ms__map_set_allocator): their resident bytes (mincore) and the bytes
 * mincore saw mapped. Returns 0, or -1 if the table overflowed (then some
 * are missing). Costs a mincore per 256 MiB listed; under the reader lock
 * (it shares mappings.c's buffers). */
int ms__mappings_alloc_view(uint64_t *resident, uint64_t *mapped);

/* Whether [start, end), a read-write mapping of this process, starts
 * with one of glibc's arena heaps (64 MiB-aligned, starting with a
 * heap_info that points at its arena or at the previous heap). A line of
 * the maps file longer than 64 MiB that starts so is several heaps, each
 * full but the last, which the kernel shows merged. Reads the first words
 * without touching them (process_vm_readv): the mapping may be gone
 * meanwhile, and is then not a heap. */
int ms__arena_heap_at(uintptr_t start, uintptr_t end);

#endif
