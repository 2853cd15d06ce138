/*
 * targetset.c - the set of watched targets (see targetset.h).
 *
 * Each target has a connection and, when reads are timed, a timer. A
 * timed target is read when its timer fires, and the timer is re-armed
 * at once for the next interval, so a slow reply never stretches the
 * cadence; a reply's failure then moves the timer to the back-off (or to
 * the owner's wait). A target found gone never reads again.
 *
 * `inflight` counts the reads on their way over all targets, so that
 * `quiet` can say when the last one has reported: a round ends there.
 *
 * A process a listing finds is a candidate first, which the owner does
 * not see: its first read is the probe (on the loop, through the same
 * connection as every read after it; the listing itself connects to
 * nothing). A candidate that answers, or fails in a way that says the
 * agent is there but in trouble (no answer by the deadline, garbage, a
 * refusal), becomes a target (`added`, then its snapshot or failure);
 * one whose socket refuses connections, is served by another process or
 * has gone is dropped without a word (the io's `stale` decides whether
 * its socket is removed), and is probed again at the next listing if it
 * is still there.
 */
#include "targets/targetset.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct mt_tset_s {
  mt_tset_io_t io;
  mt_tset_opts_t o;
  mt_tset_cbs_t cb;
  void *arg;
  mt_tset_target_t **t;
  size_t n, cap;
  mt_tset_target_t **c; /* candidates: listed, not yet answered */
  size_t nc, capc;
  size_t inflight;
  int stopped;
  void *rescan_timer; /* NULL until mt_tset_start() wants one */
};

/* The set a target belongs to: the timer and reply callbacks get the
 * target only. */
typedef struct tset_slot_s {
  mt_tset_target_t t; /* first: a target's address is its slot's */
  mt_tset_t *set;
  int candidate;      /* in s->c, not s->t: the owner does not know it */
  msc_target_t found; /* a candidate's line in the listing */
} tset_slot_t;

static mt_tset_t *set_of(mt_tset_target_t *t) {
  return ((tset_slot_t *)t)->set;
}

uint64_t mt_tset_now_ns(const mt_tset_t *s) {
  return s->io.now_ns(s->io.ctx);
}

size_t mt_tset_count(const mt_tset_t *s) {
  return s->n;
}

size_t mt_tset_probing(const mt_tset_t *s) {
  return s->nc;
}

mt_tset_target_t *mt_tset_at(const mt_tset_t *s, size_t i) {
  return i < s->n ? s->t[i] : NULL;
}

mt_tset_target_t *mt_tset_find(const mt_tset_t *s, int pid) {
  size_t i;

  for (i = 0; i < s->n; i++)
    if (s->t[i]->pid == pid)
      return s->t[i];
  return NULL;
}

int mt_tset_busy(const mt_tset_t *s, const mt_tset_target_t *t) {
  return t->conn != NULL && s->io.conn_busy(t->conn);
}

mt_tset_t *mt_tset_new(const mt_tset_io_t *io, const mt_tset_opts_t *o,
                       const mt_tset_cbs_t *cbs, void *arg) {
  mt_tset_t *s = calloc(1, sizeof *s);

  if (s == NULL)
    return NULL;
  s->io = *io;
  s->o = *o;
  s->cb = *cbs;
  s->arg = arg;
  return s;
}

/* ---- cadence --------------------------------------------------------- */

/* The wait after `fails` failures in a row: the interval doubled each
 * time, up to backoff_max_ms, so a dead or hung target costs little. */
static uint64_t backoff_ms(const mt_tset_t *s, unsigned fails) {
  uint64_t ms = s->o.interval_ms;
  unsigned i;

  for (i = 0; i < fails && i < 16 && ms < s->o.backoff_max_ms; i++)
    ms *= 2;
  if (ms > s->o.backoff_max_ms)
    ms = s->o.backoff_max_ms;
  return ms < s->o.interval_ms ? s->o.interval_ms : ms;
}

/* Ends a read: counts it, then says `quiet` when it was the last. */
static void read_done(mt_tset_t *s, mt_tset_target_t *t) {
  if (!t->inflight)
    return;
  t->inflight = 0;
  if (--s->inflight == 0 && s->cb.quiet != NULL)
    s->cb.quiet(s->arg);
}

static const mt_tset_req_t plain_read;

static int start_read(mt_tset_t *s, mt_tset_target_t *t,
                      const mt_tset_req_t *req) {
  if (s->io.conn_fetch(t->conn, s->o.timeout_ms,
                       req != NULL ? req : &plain_read) != 0)
    return 0;
  t->inflight = 1;
  t->asked_ns = mt_tset_now_ns(s);
  s->inflight++;
  return 1;
}

