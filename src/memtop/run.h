/*
 * run.h - what `memtop run` needs before it can start a command: where the
 * preload library is, and the command's environment with it preloaded.
 * Pure functions of their arguments, so they are tested without starting
 * anything.
 */
#ifndef MS_MEMTOP_RUN_H
#define MS_MEMTOP_RUN_H

#include <stddef.h>

#define MT_PRELOAD_NAME "libmemstats-preload.so"

/* Finds the preload library: $MEMTOP_PRELOAD if `override` is set (it must
 * exist), else next to the memtop binary `exe` (the build tree), else in
 * ../lib/memtop relative to it (an installed memtop), else in the preload
 * directory memtop was built for (PRELOADDIR, LIBDIR/memtop: under
 * /usr/lib64, a multiarch directory). Writes the path into
 * out and returns 0, or returns MS_ENOENT with a message naming where it
 * looked and the fix in err. */
int mt_run_find_preload(const char *exe, const char *override, char *out,
                        size_t len, char *err, size_t errlen);
/* The same with the last place to look given: `libdir`, the preload's
 * directory (NULL or "": none). */
int mt_run_find_preload_in(const char *exe, const char *override,
                           const char *libdir, char *out, size_t len, char *err,
                           size_t errlen);

/* Finds memtop's private file `name` (the preload, or the serve binary
 * MT_SERVE_NAME): next to the memtop binary `exe` (the build tree), else in
 * ../lib/memtop relative to it, else in `libdir` (NULL or "": none), the
 * first that access(2) allows for `mode` (R_OK, X_OK). Writes the path into
 * out and returns 0, or MS_ENOENT with where it looked and the fix in err. */
int mt_run_find_private(const char *exe, const char *name, int mode,
                        const char *libdir, char *out, size_t len, char *err,
                        size_t errlen);

/* `memtop serve` runs as this program, in memtop's private directory: it
 * alone links the exporter's libraries (libmicrohttpd, GnuTLS, libyaml,
 * libcrypt), so that every other command starts without loading them. */
#define MT_SERVE_NAME "memtop-serve"

/* mt_run_find_private() for MT_SERVE_NAME, executable, last in PRELOADDIR. */
int mt_run_find_serve(const char *exe, char *out, size_t len, char *err,
                      size_t errlen);

/* A copy of the environment `env` with `preload` first in LD_PRELOAD
 * (existing entries kept after it; not added twice). The array and the one
 * new string are malloc'd: free with mt_run_env_free(). NULL on ENOMEM. */
char **mt_run_env(char *const *env, const char *preload);
void mt_run_env_free(char **env);

/* Entries mt_run_env() keeps room for beyond the environment it copies. */
#define MT_RUN_ENV_EXTRA 2

/* Asks the command for its final snapshot (src/agent/final_send.c): drops any
 * MEMSTATS_FINAL_* entries from env (made by mt_run_env()) and appends
 * fd_entry ("MEMSTATS_FINAL_FD=N") and ppid_entry
 * ("MEMSTATS_FINAL_PPID=P"), which the caller owns and keeps alive while
 * env is used. */
void mt_run_env_final(char **env, char *fd_entry, char *ppid_entry);

/* The exit status a shell would report for a child: its status, or
 * 128+N when killed by signal N. */
int mt_run_exit_status(long exit_status, int term_signal);

#endif
