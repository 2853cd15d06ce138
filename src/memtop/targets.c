/*
 * targets.c - the targets of memtop's loop (see loop_int.h): a watch per
 * process, found by name or by listing the socket directory, each read on
 * its own timer in the live view and `run --once`, backing off while it
 * fails, and marked exited when the process is gone.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "memstats.h"
#include "client/client.h"
#include "common/fields.h"
#include "memtop/conn.h"
#include "memtop/loop.h"
#include "memtop/loop_int.h"
#include "memtop/model.h"
#include "wire/wire.h"

/* smaps_rollup costs the target about 10 ms per GiB resident and holds its
 * mmap lock: the live view asks for it only for the process on the detail
 * view, at most this often. A one-off report (--once) asks every time. */
#define SMAPS_EVERY_NS (10 * 1000000000ull)

/* ---- processes ------------------------------------------------------- */

/* Nonzero if `pid` no longer is the process we watch: no /proc entry, a
 * zombie, or another process with the same PID (start time differs). */
static int proc_gone(int pid, uint64_t start_time) {
  char path[64], buf[1024], *p;
  unsigned long long st = 0;
  ssize_t n;
  int fd, field;

  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return errno == ENOENT || errno == ESRCH;
  n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0)
    return 1;
  buf[n] = '\0';
  /* The name may hold spaces and parentheses: fields start after the
   * last ')'. Field 3 is the state, field 22 the start time. */
  p = strrchr(buf, ')');
  if (p == NULL || p[1] != ' ')
    return 0;
  p += 2;
  if (*p == 'Z' || *p == 'X')
    return 1;
  for (field = 3; field < 22 && p != NULL; field++) {
    p = strchr(p, ' ');
    if (p != NULL)
      p++;
  }
  if (p != NULL && sscanf(p, "%llu", &st) == 1 && start_time != 0 &&
      st != start_time)
    return 1;
  return 0;
}

/* ---- watches --------------------------------------------------------- */

static void on_result(mt_conn_t *c, int status, const ms_snapshot_t *snap,
                      const char *msg, void *arg);

static mt_watch_t *watch_find(mt_app_t *app, int pid) {
  size_t i;

  for (i = 0; i < app->nw; i++)
    if (app->w[i]->pid == pid)
      return app->w[i];
  return NULL;
}

/* Watching a single process (one PID named, or `memtop run`), the live
 * view opens on its detail view; a list is for several. */
void mt_open_detail(mt_model_t *m, int pid) {
  m->screen = MT_SCREEN_DETAIL;
  m->detail_pid = pid;
}

mt_watch_t *mt_watch_add(mt_app_t *app, int pid, uint64_t start_time) {
  mt_watch_t *w, **grown;
  mt_target_t *t;
  size_t cap;

  if (app->nw == app->capw) {
    cap = app->capw ? app->capw * 2 : 16;
    grown = realloc(app->w, cap * sizeof *grown);
    if (grown == NULL)
      return NULL;
    app->w = grown;
    app->capw = cap;
  }
  w = calloc(1, sizeof *w);
  if (w == NULL)
    return NULL;
  w->app = app;
  w->pid = pid;
  w->start_time = start_time;
  t = mt_model_target(&app->model, pid);
  w->conn = mt_conn_new(&app->loop, pid, start_time, on_result, w);
  if (t == NULL || w->conn == NULL) {
    if (w->conn != NULL)
      mt_conn_close(w->conn);
    free(w);
    return NULL;
  }
  t->start_time = start_time;
  uv_timer_init(&app->loop, &w->timer);
  w->timer.data = w;
  app->w[app->nw++] = w;
  return w;
}

static void watch_freed(uv_handle_t *h) {
  free(h->data);
}

/* Stops reading a target and forgets it (the model keeps or drops the
 * target separately). */
