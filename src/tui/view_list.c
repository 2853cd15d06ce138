/*
 * view_list.c - the process list: one row per target with its breakdown,
 * sortable, like top's task area. Columns that do not fit are left out by
 * priority (the breakdown before the extras), the name takes the room that
 * is left.
 */
#include <stdio.h>
#include <string.h>

#include "common/fields.h"
#include "common/sanitize.h"
#include "emit/emit.h"
#include "memstats.h"
#include "tui/draw.h"
#include "tui/view_list.h"

enum {
  COL_PID,
  COL_NAME,
  COL_PROVIDER,
  COL_READY,
  COL_PREPARED,
  COL_DATA,
  COL_FRAG,
  COL_IDLE,
  COL_OBJECTS,
  COL_P99,
  COL__COUNT
};

typedef struct column_s {
  const char *title;
  int width;    /* columns; the name's is its minimum */
  int priority; /* 0 first: what is kept on a narrow screen */
  int right;    /* right-aligned (figures) */
  int sort;     /* the mt_sort_t it shows, -1 if none */
} column_t;

static const column_t columns[COL__COUNT] = {
    [COL_PID] = {"PID", 7, 0, 1, MT_SORT_PID},
    [COL_NAME] = {"NAME", 16, 1, 0, MT_SORT_NAME},
    [COL_PROVIDER] = {"PROVIDER", 12, 9, 0, -1},
    [COL_READY] = {"READY", 9, 2, 1, MT_SORT_READY},
    [COL_PREPARED] = {"PREPARED", 9, 6, 1, MT_SORT_PREPARED},
    [COL_DATA] = {"DATA", 9, 3, 1, MT_SORT_DATA},
    [COL_FRAG] = {"FRAG", 9, 4, 1, MT_SORT_FRAG},
    [COL_IDLE] = {"IDLE", 9, 5, 1, MT_SORT_IDLE},
    [COL_OBJECTS] = {"OBJECTS", 9, 8, 1, MT_SORT_OBJECTS},
    [COL_P99] = {"GC P99", 8, 7, 1, MT_SORT_PAUSE_P99},
};

#define NAME_MAX_WIDTH 32

/* Picks the columns that fit in `cols` by priority and gives the name the
 * room left over. Sets shown[] and width[]. */
static void plan_columns(int cols, int shown[COL__COUNT],
                         int width[COL__COUNT]) {
  int used = 0;
  for (int i = 0; i < COL__COUNT; i++) {
    shown[i] = 0;
    width[i] = columns[i].width;
  }
  /* Room for "name [exited]" where there is room at all; on a small
   * screen the figures matter more. */
  if (cols < 80)
    width[COL_NAME] = 10;
  for (int prio = 0; prio < COL__COUNT; prio++) {
    for (int i = 0; i < COL__COUNT; i++) {
      if (columns[i].priority != prio)
        continue;
      int need = width[i] + (used > 0 ? 1 : 0);
      if (used + need <= cols) {
        shown[i] = 1;
        used += need;
      }
    }
  }
  if (shown[COL_NAME]) {
    int extra = cols - used;
    if (extra > NAME_MAX_WIDTH - width[COL_NAME])
      extra = NAME_MAX_WIDTH - width[COL_NAME];
    if (extra > 0)
      width[COL_NAME] += extra;
  } else if (shown[COL_PID]) {
    /* Not even the name's minimum fits: a narrower name beats none. */
    int room = cols - used - 1;
    if (room >= 4) {
      shown[COL_NAME] = 1;
      width[COL_NAME] = room;
    }
  }
}

static ms_quality_t worse(ms_quality_t a, ms_quality_t b) {
  return a < b ? a : b;
}

