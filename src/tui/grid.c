/*
 * grid.c - the grid the live view draws into: a rows x cols array of
 * cells (a code point and a style), with a clip rectangle so that a section
 * drawn into a part of the screen cannot spill out of it. No curses here:
 * the curses backend copies a finished grid to the terminal, and the tests
 * turn it into text.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "memstats.h"
#include "common/sanitize.h"
#include "tui/grid.h"

static void grid_blank(mt_grid_t *g) {
  size_t n = (size_t)g->rows * (size_t)g->cols;
  for (size_t i = 0; i < n; i++) {
    g->cells[i] = (mt_cell_t){.ch = ' '};
    g->cells[i].style = MT_ST_NORMAL;
  }
}

int mt_grid_init(mt_grid_t *g, int rows, int cols) {
  if (g == NULL)
    return MS_EINVAL;
  memset(g, 0, sizeof *g);
  if (rows < 0 || cols < 0)
    return MS_EINVAL;
  return mt_grid_resize(g, rows, cols);
}

int mt_grid_resize(mt_grid_t *g, int rows, int cols) {
  if (g == NULL || rows < 0 || cols < 0)
    return MS_EINVAL;
  size_t n = (size_t)rows * (size_t)cols;
  /* calloc of 0 cells may return NULL; keep a valid pointer anyway so the
   * rest of the module never special-cases an empty grid. */
  mt_cell_t *cells = calloc(n ? n : 1, sizeof *cells);
  if (cells == NULL)
    return MS_ENOMEM;
  free(g->cells);
  g->cells = cells;
  g->rows = rows;
  g->cols = cols;
  mt_grid_clear(g);
  return 0;
}

void mt_grid_free(mt_grid_t *g) {
  if (g == NULL)
    return;
  free(g->cells);
  memset(g, 0, sizeof *g);
}

void mt_grid_clear(mt_grid_t *g) {
  if (g->cells != NULL)
    grid_blank(g);
  mt_grid_unclip(g);
}

void mt_grid_unclip(mt_grid_t *g) {
  g->r0 = 0;
  g->c0 = 0;
  g->r1 = g->rows;
  g->c1 = g->cols;
}

void mt_grid_clip(mt_grid_t *g, int row, int col, int height, int width) {
  int r1 = row + (height > 0 ? height : 0);
  int c1 = col + (width > 0 ? width : 0);
  g->r0 = row < 0 ? 0 : row;
  g->c0 = col < 0 ? 0 : col;
  g->r1 = r1 > g->rows ? g->rows : r1;
  g->c1 = c1 > g->cols ? g->cols : c1;
  if (g->r1 < g->r0)
    g->r1 = g->r0;
  if (g->c1 < g->c0)
    g->c1 = g->c0;
}

static int inside(const mt_grid_t *g, int row, int col) {
  return row >= g->r0 && row < g->r1 && col >= g->c0 && col < g->c1;
}

int mt_grid_cp_width(uint32_t cp) {
  /* Printable ASCII, most of every frame, is one column in any locale. */
  if (cp >= 0x20 && cp < 0x7f)
    return 1;
  /* The terminal's own measure where the locale knows the character (the
   * one curses uses), the sanitiser's table where it does not (the C
   * locale). */
  int w = wcwidth((wchar_t)cp);
  if (w < 0)
    w = ms__cp_columns(cp);
  return w;
}

static mt_cell_t *cell(mt_grid_t *g, int row, int col) {
  return &g->cells[(size_t)row * (size_t)g->cols + (size_t)col];
}

/* Writes one cell, keeping wide characters whole: a cell written over
 * half of one blanks the other half. */
/* Makes a cell hold ch alone, its marks gone. */
static void cell_set(mt_cell_t *c, uint32_t ch) {
  c->ch = ch;
  memset(c->mark, 0, sizeof c->mark);
}

static void set_cell(mt_grid_t *g, int row, int col, uint32_t ch,
                     mt_style_t st) {
  mt_cell_t *c = cell(g, row, col);
  if (c->ch == MT_CELL_CONT && col > 0)
    cell_set(cell(g, row, col - 1), ' ');
  if (col + 1 < g->cols && cell(g, row, col + 1)->ch == MT_CELL_CONT &&
      ch != MT_CELL_CONT)
    cell_set(cell(g, row, col + 1), ' ');
  cell_set(c, ch);
  c->style = (uint8_t)st;
}

/* The columns ch takes in a cell: 1 or 2, 0 for a character of no width
 * that may combine with the one before it, -1 for one never drawn as it
 * is. Control characters would move the terminal's cursor and wreck the
 * frame, bidi controls would reorder it and invisible ones hide in it:
 * none of them reaches a cell (the sanitiser's own list). */
static int drawn_width(uint32_t ch) {
  if (ch >= 0x20 && ch < 0x7f)
    return 1; /* printable ASCII: safe, one column */
  if (ch > 0x10ffffu || ch < 0x20 || ms__cp_unsafe(ch))
    return -1;
  int w = mt_grid_cp_width(ch);
  return w >= 0 && w <= 2 ? w : -1;
}

/* Adds the mark ch to the character at (row, col) (the left half of a
 * wide one), after the marks it has; beyond MT_CELL_MARKS it is
 * dropped. */
static void add_mark(mt_grid_t *g, int row, int col, uint32_t ch) {
  mt_cell_t *c = cell(g, row, col);
  if (c->ch == MT_CELL_CONT && col > 0)
    c = cell(g, row, col - 1);
  for (int i = 0; i < MT_CELL_MARKS; i++)
    if (c->mark[i] == 0) {
      c->mark[i] = ch;
      return;
    }
}

