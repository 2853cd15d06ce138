/*
 * view_detail.c - one process: the Ready+Prepared bar split into data /
 * fragOverhead / idle / Prepared, Sys by class, the heap and its rates, the
 * collector's pauses, a trend of the breakdown over time and the size
 * classes by live bytes.
 *
 * The screen is a stack of sections. Each has a height and a priority;
 * when the terminal is too small the least important sections are left out
 * whole (a half-drawn table helps nobody), and the rest keep their order.
 * Every figure comes from the model and is labelled with the Go field it
 * shows, "~" before an estimate and "-" when the provider does not have it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fields.h"
#include "emit/emit.h"
#include "memstats.h"
#include "tui/draw.h"
#include "tui/view_detail.h"

#define TWO_COLUMN_MIN 72 /* narrower screens stack every section */
#define TREND_MIN 4       /* a heading and three rows of chart */

/* Figures come from a stranger: sums saturate instead of overflowing, and
 * a rate too big for an int64 is shown as the biggest one. */
static int64_t pos(int64_t v) {
  return v > 0 ? v : 0;
}

static int64_t sat_add(int64_t a, int64_t b) {
  a = pos(a);
  b = pos(b);
  return a > INT64_MAX - b ? INT64_MAX : a + b;
}

static int64_t rate_i64(double v) {
  if (!(v < 9.2e18)) /* NaN too */
    return INT64_MAX;
  return v > 0 ? (int64_t)(v + 0.5) : 0;
}

static const mt_style_t part_style[4] = {MT_ST_DATA, MT_ST_FRAG, MT_ST_IDLE,
                                         MT_ST_PREPARED};

/* ================================================= figure formatting === */

/* A byte field of the snapshot as the view shows it, read through the
 * field table (no field is named twice). */
static char *field_bytes(char *buf, size_t len, const ms_snapshot_t *s,
                         ms_field_t f) {
  return mt_draw_fmt_bytes(buf, len, (int64_t)ms__field_u64(s, f),
                           ms__field_quality(s, f), 0);
}

/* A figure as shown: "-" when the provider does not have it (or the
 * model has not computed it yet), "~" before an estimate. */
static char *marked(char *buf, size_t len, int have, ms_quality_t q,
                    const char *fig) {
  if (q == MS_Q_UNAVAILABLE || !have)
    snprintf(buf, len, "-");
  else
    snprintf(buf, len, "%s%s", mt_quality_mark(q), fig);
  return buf;
}

static char *quality_count(char *buf, size_t len, double v, ms_quality_t q) {
  char num[24];
  mt_draw_fmt_count(num, sizeof num, v);
  return marked(buf, len, v >= 0, q, num);
}

static char *quality_dur(char *buf, size_t len, int64_t ns, ms_quality_t q) {
  char d[24];
  mt_fmt_duration(d, sizeof d, ns < 0 ? 0 : ns);
  return marked(buf, len, ns >= 0, q, d);
}

/* A label at `col` and its value right-aligned to end at col + width. */
static void label_value(mt_grid_t *g, int row, int col, int width,
                        const char *label, const char *value, mt_style_t vst) {
  mt_grid_puts(g, row, col, label, width, MT_ST_DIM);
  int n = (int)strlen(value);
  int at = col + width - n;
  int min = col + (int)strlen(label) + 1;
  if (at < min)
    at = min;
  mt_grid_puts(g, row, at, value, -1, vst);
}

/* Puts "label value" pieces one after another from `col` on a row, two
 * blanks apart, leaving out whole pieces that would not fit. Returns the
 * column after the last piece. */
typedef struct piece_s {
  const char *label;
  const char *value;
  mt_style_t st;
} piece_t;

static int put_pieces(mt_grid_t *g, int row, int col, int end, const piece_t *p,
                      int n) {
  int first = 1;
  for (int i = 0; i < n; i++) {
    int need = (int)strlen(p[i].label) + (p[i].label[0] ? 1 : 0) +
               (int)strlen(p[i].value) + (first ? 0 : 2);
    if (col + need > end)
      continue;
    if (!first)
      col += 2;
    first = 0;
    if (p[i].label[0]) {
      col += mt_grid_puts(g, row, col, p[i].label, -1, MT_ST_DIM);
      col++;
    }
    col += mt_grid_puts(g, row, col, p[i].value, -1, p[i].st);
  }
  return col;
}

/* ============================================================ the bar === */

static void bar_parts(const ms_breakdown_t *bd, int64_t v[4],
                      ms_quality_t q[4]) {
  v[0] = bd->data;
  v[1] = bd->frag_overhead;
  v[2] = bd->idle;
  v[3] = bd->prepared;
  q[0] = bd->q_data;
  q[1] = bd->q_frag_overhead;
  q[2] = bd->q_idle;
  q[3] = bd->q_prepared;
}

static const char *const part_name[4] = {"data", "fragOverhead", "idle",
                                         "Prepared"};

/* What of Ready the bar draws as '?': when a part of Ready is unavailable
 * but Ready is known, what the known parts do not explain (0 when none
 * is). *q is its quality: estimated when Ready or a known part is. */
static int64_t unknown_part(const ms_breakdown_t *bd, const int64_t v[4],
                            const ms_quality_t pq[4], ms_quality_t *q) {
  int64_t known = 0;
  int some = 0;

  *q = bd->q_ready;
  for (int i = 0; i < 3; i++) {
    if (pq[i] == MS_Q_UNAVAILABLE) {
      some = 1;
      continue;
    }
    known = sat_add(known, v[i]);
    if (pq[i] == MS_Q_ESTIMATED)
      *q = MS_Q_ESTIMATED;
  }
  if (!some || bd->q_ready == MS_Q_UNAVAILABLE)
    return 0;
  return bd->ready > known ? bd->ready - known : 0;
}

/* Lays the legend out from `row` (draws only when draw is set); returns the
 * rows it takes. */
