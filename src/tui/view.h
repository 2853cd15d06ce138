/*
 * view.h - the live view, drawn from the model into a grid of cells.
 *
 * The view never touches a terminal: mt_view_render() draws the model into
 * an mt_grid_t (grid.h), and the curses backend (view_curses.c) copies a
 * finished grid to the screen once per frame. Tests render into grids of
 * fixed sizes and compare the text with golden files.
 *
 * This is the dispatcher: the frame (title and status lines) and which
 * screen fills the rest (view_list.h, view_detail.h, view_help.h). The
 * screens share draw.h's helpers and know nothing of each other or of this
 * file.
 */
#ifndef MS_TUI_VIEW_H
#define MS_TUI_VIEW_H

#include "tui/grid.h"
#include "tui/model.h"

/* Draws the model into the grid, which it clears first: the screen the
 * model is on (list, detail, help), the title line and the status line.
 * Draws nothing outside the grid, whatever its size. */
void mt_view_render(const mt_model_t *m, mt_grid_t *g);

/* Whether a frame asked for at m->now_mono_ns is to be drawn, the last
 * one having been drawn at last_ns (0: none yet). The list is drawn at
 * most once per half refresh delay: its targets answer one at a time,
 * each asking for a frame, and the tick asks for one more, so that 200
 * targets whose reads have drifted apart would have it drawn dozens of
 * times a second for figures that change once; what a frame left out is
 * drawn by the next (the tick's, at the latest). Other screens, and a
 * frame `forced` (a key, a resize, a first frame), are always drawn. */
int mt_view_frame_due(const mt_model_t *m, uint64_t last_ns, int forced);

#endif
