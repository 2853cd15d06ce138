/*
 * test_emit.c - the emitters' exact output, pinned by golden files.
 *
 * The one-line summary, the --once report and the --json object of fixed
 * snapshots (the six Go vectors, and two made by hand with estimated and
 * unavailable fields) are compared with tests/data/golden/. The golden
 * files were written once from this output and checked by eye; to rewrite
 * them after an intended change, run with MS_UPDATE_GOLDEN=1 and review the
 * diff. Then: IEC and duration formatting edge cases, JSON escaping, the
 * field table, ms_strerror(); and a hostile snapshot (every string full of
 * escape sequences, C1 and bidi controls and invalid UTF-8, as long as the
 * format allows), made by hand and decoded from the wire, through the
 * report, the ps line and JSON: nothing a terminal acts on comes out, no
 * buffer is overrun (under ASan), and JSON keeps the strings.
 */
#include <errno.h>
#include <sys/wait.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <cmocka.h>

#include "emit/emit.h"
#include "support/golden.h"
#include "support/govec.h"
#include "support/hostile.h"
#include "wire/wire.h"

/* The pause histogram's le bounds, +Inf included (prometheus.c). */
#define LE_BUCKETS 26

/* ------------------------------------------------------------------------
 * The fixed snapshots
 * ------------------------------------------------------------------------ */

/* The Go vectors lack a histogram: rebuild it from the ring, which holds
 * every pause while NumGC <= 256, so it is exact for these vectors. */
static void hist_from_ring(ms_snapshot_t *s) {
  memset(&s->pause_hist, 0, sizeof s->pause_hist);
  uint32_t n = s->num_gc < MS_PAUSE_RING ? s->num_gc : MS_PAUSE_RING;
  for (uint32_t i = 0; i < n; i++) {
    uint64_t ns = s->pause_ns[(s->num_gc - 1 - i) % MS_PAUSE_RING];
    s->pause_hist.counts[ms_pause_hist_bucket((int64_t)ns)]++;
  }
  ms__set_quality(s, MS_F_PAUSE_HIST,
                  s->num_gc <= MS_PAUSE_RING ? MS_Q_EXACT : MS_Q_ESTIMATED, 0);
}

static void set_class(ms_snapshot_t *s, uint32_t i, uint64_t size,
                      uint64_t mallocs, uint64_t frees) {
  s->by_size[i] = (ms_size_class_t){size, mallocs, frees};
  if (s->nsize_classes <= i)
    s->nsize_classes = i + 1;
}

/* A C program on glibc with the tracking preload: objects exact from
 * "tracked", heap from "glibc" with HeapReleased estimated, no stacks or
 * collector metadata known, so inuse (and with it data and idle) is
 * unavailable; no collector. */
static void make_glibc(ms_snapshot_t *s) {
  memset(s, 0, sizeof *s);
  s->struct_size = sizeof *s;
  s->lib_version = 0x000100;
  s->pid = 31337;
  s->start_time = 987654;
  snprintf(s->comm, sizeof s->comm, "db-worker");
  s->seq = 42;
  s->time_unix_ns = 1795312200000000000ull;
  s->age_ns = 37500000;
  s->nproviders = 2;
  snprintf(s->providers[0], MS_NAME_MAX, "tracked");
  snprintf(s->providers[1], MS_NAME_MAX, "glibc");
  for (int f = 0; f < MS_F__COUNT; f++)
    ms__set_quality(s, (ms_field_t)f, MS_Q_UNAVAILABLE, -1);

  s->alloc = s->heap_alloc = 734003200; /* 700 MiB */
  s->total_alloc = 53687091200ull;      /* 50 GiB */
  s->mallocs = 912345678;
  s->frees = 910000000;
  s->heap_objects = s->mallocs - s->frees;
  static const ms_field_t tracked[] = {
      MS_F_ALLOC,      MS_F_TOTAL_ALLOC,  MS_F_MALLOCS, MS_F_FREES,
      MS_F_HEAP_ALLOC, MS_F_HEAP_OBJECTS, MS_F_BY_SIZE};
  for (size_t i = 0; i < sizeof tracked / sizeof tracked[0]; i++)
    ms__set_quality(s, tracked[i], MS_Q_EXACT, 0);

  s->heap_inuse = 880803840;    /* 840 MiB */
  s->heap_idle = 262144000;     /* 250 MiB */
  s->heap_released = 104857600; /* 100 MiB, estimated by mincore */
  s->heap_sys = s->heap_inuse + s->heap_idle;
  s->mspan_sys = s->mspan_inuse = 4194304;
  s->sys = s->heap_sys + s->mspan_sys;
  static const ms_field_t glibc[] = {MS_F_SYS,       MS_F_HEAP_SYS,
                                     MS_F_HEAP_IDLE, MS_F_HEAP_INUSE,
                                     MS_F_MSPAN_SYS, MS_F_MSPAN_INUSE};
  for (size_t i = 0; i < sizeof glibc / sizeof glibc[0]; i++)
    ms__set_quality(s, glibc[i], MS_Q_EXACT, 1);
  ms__set_quality(s, MS_F_HEAP_RELEASED, MS_Q_ESTIMATED, 1);

  /* The library's own figures (its profiler table), no provider index. */
  s->buck_hash_sys = 1572864;
  ms__set_quality(s, MS_F_BUCK_HASH_SYS, MS_Q_EXACT, -1);
  s->enable_gc = 0;
  ms__set_quality(s, MS_F_ENABLE_GC, MS_Q_EXACT, -1);
  s->kernel_rss = 943718400;
  s->kernel_vsz = 3221225472ull;
  ms__set_quality(s, MS_F_KERNEL_RSS, MS_Q_EXACT, -1);
  ms__set_quality(s, MS_F_KERNEL_VSZ, MS_Q_EXACT, -1);

  set_class(s, 0, 16, 500000000, 499000000); /* 1000000 live, 15.3 MiB */
  set_class(s, 1, 32, 200000000, 199500000); /* 500000 live, 15.3 MiB */
  set_class(s, 2, 48, 100, 100);             /* none live */
  set_class(s, 3, 4096, 150000, 0);          /* 585.9 MiB */
  set_class(s, 4, 65536, 1678, 0);           /* 104.9 MiB */
  set_class(s, 5, 1048576, 0, 0);
}

/* A runtime with a collector (Boehm-like) reporting through the API: every
 * Sys class known, but Sys itself one page off their sum, so the report
 * warns; pauses estimated; a process name that needs escaping. */
static void make_gc(ms_snapshot_t *s) {
  memset(s, 0, sizeof *s);
  s->struct_size = sizeof *s;
  s->lib_version = 0x000100;
  s->pid = 7;
  s->start_time = 12;
  snprintf(s->comm, sizeof s->comm, "vm \"lisp\"\\\t1");
  s->seq = 3;
  s->time_unix_ns = 1795312300000000000ull;
  s->age_ns = 0;
  s->nproviders = 1;
  snprintf(s->providers[0], MS_NAME_MAX, "boehm");
  for (int f = 0; f < MS_F__COUNT; f++)
    ms__set_quality(s, (ms_field_t)f, MS_Q_EXACT, 0);
  s->heap_alloc = s->alloc = 50331648; /* 48 MiB */
  s->heap_inuse = 67108864;            /* 64 MiB */
  s->heap_idle = 16777216;             /* 16 MiB */
  s->heap_released = 8388608;          /* 8 MiB */
  s->heap_sys = s->heap_inuse + s->heap_idle;
  s->stack_sys = 1048576;
  s->stack_inuse = 524288;
  s->gc_sys = 2097152;
  s->other_sys = 65536;
  s->sys = s->heap_sys + s->stack_sys + s->gc_sys + s->other_sys + 4096;
  s->total_alloc = 1073741824;
  s->mallocs = 1000;
  s->frees = 400;
  s->heap_objects = 600;
  s->next_gc = 100663296;
  s->num_gc = 300; /* more than the ring holds */
  s->num_forced_gc = 2;
  s->last_gc = s->time_unix_ns - 1500000000ull;
  s->enable_gc = 1;
  s->gc_cpu_fraction = 0.0123;
  ms__set_quality(s, MS_F_GC_CPU_FRACTION, MS_Q_ESTIMATED, 0);
  for (uint32_t i = 0; i < s->num_gc; i++) {
    uint64_t d = 100000 + (uint64_t)(i % 10) * 50000; /* 100..550 us */
    s->pause_ns[i % MS_PAUSE_RING] = d;
    s->pause_end[i % MS_PAUSE_RING] = s->last_gc - (s->num_gc - 1 - i) * 1000;
    s->pause_total_ns += d;
    s->pause_hist.counts[ms_pause_hist_bucket((int64_t)d)]++;
  }
  s->pause_hist.counts[ms_pause_hist_bucket(40000000)]++; /* one 40 ms */
  s->pause_total_ns += 40000000;
  ms__set_quality(s, MS_F_BY_SIZE, MS_Q_ESTIMATED, 0);
  set_class(s, 0, 8, 10, 2);
  set_class(s, 1, 16, 700, 300);
  ms__set_quality(s, MS_F_KERNEL_LAZYFREE, MS_Q_EXACT, 0);
  ms__set_quality(s, MS_F_KERNEL_ANON_HUGE, MS_Q_UNAVAILABLE, -1);
  ms__set_quality(s, MS_F_KERNEL_SWAP, MS_Q_ESTIMATED, 0);
  s->kernel_rss = 90000000;
  s->kernel_vsz = 400000000;
  s->kernel_lazyfree = 4096;
  s->kernel_swap = 0;
  ms__set_quality(s, MS_F_LOOKUPS, MS_Q_UNAVAILABLE, -1);
  ms__set_quality(s, MS_F_MCACHE_SYS, MS_Q_EXACT, 0);
}

