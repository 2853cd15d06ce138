/*
 * profile_fetch.h - one process's heap profile, fetched on a libuv loop
 * the caller runs (twice `seconds` apart for the growth over the
 * interval), then built and resolved into names, files and lines
 * (src/pprof): what `memtop profile` writes to a file and `memtop serve`
 * answers /debug/pprof/heap?pid=N[&seconds=S] with.
 */
#ifndef MS_MEMTOP_PROFILE_FETCH_H
#define MS_MEMTOP_PROFILE_FETCH_H

#include <stddef.h>
#include <uv.h>

#include "pprof/heap.h"
#include "targets/targetset.h"
#include "wire/profile.h"

typedef struct mt_pfetch_s mt_pfetch_t;

/* The fetch is over (its outcome in *f): called once, from the loop,
 * outside the target set's callbacks, so that it may release f. */
typedef void (*mt_pfetch_done_fn)(void *arg, mt_pfetch_t *f);

struct mt_pfetch_s {
  uv_loop_t *loop;
  uv_timer_t wait; /* the interval, then the call of done */
  mt_tset_t *set;
  int pid;
  long seconds;
  int want, got;                  /* profiles wanted (1 or 2), received */
  ms__profile_decoded_t *prof[2]; /* the caller may take them (NULL them) */
  int failed;   /* no profile to resolve (one that did not sample is one) */
  int profiled; /* the read being answered brought its profile */
  int over;
  int verbose; /* say on stderr that it waits `seconds` (set after start) */
  mt_pfetch_done_fn done;
  void *arg;
  char err[512]; /* why, when failed */
};

/* Starts fetching pid's profile on loop, and with seconds > 0 another that
 * many seconds later; each read's deadline is timeout_ms. Returns the
 * fetch, whose `done` will be called; or NULL with the reason in err
 * (no such process, out of memory), `done` never called. */
mt_pfetch_t *mt_pfetch_start(uv_loop_t *loop, int pid, long seconds,
                             int timeout_ms, mt_pfetch_done_fn done, void *arg,
                             char *err, size_t errlen);

/* Stops the fetch if it is still on its way (done is then not called) and
 * frees it, with the profiles not taken, once libuv has closed its timer
 * (the loop must run on for that). Not from inside `done`'s caller's
 * target-set callbacks: from `done` itself, or any loop callback. */
void mt_pfetch_release(mt_pfetch_t *f);

/* From `done`: hands what the fetch brought to the caller, its profiles
 * in prof[0] and prof[1] (NULL when not brought; the caller frees them)
 * and why it failed in err, then releases f. Returns f's `failed`. */
int mt_pfetch_take(mt_pfetch_t *f, ms__profile_decoded_t *prof[2], char *err,
                   size_t errlen);

/* What the fetch brought, made a heap profile *h of pid: the growth from
 * first to second when there are two, else first; both taken over and
 * freed (NULLed). Names resolved from the target's binaries (through
 * /proc/PID/root: a container's own files). Returns 0, or nonzero with the
 * reason in err (the target does not sample, the profile is malformed,
 * memory ran out); h is then empty. Runs on any thread, touching nothing
 * but its arguments and the target's files. */
int mt_profile_resolve(ms__profile_decoded_t **first,
                       ms__profile_decoded_t **second, int pid, mt_heap_t *h,
                       char *err, size_t errlen);

#endif