static int legend(const mt_model_t *m, const ms_breakdown_t *bd, mt_grid_t *g,
                  int row, int cols, int draw) {
  int64_t v[4];
  ms_quality_t q[4];
  int col = 0, lines = 1;
  bar_parts(bd, v, q);
  /* The bar's '?' cells: what the parts shown as - hold together (the
   * help says so), last and short, as "? 15.7MiB", where the last line
   * has room for it (a line more would push a section off a small
   * screen). */
  ms_quality_t uq;
  int64_t unknown = unknown_part(bd, v, q, &uq);
  for (int i = 0; i < 5; i++) {
    char fig[32];
    if (i == 4 && unknown <= 0)
      break;
    mt_draw_fmt_bytes(fig, sizeof fig, i < 4 ? v[i] : unknown,
                      i < 4 ? q[i] : uq, 0);
    int need = i < 4 ? 2 + (int)strlen(part_name[i]) + 1 + (int)strlen(fig)
                     : 2 + (int)strlen(fig);
    int gap = col > 0 ? 2 : 0;
    if (col > 0 && col + gap + need > cols) {
      if (i == 4)
        break;
      lines++;
      col = 0;
      gap = 0;
    }
    col += gap;
    if (draw && i == 4) {
      int r = row + lines - 1;
      mt_grid_putc(g, r, col, '?', MT_ST_DIM);
      mt_grid_puts(g, r, col + 2, fig, -1, MT_ST_NORMAL);
    } else if (draw) {
      int r = row + lines - 1;
      mt_grid_putc(g, r, col, mt_draw_fill(i, m->utf8), part_style[i]);
      mt_grid_printf(g, r, col + 2, MT_ST_NORMAL, "%s", part_name[i]);
      mt_grid_puts(g, r, col + 3 + (int)strlen(part_name[i]), fig, -1,
                   part_style[i]);
    }
    col += need;
  }
  return lines;
}

static int bar_height(const mt_model_t *m, const mt_target_t *t, int cols) {
  return 2 + legend(m, &t->bd, NULL, 0, cols, 0);
}

/* How much of the kernel's anonymous RSS Ready accounts for, and the gap
 * in bytes, said for what it is: memory in no class (under 100%), or
 * classes counting more than is resident (over). It is drawn as an error
 * only when the gap is large in both ways, so that a small program (a few
 * MiB of libc, loader and stacks on 2 MiB of heap reads 40%) does not cry
 * wolf. */
#define GAP_WARN_BYTES (16 << 20)
#define GAP_WARN_PCT 5.0

static piece_t accounted_piece(const ms_breakdown_t *bd, const ms_snapshot_t *s,
                               char *buf, size_t len) {
  double pct = (double)bd->ready * 100.0 / (double)s->kernel_anon_rss;
  int64_t anon =
      s->kernel_anon_rss > INT64_MAX ? INT64_MAX : (int64_t)s->kernel_anon_rss;
  int64_t gap = bd->ready > anon ? bd->ready - anon : anon - bd->ready;
  char fig[32];
  mt_draw_fmt_bytes(fig, sizeof fig, gap, bd->q_ready, 0);
  snprintf(buf, len, "%s%.1f%% (%s %s)", mt_quality_mark(bd->q_ready),
           pct < 0       ? 0.0
           : pct > 999.9 ? 999.9
                         : pct,
           fig, bd->ready > anon ? "more than resident" : "in no class");
  int warn = (pct < 100.0 - GAP_WARN_PCT || pct > 100.0 + GAP_WARN_PCT) &&
             gap >= GAP_WARN_BYTES;
  return (piece_t){"accounted", buf, warn ? MT_ST_ERROR : MT_ST_NORMAL};
}

