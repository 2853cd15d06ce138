/*
 * test_view.c - the live view without a terminal: the model is rendered
 * into grids of fixed sizes and compared with golden text files
 * (tests/data/golden/view_*.txt), and keys are applied to the model as the
 * user would press them.
 *
 * The model is built from the Go test vectors (real runtime.MemStats), with
 * some figures marked estimated or unavailable and a hand-made history, so
 * the goldens show every kind of figure the view can draw.
 *
 * To regenerate the goldens after an intended change of the layout:
 *   MS_UPDATE_GOLDEN=1 build/tests/test_view   (then review the diff)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "memstats.h"
#include "tui/model.h"
#include "tui/keys.h"
#include "tui/view.h"
#include "tui/view_list.h"
#include "support/golden.h"
#include "support/govec.h"
#include "support/hostile.h"

/* ====================================================== the fixtures === */

static void load_vector(const char *name, ms_snapshot_t *s) {
  char path[1024], err[GOVEC_ERR_MAX];
  govec_t v;
  snprintf(path, sizeof path, "%s/go/%s", govec_data_dir(), name);
  if (govec_load(path, s, &v, err, sizeof err) != 0)
    fail_msg("cannot load the Go vector: %s", err);
  govec_free(&v);
}

/* Fills the pause histogram from the ring, as a provider that records
 * every pause would have. */
static void hist_from_ring(ms_snapshot_t *s) {
  uint32_t n = s->num_gc < MS_PAUSE_RING ? s->num_gc : MS_PAUSE_RING;
  memset(&s->pause_hist, 0, sizeof s->pause_hist);
  for (uint32_t k = 0; k < n; k++) {
    uint64_t p = s->pause_ns[(s->num_gc + 255 - k) % MS_PAUSE_RING];
    s->pause_hist.counts[ms_pause_hist_bucket((int64_t)p)]++;
  }
  s->quality[MS_F_PAUSE_HIST] = MS_Q_EXACT;
}

/* Puts a snapshot into a target the way the model does: breakdown, state,
 * pause percentiles. Rates and history are set by each test. */
static mt_target_t *add_target(mt_model_t *m, int pid, const char *comm,
                               const ms_snapshot_t *s) {
  mt_target_t *t = mt_model_target(m, pid);
  assert_non_null(t);
  t->snap = *s;
  t->snap.pid = pid;
  snprintf(t->snap.comm, sizeof t->snap.comm, "%s", comm);
  snprintf(t->comm, sizeof t->comm, "%s", comm);
  t->start_time = 1000 + (uint64_t)pid;
  t->have_snapshot = 1;
  t->state = MT_LIVE;
  assert_int_equal(ms_breakdown(&t->snap, &t->bd), 0);
  if (ms_pause_hist_total(&t->snap.pause_hist) > 0) {
    t->pause_p50_ns = ms_pause_hist_quantile(&t->snap.pause_hist, 0.50);
    t->pause_p99_ns = ms_pause_hist_quantile(&t->snap.pause_hist, 0.99);
    t->pause_max_ns = ms_pause_hist_quantile(&t->snap.pause_hist, 1.0);
  }
  return t;
}

/* A history of `n` samples a second apart: data grows, fragmentation
 * appears in the middle, idle drains at the end. */
static void make_history(mt_target_t *t, uint64_t n) {
  const int64_t MiB = 1 << 20;
  assert_int_equal(mt_target_reserve_history(t), 0);
  for (uint64_t i = 0; i < n; i++) {
    mt_sample_t *sm = &t->hist[i % MT_HISTORY];
    memset(sm, 0, sizeof *sm);
    sm->mono_ns = 5000000000ull + i * 1000000000ull;
    sm->data = 2 * MiB + (int64_t)i * MiB / 8;
    sm->frag_overhead = (i > n / 3 && i < 2 * n / 3) ? 6 * MiB : MiB;
    sm->idle = i < 3 * n / 4 ? 4 * MiB : MiB / 2;
    sm->prepared = 8 * MiB;
  }
  t->nhist = n;
}

/* Three processes: a live one with estimates, a plain live one, and one
 * that exited, which stays with its last figures. */
static void list_model(mt_model_t *m) {
  static ms_snapshot_t a, b, c; /* large: keep them off the stack */
  mt_model_init(m);
  m->color = 0;
  load_vector("04_fragmented.json", &a);
  load_vector("01_live_80MiB.json", &b);
  load_vector("02_freed_after_gc.json", &c);
  for (ms_snapshot_t *s = &a; s != NULL; s = s == &a ? &b : s == &b ? &c : NULL)
    hist_from_ring(s);
  /* The first process's provider estimates HeapReleased (as glibc's
   * mincore walk does) and has no object count. */
  a.nproviders = 2;
  snprintf(a.providers[0], MS_NAME_MAX, "tracked");
  snprintf(a.providers[1], MS_NAME_MAX, "glibc");
  a.quality[MS_F_HEAP_RELEASED] = MS_Q_ESTIMATED;
  a.quality[MS_F_HEAP_OBJECTS] = MS_Q_UNAVAILABLE;
  a.kernel_rss = 48u << 20;
  a.quality[MS_F_KERNEL_RSS] = MS_Q_EXACT;
  mt_target_t *w = add_target(m, 42, "worker", &b);
  mt_target_t *gone = add_target(m, 777, "batch-job", &c);
  mt_target_t *srv = add_target(m, 1234, "server", &a);
  mt_model_fail(m, gone, 1, "process 777 exited");
  /* Who runs them and how, as /proc would say (procinfo.h). */
  w->proc = (mt_procinfo_t){1000, 1234, "alice", "worker --threads 4"};
  gone->proc = (mt_procinfo_t){0, 1, "root", ""};
  srv->proc =
      (mt_procinfo_t){1000, 1, "alice", "/usr/sbin/server -c /etc/s.conf"};
  m->machine = (mt_meminfo_t){.mem_total = 16ull << 30,
                              .mem_available = 6ull << 30,
                              .swap_total = 2ull << 30,
                              .swap_free = 3ull << 29,
                              .have = 1};
  mt_model_sort(m);
}

/* One process in the detail view, with every kind of figure. */
static mt_target_t *detail_model(mt_model_t *m) {
  static ms_snapshot_t s;
  mt_model_init(m);
  m->color = 0;
  load_vector("04_fragmented.json", &s);
  hist_from_ring(&s);
  s.nproviders = 2;
  snprintf(s.providers[0], MS_NAME_MAX, "tracked");
  snprintf(s.providers[1], MS_NAME_MAX, "glibc");
  s.quality[MS_F_HEAP_RELEASED] = MS_Q_ESTIMATED;
  s.quality[MS_F_GC_CPU_FRACTION] = MS_Q_ESTIMATED;
  s.quality[MS_F_NUM_FORCED_GC] = MS_Q_UNAVAILABLE;
  s.quality[MS_F_MCACHE_INUSE] = MS_Q_UNAVAILABLE;
  s.kernel_rss = 48u << 20;
  s.quality[MS_F_KERNEL_RSS] = MS_Q_EXACT;
  mt_target_t *t = add_target(m, 1234, "server", &s);
  make_history(t, 120);
  t->mallocs_per_s = 12345.0;
  t->frees_per_s = 12000.0;
  t->bytes_per_s = 2.5 * (1 << 20);
  t->gcs_per_s = 0.5;
  m->screen = MT_SCREEN_DETAIL;
  m->detail_pid = 1234;
  return t;
}

/* ========================================================= the golden === */

static char *render_text(const mt_model_t *m, int rows, int cols) {
  mt_grid_t g;
  ms__strbuf_t out = MS_STRBUF_INIT;
  assert_int_equal(mt_grid_init(&g, rows, cols), 0);
  mt_view_render(m, &g);
  assert_int_equal(mt_grid_text(&g, &out), 0);
  mt_grid_free(&g);
  return out.data != NULL ? out.data : strdup("");
}

/* Compares the render with tests/data/golden/<name>.txt. */
static void check_golden(const mt_model_t *m, int rows, int cols,
                         const char *name) {
  char file[256];
  snprintf(file, sizeof file, "%s.txt", name);
  char *got = render_text(m, rows, cols);
  golden_check(file, got, strlen(got));
  free(got);
}

static void test_list_golden(void **state) {
  (void)state;
  mt_model_t m;
  list_model(&m);
  m.selected = 2;
  m.utf8 = 0;
  check_golden(&m, 24, 80, "view_list_80x24_ascii");
  check_golden(&m, 12, 40, "view_list_40x12_ascii");
  m.utf8 = 1;
  check_golden(&m, 24, 80, "view_list_80x24_utf8");
  check_golden(&m, 40, 120, "view_list_120x40_utf8");
  mt_model_free(&m);
}

static void test_detail_golden(void **state) {
  (void)state;
  mt_model_t m;
  detail_model(&m);
  m.utf8 = 0;
  check_golden(&m, 24, 80, "view_detail_80x24_ascii");
  check_golden(&m, 40, 120, "view_detail_120x40_ascii");
  check_golden(&m, 12, 40, "view_detail_40x12_ascii");
  m.utf8 = 1;
  check_golden(&m, 24, 80, "view_detail_80x24_utf8");
  check_golden(&m, 40, 120, "view_detail_120x40_utf8");
  check_golden(&m, 12, 40, "view_detail_40x12_utf8");
  mt_model_free(&m);
}

static void test_help_golden(void **state) {
  (void)state;
  mt_model_t m;
  list_model(&m);
  m.utf8 = 1;
  assert_int_equal(mt_key_apply(&m, 'h'), MT_ACT_REDRAW);
  check_golden(&m, 24, 80, "view_help_80x24_utf8");
  mt_model_free(&m);
}

/* ============================================ figures and their marks === */

static int contains(const char *hay, const char *needle) {
  return strstr(hay, needle) != NULL;
}

