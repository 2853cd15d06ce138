/*
 * command.h - `memtop run` on the loop: starts the command with the
 * preload and the final-snapshot channel (final_recv.h), watches it through
 * the target set (its PID added MT_TSET_OWNED), and settles its end: its
 * exit status, and the final snapshot its library writes at exit, put in
 * the model. It is a mode that wraps another (below): it calls into the
 * owner it watches through, never the reverse.
 */
#ifndef MS_MEMTOP_COMMAND_H
#define MS_MEMTOP_COMMAND_H

#include <stddef.h>
#include <uv.h>

#include "memtop/cli.h"
#include "memtop/live.h"
#include "memtop/out.h"
#include "memtop/shell.h"
#include "targets/targetset.h"
#include "tui/model.h"

/* How long `run` keeps trying fast while the command has not opened its
 * socket yet, and how fast. */
#define RUN_FAST_RETRY_MS 20
#define RUN_WAIT_NOTE_S 5.0

typedef struct mt_command_s mt_command_t;

/* `run` as a mode of the shell (shell.h): it wraps the owner it watches
 * through. With `inner` (the live view: mt_liveview_mode and its
 * mt_liveview_t, whose live owner is `live`) the command runs in a session
 * of its own, its output goes to a file, and quitting the view asks (the
 * model's run_pid): stop the command, or detach (the model's `detach`) and
 * leave it running, as a closed terminal (SIGHUP) does; with inner NULL (`run
 * --once`) the command's own live owner polls it without a screen, and at
 * its end its final (or last) snapshot is printed into `out`.
 *
 * The wrapper's callback table hands every call on to live.h's owner,
 * except a failure of the command's PID while its socket is not there
 * yet: that is a short wait (RUN_FAST_RETRY_MS), said after
 * RUN_WAIT_NOTE_S. Signals are passed on to the running command, and
 * memtop waits for its end; the exit status is the command's. A socket
 * directory the command's library would refuse (sockdir.h) is refused in
 * setup, before the command starts (exit status 1). */
typedef struct mt_command_cfg_s {
  const mt_opts_t *o; /* o->run_argv: the command */
  mt_model_t *model;
  mt_out_t *out;
  const mt_mode_t *inner; /* NULL: `run --once` */
  void *inner_self;
  mt_live_t *live; /* inner's live owner (NULL with inner NULL) */
} mt_command_cfg_t;

/* The mode; `self` is a mt_command_t. */
extern const mt_mode_t mt_command_mode;

/* A command not started yet (the mode's start starts it, after the inner
 * mode's: 127 if not found, 126 if not started). NULL on ENOMEM. */
mt_command_t *mt_command_new(const mt_command_cfg_t *cfg);

/* After mt_shell_run(): frees it (NULL: nothing). */
void mt_command_free(mt_command_t *c);

#endif