static void draw_bar(const mt_model_t *m, const mt_target_t *t, mt_grid_t *g,
                     int row, int cols) {
  const ms_snapshot_t *s = &t->snap;
  const ms_breakdown_t *bd = &t->bd;
  char total[32], ready[32], prep[32], rss[32], lazy[32], swap[32], anon[32],
      accounted[80], python[112], self[32], shmem[32];
  mt_draw_fmt_bytes(total, sizeof total, bd->total, bd->q_total, 0);
  mt_draw_fmt_bytes(ready, sizeof ready, bd->ready, bd->q_ready, 0);
  mt_draw_fmt_bytes(prep, sizeof prep, bd->prepared, bd->q_prepared, 0);
  field_bytes(rss, sizeof rss, s, MS_F_KERNEL_RSS);
  field_bytes(lazy, sizeof lazy, s, MS_F_KERNEL_LAZYFREE);
  field_bytes(swap, sizeof swap, s, MS_F_KERNEL_SWAP);
  /* The kernel's figures follow RSS; LazyFree and Swap come from
   * smaps_rollup, which memtop asks for only now and then for this view:
   * until they are there they are left out rather than shown as '-'.
   * Pieces that do not fit are left out whole, from the right. */
  piece_t p[13];
  int n = 0;
  p[n++] = (piece_t){"Ready+Prepared", total, MT_ST_HEADER};
  p[n++] = (piece_t){"Ready", ready, MT_ST_NORMAL};
  p[n++] = (piece_t){"Prepared", prep, MT_ST_PREPARED};
  p[n++] = (piece_t){"RSS", rss, MT_ST_NORMAL};
  /* The kernel's anonymous RSS, and how much of it Ready accounts for:
   * a gap between them is memory no class shows. */
  if (ms__field_known(s, MS_F_KERNEL_ANON_RSS) && s->kernel_anon_rss > 0) {
    field_bytes(anon, sizeof anon, s, MS_F_KERNEL_ANON_RSS);
    p[n++] = (piece_t){"AnonRSS", anon, MT_ST_NORMAL};
    if (bd->q_ready != MS_Q_UNAVAILABLE)
      p[n++] = accounted_piece(bd, s, accounted, sizeof accounted);
  }
  /* Shared memory: resident, in no class (nor in AnonRSS). */
  if (ms__field_known(s, MS_F_KERNEL_RSS_SHMEM) && s->kernel_rss_shmem > 0) {
    field_bytes(shmem, sizeof shmem, s, MS_F_KERNEL_RSS_SHMEM);
    p[n++] = (piece_t){"Shmem", shmem, MT_ST_NORMAL};
  }
  /* What libmemstats itself holds (resident), apart from the program's. */
  if (ms__field_known(s, MS_F_MEMSTATS_SELF)) {
    field_bytes(self, sizeof self, s, MS_F_MEMSTATS_SELF);
    p[n++] = (piece_t){"libmemstats", self, MT_ST_DIM};
  }
  /* A Python interpreter's object allocator: its arenas' resident bytes
   * (part of OtherSys), how many arenas there are, and the bytes in its
   * allocated blocks (its part of data) where the library reads them. */
  if (ms__field_known(s, MS_F_PYTHON_ARENAS)) {
    char res[32], alloc[32];
    field_bytes(res, sizeof res, s, MS_F_PYTHON_ARENA_RESIDENT);
    if (ms__field_known(s, MS_F_PYTHON_ARENA_ALLOC)) {
      field_bytes(alloc, sizeof alloc, s, MS_F_PYTHON_ARENA_ALLOC);
      snprintf(python, sizeof python, "%s in %llu arenas, %s allocated", res,
               (unsigned long long)s->python_arenas, alloc);
    } else {
      snprintf(python, sizeof python, "%s in %llu arenas", res,
               (unsigned long long)s->python_arenas);
    }
    p[n++] = (piece_t){"python", python, MT_ST_NORMAL};
  }
  if (ms__field_known(s, MS_F_KERNEL_LAZYFREE))
    p[n++] = (piece_t){"LazyFree", lazy, MT_ST_NORMAL};
  if (ms__field_known(s, MS_F_KERNEL_SWAP))
    p[n++] = (piece_t){"Swap", swap, MT_ST_NORMAL};
  if (bd->sys_mismatch)
    p[n++] = (piece_t){"", "(Sys != sum of the *Sys fields)", MT_ST_ERROR};
  put_pieces(g, row, 0, cols, p, n);

  /* The bar: each part's share of the whole, by cumulative rounding so
   * that the cells add up to the width exactly. A negative part (a
   * provider that breaks an identity) draws as nothing. When a part of
   * Ready is unavailable but Ready is known, what the known parts do not
   * explain is drawn as '?' before Prepared, rather than leaving the bar
   * short and the other parts looking bigger than they are. */
  int64_t v[5];
  ms_quality_t q[4];
  bar_parts(bd, v, q);
  ms_quality_t uq;
  v[4] = v[3];
  v[3] = unknown_part(bd, v, q, &uq);
  double sum = 0;
  for (int i = 0; i < 5; i++)
    sum += v[i] > 0 ? (double)v[i] : 0;
  int x = 0;
  double acc = 0;
  for (int i = 0; i < 5 && sum > 0; i++) {
    acc += v[i] > 0 ? (double)v[i] : 0;
    int end = (int)(acc / sum * cols + 0.5);
    if (i == 3)
      mt_grid_fill(g, row + 1, x, end - x, '?', MT_ST_DIM);
    else
      mt_grid_fill(g, row + 1, x, end - x, mt_draw_fill(i < 3 ? i : 3, m->utf8),
                   part_style[i < 3 ? i : 3]);
    x = end;
  }
  if (sum <= 0)
    mt_grid_puts(g, row + 1, 0, "(nothing mapped yet)", cols, MT_ST_DIM);
  legend(m, bd, g, row + 2, cols, 1);
}

/* ======================================================== Sys, heap === */

static void draw_sys(const mt_target_t *t, mt_grid_t *g, int row, int col,
                     int width) {
  static const ms_field_t sys[7] = {
      MS_F_HEAP_SYS,      MS_F_STACK_SYS, MS_F_MSPAN_SYS, MS_F_MCACHE_SYS,
      MS_F_BUCK_HASH_SYS, MS_F_GC_SYS,    MS_F_OTHER_SYS};
  static const int inuse[7] = {MS_F_HEAP_INUSE,
                               MS_F_STACK_INUSE,
                               MS_F_MSPAN_INUSE,
                               MS_F_MCACHE_INUSE,
                               -1,
                               -1,
                               -1};
  /* Each class's unbacked part, as the report's Released column: -2 is
   * MSpanSys's, the rest of OffHeapReleased. A snapshot that keeps
   * OffHeapReleased outside its classes (an older target's) has only the
   * heap's. */
  static const int released[7] = {
      MS_F_HEAP_RELEASED, MS_F_STACK_RELEASED, -2, -1, -1, -1,
      MS_F_OTHER_RELEASED};
  const ms_snapshot_t *s = &t->snap;
  char fig[32];
  int with_inuse = width >= 36;
  int with_released = width >= 46;
  int outside = mt_off_heap_outside(s);
  int vw = 12 + 10; /* label and Sys figure */
  mt_grid_clip(g, row, col, 8, width);
  field_bytes(fig, sizeof fig, s, MS_F_SYS);
  mt_grid_puts(g, row, col, "Sys by class", -1, MT_ST_HEADER);
  label_value(g, row, col + 12, 10, "", fig, MT_ST_HEADER);
  if (with_inuse)
    mt_grid_puts(g, row, col + vw + 5, "Inuse", -1, MT_ST_DIM);
  if (with_released)
    mt_grid_puts(g, row, col + vw + 12, "Released", -1, MT_ST_DIM);
  for (int i = 0; i < 7; i++) {
    field_bytes(fig, sizeof fig, s, sys[i]);
    label_value(g, row + 1 + i, col + 1, vw - 1, ms_field_name(sys[i]), fig,
                MT_ST_NORMAL);
    if (with_inuse && inuse[i] >= 0) {
      field_bytes(fig, sizeof fig, s, (ms_field_t)inuse[i]);
      label_value(g, row + 1 + i, col + vw, 10, "", fig, MT_ST_NORMAL);
    }
    if (!with_released || released[i] == -1 || (outside && i > 0))
      continue;
    if (released[i] >= 0) {
      field_bytes(fig, sizeof fig, s, (ms_field_t)released[i]);
    } else {
      uint64_t v = 0;
      ms_quality_t q = mt_mspan_released(s, &v);
      mt_draw_fmt_bytes(fig, sizeof fig, v > INT64_MAX ? INT64_MAX : (int64_t)v,
                        q, 0);
    }
    label_value(g, row + 1 + i, col + vw + 10, 10, "", fig, MT_ST_NORMAL);
  }
  mt_grid_unclip(g);
}

