/*
 * mappings.h - the mappings reader: memory the allocator does not see,
 * thread stacks and the anonymous mappings a program makes itself, told
 * apart by who made them (internal to the target side; see mappings.c).
 * What the figures add to a snapshot is src/compose/offheap.c's.
 */
#ifndef MS_PROVIDERS_MAPPINGS_H
#define MS_PROVIDERS_MAPPINGS_H

#include <stdint.h>

/* Reads /proc/self/maps and mincore() at most once per
 * max(MS__MAPS_MIN_INTERVAL_NS, 100 x the CPU the last read cost), Python's
 * pool headers on their own cadence of the same rule; with cached_only
 * nothing is read. now: the caller's CLOCK_MONOTONIC time. Returns 1 if
 * it read now (the figures are then ms__mappings_cached()'s), else 0.
 * Under the reader lock. */
int ms__mappings_update(int cached_only, uint64_t now);

/* The clock a read's cost is measured on (the reading thread's CPU time;
 * NULL puts it back); only the unit tests replace it. */
void ms__mappings_cost_clock_for_test(uint64_t (*cpu)(void));

#define MS__MAPS_MIN_INTERVAL_NS 250000000ull
/* Cached figures younger than this are still exact: 100 ms, the default
 * MEMSTATS_MIN_INTERVAL_MS. */
#define MS__MAPS_EXACT_NS 100000000ull

/* The figures of one read. */
typedef struct ms__maps_figures_s {
  uint64_t stack_resident, stack_unbacked; /* main and thread stacks */
  uint64_t other_resident, other_unbacked; /* mappings outside the allocator */
  uint64_t other_lazy; /* of other_unbacked: resident, but MADV_FREE'd */
  uint64_t python_resident, python_mapped; /* of which Python's arenas */
  uint32_t python_arenas;                  /* how many */
  /* Of their resident bytes: in pools holding a block at least, and in
   * allocated blocks, by the pool headers (src/providers/pymalloc.c); an arena
   * whose headers could not be read counts whole in both, and in
   * python_unknown. */
  uint64_t python_in_use, python_alloc;
  uint32_t python_unknown;
  uint32_t python_walked; /* arenas whose headers were read */
  /* The allocator's own mappings (counted by its provider, not here):
   * their resident and listed bytes, read only while the chosen provider
   * asks (ms__offheap_fill's heap_backing), since they can be large. */
  uint64_t alloc_resident, alloc_mapped;
  uint32_t threads_stacks; /* stacks found (main included) */
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
 * ms__mappings_update): the allocator's own mappings, listed by the
 * interposer (MS__MAPS_ALLOC), and glibc's heaps in /proc/self/maps
 * (MS__MAPS_ARENAS). Under the reader lock. */
#define MS__MAPS_ALLOC 0x1u
#define MS__MAPS_ARENAS 0x2u
void ms__mappings_want(unsigned what);
/* The figures of the last read and its CLOCK_MONOTONIC time (*read_ns),
 * or NULL if there is none. Under the reader lock; valid until the next
 * ms__mappings_update. */
const ms__maps_figures_t *ms__mappings_cached(uint64_t *read_ns);

/* The kernel's view of the allocator's own mappings, as the interposer
 * listed them (the mappings made from the malloc's object, see
 * ms__map_set_allocator, core/maptable.h): their resident bytes (mincore) and
 * the bytes mincore saw mapped. Returns 0, or MS_ENOSPC if the table
 * overflowed (then some are missing). Costs a mincore per 256 MiB listed; under
 * the reader lock (it shares the mincore walker's buffer). */
int ms__mappings_alloc_view(uint64_t *resident, uint64_t *mapped);

#endif
