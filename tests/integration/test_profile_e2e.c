/*
 * test_profile_e2e.c - `memtop profile` and `--once --sites` on a real
 * target: tests/progs/pl_prof under the preload at
 * MEMSTATS_PROFILE_RATE=1 (every allocation recorded), f_big holding
 * three times f_small's bytes (48 and 16 blocks of 1000 bytes) and
 * f_freed's 16 blocks all freed. The real memtop binary writes the
 * profile; the real `go tool pprof -top` names the functions with the
 * exact in-use bytes, and shows f_freed in alloc_space only; memtop's own
 * JSON (--once --json --sites) and text report carry the same figures.
 * Also: the default rate over a large workload (within 10% of the truth),
 * C++'s forms of new (tests/progs/pl_prof_cxx.cc), and Debian's python3.
 */
#include <errno.h>
#include <jansson.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/strbuf.h"
#include "support/host.h"
#include "support/target.h"

static char g_build[1024], g_preload[1200], g_dir[64], g_prog[1200];

/* What the program says about a site it ran ("truth FN COUNT BYTES"). */
typedef struct truth_s {
  char fn[32];
  long long count, bytes;
} truth_t;

typedef struct proc_s {
  target_t t;
  int ready;
  truth_t truth[8];
  int ntruth;
} proc_t;

/* Starts argv under the preload, and waits for it to say it is ready,
 * keeping the truths it says before. rate NULL: MEMSTATS_PROFILE_RATE
 * unset (the default rate). */
/* An allocator preloaded after the preload (NULL: glibc's). */
static const char *g_alloc;

static void start_argv(proc_t *p, const char *const argv[], const char *rate) {
  char preload[1400], rate_env[64], line[256];
  const char *env[] = {preload, rate_env, "MEMSTATS_AGENT", NULL};

  memset(p, 0, sizeof *p);
  snprintf(preload, sizeof preload, "LD_PRELOAD=%s%s%s", g_preload,
           g_alloc ? ":" : "", g_alloc ? g_alloc : "");
  if (rate != NULL)
    snprintf(rate_env, sizeof rate_env, "MEMSTATS_PROFILE_RATE=%s", rate);
  else
    snprintf(rate_env, sizeof rate_env, "MEMSTATS_PROFILE_RATE");
  target_exec(&p->t, argv, g_dir, env, NULL, NULL, 0);
  while (target_read_line(p->t.out, line, sizeof line) == 0) {
    truth_t *t = &p->truth[p->ntruth];
    if (p->ntruth < 8 &&
        sscanf(line, "truth %31s %lld %lld", t->fn, &t->count, &t->bytes) == 3)
      p->ntruth++;
    if (sscanf(line, "ready %d", &p->ready) == 1)
      break;
  }
  assert_int_equal(p->ready, p->t.pid);
}

/* Starts pl_prof MODE under the preload at rate (NULL: the default). */
static void start_mode(proc_t *p, const char *mode, const char *rate) {
  const char *argv[] = {g_prog, mode, NULL};
  start_argv(p, argv, rate);
}

/* Starts pl_prof sites under the preload at rate 1, and waits for it to
 * say it is ready. */
static void start(proc_t *p) {
  start_mode(p, "sites", "1");
}

/* Debian's /usr/bin/python3 (built without frame pointers, its static
 * functions without symbols unless python3-dbg is installed) under the
 * preload at rate 1, running a script that builds lists and waits. */
static const char k_script[] =
    "import sys\n"
    "keep = []\n"
    "for i in range(3000):\n"
    "    l = []\n"
    "    for j in range(50):\n"
    "        l.append(j)\n"
    "    keep.append(l)\n"
    "sys.stdout.write('ready %d\\n' % __import__('os').getpid())\n"
    "sys.stdout.flush()\n"
    "sys.stdin.read()\n";

static void start_python(proc_t *p, const char *script) {
  const char *argv[] = {"/usr/bin/python3", "-c", script, NULL};
  start_argv(p, argv, "1");
}

static void stop(proc_t *p) {
  target_wait(&p->t);
}

