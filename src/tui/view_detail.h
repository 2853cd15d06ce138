/*
 * view_detail.h - the screen of one process (view_detail.c).
 */
#ifndef MS_TUI_VIEW_DETAIL_H
#define MS_TUI_VIEW_DETAIL_H

#include "tui/grid.h"
#include "tui/model.h"

/* Draws target t into rows [top, bottom) of the grid. */
void mt_view_draw_detail(const mt_model_t *m, const mt_target_t *t,
                         mt_grid_t *g, int top, int bottom);

#endif