void mt_watch_remove(mt_app_t *app, mt_watch_t *w) {
  size_t i;

  for (i = 0; i < app->nw; i++) {
    if (app->w[i] != w)
      continue;
    memmove(&app->w[i], &app->w[i + 1], (app->nw - i - 1) * sizeof w);
    app->nw--;
    break;
  }
  mt_conn_close(w->conn);
  uv_close((uv_handle_t *)&w->timer, watch_freed);
}

/* The wait after `fails` failures in a row: the -d interval doubled each
 * time, up to MT_BACKOFF_MAX_S, so a dead or hung target costs little. */
static uint64_t backoff_ms(const mt_app_t *app, unsigned fails) {
  double ms = (double)mt_delay_ms(app);
  unsigned i;

  for (i = 0; i < fails && i < 16; i++)
    ms *= 2;
  if (ms > MT_BACKOFF_MAX_S * 1000)
    ms = MT_BACKOFF_MAX_S * 1000;
  if (ms < (double)mt_delay_ms(app))
    ms = (double)mt_delay_ms(app);
  return (uint64_t)ms;
}

/* ---- reading --------------------------------------------------------- */

/* The live view's request flags for w: MS__REQ_SMAPS when it is on the
 * detail view and its figures are SMAPS_EVERY_NS old. Off the detail view
 * the carried figures are dropped, so that coming back never shows
 * figures from long ago, and asks at once. */
static uint64_t watch_smaps_due(mt_watch_t *w) {
  const mt_model_t *m = &w->app->model;
  uint64_t now = uv_hrtime();

  if (w->app->mode != MODE_LIVE || m->screen != MT_SCREEN_DETAIL ||
      m->detail_pid != w->pid) {
    w->smaps_asked_ns = 0;
    w->have_smaps = 0;
    return 0;
  }
  if (w->smaps_asked_ns != 0 && now - w->smaps_asked_ns < SMAPS_EVERY_NS)
    return 0;
  w->smaps_asked_ns = now;
  return MS__REQ_SMAPS;
}

/* Between two smaps replies, a plain snapshot gets the last smaps figures
 * (LazyFree, AnonHugePages, Swap: at most SMAPS_EVERY_NS and a request
 * older), so the detail view does not blink them on and off; RSS stays the
 * plain snapshot's own, from statm. Returns the snapshot to record. */
static const ms_snapshot_t *watch_smaps_carry(mt_watch_t *w,
                                              const ms_snapshot_t *snap) {
  static ms_snapshot_t carried; /* the loop is single-threaded */
  int i, n = MS_F_KERNEL_SWAP - MS_F_KERNEL_LAZYFREE + 1;

  if (snap->quality[MS_F_KERNEL_LAZYFREE] != MS_Q_UNAVAILABLE ||
      snap->quality[MS_F_KERNEL_ANON_HUGE] != MS_Q_UNAVAILABLE ||
      snap->quality[MS_F_KERNEL_SWAP] != MS_Q_UNAVAILABLE) {
    for (i = 0; i < n; i++)
      w->smaps_value[i] =
          snap->quality[MS_F_KERNEL_LAZYFREE + i] != MS_Q_UNAVAILABLE
              ? ms__field_u64(snap, (ms_field_t)(MS_F_KERNEL_LAZYFREE + i))
              : UINT64_MAX;
    w->have_smaps = w->app->mode == MODE_LIVE;
    return snap;
  }
  if (!w->have_smaps)
    return snap;
  carried = *snap;
  for (i = 0; i < n; i++) {
    if (w->smaps_value[i] == UINT64_MAX)
      continue;
    ms__field_set_u64(&carried, (ms_field_t)(MS_F_KERNEL_LAZYFREE + i),
                      w->smaps_value[i]);
    carried.quality[MS_F_KERNEL_LAZYFREE + i] = MS_Q_EXACT;
  }
  return &carried;
}

