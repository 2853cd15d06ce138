/*
 * live.c - the live view's and `run --once`'s side of the target set (see
 * live.h): every reply, failure and end goes into the model, worded for
 * the user, and the owner hears that something changed.
 */
#include "memtop/live.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memstats.h"
#include "common/fields.h"
#include "common/procfs.h"
#include "wire/wire.h"

/* smaps_rollup costs the target about 10 ms per GiB resident and holds its
 * mmap lock: the live view asks for it only for the process on the detail
 * view, at most this often. A one-off report (--once) asks every time. */
#define SMAPS_EVERY_NS (10 * 1000000000ull)

#define NSMAPS (MS_F_KERNEL_SWAP - MS_F_KERNEL_LAZYFREE + 1)

/* What the live view keeps per target (the set target's `user`): when
 * smaps_rollup was last asked for (0: not since the detail view opened on
 * this process), and the figures of the last reply that had them,
 * carried into the plain snapshots between. */
typedef struct live_target_s {
  uint64_t smaps_asked_ns;
  int have_smaps;
  uint64_t smaps_value[NSMAPS];
} live_target_t;

void mt_live_changed(mt_live_t *l) {
  if (l->changed != NULL)
    l->changed(l->arg);
}

void mt_open_detail(mt_model_t *m, int pid) {
  m->screen = MT_SCREEN_DETAIL;
  m->detail_pid = pid;
}

/* Words for a target whose process ended; t (the model's, or NULL) says
 * whether it ever answered and its name. */
static void gone_words(const mt_target_t *t, int pid, int status,
                       const char *msg, char *buf, size_t len) {
  if (msg == NULL)
    snprintf(buf, len, "exited");
  else if (t != NULL && t->have_snapshot)
    snprintf(buf, len, "PID %d%s%.*s%s exited", pid, t->comm[0] ? " (" : "",
             (int)sizeof t->comm, t->comm, t->comm[0] ? ")" : "");
  else if (status != MS_ENOENT && status != MS_ECONNREFUSED)
    snprintf(buf, len, "PID %d exited before it answered (%.300s)", pid, msg);
  else
    snprintf(buf, len,
             "PID %d: no such process (`memtop ps` lists the processes "
             "memtop can attach to)",
             pid);
}

int mt_live_adopt(mt_model_t *m, mt_tset_target_t *st, size_t user_size) {
  mt_target_t *t;

  st->user = calloc(1, user_size);
  t = st->user != NULL ? mt_model_target(m, st->pid) : NULL;
  if (t == NULL) {
    free(st->user);
    st->user = NULL;
    return MS_ENOMEM;
  }
  t->start_time = st->start_time;
  t->ident_uid = st->id.have_uid ? (int)st->id.uid : -1;
  t->ident_ppid = st->id.ppid > 0 ? st->id.ppid : -1;
  if (t->comm[0] == '\0')
    snprintf(t->comm, sizeof t->comm, "%s", st->comm);
  return 0;
}

void mt_live_drop(mt_model_t *m, mt_tset_target_t *st) {
  mt_model_remove(m, st->pid);
  free(st->user);
  st->user = NULL;
}

void mt_live_record(mt_model_t *m, const mt_tset_t *set,
                    const mt_tset_target_t *st, const ms_snapshot_t *s) {
  mt_target_t *t = mt_model_target(m, st->pid);

  m->now_mono_ns = mt_tset_now_ns(set);
  if (t != NULL && !(t->state == MT_EXITED && st->gone))
    mt_model_update(m, t, s);
  /* The tree view's parent: the set's record, read again at each
   * listing (a daemon re-parented after the model first read /proc
   * moves under its new parent). */
  if (t != NULL && st->id.ppid > 0)
    t->proc.ppid = st->id.ppid;
}

void mt_live_ended(mt_model_t *m, const mt_tset_t *set,
                   const mt_tset_target_t *st, int status, const char *msg) {
  mt_target_t *t = mt_model_find(m, st->pid);
  char words[512];

  m->now_mono_ns = mt_tset_now_ns(set);
  gone_words(t, st->pid, status, msg, words, sizeof words);
  if (t != NULL)
    mt_model_fail(m, t, 1, words);
}

/* ---- membership ------------------------------------------------------ */

static int live_added(void *arg, mt_tset_target_t *st) {
  mt_live_t *l = arg;

  int rc = mt_live_adopt(l->model, st, sizeof(live_target_t));

  if (rc != 0)
    return rc; /* MS_ENOMEM: the set drops it */
  if (l->changed != NULL)
    l->changed(l->arg);
  return 0;
}

static void live_retired(void *arg, mt_tset_target_t *st) {
  mt_live_t *l = arg;

  mt_live_drop(l->model, st);
  if (l->changed != NULL)
    l->changed(l->arg);
}

/* ---- reads ----------------------------------------------------------- */

/* Paused, nothing is read: the figures on screen stay as they are. The
 * process on the detail view gets MS__REQ_SMAPS when its figures are
 * SMAPS_EVERY_NS old; off the detail view the carried figures are
 * dropped, so that coming back never shows figures from long ago, and
 * asks at once. */
