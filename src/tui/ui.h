/*
 * ui.h - what the live view (src/memtop/liveview.c) calls to run on a terminal.
 *
 * This is the whole of curses as the rest of memtop sees it: the loop owns
 * the event loop, the timers and the signals; the view owns the terminal.
 * The loop calls
 *
 *   mt_ui_start(m)        once, before the first frame (never in --once or
 *                         the other plain modes);
 *   mt_ui_draw(m)         after the model changed (a snapshot arrived, a key
 *                         asked for a redraw, the terminal was resized),
 *                         with m->now_mono_ns set: the list is drawn at
 *                         most once per half delay (mt_view_frame_due), so
 *                         the loop must also ask once per delay (its tick);
 *   mt_ui_keys(m)         when stdin is readable: reads every pending key
 *                         without blocking, applies each to the model and
 *                         says what the loop has to do about it;
 *   mt_ui_resize()        on SIGWINCH, then mt_ui_draw();
 *   mt_ui_end()           on every exit path: normal exit, error, SIGINT /
 *                         SIGTERM, and from atexit() as a last resort.
 *
 * Everything is single-threaded: call these from the loop's thread only.
 */
#ifndef MS_TUI_UI_H
#define MS_TUI_UI_H

#include "tui/model.h"

/* What a key asks the loop to do. Several keys read at once combine by
 * taking the strongest action (the order below). */
typedef enum mt_action_e {
  MT_ACT_NONE = 0, /* nothing changed */
  MT_ACT_REDRAW,   /* the model's view state changed: call mt_ui_draw() */
  MT_ACT_DELAY,    /* m->delay_s changed: re-arm the timers, then redraw */
  MT_ACT_ATTACH,   /* the user confirmed memtop attach on m->attach_pid: the
                    * loop runs it, says the outcome in m->status, redraws */
  MT_ACT_QUIT      /* the user asked to quit: stop the loop, mt_ui_end() */
} mt_action_t;

/* Initialises the terminal (locale, curses, keypad, non-blocking input,
 * colours when m->color). Sets m->utf8 from the locale's character set
 * (block elements when UTF-8, ASCII otherwise), m->color to 0 if the
 * terminal has no colours, and m->page_rows. It is also where what only
 * the live view shows starts: the settings of memtoprc (config.h) under
 * what the command line set, m->proc_root ("/proc": who runs each process,
 * its command line, the machine's memory; procinfo.h), and the mouse
 * unless m->mouse is 0. LC_NUMERIC stays "C", so
 * figures and the delay prompt use a decimal point in every locale. Returns 0,
 * MS_EINVAL when stdin or stdout is not a terminal, or MS_ENOSYS when curses
 * cannot start on this terminal (TERM unknown) or cannot be loaded
 * (mt_ui_load_error()). On failure the terminal is left as it was. */
int mt_ui_start(mt_model_t *m);

/* Why the curses library, loaded by the first mt_ui_start() (memtop does
 * not link it), could not be: the library, its package and the loader's
 * words; NULL when it was loaded or never tried. */
const char *mt_ui_load_error(void);

/* Builds the whole frame from the model and puts it on screen once. Does
 * nothing before mt_ui_start() or after mt_ui_end(). */
void mt_ui_draw(const mt_model_t *m);

/* How many cells mt_ui_draw() has given curses: only those that changed
 * since the frame before (all of them after a start, a resize or a new
 * colour scheme). */
unsigned long mt_ui_cells_given(void);

/* Reads every pending key and mouse event (non-blocking) and applies each
 * with mt_key_apply() or mt_key_mouse() (keys.h); when the setup screen
 * closed, writes memtoprc (a failure is said on the status line). Returns
 * the strongest action asked for. */
mt_action_t mt_ui_keys(mt_model_t *m);

/* Adopts the terminal's new size (call on SIGWINCH). */
void mt_ui_resize(void);

/* Restores the terminal (leaves curses, shows the cursor, resets the
 * modes). Idempotent, and safe to call from atexit() and after a signal
 * was caught; does nothing if mt_ui_start() never succeeded. */
void mt_ui_end(void);

#endif