/* A glibc program under the preload with its own mappings and threads, as
 * this library counts them: each off-heap class holds its unbacked part
 * (StackSys the whole stacks, OtherSys the whole mappings), OffHeapReleased
 * is their sum, and Sys the sum of the *Sys fields. */
#define MAP_STACK_INUSE 1179648ull     /* 1.1 MiB touched */
#define MAP_STACK_RELEASED 32509952ull /* the rest of 4 x 8 MiB + 132 KiB */
#define MAP_OTHER_RESIDENT 62914560ull /* 60 MiB */
#define MAP_OTHER_RELEASED 46137344ull /* 44 MiB */
static void make_mappings(ms_snapshot_t *s) {
  memset(s, 0, sizeof *s);
  s->struct_size = sizeof *s;
  s->lib_version = 0x000200;
  s->pid = 4242;
  s->start_time = 5555;
  snprintf(s->comm, sizeof s->comm, "pl_unseen");
  s->seq = 9;
  s->time_unix_ns = 1795312400000000000ull;
  s->nproviders = 3;
  snprintf(s->providers[0], MS_NAME_MAX, "tracked");
  snprintf(s->providers[1], MS_NAME_MAX, "glibc");
  snprintf(s->providers[2], MS_NAME_MAX, "mappings");
  for (int f = 0; f < MS_F__COUNT; f++)
    ms__set_quality(s, (ms_field_t)f, MS_Q_UNAVAILABLE, -1);
  s->alloc = s->heap_alloc = 41943040; /* 40 MiB */
  s->total_alloc = 83886080;
  s->mallocs = 40001;
  s->frees = 20000;
  s->heap_objects = 20001;
  static const ms_field_t tracked[] = {MS_F_ALLOC,      MS_F_TOTAL_ALLOC,
                                       MS_F_MALLOCS,    MS_F_FREES,
                                       MS_F_HEAP_ALLOC, MS_F_HEAP_OBJECTS};
  for (size_t i = 0; i < sizeof tracked / sizeof tracked[0]; i++)
    ms__set_quality(s, tracked[i], MS_Q_EXACT, 0);
  s->heap_inuse = 50331648; /* 48 MiB */
  s->heap_idle = 8388608;
  s->heap_released = 2097152;
  s->heap_sys = s->heap_inuse + s->heap_idle;
  static const ms_field_t glibc[] = {
      MS_F_HEAP_SYS,     MS_F_HEAP_IDLE,   MS_F_HEAP_INUSE,
      MS_F_MSPAN_SYS,    MS_F_MSPAN_INUSE, MS_F_MCACHE_SYS,
      MS_F_MCACHE_INUSE, MS_F_GC_SYS,      MS_F_SYS};
  for (size_t i = 0; i < sizeof glibc / sizeof glibc[0]; i++)
    ms__set_quality(s, glibc[i], MS_Q_EXACT, 1);
  ms__set_quality(s, MS_F_HEAP_RELEASED, MS_Q_ESTIMATED, 1);
  s->stack_inuse = MAP_STACK_INUSE;
  s->stack_released = MAP_STACK_RELEASED;
  s->stack_sys = MAP_STACK_INUSE + MAP_STACK_RELEASED;
  s->other_released = MAP_OTHER_RELEASED;
  s->other_sys = MAP_OTHER_RESIDENT + MAP_OTHER_RELEASED;
  s->off_heap_released = MAP_STACK_RELEASED + MAP_OTHER_RELEASED;
  static const ms_field_t maps[] = {
      MS_F_STACK_SYS,      MS_F_STACK_INUSE,    MS_F_OTHER_SYS,
      MS_F_STACK_RELEASED, MS_F_OTHER_RELEASED, MS_F_OFF_HEAP_RELEASED};
  for (size_t i = 0; i < sizeof maps / sizeof maps[0]; i++)
    ms__set_quality(s, maps[i], MS_Q_EXACT, 2);
  s->buck_hash_sys = 1572864;
  ms__set_quality(s, MS_F_BUCK_HASH_SYS, MS_Q_EXACT, -1);
  s->sys = s->heap_sys + s->stack_sys + s->other_sys + s->buck_hash_sys;
  /* libmemstats itself: its profile table, 512 KiB more resident (its
   * thread's stack, buffers) of 3 MiB more mapped. */
  s->memstats_self = s->buck_hash_sys + 524288;
  s->memstats_self_sys = s->buck_hash_sys + 3145728;
  ms__set_quality(s, MS_F_MEMSTATS_SELF, MS_Q_EXACT, 2);
  ms__set_quality(s, MS_F_MEMSTATS_SELF_SYS, MS_Q_EXACT, 2);
  s->enable_gc = 0;
  ms__set_quality(s, MS_F_ENABLE_GC, MS_Q_EXACT, -1);
  s->kernel_rss = 130023424;
  s->kernel_vsz = 268435456;
  s->kernel_anon_rss = 125435904; /* Ready and 3 MiB of data and bss */
  ms__set_quality(s, MS_F_KERNEL_RSS, MS_Q_EXACT, -1);
  ms__set_quality(s, MS_F_KERNEL_VSZ, MS_Q_EXACT, -1);
  ms__set_quality(s, MS_F_KERNEL_ANON_RSS, MS_Q_EXACT, -1);
  /* Beside it: 8 MiB of shared memory, 6 MiB of it the program's own
   * shared anonymous mapping of 16 MiB, and 4 MiB of files. */
  s->kernel_rss_file = 4194304;
  s->kernel_rss_shmem = 8388608;
  ms__set_quality(s, MS_F_KERNEL_RSS_FILE, MS_Q_EXACT, -1);
  ms__set_quality(s, MS_F_KERNEL_RSS_SHMEM, MS_Q_EXACT, -1);
  s->shared_anon = 16777216;
  s->shared_anon_resident = 6291456;
  ms__set_quality(s, MS_F_SHARED_ANON, MS_Q_EXACT, 2);
  ms__set_quality(s, MS_F_SHARED_ANON_RESIDENT, MS_Q_EXACT, 2);
}

/* The same program as a target of 0.2 as it first shipped sends it: every
 * class holds only its backed bytes, OffHeapReleased is a term of Sys
 * outside them, and the per-class parts are not in the message. */
static void make_legacy_0_2(ms_snapshot_t *s) {
  make_mappings(s);
  s->pid = 4243;
  s->stack_sys = s->stack_inuse;
  s->other_sys = MAP_OTHER_RESIDENT;
  s->stack_released = s->other_released = 0;
  ms__set_quality(s, MS_F_STACK_RELEASED, MS_Q_UNAVAILABLE, -1);
  ms__set_quality(s, MS_F_OTHER_RELEASED, MS_Q_UNAVAILABLE, -1);
}

typedef struct fixture_s {
  char name[64];
  ms_snapshot_t *snap;
} fixture_t;

#define MAX_FIXTURES 16

static size_t load_fixtures(fixture_t *fx) {
  size_t n = 0;
  glob_t g;
  size_t nv = govec_list(&g);
  assert_true(nv >= 6);
  for (size_t i = 0; i < nv && n < MAX_FIXTURES - 4; i++, n++) {
    fx[n].snap = malloc(sizeof *fx[n].snap);
    assert_non_null(fx[n].snap);
    govec_t v;
    char err[GOVEC_ERR_MAX];
    if (govec_load(g.gl_pathv[i], fx[n].snap, &v, err, sizeof err) != 0)
      fail_msg("%s", err);
    hist_from_ring(fx[n].snap);
    const char *base = strrchr(g.gl_pathv[i], '/');
    snprintf(fx[n].name, sizeof fx[n].name, "go_%s", base ? base + 1 : "x");
    char *dot = strrchr(fx[n].name, '.');
    if (dot)
      *dot = '\0';
    govec_free(&v);
  }
  globfree(&g);
  fx[n].snap = malloc(sizeof *fx[n].snap);
  assert_non_null(fx[n].snap);
  make_glibc(fx[n].snap);
  snprintf(fx[n].name, sizeof fx[n].name, "handmade_glibc");
  n++;
  fx[n].snap = malloc(sizeof *fx[n].snap);
  assert_non_null(fx[n].snap);
  make_gc(fx[n].snap);
  snprintf(fx[n].name, sizeof fx[n].name, "handmade_gc");
  n++;
  fx[n].snap = malloc(sizeof *fx[n].snap);
  assert_non_null(fx[n].snap);
  make_mappings(fx[n].snap);
  snprintf(fx[n].name, sizeof fx[n].name, "handmade_mappings");
  n++;
  fx[n].snap = malloc(sizeof *fx[n].snap);
  assert_non_null(fx[n].snap);
  make_legacy_0_2(fx[n].snap);
  snprintf(fx[n].name, sizeof fx[n].name, "handmade_legacy_0_2");
  n++;
  return n;
}

static void free_fixtures(fixture_t *fx, size_t n) {
  for (size_t i = 0; i < n; i++)
    free(fx[i].snap);
}

/* ------------------------------------------------------------------------
 * Golden tests
 * ------------------------------------------------------------------------ */

static void test_golden_lines(void **state) {
  (void)state;
  fixture_t fx[MAX_FIXTURES];
  size_t n = load_fixtures(fx);
  ms__strbuf_t all = MS_STRBUF_INIT;
  for (size_t i = 0; i < n; i++) {
    ms__strbuf_printf(&all, "%s: ", fx[i].name);
    assert_int_equal(mt_emit_line(&all, fx[i].snap), 0);
    ms__strbuf_puts(&all, "\n");
  }
  golden_check("lines.txt", all.data, all.len);
  ms__strbuf_free(&all);
  free_fixtures(fx, n);
}

