/*
 * test_mappings.c - the stacks read from /proc/self/maps
 * (src/core/mappings.c): a pthread stack is a read-write mapping right
 * above its PROT_NONE guard, and glibc's arena heaps, which can look the
 * same from below, are told apart by their PROT_NONE reserve above them up
 * to their 64 MiB boundary. The layouts are made here with mmap, at
 * addresses chosen on a 64 MiB boundary, where kernels that align large
 * anonymous mappings to huge pages (6.7 and later) put a thread's stack
 * about once in 16 threads: such a stack was taken for a heap and not
 * counted (test_unseen's StackSys check failed now and then). A heap is
 * also known by the heap_info it starts with, whatever its lines say.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include <cmocka.h>

#include "core/mappings.h"

#define MiB ((uintptr_t)1 << 20)
#define SLOT (64 * MiB)
#define PAGE ((uintptr_t)4096)

/* Three free 64 MiB slots (64 MiB-aligned), reserved and then released,
 * so that the layouts below can be mapped there with MAP_FIXED. */
static uintptr_t free_slots(void) {
  void *p = mmap(NULL, 5 * SLOT, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  assert_true(p != MAP_FAILED);
  uintptr_t a = ((uintptr_t)p + SLOT - 1) & ~(SLOT - 1);
  assert_int_equal(munmap(p, 5 * SLOT), 0);
  return a + SLOT; /* a slot of room below too: the guard goes there */
}

static void *map_at(uintptr_t at, size_t len, int prot) {
  void *p = mmap((void *)at, len, prot,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  assert_true(p == (void *)at);
  return p;
}

static void touch(uintptr_t at, size_t len) {
  for (size_t i = 0; i < len; i += PAGE)
    ((volatile char *)at)[i] = 1;
}

/* A stack (guard page, then 8 MiB read-write) whose read-write part starts
 * on a 64 MiB boundary: counted, with its touched pages resident. */
static void test_stack_on_heap_boundary(void **state) {
  (void)state;
  uintptr_t a = free_slots();
  ms__maps_figures_t before, after;
  ms__mappings_read(&before);
  map_at(a - PAGE, PAGE, PROT_NONE);
  map_at(a, 8 * MiB, PROT_READ | PROT_WRITE);
  touch(a + 8 * MiB - 512 * 1024, 512 * 1024); /* a stack grows down */
  ms__mappings_read(&after);
  assert_int_equal(after.threads_stacks, before.threads_stacks + 1);
  assert_true(after.stack_resident >= before.stack_resident + 512 * 1024);
  munmap((void *)(a - PAGE), 8 * MiB + PAGE);
}

/* glibc's arena heaps: a heap right after another heap's PROT_NONE
 * reserve (so with PROT_NONE below it too), with its own reserve above it
 * up to its 64 MiB boundary; and a heap grown to the whole 64 MiB. Neither
 * is a stack. */
static void test_arena_heaps_are_not_stacks(void **state) {
  (void)state;
  uintptr_t a = free_slots();
  ms__maps_figures_t before, after;
  ms__mappings_read(&before);
  /* The end of the previous heap's reserve, then a 1 MiB heap and its
   * reserve. */
  map_at(a - 2 * MiB, 2 * MiB, PROT_NONE);
  map_at(a, MiB, PROT_READ | PROT_WRITE);
  map_at(a + MiB, SLOT - MiB, PROT_NONE);
  touch(a, MiB);
  /* A full heap in the next slot, after the reserve above. */
  map_at(a + SLOT, SLOT, PROT_READ | PROT_WRITE);
  touch(a + SLOT, MiB);
  ms__mappings_read(&after);
  assert_int_equal(after.threads_stacks, before.threads_stacks);
  munmap((void *)(a - 2 * MiB), 2 * SLOT + 2 * MiB);
}

/* A heap whose lines do not show its reserve where it ends: /proc/self/
 * maps is read in pieces, and a heap that grows between two reads ends,
 * in the listing, below where its reserve starts. Here a page is left
 * unmapped between the heap and its reserve for the same picture. It
 * starts with glibc's heap_info (its arena right after it), and is not a
 * stack: taken for one, its resident pages were counted in StackSys and
 * in the heap both (test_unseen's demo read Ready 29.2 MiB against 19.9
 * MiB of anonymous RSS). */
static void test_heap_without_its_reserve_is_no_stack(void **state) {
  (void)state;
  uintptr_t a = free_slots();
  ms__maps_figures_t before, after;
  ms__mappings_read(&before);
  map_at(a - 2 * MiB, 2 * MiB, PROT_NONE);
  map_at(a, MiB, PROT_READ | PROT_WRITE);
  map_at(a + MiB + PAGE, SLOT - MiB - PAGE, PROT_NONE);
  touch(a, MiB);
  uintptr_t *h = (uintptr_t *)a; /* ar_ptr, prev, size, mprotect_size */
  h[0] = a + 4 * sizeof(uintptr_t);
  h[1] = 0;
  h[2] = MiB;
  h[3] = MiB;
  ms__mappings_read(&after);
  assert_int_equal(after.threads_stacks, before.threads_stacks);
  assert_true(ms__arena_heap_at(a, a + MiB));
  /* And a stack on a boundary (zeros at its bottom) is no heap. */
  memset(h, 0, 4 * sizeof(uintptr_t));
  assert_false(ms__arena_heap_at(a, a + MiB));
  munmap((void *)(a - 2 * MiB), SLOT + 2 * MiB);
}

/* An ordinary stack, off any 64 MiB boundary, as before. */
static void test_stack_off_boundary(void **state) {
  (void)state;
  uintptr_t a = free_slots() + 5 * MiB + 3 * PAGE;
  ms__maps_figures_t before, after;
  ms__mappings_read(&before);
  map_at(a - PAGE, PAGE, PROT_NONE);
  map_at(a, 8 * MiB, PROT_READ | PROT_WRITE);
  touch(a + 8 * MiB - 256 * 1024, 256 * 1024);
  ms__mappings_read(&after);
  assert_int_equal(after.threads_stacks, before.threads_stacks + 1);
  assert_true(after.stack_resident >= before.stack_resident + 256 * 1024);
  munmap((void *)(a - PAGE), 8 * MiB + PAGE);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stack_on_heap_boundary),
      cmocka_unit_test(test_arena_heaps_are_not_stacks),
      cmocka_unit_test(test_heap_without_its_reserve_is_no_stack),
      cmocka_unit_test(test_stack_off_boundary),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
