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
  MT_KEY_RESIZE
};

/* Applies one key to the model: moves the selection, opens and leaves the
 * detail view, shows help, pauses, changes the sort (re-sorting with
 * mt_model_sort()), edits the delay prompt and validates it with the
 * command line's own rule (model.h: MT_DELAY_MIN..MT_DELAY_MAX seconds). Pure:
 * no I/O, no terminal. Returns what the loop has to do. */
mt_action_t mt_key_apply(mt_model_t *m, int key);

#endif
