/*
 * test_profile_sampler.c - the heap profiler's parts inside the target,
 * without a process around them: the sampler's intervals (mean within a few
 * percent of the rate, rate 1 every allocation, rate 0 never), fastlog2, and
 * the bucket table (buckets by stack and size, frees by address, the filter, a
 * full table counted as dropped, Go's three-stage cut), and what of the
 * table's memory is backed (BuckHashSys: exactly the pages the kernel
 * counts in the mapping's Rss, a few for a few samples).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "profile/profile.h"

static void test_fastlog2(void **state) {
  (void)state;
  for (double x = 1; x < 1e8; x *= 1.37)
    assert_true(fabs(ms__prof_fastlog2(x) - log2(x)) < 0.01);
}

static void check_mean(uint64_t rate) {
  ms__prof_rng_t r = {0x1234567u + rate};
  const int n = 200000;
  double sum = 0;
  for (int i = 0; i < n; i++) {
    int64_t v = ms__prof_next_interval(&r, rate);
    assert_true(v >= 1);
    sum += (double)v;
  }
  double mean = sum / n;
  /* The standard error of the mean of an exponential is rate/sqrt(n),
   * 0.22% here: 3% is far outside chance and inside fastlog2's error. */
  assert_true(mean > 0.97 * (double)rate && mean < 1.03 * (double)rate);
}

static void test_interval_mean(void **state) {
  (void)state;
  check_mean(524288);
  check_mean(4096);
  check_mean(100);
}

static void test_interval_edges(void **state) {
  (void)state;
  ms__prof_rng_t r = {42};
  for (int i = 0; i < 1000; i++) {
    /* Rate 1: the countdown is 1, so any allocation (size >= 1) takes
     * it below zero: every one is sampled. */
    assert_int_equal(ms__prof_next_interval(&r, 1), 1);
    /* Rate 0: never runs out. */
    assert_int_equal(ms__prof_next_interval(&r, 0), INT64_MAX);
  }
}

static ms__prof_table_t g_t;
static uint64_t g_live;

static int setup_table(void **state) {
  (void)state;
  if (ms__prof_table_init(&g_t, 4, 16, 64) != 0)
    return -1;
  g_live = 0;
  g_t.live = &g_live;
  return 0;
}

static int teardown_table(void **state) {
  (void)state;
  ms__prof_table_destroy(&g_t);
  return 0;
}

static const ms__prof_bucket_t *bucket_of(uint64_t size, uint64_t pc) {
  for (uint32_t i = 0; i < g_t.nbuckets; i++)
    if (g_t.buckets[i].size == size && g_t.buckets[i].depth == 1 &&
        g_t.stacks[g_t.buckets[i].stack_off] == pc)
      return &g_t.buckets[i];
  return NULL;
}

static void test_table_insert_free(void **state) {
  (void)state;
  uint64_t s1[1] = {0x1000}, s2[1] = {0x2000};
  static char blocks[8];
  assert_int_equal(ms__prof_table_alloc(&g_t, s1, 1, 0, 32, &blocks[0]), 0);
  assert_int_equal(ms__prof_table_alloc(&g_t, s1, 1, 0, 32, &blocks[1]), 0);
  assert_int_equal(ms__prof_table_alloc(&g_t, s2, 1, 0, 32, &blocks[2]), 0);
  assert_int_equal(ms__prof_table_alloc(&g_t, s1, 1, 0, 64, &blocks[3]), 0);
  assert_int_equal(g_t.nbuckets, 3); /* (s1,32) (s2,32) (s1,64) */
  assert_int_equal(g_live, 4);
  assert_true(ms__prof_table_maybe(&g_t, &blocks[1]));
  assert_int_equal(ms__prof_table_free(&g_t, &blocks[1]), 1);
  assert_int_equal(ms__prof_table_free(&g_t, &blocks[1]), 0); /* once */
  assert_int_equal(ms__prof_table_free(&g_t, &blocks[5]), 0); /* never */
  assert_int_equal(g_live, 3);
  ms__prof_table_cut(&g_t);
  const ms__prof_bucket_t *b = bucket_of(32, 0x1000);
  assert_non_null(b);
  assert_int_equal(b->active.allocs, 2);
  assert_int_equal(b->active.alloc_bytes, 64);
  assert_int_equal(b->active.frees, 1);
  assert_int_equal(b->active.free_bytes, 32);
  assert_int_equal(bucket_of(64, 0x1000)->active.allocs, 1);
  assert_int_equal(bucket_of(32, 0x2000)->active.allocs, 1);
  /* Every other sampled block freed: nothing live, the filter empty. */
  ms__prof_table_free(&g_t, &blocks[0]);
  ms__prof_table_free(&g_t, &blocks[2]);
  ms__prof_table_free(&g_t, &blocks[3]);
  assert_int_equal(g_live, 0);
  for (int i = 0; i < 8; i++)
    assert_false(ms__prof_table_maybe(&g_t, &blocks[i]));
}

