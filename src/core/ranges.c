/*
 * ranges.c - address ranges the preload's interposer (src/preload/mmap.c)
 * sees a program hand back or share, for the mappings' read
 * (src/providers/mappings.c):
 *
 *   - madvise(MADV_FREE) on a mapping the program made: the pages stay
 *     resident, and mincore says so, until the kernel reclaims them under
 *     memory pressure; DESIGN puts them in Prepared (mapped, handed back),
 *     not in Ready. A page the program writes again is its own again, and
 *     no call says so: the figure is an estimate while any range is
 *     listed. A range ends when it is unmapped, mapped over, or handed
 *     back with MADV_DONTNEED.
 *   - mmap(MAP_SHARED | MAP_ANONYMOUS): shared memory (the kernel counts
 *     it in RssShmem, not in RssAnon), a figure of its own outside Sys.
 *
 * Each table is fixed: a slot is claimed with one compare-and-swap, as in
 * the mappings' table (start 0: free; MS__RANGE_BUSY: being written).
 */
#include <sys/mman.h>

#include "core/ranges.h"
#include "core/util.h"

#define MS__RANGE_BUSY ((uintptr_t)1)

static ms__range_slot_t g_lazy[1024], g_shared[256];
ms__ranges_t ms__lazy_ranges = {g_lazy, 1024, 0, 0};
ms__ranges_t ms__shared_ranges = {g_shared, 256, 0, 0};

static void put(ms__ranges_t *t, uintptr_t start, uintptr_t end) {
  for (unsigned i = 0; i < t->n; i++) {
    ms__range_slot_t *s = &t->slots[i];
    uintptr_t zero = 0;
    if (__atomic_load_n(&s->start, __ATOMIC_RELAXED) != 0 ||
        !__atomic_compare_exchange_n(&s->start, &zero, MS__RANGE_BUSY, 0,
                                     __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
      continue;
    __atomic_store_n(&s->end, end, __ATOMIC_RELAXED);
    __atomic_store_n(&s->start, start, __ATOMIC_RELEASE);
    unsigned hwm = __atomic_load_n(&t->hwm, __ATOMIC_RELAXED);
    while (hwm < i + 1 &&
           !__atomic_compare_exchange_n(&t->hwm, &hwm, i + 1, 1,
                                        __ATOMIC_RELEASE, __ATOMIC_RELAXED))
      ;
    return;
  }
  __atomic_store_n(&t->lost, 1, __ATOMIC_RELAXED);
}

/* Page-aligned [*a, *b) of [addr, addr+len); 0 if empty or wrapping. */
static int span(const void *addr, size_t len, uintptr_t *a, uintptr_t *b) {
  uintptr_t ps = ms__page_size();
  *a = (uintptr_t)addr & ~(ps - 1);
  *b = ((uintptr_t)addr + len + ps - 1) & ~(ps - 1);
  return len != 0 && *b > *a && *a > MS__RANGE_BUSY;
}

void ms__ranges_forget(ms__ranges_t *t, void *addr, size_t len) {
  uintptr_t a, b;
  if (!span(addr, len, &a, &b))
    return;
  unsigned hwm = __atomic_load_n(&t->hwm, __ATOMIC_ACQUIRE);
  for (unsigned i = 0; i < hwm; i++) {
    ms__range_slot_t *s = &t->slots[i];
    uintptr_t st = __atomic_load_n(&s->start, __ATOMIC_ACQUIRE);
    if (st <= MS__RANGE_BUSY)
      continue;
    uintptr_t en = __atomic_load_n(&s->end, __ATOMIC_RELAXED);
    if (en <= a || st >= b)
      continue;
    if (a <= st && en <= b) {
      __atomic_compare_exchange_n(&s->start, &st, 0, 0, __ATOMIC_RELEASE,
                                  __ATOMIC_RELAXED);
    } else if (a <= st) {
      __atomic_store_n(&s->start, b, __ATOMIC_RELEASE);
    } else if (en <= b) {
      __atomic_store_n(&s->end, a, __ATOMIC_RELEASE);
    } else { /* a hole in the middle: two pieces */
      __atomic_store_n(&s->end, a, __ATOMIC_RELEASE);
      put(t, b, en);
    }
  }
}

void ms__ranges_note(ms__ranges_t *t, void *addr, size_t len) {
  uintptr_t a, b;
  if (!span(addr, len, &a, &b))
    return;
  ms__ranges_forget(t, addr, len);
  put(t, a, b);
}

int ms__ranges_holds(ms__ranges_t *t, const void *addr) {
  uintptr_t p = (uintptr_t)addr;
  unsigned hwm = __atomic_load_n(&t->hwm, __ATOMIC_ACQUIRE);
  for (unsigned i = 0; i < hwm; i++) {
    uintptr_t st = __atomic_load_n(&t->slots[i].start, __ATOMIC_ACQUIRE);
    if (st > MS__RANGE_BUSY && st <= p &&
        p < __atomic_load_n(&t->slots[i].end, __ATOMIC_RELAXED))
      return 1;
  }
  return 0;
}

uint64_t ms__ranges_resident(ms__ranges_t *t, uintptr_t start, uintptr_t end,
                             uint64_t *mapped) {
  uint64_t res = 0, seen = 0;
  unsigned hwm = __atomic_load_n(&t->hwm, __ATOMIC_ACQUIRE);
  for (unsigned i = 0; i < hwm; i++) {
    uintptr_t st = __atomic_load_n(&t->slots[i].start, __ATOMIC_ACQUIRE);
    if (st <= MS__RANGE_BUSY)
      continue;
    uintptr_t en = __atomic_load_n(&t->slots[i].end, __ATOMIC_RELAXED);
    uintptr_t a = st > start ? st : start, b = en < end ? en : end;
    uint64_t m = 0;
    if (a < b) /* a part no longer mapped (ENOMEM) counts neither way */
      res += ms__resident(a, b, &m);
    seen += m;
  }
  if (mapped)
    *mapped = seen;
  return res;
}
