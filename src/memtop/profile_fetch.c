/*
 * profile_fetch.c - a heap profile fetched and resolved (see
 * profile_fetch.h): through a target set of its own (targetset.h: one PID,
 * not timed, each read asking for the profile on memtop's libuv
 * connection, conn.c), the second read on a loop timer; then built and
 * resolved by src/pprof.
 */
#include "memtop/profile_fetch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"
#include "memstats.h"

/* Every read here asks for the profile. */
static const mt_tset_req_t pf_req = {.profile = 1};

static void pf_done_cb(uv_timer_t *h) {
  mt_pfetch_t *f = h->data;
  if (f->done)
    f->done(f->arg, f);
}

/* The fetch is over: `done` runs from the timer, outside the set's
 * callbacks. */
static void pf_over(mt_pfetch_t *f) {
  if (f->over)
    return;
  f->over = 1;
  /* A target that does not sample is no failure here: its profile came,
   * and mt_profile_resolve() says why it is empty. */
  if (f->got > 0 && f->prof[0]->profile.rate == 0)
    f->failed = 0;
  if (!f->failed && f->got == 0) {
    f->failed = 1;
    snprintf(f->err, sizeof f->err, "PID %d: no profile came", f->pid);
  }
  uv_timer_start(&f->wait, pf_done_cb, 0, 0);
}

/* The profile comes just before its read's snapshot. */
static void pf_profile(void *arg, mt_tset_target_t *t, mt_tset_profile_t *p) {
  mt_pfetch_t *f = arg;
  (void)t;
  f->profiled = 1;
  if (p->prof == NULL) {
    f->failed = 1;
    snprintf(f->err, sizeof f->err, "%s", p->msg);
    return;
  }
  if (f->got < 2) {
    f->prof[f->got++] = p->prof;
    p->prof = NULL;
  }
}

static void pf_snapshot(void *arg, mt_tset_target_t *t,
                        const ms_snapshot_t *snap) {
  mt_pfetch_t *f = arg;
  (void)t;
  (void)snap;
  if (!f->profiled) {
    f->failed = 1;
    snprintf(f->err, sizeof f->err, "%s", "the target sent no profile");
  }
  f->profiled = 0;
}

static uint64_t pf_failure(void *arg, mt_tset_target_t *t, int status,
                           const char *msg) {
  mt_pfetch_t *f = arg;
  (void)t;
  (void)status;
  f->failed = 1;
  snprintf(f->err, sizeof f->err, "%s", msg);
  return MT_TSET_BACKOFF;
}

/* The process ended: said as its end, not as the failed read's words (a
 * refused connection to the socket it left would blame its agent). */
static void pf_gone(void *arg, mt_tset_target_t *t, int status,
                    const char *msg) {
  mt_pfetch_t *f = arg;
  f->failed = 1;
  if (f->got > 0)
    snprintf(f->err, sizeof f->err,
             "PID %d exited before the second profile, %ld s after the "
             "first: nothing written (without --seconds, one profile is "
             "taken at once)",
             t->pid, f->seconds);
  else if (msg != NULL && status != MS_ENOENT && status != MS_ECONNREFUSED)
    snprintf(f->err, sizeof f->err, "PID %d exited before it answered (%s)",
             t->pid, msg);
  else
    snprintf(f->err, sizeof f->err, "PID %d has exited", t->pid);
}

static void pf_second(uv_timer_t *h) {
  mt_pfetch_t *f = h->data;
  if (mt_tset_fetch_all(f->set, &pf_req) == 0) {
    f->failed = 1;
    snprintf(f->err, sizeof f->err, "PID %d: cannot ask for the profile",
             f->pid);
    pf_over(f);
  }
}

/* The read has reported: wait for the second, or end. */
static void pf_quiet(void *arg) {
  mt_pfetch_t *f = arg;
  if (f->failed || f->got >= f->want ||
      (f->got == 1 && f->prof[0]->profile.rate == 0)) {
    /* (A target that does not sample: no second read.) */
    pf_over(f);
    return;
  }
  if (f->verbose)
    fprintf(stderr, "memtop: PID %d: profiling for %ld s...\n", f->pid,
            f->seconds);
  uv_timer_start(&f->wait, pf_second, (uint64_t)f->seconds * 1000, 0);
}

