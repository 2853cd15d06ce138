/*
 * test_profile.c - the heap profile end to end on the target side: a
 * program under the preload (tests/progs/pl_prof.c, or python3) is
 * profiled at MEMSTATS_PROFILE_RATE=1 (or a small rate), and its profile
 * fetched over the real socket (tests/support/profile_fetch.h). The
 * program names its functions' address ranges, so a stack is checked
 * against them: known sites with exact in-use counts, a freed site, a
 * realloc that failed and one that moved its block, threads,
 * recursion past the depth limit, fork, a full bucket table, profiling
 * off, and python3 (a Debian binary without frame pointers).
 */
#include <dlfcn.h> /* DLFO_STRUCT_HAS_EH_DBASE: the cached unwinder is built */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "client/client.h"
#include "support/fetch.h"
#include "support/host.h"
#include "support/profile_fetch.h"
#include "support/target.h"

static char g_build[1024], g_preload[1200], g_dir[64];

typedef struct fn_s {
  char name[32];
  uint64_t lo, hi;
} fn_t;

typedef struct proc_s {
  target_t t;
  fn_t fns[16];
  int nfns;
  int signals;  /* handler runs the program counted */
  int ready[4]; /* pids that said ready */
  int nready;
} proc_t;

/* Starts argv under the preload with env (NAME=VALUE, NULL-ended) and the
 * profiler's settings otherwise at their defaults, and reads its lines
 * until `nready` processes said ready. */
static void start(proc_t *p, const char *const argv[], const char *const env[],
                  int nready) {
  char preload[1300], line[256];
  const char *base[] = {preload,
                        "MEMSTATS_AGENT",
                        "MEMSTATS_PROFILE_RATE",
                        "MEMSTATS_PROFILE_DEPTH",
                        "MEMSTATS_PROFILE_BUCKETS",
                        NULL};

  memset(p, 0, sizeof *p);
  snprintf(preload, sizeof preload, "LD_PRELOAD=%s", g_preload);
  target_exec(&p->t, argv, g_dir, base, env, NULL, 0);
  while (p->nready < nready &&
         target_read_line(p->t.out, line, sizeof line) == 0) {
    int nsig;
    if (sscanf(line, "signals %d", &nsig) == 1)
      p->signals = nsig;
    fn_t f;
    int pid;
    if (sscanf(line, "fn %31s %lx %lx", f.name, &f.lo, &f.hi) == 3 &&
        p->nfns < 16)
      p->fns[p->nfns++] = f;
    else if (sscanf(line, "ready %d", &pid) == 1)
      p->ready[p->nready++] = pid;
  }
  assert_int_equal(p->nready, nready);
}

static void stop(proc_t *p) {
  target_wait(&p->t);
}

static const fn_t *fn(const proc_t *p, const char *name) {
  for (int i = 0; i < p->nfns; i++)
    if (strcmp(p->fns[i].name, name) == 0)
      return &p->fns[i];
  fail_msg("the program did not name %s", name);
  return NULL;
}

static int in_stack(const ms__profile_record_t *r, const fn_t *f) {
  for (uint32_t i = 0; i < r->depth; i++)
    if (r->stack[i] > f->lo && r->stack[i] <= f->hi)
      return 1; /* a return address: just past the call */
  return 0;
}

typedef struct site_s {
  uint64_t alloc_objects, alloc_bytes, inuse_objects, inuse_bytes;
  int records, truncated;
  uint32_t depth;
} site_t;

/* The records whose stacks pass through f, summed. */
static site_t site(const ms__profile_t *pf, const fn_t *f) {
  site_t s;
  memset(&s, 0, sizeof s);
  for (uint32_t i = 0; i < pf->nrecords; i++) {
    const ms__profile_record_t *r = &pf->records[i];
    if (!in_stack(r, f))
      continue;
    s.records++;
    s.alloc_objects += r->alloc_objects;
    s.alloc_bytes += r->alloc_bytes;
    s.inuse_objects += r->alloc_objects - r->free_objects;
    s.inuse_bytes += r->alloc_bytes - r->free_bytes;
    s.truncated |= r->truncated;
    if (r->depth > s.depth)
      s.depth = r->depth;
    /* A bucket's objects are all of its size. */
    assert_int_equal(r->alloc_bytes, r->alloc_objects * r->size);
    assert_int_equal(r->free_bytes, r->free_objects * r->size);
  }
  return s;
}

