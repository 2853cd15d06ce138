/*
 * rounds.h - --once, -n N and ps on the target set (targetset.h): every
 * target is asked at once, and when all have answered (or timed out) the
 * round is printed in order, as reports, JSON lines or the ps table; the
 * next round follows -d later, or the owner hears that they are done.
 *
 * As a mode of the shell (shell.h, mt_rounds_mode with a mt_rounds_t as
 * `self`): the set not timed, a listing retiring the processes it no
 * longer finds; the rounds end memtop (exit 1 once a target could not be
 * read, or the output failed; 128+N on signal N).
 */
#ifndef MS_MEMTOP_ROUNDS_H
#define MS_MEMTOP_ROUNDS_H

#include <stdint.h>
#include <uv.h>

#include "memtop/cli.h"
#include "tui/model.h"
#include "memtop/out.h"
#include "memtop/shell.h"
#include "targets/targetset.h"

typedef struct mt_rounds_s {
  const mt_opts_t *o; /* ps, named PIDs, -n */
  mt_model_t *model;
  mt_tset_t *set;
  mt_out_t *out;
  const char *sockdir; /* for messages (NULL: the shell's) */
  uv_timer_t next;     /* the next round; mt_rounds_init() sets it up */
  long rounds;         /* rounds printed */
  uint64_t round_start_ns;
  int in_round;
  int exit_code; /* 1 once a target could not be read (not with ps) */
  /* The last round is printed (or the listing failed). NULL as a mode of
   * the shell: memtop quits. */
  void (*done)(void *arg);
  void *arg;
  char err[512]; /* the words being made */
  /* --tree: wakes the tree's idle processes before each listing
   * (wake.h; NULL: none). */
  struct mt_wake_s *wake;
} mt_rounds_t;

/* The table to give mt_tset_new(), with a mt_rounds_t as its argument. */
extern const mt_tset_cbs_t mt_rounds_cbs;

/* The mode (shell.h), `self` a mt_rounds_t with o, model and out filled
 * (the rest zero). */
extern const mt_mode_t mt_rounds_mode;

/* Sets up r->next on loop; the other members are the caller's to fill. */
void mt_rounds_init(mt_rounds_t *r, uv_loop_t *loop);

/* Starts a round: lists the targets again when no PID was named, then
 * asks every target at once. */
void mt_rounds_start(mt_rounds_t *r);

/* Stops the rounds and closes the timer (the loop frees nothing). */
void mt_rounds_close(mt_rounds_t *r);

#endif
