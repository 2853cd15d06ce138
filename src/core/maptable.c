/*
 * maptable.c - the table of the anonymous mappings a program makes through
 * the preload's mmap interposer (src/preload/mmap.c), with the caller's
 * address of each: the one part of the mappings' accounting the hot path
 * writes. Who made a mapping, what it holds and how it is counted is
 * decided when a snapshot reads the table (src/providers/mappings.c, and
 * src/compose/offheap.c for the snapshot's figures).
 *
 * Why a table: glibc's own mappings (malloc's arenas and large blocks,
 * thread stacks, the dynamic loader's) are made by internal calls that
 * never reach an interposer, so the table holds only what code outside
 * libc mapped; an anonymous line of /proc/self/maps does not say who made
 * it (glibc's large blocks, jemalloc's extents and Python's arenas look
 * alike), and adjacent mappings of different owners merge into one line.
 *
 * Cost: a slot claimed with one compare-and-swap per mmap, and a scan of
 * the table's used part per munmap: as many slots as the most mappings the
 * program held at once (its own only; the table's size bounds it).
 */
#include <stddef.h>
#include <stdint.h>

#include "core/maptable.h"
#include "core/util.h"

/* ---- the table ------------------------------------------------------------
 * A slot is free when start is 0, being written when it is MS__SLOT_BUSY,
 * and holds [start, end) made by code at ra otherwise. A claimer takes a
 * free slot with a compare-and-swap to BUSY, writes end and ra, then
 * publishes start (release). Updates of one slot by two threads at once
 * would need the program to unmap one range from two threads at once: the
 * figures could then be wrong, never the memory touched (nothing here
 * dereferences a listed address; mincore on a stale range fails cleanly). */
#define MS__MAP_SLOTS 16384u
#define MS__SLOT_BUSY ((uintptr_t)1)

typedef struct ms__map_slot_s {
  uintptr_t start, end;
  const void *ra;
} ms__map_slot_t;

static ms__map_slot_t g_slots[MS__MAP_SLOTS];
static unsigned g_hwm;  /* slots [0, g_hwm) have been used (never drops) */
static unsigned g_hint; /* where the next claim starts looking */
static int g_lost;      /* a mapping found no free slot */
static const void *g_alloc_fn;

static void put_range(uintptr_t start, uintptr_t end, const void *ra) {
  unsigned hint = __atomic_load_n(&g_hint, __ATOMIC_RELAXED);
  for (unsigned k = 0; k < MS__MAP_SLOTS; k++) {
    unsigned i = (hint + k) % MS__MAP_SLOTS;
    ms__map_slot_t *s = &g_slots[i];
    uintptr_t zero = 0;
    if (__atomic_load_n(&s->start, __ATOMIC_RELAXED) != 0 ||
        !__atomic_compare_exchange_n(&s->start, &zero, MS__SLOT_BUSY, 0,
                                     __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
      continue;
    __atomic_store_n(&s->end, end, __ATOMIC_RELAXED);
    __atomic_store_n(&s->ra, ra, __ATOMIC_RELAXED);
    __atomic_store_n(&s->start, start, __ATOMIC_RELEASE);
    unsigned hwm = __atomic_load_n(&g_hwm, __ATOMIC_RELAXED);
    while (hwm < i + 1 &&
           !__atomic_compare_exchange_n(&g_hwm, &hwm, i + 1, 1,
                                        __ATOMIC_RELEASE, __ATOMIC_RELAXED))
      ;
    __atomic_store_n(&g_hint, i + 1, __ATOMIC_RELAXED);
    return;
  }
  __atomic_store_n(&g_lost, 1, __ATOMIC_RELAXED);
}

void ms__map_note(void *addr, size_t len, const void *ra) {
  uintptr_t ps = ms__page_size();
  uintptr_t start = (uintptr_t)addr;
  if (len == 0 || start <= MS__SLOT_BUSY || start + len < start)
    return;
  put_range(start, (start + len + ps - 1) & ~(ps - 1), ra);
}

void ms__map_forget(void *addr, size_t len) {
  uintptr_t ps = ms__page_size();
  uintptr_t a = (uintptr_t)addr, b = (a + len + ps - 1) & ~(ps - 1);
  if (len == 0 || b < a)
    return;
  unsigned hwm = __atomic_load_n(&g_hwm, __ATOMIC_ACQUIRE);
  for (unsigned i = 0; i < hwm; i++) {
    ms__map_slot_t *s = &g_slots[i];
    uintptr_t st = __atomic_load_n(&s->start, __ATOMIC_ACQUIRE);
    if (st <= MS__SLOT_BUSY)
      continue;
    uintptr_t en = __atomic_load_n(&s->end, __ATOMIC_RELAXED);
    if (en <= a || st >= b)
      continue;
    if (a <= st && en <= b) {
      /* The next claim starts at the slot freed last: a program that maps
       * and unmaps in a loop reuses one slot, and the scanned part stays
       * as long as the most mappings it held at once. */
      if (__atomic_compare_exchange_n(&s->start, &st, 0, 0, __ATOMIC_RELEASE,
                                      __ATOMIC_RELAXED))
        __atomic_store_n(&g_hint, i, __ATOMIC_RELAXED);
    } else if (a <= st) {
      __atomic_store_n(&s->start, b, __ATOMIC_RELEASE);
    } else if (en <= b) {
      __atomic_store_n(&s->end, a, __ATOMIC_RELEASE);
    } else { /* a hole in the middle: two pieces */
      __atomic_store_n(&s->end, a, __ATOMIC_RELEASE);
      put_range(b, en, __atomic_load_n(&s->ra, __ATOMIC_RELAXED));
    }
  }
}

const void *ms__map_owner(void *addr) {
  uintptr_t a = (uintptr_t)addr;
  unsigned hwm = __atomic_load_n(&g_hwm, __ATOMIC_ACQUIRE);
  for (unsigned i = 0; i < hwm; i++) {
    ms__map_slot_t *s = &g_slots[i];
    uintptr_t st = __atomic_load_n(&s->start, __ATOMIC_ACQUIRE);
    if (st > MS__SLOT_BUSY && st <= a &&
        a < __atomic_load_n(&s->end, __ATOMIC_RELAXED))
      return __atomic_load_n(&s->ra, __ATOMIC_RELAXED);
  }
  return NULL;
}

void ms__map_set_allocator(const void *malloc_fn) {
  __atomic_store_n(&g_alloc_fn, malloc_fn, __ATOMIC_RELAXED);
}

unsigned ms__map_used(void) {
  return __atomic_load_n(&g_hwm, __ATOMIC_ACQUIRE);
}

int ms__map_get(unsigned i, uintptr_t *start, uintptr_t *end, const void **ra) {
  if (i >= MS__MAP_SLOTS)
    return 0;
  ms__map_slot_t *s = &g_slots[i];
  uintptr_t st = __atomic_load_n(&s->start, __ATOMIC_ACQUIRE);
  if (st <= MS__SLOT_BUSY)
    return 0;
  *start = st;
  *end = __atomic_load_n(&s->end, __ATOMIC_RELAXED);
  *ra = __atomic_load_n(&s->ra, __ATOMIC_RELAXED);
  return 1;
}

int ms__map_lost(void) {
  return __atomic_load_n(&g_lost, __ATOMIC_RELAXED);
}

const void *ms__map_allocator(void) {
  return __atomic_load_n(&g_alloc_fn, __ATOMIC_RELAXED);
}
