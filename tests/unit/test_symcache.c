/*
 * test_symcache.c - the symbolisation cache (pprof/sym.h) and the live
 * view's use of it (memtop/sites_live.h).
 *
 * The profile is this test's own: return addresses inside its functions
 * and inside libc (qsort calling back into the test, so the address is in
 * libc's sort), in the mappings /proc/self/maps gives, with the build ids
 * the loader has. With Debian's libc6-dbg installed, libc's addresses are
 * resolved from its debug file, whose DWARF is compressed: the cost the
 * live view paid at every refresh (issue 24). What is checked, by the
 * cache's own counters (no timing): a second profile of the same process
 * looks nothing up in libdw and reads no file's ELF or DWARF again, and
 * gets the same names; the Dwfl is let go once profiles stop bringing new
 * addresses, and nothing is looked up again after; a file replaced on
 * disk (one without a build id: known by its inode, size and mtime) is
 * read again, never served the names of the file it replaced; the
 * live view's worker keeps the cache from one profile to the next; and,
 * counted in instructions by callgrind, a second refresh costs a small
 * fraction of the first.
 */
#include <elf.h>
#include <fcntl.h>
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
#include <unistd.h>

#include "common/procfs.h"
#include "memstats.h"
#include "memtop/sites_live.h"
#include "pprof/heap.h"
#include "pprof/sym.h"
#include "support/host.h"
#include "support/callgrind.h"
#include "wire/profile.h"

#define MAX_MAPS 32

/* ---- the fixture: stacks through this binary and libc ----------------- */

static uint64_t libc_ra[1];

static __attribute__((noinline)) void capture(uint64_t *out) {
  *out = (uint64_t)(uintptr_t)__builtin_return_address(0);
  __asm__ volatile("" ::: "memory");
}

/* Different bodies: identical ones would be folded into one (-O2's
 * -fipa-icf). */
static volatile int sink;

static __attribute__((noinline)) void site_a(uint64_t *ra) {
  capture(ra);
  sink = 1;
}

static __attribute__((noinline)) void site_b(uint64_t *ra) {
  capture(ra);
  sink = 2;
}

/* Called back by libc: its return address is in libc's code. */
static int by_value(const void *a, const void *b) {
  if (libc_ra[0] == 0)
    libc_ra[0] = (uint64_t)(uintptr_t)__builtin_return_address(0);
  return (*(const int *)a > *(const int *)b) -
         (*(const int *)a < *(const int *)b);
}

typedef struct fixture_s {
  uint64_t stack[3][2];
  ms__profile_record_t rec[3];
  ms__profile_mapping_t map[MAX_MAPS];
  char paths[MAX_MAPS][PATH_MAX];
  uint8_t ids[MAX_MAPS][64];
  ms__profile_t p;
} fixture_t;

static fixture_t fx;

/* The build id of the loaded object whose name is path (the program's is
 * ""): found through its PT_NOTE. */
typedef struct id_find_s {
  const char *path, *exe;
  uint8_t *id;
  uint32_t len;
} id_find_t;

static int find_id(struct dl_phdr_info *info, size_t size, void *arg) {
  id_find_t *w = arg;
  const char *name = info->dlpi_name[0] ? info->dlpi_name : w->exe;
  char real[PATH_MAX];

  (void)size;
  if (realpath(name, real) == NULL || strcmp(real, w->path) != 0)
    return 0;
  w->len = (uint32_t)host_note_build_id(info, w->id, 64);
  return 1;
}

/* Every executable mapping of a file, with its build id. */
static void fixture_maps(fixture_t *f) {
  char exe[PATH_MAX], line[PATH_MAX + 256], path[PATH_MAX];
  unsigned long long start, end, off;
  char perms[8];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  FILE *maps = fopen("/proc/self/maps", "r");

  assert_true(n > 0);
  exe[n] = '\0';
  assert_non_null(maps);
  while (fgets(line, sizeof line, maps) != NULL && f->p.nmappings < MAX_MAPS) {
    path[0] = '\0';
    if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %4095s", &start, &end, perms,
               &off, path) < 5 ||
        path[0] != '/' || perms[2] != 'x')
      continue;
    uint32_t i = f->p.nmappings++;
    id_find_t w = {f->paths[i], exe, f->ids[i], 0};
    snprintf(f->paths[i], PATH_MAX, "%s", path);
    dl_iterate_phdr(find_id, &w);
    f->map[i] = (ms__profile_mapping_t){
        start, end, off, f->paths[i], w.len ? f->ids[i] : NULL, w.len};
  }
  fclose(maps);
  f->p.mappings = f->map;
}