static const mt_tset_cbs_t pf_cbs = {
    .profile = pf_profile,
    .snapshot = pf_snapshot,
    .failure = pf_failure,
    .gone = pf_gone,
    .quiet = pf_quiet,
};

mt_pfetch_t *mt_pfetch_start(uv_loop_t *loop, int pid, long seconds,
                             int timeout_ms, mt_pfetch_done_fn done, void *arg,
                             char *err, size_t errlen) {
  uint64_t st = 0;
  if (msc_proc_start_time(pid, &st) != 0) {
    snprintf(err, errlen, "PID %d: no such process", pid);
    return NULL;
  }
  mt_pfetch_t *f = calloc(1, sizeof *f);
  if (f == NULL) {
    snprintf(err, errlen, "PID %d: out of memory", pid);
    return NULL;
  }
  f->loop = loop;
  f->pid = pid;
  f->seconds = seconds;
  f->want = seconds > 0 ? 2 : 1;
  f->done = done;
  f->arg = arg;
  uv_timer_init(loop, &f->wait);
  f->wait.data = f;
  mt_tset_io_t io;
  mt_tset_opts_t so;
  mt_tset_io_uv(&io, loop);
  memset(&so, 0, sizeof so);
  so.timeout_ms = timeout_ms;
  f->set = mt_tset_new(&io, &so, &pf_cbs, f);
  if (f->set == NULL || mt_tset_add(f->set, pid, st, 0) == NULL ||
      mt_tset_fetch_all(f->set, &pf_req) == 0) {
    snprintf(err, errlen, "PID %d: out of memory", pid);
    f->done = NULL;
    mt_pfetch_release(f);
    return NULL;
  }
  return f;
}

static void pf_closed(uv_handle_t *h) {
  mt_pfetch_t *f = h->data;
  ms__profile_decoded_free(f->prof[0]);
  ms__profile_decoded_free(f->prof[1]);
  free(f);
}

void mt_pfetch_release(mt_pfetch_t *f) {
  if (f == NULL)
    return;
  f->done = NULL;
  mt_tset_free(f->set);
  f->set = NULL;
  uv_timer_stop(&f->wait);
  uv_close((uv_handle_t *)&f->wait, pf_closed);
}

int mt_pfetch_take(mt_pfetch_t *f, ms__profile_decoded_t *prof[2], char *err,
                   size_t errlen) {
  int failed = f->failed;
  prof[0] = f->prof[0];
  prof[1] = f->prof[1];
  f->prof[0] = f->prof[1] = NULL;
  snprintf(err, errlen, "%s", f->err);
  mt_pfetch_release(f);
  return failed;
}

int mt_profile_resolve(ms__profile_decoded_t **first,
                       ms__profile_decoded_t **second, int pid, mt_heap_t *h,
                       char *err, size_t errlen) {
  int rc;
  memset(h, 0, sizeof *h);
  if ((*first)->profile.rate == 0) {
    snprintf(err, errlen,
             "PID %d does not sample its allocations "
             "(MEMSTATS_PROFILE_RATE=0 in its environment): start it without "
             "that setting for a heap profile",
             pid);
    rc = MS_ENOSYS;
    goto out;
  }
  const ms__profile_decoded_t *last = *second != NULL ? *second : *first;
  uint64_t start_time = last->profile.start_time;
  rc = mt_heap_build(&last->profile,
                     *second != NULL ? &(*first)->profile : NULL, h);
  /* What was received is in h now: freed before the larger steps. */
  ms__profile_decoded_free(*first);
  ms__profile_decoded_free(*second);
  *first = *second = NULL;
  if (rc != 0) {
    snprintf(err, errlen, "PID %d: cannot build the profile: %s", pid,
             mt_heap_strerror(rc));
    memset(h, 0, sizeof *h);
    return rc;
  }
  rc = mt_heap_symbolize(h, pid, start_time);
  if (rc != 0) {
    snprintf(err, errlen, "PID %d: resolving names: %s", pid,
             mt_heap_strerror(rc));
    mt_heap_free(h);
    memset(h, 0, sizeof *h);
  }
  return rc;
out:
  ms__profile_decoded_free(*first);
  ms__profile_decoded_free(*second);
  *first = *second = NULL;
  return rc;
}
