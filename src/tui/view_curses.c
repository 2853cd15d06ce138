/*
 * view_curses.c - the only module that talks to curses (ncursesw).
 *
 * Each frame is rendered into a grid first (view.h), then copied to
 * curses' virtual screen and sent with one doupdate(): curses sends only
 * what changed, so the terminal never shows a half-drawn frame. Keys are
 * read without blocking when the loop says stdin is readable, mapped to
 * keys.h's codes and applied by mt_key_apply().
 *
 * Only the live view needs curses, so memtop does not link it: the
 * library is loaded when the live view starts (load_curses), and every
 * call goes through `cu`, whose members have the types curses.h declares.
 * `memtop --once`, ps, run --once and profile start without mapping it
 * (libncursesw and libtinfo: a third of the symbols the loader would
 * bind at every start).
 */
#ifndef NCURSES_WIDECHAR
#define NCURSES_WIDECHAR 1 /* add_wch, setcchar: block elements in UTF-8 */
#endif
#include <curses.h>
#include <dlfcn.h>
#include <langinfo.h>
#include <locale.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <wchar.h>

#include "memstats.h"
#include "tui/ui.h"
#include "tui/config.h"
#include "tui/grid.h"
#include "tui/keys.h"
#include "tui/view.h"
#include "tui/procinfo.h"
#include "tui/view_list.h"

/* ncursesw's functions this module calls, and its variables. */
#define CURSES_FUNCS(X)                                                        \
  X(cbreak)                                                                    \
  X(clearok)                                                                   \
  X(curs_set)                                                                  \
  X(delscreen)                                                                 \
  X(doupdate)                                                                  \
  X(endwin)                                                                    \
  X(getmouse)                                                                  \
  X(has_colors)                                                                \
  X(init_pair)                                                                 \
  X(intrflush)                                                                 \
  X(is_term_resized)                                                           \
  X(keypad)                                                                    \
  X(mouseinterval)                                                             \
  X(mousemask)                                                                 \
  X(newterm)                                                                   \
  X(nodelay)                                                                   \
  X(noecho)                                                                    \
  X(nonl)                                                                      \
  X(resizeterm)                                                                \
  X(set_escdelay)                                                              \
  X(set_term)                                                                  \
  X(setcchar)                                                                  \
  X(start_color)                                                               \
  X(use_default_colors)                                                        \
  X(wadd_wch)                                                                  \
  X(wgetch)                                                                    \
  X(wmove)                                                                     \
  X(wnoutrefresh)
#define CURSES_VARS(X)                                                         \
  X(COLOR_PAIRS)                                                               \
  X(COLS)                                                                      \
  X(LINES)                                                                     \
  X(curscr)                                                                    \
  X(stdscr)

#define CURSES_PTR(f) __typeof__(f) *f;
static struct {
  CURSES_FUNCS(CURSES_PTR)
  CURSES_VARS(CURSES_PTR)
} cu;

/* The library's soname, and what to install where it is missing. */
#define CURSES_LIB "libncursesw.so.6"
#define CURSES_PACKAGE                                                         \
  "ncurses; Debian and Ubuntu: libncursesw6, Fedora: ncurses-libs"

static int cu_state; /* 1 loaded, -1 failed, 0 not tried (main thread) */
static char cu_error[400];

