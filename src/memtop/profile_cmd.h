/*
 * profile_cmd.h - `memtop profile PID [-o FILE] [--seconds N]
 * [--format pprof|text] [--sites N]`: fetch, resolve, write.
 */
#ifndef MS_MEMTOP_PROFILE_CMD_H
#define MS_MEMTOP_PROFILE_CMD_H

#include "memtop/cli.h"

/* Runs the command for o (o->cmd == MT_CMD_PROFILE); messages go to
 * stderr, the text format to stdout unless -o. Returns the exit status:
 * 0, or 1 when the target could not be read or the file not written. */
int mt_profile_main(const mt_opts_t *o);

#endif