/* Pinned addresses (the preload's bootstrap blocks: ms__prof_pin) stay
 * in the filter, whatever is sampled and freed there, and only they. */
static void test_table_pin(void **state) {
  (void)state;
  uint64_t s1[1] = {0x1000};
  static _Alignas(16) char blocks[64];
  ms__prof_table_pin(&g_t, (uintptr_t)blocks, 48);
  for (int i = 0; i < 48; i += 16)
    assert_true(ms__prof_table_maybe(&g_t, &blocks[i]));
  assert_int_equal(ms__prof_table_alloc(&g_t, s1, 1, 0, 16, &blocks[16]), 0);
  assert_int_equal(ms__prof_table_free(&g_t, &blocks[16]), 1);
  assert_true(ms__prof_table_maybe(&g_t, &blocks[16]));
  assert_int_equal(g_live, 0);
  /* A forget (memtop attach --track's second attach) keeps them. */
  ms__prof_table_forget(&g_t);
  for (int i = 0; i < 48; i += 16)
    assert_true(ms__prof_table_maybe(&g_t, &blocks[i]));
  /* A slot no pinned step shares is clear. */
  uint32_t last = ms__prof_filter_index(&blocks[48]);
  int shared = 0;
  for (int i = 0; i < 48; i += 16)
    shared |= ms__prof_filter_index(&blocks[i]) == last;
  if (!shared)
    assert_false(ms__prof_table_maybe(&g_t, &blocks[48]));
}

/* realloc's two halves: a block taken out and put back (the realloc
 * failed) is in the table again, in its bucket, not counted freed; one
 * taken out and counted freed is gone, counted once. */
static void test_table_take_put(void **state) {
  (void)state;
  uint64_t s1[1] = {0x1000};
  static char blocks[4];
  assert_int_equal(ms__prof_table_alloc(&g_t, s1, 1, 0, 32, &blocks[0]), 0);
  assert_int_equal(ms__prof_table_alloc(&g_t, s1, 1, 0, 32, &blocks[1]), 0);
  assert_int_equal(ms__prof_table_take(&g_t, &blocks[2]), 0); /* never */
  uint64_t k0 = ms__prof_table_take(&g_t, &blocks[0]);
  uint64_t k1 = ms__prof_table_take(&g_t, &blocks[1]);
  assert_true(k0 != 0 && k1 != 0);
  assert_int_equal(g_live, 0);
  assert_int_equal(ms__prof_table_take(&g_t, &blocks[0]), 0); /* out */
  ms__prof_table_put(&g_t, &blocks[0], k0);
  ms__prof_table_count_free(&g_t, k1);
  assert_int_equal(g_live, 1);
  assert_true(ms__prof_table_maybe(&g_t, &blocks[0]));
  ms__prof_table_cut(&g_t);
  const ms__prof_bucket_t *b = bucket_of(32, 0x1000);
  assert_non_null(b);
  assert_int_equal(b->active.allocs, 2);
  assert_int_equal(b->active.frees, 1);
  assert_int_equal(ms__prof_table_free(&g_t, &blocks[0]), 1);
  assert_int_equal(g_live, 0);
}

