/*
 * view.c - the live view's frame (title line, status line, help screen),
 * the helpers its screens share, and the keys.
 *
 * Everything here reads or changes the model only: the frame is drawn into
 * a grid (view_screen.c) that the curses backend puts on the terminal, and
 * a key is a pure function of the model, so both are tested without one.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/parse.h"
#include "common/sanitize.h"
#include "emit/emit.h"
#include "memstats.h"
#include "tui/view.h"

/* ============================================================ helpers === */

char *mt_view_fmt_bytes(char *buf, size_t len, int64_t bytes, ms_quality_t q,
                        int width) {
  ms__fmt_bytes_q(buf, len, bytes, q);
  /* "~1023.9MiB" is ten columns: in a narrow column, give up the decimal
   * rather than cut the unit off. */
  char *dot = strchr(buf, '.');
  if (width > 0 && (int)strlen(buf) > width && dot != NULL && dot[1] != '\0')
    memmove(dot, dot + 2, strlen(dot + 2) + 1);
  return buf;
}

char *mt_view_fmt_count(char *buf, size_t len, double v) {
  if (v < 0)
    snprintf(buf, len, "-");
  else if (v < 10000)
    snprintf(buf, len, "%.0f", v);
  else if (v < 1e6)
    snprintf(buf, len, "%.1fk", v / 1e3);
  else if (v < 1e9)
    snprintf(buf, len, "%.1fM", v / 1e6);
  else
    snprintf(buf, len, "%.1fG", v / 1e9);
  return buf;
}

void mt_view_safe_name(char *out, size_t len, const char *name) {
  /* A program name is whatever bytes the program chose: it is drawn in
   * its safe form (common/sanitize.h), cut whole to the buffer. */
  ms__sanitize(out, len, name, (size_t)-1, (size_t)-1);
}

const char *mt_view_state_mark(const mt_target_t *t) {
  switch (t->state) {
  case MT_EXITED:
    return "[exited]";
  case MT_UNREACHABLE:
    return "[unreachable]";
  case MT_CONNECTING:
    return "[connecting]";
  case MT_LIVE:
  default:
    return "";
  }
}

uint32_t mt_view_fill(int part, int utf8) {
  /* Distinct fill characters, so the parts stay apart without colour:
   * full, dark, medium and light shade blocks, or # = . ~ in ASCII. */
  static const uint32_t u[4] = {0x2588, 0x2593, 0x2592, 0x2591};
  static const char a[4] = {'#', '=', '.', '~'};
  if (part < 0 || part > 3)
    return ' ';
  return utf8 ? u[part] : (uint32_t)a[part];
}

const mt_target_t *mt_view_detail_target(const mt_model_t *m) {
  for (size_t i = 0; i < m->ntargets; i++)
    if (m->targets[i]->pid == m->detail_pid)
      return m->targets[i];
  return NULL;
}

int mt_view_list_rows(int rows) {
  /* Title, totals, column header and status line. */
  return rows > 4 ? rows - 4 : 0;
}

/* ===================================================== title, status === */

/* The time of the newest snapshot on screen: what the figures describe,
 * and frozen while paused. */
static uint64_t newest_time(const mt_model_t *m) {
  uint64_t t = 0;
  for (size_t i = 0; i < m->ntargets; i++)
    if (m->targets[i]->have_snapshot && m->targets[i]->snap.time_unix_ns > t)
      t = m->targets[i]->snap.time_unix_ns;
  return t;
}

