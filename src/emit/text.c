/*
 * text.c - the plain-text emitters: the seed program's one-line summary and
 * the --once report, laid out like `top -b`: a summary line first, then one
 * block per concern, every figure labelled with its Go field name (or, in
 * the Sys table, its class and column, which together spell the name) so
 * that it can be traced to a field and its quality.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/fields.h"
#include "emit/emit.h"

#define FIG 48 /* room for any one formatted figure */

static int finish(ms__strbuf_t *out) {
  return out->oom ? MS_ENOMEM : 0;
}

/* ------------------------------------------------------------------------
 * The one-line summary
 * ------------------------------------------------------------------------ */

int mt_emit_line(ms__strbuf_t *out, const ms_snapshot_t *s) {
  if (!out || !s)
    return MS_EINVAL;
  ms_breakdown_t b;
  ms_breakdown(s, &b);
  char total[FIG], ready[FIG], data[FIG], frag[FIG], idle[FIG], prep[FIG];
  ms_quality_t q_total = b.q_total;
  int64_t sum = b.total;
  ms__strbuf_printf(
      out,
      "Ready+Prepared=%s (Ready=%s (data:%s + fragOverhead:%s + idle:%s) ; "
      "Prepared=%s)",
      mt_fmt_bytes_q(total, sizeof total, sum, q_total),
      mt_fmt_bytes_q(ready, sizeof ready, b.ready, b.q_ready),
      mt_fmt_bytes_q(data, sizeof data, b.data, b.q_data),
      mt_fmt_bytes_q(frag, sizeof frag, b.frag_overhead, b.q_frag_overhead),
      mt_fmt_bytes_q(idle, sizeof idle, b.idle, b.q_idle),
      mt_fmt_bytes_q(prep, sizeof prep, b.prepared, b.q_prepared));
  return finish(out);
}

/* ------------------------------------------------------------------------
 * Report helpers
 * ------------------------------------------------------------------------ */

/* A block of label/value cells, three to a line, like top's summary area. */
typedef struct cell_s {
  const char *label;
  char value[FIG];
} cell_t;

#define CELLS_PER_LINE 3

/* n spaces. */
static void put_spaces(ms__strbuf_t *out, size_t n) {
  static const char sp[] = "                                ";
  while (n > 0) {
    size_t k = n < sizeof sp - 1 ? n : sizeof sp - 1;
    ms__strbuf_append(out, sp, k);
    n -= k;
  }
}

/* printf's "%*s" of s, and "%-*s" for a negative width, without printf:
 * the report's columns are most of its lines, and each printf costs a
 * thousand instructions (`memtop --once`). */
static void put_col(ms__strbuf_t *out, const char *s, int width) {
  size_t n = strlen(s), w = width < 0 ? (size_t)-width : (size_t)width;
  if (width > 0 && n < w)
    put_spaces(out, w - n);
  ms__strbuf_append(out, s, n);
  if (width < 0 && n < w)
    put_spaces(out, w - n);
}

static void put_cells(ms__strbuf_t *out, const cell_t *cells, size_t n) {
  for (size_t i = 0; i < n; i++) {
    int last = (i + 1) % CELLS_PER_LINE == 0 || i + 1 == n;
    /* "  %-13s %9s": two spaces indent the first cell and separate the
     * others. */
    put_spaces(out, 2);
    put_col(out, cells[i].label, -13);
    put_spaces(out, 1);
    put_col(out, cells[i].value, 9);
    if (last)
      ms__strbuf_append(out, "\n", 1);
  }
}

static void field_cell(cell_t *c, const ms_snapshot_t *s, ms_field_t f) {
  c->label = ms__fields[f].go_name;
  mt_fmt_field(c->value, sizeof c->value, s, f);
}

/* Appends words, wrapping before column 78 with a hanging indent. */
typedef struct wrap_s {
  ms__strbuf_t *out;
  size_t col;
  size_t indent;
} wrap_t;