static void test_golden_reports(void **state) {
  (void)state;
  fixture_t fx[MAX_FIXTURES];
  size_t n = load_fixtures(fx);
  for (size_t i = 0; i < n; i++) {
    ms__strbuf_t out = MS_STRBUF_INIT;
    assert_int_equal(mt_emit_report(&out, fx[i].snap), 0);
    char name[96];
    snprintf(name, sizeof name, "%.60s.report.txt", fx[i].name);
    golden_check(name, out.data, out.len);
    ms__strbuf_free(&out);
  }
  free_fixtures(fx, n);
}

static void test_golden_json(void **state) {
  (void)state;
  fixture_t fx[MAX_FIXTURES];
  size_t n = load_fixtures(fx);
  for (size_t i = 0; i < n; i++) {
    ms__strbuf_t out = MS_STRBUF_INIT;
    assert_int_equal(mt_emit_json(&out, fx[i].snap), 0);
    ms__strbuf_puts(&out, "\n");
    char name[96];
    snprintf(name, sizeof name, "%.60s.json", fx[i].name);
    golden_check(name, out.data, out.len);
    ms__strbuf_free(&out);
  }
  free_fixtures(fx, n);
}

/* The Prometheus exposition of every fixture at once (families grouped
 * across processes), one process known but unread (snap NULL: only its
 * scrape errors), and exe labels on two of them, one with bytes that need
 * escaping. */
static void prometheus_of(ms__strbuf_t *out, int om) {
  fixture_t fx[MAX_FIXTURES];
  size_t n = load_fixtures(fx);
  mt_prom_target_t t[MAX_FIXTURES + 1];
  memset(t, 0, sizeof t);
  for (size_t i = 0; i < n; i++) {
    t[i].pid = fx[i].snap->pid;
    t[i].snap = fx[i].snap;
    t[i].age_ns = 250000000ull * (i + 1);
    t[i].scrape_errors = i % 3;
  }
  t[0].exe = "/usr/bin/go-app";
  t[n - 1].exe = "/opt/vm \"x\"\\\n\x1b[31m";
  t[n].pid = 99999;
  t[n].scrape_errors = 4;
  assert_int_equal(mt_emit_prometheus(out, om, t, n + 1, "9.9.9"), 0);
  free_fixtures(fx, n);
}

static void test_golden_prometheus(void **state) {
  (void)state;
  for (int om = 0; om <= 1; om++) {
    ms__strbuf_t out = MS_STRBUF_INIT;
    prometheus_of(&out, om);
    golden_check(om ? "prometheus.om.txt" : "prometheus.txt", out.data,
                 out.len);
    ms__strbuf_free(&out);
  }
}

/* Runs cmd with text on its standard input; returns its exit status, or
 * -1 if it could not be run; its output goes to the test's. */
