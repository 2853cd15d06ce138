/*
 * test_pprof.c - memtop's heap profile output, read back by the real
 * `go tool pprof`.
 *
 * The fixture profile's stacks are real return addresses inside this
 * test's own functions (site_a, site_b, site_c each call capture(), which
 * returns its return address; the line of each call is recorded beside
 * it), in the mappings /proc/self/maps gives for this binary. It is
 * symbolised with libdwfl from this binary, written as a gzipped
 * profile.proto, and read with `go tool pprof -raw` and `-top`
 * (-symbolize=none: pprof shows what the file carries, nothing it found
 * itself). The checks: pprof's -raw text equals the text Go 1.19's pprof
 * prints for the profile memtop meant to write (the round trip, values,
 * locations, functions, mappings and all), the values are unsampled as
 * Go's runtime computes them (figures computed by Go's scaleHeapSample,
 * go1.19), the functions and lines are the test's own, a wrong build id
 * leaves a mapping unresolved, a delta subtracts; and the harness reads
 * Go's own heap profiles (tests/data/go/pprof) as pprof prints them.
 *
 * Without go (golang-go), the pprof tests skip, saying so.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <link.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "common/strbuf.h"
#include "memstats.h"
#include "pprof/heap.h"
#include "pprof/pprof.h"
#include "pprof/top.h"
#include "pprof/profile.pb-c.h"
#include "support/hostile.h"
#include "support/host.h"
#include "support/target.h"

/* ---- the fixture's call sites ------------------------------------------ */

static int line_a, line_b, line_c, call_line[3];

/* Stores its return address: the call is the last instruction of its
 * line in each site, so the return address is the next line's code and
 * only a lookup at address - 1 finds the call's line. */
static __attribute__((noinline)) void capture(uint64_t *out) {
  *out = (uint64_t)(uintptr_t)__builtin_return_address(0);
  __asm__ volatile("" ::: "memory");
}

/* Each site's call and the record of its line share one line (and the
 * formatter must not split them). */
// clang-format off
static __attribute__((noinline)) void site_a(uint64_t *ra) {
  line_a = __LINE__; capture(&ra[0]);
  ra[1] = (uint64_t)(uintptr_t)__builtin_return_address(0);
  __asm__ volatile("" ::: "memory");
}

static __attribute__((noinline)) void site_b(uint64_t *ra) {
  line_b = __LINE__; capture(&ra[0]);
  ra[1] = (uint64_t)(uintptr_t)__builtin_return_address(0);
  __asm__ volatile("" ::: "memory");
}

static __attribute__((noinline)) void site_c(uint64_t *ra) {
  line_c = __LINE__; capture(&ra[0]);
  ra[1] = (uint64_t)(uintptr_t)__builtin_return_address(0);
  __asm__ volatile("" ::: "memory");
}

/* A capture inside functions inlined into another, two deep (as a C++
 * container's allocate is inlined into push_back, and that into the
 * caller): the real function is the third frame of one address. */
static int line_inner, line_middle, line_outer;

static inline __attribute__((always_inline)) void inlined_inner(uint64_t *ra) {
  line_inner = __LINE__; capture(&ra[0]);
}

static inline __attribute__((always_inline)) void inlined_middle(uint64_t *ra) {
  line_middle = __LINE__; inlined_inner(ra);
}

static __attribute__((noinline)) void inlined_outer(uint64_t *ra) {
  line_outer = __LINE__; inlined_middle(ra);
  ra[1] = (uint64_t)(uintptr_t)__builtin_return_address(0);
  __asm__ volatile("" ::: "memory");
}
// clang-format on

typedef struct fixture_s {
  uint64_t stack[3][2];
  ms__profile_record_t rec[3];
  ms__profile_mapping_t map[8];
  char paths[8][PATH_MAX];
  uint8_t build_id[64];
  uint32_t build_id_len;
  ms__profile_t p;
} fixture_t;

/* This binary's GNU build id (from its PT_NOTE, through the loader). */
static int own_build_id(struct dl_phdr_info *info, size_t size, void *arg) {
  fixture_t *f = arg;

  (void)size;
  f->build_id_len = host_note_build_id(info, f->build_id, sizeof f->build_id);
  return 1; /* the first object is the program itself */
}

/* The executable mappings of this binary, from /proc/self/maps. */
static void own_mappings(fixture_t *f) {
  char exe[PATH_MAX], line[PATH_MAX + 256], path[PATH_MAX];
  unsigned long long start, end, off;
  char perms[8];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  FILE *maps = fopen("/proc/self/maps", "r");

  assert_true(n > 0);
  exe[n] = '\0';
  assert_non_null(maps);
  f->p.nmappings = 0;
  while (fgets(line, sizeof line, maps) != NULL && f->p.nmappings < 8) {
    path[0] = '\0';
    if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %4095s", &start, &end, perms,
               &off, path) < 4)
      continue;
    if (strcmp(path, exe) != 0 || perms[2] != 'x')
      continue;
    ms__profile_mapping_t *m = &f->map[f->p.nmappings];
    snprintf(f->paths[f->p.nmappings], PATH_MAX, "%s", path);
    m->start = start;
    m->limit = end;
    m->offset = off;
    m->path = f->paths[f->p.nmappings];
    f->p.nmappings++;
  }
  fclose(maps);
  assert_true(f->p.nmappings >= 1);
}

/* Three buckets of 1 KiB objects: site_a 300 of them, all in use; site_b
 * 100, in use (a third of site_a's bytes); site_c 50 of 64 bytes, all
 * freed. */
