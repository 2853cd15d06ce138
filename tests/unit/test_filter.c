/*
 * test_filter.c - a heap profile's samples and frames as pprof chooses
 * them (pprof/filter.h), on models built by hand: the allocation
 * wrappers cut as pprof's Profile.Prune cuts drop_frames (inlined frames
 * of one address included, a stack of wrappers alone left whole, names
 * compared without their argument list or GCC's clone suffix), and
 * focus, ignore and hide as pprof's options of those names. The site a
 * top list then names is the check (pprof/top.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memstats.h"
#include "pprof/filter.h"
#include "pprof/heap.h"
#include "pprof/top.h"

/* A model of up to 16 functions, locations and samples. A location is a
 * string of function indexes, innermost first ("21": function 2 inlined
 * into 1); a sample a string of location indexes, innermost first. */
typedef struct spec_s {
  const char *functions[16]; /* name, or "name@file" */
  const char *locations[16];
  const char *samples[16];
  int64_t bytes[16];
} spec_t;

static uint32_t add_string(mt_heap_t *h, const char *s, size_t len) {
  h->strings[h->nstrings] = strndup(s, len);
  assert_non_null(h->strings[h->nstrings]);
  return (uint32_t)h->nstrings++;
}

static void build(mt_heap_t *h, const spec_t *sp) {
  size_t i, j;

  memset(h, 0, sizeof *h);
  h->rate = 1;
  h->strings = calloc(64, sizeof *h->strings);
  h->functions = calloc(16, sizeof *h->functions);
  h->locations = calloc(16, sizeof *h->locations);
  h->samples = calloc(16, sizeof *h->samples);
  h->mappings = calloc(1, sizeof *h->mappings);
  assert_true(h->strings && h->functions && h->locations && h->samples &&
              h->mappings);
  add_string(h, "", 0);
  h->mappings[0].filename = add_string(h, "/usr/lib/libwrap.so", 19);
  h->nmappings = 1;
  for (i = 0; sp->functions[i] != NULL; i++) {
    const char *at = strchr(sp->functions[i], '@');
    size_t n =
        at != NULL ? (size_t)(at - sp->functions[i]) : strlen(sp->functions[i]);

    h->functions[i].name = add_string(h, sp->functions[i], n);
    h->functions[i].filename =
        at != NULL ? add_string(h, at + 1, strlen(at + 1)) : 0;
    h->nfunctions++;
  }
  for (i = 0; sp->locations[i] != NULL; i++) {
    mt_heap_location_t *l = &h->locations[i];

    l->address = 0x1000 + i;
    l->mapping = 1;
    l->nlines = (uint32_t)strlen(sp->locations[i]);
    l->lines = calloc(l->nlines, sizeof *l->lines);
    assert_non_null(l->lines);
    for (j = 0; j < l->nlines; j++)
      l->lines[j].function = (uint32_t)(sp->locations[i][j] - '0');
    h->nlocations++;
  }
  for (i = 0; sp->samples[i] != NULL; i++) {
    mt_heap_sample_t *s = &h->samples[i];

    s->nlocations = (uint32_t)strlen(sp->samples[i]);
    s->locations = calloc(s->nlocations, sizeof *s->locations);
    assert_non_null(s->locations);
    for (j = 0; j < s->nlocations; j++)
      s->locations[j] = (uint32_t)(sp->samples[i][j] - '0');
    s->value[MT_HEAP_INUSE_SPACE] = sp->bytes[i];
    s->value[MT_HEAP_INUSE_OBJECTS] = 1;
    h->nsamples++;
  }
}

/* The sites with flat bytes, largest first, as "name=bytes name=bytes". */
static void flat_sites(const mt_heap_t *h, char *out, size_t len) {
  mt_top_site_t *sites = NULL;
  size_t n = 0, i, o = 0;

  assert_int_equal(mt_top_sites(h, MT_HEAP_INUSE_SPACE, &sites, &n), 0);
  out[0] = '\0';
  for (i = 0; i < n; i++)
    if (sites[i].flat[MT_HEAP_INUSE_SPACE] != 0)
      o += (size_t)snprintf(out + o, len - o, "%s%s=%lld", o ? " " : "",
                            sites[i].function,
                            (long long)sites[i].flat[MT_HEAP_INUSE_SPACE]);
  free(sites);
}

static void check(const spec_t *sp, const mt_heap_filter_t *f,
                  const char *want) {
  mt_heap_t h;
  char got[512];

  build(&h, sp);
  assert_int_equal(mt_heap_filter(&h, f), 0);
  flat_sites(&h, got, sizeof got);
  print_message("%s\n", got);
  assert_string_equal(got, want);
  mt_heap_free(&h);
}

/* Functions: 0 malloc, 1 xmalloc.constprop.0, 2 session_create, 3 main,
 * 4 operator new(unsigned long), 5 std::allocator<int>::allocate(unsigned
 * long), 6 push (a vector's), 7 zmalloc_usable, 8 sds@sds.c */
