/*
 * view_setup.c - the setup screen: one line per setting, the selected one
 * highlighted; keys.c changes them, the backend writes memtoprc when the
 * screen closes (config.h).
 */
#include <stdio.h>

#include "tui/view_setup.h"

static const char *const sort_names[MT_SORT__COUNT] = {
    [MT_SORT_PID] = "pid",           [MT_SORT_USER] = "user",
    [MT_SORT_TOTAL] = "total",       [MT_SORT_READY] = "ready",
    [MT_SORT_PREPARED] = "prepared", [MT_SORT_DATA] = "data",
    [MT_SORT_FRAG] = "frag",         [MT_SORT_IDLE] = "idle",
    [MT_SORT_RSS] = "rss",           [MT_SORT_OBJECTS] = "objects",
    [MT_SORT_PAUSE_P99] = "p99",     [MT_SORT_PROVIDER] = "provider",
    [MT_SORT_NAME] = "name",
};

static const char *const scheme_names[MT_SCHEME__COUNT] = {
    [MT_SCHEME_DEFAULT] = "default",
    [MT_SCHEME_LIGHT] = "light",
    [MT_SCHEME_MONO] = "mono",
};

static const char *const column_names[MT_COL__COUNT] = {
    [MT_COL_PID] = "pid",           [MT_COL_USER] = "user",
    [MT_COL_TOTAL] = "total",       [MT_COL_READY] = "ready",
    [MT_COL_PREPARED] = "prepared", [MT_COL_DATA] = "data",
    [MT_COL_FRAG] = "frag",         [MT_COL_IDLE] = "idle",
    [MT_COL_RSS] = "rss",           [MT_COL_OBJECTS] = "objects",
    [MT_COL_P99] = "p99",           [MT_COL_PROVIDER] = "provider",
    [MT_COL_NAME] = "name",
};

const char *mt_setup_sort_name(mt_sort_t s) {
  return (unsigned)s < MT_SORT__COUNT ? sort_names[s] : "";
}

const char *mt_setup_scheme_name(mt_scheme_t s) {
  return (unsigned)s < MT_SCHEME__COUNT ? scheme_names[s] : "";
}

const char *mt_setup_column_name(mt_column_t c) {
  return (unsigned)c < MT_COL__COUNT ? column_names[c] : "";
}

void mt_view_draw_setup(const mt_model_t *m, mt_grid_t *g, int top,
                        int bottom) {
  unsigned chosen = m->columns != 0 ? m->columns : MT_COLUMNS_ALL;
  int r = top;
  mt_grid_clip(g, top, 0, bottom - top, g->cols);
  mt_grid_puts(g, r++, 0, "Setup (saved in $XDG_CONFIG_HOME/memtop/memtoprc)",
               -1, MT_ST_HEADER);
  /* The lines scroll so that the selected one is on screen. */
  int room = bottom - r;
  int from = room > 0 && m->setup_row >= room ? m->setup_row - room + 1 : 0;
  for (int i = from; i < MT_SETUP__COUNT && r < bottom; i++, r++) {
    char label[64], value[64];
    switch (i) {
    case MT_SETUP_SORT:
      snprintf(label, sizeof label, "Sort by");
      snprintf(value, sizeof value, "%s", mt_setup_sort_name(m->sort));
      break;
    case MT_SETUP_REVERSE:
      snprintf(label, sizeof label, "Reverse order");
      snprintf(value, sizeof value, "%s", m->sort_reverse ? "yes" : "no");
      break;
    case MT_SETUP_DELAY:
      snprintf(label, sizeof label, "Delay (seconds)");
      snprintf(value, sizeof value, "%g", m->delay_s);
      break;
    case MT_SETUP_SCHEME:
      snprintf(label, sizeof label, "Colour scheme");
      snprintf(value, sizeof value, "%s", mt_setup_scheme_name(m->scheme));
      break;
    case MT_SETUP_CMDLINE:
      snprintf(label, sizeof label, "NAME shows");
      snprintf(value, sizeof value, "%s",
               m->show_cmdline ? "command line" : "short name");
      break;
    case MT_SETUP_TREE:
      snprintf(label, sizeof label, "Tree view");
      snprintf(value, sizeof value, "%s", m->tree ? "on" : "off");
      break;
    case MT_SETUP_MOUSE:
      snprintf(label, sizeof label, "Mouse");
      snprintf(value, sizeof value, "%s", m->mouse ? "on" : "off");
      break;
    default: {
      int c = i - MT_SETUP_COLUMNS;
      int fixed = c == MT_COL_PID || c == MT_COL_NAME;
      snprintf(label, sizeof label, "Column %s", column_names[c]);
      snprintf(value, sizeof value, "%s%s",
               fixed || (chosen & (1u << c)) ? "[x]" : "[ ]",
               fixed ? " (always)" : "");
      break;
    }
    }
    mt_style_t st = i == m->setup_row ? MT_ST_SELECTED : MT_ST_NORMAL;
    if (i == m->setup_row)
      mt_grid_fill(g, r, 0, g->cols, ' ', st);
    mt_grid_puts(g, r, 2, label, -1, st);
    mt_grid_puts(g, r, 22, value, -1, i == m->setup_row ? st : MT_ST_DIM);
  }
  mt_grid_unclip(g);
}