static void fixture_init(fixture_t *f, uint64_t rate, int with_build_id) {
  static const uint64_t sizes[3] = {1024, 1024, 64};
  static const uint64_t allocs[3] = {300, 100, 50};
  static const uint64_t frees[3] = {0, 0, 50};
  int i;

  memset(f, 0, sizeof *f);
  // clang-format off
  call_line[0] = __LINE__; site_a(f->stack[0]);
  call_line[1] = __LINE__; site_b(f->stack[1]);
  call_line[2] = __LINE__; site_c(f->stack[2]);
  // clang-format on
  for (i = 0; i < 3; i++) {
    f->rec[i].size = sizes[i];
    f->rec[i].alloc_objects = allocs[i];
    f->rec[i].alloc_bytes = allocs[i] * sizes[i];
    f->rec[i].free_objects = frees[i];
    f->rec[i].free_bytes = frees[i] * sizes[i];
    f->rec[i].depth = 2;
    f->rec[i].stack = f->stack[i];
  }
  own_mappings(f);
  if (with_build_id) {
    dl_iterate_phdr(own_build_id, f);
    assert_true(f->build_id_len > 0);
    for (i = 0; i < (int)f->p.nmappings; i++) {
      f->map[i].build_id = f->build_id;
      f->map[i].build_id_len = f->build_id_len;
    }
  }
  f->p.pid = (int32_t)getpid();
  f->p.time_unix_ns = 1700000000123456789ull;
  f->p.rate = rate;
  f->p.nrecords = 3;
  f->p.records = f->rec;
  f->p.mappings = f->map;
}

/* ---- running go tool pprof ---------------------------------------------- */

static char tmpdir[64];

static int have_go(void) {
  return system("command -v go >/dev/null 2>&1") == 0;
}

#define SKIP_WITHOUT_GO()                                                      \
  do {                                                                         \
    if (!have_go()) {                                                          \
      print_message("skipped: go (golang-go) is not installed; "               \
                    "`go tool pprof` reads the profiles\n");                   \
      skip();                                                                  \
    }                                                                          \
  } while (0)

/* Runs `go tool pprof ARGS FILE` and returns its standard output
 * (malloc'd), failing the test if it exits non-zero. HOME and GOCACHE in
 * the test's own directory (CI has neither), TZ=UTC for the times. */
static char *pprof(const char *args, const char *file) {
  char cmd[1024];
  ms__strbuf_t out = MS_STRBUF_INIT;
  char buf[4096];
  size_t n;
  FILE *p;
  int status;

  snprintf(cmd, sizeof cmd,
           "HOME=%s GOCACHE=%s/gocache TZ=UTC GOFLAGS= go tool pprof %s %s "
           "2>%s/stderr",
           tmpdir, tmpdir, args, file, tmpdir);
  p = popen(cmd, "r");
  assert_non_null(p);
  while ((n = fread(buf, 1, sizeof buf, p)) > 0)
    ms__strbuf_append(&out, buf, n);
  status = pclose(p);
  if (status != 0) {
    char *err;
    snprintf(cmd, sizeof cmd, "%s/stderr", tmpdir);
    err = host_read_all(cmd, NULL);
    print_error("%s", err != NULL ? err : "");
    free(err);
    fail_msg("go tool pprof %s %s exited with status %d", args, file, status);
  }
  return out.data != NULL ? out.data : strdup("");
}

/* Writes h as memtop writes it; returns the file's path (static). */
static const char *write_profile(const mt_heap_t *h, const char *name) {
  static char path[128];
  uint8_t *bytes = NULL;
  size_t len = 0;
  FILE *f;

  assert_int_equal(mt_pprof_encode(h, &bytes, &len), 0);
  snprintf(path, sizeof path, "%s/%s", tmpdir, name);
  f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(bytes, 1, len, f), len);
  assert_int_equal(fclose(f), 0);
  free(bytes);
  return path;
}

/* ---- what Go 1.19's pprof prints for a profile (profile.String) -------- */

/* time.Time's String() in UTC: "2006-01-02 15:04:05.999999999 +0000 UTC"
 * (the fraction without trailing zeros, and none if zero). */
static void go_time(ms__strbuf_t *b, uint64_t ns) {
  time_t secs = (time_t)(ns / 1000000000u);
  unsigned frac = (unsigned)(ns % 1000000000u);
  struct tm tm;
  char s[64], f[16];
  int i;

  gmtime_r(&secs, &tm);
  strftime(s, sizeof s, "%Y-%m-%d %H:%M:%S", &tm);
  ms__strbuf_puts(b, s);
  if (frac != 0) {
    snprintf(f, sizeof f, ".%09u", frac);
    for (i = (int)strlen(f) - 1; f[i] == '0'; i--)
      f[i] = '\0';
    ms__strbuf_puts(b, f);
  }
  ms__strbuf_puts(b, " +0000 UTC");
}