static void draw_title(const mt_model_t *m, mt_grid_t *g) {
  char left[256], right[64], name[MS_NAME_MAX];
  const mt_target_t *t = mt_view_detail_target(m);
  mt_grid_fill(g, 0, 0, g->cols, ' ', MT_ST_TITLE);

  if (m->screen == MT_SCREEN_HELP) {
    snprintf(left, sizeof left, "memtop %s  help", MS_VERSION_STRING);
  } else if (m->screen == MT_SCREEN_DETAIL && t != NULL) {
    char prov[MS_MAX_PROVIDERS * (MS_NAME_MAX + 1)], safe[128];
    size_t n = 0;
    prov[0] = '\0';
    for (uint32_t i = 0;
         t->have_snapshot && i < t->snap.nproviders && i < MS_MAX_PROVIDERS;
         i++) {
      int w = snprintf(prov + n, sizeof prov - n, "%s%.*s", i ? "+" : "",
                       MS_NAME_MAX, t->snap.providers[i]);
      if (w < 0 || (size_t)w >= sizeof prov - n)
        break;
      n += (size_t)w;
    }
    mt_view_safe_name(name, sizeof name, t->comm);
    /* At most 60 columns of providers, cut between whole characters and
     * escapes; with the name, all of it fits in left. */
    ms__sanitize(safe, sizeof safe, prov, sizeof prov, 60);
    snprintf(left, sizeof left, "memtop  %d %s%s%s%s%s", t->pid, name,
             t->state == MT_LIVE ? "" : " ", mt_view_state_mark(t),
             safe[0] ? "  " : "", safe);
  } else {
    size_t gone = 0;
    for (size_t i = 0; i < m->ntargets; i++)
      gone += m->targets[i]->state == MT_EXITED;
    int n =
        snprintf(left, sizeof left, "memtop %s  %zu process%s",
                 MS_VERSION_STRING, m->ntargets, m->ntargets == 1 ? "" : "es");
    if (gone > 0 && n > 0 && (size_t)n < sizeof left)
      snprintf(left + n, sizeof left - (size_t)n, " (%zu exited)", gone);
  }
  mt_grid_puts(g, 0, 0, left, g->cols, MT_ST_TITLE);

  /* Right side: PAUSED, the refresh delay and the time of the figures. */
  int n = snprintf(right, sizeof right, "d=%.1fs", m->delay_s);
  uint64_t now = newest_time(m);
  if (now > 0 && n > 0 && (size_t)n < sizeof right) {
    time_t secs = (time_t)(now / 1000000000u);
    struct tm tm;
    if (localtime_r(&secs, &tm) != NULL)
      strftime(right + n, sizeof right - (size_t)n, "  %H:%M:%S", &tm);
  }
  int rlen = (int)strlen(right);
  int llen = (int)strlen(left);
  int pause_len = m->paused ? 8 : 0; /* "PAUSED" and two blanks */
  /* The right side goes only where it does not cover the left. */
  if (llen + 2 + rlen + pause_len <= g->cols) {
    mt_grid_puts(g, 0, g->cols - rlen, right, -1, MT_ST_TITLE);
  } else {
    rlen = 0;
    pause_len = m->paused ? 8 : 0;
  }
  if (m->paused) {
    int col = g->cols - rlen - pause_len;
    if (col < llen + 1)
      col = llen + 1;
    mt_grid_puts(g, 0, col, "PAUSED", -1, MT_ST_PAUSED);
  }
}

static void draw_status(const mt_model_t *m, mt_grid_t *g, int row) {
  const mt_target_t *t = mt_view_detail_target(m);
  /* Messages quote targets' reasons and names: drawn in their safe form. */
  char safe[4 * sizeof t->error + 1];
  mt_grid_fill(g, row, 0, g->cols, ' ', MT_ST_STATUS);
  if (m->prompting) {
    int n = mt_grid_puts(g, row, 0, "Delay in seconds (at least 0.1): ", -1,
                         MT_ST_STATUS);
    n += mt_grid_puts(g, row, n, m->input, -1, MT_ST_STATUS);
    mt_grid_putc(g, row, n, '_', MT_ST_STATUS);
  } else if (m->status[0] != '\0') {
    mt_view_safe_name(safe, sizeof safe, m->status);
    mt_grid_puts(g, row, 0, safe, -1, MT_ST_ERROR);
  } else if (m->screen == MT_SCREEN_DETAIL && t != NULL &&
             t->state != MT_LIVE && t->error[0] != '\0') {
    mt_view_safe_name(safe, sizeof safe, t->error);
    mt_grid_printf(g, row, 0, MT_ST_ERROR, "%s %s", mt_view_state_mark(t),
                   safe);
  } else if (m->screen == MT_SCREEN_HELP) {
    mt_grid_puts(g, row, 0, "Press any key to go back, q to quit.", -1,
                 MT_ST_STATUS);
  } else if (m->screen == MT_SCREEN_DETAIL) {
    mt_grid_puts(g, row, 0,
                 "Esc back  Up/Down other process  space pause  d delay  "
                 "h help  q quit",
                 -1, MT_ST_STATUS);
  } else {
    mt_grid_puts(g, row, 0,
                 "Enter open  s/</> sort  r reverse  space pause  d delay  "
                 "h help  q quit",
                 -1, MT_ST_STATUS);
  }
}

