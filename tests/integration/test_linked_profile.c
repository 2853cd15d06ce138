/*
 * test_linked_profile.c - the heap profile of a program that links
 * libmemstats (no preload): tests/progs/rt_prof, whose own bump arena
 * reports its objects with ms_object_alloc_at / ms_object_free_at, read
 * by the real memtop over the real socket.
 *
 * At MEMSTATS_PROFILE_RATE=1 every object is sampled: memtop's JSON
 * (--once --json --sites) and the real `go tool pprof -top` give the
 * allocator's function (arena_alloc) all 64000 bytes in use, f_big three
 * times f_small's bytes through it (48000 and 16000, exact), and f_freed,
 * whose 16 objects were all freed, nothing in use and its 16000 bytes in
 * alloc_space. The snapshot counts the same objects as ms_object_alloc
 * would.
 *
 * At MEMSTATS_PROFILE_RATE=0 there is no profile (memtop says profiling is
 * off, exit 1), nothing was set up for one (BuckHashSys 0, the unwinder's
 * libgcc_s not loaded), and the agent serves its snapshots as before.
 * And the calls cost what ms_object_alloc/free cost plus a branch each:
 * counted in instructions by callgrind (the same on a loaded machine as on
 * a quiet one), as test_hotpath_cost counts the preload's.
 */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/callgrind.h"
#include "support/host.h"
#include "support/pprof_top.h"
#include "support/run.h"
#include "support/target.h"

static char g_build[1024], g_memtop[1200], g_prog[1200], g_dir[64];
static run_result_t g_res;

/* rt_prof at rate (MEMSTATS_PROFILE_RATE's value), ready. */
static void start(target_t *t, const char *rate) {
  char env_rate[64], line[128];
  int pid = 0;
  snprintf(env_rate, sizeof env_rate, "MEMSTATS_PROFILE_RATE=%s", rate);
  const char *env[] = {env_rate, NULL};
  target_spawn(t, g_prog, g_dir, env, NULL, NULL, 0, line, sizeof line);
  assert_int_equal(sscanf(line, "ready %d", &pid), 1);
  assert_int_equal(pid, t->pid);
}

/* Runs memtop with the arguments (NULL-ended) into g_res; its status. */
static int mt(const char *first, ...) {
  va_list ap;
  va_start(ap, first);
  int st = run_capture_va(&g_res, g_memtop, -1, NULL, first, ap);
  va_end(ap);
  g_res.out[g_res.nout] = '\0';
  g_res.err[g_res.nerr] = '\0';
  return st;
}

/* The JSON line of `memtop --once --json [--sites 20] PID`. */
static json_t *once_json(pid_t pid, int sites) {
  json_error_t err;
  int st = sites
               ? mt("--once", "--json", "--sites", "20", run_pidstr(pid), NULL)
               : mt("--once", "--json", run_pidstr(pid), NULL);
  if (st != 0)
    fail_msg("memtop --once --json: exit %d: %s", st, g_res.err);
  json_t *root = json_loads(g_res.out, 0, &err);
  if (root == NULL)
    fail_msg("memtop's JSON: %s: %.200s", err.text, g_res.out);
  return root;
}

static long long mem_field(json_t *root, const char *name) {
  json_t *v = json_object_get(json_object_get(root, "memstats"), name);
  assert_true(json_is_integer(v));
  return (long long)json_integer_value(v);
}

/* A site of the JSON profile by function, or NULL. */
static json_t *site(json_t *root, const char *fn) {
  json_t *sites = json_object_get(json_object_get(root, "profile"), "sites"),
         *s;
  size_t i;
  json_array_foreach(sites, i, s) {
    const char *f = json_string_value(json_object_get(s, "function"));
    if (f != NULL && strcmp(f, fn) == 0)
      return s;
  }
  return NULL;
}

static long long site_field(json_t *root, const char *fn, const char *name) {
  json_t *s = site(root, fn);
  if (s == NULL)
    fail_msg("no site %s in memtop's JSON", fn);
  json_t *v = json_object_get(s, name);
  assert_true(json_is_integer(v));
  return (long long)json_integer_value(v);
}