/* Runs a shell command and returns its standard output (malloc'd); its
 * exit status in *status. */
static char *run(const char *cmd, int *status) {
  ms__strbuf_t b = MS_STRBUF_INIT;
  char buf[4096];
  size_t n;
  FILE *f = popen(cmd, "r");

  assert_non_null(f);
  while ((n = fread(buf, 1, sizeof buf, f)) > 0)
    ms__strbuf_append(&b, buf, n);
  *status = pclose(f);
  return b.data != NULL ? b.data : strdup("");
}

static char *memtop(const char *args, int pid) {
  char cmd[2048];
  char *out;
  int st;

  snprintf(cmd, sizeof cmd, "MEMSTATS_DIR=%s %s/memtop %s %d", g_dir, g_build,
           args, pid);
  out = run(cmd, &st);
  if (st != 0)
    fail_msg("%s: exit status %d", cmd, st);
  return out;
}

/* The line of `go tool pprof -top` for function fn, or NULL. */
static const char *top_line(const char *top, const char *fn) {
  static char line[256];
  const char *p = top;
  size_t n;

  while (p != NULL && *p != '\0') {
    n = strcspn(p, "\n");
    if (n < sizeof line) {
      memcpy(line, p, n);
      line[n] = '\0';
      if (n > strlen(fn) && strcmp(line + n - strlen(fn), fn) == 0 &&
          line[n - strlen(fn) - 1] == ' ')
        return line;
    }
    p += n + (p[n] == '\n');
  }
  return NULL;
}

static void test_pprof_top(void **state) {
  proc_t p;
  char cmd[2048], file[128], *out, *top, *alloc;
  const char *l;
  int st;

  (void)state;
  if (!host_have_program("go")) {
    print_message("skipped: go (golang-go) is not installed\n");
    skip();
  }
  start(&p);
  snprintf(file, sizeof file, "%s/pl.pb.gz", g_dir);
  snprintf(cmd, sizeof cmd, "profile -o %s", file);
  out = memtop(cmd, p.t.pid);
  free(out);
  stop(&p);
  snprintf(cmd, sizeof cmd,
           "HOME=%s GOCACHE=%s/gocache go tool pprof -top -symbolize=none "
           "-nodefraction=0 %s",
           g_dir, g_dir, file);
  top = run(cmd, &st);
  assert_int_equal(st, 0);
  snprintf(cmd, sizeof cmd,
           "HOME=%s GOCACHE=%s/gocache go tool pprof -top -symbolize=none "
           "-nodefraction=0 -sample_index=alloc_space %s",
           g_dir, g_dir, file);
  alloc = run(cmd, &st);
  assert_int_equal(st, 0);
  /* 48000 and 16000 bytes, exactly (pprof's kB are KiB). */
  l = top_line(top, "f_big");
  assert_non_null(l);
  assert_true(strncmp(l, "   46.88kB ", 11) == 0);
  l = top_line(top, "f_small");
  assert_non_null(l);
  assert_true(strncmp(l, "   15.62kB ", 11) == 0);
  l = top_line(top, "f_freed");
  assert_true(l == NULL || strncmp(l, "         0 ", 11) == 0);
  l = top_line(alloc, "f_freed");
  assert_non_null(l);
  assert_true(strncmp(l, "   15.62kB ", 11) == 0);
  free(top);
  free(alloc);
}

/* ---- `go tool pprof -raw`, read back ---------------------------------- */

/* Parses one line of -raw's Locations section ("     ID: 0xADDR M=N
 * FUNCTION FILE:LINE s=..."; the first line of a location is its
 * innermost function): its id, address and function (to name, "" for an
 * unnamed location). Returns 0, or -1 if the line is no location's. */