static void wrap_word(wrap_t *w, const char *mark, const char *word) {
  size_t n = strlen(mark) + strlen(word);
  if (w->col > w->indent && w->col + 1 + n > 78) {
    ms__strbuf_append(w->out, "\n", 1);
    put_spaces(w->out, w->indent);
    w->col = w->indent;
  }
  if (w->col > w->indent) {
    ms__strbuf_append(w->out, " ", 1);
    w->col++;
  }
  ms__strbuf_puts(w->out, mark);
  ms__strbuf_puts(w->out, word);
  w->col += n;
}

/* ------------------------------------------------------------------------
 * Report sections
 * ------------------------------------------------------------------------ */

static void put_identity(ms__strbuf_t *out, const ms_snapshot_t *s) {
  char when[40] = "-";
  if (s->time_unix_ns)
    mt_fmt_utc(when, sizeof when, s->time_unix_ns);
  char age[FIG];
  mt_fmt_duration(age, sizeof age,
                  s->age_ns > INT64_MAX ? INT64_MAX : (int64_t)s->age_ns);
  ms__strbuf_printf(out,
                    "  snapshot %" PRIu64 " taken %s, age %s, libmemstats "
                    "%u.%u.%u\n",
                    s->seq, when, age, (unsigned)(s->lib_version >> 16) & 0xffu,
                    (unsigned)(s->lib_version >> 8) & 0xffu,
                    (unsigned)s->lib_version & 0xffu);
}

/* Sys by class: each row is a class, its columns the class's *Sys, *Inuse
 * and unbacked (*Released) fields and its share of Sys. The Released
 * column adds up to Prepared, shown on the total's row. */