/* The text of one cell. */
static void cell_text(const mt_target_t *t, int col, int width, char *buf,
                      size_t len) {
  const ms_snapshot_t *s = &t->snap;
  const ms_breakdown_t *bd = &t->bd;
  buf[0] = '\0';
  if (col == COL_PID) {
    snprintf(buf, len, "%d", t->pid);
    return;
  }
  if (col == COL_NAME) {
    const char *mark = mt_draw_state_mark(t);
    /* The state marker must stay visible: cut the name, not the mark, and
     * the name between whole characters and escapes (a cut by bytes could
     * split either). */
    size_t mlen = strlen(mark);
    int ml = mlen > 0 ? (int)mlen + 1 : 0;
    size_t cols = width > 0 ? (size_t)width : 0;
    if (ml > 0)
      cols = width - ml > 1 ? (size_t)(width - ml) : 1;
    ms__sanitize(buf, len > mlen + 1 ? len - mlen - 1 : len, t->comm,
                 sizeof t->comm, cols);
    size_t n = strlen(buf);
    if (mlen > 0 && n + 1 + mlen < len) {
      buf[n] = ' ';
      memcpy(buf + n + 1, mark, mlen + 1);
    }
    return;
  }
  if (!t->have_snapshot)
    return;
  switch (col) {
  case COL_PROVIDER: {
    char raw[MS_MAX_PROVIDERS * (MS_NAME_MAX + 1)];
    size_t n = 0;
    raw[0] = '\0';
    for (uint32_t i = 0; i < s->nproviders && i < MS_MAX_PROVIDERS; i++) {
      /* A name fills its array without a NUL if the sender wants. */
      int w = snprintf(raw + n, sizeof raw - n, "%s%.*s", i ? "+" : "",
                       MS_NAME_MAX, s->providers[i]);
      if (w < 0 || (size_t)w >= sizeof raw - n)
        break;
      n += (size_t)w;
    }
    /* Safe, and cut to the column between whole characters and escapes. */
    ms__sanitize(buf, len, raw, sizeof raw, width > 0 ? (size_t)width : 0);
    return;
  }
  case COL_READY:
    mt_draw_fmt_bytes(buf, len, bd->ready, bd->q_ready, width);
    return;
  case COL_PREPARED:
    mt_draw_fmt_bytes(buf, len, bd->prepared, bd->q_prepared, width);
    return;
  case COL_DATA:
    mt_draw_fmt_bytes(buf, len, bd->data, bd->q_data, width);
    return;
  case COL_FRAG:
    mt_draw_fmt_bytes(buf, len, bd->frag_overhead, bd->q_frag_overhead, width);
    return;
  case COL_IDLE:
    mt_draw_fmt_bytes(buf, len, bd->idle, bd->q_idle, width);
    return;
  case COL_OBJECTS: {
    ms_quality_t q = ms__field_quality(s, MS_F_HEAP_OBJECTS);
    char num[32];
    if (q == MS_Q_UNAVAILABLE) {
      snprintf(buf, len, "-");
      return;
    }
    mt_draw_fmt_count(num, sizeof num, (double)s->heap_objects);
    snprintf(buf, len, "%s%s", q == MS_Q_ESTIMATED ? "~" : "", num);
    return;
  }
  case COL_P99:
    if (t->pause_p99_ns < 0 || !ms__field_known(s, MS_F_PAUSE_HIST))
      snprintf(buf, len, "-");
    else
      ms__fmt_duration(buf, len, t->pause_p99_ns);
    return;
  default:
    return;
  }
}

static void put_cell(mt_grid_t *g, int row, int col, int width, int right,
                     const char *text, mt_style_t st) {
  int n = (int)strlen(text);
  if (n > width)
    n = width;
  int at = right ? col + width - n : col;
  mt_grid_puts(g, row, at, text, n, st);
}