static ms__profile_decoded_t *fetch(int pid, uint64_t *caps) {
  ms__profile_decoded_t *d = NULL;
  int r = pf_fetch(g_dir, pid, &d, caps);
  if (r != 0)
    fail_msg("fetching the profile of %d: %s", pid, ms_strerror(r));
  assert_true(d->complete);
  assert_int_equal(d->profile.pid, pid);
  return d;
}

static int setup(void **state) {
  (void)state;
  if (host_build_dir(g_build, sizeof g_build) != 0 ||
      host_preload_path(g_build, g_preload, sizeof g_preload) != 0)
    return -1;
  return target_dir_setup(g_dir, sizeof g_dir, "/tmp/ms-prof-XXXXXX");
}

static int teardown(void **state) {
  (void)state;
  return target_dir_remove(g_dir);
}

static char g_prog[1200];
static const char *prog(void) {
  snprintf(g_prog, sizeof g_prog, "%s/progs/pl_prof", g_build);
  return g_prog;
}

static void test_sites(void **state) {
  (void)state;
  proc_t p;
  const char *argv[] = {prog(), "sites", NULL};
  const char *env[] = {"MEMSTATS_PROFILE_RATE=1", NULL};
  start(&p, argv, env, 1);
  uint64_t caps = 0;
  ms__profile_decoded_t *d = fetch(p.ready[0], &caps);
  const ms__profile_t *pf = &d->profile;
  assert_true(caps & MS__CAP_PROFILE);
  assert_int_equal(pf->rate, 1);
  assert_int_equal(pf->buckets_dropped, 0);
#if defined(__x86_64__) && defined(DLFO_STRUCT_HAS_EH_DBASE)
  assert_string_equal(d->unwinder, "cached-cfi+glibc-backtrace");
#else
  assert_string_equal(d->unwinder, "glibc-backtrace");
#endif
  site_t big = site(pf, fn(&p, "f_big"));
  site_t small = site(pf, fn(&p, "f_small"));
  site_t freed = site(pf, fn(&p, "f_freed"));
  /* Every allocation at rate 1: the counts are exact. */
  assert_int_equal(big.alloc_objects, 48);
  assert_int_equal(big.inuse_objects, 48);
  assert_int_equal(small.inuse_objects, 16);
  assert_true(small.inuse_bytes >= 16 * 1000);
  assert_int_equal(big.inuse_bytes, 3 * small.inuse_bytes);
  assert_int_equal(freed.alloc_objects, 16);
  assert_int_equal(freed.inuse_objects, 0);
  assert_int_equal(freed.inuse_bytes, 0);
  assert_int_equal(freed.alloc_bytes, small.alloc_bytes);
  /* The program's text is among the mappings, with its build id. */
  const fn_t *f = fn(&p, "f_big");
  int found = 0;
  for (uint32_t i = 0; i < pf->nmappings; i++) {
    const ms__profile_mapping_t *m = &pf->mappings[i];
    if (f->lo >= m->start && f->lo < m->limit) {
      found = 1;
      assert_non_null(strstr(m->path, "pl_prof"));
      assert_true(m->build_id_len >= 16);
    }
  }
  assert_true(found);
  ms__profile_decoded_free(d);
  stop(&p);
}

/* A realloc that fails keeps its block, so the block stays its sample
 * (it was unsampled before the realloc, and lost when that failed); a
 * realloc that moves it counts the old block freed and samples the new
 * one. On glibc and, preloaded after us, on jemalloc (its blocks are
 * measured another way: realloc's other path). */
static void check_realloc(const char *alloc) {
  char ld[1500];
  proc_t p;
  const char *argv[] = {prog(), "realloc", NULL};
  snprintf(ld, sizeof ld, "LD_PRELOAD=%s%s%s", g_preload, alloc ? ":" : "",
           alloc ? alloc : "");
  const char *env[] = {"MEMSTATS_PROFILE_RATE=1", ld, NULL};
  start(&p, argv, env, 1);
  ms__profile_decoded_t *d = fetch(p.ready[0], NULL);
  site_t kept = site(&d->profile, fn(&p, "f_realloc_kept"));
  site_t moved = site(&d->profile, fn(&p, "f_realloc_moved"));
  assert_int_equal(kept.alloc_objects, 16);
  assert_int_equal(kept.inuse_objects, 16);
  assert_true(kept.inuse_bytes >= 16 * 1000);
  assert_int_equal(moved.alloc_objects, 32);
  assert_int_equal(moved.inuse_objects, 16);
  assert_true(moved.inuse_bytes >= 16 * 65536);
  ms__profile_decoded_free(d);
  stop(&p);
}