static int raw_location_line(const char *line, unsigned *id,
                             unsigned long long *addr, char *name,
                             size_t size) {
  char buf[512];
  size_t n = strcspn(line, "\n");
  int off = 0;
  const char *p;

  if (n >= sizeof buf)
    n = sizeof buf - 1;
  memcpy(buf, line, n);
  buf[n] = '\0';
  if (sscanf(buf, " %u: 0x%llx %n", id, addr, &off) != 2 || off == 0)
    return -1;
  p = buf + off;
  if (strncmp(p, "M=", 2) == 0)
    p += strcspn(p, " ");
  p += strspn(p, " ");
  n = strcspn(p, " ");
  if (n >= size)
    n = size - 1;
  memcpy(name, p, n);
  name[n] = '\0';
  return 0;
}

/* Whether location `id` of -raw's Locations section is in function fn:
 * its innermost function, or with `inlined` any function of its inline
 * chain (the lines under its first, "             FUNCTION FILE:LINE
 * ...", down to the real function the code was inlined into). */
static int raw_location_is(const char *raw, unsigned id, const char *fn,
                           int inlined) {
  const char *p = strstr(raw, "\nLocations\n");
  unsigned lid;
  unsigned long long addr;
  char name[256];
  size_t n;

  for (; p != NULL && strncmp(p, "\nMappings", 9) != 0; p = strchr(p + 1, '\n'))
    if (raw_location_line(p + 1, &lid, &addr, name, sizeof name) == 0 &&
        lid == id)
      break;
  if (p == NULL || strncmp(p, "\nMappings", 9) == 0)
    return 0;
  if (strcmp(name, fn) == 0)
    return 1;
  for (p = strchr(p + 1, '\n'); inlined && p != NULL; p = strchr(p + 1, '\n')) {
    if (raw_location_line(p + 1, &lid, &addr, name, sizeof name) == 0 ||
        strncmp(p, "\nMappings", 9) == 0 || p[1] != ' ')
      return 0;
    p += 1 + strspn(p + 1, " ");
    n = strcspn(p, " \n");
    if (n == strlen(fn) && strncmp(p, fn, n) == 0)
      return 1;
    p--;
  }
  return 0;
}

/* Sums the values of -raw's samples whose innermost location is in
 * function fn (anywhere: whose stack passes through fn, inlined or not,
 * pprof's cum), in profile.proto's order (alloc_objects, alloc_space,
 * inuse_objects, inuse_space). Returns the number of such samples. */
static int raw_sum(const char *raw, const char *fn, int anywhere,
                   long long v[4]) {
  const char *p = strstr(raw, "\nSamples:\n");
  long long x[4];
  unsigned id;
  int n = 0, off;

  memset(v, 0, 4 * sizeof v[0]);
  assert_non_null(p);
  for (p += strlen("\nSamples:\n"); *p != '\0' && strncmp(p, "Locations", 9);
       p += *p == '\n') {
    if (sscanf(p, " %lld %lld %lld %lld:%n", &x[0], &x[1], &x[2], &x[3],
               &off) == 4) {
      const char *q = p + off;
      while (sscanf(q, " %u%n", &id, &off) == 1) {
        q += off;
        if (raw_location_is(raw, id, fn, anywhere)) {
          for (int i = 0; i < 4; i++)
            v[i] += x[i];
          n++;
          break;
        }
        if (!anywhere)
          break;
      }
    }
    p += strcspn(p, "\n");
  }
  return n;
}

static int raw_site(const char *raw, const char *fn, long long v[4]) {
  return raw_sum(raw, fn, 0, v);
}

/* The profile of the running process p as `go tool pprof -raw` reads the
 * file the real `memtop profile PID -o FILE` wrote (malloc'd). */
static char *pprof_raw(const proc_t *p) {
  char cmd[2048], file[128], *out;
  int st;

  snprintf(file, sizeof file, "%s/raw-%d.pb.gz", g_dir, (int)p->t.pid);
  snprintf(cmd, sizeof cmd, "profile -o %s", file);
  free(memtop(cmd, p->t.pid));
  snprintf(cmd, sizeof cmd,
           "HOME=%s GOCACHE=%s/gocache go tool pprof -raw -symbolize=none %s",
           g_dir, g_dir, file);
  out = run(cmd, &st);
  assert_int_equal(st, 0);
  return out;
}

