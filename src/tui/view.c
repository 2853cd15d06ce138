/*
 * view.c - the live view's frame (title line, status line) and which
 * screen fills the rest.
 *
 * Everything here reads the model only: the frame is drawn into a grid
 * (grid.h) that the curses backend puts on the terminal, so it is tested
 * without one.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/sanitize.h"
#include "emit/emit.h"
#include "memstats.h"
#include "tui/draw.h"
#include "tui/view.h"
#include "tui/view_detail.h"
#include "tui/view_help.h"
#include "tui/view_list.h"
#include "tui/view_setup.h"

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
  const mt_target_t *t = mt_model_find(m, m->detail_pid);
  mt_grid_fill(g, 0, 0, g->cols, ' ', MT_ST_TITLE);

  if (m->screen == MT_SCREEN_HELP) {
    snprintf(left, sizeof left, "memtop %s  help", MS_VERSION_STRING);
  } else if (m->screen == MT_SCREEN_SETUP) {
    snprintf(left, sizeof left, "memtop %s  setup", MS_VERSION_STRING);
  } else if (m->screen == MT_SCREEN_DETAIL && t != NULL) {
    char prov[MS_MAX_PROVIDERS * (MS_NAME_MAX + 1)], safe[128];
    mt_target_providers(t, prov, sizeof prov);
    mt_draw_safe_name(name, sizeof name, t->comm);
    /* At most 60 columns of providers, cut between whole characters and
     * escapes; with the name, all of it fits in left. */
    ms__sanitize(safe, sizeof safe, prov, sizeof prov, 60);
    snprintf(left, sizeof left, "memtop  %d %s%s%s%s%s", t->pid, name,
             t->state == MT_LIVE ? "" : " ", mt_draw_state_mark(t),
             safe[0] ? "  " : "", safe);
  } else {
    size_t gone = 0, nv = mt_model_nvisible(m);
    for (size_t i = 0; i < m->ntargets; i++)
      gone += m->targets[i]->state == MT_EXITED;
    int n =
        snprintf(left, sizeof left, "memtop %s  %zu process%s",
                 MS_VERSION_STRING, m->ntargets, m->ntargets == 1 ? "" : "es");
    if (gone > 0 && n > 0 && (size_t)n < sizeof left)
      n += snprintf(left + n, sizeof left - (size_t)n, " (%zu exited)", gone);
    if (nv < m->ntargets && n > 0 && (size_t)n < sizeof left)
      snprintf(left + n, sizeof left - (size_t)n, ", %zu shown", nv);
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

/* "Stop CMD (PID n)?": the command's name shortened so that the keys
 * that answer stay on the line. */
static void draw_quit_prompt(const mt_model_t *m, mt_grid_t *g, int row) {
  static const char keys[] =
      "? y: stop  d: detach (keeps running)  other: stay";
  const mt_target_t *t = mt_model_find(m, m->run_pid);
  char name[4 * MS_NAME_MAX + 1], head[4 * MS_NAME_MAX + 32];
  int room, n;

  mt_draw_safe_name(name, sizeof name,
                    t != NULL && t->comm[0] ? t->comm : "the command");
  n = snprintf(head, sizeof head, "Stop  (PID %d)", m->run_pid);
  room = g->cols - (int)(sizeof keys - 1) - n;
  snprintf(head, sizeof head, "Stop %.*s (PID %d)", room > 4 ? room : 4, name,
           m->run_pid);
  n = mt_grid_puts(g, row, 0, head, -1, MT_ST_STATUS);
  mt_grid_puts(g, row, n, keys, -1, MT_ST_STATUS);
}

/* "Attach memtop to NAME (PID n)?": what it does, and the keys. */
static void draw_attach_prompt(const mt_model_t *m, mt_grid_t *g, int row) {
  static const char keys[] = "? ptrace, ~1 ms  y: attach  other: no";
  const mt_target_t *t = mt_model_find(m, m->attach_pid);
  char name[4 * MS_NAME_MAX + 1], head[4 * MS_NAME_MAX + 48];
  int room, n;

  mt_draw_safe_name(name, sizeof name,
                    t != NULL && t->comm[0] ? t->comm : "the process");
  n = snprintf(head, sizeof head, "Attach memtop to  (PID %d)", m->attach_pid);
  room = g->cols - (int)(sizeof keys - 1) - n;
  snprintf(head, sizeof head, "Attach memtop to %.*s (PID %d)",
           room > 4 ? room : 4, name, m->attach_pid);
  n = mt_grid_puts(g, row, 0, head, -1, MT_ST_STATUS);
  mt_grid_puts(g, row, n, keys, -1, MT_ST_STATUS);
}

static void draw_status(const mt_model_t *m, mt_grid_t *g, int row) {
  const mt_target_t *t = mt_model_find(m, m->detail_pid);
  /* Messages quote targets' reasons and names: drawn in their safe form. */
  char safe[4 * sizeof t->error + 1];
  mt_grid_fill(g, row, 0, g->cols, ' ', MT_ST_STATUS);
  if (m->input_mode == MT_INPUT_QUIT) {
    draw_quit_prompt(m, g, row);
  } else if (m->input_mode == MT_INPUT_ATTACH) {
    draw_attach_prompt(m, g, row);
  } else if (m->input_mode == MT_INPUT_SORT) {
    mt_grid_puts(g, row, 0,
                 "Sort by: Up/Down choose  Enter sort  Esc cancel  "
                 "(or click one)",
                 -1, MT_ST_STATUS);
  } else if (m->input_mode != MT_INPUT_NONE) {
    static const char *const ask[] = {
        [MT_INPUT_DELAY] = "Delay in seconds (at least 0.1): ",
        [MT_INPUT_SEARCH] = "Search (F3 next, Enter done, Esc cancel): ",
        [MT_INPUT_FILTER] = "Filter by name, user or PID (Enter done, Esc "
                            "clear): ",
    };
    /* What was typed is the user's own, but may hold any byte. */
    mt_draw_safe_name(safe, sizeof safe, m->input);
    int n = mt_grid_puts(g, row, 0, ask[m->input_mode], -1, MT_ST_STATUS);
    n += mt_grid_puts(g, row, n, safe, -1, MT_ST_STATUS);
    mt_grid_putc(g, row, n, '_', MT_ST_STATUS);
  } else if (m->status[0] != '\0') {
    mt_draw_safe_name(safe, sizeof safe, m->status);
    mt_grid_puts(g, row, 0, safe, -1, MT_ST_ERROR);
  } else if (m->screen == MT_SCREEN_DETAIL && t != NULL &&
             t->state != MT_LIVE && t->error[0] != '\0') {
    mt_draw_safe_name(safe, sizeof safe, t->error);
    mt_grid_printf(g, row, 0, MT_ST_ERROR, "%s %s", mt_draw_state_mark(t),
                   safe);
  } else if (m->screen == MT_SCREEN_HELP) {
    mt_grid_puts(g, row, 0, "Press any key to go back, q to quit.", -1,
                 MT_ST_STATUS);
  } else if (m->screen == MT_SCREEN_SETUP) {
    mt_grid_puts(g, row, 0,
                 "Up/Down choose  Left/Right/Space change  Esc/F2 done "
                 "(saved to memtoprc)",
                 -1, MT_ST_STATUS);
  } else if (m->screen == MT_SCREEN_DETAIL) {
    mt_grid_puts(g, row, 0,
                 "Esc back  Up/Down other  a sites  space pause  F1 help  "
                 "F2 setup  F10 quit",
                 -1, MT_ST_STATUS);
  } else if (m->selected < mt_model_nvisible(m) &&
             m->targets[m->selected]->no_agent &&
             m->targets[m->selected]->state != MT_EXITED) {
    /* The selected process runs no agent: how to attach to it. */
    mt_grid_puts(g, row, 0,
                 "a attach (no agent)  Enter open  F3 search  F4 filter  "
                 "F6 sort  F1 help  F10 quit",
                 -1, MT_ST_STATUS);
  } else {
    mt_grid_puts(g, row, 0,
                 "Enter open  F3 search  F4 filter  F6 sort  u user  p cmd  "
                 "F1 help  F10 quit",
                 -1, MT_ST_STATUS);
  }
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
  const mt_target_t *t = mt_model_find(m, m->detail_pid);
  switch (m->screen) {
  case MT_SCREEN_HELP:
    mt_view_draw_help(m, g, 1, status_row);
    break;
  case MT_SCREEN_SETUP:
    mt_view_draw_setup(m, g, 1, status_row);
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
    mt_view_draw_list(m, g, MT_LIST_TOP, status_row);
    break;
  }
}

int mt_view_frame_due(const mt_model_t *m, uint64_t last_ns, int forced) {
  if (forced || last_ns == 0 || m->screen != MT_SCREEN_LIST ||
      m->now_mono_ns < last_ns)
    return 1;
  return (double)(m->now_mono_ns - last_ns) >= m->delay_s * 0.5e9;
}
