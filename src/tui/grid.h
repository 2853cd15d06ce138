/*
 * grid.h - what the live view draws into: a rows x cols array of cells (a
 * code point and a style), with a clip rectangle so that a section drawn
 * into a part of the screen cannot spill out of it. No curses here: the
 * curses backend (view_curses.c) copies a finished grid to the terminal,
 * and the tests turn it into text.
 */
#ifndef MS_TUI_GRID_H
#define MS_TUI_GRID_H

#include <stdint.h>

#include "common/strbuf.h"

/* What a cell means; the backend turns each into colours and attributes
 * (and ignores the colours when the model says not to use them). */
typedef enum mt_style_e {
  MT_ST_NORMAL = 0,
  MT_ST_TITLE,    /* the first line */
  MT_ST_HEADER,   /* section titles */
  MT_ST_COLUMNS,  /* the list's column header row */
  MT_ST_SORT,     /* the column the list is sorted by */
  MT_ST_SELECTED, /* the selected row of the list */
  MT_ST_DATA,     /* live objects */
  MT_ST_FRAG,     /* fragmentation overhead */
  MT_ST_IDLE,     /* idle */
  MT_ST_PREPARED, /* released to the OS */
  MT_ST_EXITED,   /* a target that exited or cannot be read */
  MT_ST_STATUS,   /* the bottom line */
  MT_ST_ERROR,    /* an error in the bottom line */
  MT_ST_DIM,      /* labels, units, hints */
  MT_ST_PAUSED,   /* the PAUSED marker */
  MT_ST__COUNT
} mt_style_t;

/* The right half of a wide character: the cell before it holds the
 * character, which takes both columns on the terminal. */
#define MT_CELL_CONT 0u

/* The combining marks a cell keeps after its character (accents written
 * apart, as in a decomposed "e\u0301"); more are dropped, so a name of a
 * thousand marks costs nothing. curses keeps four (CCHARW_MAX 5). */
#define MT_CELL_MARKS 3

typedef struct mt_cell_s {
  uint32_t ch; /* a Unicode code point, or MT_CELL_CONT */
  /* Characters of no width drawn over ch, in order; 0 ends them. */
  uint32_t mark[MT_CELL_MARKS];
  uint8_t style; /* an mt_style_t */
} mt_cell_t;

typedef struct mt_grid_s {
  int rows, cols;
  mt_cell_t *cells; /* rows * cols, row-major; owned */
  /* Drawing is clipped to [r0, r1) x [c0, c1): a section drawn into a
   * rectangle can never spill into its neighbours or outside the grid. */
  int r0, c0, r1, c1;
} mt_grid_t;

/* Allocates a rows x cols grid of blanks (either may be 0). Returns 0,
 * MS_EINVAL (negative size) or MS_ENOMEM; on failure *g is an empty grid
 * that mt_grid_free() accepts. */
int mt_grid_init(mt_grid_t *g, int rows, int cols);
/* Resizes to rows x cols and clears. Same returns; on failure the grid
 * keeps its old size. */
int mt_grid_resize(mt_grid_t *g, int rows, int cols);
void mt_grid_free(mt_grid_t *g);
/* Blanks every cell and removes the clip rectangle. */
void mt_grid_clear(mt_grid_t *g);
/* Restricts drawing to the rectangle (intersected with the grid). */
void mt_grid_clip(mt_grid_t *g, int row, int col, int height, int width);
void mt_grid_unclip(mt_grid_t *g);
/* The columns a code point takes: wcwidth() where the locale knows it,
 * else the sanitiser's table (common/sanitize.h: ms__cp_columns). */
int mt_grid_cp_width(uint32_t cp);
/* Writes one code point, a wide one (CJK, most emoji) into two cells (the
 * second MT_CELL_CONT); nothing outside the clip rectangle, and a wide one
 * that does not fit whole leaves a blank. A character of no width (a
 * combining mark) combines with the cell before it, as a terminal draws
 * it, and takes no column (returns 0); where no cell before it is inside
 * the clip rectangle it is drawn over a blank of its own (returns 1).
 * Control characters and characters the sanitiser refuses (invisible,
 * bidirectional) are drawn as '?'. Returns the columns it takes (0, 1 or
 * 2). */
int mt_grid_putc(mt_grid_t *g, int row, int col, uint32_t ch, mt_style_t st);
/* Writes UTF-8 text from (row, col) on one line, at most `max` columns
 * (< 0: no limit; a wide character that would cross it is left out).
 * Malformed bytes are drawn as '?', and characters as mt_grid_putc()
 * draws them, but for a combining mark that begins the text: it has a
 * blank of its own, never the cell of the text before. Returns the
 * columns the text takes (drawn or clipped). */
int mt_grid_puts(mt_grid_t *g, int row, int col, const char *s, int max,
                 mt_style_t st);
int mt_grid_printf(mt_grid_t *g, int row, int col, mt_style_t st,
                   const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* Fills n cells from (row, col) with one code point. */
void mt_grid_fill(mt_grid_t *g, int row, int col, int n, uint32_t ch,
                  mt_style_t st);
/* The columns UTF-8 text takes once drawn (mt_grid_puts()). */
int mt_grid_text_width(const char *s);
const mt_cell_t *mt_grid_at(const mt_grid_t *g, int row, int col);
/* The grid as UTF-8 text: one line per row, trailing blanks dropped, each
 * line ending in '\n'. Returns 0 or MS_ENOMEM. */
int mt_grid_text(const mt_grid_t *g, ms__strbuf_t *out);

#endif