static void fixture_init(fixture_t *f) {
  int v[64];
  char stat[4096];
  uint64_t start_time = 0;

  memset(f, 0, sizeof *f);
  site_a(f->stack[0]);
  site_b(f->stack[1]);
  for (int i = 0; i < 64; i++)
    v[i] = (i * 37) % 64;
  libc_ra[0] = 0;
  qsort(v, 64, sizeof v[0], by_value);
  f->stack[0][1] = f->stack[1][1] = libc_ra[0];
  f->stack[2][0] = libc_ra[0];
  capture(&f->stack[2][1]); /* in fixture_init */
  for (int i = 0; i < 3; i++)
    f->rec[i] = (ms__profile_record_t){
        1024, 10 + (uint64_t)i, 1024 * (10 + (uint64_t)i), 0, 0, 2,
        0,    f->stack[i]};
  fixture_maps(f);
  assert_true(ms__read_small_file("/proc/self/stat", stat, sizeof stat) > 0);
  assert_int_equal(ms__parse_proc_stat(stat, NULL, 0, &start_time), 0);
  f->p.pid = (int32_t)getpid();
  f->p.start_time = start_time;
  f->p.rate = 1;
  f->p.nrecords = 3;
  f->p.records = f->rec;
}

/* ---- helpers ------------------------------------------------------------ */

/* The names of every location's frames, one line each, into out. */
static void names_of(const mt_heap_t *h, char *out, size_t len) {
  size_t o = 0;

  out[0] = '\0';
  for (size_t i = 0; i < h->nlocations; i++) {
    const mt_heap_location_t *l = &h->locations[i];
    o += (size_t)snprintf(out + o, len - o, "%#" PRIx64 ":", l->address);
    for (uint32_t j = 0; j < l->nlines && o < len; j++) {
      const mt_heap_function_t *fn = &h->functions[l->lines[j].function];
      o += (size_t)snprintf(out + o, len - o, " %s %s:%" PRId64,
                            h->strings[fn->name], h->strings[fn->filename],
                            l->lines[j].line);
    }
    if (o < len)
      o += (size_t)snprintf(out + o, len - o, "\n");
    assert_true(o < len);
  }
}

static const char *first_name(const mt_heap_t *h, uint64_t ra) {
  for (size_t i = 0; i < h->nlocations; i++) {
    const mt_heap_location_t *l = &h->locations[i];
    if (l->address == ra - 1)
      return l->nlines > 0 ? h->strings[h->functions[l->lines[0].function].name]
                           : NULL;
  }
  fail_msg("no location at %#" PRIx64, ra - 1);
  return NULL;
}

/* The function at ra is `name` (perhaps a clone of it: "site_a.constprop.0").
 */
static void assert_function(const mt_heap_t *h, uint64_t ra, const char *name) {
  const char *got = first_name(h, ra);

  assert_non_null(got);
  if (strncmp(got, name, strlen(name)) != 0 ||
      (got[strlen(name)] != '\0' && got[strlen(name)] != '.'))
    fail_msg("%s is not %s", got, name);
}

/* The cache's name for ra, through a profile resolved with it. */
static void assert_function_at(mt_sym_cache_t *c, uint64_t ra,
                               const char *name) {
  mt_heap_t h;

  assert_int_equal(mt_heap_build(&fx.p, NULL, &h), 0);
  assert_int_equal(mt_sym_cache_symbolize(c, &h, 0, 0), 0);
  assert_function(&h, ra, name);
  mt_heap_free(&h);
}

static void symbolize(mt_sym_cache_t *c, const ms__profile_t *p, char *names,
                      size_t len) {
  mt_heap_t h;

  assert_int_equal(mt_heap_build(p, NULL, &h), 0);
  assert_int_equal(mt_sym_cache_symbolize(c, &h, 0, 0), 0);
  if (names != NULL)
    names_of(&h, names, len);
  mt_heap_free(&h);
}

/* ---- tests ----------------------------------------------------------------
 */

static char once[65536], first[65536], again[65536];