/* mt_grid_putc, where joins says whether a combining mark may join the
 * cell before col. */
static int put(mt_grid_t *g, int row, int col, uint32_t ch, mt_style_t st,
               int joins) {
  int w = drawn_width(ch);
  if (w == 0 && joins && col > g->c0 && inside(g, row, col - 1)) {
    add_mark(g, row, col - 1, ch);
    return 0;
  }
  if (w == 0) {
    /* Nothing to combine with: over a blank of its own. */
    if (inside(g, row, col)) {
      set_cell(g, row, col, ' ', st);
      add_mark(g, row, col, ch);
    }
    return 1;
  }
  if (w < 0) {
    ch = '?';
    w = 1;
  }
  if (!inside(g, row, col))
    return w;
  if (w == 2 && !inside(g, row, col + 1)) {
    /* Half a character cannot be shown: the one column left stays
     * blank. */
    set_cell(g, row, col, ' ', st);
    return w;
  }
  set_cell(g, row, col, ch, st);
  if (w == 2)
    set_cell(g, row, col + 1, MT_CELL_CONT, st);
  return w;
}

int mt_grid_putc(mt_grid_t *g, int row, int col, uint32_t ch, mt_style_t st) {
  return put(g, row, col, ch, st, 1);
}

/* Decodes one UTF-8 sequence at *s; on malformed input consumes one byte
 * and returns '?'. */
static uint32_t utf8_next(const unsigned char **s) {
  const unsigned char *p = *s;
  uint32_t cp;
  int n;
  if (p[0] < 0x80) {
    *s = p + 1;
    return p[0];
  } else if ((p[0] & 0xe0) == 0xc0) {
    cp = p[0] & 0x1f;
    n = 1;
  } else if ((p[0] & 0xf0) == 0xe0) {
    cp = p[0] & 0x0f;
    n = 2;
  } else if ((p[0] & 0xf8) == 0xf0) {
    cp = p[0] & 0x07;
    n = 3;
  } else {
    *s = p + 1;
    return '?';
  }
  for (int i = 1; i <= n; i++) {
    if ((p[i] & 0xc0) != 0x80) {
      *s = p + 1;
      return '?';
    }
    cp = cp << 6 | (p[i] & 0x3f);
  }
  *s = p + n + 1;
  /* Overlong forms, surrogates and out-of-range values are not text. */
  if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) ||
      (n == 3 && cp < 0x10000) || cp > 0x10ffff ||
      (cp >= 0xd800 && cp <= 0xdfff))
    return '?';
  return cp;
}

/* The columns a code point takes once drawn by mt_grid_puts(); first:
 * it begins the text. */
static int text_width(uint32_t cp, int first) {
  int w = drawn_width(cp);
  return w == 0 ? first : w < 0 ? 1 : w;
}

int mt_grid_puts(mt_grid_t *g, int row, int col, const char *s, int max,
                 mt_style_t st) {
  const unsigned char *p = (const unsigned char *)s;
  int n = 0;
  while (*p != '\0') {
    const unsigned char *q = p;
    uint32_t cp = utf8_next(&q);
    int first = p == (const unsigned char *)s;
    int w = text_width(cp, first);
    if (max >= 0 && n + w > max)
      break;
    p = q;
    n += put(g, row, col + n, cp, st, !first);
  }
  return n;
}

int mt_grid_text_width(const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  int n = 0;
  while (*p != '\0') {
    int first = p == (const unsigned char *)s;
    n += text_width(utf8_next(&p), first);
  }
  return n;
}

int mt_grid_printf(mt_grid_t *g, int row, int col, mt_style_t st,
                   const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return mt_grid_puts(g, row, col, buf, -1, st);
}

void mt_grid_fill(mt_grid_t *g, int row, int col, int n, uint32_t ch,
                  mt_style_t st) {
  for (int i = 0; i < n; i++)
    mt_grid_putc(g, row, col + i, ch, st);
}

const mt_cell_t *mt_grid_at(const mt_grid_t *g, int row, int col) {
  if (row < 0 || row >= g->rows || col < 0 || col >= g->cols)
    return NULL;
  return &g->cells[(size_t)row * (size_t)g->cols + (size_t)col];
}

static size_t utf8_encode(char *out, uint32_t cp) {
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  } else if (cp < 0x800) {
    out[0] = (char)(0xc0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
  } else if (cp < 0x10000) {
    out[0] = (char)(0xe0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[2] = (char)(0x80 | (cp & 0x3f));
    return 3;
  }
  out[0] = (char)(0xf0 | (cp >> 18));
  out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
  out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
  out[3] = (char)(0x80 | (cp & 0x3f));
  return 4;
}

int mt_grid_text(const mt_grid_t *g, ms__strbuf_t *out) {
  for (int r = 0; r < g->rows; r++) {
    const mt_cell_t *row = &g->cells[(size_t)r * (size_t)g->cols];
    int end = g->cols;
    while (end > 0 && row[end - 1].ch == ' ' && row[end - 1].mark[0] == 0)
      end--;
    for (int c = 0; c < end; c++) {
      char b[4];
      if (row[c].ch == MT_CELL_CONT)
        continue; /* the right half of a wide character */
      size_t n = utf8_encode(b, row[c].ch);
      if (ms__strbuf_append(out, b, n) != 0)
        return MS_ENOMEM;
      for (int m = 0; m < MT_CELL_MARKS && row[c].mark[m] != 0; m++) {
        n = utf8_encode(b, row[c].mark[m]);
        if (ms__strbuf_append(out, b, n) != 0)
          return MS_ENOMEM;
      }
    }
    if (ms__strbuf_append(out, "\n", 1) != 0)
      return MS_ENOMEM;
  }
  return 0;
}