static char *expected_raw(const mt_heap_t *h) {
  static const char *const types[4] = {
      "alloc_objects/count", "alloc_space/bytes", "inuse_objects/count",
      "inuse_space/bytes[dflt]"};
  ms__strbuf_t b = MS_STRBUF_INIT;
  size_t i, j;
  int k;

  ms__strbuf_printf(&b,
                    "Comment: memtop heap profile of PID %d%s; sampling rate "
                    "%" PRIu64 " bytes\n",
                    (int)h->pid, h->delta ? " (growth over the interval)" : "",
                    h->rate);
  ms__strbuf_printf(&b, "PeriodType: space bytes\nPeriod: %" PRIu64 "\n",
                    h->rate);
  ms__strbuf_puts(&b, "Time: ");
  go_time(&b, h->time_nanos);
  ms__strbuf_puts(&b, "\n");
  assert_int_equal(h->duration_nanos, 0); /* "%.4v" is not reproduced */
  ms__strbuf_puts(&b, "Samples:\n");
  for (k = 0; k < 4; k++)
    ms__strbuf_printf(&b, "%s%s", k ? " " : "", types[k]);
  ms__strbuf_puts(&b, "\n");
  for (i = 0; i < h->nsamples; i++) {
    for (k = 0; k < 4; k++)
      ms__strbuf_printf(&b, " %10" PRId64, h->samples[i].value[k]);
    ms__strbuf_puts(&b, ": ");
    for (j = 0; j < h->samples[i].nlocations; j++)
      ms__strbuf_printf(&b, "%u ", h->samples[i].locations[j] + 1);
    ms__strbuf_printf(&b, "\n                bytes:[%" PRId64 "]\n",
                      h->samples[i].size);
  }
  ms__strbuf_puts(&b, "Locations\n");
  for (i = 0; i < h->nlocations; i++) {
    const mt_heap_location_t *l = &h->locations[i];
    char head[64];

    snprintf(head, sizeof head, "%6zu: %#" PRIx64 " ", i + 1, l->address);
    if (l->mapping != 0)
      snprintf(head + strlen(head), sizeof head - strlen(head), "M=%u ",
               l->mapping);
    if (l->nlines == 0)
      ms__strbuf_printf(&b, "%s\n", head);
    for (j = 0; j < l->nlines; j++) {
      const mt_heap_function_t *fn = &h->functions[l->lines[j].function];
      ms__strbuf_printf(&b, "%s%s %s:%" PRId64 " s=%" PRId64,
                        j == 0 ? head : "             ", h->strings[fn->name],
                        h->strings[fn->filename], l->lines[j].line,
                        fn->start_line);
      if (strcmp(h->strings[fn->name], h->strings[fn->system_name]) != 0)
        ms__strbuf_printf(&b, "(%s)", h->strings[fn->system_name]);
      ms__strbuf_puts(&b, "\n");
    }
  }
  ms__strbuf_puts(&b, "Mappings\n");
  for (i = 0; i < h->nmappings; i++) {
    const mt_heap_mapping_t *m = &h->mappings[i];
    ms__strbuf_printf(
        &b, "%zu: %#" PRIx64 "/%#" PRIx64 "/%#" PRIx64 " %s %s %s\n", i + 1,
        m->start, m->limit, m->offset, h->strings[m->filename],
        h->strings[m->build_id], m->symbolized ? "[FN][FL][LN][IN]" : "");
  }
  return b.data;
}

/* Fails, printing the first line where want and got differ. */
static void show_diff(const char *want, const char *got) {
  size_t line = 1;
  const char *w = want, *g = got;

  while (*w != '\0' && *w == *g) {
    if (*w == '\n') {
      line++;
      want = w + 1;
      got = g + 1;
    }
    w++;
    g++;
  }
  print_error("line %zu differs:\n  want: %.*s\n  got:  %.*s\n", line,
              (int)strcspn(want, "\n"), want, (int)strcspn(got, "\n"), got);
  fail_msg("go tool pprof -raw differs from what memtop wrote");
}

/* The location of a sample's frame j, and its innermost function's name. */
static const char *frame_name(const mt_heap_t *h, size_t s, size_t j,
                              int64_t *line) {
  const mt_heap_location_t *l = &h->locations[h->samples[s].locations[j]];

  if (l->nlines == 0)
    return NULL;
  *line = l->lines[0].line;
  return h->strings[h->functions[l->lines[0].function].name];
}

/* ---- tests -------------------------------------------------------------- */

static int setup(void **state) {
  (void)state;
  snprintf(tmpdir, sizeof tmpdir, "/tmp/test_pprof.XXXXXX");
  return mkdtemp(tmpdir) != NULL ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  return target_dir_remove(tmpdir);
}

/* Go's runtime/pprof scaleHeapSample, figures computed by Go (go1.19):
 * count, bytes, rate -> count, bytes. */
static void test_scale_as_go(void **state) {
  static const int64_t go[][5] = {
      {300, 307200, 524288, 153750, 157440050},
      {100, 102400, 524288, 51250, 52480016},
      {50, 3200, 524288, 409625, 26216000},
      {3, 3000000, 524288, 3, 3523084},
      {7, 336, 524288, 76462, 3670184},
      {300, 307200, 1, 300, 307200},
      {0, 0, 524288, 0, 0},
  };
  int64_t c, b;
  size_t i;

  (void)state;
  for (i = 0; i < sizeof go / sizeof go[0]; i++) {
    mt_heap_scale(go[i][0], go[i][1], (uint64_t)go[i][2], &c, &b);
    assert_int_equal(c, go[i][3]);
    assert_int_equal(b, go[i][4]);
  }
}

/* The symbolised fixture: each sample's innermost frame is its site
 * function at the line of its call to capture(), the next frame this
 * test's fixture_init (return addresses are looked up at address - 1). */
static void test_symbolize_own_functions(void **state) {
  static const char *const names[3] = {"site_a", "site_b", "site_c"};
  const int *lines[3] = {&line_a, &line_b, &line_c};
  fixture_t f;
  mt_heap_t h;
  int64_t line = 0;
  const char *name;
  size_t i;

  (void)state;
  fixture_init(&f, 1, 1);
  assert_int_equal(mt_heap_build(&f.p, NULL, &h), 0);
  assert_int_equal(mt_heap_symbolize(&h, 0, 0), 0);
  assert_int_equal(h.nsamples, 3);
  for (i = 0; i < 3; i++) {
    name = frame_name(&h, i, 0, &line);
    assert_non_null(name);
    assert_string_equal(name, names[i]);
    assert_int_equal(line, *lines[i]);
    name = frame_name(&h, i, 1, &line);
    assert_non_null(name);
    assert_string_equal(name, "fixture_init");
    assert_int_equal(line, call_line[i]);
    const mt_heap_location_t *l = &h.locations[h.samples[i].locations[0]];
    const char *file = h.strings[h.functions[l->lines[0].function].filename];
    assert_non_null(strstr(file, "test_pprof.c"));
    assert_true(h.mappings[l->mapping - 1].symbolized);
  }
  mt_heap_free(&h);
}