static const truth_t *truth_of(const proc_t *p, const char *fn) {
  for (int i = 0; i < p->ntruth; i++)
    if (strcmp(p->truth[i].fn, fn) == 0)
      return &p->truth[i];
  fail_msg("the program gave no truth for %s", fn);
  return NULL;
}

/* |estimate - truth| <= truth / 10. */
static void assert_within_10pct(const char *what, const char *fn,
                                long long estimate, long long truth) {
  long long d = estimate > truth ? estimate - truth : truth - estimate;

  print_message("%s %s: %lld, truth %lld (%+.2f%%)\n", fn, what, estimate,
                truth,
                100.0 * ((double)estimate - (double)truth) / (double)truth);
  if (d * 10 > truth)
    fail_msg("%s of %s: %lld is not within 10%% of %lld", what, fn, estimate,
             truth);
}

/* At the default rate (524288 bytes), over a large workload: pl_prof
 * large holds 1,200 blocks of 1 MiB in f_large_a (about 1.26 GB) and 400
 * in f_large_b (0.42 GB), and allocated and freed 400 in f_large_freed.
 * Each site's unsampled figures are within 10% of the truth the program
 * counted (the blocks' usable sizes), and the freed site holds nothing.
 *
 * The statistics. The sampler's countdown is exponential, so sampling
 * points fall on the byte stream as a Poisson process of mean spacing R =
 * 524288, and a block of s bytes is sampled on its own with probability
 * p = 1 - exp(-s/R), independently of the others. Unsampling weights a
 * sampled block by 1/p, so the estimate of a site of N equal blocks has
 * relative standard error sqrt((1 - p) / (N p)). Here s is 1 MiB + 4 KiB
 * (an mmapped block's usable size; 1 MiB + 8 in the heap), s/R ~ 2.0, p ~
 * 0.865 (about 1,040, 346 and 346 samples): the relative standard error
 * is 1.14% for f_large_a and 1.98% for the two sites of 400 blocks (a
 * sum over the freed site's two sizes, whose 399 heap blocks dominate), so
 * 10% is 8.8 and 5.0 standard errors (a two-sided normal tail of about
 * 1e-18 and 6e-7 per figure). The blocks are this large so that both
 * hold: the error is small with few blocks (a site of small blocks would
 * need about 2,500 R, 1.3 GB, for the same 2%), and 1/p = 1.156 is large
 * enough that figures not unsampled (13.5% short) fail the check. */
static void test_default_rate_large(void **state) {
  static const char *const fns[] = {"f_large_a", "f_large_b", "f_large_freed"};
  proc_t p;
  char *raw;
  long long v[4];

  (void)state;
  if (!host_have_program("go")) {
    print_message("skipped: go (golang-go) is not installed\n");
    skip();
  }
  start_mode(&p, "large", NULL);
  raw = pprof_raw(&p);
  stop(&p);
  assert_non_null(strstr(raw, "\nPeriod: 524288\n"));
  for (int i = 0; i < 3; i++) {
    const truth_t *t = truth_of(&p, fns[i]);
    int freed = i == 2;

    /* A held site's blocks are all mmaps of one size: one sample. The
     * freed site's first block is an mmap, the others (glibc's threshold
     * raised by its free) come from the heap, 4 KiB smaller. */
    if (freed)
      assert_true(raw_site(raw, fns[i], v) >= 1);
    else
      assert_int_equal(raw_site(raw, fns[i], v), 1);
    assert_within_10pct("alloc_objects", fns[i], v[0], t->count);
    assert_within_10pct("alloc_space", fns[i], v[1], t->bytes);
    if (freed) {
      assert_int_equal(v[2], 0);
      assert_int_equal(v[3], 0);
    } else {
      assert_within_10pct("inuse_objects", fns[i], v[2], t->count);
      assert_within_10pct("inuse_space", fns[i], v[3], t->bytes);
    }
  }
  free(raw);
}

/* Checks the sites fns[0..n) of the running p at the default rate: those
 * from fns[held] on hold every block they allocated, the others none. */