static void timer_fired(void *target) {
  mt_tset_target_t *t = target;
  mt_tset_t *s = set_of(t);
  mt_tset_req_t req = {0};

  if (t->gone || s->stopped)
    return;
  mt_tset_schedule(s, t, s->o.interval_ms);
  if (mt_tset_busy(s, t))
    return;
  if (s->cb.request != NULL && s->cb.request(s->arg, t, &req) != 0)
    return;
  start_read(s, t, &req);
}

void mt_tset_schedule(mt_tset_t *s, mt_tset_target_t *t, uint64_t ms) {
  if (s->o.timed && t->timer != NULL && !t->gone)
    s->io.timer_start(t->timer, ms);
}

static void mark_gone(mt_tset_t *s, mt_tset_target_t *t) {
  t->gone = 1;
  t->gone_ns = mt_tset_now_ns(s);
  if (t->timer != NULL)
    s->io.timer_stop(t->timer);
}

void mt_tset_mark_gone(mt_tset_t *s, mt_tset_target_t *t) {
  if (!t->gone)
    mark_gone(s, t);
}

/* ---- replies --------------------------------------------------------- */

static void on_failure(mt_tset_t *s, mt_tset_target_t *t, int status,
                       const char *msg) {
  uint64_t wait;

  t->ok = 0;
  if (t->gone)
    return; /* its end has been said */
  if (!(t->flags & MT_TSET_OWNED) &&
      s->io.proc_gone(s->io.ctx, t->pid, t->start_time)) {
    mark_gone(s, t);
    if (s->cb.gone != NULL)
      s->cb.gone(s->arg, t, status, msg);
    return;
  }
  wait = s->cb.failure != NULL ? s->cb.failure(s->arg, t, status, msg)
                               : MT_TSET_BACKOFF;
  if (t->gone)
    return; /* the owner marked it gone meanwhile */
  if (wait == MT_TSET_BACKOFF)
    wait = backoff_ms(s, ++t->fails);
  mt_tset_schedule(s, t, wait);
}

static int promote(mt_tset_t *s, mt_tset_target_t *t);
static void drop_candidate(mt_tset_t *s, mt_tset_target_t *t);

/* Whether a candidate's failed probe says there is no agent of that PID
 * to show (nobody listens, the socket or the process went, another
 * process serves it) rather than one in trouble. */
static int not_an_agent(int status) {
  return status == MS_ECONNREFUSED || status == MS_ENOENT ||
         status == MS_EUNSAFE || status == MS_ESRCH || status == MS_EACCES ||
         status == -EPERM;
}

/* A candidate's first reply. Returns nonzero if it was dropped (its
 * memory is gone), else it is a target now and the reply goes on. */
static int probe_reply(mt_tset_t *s, mt_tset_target_t *t, int status) {
  tset_slot_t *slot = (tset_slot_t *)t;

  if (status != 0 && not_an_agent(status)) {
    if (status == MS_ECONNREFUSED && s->io.stale != NULL)
      s->io.stale(s->io.ctx, &slot->found);
    drop_candidate(s, t);
    return 1;
  }
  if (promote(s, t) != 0) {
    drop_candidate(s, t);
    return 1;
  }
  return 0;
}

static void on_reply(void *target, int status, const ms_snapshot_t *snap,
                     mt_tset_profile_t *prof, const char *msg) {
  mt_tset_target_t *t = target;
  mt_tset_t *s = set_of(t);
  int probe = ((tset_slot_t *)t)->candidate;

  if (probe && probe_reply(s, t, status) != 0) {
    if (s->cb.probed != NULL)
      s->cb.probed(s->arg);
    return;
  }
  if (status == 0) {
    t->fails = 0;
    t->ok = 1;
    t->last_ok_ns = mt_tset_now_ns(s);
    if (t->start_time == 0)
      t->start_time = snap->start_time;
    if (prof != NULL && s->cb.profile != NULL)
      s->cb.profile(s->arg, t, prof);
    if (s->cb.snapshot != NULL)
      s->cb.snapshot(s->arg, t, snap);
  } else {
    on_failure(s, t, status, msg != NULL ? msg : ms_strerror(status));
  }
  read_done(s, t);
  if (probe && s->cb.probed != NULL)
    s->cb.probed(s->arg);
}

/* ---- membership ------------------------------------------------------ */

