/*
 * test_smaps.c - smaps_rollup on request (src/compose/snapshot.c; the
 * parser is src/common/procfs.c's): the parser on the kernel's text, on texts
 * with lines missing and on garbage; the cadence (one read per max(1 s, 100 x
 * its cost)); and the snapshot's fields and their quality with and without the
 * request (RSS always fresh from statm; cached smaps figures estimated).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include <cmocka.h>

#include "common/procfs.h"
#include "compose/snapshot.h"
#include "memstats.h"

#define BIT(f) (1u << ((f)-MS_F_KERNEL_RSS))
#define ALL                                                                    \
  (BIT(MS_F_KERNEL_RSS) | BIT(MS_F_KERNEL_LAZYFREE) |                          \
   BIT(MS_F_KERNEL_ANON_HUGE) | BIT(MS_F_KERNEL_SWAP))

/* A Linux 6.x smaps_rollup, as the kernel writes it. */
static const char k_full[] =
    "564611bc3000-7ffda5033000 ---p 00000000 00:00 0                  "
    "[rollup]\n"
    "Rss:                1684 kB\n"
    "Pss:                 530 kB\n"
    "Pss_Dirty:           112 kB\n"
    "Pss_Anon:            112 kB\n"
    "Shared_Clean:       1512 kB\n"
    "Private_Dirty:       112 kB\n"
    "Referenced:         1684 kB\n"
    "Anonymous:           112 kB\n"
    "LazyFree:          65536 kB\n"
    "AnonHugePages:      2048 kB\n"
    "ShmemPmdMapped:        0 kB\n"
    "Shared_Hugetlb:        0 kB\n"
    "Swap:                 12 kB\n"
    "SwapPss:               7 kB\n"
    "Locked:                0 kB\n";

static void test_parse_full(void **state) {
  (void)state;
  ms__smaps_t m;
  assert_int_equal(ms__parse_smaps_rollup(k_full, &m), 4);
  assert_int_equal(m.have, ALL);
  assert_int_equal(m.rss, 1684ull * 1024);
  assert_int_equal(m.lazyfree, 65536ull * 1024);
  assert_int_equal(m.anon_huge, 2048ull * 1024);
  /* "SwapPss" is not "Swap", nor is "Pss" "Rss". */
  assert_int_equal(m.swap, 12ull * 1024);
}

/* An older kernel (4.14) has no LazyFree line before 4.12 and its last
 * line may lack the newline: what is there is read, the rest is missing. */
static void test_parse_missing_lines(void **state) {
  (void)state;
  ms__smaps_t m;
  static const char old[] = "00400000-7fff0000 ---p 00000000 00:00 0 [rollup]\n"
                            "Rss:                 800 kB\n"
                            "Swap:                  0 kB";
  assert_int_equal(ms__parse_smaps_rollup(old, &m), 2);
  assert_int_equal(m.have, BIT(MS_F_KERNEL_RSS) | BIT(MS_F_KERNEL_SWAP));
  assert_int_equal(m.rss, 800ull * 1024);
  assert_int_equal(m.swap, 0);
  assert_int_equal(m.lazyfree, 0);

  assert_int_equal(ms__parse_smaps_rollup("", &m), 0);
  assert_int_equal(m.have, 0);
  assert_int_equal(ms__parse_smaps_rollup(NULL, &m), 0);
  assert_int_equal(m.have, 0);
}