static void check_default_rate_sites(const proc_t *p, const char *const fns[],
                                     int n, int held) {
  char *raw = pprof_raw(p);
  long long v[4];

  assert_non_null(strstr(raw, "\nPeriod: 524288\n"));
  for (int i = 0; i < n; i++) {
    const truth_t *t = truth_of(p, fns[i]);

    assert_true(raw_site(raw, fns[i], v) >= 1);
    assert_within_10pct("alloc_objects", fns[i], v[0], t->count);
    assert_within_10pct("alloc_space", fns[i], v[1], t->bytes);
    if (i >= held) {
      assert_within_10pct("inuse_objects", fns[i], v[2], t->count);
      assert_within_10pct("inuse_space", fns[i], v[3], t->bytes);
    } else if (v[2] != 0 || v[3] != 0) {
      fail_msg("%s freed every block it allocated, yet holds %lld objects, "
               "%lld bytes",
               fns[i], v[2], v[3]);
    }
  }
  free(raw);
}

/* At the default rate, small blocks: where unsampling matters, since
 * almost none is sampled. pl_prof small churns 33,000,000 blocks of 32
 * bytes in f_churn_32 (each freed at once) and 4,000,000 of 16 sizes
 * from 64 to 1024 bytes in f_churn_mixed, and holds 20,000 blocks of 64
 * KiB in f_hold. Each site's alloc figures are within 10% of the truth
 * the program counted (usable sizes), the churned sites hold nothing,
 * and f_hold's in-use figures are within 10% as well.
 *
 * The statistics (see test_default_rate_large): a block of s bytes is
 * sampled with probability p = 1 - exp(-s/R), R = 524288, and weighed
 * 1/p; the estimate of a site of N blocks of s bytes has a relative
 * standard error of sqrt((1 - p) / (N p)), and one of several sizes a
 * variance that is the sum of theirs. f_churn_32: s = 40 (glibc's usable
 * size for 32), p = 7.63e-5, 2,518 samples: 1.99%, so 10% is 5.0
 * standard errors (two-sided, 5e-7 per figure; its objects and bytes
 * are one figure, both k/p for k samples). f_churn_mixed: s = 72, 136,
 * ... 1032, 250,000 blocks each, 4,209 samples: 2.02% for the objects
 * (4.9 standard errors, 8e-7), 1.54% for the bytes (6.5). f_hold: s =
 * 65544, p = 0.1175, 2,350 samples: 1.94% (5.2, 3e-7). Its blocks are 64
 * KiB, not small, so that the in-use bytes that error needs (N p samples
 * need about N p R bytes held, 1.3 GB, whatever the size) are address
 * space and not resident: glibc writes each chunk's header and not its
 * body, about one page in 16 (some 80 MB).
 *
 * What would fail: unscaled, f_churn_32 reads 1/13,108 of the truth; a
 * 32-byte block sampled by its request but weighed as its usable 40
 * bytes (or sampled by one size and recorded under another), 20% short
 * or 25% over; a free of a sampled block not matched, in-use figures
 * where there should be none. */
static void test_default_rate_small(void **state) {
  static const char *const fns[] = {"f_churn_32", "f_churn_mixed", "f_hold"};
  proc_t p;

  (void)state;
  if (!host_have_program("go")) {
    print_message("skipped: go (golang-go) is not installed\n");
    skip();
  }
  start_mode(&p, "small", NULL);
  check_default_rate_sites(&p, fns, 3, 2);
  stop(&p);
}

/* The same through C++'s operators (pl_prof_cxx small): 33,000,000
 * blocks of 32 bytes through operator new and the unsized operator
 * delete (sites::churn_plain); 20,000,000 objects of 64 bytes through
 * new and delete expressions, the sized operator delete
 * (sites::churn_sized: s = 72, 2,746 samples, 1.91%, 5.2 standard
 * errors); 4,000,000 blocks of f_churn_mixed's 16 sizes through the sized
 * operator delete (sites::churn_mixed); 20,000 arrays of 64 KiB held
 * (sites::hold). The figures are otherwise test_default_rate_small's. */
