/*
 * loop.h - memtop's event loop: every mode but --help and --version runs
 * here (the live view, --once rounds, JSON lines, ps, run). One libuv
 * loop pulls snapshots from every target without ever blocking on one,
 * feeds them to the model, and hands the model to a renderer: the live
 * view (ui.h) or the plain-text emitters.
 */
#ifndef MS_MEMTOP_LOOP_H
#define MS_MEMTOP_LOOP_H

#include "memtop/cli.h"

#define MT_BACKOFF_MAX_S 30.0 /* longest wait between failing reads */
#define MT_EXITED_KEEP_S                                                       \
  60.0 /* an exited process stays this long                                    \
          when watching every process */

/* Runs the command in *o (parsed by mt_cli_parse) to the end and returns
 * memtop's exit status: 0, 1 (a target could not be read; the reason is
 * on stderr), 2 (bad usage, e.g. the live view without a terminal), or
 * with `run` the command's own status. */
int mt_loop_main(const mt_opts_t *o);

#endif
