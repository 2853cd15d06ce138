/*
 * test_kernel_view.c - the allocators' figures against the kernel's view,
 * in real programs under the preload that read their own snapshot and
 * their /proc/self/status (MEMSTATS_AGENT=0: no socket).
 *
 * glibc: tests/progs/pl_arenas, four threads each filling its own arena
 * past one 64 MiB heap. An arena's second heap lands right above its full
 * first one about one run in three, and the kernel then shows both as one
 * read-write line above a PROT_NONE one, as a thread stack looks: such a
 * line was counted as a stack, exact (StackInuse 146 MiB against 70 KiB
 * of real stacks, Ready 50% over the anonymous RSS). Twenty runs, so that
 * the layout comes up (on the old code, all twenty passed about once in a
 * thousand).
 *
 * In every run: the stacks' resident part is what four threads, the main
 * one and the libraries' touch (well under 4 MiB), and Ready, the backed
 * part of Sys, is at most the anonymous RSS and a little (RSS/32 and
 * 4 MiB: the program's own data and bss are not in Ready, but the heaps'
 * resident pages are read a moment before /proc is).
 *
 * Then a trim between two of glibc's samples (test_trim_between_samples),
 * and jemalloc's own count of its resident pages (test_jemalloc_resident).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/host.h"
#include "support/target.h"

#define RUNS 20
#define MiB (1024.0 * 1024.0)
#define PER_THREAD_MIB 72 /* past one heap: two per arena */

static char build[1024], preload[1200], prog[1200], dir[64];

static int setup(void **state) {
  (void)state;
  if (host_build_dir(build, sizeof build) != 0 ||
      host_preload_path(build, preload, sizeof preload) != 0)
    return -1;
  snprintf(prog, sizeof prog, "%s/progs/pl_arenas", build);
  return target_dir_setup(dir, sizeof dir, "/tmp/ms-kview-XXXXXX");
}

static int teardown(void **state) {
  (void)state;
  return target_dir_remove(dir);
}

/* The value of the line "key=..." in the program's output, or -1. */
static double value(const char *out, const char *key) {
  size_t n = strlen(key);
  for (const char *p = out; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : p)
    if (strncmp(p, key, n) == 0 && p[n] == '=')
      return strtod(p + n + 1, NULL);
  return -1;
}

/* Runs a program of tests/progs with up to two arguments (NULL: fewer)
 * until it says "done"; its whole output in out. */
static void run_prog(char *out, size_t len, const char *path, const char *arg1,
                     const char *arg2) {
  char pre[1300];
  snprintf(pre, sizeof pre, "LD_PRELOAD=%s", preload);
  const char *argv[] = {path, arg1, arg2, NULL};
  const char *env[] = {pre, "MEMSTATS_AGENT=0", NULL};
  target_t t;
  target_exec(&t, argv, dir, env, NULL, NULL, 0);
  size_t n = 0;
  char line[256];
  out[0] = '\0';
  while (target_read_line(t.out, line, sizeof line) == 0) {
    n += (size_t)snprintf(out + n, len - n, "%s\n", line);
    if (n >= len - 1 || strcmp(line, "done") == 0)
      break;
  }
  int st = target_wait(&t);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
    fail_msg("%s: wait status %d, said:\n%s", path, st, out);
}

/* Runs pl_arenas once (with mode, if not NULL). */
static void run_once(char *out, size_t len, const char *mode) {
  char mib[16];
  snprintf(mib, sizeof mib, "%d", PER_THREAD_MIB);
  run_prog(out, len, prog, mib, mode);
}

static void test_merged_heaps(void **state) {
  (void)state;
  for (int i = 0; i < RUNS; i++) {
    char out[2048];
    run_once(out, sizeof out, NULL);
    double stack = value(out, "stack_inuse"), ready = value(out, "ready");
    double anon = value(out, "anon"), alloc = value(out, "heap_alloc");
    double data = value(out, "data");
    print_message("run %d: StackInuse %.2f MiB (StackSys %.2f), HeapAlloc "
                  "%.1f MiB, data %.1f MiB, Ready %.1f MiB, RssAnon %.1f "
                  "MiB\n",
                  i, stack / MiB, value(out, "stack_sys") / MiB, alloc / MiB,
                  data / MiB, ready / MiB, anon / MiB);
    /* The program filled its arenas and read its snapshot. */
    assert_true(alloc >= 4.0 * PER_THREAD_MIB * MiB);
    assert_true(anon > 0);
    if (stack >= 4 * MiB)
      fail_msg("run %d: StackInuse %.1f MiB: a heap taken for a stack", i,
               stack / MiB);
    if (ready > anon + anon / 32 + 4 * MiB)
      fail_msg("run %d: Ready %.1f MiB over the anonymous RSS %.1f MiB", i,
               ready / MiB, anon / MiB);
  }
}