static void test_table_full(void **state) {
  (void)state;
  static char blocks[64];
  uint64_t st[1];
  int ok = 0;
  /* Four buckets: sizes 1..10 need ten. */
  for (int i = 0; i < 10; i++) {
    st[0] = 0x1000;
    if (ms__prof_table_alloc(&g_t, st, 1, 0, (uint64_t)i + 1, &blocks[i]) == 0)
      ok++;
  }
  assert_int_equal(ok, 4);
  assert_int_equal(g_t.dropped, 6);
  /* The address table (16 slots, kept 3/4 full) fills too. */
  for (int i = 10; i < 30; i++) {
    st[0] = 0x1000;
    ms__prof_table_alloc(&g_t, st, 1, 0, 1, &blocks[i]);
  }
  assert_int_equal(g_t.naddr, 12);
  assert_int_equal(g_t.dropped, 6 + 20 - 8);
  /* Every entry is still found after deletions by backward shift. */
  for (int i = 0; i < 30; i++)
    ms__prof_table_free(&g_t, &blocks[i]);
  assert_int_equal(g_t.naddr, 0);
  assert_int_equal(g_live, 0);
}

static void test_three_stage_cut(void **state) {
  (void)state;
  uint64_t st[1] = {0x3000};
  static char blocks[4];
  ms__prof_table_alloc(&g_t, st, 1, 0, 16, &blocks[0]);
  ms__prof_table_alloc(&g_t, st, 1, 0, 16, &blocks[1]);
  const ms__prof_bucket_t *b = bucket_of(16, 0x3000);
  /* Before a cut, a profile sees nothing of this cycle. */
  assert_int_equal(b->active.allocs, 0);
  ms__prof_table_cut(&g_t);
  assert_int_equal(b->active.allocs, 2);
  assert_int_equal(b->active.frees, 0);
  /* A free after the cut shows only at the next one. */
  ms__prof_table_free(&g_t, &blocks[0]);
  assert_int_equal(b->active.frees, 0);
  ms__prof_table_cut(&g_t);
  assert_int_equal(b->active.frees, 1);
  assert_int_equal(b->active.allocs, 2);
  /* Cuts with nothing new change nothing; the slots are cleared. */
  ms__prof_table_cut(&g_t);
  ms__prof_table_cut(&g_t);
  assert_int_equal(b->active.allocs, 2);
  assert_int_equal(b->active.frees, 1);
  for (int i = 0; i < 3; i++)
    assert_int_equal(b->future[i].allocs + b->future[i].frees, 0);
  /* A block whose address comes back sampled was freed unseen: counted
   * freed then. */
  ms__prof_table_alloc(&g_t, st, 1, 0, 16, &blocks[1]);
  ms__prof_table_cut(&g_t);
  assert_int_equal(b->active.allocs, 3);
  assert_int_equal(b->active.frees, 2);
}

/* The Rss of the mapping that starts at map, in bytes, as the kernel
 * counts it in /proc/self/smaps (a page only read maps the zero page,
 * which it does not count); -1 if not found. */
static long long rss_of(const void *map) {
  FILE *f = fopen("/proc/self/smaps", "r");
  if (f == NULL)
    return -1;
  char line[512];
  int in = 0;
  long long rss = -1;
  while (fgets(line, sizeof line, f) != NULL) {
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') != NULL &&
        line[0] != ' ' && strstr(line, "kB") == NULL) {
      in = lo == (unsigned long)(uintptr_t)map;
      continue;
    }
    long long kb;
    if (in && sscanf(line, "Rss: %lld kB", &kb) == 1) {
      rss = kb * 1024;
      break;
    }
  }
  fclose(f);
  return rss;
}