static void put_sys(ms__strbuf_t *out, const ms_snapshot_t *s,
                    const ms_breakdown_t *b) {
  enum { NONE = -1, MSPAN_REST = -2 };
  static const struct {
    const char *name;
    ms_field_t sys;
    int inuse;    /* an ms_field_t, or NONE: the whole class is in use */
    int released; /* an ms_field_t, NONE, or MSPAN_REST */
  } rows[] = {
      {"Heap", MS_F_HEAP_SYS, MS_F_HEAP_INUSE, MS_F_HEAP_RELEASED},
      {"Stack", MS_F_STACK_SYS, MS_F_STACK_INUSE, MS_F_STACK_RELEASED},
      {"MSpan", MS_F_MSPAN_SYS, MS_F_MSPAN_INUSE, MSPAN_REST},
      {"MCache", MS_F_MCACHE_SYS, MS_F_MCACHE_INUSE, NONE},
      {"BuckHash", MS_F_BUCK_HASH_SYS, NONE, NONE},
      {"GC", MS_F_GC_SYS, NONE, NONE},
      {"Other", MS_F_OTHER_SYS, NONE, MS_F_OTHER_RELEASED},
  };
  /* A snapshot of 0.2 as it first shipped (an older target's) keeps
   * OffHeapReleased outside its classes, a row of its own. */
  int ohr_row = mt_off_heap_outside(s);
  ms__strbuf_printf(out, "Sys by class  %10s %10s %10s %7s\n", "Sys", "Inuse",
                    "Released", "of Sys");
  ms_quality_t q_sys = ms__field_quality(s, MS_F_SYS);
  uint64_t sum = 0;
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    char sys[FIG], inuse[FIG] = "", rel[FIG] = "", share[FIG] = "-";
    mt_fmt_field(sys, sizeof sys, s, rows[i].sys);
    if (rows[i].inuse >= 0)
      mt_fmt_field(inuse, sizeof inuse, s, (ms_field_t)rows[i].inuse);
    if (rows[i].released == MS_F_HEAP_RELEASED ||
        (rows[i].released >= 0 && !ohr_row)) {
      mt_fmt_field(rel, sizeof rel, s, (ms_field_t)rows[i].released);
    } else if (rows[i].released == MSPAN_REST && !ohr_row) {
      uint64_t v = 0;
      ms_quality_t q = mt_mspan_released(s, &v);
      if (q != MS_Q_UNAVAILABLE || ms__field_known(s, MS_F_MSPAN_SYS))
        mt_fmt_bytes_q(rel, sizeof rel, v > INT64_MAX ? INT64_MAX : (int64_t)v,
                       q);
    }
    uint64_t v = ms__field_u64(s, rows[i].sys);
    sum += v;
    ms_quality_t q =
        ms__quality_worst(q_sys, ms__field_quality(s, rows[i].sys));
    if (q != MS_Q_UNAVAILABLE && s->sys > 0) {
      /* Tenths of a percent in integers: exact and locale-free. */
      unsigned __int128 permille =
          ((unsigned __int128)v * 1000u + s->sys / 2) / s->sys;
      snprintf(share, sizeof share, "%s%u.%u%%", mt_quality_mark(q),
               (unsigned)(permille / 10), (unsigned)(permille % 10));
    }
    /* "  %-11s %10s %10s %10s %7s\n" */
    put_spaces(out, 2);
    put_col(out, rows[i].name, -11);
    put_spaces(out, 1);
    put_col(out, sys, 10);
    put_spaces(out, 1);
    put_col(out, inuse, 10);
    put_spaces(out, 1);
    put_col(out, rel, 10);
    put_spaces(out, 1);
    put_col(out, share, 7);
    ms__strbuf_append(out, "\n", 1);
  }
  if (ohr_row) {
    char v[FIG];
    sum += s->off_heap_released;
    ms__strbuf_printf(out, "  %-11s %10s\n", "OffHeapRel",
                      mt_fmt_field(v, sizeof v, s, MS_F_OFF_HEAP_RELEASED));
  }
  char total[FIG], prep[FIG];
  ms__strbuf_printf(
      out, "  %-11s %10s %10s %10s\n", "total",
      mt_fmt_field(total, sizeof total, s, MS_F_SYS), "",
      mt_fmt_bytes_q(prep, sizeof prep, b->prepared, b->q_prepared));
  /* Beyond Go: what libmemstats itself holds, apart from the classes (its
   * profile table excepted: BuckHashSys). */
  if (ms__field_known(s, MS_F_MEMSTATS_SELF)) {
    char res[FIG], mapped[FIG];
    ms__strbuf_printf(
        out,
        "  libmemstats itself %s resident, %s mapped (in no class but "
        "BuckHash)\n",
        mt_fmt_field(res, sizeof res, s, MS_F_MEMSTATS_SELF),
        mt_fmt_field(mapped, sizeof mapped, s, MS_F_MEMSTATS_SELF_SYS));
  }
  /* Beyond Go: Python's object allocator, a heap of its own inside
   * OtherSys. */
  if (ms__field_known(s, MS_F_PYTHON_ARENAS)) {
    char n[FIG], mapped[FIG], res[FIG];
    ms__strbuf_printf(
        out, "  python arenas %s: %s mapped, %s resident (in OtherSys)\n",
        mt_fmt_field(n, sizeof n, s, MS_F_PYTHON_ARENAS),
        mt_fmt_field(mapped, sizeof mapped, s, MS_F_PYTHON_ARENA_SYS),
        mt_fmt_field(res, sizeof res, s, MS_F_PYTHON_ARENA_RESIDENT));
    /* ... of which pools in use and allocated blocks, as the pool headers
     * say (data has the blocks, fragOverhead the rest of those pools). */
    if (ms__field_known(s, MS_F_PYTHON_ARENA_INUSE)) {
      char inuse[FIG], alloc[FIG];
      ms__strbuf_printf(
          out, "  python pools in use %s, allocated blocks %s\n",
          mt_fmt_field(inuse, sizeof inuse, s, MS_F_PYTHON_ARENA_INUSE),
          mt_fmt_field(alloc, sizeof alloc, s, MS_F_PYTHON_ARENA_ALLOC));
    }
  }
  if (b->sys_mismatch) {
    /* In bytes: a difference of a page hides in one-decimal IEC figures. */
    char diff[FIG];
    uint64_t d = s->sys > sum ? s->sys - sum : sum - s->sys;
    ms__strbuf_printf(
        out,
        "  warning: Sys %" PRIu64 " != sum of the classes %" PRIu64
        " (%s %s): the provider breaks Sys == sum(*Sys)\n",
        s->sys, sum,
        mt_fmt_iec(diff, sizeof diff, d > INT64_MAX ? INT64_MAX : (int64_t)d),
        s->sys > sum ? "more" : "less");
  }
}

