/*
 * keys.h - what a key does to the model, without a terminal.
 *
 * The curses backend (view_curses.c) maps the keys curses names to the
 * codes below and applies each with mt_key_apply(); tests apply keys the
 * same way the user presses them.
 */
#ifndef MS_TUI_KEYS_H
#define MS_TUI_KEYS_H

#include "tui/model.h"
#include "tui/ui.h"

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
  MT_KEY_RESIZE,
  MT_KEY_F0 = 0x10100 /* function key n is MT_KEY_F(n), 1 to 12 */
};
#define MT_KEY_F(n) (MT_KEY_F0 + (n))

/* Applies one key to the model: moves the selection, opens and leaves the
 * detail view, shows help and setup, pauses, changes the sort (re-sorting
 * with mt_model_sort()), edits the prompts of the bottom line (delay,
 * search, filter) and validates the delay with the command line's own rule
 * (model.h: MT_DELAY_MIN..MT_DELAY_MAX seconds). While m->run_pid is set
 * (`memtop run`'s command runs), q and F10 ask first (MT_INPUT_QUIT): y
 * quits, d quits with m->detach set, any other key stays. a on a process
 * that runs no agent (mt_target_t.no_agent) asks whether to attach
 * memtop to it (MT_INPUT_ATTACH, m->attach_pid): y returns MT_ACT_ATTACH,
 * any other key gives up. The keys are htop's
 * where they mean the same (the help screen, view_help.c, lists them). Pure: no
 * I/O, no terminal. Returns what the loop has to do. */
mt_action_t mt_key_apply(mt_model_t *m, int key);

/* Mouse events, already told apart by the backend. */
typedef enum mt_mouse_e {
  MT_MOUSE_CLICK = 0,
  MT_MOUSE_DOUBLE,
  MT_MOUSE_WHEEL_UP,
  MT_MOUSE_WHEEL_DOWN
} mt_mouse_t;

/* Applies a mouse event at (row, col) of a screen rows x cols: on the
 * list, a click selects a row, a double click opens it, a click on a
 * column's title sorts by it (again: reverses); the wheel moves the
 * selection three rows (on one process: to its neighbour). Pure, like
 * mt_key_apply(). */
mt_action_t mt_key_mouse(mt_model_t *m, mt_mouse_t ev, int row, int col,
                         int rows, int cols);

#endif