static int pipe_to(const char *cmd, const char *text, size_t len) {
  FILE *p = popen(cmd, "w");
  if (!p)
    return -1;
  fwrite(text, 1, len, p);
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int have(const char *cmd) {
  char c[256];
  snprintf(c, sizeof c, "%s >/dev/null 2>&1", cmd);
  return system(c) == 0;
}

/* promtool, Prometheus's own linter, accepts the text format (it reads
 * 0.0.4 only); OpenMetrics goes through the Python client's parser, which
 * is strict about what 1.0 asks (family names, UNIT, _total, info, EOF).
 * Each is skipped when not installed (contrib/setup-deps.sh lists them). */
static void test_prometheus_linters(void **state) {
  (void)state;
  ms__strbuf_t out = MS_STRBUF_INIT;
  prometheus_of(&out, 0);
  if (have("promtool --version")) {
    /* promtool's lint prints what it finds and exits 3 for lint problems,
     * 1 for a parse error. */
    assert_int_equal(pipe_to("promtool check metrics", out.data, out.len), 0);
  } else {
    print_message("promtool not installed: text format not linted\n");
  }
  ms__strbuf_free(&out);
  ms__strbuf_t om = MS_STRBUF_INIT;
  prometheus_of(&om, 1);
  if (have("/usr/bin/python3 -c 'import "
           "prometheus_client.openmetrics.parser'")) {
    assert_int_equal(
        pipe_to("/usr/bin/python3 -c 'import sys\n"
                "from prometheus_client.openmetrics.parser import "
                "text_string_to_metric_families as p\n"
                "n = sum(len(f.samples) for f in p(sys.stdin.read()))\n"
                "assert n > 100, n'",
                om.data, om.len),
        0);
  } else {
    print_message("python3-prometheus-client not installed: OpenMetrics "
                  "not parsed\n");
  }
  ms__strbuf_free(&om);
}

/* The exposition's options: --no-size-classes leaves out the size-class
 * families and their estimate marks, --group-by's label follows pid, comm
 * and exe, the read duration and memtop's own process_* families are
 * served as client_golang names them, and the legacy entry point serves
 * neither. */
static void test_prometheus_options(void **state) {
  (void)state;
  ms_snapshot_t *g = calloc(1, sizeof *g);
  assert_non_null(g);
  make_glibc(g);
  mt_prom_target_t t = {g->pid, g,    "/usr/bin/db", 0,      0,
                        NULL,   NULL, "db.service",  1500000};
  mt_prom_self_t self = {.cpu_seconds = 1.25,
                         .start_time_s = 1700000000.5,
                         .resident_bytes = 4096,
                         .virtual_bytes = 8192,
                         .virtual_max_bytes = UINT64_MAX,
                         .open_fds = 9,
                         .max_fds = 1024,
                         .have_stat = 1,
                         .have_fds = 1,
                         .have_vmax = 1};
  mt_prom_opts_t po = {"1.0", 0, &self, 3, 0};
  ms__strbuf_t out = MS_STRBUF_INIT;
  assert_int_equal(mt_emit_prometheus_opts(&out, 0, &t, 1, &po), 0);
  const char *o = out.data;
  assert_non_null(strstr(o, "memstats_heap_alloc_bytes{pid=\"31337\","
                            "comm=\"db-worker\",exe=\"/usr/bin/db\","
                            "group=\"db.service\"} 734003200\n"));
  assert_non_null(strstr(o, "\nmemstats_size_class_mallocs_total{"));
  assert_non_null(strstr(o, "\nmemtop_scrape_duration_seconds{pid=\"31337\","
                            "comm=\"db-worker\",exe=\"/usr/bin/db\","
                            "group=\"db.service\"} 0.0015\n"));
  assert_non_null(strstr(o, "\nmemtop_scrape_late_targets 3\n"));
  assert_non_null(strstr(o, "# TYPE process_cpu_seconds_total counter\n"
                            "process_cpu_seconds_total 1.25\n"));
  assert_non_null(strstr(o, "\nprocess_resident_memory_bytes 4096\n"));
  assert_non_null(strstr(o, "\nprocess_virtual_memory_bytes 8192\n"));
  assert_non_null(strstr(o, "\nprocess_virtual_memory_max_bytes -1\n"));
  const char *start = strstr(o, "\nprocess_start_time_seconds ");
  assert_non_null(start);
  assert_true(strtod(start + 28, NULL) == 1700000000.5);
  assert_non_null(strstr(o, "\nprocess_open_fds 9\n"));
  assert_non_null(strstr(o, "\nprocess_max_fds 1024\n"));
  ms__strbuf_free(&out);

  po.no_size_classes = 1;
  assert_int_equal(mt_emit_prometheus_opts(&out, 1, &t, 1, &po), 0);
  assert_null(strstr(out.data, "size_class"));
  assert_non_null(strstr(out.data, "# TYPE process_cpu_seconds counter\n"));
  ms__strbuf_free(&out);

  assert_int_equal(mt_emit_prometheus(&out, 0, &t, 1, "1.0"), 0);
  assert_null(strstr(out.data, "process_"));
  assert_null(strstr(out.data, "memtop_scrape_late_targets"));
  ms__strbuf_free(&out);
  free(g);
}

/* What the exposition says, checked on its own: one HELP per family
 * however many processes, an estimate marked and an unavailable figure
 * absent, the histogram cumulative and ending at its count. */
static void test_prometheus_content(void **state) {
  (void)state;
  ms_snapshot_t *g = calloc(1, sizeof *g), *c = calloc(1, sizeof *c);
  assert_non_null(g);
  assert_non_null(c);
  make_glibc(g);
  make_gc(c);
  mt_prom_target_t t[3] = {
      {g->pid, g, NULL, 0, 0, NULL, NULL, NULL, 0},
      {c->pid, c, NULL, 1000000000, 2, NULL, NULL, NULL, 0},
      {c->pid + 1, c, NULL, 0, 0, NULL, NULL, NULL, 0}};
  ms__strbuf_t out = MS_STRBUF_INIT;
  assert_int_equal(mt_emit_prometheus(&out, 0, t, 3, "1.0"), 0);
  const char *o = out.data;
  /* One header for three processes. */
  const char *h = strstr(o, "# HELP memstats_heap_alloc_bytes ");
  assert_non_null(h);
  assert_null(strstr(h + 1, "# HELP memstats_heap_alloc_bytes "));
  assert_non_null(strstr(o, "memstats_heap_alloc_bytes{pid=\"31337\","
                            "comm=\"db-worker\"} 734003200\n"));
  /* glibc's HeapReleased is estimated: served, and marked. */
  assert_non_null(strstr(o, "memstats_heap_released_bytes{pid=\"31337\","
                            "comm=\"db-worker\"} 104857600\n"));
  assert_non_null(strstr(o, "memstats_estimated{pid=\"31337\",comm=\"db-"
                            "worker\",metric=\"memstats_heap_released_"
                            "bytes\"} 1\n"));
  /* Lookups unavailable on both: no family at all; the glibc process's
   * StackSys unavailable: no sample for it, though the other has one. */
  assert_null(strstr(o, "memstats_lookups_total"));
  assert_null(strstr(o, "memstats_stack_sys_bytes{pid=\"31337\""));
  assert_non_null(strstr(o, "memstats_stack_sys_bytes{pid=\"7\""));
  /* No collector and no pause on glibc: no histogram for it. */
  assert_null(strstr(o, "memstats_gc_pause_seconds_count{pid=\"31337\""));
  /* The collector's histogram: 301 pauses, cumulative, +Inf = count. */
  /* The name made safe (the tab and the backslash are escapes now), then
   * escaped as a label value. */
  assert_non_null(strstr(o, "memstats_gc_pause_seconds_bucket{pid=\"7\","
                            "comm=\"vm \\\"lisp\\\"\\\\\\\\\\\\x091\","
                            "le=\"+Inf\"} 301\n"));
  assert_non_null(strstr(o, "comm=\"vm \\\"lisp\\\"\\\\\\\\\\\\x091\"} 301\n"));
  uint64_t prev = 0;
  int buckets = 0;
  for (const char *p = o;
       (p = strstr(p, "memstats_gc_pause_seconds_bucket{pid=\"7\"")); p++) {
    const char *v = strstr(p, "} ");
    uint64_t x = strtoull(v + 2, NULL, 10);
    assert_true(x >= prev);
    prev = x;
    buckets++;
  }
  assert_int_equal(buckets, LE_BUCKETS);
  assert_int_equal(prev, 301);
  /* 100..550 us pauses and one of 40 ms: none below 2^16 ns (65.5 us),
   * all but the 40 ms one below 2^20 ns (1.05 ms). */
  assert_non_null(strstr(o, ",le=\"0.000065536\"} 0\n"));
  assert_non_null(strstr(o, ",le=\"0.001048576\"} 300\n"));
  /* Seconds from ns: the age, and the histogram's sum (PauseTotalNs). */
  assert_non_null(strstr(o, "memstats_snapshot_age_seconds{pid=\"7\","));
  assert_non_null(strstr(o, "\"} 1\nmemstats_snapshot_age_seconds{pid=\"8\""));
  assert_non_null(strstr(o, "memtop_targets 3\n"));
  assert_non_null(strstr(o, "memtop_scrape_errors_total{pid=\"7\"} 2\n"));
  assert_non_null(strstr(o, "memtop_build_info{version=\"1.0\"} 1\n"));
  assert_non_null(strstr(o, "memstats_target_info{pid=\"31337\",comm=\"db-"
                            "worker\",provider=\"tracked,glibc\","
                            "libmemstats_version=\"0.1.0\"} 1\n"));
  assert_non_null(strstr(o, "# TYPE memstats_mallocs_total counter\n"));
  assert_null(strstr(o, "# EOF"));
  ms__strbuf_free(&out);

  /* OpenMetrics: counters' families without _total, units, EOF last. */
  assert_int_equal(mt_emit_prometheus(&out, 1, t, 3, "1.0"), 0);
  o = out.data;
  assert_non_null(strstr(o, "# TYPE memstats_mallocs counter\n"));
  assert_non_null(strstr(o, "\nmemstats_mallocs_total{pid=\"31337\""));
  assert_non_null(strstr(o, "# TYPE memstats_heap_alloc_bytes gauge\n"
                            "# UNIT memstats_heap_alloc_bytes bytes\n"));
  assert_non_null(strstr(o, "# TYPE memstats_target info\n"));
  assert_non_null(strstr(o, "# TYPE memstats_gc_pause_seconds histogram\n"
                            "# UNIT memstats_gc_pause_seconds seconds\n"));
  assert_true(out.len > 6);
  assert_string_equal(o + out.len - 6, "# EOF\n");
  ms__strbuf_free(&out);

  /* Nothing to serve: memtop's own families, still valid. */
  assert_int_equal(mt_emit_prometheus(&out, 1, NULL, 0, "1.0"), 0);
  assert_non_null(strstr(out.data, "memtop_targets 0\n"));
  assert_int_equal(mt_emit_prometheus(NULL, 1, NULL, 0, "1.0"), MS_EINVAL);
  assert_int_equal(mt_emit_prometheus(&out, 1, NULL, 1, "1.0"), MS_EINVAL);
  ms__strbuf_free(&out);
  free(g);
  free(c);
}

/* ------------------------------------------------------------------------
 * What the report and the JSON say, checked on their own
 * ------------------------------------------------------------------------ */

static void test_json_parses_and_agrees(void **state) {
  (void)state;
  fixture_t fx[MAX_FIXTURES];
  size_t n = load_fixtures(fx);
  for (size_t i = 0; i < n; i++) {
    const ms_snapshot_t *s = fx[i].snap;
    ms__strbuf_t out = MS_STRBUF_INIT;
    assert_int_equal(mt_emit_json(&out, s), 0);
    assert_null(strchr(out.data, '\n'));
    json_error_t je;
    json_t *j = json_loads(out.data, 0, &je);
    if (!j)
      fail_msg("%s: not JSON: %s at %d", fx[i].name, je.text, je.position);
    assert_int_equal(json_integer_value(json_object_get(j, "pid")), s->pid);
    assert_string_equal(json_string_value(json_object_get(j, "comm")), s->comm);
    assert_int_equal(json_array_size(json_object_get(j, "providers")),
                     s->nproviders);
    assert_int_equal(json_integer_value(json_object_get(j, "age_ms")),
                     s->age_ns / 1000000);
    /* memstats: exactly the available Go fields (PauseNs brings
     * PauseEnd). */
    json_t *ms = json_object_get(j, "memstats");
    json_t *q = json_object_get(j, "quality");
    assert_true(json_is_object(ms) && json_is_object(q));
    assert_int_equal(json_object_size(q), MS_F__COUNT);
    for (int f = 0; f < MS_F__COUNT; f++) {
      const char *name = ms_field_name((ms_field_t)f);
      const char *qs = json_string_value(json_object_get(q, name));
      assert_non_null(qs);
      assert_string_equal(qs, ms_quality_name((ms_quality_t)s->quality[f]));
      if (!ms__fields[f].in_go)
        assert_null(json_object_get(ms, name));
      else if (s->quality[f] == MS_Q_UNAVAILABLE)
        assert_null(json_object_get(ms, name));
      else
        assert_non_null(json_object_get(ms, name));
    }
    /* breakdown: ms_breakdown's figures, unavailable ones left out. */
    ms_breakdown_t b;
    ms_breakdown(s, &b);
    json_t *bd = json_object_get(j, "breakdown");
    const struct {
      const char *k;
      int64_t v;
      ms_quality_t q;
    } parts[] = {{"Ready", b.ready, b.q_ready},
                 {"Prepared", b.prepared, b.q_prepared},
                 {"Data", b.data, b.q_data},
                 {"FragOverhead", b.frag_overhead, b.q_frag_overhead},
                 {"Idle", b.idle, b.q_idle}};
    for (size_t k = 0; k < 5; k++) {
      json_t *v = json_object_get(bd, parts[k].k);
      if (parts[k].q == MS_Q_UNAVAILABLE)
        assert_null(v);
      else
        assert_int_equal(json_integer_value(v), parts[k].v);
    }
    json_t *kern = json_object_get(j, "kernel");
    assert_true(json_is_object(kern));
    if (s->quality[MS_F_KERNEL_RSS] != MS_Q_UNAVAILABLE)
      assert_int_equal(json_integer_value(json_object_get(kern, "rss")),
                       s->kernel_rss);
    else
      assert_null(json_object_get(kern, "rss"));
    json_decref(j);
    ms__strbuf_free(&out);
  }
  free_fixtures(fx, n);
}

/* The value of family name's sample for pid in a Prometheus exposition. */
static double prom_value(const char *expo, const char *name, int pid) {
  char key[160];
  snprintf(key, sizeof key, "\n%s{pid=\"%d\"", name, pid);
  const char *at = strstr(expo, key);
  if (!at)
    fail_msg("no sample %s for pid %d", name, pid);
  const char *v = strstr(at + 1, "} ");
  assert_non_null(v);
  return strtod(v + 2, NULL);
}

/* Go's rule, as HeapSys holds HeapReleased: every off-heap class holds its
 * unbacked part, so Sys is the sum of the *Sys fields and Prepared is
 * HeapReleased + OffHeapReleased, and a reader of any one output (the
 * JSON's memstats object, the Prometheus families, the report's Sys table)
 * reconciles them from that output alone. */
static void test_sys_is_the_sum_everywhere(void **state) {
  (void)state;
  static const char *const sys_fields[] = {
      "HeapSys",     "StackSys", "MSpanSys", "MCacheSys",
      "BuckHashSys", "GCSys",    "OtherSys"};
  static const char *const sys_families[] = {
      "memstats_heap_sys_bytes",      "memstats_stack_sys_bytes",
      "memstats_mspan_sys_bytes",     "memstats_mcache_sys_bytes",
      "memstats_buck_hash_sys_bytes", "memstats_gc_sys_bytes",
      "memstats_other_sys_bytes"};
  ms_snapshot_t *s = malloc(sizeof *s);
  assert_non_null(s);
  make_mappings(s);
  ms_breakdown_t b;
  ms_breakdown(s, &b);
  assert_false(b.sys_mismatch);
  /* The stacks' and mappings' unbacked bytes are Prepared, not in use. */
  assert_int_equal(b.prepared, s->heap_released + s->off_heap_released);
  assert_int_equal(b.ready, s->sys - b.prepared);
  assert_int_equal(b.inuse, s->heap_inuse + MAP_STACK_INUSE +
                                MAP_OTHER_RESIDENT + s->buck_hash_sys);

  /* JSON: the memstats object alone. */
  ms__strbuf_t out = MS_STRBUF_INIT;
  assert_int_equal(mt_emit_json(&out, s), 0);
  json_error_t je;
  json_t *j = json_loads(out.data, 0, &je);
  assert_non_null(j);
  json_t *ms = json_object_get(j, "memstats");
  json_int_t sum = 0;
  for (size_t i = 0; i < 7; i++)
    sum += json_integer_value(json_object_get(ms, sys_fields[i]));
  assert_int_equal(json_integer_value(json_object_get(ms, "Sys")), sum);
  json_t *ohr = json_object_get(ms, "OffHeapReleased");
  assert_true(json_is_integer(ohr));
  assert_int_equal(json_integer_value(json_object_get(ms, "HeapReleased")) +
                       json_integer_value(ohr),
                   json_integer_value(json_object_get(
                       json_object_get(j, "breakdown"), "Prepared")));
  assert_int_equal(json_integer_value(json_object_get(ms, "OtherReleased")),
                   MAP_OTHER_RELEASED);
  assert_int_equal(json_integer_value(json_object_get(ms, "StackReleased")),
                   MAP_STACK_RELEASED);
  json_decref(j);
  ms__strbuf_free(&out);

  /* Prometheus: the families. */
  mt_prom_target_t t = {s->pid, s, NULL, 0, 0, NULL, NULL, NULL, 0};
  assert_int_equal(mt_emit_prometheus(&out, 0, &t, 1, "9.9.9"), 0);
  double psum = 0;
  for (size_t i = 0; i < 7; i++)
    psum += prom_value(out.data, sys_families[i], s->pid);
  assert_true(prom_value(out.data, "memstats_sys_bytes", s->pid) == psum);
  assert_true(
      prom_value(out.data, "memstats_prepared_bytes", s->pid) ==
      prom_value(out.data, "memstats_heap_released_bytes", s->pid) +
          prom_value(out.data, "memstats_off_heap_released_bytes", s->pid));
  ms__strbuf_free(&out);

  /* The report: no row outside the classes, no warning, and the Released
   * column's total is Prepared. */
  assert_int_equal(mt_emit_report(&out, s), 0);
  assert_null(strstr(out.data, "\n  OffHeapRel "));
  assert_null(strstr(out.data, "warning"));
  char sys[48], prep[48], want[160];
  mt_fmt_field(sys, sizeof sys, s, MS_F_SYS);
  mt_fmt_bytes_q(prep, sizeof prep, b.prepared, b.q_prepared);
  snprintf(want, sizeof want, "  %-11s %10s %10s %10s\n", "total", sys, "",
           prep);
  assert_non_null(strstr(out.data, want));
  ms__strbuf_free(&out);

  /* An older target's snapshot (0.2 as it first shipped: the unbacked part
   * outside the classes) reads to the same breakdown, and its report keeps
   * the part a row of its own. */
  ms_snapshot_t *old = malloc(sizeof *old);
  assert_non_null(old);
  make_legacy_0_2(old);
  ms_breakdown_t ob;
  ms_breakdown(old, &ob);
  assert_false(ob.sys_mismatch);
  assert_int_equal(ob.ready, b.ready);
  assert_int_equal(ob.prepared, b.prepared);
  assert_int_equal(ob.inuse, b.inuse);
  assert_int_equal(ob.idle, b.idle);
  assert_int_equal(ob.data, b.data);
  assert_int_equal(mt_emit_report(&out, old), 0);
  assert_non_null(strstr(out.data, "\n  OffHeapRel "));
  assert_null(strstr(out.data, "warning"));
  ms__strbuf_free(&out);
  free(old);
  free(s);
}

static void test_report_marks(void **state) {
  (void)state;
  ms_snapshot_t *s = malloc(sizeof *s);
  assert_non_null(s);
  ms__strbuf_t out = MS_STRBUF_INIT;

  make_glibc(s);
  mt_emit_report(&out, s);
  /* No collector; the estimate marked; the unknown shown as unknown. */
  assert_non_null(strstr(out.data, "GC\n  no collector\n"));
  assert_non_null(strstr(out.data, "Prepared=~100.0MiB)"));
  /* Ready+Prepared is Sys, exact even though its halves are estimates. */
  assert_non_null(strstr(out.data, ": Ready+Prepared=1.1GiB (Ready=~994.0MiB"));
  assert_non_null(strstr(out.data, "data:- + fragOverhead:"));
  assert_null(strstr(out.data, "warning"));
  /* The report ends with a newline and has no trailing blanks. */
  assert_int_equal(out.data[out.len - 1], '\n');
  assert_null(strstr(out.data, " \n"));

  ms__strbuf_reset(&out);
  make_gc(s);
  mt_emit_report(&out, s);
  assert_non_null(strstr(out.data, "warning: Sys 87101440 != sum of the "
                                   "classes 87097344 (4.0KiB more)"));
  /* Control characters never reach the terminal. */
  assert_null(strchr(out.data, '\t'));
  /* The tab as its escape, and the backslash before it doubled, so that
   * the two cannot be mistaken for each other. */
  assert_non_null(strstr(out.data, "7 vm \"lisp\"\\\\\\x091: "));
  /* EnableGC unavailable counts as no collector too. */
  ms__strbuf_reset(&out);
  ms__set_quality(s, MS_F_ENABLE_GC, MS_Q_UNAVAILABLE, -1);
  mt_emit_report(&out, s);
  assert_non_null(strstr(out.data, "no collector"));

  assert_int_equal(mt_emit_report(NULL, s), MS_EINVAL);
  assert_int_equal(mt_emit_report(&out, NULL), MS_EINVAL);
  assert_int_equal(mt_emit_line(&out, NULL), MS_EINVAL);
  assert_int_equal(mt_emit_json(&out, NULL), MS_EINVAL);
  ms__strbuf_free(&out);
  free(s);
}

/* The pause figures of a report are those of the live view (mt_pauses):
 * with every pause still in the ring, the maximum is the ring's exact one,
 * and no quantile is above it. A histogram bucket's upper edge printed as
 * "pause max" showed one 4.47 ms pause as 5.2 ms, more than PauseTotalNs,
 * an estimate unmarked (DESIGN.md: never show an estimate as exact). */
static void test_report_pause_max(void **state) {
  (void)state;
  ms_snapshot_t *s = malloc(sizeof *s);
  assert_non_null(s);
  ms__strbuf_t out = MS_STRBUF_INIT;
  make_gc(s);
  s->num_gc = 1;
  memset(s->pause_ns, 0, sizeof s->pause_ns);
  s->pause_ns[0] = 4466353;
  s->pause_total_ns = 4466353;
  memset(&s->pause_hist, 0, sizeof s->pause_hist);
  s->pause_hist.counts[ms_pause_hist_bucket(4466353)] = 1;
  assert_true(ms_pause_hist_quantile(&s->pause_hist, 1.0) > 4466353);
  mt_emit_report(&out, s);
  assert_non_null(strstr(out.data, "PauseTotalNs      4.5ms  pause p50         "
                                   "4.5ms  pause p99         4.5ms\n"));
  assert_non_null(strstr(out.data, "  pause max         4.5ms  "));

  /* More pauses than the ring holds: the histogram's edge, which bounds
   * the pauses the ring forgot. */
  s->num_gc = 300;
  mt_pauses_t p;
  mt_pauses(s, &p);
  assert_int_equal(p.max, ms_pause_hist_quantile(&s->pause_hist, 1.0));
  /* No pause yet: none of them. */
  s->num_gc = 0;
  memset(&s->pause_hist, 0, sizeof s->pause_hist);
  mt_pauses(s, &p);
  assert_int_equal(p.p50, -1);
  assert_int_equal(p.max, -1);
  ms__strbuf_free(&out);
  free(s);
}

/* ------------------------------------------------------------------------
 * Figures
 * ------------------------------------------------------------------------ */

static void test_iec(void **state) {
  (void)state;
  static const struct {
    int64_t v;
    const char *want;
  } cases[] = {
      {0, "0.0B"},
      {1, "1.0B"},
      {512, "512.0B"},
      {1023, "1023.0B"},
      {1024, "1.0KiB"},
      {1536, "1.5KiB"},
      {1280, "1.2KiB"}, /* 1.25: half to even, as printf's %.1f */
      {1331, "1.3KiB"},
      {1047552, "1023.0KiB"},
      {1048524, "1023.9KiB"},
      {1048575, "1.0MiB"},    /* 1 MiB - 1 rounds up into the next unit */
      {1073741823, "1.0GiB"}, /* 1 GiB - 1 */
      {1073741824, "1.0GiB"},
      {1288490189, "1.2GiB"},
      {641728512, "612.0MiB"},
      {1099511627776, "1.0TiB"},
      {INT64_MAX, "8.0EiB"},
      {-1, "-1.0B"},
      {-1536, "-1.5KiB"},
      {-1073741823, "-1.0GiB"},
      {INT64_MIN, "-8.0EiB"},
  };
  char buf[32];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    mt_fmt_iec(buf, sizeof buf, cases[i].v);
    if (strcmp(buf, cases[i].want) != 0)
      fail_msg("%lld: want %s, got %s", (long long)cases[i].v, cases[i].want,
               buf);
  }
  /* A short buffer is truncated, terminated, never overrun. */
  char tiny[6] = "zzzzz";
  mt_fmt_iec(tiny, 4, 1536);
  assert_string_equal(tiny, "1.5");
  assert_int_equal(tiny[4], 'z');

  assert_string_equal(mt_fmt_bytes_q(buf, sizeof buf, 1536, MS_Q_EXACT),
                      "1.5KiB");
  assert_string_equal(mt_fmt_bytes_q(buf, sizeof buf, 1536, MS_Q_ESTIMATED),
                      "~1.5KiB");
  assert_string_equal(mt_fmt_bytes_q(buf, sizeof buf, 1536, MS_Q_UNAVAILABLE),
                      "-");
  assert_string_equal(mt_fmt_bytes_q(buf, sizeof buf, -1, MS_Q_ESTIMATED),
                      "~-1.0B");
  /* Truncated as before the mark had its helper: the mark first. */
  assert_string_equal(mt_fmt_bytes_q(tiny, 4, 1536, MS_Q_ESTIMATED), "~1.");
  /* The one spelling of the mark. */
  assert_string_equal(mt_quality_mark(MS_Q_ESTIMATED), "~");
  assert_string_equal(mt_quality_mark(MS_Q_EXACT), "");
  assert_string_equal(mt_quality_mark(MS_Q_UNAVAILABLE), "");
  assert_string_equal(mt_fmt_bytes_q(buf, sizeof buf, 1, (ms_quality_t)9), "-");
}