static void test_marks(void **state) {
  (void)state;
  mt_model_t m;
  detail_model(&m);
  char *txt = render_text(&m, 40, 120);
  /* HeapReleased is an estimate: Prepared and HeapReleased carry "~". */
  assert_true(contains(txt, "Prepared ~"));
  assert_true(contains(txt, "HeapReleased"));
  assert_true(contains(txt, "~54.0MiB"));
  /* MCacheInuse is unavailable, so data and idle are too: "-" in the
   * legend, and the part of Ready they would explain is drawn as '?'. */
  assert_true(contains(txt, "data -"));
  assert_true(contains(txt, "idle -"));
  assert_true(contains(txt, "?????"));
  /* NumForcedGC is unavailable: "-", not 0. */
  assert_true(contains(txt, "forced -"));
  /* The estimated CPU fraction. */
  assert_true(contains(txt, "CPU ~"));
  assert_true(contains(txt, "RSS 48.0MiB"));
  assert_true(contains(txt, "mallocs/s"));
  assert_true(contains(txt, "12.3k"));
  assert_true(contains(txt, "2.5MiB/s"));
  free(txt);

  /* An exited process keeps its figures and says it exited. */
  mt_model_fail(&m, m.targets[0], 1, "process 1234 exited");
  txt = render_text(&m, 24, 80);
  assert_true(contains(txt, "1234 server [exited]"));
  assert_true(contains(txt, "Ready+Prepared"));
  assert_true(contains(txt, "process 1234 exited"));
  free(txt);
  mt_model_free(&m);

  list_model(&m);
  txt = render_text(&m, 40, 120);
  assert_true(contains(txt, "batch-job [exited]"));
  assert_true(contains(txt, "3 processes (1 exited)"));
  free(txt);
  mt_model_free(&m);
}

/* The allocator's sample behind the heap figures, when it is old (glibc's
 * is retaken every max(1 s, 100 x its cost): 17-24 s on a 1.3 GB heap),
 * is said in the heap's header with its age; a young one is not. */
static void test_heap_sample_age(void **state) {
  (void)state;
  mt_model_t m;
  mt_target_t *t = detail_model(&m);
  t->snap.heap_sample_age_ns = 17400000000ull;
  t->snap.quality[MS_F_HEAP_SAMPLE_AGE] = MS_Q_EXACT;
  char *txt = render_text(&m, 40, 120);
  assert_true(contains(txt, "Heap  sampled 17s ago"));
  free(txt);
  t->snap.heap_sample_age_ns = 900000000ull;
  txt = render_text(&m, 40, 120);
  assert_false(contains(txt, "sampled"));
  free(txt);
  mt_model_free(&m);
}

/* A quality byte no version of the library writes (a corrupt or hand-made
 * snapshot) reads as unavailable: "-", never the figure as if exact. */
static void test_unknown_quality_byte(void **state) {
  (void)state;
  mt_model_t m;
  mt_target_t *t = detail_model(&m);
  char *txt = render_text(&m, 40, 120);
  assert_false(contains(txt, "CPU -"));
  free(txt);
  t->snap.quality[MS_F_GC_CPU_FRACTION] = 7;
  t->snap.quality[MS_F_HEAP_OBJECTS] = 0xff;
  t->snap.quality[MS_F_NEXT_GC] = 3;
  txt = render_text(&m, 40, 120);
  assert_true(contains(txt, "CPU -"));
  assert_true(contains(txt, "HeapObjects           -"));
  assert_true(contains(txt, "NextGC -"));
  free(txt);
  mt_model_free(&m);
}

/* The newest pause is at (NumGC+255)%256 and is drawn rightmost; the ring
 * wraps after 256 collections. */
static void test_sparkline_order(void **state) {
  (void)state;
  mt_model_t m;
  mt_target_t *t = detail_model(&m);
  ms_snapshot_t *s = &t->snap;
  s->num_gc = 300; /* wrapped: newest at (300+255)%256 = 43 */
  for (int i = 0; i < MS_PAUSE_RING; i++)
    s->pause_ns[i] = 1000;
  s->pause_ns[43] = 80000; /* newest: the tallest */
  s->pause_ns[44] = 40000; /* the oldest kept: mid height, leftmost */
  m.utf8 = 1;
  mt_grid_t g;
  assert_int_equal(mt_grid_init(&g, 40, 300), 0);
  mt_view_render(&m, &g);
  /* Find the sparkline row: it starts at column 4 under "pause p50". */
  int row = -1;
  for (int r = 0; r < g.rows && row < 0; r++) {
    const mt_cell_t *c = mt_grid_at(&g, r, 4);
    if (c->ch >= 0x2581 && c->ch <= 0x2588)
      row = r;
  }
  assert_true(row >= 0);
  assert_int_equal(mt_grid_at(&g, row, 4)->ch, 0x2581 + 4);   /* 40000 */
  assert_int_equal(mt_grid_at(&g, row, 4 + 1)->ch, 0x2581);   /* 1000 */
  assert_int_equal(mt_grid_at(&g, row, 4 + 255)->ch, 0x2588); /* 80000 */
  assert_int_equal(mt_grid_at(&g, row, 4 + 256)->ch, ' ');
  mt_grid_free(&g);
  mt_model_free(&m);
}

/* The bar's cells are each part's share, with its own fill and style. */
static void test_bar_parts(void **state) {
  (void)state;
  mt_model_t m;
  mt_target_t *t = detail_model(&m);
  m.utf8 = 0;
  /* Every part known (the fixture leaves MCacheInuse out). */
  t->snap.quality[MS_F_MCACHE_INUSE] = MS_Q_EXACT;
  assert_int_equal(ms_breakdown(&t->snap, &t->bd), 0);
  mt_grid_t g;
  assert_int_equal(mt_grid_init(&g, 24, 100), 0);
  mt_view_render(&m, &g);
  int count[4] = {0, 0, 0, 0};
  static const char fill[4] = {'#', '=', '.', '~'};
  static const mt_style_t st[4] = {MT_ST_DATA, MT_ST_FRAG, MT_ST_IDLE,
                                   MT_ST_PREPARED};
  for (int c = 0; c < 100; c++) {
    const mt_cell_t *cell = mt_grid_at(&g, 2, c); /* row 1: figures */
    for (int k = 0; k < 4; k++)
      if (cell->ch == (uint32_t)fill[k]) {
        count[k]++;
        assert_int_equal(cell->style, st[k]);
      }
  }
  assert_int_equal(count[0] + count[1] + count[2] + count[3], 100);
  double total =
      (double)(t->bd.data + t->bd.frag_overhead + t->bd.idle + t->bd.prepared);
  assert_int_equal(count[3],
                   (int)(100 - (int)((double)(t->bd.data + t->bd.frag_overhead +
                                              t->bd.idle) /
                                         total * 100 +
                                     0.5)));
  mt_grid_free(&g);
  mt_model_free(&m);
}

/* ======================================================= degradation === */

static void check_grid_sane(const mt_grid_t *g) {
  for (int r = 0; r < g->rows; r++)
    for (int c = 0; c < g->cols; c++) {
      const mt_cell_t *cell = mt_grid_at(g, r, c);
      assert_true(cell->ch >= 0x20);
      assert_true(cell->style < MT_ST__COUNT);
    }
}

/* Every screen at every size from nothing to 30x130: nothing drawn outside
 * the grid (AddressSanitizer in `make asan` watches), no control
 * characters, and the title line always there. */
static void test_every_size(void **state) {
  (void)state;
  mt_model_t lm, dm;
  list_model(&lm);
  detail_model(&dm);
  mt_model_t *models[2] = {&lm, &dm};
  for (int which = 0; which < 2; which++) {
    mt_model_t *m = models[which];
    for (int screen = 0; screen < 4; screen++) {
      m->screen = (mt_screen_t)screen;
      for (int utf8 = 0; utf8 < 2; utf8++) {
        m->utf8 = utf8;
        /* Half the sizes with the PAUSED marker and the delay prompt. */
        m->paused = utf8;
        m->input_mode = utf8 ? MT_INPUT_DELAY : MT_INPUT_NONE;
        snprintf(m->input, sizeof m->input, "%s", utf8 ? "0.25" : "");
        for (int rows = 0; rows <= 30; rows++)
          for (int cols = 0; cols <= 130; cols += (cols < 50 ? 1 : 7)) {
            mt_grid_t g;
            assert_int_equal(mt_grid_init(&g, rows, cols), 0);
            mt_view_render(m, &g);
            check_grid_sane(&g);
            if (rows > 0 && cols >= 6)
              assert_int_equal(mt_grid_at(&g, 0, 0)->ch, 'm'); /* memtop */
            mt_grid_free(&g);
          }
      }
    }
  }
  mt_model_free(&lm);
  mt_model_free(&dm);
}

/* The allocation sites' panel (issue 12, item 6): once a profile has been
 * read it takes the size classes' place; 'a' switches it between in use
 * and allocation rate; names from a stranger's binary are drawn safe and
 * shortened; every size still draws sanely. */
static mt_site_t *make_sites(size_t *n) {
  static const struct {
    const char *fn, *file;
    int64_t line, inuse, objects, alloc;
  } v[3] = {
      {"std::__cxx11::basic_string<char, std::char_traits<char> >::"
       "_M_construct(unsigned long, char)",
       "/usr/include/c++/12/bits/basic_string.tcc", 231, 10 << 20, 50000,
       10 << 20},
      {"parse_\x1b[2Jrequest", "/src/http/parser.c", 88, 1 << 20, 64,
       200 << 20},
      {NULL, "", 0, 3 << 20, 12, 4 << 20},
  };
  mt_site_t *s = calloc(3, sizeof *s);
  assert_non_null(s);
  for (size_t i = 0; i < 3; i++) {
    s[i].function = v[i].fn != NULL ? strdup(v[i].fn) : NULL;
    s[i].file = strdup(v[i].file);
    s[i].module = strdup(v[i].fn != NULL ? "" : "/usr/lib/libplugin.so");
    s[i].line = v[i].line;
    s[i].module_offset = 0x1234;
    s[i].inuse_space = v[i].inuse;
    s[i].inuse_objects = v[i].objects;
    s[i].alloc_space = v[i].alloc;
  }
  *n = 3;
  return s;
}