/* ============================================================== help === */

static void draw_help(const mt_model_t *m, mt_grid_t *g, int top, int bottom) {
  static const char *const keys[][2] = {
      {"Up Down PgUp PgDn", "move in the list"},
      {"Home End", "first / last process"},
      {"Enter", "open the selected process"},
      {"Esc", "back to the list"},
      {"s >  /  <", "sort by the next / previous column"},
      {"r", "reverse the sort order"},
      {"a", "allocation sites: in use / allocation rate"},
      {"c", "lower panel: size classes / allocation sites"},
      {"[  ]  e", "select a site; e: its call chain / all sites"},
      {"space", "pause / resume the display"},
      {"d", "refresh delay in seconds (at least 0.1)"},
      {"h ?", "this help"},
      {"q", "quit"},
  };
  static const char *const parts[4][2] = {
      {"data", "live objects and the metadata in use"},
      {"fragOverhead", "in-use pages not holding objects"},
      {"idle", "mapped and backed, holding nothing"},
      {"Prepared", "handed back to the OS (HeapReleased)"},
  };
  int r = top;
  mt_grid_clip(g, top, 0, bottom - top, g->cols);
  mt_grid_puts(g, r++, 0, "Keys", -1, MT_ST_HEADER);
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++, r++) {
    mt_grid_puts(g, r, 2, keys[i][0], -1, MT_ST_NORMAL);
    mt_grid_puts(g, r, 22, keys[i][1], -1, MT_ST_DIM);
  }
  r++;
  mt_grid_puts(g, r++, 0, "Ready+Prepared: everything the allocator mapped", -1,
               MT_ST_HEADER);
  for (int i = 0; i < 4; i++, r++) {
    static const mt_style_t st[4] = {MT_ST_DATA, MT_ST_FRAG, MT_ST_IDLE,
                                     MT_ST_PREPARED};
    mt_grid_putc(g, r, 2, mt_view_fill(i, m->utf8), st[i]);
    mt_grid_putc(g, r, 3, mt_view_fill(i, m->utf8), st[i]);
    mt_grid_puts(g, r, 5, parts[i][0], -1, MT_ST_NORMAL);
    mt_grid_puts(g, r, 19, parts[i][1], -1, MT_ST_DIM);
  }
  r++;
  mt_grid_puts(g, r++, 0,
               "~ estimated figure   - not available from the "
               "provider",
               -1, MT_ST_DIM);
  mt_grid_unclip(g);
}

/* ============================================================ render === */

void mt_view_render(const mt_model_t *m, mt_grid_t *g) {
  mt_grid_clear(g);
  if (g->rows <= 0 || g->cols <= 0)
    return;
  draw_title(m, g);
  if (g->rows == 1)
    return;
  int status_row = g->rows - 1;
  draw_status(m, g, status_row);
  const mt_target_t *t = mt_view_detail_target(m);
  switch (m->screen) {
  case MT_SCREEN_HELP:
    draw_help(m, g, 1, status_row);
    break;
  case MT_SCREEN_DETAIL:
    if (t != NULL) {
      mt_view_draw_detail(m, t, g, 1, status_row);
      break;
    }
    /* The process is gone from the model: show the list instead. */
    /* fall through */
  case MT_SCREEN_LIST:
  default:
    mt_view_draw_list(m, g, 1, status_row);
    break;
  }
}