/* A heap sample this old is said in the heap's header: twice the
 * shortest cadence of glibc's (1 s). */
#define MT_SAMPLE_OLD_NS 2000000000ull

static void draw_heap(const mt_target_t *t, mt_grid_t *g, int row, int col,
                      int width) {
  const ms_snapshot_t *s = &t->snap;
  char fig[32], rate[40];
  static const ms_field_t bytes[4] = {MS_F_HEAP_ALLOC, MS_F_HEAP_INUSE,
                                      MS_F_HEAP_IDLE, MS_F_HEAP_RELEASED};
  int vw = 24;
  mt_grid_clip(g, row, col, 8, width);
  mt_grid_puts(g, row, col, "Heap", -1, MT_ST_HEADER);
  /* The allocator's sample behind these figures, when it is old (glibc's
   * is taken at most once a second, rarer on a large heap): the figures
   * are then estimates moved since, and say from when. */
  if (ms__field_known(s, MS_F_HEAP_SAMPLE_AGE) &&
      s->heap_sample_age_ns >= MT_SAMPLE_OLD_NS) {
    snprintf(fig, sizeof fig, "sampled %.0fs ago",
             (double)s->heap_sample_age_ns / 1e9);
    mt_grid_puts(g, row, col + 6, fig, -1, MT_ST_DIM);
  }
  for (int i = 0; i < 4; i++) {
    field_bytes(fig, sizeof fig, s, bytes[i]);
    label_value(g, row + 1 + i, col + 1, vw - 1, ms_field_name(bytes[i]), fig,
                MT_ST_NORMAL);
  }
  quality_count(fig, sizeof fig, (double)s->heap_objects,
                ms__field_quality(s, MS_F_HEAP_OBJECTS));
  label_value(g, row + 5, col + 1, vw - 1, "HeapObjects", fig, MT_ST_NORMAL);

  /* Rates from the last two samples: a count per second takes the
   * counter's quality; a rate the model could not compute yet is "-". */
  ms_quality_t qm = ms__field_quality(s, MS_F_MALLOCS);
  ms_quality_t qf = ms__field_quality(s, MS_F_FREES);
  ms_quality_t qb = ms__field_quality(s, MS_F_TOTAL_ALLOC);
  quality_count(fig, sizeof fig, t->mallocs_per_s, qm);
  label_value(g, row + 6, col + 1, vw - 1, "mallocs/s", fig, MT_ST_NORMAL);
  if (width >= vw + 20) {
    quality_count(fig, sizeof fig, t->frees_per_s, qf);
    label_value(g, row + 6, col + vw + 2, 18, "frees/s", fig, MT_ST_NORMAL);
  }
  if (qb == MS_Q_UNAVAILABLE || t->bytes_per_s < 0) {
    snprintf(rate, sizeof rate, "-");
  } else {
    mt_draw_fmt_bytes(fig, sizeof fig, rate_i64(t->bytes_per_s), qb, 0);
    snprintf(rate, sizeof rate, "%s/s", fig);
  }
  label_value(g, row + 7, col + 1, vw - 1, "bytes/s", rate, MT_ST_NORMAL);
  if (width >= vw + 20) {
    field_bytes(fig, sizeof fig, s, MS_F_TOTAL_ALLOC);
    label_value(g, row + 7, col + vw + 2, 18, "TotalAlloc", fig, MT_ST_NORMAL);
  }
  mt_grid_unclip(g);
}

/* A two-line digest of the heap for screens too small for the tables. */
static void draw_summary(const mt_target_t *t, mt_grid_t *g, int row,
                         int cols) {
  const ms_snapshot_t *s = &t->snap;
  char alloc[32], objs[32], mallocs[32], bytes[32], rate[40];
  field_bytes(alloc, sizeof alloc, s, MS_F_HEAP_ALLOC);
  quality_count(objs, sizeof objs, (double)s->heap_objects,
                ms__field_quality(s, MS_F_HEAP_OBJECTS));
  quality_count(mallocs, sizeof mallocs, t->mallocs_per_s,
                ms__field_quality(s, MS_F_MALLOCS));
  ms_quality_t qb = ms__field_quality(s, MS_F_TOTAL_ALLOC);
  if (qb == MS_Q_UNAVAILABLE || t->bytes_per_s < 0) {
    snprintf(rate, sizeof rate, "-");
  } else {
    mt_draw_fmt_bytes(bytes, sizeof bytes, rate_i64(t->bytes_per_s), qb, 0);
    snprintf(rate, sizeof rate, "%s/s", bytes);
  }
  piece_t p1[] = {{"HeapAlloc", alloc, MT_ST_NORMAL},
                  {"HeapObjects", objs, MT_ST_NORMAL}};
  piece_t p2[] = {{"mallocs/s", mallocs, MT_ST_NORMAL},
                  {"bytes/s", rate, MT_ST_NORMAL}};
  put_pieces(g, row, 0, cols, p1, 2);
  put_pieces(g, row + 1, 0, cols, p2, 2);
}

/* ================================================================ GC === */

static int has_gc(const ms_snapshot_t *s) {
  return ms__field_known(s, MS_F_NUM_GC) && (s->enable_gc || s->num_gc > 0);
}

