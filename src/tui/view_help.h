/*
 * view_help.h - the help screen (view_help.c): the keys and what the
 * colours of the memory bar mean.
 */
#ifndef MS_TUI_VIEW_HELP_H
#define MS_TUI_VIEW_HELP_H

#include "tui/grid.h"
#include "tui/model.h"

/* Draws the help into rows [top, bottom) of the grid. */
void mt_view_draw_help(const mt_model_t *m, mt_grid_t *g, int top, int bottom);

#endif