/* A second profile of the same process resolves nothing through libdw
 * and reads no file again: every location is the cache's, with the names
 * the first (and a symboliser used once) gave. */
static void test_second_profile_looks_nothing_up(void **state) {
  mt_sym_cache_t *c = mt_sym_cache_new();
  mt_sym_stats_t s1, s2;
  mt_heap_t h;

  (void)state;
  fixture_init(&fx);
  assert_non_null(c);
  assert_int_equal(mt_heap_build(&fx.p, NULL, &h), 0);
  assert_int_equal(mt_heap_symbolize(&h, 0, 0), 0);
  assert_function(&h, fx.stack[0][0], "site_a");
  assert_function(&h, fx.stack[1][0], "site_b");
  (void)first_name(&h, libc_ra[0]); /* libc's: named with libc6-dbg */
  names_of(&h, once, sizeof once);
  mt_heap_free(&h);

  symbolize(c, &fx.p, first, sizeof first);
  mt_sym_cache_stats(c, &s1);
  print_message("first: %" PRIu64 " lookups, %" PRIu64 " reads, %" PRIu64
                " reports, %zu entries, %zu bytes\n",
                s1.lookups, s1.reads, s1.reports, s1.entries, s1.bytes);
  assert_int_equal(s1.lookups, 4); /* site_a, site_b, libc, fixture */
  assert_int_equal(s1.hits, 0);
  assert_true(s1.reports >= 2);
  assert_string_equal(first, once);

  symbolize(c, &fx.p, again, sizeof again);
  mt_sym_cache_stats(c, &s2);
  assert_int_equal(s2.lookups, s1.lookups);
  assert_int_equal(s2.reads, s1.reads);
  assert_int_equal(s2.reports, s1.reports);
  assert_int_equal(s2.hits, 4);
  assert_string_equal(again, first);
  mt_sym_cache_free(c);
}

/* Once two profiles in a row find every address known, every module
 * (the DWARF libdw decompressed) and the Dwfl go; later profiles are
 * still answered from the cache, with nothing read again. */
static void test_dwfl_let_go_when_idle(void **state) {
  mt_sym_cache_t *c = mt_sym_cache_new();
  mt_sym_stats_t s;

  (void)state;
  fixture_init(&fx);
  symbolize(c, &fx.p, first, sizeof first);
  mt_sym_cache_stats(c, &s);
  assert_true(s.dwfl);
  symbolize(c, &fx.p, NULL, 0);
  symbolize(c, &fx.p, NULL, 0);
  mt_sym_cache_stats(c, &s);
  assert_false(s.dwfl);
  assert_int_equal(s.modules, 0);
  assert_int_equal(s.drops, s.reports);
  symbolize(c, &fx.p, again, sizeof again);
  mt_sym_cache_stats(c, &s);
  assert_int_equal(s.lookups, 4);
  assert_int_equal(s.hits, 12);
  assert_false(s.dwfl);
  assert_string_equal(again, first);

  /* A new address reports its file again, and only it is looked up. */
  capture(&fx.stack[2][1]);
  symbolize(c, &fx.p, NULL, 0);
  mt_sym_cache_stats(c, &s);
  assert_true(s.dwfl);
  assert_int_equal(s.modules, 1);
  assert_int_equal(s.lookups, 5);
  mt_sym_cache_free(c);
}

/* A module whose file keeps bringing new addresses is kept; another's,
 * whose addresses are all known, goes (libc's DWARF is not kept because
 * the program's own sites change). */
static void test_module_let_go_alone(void **state) {
  mt_sym_cache_t *c = mt_sym_cache_new();
  mt_sym_stats_t s;

  (void)state;
  fixture_init(&fx);
  symbolize(c, &fx.p, NULL, 0);
  mt_sym_cache_stats(c, &s);
  assert_true(s.modules >= 2);
  capture(&fx.stack[2][1]); /* a new address in this binary */
  symbolize(c, &fx.p, NULL, 0);
  capture(&fx.stack[2][1]); /* and another */
  symbolize(c, &fx.p, NULL, 0);
  mt_sym_cache_stats(c, &s);
  assert_true(s.dwfl);
  assert_int_equal(s.modules, 1);
  assert_int_equal(s.drops, s.reports - 1);
  assert_int_equal(s.lookups, 6);
  assert_function_at(c, fx.stack[0][0], "site_a");
  mt_sym_cache_free(c);
}