static void test_sites_panel(void **state) {
  (void)state;
  mt_model_t m;
  mt_target_t *t = detail_model(&m);
  size_t n;
  mt_site_t *s;
  char *text;

  /* No profile yet: the size classes. */
  text = render_text(&m, 24, 80);
  assert_non_null(strstr(text, "Size classes by live bytes"));
  assert_null(strstr(text, "Alloc sites"));
  free(text);

  s = make_sites(&n);
  mt_model_set_sites(t, s, n, 1, 1000000000ull);
  text = render_text(&m, 24, 80);
  assert_null(strstr(text, "Size classes by live bytes"));
  assert_non_null(strstr(text, "Alloc sites in use (a: by rate)"));
  /* Shortened, and estimated figures marked. */
  assert_non_null(strstr(text, "~10.0MiB    ~50.0k basic_string::_M_co"));
  /* Largest in use first. */
  assert_non_null(strstr(text, "~3.0MiB       ~12 libplugin.so+0x1234"));
  assert_true(strstr(text, "libplugin") < strstr(text, "parse_"));
  /* The escape is drawn as text, never sent. */
  assert_null(strchr(text, '\x1b'));
  assert_non_null(strstr(text, "parse_\\x1b[2J"));
  free(text);
  text = render_text(&m, 40, 120);
  assert_non_null(strstr(text, "~10.0MiB    ~50.0k basic_string::_M_construct "
                               "basic_string"));
  assert_non_null(strstr(text, "parse_\\x1b[2Jrequest parser.c:88"));
  free(text);

  /* By rate: one profile gives no rate yet; the second, 2 s later, gives
   * parse_request's 200 MiB more as 100 MiB/s, first. */
  assert_int_equal(mt_key_apply(&m, 'a'), MT_ACT_REDRAW);
  assert_true(m.sites_by_rate);
  text = render_text(&m, 24, 80);
  assert_non_null(strstr(text, "Alloc sites by rate (a: in use)"));
  assert_non_null(strstr(text, "(a rate needs a second profile)"));
  free(text);
  s = make_sites(&n);
  s[1].alloc_space += 200 << 20;
  mt_model_set_sites(t, s, n, 1, 3000000000ull);
  text = render_text(&m, 24, 80);
  char *first = strstr(text, "alloc/s");
  assert_non_null(first);
  assert_non_null(strstr(first, "~100.0MiB"));
  assert_non_null(strstr(first, "basic_string::"));
  assert_true(strstr(first, "parse_") < strstr(first, "basic_string::"));
  free(text);
  assert_int_equal(mt_key_apply(&m, 'a'), MT_ACT_REDRAW);
  assert_false(m.sites_by_rate);

  /* Every size, both views. */
  for (int rate = 0; rate < 2; rate++) {
    m.sites_by_rate = rate;
    for (int rows = 0; rows <= 30; rows++)
      for (int cols = 0; cols <= 130; cols += (cols < 50 ? 1 : 7)) {
        mt_grid_t g;
        assert_int_equal(mt_grid_init(&g, rows, cols), 0);
        mt_view_render(&m, &g);
        check_grid_sane(&g);
        mt_grid_free(&g);
      }
  }
  mt_model_free(&m);
}

/* Key 'c' switches the lower panel between the sites and the size
 * classes; '[' and ']' select a site, 'e' shows its call chain (innermost
 * first, escapes drawn as text) and goes back. */
static void test_sites_chain_and_classes(void **state) {
  (void)state;
  mt_model_t m;
  mt_target_t *t = detail_model(&m);
  static const char *const frames[] = {"parse_\x1b[2Jrequest parser.c:88",
                                       "handle_conn server.c:12",
                                       "main main.c:5"};
  size_t n;
  mt_site_t *s = make_sites(&n);
  char *text;

  s[1].chain = calloc(3, sizeof *s[1].chain);
  assert_non_null(s[1].chain);
  for (size_t i = 0; i < 3; i++)
    s[1].chain[i] = strdup(frames[i]);
  s[1].nchain = 3;
  mt_model_set_sites(t, s, n, 0, 1000000000ull);

  assert_int_equal(mt_key_apply(&m, 'c'), MT_ACT_REDRAW);
  text = render_text(&m, 40, 120);
  assert_non_null(strstr(text, "Size classes by live bytes"));
  assert_null(strstr(text, "Alloc sites"));
  free(text);
  assert_int_equal(mt_key_apply(&m, 'c'), MT_ACT_REDRAW);
  text = render_text(&m, 40, 120);
  assert_null(strstr(text, "Size classes by live bytes"));
  assert_non_null(strstr(text, "Alloc sites in use"));
  free(text);

  /* In use: basic_string, libplugin, parse_request: the third. */
  assert_int_equal(mt_key_apply(&m, ']'), MT_ACT_REDRAW);
  assert_int_equal(mt_key_apply(&m, ']'), MT_ACT_REDRAW);
  assert_int_equal(mt_key_apply(&m, ']'), MT_ACT_NONE);
  assert_int_equal(mt_key_apply(&m, 'e'), MT_ACT_REDRAW);
  text = render_text(&m, 40, 120);
  assert_non_null(strstr(text, "Call chain of the site"));
  assert_null(strstr(text, "Alloc sites in use"));
  assert_non_null(strstr(text, "   1.0MiB        64 parse_\\x1b[2Jrequest "
                               "parser.c:88"));
  assert_non_null(strstr(text, "   0 at parse_\\x1b[2Jrequest parser.c:88"));
  assert_non_null(strstr(text, "   1 by handle_conn server.c:12"));
  assert_non_null(strstr(text, "   2 by main main.c:5"));
  assert_null(strchr(text, '\x1b'));
  free(text);
  /* A site without a chain says so. */
  assert_int_equal(mt_key_apply(&m, '['), MT_ACT_REDRAW);
  text = render_text(&m, 40, 120);
  assert_non_null(strstr(text, "libplugin.so+0x1234"));
  assert_non_null(strstr(text, "(no call chain)"));
  free(text);
  for (int rows = 0; rows <= 30; rows++)
    for (int cols = 0; cols <= 130; cols += (cols < 50 ? 1 : 7)) {
      mt_grid_t g;
      assert_int_equal(mt_grid_init(&g, rows, cols), 0);
      mt_view_render(&m, &g);
      check_grid_sane(&g);
      mt_grid_free(&g);
    }
  assert_int_equal(mt_key_apply(&m, 'e'), MT_ACT_REDRAW);
  text = render_text(&m, 40, 120);
  assert_non_null(strstr(text, "Alloc sites in use"));
  free(text);
  mt_model_free(&m);
}

/* A stranger's figures as big as they go: the trend's sums and the byte
 * rate saturate instead of overflowing (which wrapped to a negative max,
 * so no chart, and a negative rate). */
static void test_huge_figures(void **state) {
  (void)state;
  mt_model_t m;
  mt_target_t *t = detail_model(&m);
  for (uint64_t i = 0; i < t->nhist; i++) {
    mt_sample_t *sm = &t->hist[i % MT_HISTORY];
    sm->data = sm->frag_overhead = sm->idle = INT64_MAX / 2;
  }
  t->bytes_per_s = 1e30;
  char *text = render_text(&m, 40, 160);
  assert_non_null(strstr(text, "max 8.0EiB"));
  assert_non_null(strstr(text, "8.0EiB/s"));
  assert_null(strstr(text, "-8.0EiB"));
  free(text);
  mt_model_free(&m);
}

/* Every backslash in the text starts a whole escape: a name cut to its
 * column never ends in half of one. */
static void assert_whole_escapes(const char *text) {
  static const char hex[] = "0123456789abcdef";
  for (const char *p = strchr(text, '\\'); p != NULL; p = strchr(p + 1, '\\')) {
    size_t digits = p[1] == 'x' ? 2 : p[1] == 'u' ? 4 : p[1] == 'U' ? 8 : 0;
    if (p[1] == '\\') {
      p++;
      continue;
    }
    if (digits == 0)
      fail_msg("a cut escape: %.20s", p);
    for (size_t i = 0; i < digits; i++)
      if (p[2 + i] == '\0' || strchr(hex, p[2 + i]) == NULL)
        fail_msg("a cut escape: %.20s", p);
  }
}

/* A stranger's names, providers and error reason on every screen, at
 * several sizes: no cell holds a control, a bidi control or an invisible
 * character, and the text of the grid is safe for a terminal. */
static void test_hostile_strings(void **state) {
  (void)state;
  static ms_snapshot_t s;
  char reason[200];
  mt_model_t m;
  mt_model_init(&m);
  hostile_snapshot(&s, 66);
  hist_from_ring(&s);
  mt_target_t *t = add_target(&m, 66, "x", &s);
  /* add_target() copies a C string: give the raw bytes back. */
  memcpy(t->comm, s.comm, sizeof t->comm);
  memcpy(t->snap.comm, s.comm, sizeof t->snap.comm);
  mt_target_t *u = add_target(&m, 67, "y", &s);
  hostile_name(u->comm, sizeof u->comm, 4);
  hostile_name(reason, sizeof reason, 2);
  mt_model_fail(&m, u, 0, reason);
  /* A command line and a user name are a stranger's bytes too. */
  hostile_name(u->proc.cmdline, sizeof u->proc.cmdline, 3);
  hostile_name(u->proc.user, sizeof u->proc.user, 1);
  for (int screen = 0; screen < 4; screen++) {
    for (int which = 0; which < 2; which++) {
      m.screen = (mt_screen_t)screen;
      m.detail_pid = which ? 67 : 66;
      hostile_name(m.status, sizeof m.status, (size_t)which);
      if (which)
        m.status[0] = '\0'; /* the detail view shows the target's reason */
      for (int cols = 20; cols <= 200; cols += 30) {
        mt_grid_t g;
        ms__strbuf_t out = MS_STRBUF_INIT;
        assert_int_equal(mt_grid_init(&g, 30, cols), 0);
        mt_view_render(&m, &g);
        for (int r = 0; r < g.rows; r++)
          for (int c = 0; c < g.cols; c++)
            if (ms__cp_unsafe(mt_grid_at(&g, r, c)->ch))
              fail_msg("U+%04X in cell %d,%d",
                       (unsigned)mt_grid_at(&g, r, c)->ch, r, c);
        assert_int_equal(mt_grid_text(&g, &out), 0);
        assert_int_equal(terminal_unsafe_at(out.data, out.len, 1), out.len);
        ms__strbuf_free(&out);
        mt_grid_free(&g);
      }
    }
  }
  /* In the list, a name cut to make room for its mark is cut between
   * whole escapes, and the mark stays. */
  m.screen = MT_SCREEN_LIST;
  m.status[0] = '\0';
  for (int cols = 40; cols <= 200; cols += 8) {
    char *list = render_text(&m, 10, cols);
    assert_whole_escapes(list);
    if (cols >= 80)
      assert_non_null(strstr(list, "[unreachable]"));
    free(list);
  }
  /* The name is shown, in its safe form, not dropped. */
  m.screen = MT_SCREEN_DETAIL;
  m.detail_pid = 66;
  m.status[0] = '\0';
  char *text = render_text(&m, 30, 200);
  assert_non_null(strstr(text, "66 \\x1b[2J\\x1b]2;pwned\\x07"));
  free(text);
  /* A wide character is shown, in two cells (issue 23: names in CJK read
   * "??" before), and a combining mark over the character before it
   * (it read '?'). */
  snprintf(t->comm, sizeof t->comm,
           "\xe4\xb8\xad\xe6\x96\x87 e\xcc\x81 "
           "caf\xc3\xa9");
  text = render_text(&m, 30, 200);
  assert_non_null(strstr(text, "66 \xe4\xb8\xad\xe6\x96\x87 e\xcc\x81 "
                               "caf\xc3\xa9"));
  free(text);
  mt_model_free(&m);
}