/* Whether the process has a file whose name contains name mapped. */
static int maps_has(pid_t pid, const char *name) {
  char path[64], line[1024];
  int found = 0;
  snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  while (fgets(line, sizeof line, f) != NULL)
    found |= strstr(line, name) != NULL;
  fclose(f);
  return found;
}

/* The process's own sanitizer runtime may bring libgcc_s in: the check
 * that nothing was loaded is for plain builds. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define PLAIN_BUILD 0
#else
#define PLAIN_BUILD 1
#endif

/* Rate 1: the snapshot's exact counts, memtop's sites and its text list. */
static void test_rate1_sites(void **state) {
  target_t t;
  (void)state;
  start(&t, "1");
  json_t *root = once_json(t.pid, 1);
  assert_int_equal(
      mt("profile", "--format", "text", "-o", "-", run_pidstr(t.pid), NULL), 0);
  int unwinder_loaded = maps_has(t.pid, "libgcc_s");
  assert_int_equal(target_wait(&t), 0);

  /* Counted as ms_object_alloc/free count: 80 allocated, 16 freed. */
  assert_int_equal(mem_field(root, "Mallocs"), 80);
  assert_int_equal(mem_field(root, "Frees"), 16);
  assert_int_equal(mem_field(root, "HeapObjects"), 64);
  assert_int_equal(mem_field(root, "HeapAlloc"), 64000);
  assert_int_equal(mem_field(root, "TotalAlloc"), 80000);
  /* The profile's table is mapped and counted. */
  assert_true(mem_field(root, "BuckHashSys") > 0);
  if (PLAIN_BUILD)
    assert_true(unwinder_loaded);

  json_t *prof = json_object_get(root, "profile");
  assert_non_null(prof);
  assert_int_equal(json_integer_value(json_object_get(prof, "rate")), 1);
  assert_true(json_is_false(json_object_get(prof, "estimated")));
  /* The allocator's function holds everything, exactly. */
  assert_int_equal(site_field(root, "arena_alloc", "inuse_space"), 64000);
  assert_int_equal(site_field(root, "arena_alloc", "inuse_objects"), 64);
  assert_int_equal(site_field(root, "arena_alloc", "alloc_space"), 80000);
  assert_int_equal(site_field(root, "arena_alloc", "alloc_objects"), 80);
  /* Its callers through it: three times as much for f_big. */
  assert_int_equal(site_field(root, "f_big", "cum_inuse_space"), 48000);
  assert_int_equal(site_field(root, "f_small", "cum_inuse_space"), 16000);
  if (site(root, "f_freed") != NULL)
    assert_int_equal(site_field(root, "f_freed", "cum_inuse_space"), 0);
  /* The call chain of the stack that holds most there, innermost first:
   * the allocator's function, f_big that called it, then main. */
  json_t *chain = json_object_get(site(root, "arena_alloc"), "chain");
  assert_true(json_is_array(chain));
  assert_true(json_array_size(chain) >= 3);
  const char *want[] = {"arena_alloc", "f_big"};
  for (size_t i = 0; i < 2; i++) {
    json_t *fr = json_array_get(chain, i);
    const char *f = json_string_value(json_object_get(fr, "function"));
    if (f == NULL || strcmp(f, want[i]) != 0)
      fail_msg("frame %zu of arena_alloc's chain is %s, not %s", i,
               f != NULL ? f : "null", want[i]);
    assert_non_null(
        strstr(json_string_value(json_object_get(fr, "file")), "rt_prof.c"));
    assert_true(json_integer_value(json_object_get(fr, "line")) > 0);
  }
  int has_main = 0;
  for (size_t i = 2; i < json_array_size(chain); i++) {
    const char *f = json_string_value(
        json_object_get(json_array_get(chain, i), "function"));
    has_main |= f != NULL && strcmp(f, "main") == 0;
  }
  assert_true(has_main);
  assert_true(json_is_false(
      json_object_get(site(root, "arena_alloc"), "chain_truncated")));
  json_decref(root);

  assert_non_null(strstr(g_res.out, "Every allocation recorded: figures are "
                                    "exact\n"));
  assert_non_null(strstr(g_res.out, "Total: 62.5KiB in 64 objects"));
  assert_non_null(strstr(g_res.out, "         64  arena_alloc "));
  assert_non_null(strstr(g_res.out, "46.9KiB  75.0%          0  f_big "));
  assert_non_null(strstr(g_res.out, "15.6KiB  25.0%          0  f_small "));
  assert_non_null(strstr(g_res.out, "rt_prof.c:"));
}