/* Told to rest (the sites are not shown), the cache lets the Dwfl go at
 * once and keeps what it resolved. */
static void test_rest(void **state) {
  mt_sym_cache_t *c = mt_sym_cache_new();
  mt_sym_stats_t s;

  (void)state;
  fixture_init(&fx);
  symbolize(c, &fx.p, first, sizeof first);
  assert_int_equal(mt_sym_cache_rest(c), 1);
  assert_int_equal(mt_sym_cache_rest(c), 0);
  mt_sym_cache_stats(c, &s);
  assert_false(s.dwfl);
  assert_int_equal(s.entries, 4);
  symbolize(c, &fx.p, again, sizeof again);
  mt_sym_cache_stats(c, &s);
  assert_int_equal(s.lookups, 4);
  assert_int_equal(s.hits, 4);
  assert_string_equal(again, first);
  mt_sym_cache_free(c);
}

/* A mapping the profile no longer names is forgotten, with what was
 * resolved in it. */
static void test_mapping_gone(void **state) {
  mt_sym_cache_t *c = mt_sym_cache_new();
  mt_sym_stats_t s1, s2;
  ms__profile_t p;

  (void)state;
  fixture_init(&fx);
  symbolize(c, &fx.p, NULL, 0);
  mt_sym_cache_stats(c, &s1);
  /* Only this binary's mappings: libc's is gone. */
  p = fx.p;
  p.nmappings = 0;
  for (uint32_t i = 0; i < fx.p.nmappings; i++)
    if (strstr(fx.paths[i], "test_symcache") != NULL)
      fx.map[p.nmappings++] = fx.map[i];
  assert_true(p.nmappings >= 1 && p.nmappings < fx.p.nmappings);
  symbolize(c, &p, NULL, 0);
  mt_sym_cache_stats(c, &s2);
  assert_true(s2.files < s1.files);
  assert_true(s2.entries < s1.entries);
  assert_int_equal(s2.modules, s1.modules - 1); /* libc's */
  assert_true(s2.dwfl);
  assert_int_equal(s2.lookups, s1.lookups);
  mt_sym_cache_free(c);
}

static char tmpdir[64];

/* Copies src to dst; with no_id, the GNU build id note made another
 * note type (so the copy has no build id and is otherwise the same). */
static void copy_file(const char *src, const char *dst, const uint8_t *id,
                      uint32_t idlen) {
  FILE *in = fopen(src, "rb"), *out;
  static char buf[64 << 20];
  size_t n;

  assert_non_null(in);
  n = fread(buf, 1, sizeof buf, in);
  fclose(in);
  assert_true(n > 0 && n < sizeof buf);
  if (id != NULL) {
    char *at = memmem(buf, n, id, idlen);
    assert_non_null(at);
    assert_true(at - buf >= 12);
    assert_memory_equal(at - 4, "GNU", 4);
    uint32_t other = 0x7fff;
    memcpy(at - 8, &other, 4); /* n_type */
  }
  out = fopen(dst, "wb");
  assert_non_null(out);
  assert_int_equal(fwrite(buf, 1, n, out), n);
  assert_int_equal(fclose(out), 0);
}

/* The profile's mappings of this binary named as a copy of it without a
 * build id, at path; the rest dropped. */
static ms__profile_t as_copy(const char *path) {
  ms__profile_t p = fx.p;
  uint32_t n = 0;

  for (uint32_t i = 0; i < fx.p.nmappings; i++) {
    if (strstr(fx.paths[i], "test_symcache") == NULL)
      continue;
    fx.map[n] = fx.map[i];
    fx.map[n].path = path;
    fx.map[n].build_id = NULL;
    fx.map[n].build_id_len = 0;
    n++;
  }
  p.nmappings = n;
  return p;
}

/* A file without a build id is known by its device, inode, size and
 * mtime: the same file is not read again, a file changed or replaced is,
 * and its names are the new file's, never the cached ones. */