static void target_free(mt_tset_t *s, mt_tset_target_t *t) {
  if (t->conn != NULL)
    s->io.conn_close(t->conn);
  if (t->timer != NULL)
    s->io.timer_close(t->timer);
  free(t);
}

static void identified_as(mt_tset_target_t *t, const msc_ident_t *id) {
  t->id = *id;
  if (id->have_uid) {
    t->uid = id->uid;
    t->have_uid = 1;
  }
}

static void listed_as(mt_tset_target_t *t, const msc_target_t *f) {
  /* USER is the process's real owner; the socket's owner only when
   * /proc could not say. */
  t->uid = f->uid;
  t->have_uid = 1;
  identified_as(t, &f->id);
  memcpy(t->comm, f->comm, sizeof t->comm);
  t->comm[sizeof t->comm - 1] = '\0';
}

/* Adds pid; `found` (or NULL) is its line in a listing, known to the
 * target before `added` runs. */
static mt_tset_target_t *add_target(mt_tset_t *s, int pid, uint64_t start_time,
                                    unsigned flags, const msc_target_t *found) {
  mt_tset_target_t *t, **grown;
  tset_slot_t *slot;
  msc_ident_t id;
  int have_id = 0;
  size_t cap;

  t = mt_tset_find(s, pid);
  if (t != NULL)
    return t;
  if (s->n == s->cap) {
    cap = s->cap ? s->cap * 2 : 16;
    grown = realloc(s->t, cap * sizeof *grown);
    if (grown == NULL)
      return NULL;
    s->t = grown;
    s->cap = cap;
  }
  slot = calloc(1, sizeof *slot);
  if (slot == NULL)
    return NULL;
  slot->set = s;
  t = &slot->t;
  t->pid = pid;
  t->start_time = start_time;
  t->flags = flags;
  if (found != NULL) {
    listed_as(t, found);
  } else if (s->io.identify != NULL &&
             s->io.identify(s->io.ctx, pid, &id) == 0) {
    identified_as(t, &id);
    have_id = 1;
  }
  t->conn = s->io.conn_new(s->io.ctx, pid, start_time, on_reply, t);
  /* Its first connect finds the socket with what was just read. */
  if (have_id && t->conn != NULL && s->io.conn_ident != NULL)
    s->io.conn_ident(t->conn, &id);
  if (s->o.timed)
    t->timer = s->io.timer_new(s->io.ctx, timer_fired, t);
  if (t->conn == NULL || (s->o.timed && t->timer == NULL) ||
      (s->cb.added != NULL && s->cb.added(s->arg, t) != 0)) {
    target_free(s, t);
    return NULL;
  }
  s->t[s->n++] = t;
  return t;
}

/* A candidate for pid, found by a listing; probed at once when reads are
 * timed (else by the next mt_tset_fetch_all()). NULL on ENOMEM. */
static mt_tset_target_t *add_candidate(mt_tset_t *s, const msc_target_t *f) {
  mt_tset_target_t *t, **grown;
  tset_slot_t *slot;
  size_t cap;

  if (s->nc == s->capc) {
    cap = s->capc ? s->capc * 2 : 16;
    grown = realloc(s->c, cap * sizeof *grown);
    if (grown == NULL)
      return NULL;
    s->c = grown;
    s->capc = cap;
  }
  slot = calloc(1, sizeof *slot);
  if (slot == NULL)
    return NULL;
  slot->set = s;
  slot->candidate = 1;
  slot->found = *f;
  t = &slot->t;
  t->pid = f->pid;
  t->start_time = f->start_time;
  listed_as(t, f);
  t->conn = s->io.conn_new(s->io.ctx, f->pid, f->start_time, on_reply, t);
  if (t->conn == NULL) {
    free(slot);
    return NULL;
  }
  s->c[s->nc++] = t;
  if (s->o.timed && !s->stopped)
    start_read(s, t, NULL);
  return t;
}

static mt_tset_target_t *find_candidate(const mt_tset_t *s, int pid) {
  for (size_t i = 0; i < s->nc; i++)
    if (s->c[i]->pid == pid)
      return s->c[i];
  return NULL;
}

/* Takes t out of the candidates; its read, if one is on its way, no
 * longer counts (the last one to end says `quiet`, as read_done would). */
static void unlist_candidate(mt_tset_t *s, mt_tset_target_t *t, int quiet) {
  for (size_t i = 0; i < s->nc; i++) {
    if (s->c[i] != t)
      continue;
    memmove(&s->c[i], &s->c[i + 1], (s->nc - i - 1) * sizeof t);
    s->nc--;
    break;
  }
  if (t->inflight) {
    t->inflight = 0;
    if (--s->inflight == 0 && quiet && s->cb.quiet != NULL)
      s->cb.quiet(s->arg);
  }
}