static int gc_height(const mt_target_t *t) {
  return has_gc(&t->snap) ? 3 : 1;
}

/* The last `width` pauses of the ring, oldest on the left, each as one of
 * eight levels of the largest shown. The newest pause is at
 * (NumGC+255)%256, as in Go. */
static void sparkline(const mt_model_t *m, const ms_snapshot_t *s, mt_grid_t *g,
                      int row, int col, int width) {
  static const char ascii[8] = {'_', '.', '-', ':', '=', '+', '*', '#'};
  uint64_t n = s->num_gc < MS_PAUSE_RING ? s->num_gc : MS_PAUSE_RING;
  if (width <= 0 || n == 0)
    return;
  if (n > (uint64_t)width)
    n = (uint64_t)width;
  uint64_t max = 0;
  for (uint64_t k = 0; k < n; k++) {
    uint64_t p = s->pause_ns[(s->num_gc + 255 - k) % MS_PAUSE_RING];
    if (p > max)
      max = p;
  }
  for (uint64_t k = 0; k < n; k++) {
    uint64_t p = s->pause_ns[(s->num_gc + 255 - k) % MS_PAUSE_RING];
    int level = max > 0 ? (int)((p * 7 + max / 2) / max) : 0;
    uint32_t ch = m->utf8 ? 0x2581u + (uint32_t)level : (uint32_t)ascii[level];
    mt_grid_putc(g, row, col + (int)(n - 1 - k), ch, MT_ST_DATA);
  }
}

static void draw_gc(const mt_model_t *m, const mt_target_t *t, mt_grid_t *g,
                    int row, int cols) {
  const ms_snapshot_t *s = &t->snap;
  mt_grid_puts(g, row, 0, "GC", -1, MT_ST_HEADER);
  if (!has_gc(s)) {
    mt_grid_puts(g, row, 4,
                 !ms__field_known(s, MS_F_NUM_GC)
                     ? "- (no collector reported by the providers)"
                     : "none (no garbage collector in this process)",
                 -1, MT_ST_DIM);
    return;
  }
  char cycles[32], forced[32], last[48], cpu[32], next[32];
  ms_quality_t qn = ms__field_quality(s, MS_F_NUM_GC);
  quality_count(cycles, sizeof cycles, s->num_gc, qn);
  quality_count(forced, sizeof forced, s->num_forced_gc,
                ms__field_quality(s, MS_F_NUM_FORCED_GC));
  if (!ms__field_known(s, MS_F_LAST_GC)) {
    snprintf(last, sizeof last, "-");
  } else if (s->last_gc == 0 || s->num_gc == 0) {
    snprintf(last, sizeof last, "never");
  } else {
    /* Measured against the snapshot's own clock, so it means the same
     * thing on a paused screen. */
    int64_t ago = (int64_t)(s->time_unix_ns - s->last_gc);
    char d[32];
    mt_fmt_duration(d, sizeof d, ago < 0 ? 0 : ago);
    snprintf(last, sizeof last, "%s ago", d);
  }
  ms_quality_t qc = ms__field_quality(s, MS_F_GC_CPU_FRACTION);
  if (qc == MS_Q_UNAVAILABLE)
    snprintf(cpu, sizeof cpu, "-");
  else
    snprintf(cpu, sizeof cpu, "%s%.2f%%", mt_quality_mark(qc),
             s->gc_cpu_fraction * 100.0);
  field_bytes(next, sizeof next, s, MS_F_NEXT_GC);
  piece_t p1[] = {
      {"cycles", cycles, MT_ST_NORMAL}, {"forced", forced, MT_ST_NORMAL},
      {"last", last, MT_ST_NORMAL},     {"CPU", cpu, MT_ST_NORMAL},
      {"NextGC", next, MT_ST_NORMAL},
  };
  put_pieces(g, row, 4, cols, p1, 5);

  /* Percentiles come from the histogram of every pause since start, not
   * from the 256 the ring keeps. */
  char p50[32], p99[32], pmax[32], total[32];
  ms_quality_t qh = ms__field_quality(s, MS_F_PAUSE_HIST);
  quality_dur(p50, sizeof p50, t->pause_p50_ns, qh);
  quality_dur(p99, sizeof p99, t->pause_p99_ns, qh);
  quality_dur(pmax, sizeof pmax, t->pause_max_ns, qh);
  quality_dur(total, sizeof total, (int64_t)s->pause_total_ns,
              ms__field_quality(s, MS_F_PAUSE_TOTAL_NS));
  piece_t p2[] = {
      {"pause p50", p50, MT_ST_NORMAL},
      {"p99", p99, MT_ST_NORMAL},
      {"max", pmax, MT_ST_NORMAL},
      {"PauseTotalNs", total, MT_ST_NORMAL},
  };
  put_pieces(g, row + 1, 4, cols, p2, 4);
  if (!ms__field_known(s, MS_F_PAUSE_NS)) {
    mt_grid_puts(g, row + 2, 4, "PauseNs -", -1, MT_ST_DIM);
    return;
  }
  sparkline(m, s, g, row + 2, 4, cols - 4);
}

/* ============================================================= trend === */

