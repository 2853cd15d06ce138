/*
 * ranges.h - address ranges the preload's interposer sees a program hand
 * back with madvise(MADV_FREE), or map shared and anonymous (internal; see
 * ranges.c).
 */
#ifndef MS_CORE_RANGES_H
#define MS_CORE_RANGES_H

#include <stddef.h>
#include <stdint.h>

typedef struct ms__range_slot_s {
  uintptr_t start, end;
} ms__range_slot_t;

/* A fixed table of ranges: lock-free and allocation-free, any thread, any
 * time. */
typedef struct ms__ranges_s {
  ms__range_slot_t *slots;
  unsigned n;   /* slots */
  unsigned hwm; /* slots [0, hwm) have been used */
  int lost;     /* a range found no room */
} ms__ranges_t;

/* Pages of the program's own mappings handed back with MADV_FREE: resident
 * until the kernel reclaims them, but Prepared. */
extern ms__ranges_t ms__lazy_ranges;
/* The program's shared anonymous mappings (MAP_SHARED | MAP_ANONYMOUS):
 * shared memory (RssShmem), in no class of Sys. */
extern ms__ranges_t ms__shared_ranges;

/* [addr, addr+len) joins the table (a part already in it counts once). */
void ms__ranges_note(ms__ranges_t *t, void *addr, size_t len);
/* [addr, addr+len) leaves it (unmapped, mapped over, handed back). */
void ms__ranges_forget(ms__ranges_t *t, void *addr, size_t len);
/* Whether addr is in a listed range. */
int ms__ranges_holds(ms__ranges_t *t, const void *addr);
/* The resident bytes (mincore) of the listed parts of [start, end), and
 * in *mapped (if not NULL) the listed bytes still mapped. One reader at a
 * time (the snapshot's reader lock). */
uint64_t ms__ranges_resident(ms__ranges_t *t, uintptr_t start, uintptr_t end,
                             uint64_t *mapped);

#endif
