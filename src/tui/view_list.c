/*
 * view_list.c - the process list: one row per target with its breakdown,
 * sortable, like top's task area. Columns that do not fit are left out by
 * priority (the breakdown before the extras), the name takes the room that
 * is left.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fields.h"
#include "common/sanitize.h"
#include "emit/emit.h"
#include "memstats.h"
#include "tui/draw.h"
#include "tui/view_list.h"

typedef struct column_s {
  const char *title;
  int width;    /* columns; the name's and the provider's are minimums */
  int priority; /* 0 first: what is kept on a narrow screen */
  int right;    /* right-aligned (figures) */
  int sort;     /* the mt_sort_t it shows */
} column_t;

/* In the order they appear; the name last, taking what is left, as
 * htop's Command. */
static const column_t columns[MT_COL__COUNT] = {
    [MT_COL_PID] = {"PID", 7, 0, 1, MT_SORT_PID},
    [MT_COL_USER] = {"USER", 8, 5, 0, MT_SORT_USER},
    [MT_COL_TOTAL] = {"TOTAL", 9, 2, 1, MT_SORT_TOTAL},
    [MT_COL_READY] = {"READY", 9, 3, 1, MT_SORT_READY},
    [MT_COL_PREPARED] = {"PREPARED", 9, 9, 1, MT_SORT_PREPARED},
    [MT_COL_DATA] = {"DATA", 9, 4, 1, MT_SORT_DATA},
    [MT_COL_FRAG] = {"FRAG", 9, 7, 1, MT_SORT_FRAG},
    [MT_COL_IDLE] = {"IDLE", 9, 8, 1, MT_SORT_IDLE},
    [MT_COL_RSS] = {"RSS", 9, 6, 1, MT_SORT_RSS},
    [MT_COL_OBJECTS] = {"OBJECTS", 9, 11, 1, MT_SORT_OBJECTS},
    [MT_COL_P99] = {"GC P99", 8, 10, 1, MT_SORT_PAUSE_P99},
    [MT_COL_PROVIDER] = {"PROVIDER", 8, 12, 0, MT_SORT_PROVIDER},
    [MT_COL_NAME] = {"NAME", 10, 1, 0, MT_SORT_NAME},
};

#define USER_MAX_WIDTH 12

const char *mt_view_list_title(mt_column_t c) {
  return c < MT_COL__COUNT ? columns[c].title : "";
}

const char *mt_view_sort_title(mt_sort_t s) {
  for (int i = 0; i < MT_COL__COUNT; i++)
    if (columns[i].sort == (int)s)
      return columns[i].title;
  return "";
}

/* The widest provider list and user name among the visible targets: the
 * provider column is as wide as its widest entry or left out, never cut.
 * Each target's widths are measured when they change (model.c), not
 * here at every frame. */
static void content_widths(const mt_model_t *m, int width[MT_COL__COUNT]) {
  size_t nv = mt_model_nvisible(m);
  for (size_t i = 0; i < nv; i++) {
    const mt_target_t *t = m->targets[i];
    int w = t->widths_known ? t->prov_width : mt_target_measure_providers(t);
    if (w > width[MT_COL_PROVIDER])
      width[MT_COL_PROVIDER] = w;
    w = t->widths_known ? t->user_width : mt_target_measure_user(t);
    if (w > USER_MAX_WIDTH)
      w = USER_MAX_WIDTH;
    if (w > width[MT_COL_USER])
      width[MT_COL_USER] = w;
  }
}

/* Picks the columns that fit in `cols` by priority among those the user
 * chose, gives the name the room left over, and sets where each starts.
 * Sets shown[], width[] and x[]. */