static void test_duration(void **state) {
  (void)state;
  static const struct {
    int64_t v;
    const char *want;
  } cases[] = {
      {0, "0ns"},
      {999, "999ns"},
      {1000, "1.0us"},
      {1500, "1.5us"},
      {999949, "999.9us"},
      {999960, "1.0ms"},
      {1030618, "1.0ms"},
      {12345678, "12.3ms"},
      {2500000000, "2.5s"},
      {59940000000, "59.9s"},
      {59960000000, "1m00s"},
      {185000000000, "3m05s"},
      {7620000000000, "2h07m"},
      {356400000000000, "4d03h"},
      {-1500, "-1.5us"},
      {INT64_MAX, "106751d23h"},
  };
  char buf[32];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    mt_fmt_duration(buf, sizeof buf, cases[i].v);
    if (strcmp(buf, cases[i].want) != 0)
      fail_msg("%lld ns: want %s, got %s", (long long)cases[i].v, cases[i].want,
               buf);
  }
}

static void test_fmt_field(void **state) {
  (void)state;
  ms_snapshot_t *s = calloc(1, sizeof *s);
  assert_non_null(s);
  char buf[64];
  s->heap_alloc = 1536;
  s->mallocs = 12345;
  s->gc_cpu_fraction = 0.08006426932027814;
  s->enable_gc = 1;
  s->pause_total_ns = 1030618;
  s->time_unix_ns = 10000000000;
  s->last_gc = 8500000000;
  assert_string_equal(mt_fmt_field(buf, sizeof buf, s, MS_F_HEAP_ALLOC), "-");
  for (int f = 0; f < MS_F__COUNT; f++)
    ms__set_quality(s, (ms_field_t)f, MS_Q_EXACT, 0);
  assert_string_equal(mt_fmt_field(buf, sizeof buf, s, MS_F_HEAP_ALLOC),
                      "1.5KiB");
  assert_string_equal(mt_fmt_field(buf, sizeof buf, s, MS_F_MALLOCS), "12345");
  assert_string_equal(mt_fmt_field(buf, sizeof buf, s, MS_F_GC_CPU_FRACTION),
                      "8.01%");
  assert_string_equal(mt_fmt_field(buf, sizeof buf, s, MS_F_ENABLE_GC), "yes");
  assert_string_equal(mt_fmt_field(buf, sizeof buf, s, MS_F_DEBUG_GC), "no");
  assert_string_equal(mt_fmt_field(buf, sizeof buf, s, MS_F_PAUSE_TOTAL_NS),
                      "1.0ms");
  assert_string_equal(mt_fmt_field(buf, sizeof buf, s, MS_F_LAST_GC),
                      "1.5s ago");
  assert_string_equal(mt_fmt_field(buf, sizeof buf, s, MS_F_BY_SIZE), "");
  s->last_gc = 0;
  assert_string_equal(mt_fmt_field(buf, sizeof buf, s, MS_F_LAST_GC), "never");
  ms__set_quality(s, MS_F_MALLOCS, MS_Q_ESTIMATED, 0);
  assert_string_equal(mt_fmt_field(buf, sizeof buf, s, MS_F_MALLOCS), "~12345");
  assert_string_equal(mt_fmt_field(buf, sizeof buf, s, MS_F__COUNT), "");
  free(s);
}