static void put_heap(ms__strbuf_t *out, const ms_snapshot_t *s) {
  static const ms_field_t fields[] = {
      MS_F_HEAP_ALLOC,   MS_F_HEAP_INUSE, MS_F_HEAP_IDLE, MS_F_HEAP_RELEASED,
      MS_F_HEAP_OBJECTS, MS_F_MALLOCS,    MS_F_FREES,     MS_F_TOTAL_ALLOC,
  };
  cell_t cells[sizeof fields / sizeof fields[0]];
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
    field_cell(&cells[i], s, fields[i]);
  ms__strbuf_puts(out, "Heap\n");
  put_cells(out, cells, sizeof fields / sizeof fields[0]);
}

static void pause_cell(cell_t *c, const char *label, int64_t v,
                       ms_quality_t q) {
  c->label = label;
  snprintf(c->value, sizeof c->value, "-");
  if (v < 0 || q == MS_Q_UNAVAILABLE)
    return; /* no pause recorded yet, or no figures */
  char d[FIG];
  /* A quantile of the histogram is a bucket's upper edge: a bound, not a
   * measurement, but an honest one (within 25%), so it is marked only if
   * the histogram itself is an estimate; the maximum is the ring's exact
   * one while the ring holds every pause (mt_pauses). */
  snprintf(c->value, sizeof c->value, "%s%s", mt_quality_mark(q),
           mt_fmt_duration(d, sizeof d, v));
}

static void put_gc(ms__strbuf_t *out, const ms_snapshot_t *s) {
  ms__strbuf_puts(out, "GC\n");
  if (ms__field_quality(s, MS_F_ENABLE_GC) == MS_Q_UNAVAILABLE ||
      !s->enable_gc) {
    ms__strbuf_puts(out, "  no collector\n");
    return;
  }
  cell_t cells[9];
  field_cell(&cells[0], s, MS_F_NUM_GC);
  field_cell(&cells[1], s, MS_F_NUM_FORCED_GC);
  field_cell(&cells[2], s, MS_F_LAST_GC);
  field_cell(&cells[3], s, MS_F_PAUSE_TOTAL_NS);
  mt_pauses_t p;
  mt_pauses(s, &p);
  pause_cell(&cells[4], "pause p50", p.p50, p.q_p50);
  pause_cell(&cells[5], "pause p99", p.p99, p.q_p99);
  pause_cell(&cells[6], "pause max", p.max, p.q_max);
  field_cell(&cells[7], s, MS_F_GC_CPU_FRACTION);
  field_cell(&cells[8], s, MS_F_NEXT_GC);
  put_cells(out, cells, 9);
}

typedef struct live_class_s {
  uint32_t idx;
  uint64_t objects;
  uint64_t bytes;
} live_class_t;

static int by_live_bytes(const void *pa, const void *pb) {
  const live_class_t *a = pa, *b = pb;
  if (a->bytes != b->bytes)
    return a->bytes < b->bytes ? 1 : -1;
  /* Equal bytes: smaller classes first, so the order is total. */
  return a->idx < b->idx ? -1 : a->idx > b->idx;
}

