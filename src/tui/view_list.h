/*
 * view_list.h - the process list screen (view_list.c).
 */
#ifndef MS_TUI_VIEW_LIST_H
#define MS_TUI_VIEW_LIST_H

#include "tui/grid.h"
#include "tui/model.h"

/* Draws the list into rows [top, bottom) of the grid. */
void mt_view_draw_list(const mt_model_t *m, mt_grid_t *g, int top, int bottom);

/* Rows of the process list that fit on a screen `rows` high (what a page
 * is for PgUp/PgDn). */
int mt_view_list_rows(int rows);

#endif