static void test_realloc_failed(void **state) {
  (void)state;
  check_realloc(NULL);
}

static void test_realloc_failed_jemalloc(void **state) {
  (void)state;
  if (!host_have_library("libjemalloc.so.2"))
    skip();
  check_realloc("libjemalloc.so.2");
}

static void test_threads(void **state) {
  (void)state;
  proc_t p;
  const char *argv[] = {prog(), "threads", NULL};
  const char *env[] = {"MEMSTATS_PROFILE_RATE=1", NULL};
  start(&p, argv, env, 1);
  ms__profile_decoded_t *d = fetch(p.ready[0], NULL);
  site_t s = site(&d->profile, fn(&p, "f_thread"));
  assert_int_equal(s.inuse_objects, 4 * 16);
  ms__profile_decoded_free(d);
  stop(&p);
}

static void test_deep_recursion(void **state) {
  (void)state;
  proc_t p;
  const char *argv[] = {prog(), "deep", NULL};
  const char *env[] = {"MEMSTATS_PROFILE_RATE=1", "MEMSTATS_PROFILE_DEPTH=40",
                       NULL};
  start(&p, argv, env, 1);
  ms__profile_decoded_t *d = fetch(p.ready[0], NULL);
  site_t s = site(&d->profile, fn(&p, "f_deep"));
  assert_int_equal(s.inuse_objects, 1);
  assert_true(s.truncated);
  assert_int_equal(s.depth, 40);
  ms__profile_decoded_free(d);
  stop(&p);
}

static void test_fork(void **state) {
  (void)state;
  proc_t p;
  const char *argv[] = {prog(), "fork", NULL};
  const char *env[] = {"MEMSTATS_PROFILE_RATE=1", NULL};
  start(&p, argv, env, 2);
  for (int i = 0; i < 2; i++) {
    int pid = p.ready[i];
    ms__profile_decoded_t *d = fetch(pid, NULL);
    site_t par = site(&d->profile, fn(&p, "f_parent"));
    site_t chi = site(&d->profile, fn(&p, "f_child"));
    /* Both start from the parent's live sampled objects; only the child
     * made f_child's. */
    assert_int_equal(par.inuse_objects, 16);
    assert_int_equal(chi.inuse_objects, pid == p.t.pid ? 0 : 16);
    ms__profile_decoded_free(d);
  }
  stop(&p);
}