/* The totals of the processes still running. */
static void draw_totals(const mt_model_t *m, mt_grid_t *g, int row) {
  int64_t v[5] = {0, 0, 0, 0, 0};
  ms_quality_t q[5] = {MS_Q_EXACT, MS_Q_EXACT, MS_Q_EXACT, MS_Q_EXACT,
                       MS_Q_EXACT};
  static const char *const label[5] = {"Ready", "Prepared", "data", "frag",
                                       "idle"};
  static const mt_style_t st[5] = {MT_ST_NORMAL, MT_ST_PREPARED, MT_ST_DATA,
                                   MT_ST_FRAG, MT_ST_IDLE};
  size_t live = 0;
  for (size_t i = 0; i < m->ntargets; i++) {
    const mt_target_t *t = m->targets[i];
    if (!t->have_snapshot || t->state == MT_EXITED)
      continue;
    live++;
    const ms_breakdown_t *bd = &t->bd;
    v[0] += bd->ready;
    v[1] += bd->prepared;
    v[2] += bd->data;
    v[3] += bd->frag_overhead;
    v[4] += bd->idle;
    q[0] = worse(q[0], bd->q_ready);
    q[1] = worse(q[1], bd->q_prepared);
    q[2] = worse(q[2], bd->q_data);
    q[3] = worse(q[3], bd->q_frag_overhead);
    q[4] = worse(q[4], bd->q_idle);
  }
  int col = mt_grid_puts(g, row, 0, "Total", -1, MT_ST_HEADER);
  if (live == 0) {
    mt_grid_puts(g, row, col + 2, "-", -1, MT_ST_DIM);
    return;
  }
  for (int i = 0; i < 5; i++) {
    char fig[32];
    mt_draw_fmt_bytes(fig, sizeof fig, v[i], q[i], 0);
    int need = 2 + (int)strlen(label[i]) + 1 + (int)strlen(fig);
    if (col + need > g->cols)
      break; /* whole figures only */
    col += 2;
    col += mt_grid_puts(g, row, col, label[i], -1, MT_ST_DIM);
    col += 1;
    col += mt_grid_puts(g, row, col, fig, -1, st[i]);
  }
}

void mt_view_draw_list(const mt_model_t *m, mt_grid_t *g, int top, int bottom) {
  int shown[COL__COUNT], width[COL__COUNT];
  if (bottom <= top)
    return;
  mt_grid_clip(g, top, 0, bottom - top, g->cols);
  draw_totals(m, g, top);
  if (bottom - top < 2) {
    mt_grid_unclip(g);
    return;
  }

  /* Column headers, the sort column marked with '*'. */
  int hrow = top + 1;
  plan_columns(g->cols, shown, width);
  mt_grid_fill(g, hrow, 0, g->cols, ' ', MT_ST_COLUMNS);
  int x = 0;
  for (int i = 0; i < COL__COUNT; i++) {
    if (!shown[i])
      continue;
    char title[32];
    int sorted = columns[i].sort == (int)m->sort;
    snprintf(title, sizeof title, "%s%s", columns[i].title,
             sorted ? (m->sort_reverse ? "^" : "*") : "");
    put_cell(g, hrow, x, width[i], columns[i].right, title,
             sorted ? MT_ST_SORT : MT_ST_COLUMNS);
    x += width[i] + 1;
  }

  int first = hrow + 1;
  int nrows = bottom - first;
  if (m->ntargets == 0) {
    if (nrows > 0)
      mt_grid_puts(g, first, 1,
                   "No attachable process. Watch one with "
                   "`memtop run -- CMD`, or link it with -lmemstats.",
                   -1, MT_ST_DIM);
    mt_grid_unclip(g);
    return;
  }
  /* Scroll so that the selection is on screen. */
  size_t sel = m->selected < m->ntargets ? m->selected : m->ntargets - 1;
  size_t from = 0;
  if (nrows > 0 && sel >= (size_t)nrows)
    from = sel - (size_t)nrows + 1;
  for (int r = 0; r < nrows && from + (size_t)r < m->ntargets; r++) {
    size_t idx = from + (size_t)r;
    const mt_target_t *t = m->targets[idx];
    int row = first + r;
    mt_style_t st = idx == sel            ? MT_ST_SELECTED
                    : t->state != MT_LIVE ? MT_ST_EXITED
                                          : MT_ST_NORMAL;
    if (idx == sel)
      mt_grid_fill(g, row, 0, g->cols, ' ', st);
    x = 0;
    for (int i = 0; i < COL__COUNT; i++) {
      if (!shown[i])
        continue;
      char text[256];
      cell_text(t, i, width[i], text, sizeof text);
      put_cell(g, row, x, width[i], columns[i].right, text, st);
      x += width[i] + 1;
    }
  }
  mt_grid_unclip(g);
}

int mt_view_list_rows(int rows) {
  /* Title, totals, column header and status line. */
  return rows > 4 ? rows - 4 : 0;
}