/* Rate 1 through the real pprof: in use and allocated, by function. */
static void test_rate1_pprof(void **state) {
  static char top[64 * 1024];
  char file[256];
  long long flat, cum;
  target_t t;

  (void)state;
  if (!host_have_program("go")) {
    print_message("skipped: go (golang-go) is not installed\n");
    skip();
  }
  start(&t, "1");
  snprintf(file, sizeof file, "%s/rt.pb.gz", g_dir);
  int st = mt("profile", "-o", file, run_pidstr(t.pid), NULL);
  assert_int_equal(target_wait(&t), 0);
  if (st != 0)
    fail_msg("memtop profile: exit %d: %s", st, g_res.err);

  assert_int_equal(pprof_top(file, NULL, g_dir, top, sizeof top), 0);
  assert_int_equal(pprof_top_values(top, "arena_alloc", &flat, &cum), 0);
  assert_int_equal(flat, 64000);
  assert_int_equal(pprof_top_values(top, "f_big", &flat, &cum), 0);
  assert_int_equal(flat, 0);
  assert_int_equal(cum, 48000);
  assert_int_equal(pprof_top_values(top, "f_small", &flat, &cum), 0);
  assert_int_equal(cum, 16000);
  /* Nothing of f_freed in use. */
  if (pprof_top_values(top, "f_freed", &flat, &cum) == 0)
    assert_int_equal(cum, 0);

  assert_int_equal(pprof_top(file, "alloc_space", g_dir, top, sizeof top), 0);
  assert_int_equal(pprof_top_values(top, "arena_alloc", &flat, &cum), 0);
  assert_int_equal(flat, 80000);
  assert_int_equal(pprof_top_values(top, "f_freed", &flat, &cum), 0);
  assert_int_equal(cum, 16000);
  assert_int_equal(pprof_top_values(top, "f_big", &flat, &cum), 0);
  assert_int_equal(cum, 48000);
  unlink(file);
}

/* Rate 0: no profile and nothing set up for one; the snapshots as ever. */
static void test_rate0(void **state) {
  target_t t;
  (void)state;
  start(&t, "0");
  int st = mt("profile", "-o", "-", run_pidstr(t.pid), NULL);
  assert_int_equal(st, 1);
  assert_non_null(strstr(g_res.err, "heap profiling is off"));
  json_t *root = once_json(t.pid, 0);
  int unwinder_loaded = maps_has(t.pid, "libgcc_s");
  assert_int_equal(target_wait(&t), 0);

  assert_int_equal(mem_field(root, "Mallocs"), 80);
  assert_int_equal(mem_field(root, "Frees"), 16);
  assert_int_equal(mem_field(root, "HeapAlloc"), 64000);
  assert_int_equal(mem_field(root, "BuckHashSys"), 0);
  if (PLAIN_BUILD)
    assert_false(unwinder_loaded);
  json_decref(root);
}

/* The default rate in a program that reports nothing with an address:
 * the sampler's table is not made (BuckHashSys 0: its 380 KiB of filter,
 * heads and address slots were backed at start-up in every linked
 * program before), and a profile asked for is served all the same, empty,
 * the agent making the table then. */