/* An address in inlined code resolves to every function of the inline
 * chain, innermost first, each at the line of its call to the next, down
 * to the real function: inlined_inner, inlined_middle, inlined_outer.
 * libdw's dwarf_getscopes alone gave inlined_inner and stopped (past an
 * inlined function it goes on with the scopes of its abstract
 * definition): a C++ site allocating through std::vector showed as
 * std::__new_allocator<T>::allocate alone, and every site of that T was
 * merged into it. */
static void test_symbolize_inline_chain(void **state) {
  static const char *const names[3] = {"inlined_inner", "inlined_middle",
                                       "inlined_outer"};
  const int *lines[3] = {&line_inner, &line_middle, &line_outer};
  fixture_t f;
  mt_heap_t h;
  const mt_heap_location_t *l;
  uint32_t j;

  (void)state;
  fixture_init(&f, 1, 1);
  inlined_outer(f.stack[0]);
  f.p.nrecords = 1;
  assert_int_equal(mt_heap_build(&f.p, NULL, &h), 0);
  assert_int_equal(mt_heap_symbolize(&h, 0, 0), 0);
  assert_int_equal(h.nsamples, 1);
  l = &h.locations[h.samples[0].locations[0]];
  for (j = 0; j < l->nlines; j++)
    print_message("line %u: %s:%lld\n", j,
                  h.strings[h.functions[l->lines[j].function].name],
                  (long long)l->lines[j].line);
  assert_int_equal(l->nlines, 3);
  for (j = 0; j < 3; j++) {
    assert_string_equal(h.strings[h.functions[l->lines[j].function].name],
                        names[j]);
    assert_int_equal(l->lines[j].line, *lines[j]);
  }
  mt_heap_free(&h);
}

/* What memtop writes is what pprof reads: -raw prints exactly the profile
 * memtop built (rate 1: the exact figures). */
static void round_trip(uint64_t rate, int with_build_id) {
  fixture_t f;
  mt_heap_t h;
  char *want, *got;

  fixture_init(&f, rate, with_build_id);
  assert_int_equal(mt_heap_build(&f.p, NULL, &h), 0);
  assert_int_equal(mt_heap_symbolize(&h, 0, 0), 0);
  got = pprof("-raw -symbolize=none", write_profile(&h, "rt.pb.gz"));
  want = expected_raw(&h);
  if (strcmp(want, got) != 0)
    show_diff(want, got);
  /* The figures themselves, as pprof prints them. */
  if (rate == 1) {
    assert_non_null(strstr(got, "        300     307200        300     "
                                "307200: 1 2 \n"));
    assert_non_null(strstr(got, "         50       3200          0          "
                                "0: 5 6 \n"));
  } else {
    assert_non_null(strstr(got, "     153750  157440050     153750  "
                                "157440050: 1 2 \n"));
    assert_non_null(strstr(got, "      51250   52480016      51250   "
                                "52480016: 3 4 \n"));
    assert_non_null(strstr(got, "     409625   26216000          0          "
                                "0: 5 6 \n"));
  }
  assert_non_null(strstr(got, " site_a "));
  free(want);
  free(got);
  mt_heap_free(&h);
}

static void test_round_trip_rate1(void **state) {
  (void)state;
  SKIP_WITHOUT_GO();
  round_trip(1, 1);
}

static void test_round_trip_sampled(void **state) {
  (void)state;
  SKIP_WITHOUT_GO();
  round_trip(524288, 0);
}

/* pprof -top names the sites: in use, site_a holds three times site_b's
 * bytes and site_c nothing; allocated, site_c is there. */
static void test_top_names_sites(void **state) {
  fixture_t f;
  mt_heap_t h;
  char *top, *alloc;
  const char *path;

  (void)state;
  SKIP_WITHOUT_GO();
  fixture_init(&f, 1, 1);
  assert_int_equal(mt_heap_build(&f.p, NULL, &h), 0);
  assert_int_equal(mt_heap_symbolize(&h, 0, 0), 0);
  path = write_profile(&h, "top.pb.gz");
  top = pprof("-top -symbolize=none", path);
  alloc = pprof("-top -symbolize=none -sample_index=alloc_space", path);
  assert_non_null(strstr(top, "Type: inuse_space"));
  /* 300 KiB and 100 KiB: 75% and 25% of the 400 KiB in use. */
  assert_non_null(strstr(top, "300kB 75.00% 75.00%      300kB 75.00%  site_a"));
  assert_non_null(strstr(top, "100kB 25.00%   100%      100kB 25.00%  site_b"));
  assert_null(strstr(top, "site_c"));
  assert_non_null(strstr(alloc, "Type: alloc_space"));
  assert_non_null(strstr(alloc, "site_c"));
  free(top);
  free(alloc);
  mt_heap_free(&h);
}

/* A mapping whose file has another build id than the process's (rebuilt
 * since) is not used: its addresses stay unresolved, not misnamed. */
