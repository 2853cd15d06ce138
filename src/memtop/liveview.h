/*
 * liveview.h - the live view as a mode of the shell (shell.h): the curses
 * screen (tui/ui.h) drawn from the model, the keys, SIGWINCH, a frame
 * timer that draws a burst of replies at once, the -d tick that counts -n,
 * and the detail view's allocation sites (sites_live.h). The set's owner
 * is live.h's (snapshots into the model); its reads are timed at the -d
 * interval, and with no PID named the socket directory is listed again
 * for new and exited processes.
 *
 * `run` wraps this mode (command.h): then `watch` is 0, the command's
 * PID being the one target, and `say_left` 0, the command's end being
 * what is said.
 */
#ifndef MS_MEMTOP_LIVEVIEW_H
#define MS_MEMTOP_LIVEVIEW_H

#include <uv.h>

#include "memtop/live.h"
#include "memtop/shell.h"
#include "memtop/sites_live.h"
#include "memtop/wake.h"
#include "tui/model.h"

typedef struct mt_liveview_s {
  /* The caller's, before mt_shell_run(): */
  mt_model_t *model; /* delay_s, color and watch_all set */
  int watch;         /* start reading the named PIDs or the listing, and draw */
  int say_left;      /* after the screen, say why targets could not be read */
  /* The mode's: */
  mt_shell_t *sh;
  mt_live_t live;   /* the set's owner */
  int ui;           /* the live view is on screen */
  uv_timer_t frame; /* coalesces redraws */
  uv_timer_t tick;  /* one per -d, counts -n */
  uv_poll_t keys;
  int have_keys;
  long ticks;
  mt_sites_live_t *sites_live; /* the detail view's allocation sites */
  struct mt_wake_s *wake;      /* --tree: wakes its idle processes (wake.h) */
  mt_wake_fails_t wake_fails;  /* those that could not be, on the status */
} mt_liveview_t;

/* The mode, `self` a mt_liveview_t (zeroed, then the caller's members). Its
 * setup refuses (exit 2) without a terminal on stdin and stdout; its
 * status is 0, or 128+N on signal N (SIGINT: 0). */
extern const mt_mode_t mt_liveview_mode;

#endif