/* The bar's '?' cells (Ready that unavailable parts hold together) are
 * in the legend with their figure, where its last line has room: here
 * data and idle are unavailable, and Ready ~46.0MiB is fragOverhead
 * 30.3MiB and ~15.8MiB not split. Not on a 40-column screen, where it
 * would take a line more. */
static void test_bar_unknown_legend(void **state) {
  (void)state;
  mt_model_t m;
  detail_model(&m);
  char *text = render_text(&m, 24, 80);
  assert_true(contains(text, "?????"));
  assert_true(contains(text, "Prepared ~54.0MiB  ? ~15.8MiB\n"));
  free(text);
  text = render_text(&m, 12, 40);
  assert_false(contains(text, "? ~15.8MiB"));
  free(text);
  mt_model_free(&m);
}

/* Smaller screens drop whole sections, in order of importance. */
static void test_sections_drop(void **state) {
  (void)state;
  mt_model_t m;
  detail_model(&m);
  char *big = render_text(&m, 40, 120);
  char *small = render_text(&m, 12, 40);
  char *tiny = render_text(&m, 6, 40);
  assert_true(contains(big, "Size classes by live bytes"));
  assert_true(contains(big, "Trend"));
  assert_true(contains(big, "Sys by class"));
  assert_true(contains(small, "Ready+Prepared"));
  assert_true(contains(small, "pause p50"));
  assert_false(contains(small, "Size classes"));
  assert_true(contains(tiny, "Ready+Prepared"));
  assert_false(contains(tiny, "Sys by class"));
  free(big);
  free(small);
  free(tiny);
  mt_model_free(&m);
}

static void test_grid_clip(void **state) {
  (void)state;
  mt_grid_t g;
  ms__strbuf_t out = MS_STRBUF_INIT;
  assert_int_equal(mt_grid_init(&g, 3, 5), 0);
  mt_grid_puts(&g, 0, 3, "abcdef", -1, MT_ST_NORMAL);
  mt_grid_puts(&g, -1, 0, "zzz", -1, MT_ST_NORMAL);
  mt_grid_puts(&g, 3, 0, "zzz", -1, MT_ST_NORMAL);
  mt_grid_clip(&g, 1, 1, 1, 2);
  mt_grid_puts(&g, 1, 0, "xyzw", -1, MT_ST_NORMAL);
  mt_grid_unclip(&g);
  /* Control characters and broken UTF-8 are drawn as '?'. */
  mt_grid_puts(&g, 2, 0, "\x1b[\xff\xc3\xa9", -1, MT_ST_NORMAL);
  assert_int_equal(mt_grid_text(&g, &out), 0);
  assert_string_equal(out.data, "   ab\n yz\n?[?\xc3\xa9\n");
  ms__strbuf_free(&out);
  mt_grid_free(&g);
  /* A bad size leaves an empty grid that can still be freed. */
  assert_int_equal(mt_grid_init(&g, -1, 4), MS_EINVAL);
  assert_int_equal(g.rows * g.cols, 0);
  mt_grid_free(&g);
}

/* ============================================================== keys === */

/* Presses s until the list is sorted by `sort`. */
static void resort_to(mt_model_t *m, mt_sort_t sort) {
  for (int i = 0; i < MT_SORT__COUNT && m->sort != sort; i++)
    mt_key_apply(m, 's');
  assert_int_equal(m->sort, sort);
}

static void test_keys_sort(void **state) {
  (void)state;
  mt_model_t m;
  list_model(&m);
  /* The list opens sorted by Ready+Prepared, the most first (htop opens
   * on its busiest). */
  assert_int_equal(m.sort, MT_SORT_TOTAL);
  for (size_t i = 1; i < m.ntargets; i++)
    if (m.targets[i]->state != MT_EXITED)
      assert_true(m.targets[i - 1]->bd.total >= m.targets[i]->bd.total);
  char *txt = render_text(&m, 24, 100);
  assert_true(contains(txt, "TOTAL*"));
  free(txt);
  assert_int_equal(mt_key_apply(&m, 's'), MT_ACT_REDRAW);
  assert_int_equal(m.sort, MT_SORT_READY);
  /* s cycles through every column back to where it was. */
  for (int i = 0; i < MT_SORT__COUNT; i++)
    mt_key_apply(&m, 's');
  assert_int_equal(m.sort, MT_SORT_READY);
  mt_key_apply(&m, '<');
  assert_int_equal(m.sort, MT_SORT_TOTAL);
  mt_key_apply(&m, '>');
  assert_int_equal(m.sort, MT_SORT_READY);
  /* Sorting by Ready puts the largest first, and the header marks it. */
  for (size_t i = 1; i < m.ntargets; i++)
    assert_true(m.targets[i - 1]->bd.ready >= m.targets[i]->bd.ready);
  txt = render_text(&m, 24, 80);
  assert_true(contains(txt, "READY*"));
  assert_false(contains(txt, "TOTAL*"));
  free(txt);
  mt_key_apply(&m, 'r');
  assert_true(m.sort_reverse);
  txt = render_text(&m, 24, 80);
  assert_true(contains(txt, "READY^"));
  free(txt);
  /* htop's direct keys: N by PID, M by memory, I inverts. */
  mt_key_apply(&m, 'N');
  assert_int_equal(m.sort, MT_SORT_PID);
  assert_int_equal(m.targets[0]->pid, 1234); /* reversed: largest PID */
  mt_key_apply(&m, 'I');
  assert_false(m.sort_reverse);
  assert_int_equal(m.targets[0]->pid, 42);
  mt_key_apply(&m, 'M');
  assert_int_equal(m.sort, MT_SORT_TOTAL);
  /* By user, A to Z; by RSS, the one that has it first. */
  resort_to(&m, MT_SORT_USER);
  assert_string_equal(m.targets[0]->proc.user, "alice");
  resort_to(&m, MT_SORT_RSS);
  assert_int_equal(m.targets[0]->pid, 1234);
  mt_model_free(&m);
}

static void test_keys_move(void **state) {
  (void)state;
  mt_model_t m;
  list_model(&m);
  m.page_rows = 2;
  assert_int_equal(m.selected, 0);
  mt_key_apply(&m, MT_KEY_UP);
  assert_int_equal(m.selected, 0); /* clamps at the top */
  mt_key_apply(&m, MT_KEY_DOWN);
  assert_int_equal(m.selected, 1);
  mt_key_apply(&m, MT_KEY_DOWN);
  mt_key_apply(&m, MT_KEY_DOWN);
  assert_int_equal(m.selected, 2); /* clamps at the bottom */
  mt_key_apply(&m, MT_KEY_HOME);
  assert_int_equal(m.selected, 0);
  mt_key_apply(&m, MT_KEY_PGDN);
  assert_int_equal(m.selected, 2);
  mt_key_apply(&m, MT_KEY_PGUP);
  assert_int_equal(m.selected, 0);
  mt_key_apply(&m, MT_KEY_END);
  assert_int_equal(m.selected, 2);
  /* The selected row is drawn selected. */
  mt_grid_t g;
  assert_int_equal(mt_grid_init(&g, 24, 80), 0);
  mt_view_render(&m, &g);
  assert_int_equal(mt_grid_at(&g, 4 + 2, 0)->style, MT_ST_SELECTED);
  assert_int_equal(mt_grid_at(&g, 4, 0)->style, MT_ST_NORMAL);
  mt_grid_free(&g);

  /* Enter opens the selected process; Up/Down step to its neighbours;
   * Esc goes back with the selection on it. */
  assert_int_equal(mt_key_apply(&m, MT_KEY_ENTER), MT_ACT_REDRAW);
  assert_int_equal(m.screen, MT_SCREEN_DETAIL);
  assert_int_equal(m.detail_pid, m.targets[2]->pid);
  mt_key_apply(&m, MT_KEY_UP);
  assert_int_equal(m.detail_pid, m.targets[1]->pid);
  assert_int_equal(mt_key_apply(&m, MT_KEY_ESC), MT_ACT_REDRAW);
  assert_int_equal(m.screen, MT_SCREEN_LIST);
  assert_int_equal(m.selected, 1);

  /* An empty list: nothing to move to or open. */
  mt_model_free(&m);
  mt_model_init(&m);
  mt_key_apply(&m, MT_KEY_DOWN);
  assert_int_equal(m.selected, 0);
  assert_int_equal(mt_key_apply(&m, MT_KEY_ENTER), MT_ACT_NONE);
  assert_int_equal(m.screen, MT_SCREEN_LIST);
  char *txt = render_text(&m, 24, 80);
  assert_true(contains(txt, "No attachable process"));
  free(txt);

  /* The user's socket directory skipped as unsafe: its refusal instead,
   * wrapped to 80 columns, the fix from a row of its own. */
  snprintf(m.list_refused, sizeof m.list_refused,
           "not trusting the socket directory /tmp/a-rather-long/socket-dir: "
           "the socket directory is open to group or others (want 0700); "
           "chmod 700 /tmp/a-rather-long/socket-dir");
  txt = render_text(&m, 24, 80);
  assert_false(contains(txt, "No attachable process"));
  assert_true(contains(txt, " No process listed: memtop is not trusting the "
                            "socket directory"));
  assert_true(contains(txt, "\n (want 0700).\n"));
  assert_true(contains(txt, "\n To list it: chmod 700 "
                            "/tmp/a-rather-long/socket-dir\n"));
  free(txt);
  /* A directory wider than the line: cut there and continued on the
   * next, not lost. */
  snprintf(m.list_refused, sizeof m.list_refused,
           "not using the socket directory /tmp/%0100d/end-of-the-path: it is "
           "too long; set MEMSTATS_DIR to a shorter directory",
           0);
  txt = render_text(&m, 24, 80);
  assert_true(contains(txt, "00/end-of-the-path:"));
  free(txt);
  mt_model_free(&m);
}