/* Loads curses (once). Returns 1, or 0 with cu_error set. */
static int load_curses(void) {
  void *h;
  const char *why, *missing = NULL;

  if (cu_state != 0)
    return cu_state > 0;
  cu_state = -1;
  h = dlopen(CURSES_LIB, RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    why = dlerror();
    snprintf(cu_error, sizeof cu_error,
             "the live view needs " CURSES_LIB " (" CURSES_PACKAGE
             "), which cannot be loaded: %s",
             why != NULL ? why : "not found");
    return 0;
  }
#define CURSES_FIND(f)                                                         \
  if (missing == NULL && (*(void **)&cu.f = dlsym(h, #f)) == NULL)             \
    missing = #f;
  CURSES_FUNCS(CURSES_FIND)
  CURSES_VARS(CURSES_FIND)
  if (missing != NULL) {
    snprintf(cu_error, sizeof cu_error,
             "the live view needs " CURSES_LIB " (" CURSES_PACKAGE
             "), and the one installed has no %s",
             missing);
    return 0;
  }
  cu_state = 1; /* kept loaded: the terminal is restored through it */
  return 1;
}

const char *mt_ui_load_error(void) {
  return cu_state < 0 ? cu_error : NULL;
}

/* One terminal per process, so the state is the module's. `active` is
 * what makes mt_ui_end() idempotent, and it is cleared before the terminal
 * is restored so that a second call (from a signal path, then atexit)
 * returns at once. */
static volatile sig_atomic_t active;
static SCREEN *screen;
static mt_grid_t grid;
/* What curses was last given, cell for cell (the grid's size): a frame
 * passes only the cells that changed (a list of 200 processes at 1 Hz
 * changes a few figures a second). NULL, or a size that is not the
 * grid's: everything is given again. */
static mt_cell_t *given;
static int given_rows, given_cols;
static unsigned long cells_given; /* mt_ui_cells_given() */
/* When the last frame was drawn (the model's clock), and whether the next
 * one must be whatever the time (a key was read, the terminal resized):
 * mt_view_frame_due(). */
static uint64_t frame_ns;
static int frame_forced;

/* The next frame gives curses every cell (a code point no cell holds). */
static void forget_given(void) {
  for (size_t i = 0; given != NULL && i < (size_t)given_rows * given_cols; i++)
    given[i].ch = UINT32_MAX;
}

unsigned long mt_ui_cells_given(void) {
  return cells_given;
}
static int use_color;
static int atexit_done;
static mt_scheme_t styles_for; /* the scheme the colour pairs are for */
static int mouse_on;           /* the mouse events asked of the terminal */

/* Asks the terminal for mouse events, or stops, as the model says. */
static void sync_mouse(const mt_model_t *m) {
  if (m->mouse == mouse_on)
    return;
  mmask_t want = m->mouse ? BUTTON1_CLICKED | BUTTON1_DOUBLE_CLICKED |
                                BUTTON4_PRESSED | BUTTON5_PRESSED
                          : 0;
  cu.mousemask(want, NULL);
  mouse_on = m->mouse;
}

/* The settings of memtoprc, under the command line's (config.h). */
static void load_config(mt_model_t *m) {
  char path[1024];
  if (mt_config_path(path, sizeof path) == 0)
    mt_config_load(m, path);
}

/* The setup screen closed: its settings go to memtoprc. */
static void save_config(mt_model_t *m) {
  char path[1024];
  int rc;
  m->save_pending = 0;
  rc = mt_config_path(path, sizeof path);
  if (rc == 0)
    rc = mt_config_save(m, path);
  if (rc != 0)
    snprintf(m->status, sizeof m->status,
             "Settings not saved (memtoprc: %s): set XDG_CONFIG_HOME or "
             "HOME to a writable directory",
             ms_strerror(rc));
}

/* Colour pair numbers: one per style that has colours. */
static short pair_of[MT_ST__COUNT];
static attr_t attr_of[MT_ST__COUNT];

static void setup_styles(int color, mt_scheme_t scheme) {
  /* Without colours: attributes only, so the screen still reads on a
   * monochrome terminal or with --no-color / NO_COLOR. */
  static const attr_t mono[MT_ST__COUNT] = {
      [MT_ST_NORMAL] = A_NORMAL,
      [MT_ST_TITLE] = A_REVERSE,
      [MT_ST_HEADER] = A_BOLD,
      [MT_ST_COLUMNS] = A_REVERSE,
      [MT_ST_SORT] = A_REVERSE | A_BOLD,
      [MT_ST_SELECTED] = A_BOLD,
      [MT_ST_DATA] = A_NORMAL,
      [MT_ST_FRAG] = A_NORMAL,
      [MT_ST_IDLE] = A_NORMAL,
      [MT_ST_PREPARED] = A_NORMAL,
      [MT_ST_EXITED] = A_DIM,
      [MT_ST_STATUS] = A_NORMAL,
      [MT_ST_ERROR] = A_BOLD,
      [MT_ST_DIM] = A_NORMAL,
      [MT_ST_PAUSED] = A_BOLD | A_REVERSE,
  };
  /* The selected row must stand out without colour too. */
  memcpy(attr_of, mono, sizeof attr_of);
  attr_of[MT_ST_SELECTED] = A_REVERSE | A_BOLD;
  memset(pair_of, 0, sizeof pair_of);
  if (!color || scheme == MT_SCHEME_MONO)
    return;
  typedef struct {
    mt_style_t st;
    short fg, bg;
    attr_t attr;
  } style_color_t;
  /* For a light background: no yellow, cyan or bold white text, which
   * vanish on white; the bars stay told apart by their fill too. */
  static const style_color_t light[] = {
      {MT_ST_TITLE, COLOR_WHITE, COLOR_BLUE, A_NORMAL},
      {MT_ST_HEADER, COLOR_BLUE, -1, A_BOLD},
      {MT_ST_COLUMNS, COLOR_WHITE, COLOR_BLUE, A_NORMAL},
      {MT_ST_SORT, COLOR_BLACK, COLOR_CYAN, A_BOLD},
      {MT_ST_SELECTED, COLOR_WHITE, COLOR_BLUE, A_NORMAL},
      {MT_ST_DATA, COLOR_GREEN, -1, A_NORMAL},
      {MT_ST_FRAG, COLOR_RED, -1, A_NORMAL},
      {MT_ST_IDLE, COLOR_BLUE, -1, A_NORMAL},
      {MT_ST_PREPARED, COLOR_MAGENTA, -1, A_NORMAL},
      {MT_ST_EXITED, COLOR_RED, -1, A_DIM},
      {MT_ST_ERROR, COLOR_RED, -1, A_BOLD},
      {MT_ST_DIM, COLOR_BLUE, -1, A_NORMAL},
      {MT_ST_PAUSED, COLOR_WHITE, COLOR_RED, A_BOLD},
  };
  static const style_color_t dark[] = {
      {MT_ST_TITLE, COLOR_BLACK, COLOR_CYAN, A_NORMAL},
      {MT_ST_HEADER, COLOR_CYAN, -1, A_BOLD},
      {MT_ST_COLUMNS, COLOR_BLACK, COLOR_GREEN, A_NORMAL},
      {MT_ST_SORT, COLOR_BLACK, COLOR_CYAN, A_BOLD},
      {MT_ST_SELECTED, COLOR_BLACK, COLOR_CYAN, A_NORMAL},
      {MT_ST_DATA, COLOR_GREEN, -1, A_BOLD},
      {MT_ST_FRAG, COLOR_YELLOW, -1, A_BOLD},
      {MT_ST_IDLE, COLOR_BLUE, -1, A_BOLD},
      {MT_ST_PREPARED, COLOR_MAGENTA, -1, A_NORMAL},
      {MT_ST_EXITED, COLOR_RED, -1, A_DIM},
      {MT_ST_ERROR, COLOR_RED, -1, A_BOLD},
      {MT_ST_DIM, COLOR_CYAN, -1, A_NORMAL},
      {MT_ST_PAUSED, COLOR_WHITE, COLOR_RED, A_BOLD},
  };
  const style_color_t *colors = scheme == MT_SCHEME_LIGHT ? light : dark;
  size_t ncolors = scheme == MT_SCHEME_LIGHT ? sizeof light / sizeof light[0]
                                             : sizeof dark / sizeof dark[0];
  for (size_t i = 0; i < ncolors; i++) {
    short pair = (short)(i + 1);
    if (pair >= *cu.COLOR_PAIRS)
      break;
    if (cu.init_pair(pair, colors[i].fg, colors[i].bg) == ERR)
      continue;
    pair_of[colors[i].st] = pair;
    attr_of[colors[i].st] = colors[i].attr;
  }
}

int mt_ui_start(mt_model_t *m) {
  if (m == NULL)
    return MS_EINVAL;
  if (active)
    return 0;
  if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO))
    return MS_EINVAL;
  /* The user's locale for the character set (is it UTF-8?), but C numbers:
   * figures read "1.5MiB" and the delay prompt parses "0.5" everywhere. */
  setlocale(LC_ALL, "");
  setlocale(LC_NUMERIC, "C");
  const char *cs = nl_langinfo(CODESET);
  m->utf8 = cs != NULL && (strcmp(cs, "UTF-8") == 0 || strcmp(cs, "utf8") == 0);
  /* What only the live view shows: the user's settings, who runs each
   * process and its command line, the machine's memory. */
  load_config(m);
  m->proc_root = "/proc";
  mt_procinfo_meminfo(m->proc_root, &m->machine);
  mt_model_sort(m);

  if (!load_curses())
    return MS_ENOSYS; /* mt_ui_load_error() says why */
  /* newterm, not initscr: initscr exits the program when the terminal is
   * unknown, and memtop has to say why and restore things itself. */
  screen = cu.newterm(NULL, stdout, stdin);
  if (screen == NULL)
    return MS_ENOSYS;
  cu.set_term(screen);
  cu.cbreak();
  cu.noecho();
  cu.nonl();
  cu.keypad(*cu.stdscr, TRUE);
  cu.nodelay(*cu.stdscr, TRUE);
  cu.intrflush(*cu.stdscr, FALSE);
  cu.set_escdelay(25); /* Esc alone should not wait a second */
  cu.curs_set(0);
  use_color = 0;
  if (m->color && cu.has_colors() && cu.start_color() != ERR) {
    cu.use_default_colors();
    use_color = 1;
  }
  m->color = use_color;
  setup_styles(use_color, m->scheme);
  styles_for = m->scheme;
  mouse_on = 0;
  cu.mouseinterval(250); /* a double click is two clicks this close */
  sync_mouse(m);
  if (mt_grid_init(&grid, *cu.LINES, *cu.COLS) != 0) {
    cu.endwin();
    cu.delscreen(screen);
    screen = NULL;
    return MS_ENOMEM;
  }
  m->page_rows = mt_view_list_rows(*cu.LINES);
  forget_given(); /* a new screen holds nothing yet */
  frame_forced = 1;
  active = 1;
  if (!atexit_done) {
    atexit(mt_ui_end);
    atexit_done = 1;
  }
  return 0;
}

void mt_ui_draw(const mt_model_t *m) {
  if (!active)
    return;
  if (grid.rows != *cu.LINES || grid.cols != *cu.COLS) {
    if (mt_grid_resize(&grid, *cu.LINES, *cu.COLS) != 0)
      return; /* out of memory: keep the last frame on screen */
    frame_forced = 1;
  }
  if (m->scheme != styles_for) {
    setup_styles(use_color, m->scheme);
    styles_for = m->scheme;
    forget_given();
    frame_forced = 1;
  }
  if (!mt_view_frame_due(m, frame_ns, frame_forced))
    return;
  frame_forced = 0;
  frame_ns = m->now_mono_ns;
  mt_view_render(m, &grid);
  if (given_rows != grid.rows || given_cols != grid.cols) {
    free(given);
    given = calloc((size_t)grid.rows * (size_t)grid.cols + 1, sizeof *given);
    given_rows = given != NULL ? grid.rows : 0;
    given_cols = given != NULL ? grid.cols : 0;
    forget_given();
  }
  for (int r = 0; r < grid.rows; r++) {
    for (int c = 0; c < grid.cols; c++) {
      const mt_cell_t *cell = mt_grid_at(&grid, r, c);
      if (given != NULL) {
        mt_cell_t *was = &given[(size_t)r * (size_t)grid.cols + (size_t)c];
        if (was->ch == cell->ch && was->style == cell->style &&
            memcmp(was->mark, cell->mark, sizeof was->mark) == 0)
          continue;
        *was = *cell;
      }
      if (cell->ch == MT_CELL_CONT)
        continue; /* drawn with the wide character before it */
      cells_given++;
      /* The character and the marks that combine with it (curses keeps
       * up to CCHARW_MAX - 1 of them). */
      wchar_t wc[MT_CELL_MARKS + 2] = {(wchar_t)cell->ch};
      for (int k = 0; k < MT_CELL_MARKS && k + 1 < CCHARW_MAX; k++)
        wc[k + 1] = (wchar_t)cell->mark[k];
      cchar_t cc;
      mt_style_t st = (mt_style_t)cell->style;
      if (st >= MT_ST__COUNT)
        st = MT_ST_NORMAL;
      cu.setcchar(&cc, wc, attr_of[st], pair_of[st], NULL);
      /* The bottom-right cell makes add_wch report ERR (the cursor cannot
       * move past it) after drawing it: nothing to do about that. */
      if (cu.wmove(*cu.stdscr, r, c) != ERR)
        cu.wadd_wch(*cu.stdscr, &cc);
    }
  }
  cu.wnoutrefresh(*cu.stdscr);
  cu.doupdate();
}

static int map_key(int ch) {
  switch (ch) {
  case KEY_UP:
    return MT_KEY_UP;
  case KEY_DOWN:
    return MT_KEY_DOWN;
  case KEY_LEFT:
    return MT_KEY_LEFT;
  case KEY_RIGHT:
    return MT_KEY_RIGHT;
  case KEY_PPAGE:
    return MT_KEY_PGUP;
  case KEY_NPAGE:
    return MT_KEY_PGDN;
  case KEY_HOME:
    return MT_KEY_HOME;
  case KEY_END:
    return MT_KEY_END;
  case KEY_ENTER:
  case '\r':
  case '\n':
    return MT_KEY_ENTER;
  case KEY_BACKSPACE:
  case 8:
  case 127:
    return MT_KEY_BACKSPACE;
  case KEY_RESIZE:
    return MT_KEY_RESIZE;
  default:
    if (ch >= KEY_F(1) && ch <= KEY_F(12))
      return MT_KEY_F(ch - KEY_F0);
    return ch;
  }
}

/* A mouse event from curses, told apart for keys.c. */
static mt_action_t mouse_event(mt_model_t *m) {
  MEVENT ev;
  mt_mouse_t kind;
  if (cu.getmouse(&ev) != OK)
    return MT_ACT_NONE;
  if (ev.bstate & BUTTON4_PRESSED)
    kind = MT_MOUSE_WHEEL_UP;
  else if (ev.bstate & BUTTON5_PRESSED)
    kind = MT_MOUSE_WHEEL_DOWN;
  else if (ev.bstate & BUTTON1_DOUBLE_CLICKED)
    kind = MT_MOUSE_DOUBLE;
  else if (ev.bstate & BUTTON1_CLICKED)
    kind = MT_MOUSE_CLICK;
  else
    return MT_ACT_NONE;
  return mt_key_mouse(m, kind, ev.y, ev.x, *cu.LINES, *cu.COLS);
}

mt_action_t mt_ui_keys(mt_model_t *m) {
  mt_action_t act = MT_ACT_NONE;
  if (!active)
    return act;
  int ch;
  while (act != MT_ACT_QUIT && (ch = cu.wgetch(*cu.stdscr)) != ERR) {
    frame_forced = 1; /* what a key changed is shown at once */
    /* KEY_RESIZE means curses has already adopted the new size (its own
     * SIGWINCH handler, or mt_ui_resize()): only a redraw is left to do.
     * Resizing again here would queue another KEY_RESIZE, for ever. */
    m->page_rows = mt_view_list_rows(*cu.LINES);
    mt_action_t a =
        ch == KEY_MOUSE ? mouse_event(m) : mt_key_apply(m, map_key(ch));
    if (a > act)
      act = a;
  }
  if (m->save_pending)
    save_config(m);
  sync_mouse(m);
  return act;
}

void mt_ui_resize(void) {
  struct winsize ws;
  if (!active)
    return;
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 &&
      ws.ws_col > 0 && cu.is_term_resized(ws.ws_row, ws.ws_col))
    cu.resizeterm(ws.ws_row, ws.ws_col);
  /* The old contents are for the old size: repaint everything. */
  cu.clearok(*cu.curscr, TRUE);
  forget_given();
  frame_forced = 1;
}

void mt_ui_end(void) {
  if (!active)
    return;
  active = 0;
  if (mouse_on)
    cu.mousemask(0, NULL); /* the terminal stops reporting the mouse */
  mouse_on = 0;
  cu.endwin(); /* leaves the alternate screen, restores the tty modes */
  fflush(stdout);
}
