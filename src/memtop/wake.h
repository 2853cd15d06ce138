/*
 * wake.h - the idle processes of a tree that memtop follows, woken
 * (issue 21). A fork() child of a preloaded program starts its agent at
 * an allocation made a while after the fork, never in the fork handler
 * (src/preload/preload.c): one that waits without allocating (nginx's
 * master in sigsuspend, an idle worker in epoll_wait, an idle PostgreSQL
 * backend) maps the library but has no socket, and no listing finds it.
 * memtop following a tree (`memtop run`, `memtop PID --tree`) walks the
 * tree, and each process in it that maps libmemstats, has no socket and
 * is MT_WAKE_GRACE_MS old has its library's agent started through
 * memtop attach's injection (src/attach, wake only: no library is ever
 * loaded by this; one thread of it is stopped about a millisecond).
 *
 * Each process is tried once (its PID and start time): a failure is said
 * once, through the owner's `say`, and never tried again. The wake runs
 * on the loop's thread, on purpose: the tracer must be the thread that
 * waits for the stops, and no other wait of memtop's (libuv's for `run`'s
 * command, the reaping of orphans) may take a stop of a process being
 * woken. A pass costs a read of /proc/PID/task/TID/children per process
 * of the tree, and /proc/PID/maps for those with no socket.
 */
#ifndef MS_MEMTOP_WAKE_H
#define MS_MEMTOP_WAKE_H

#include "targets/targetset.h"

/* A process this young may still start its agent itself (its first
 * allocations after the fork, plus the preload's 100 ms grace): it is
 * left until it is this old. Its age is read from its start time, so a
 * long-running tree met by `--tree --once` is woken at once. */
#define MT_WAKE_GRACE_MS 750

typedef struct mt_wake_s mt_wake_t;

/* Words for one process that could not be woken (said once). */
typedef void (*mt_wake_say_fn)(void *arg, int pid, const char *words);

/* The processes of a tree that could not be woken, as the live view's
 * status line tells them: one line, which the next failure would
 * otherwise overwrite. Zeroed: none yet. */
typedef struct mt_wake_fails_s {
  int n;         /* failures said so far */
  int first_pid; /* the first one's */
  char first[96];
} mt_wake_fails_t;

/* Counts one more process (pid, words: why) in f and writes the status
 * line for all of them into status (len bytes): "PID 12 not woken: WHY"
 * for the first; then "2 processes not woken: PID 12: WHY; PID 14: WHY"
 * (the first and the last, each cut to fit), and "(and 1 more)" for
 * those between. Pure. */
void mt_wake_fail_status(mt_wake_fails_t *f, int pid, const char *words,
                         char *status, size_t len);

/* A waker for root and its descendants (root included). NULL on ENOMEM. */
mt_wake_t *mt_wake_new(int root, mt_wake_say_fn say, void *arg);
void mt_wake_free(mt_wake_t *w);

/* The live view's `a` (keys.c), confirmed: memtop attach on pid, the
 * preload found as `memtop attach` finds it, with the outcome worded for
 * the status line in words. Returns 0 when pid serves now (attached,
 * woken, or serving already), else the attach's MS_E* code. */
int mt_wake_attach(int pid, char *words, size_t len);

/* One pass (see above): the processes that are targets of set (NULL:
 * none) are left alone. Returns how many processes it woke (the owner
 * then lists the set again, which finds their sockets). */
int mt_wake_pass(mt_wake_t *w, const mt_tset_t *set);

#endif