/* ------------------------------------------------------------------------
 * JSON strings
 * ------------------------------------------------------------------------ */

static void test_json_escaping(void **state) {
  (void)state;
  ms__strbuf_t out = MS_STRBUF_INIT;
  const char raw[] = "a\"b\\c\n\t\r\b\f\x01\x1f\x7f/\xc3\xa9\xff\xe2\x82";
  assert_int_equal(mt_json_string(&out, raw, sizeof raw - 1), 0);
  assert_string_equal(out.data,
                      "\"a\\\"b\\\\c\\n\\t\\r\\b\\f\\u0001\\u001f\\u007f/"
                      "\xc3\xa9\\ufffd\\ufffd\\ufffd\"");
  json_t *j = json_loads(out.data, JSON_DECODE_ANY, NULL);
  assert_non_null(j);
  assert_string_equal(json_string_value(j), "a\"b\\c\n\t\r\b\f\x01\x1f\x7f/"
                                            "\xc3\xa9\xef\xbf\xbd\xef\xbf\xbd"
                                            "\xef\xbf\xbd");
  json_decref(j);

  /* Overlong forms and surrogates are invalid UTF-8 too; a valid
   * four-byte sequence passes. */
  ms__strbuf_reset(&out);
  const char odd[] = "\xc0\xaf\xed\xa0\x80\xf0\x9f\x98\x80";
  mt_json_string(&out, odd, sizeof odd - 1);
  assert_string_equal(out.data, "\"\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd"
                                "\xf0\x9f\x98\x80\"");
  ms__strbuf_reset(&out);
  mt_json_string(&out, "", 0);
  assert_string_equal(out.data, "\"\"");

  /* A comm that fills the whole array, without a NUL, stops at its end. */
  ms_snapshot_t *s = calloc(1, sizeof *s);
  assert_non_null(s);
  memset(s->comm, 'x', sizeof s->comm);
  s->comm[0] = '"';
  ms__strbuf_reset(&out);
  assert_int_equal(mt_emit_json(&out, s), 0);
  j = json_loads(out.data, 0, NULL);
  assert_non_null(j);
  assert_int_equal(strlen(json_string_value(json_object_get(j, "comm"))),
                   MS_NAME_MAX);
  json_decref(j);
  free(s);
  ms__strbuf_free(&out);
}

/* ------------------------------------------------------------------------
 * A stranger's snapshot
 * ------------------------------------------------------------------------ */

static void check_hostile(const ms_snapshot_t *s) {
  ms__strbuf_t out = MS_STRBUF_INIT;
  size_t bad;

  /* The report: lines of safe text. */
  assert_int_equal(mt_emit_report(&out, s), 0);
  bad = terminal_unsafe_at(out.data, out.len, 1);
  if (bad != out.len)
    fail_msg("report: unsafe byte 0x%02x at %zu: %.40s",
             (unsigned char)out.data[bad], bad, out.data + bad);

  /* The ps line: one line, safe, the name cut whole to its column, and
   * every provider there (none overruns a buffer on the way). */
  ms__strbuf_reset(&out);
  assert_int_equal(mt_emit_ps_header(&out), 0);
  size_t header = out.len;
  assert_int_equal(mt_emit_ps_line(&out, s->pid, "root", s->comm, NULL, s), 0);
  assert_int_equal(mt_emit_ps_line(&out, s->pid, s->providers[1], s->comm,
                                   s->providers[2], NULL),
                   0);
  bad = terminal_unsafe_at(out.data, out.len, 1);
  if (bad != out.len)
    fail_msg("ps: unsafe byte 0x%02x at %zu: %.40s",
             (unsigned char)out.data[bad], bad, out.data + bad);
  const char *line = out.data + header;
  const char *nl = strchr(line, '\n');
  assert_non_null(nl);
  ms__strbuf_t last = MS_STRBUF_INIT;
  ms__strbuf_put_safe(&last, s->providers[s->nproviders - 1], MS_NAME_MAX);
  assert_non_null(strstr(line, last.data));
  assert_true(strstr(line, last.data) < nl);
  ms__strbuf_free(&last);
  /* PID, USER and COMM keep their columns: READY+PREPARED starts where
   * the header says. */
  assert_int_equal(line[7 + 1 + 10], ' ');
  assert_int_equal(line[7 + 1 + 10 + 1 + 16], ' ');
  assert_int_equal(line[7 + 1 + 10 + 1 + 16 + 1 + 12], ' ');
  assert_non_null(strstr(nl + 1, "(unreachable: see below)"));

  /* JSON: valid, every byte a terminal could act on escaped, and the
   * names the same strings to a reader (invalid UTF-8 aside). */
  ms__strbuf_reset(&out);
  assert_int_equal(mt_emit_json(&out, s), 0);
  assert_int_equal(terminal_unsafe_at(out.data, out.len, 0), out.len);
  json_error_t je;
  json_t *j = json_loads(out.data, 0, &je);
  if (j == NULL)
    fail_msg("JSON does not parse: %s", je.text);
  const char *comm = json_string_value(json_object_get(j, "comm"));
  assert_non_null(comm);
  assert_non_null(strstr(comm, "\xe2\x80\xae")); /* U+202E kept, escaped */
  assert_int_equal(json_array_size(json_object_get(j, "providers")),
                   s->nproviders);
  json_decref(j);
  ms__strbuf_free(&out);
}