static void test_default_rate_small_cxx(void **state) {
  static const char *const fns[] = {"sites::churn_plain()",
                                    "sites::churn_sized()",
                                    "sites::churn_mixed()", "sites::hold()"};
  const char *argv[] = {NULL, "small", NULL};
  char prog[1300];
  proc_t p;

  (void)state;
  if (!host_have_program("go")) {
    print_message("skipped: go (golang-go) is not installed\n");
    skip();
  }
  snprintf(prog, sizeof prog, "%s/progs/pl_prof_cxx", g_build);
  argv[0] = prog;
  start_argv(&p, argv, NULL);
  assert_int_equal(p.ntruth, 4);
  check_default_rate_sites(&p, fns, 4, 3);
  stop(&p);
}

/* C++ (tests/progs/pl_prof_cxx.cc) at rate 1: the bytes of each form of
 * new (plain, array, aligned, aligned array, nothrow) are in the profile
 * go tool pprof reads back, exactly, under the function that called it,
 * demangled (sites::plain_new(), its symbol _ZN5sites9plain_newEv kept as
 * the system name). sites::vector_new's vectors and their buffers are
 * all under it as well, the buffers' operator new called from
 * std::allocator's code inlined into it: the site is the last function
 * of that address's inline chain (memtop once gave only the innermost,
 * std::__new_allocator<long>::allocate: 15 of the 30 blocks were under
 * the site). */
static void check_cxx_new(void);
static void test_cxx_new(void **state) {
  (void)state;
  check_cxx_new();
}

/* The same on jemalloc, preloaded after us: its own operators are the
 * next ones (src/preload/cxx.c counts and samples around them; on
 * libstdc++ malloc and free serve the operators instead). */
static void test_cxx_new_jemalloc(void **state) {
  (void)state;
  if (!host_have_library("libjemalloc.so.2")) {
    print_message("skipped: libjemalloc2 is not installed\n");
    skip();
  }
  g_alloc = "libjemalloc.so.2";
  check_cxx_new();
  g_alloc = NULL;
}

static void check_cxx_new(void) {
  static const char *const fns[] = {
      "sites::plain_new()", "sites::array_new()", "sites::aligned_new()",
      "sites::aligned_array_new()", "sites::nothrow_new()"};
  const char *argv[] = {NULL, NULL};
  char prog[1300], *raw;
  proc_t p;
  long long v[4];

  if (!host_have_program("go")) {
    print_message("skipped: go (golang-go) is not installed\n");
    skip();
  }
  snprintf(prog, sizeof prog, "%s/progs/pl_prof_cxx", g_build);
  argv[0] = prog;
  start_argv(&p, argv, "1");
  raw = pprof_raw(&p);
  stop(&p);
  assert_int_equal(p.ntruth, 6);
  for (int i = 0; i < 6; i++) {
    const char *fn = i < 5 ? fns[i] : "sites::vector_new()";
    const truth_t *t = truth_of(&p, fn);

    if (i < 5)
      assert_int_equal(raw_site(raw, fn, v), 1);
    else
      assert_int_equal(raw_sum(raw, fn, 1, v), 2);
    assert_int_equal(v[0], t->count);
    assert_int_equal(v[1], t->bytes);
    assert_int_equal(v[2], t->count);
    assert_int_equal(v[3], t->bytes);
  }
  assert_non_null(strstr(raw, " sites::plain_new() "));
  assert_non_null(strstr(raw, "(_ZN5sites9plain_newEv)\n"));
  free(raw);
}

/* The figures of one site in memtop's JSON line. */
static json_t *json_site(json_t *sites, const char *fn) {
  size_t i;
  json_t *s;

  json_array_foreach(sites, i, s) {
    const char *f = json_string_value(json_object_get(s, "function"));
    if (f != NULL && strcmp(f, fn) == 0)
      return s;
  }
  return NULL;
}