static void watch_tick(uv_timer_t *timer) {
  mt_watch_t *w = timer->data;
  mt_app_t *app = w->app;

  if (w->gone || app->quitting)
    return;
  /* Paused: the figures on screen stay as they are; nothing is read. */
  if (app->model.paused || mt_conn_busy(w->conn)) {
    mt_watch_schedule(w, mt_delay_ms(app));
    return;
  }
  mt_watch_schedule(w, mt_delay_ms(app));
  mt_conn_fetch_flags(w->conn, app->timeout_ms, watch_smaps_due(w));
}

void mt_watch_schedule(mt_watch_t *w, uint64_t ms) {
  uv_timer_start(&w->timer, watch_tick, ms, 0);
}

static void on_failure(mt_app_t *app, mt_watch_t *w, mt_target_t *t, int status,
                       const char *msg) {
  int exited;
  double waited;

  snprintf(w->err, sizeof w->err, "%s",
           msg != NULL ? msg : ms_strerror(status));
  w->ok = 0;
  exited = w->is_child ? app->child_exited : proc_gone(w->pid, w->start_time);
  if (exited) {
    w->gone = 1;
    uv_timer_stop(&w->timer);
    if (w->is_child)
      mt_command_exit_words(app, w->err, sizeof w->err);
    else if (t != NULL && t->have_snapshot)
      snprintf(w->err, sizeof w->err, "PID %d%s%.*s%s exited", w->pid,
               t->comm[0] ? " (" : "", (int)sizeof t->comm, t->comm,
               t->comm[0] ? ")" : "");
    else if (status != MS_ENOENT && status != MS_ECONNREFUSED)
      snprintf(w->err, sizeof w->err,
               "PID %d exited before it answered (%.300s)", w->pid,
               msg != NULL ? msg : ms_strerror(status));
    else
      snprintf(w->err, sizeof w->err,
               "PID %d: no such process (`memtop ps` lists the processes "
               "memtop can attach to)",
               w->pid);
    if (t != NULL)
      mt_model_fail(&app->model, t, 1, w->err);
    return;
  }
  /* `run`: until the command's library has opened its socket, a missing
   * socket is expected; try again soon, and say so if it takes long. */
  if (w->is_child && t != NULL && !t->have_snapshot &&
      (status == MS_ENOENT || status == MS_ECONNREFUSED)) {
    waited = (double)(uv_hrtime() - app->child_start_ns) / 1e9;
    if (waited > RUN_WAIT_NOTE_S) {
      snprintf(w->err, sizeof w->err,
               "PID %d (%s) has not opened its memstats socket after %.0f s: "
               "the preload is not in effect (a static or setuid program, "
               "or MEMSTATS_AGENT=0?)",
               w->pid, mt_command_name(app), waited);
      mt_model_fail(&app->model, t, 0, w->err);
      if (app->mode != MODE_ROUNDS)
        mt_watch_schedule(w, mt_delay_ms(app));
    } else if (app->mode != MODE_ROUNDS) {
      mt_watch_schedule(w, RUN_FAST_RETRY_MS);
    }
    return;
  }
  w->fails++;
  /* Say "retrying" only where memtop will: the live view, `run`, and a
   * round that has others after it. */
  if (app->mode != MODE_ROUNDS || app->rounds + 1 < mt_rounds_wanted(app)) {
    size_t n = strlen(w->err);
    snprintf(w->err + n, sizeof w->err - n, "; retrying");
  }
  if (t != NULL)
    mt_model_fail(&app->model, t, 0, w->err);
  if (app->mode != MODE_ROUNDS)
    mt_watch_schedule(w, backoff_ms(app, w->fails));
}