static void test_build_id_mismatch(void **state) {
  static const uint8_t other[20] = {0xde, 0xad, 0xbe, 0xef};
  fixture_t f;
  mt_heap_t h;
  size_t i;
  char *raw;

  (void)state;
  fixture_init(&f, 1, 0);
  for (i = 0; i < f.p.nmappings; i++) {
    f.map[i].build_id = other;
    f.map[i].build_id_len = sizeof other;
  }
  assert_int_equal(mt_heap_build(&f.p, NULL, &h), 0);
  assert_int_equal(mt_heap_symbolize(&h, 0, 0), 0);
  for (i = 0; i < h.nlocations; i++)
    assert_int_equal(h.locations[i].nlines, 0);
  for (i = 0; i < h.nmappings; i++) {
    assert_false(h.mappings[i].symbolized);
    assert_non_null(h.mappings[i].unresolved);
    assert_non_null(strstr(h.mappings[i].unresolved, "build id"));
  }
  if (have_go()) {
    raw = pprof("-raw -symbolize=none", write_profile(&h, "bid.pb.gz"));
    assert_null(strstr(raw, "site_a"));
    assert_null(strstr(raw, "[FN]"));
    assert_non_null(strstr(raw, "deadbeef"));
    free(raw);
  }
  mt_heap_free(&h);
}

/* A mapping's path is the target's word: a FIFO (which an open() would
 * wait on forever) or a directory is not read, and says why. */
static void test_mapping_not_a_file(void **state) {
  char fifo[128], dir[128];
  fixture_t f;
  mt_heap_t h;
  size_t i;

  (void)state;
  snprintf(fifo, sizeof fifo, "%s/fifo", tmpdir);
  snprintf(dir, sizeof dir, "%s/dir", tmpdir);
  assert_int_equal(mkfifo(fifo, 0600), 0);
  assert_int_equal(mkdir(dir, 0700), 0);
  fixture_init(&f, 1, 0);
  f.map[0].path = fifo;
  for (i = 1; i < f.p.nmappings; i++)
    f.map[i].path = dir;
  assert_int_equal(mt_heap_build(&f.p, NULL, &h), 0);
  assert_int_equal(mt_heap_symbolize(&h, 0, 0), 0);
  for (i = 0; i < h.nmappings; i++) {
    assert_false(h.mappings[i].symbolized);
    assert_string_equal(h.mappings[i].unresolved, "not a regular file");
  }
  for (i = 0; i < h.nlocations; i++)
    assert_int_equal(h.locations[i].nlines, 0);
  mt_heap_free(&h);
  unlink(fifo);
  rmdir(dir);
}

/* --seconds: the later profile less the earlier one, each unsampled; an
 * unchanged bucket is left out, and in-use may fall. */
static void test_delta(void **state) {
  fixture_t a, b;
  mt_heap_t h;
  int64_t want_c, want_b, c0, b0, c1, b1;

  (void)state;
  fixture_init(&a, 524288, 0);
  fixture_init(&b, 524288, 0);
  b.p.time_unix_ns = a.p.time_unix_ns + 2000000000u;
  /* site_a: 200 more allocated; site_b: unchanged; site_c: 10 more
   * allocated and freed. */
  b.rec[0].alloc_objects += 200;
  b.rec[0].alloc_bytes += 200 * 1024;
  b.rec[2].alloc_objects += 10;
  b.rec[2].alloc_bytes += 640;
  b.rec[2].free_objects += 10;
  b.rec[2].free_bytes += 640;
  assert_int_equal(mt_heap_build(&b.p, &a.p, &h), 0);
  assert_true(h.delta);
  assert_int_equal(h.duration_nanos, 2000000000u);
  assert_int_equal(h.nsamples, 2);
  mt_heap_scale(500, 500 * 1024, 524288, &c1, &b1);
  mt_heap_scale(300, 300 * 1024, 524288, &c0, &b0);
  want_c = c1 - c0;
  want_b = b1 - b0;
  assert_int_equal(h.samples[0].value[MT_HEAP_ALLOC_OBJECTS], want_c);
  assert_int_equal(h.samples[0].value[MT_HEAP_ALLOC_SPACE], want_b);
  assert_int_equal(h.samples[0].value[MT_HEAP_INUSE_SPACE], want_b);
  mt_heap_scale(60, 60 * 64, 524288, &c1, &b1);
  mt_heap_scale(50, 50 * 64, 524288, &c0, &b0);
  assert_int_equal(h.samples[1].value[MT_HEAP_ALLOC_OBJECTS], c1 - c0);
  assert_int_equal(h.samples[1].value[MT_HEAP_INUSE_OBJECTS], 0);
  mt_heap_free(&h);
}

/* The test of the test: Go's own heap profiles decode with the same
 * harness, and -raw prints heap.pb.gz as pprof printed it when the vector
 * was made. */
static void test_go_vectors(void **state) {
  char path[PATH_MAX], *got, *want;
  static const char *const others[] = {"allocs.pb.gz", "min_full.pb.gz"};
  size_t i;

  (void)state;
  SKIP_WITHOUT_GO();
  snprintf(path, sizeof path, "tests/data/go/pprof/heap.pb.raw.txt");
  want = host_read_all(path, NULL);
  assert_non_null(want);
  got = pprof("-raw -symbolize=none", "tests/data/go/pprof/heap.pb.gz");
  assert_string_equal(got, want);
  free(got);
  free(want);
  for (i = 0; i < 2; i++) {
    snprintf(path, sizeof path, "tests/data/go/pprof/%s", others[i]);
    got = pprof("-raw -symbolize=none", path);
    assert_non_null(strstr(got, "\nalloc_objects/count alloc_space/bytes"));
    assert_non_null(strstr(got, " inuse_objects/count inuse_space/bytes"));
    free(got);
  }
}

