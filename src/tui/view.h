/*
 * view.h - the live view, drawn from the model into a grid of cells.
 *
 * The view never touches a terminal: mt_view_render() draws the model into
 * an mt_grid_t (rows x cols of characters with a style each), and the
 * curses backend (view_curses.c) copies a finished grid to the screen once
 * per frame. Tests render into grids of fixed sizes and compare the text
 * with golden files; mt_view_key() applies a key to the model without a
 * terminal, so tests drive the keys the same way the user does.
 */
#ifndef MS_TUI_VIEW_H
#define MS_TUI_VIEW_H

#include <stdint.h>

#include "common/strbuf.h"
#include "tui/model.h"
#include "tui/ui.h"

/* ---- the grid ----------------------------------------------------------- */

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

typedef struct mt_cell_s {
  uint32_t ch;   /* a Unicode code point one column wide */
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
/* Writes one code point; nothing outside the clip rectangle. */
void mt_grid_putc(mt_grid_t *g, int row, int col, uint32_t ch, mt_style_t st);
/* Writes UTF-8 text from (row, col) on one line, at most `max` columns
 * (< 0: no limit). Control characters, malformed bytes, characters the
 * sanitiser refuses and characters not one column wide are drawn as
 * '?'. Returns the number of columns the text takes (drawn or clipped). */
int mt_grid_puts(mt_grid_t *g, int row, int col, const char *s, int max,
                 mt_style_t st);
int mt_grid_printf(mt_grid_t *g, int row, int col, mt_style_t st,
                   const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* Fills n cells from (row, col) with one code point. */
void mt_grid_fill(mt_grid_t *g, int row, int col, int n, uint32_t ch,
                  mt_style_t st);
const mt_cell_t *mt_grid_at(const mt_grid_t *g, int row, int col);
/* The grid as UTF-8 text: one line per row, trailing blanks dropped, each
 * line ending in '\n'. Returns 0 or MS_ENOMEM. */
int mt_grid_text(const mt_grid_t *g, ms__strbuf_t *out);

/* ---- rendering ---------------------------------------------------------- */

/* Draws the model into the grid, which it clears first: the screen the
 * model is on (list, detail, help), the title line and the status line.
 * Draws nothing outside the grid, whatever its size. */
void mt_view_render(const mt_model_t *m, mt_grid_t *g);

/* Rows of the process list that fit on a screen `rows` high (what a page
 * is for PgUp/PgDn). */
int mt_view_list_rows(int rows);

/* ---- keys --------------------------------------------------------------- */

/* Keys are plain characters, or these codes for the keys curses names
 * (the backend maps them), so this module needs no curses. */
enum {
  MT_KEY_ESC = 27,
  MT_KEY_ENTER = '\n',
  MT_KEY_BACKSPACE = 0x7f,
  MT_KEY_UP = 0x10000,
  MT_KEY_DOWN,
  MT_KEY_LEFT,
  MT_KEY_RIGHT,
  MT_KEY_PGUP,
  MT_KEY_PGDN,
  MT_KEY_HOME,
  MT_KEY_END,
  MT_KEY_RESIZE
};

/* Applies one key to the model: moves the selection, opens and leaves the
 * detail view, shows help, pauses, changes the sort (re-sorting with
 * mt_model_sort()), edits the delay prompt and validates it with the
 * command line's own rule (model.h: MT_DELAY_MIN..MT_DELAY_MAX seconds). Pure:
 * no I/O, no terminal. Returns what the loop has to do. */
mt_action_t mt_view_key(mt_model_t *m, int key);

/* ---- shared by the view's modules (view_*.c) ------------------------------
 */

/* The target the detail view shows, or NULL. */
const mt_target_t *mt_view_detail_target(const mt_model_t *m);
/* A byte figure as people read it ("612.0MiB", "~1.2GiB", "-") in at most
 * `width` columns: drops the decimal if the full form is wider. */
char *mt_view_fmt_bytes(char *buf, size_t len, int64_t bytes, ms_quality_t q,
                        int width);
/* A count or rate: "950", "12.3k", "4.5M", "1.2G". */
char *mt_view_fmt_count(char *buf, size_t len, double v);
/* A string from outside (a program name, providers) made safe to draw:
 * common/sanitize.h's form, cut whole to len bytes. */
void mt_view_safe_name(char *out, size_t len, const char *name);
/* The marker for a target's state: "", "[exited]", "[unreachable]",
 * "[connecting]". */
const char *mt_view_state_mark(const mt_target_t *t);

/* The fill character of each part of the memory bar (and the trend
 * chart): data, fragOverhead, idle, Prepared. */
uint32_t mt_view_fill(int part, int utf8);

/* The screens (view_list.c, view_detail.c). Each draws rows [top, bottom)
 * of the grid. */
void mt_view_draw_list(const mt_model_t *m, mt_grid_t *g, int top, int bottom);
void mt_view_draw_detail(const mt_model_t *m, const mt_target_t *t,
                         mt_grid_t *g, int top, int bottom);

#endif