static void on_result(mt_conn_t *c, int status, const ms_snapshot_t *snap,
                      const char *msg, void *arg) {
  mt_watch_t *w = arg;
  mt_app_t *app = w->app;
  mt_target_t *t = mt_model_find(&app->model, w->pid);

  (void)c;
  app->model.now_mono_ns = uv_hrtime();
  if (status == 0) {
    w->fails = 0;
    w->ok = 1;
    w->err[0] = '\0';
    if (t == NULL)
      t = mt_model_target(&app->model, w->pid);
    snap = watch_smaps_carry(w, snap);
    if (t != NULL && !(t->state == MT_EXITED && w->gone))
      mt_model_update(&app->model, t, snap);
    if (w->start_time == 0)
      w->start_time = snap->start_time;
  } else {
    on_failure(app, w, t, status, msg);
  }

  switch (app->mode) {
  case MODE_LIVE:
    mt_request_draw(app);
    break;
  case MODE_POLL:
    if (app->child_exited)
      mt_command_poll_finish(app);
    break;
  case MODE_ROUNDS:
    if (w->pending) {
      w->pending = 0;
      if (--app->pending == 0)
        mt_round_end(app);
    }
    break;
  }
}

/* ---- discovery ------------------------------------------------------- */

/* Lists the attachable processes and adds the new ones. In the live view,
 * processes that vanished are marked exited (and dropped after a while);
 * in rounds, only the processes found now take part. Returns 0 or the
 * discovery error. */
int mt_rescan(mt_app_t *app) {
  msc_target_t *found = NULL;
  size_t n = 0, i;
  mt_watch_t *w;
  mt_target_t *t;
  uint64_t now = uv_hrtime();
  int rc;

  rc = msc_discover(&found, &n);
  if (rc != 0)
    return rc;
  for (i = 0; i < app->nw; i++)
    app->w[i]->seen = 0;
  for (i = 0; i < n; i++) {
    w = watch_find(app, found[i].pid);
    if (w != NULL && w->gone && found[i].start_time != w->start_time) {
      /* The PID was reused by a new attachable process. */
      mt_model_remove(&app->model, w->pid);
      mt_watch_remove(app, w);
      w = NULL;
    }
    if (w == NULL) {
      w = mt_watch_add(app, found[i].pid, found[i].start_time);
      if (w == NULL)
        continue;
      if (app->mode == MODE_LIVE)
        mt_watch_schedule(w, 0);
    }
    w->seen = 1;
    w->uid = found[i].uid;
    w->have_uid = 1;
    snprintf(w->comm, sizeof w->comm, "%s", found[i].comm);
    t = mt_model_find(&app->model, w->pid);
    if (t != NULL && t->comm[0] == '\0')
      snprintf(t->comm, sizeof t->comm, "%s", found[i].comm);
  }
  free(found);

  for (i = app->nw; i-- > 0;) {
    w = app->w[i];
    if (w->seen || w->is_child)
      continue;
    if (app->mode == MODE_ROUNDS) {
      mt_model_remove(&app->model, w->pid);
      mt_watch_remove(app, w);
      continue;
    }
    t = mt_model_find(&app->model, w->pid);
    if (!w->gone && proc_gone(w->pid, w->start_time)) {
      w->gone = 1;
      uv_timer_stop(&w->timer);
      if (t != NULL)
        mt_model_fail(&app->model, t, 1, "exited");
    }
    if (w->gone && t != NULL && t->exited_mono_ns != 0 &&
        (double)(now - t->exited_mono_ns) / 1e9 > MT_EXITED_KEEP_S) {
      mt_model_remove(&app->model, w->pid);
      mt_watch_remove(app, w);
    }
  }
  return 0;
}

static uint64_t rescan_ms(const mt_app_t *app) {
  /* Listing the directory costs a readdir and a /proc read per process:
   * not every tick when ticks are fast. */
  uint64_t ms = mt_delay_ms(app);
  return ms < 2000 ? 2000 : ms;
}

static void rescan_cb(uv_timer_t *t) {
  mt_app_t *app = t->data;

  if (mt_rescan(app) == 0)
    mt_request_draw(app);
}

void mt_rescan_start(mt_app_t *app) {
  uv_timer_start(&app->rescan, rescan_cb, rescan_ms(app), rescan_ms(app));
}
