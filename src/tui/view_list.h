/*
 * view_list.h - the process list screen (view_list.c): a line of the
 * machine's memory, the totals, the column titles, then a row per process.
 */
#ifndef MS_TUI_VIEW_LIST_H
#define MS_TUI_VIEW_LIST_H

#include <stddef.h>

#include "tui/grid.h"
#include "tui/model.h"

/* The row of the screen the list starts at (under the title line), and
 * the rows of the list's own head (machine, totals, column titles). */
#define MT_LIST_TOP 1
#define MT_LIST_HEAD 3

/* Draws the list into rows [top, bottom) of the grid. */
void mt_view_draw_list(const mt_model_t *m, mt_grid_t *g, int top, int bottom);

/* Rows of the process list that fit on a screen `rows` high (what a page
 * is for PgUp/PgDn). */
int mt_view_list_rows(int rows);

/* The list's column titles and what each sorts by (-1: nothing). */
const char *mt_view_list_title(mt_column_t c);

/* The title of the column sort key s sorts (what the sort picker lists). */
const char *mt_view_sort_title(mt_sort_t s);

/* What is at (row, col) of a list drawn on a whole screen rows x cols
 * (the frame of view.h around it): a process's row (*index, into
 * m->targets), a column's title (*sort, the key it sorts by), or
 * nothing; while the sort picker is open (MT_INPUT_SORT), one of its
 * entries (*sort) or nothing. */
enum {
  MT_LIST_AT_NONE = 0,
  MT_LIST_AT_ROW,
  MT_LIST_AT_HEADER,
  MT_LIST_AT_PICKER
};
int mt_view_list_at(const mt_model_t *m, int rows, int cols, int row, int col,
                    size_t *index, mt_sort_t *sort);

#endif