/* Hostile input: a record whose frees exceed its allocations counts
 * nothing in use; a depth over the limit is refused. */
static void test_hostile_records(void **state) {
  fixture_t f;
  mt_heap_t h;

  (void)state;
  fixture_init(&f, 1, 0);
  f.rec[1].free_objects = f.rec[1].alloc_objects + 1;
  assert_int_equal(mt_heap_build(&f.p, NULL, &h), 0);
  assert_int_equal(h.samples[1].value[MT_HEAP_INUSE_OBJECTS], 0);
  assert_int_equal(h.samples[1].value[MT_HEAP_INUSE_SPACE], 0);
  mt_heap_free(&h);
  f.rec[0].depth = MS__PROFILE_MAX_DEPTH + 1;
  assert_int_equal(mt_heap_build(&f.p, NULL, &h), MS_EINVAL);
  f.rec[0].depth = 1;
  f.rec[0].stack = NULL;
  assert_int_equal(mt_heap_build(&f.p, NULL, &h), MS_EINVAL);
}

/* ---- the text top list, pinned by a golden file ------------------------- */

static void check_golden(const char *name, const char *got) {
  char path[PATH_MAX];
  const char *update = getenv("MS_UPDATE_GOLDEN");
  char *want;
  FILE *f;

  snprintf(path, sizeof path, "tests/data/golden/%s", name);
  if (update != NULL && strcmp(update, "1") == 0) {
    f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(got, 1, strlen(got), f), strlen(got));
    assert_int_equal(fclose(f), 0);
    print_message("updated %s\n", path);
    return;
  }
  want = host_read_all(path, NULL);
  if (want == NULL)
    fail_msg("cannot read %s: write it with MS_UPDATE_GOLDEN=1 after "
             "checking the output",
             path);
  if (strcmp(want, got) != 0) {
    print_error("%s", got);
    show_diff(want, got);
  }
  free(want);
}

/* A handmade profile: three sites with names from a stranger's binary
 * (one full of terminal escapes and a bidi override), one address left
 * unresolved, a recursive stack (cum counted once), dropped samples. */
static void top_fixture(mt_heap_t *h, uint64_t rate) {
  static const uint64_t st[5][3] = {
      {0x1010, 0x2010, 0x3010}, /* alloc_small <- handler <- main */
      {0x1110, 0x2010, 0x3010}, /* "\e]0;evil" <- handler <- main */
      {0x2010, 0x2010, 0x3010}, /* handler <- handler <- main */
      {0x9990, 0x3010, 0},      /* a library without symbols <- main */
      {0xf0010, 0x3010, 0},     /* in no mapping <- main */
  };
  static const ms__profile_mapping_t lib = {
      0x9000, 0xa000, 0x4000, "/opt/x/lib\x1b[1mplugin.so", NULL, 0};
  static ms__profile_record_t rec[5];
  ms__profile_t p;
  size_t i;
  uint32_t fn;

  memset(&p, 0, sizeof p);
  memset(rec, 0, sizeof rec);
  for (i = 0; i < 5; i++) {
    rec[i].size = 512u << i;
    rec[i].alloc_objects = 41 - 8 * i;
    rec[i].alloc_bytes = rec[i].alloc_objects * rec[i].size;
    rec[i].free_objects = i;
    rec[i].free_bytes = i * rec[i].size;
    rec[i].depth = i >= 3 ? 2 : 3;
    rec[i].stack = st[i];
  }
  p.pid = 4242;
  p.time_unix_ns = 1700000000000000000ull;
  p.rate = rate;
  p.buckets_dropped = 7;
  p.frees_lost = 2;
  p.nrecords = 5;
  p.records = rec;
  p.nmappings = 1;
  p.mappings = &lib;
  assert_int_equal(mt_heap_build(&p, NULL, h), 0);
  for (i = 0; i < h->nlocations; i++) {
    mt_heap_location_t *l = &h->locations[i];
    const char *name = NULL;
    int64_t line = 0;

    switch (l->address + 1) {
    case 0x1010:
      name = "alloc_small", line = 12;
      break;
    case 0x1110:
      name = "\x1b]0;evil\x07\xe2\x80\xae_reversed", line = 7;
      break;
    case 0x2010:
      name = "handler", line = 30;
      break;
    case 0x3010:
      name = "main", line = 99;
      break;
    default:
      continue;
    }
    fn = mt_heap_function(h, name, name, "src/\x1b[2Jserver.c", 1);
    l->lines = malloc(sizeof *l->lines);
    assert_non_null(l->lines);
    l->lines[0].function = fn;
    l->lines[0].line = line;
    l->nlines = 1;
  }
}

static void test_top_text_golden(void **state) {
  ms__strbuf_t b = MS_STRBUF_INIT;
  mt_heap_t h;

  (void)state;
  top_fixture(&h, 524288);
  assert_int_equal(mt_top_text(&b, &h, MT_HEAP_INUSE_SPACE, 10), 0);
  assert_int_equal(mt_top_text(&b, &h, MT_HEAP_ALLOC_SPACE, 2), 0);
  mt_heap_free(&h);
  top_fixture(&h, 1);
  assert_int_equal(mt_top_text(&b, &h, MT_HEAP_INUSE_SPACE, 0), 0);
  mt_heap_free(&h);
  /* Nothing a terminal acts on comes out. */
  assert_null(strchr(b.data, '\x1b'));
  assert_null(strchr(b.data, '\x07'));
  assert_null(strstr(b.data, "\xe2\x80\xae"));
  check_golden("profile_top.txt", b.data);
  ms__strbuf_free(&b);
}

/* ---- what a stranger's names and counts do to the written profile ------ */

