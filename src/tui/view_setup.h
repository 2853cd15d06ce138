/*
 * view_setup.h - the setup screen (F2, view_setup.c): the settings
 * memtoprc keeps (sort, delay, colour scheme, NAME, mouse, columns).
 */
#ifndef MS_TUI_VIEW_SETUP_H
#define MS_TUI_VIEW_SETUP_H

#include "tui/grid.h"
#include "tui/model.h"

/* Draws the setup into rows [top, bottom) of the grid, the line
 * m->setup_row selected. */
void mt_view_draw_setup(const mt_model_t *m, mt_grid_t *g, int top, int bottom);

/* The words memtoprc and the setup screen use for a sort key, a colour
 * scheme and a column ("total", "light", "rss"). */
const char *mt_setup_sort_name(mt_sort_t s);
const char *mt_setup_scheme_name(mt_scheme_t s);
const char *mt_setup_column_name(mt_column_t c);

#endif
