/*
 * test_mappings.c - the stacks read from /proc/self/maps
 * (src/providers/mappings.c): a pthread stack is a read-write mapping right
 * above its PROT_NONE guard, and glibc's arena heaps, which can look the
 * same from below, are told apart by their PROT_NONE reserve above them up
 * to their 64 MiB boundary. The layouts are made here with mmap, at
 * addresses chosen on a 64 MiB boundary, where kernels that align large
 * anonymous mappings to huge pages (6.7 and later) put a thread's stack
 * about once in 16 threads: such a stack was taken for a heap and not
 * counted (test_unseen's StackSys check failed now and then). A heap is
 * also known by the heap_info it starts with, whatever its lines say, and
 * so are heaps the kernel shows merged into one line, 64 MiB and more.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "providers/mappings.h"
#include "providers/provider_int.h"

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

/* Writes a heap_info at the start of a heap: the first heap of an arena
 * points at its arena, right after it; a later one at the previous heap. */
static void heap_info(uintptr_t at, uintptr_t prev, size_t size) {
  uintptr_t *h = (uintptr_t *)at; /* ar_ptr, prev, size, mprotect_size */
  h[0] = prev ? 0x10000 : at + 4 * sizeof(uintptr_t);
  h[1] = prev;
  h[2] = size;
  h[3] = size;
}

/* Whether /proc/self/maps shows [start, end) as one line. Read with a
 * static buffer and no stdio: an allocation here could map memory (under
 * AddressSanitizer, its allocator's regions) that the stack count before
 * and after would see. */
static int one_line(uintptr_t start, uintptr_t end) {
  static char buf[1 << 16];
  char want[64];
  snprintf(want, sizeof want, "\n%lx-%lx ", (unsigned long)start,
           (unsigned long)end);
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  assert_true(fd >= 0);
  size_t have = 1;
  int found = 0;
  buf[0] = '\n';
  for (;;) {
    ssize_t r = read(fd, buf + have, sizeof buf - 1 - have);
    if (r <= 0)
      break;
    have += (size_t)r;
    buf[have] = '\0';
    if (strstr(buf, want)) {
      found = 1;
      break;
    }
    /* Keep the last partial line (and its newline before it). */
    char *nl = strrchr(buf, '\n');
    size_t keep = (size_t)(buf + have - nl);
    memmove(buf, nl, keep);
    have = keep;
  }
  close(fd);
  return found;
}

/* Two heaps of one arena, the second mapped right above the first once it
 * was full (glibc's new_heap tries that address first): the kernel shows
 * them as one read-write line of 65 MiB, above another heap's PROT_NONE
 * reserve, as a stack above its guard. Neither heap is a stack, nor are
 * two full heaps in one 128 MiB line; glibc's provider takes each such
 * line for heaps (ms__arena_heap_at). A four-arena program showed
 * StackSys 128.1 MiB, exact, against 61 KiB of real stacks. */
static void test_merged_heaps_are_not_stacks(void **state) {
  (void)state;
  uintptr_t a = free_slots();
  ms__maps_figures_t before, after;
  ms__mappings_read(&before);
  /* The end of another heap's reserve, then two heaps reserved as glibc
   * does (PROT_NONE) and made read-write as they grow (mprotect): the
   * first whole, the second 1 MiB of it. */
  map_at(a - 2 * MiB, 2 * MiB, PROT_NONE);
  map_at(a, 2 * SLOT, PROT_NONE);
  assert_int_equal(mprotect((void *)a, SLOT, PROT_READ | PROT_WRITE), 0);
  touch(a, SLOT);
  assert_int_equal(mprotect((void *)(a + SLOT), MiB, PROT_READ | PROT_WRITE),
                   0);
  touch(a + SLOT, MiB);
  heap_info(a, 0, SLOT);
  heap_info(a + SLOT, a, MiB);
  assert_true(one_line(a, a + SLOT + MiB));
  ms__mappings_read(&after);
  assert_int_equal(after.threads_stacks, before.threads_stacks);
  assert_true(after.stack_resident < before.stack_resident + MiB);
  assert_true(ms__arena_heap_at(a, a + SLOT + MiB));

  /* The second grown to its whole 64 MiB: one line of 128 MiB. */
  assert_int_equal(mprotect((void *)(a + SLOT), SLOT, PROT_READ | PROT_WRITE),
                   0);
  heap_info(a + SLOT, a, SLOT);
  assert_true(one_line(a, a + 2 * SLOT));
  ms__mappings_read(&after);
  assert_int_equal(after.threads_stacks, before.threads_stacks);
  assert_true(after.stack_resident < before.stack_resident + MiB);
  assert_true(ms__arena_heap_at(a, a + 2 * SLOT));
  munmap((void *)(a - 2 * MiB), 2 * SLOT + 2 * MiB);
}

