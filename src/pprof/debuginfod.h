/*
 * debuginfod.h - debug files fetched from debuginfod servers, as perf and
 * gdb fetch them (memtop side).
 *
 * Where DEBUGINFOD_URLS is set and a binary's debug file is found nowhere
 * on this machine (sym.c looks under /usr/lib/debug and beside the
 * binary first), its build id is asked of the servers through elfutils'
 * libdebuginfod, loaded at run time (dlopen of libdebuginfod.so.1: memtop
 * starts, and runs, without it, and loads libcurl only when asked to
 * fetch). The library keeps what it fetched in its own cache
 * ($DEBUGINFOD_CACHE_PATH, else $XDG_CACHE_HOME/debuginfod_client, else
 * ~/.cache/debuginfod_client), failures included, and honours
 * DEBUGINFOD_TIMEOUT (a transfer that makes no progress) and
 * DEBUGINFOD_MAXSIZE; memtop stops a fetch at its own deadline as well
 * (--timeout), and asks no more for a build id that failed in the last
 * ten minutes. A fetched file is used only if its build id is the one
 * asked for. It is read with memtop's rights, not the target's: it comes
 * from the servers the user named, not from the target's files.
 */
#ifndef MT_PPROF_DEBUGINFOD_H
#define MT_PPROF_DEBUGINFOD_H

#include <stddef.h>

/* How fetches behave from now on, for the whole process: each is
 * stopped after timeout_ms (> 0; the default is 10 s, memtop's
 * --timeout's), and with progress set a fetch that goes to the network
 * says so on stderr ("memtop: fetching debug info for FILE from
 * debuginfod...", with its bytes on a terminal): for `memtop profile`,
 * not for the live view, whose screen stderr would spoil. */
void mt_debuginfod_configure(int timeout_ms, int progress);

/* Stops the fetch under way, and every later one, for good: for a
 * process that is quitting (the live view's q while its worker fetches),
 * which then need not wait for the deadline. Any thread may call it. */
void mt_debuginfod_cancel(void);

/* A descriptor of the debug file for the build id (id, len) of the
 * binary named path (for the progress line), fetched or from the cache;
 * or -1 when DEBUGINFOD_URLS is unset or empty, libdebuginfod is not
 * installed, or no server has it in time (a descriptor or -1: what
 * libdwfl's find_debuginfo hands on). Thread-safe (one fetch at a
 * time). */
int mt_debuginfod_find(const unsigned char *id, size_t len, const char *path);

#endif