/* The profile.proto inside memtop's gzipped bytes, unpacked by
 * protobuf-c. */
static Perftools__Profiles__Profile *unpack_written(const mt_heap_t *h) {
  uint8_t *gz = NULL, *raw;
  size_t len = 0, cap = 64u << 20;
  z_stream z;
  Perftools__Profiles__Profile *p;

  assert_int_equal(mt_pprof_encode(h, &gz, &len), 0);
  raw = malloc(cap);
  assert_non_null(raw);
  memset(&z, 0, sizeof z);
  assert_int_equal(inflateInit2(&z, 15 + 16), Z_OK);
  z.next_in = gz;
  z.avail_in = (uInt)len;
  z.next_out = raw;
  z.avail_out = (uInt)cap;
  assert_int_equal(inflate(&z, Z_FINISH), Z_STREAM_END);
  p = perftools__profiles__profile__unpack(NULL, z.total_out, raw);
  inflateEnd(&z);
  assert_non_null(p);
  free(raw);
  free(gz);
  return p;
}

/* What pprof cannot know goes in the profile's comment: the samples the
 * target dropped and the frees it could not record. */
static void test_comment_says_losses(void **state) {
  Perftools__Profiles__Profile *pb;
  mt_heap_t h;

  (void)state;
  top_fixture(&h, 524288);
  pb = unpack_written(&h);
  assert_int_equal(pb->n_comment, 1);
  assert_true(pb->comment[0] >= 0 &&
              (size_t)pb->comment[0] < pb->n_string_table);
  const char *c = pb->string_table[pb->comment[0]];
  assert_non_null(strstr(c, "samples dropped: bucket table full"));
  assert_non_null(strstr(c, "; 2 frees of sampled blocks not recorded"));
  /* Sampled from the process's start: no "since". */
  assert_null(strstr(c, "since"));
  perftools__profiles__profile__free_unpacked(pb, NULL);
  mt_heap_free(&h);
}

/* A profile whose sampling began at memtop attach --track says since
 * when, in UTC, in its comment and in the top list, a stranger's largest
 * figure too. */
static void test_comment_says_since(void **state) {
  Perftools__Profiles__Profile *pb;
  mt_heap_t h;
  ms__strbuf_t top = MS_STRBUF_INIT;
  char buf[160];

  (void)state;
  top_fixture(&h, 524288);
  h.since_nanos = 1700000000123456789ull;
  pb = unpack_written(&h);
  assert_int_equal(pb->n_comment, 1);
  assert_non_null(strstr(pb->string_table[pb->comment[0]],
                         "; samples since memtop attach --track at "
                         "2023-11-14 22:13:20 UTC; blocks allocated before "
                         "are not in the profile"));
  perftools__profiles__profile__free_unpacked(pb, NULL);
  assert_int_equal(mt_top_text(&top, &h, MT_HEAP_INUSE_SPACE, 5), 0);
  assert_non_null(strstr(top.data, "\nSamples since memtop attach --track at "
                                   "2023-11-14 22:13:20 UTC;"));
  ms__strbuf_free(&top);
  h.since_nanos = UINT64_MAX;
  assert_int_equal(mt_heap_since_text(&h, buf, sizeof buf), 1);
  assert_non_null(strstr(buf, "at 2554-07-21 23:34:33 UTC;"));
  h.since_nanos = 0;
  assert_int_equal(mt_heap_since_text(&h, buf, sizeof buf), 0);
  assert_string_equal(buf, "");
  mt_heap_free(&h);
}

/* Function names, files and mapping paths with escape sequences, a bidi
 * override, C1 controls and invalid UTF-8 reach profile.proto escaped:
 * nothing in its string table, nor in what `go tool pprof -top` (the
 * command memtop suggests) prints from it, acts on a terminal. */
static void test_written_strings_safe(void **state) {
  static const ms__profile_mapping_t map = {0x9000,
                                            0xa000,
                                            0,
                                            "/opt/\xc2\x9b"
                                            "1m\xe2\x80\xae"
                                            "evil\xff.so",
                                            NULL,
                                            0};
  static const uint64_t st[2] = {0x9010, 0x9020};
  ms__profile_record_t rec;
  ms__profile_t p;
  Perftools__Profiles__Profile *pb;
  mt_heap_t h;
  char name[200];
  size_t i;

  (void)state;
  memset(&p, 0, sizeof p);
  memset(&rec, 0, sizeof rec);
  rec.size = 64;
  rec.alloc_objects = 2;
  rec.alloc_bytes = 128;
  rec.depth = 2;
  rec.stack = st;
  p.pid = 4242;
  p.rate = 1;
  p.nrecords = 1;
  p.records = &rec;
  p.nmappings = 1;
  p.mappings = &map;
  assert_int_equal(mt_heap_build(&p, NULL, &h), 0);
  for (i = 0; i < h.nlocations; i++) {
    mt_heap_location_t *l = &h.locations[i];
    hostile_name(name, sizeof name, i);
    l->lines = malloc(sizeof *l->lines);
    assert_non_null(l->lines);
    l->lines[0].function =
        mt_heap_function(&h, name, name, "src/\x1b]2;t\x07x.c", 1);
    l->lines[0].line = 3;
    l->nlines = 1;
  }
  h.mappings[0].symbolized = 1;

  pb = unpack_written(&h);
  for (i = 0; i < pb->n_string_table; i++) {
    const char *s = pb->string_table[i];
    if (terminal_unsafe_at(s, strlen(s), 0) != strlen(s))
      fail_msg("string %zu of profile.proto acts on a terminal (byte %zu)", i,
               terminal_unsafe_at(s, strlen(s), 0));
  }
  perftools__profiles__profile__free_unpacked(pb, NULL);

  if (have_go()) {
    const char *file = write_profile(&h, "hostile.pb.gz");
    char *top = pprof("-top -symbolize=none", file);
    char *raw = pprof("-raw -symbolize=none", file);
    assert_true(terminal_unsafe_at(top, strlen(top), 1) == strlen(top));
    assert_true(terminal_unsafe_at(raw, strlen(raw), 1) == strlen(raw));
    /* Escaped where they were, the rest of the name as it was. */
    assert_non_null(strstr(top, "\\x1b[2J"));
    assert_non_null(strstr(raw, "/opt/\\u009b1m\\u202eevil\\xff.so"));
    free(top);
    free(raw);
  }
  mt_heap_free(&h);
}

