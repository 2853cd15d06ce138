/*
 * test_pymalloc.c - the pool-header walker of Python's object allocator
 * (src/providers/pymalloc.c) on arenas laid out here as CPython's obmalloc.c
 * lays them out: an arena mapped on a page (not a pool) boundary, pools
 * carved in address order from its first pool boundary, each with its
 * header, the rest never touched. What the walker sums is what
 * sys._debugmallocstats() sums: count x block size over the pools in use.
 * A header that breaks what pymalloc guarantees (a size class out of
 * range, offsets past the pool, a free list outside it, another arena's
 * index, a pool carved after a virgin one) leaves the arena unknown: its
 * resident bytes count as in use, and it says so.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include <cmocka.h>

#include "providers/pymalloc.h"

#define KiB ((uintptr_t)1024)
#define MiB (KiB * KiB)
#define POOL (16 * KiB)
#define PAGE ((uintptr_t)4096)

static uintptr_t g_arena, g_size;

/* An arena of size bytes one page past a pool boundary, as mmap may put
 * it; room around it stays PROT_NONE, so it merges with nothing. */
static uintptr_t map_arena(uintptr_t size) {
  void *r = mmap(NULL, size + 4 * POOL, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  assert_true(r != MAP_FAILED);
  uintptr_t a = (((uintptr_t)r + POOL - 1) & ~(POOL - 1)) + PAGE;
  void *p = mmap((void *)a, size, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  assert_true(p == (void *)a);
  madvise(p, size, MADV_NOHUGEPAGE);
  g_arena = a;
  g_size = size;
  return a;
}

static int setup(void **state) {
  (void)state;
  g_arena = 0;
  return 0;
}

static int teardown(void **state) {
  (void)state;
  if (g_arena)
    munmap((void *)g_arena, g_size);
  return 0;
}

/* The i-th pool of ps bytes of the arena at a. */
static uintptr_t pool_at(uintptr_t a, uintptr_t ps, unsigned i) {
  return ((a + ps - 1) & ~(ps - 1)) + i * ps;
}

/* A pool of size class szidx with carved blocks carved and count of them
 * allocated, as allocate_from_new_pool and pymalloc_pool_extend leave it;
 * its pages up to the last carved block are touched. */
static ms__pypool_hdr_t *put_pool(uintptr_t p, uint32_t ps, uint32_t szidx,
                                  uint32_t carved, uint32_t count,
                                  uint32_t aidx) {
  uint32_t size = MS__PYPOOL_BLOCK(szidx);
  ms__pypool_hdr_t *h = (ms__pypool_hdr_t *)p;
  uint32_t next = MS__PYPOOL_OVERHEAD + carved * size;
  memset((void *)p, 0xa5, next); /* blocks written by the program */
  memset(h, 0, sizeof *h);
  h->count = count;
  h->freeblock = count < carved ? p + MS__PYPOOL_OVERHEAD + count * size : 0;
  h->nextpool = h->prevpool = 0x1000;
  h->arenaindex = aidx;
  h->szidx = szidx;
  h->nextoffset = next;
  h->maxnextoffset = ps - size;
  return h;
}

/* Three pools carved: 16-byte blocks (200 carved, 100 allocated), a full
 * pool of 512-byte blocks, an empty one; the rest never touched. */
static void lay_out(uintptr_t a) {
  put_pool(pool_at(a, POOL, 0), POOL, 0, 200, 100, 7);
  uint32_t full = (uint32_t)(POOL - MS__PYPOOL_OVERHEAD) / 512;
  put_pool(pool_at(a, POOL, 1), POOL, 31, full, full, 7);
  put_pool(pool_at(a, POOL, 2), POOL, 3, 2, 0, 7);
}

static void test_arena_counted(void **state) {
  (void)state;
  uintptr_t a = map_arena(MiB);
  lay_out(a);
  ms__pyarena_t r;
  ms__pyarena_read(a, a + MiB, &r);
  assert_int_equal(r.known, 1);
  assert_int_equal(r.mapped, MiB);
  assert_int_equal(r.pools, 2);
  assert_int_equal(r.alloc, 100 * 16 + 31 * 512);
  /* The first pool's first page (its 200 blocks end in it), the second
   * whole, the third's first page. */
  assert_int_equal(r.in_use, PAGE + POOL);
  assert_int_equal(r.resident, 2 * PAGE + POOL);
}

/* CPython before 3.10 (or built without the radix tree): 256 KiB arenas
 * of 4 KiB pools; the pool size comes from the first header. */
static void test_small_pools(void **state) {
  (void)state;
  uintptr_t a = map_arena(256 * KiB);
  put_pool(pool_at(a, PAGE, 0), PAGE, 1, 20, 20, 3);
  put_pool(pool_at(a, PAGE, 1), PAGE, 5, 4, 1, 3);
  ms__pyarena_t r;
  ms__pyarena_read(a, a + 256 * KiB, &r);
  assert_int_equal(r.known, 1);
  assert_int_equal(r.pools, 2);
  assert_int_equal(r.alloc, 20 * 32 + 1 * 96);
  assert_int_equal(r.in_use, 2 * PAGE);
}

/* Virgin pools the kernel backs anyway (transparent huge pages) are all
 * zeros: nothing in use. */
static void test_resident_virgin_pools(void **state) {
  (void)state;
  uintptr_t a = map_arena(MiB);
  lay_out(a);
  memset((void *)pool_at(a, POOL, 3), 0, 4 * POOL);
  ms__pyarena_t r;
  ms__pyarena_read(a, a + MiB, &r);
  assert_int_equal(r.known, 1);
  assert_int_equal(r.pools, 2);
  assert_int_equal(r.alloc, 100 * 16 + 31 * 512);
}

static void expect_unknown(uintptr_t a) {
  ms__pyarena_t r;
  ms__pyarena_read(a, a + MiB, &r);
  assert_int_equal(r.known, 0);
  assert_true(r.resident > 0);
  assert_int_equal(r.in_use, r.resident);
  assert_int_equal(r.alloc, r.resident);
}

static void test_bad_size_class(void **state) {
  (void)state;
  uintptr_t a = map_arena(MiB);
  lay_out(a);
  /* A pool being carved: DUMMY_SIZE_IDX for a moment. */
  ((ms__pypool_hdr_t *)pool_at(a, POOL, 1))->szidx = 0xffff;
  expect_unknown(a);
}

static void test_bad_offsets(void **state) {
  (void)state;
  uintptr_t a = map_arena(MiB);
  lay_out(a);
  ms__pypool_hdr_t *h = (ms__pypool_hdr_t *)pool_at(a, POOL, 0);
  h->nextoffset = POOL + 16; /* past the pool */
  expect_unknown(a);
  lay_out(a);
  h->nextoffset += 8; /* not on a block boundary */
  expect_unknown(a);
  lay_out(a);
  h->count = 201; /* more allocated than carved */
  expect_unknown(a);
  lay_out(a);
  h->count |= (uint64_t)1 << 40; /* the union's padding written */
  expect_unknown(a);
  lay_out(a);
  h->maxnextoffset -= 16; /* another pool size or class */
  expect_unknown(a);
}

static void test_bad_free_list(void **state) {
  (void)state;
  uintptr_t a = map_arena(MiB);
  lay_out(a);
  ms__pypool_hdr_t *h = (ms__pypool_hdr_t *)pool_at(a, POOL, 0);
  h->freeblock = pool_at(a, POOL, 1) + MS__PYPOOL_OVERHEAD; /* not its own */
  expect_unknown(a);
  lay_out(a);
  h->freeblock += 8; /* not a block */
  expect_unknown(a);
}

static void test_other_arena_index(void **state) {
  (void)state;
  uintptr_t a = map_arena(MiB);
  lay_out(a);
  ((ms__pypool_hdr_t *)pool_at(a, POOL, 2))->arenaindex = 8;
  expect_unknown(a);
}

/* pymalloc carves in address order: a pool in use after a virgin one is
 * not an arena as pymalloc makes them. */
static void test_carved_after_virgin(void **state) {
  (void)state;
  uintptr_t a = map_arena(MiB);
  lay_out(a);
  put_pool(pool_at(a, POOL, 5), POOL, 2, 3, 2, 7);
  expect_unknown(a);
}

/* An arena unmapped before it is read: nothing resident, nothing read,
 * and no fault. */
static void test_unmapped(void **state) {
  (void)state;
  uintptr_t a = map_arena(MiB);
  lay_out(a);
  munmap((void *)a, MiB);
  g_arena = 0;
  ms__pyarena_t r;
  ms__pyarena_read(a, a + MiB, &r);
  assert_int_equal(r.known, 1);
  assert_int_equal(r.resident, 0);
  assert_int_equal(r.alloc, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_arena_counted, setup, teardown),
      cmocka_unit_test_setup_teardown(test_small_pools, setup, teardown),
      cmocka_unit_test_setup_teardown(test_resident_virgin_pools, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_bad_size_class, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_offsets, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_free_list, setup, teardown),
      cmocka_unit_test_setup_teardown(test_other_arena_index, setup, teardown),
      cmocka_unit_test_setup_teardown(test_carved_after_virgin, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_unmapped, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