static void test_replaced_file_read_again(void **state) {
  mt_sym_cache_t *c = mt_sym_cache_new();
  char exe[PATH_MAX], copy[PATH_MAX + 64], names[65536];
  struct timespec old[2] = {{1000000000, 0}, {1000000000, 0}};
  uint8_t id[64];
  uint32_t idlen = 0;
  mt_sym_stats_t s1, s2, s3;
  mt_heap_t h;
  ms__profile_t p;
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);

  (void)state;
  assert_true(n > 0);
  exe[n] = '\0';
  fixture_init(&fx);
  for (uint32_t i = 0; i < fx.p.nmappings; i++)
    if (strcmp(fx.paths[i], exe) == 0 && fx.map[i].build_id_len > 0) {
      idlen = fx.map[i].build_id_len;
      memcpy(id, fx.map[i].build_id, idlen);
    }
  assert_true(idlen > 0);
  snprintf(copy, sizeof copy, "%s/test_symcache.copy", tmpdir);
  copy_file(exe, copy, id, idlen);
  p = as_copy(copy);
  assert_true(p.nmappings >= 1);

  assert_int_equal(mt_heap_build(&p, NULL, &h), 0);
  assert_int_equal(mt_sym_cache_symbolize(c, &h, 0, 0), 0);
  assert_function(&h, fx.stack[0][0], "site_a");
  mt_heap_free(&h);
  symbolize(c, &p, NULL, 0);
  mt_sym_cache_stats(c, &s1);
  assert_true(s1.lookups >= 2);
  assert_int_equal(s1.reads, 1);

  /* The same file, touched: its mtime differs, so it is read again. */
  assert_int_equal(utimensat(AT_FDCWD, copy, old, 0), 0);
  symbolize(c, &p, NULL, 0);
  mt_sym_cache_stats(c, &s2);
  assert_int_equal(s2.reads, 2);
  assert_int_equal(s2.lookups, 2 * s1.lookups);

  /* Replaced by another program: none of the cached names is served. */
  copy_file("/bin/true", copy, NULL, 0);
  assert_int_equal(mt_heap_build(&p, NULL, &h), 0);
  assert_int_equal(mt_sym_cache_symbolize(c, &h, 0, 0), 0);
  names_of(&h, names, sizeof names);
  print_message("replaced:\n%s", names);
  assert_null(strstr(names, "site_a"));
  assert_null(strstr(names, "test_symcache.c"));
  mt_heap_free(&h);
  mt_sym_cache_stats(c, &s3);
  assert_int_equal(s3.reads, 3);
  unlink(copy);
  mt_sym_cache_free(c);
}

/* ---- the live view's worker ---------------------------------------------- */

static int got, chained;

static void sites_cb(void *arg, int pid, mt_site_t *sites, size_t n,
                     int estimated, const char *err) {
  (void)arg, (void)pid, (void)estimated;
  if (err != NULL)
    print_message("sites: %s\n", err);
  assert_null(err);
  assert_non_null(sites);
  /* Each site carries the call chain of its stack: itself first, then
   * its caller (libc's sort, which called back into site_a's caller). */
  for (size_t i = 0; i < n; i++) {
    assert_true(sites[i].nchain >= 1);
    if (sites[i].function != NULL &&
        strncmp(sites[i].function, "site_a", 6) == 0) {
      assert_true(sites[i].nchain >= 2);
      assert_ptr_equal(strstr(sites[i].chain[0], sites[i].function),
                       sites[i].chain[0]);
      assert_non_null(strstr(sites[i].chain[0], " test_symcache.c:"));
      chained++;
    }
  }
  mt_sites_free(sites, n);
  got++;
}

/* The profile as memtop receives it: encoded, then decoded. */
static ms__profile_decoded_t *decoded(const ms__profile_t *p) {
  size_t cap = ms__profile_encoded_bound(p, "test", 65536), len = 0;
  uint8_t *buf = malloc(cap);
  ms__profile_decoded_t *d = NULL;
  const char *why = NULL;

  assert_non_null(buf);
  assert_int_equal(ms__profile_encode(p, "test", buf, cap, 65536, &len), 0);
  assert_int_equal(ms__profile_decode_frames(buf, len, &d, NULL, &why), 0);
  free(buf);
  return d;
}

/* The live view resolves each profile on its worker: the second
 * refresh of the same process looks nothing up again (the regression: a
 * symboliser made and dropped at each refresh, libc's DWARF read and
 * decompressed every 5 s). */