static void test_keys_help_pause_quit(void **state) {
  (void)state;
  mt_model_t m;
  list_model(&m);
  mt_key_apply(&m, MT_KEY_ENTER);
  assert_int_equal(m.screen, MT_SCREEN_DETAIL);
  /* h shows help over the detail view, any key goes back to it. */
  assert_int_equal(mt_key_apply(&m, 'h'), MT_ACT_REDRAW);
  assert_int_equal(m.screen, MT_SCREEN_HELP);
  char *txt = render_text(&m, 24, 80);
  assert_true(contains(txt, "Keys"));
  free(txt);
  mt_key_apply(&m, 'x');
  assert_int_equal(m.screen, MT_SCREEN_DETAIL);
  mt_key_apply(&m, '?');
  assert_int_equal(m.screen, MT_SCREEN_HELP);
  mt_key_apply(&m, MT_KEY_ESC);
  assert_int_equal(m.screen, MT_SCREEN_DETAIL);

  /* space pauses and says so; again resumes. */
  assert_int_equal(mt_key_apply(&m, ' '), MT_ACT_REDRAW);
  assert_true(m.paused);
  txt = render_text(&m, 24, 80);
  assert_true(contains(txt, "PAUSED"));
  free(txt);
  mt_key_apply(&m, ' ');
  assert_false(m.paused);
  txt = render_text(&m, 24, 80);
  assert_false(contains(txt, "PAUSED"));
  free(txt);

  /* q quits from every screen, help included. */
  assert_int_equal(mt_key_apply(&m, 'q'), MT_ACT_QUIT);
  mt_key_apply(&m, 'h');
  assert_int_equal(mt_key_apply(&m, 'q'), MT_ACT_QUIT);
  assert_int_equal(mt_key_apply(&m, MT_KEY_RESIZE), MT_ACT_REDRAW);
  mt_model_free(&m);
}

/* q and F10 while `memtop run`'s command runs ask first: y stops it, d
 * detaches and leaves it running, any other key stays. The question
 * names the command and its PID and fits on 80 columns, and once the
 * command has ended q quits at once again. */
static void test_keys_quit_run(void **state) {
  (void)state;
  mt_model_t m;
  char *txt;
  detail_model(&m);
  m.run_pid = 1234;

  assert_int_equal(mt_key_apply(&m, 'q'), MT_ACT_REDRAW);
  assert_int_equal(m.input_mode, MT_INPUT_QUIT);
  txt = render_text(&m, 24, 80);
  assert_true(contains(txt, "Stop server (PID 1234)? y: stop  d: detach "
                            "(keeps running)  other: stay"));
  free(txt);
  /* Another key stays, and the prompt goes. */
  assert_int_equal(mt_key_apply(&m, 'x'), MT_ACT_REDRAW);
  assert_int_equal(m.input_mode, MT_INPUT_NONE);
  assert_int_equal(m.screen, MT_SCREEN_DETAIL);
  txt = render_text(&m, 24, 80);
  assert_false(contains(txt, "Stop server"));
  free(txt);
  /* Even q again, or Esc. */
  mt_key_apply(&m, 'q');
  assert_int_equal(mt_key_apply(&m, 'q'), MT_ACT_REDRAW);
  mt_key_apply(&m, MT_KEY_F(10));
  assert_int_equal(mt_key_apply(&m, MT_KEY_ESC), MT_ACT_REDRAW);
  assert_int_equal(m.input_mode, MT_INPUT_NONE);
  /* A resize leaves the question up. */
  mt_key_apply(&m, 'q');
  assert_int_equal(mt_key_apply(&m, MT_KEY_RESIZE), MT_ACT_REDRAW);
  assert_int_equal(m.input_mode, MT_INPUT_QUIT);
  /* y: quit, stopping it. */
  assert_int_equal(mt_key_apply(&m, 'y'), MT_ACT_QUIT);
  assert_false(m.detach);
  /* d (from the help screen, with F10): quit, leaving it running. */
  mt_key_apply(&m, 'h');
  assert_int_equal(mt_key_apply(&m, MT_KEY_F(10)), MT_ACT_REDRAW);
  assert_int_equal(mt_key_apply(&m, 'd'), MT_ACT_QUIT);
  assert_true(m.detach);
  /* A long name is cut, the keys stay on the line. */
  snprintf(mt_model_find(&m, 1234)->comm, MS_NAME_MAX, "%s",
           "a-very-long-command-name-indeed-it-is");
  m.run_pid = 4194304;
  mt_model_find(&m, 1234)->pid = 4194304;
  mt_key_apply(&m, 'q');
  txt = render_text(&m, 24, 80);
  assert_true(contains(txt, "(PID 4194304)? y: stop  d: detach (keeps "
                            "running)  other: stay"));
  free(txt);
  mt_key_apply(&m, 'n');
  /* The command has ended: nothing to ask. */
  m.run_pid = 0;
  assert_int_equal(mt_key_apply(&m, 'q'), MT_ACT_QUIT);
  mt_model_free(&m);
}

/* a on a process that runs no agent (issue 22's key where memtop meets
 * one): its detail view says so; a asks, naming it and its PID on 80
 * columns; any other key gives up; y asks the loop to attach
 * (MT_ACT_ATTACH, m.attach_pid). On the list, a on such a row asks the
 * same, and the bottom line shows the key. A process with an agent keeps
 * a for its sites panel. */
static void test_keys_attach(void **state) {
  (void)state;
  mt_model_t m;
  char *txt;
  detail_model(&m);
  mt_target_t *t = mt_model_target(&m, 4321);
  snprintf(t->comm, MS_NAME_MAX, "%s", "sleep");
  mt_model_fail(&m, t, 0, "PID 4321: no memstats socket; retrying");
  t->no_agent = 1;
  m.detail_pid = 4321;
  txt = render_text(&m, 24, 80);
  assert_true(contains(txt, "It runs no agent. Press a to attach memtop"));
  free(txt);
  assert_int_equal(mt_key_apply(&m, 'a'), MT_ACT_REDRAW);
  assert_int_equal(m.input_mode, MT_INPUT_ATTACH);
  assert_int_equal(m.attach_pid, 4321);
  txt = render_text(&m, 24, 80);
  assert_true(contains(txt, "Attach memtop to sleep (PID 4321)? ptrace, ~1 "
                            "ms  y: attach  other: no"));
  free(txt);
  assert_int_equal(mt_key_apply(&m, 'n'), MT_ACT_REDRAW);
  assert_int_equal(m.input_mode, MT_INPUT_NONE);
  assert_int_equal(m.attach_pid, 0);
  mt_key_apply(&m, 'a');
  assert_int_equal(mt_key_apply(&m, 'y'), MT_ACT_ATTACH);
  assert_int_equal(m.attach_pid, 4321);
  assert_int_equal(m.input_mode, MT_INPUT_NONE);
  /* A process with an agent: a is the sites panel's. */
  m.attach_pid = 0;
  m.detail_pid = 1234;
  int by_rate = m.sites_by_rate;
  assert_int_equal(mt_key_apply(&m, 'a'), MT_ACT_REDRAW);
  assert_int_equal(m.input_mode, MT_INPUT_NONE);
  assert_int_not_equal(m.sites_by_rate, by_rate);
  /* The list: the row with no agent selected. */
  m.screen = MT_SCREEN_LIST;
  mt_model_sort(&m);
  for (size_t i = 0; i < mt_model_nvisible(&m); i++)
    if (m.targets[i]->pid == 4321)
      m.selected = i;
  txt = render_text(&m, 24, 80);
  assert_true(contains(txt, "a attach (no agent)"));
  free(txt);
  assert_int_equal(mt_key_apply(&m, 'a'), MT_ACT_REDRAW);
  assert_int_equal(m.input_mode, MT_INPUT_ATTACH);
  assert_int_equal(mt_key_apply(&m, 'Y'), MT_ACT_ATTACH);
  /* A snapshot: it serves, nothing to offer. */
  mt_model_update(&m, t, &mt_model_find(&m, 1234)->snap);
  assert_false(t->no_agent);
  m.attach_pid = 0;
  assert_int_equal(mt_key_apply(&m, 'a'), MT_ACT_NONE);
  mt_model_free(&m);
}

static void type(mt_model_t *m, const char *s) {
  for (; *s; s++)
    mt_key_apply(m, (unsigned char)*s);
}

static void test_keys_delay(void **state) {
  (void)state;
  mt_model_t m;
  list_model(&m);
  assert_true(m.delay_s == 1.0);

  /* d opens a prompt; 0.5 is accepted and the loop told to re-arm. */
  assert_int_equal(mt_key_apply(&m, 'd'), MT_ACT_REDRAW);
  assert_int_equal(m.input_mode, MT_INPUT_DELAY);
  type(&m, "0.5");
  char *txt = render_text(&m, 24, 80);
  assert_true(contains(txt, "Delay in seconds (at least 0.1): 0.5_"));
  free(txt);
  assert_int_equal(mt_key_apply(&m, MT_KEY_ENTER), MT_ACT_DELAY);
  assert_int_equal(m.input_mode, MT_INPUT_NONE);
  assert_true(m.delay_s == 0.5);

  /* 0.05 is below the minimum: refused, the delay stays, and the status
   * line says what to type instead. */
  mt_key_apply(&m, 'd');
  type(&m, "0.05");
  assert_int_equal(mt_key_apply(&m, MT_KEY_ENTER), MT_ACT_REDRAW);
  assert_true(m.delay_s == 0.5);
  assert_true(contains(m.status, "Invalid delay \"0.05\""));
  assert_true(contains(m.status, "0.1"));
  txt = render_text(&m, 24, 80);
  assert_true(contains(txt, "Invalid delay"));
  free(txt);

  /* Garbage too, and the message goes away with the next key. */
  mt_key_apply(&m, 'd');
  type(&m, "fast");
  assert_int_equal(mt_key_apply(&m, MT_KEY_ENTER), MT_ACT_REDRAW);
  assert_true(m.delay_s == 0.5);
  assert_true(contains(m.status, "Invalid delay \"fast\""));
  assert_int_equal(mt_key_apply(&m, 'x'), MT_ACT_REDRAW);
  assert_string_equal(m.status, "");

  /* In the prompt, keys are text: q does not quit, Backspace edits, Esc
   * cancels without a change. */
  mt_key_apply(&m, 'd');
  assert_int_equal(mt_key_apply(&m, 'q'), MT_ACT_REDRAW);
  assert_string_equal(m.input, "q");
  mt_key_apply(&m, MT_KEY_BACKSPACE);
  assert_string_equal(m.input, "");
  type(&m, "3");
  assert_int_equal(mt_key_apply(&m, MT_KEY_ESC), MT_ACT_REDRAW);
  assert_int_equal(m.input_mode, MT_INPUT_NONE);
  assert_true(m.delay_s == 0.5);
  /* The prompt holds a bounded amount of text. */
  mt_key_apply(&m, 'd');
  for (int i = 0; i < 100; i++)
    mt_key_apply(&m, '9');
  assert_int_equal(strlen(m.input), sizeof m.input - 1);
  mt_key_apply(&m, MT_KEY_ESC);
  mt_model_free(&m);
}