static void put_classes(ms__strbuf_t *out, const ms_snapshot_t *s) {
  ms_quality_t q = ms__field_quality(s, MS_F_BY_SIZE);
  if (q == MS_Q_UNAVAILABLE) {
    ms__strbuf_puts(out, "Size classes: -\n");
    return;
  }
  uint32_t n = s->nsize_classes;
  if (n > MS_MAX_SIZE_CLASSES)
    n = MS_MAX_SIZE_CLASSES;
  live_class_t live[MS_MAX_SIZE_CLASSES];
  uint32_t nlive = 0;
  for (uint32_t i = 0; i < n; i++) {
    const ms_size_class_t *c = &s->by_size[i];
    if (c->mallocs <= c->frees)
      continue;
    live[nlive].idx = i;
    live[nlive].objects = c->mallocs - c->frees;
    unsigned __int128 bytes = (unsigned __int128)live[nlive].objects * c->size;
    live[nlive].bytes = bytes > UINT64_MAX ? UINT64_MAX : (uint64_t)bytes;
    nlive++;
  }
  if (nlive > 1)
    qsort(live, nlive, sizeof live[0], by_live_bytes);
  const char *m = mt_quality_mark(q);
  ms__strbuf_printf(out,
                    "Size classes: %" PRIu32 " of %" PRIu32
                    " with live objects, by live bytes%s\n",
                    nlive, n, q == MS_Q_ESTIMATED ? " (estimated)" : "");
  if (nlive == 0)
    return;
  ms__strbuf_printf(out, "  %10s %12s %10s %14s %14s\n", "Size", "LiveObjs",
                    "LiveBytes", "Mallocs", "Frees");
  for (uint32_t i = 0; i < nlive; i++) {
    const ms_size_class_t *c = &s->by_size[live[i].idx];
    char objs[FIG], bytes[FIG], iec[FIG], mallocs[FIG], frees[FIG];
    snprintf(objs, sizeof objs, "%s%" PRIu64, m, live[i].objects);
    snprintf(bytes, sizeof bytes, "%s%s", m,
             mt_fmt_iec(iec, sizeof iec,
                        live[i].bytes > INT64_MAX ? INT64_MAX
                                                  : (int64_t)live[i].bytes));
    snprintf(mallocs, sizeof mallocs, "%s%" PRIu64, m, c->mallocs);
    snprintf(frees, sizeof frees, "%s%" PRIu64, m, c->frees);
    ms__strbuf_printf(out, "  %10" PRIu64 " %12s %10s %14s %14s\n", c->size,
                      objs, bytes, mallocs, frees);
  }
}

/* The kernel's view: RSS and VSZ always (a "-" says they were not read),
 * the smaps_rollup figures only when they were asked for. */
static void put_kernel(ms__strbuf_t *out, const ms_snapshot_t *s) {
  static const ms_field_t fields[] = {
      MS_F_KERNEL_RSS,       MS_F_KERNEL_VSZ,      MS_F_KERNEL_LAZYFREE,
      MS_F_KERNEL_ANON_HUGE, MS_F_KERNEL_SWAP,     MS_F_KERNEL_ANON_RSS,
      MS_F_KERNEL_RSS_FILE,  MS_F_KERNEL_RSS_SHMEM};
  cell_t cells[sizeof fields / sizeof fields[0]];
  size_t n = 0;
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
    if (i >= 2 && ms__field_quality(s, fields[i]) == MS_Q_UNAVAILABLE)
      continue;
    field_cell(&cells[n], s, fields[i]);
    /* "KernelRSS" reads "RSS" under the "Kernel" title. */
    if (strncmp(cells[n].label, "Kernel", 6) == 0)
      cells[n].label += 6;
    n++;
  }
  ms__strbuf_puts(out, "Kernel\n");
  put_cells(out, cells, n);
}

/* What is resident beside the anonymous RSS, and so in no class: the
 * shared memory (RssShmem), the shared anonymous mappings the program
 * made (their pages in memory are counted whichever process touched them,
 * as mincore sees them, so they may exceed this process's RssShmem), and
 * the file-backed memory (RssFile). */