static void plan_columns(const mt_model_t *m, int cols,
                         int shown[MT_COL__COUNT], int width[MT_COL__COUNT],
                         int x[MT_COL__COUNT]) {
  unsigned chosen = m->columns != 0 ? m->columns : MT_COLUMNS_ALL;
  int used = 0;
  for (int i = 0; i < MT_COL__COUNT; i++) {
    shown[i] = 0;
    width[i] = columns[i].width;
    x[i] = 0;
  }
  content_widths(m, width);
  /* The name's share: a command line needs room to tell workers apart,
   * but on a small screen the figures matter more. */
  int name_min = cols / 4;
  if (name_min < columns[MT_COL_NAME].width)
    name_min = columns[MT_COL_NAME].width;
  if (name_min > 30)
    name_min = 30;
  width[MT_COL_NAME] = name_min;
  for (int prio = 0; prio < MT_COL__COUNT; prio++) {
    for (int i = 0; i < MT_COL__COUNT; i++) {
      if (columns[i].priority != prio ||
          (!(chosen & (1u << i)) && i != MT_COL_PID && i != MT_COL_NAME))
        continue;
      int need = width[i] + (used > 0 ? 1 : 0);
      if (used + need <= cols) {
        shown[i] = 1;
        used += need;
      }
    }
  }
  if (shown[MT_COL_NAME]) {
    width[MT_COL_NAME] += cols - used;
  } else if (shown[MT_COL_PID]) {
    /* Not even the name's minimum fits: a narrower name beats none. */
    int room = cols - used - 1;
    if (room >= 4) {
      shown[MT_COL_NAME] = 1;
      width[MT_COL_NAME] = room;
    }
  }
  int at = 0;
  for (int i = 0; i < MT_COL__COUNT; i++) {
    if (!shown[i])
      continue;
    x[i] = at;
    at += width[i] + 1;
  }
}

static ms_quality_t worse(ms_quality_t a, ms_quality_t b) {
  return a < b ? a : b;
}

/* The text of one cell. */
static void cell_text(const mt_model_t *m, const mt_target_t *t, int col,
                      int width, char *buf, size_t len) {
  const ms_snapshot_t *s = &t->snap;
  const ms_breakdown_t *bd = &t->bd;
  buf[0] = '\0';
  if (col == MT_COL_PID) {
    snprintf(buf, len, "%d", t->pid);
    return;
  }
  if (col == MT_COL_USER) {
    ms__sanitize(buf, len, t->proc.user, sizeof t->proc.user,
                 width > 0 ? (size_t)width : 0);
    return;
  }
  if (col == MT_COL_NAME) {
    /* The tree's connectors first (htop's), then the name. */
    char tree[3 * 3 * MT_TREE_DEPTH + 1];
    size_t tl = 0;
    int tw = 0;
    tree[0] = '\0';
    for (int d = 0; d < t->tree_depth && width - tw > 4; d++) {
      int more = (t->tree_more >> d) & 1u, last = d == t->tree_depth - 1;
      const char *piece =
          m->utf8 ? (last ? (more ? "\u251c\u2500 " : "\u2514\u2500 ")
                          : (more ? "\u2502  " : "   "))
                  : (last ? (more ? "|- " : "`- ") : (more ? "|  " : "   "));
      size_t pl = strlen(piece);
      if (tl + pl >= sizeof tree)
        break;
      memcpy(tree + tl, piece, pl + 1);
      tl += pl;
      tw += 3;
    }
    const char *mark = mt_draw_state_mark(t);
    /* The state marker must stay visible: cut the name, not the mark, and
     * the name between whole characters and escapes (a cut by bytes could
     * split either). */
    size_t mlen = strlen(mark);
    int ml = mlen > 0 ? (int)mlen + 1 : 0;
    int room = width - tw;
    size_t cols = room > 0 ? (size_t)room : 0;
    if (ml > 0)
      cols = room - ml > 1 ? (size_t)(room - ml) : 1;
    if (tl + 1 > len)
      tl = 0;
    memcpy(buf, tree, tl);
    const char *name = mt_target_name(m, t);
    ms__sanitize(buf + tl, len - tl > mlen + 1 ? len - tl - mlen - 1 : len - tl,
                 name, (size_t)-1, cols);
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
  case MT_COL_PROVIDER: {
    char raw[MS_MAX_PROVIDERS * (MS_NAME_MAX + 1)];
    /* Safe; the column is as wide as the widest (content_widths). */
    ms__sanitize(buf, len, mt_target_providers(t, raw, sizeof raw), sizeof raw,
                 width > 0 ? (size_t)width : 0);
    return;
  }
  case MT_COL_TOTAL:
    mt_draw_fmt_bytes(buf, len, bd->total, bd->q_total, width);
    return;
  case MT_COL_RSS:
    if (!ms__field_known(s, MS_F_KERNEL_RSS))
      snprintf(buf, len, "-");
    else
      mt_draw_fmt_bytes(buf, len, (int64_t)s->kernel_rss,
                        ms__field_quality(s, MS_F_KERNEL_RSS), width);
    return;
  case MT_COL_READY:
    mt_draw_fmt_bytes(buf, len, bd->ready, bd->q_ready, width);
    return;
  case MT_COL_PREPARED:
    mt_draw_fmt_bytes(buf, len, bd->prepared, bd->q_prepared, width);
    return;
  case MT_COL_DATA:
    mt_draw_fmt_bytes(buf, len, bd->data, bd->q_data, width);
    return;
  case MT_COL_FRAG:
    mt_draw_fmt_bytes(buf, len, bd->frag_overhead, bd->q_frag_overhead, width);
    return;
  case MT_COL_IDLE:
    mt_draw_fmt_bytes(buf, len, bd->idle, bd->q_idle, width);
    return;
  case MT_COL_OBJECTS: {
    ms_quality_t q = ms__field_quality(s, MS_F_HEAP_OBJECTS);
    char num[32];
    if (q == MS_Q_UNAVAILABLE) {
      snprintf(buf, len, "-");
      return;
    }
    mt_draw_fmt_count(num, sizeof num, (double)s->heap_objects);
    snprintf(buf, len, "%s%s", mt_quality_mark(q), num);
    return;
  }
  case MT_COL_P99:
    if (t->pause_p99_ns < 0 || !ms__field_known(s, MS_F_PAUSE_HIST))
      snprintf(buf, len, "-");
    else
      mt_fmt_duration(buf, len, t->pause_p99_ns);
    return;
  default:
    return;
  }
}