static void test_hostile_snapshot(void **state) {
  (void)state;
  ms_snapshot_t *s = calloc(1, sizeof *s);
  ms_snapshot_t *d = calloc(1, sizeof *d);
  uint8_t *buf = malloc(MS__WIRE_SNAPSHOT_MAX);
  assert_non_null(s);
  assert_non_null(d);
  assert_non_null(buf);

  /* As made by hand: every byte as the stranger chose it. */
  hostile_snapshot(s, 4242);
  check_hostile(s);

  /* As decoded from the wire (what memtop really gets). */
  ms__wire_writer_t w;
  ms__wire_writer_init(&w, buf, MS__WIRE_SNAPSHOT_MAX);
  assert_int_equal(ms__wire_encode_snapshot(&w, s, NULL), 0);
  assert_int_equal(ms__wire_decode_snapshot(buf + MS__WIRE_HEADER,
                                            w.len - MS__WIRE_HEADER, d, NULL),
                   0);
  assert_int_equal(d->nproviders, MS_MAX_PROVIDERS);
  assert_int_equal(strlen(d->providers[MS_MAX_PROVIDERS - 1]), MS_NAME_MAX - 1);
  check_hostile(d);

  /* Names that fill their arrays without a NUL, and a provider count past
   * the array: the emitters stop at the arrays' ends. */
  memset(s->comm, 'c', sizeof s->comm);
  for (int i = 0; i < MS_MAX_PROVIDERS; i++)
    memset(s->providers[i], 0x9b, sizeof s->providers[i]);
  s->nproviders = 1000;
  ms__strbuf_t out = MS_STRBUF_INIT;
  assert_int_equal(mt_emit_report(&out, s), 0);
  assert_int_equal(terminal_unsafe_at(out.data, out.len, 1), out.len);
  ms__strbuf_reset(&out);
  assert_int_equal(mt_emit_ps_line(&out, 1, "u", "c", "k", s), 0);
  assert_int_equal(terminal_unsafe_at(out.data, out.len, 1), out.len);
  ms__strbuf_reset(&out);
  assert_int_equal(mt_emit_json(&out, s), 0);
  assert_int_equal(terminal_unsafe_at(out.data, out.len, 0), out.len);
  json_t *j = json_loads(out.data, 0, NULL);
  assert_non_null(j);
  json_decref(j);
  ms__strbuf_free(&out);
  free(buf);
  free(d);
  free(s);
}

static void test_json_escapes_controls(void **state) {
  (void)state;
  /* C1 controls, bidi controls and invisible characters as \uXXXX (past
   * the BMP as a surrogate pair): the same string to a reader. */
  const char raw[] = "\xc2\x9b\xe2\x80\xae\xe2\x81\xa6\xef\xbb\xbf"
                     "\xf3\xa0\x81\x81ok\xc3\xa9";
  ms__strbuf_t out = MS_STRBUF_INIT;
  assert_int_equal(mt_json_string(&out, raw, sizeof raw - 1), 0);
  assert_string_equal(out.data, "\"\\u009b\\u202e\\u2066\\ufeff"
                                "\\udb40\\udc41ok\xc3\xa9\"");
  json_t *j = json_loads(out.data, JSON_DECODE_ANY, NULL);
  assert_non_null(j);
  assert_string_equal(json_string_value(j), raw);
  json_decref(j);
  ms__strbuf_free(&out);
}

/* ------------------------------------------------------------------------
 * The field table and the small public functions
 * ------------------------------------------------------------------------ */

static void test_field_table(void **state) {
  (void)state;
  static const char *const go[] = {
      "Alloc",       "TotalAlloc", "Sys",          "Lookups",
      "Mallocs",     "Frees",      "HeapAlloc",    "HeapSys",
      "HeapIdle",    "HeapInuse",  "HeapReleased", "HeapObjects",
      "StackInuse",  "StackSys",   "MSpanInuse",   "MSpanSys",
      "MCacheInuse", "MCacheSys",  "BuckHashSys",  "GCSys",
      "OtherSys",    "NextGC",     "LastGC",       "PauseTotalNs",
      "PauseNs",     "NumGC",      "NumForcedGC",  "GCCPUFraction",
      "EnableGC",    "DebugGC",    "BySize"};
  size_t ngo = sizeof go / sizeof go[0];
  for (int f = 0; f < MS_F__COUNT; f++) {
    const ms__field_info_t *fi = &ms__fields[f];
    assert_int_equal(fi->id, f);
    assert_non_null(fi->go_name);
    assert_ptr_equal(ms_field_name((ms_field_t)f), fi->go_name);
    assert_int_equal(ms__field_by_go_name(fi->go_name), f);
    /* Go's fields first, in Go's order; ours after. */
    if ((size_t)f < ngo) {
      assert_string_equal(fi->go_name, go[f]);
      assert_int_equal(fi->in_go, MS__GO);
    } else {
      assert_true(fi->in_go != MS__GO);
    }
    /* Scalars have a type, compounds a unit saying so. */
    assert_true((fi->ctype == MS__CT_NONE) == (fi->unit == MS__UNIT_ARRAY));
    assert_true(fi->offset < sizeof(ms_snapshot_t));
    /* The kernel's figures, and only they, have a key in --json's
     * "kernel" object: lower case, one per figure. */
    int kernel = strncmp(fi->go_name, "Kernel", 6) == 0;
    assert_int_equal(fi->kernel_key != NULL, kernel);
    if (fi->kernel_key) {
      for (const char *c = fi->kernel_key; *c; c++)
        assert_true(*c >= 'a' && *c <= 'z');
      for (int g = 0; g < f; g++)
        if (ms__fields[g].kernel_key)
          assert_string_not_equal(ms__fields[g].kernel_key, fi->kernel_key);
    }
    /* Every field has a help line, and every figure a Prometheus name
     * but the two served under another name (Alloc is HeapAlloc,
     * PauseTotalNs the pause histogram's _sum) and DebugGC (Go's, unused,
     * never set). */
    assert_non_null(fi->help);
    if (fi->ctype != MS__CT_NONE && f != MS_F_ALLOC &&
        f != MS_F_PAUSE_TOTAL_NS && f != MS_F_DEBUG_GC)
      assert_non_null(fi->prom_name);
    if (fi->prom_name) {
      assert_true(strncmp(fi->prom_name, "memstats_", 9) == 0);
      for (int g = 0; g < f; g++)
        if (ms__fields[g].prom_name)
          assert_true(strcmp(ms__fields[g].prom_name, fi->prom_name) != 0);
      /* Prometheus conventions: bytes end in _bytes (or _bytes_total),
       * durations and times are in seconds. */
      size_t l = strlen(fi->prom_name);
      if (fi->unit == MS__UNIT_BYTES)
        assert_true(strstr(fi->prom_name, "_bytes") != NULL);
      if (fi->unit == MS__UNIT_NS || fi->unit == MS__UNIT_UNIX_NS)
        assert_true(strstr(fi->prom_name, "_seconds") != NULL);
      assert_true(l > 9);
      /* In OpenMetrics a counter's family drops "_total": that name must
       * not be another field's too. */
      if (l > 6 && strcmp(fi->prom_name + l - 6, "_total") == 0)
        for (int g = 0; g < MS_F__COUNT; g++)
          if (ms__fields[g].prom_name)
            assert_false(
                strlen(ms__fields[g].prom_name) == l - 6 &&
                strncmp(ms__fields[g].prom_name, fi->prom_name, l - 6) == 0);
    }
  }
  assert_string_equal(ms__fields[MS_F_KERNEL_ANON_RSS].kernel_key, "anonrss");
  assert_string_equal(ms__fields[MS_F_HEAP_ALLOC].prom_name,
                      "memstats_heap_alloc_bytes");
  assert_string_equal(ms__fields[MS_F_MALLOCS].prom_name,
                      "memstats_mallocs_total");
  assert_string_equal(ms__fields[MS_F_PAUSE_HIST].prom_name,
                      "memstats_gc_pause_seconds");
  assert_string_equal(ms__fields[MS_F_PYTHON_ARENA_SYS].prom_name,
                      "memstats_python_arena_bytes");
  assert_null(ms_field_name(MS_F__COUNT));
  assert_null(ms_field_name((ms_field_t)-1));
  assert_int_equal(ms__field_by_go_name("NoSuchField"), -1);
  assert_int_equal(ms__field_by_go_name(NULL), -1);

  /* Accessors read and write the right member at the right width. */
  ms_snapshot_t *s = calloc(1, sizeof *s);
  assert_non_null(s);
  ms__field_set_u64(s, MS_F_HEAP_RELEASED, 77);
  assert_int_equal(s->heap_released, 77);
  ms__field_set_u64(s, MS_F_NUM_GC, UINT64_MAX); /* saturates */
  assert_int_equal(s->num_gc, UINT32_MAX);
  assert_int_equal(s->num_forced_gc, 0);
  ms__field_set_u64(s, MS_F_ENABLE_GC, 1);
  assert_int_equal(s->enable_gc, 1);
  ms__field_set_double(s, MS_F_GC_CPU_FRACTION, 0.25);
  assert_true(s->gc_cpu_fraction == 0.25);
  assert_true(ms__field_double(s, MS_F_GC_CPU_FRACTION) == 0.25);
  assert_int_equal(ms__field_u64(s, MS_F_NUM_GC), UINT32_MAX);
  ms__field_set_double(s, MS_F_KERNEL_RSS, 4096.4);
  assert_int_equal(s->kernel_rss, 4096);
  ms__field_set_u64(s, MS_F_BY_SIZE, 5); /* compound: no-op */
  assert_int_equal(s->nsize_classes, 0);
  assert_int_equal(ms__field_u64(s, MS_F_BY_SIZE), 0);
  free(s);

  assert_string_equal(ms_quality_name(MS_Q_EXACT), "exact");
  assert_string_equal(ms_quality_name(MS_Q_ESTIMATED), "estimated");
  assert_string_equal(ms_quality_name(MS_Q_UNAVAILABLE), "unavailable");
  assert_string_equal(ms_quality_name((ms_quality_t)42), "unavailable");
}