static void test_once_sites(void **state) {
  proc_t p;
  char *json, *text;
  json_t *root, *prof, *sites, *s;
  json_error_t err;

  (void)state;
  start(&p);
  json = memtop("--once --json --sites 3", p.t.pid);
  text = memtop("--once --sites 2", p.t.pid);
  stop(&p);
  root = json_loads(json, 0, &err);
  assert_non_null(root);
  prof = json_object_get(root, "profile");
  assert_non_null(prof);
  assert_int_equal(json_integer_value(json_object_get(prof, "rate")), 1);
  assert_true(json_is_false(json_object_get(prof, "estimated")));
  sites = json_object_get(prof, "sites");
  assert_int_equal(json_array_size(sites), 3);
  /* The top two by in-use space, exact at rate 1. */
  s = json_array_get(sites, 0);
  assert_string_equal(json_string_value(json_object_get(s, "function")),
                      "f_big");
  assert_int_equal(json_integer_value(json_object_get(s, "inuse_space")),
                   48000);
  assert_int_equal(json_integer_value(json_object_get(s, "inuse_objects")), 48);
  assert_non_null(
      strstr(json_string_value(json_object_get(s, "file")), "pl_prof.c"));
  assert_true(json_integer_value(json_object_get(s, "line")) > 0);
  s = json_array_get(sites, 1);
  assert_string_equal(json_string_value(json_object_get(s, "function")),
                      "f_small");
  assert_int_equal(json_integer_value(json_object_get(s, "inuse_space")),
                   16000);
  /* f_freed holds nothing: not among the top in use. */
  assert_null(json_site(sites, "f_freed"));
  json_decref(root);
  free(json);

  assert_non_null(strstr(text, "Top allocation sites:\n"));
  assert_non_null(strstr(text, "Every allocation recorded: figures are "
                               "exact\n"));
  assert_non_null(strstr(text, "         48  f_big "));
  assert_non_null(strstr(text, "         16  f_small "));
  free(text);
}

/* Through a Debian binary without frame pointers or symbols for its
 * static functions: every sampled stack reaches Py_BytesMain (an exported
 * name: the whole heap is under it), and the interpreter's loop is named
 * from the dynamic symbol table. (Static functions show as
 * python3.11+0xOFFSET unless python3's debug symbols are installed.) */
static void test_python(void **state) {
  proc_t p;
  char *text;

  (void)state;
  if (access("/usr/bin/python3", X_OK) != 0) {
    print_message("skipped: /usr/bin/python3 is not installed\n");
    skip();
  }
  start_python(&p, k_script);
  text = memtop("profile --format text --sites 1000", p.t.pid);
  stop(&p);
  assert_non_null(strstr(text, "Every allocation recorded"));
  /* cum 100.0% at Py_BytesMain. */
  assert_non_null(strstr(text, " 100.0%          0  Py_BytesMain"));
  assert_non_null(strstr(text, " PyEval_EvalCode"));
  free(text);
}

/* A known exported function on the way to the heap, through Debian's
 * python3: bytearray(100000) is allocated by PyByteArray_Resize (exported,
 * in .dynsym) through obmalloc's static functions (no symbol without
 * python3-dbg). Every stack of the script's 300 blocks passes through
 * PyByteArray_Resize, which memtop names from the dynamic symbol table:
 * its cum in-use figures hold at least the script's 300 * 100000 bytes.
 * libdwfl names an address only by a symbol whose [value, value + size)
 * holds it (the static functions' addresses stay python3.11+0xOFFSET,
 * not the preceding exported name): every named location in python3 is
 * checked to lie in its symbol's range, as nm -D -S gives it. */
static const char k_bytearray_script[] =
    "import os, sys\n"
    "keep = [bytearray(100000) for i in range(300)]\n"
    "sys.stdout.write('ready %d\\n' % os.getpid())\n"
    "sys.stdout.flush()\n"
    "sys.stdin.read()\n";