static void test_live_keeps_cache(void **state) {
  uv_loop_t loop;
  mt_sites_live_t *s;
  mt_sym_stats_t s1, s2;
  int pid = (int)getpid();

  (void)state;
  fixture_init(&fx);
  assert_int_equal(uv_loop_init(&loop), 0);
  s = mt_sites_live_new(&loop, sites_cb, NULL);
  assert_non_null(s);
  /* No figures yet, and none while busy: each says why (was -1 both). */
  assert_int_equal(mt_sites_live_stats(s, &s1), MS_ENOENT);
  assert_int_equal(mt_sites_live_stats(NULL, &s1), MS_EINVAL);
  got = chained = 0;
  for (int round = 1; round <= 2; round++) {
    mt_tset_profile_t tp;

    memset(&tp, 0, sizeof tp);
    tp.prof = decoded(&fx.p);
    assert_int_equal(mt_sites_live_take(s, pid, &tp), 1);
    assert_null(tp.prof);
    assert_int_equal(mt_sites_live_stats(s, &s1), MS_EAGAIN);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(got, round);
    assert_int_equal(mt_sites_live_stats(s, round == 1 ? &s1 : &s2), 0);
  }
  print_message("live: first %" PRIu64 " lookups, then %" PRIu64 " (%" PRIu64
                " hits)\n",
                s1.lookups, s2.lookups, s2.hits);
  assert_true(s1.lookups >= 4);
  assert_int_equal(s2.lookups, s1.lookups);
  assert_int_equal(s2.reports, s1.reports);
  assert_int_equal(s2.hits, s1.hits + s1.lookups);
  assert_int_equal(chained, 2);
  mt_sites_live_close(s);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&loop), 0);
}

/* ---- counted in instructions ----------------------------------------------
 */

/* `test_symcache refreshes N`: N profiles of this process resolved with
 * one cache, nothing else (run under callgrind by the test below). */
static int refreshes(int n) {
  mt_sym_cache_t *c = mt_sym_cache_new();

  fixture_init(&fx);
  for (int i = 0; i < n; i++)
    symbolize(c, &fx.p, NULL, 0);
  mt_sym_cache_free(c);
  return 0;
}

/* The instructions of the first refresh and of the second, from runs of
 * 0, 1 and 2 refreshes (start-up and exit cancel out): the second costs
 * a small fraction of the first, which reads this binary's and libc's
 * DWARF (from libc6-dbg's compressed debug file where installed). */
static void test_second_refresh_instructions(void **state) {
  char self[PATH_MAX], why[512];
  unsigned long long total[3];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);

  (void)state;
  assert_true(n > 0);
  self[n] = '\0';
  if (system("valgrind --version >/dev/null 2>&1") != 0) {
    print_message("valgrind is not installed: skipped\n");
    skip();
  }
  for (int i = 0; i < 3; i++) {
    char count[12];
    const char *argv[] = {self, "refreshes", count, NULL};
    snprintf(count, sizeof count, "%d", i);
    if (cg_count(argv, NULL, &total[i], why, sizeof why) != 0) {
      print_message("%s: skipped\n", why);
      skip();
    }
  }
  unsigned long long cold = total[1] - total[0], warm = total[2] - total[1];
  print_message("instructions: first refresh %llu, second %llu (%.4fx)\n", cold,
                warm, (double)warm / (double)cold);
  assert_true(total[1] > total[0] && total[2] > total[1]);
  assert_true(warm * 20 < cold);
}

static int setup(void **state) {
  (void)state;
  snprintf(tmpdir, sizeof tmpdir, "/tmp/test_symcache.XXXXXX");
  return mkdtemp(tmpdir) == NULL ? -1 : 0;
}

static int teardown(void **state) {
  char copy[sizeof tmpdir + 32];

  (void)state;
  snprintf(copy, sizeof copy, "%s/test_symcache.copy", tmpdir);
  unlink(copy); /* left by a test that failed */
  return rmdir(tmpdir);
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "refreshes") == 0)
    return refreshes(atoi(argv[2]));
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_second_profile_looks_nothing_up),
      cmocka_unit_test(test_dwfl_let_go_when_idle),
      cmocka_unit_test(test_module_let_go_alone),
      cmocka_unit_test(test_rest),
      cmocka_unit_test(test_mapping_gone),
      cmocka_unit_test(test_replaced_file_read_again),
      cmocka_unit_test(test_live_keeps_cache),
      cmocka_unit_test(test_second_refresh_instructions),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