static void put_cell(mt_grid_t *g, int row, int col, int width, int right,
                     const char *text, mt_style_t st) {
  int n = mt_grid_text_width(text);
  if (n > width)
    n = width;
  int at = right ? col + width - n : col;
  mt_grid_puts(g, row, at, text, n, st);
}

/* A meter as htop draws one: "Mem[||||     1.2GiB/15.6GiB]", the bar
 * `bar` columns wide. Returns the columns drawn. */
static int meter(const mt_model_t *m, mt_grid_t *g, int row, int col,
                 const char *label, uint64_t used, uint64_t total, int bar,
                 mt_style_t st) {
  char fig[64], a[32], b[32];
  mt_draw_fmt_bytes(a, sizeof a, (int64_t)used, MS_Q_EXACT, 0);
  mt_draw_fmt_bytes(b, sizeof b, (int64_t)total, MS_Q_EXACT, 0);
  snprintf(fig, sizeof fig, "%s/%s", a, b);
  int x = col + mt_grid_puts(g, row, col, label, -1, MT_ST_HEADER);
  x += mt_grid_puts(g, row, x, "[", -1, MT_ST_DIM);
  int flen = (int)strlen(fig);
  if (bar < flen)
    bar = flen;
  int fill = total > 0 ? (int)((double)used / (double)total * bar + 0.5) : 0;
  if (fill > bar)
    fill = bar;
  mt_grid_fill(g, row, x, fill, m->utf8 ? 0x2502 : '|', st);
  mt_grid_puts(g, row, x + bar - flen, fig, -1, MT_ST_NORMAL);
  x += bar;
  x += mt_grid_puts(g, row, x, "]", -1, MT_ST_DIM);
  return x - col;
}

/* The machine's memory and swap, as htop's meters: used is what is not
 * available (MemTotal - MemAvailable; SwapTotal - SwapFree). */