static void draw_trend(const mt_model_t *m, const mt_target_t *t, mt_grid_t *g,
                       int row, int col, int height, int width) {
  uint64_t have = t->nhist < MT_HISTORY ? t->nhist : MT_HISTORY;
  uint64_t n = have < (uint64_t)width ? have : (uint64_t)width;
  int chart = height - 1;
  mt_grid_clip(g, row, col, height, width);
  if (n == 0) {
    mt_grid_puts(g, row, col, "Trend", -1, MT_ST_HEADER);
    mt_grid_puts(g, row + 1, col, "(no history yet)", -1, MT_ST_DIM);
    mt_grid_unclip(g);
    return;
  }
  /* The i-th newest sample is at (nhist-1-i) % MT_HISTORY. */
#define SAMPLE(i) (&t->hist[(t->nhist - 1 - (i)) % MT_HISTORY])
  int64_t max = 0;
  for (uint64_t i = 0; i < n; i++) {
    const mt_sample_t *sm = SAMPLE(i);
    int64_t sum = sat_add(sat_add(sm->data, sm->frag_overhead), pos(sm->idle));
    if (sum > max)
      max = sum;
  }
  char fig[32], span[32];
  mt_draw_fmt_bytes(fig, sizeof fig, max, MS_Q_EXACT, 0);
  mt_fmt_duration(span, sizeof span,
                  (int64_t)(SAMPLE(0)->mono_ns - SAMPLE(n - 1)->mono_ns));
  piece_t p[] = {{"", "Trend data/frag/idle", MT_ST_HEADER},
                 {"max", fig, MT_ST_NORMAL},
                 {"over", span, MT_ST_NORMAL}};
  put_pieces(g, row, col, col + width, p, 3);
  for (uint64_t i = 0; i < n && max > 0; i++) {
    const mt_sample_t *sm = SAMPLE(i);
    int64_t part[3] = {pos(sm->data), pos(sm->frag_overhead), pos(sm->idle)};
    int x = col + width - 1 - (int)i;
    int64_t acc = 0;
    int y = 0;
    /* Stacked from the bottom: data, then fragOverhead, then idle. */
    for (int k = 0; k < 3; k++) {
      acc = sat_add(acc, part[k]);
      int top = (int)((double)acc / (double)max * chart + 0.5);
      for (; y < top && y < chart; y++)
        mt_grid_putc(g, row + chart - y, x, mt_draw_fill(k, m->utf8),
                     part_style[k]);
    }
  }
#undef SAMPLE
  mt_grid_unclip(g);
}

/* ====================================================== size classes === */

typedef struct class_row_s {
  uint64_t size, objects, live;
} class_row_t;

static int by_live_desc(const void *a, const void *b) {
  const class_row_t *x = a, *y = b;
  if (x->live != y->live)
    return x->live < y->live ? 1 : -1;
  return x->size < y->size ? -1 : x->size > y->size;
}

static void draw_classes(const mt_target_t *t, mt_grid_t *g, int row, int col,
                         int height, int width) {
  const ms_snapshot_t *s = &t->snap;
  ms_quality_t q = ms__field_quality(s, MS_F_BY_SIZE);
  mt_grid_clip(g, row, col, height, width);
  mt_grid_puts(g, row, col, "Size classes by live bytes", -1, MT_ST_HEADER);
  if (q == MS_Q_UNAVAILABLE || s->nsize_classes == 0) {
    mt_grid_puts(g, row + 1, col + 1,
                 q == MS_Q_UNAVAILABLE ? "BySize -" : "(no size classes)", -1,
                 MT_ST_DIM);
    mt_grid_unclip(g);
    return;
  }
  class_row_t rows[MS_MAX_SIZE_CLASSES];
  size_t n = 0;
  for (uint32_t i = 0; i < s->nsize_classes && i < MS_MAX_SIZE_CLASSES; i++) {
    const ms_size_class_t *c = &s->by_size[i];
    uint64_t objects = c->mallocs > c->frees ? c->mallocs - c->frees : 0;
    if (objects == 0)
      continue;
    rows[n].size = c->size;
    rows[n].objects = objects;
    rows[n].live = objects * c->size;
    n++;
  }
  qsort(rows, n, sizeof rows[0], by_live_desc);
  const char *mark = mt_quality_mark(q);
  mt_grid_printf(g, row + 1, col, MT_ST_DIM, "%9s %9s %10s", "Size", "objects",
                 "live");
  if (n == 0)
    mt_grid_puts(g, row + 2, col + 1, "(no live objects)", -1, MT_ST_DIM);
  for (size_t i = 0; i < n && (int)i < height - 2; i++) {
    char size[32], objs[32], live[32];
    mt_draw_fmt_bytes(size, sizeof size, (int64_t)rows[i].size, MS_Q_EXACT, 9);
    mt_draw_fmt_count(objs, sizeof objs, (double)rows[i].objects);
    mt_draw_fmt_bytes(live, sizeof live, (int64_t)rows[i].live, MS_Q_EXACT, 9);
    mt_grid_printf(g, row + 2 + (int)i, col, MT_ST_NORMAL, "%9s %s%8s %s%9s",
                   size, mark[0] ? mark : " ", objs, mark[0] ? mark : " ",
                   live);
  }
  mt_grid_unclip(g);
}

/* ====================================================== alloc sites === */

/* The heap profile's top sites (issue 12, item 6), in the place of the
 * size classes once a profile has been read: by in-use bytes, or (key
 * 'a') by allocation rate since the previous profile. Names come from the
 * target's files: drawn in their safe form. */
static int by_inuse_desc(const void *a, const void *b) {
  const mt_site_t *x = *(const mt_site_t *const *)a;
  const mt_site_t *y = *(const mt_site_t *const *)b;
  if (x->inuse_space != y->inuse_space)
    return x->inuse_space < y->inuse_space ? 1 : -1;
  return x->alloc_space < y->alloc_space   ? 1
         : x->alloc_space > y->alloc_space ? -1
                                           : 0;
}

static int by_rate_desc(const void *a, const void *b) {
  const mt_site_t *x = *(const mt_site_t *const *)a;
  const mt_site_t *y = *(const mt_site_t *const *)b;
  if (x->alloc_rate != y->alloc_rate)
    return x->alloc_rate < y->alloc_rate ? 1 : -1;
  return x->inuse_space < y->inuse_space   ? 1
         : x->inuse_space > y->inuse_space ? -1
                                           : 0;
}

/* A function's name shortened for a narrow column: without template
 * arguments, the parameter list and all but the last qualifier. */