/* Impossible counts: every figure kept within INT64_MAX / samples, so
 * that pprof's totals (int64 sums) and memtop's add up; the rate a
 * profile may carry is at most 2^40 ("Sampled every -1.0B" came of a
 * larger one). */
static void test_absurd_counts_capped(void **state) {
  static uint64_t st[3][1] = {{0x1010}, {0x1020}, {0x1030}};
  ms__profile_record_t rec[3];
  ms__profile_t p;
  ms__strbuf_t b = MS_STRBUF_INIT;
  mt_heap_t h;
  int64_t total[MT_HEAP_NVALUES] = {0};
  size_t i;
  int k;

  (void)state;
  memset(&p, 0, sizeof p);
  memset(rec, 0, sizeof rec);
  for (i = 0; i < 3; i++) {
    rec[i].size = UINT64_MAX;
    rec[i].alloc_objects = UINT64_MAX - i;
    rec[i].alloc_bytes = UINT64_MAX;
    rec[i].depth = 1;
    rec[i].stack = st[i];
  }
  p.pid = 4242;
  p.rate = MS__PROFILE_MAX_RATE;
  p.nrecords = 3;
  p.records = rec;
  assert_int_equal(mt_heap_build(&p, NULL, &h), 0);
  assert_true(h.capped);
  for (i = 0; i < h.nsamples; i++)
    for (k = 0; k < MT_HEAP_NVALUES; k++) {
      assert_true(h.samples[i].value[k] <= INT64_MAX / 3);
      assert_false(
          __builtin_add_overflow(total[k], h.samples[i].value[k], &total[k]));
    }
  assert_int_equal(mt_top_text(&b, &h, MT_HEAP_ALLOC_SPACE, 5), 0);
  assert_null(strstr(b.data, "-"));
  assert_non_null(strstr(b.data, "Sampled every 1.0TiB"));
  ms__strbuf_free(&b);
  if (have_go()) {
    const char *file = write_profile(&h, "absurd.pb.gz");
    char *top = pprof("-top -sample_index=alloc_space -symbolize=none", file);
    /* pprof's total is the sum, not a wrapped negative figure. */
    assert_null(strstr(top, "Showing nodes accounting for -"));
    assert_null(strstr(top, "total -"));
    free(top);
  }
  mt_heap_free(&h);
  /* A rate past MEMSTATS_PROFILE_RATE's bound is refused. */
  p.rate = MS__PROFILE_MAX_RATE + 1;
  assert_int_equal(mt_heap_build(&p, NULL, &h), MS_EINVAL);
}

/* Dirties the stack below the caller with byte b, where the next call's
 * locals will be. */
static __attribute__((noinline)) void dirty_stack(int b) {
  volatile unsigned char junk[4096];
  memset((void *)junk, b, sizeof junk);
  __asm__ volatile("" : : "r"(junk) : "memory");
}

/* The same function asked for twice is one function, whatever the stack
 * held before: mt_heap_function_t has 4 bytes of padding (three uint32_t
 * then an int64_t), which the lookup compares (memcmp). Without zeroing,
 * a second entry for the same function is made when the padding differs,
 * and the profile has duplicate functions (valgrind: "depends on
 * uninitialised value" in mt_heap_function). */
static void test_function_dedup_ignores_padding(void **state) {
  mt_heap_t h;
  ms__profile_t p;
  uint32_t a, b;
  (void)state;
  memset(&p, 0, sizeof p);
  p.rate = 1;
  assert_int_equal(mt_heap_build(&p, NULL, &h), 0);
  dirty_stack(0x00);
  a = mt_heap_function(&h, "f", "f", "f.c", 7);
  dirty_stack(0xa5);
  b = mt_heap_function(&h, "f", "f", "f.c", 7);
  assert_int_equal(a, b);
  dirty_stack(0x5a);
  b = mt_heap_function(&h, "f", "f", "f.c", 7);
  assert_int_equal(a, b);
  assert_int_equal(h.nfunctions, a + 1);
  mt_heap_free(&h);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_function_dedup_ignores_padding),
      cmocka_unit_test(test_scale_as_go),
      cmocka_unit_test(test_symbolize_own_functions),
      cmocka_unit_test(test_symbolize_inline_chain),
      cmocka_unit_test(test_round_trip_rate1),
      cmocka_unit_test(test_round_trip_sampled),
      cmocka_unit_test(test_top_names_sites),
      cmocka_unit_test(test_build_id_mismatch),
      cmocka_unit_test(test_mapping_not_a_file),
      cmocka_unit_test(test_delta),
      cmocka_unit_test(test_go_vectors),
      cmocka_unit_test(test_hostile_records),
      cmocka_unit_test(test_top_text_golden),
      cmocka_unit_test(test_comment_says_losses),
      cmocka_unit_test(test_comment_says_since),
      cmocka_unit_test(test_written_strings_safe),
      cmocka_unit_test(test_absurd_counts_capped),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