/* Lines that are not "Name: <digits> kB" are skipped, never half-read. */
static void test_parse_garbage(void **state) {
  (void)state;
  ms__smaps_t m;
  static const char bad[] =
      "Rss: lots kB\n"                       /* not a number */
      "LazyFree:   12 MB\n"                  /* not kB */
      "AnonHugePages:   -4 kB\n"             /* negative */
      "Swap:   99999999999999999999999 kB\n" /* overflows in bytes */
      "Rss 5 kB\n"                           /* no colon */
      "RssAnon:   7 kB\n"                    /* another name */
      "\n\n:::\n\x01\x02\xff\n"
      "Swap:   3 kBx\n"; /* trailing junk */
  assert_int_equal(ms__parse_smaps_rollup(bad, &m), 0);
  assert_int_equal(m.have, 0);

  /* The largest value that fits in bytes is read; one more digit is not. */
  char buf[128];
  snprintf(buf, sizeof buf, "Swap: %llu kB\nRss: %llu0 kB\n",
           (unsigned long long)(UINT64_MAX / 1024),
           (unsigned long long)(UINT64_MAX / 1024));
  assert_int_equal(ms__parse_smaps_rollup(buf, &m), 1);
  assert_int_equal(m.have, BIT(MS_F_KERNEL_SWAP));
  assert_int_equal(m.swap, (UINT64_MAX / 1024) * 1024);

  /* A repeated line does not override the first. */
  assert_int_equal(ms__parse_smaps_rollup("Rss: 1 kB\nRss: 2 kB\n", &m), 1);
  assert_int_equal(m.rss, 1024);
}

/* /proc/PID/status's RssFile and RssShmem lines (ms__proc_kb), and this
 * process's own, as a snapshot reads them: what the kernel says. */
/* A file that cannot be read gives the failed call's code, which a
 * caller may print with ms_strerror(), never a bare -1. */
static void test_read_small_file_codes(void **state) {
  (void)state;
  char buf[64];
  assert_int_equal(
      ms__read_small_file("/proc/self/no-such-file", buf, sizeof buf),
      MS_ENOENT);
  assert_int_equal(ms__read_small_file("/proc/self", buf, sizeof buf), -EISDIR);
  assert_true(ms__read_small_file("/proc/self/statm", buf, sizeof buf) > 0);
}

static void test_status_lines(void **state) {
  (void)state;
  static const char text[] = "Name:\tx\nVmRSS:\t    1000 kB\n"
                             "RssAnon:\t     600 kB\nRssFile:\t     300 kB\n"
                             "RssShmem:\t     100 kB\nRssFileX: 5 kB\n";
  uint64_t v = 0;
  assert_int_equal(ms__proc_kb(text, "RssFile", &v), 1);
  assert_int_equal(v, 300 * 1024);
  assert_int_equal(ms__proc_kb(text, "RssShmem", &v), 1);
  assert_int_equal(v, 100 * 1024);
  assert_int_equal(ms__proc_kb(text, "Rss", &v), 0);
  assert_int_equal(ms__proc_kb("RssFile: 12 MB\n", "RssFile", &v), 0);
  assert_int_equal(
      ms__proc_kb("RssFile: 99999999999999999999 kB\n", "RssFile", &v), 0);
  assert_int_equal(ms__proc_kb("", "RssFile", &v), 0);

  static ms_snapshot_t s;
  char buf[4096];
  assert_int_equal(ms_snapshot_read(&s, sizeof s), 0);
  assert_true(ms__read_small_file("/proc/self/status", buf, sizeof buf) > 0);
  uint64_t file = 0, shmem = 0;
  assert_int_equal(ms__proc_kb(buf, "RssShmem", &shmem), 1);
  assert_int_equal(ms__proc_kb(buf, "RssFile", &file), 1);
  assert_int_equal(s.quality[MS_F_KERNEL_RSS_SHMEM], MS_Q_EXACT);
  assert_int_equal(s.quality[MS_F_KERNEL_RSS_FILE], MS_Q_EXACT);
  /* Shared memory this test never touches stays as it was. */
  assert_int_equal(s.kernel_rss_shmem, shmem);
  assert_true(s.kernel_rss_file > 0);
}

static void test_interval(void **state) {
  (void)state;
  ms__smaps_set_floor(1000000000ull);
  assert_int_equal(ms__smaps_interval_ns(0), 1000000000ull);
  assert_int_equal(ms__smaps_interval_ns(5000000), 1000000000ull);
  /* 20 ms a read (2 GiB resident): one read per 2 s. */
  assert_int_equal(ms__smaps_interval_ns(20000000), 2000000000ull);
  assert_int_equal(ms__smaps_interval_ns(UINT64_MAX), UINT64_MAX);
}

/* Without the request the smaps figures are unavailable and nothing is
 * read; with it they are exact. Two requests inside the cadence read
 * smaps_rollup once, and the second still says exact. The floor is raised
 * so that the test does not depend on how fast the machine is. */
