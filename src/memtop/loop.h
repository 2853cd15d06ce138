/*
 * loop.h - memtop's modes, chosen from the command line: every command
 * but --help and --version runs in the one application shell (shell.h),
 * as one of its modes: the live view (liveview.h), --once, -n N, JSON lines
 * and ps (rounds.h), run (command.h, wrapping the live view or, with
 * --once, its own poll) and profile (profile_cmd.h); serve (serve.h) too,
 * but main.c starts that one (in memtop-serve, the one program that links
 * the exporter), so that this file does not pull it into memtop. This is
 * the file that sees the rest of the app: it holds the model and the
 * output the modes share, and wires each mode to them.
 */
#ifndef MS_MEMTOP_LOOP_H
#define MS_MEMTOP_LOOP_H

#include "memtop/cli.h"

/* Runs the command in *o (parsed by mt_cli_parse; not serve) to the end and
 * returns memtop's exit status: 0, 1 (a target could not be read; the reason is
 * on stderr), 2 (bad usage, e.g. the live view without a terminal), or
 * with `run` the command's own status. */
int mt_loop_main(const mt_opts_t *o);

#endif