static void test_table_full(void **state) {
  (void)state;
  proc_t p;
  const char *argv[] = {prog(), "full", NULL};
  const char *env[] = {"MEMSTATS_PROFILE_RATE=1", "MEMSTATS_PROFILE_BUCKETS=8",
                       "MEMSTATS_DEBUG=1", NULL};
  /* The target's stderr (its debug output) goes to a file of the test's
   * own directory. */
  char errf[128];
  snprintf(errf, sizeof errf, "%s/table_full.err", g_dir);
  int efd = open(errf, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  assert_true(efd >= 0);
  int saved = dup(2);
  assert_true(saved >= 0);
  dup2(efd, 2);
  start(&p, argv, env, 1);
  dup2(saved, 2);
  close(saved);
  close(efd);
  ms__profile_decoded_t *d = fetch(p.ready[0], NULL);
  assert_true(d->profile.nrecords <= 8);
  /* f_many's 64 sizes alone need 64 buckets. */
  assert_true(d->profile.buckets_dropped >= 56);
  /* The agent says what the profile cannot show, the frees it could not
   * record among it (ms__prof_lost_frees), with each profile it builds. */
  char text[65536] = "", want[160];
  snprintf(want, sizeof want,
           "agent: heap profile of %u buckets; %llu samples dropped (bucket "
           "table full), ",
           d->profile.nrecords, (unsigned long long)d->profile.buckets_dropped);
  int fd = open(errf, O_RDONLY | O_CLOEXEC);
  assert_true(fd >= 0);
  ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  text[n > 0 ? n : 0] = '\0';
  const char *at = strstr(text, want);
  if (at == NULL)
    fail_msg("no '%s' in the target's debug output:\n%s", want, text);
  assert_non_null(strstr(at, " frees of sampled blocks not recorded"));
  ms__profile_decoded_free(d);
  stop(&p);
}

static void test_off(void **state) {
  (void)state;
  proc_t p;
  const char *argv[] = {prog(), "sites", NULL};
  const char *env[] = {"MEMSTATS_PROFILE_RATE=0", NULL};
  start(&p, argv, env, 1);
  ms__profile_decoded_t *d = NULL;
  uint64_t caps = 0;
  assert_int_equal(pf_fetch(g_dir, p.ready[0], &d, &caps), MS_ENOSYS);
  assert_null(d);
  assert_false(caps & MS__CAP_PROFILE);
  assert_true(caps & MS__CAP_SNAPSHOT);
  stop(&p);
}

/* python3 as Debian builds it (no frame pointers): its stacks must be
 * unwound by the tables, so sampled stacks run deep through its own text.
 */
static void test_python3(void **state) {
  (void)state;
  if (access("/usr/bin/python3", X_OK) != 0)
    skip();
  proc_t p;
  const char *argv[] = {"/usr/bin/python3", "-c",
                        "import os, sys\n"
                        "def grow(n):\n"
                        "    out = []\n"
                        "    for i in range(n):\n"
                        "        out.append([i] * 50)\n"
                        "    return out\n"
                        "keep = grow(20000)\n"
                        "os.write(1, b'ready %d\\n' % os.getpid())\n"
                        "sys.stdin.read()\n",
                        NULL};
  const char *env[] = {"MEMSTATS_PROFILE_RATE=4096", NULL};
  start(&p, argv, env, 1);
  ms__profile_decoded_t *d = fetch(p.ready[0], NULL);
  const ms__profile_t *pf = &d->profile;
  /* python3's own text mapping: the executable's. */
  char exe[256];
  snprintf(exe, sizeof exe, "/proc/%d/exe", p.ready[0]);
  char real[256];
  ssize_t n = readlink(exe, real, sizeof real - 1);
  assert_true(n > 0);
  real[n] = '\0';
  int deep = 0;
  for (uint32_t i = 0; i < pf->nrecords; i++) {
    const ms__profile_record_t *r = &pf->records[i];
    int inside = 0;
    for (uint32_t k = 0; k < r->depth; k++)
      for (uint32_t m = 0; m < pf->nmappings; m++)
        if (strcmp(pf->mappings[m].path, real) == 0 &&
            r->stack[k] >= pf->mappings[m].start &&
            r->stack[k] < pf->mappings[m].limit)
          inside++;
    if (r->depth > 5 && inside > 5)
      deep++;
  }
  assert_true(pf->nrecords > 10);
  assert_true(deep > 0);
  ms__profile_decoded_free(d);
  stop(&p);
}

/* A profile larger than a frame: 20,000 buckets of stacks up to 205 deep
 * (some 18 MB) come in several frames, each within the payload bound, and
 * whole. */
static void test_wide(void **state) {
  (void)state;
  proc_t p;
  const char *argv[] = {prog(), "wide", NULL};
  const char *env[] = {"MEMSTATS_PROFILE_RATE=1", "MEMSTATS_PROFILE_DEPTH=256",
                       "MEMSTATS_PROFILE_BUCKETS=80000", NULL};
  start(&p, argv, env, 1);
  ms__profile_decoded_t *d = fetch(p.ready[0], NULL);
  site_t s = site(&d->profile, fn(&p, "f_wide"));
  assert_int_equal(s.inuse_objects, 20000);
  assert_int_equal(s.records, 20000);
  assert_int_equal(d->profile.buckets_dropped, 0);
  assert_true(pf_frames >= 4);
  ms__profile_decoded_free(d);
  stop(&p);
}

/* A signal handler that allocates and frees, interrupting the program's
 * own mallocs 1,000 times (sampled at rate 1, so inside captures and the
 * table's lock too): the program runs on, and its profile is served, with
 * the sites after it exact. */
static void test_signals(void **state) {
  (void)state;
  proc_t p;
  const char *argv[] = {prog(), "signals", NULL};
  const char *env[] = {"MEMSTATS_PROFILE_RATE=1", NULL};
  start(&p, argv, env, 1);
  assert_true(p.signals >= 1000);
  ms__profile_decoded_t *d = fetch(p.ready[0], NULL);
  site_t s = site(&d->profile, fn(&p, "f_small"));
  assert_int_equal(s.inuse_objects, 16);
  /* (How many of the handler's allocations are sampled depends on what
   * they interrupt: one inside a capture or the table's lock is not.) */
  ms__profile_decoded_free(d);
  stop(&p);
}

/* test_unwinder_loaded_late runs where cfi.c's unwinder is built and no
 * sanitizer's runtime loads libgcc_s itself; elsewhere it skips. */
#if defined(__x86_64__) && defined(DLFO_STRUCT_HAS_EH_DBASE) &&                \
    !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define UNWINDER_LATE_TESTED 1
#endif

#ifdef UNWINDER_LATE_TESTED
/* Whether the process maps a file whose path holds name. */
static int maps_has(int pid, const char *name) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/maps", pid);
  size_t len = 0;
  char *all = host_read_all(path, &len);
  assert_non_null(all);
  int found = strstr(all, name) != NULL;
  free(all);
  return found;
}
#endif