static void short_name(char *out, size_t len, const char *name) {
  size_t o = 0;
  int depth = 0;

  for (; *name != '\0' && o + 1 < len; name++) {
    if (*name == '<') {
      depth++;
      continue;
    }
    if (*name == '>' && depth > 0) {
      depth--;
      continue;
    }
    /* "operator()" keeps its parentheses: only a trailing parameter list
     * goes. */
    if (*name == '(' && depth == 0 && o > 0 && out[o - 1] != 'r')
      break;
    if (depth == 0)
      out[o++] = *name;
  }
  out[o] = '\0';
  /* Of a qualified name, the class and the method
   * ("basic_string::_M_construct", not "std::__cxx11::basic_string::..."). */
  char *last = NULL, *prev = NULL;
  for (char *p = strstr(out, "::"); p != NULL; p = strstr(p + 2, "::")) {
    prev = last;
    last = p;
  }
  if (prev != NULL)
    memmove(out, prev + 2, strlen(prev + 2) + 1);
}

/* A site as one line of the panel: its function shortened, its file's
 * base name and line; or where it is. */
static void site_text(char *site, size_t len, const mt_site_t *st) {
  char fn[256];

  if (st->function != NULL)
    short_name(fn, sizeof fn, st->function);
  if (st->function != NULL && st->file[0] != '\0') {
    const char *base = strrchr(st->file, '/');
    snprintf(site, len, "%s %s:%lld", fn, base != NULL ? base + 1 : st->file,
             (long long)st->line);
  } else if (st->function != NULL) {
    snprintf(site, len, "%s", fn);
  } else if (st->module != NULL && st->module[0] != '\0') {
    const char *base = strrchr(st->module, '/');
    snprintf(site, len, "%s+0x%llx", base != NULL ? base + 1 : st->module,
             (unsigned long long)st->module_offset);
  } else {
    snprintf(site, len, "0x%llx", (unsigned long long)st->address);
  }
}

/* The figures of a site's row, as the list shows them. */
static void site_figures(const mt_site_t *st, ms_quality_t q, int by_rate,
                         char *a, size_t alen, char *b, size_t blen) {
  char c[32];

  if (by_rate) {
    mt_draw_fmt_bytes(a, alen, rate_i64(st->alloc_rate), q, 9);
    mt_draw_fmt_bytes(b, blen, st->inuse_space, q, 9);
  } else {
    mt_draw_fmt_bytes(a, alen, st->inuse_space, q, 9);
    mt_draw_fmt_count(c, sizeof c, (double)st->inuse_objects);
    snprintf(b, blen, "%s%s", mt_quality_mark(q), c);
  }
}

/* The selected site's call chain (key 'e'): its row, then the frames of
 * the stack that holds most there, innermost first, each called by the
 * next. */
static void draw_chain(const mt_site_t *st, ms_quality_t q, int by_rate,
                       mt_grid_t *g, int row, int col, int height, int width) {
  char a[32], b[40], site[512], safe[4 * sizeof site + 1];
  int used;
  size_t i;

  mt_grid_puts(g, row, col, "Call chain of the site (e: sites, [ ]: other)", -1,
               MT_ST_HEADER);
  site_figures(st, q, by_rate, a, sizeof a, b, sizeof b);
  site_text(site, sizeof site, st);
  mt_draw_safe_name(safe, sizeof safe, site);
  used = mt_grid_printf(g, row + 1, col, MT_ST_SELECTED, "%9s %9s ", a, b);
  mt_grid_puts(g, row + 1, col + used, safe, width - used, MT_ST_SELECTED);
  if (st->nchain == 0) {
    mt_grid_puts(g, row + 2, col + 1, "(no call chain)", -1, MT_ST_DIM);
    return;
  }
  for (i = 0; i < st->nchain && (int)i < height - 2; i++) {
    int r = row + 2 + (int)i;

    mt_draw_safe_name(safe, sizeof safe, st->chain[i]);
    used = mt_grid_printf(g, r, col, MT_ST_DIM, "%4zu %s ", i,
                          i == 0 ? "at" : "by");
    mt_grid_puts(g, r, col + used, safe, width - used, MT_ST_NORMAL);
  }
}

static void draw_sites(const mt_model_t *m, const mt_target_t *t, mt_grid_t *g,
                       int row, int col, int height, int width) {
  ms_quality_t q = t->sites_estimated ? MS_Q_ESTIMATED : MS_Q_EXACT;
  const mt_site_t *order[64];
  size_t n = 0, i, sel;
  int by_rate = m->sites_by_rate;

  mt_grid_clip(g, row, col, height, width);
  for (i = 0; i < t->nsites && n < 64; i++)
    if (!by_rate || t->sites[i].alloc_rate >= 0)
      order[n++] = &t->sites[i];
  qsort(order, n, sizeof order[0], by_rate ? by_rate_desc : by_inuse_desc);
  sel = n == 0 ? 0 : m->site_sel < n ? m->site_sel : n - 1;
  if (m->site_chain && n > 0) {
    draw_chain(order[sel], q, by_rate, g, row, col, height, width);
    mt_grid_unclip(g);
    return;
  }
  mt_grid_puts(g, row, col,
               by_rate ? "Alloc sites by rate (a: in use)"
                       : "Alloc sites in use (a: by rate)",
               -1, MT_ST_HEADER);
  mt_grid_printf(g, row + 1, col, MT_ST_DIM, "%9s %9s %s",
                 by_rate ? "alloc/s" : "in use", by_rate ? "in use" : "objects",
                 "site");
  if (n == 0)
    mt_grid_puts(g, row + 2, col + 1,
                 by_rate ? "(a rate needs a second profile)" : "(no sites)", -1,
                 MT_ST_DIM);
  for (i = 0; i < n && (int)i < height - 2; i++) {
    const mt_site_t *st = order[i];
    char a[32], b[40], site[512], safe[4 * sizeof site + 1];
    int r = row + 2 + (int)i, used;
    mt_style_t style = i == sel ? MT_ST_SELECTED : MT_ST_NORMAL;

    site_figures(st, q, by_rate, a, sizeof a, b, sizeof b);
    site_text(site, sizeof site, st);
    mt_draw_safe_name(safe, sizeof safe, site);
    used = mt_grid_printf(g, r, col, style, "%9s %9s ", a, b);
    mt_grid_puts(g, r, col + used, safe, width - used, style);
  }
  mt_grid_unclip(g);
}