static void test_python_known_function(void **state) {
  const char *fn = "PyByteArray_Resize";
  proc_t p;
  char *raw, *nm;
  const char *l;
  unsigned long long value = 0, size = 0, addr, lo = 0, hi = 0;
  unsigned char ehdr[18];
  long long v[4];
  int st, checked = 0, named = 0;
  FILE *f;

  (void)state;
  if (!host_have_program("go") || access("/usr/bin/python3", X_OK) != 0 ||
      !host_have_program("nm")) {
    print_message("skipped: go, nm or /usr/bin/python3 is not installed\n");
    skip();
  }
  start_python(&p, k_bytearray_script);
  raw = pprof_raw(&p);
  stop(&p);
  assert_true(raw_sum(raw, fn, 1, v) >= 1);
  print_message("through %s: %lld objects, %lld bytes in use\n", fn, v[2],
                v[3]);
  assert_true(v[2] >= 300);
  assert_true(v[3] >= 300LL * 100000);

  /* Every location in python3.11's mapping that has a name lies in the
   * range of the dynamic symbol of that name (nm -D -S): no static
   * function's address took a neighbour's name. A non-PIE python3
   * (Debian's is ET_EXEC) runs at its link-time addresses. */
  f = fopen("/usr/bin/python3", "rb");
  assert_non_null(f);
  assert_int_equal(fread(ehdr, 1, sizeof ehdr, f), sizeof ehdr);
  fclose(f);
  if (ehdr[16] != 2 /* ET_EXEC */) {
    print_message("python3 is position-independent: names' ranges are "
                  "not checked\n");
    free(raw);
    return;
  }
  l = strstr(raw, "\nMappings\n");
  assert_non_null(l);
  assert_int_equal(sscanf(l, "\nMappings\n1: 0x%llx/0x%llx", &lo, &hi), 2);
  assert_non_null(strstr(l, " /usr/bin/python3"));
  nm = run("nm -D -S --defined-only /usr/bin/python3", &st);
  assert_int_equal(st, 0);
  for (l = strstr(raw, "\nLocations\n");
       l != NULL && strncmp(l, "\nMappings", 9); l = strchr(l + 1, '\n')) {
    char name[256], want[300];
    const char *sym;
    unsigned id;

    if (raw_location_line(l + 1, &id, &addr, name, sizeof name) != 0 ||
        name[0] == '\0' || addr < lo || addr >= hi)
      continue;
    snprintf(want, sizeof want, " %s\n", name);
    /* " NAME\n" ends nm's line for NAME (VALUE SIZE TYPE NAME). */
    sym = strstr(nm, want);
    if (sym == NULL) {
      print_message("%s at %llx is no dynamic symbol of python3\n", name, addr);
      fail();
    }
    while (sym > nm && sym[-1] != '\n')
      sym--;
    if (sscanf(sym, "%llx %llx", &value, &size) != 2)
      fail_msg("%s at %llx: no size in nm's line", name, addr);
    if (addr < value || addr >= value + size)
      fail_msg("%s at %llx is outside its symbol [%llx, %llx)", name, addr,
               value, value + size);
    if (strcmp(name, fn) == 0)
      checked++;
    named++;
  }
  print_message("%d named locations in python3 checked, %d in %s\n", named,
                checked, fn);
  assert_true(checked >= 1);
  free(nm);
  free(raw);
}

static int setup(void **state) {
  (void)state;
  if (host_build_dir(g_build, sizeof g_build) != 0 ||
      host_preload_path(g_build, g_preload, sizeof g_preload) != 0)
    return -1;
  snprintf(g_prog, sizeof g_prog, "%s/progs/pl_prof", g_build);
  return target_dir_setup(g_dir, sizeof g_dir, "/tmp/ms-prof-e2e-XXXXXX");
}

static int teardown(void **state) {
  (void)state;
  return target_dir_remove(g_dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pprof_top),
      cmocka_unit_test(test_once_sites),
      cmocka_unit_test(test_python),
      cmocka_unit_test(test_default_rate_large),
      cmocka_unit_test(test_default_rate_small),
      cmocka_unit_test(test_default_rate_small_cxx),
      cmocka_unit_test(test_cxx_new),
      cmocka_unit_test(test_cxx_new_jemalloc),
      cmocka_unit_test(test_python_known_function),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
