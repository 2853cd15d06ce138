/*
 * main.c - memtop's entry point: parse the command line (cli.c), answer
 * --help and --version, and hand everything else to the loop (loop.c).
 */
#include <stdio.h>
#include <stdlib.h>

#include "memstats.h"
#include "common/sanitize.h"
#include "memtop/cli.h"
#include "memtop/loop.h"

int main(int argc, char **argv) {
  static mt_opts_t opts; /* a few KiB of PIDs: not on the stack */
  char err[512], safe[4 * sizeof err + 1];

  if (mt_cli_parse(argc, argv, getenv("NO_COLOR"), &opts, err, sizeof err)) {
    /* The message quotes the argument: shown in its safe form. */
    ms__sanitize(safe, sizeof safe, err, sizeof err, (size_t)-1);
    fprintf(stderr, "memtop: %s\n", safe);
    mt_cli_usage(stderr);
    return 2;
  }
  switch (opts.cmd) {
  case MT_CMD_HELP:
    mt_cli_help(stdout);
    return fflush(stdout) == 0 ? 0 : 1;
  case MT_CMD_VERSION:
    printf("memtop %s (libmemstats %s)\n", MS_VERSION_STRING,
           ms_version_string());
    return fflush(stdout) == 0 ? 0 : 1;
  case MT_CMD_PROFILE:
    fprintf(stderr,
            "memtop: heap profiles are not available yet in memtop %s: "
            "`memtop profile` comes in a later release. The statistics of "
            "PID %d are available now: memtop --once %d\n",
            MS_VERSION_STRING, opts.pids[0], opts.pids[0]);
    return 1;
  case MT_CMD_SERVE:
    fprintf(stderr,
            "memtop: the Prometheus endpoint is not available yet in memtop "
            "%s: `memtop serve` comes in a later release. Until then, "
            "`memtop --once --json` prints the same figures as JSON lines\n",
            MS_VERSION_STRING);
    return 1;
  default:
    return mt_loop_main(&opts);
  }
}