static void test_default_rate_nothing_sampled(void **state) {
  target_t t;
  char line[128];
  int pid = 0;
  const char *argv[] = {g_prog, "idle", NULL};
  /* Every snapshot computed afresh: the one after the profile must not be
   * the one cached before it. */
  const char *env[] = {"MEMSTATS_PROFILE_RATE", "MEMSTATS_MIN_INTERVAL_MS=0",
                       NULL};
  (void)state;
  target_exec(&t, argv, g_dir, env, NULL, NULL, 0);
  assert_int_equal(target_read_line(t.out, line, sizeof line), 0);
  assert_int_equal(sscanf(line, "ready %d", &pid), 1);
  json_t *before = once_json(t.pid, 0);
  int st = mt("profile", "--format", "text", run_pidstr(t.pid), NULL);
  if (st != 0)
    fail_msg("memtop profile: exit %d: %s", st, g_res.err);
  if (strstr(g_res.out, "heap profile") == NULL ||
      strstr(g_res.out, "0 objects") == NULL)
    fail_msg("memtop profile said: %s", g_res.out);
  json_t *after = once_json(t.pid, 0);
  assert_int_equal(target_wait(&t), 0);

  assert_int_equal(mem_field(before, "BuckHashSys"), 0);
  assert_true(mem_field(after, "BuckHashSys") > 0);
  json_decref(before);
  json_decref(after);
}

/* The instructions `valgrind --tool=callgrind rt_prof MODE PAIRS` counts
 * at MEMSTATS_PROFILE_RATE=0. */
static unsigned long long collected(const char *mode, long pairs) {
  char n[32], why[512];
  unsigned long long total = 0;
  snprintf(n, sizeof n, "%ld", pairs);
  const char *argv[] = {g_prog, mode, n, NULL};
  const char *env[] = {"MEMSTATS_PROFILE_RATE=0", "MEMSTATS_AGENT=0", NULL};
  if (cg_count(argv, env, &total, why, sizeof why) != 0)
    fail_msg("rt_prof %s %s: %s", mode, n, why);
  return total;
}

/* Instructions per allocate-and-free pair, start-up and exit cancelled
 * out by two lengths. */
static double per_pair(const char *mode) {
  unsigned long long a = collected(mode, 20000), b = collected(mode, 60000);
  assert_true(b > a);
  return (double)(b - a) / 40000.0;
}

/* Rate 0: ms_object_alloc_at + ms_object_free_at cost what ms_object_alloc
 * + ms_object_free cost, plus 9 instructions a pair: the loop's own 2
 * (it passes the address), and in the library a register move and the
 * countdown's sub and js in alloc_at, a move and the load, test and jne
 * of ms__prof_live in free_at (objdump). Measured 68.0 and 77.0 (gcc 12,
 * -O2). With the sampler's calls inline, both built a frame and saved
 * registers on every call: 86.0 a pair. */
static void test_rate0_cost(void **state) {
  (void)state;
  if (!PLAIN_BUILD) {
    print_message("skipped: rt_prof is built with a sanitizer\n");
    skip();
  }
  if (!host_have_program("valgrind")) {
    print_message("skipped: valgrind is not installed\n");
    skip();
  }
  double plain = per_pair("pairs"), at = per_pair("pairs_at");
  print_message("instructions a pair at rate 0: ms_object_alloc/free %.2f, "
                "_at %.2f\n",
                plain, at);
  assert_true(at <= plain + 9.0);
}

static int setup(void **state) {
  (void)state;
  if (host_build_dir(g_build, sizeof g_build) != 0)
    return -1;
  snprintf(g_memtop, sizeof g_memtop, "%s/memtop", g_build);
  snprintf(g_prog, sizeof g_prog, "%s/progs/rt_prof", g_build);
  return target_dir_setup(g_dir, sizeof g_dir, "/tmp/mt-linkedprof.XXXXXX");
}

static int teardown(void **state) {
  (void)state;
  target_dir_remove(g_dir);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rate1_sites),
      cmocka_unit_test(test_rate1_pprof),
      cmocka_unit_test(test_rate0),
      cmocka_unit_test(test_default_rate_nothing_sampled),
      cmocka_unit_test(test_rate0_cost),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