static void draw_machine(const mt_model_t *m, mt_grid_t *g, int row) {
  const mt_meminfo_t *mi = &m->machine;
  if (!mi->have) {
    mt_grid_puts(g, row, 0, "Mem", -1, MT_ST_HEADER);
    mt_grid_puts(g, row, 4, "-", -1, MT_ST_DIM);
    return;
  }
  uint64_t used =
      mi->mem_total > mi->mem_available ? mi->mem_total - mi->mem_available : 0;
  uint64_t sused =
      mi->swap_total > mi->swap_free ? mi->swap_total - mi->swap_free : 0;
  /* Two meters side by side, each half the line. */
  int bar = g->cols / 2 - 7;
  if (bar > 60)
    bar = 60;
  int x = meter(m, g, row, 0, "Mem", used, mi->mem_total, bar, MT_ST_DATA);
  /* The swap meter only whole: "Swp[", its figures, "]". */
  char a[32], b[32];
  mt_draw_fmt_bytes(a, sizeof a, (int64_t)sused, MS_Q_EXACT, 0);
  mt_draw_fmt_bytes(b, sizeof b, (int64_t)mi->swap_total, MS_Q_EXACT, 0);
  int need = 4 + (int)(strlen(a) + 1 + strlen(b)) + 1;
  if (bar > need - 5)
    need = bar + 5;
  if (x + 2 + need <= g->cols)
    meter(m, g, row, x + 2, "Swp", sused, mi->swap_total, bar, MT_ST_PREPARED);
}