/* A stack whose top is right below a heap's start, in one line: the stack
 * is counted up to the heap's boundary, the heap not. */
static void test_stack_below_a_heap_in_one_line(void **state) {
  (void)state;
  uintptr_t a = free_slots();
  ms__maps_figures_t before, after;
  ms__mappings_read(&before);
  map_at(a - 8 * MiB - PAGE, PAGE, PROT_NONE);
  map_at(a - 8 * MiB, 8 * MiB, PROT_READ | PROT_WRITE);
  touch(a - 512 * 1024, 512 * 1024);
  map_at(a, SLOT, PROT_NONE);
  assert_int_equal(mprotect((void *)a, 4 * MiB, PROT_READ | PROT_WRITE), 0);
  touch(a, 4 * MiB);
  heap_info(a, 0, 4 * MiB);
  if (!one_line(a - 8 * MiB, a + 4 * MiB)) {
    /* Not merged by this kernel: then it is the layouts above. */
    print_message("skipped: the stack and the heap are two lines here\n");
    munmap((void *)(a - 8 * MiB - PAGE), SLOT + 8 * MiB + PAGE);
    skip();
  }
  ms__mappings_read(&after);
  assert_int_equal(after.threads_stacks, before.threads_stacks + 1);
  assert_true(after.stack_resident >= before.stack_resident + 512 * 1024);
  assert_true(after.stack_resident < before.stack_resident + 4 * MiB);
  munmap((void *)(a - 8 * MiB - PAGE), SLOT + 8 * MiB + PAGE);
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

/* A block glibc mapped for a large malloc, placed by the kernel right
 * above a PROT_NONE mapping (as mremap may move it): it starts with its
 * chunk header (prev_size 0, its size with IS_MMAPPED), and is no stack. */
static void test_mapped_chunk_is_no_stack(void **state) {
  (void)state;
  uintptr_t a = free_slots() + 7 * MiB + 5 * PAGE;
  ms__maps_figures_t before, after;
  ms__mappings_read(&before);
  map_at(a - PAGE, PAGE, PROT_NONE);
  map_at(a, 4 * MiB, PROT_READ | PROT_WRITE);
  touch(a, 4 * MiB);
  ((uint64_t *)a)[0] = 0;
  ((uint64_t *)a)[1] = 4 * MiB | 2;
  ms__mappings_read(&after);
  assert_int_equal(after.threads_stacks, before.threads_stacks);
  assert_true(after.stack_resident < before.stack_resident + MiB);
  /* The same mapping with a stack's bottom (zeros) is one. */
  ((uint64_t *)a)[1] = 0;
  ms__mappings_read(&after);
  assert_int_equal(after.threads_stacks, before.threads_stacks + 1);
  munmap((void *)(a - PAGE), 4 * MiB + PAGE);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stack_on_heap_boundary),
      cmocka_unit_test(test_arena_heaps_are_not_stacks),
      cmocka_unit_test(test_heap_without_its_reserve_is_no_stack),
      cmocka_unit_test(test_stack_off_boundary),
      cmocka_unit_test(test_merged_heaps_are_not_stacks),
      cmocka_unit_test(test_stack_below_a_heap_in_one_line),
      cmocka_unit_test(test_mapped_chunk_is_no_stack),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