/* htop's habits (issue 23): F1 help, F10 quit, F2 setup, p for the
 * command line, t says there is no tree yet. */
static void test_keys_htop(void **state) {
  (void)state;
  mt_model_t m;
  list_model(&m);
  assert_int_equal(mt_key_apply(&m, MT_KEY_F(1)), MT_ACT_REDRAW);
  assert_int_equal(m.screen, MT_SCREEN_HELP);
  mt_key_apply(&m, MT_KEY_ESC);
  assert_int_equal(m.screen, MT_SCREEN_LIST);
  assert_int_equal(mt_key_apply(&m, MT_KEY_F(10)), MT_ACT_QUIT);

  /* NAME shows the command line; p the short name, and back. */
  char *txt = render_text(&m, 24, 100);
  assert_true(contains(txt, "/usr/sbin/server -c /etc/s.conf"));
  assert_true(contains(txt, "alice"));
  free(txt);
  mt_key_apply(&m, 'p');
  txt = render_text(&m, 24, 100);
  assert_false(contains(txt, "/usr/sbin/server"));
  assert_true(contains(txt, " server"));
  free(txt);
  mt_key_apply(&m, 'p');
  assert_true(m.show_cmdline);

  /* F2: the setup screen; Down/Right change a setting, Esc leaves it and
   * asks the backend to write memtoprc. */
  assert_int_equal(mt_key_apply(&m, MT_KEY_F(2)), MT_ACT_REDRAW);
  assert_int_equal(m.screen, MT_SCREEN_SETUP);
  txt = render_text(&m, 30, 80);
  assert_true(contains(txt, "Sort by             total"));
  free(txt);
  mt_key_apply(&m, MT_KEY_RIGHT); /* the sort: the next key */
  assert_int_equal(m.sort, MT_SORT_READY);
  m.setup_row = MT_SETUP_DELAY;
  assert_int_equal(mt_key_apply(&m, MT_KEY_RIGHT), MT_ACT_DELAY);
  assert_true(m.delay_s == 2.0);
  mt_key_apply(&m, MT_KEY_LEFT);
  mt_key_apply(&m, MT_KEY_LEFT);
  assert_true(m.delay_s == 0.5);
  m.setup_row = MT_SETUP_SCHEME;
  mt_key_apply(&m, ' ');
  assert_int_equal(m.scheme, MT_SCHEME_LIGHT);
  m.setup_row = MT_SETUP_COLUMNS + MT_COL_USER;
  mt_key_apply(&m, ' ');
  assert_false(m.columns & (1u << MT_COL_USER));
  m.setup_row = MT_SETUP_COLUMNS + MT_COL_PID; /* PID always shows */
  mt_key_apply(&m, ' ');
  assert_true(m.columns & (1u << MT_COL_PID));
  /* q leaves the setup, it does not quit. */
  assert_int_equal(mt_key_apply(&m, 'q'), MT_ACT_REDRAW);
  assert_int_equal(m.screen, MT_SCREEN_LIST);
  assert_true(m.save_pending);
  txt = render_text(&m, 24, 100);
  assert_false(contains(txt, "USER"));
  free(txt);
  mt_model_free(&m);
}

/* Finds ASCII text in the grid's cells; 1 and its place, or 0. */
static int grid_find(const mt_grid_t *g, const char *text, int *row, int *col) {
  size_t n = strlen(text);
  for (int r = 0; r < g->rows; r++)
    for (int c = 0; c + (int)n <= g->cols; c++) {
      size_t k = 0;
      while (k < n && mt_grid_at(g, r, c + (int)k)->ch == (uint32_t)text[k])
        k++;
      if (k == n) {
        *row = r;
        *col = c;
        return 1;
      }
    }
  return 0;
}

/* The accounted figure (Ready against the kernel's anonymous RSS) says
 * its gap in bytes, and is drawn as an error only when the gap is large
 * in bytes as well as in percent (issue 23: nginx read 43% in red). */