static const spec_t base = {
    .functions = {"malloc", "xmalloc.constprop.0", "session_create@server.c",
                  "main@main.c", "operator new(unsigned long)",
                  "std::allocator<int>::allocate(unsigned long)", "push@vec.h",
                  "zmalloc_usable@zmalloc.c", "sds_new@sds.c", NULL},
    .locations = {"0", "1", "2", "3", "4", "56", "7", "8", NULL},
    /* malloc <- xmalloc <- session_create <- main;
     * operator new <- [allocate inlined in push] <- main;
     * zmalloc_usable <- sds_new <- main; malloc <- xmalloc alone */
    .samples = {"0123", "453", "673", "01", NULL},
    .bytes = {100, 40, 20, 5},
};

/* A site is the wrappers' caller; a location whose inner frames are
 * wrappers keeps its outer ones (push); a stack of wrappers alone stays
 * whole. */
static void test_wrappers(void **state) {
  (void)state;
  check(&base, NULL, "session_create=100 push=40 sds_new=20 malloc=5");
  /* --keep-wrappers: the profile as it came. */
  mt_heap_filter_t keep = {.keep_wrappers = 1};
  check(&base, &keep,
        "malloc=105 operator new(unsigned long)=40 zmalloc_usable=20");
}

/* pprof's Prune cuts from the root, at the first wrapper after a frame of
 * the program's own: what is below it goes, even a frame of the
 * program's own between two wrappers. */
static void test_cut_from_root(void **state) {
  (void)state;
  spec_t sp = base;
  sp.samples[0] = "0213"; /* malloc <- session_create <- xmalloc <- main */
  sp.samples[1] = NULL;
  check(&sp, NULL, "main=100");
}

/* focus keeps the samples with a frame matching (function or file name),
 * ignore drops them, hide takes the frames out (their callers get the
 * figures); a mapping's file matches too. */
static void test_focus_ignore_hide(void **state) {
  (void)state;
  mt_heap_filter_t f = {.focus = "^sds"};
  check(&base, &f, "sds_new=20");
  f = (mt_heap_filter_t){.focus = "server\\.c$"};
  check(&base, &f, "session_create=100");
  f = (mt_heap_filter_t){.ignore = "vec\\.h|sds"};
  check(&base, &f, "session_create=100 malloc=5");
  f = (mt_heap_filter_t){.hide = "^sds_"};
  check(&base, &f, "session_create=100 push=40 main=20 malloc=5");
  /* Every location is in libwrap.so: focus on it keeps all, ignore drops
   * all. */
  f = (mt_heap_filter_t){.focus = "libwrap"};
  check(&base, &f, "session_create=100 push=40 sds_new=20 malloc=5");
  f = (mt_heap_filter_t){.ignore = "libwrap"};
  check(&base, &f, "");
}

/* An expression that does not compile is refused, and said. */
static void test_bad_expression(void **state) {
  (void)state;
  mt_heap_t h;
  char err[128] = "";
  mt_heap_filter_t f = {.hide = "("};

  assert_int_equal(mt_heap_filter_check("(", err, sizeof err), MS_EINVAL);
  assert_true(err[0] != '\0');
  assert_int_equal(mt_heap_filter_check("^x(y|z)$", err, sizeof err), 0);
  build(&h, &base);
  assert_int_equal(mt_heap_filter(&h, &f), MS_EINVAL);
  mt_heap_free(&h);
}

/* An expression whose compiled form would grow without bound (glibc's
 * regcomp copies what a repetition repeats) is refused before it is
 * compiled, with the reason; the everyday ones still pass. "t" and a
 * hundred '+' took over 2 GB before (fuzz_options). */
static void test_costly_expression(void **state) {
  static const char *const bad[] = {
      "a++",   "a{2}*", "x+?", "(a{50}){50}", "(((((((((a+)+)+)+)+)+)+)+)+)+",
      "a{101}"};
  static const char *const good[] = {"zmalloc|sds",   "^std::.*alloc",
                                     "[+*?]+x",       "a\\+\\+b",
                                     "(ab){2,3}c+d?", "^x(y|z)$"};
  char err[160], re[512];
  (void)state;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    err[0] = '\0';
    if (mt_heap_filter_check(bad[i], err, sizeof err) != MS_EINVAL)
      fail_msg("\"%s\" was taken", bad[i]);
    assert_non_null(strstr(err, "too costly"));
  }
  memset(re, 0, sizeof re);
  re[0] = 't';
  memset(re + 1, '+', 100);
  assert_int_equal(mt_heap_filter_check(re, err, sizeof err), MS_EINVAL);
  memset(re, 'a', MT_HEAP_FILTER_MAX + 1);
  re[MT_HEAP_FILTER_MAX + 1] = '\0';
  assert_int_equal(mt_heap_filter_check(re, err, sizeof err), MS_EINVAL);
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
    if (mt_heap_filter_check(good[i], err, sizeof err) != 0)
      fail_msg("\"%s\" was refused: %s", good[i], err);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_costly_expression),
      cmocka_unit_test(test_wrappers),
      cmocka_unit_test(test_cut_from_root),
      cmocka_unit_test(test_focus_ignore_hide),
      cmocka_unit_test(test_bad_expression),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