static int live_request(void *arg, mt_tset_target_t *st, mt_tset_req_t *req) {
  mt_live_t *l = arg;
  live_target_t *lt = st->user;
  const mt_model_t *m = l->model;
  uint64_t now = mt_tset_now_ns(l->set);

  if (m->paused)
    return 1;
  if (l->want_profile != NULL && l->want_profile(l->arg, st->pid))
    req->profile = 1;
  if (!l->screen || m->screen != MT_SCREEN_DETAIL || m->detail_pid != st->pid) {
    lt->smaps_asked_ns = 0;
    lt->have_smaps = 0;
    return 0;
  }
  if (lt->smaps_asked_ns != 0 && now - lt->smaps_asked_ns < SMAPS_EVERY_NS)
    return 0;
  lt->smaps_asked_ns = now;
  req->wire_flags = MS__REQ_SMAPS;
  return 0;
}

/* Between two smaps replies, a plain snapshot gets the last smaps figures
 * (LazyFree, AnonHugePages, Swap: at most SMAPS_EVERY_NS and a request
 * older), so the detail view does not blink them on and off; RSS stays the
 * plain snapshot's own, from statm. Returns the snapshot to record. */
static const ms_snapshot_t *smaps_carry(const mt_live_t *l, live_target_t *lt,
                                        const ms_snapshot_t *snap) {
  static ms_snapshot_t carried; /* the loop is single-threaded */
  int i;

  if (ms__field_known(snap, MS_F_KERNEL_LAZYFREE) ||
      ms__field_known(snap, MS_F_KERNEL_ANON_HUGE) ||
      ms__field_known(snap, MS_F_KERNEL_SWAP)) {
    for (i = 0; i < NSMAPS; i++)
      lt->smaps_value[i] =
          ms__field_known(snap, MS_F_KERNEL_LAZYFREE + i)
              ? ms__field_u64(snap, (ms_field_t)(MS_F_KERNEL_LAZYFREE + i))
              : UINT64_MAX;
    lt->have_smaps = l->screen;
    return snap;
  }
  if (!lt->have_smaps)
    return snap;
  carried = *snap;
  for (i = 0; i < NSMAPS; i++) {
    if (lt->smaps_value[i] == UINT64_MAX)
      continue;
    ms__field_set_u64(&carried, (ms_field_t)(MS_F_KERNEL_LAZYFREE + i),
                      lt->smaps_value[i]);
    carried.quality[MS_F_KERNEL_LAZYFREE + i] = MS_Q_EXACT;
  }
  return &carried;
}

/* The sites panel's profile, which comes just before its read's snapshot
 * (whose `changed` redraws both). */
static void live_profile(void *arg, mt_tset_target_t *st,
                         mt_tset_profile_t *p) {
  mt_live_t *l = arg;

  if (l->profile != NULL)
    l->profile(l->arg, st->pid, p);
}

static void live_snapshot(void *arg, mt_tset_target_t *st,
                          const ms_snapshot_t *snap) {
  mt_live_t *l = arg;

  mt_live_record(l->model, l->set, st, smaps_carry(l, st->user, snap));
  if (l->changed != NULL)
    l->changed(l->arg);
}

static uint64_t live_failure(void *arg, mt_tset_target_t *st, int status,
                             const char *msg) {
  mt_live_t *l = arg;
  mt_target_t *t = mt_model_find(l->model, st->pid);

  l->model->now_mono_ns = mt_tset_now_ns(l->set);
  if (t != NULL) {
    /* No socket, or nobody listening on it: no agent runs there, and
     * memtop attach may start one (the live view's `a`). */
    t->no_agent = status == MS_ENOENT || status == MS_ECONNREFUSED;
    /* Named by PID, it has no name until a snapshot: its own, from
     * /proc, for the row and the question `a` asks; read again at each
     * try, since one found between its fork and its exec (a shell's
     * `CMD &`) is named `sh` until the exec. */
    if (t->no_agent) {
      char path[64], text[1024];
      uint64_t start;
      snprintf(path, sizeof path, "/proc/%d/stat", st->pid);
      if (ms__read_small_file(path, text, sizeof text) > 0)
        (void)ms__parse_proc_stat(text, t->comm, sizeof t->comm, &start);
    }
    /* The live view and `run` try again. */
    snprintf(l->err, sizeof l->err, "%s; retrying", msg);
    mt_model_fail(l->model, t, 0, l->err);
  }
  mt_live_changed(l);
  return MT_TSET_BACKOFF;
}

static void live_gone(void *arg, mt_tset_target_t *st, int status,
                      const char *msg) {
  mt_live_t *l = arg;

  mt_live_ended(l->model, l->set, st, status, msg);
  if (l->changed != NULL)
    l->changed(l->arg);
}

static void live_quiet(void *arg) {
  mt_live_t *l = arg;

  if (l->changed != NULL)
    l->changed(l->arg);
}

const mt_tset_cbs_t mt_live_cbs = {
    .added = live_added,
    .retired = live_retired,
    .request = live_request,
    .profile = live_profile,
    .snapshot = live_snapshot,
    .failure = live_failure,
    .gone = live_gone,
    .quiet = live_quiet,
};