/* From a reply: the candidate goes, unseen by the owner. */
static void drop_candidate(mt_tset_t *s, mt_tset_target_t *t) {
  unlist_candidate(s, t, 1);
  target_free(s, t);
}

/* A candidate answered: it joins the targets (in PID order among the
 * listed ones, as a listing has them) and the owner hears of it. Its read
 * is still counted: the reply that promoted it ends it. Returns 0,
 * MS_ENOMEM (no room for it, or for its timer), or the nonzero `added`
 * returned when the owner refused it. */
static int promote(mt_tset_t *s, mt_tset_target_t *t) {
  size_t i;
  int rc;

  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 16;
    mt_tset_target_t **grown = realloc(s->t, cap * sizeof *grown);
    if (grown == NULL)
      return MS_ENOMEM;
    s->t = grown;
    s->cap = cap;
  }
  if (s->o.timed && t->timer == NULL &&
      (t->timer = s->io.timer_new(s->io.ctx, timer_fired, t)) == NULL)
    return MS_ENOMEM;
  if (s->cb.added != NULL && (rc = s->cb.added(s->arg, t)) != 0)
    return rc;
  /* Still counted in flight: taken out of the candidates without it. */
  int inflight = t->inflight;
  t->inflight = 0;
  unlist_candidate(s, t, 0);
  t->inflight = inflight;
  ((tset_slot_t *)t)->candidate = 0;
  for (i = 0; i < s->n && s->t[i]->pid < t->pid; i++) {
  }
  memmove(&s->t[i + 1], &s->t[i], (s->n - i) * sizeof t);
  s->t[i] = t;
  s->n++;
  if (!s->stopped)
    mt_tset_schedule(s, t, s->o.interval_ms);
  return 0;
}

mt_tset_target_t *mt_tset_add(mt_tset_t *s, int pid, uint64_t start_time,
                              unsigned flags) {
  return add_target(s, pid, start_time, flags, NULL);
}

void mt_tset_remove(mt_tset_t *s, mt_tset_target_t *t) {
  size_t i;

  for (i = 0; i < s->n; i++) {
    if (s->t[i] != t)
      continue;
    memmove(&s->t[i], &s->t[i + 1], (s->n - i - 1) * sizeof t);
    s->n--;
    break;
  }
  if (s->cb.retired != NULL)
    s->cb.retired(s->arg, t);
  /* Its reply will not come: the read no longer counts. */
  if (t->inflight) {
    t->inflight = 0;
    s->inflight--;
  }
  target_free(s, t);
}

void mt_tset_free(mt_tset_t *s) {
  if (s == NULL)
    return;
  while (s->nc > 0) {
    mt_tset_target_t *t = s->c[s->nc - 1];
    unlist_candidate(s, t, 0);
    target_free(s, t);
  }
  free(s->c);
  while (s->n > 0)
    mt_tset_remove(s, s->t[s->n - 1]);
  if (s->rescan_timer != NULL)
    s->io.timer_close(s->rescan_timer);
  free(s->t);
  free(s);
}

/* ---- reading --------------------------------------------------------- */

size_t mt_tset_fetch_all(mt_tset_t *s, const mt_tset_req_t *req) {
  size_t i, started = 0;

  for (i = 0; i < s->n; i++)
    s->t[i]->ok = 0;
  /* Every request goes out at once: a hung target costs one timeout for
   * the whole round, not one per target. */
  for (i = 0; i < s->n; i++)
    if (!s->t[i]->gone && !mt_tset_busy(s, s->t[i]))
      started += (size_t)start_read(s, s->t[i], req);
  /* A candidate's first read is its probe. */
  for (i = 0; i < s->nc; i++)
    if (!mt_tset_busy(s, s->c[i]))
      started += (size_t)start_read(s, s->c[i], req);
  return started;
}

/* ---- discovery ------------------------------------------------------- */

/* A listing did not find t: retire it, or see whether it is gone and for
 * how long. */
static void unlisted(mt_tset_t *s, mt_tset_target_t *t, uint64_t now) {
  if (s->o.retire_unlisted) {
    mt_tset_remove(s, t);
    return;
  }
  if (!t->gone && s->io.proc_gone(s->io.ctx, t->pid, t->start_time)) {
    mark_gone(s, t);
    if (s->cb.gone != NULL)
      s->cb.gone(s->arg, t, 0, NULL);
  }
  /* now was read before this listing: a target marked gone by it has a
   * later gone_ns, and has been gone for no time at all. */
  if (t->gone &&
      (s->o.keep_gone_ms == 0 ||
       (now > t->gone_ns && now - t->gone_ns > s->o.keep_gone_ms * 1000000u)))
    mt_tset_remove(s, t);
}

