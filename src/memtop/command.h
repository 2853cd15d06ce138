/*
 * command.h - `memtop run` on the loop: starts the command with the
 * preload and the final-snapshot channel (final_recv.h), watches it through
 * the target set (its PID added MT_TSET_OWNED), and settles its end: its
 * exit status, and the final snapshot its library writes at exit, put in
 * the model. The owner hears through one hook when the end is settled.
 */
#ifndef MS_MEMTOP_COMMAND_H
#define MS_MEMTOP_COMMAND_H

#include <stddef.h>
#include <uv.h>

#include "memtop/cli.h"
#include "tui/model.h"
#include "memtop/out.h"
#include "targets/targetset.h"

/* How long `run` keeps trying fast while the command has not opened its
 * socket yet, and how fast. */
#define RUN_FAST_RETRY_MS 20
#define RUN_WAIT_NOTE_S 5.0

typedef struct mt_command_s mt_command_t;

typedef struct mt_command_cfg_s {
  uv_loop_t *loop;
  const mt_opts_t *o; /* o->run_argv: the command */
  int screen;         /* the live view owns the terminal: output to a file */
  mt_model_t *model;
  mt_tset_t *set;
  /* The command has exited and its end is settled (the final snapshot is
   * in the model, or cannot come). Runs once. */
  void (*settled)(void *arg);
  void *arg;
} mt_command_cfg_t;

/* A command not started yet. NULL on ENOMEM. */
mt_command_t *mt_command_new(const mt_command_cfg_t *cfg);

/* Starts it and watches it. Returns 0, or memtop's exit status after
 * saying why on stderr (127: not found, 126: not started, 1: anything
 * else). Either way, mt_command_close() and mt_command_free() follow. */
int mt_command_start(mt_command_t *c);

/* The command's name, for messages: its argv[0] without the directory. */
const char *mt_command_name(const mt_command_t *c);

/* How the command ended, in words ("exited with status 3"). */
void mt_command_exit_words(const mt_command_t *c, char *buf, size_t len);

int mt_command_running(const mt_command_t *c);
int mt_command_exited(const mt_command_t *c);
/* Its exit status as memtop returns it (128+N: killed by signal N). */
int mt_command_status(const mt_command_t *c);
/* Seconds since it started. */
double mt_command_age_s(const mt_command_t *c);

/* Passes a signal on to the running command. */
void mt_command_kill(mt_command_t *c, int signum);

/* Sees to the command's end: with `terminate`, SIGTERM now; then, every
 * RUN_GRACE_MS it lingers, a stronger signal (SIGTERM, then SIGKILL). */
void mt_command_end(mt_command_t *c, int terminate);

/* `run --once`: once the command's end is settled and no read is in
 * flight, prints its final (or last) snapshot into out and returns 1
 * (memtop is done); else 0. */
int mt_command_poll_finish(mt_command_t *c, mt_out_t *out);

/* After the live view: says where the command's output went (or removes
 * the file if it is empty). */
void mt_command_say_log(mt_command_t *c);

/* Closes the command's handles (a command still running is killed: it
 * would outlive memtop); mt_command_free() after the loop has run their
 * close callbacks. */
void mt_command_close(mt_command_t *c);
void mt_command_free(mt_command_t *c);

#endif