/* libgcc's unwinder (libgcc_s), the cached unwinder's fallback, is not
 * loaded at start, where it was most of what a short-lived process paid
 * for the profiler: a program with no agent never loads it, and one with
 * an agent has it once a profile has been asked for (profile/unwind.c),
 * which then names both unwinders. Where cfi.c's unwinder is not built
 * libgcc's is the only one, loaded at start as before; a sanitizer's
 * runtime may load libgcc_s itself. */
static void test_unwinder_loaded_late(void **state) {
  (void)state;
#ifndef UNWINDER_LATE_TESTED
  skip();
#else
  proc_t p;
  const char *argv[] = {prog(), "sites", NULL};
  const char *no_agent[] = {"MEMSTATS_PROFILE_RATE=1", "MEMSTATS_AGENT=0",
                            NULL};
  start(&p, argv, no_agent, 1);
  int loaded = maps_has(p.ready[0], "libgcc_s");
  stop(&p);
  if (loaded)
    fail_msg("libgcc_s was loaded at start in a program with no agent");
  const char *env[] = {"MEMSTATS_PROFILE_RATE=1", NULL};
  start(&p, argv, env, 1);
  ms__profile_decoded_t *d = fetch(p.ready[0], NULL);
  assert_string_equal(d->unwinder, "cached-cfi+glibc-backtrace");
  assert_true(maps_has(p.ready[0], "libgcc_s"));
  /* The stacks are cfi.c's, and whole. */
  site_t big = site(&d->profile, fn(&p, "f_big"));
  assert_int_equal(big.alloc_objects, 48);
  assert_false(big.truncated);
  ms__profile_decoded_free(d);
  stop(&p);
#endif
}

/* memtop's blocking fetch (the client's session, as `memtop profile`
 * will drive it) reads the same profile. */
static void test_client_fetch(void **state) {
  (void)state;
  proc_t p;
  const char *argv[] = {prog(), "sites", NULL};
  const char *env[] = {"MEMSTATS_PROFILE_RATE=1", NULL};
  start(&p, argv, env, 1);
  setenv("MEMSTATS_DIR", g_dir, 1);
  char err[512] = "";
  ms__profile_decoded_t *d = NULL;
  int r = fetch_profile(p.ready[0], &d, 10000, err, sizeof err);
  if (r != 0)
    fail_msg("%s", err);
  site_t big = site(&d->profile, fn(&p, "f_big"));
  assert_int_equal(big.inuse_objects, 48);
  ms__profile_decoded_free(d);
  /* The bucket table is in the snapshot, as BuckHashSys: whole pages, at
   * least one of each of its five parts (filter, heads, addresses,
   * buckets, stacks), each backed as it is first written
   * (test_profile_sampler checks the count against the kernel's Rss of
   * the table); and the same process's snapshot with profiling off has
   * none. */
  ms_snapshot_t snap;
  assert_int_equal(fetch_snapshot(p.ready[0], &snap, 10000, err, sizeof err),
                   0);
  assert_int_equal(snap.quality[MS_F_BUCK_HASH_SYS], MS_Q_EXACT);
  print_message("BuckHashSys %llu\n", (unsigned long long)snap.buck_hash_sys);
  assert_true(snap.buck_hash_sys >= 5 * 4096u);
  assert_int_equal(snap.buck_hash_sys % 4096, 0);
  stop(&p);
  const char *off[] = {"MEMSTATS_PROFILE_RATE=0", NULL};
  start(&p, argv, off, 1);
  assert_int_equal(fetch_snapshot(p.ready[0], &snap, 10000, err, sizeof err),
                   0);
  assert_int_equal(snap.buck_hash_sys, 0);
  stop(&p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sites),
      cmocka_unit_test(test_realloc_failed),
      cmocka_unit_test(test_realloc_failed_jemalloc),
      cmocka_unit_test(test_threads),
      cmocka_unit_test(test_deep_recursion),
      cmocka_unit_test(test_fork),
      cmocka_unit_test(test_table_full),
      cmocka_unit_test(test_off),
      cmocka_unit_test(test_python3),
      cmocka_unit_test(test_client_fetch),
      cmocka_unit_test(test_wide),
      cmocka_unit_test(test_signals),
      cmocka_unit_test(test_unwinder_loaded_late),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