static void test_snapshot_cadence(void **state) {
  (void)state;
  static ms_snapshot_t a, b, c;
  ms__smaps_set_floor(3600ull * 1000000000ull);
  uint64_t reads = ms__smaps_reads();

  assert_int_equal(ms__snapshot_read_opts(&a, sizeof a, 0), 0);
  assert_int_equal(ms__smaps_reads(), reads);
  assert_int_equal(a.quality[MS_F_KERNEL_LAZYFREE], MS_Q_UNAVAILABLE);
  assert_int_equal(a.quality[MS_F_KERNEL_ANON_HUGE], MS_Q_UNAVAILABLE);
  assert_int_equal(a.quality[MS_F_KERNEL_SWAP], MS_Q_UNAVAILABLE);
  assert_int_equal(a.quality[MS_F_KERNEL_RSS], MS_Q_EXACT); /* statm */

  assert_int_equal(ms__snapshot_read_opts(&b, sizeof b, MS__READ_SMAPS), 0);
  assert_int_equal(ms__smaps_reads(), reads + 1);
  assert_int_equal(b.quality[MS_F_KERNEL_RSS], MS_Q_EXACT);
  assert_int_equal(b.quality[MS_F_KERNEL_LAZYFREE], MS_Q_EXACT);
  assert_int_equal(b.quality[MS_F_KERNEL_ANON_HUGE], MS_Q_EXACT);
  assert_int_equal(b.quality[MS_F_KERNEL_SWAP], MS_Q_EXACT);
  assert_int_equal(b.source[MS_F_KERNEL_LAZYFREE], 0xff);
  assert_true(b.kernel_rss > 0);

  /* 64 MiB touched between the two: the cached smaps figures cannot know,
   * RSS must. */
  size_t big = (size_t)64 << 20;
  char *mem = mmap(NULL, big, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(mem != MAP_FAILED);
  memset(mem, 1, big);
  assert_int_equal(ms__snapshot_read_opts(&c, sizeof c, MS__READ_SMAPS), 0);
  assert_int_equal(ms__smaps_reads(), reads + 1);
  assert_true(c.seq > b.seq);
  /* The cached figures are estimates now, the same numbers as read. */
  assert_int_equal(c.quality[MS_F_KERNEL_LAZYFREE], MS_Q_ESTIMATED);
  assert_int_equal(c.quality[MS_F_KERNEL_SWAP], MS_Q_ESTIMATED);
  assert_int_equal(c.kernel_swap, b.kernel_swap);
  /* RSS is fresh from statm, and exact. */
  assert_int_equal(c.quality[MS_F_KERNEL_RSS], MS_Q_EXACT);
  assert_true(c.kernel_rss >= b.kernel_rss + big / 2);
  /* And it follows a release at once too. */
  assert_int_equal(munmap(mem, big), 0);
  assert_int_equal(ms__snapshot_read_opts(&c, sizeof c, MS__READ_SMAPS), 0);
  assert_int_equal(ms__smaps_reads(), reads + 1);
  assert_true(c.kernel_rss + big / 2 <= b.kernel_rss + big);
  assert_int_equal(c.quality[MS_F_KERNEL_RSS], MS_Q_EXACT);
  ms__smaps_set_floor(1000000000ull);

  /* The public call never reads smaps_rollup. */
  uint64_t before = ms__smaps_reads();
  assert_int_equal(ms_snapshot_read(&a, sizeof a), 0);
  assert_int_equal(ms__smaps_reads(), before);
  assert_int_equal(a.quality[MS_F_KERNEL_LAZYFREE], MS_Q_UNAVAILABLE);
  assert_int_equal(ms__snapshot_read_opts(NULL, sizeof a, MS__READ_SMAPS),
                   MS_EINVAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_full),
      cmocka_unit_test(test_parse_missing_lines),
      cmocka_unit_test(test_parse_garbage),
      cmocka_unit_test(test_read_small_file_codes),
      cmocka_unit_test(test_status_lines),
      cmocka_unit_test(test_interval),
      cmocka_unit_test(test_snapshot_cadence),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