/* ============================================================== keys === */

static mt_action_t prompt_key(mt_model_t *m, int key) {
  size_t n = strlen(m->input);
  if (key == MT_KEY_ESC) {
    m->prompting = 0;
    m->status[0] = '\0';
    return MT_ACT_REDRAW;
  }
  if (key == MT_KEY_ENTER || key == '\r') {
    double v;
    m->prompting = 0;
    if (ms__parse_double(m->input, MT_DELAY_MIN, MT_DELAY_MAX, &v) != 0) {
      snprintf(m->status, sizeof m->status,
               "Invalid delay \"%.32s\": give seconds as a number from %g "
               "to %g, e.g. 0.5",
               m->input, MT_DELAY_MIN, MT_DELAY_MAX);
      return MT_ACT_REDRAW;
    }
    m->delay_s = v;
    snprintf(m->status, sizeof m->status, "Refreshing every %gs", v);
    return MT_ACT_DELAY;
  }
  if (key == MT_KEY_BACKSPACE || key == '\b') {
    if (n > 0)
      m->input[n - 1] = '\0';
    return MT_ACT_REDRAW;
  }
  if (key >= 0x20 && key < 0x7f && n + 1 < sizeof m->input) {
    m->input[n] = (char)key;
    m->input[n + 1] = '\0';
    return MT_ACT_REDRAW;
  }
  return MT_ACT_NONE;
}

static void select_index(mt_model_t *m, long i) {
  if (m->ntargets == 0) {
    m->selected = 0;
    return;
  }
  if (i < 0)
    i = 0;
  if ((size_t)i >= m->ntargets)
    i = (long)m->ntargets - 1;
  m->selected = (size_t)i;
}

static size_t index_of(const mt_model_t *m, int pid) {
  for (size_t i = 0; i < m->ntargets; i++)
    if (m->targets[i]->pid == pid)
      return i;
  return m->ntargets;
}

static void resort(mt_model_t *m, int sort) {
  m->sort = (mt_sort_t)((sort + MT_SORT__COUNT) % MT_SORT__COUNT);
  mt_model_sort(m);
}

/* Keys that do the same on the list and the detail view: help, pause,
 * the delay prompt, sorting. MT_ACT_NONE for any other key. */
static mt_action_t common_key(mt_model_t *m, int key) {
  switch (key) {
  case 'h':
  case 'H':
  case '?':
    m->prev_screen = m->screen;
    m->screen = MT_SCREEN_HELP;
    return MT_ACT_REDRAW;
  case ' ':
    m->paused = !m->paused;
    return MT_ACT_REDRAW;
  case 'd':
  case 'D':
    m->prompting = 1;
    m->input[0] = '\0';
    return MT_ACT_REDRAW;
  case 's':
  case '>':
    resort(m, (int)m->sort + 1);
    return MT_ACT_REDRAW;
  case '<':
    resort(m, (int)m->sort - 1);
    return MT_ACT_REDRAW;
  case 'r':
  case 'R':
    m->sort_reverse = !m->sort_reverse;
    mt_model_sort(m);
    return MT_ACT_REDRAW;
  default:
    return MT_ACT_NONE;
  }
}

/* As in htop, any key leaves the help screen. */
static mt_action_t help_key(mt_model_t *m) {
  m->screen =
      m->prev_screen == MT_SCREEN_HELP ? MT_SCREEN_LIST : m->prev_screen;
  return MT_ACT_REDRAW;
}