/* The totals of the processes shown that still run. */
static void draw_totals(const mt_model_t *m, mt_grid_t *g, int row) {
  int64_t v[5] = {0, 0, 0, 0, 0};
  ms_quality_t q[5] = {MS_Q_EXACT, MS_Q_EXACT, MS_Q_EXACT, MS_Q_EXACT,
                       MS_Q_EXACT};
  static const char *const label[5] = {"Ready", "Prepared", "data", "frag",
                                       "idle"};
  static const mt_style_t st[5] = {MT_ST_NORMAL, MT_ST_PREPARED, MT_ST_DATA,
                                   MT_ST_FRAG, MT_ST_IDLE};
  size_t live = 0, nv = mt_model_nvisible(m);
  /* Of the processes shown: a filter's total is the filter's. */
  for (size_t i = 0; i < nv; i++) {
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

/* ---- the tree view's total rows ---- */

/* One row of the list: targets[idx], or (the tree view) the total of
 * the tree rooted at targets[idx], after the tree's last member. */
typedef struct list_row_s {
  size_t idx;
  int total;
} list_row_t;

/* The list's rows into *out (freed by the caller; NULL and the plain
 * rows when memory runs out): a total row after each tree of two or
 * more processes in the tree view. Returns how many. */
static size_t list_rows(const mt_model_t *m, list_row_t **out) {
  size_t nv = mt_model_nvisible(m), n = 0;
  list_row_t *r = m->tree ? malloc((2 * nv + 1) * sizeof *r) : NULL;

  *out = r;
  if (r == NULL)
    return nv;
  for (size_t i = 0; i < nv;) {
    mt_tree_total_t tt;
    size_t k = mt_model_tree_total(m, i, &tt);
    if (k == 0)
      k = 1;
    for (size_t j = i; j < i + k && j < nv; j++)
      r[n++] = (list_row_t){j, 0};
    if (k >= 2)
      r[n++] = (list_row_t){i, 1};
    i += k;
  }
  return n;
}

static list_row_t row_at(const list_row_t *rows, size_t i) {
  return rows != NULL ? rows[i] : (list_row_t){i, 0};
}

/* The first row drawn, so that the selection's row is on screen. */
static size_t first_row(const list_row_t *rows, size_t n, size_t sel,
                        int nrows) {
  size_t at = sel;
  for (size_t i = 0; rows != NULL && i < n; i++)
    if (rows[i].idx == sel && !rows[i].total) {
      at = i;
      break;
    }
  return nrows > 0 && at >= (size_t)nrows ? at - (size_t)nrows + 1 : 0;
}

/* A tree's total row: the figures under TOTAL and RSS, and in the name's
 * place what they are. */
static void draw_total_row(const mt_model_t *m, mt_grid_t *g, int row,
                           size_t root, const int shown[MT_COL__COUNT],
                           const int width[MT_COL__COUNT],
                           const int x[MT_COL__COUNT]) {
  mt_tree_total_t tt;
  char text[256], fig[32], shared[64];

  mt_model_tree_total(m, root, &tt);
  if (shown[MT_COL_TOTAL] && tt.members > 0) {
    mt_draw_fmt_bytes(text, sizeof text, tt.total, tt.q_total,
                      width[MT_COL_TOTAL]);
    put_cell(g, row, x[MT_COL_TOTAL], width[MT_COL_TOTAL], 1, text,
             MT_ST_HEADER);
  }
  if (shown[MT_COL_RSS]) {
    if (tt.have_rss)
      mt_draw_fmt_bytes(text, sizeof text, tt.rss, MS_Q_EXACT,
                        width[MT_COL_RSS]);
    else
      snprintf(text, sizeof text, "-");
    put_cell(g, row, x[MT_COL_RSS], width[MT_COL_RSS], 1, text, MT_ST_HEADER);
  }
  if (shown[MT_COL_NAME]) {
    if (tt.have_rss) {
      mt_draw_fmt_bytes(fig, sizeof fig, tt.shared, MS_Q_EXACT, 0);
      snprintf(shared, sizeof shared, ", shared %s once", fig);
    } else {
      shared[0] = '\0';
    }
    snprintf(text, sizeof text, "%s tree of %d (%zu)%s",
             m->utf8 ? "\u03a3" : "=", m->targets[root]->pid, tt.members,
             shared);
    put_cell(g, row, x[MT_COL_NAME], width[MT_COL_NAME], 0, text, MT_ST_DIM);
  }
}

/* ========================================================= sort picker ===
 * F6, as htop's: a panel over the left of the list, "Sort by" on the
 * column titles' row and one entry per sort key below, the highlighted
 * one (m->sort_pick) selected, the current one marked; scrolled so that
 * the highlighted entry shows when the screen is short. */

#define PICKER_WIDTH 12

/* The picker on a list drawn in rows [top, bottom): its entries' first
 * row, the first key shown there, and how many show. */
static void picker_plan(const mt_model_t *m, int top, int bottom, int *row0,
                        int *from, int *n) {
  int avail;
  *row0 = top + MT_LIST_HEAD;
  avail = bottom - *row0;
  *n = avail < 0 ? 0 : avail < MT_SORT__COUNT ? avail : MT_SORT__COUNT;
  *from = (int)m->sort_pick >= *n ? (int)m->sort_pick - *n + 1 : 0;
}

static void draw_picker(const mt_model_t *m, mt_grid_t *g, int top,
                        int bottom) {
  int row0, from, n;

  if (m->input_mode != MT_INPUT_SORT || bottom - top < MT_LIST_HEAD)
    return;
  picker_plan(m, top, bottom, &row0, &from, &n);
  mt_grid_clip(g, top, 0, bottom - top, PICKER_WIDTH + 1);
  mt_grid_fill(g, row0 - 1, 0, PICKER_WIDTH, ' ', MT_ST_SORT);
  mt_grid_puts(g, row0 - 1, 1, "Sort by", -1, MT_ST_SORT);
  for (int r = row0; r < bottom; r++) {
    int key = from + (r - row0);
    mt_style_t st = key == (int)m->sort_pick ? MT_ST_SELECTED : MT_ST_NORMAL;

    mt_grid_fill(g, r, 0, PICKER_WIDTH + 1, ' ', MT_ST_NORMAL);
    if (r - row0 >= n)
      continue;
    mt_grid_fill(g, r, 0, PICKER_WIDTH, ' ', st);
    mt_grid_printf(g, r, 0, st, "%c%s", key == (int)m->sort ? '*' : ' ',
                   mt_view_sort_title((mt_sort_t)key));
  }
  mt_grid_unclip(g);
}

/* Draws text from row on, wrapped at spaces to the grid's width (a word
 * wider than a row is cut), on at most nrows rows. Returns the rows it
 * took. */
static int draw_wrapped(mt_grid_t *g, int row, int nrows, const char *text,
                        mt_style_t st) {
  int avail = g->cols - 2, used = 0;
  char line[512];

  while (*text != '\0' && used < nrows) {
    size_t len = 0, fit = 0;
    while (*text == ' ')
      text++;
    /* Words while they fit: fit is the end of the last one that did. */
    for (;;) {
      while (text[len] != '\0' && text[len] != ' ')
        len++;
      if (len >= sizeof line)
        break;
      memcpy(line, text, len);
      line[len] = '\0';
      if (fit > 0 && mt_grid_text_width(line) > avail)
        break;
      fit = len;
      if (text[len] == '\0')
        break;
      len++;
    }
    if (fit == 0)
      break;
    memcpy(line, text, fit);
    line[fit] = '\0';
    /* One word wider than the line (a long directory): cut where the
     * line ends, on a character's boundary, the rest on the next. */
    while (fit > 1 && mt_grid_text_width(line) > avail) {
      do
        fit--;
      while (fit > 1 && ((unsigned char)text[fit] & 0xc0) == 0x80);
      line[fit] = '\0';
    }
    mt_grid_puts(g, row + used++, 1, line, avail, st);
    text += fit;
  }
  return used;
}

/* The empty list's lines when the user's socket directory is not listed
 * (m->list_refused: "not trusting the socket directory DIR: CAUSE;
 * FIX"): the cause, then the fix from a row of its own, both wrapped, so
 * that a narrow terminal still shows what to do. */
static void draw_refused(const mt_model_t *m, mt_grid_t *g, int row,
                         int nrows) {
  char text[sizeof m->list_refused + 64];
  const char *fix = strstr(m->list_refused, "; ");
  int cause =
      fix != NULL ? (int)(fix - m->list_refused) : (int)strlen(m->list_refused);

  snprintf(text, sizeof text, "No process listed: memtop is %.*s.", cause,
           m->list_refused);
  int used = draw_wrapped(g, row, nrows, text, MT_ST_ERROR);
  if (fix != NULL) {
    snprintf(text, sizeof text, "To list it: %s", fix + 2);
    draw_wrapped(g, row + used, nrows - used, text, MT_ST_ERROR);
  }
}

static void draw_list(const mt_model_t *m, mt_grid_t *g, int top, int bottom) {
  int shown[MT_COL__COUNT], width[MT_COL__COUNT], x[MT_COL__COUNT];
  if (bottom <= top)
    return;
  mt_grid_clip(g, top, 0, bottom - top, g->cols);
  draw_machine(m, g, top);
  if (bottom - top >= 2)
    draw_totals(m, g, top + 1);
  if (bottom - top < MT_LIST_HEAD) {
    mt_grid_unclip(g);
    return;
  }

  /* Column headers, the sort column marked with '*' ('^' reversed). */
  int hrow = top + MT_LIST_HEAD - 1;
  plan_columns(m, g->cols, shown, width, x);
  mt_grid_fill(g, hrow, 0, g->cols, ' ', MT_ST_COLUMNS);
  for (int i = 0; i < MT_COL__COUNT; i++) {
    if (!shown[i])
      continue;
    char title[32];
    int sorted = columns[i].sort == (int)m->sort;
    snprintf(title, sizeof title, "%s%s", columns[i].title,
             sorted ? (m->sort_reverse ? "^" : "*") : "");
    put_cell(g, hrow, x[i], width[i], columns[i].right, title,
             sorted ? MT_ST_SORT : MT_ST_COLUMNS);
  }

  int first = hrow + 1;
  int nrows = bottom - first;
  size_t nv = mt_model_nvisible(m);
  if (nv == 0) {
    if (nrows > 0 && m->ntargets > 0 && m->filter[0] == '\0' &&
        m->filter_uid >= 0)
      /* Only the user filter (-u, u) hides them: F4 would not help. */
      mt_grid_printf(g, first, 1, MT_ST_DIM,
                     "No process of uid %d (%zu of other users hidden): u "
                     "steps through the users, then shows all.",
                     m->filter_uid, m->ntargets);
    else if (nrows > 0 && m->ntargets > 0)
      mt_grid_printf(g, first, 1, MT_ST_DIM,
                     "No process matches the filter (%zu hidden): F4 then "
                     "Esc shows all%s.",
                     m->ntargets,
                     m->filter_uid >= 0 ? ", u steps through the users" : "");
    else if (nrows > 0 && m->list_refused[0] != '\0')
      draw_refused(m, g, first, nrows);
    else if (nrows > 0)
      mt_grid_puts(g, first, 1,
                   "No attachable process. Watch one with "
                   "`memtop run -- CMD`, or link it with -lmemstats.",
                   -1, MT_ST_DIM);
    mt_grid_unclip(g);
    return;
  }
  /* Scroll so that the selection is on screen. */
  size_t sel = m->selected < nv ? m->selected : nv - 1;
  list_row_t *rows;
  size_t nr = list_rows(m, &rows);
  size_t from = first_row(rows, nr, sel, nrows);
  for (int r = 0; r < nrows && from + (size_t)r < nr; r++) {
    list_row_t lr = row_at(rows, from + (size_t)r);
    size_t idx = lr.idx;
    const mt_target_t *t = m->targets[idx];
    int row = first + r;
    if (lr.total) {
      draw_total_row(m, g, row, idx, shown, width, x);
      continue;
    }
    mt_style_t st = idx == sel            ? MT_ST_SELECTED
                    : t->state != MT_LIVE ? MT_ST_EXITED
                                          : MT_ST_NORMAL;
    if (idx == sel)
      mt_grid_fill(g, row, 0, g->cols, ' ', st);
    for (int i = 0; i < MT_COL__COUNT; i++) {
      if (!shown[i])
        continue;
      char text[1024];
      cell_text(m, t, i, width[i], text, sizeof text);
      put_cell(g, row, x[i], width[i], columns[i].right, text, st);
    }
  }
  free(rows);
  mt_grid_unclip(g);
}

int mt_view_list_rows(int rows) {
  /* The title, the list's head and the status line. */
  int n = rows - 2 - MT_LIST_HEAD;
  return n > 0 ? n : 0;
}

void mt_view_draw_list(const mt_model_t *m, mt_grid_t *g, int top, int bottom) {
  draw_list(m, g, top, bottom);
  draw_picker(m, g, top, bottom);
}

int mt_view_list_at(const mt_model_t *m, int rows, int cols, int row, int col,
                    size_t *index, mt_sort_t *sort) {
  int shown[MT_COL__COUNT], width[MT_COL__COUNT], x[MT_COL__COUNT];
  int hrow = MT_LIST_TOP + MT_LIST_HEAD - 1;
  int nrows = mt_view_list_rows(rows);
  if (col < 0 || col >= cols)
    return MT_LIST_AT_NONE;
  if (m->input_mode == MT_INPUT_SORT) {
    /* The list's rows end above the status line (view.c). */
    int row0, from, n;

    picker_plan(m, MT_LIST_TOP, rows - 1, &row0, &from, &n);
    if (col >= PICKER_WIDTH || row < row0 || row >= row0 + n)
      return MT_LIST_AT_NONE;
    *sort = (mt_sort_t)(from + (row - row0));
    return MT_LIST_AT_PICKER;
  }
  if (row == hrow) {
    plan_columns(m, cols, shown, width, x);
    for (int i = 0; i < MT_COL__COUNT; i++) {
      if (shown[i] && col >= x[i] && col <= x[i] + width[i]) {
        *sort = (mt_sort_t)columns[i].sort;
        return MT_LIST_AT_HEADER;
      }
    }
    return MT_LIST_AT_NONE;
  }
  /* The rows as mt_view_draw_list() scrolled them. */
  size_t nv = mt_model_nvisible(m);
  if (row <= hrow || row > hrow + nrows || nv == 0)
    return MT_LIST_AT_NONE;
  size_t sel = m->selected < nv ? m->selected : nv - 1;
  list_row_t *lrows;
  size_t nr = list_rows(m, &lrows);
  size_t from = first_row(lrows, nr, sel, nrows);
  size_t at = from + (size_t)(row - hrow - 1);
  list_row_t lr = at < nr ? row_at(lrows, at) : (list_row_t){nv, 0};
  free(lrows);
  /* A tree's total row selects its root. */
  if (lr.idx >= nv)
    return MT_LIST_AT_NONE;
  *index = lr.idx;
  return MT_LIST_AT_ROW;
}