static void test_strerror(void **state) {
  (void)state;
  static const int codes[] = {
      MS_EINVAL,       MS_ENOMEM,  MS_ENOENT, MS_EACCES,
      MS_EAGAIN,       MS_ENOSYS,  MS_EPROTO, MS_ETIMEDOUT,
      MS_ECONNREFUSED, MS_ESRCH,   MS_EEXIST, MS_ENOSPC,
      MS_EVERSION,     MS_EUNSAFE, MS_ESTALE, MS_EREFUSED};
  for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
    const char *m = ms_strerror(codes[i]);
    assert_non_null(m);
    assert_true(strlen(m) > 5);
    /* Each code has its own words. */
    for (size_t k = 0; k < i; k++)
      assert_true(strcmp(m, ms_strerror(codes[k])) != 0);
  }
  assert_string_equal(ms_strerror(0), "success");
  assert_non_null(strstr(ms_strerror(MS_EUNSAFE), "socket directory"));
  /* Other errno values, negated or not, get the system's words. */
  assert_string_equal(ms_strerror(-EPIPE), ms_strerror(EPIPE));
  assert_true(strlen(ms_strerror(-EPIPE)) > 0);
  /* Never NULL, whatever the value. */
  for (int e = -2000; e <= 2000; e++)
    assert_non_null(ms_strerror(e));
  assert_non_null(ms_strerror(INT32_MIN));
  assert_non_null(ms_strerror(INT32_MAX));
  assert_string_equal(ms_version_string(), MS_VERSION_STRING);
}

/* Who a process is (issue 21): JSON says its owner, its PID in its own
 * namespace, its container, pod and service; ps has a CONTAINER column
 * (the id's first 12, as docker ps shows); Prometheus labels container
 * and pod, only where known. */
static void test_who(void **state) {
  (void)state;
  ms_snapshot_t *s = malloc(sizeof *s);
  assert_non_null(s);
  make_glibc(s);
  msc_ident_t id;
  memset(&id, 0, sizeof id);
  id.uid = 65534;
  id.have_uid = 1;
  id.nspid = 1;
  id.ppid = 7;
  snprintf(id.container, sizeof id.container, "%s",
           "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
  snprintf(id.engine, sizeof id.engine, "containerd");
  snprintf(id.pod, sizeof id.pod, "5f2c0d0e-1b2a-4c3d-9e8f-0a1b2c3d4e5f");
  snprintf(id.unit, sizeof id.unit, "nginx.service");
  ms__strbuf_t out = MS_STRBUF_INIT;

  assert_int_equal(mt_emit_json_who(&out, s, &id, "nobody"), 0);
  json_error_t je;
  json_t *j = json_loads(out.data, 0, &je);
  if (j == NULL)
    fail_msg("JSON does not parse: %s", je.text);
  assert_string_equal(json_string_value(json_object_get(j, "user")), "nobody");
  assert_int_equal(json_integer_value(json_object_get(j, "uid")), 65534);
  assert_int_equal(json_integer_value(json_object_get(j, "ns_pid")), 1);
  assert_int_equal(json_integer_value(json_object_get(j, "ppid")), 7);
  assert_string_equal(json_string_value(json_object_get(j, "container")),
                      id.container);
  assert_string_equal(json_string_value(json_object_get(j, "engine")),
                      "containerd");
  assert_string_equal(json_string_value(json_object_get(j, "pod")), id.pod);
  assert_string_equal(json_string_value(json_object_get(j, "unit")),
                      "nginx.service");
  json_decref(j);
  /* Nothing known, nothing said; no id: mt_emit_json's object. */
  msc_ident_t none;
  memset(&none, 0, sizeof none);
  none.nspid = s->pid;
  ms__strbuf_reset(&out);
  assert_int_equal(mt_emit_json_who(&out, s, &none, NULL), 0);
  assert_null(strstr(out.data, "\"uid\""));
  assert_null(strstr(out.data, "ns_pid"));
  assert_null(strstr(out.data, "container"));
  ms__strbuf_t plain = MS_STRBUF_INIT;
  assert_int_equal(mt_emit_json(&plain, s), 0);
  assert_string_equal(out.data, plain.data);
  ms__strbuf_free(&plain);

  ms__strbuf_reset(&out);
  assert_int_equal(mt_emit_ps_header(&out), 0);
  assert_non_null(strstr(out.data, " CONTAINER "));
  assert_int_equal(
      mt_emit_ps_line(&out, s->pid, "nobody", "nginx", id.container, s), 0);
  assert_int_equal(mt_emit_ps_line(&out, s->pid, "root", "nginx", NULL, s), 0);
  assert_non_null(strstr(out.data, " nginx            0123456789ab "));
  assert_non_null(strstr(out.data, " nginx            -            "));

  mt_prom_target_t t[2];
  memset(t, 0, sizeof t);
  t[0].pid = s->pid;
  t[0].snap = s;
  t[0].container = id.container;
  t[0].pod = id.pod;
  t[1].pid = s->pid + 1;
  t[1].snap = s;
  ms__strbuf_reset(&out);
  assert_int_equal(mt_emit_prometheus(&out, 0, t, 2, "1.0"), 0);
  char want[256];
  snprintf(want, sizeof want,
           "memstats_heap_alloc_bytes{pid=\"%d\",comm=\"%s\",container=\"%s\","
           "pod=\"%s\"} ",
           (int)s->pid, s->comm, id.container, id.pod);
  if (strstr(out.data, want) == NULL)
    fail_msg("no %s in the exposition", want);
  snprintf(want, sizeof want,
           "memstats_heap_alloc_bytes{pid=\"%d\",comm=\"%s\"} ",
           (int)s->pid + 1, s->comm);
  assert_non_null(strstr(out.data, want));
  ms__strbuf_free(&out);
  free(s);
}

/* mt_fmt_utc gives strftime's "%Y-%m-%d %H:%M:%S UTC" of gmtime_r at
 * every second of the range a snapshot's time covers (1970 to 2554):
 * leap years, centuries and the ends included, and a stride across the
 * rest. And the figures written without printf (mt_fmt_iec,
 * mt_fmt_field's counts) are cut as snprintf cuts them. */
static void test_fmt_utc_and_cuts(void **state) {
  static const uint64_t at[] = {0,
                                86399,
                                86400,
                                951782400,  /* 2000-02-29 */
                                951868800,  /* 2000-03-01 */
                                4107542399, /* 2100-02-28 23:59:59 */
                                4107542400, /* 2100-03-01 */
                                UINT64_MAX / 1000000000u};
  char want[64], got[64], full[64], cut[64];
  struct tm tm;
  time_t t;

  (void)state;
  for (size_t i = 0; i < sizeof at / sizeof at[0] + 200000; i++) {
    uint64_t s = i < sizeof at / sizeof at[0]
                     ? at[i]
                     : (uint64_t)(i - sizeof at / sizeof at[0]) * 92233u + 7u;
    t = (time_t)s;
    assert_non_null(gmtime_r(&t, &tm));
    strftime(want, sizeof want, "%Y-%m-%d %H:%M:%S UTC", &tm);
    uint64_t ns = s * 1000000000u; /* and, at odd seconds, its last ns */
    if (s % 2 && ns <= UINT64_MAX - 999999999u)
      ns += 999999999u;
    mt_fmt_utc(got, sizeof got, ns);
    if (strcmp(want, got) != 0)
      fail_msg("%llu: want %s, got %s", (unsigned long long)s, want, got);
  }
  ms_snapshot_t *snap = calloc(1, sizeof *snap);
  assert_non_null(snap);
  snap->mallocs = 1234567;
  snap->quality[MS_F_MALLOCS] = MS_Q_ESTIMATED;
  mt_fmt_field(full, sizeof full, snap, MS_F_MALLOCS);
  assert_string_equal(full, "~1234567");
  for (size_t len = 1; len <= 10; len++) {
    memset(cut, 'z', sizeof cut);
    mt_fmt_field(cut, len, snap, MS_F_MALLOCS);
    assert_int_equal(strlen(cut), len - 1 < 8 ? len - 1 : 8);
    assert_memory_equal(cut, full, strlen(cut));
    assert_int_equal(cut[len], 'z'); /* never past len */
    memset(cut, 'z', sizeof cut);
    mt_fmt_iec(cut, len, -1536);
    assert_int_equal(cut[len], 'z');
    assert_int_equal(strncmp(cut, "-1.5KiB", len - 1), 0);
    assert_int_equal(strlen(cut), len - 1 < 7 ? len - 1 : 7);
  }
  free(snap);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fmt_utc_and_cuts),
      cmocka_unit_test(test_golden_lines),
      cmocka_unit_test(test_golden_reports),
      cmocka_unit_test(test_golden_json),
      cmocka_unit_test(test_golden_prometheus),
      cmocka_unit_test(test_prometheus_linters),
      cmocka_unit_test(test_prometheus_content),
      cmocka_unit_test(test_prometheus_options),
      cmocka_unit_test(test_json_parses_and_agrees),
      cmocka_unit_test(test_sys_is_the_sum_everywhere),
      cmocka_unit_test(test_report_marks),
      cmocka_unit_test(test_report_pause_max),
      cmocka_unit_test(test_iec),
      cmocka_unit_test(test_duration),
      cmocka_unit_test(test_fmt_field),
      cmocka_unit_test(test_json_escaping),
      cmocka_unit_test(test_json_escapes_controls),
      cmocka_unit_test(test_hostile_snapshot),
      cmocka_unit_test(test_field_table),
      cmocka_unit_test(test_strerror),
      cmocka_unit_test(test_who),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