/* One process: back to the list, or step to a neighbour. */
static mt_action_t detail_key(mt_model_t *m, int key) {
  size_t i = index_of(m, m->detail_pid);

  switch (key) {
  case 'a':
  case 'A':
    /* The allocation sites' panel: in use, or allocation rate. */
    m->sites_by_rate = !m->sites_by_rate;
    return MT_ACT_REDRAW;
  case 'c':
  case 'C':
    /* The lower panel: the size classes, or the sites. */
    m->show_classes = !m->show_classes;
    return MT_ACT_REDRAW;
  case 'e':
  case 'E':
    /* The selected site's call chain, or the list of sites. */
    m->site_chain = !m->site_chain;
    return MT_ACT_REDRAW;
  case '[':
  case ']': {
    /* Another site (the panel keeps the row within its list). */
    const mt_target_t *t = mt_model_find(m, m->detail_pid);
    size_t n = t != NULL ? t->nsites : 0;

    if (key == '[' && m->site_sel > 0)
      m->site_sel--;
    else if (key == ']' && m->site_sel + 1 < n)
      m->site_sel++;
    else
      return MT_ACT_NONE;
    return MT_ACT_REDRAW;
  }
  case MT_KEY_ESC:
  case MT_KEY_LEFT:
  case MT_KEY_BACKSPACE:
    m->screen = MT_SCREEN_LIST;
    if (i < m->ntargets)
      m->selected = i;
    return MT_ACT_REDRAW;
  case MT_KEY_UP:
  case MT_KEY_DOWN:
    /* Step to the neighbour in the list's order without leaving. */
    if (i >= m->ntargets)
      return MT_ACT_NONE;
    select_index(m, (long)i + (key == MT_KEY_UP ? -1 : 1));
    m->detail_pid = m->targets[m->selected]->pid;
    return MT_ACT_REDRAW;
  default:
    return MT_ACT_NONE;
  }
}

/* The list: move the selection, open a process. */
static mt_action_t list_key(mt_model_t *m, int key) {
  long page = m->page_rows > 0 ? m->page_rows : 10;
  long sel = (long)m->selected;

  switch (key) {
  case MT_KEY_UP:
    select_index(m, sel - 1);
    break;
  case MT_KEY_DOWN:
    select_index(m, sel + 1);
    break;
  case MT_KEY_PGUP:
    select_index(m, sel - page);
    break;
  case MT_KEY_PGDN:
    select_index(m, sel + page);
    break;
  case MT_KEY_HOME:
    select_index(m, 0);
    break;
  case MT_KEY_END:
    select_index(m, (long)m->ntargets - 1);
    break;
  case MT_KEY_ENTER:
  case '\r':
  case MT_KEY_RIGHT:
    if (m->ntargets == 0)
      return MT_ACT_NONE;
    select_index(m, sel);
    m->detail_pid = m->targets[m->selected]->pid;
    m->screen = MT_SCREEN_DETAIL;
    break;
  case MT_KEY_ESC:
    break; /* clears the message, above */
  default:
    return MT_ACT_NONE;
  }
  return MT_ACT_REDRAW;
}

static mt_action_t apply_key(mt_model_t *m, int key) {
  mt_action_t a;

  if (m->prompting)
    return prompt_key(m, key);
  if (key == MT_KEY_RESIZE)
    return MT_ACT_REDRAW;
  if (key == 'q' || key == 'Q')
    return MT_ACT_QUIT;

  /* Any other key replaces the last message: it has been seen. */
  m->status[0] = '\0';

  if (m->screen == MT_SCREEN_HELP)
    return help_key(m);
  a = common_key(m, key);
  if (a != MT_ACT_NONE)
    return a;
  if (m->screen == MT_SCREEN_DETAIL)
    return detail_key(m, key);
  return list_key(m, key);
}

mt_action_t mt_view_key(mt_model_t *m, int key) {
  int had_message = !m->prompting && m->status[0] != '\0';
  mt_action_t a = apply_key(m, key);
  /* A key that did nothing else still took the message away. */
  if (a == MT_ACT_NONE && had_message && m->status[0] == '\0')
    a = MT_ACT_REDRAW;
  return a;
}
