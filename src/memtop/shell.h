/*
 * shell.h - memtop's application shell: what every mode runs on. It
 * builds the one libuv loop, the signals the mode wants (SIGPIPE ignored
 * once for all: a target that closes its socket while memtop writes, or a
 * closed stdout, is an error to say, not a death), the timeout policy
 * (o->timeout_ms: --timeout, else MEMTOP_TIMEOUT_MS, read once by
 * mt_cli_timeout() in main.c) and the target set (targetset.h, with the
 * real io of mt_tset_io_uv() and the PIDs named on the command line),
 * runs the loop, and closes it all in one order.
 *
 * A mode is an owner: the set's callback table (mt_tset_cbs_t, the
 * contract of targetset.h) and the small table below, mt_mode_t, for its
 * start and stop. The modes are live (liveview.h), rounds (rounds.h: --once,
 * -n, ps, JSON lines), run (command.h: it wraps the owner it watches
 * through), serve (serve.h) and profile (profile_cmd.h); loop.c picks one
 * from the command line.
 *
 * The order, for every mode:
 *
 *   setup     the mode chooses the set's options (the shell's defaults
 *             filled in: the -d interval, the back-off cap, the timeout),
 *             its callbacks and the signals it wants; nothing is running
 *             yet, and a refusal (bad usage, no terminal) returns here;
 *   the set   made, *set_out written, the named PIDs added (`added`
 *             runs for each), unless the mode asked for none;
 *   start     the signals are on; the mode starts what it runs;
 *   the loop  until mt_shell_stop();
 *   status    the exit status, if start succeeded (one set with
 *             mt_shell_exit(), a signal's, wins);
 *   finish    with the exit status (start's or status's): the screen
 *             ends, and what is left is said;
 *   close     the mode closes its handles, then the set is freed (its
 *             `retired` runs for each target), the loop runs every close
 *             callback, and `free` frees what the mode still holds.
 *
 * Quitting goes through mt_shell_quit(): the top mode's `quit` sees to
 * what must end first (run: its command), and calls mt_shell_stop() when
 * nothing is left.
 */
#ifndef MS_MEMTOP_SHELL_H
#define MS_MEMTOP_SHELL_H

#include <uv.h>

#include "memtop/cli.h"
#include "targets/targetset.h"

typedef struct mt_shell_s mt_shell_t;

/* The signals a mode wants on the loop (mt_shell_setup_t.signals). */
#define MT_SIG_INT 0x1u
#define MT_SIG_TERM 0x2u
#define MT_SIG_HUP 0x4u
#define MT_SIG_WINCH 0x8u
/* A plain mode: stopped cleanly by Ctrl-C, kill or a closed terminal. */
#define MT_SIG_PLAIN (MT_SIG_INT | MT_SIG_TERM | MT_SIG_HUP)

#define MT_BACKOFF_MAX_S 30.0 /* longest wait between failing reads */
#define MT_EXITED_KEEP_S                                                       \
  60.0 /* an exited process stays this long when watching every process */

/* What a mode's `setup` fills. On entry `set` holds the shell's defaults:
 * timed 0, interval_ms the -d, backoff_max_ms MT_BACKOFF_MAX_S,
 * timeout_ms the one policy (o->timeout_ms), keep_gone_ms
 * MT_EXITED_KEEP_S; a mode changes what it must and leaves timeout_ms.
 * A mode that needs no set (profile: profile_fetch.h makes its own)
 * leaves cbs NULL: none is made, and the named PIDs are not added. */
typedef struct mt_shell_setup_s {
  mt_tset_opts_t set;
  const mt_tset_cbs_t *cbs; /* the set's owner; NULL: no set (above) */
  void *arg;                /* cbs' argument */
  mt_tset_t **set_out;      /* written once the set is made (may be NULL) */
  unsigned signals;         /* MT_SIG_*: 0 leaves every signal as it is */
} mt_shell_setup_t;

/* A mode's start and stop. `self` is mt_shell_run()'s. Only setup and
 * start are required. */
typedef struct mt_mode_s {
  /* Before anything runs: fill *su. Returns 0, or memtop's exit status
   * after saying why (the rest is skipped; finish, close and free run). */
  int (*setup)(void *self, mt_shell_t *sh, mt_shell_setup_t *su);
  /* The set is made and the named PIDs added: start. Returns 0, or the
   * exit status after saying why (the loop does not run). */
  int (*start)(void *self);
  /* One of the signals asked for. NULL: the exit status is 128+signum
   * and the shell quits. */
  void (*signal)(void *self, int signum);
  /* mt_shell_quit() was called: end what must end first, then
   * mt_shell_stop(). NULL: mt_shell_stop() at once. */
  void (*quit)(void *self);
  /* The loop has ended: memtop's exit status. NULL: 0. */
  int (*status)(void *self);
  /* Said last, with the exit status (start's, or status's). May be NULL. */
  void (*finish)(void *self, int rc);
  /* Closes the mode's handles, before the set is freed. May be NULL. */
  void (*close)(void *self);
  /* After the loop has run every close callback. May be NULL. */
  void (*free)(void *self);
} mt_mode_t;

/* Runs the mode to its end for the command line in *o; returns memtop's
 * exit status. */
int mt_shell_run(const mt_opts_t *o, const mt_mode_t *mode, void *self);

uv_loop_t *mt_shell_loop(mt_shell_t *sh);
const mt_opts_t *mt_shell_opts(const mt_shell_t *sh);
/* The socket directory, for messages ("the socket directory" if it has
 * no name). */
const char *mt_shell_sockdir(const mt_shell_t *sh);
/* The set: NULL before it is made (during setup), after close, and for a
 * mode that wants none. */
mt_tset_t *mt_shell_set(const mt_shell_t *sh);

/* Asks memtop to end: through the mode's `quit`. */
void mt_shell_quit(mt_shell_t *sh);
/* Nonzero once mt_shell_quit() or mt_shell_stop() was called. */
int mt_shell_quitting(const mt_shell_t *sh);
/* Ends the loop now: no more timed reads, uv_stop(). */
void mt_shell_stop(mt_shell_t *sh);
/* The exit status memtop returns whatever the mode's `status` says (a
 * signal's). */
void mt_shell_exit(mt_shell_t *sh, int code);

#endif
