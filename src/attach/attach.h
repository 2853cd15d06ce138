/*
 * attach.h - memtop attach and memtop detach: load libmemstats into a
 * running process that was started without it, and undo that.
 *
 * attach: the checks that refuse with words (in this order: the process,
 * Yama, its user, privileges, dumpability, a tracer, seccomp's strict
 * mode, the library there already, the library's path seen from the
 * process, a static program, and with the thread stopped a seccomp filter
 * that kills), then two calls on one of its threads, stopped
 * (inject.h): dlopen(LIB, RTLD_NOW | RTLD_LOCAL) and ms__attach_start,
 * whose address is read from the loaded library's own symbols in the
 * process's memory (rsym.h; dlsym only if they cannot be read); the
 * library's constructor does nothing when loaded so (src/preload/attach.c)
 * and ms__attach_start starts the agent. Once the library is mapped (a
 * second attach, a detach) its entry point is read before the stop and
 * called alone. detach: ms__attach_stop; the library stays mapped, inert.
 *
 * A process that maps libmemstats already is woken instead (issue 21): a
 * preloaded fork() child that has not allocated since the fork has no
 * agent yet (src/preload/attach.c). Its library's ms__attach_wake, found
 * among the symbols of the mapped library, is called with no dlopen: the
 * agent starts as in any preloaded process, with the preload's counting.
 * The library loaded by an earlier attach answers that it is attach's
 * (MS_EINVAL, having done nothing), and attach's own calls follow.
 */
#ifndef MT_ATTACH_ATTACH_H
#define MT_ATTACH_ATTACH_H

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* attach --track: the library counts from now on, through the program's
 * rewritten GOT entries (the same bit as MS__ATTACH_TRACK in
 * src/preload/preload.h, the library's side). */
#define MT_ATTACH_TRACK 0x1u

typedef struct mt_attach_req_s {
  pid_t pid;
  int detach;      /* 1: memtop detach */
  unsigned flags;  /* ms__attach_start's: 0 or MT_ATTACH_TRACK */
  const char *lib; /* the preload library's absolute path (unused by a wake) */
  /* 1: wake only (memtop following a tree): a process that maps no
   * libmemstats, or one that memtop attach loaded, is refused, never
   * loaded into. */
  int wake_only;
  int max_tries; /* stops tried while threads are busy; 0: attach's 100 */
} mt_attach_req_t;

typedef struct mt_attach_res_s {
  uint64_t stop_ns; /* held: first thread interrupted to last let go */
  int tries;        /* stops it took (a thread was busy in the others) */
  int already;      /* attach: it served already; detach: nothing to do */
  int woke;         /* its preloaded library's agent was started */
  int late;         /* the library mapped is one an attach loaded */
  int calls;        /* functions called in it while it was stopped */
  int boosted;      /* 1 if they ran at real-time priority (inject.h) */
} mt_attach_res_t;

/* What memtop attach knows of a process and of itself before any ptrace
 * call: the refusals are decided on this alone. */
typedef struct mt_attach_facts_s {
  char name[64];       /* its name, sanitised */
  long uid[4], gid[4]; /* real, effective, saved, filesystem */
  char state;          /* State: R S D T t Z ... */
  long tracer;         /* TracerPid: 0 none */
  char tracer_name[64];
  long seccomp;    /* 0 none, 1 strict, 2 filter */
  int at_secure;   /* its AT_SECURE: 1, 0, -1 unknown */
  long proc_owner; /* the owner of /proc/PID: root's if not dumpable */
  int yama_scope;  /* 0 without Yama */
  int cap_ptrace;  /* memtop has CAP_SYS_PTRACE */
  long me;         /* memtop's effective uid */
  /* It maps libmemstats (its preload: a wake, with no new code loaded):
   * with CAP_SYS_PTRACE, one that is not dumpable (a server's worker that
   * switched user) is woken, as the kernel allows root. */
  int waking;
  /* It shares its memory with its parent (kcmp KCMP_VM): a vfork() or
   * posix_spawn() child before it runs its program, whose every write
   * (a library's state, a thread) would be its parent's. */
  int shares_vm;
} mt_attach_facts_t;

/* Whether memtop attach refuses process pid on these facts: 0, or a
 * negative MS_E* code with the cause and the fix in err. Pure. */
int mt_attach_refusal(pid_t pid, const mt_attach_facts_t *f, char *err,
                      size_t errlen);

/* What a call in the process that failed with code (a negative MS_E*
 * code, err saying why) is told as, on the facts re-read after the
 * process was let go (now; NULL when it is gone): a call that did not
 * return because the process was stopped (SIGSTOP, Ctrl-Z) after the
 * refusals above were decided (its new threads wait in the stop) is the
 * stopped process's refusal, MS_EAGAIN; anything else is code, err
 * untouched. Pure. */
int mt_attach_call_failure(pid_t pid, int code, const mt_attach_facts_t *now,
                           char *err, size_t errlen);

/* Why /proc/PID/maps could not be read (code, a negative MS_E* code, as
 * the read gave it), with the cause and the fix in err; returns code.
 * The kernel reads it with ptrace's access check: refused though the
 * refusals above let it pass, the process is in a user namespace memtop
 * is not in, or a security module keeps it from being traced. Pure. */
int mt_attach_maps_refusal(pid_t pid, const mt_attach_facts_t *f, int code,
                           char *err, size_t errlen);

/* Does it. Returns 0, or a negative MS_E* code with the cause and the fix
 * in err (one or two sentences, for the user). */
int mt_attach_run(const mt_attach_req_t *req, mt_attach_res_t *res, char *err,
                  size_t errlen);

/* The command: runs it and says the outcome on out (or the refusal on
 * errf). Returns the exit status: 0, or 1. */
int mt_attach_main(const mt_attach_req_t *req, FILE *out, FILE *errf);

#endif