/* The lower right panel: the sites once a profile has been read, else (or
 * when key 'c' asks) the size classes. */
static void draw_lower_right(const mt_model_t *m, const mt_target_t *t,
                             mt_grid_t *g, int row, int col, int height,
                             int width) {
  if (t->nsites > 0 && !m->show_classes)
    draw_sites(m, t, g, row, col, height, width);
  else
    draw_classes(t, g, row, col, height, width);
}

/* ============================================================ layout === */

typedef enum block_e {
  B_BAR,
  B_GC,
  B_SUMMARY, /* one-column screens: the heap in two lines... */
  B_SYSHEAP, /* two-column screens: Sys and heap side by side */
  B_HEAP,    /* one-column screens: ...then the heap, then Sys in full */
  B_SYS,
  B_LOWER, /* trend and size classes: takes what is left */
  B__COUNT
} block_t;

/* Which sections fit, and how tall each is: the plan the drawing follows. */
typedef struct layout_s {
  int two;              /* two columns (wide screens) */
  int height[B__COUNT]; /* rows of each section; B_LOWER: what is left */
  int chosen[B__COUNT]; /* drawn or left out whole */
  int gap;              /* a blank row between sections */
} layout_t;

static void plan(const mt_model_t *m, const mt_target_t *t, int cols, int avail,
                 layout_t *l) {
  memset(l, 0, sizeof *l);
  l->two = cols >= TWO_COLUMN_MIN;
  l->height[B_BAR] = bar_height(m, t, cols);
  l->height[B_GC] = gc_height(t);
  if (l->two) {
    l->height[B_SYSHEAP] = 8;
  } else {
    l->height[B_SUMMARY] = 2;
    l->height[B_HEAP] = 8;
    l->height[B_SYS] = 8;
  }
  /* Choose by priority (the order of block_t), whole blocks only; then
   * draw the chosen in that same order. */
  int used = 0, nchosen = 0;
  for (int b = 0; b < B_LOWER; b++) {
    /* The digest only stands in for the heap table. */
    if (b == B_HEAP && l->chosen[B_SUMMARY] && used + l->height[b] <= avail) {
      l->chosen[B_SUMMARY] = 0;
      used -= l->height[B_SUMMARY];
      nchosen--;
    }
    if (l->height[b] > 0 && used + l->height[b] <= avail) {
      l->chosen[b] = 1;
      used += l->height[b];
      nchosen++;
    }
  }
  int lower = avail - used;
  l->chosen[B_LOWER] = lower >= TREND_MIN;
  /* A blank row between sections when there is room to spare. */
  if (lower - nchosen >= 2 * TREND_MIN + 2) {
    l->gap = 1;
    lower -= nchosen;
  }
  l->height[B_LOWER] = lower;
}

/* The trend and the size classes (or the allocation sites) share what
 * the sections above left:
 * side by side, stacked, or the trend alone. */
static void draw_lower(const mt_model_t *m, const mt_target_t *t, mt_grid_t *g,
                       int row, int cols, int two, int lower) {
  if (two) {
    draw_trend(m, t, g, row, 0, lower, cols / 2 - 1);
    draw_lower_right(m, t, g, row, cols / 2 + 1, lower, cols - cols / 2 - 1);
  } else if (lower >= 2 * TREND_MIN + 1) {
    int th = lower / 2;
    draw_trend(m, t, g, row, 0, th, cols);
    draw_lower_right(m, t, g, row + th + 1, 0, lower - th - 1, cols);
  } else {
    draw_trend(m, t, g, row, 0, lower, cols);
  }
}

static void draw_section(const mt_model_t *m, const mt_target_t *t,
                         mt_grid_t *g, const layout_t *l, block_t b, int row,
                         int cols) {
  switch (b) {
  case B_BAR:
    draw_bar(m, t, g, row, cols);
    break;
  case B_GC:
    draw_gc(m, t, g, row, cols);
    break;
  case B_SUMMARY:
    draw_summary(t, g, row, cols);
    break;
  case B_SYSHEAP:
    draw_sys(t, g, row, 0, cols / 2 - 1);
    draw_heap(t, g, row, cols / 2 + 1, cols - cols / 2 - 1);
    break;
  case B_HEAP:
    draw_heap(t, g, row, 0, cols);
    break;
  case B_SYS:
    draw_sys(t, g, row, 0, cols);
    break;
  case B_LOWER:
    draw_lower(m, t, g, row, cols, l->two, l->height[B_LOWER]);
    break;
  case B__COUNT:
    break;
  }
}

void mt_view_draw_detail(const mt_model_t *m, const mt_target_t *t,
                         mt_grid_t *g, int top, int bottom) {
  int cols = g->cols;
  int avail = bottom - top;
  if (avail <= 0 || cols <= 0)
    return;
  if (!t->have_snapshot) {
    mt_grid_puts(g, top, 0,
                 t->state == MT_CONNECTING ? "Waiting for the first snapshot"
                                           : "No figures from this process",
                 -1, MT_ST_DIM);
    if (t->no_agent && t->state != MT_EXITED && avail > 2)
      mt_grid_puts(g, top + 2, 0,
                   "It runs no agent. Press a to attach memtop to it "
                   "(memtop attach: ptrace, one thread held about a "
                   "millisecond; asks first).",
                   -1, MT_ST_NORMAL);
    return;
  }
  layout_t l;
  plan(m, t, cols, avail, &l);
  int row = top;
  for (int b = 0; b < B__COUNT; b++) {
    if (!l.chosen[b])
      continue;
    if (row > top)
      row += l.gap;
    draw_section(m, t, g, &l, (block_t)b, row, cols);
    row += l.height[b];
  }
}
