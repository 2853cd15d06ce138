/*
 * main.c - memtop's entry point: parse the command line (cli.c), answer
 * --help and --version, run `serve`, and hand everything else to its mode
 * (loop.c).
 *
 * It is built twice. As `memtop` (MT_WITH_SERVE 0) it leaves out `serve`,
 * whose libraries (libmicrohttpd, GnuTLS and what it loads, libyaml,
 * libcrypt) cost more start-up than the rest of memtop together: `serve`
 * executes memtop-serve, the same program with the exporter linked, from
 * memtop's private directory (run.h). As memtop-serve (MT_WITH_SERVE 1) it
 * runs every command itself.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memstats.h"
#include "common/sanitize.h"
#include "attach/attach.h"
#include "memtop/cli.h"
#include "memtop/loop.h"
#include "memtop/run.h"
#ifndef MT_WITH_SERVE
#define MT_WITH_SERVE 0
#endif
#if MT_WITH_SERVE
#include "memtop/serve.h"
#endif

/* Started with 0, 1 or 2 closed (`memtop --once PID >&-`, a cron job, a
 * daemon), memtop would hand those numbers to the first descriptors it
 * opens: the report would go into the event loop's own descriptors and
 * libuv aborts when it finds one of them at a standard number. So each
 * closed one is opened on /dev/null first of all, stdout read-only: the
 * report then fails to be written (EBADF), which mt_out_flush() says on
 * stderr, and memtop exits 1, as `ls >&-` does. Returns 0, or, when
 * /dev/null cannot be opened (nothing is safe to open then), open(2)'s
 * -errno, or MS_EINVAL if it came at another number than the closed
 * one. */
static int standard_fds(void) {
  static const int modes[3] = {O_RDONLY, O_RDONLY, O_WRONLY};
  for (int fd = 0; fd <= 2; fd++) {
    if (fcntl(fd, F_GETFD) != -1 || errno != EBADF)
      continue;
    int got = open("/dev/null", modes[fd]);
    if (got < 0)
      return -errno;
    if (got != fd) {
      close(got);
      return MS_EINVAL;
    }
  }
  return 0;
}

/* memtop's own heap stays small (it is the tool, not the target: it
 * may set its malloc as it likes). The allocation sites are resolved on
 * libuv's worker threads, a few megabytes at a time while a binary's
 * DWARF is read: with an arena per worker, each would keep its own peak.
 * So the workers share one arena besides the main one, and a block of
 * 256 KiB or more is always mapped on its own and unmapped when freed
 * (glibc otherwise raises that threshold to the largest block freed, and
 * keeps the next such block in the arena). */
static void own_malloc(void) {
  (void)mallopt(M_ARENA_MAX, 2);
  (void)mallopt(M_MMAP_THRESHOLD, 256 * 1024);
}

#if MT_WITH_SERVE
static int serve(const mt_opts_t *o, char **argv) {
  (void)argv;
  return mt_serve_main(o);
}
#else
/* Runs `memtop serve` as memtop-serve, with the same arguments; returns
 * only when it cannot be started (status 1, the cause on stderr). */
static int serve(const mt_opts_t *o, char **argv) {
  char exe[4096], path[4096], err[8192 + 256];
  ssize_t n;

  (void)o;
  n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  exe[n > 0 ? n : 0] = '\0';
  if (mt_run_find_serve(exe, path, sizeof path, err, sizeof err) != 0) {
    fprintf(stderr, "memtop: serve: %s\n", err);
    return 1;
  }
  execv(path, argv);
  fprintf(stderr, "memtop: serve: cannot run %s: %s\n", path, strerror(errno));
  return 1;
}
#endif

/* Writes stdout out; a failure is said (a closed stdout among them). */
static int flush_stdout(void) {
  if (fflush(stdout) == 0)
    return 0;
  fprintf(stderr, "memtop: cannot write to standard output: %s\n",
          strerror(errno));
  return 1;
}

/* memtop attach and detach: the library is the preload `run` uses. */
static int attach_main(const mt_opts_t *o) {
  char exe[4096], found[4096], lib[PATH_MAX], err[512];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  exe[n > 0 ? n : 0] = '\0';
  if (mt_run_find_preload(exe, getenv("MEMTOP_PRELOAD"), found, sizeof found,
                          err, sizeof err) != 0) {
    fprintf(stderr, "memtop: %s\n", err);
    return 1;
  }
  /* The process opens it by this path: absolute, no link of ours. */
  if (realpath(found, lib) == NULL) {
    fprintf(stderr, "memtop: %s: %s\n", found, strerror(errno));
    return 1;
  }
  mt_attach_req_t req = {.pid = o->pids[0],
                         .detach = o->cmd == MT_CMD_DETACH,
                         .flags = o->track ? MT_ATTACH_TRACK : 0,
                         .lib = lib};
  return mt_attach_main(&req, stdout, stderr) || flush_stdout();
}

/* The safe form of a usage error into out (cap bytes): controls and
 * invisible characters escaped as ms__sanitize() does, but a backslash
 * shown as it is, not doubled. The message is the user's own arguments
 * and the C library's words (regerror's "Unmatched ( or \(" for a bad
 * --focus): a backslash there forges nothing, and doubled it misquotes
 * what was typed. */
static void usage_error_safe(char *out, size_t cap, const char *err) {
  size_t at = 0, o = 0, n = strlen(err), cols, k;
  char unit[MS__SAFE_UNIT_MAX];

  while ((k = ms__safe_next(err, n, &at, unit, &cols)) != 0) {
    if (k == 2 && unit[0] == '\\' && unit[1] == '\\')
      k = 1;
    if (o + k >= cap)
      break;
    memcpy(out + o, unit, k);
    o += k;
  }
  out[o] = '\0';
}

int main(int argc, char **argv) {
  static mt_opts_t opts; /* a few KiB of PIDs: not on the stack */
  char err[512], safe[4 * sizeof err + 1];

  if (standard_fds() != 0)
    return 1; /* not even stderr can be trusted to be ours */
  own_malloc();
  if (mt_cli_parse(argc, argv, getenv("NO_COLOR"), &opts, err, sizeof err)) {
    /* The message quotes the argument: shown in its safe form. */
    usage_error_safe(safe, sizeof safe, err);
    fprintf(stderr, "memtop: %s\n", safe);
    mt_cli_usage(stderr);
    return 2;
  }
  /* MEMTOP_TIMEOUT_MS is read here and nowhere else. */
  if (mt_cli_timeout(&opts, getenv("MEMTOP_TIMEOUT_MS"), err, sizeof err)) {
    ms__sanitize(safe, sizeof safe, err, sizeof err, (size_t)-1);
    fprintf(stderr, "memtop: %s\n", safe);
  }
  switch (opts.cmd) {
  case MT_CMD_HELP:
    mt_cli_help(stdout);
    return flush_stdout();
  case MT_CMD_VERSION:
    printf("memtop %s (libmemstats %s)\n", MS_VERSION_STRING,
           ms_version_string());
    return flush_stdout();
  case MT_CMD_SERVE:
    return serve(&opts, argv);
  case MT_CMD_ATTACH:
  case MT_CMD_DETACH:
    return attach_main(&opts);
  default:
    return mt_loop_main(&opts);
  }
}