static void test_accounted(void **state) {
  (void)state;
  static const struct {
    int64_t ready;
    uint64_t anon;
    const char *text;
    int error;
  } cases[] = {
      {1 << 20, 5u << 19, "accounted 40.0% (1.5MiB in no class)", 0},
      {500 << 20, 1u << 30, "accounted 48.8% (524.0MiB in no class)", 1},
      {3 << 29, 1u << 30, "accounted 150.0% (512.0MiB more than resident)", 1},
      {1000 << 20, 1u << 30, "accounted 97.7% (24.0MiB in no class)", 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    mt_model_t m;
    mt_target_t *t = detail_model(&m);
    t->bd.ready = cases[i].ready;
    t->bd.q_ready = MS_Q_EXACT;
    t->snap.kernel_anon_rss = cases[i].anon;
    t->snap.quality[MS_F_KERNEL_ANON_RSS] = MS_Q_EXACT;
    mt_grid_t g;
    int r = 0, c = 0;
    assert_int_equal(mt_grid_init(&g, 40, 220), 0);
    mt_view_render(&m, &g);
    if (!grid_find(&g, cases[i].text, &r, &c)) {
      ms__strbuf_t out = MS_STRBUF_INIT;
      mt_grid_text(&g, &out);
      fail_msg("no \"%s\" in:\n%s", cases[i].text, out.data);
    }
    int st = mt_grid_at(&g, r, c + 10)->style;
    assert_int_equal(st == MT_ST_ERROR, cases[i].error);
    mt_grid_free(&g);
    mt_model_free(&m);
  }
}

/* t and F5: the tree view, each process under its parent (htop's), the
 * siblings in the sort's order, and back. */
static void test_tree(void **state) {
  (void)state;
  mt_model_t m;
  list_model(&m);
  mt_key_apply(&m, 'N'); /* by PID: 42 777 1234 */
  assert_int_equal(m.targets[0]->pid, 42);
  assert_int_equal(mt_key_apply(&m, 't'), MT_ACT_REDRAW);
  assert_true(m.tree);
  /* 42's parent is 1234: it follows it. */
  assert_int_equal(m.targets[0]->pid, 777);
  assert_int_equal(m.targets[1]->pid, 1234);
  assert_int_equal(m.targets[2]->pid, 42);
  assert_int_equal(m.targets[2]->tree_depth, 1);
  m.utf8 = 1;
  char *txt = render_text(&m, 24, 100);
  assert_true(contains(txt, "\xe2\x94\x94\xe2\x94\x80 worker --threads 4"));
  free(txt);
  m.utf8 = 0;
  txt = render_text(&m, 24, 100);
  assert_true(contains(txt, "`- worker --threads 4"));
  free(txt);
  /* Two children: the first with a sibling below it. */
  mt_target_t *t = mt_model_find(&m, 777);
  t->proc.ppid = 1234;
  mt_model_sort(&m);
  assert_int_equal(m.targets[0]->pid, 1234);
  assert_int_equal(m.targets[1]->pid, 42);
  assert_int_equal(m.targets[2]->pid, 777);
  txt = render_text(&m, 24, 100);
  assert_true(contains(txt, "|- worker"));
  assert_true(contains(txt, "`- batch-job [exited]"));
  free(txt);
  /* Parents in a loop (PIDs reused) are each shown once. */
  mt_model_find(&m, 1234)->proc.ppid = 42;
  mt_model_sort(&m);
  assert_int_equal(m.ntargets, 3);
  int seen = 0;
  for (size_t i = 0; i < m.ntargets; i++)
    seen |= m.targets[i]->pid == 42 ? 1 : m.targets[i]->pid == 777 ? 2 : 4;
  assert_int_equal(seen, 7);
  mt_key_apply(&m, MT_KEY_F(5));
  assert_false(m.tree);
  assert_int_equal(m.targets[0]->pid, 42);
  assert_int_equal(m.targets[0]->tree_depth, 0);
  mt_model_free(&m);
}

/* Sets t's kernel figures, in MiB: RssAnon, RssShmem, RssFile. */
static void set_rss(mt_target_t *t, uint64_t anon, uint64_t shmem,
                    uint64_t file) {
  t->snap.kernel_anon_rss = anon << 20;
  t->snap.kernel_rss_shmem = shmem << 20;
  t->snap.kernel_rss_file = file << 20;
  t->snap.kernel_rss = (anon + shmem + file) << 20;
  t->snap.quality[MS_F_KERNEL_ANON_RSS] = MS_Q_EXACT;
  t->snap.quality[MS_F_KERNEL_RSS_SHMEM] = MS_Q_EXACT;
  t->snap.quality[MS_F_KERNEL_RSS_FILE] = MS_Q_EXACT;
  t->snap.quality[MS_F_KERNEL_RSS] = MS_Q_EXACT;
}

/* The tree view's total row per tree (issue 21): Ready+Prepared summed,
 * RSS with the shared memory and the file pages the members share
 * counted once (the largest member's), the exited members left out; a
 * process alone has none. */
static void test_tree_total(void **state) {
  (void)state;
  mt_model_t m;
  list_model(&m);
  mt_target_t *srv = mt_model_find(&m, 1234), *w = mt_model_find(&m, 42);
  mt_model_find(&m, 777)->proc.ppid = 1234; /* exited: not summed */
  set_rss(srv, 10, 4, 3);
  set_rss(w, 2, 4, 2);
  mt_key_apply(&m, 't');
  mt_key_apply(&m, 'N');
  assert_int_equal(m.targets[0]->pid, 1234);
  mt_tree_total_t tt;
  assert_int_equal(mt_model_tree_total(&m, 0, &tt), 3);
  assert_int_equal(tt.members, 2);
  assert_int_equal(tt.total, srv->bd.total + w->bd.total);
  assert_true(tt.have_rss);
  assert_int_equal(tt.shared, (4 + 3) << 20);
  assert_int_equal(tt.rss, (10 + 2 + 4 + 3) << 20); /* not 10+4+3 + 2+4+2 */
  assert_int_equal(mt_model_tree_total(&m, 1, &tt), 1);
  m.utf8 = 0;
  char *txt = render_text(&m, 24, 160);
  assert_true(contains(txt, "= tree of 1234 (2), shared 7.0MiB once"));
  assert_true(contains(txt, "19.0MiB"));
  free(txt);
  /* A total row is not a process: a click on it selects the tree's root;
   * the rows after it are the processes after the tree. */
  size_t idx = 99;
  mt_sort_t sort;
  int hrow = MT_LIST_TOP + MT_LIST_HEAD - 1;
  assert_int_equal(mt_view_list_at(&m, 24, 160, hrow + 4, 5, &idx, &sort),
                   MT_LIST_AT_ROW);
  assert_int_equal(idx, 0);
  /* Without the tree view: no total row. */
  mt_key_apply(&m, 't');
  txt = render_text(&m, 24, 140);
  assert_false(contains(txt, "tree of"));
  free(txt);
  mt_model_free(&m);
}

/* / and F3 search, \ and F4 filter by name, user or PID, u by user. */
static void test_search_filter(void **state) {
  (void)state;
  mt_model_t m;
  list_model(&m);
  mt_key_apply(&m, 'N'); /* by PID: 42 777 1234 */

  /* The search moves the selection as the text grows; F3 goes on to the
   * next match; Enter keeps it. */
  assert_int_equal(mt_key_apply(&m, '/'), MT_ACT_REDRAW);
  assert_int_equal(m.input_mode, MT_INPUT_SEARCH);
  type(&m, "ser");
  assert_int_equal(m.targets[m.selected]->pid, 1234);
  char *txt = render_text(&m, 24, 100);
  assert_true(contains(txt, "Search (F3 next, Enter done, Esc cancel): ser_"));
  free(txt);
  mt_key_apply(&m, MT_KEY_BACKSPACE);
  mt_key_apply(&m, MT_KEY_BACKSPACE);
  mt_key_apply(&m, MT_KEY_BACKSPACE);
  type(&m, "alice"); /* a user: 42 first, then 1234 */
  assert_int_equal(m.targets[m.selected]->pid, 42);
  mt_key_apply(&m, MT_KEY_F(3));
  assert_int_equal(m.targets[m.selected]->pid, 1234);
  mt_key_apply(&m, MT_KEY_ENTER);
  assert_int_equal(m.input_mode, MT_INPUT_NONE);
  assert_int_equal(m.targets[m.selected]->pid, 1234);
  mt_key_apply(&m, MT_KEY_F(3));
  type(&m, "nothing-like-it");
  assert_true(contains(m.status, "No process matches"));
  mt_key_apply(&m, MT_KEY_ESC);

  /* The filter hides what does not match, as it is typed; by PID too. */
  mt_key_apply(&m, '\\');
  assert_int_equal(m.input_mode, MT_INPUT_FILTER);
  type(&m, "worker");
  assert_int_equal(mt_model_nvisible(&m), 1);
  mt_key_apply(&m, MT_KEY_ENTER);
  assert_string_equal(m.filter, "worker");
  txt = render_text(&m, 24, 100);
  assert_true(contains(txt, "3 processes (1 exited), 1 shown"));
  assert_true(contains(txt, "worker --threads 4"));
  assert_false(contains(txt, "server"));
  free(txt);
  /* Moving and opening stay within what is shown. */
  mt_key_apply(&m, MT_KEY_END);
  assert_int_equal(m.selected, 0);
  mt_key_apply(&m, MT_KEY_ENTER);
  assert_int_equal(m.detail_pid, 42);
  mt_key_apply(&m, MT_KEY_ESC);
  mt_key_apply(&m, MT_KEY_F(4));
  assert_string_equal(m.input, "worker"); /* to edit the filter */
  mt_key_apply(&m, MT_KEY_ESC);           /* Esc clears it */
  assert_string_equal(m.filter, "");
  assert_int_equal(mt_model_nvisible(&m), 3);
  mt_key_apply(&m, MT_KEY_F(4));
  type(&m, "777");
  assert_int_equal(mt_model_nvisible(&m), 1);
  assert_int_equal(m.targets[0]->pid, 777);
  type(&m, "x");
  txt = render_text(&m, 24, 100);
  assert_true(contains(txt, "No process matches the filter (3 hidden)"));
  free(txt);
  mt_key_apply(&m, MT_KEY_ESC);

  /* u: root's processes, then alice's (uid order), then all again. */
  mt_key_apply(&m, 'u');
  assert_int_equal(m.filter_uid, 0);
  assert_int_equal(mt_model_nvisible(&m), 1);
  assert_true(contains(m.status, "Processes of root only"));
  mt_key_apply(&m, 'u');
  assert_int_equal(m.filter_uid, 1000);
  assert_int_equal(mt_model_nvisible(&m), 2);
  mt_key_apply(&m, 'u');
  assert_int_equal(m.filter_uid, -1);
  assert_int_equal(mt_model_nvisible(&m), 3);
  /* -u of a user with no process here: the hint is u, not F4 (no text
   * filter is set). */
  m.filter_uid = 4242;
  txt = render_text(&m, 24, 100);
  assert_true(contains(txt, "No process of uid 4242 (3 of other users "
                            "hidden): u steps through the users"));
  assert_false(contains(txt, "F4 then Esc"));
  free(txt);
  mt_model_free(&m);
}

/* The mouse on the list: a click selects, a double click opens, a click
 * on a title sorts (again: reverses), the wheel moves. Rows as drawn on a
 * 24x100 screen: title, machine, totals, titles, then the processes. */
static void test_mouse(void **state) {
  (void)state;
  mt_model_t m;
  list_model(&m);
  mt_key_apply(&m, 'N');
  assert_int_equal(mt_key_mouse(&m, MT_MOUSE_CLICK, 6, 10, 24, 100),
                   MT_ACT_REDRAW);
  assert_int_equal(m.targets[m.selected]->pid, 1234);
  assert_int_equal(mt_key_mouse(&m, MT_MOUSE_CLICK, 20, 10, 24, 100),
                   MT_ACT_NONE); /* below the last row */
  mt_key_mouse(&m, MT_MOUSE_WHEEL_UP, 10, 10, 24, 100);
  assert_int_equal(m.selected, 0);
  mt_key_mouse(&m, MT_MOUSE_DOUBLE, 5, 3, 24, 100);
  assert_int_equal(m.screen, MT_SCREEN_DETAIL);
  assert_int_equal(m.detail_pid, 777);
  mt_key_apply(&m, MT_KEY_ESC);
  /* The titles: "   PID* USER ..." - USER starts at column 8. */
  char *txt = render_text(&m, 24, 100);
  assert_true(contains(txt, "   PID* USER"));
  free(txt);
  mt_key_mouse(&m, MT_MOUSE_CLICK, 3, 9, 24, 100);
  assert_int_equal(m.sort, MT_SORT_USER);
  assert_false(m.sort_reverse);
  mt_key_mouse(&m, MT_MOUSE_CLICK, 3, 9, 24, 100);
  assert_true(m.sort_reverse);
  /* --no-mouse: nothing. */
  m.mouse = 0;
  assert_int_equal(mt_key_mouse(&m, MT_MOUSE_CLICK, 3, 2, 24, 100),
                   MT_ACT_NONE);
  assert_int_equal(m.sort, MT_SORT_USER);
  mt_model_free(&m);
}

/* Wide characters take two cells and are shown, not '?' (issue 23): the
 * columns after them stay in place. */
static void test_wide_chars(void **state) {
  (void)state;
  mt_grid_t g;
  ms__strbuf_t out = MS_STRBUF_INIT;
  assert_int_equal(mt_grid_init(&g, 2, 10), 0);
  /* "中文x": 5 columns. */
  assert_int_equal(mt_grid_text_width("\xe4\xb8\xad\xe6\x96\x87x"), 5);
  assert_int_equal(
      mt_grid_puts(&g, 0, 0, "\xe4\xb8\xad\xe6\x96\x87x", -1, MT_ST_NORMAL), 5);
  assert_int_equal(mt_grid_at(&g, 0, 0)->ch, 0x4e2d);
  assert_int_equal(mt_grid_at(&g, 0, 1)->ch, MT_CELL_CONT);
  assert_int_equal(mt_grid_at(&g, 0, 4)->ch, 'x');
  /* A limit of 3 columns takes one whole character, not one and a half. */
  assert_int_equal(
      mt_grid_puts(&g, 1, 0, "\xe4\xb8\xad\xe6\x96\x87", 3, MT_ST_NORMAL), 2);
  /* Half of it at the grid's edge: a blank, not half a glyph. */
  mt_grid_puts(&g, 1, 9, "\xe4\xb8\xad", -1, MT_ST_NORMAL);
  assert_int_equal(mt_grid_at(&g, 1, 9)->ch, ' ');
  /* Writing over half of one blanks the other half. */
  mt_grid_putc(&g, 0, 1, 'y', MT_ST_NORMAL);
  assert_int_equal(mt_grid_at(&g, 0, 0)->ch, ' ');
  assert_int_equal(mt_grid_text(&g, &out), 0);
  assert_string_equal(out.data, " y\xe6\x96\x87x\n\xe4\xb8\xad\n");
  ms__strbuf_free(&out);
  mt_grid_free(&g);

  /* In the list, a wide name keeps the columns after it in line. */
  mt_model_t m;
  list_model(&m);
  snprintf(m.targets[0]->proc.cmdline, sizeof m.targets[0]->proc.cmdline,
           "\xe6\x9c\x8d\xe5\x8a\xa1 --port 80");
  char *txt = render_text(&m, 24, 100);
  assert_true(contains(txt, "\xe6\x9c\x8d\xe5\x8a\xa1 --port 80"));
  free(txt);
  mt_model_free(&m);
}

/* F6 opens htop's sort picker on the list: the keys by their column
 * titles, the current one highlighted and marked; arrows move, Enter
 * sorts, Esc leaves the sort as it was; a click on an entry sorts by it,
 * one elsewhere closes it. The detail view still steps. */
static void test_sort_picker(void **state) {
  (void)state;
  mt_model_t m;
  size_t index;
  mt_sort_t sort;
  list_model(&m);
  assert_int_equal(m.sort, MT_SORT_TOTAL);
  assert_int_equal(mt_key_apply(&m, MT_KEY_F(6)), MT_ACT_REDRAW);
  assert_int_equal(m.input_mode, MT_INPUT_SORT);
  assert_int_equal(m.sort_pick, MT_SORT_TOTAL);
  char *txt = render_text(&m, 24, 100);
  assert_true(contains(txt, " Sort by"));
  assert_true(contains(txt, "\n*TOTAL"));
  assert_true(contains(txt, "\n PID"));
  assert_true(contains(txt, "\n GC P99"));
  assert_true(contains(txt, "Sort by: Up/Down choose  Enter sort  Esc cancel"));
  free(txt);
  /* The highlighted entry is drawn selected. */
  mt_grid_t g;
  assert_int_equal(mt_grid_init(&g, 24, 100), 0);
  mt_view_render(&m, &g);
  int row0 = MT_LIST_TOP + MT_LIST_HEAD;
  assert_int_equal(mt_grid_at(&g, row0 + MT_SORT_TOTAL, 1)->ch, 'T');
  assert_int_equal(mt_grid_at(&g, row0 + MT_SORT_TOTAL, 1)->style,
                   MT_ST_SELECTED);
  assert_int_equal(mt_grid_at(&g, row0 + MT_SORT_PID, 1)->style, MT_ST_NORMAL);
  mt_grid_free(&g);
  /* Down, Enter: by READY; the picker closes. */
  mt_key_apply(&m, MT_KEY_DOWN);
  assert_int_equal(m.sort_pick, MT_SORT_READY);
  assert_int_equal(m.sort, MT_SORT_TOTAL); /* not before Enter */
  assert_int_equal(mt_key_apply(&m, MT_KEY_ENTER), MT_ACT_REDRAW);
  assert_int_equal(m.input_mode, MT_INPUT_NONE);
  assert_int_equal(m.sort, MT_SORT_READY);
  txt = render_text(&m, 24, 100);
  assert_true(contains(txt, "READY*"));
  assert_false(contains(txt, "Sort by"));
  free(txt);
  /* Up past the top stays there; Esc changes nothing. */
  mt_key_apply(&m, MT_KEY_F(6));
  for (int i = 0; i < 5; i++)
    mt_key_apply(&m, MT_KEY_UP);
  assert_int_equal(m.sort_pick, MT_SORT_PID);
  mt_key_apply(&m, MT_KEY_ESC);
  assert_int_equal(m.input_mode, MT_INPUT_NONE);
  assert_int_equal(m.sort, MT_SORT_READY);
  /* End, then F6 again: by NAME. A key the picker does not know does
   * nothing else (q does not quit). */
  mt_key_apply(&m, MT_KEY_F(6));
  assert_int_equal(mt_key_apply(&m, 'x'), MT_ACT_NONE);
  mt_key_apply(&m, MT_KEY_END);
  mt_key_apply(&m, MT_KEY_F(6));
  assert_int_equal(m.sort, MT_SORT_NAME);
  assert_int_equal(m.input_mode, MT_INPUT_NONE);
  /* The mouse: a click on RSS's entry sorts by it. */
  m.mouse = 1;
  mt_key_apply(&m, MT_KEY_F(6));
  assert_int_equal(
      mt_view_list_at(&m, 24, 100, row0 + MT_SORT_RSS, 3, &index, &sort),
      MT_LIST_AT_PICKER);
  assert_int_equal(sort, MT_SORT_RSS);
  assert_int_equal(
      mt_key_mouse(&m, MT_MOUSE_CLICK, row0 + MT_SORT_RSS, 3, 24, 100),
      MT_ACT_REDRAW);
  assert_int_equal(m.sort, MT_SORT_RSS);
  assert_int_equal(m.input_mode, MT_INPUT_NONE);
  /* A click beside the picker closes it, the sort as it was. */
  mt_key_apply(&m, MT_KEY_F(6));
  mt_key_mouse(&m, MT_MOUSE_CLICK, row0 + 1, 60, 24, 100);
  assert_int_equal(m.input_mode, MT_INPUT_NONE);
  assert_int_equal(m.sort, MT_SORT_RSS);
  /* On a short screen the highlighted entry scrolls into sight. */
  mt_key_apply(&m, MT_KEY_F(6));
  mt_key_apply(&m, MT_KEY_END);
  txt = render_text(&m, 10, 100);
  assert_true(contains(txt, "\n NAME"));
  assert_false(contains(txt, "\n PID"));
  free(txt);
  mt_key_apply(&m, MT_KEY_ESC);
  /* The detail view: F6 steps, as before. */
  m.screen = MT_SCREEN_DETAIL;
  m.detail_pid = m.targets[0]->pid;
  mt_key_apply(&m, MT_KEY_F(6));
  assert_int_equal(m.input_mode, MT_INPUT_NONE);
  assert_int_equal(m.sort, MT_SORT_OBJECTS);
  mt_model_free(&m);
}

/* A character of no width (a combining mark) combines with the cell
 * before it, as a terminal draws it, and takes no column (issue 23: it
 * read '?'); the columns after it stay in line. */
static void test_combining_marks(void **state) {
  (void)state;
  mt_grid_t g;
  ms__strbuf_t out = MS_STRBUF_INIT;
  assert_int_equal(mt_grid_init(&g, 3, 10), 0);
  /* "e" U+0301 "x": 2 columns, the accent in the e's cell. */
  assert_int_equal(mt_grid_text_width("e\xcc\x81x"), 2);
  assert_int_equal(mt_grid_puts(&g, 0, 0, "e\xcc\x81x", -1, MT_ST_NORMAL), 2);
  assert_int_equal(mt_grid_at(&g, 0, 0)->ch, 'e');
  assert_int_equal(mt_grid_at(&g, 0, 0)->mark[0], 0x301);
  assert_int_equal(mt_grid_at(&g, 0, 0)->mark[1], 0);
  assert_int_equal(mt_grid_at(&g, 0, 1)->ch, 'x');
  /* Over a wide character: on its left half. Marks past MT_CELL_MARKS
   * are dropped. */
  assert_int_equal(mt_grid_puts(&g, 1, 0,
                                "\xe4\xb8\xad\xcc\x81\xcc\x82\xcc\x83"
                                "\xcc\x84y",
                                -1, MT_ST_NORMAL),
                   3);
  assert_int_equal(mt_grid_at(&g, 1, 0)->mark[0], 0x301);
  assert_int_equal(mt_grid_at(&g, 1, 0)->mark[2], 0x303);
  assert_int_equal(mt_grid_at(&g, 1, 1)->ch, MT_CELL_CONT);
  assert_int_equal(mt_grid_at(&g, 1, 2)->ch, 'y');
  /* A mark that begins the text has a blank of its own, never the cell
   * of what was drawn before; so has one after the clip's left edge. */
  mt_grid_puts(&g, 2, 0, "ab", -1, MT_ST_NORMAL);
  assert_int_equal(mt_grid_text_width("\xcc\x81z"), 2);
  assert_int_equal(mt_grid_puts(&g, 2, 2, "\xcc\x81z", -1, MT_ST_NORMAL), 2);
  assert_int_equal(mt_grid_at(&g, 2, 1)->mark[0], 0);
  assert_int_equal(mt_grid_at(&g, 2, 2)->ch, ' ');
  assert_int_equal(mt_grid_at(&g, 2, 2)->mark[0], 0x301);
  mt_grid_clip(&g, 2, 5, 1, 5);
  assert_int_equal(mt_grid_putc(&g, 2, 5, 0x301, MT_ST_NORMAL), 1);
  assert_int_equal(mt_grid_at(&g, 2, 4)->mark[0], 0);
  assert_int_equal(mt_grid_putc(&g, 2, 6, 0x302, MT_ST_NORMAL), 0);
  assert_int_equal(mt_grid_at(&g, 2, 5)->mark[1], 0x302);
  mt_grid_unclip(&g);
  /* A character written over a cell takes its marks away. */
  mt_grid_putc(&g, 2, 5, 'w', MT_ST_NORMAL);
  assert_int_equal(mt_grid_at(&g, 2, 5)->mark[0], 0);
  /* Control and invisible characters are still '?', never marks. */
  assert_int_equal(mt_grid_putc(&g, 2, 7, 0x200b, MT_ST_NORMAL), 1);
  assert_int_equal(mt_grid_at(&g, 2, 7)->ch, '?');
  assert_int_equal(mt_grid_text(&g, &out), 0);
  assert_string_equal(out.data, "e\xcc\x81x\n"
                                "\xe4\xb8\xad\xcc\x81\xcc\x82\xcc\x83y\n"
                                "ab \xcc\x81z w ?\n");
  ms__strbuf_free(&out);
  mt_grid_free(&g);

  /* In the list, a name with marks keeps the columns after it in line:
   * the same as its precomposed form. */
  mt_model_t m;
  list_model(&m);
  snprintf(m.targets[0]->proc.cmdline, sizeof m.targets[0]->proc.cmdline,
           "cafe\xcc\x81 --port 80");
  char *decomposed = render_text(&m, 24, 100);
  snprintf(m.targets[0]->proc.cmdline, sizeof m.targets[0]->proc.cmdline,
           "caf\xc3\xa9 --port 80");
  char *composed = render_text(&m, 24, 100);
  assert_true(contains(decomposed, "cafe\xcc\x81 --port 80"));
  const char *a = strstr(decomposed, "cafe\xcc\x81"),
             *b = strstr(composed, "caf\xc3\xa9");
  assert_non_null(b);
  /* The rest of the line alike, after the name. */
  assert_int_equal(strcspn(a + 6, "\n"), strcspn(b + 5, "\n"));
  assert_memory_equal(a + 6, b + 5, strcspn(b + 5, "\n"));
  free(decomposed);
  free(composed);
  mt_model_free(&m);
}

int main(void) {
  /* Golden files hold times in UTC. */
  setenv("TZ", "UTC", 1);
  tzset();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_grid_clip),
      cmocka_unit_test(test_list_golden),
      cmocka_unit_test(test_detail_golden),
      cmocka_unit_test(test_help_golden),
      cmocka_unit_test(test_marks),
      cmocka_unit_test(test_heap_sample_age),
      cmocka_unit_test(test_unknown_quality_byte),
      cmocka_unit_test(test_sparkline_order),
      cmocka_unit_test(test_bar_parts),
      cmocka_unit_test(test_every_size),
      cmocka_unit_test(test_hostile_strings),
      cmocka_unit_test(test_huge_figures),
      cmocka_unit_test(test_bar_unknown_legend),
      cmocka_unit_test(test_sections_drop),
      cmocka_unit_test(test_keys_sort),
      cmocka_unit_test(test_keys_move),
      cmocka_unit_test(test_keys_help_pause_quit),
      cmocka_unit_test(test_keys_quit_run),
      cmocka_unit_test(test_keys_attach),
      cmocka_unit_test(test_keys_delay),
      cmocka_unit_test(test_sites_panel),
      cmocka_unit_test(test_keys_htop),
      cmocka_unit_test(test_search_filter),
      cmocka_unit_test(test_tree),
      cmocka_unit_test(test_tree_total),
      cmocka_unit_test(test_accounted),
      cmocka_unit_test(test_mouse),
      cmocka_unit_test(test_wide_chars),
      cmocka_unit_test(test_combining_marks),
      cmocka_unit_test(test_sort_picker),
      cmocka_unit_test(test_sites_chain_and_classes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