/* A table of the sampler's default size (4,096 buckets, 16,384 address
 * slots: 352 KiB of filter, heads and addresses) backs only the pages
 * written, and counts exactly those: one when made (the bitmap of the
 * pages written), a handful more for a few samples, none more for frees
 * of unsampled blocks (which read the filter), a forget or a fork. Every
 * page backed is one more a fork copies and a child's exit frees (issue
 * 18 item 12). The table of before wrote all 88 pages of the fixed parts
 * when it was made. */
static void test_table_backs_what_it_writes(void **state) {
  (void)state;
  static ms__prof_table_t t;
  assert_int_equal(ms__prof_table_init(&t, 4096, 16384, 4096 * 32), 0);
  assert_int_equal(rss_of(t.map), 4096);
  assert_int_equal(t.touched, 4096);
  uint64_t st[2] = {0x1000, 0x2000};
  static char blocks[8][64];
  for (int i = 0; i < 4; i++)
    assert_int_equal(
        ms__prof_table_alloc(&t, st, 2, 0, 64, (const void *)blocks[i]), 0);
  /* The bitmap, bucket and stack prefixes one page each, one page of
   * heads, at most four of addresses and four of the filter. */
  long long rss = rss_of(t.map);
  print_message("4 samples: %lld bytes backed, %zu counted\n", rss, t.touched);
  assert_int_equal(rss, (long long)t.touched);
  assert_true(rss >= 6 * 4096 && rss <= 12 * 4096);
  /* Frees of blocks never sampled read the filter everywhere. */
  static char other[4096];
  for (int i = 0; i < 4096; i += 16)
    assert_int_equal(ms__prof_table_free(&t, &other[i]), 0);
  assert_int_equal(rss_of(t.map), rss);
  pid_t c = fork();
  assert_true(c >= 0);
  if (c == 0) {
    /* The child's copy frees one and samples one more: as the parent's. */
    int ok = ms__prof_table_free(&t, blocks[0]) == 1 &&
             ms__prof_table_alloc(&t, st, 2, 0, 64, blocks[5]) == 0 &&
             rss_of(t.map) == (long long)t.touched;
    _exit(ok ? 0 : 1);
  }
  int wst;
  assert_int_equal(waitpid(c, &wst, 0), c);
  assert_true(WIFEXITED(wst) && WEXITSTATUS(wst) == 0);
  /* A pinned range (jemalloc's bootstrap blocks) writes filter bytes
   * too: their pages are counted as any other write's. */
  static char pinned[4096 * 8];
  ms__prof_table_pin(&t, (uintptr_t)pinned, sizeof pinned);
  long long pinned_rss = rss_of(t.map);
  assert_true(pinned_rss > rss);
  assert_int_equal(pinned_rss, (long long)t.touched);
  ms__prof_table_forget(&t);
  assert_int_equal(rss_of(t.map), pinned_rss);
  assert_int_equal(t.touched, (size_t)pinned_rss);
  for (int i = 0; i < 4; i++)
    assert_false(ms__prof_table_maybe(&t, blocks[i]));
  assert_true(ms__prof_table_maybe(&t, &pinned[sizeof pinned / 2]));
  assert_int_equal(t.naddr, 0);
  ms__prof_table_destroy(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_table_backs_what_it_writes),
      cmocka_unit_test(test_fastlog2),
      cmocka_unit_test(test_interval_mean),
      cmocka_unit_test(test_interval_edges),
      cmocka_unit_test_setup_teardown(test_table_insert_free, setup_table,
                                      teardown_table),
      cmocka_unit_test_setup_teardown(test_table_pin, setup_table,
                                      teardown_table),
      cmocka_unit_test_setup_teardown(test_table_take_put, setup_table,
                                      teardown_table),
      cmocka_unit_test_setup_teardown(test_table_full, setup_table,
                                      teardown_table),
      cmocka_unit_test_setup_teardown(test_three_stage_cut, setup_table,
                                      teardown_table),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