static void put_shared(ms__strbuf_t *out, const ms_snapshot_t *s) {
  if (!ms__field_known(s, MS_F_KERNEL_RSS_SHMEM) &&
      !ms__field_known(s, MS_F_SHARED_ANON))
    return;
  char shmem[FIG], file[FIG], mine[FIG], mapped[FIG];
  ms__strbuf_printf(
      out, "  and outside it: shared %s",
      mt_fmt_field(shmem, sizeof shmem, s, MS_F_KERNEL_RSS_SHMEM));
  if (ms__field_known(s, MS_F_SHARED_ANON) && s->shared_anon > 0)
    ms__strbuf_printf(
        out,
        " (the program's own shared anonymous mappings: %s mapped, %s of "
        "them in memory, touched by this process or another)",
        mt_fmt_field(mapped, sizeof mapped, s, MS_F_SHARED_ANON),
        mt_fmt_field(mine, sizeof mine, s, MS_F_SHARED_ANON_RESIDENT));
  ms__strbuf_printf(out, ", file-backed %s\n",
                    mt_fmt_field(file, sizeof file, s, MS_F_KERNEL_RSS_FILE));
}

/* What the classes account for against the kernel's anonymous RSS: Ready
 * (the backed part of Sys) should be all of it, so a gap is said. */
static void put_accounted(ms__strbuf_t *out, const ms_snapshot_t *s,
                          const ms_breakdown_t *b) {
  if (ms__field_quality(s, MS_F_KERNEL_ANON_RSS) == MS_Q_UNAVAILABLE ||
      b->q_ready == MS_Q_UNAVAILABLE || s->kernel_anon_rss == 0)
    return;
  char ready[FIG], anon[FIG], gap[FIG];
  int64_t a =
      s->kernel_anon_rss > INT64_MAX ? INT64_MAX : (int64_t)s->kernel_anon_rss;
  int64_t d = a - b->ready;
  const char *m = mt_quality_mark(b->q_ready);
  unsigned __int128 permille =
      ((unsigned __int128)(b->ready > 0 ? (uint64_t)b->ready : 0) * 1000u +
       (uint64_t)a / 2) /
      (uint64_t)a;
  ms__strbuf_printf(out,
                    "Accounted: Ready %s%s of anonymous RSS %s (%s%u.%u%%)", m,
                    mt_fmt_iec(ready, sizeof ready, b->ready),
                    mt_fmt_iec(anon, sizeof anon, a), m,
                    (unsigned)(permille / 10), (unsigned)(permille % 10));
  /* libmemstats's own resident memory outside the classes is part of the
   * gap: said apart, so that what is left is the program's. It is
   * MemstatsSelf less BuckHashSys (in a class), at most the gap: worded
   * so as not to read as a second MemstatsSelf. */
  int64_t self = mt_self_outside(s);
  if (d >= 0 && self > 0) {
    char own[FIG];
    if (self > d)
      self = d;
    d -= self;
    ms__strbuf_printf(
        out, "; of the rest, libmemstats itself outside the classes %s%s",
        mt_quality_mark(ms__field_quality(s, MS_F_MEMSTATS_SELF)),
        mt_fmt_iec(own, sizeof own, self));
  }
  if (d >= 0)
    ms__strbuf_printf(out,
                      "; %s%s in no class (program and library data, "
                      "mappings made without mmap)\n",
                      m, mt_fmt_iec(gap, sizeof gap, d));
  else
    ms__strbuf_printf(out,
                      "; %s%s counted as backed that the kernel does "
                      "not hold\n",
                      m, mt_fmt_iec(gap, sizeof gap, -d));
  put_shared(out, s);
}

/* Which provider gave which field: the trace from a figure to its source. */
static void put_providers(ms__strbuf_t *out, const ms_snapshot_t *s) {
  uint32_t np = s->nproviders;
  if (np > MS_MAX_PROVIDERS)
    np = MS_MAX_PROVIDERS;
  ms__strbuf_puts(out, "Providers (~ estimated)\n");
  /* Provider i for i < np; then np stands for the library's own engine
   * (fields with no provider index), then the unavailable ones. */
  for (uint32_t p = 0; p <= np + 1; p++) {
    wrap_t w = {out, 0, 0};
    int any = 0;
    for (int f = 0; f < MS_F__COUNT; f++) {
      ms_quality_t q = ms__field_quality(s, (ms_field_t)f);
      int src = s->source[f];
      int mine;
      if (p == np + 1)
        mine = q == MS_Q_UNAVAILABLE;
      else if (q == MS_Q_UNAVAILABLE)
        mine = 0;
      else if (p == np)
        mine = src >= (int)np;
      else
        mine = src == (int)p;
      if (!mine)
        continue;
      if (!any) {
        /* A provider's name comes from the target: made safe. */
        const char *name = p < np    ? s->providers[p]
                           : p == np ? "libmemstats"
                                     : "unavailable";
        ms__strbuf_puts(out, "  ");
        w.indent = 15;
        w.col =
            2 + ms__strbuf_put_safe_col(out, name, MS_NAME_MAX, 12, (size_t)-1);
        any = 1;
      }
      wrap_word(&w, mt_quality_mark(q), ms__fields[f].go_name);
    }
    if (any)
      ms__strbuf_puts(out, "\n");
  }
}