/* The threads free everything and the program trims its arenas
 * (malloc_trim): 290 MiB handed back. In a snapshot between two of glibc's
 * samples (its figures shifted by the frees since the last one) whose
 * mappings were read after the trim, Ready is at most the anonymous RSS
 * and a little, as above: the kernel's view of the heaps bounds the
 * shifted figures. Before, the trimmed memory stayed backed and idle until
 * the next sample (Ready 295 MiB against 1.3 MiB of anonymous RSS). A run
 * whose snapshot came after a new sample (nothing shifted) is run again. */
static void test_trim_between_samples(void **state) {
  (void)state;
  for (int i = 0; i < 5; i++) {
    char out[4096];
    run_once(out, sizeof out, "trim");
    if (value(out, "trim.shifted") != 1)
      continue;
    double ready = value(out, "trim.ready"), anon = value(out, "trim.anon");
    print_message(
        "after the trim: HeapAlloc %.1f MiB, HeapInuse %.1f MiB, "
        "HeapSys %.1f MiB, HeapReleased %.1f MiB, Ready %.1f MiB, "
        "RssAnon %.1f MiB\n",
        value(out, "trim.heap_alloc") / MiB,
        value(out, "trim.heap_inuse") / MiB, value(out, "trim.heap_sys") / MiB,
        value(out, "trim.heap_released") / MiB, ready / MiB, anon / MiB);
    assert_true(anon > 0);
    if (ready > anon + anon / 32 + 4 * MiB)
      fail_msg("Ready %.1f MiB over the anonymous RSS %.1f MiB after the "
               "trim",
               ready / MiB, anon / MiB);
    /* The sample says its age (HeapSampleAge, what the live view shows
     * when it is old): taken before the trim, which the program followed
     * with 300 ms of sleep. */
    assert_true(value(out, "trim.sample_age_ns") >= 300e6);
    return;
  }
  print_message("skipped: every snapshot came after a new sample\n");
  skip();
}

/* jemalloc at start (a program linked with it, a thousand small blocks):
 * its stats.resident counts a page resident once it hands it out, and
 * Ready, built from it, read 3.5 MB against 1.0 MB of anonymous RSS for
 * the whole process (Redis at start: 5.27 MB against 3.51 MB). The
 * resident pages of jemalloc's own mappings, which the interposer lists,
 * bound it now: Ready is at most the process's anonymous RSS. */
static void test_jemalloc_resident(void **state) {
  (void)state;
  if (!host_have_library("libjemalloc.so.2"))
    skip();
  char path[1300], out[2048];
  snprintf(path, sizeof path, "%s/progs/pl_je_view", build);
  run_prog(out, sizeof out, path, NULL, NULL);
  double ready = value(out, "ready"), anon = value(out, "anon");
  print_message("jemalloc: Ready %.2f MiB (stats.resident %.2f MiB, MSpanSys "
                "%.2f MiB, HeapSys %.2f MiB, HeapReleased %.2f MiB), RssAnon "
                "%.2f MiB\n",
                ready / MiB, value(out, "je_resident") / MiB,
                value(out, "mspan_sys") / MiB, value(out, "heap_sys") / MiB,
                value(out, "heap_released") / MiB, anon / MiB);
  assert_true(anon > 0 && ready > 0);
  if (ready > anon)
    fail_msg("Ready %.2f MiB over the anonymous RSS %.2f MiB", ready / MiB,
             anon / MiB);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_merged_heaps),
      cmocka_unit_test(test_trim_between_samples),
      cmocka_unit_test(test_jemalloc_resident),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