/* Whether pid is the tree's root or below it: its parents walked up
 * (at most a deep chain's worth: a loop or a race ends the walk). */
static int in_tree(const mt_tset_t *s, int pid) {
  int root = s->o.tree_root;

  for (int depth = 0; depth < 4096 && pid > 0; depth++) {
    if (pid == root)
      return 1;
    if (s->io.parent_of == NULL)
      return 0;
    pid = s->io.parent_of(s->io.ctx, pid);
  }
  return 0;
}

int mt_tset_rescan(mt_tset_t *s) {
  msc_target_t *found = NULL;
  mt_tset_target_t *t;
  uint64_t now;
  size_t n = 0, i;
  int rc;

  rc = s->io.discover(s->io.ctx, &found, &n);
  if (rc != 0)
    return rc;
  now = mt_tset_now_ns(s);
  for (i = 0; i < s->n; i++)
    s->t[i]->seen = 0;
  for (i = 0; i < s->nc; i++)
    s->c[i]->seen = 0;
  for (i = 0; i < n; i++) {
    if (s->o.tree_root > 0 && !in_tree(s, found[i].pid))
      continue; /* outside the tree: as if not listed */
    t = mt_tset_find(s, found[i].pid);
    if (t != NULL && t->gone && found[i].start_time != t->start_time) {
      /* The PID was reused by a new attachable process. */
      mt_tset_remove(s, t);
      t = NULL;
    }
    if (t == NULL) {
      t = find_candidate(s, found[i].pid);
      if (t != NULL && t->start_time != found[i].start_time) {
        unlist_candidate(s, t, 0);
        target_free(s, t);
        t = NULL;
      }
      if (t == NULL)
        t = add_candidate(s, &found[i]);
      if (t == NULL)
        continue;
      ((tset_slot_t *)t)->found = found[i];
    }
    t->seen = 1;
    listed_as(t, &found[i]);
  }
  free(found);
  /* A candidate no longer listed goes (its probe with it). */
  for (i = s->nc; i-- > 0;) {
    t = s->c[i];
    if (!t->seen) {
      unlist_candidate(s, t, 0);
      target_free(s, t);
    }
  }
  for (i = s->n; i-- > 0;) {
    t = s->t[i];
    if (!t->seen && !(t->flags & MT_TSET_OWNED))
      unlisted(s, t, now);
  }
  return 0;
}

static uint64_t rescan_ms(const mt_tset_t *s) {
  /* Listing the directory costs a readdir and a /proc read per process:
   * not every tick when ticks are fast. */
  uint64_t ms = s->o.interval_ms;
  return ms < s->o.rescan_min_ms ? s->o.rescan_min_ms : ms;
}

static void rescan_fired(void *arg) {
  mt_tset_t *s = arg;

  if (s->stopped)
    return;
  s->io.timer_start(s->rescan_timer, rescan_ms(s));
  mt_tset_rescan(s);
}

void mt_tset_start(mt_tset_t *s) {
  size_t i;

  if (!s->o.timed)
    return;
  s->stopped = 0;
  if (s->o.rescan_min_ms > 0 && s->rescan_timer == NULL)
    s->rescan_timer = s->io.timer_new(s->io.ctx, rescan_fired, s);
  if (s->rescan_timer != NULL)
    s->io.timer_start(s->rescan_timer, rescan_ms(s));
  for (i = 0; i < s->n; i++)
    mt_tset_schedule(s, s->t[i], 0);
}

void mt_tset_stop(mt_tset_t *s) {
  size_t i;

  s->stopped = 1;
  for (i = 0; i < s->n; i++)
    if (s->t[i]->timer != NULL)
      s->io.timer_stop(s->t[i]->timer);
  if (s->rescan_timer != NULL)
    s->io.timer_stop(s->rescan_timer);
}

void mt_tset_set_interval(mt_tset_t *s, uint64_t interval_ms) {
  size_t i;

  s->o.interval_ms = interval_ms;
  if (s->stopped)
    return;
  for (i = 0; i < s->n; i++)
    if (!s->t[i]->gone && s->t[i]->fails == 0)
      mt_tset_schedule(s, s->t[i], interval_ms);
  if (s->rescan_timer != NULL)
    s->io.timer_start(s->rescan_timer, rescan_ms(s));
}