/* ------------------------------------------------------------------------
 * memtop ps
 * ------------------------------------------------------------------------ */

/* Column widths of the table: the fixed ones as `ps` has them. */
#define PS_USER 10
#define PS_COMM 16
#define PS_CONTAINER 12 /* a container id's first 12, as docker ps shows */

int mt_emit_ps_header(ms__strbuf_t *out) {
  if (!out)
    return MS_EINVAL;
  ms__strbuf_printf(out, "%7s %-*s %-*s %-*s %14s  %s\n", "PID", PS_USER,
                    "USER", PS_COMM, "COMM", PS_CONTAINER, "CONTAINER",
                    "READY+PREPARED", "PROVIDERS");
  return finish(out);
}

int mt_emit_ps_line(ms__strbuf_t *out, int32_t pid, const char *user,
                    const char *comm, const char *container,
                    const ms_snapshot_t *s) {
  if (!out || !user || !comm)
    return MS_EINVAL;
  /* Every piece goes into the string buffer, which grows as needed: no
   * fixed buffer for a stranger's names to run past. */
  ms__strbuf_printf(out, "%7" PRId32 " ", pid);
  ms__strbuf_put_safe_col(out, user, MS_NAME_MAX, PS_USER, PS_USER);
  ms__strbuf_puts(out, " ");
  ms__strbuf_put_safe_col(out, comm, MS_NAME_MAX, PS_COMM, PS_COMM);
  ms__strbuf_puts(out, " ");
  ms__strbuf_put_safe_col(out,
                          container != NULL && container[0] ? container : "-",
                          MS_NAME_MAX, PS_CONTAINER, PS_CONTAINER);
  if (s == NULL) {
    ms__strbuf_printf(out, " %14s  %s\n", "?", "(unreachable: see below)");
    return finish(out);
  }
  ms_breakdown_t b;
  char rp[FIG];
  ms_breakdown(s, &b);
  ms__strbuf_printf(out, " %14s  ",
                    mt_fmt_bytes_q(rp, sizeof rp, b.total, b.q_total));
  uint32_t np =
      s->nproviders > MS_MAX_PROVIDERS ? MS_MAX_PROVIDERS : s->nproviders;
  for (uint32_t k = 0; k < np; k++) {
    if (k)
      ms__strbuf_puts(out, ",");
    ms__strbuf_put_safe(out, s->providers[k], MS_NAME_MAX);
  }
  if (np == 0)
    ms__strbuf_puts(out, "-");
  ms__strbuf_puts(out, "\n");
  return finish(out);
}

int mt_emit_report(ms__strbuf_t *out, const ms_snapshot_t *s) {
  if (!out || !s)
    return MS_EINVAL;
  ms_breakdown_t b;
  ms_breakdown(s, &b);
  ms__strbuf_printf(out, "%" PRId32 " ", s->pid);
  ms__strbuf_put_safe(out, s->comm, sizeof s->comm);
  ms__strbuf_puts(out, ": ");
  mt_emit_line(out, s);
  ms__strbuf_puts(out, "\n");
  put_identity(out, s);
  put_sys(out, s, &b);
  put_heap(out, s);
  put_gc(out, s);
  put_classes(out, s);
  put_kernel(out, s);
  put_accounted(out, s, &b);
  put_providers(out, s);
  return finish(out);
}
