/*
 * loop.c - memtop's one event loop (see loop.h).
 *
 * Three ways of driving the same machinery:
 *
 *   live    per-target timers at the -d interval pull snapshots into the
 *           model; failing targets back off; when no PID was named the
 *           socket directory is rescanned for new and exited processes;
 *           keys, SIGWINCH and the frame timer drive the view (ui.h);
 *   poll    `run --once`: the same timers without a screen; when the
 *           command exits, its final snapshot is printed;
 *   rounds  --once, -n N, ps: every target is asked at once, and when all
 *           have answered (or timed out) the round is printed in order.
 *
 * Reads never block: each target is a connection on the loop with its own
 * request timeout (conn.c). A target that hangs, dies mid-read or answers
 * garbage is marked unreachable with the reason, and the others go on.
 *
 * `run` also hands the command one end of a socket pair (final.h): at
 * normal exit the command's library writes its final snapshot there, so
 * what memtop shows at the end is the command's last state, not a poll up
 * to -d old. A command killed by a signal (or ending with _exit) cannot
 * write it: then the last poll stands, and memtop says so.
 */
#include "memtop/loop.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "memstats.h"
#include "client/client.h"
#include "common/fields.h"
#include "common/strbuf.h"
#include "emit/emit.h"
#include "memtop/conn.h"
#include "memtop/final.h"
#include "memtop/model.h"
#include "memtop/run.h"
#include "memtop/ui.h"

extern char **environ;

typedef enum mt_mode_e { MODE_LIVE, MODE_POLL, MODE_ROUNDS } mt_mode_t;

/* How long `run` keeps trying fast while the command has not opened its
 * socket yet, and how fast. */
#define RUN_FAST_RETRY_MS 20
#define RUN_WAIT_NOTE_S 5.0
/* How long a command gets to exit after memtop asked it to, before the
 * next, stronger signal. */
#define RUN_GRACE_MS 5000
/* How long memtop waits, after the command has exited, for its final
 * snapshot or for the end of the channel. The library writes the frame
 * before the process ends, so it is normally there already; the channel
 * only stays open past the exit when a child of the command still holds
 * the inherited descriptor. */
#define RUN_FINAL_WAIT_MS 300

typedef struct mt_app_s mt_app_t;

typedef struct mt_watch_s {
  mt_app_t *app;
  int pid;
  uint64_t start_time;
  uid_t uid;
  int have_uid;
  char comm[MS_NAME_MAX];
  mt_conn_t *conn;
  uv_timer_t timer; /* live and poll: when to read next */
  unsigned fails;   /* consecutive failed reads, for the back-off */
  int pending;      /* rounds: a reply is due */
  int ok;           /* the last read succeeded */
  int gone;         /* the process exited: no more reads */
  int seen;         /* found by the last rescan */
  int is_child;     /* started by `run` */
  char err[512];    /* the last read's error */
  /* Live view: when smaps_rollup was last asked for (uv_hrtime, 0: not
   * since the detail view opened on this process), and the figures of the
   * last reply that had them, carried into the plain snapshots between. */
  uint64_t smaps_asked_ns;
  int have_smaps;
  uint64_t smaps_value[MS_F_KERNEL_SWAP - MS_F_KERNEL_LAZYFREE + 1];
} mt_watch_t;

struct mt_app_s {
  uv_loop_t loop;
  const mt_opts_t *o;
  mt_mode_t mode;
  int ps;
  mt_model_t model;
  mt_watch_t **w;
  size_t nw, capw;
  int timeout_ms;
  int ui;            /* the live view is on screen */
  uv_timer_t frame;  /* coalesces redraws */
  uv_timer_t tick;   /* live: one per -d, counts -n; rounds: next round */
  uv_timer_t rescan; /* live, watching all: look for new targets */
  uv_timer_t grace;  /* run: escalate signals to a command that lingers */
  uv_poll_t keys;
  uv_signal_t sig[4]; /* SIGINT SIGTERM SIGHUP SIGWINCH */
  int have_keys;
  long ticks, rounds;
  uint64_t round_start_ns;
  size_t pending;
  int nemitted;
  int exit_code;
  int quitting;
  int signalled; /* quitting because of a signal */
  int stdout_broken;
  /* run */
  uv_process_t child;
  int child_running, child_exited, child_status;
  int kill_stage;
  uint64_t child_start_ns, child_exit_ns;
  /* run: the final snapshot (final.h) */
  mt_final_t *final;
  uv_poll_t final_poll;
  uv_timer_t final_wait;
  int have_final_poll;
  int final_resolved; /* the command exited and the channel was settled */
  int final_used;     /* the model holds the command's final snapshot */
  char final_env[2][64];
  char run_log[4096];
  int run_log_fd;
  char sockdir[4096];
  ms_strbuf_t out;
};

static void app_quit(mt_app_t *app);
static void watch_schedule(mt_watch_t *w, uint64_t ms);
static void round_end(mt_app_t *app);
static void poll_finish(mt_app_t *app);

static uint64_t delay_ms(const mt_app_t *app) {
  return (uint64_t)(app->model.delay_s * 1000.0 + 0.5);
}

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
static void open_detail(mt_model_t *m, int pid) {
  m->screen = MT_SCREEN_DETAIL;
  m->detail_pid = pid;
}

static mt_watch_t *watch_add(mt_app_t *app, int pid, uint64_t start_time) {
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
static void watch_remove(mt_app_t *app, mt_watch_t *w) {
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
  double ms = (double)delay_ms(app);
  unsigned i;

  for (i = 0; i < fails && i < 16; i++)
    ms *= 2;
  if (ms > MT_BACKOFF_MAX_S * 1000)
    ms = MT_BACKOFF_MAX_S * 1000;
  if (ms < (double)delay_ms(app))
    ms = (double)delay_ms(app);
  return (uint64_t)ms;
}

/* ---- drawing --------------------------------------------------------- */

static void draw_now(mt_app_t *app) {
  if (!app->ui)
    return;
  app->model.now_mono_ns = uv_hrtime();
  mt_model_sort(&app->model);
  mt_ui_draw(&app->model);
}

static void frame_cb(uv_timer_t *t) {
  draw_now(t->data);
}

/* Snapshots arrive one target at a time; a frame shortly after the first
 * of a burst shows them all at once instead of redrawing per target. */
static void request_draw(mt_app_t *app) {
  if (app->ui && !uv_is_active((uv_handle_t *)&app->frame))
    uv_timer_start(&app->frame, frame_cb, 15, 0);
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
    watch_schedule(w, delay_ms(app));
    return;
  }
  watch_schedule(w, delay_ms(app));
  mt_conn_fetch_flags(w->conn, app->timeout_ms, watch_smaps_due(w));
}

static void watch_schedule(mt_watch_t *w, uint64_t ms) {
  uv_timer_start(&w->timer, watch_tick, ms, 0);
}

static const char *child_name(const mt_app_t *app) {
  const char *slash;

  if (app->o->run_argv == NULL || app->o->run_argv[0] == NULL)
    return "command";
  slash = strrchr(app->o->run_argv[0], '/');
  return slash != NULL ? slash + 1 : app->o->run_argv[0];
}

static void child_exit_words(const mt_app_t *app, char *buf, size_t len) {
  if (app->child_status > 128)
    snprintf(buf, len, "exited: killed by signal %d (%s)",
             app->child_status - 128, strsignal(app->child_status - 128));
  else
    snprintf(buf, len, "exited with status %d", app->child_status);
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
      child_exit_words(app, w->err, sizeof w->err);
    else if (t != NULL && t->have_snapshot)
      snprintf(w->err, sizeof w->err, "exited");
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
               w->pid, child_name(app), waited);
      mt_model_fail(&app->model, t, 0, w->err);
      if (app->mode != MODE_ROUNDS)
        watch_schedule(w, delay_ms(app));
    } else if (app->mode != MODE_ROUNDS) {
      watch_schedule(w, RUN_FAST_RETRY_MS);
    }
    return;
  }
  w->fails++;
  if (t != NULL)
    mt_model_fail(&app->model, t, 0, w->err);
  if (app->mode != MODE_ROUNDS)
    watch_schedule(w, backoff_ms(app, w->fails));
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
    request_draw(app);
    break;
  case MODE_POLL:
    if (app->child_exited)
      poll_finish(app);
    break;
  case MODE_ROUNDS:
    if (w->pending) {
      w->pending = 0;
      if (--app->pending == 0)
        round_end(app);
    }
    break;
  }
}

/* ---- discovery ------------------------------------------------------- */

/* Lists the attachable processes and adds the new ones. In the live view,
 * processes that vanished are marked exited (and dropped after a while);
 * in rounds, only the processes found now take part. Returns 0 or the
 * discovery error. */
static int rescan(mt_app_t *app) {
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
      watch_remove(app, w);
      w = NULL;
    }
    if (w == NULL) {
      w = watch_add(app, found[i].pid, found[i].start_time);
      if (w == NULL)
        continue;
      if (app->mode == MODE_LIVE)
        watch_schedule(w, 0);
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
      watch_remove(app, w);
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
      watch_remove(app, w);
    }
  }
  return 0;
}

static uint64_t rescan_ms(const mt_app_t *app) {
  /* Listing the directory costs a readdir and a /proc read per process:
   * not every tick when ticks are fast. */
  uint64_t ms = delay_ms(app);
  return ms < 2000 ? 2000 : ms;
}

static void rescan_cb(uv_timer_t *t) {
  mt_app_t *app = t->data;

  if (rescan(app) == 0)
    request_draw(app);
}

/* ---- plain output ---------------------------------------------------- */

static void flush_out(mt_app_t *app) {
  if (app->out.oom) {
    fprintf(stderr, "memtop: out of memory while formatting the report\n");
    app->exit_code = 1;
  } else if (app->out.len > 0 && !app->stdout_broken) {
    if (fwrite(app->out.data, 1, app->out.len, stdout) != app->out.len ||
        fflush(stdout) != 0) {
      /* A reader that went away (`memtop --once -n 100 | head`) is not
       * an error worth a message; anything else is. */
      if (errno != EPIPE) {
        fprintf(stderr, "memtop: writing the report failed: %s\n",
                strerror(errno));
        app->exit_code = 1;
      }
      app->stdout_broken = 1;
    }
  }
  ms_strbuf_reset(&app->out);
}

static void emit_snapshot(mt_app_t *app, const ms_snapshot_t *s) {
  if (app->o->json) {
    ms__emit_json(&app->out, s);
    ms_strbuf_puts(&app->out, "\n");
    return;
  }
  /* Reports are paragraphs: a blank line between processes and rounds. */
  if (app->nemitted++ > 0)
    ms_strbuf_puts(&app->out, "\n");
  ms__emit_report(&app->out, s);
}

static void emit_ps(mt_app_t *app) {
  char rp[32], providers[256], user[32];
  const struct passwd *pw;
  const mt_target_t *t;
  const mt_watch_t *w;
  size_t i, k, used;

  ms_strbuf_printf(&app->out, "%7s %-10s %-16s %14s  %s\n", "PID", "USER",
                   "COMM", "READY+PREPARED", "PROVIDERS");
  for (i = 0; i < app->nw; i++) {
    w = app->w[i];
    t = mt_model_find(&app->model, w->pid);
    if (w->gone || t == NULL)
      continue;
    pw = w->have_uid ? getpwuid(w->uid) : NULL;
    if (pw != NULL)
      snprintf(user, sizeof user, "%s", pw->pw_name);
    else if (w->have_uid)
      snprintf(user, sizeof user, "%u", (unsigned)w->uid);
    else
      snprintf(user, sizeof user, "?");
    providers[0] = '\0';
    if (w->ok && t->have_snapshot) {
      ms__fmt_bytes_q(rp, sizeof rp, t->bd.total, t->bd.q_total);
      for (k = 0, used = 0; k < t->snap.nproviders && k < MS_MAX_PROVIDERS; k++)
        used += (size_t)snprintf(providers + used, sizeof providers - used,
                                 "%s%s", k ? "," : "", t->snap.providers[k]);
      if (t->snap.nproviders == 0)
        snprintf(providers, sizeof providers, "-");
    } else {
      snprintf(rp, sizeof rp, "?");
      snprintf(providers, sizeof providers, "(unreachable: see below)");
    }
    ms_strbuf_printf(&app->out, "%7d %-10.10s %-16.16s %14s  %s\n", w->pid,
                     user, t->comm[0] ? t->comm : w->comm, rp, providers);
  }
}

static void round_start(mt_app_t *app);

static void round_timer_cb(uv_timer_t *t) {
  round_start(t->data);
}

static void round_end(mt_app_t *app) {
  uint64_t elapsed_ms, next_ms;
  const mt_target_t *t;
  mt_watch_t *w;
  size_t i;

  if (app->ps)
    emit_ps(app);
  for (i = 0; i < app->nw; i++) {
    w = app->w[i];
    t = mt_model_find(&app->model, w->pid);
    if (w->ok && t != NULL && t->have_snapshot) {
      if (!app->ps)
        emit_snapshot(app, &t->snap);
      continue;
    }
    /* A process found by listing that exited before it answered is not
     * a failure: it is simply not there any more. */
    if (w->gone && app->o->npids == 0)
      continue;
    flush_out(app); /* keep stdout and stderr in order on a terminal */
    fprintf(stderr, "memtop: %s\n", w->err[0] ? w->err : "no answer");
    if (!app->ps)
      app->exit_code = 1;
  }
  flush_out(app);
  app->rounds++;
  if (app->stdout_broken ||
      app->rounds >= (app->o->iterations > 0 ? app->o->iterations : 1)) {
    app_quit(app);
    return;
  }
  elapsed_ms = (uv_hrtime() - app->round_start_ns) / 1000000u;
  next_ms = elapsed_ms >= delay_ms(app) ? 0 : delay_ms(app) - elapsed_ms;
  uv_timer_start(&app->tick, round_timer_cb, next_ms, 0);
}

static void round_start(mt_app_t *app) {
  size_t i;
  int rc;

  app->round_start_ns = uv_hrtime();
  if (app->o->npids == 0) {
    rc = rescan(app);
    if (rc != 0) {
      fprintf(stderr,
              "memtop: cannot list attachable processes in %s: %s (check "
              "MEMSTATS_DIR)\n",
              app->sockdir, ms_strerror(rc));
      app->exit_code = 1;
      app_quit(app);
      return;
    }
    if (app->nw == 0 && !app->ps && app->rounds == 0) {
      fprintf(stderr,
              "memtop: no attachable processes in %s (start a program with "
              "`memtop run -- CMD`, or link it with -lmemstats)\n",
              app->sockdir);
      app->exit_code = 1;
    }
  }
  app->pending = 0;
  for (i = 0; i < app->nw; i++) {
    app->w[i]->pending = 1;
    app->w[i]->ok = 0;
    app->pending++;
  }
  if (app->pending == 0) {
    round_end(app);
    return;
  }
  /* Every request goes out at once: a hung target costs one timeout for
   * the whole round, not one per target. */
  for (i = 0; i < app->nw; i++)
    mt_conn_fetch_flags(app->w[i]->conn, app->timeout_ms,
                        app->ps ? 0 : MS__REQ_SMAPS);
}

/* ---- run: the command ------------------------------------------------ */

/* `run --once`: the command has exited and its end is settled: print its
 * final snapshot, or else the last one polled (once no read is in flight,
 * since a reply on its way is newer), saying which it is. */
static void poll_finish(mt_app_t *app) {
  mt_watch_t *w = app->nw > 0 ? app->w[0] : NULL;
  const mt_target_t *t;
  double before;

  if (app->quitting || w == NULL || !app->final_resolved)
    return;
  if (!app->final_used && mt_conn_busy(w->conn))
    return;
  t = mt_model_find(&app->model, w->pid);
  if (t != NULL && t->have_snapshot) {
    if (!app->final_used) {
      before =
          app->child_exit_ns > t->snap.time_mono_ns && t->snap.time_mono_ns != 0
              ? (double)(app->child_exit_ns - t->snap.time_mono_ns) / 1e9
              : 0;
      fprintf(stderr,
              "memtop: PID %d (%s) sent no final figures (a process killed "
              "by a signal cannot): the report is from the last poll, "
              "%.1f s before it ended\n",
              w->pid, t->comm[0] ? t->comm : child_name(app), before);
    }
    emit_snapshot(app, &t->snap);
    flush_out(app);
  } else {
    fprintf(stderr,
            "memtop: PID %d (%s) exited before memtop could read its "
            "statistics%s%s\n",
            w->pid, child_name(app), t != NULL && t->error[0] ? ": " : "",
            t != NULL && t->error[0] ? t->error : "");
  }
  app_quit(app);
}

static void final_poll_closed(uv_handle_t *h) {
  mt_app_t *app = h->data;

  mt_final_close(app->final);
}

/* Closes memtop's end of the channel: the poll handle first, then (in its
 * close callback) the descriptor, so that the loop never watches a number
 * that may already name something else. */
static void final_channel_close(mt_app_t *app) {
  if (app->have_final_poll) {
    app->have_final_poll = 0;
    if (!uv_is_closing((uv_handle_t *)&app->final_poll))
      uv_close((uv_handle_t *)&app->final_poll, final_poll_closed);
  } else if (app->final != NULL) {
    mt_final_close(app->final);
  }
}

/* The command has exited and its final snapshot arrived, or cannot come
 * any more: put it in the model (or say the figures are the last poll's)
 * and finish as the mode wants. Runs once. */
static void final_resolve(mt_app_t *app) {
  mt_watch_t *w = app->nw > 0 && app->w[0]->is_child ? app->w[0] : NULL;
  mt_target_t *t = w != NULL ? mt_model_find(&app->model, w->pid) : NULL;
  char words[256];
  size_t n;
  double before;

  if (app->final_resolved)
    return;
  app->final_resolved = 1;
  uv_timer_stop(&app->final_wait);
  final_channel_close(app);
  child_exit_words(app, words, sizeof words);
  n = strlen(words);
  if (t != NULL && app->final != NULL && app->final->have) {
    app->model.now_mono_ns = uv_hrtime();
    mt_model_update(&app->model, t, &app->final->snap);
    app->final_used = 1;
    snprintf(words + n, sizeof words - n, "; final figures");
  } else if (t != NULL && t->have_snapshot) {
    before =
        app->child_exit_ns > t->snap.time_mono_ns && t->snap.time_mono_ns != 0
            ? (double)(app->child_exit_ns - t->snap.time_mono_ns) / 1e9
            : 0;
    snprintf(words + n, sizeof words - n,
             "; figures from the last poll, %.1f s before (no final "
             "figures: killed by a signal?)",
             before);
  }
  if (t != NULL)
    mt_model_fail(&app->model, t, 1, words);
  switch (app->mode) {
  case MODE_LIVE:
    if (app->quitting)
      app_quit(app);
    request_draw(app);
    break;
  case MODE_POLL:
    poll_finish(app);
    break;
  default:
    break;
  }
}

/* Reads the final-snapshot channel; once the command has exited, settles
 * its end as soon as the snapshot is there or the channel is closed. */
static void final_read(mt_app_t *app) {
  int done;

  if (app->final == NULL)
    return;
  done = mt_final_drain(app->final);
  if (done && app->have_final_poll)
    uv_poll_stop(&app->final_poll);
  if (app->child_exited && (done || app->final->have))
    final_resolve(app);
}

static void final_poll_cb(uv_poll_t *h, int status, int events) {
  (void)status;
  (void)events;
  final_read(h->data);
}

static void final_wait_cb(uv_timer_t *timer) {
  final_resolve(timer->data);
}

static void child_exited(uv_process_t *p, int64_t exit_status,
                         int term_signal) {
  mt_app_t *app = p->data;
  mt_watch_t *w = app->nw > 0 && app->w[0]->is_child ? app->w[0] : NULL;
  mt_target_t *t;
  char words[128];

  app->child_running = 0;
  app->child_exited = 1;
  app->child_exit_ns = uv_hrtime();
  app->child_status = mt_run_exit_status((long)exit_status, term_signal);
  app->exit_code = app->child_status;
  uv_close((uv_handle_t *)p, NULL);
  uv_timer_stop(&app->grace);
  if (w != NULL) {
    w->gone = 1;
    uv_timer_stop(&w->timer);
    t = mt_model_find(&app->model, w->pid);
    child_exit_words(app, words, sizeof words);
    if (t != NULL)
      mt_model_fail(&app->model, t, 1, words);
  }
  /* The frame was written before the process ended: it is in the socket
   * now, unless there was none. Wait a little only when the channel is
   * still open without it (a child of the command holds it). */
  final_read(app);
  if (!app->final_resolved) {
    if (app->final == NULL || app->final->fd < 0)
      final_resolve(app);
    else
      uv_timer_start(&app->final_wait, final_wait_cb, RUN_FINAL_WAIT_MS, 0);
  }
}

/* The command did not exit after it was asked to: ask harder. */
static void grace_cb(uv_timer_t *t) {
  mt_app_t *app = t->data;

  if (!app->child_running)
    return;
  app->kill_stage++;
  uv_process_kill(&app->child, app->kill_stage >= 2 ? SIGKILL : SIGTERM);
  uv_timer_start(&app->grace, grace_cb, RUN_GRACE_MS, 0);
}

static int run_start(mt_app_t *app) {
  char exe[4096], preload[4096], err[1024];
  uv_process_options_t opts;
  uv_stdio_container_t stdio[MT_FINAL_CHILD_FD + 1];
  char **env;
  mt_watch_t *w;
  uint64_t start_time = 0;
  ssize_t n;
  int rc, child_fd = -1;

  n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  exe[n > 0 ? n : 0] = '\0';
  if (mt_run_find_preload(exe, getenv("MEMTOP_PRELOAD"), preload,
                          sizeof preload, err, sizeof err) != 0) {
    fprintf(stderr, "memtop: %s\n", err);
    return 1;
  }
  env = mt_run_env(environ, preload);
  app->final = calloc(1, sizeof *app->final);
  if (env == NULL || app->final == NULL) {
    fprintf(stderr, "memtop: out of memory\n");
    mt_run_env_free(env);
    return 1;
  }
  /* The final-snapshot channel. Without it (no descriptors left) the
   * command still runs, and the end shows the last poll. */
  mt_final_init(app->final, 0);
  rc = mt_final_open(app->final, &child_fd);
  if (rc == 0 &&
      uv_poll_init(&app->loop, &app->final_poll, app->final->fd) == 0) {
    app->have_final_poll = 1;
    app->final_poll.data = app;
    snprintf(app->final_env[0], sizeof app->final_env[0],
             "MEMSTATS_FINAL_FD=%d", MT_FINAL_CHILD_FD);
    snprintf(app->final_env[1], sizeof app->final_env[1],
             "MEMSTATS_FINAL_PPID=%d", (int)getpid());
    mt_run_env_final(env, app->final_env[0], app->final_env[1]);
  } else {
    fprintf(stderr,
            "memtop: cannot make the channel for %s's final figures (%s): "
            "the report at its end will be the last poll's\n",
            child_name(app), strerror(rc < 0 ? -rc : EMFILE));
    if (child_fd >= 0)
      close(child_fd);
    child_fd = -1;
    mt_final_close(app->final);
  }
  memset(&opts, 0, sizeof opts);
  memset(stdio, 0, sizeof stdio);
  if (app->mode == MODE_LIVE) {
    /* The terminal belongs to the view: the command reads nothing from
     * it and writes its output to a file that memtop names at exit. */
    const char *tmp = getenv("TMPDIR");
    snprintf(app->run_log, sizeof app->run_log, "%s/memtop-run-XXXXXX.log",
             tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
    app->run_log_fd = mkstemps(app->run_log, 4);
    if (app->run_log_fd < 0) {
      fprintf(stderr,
              "memtop: cannot create %s for the command's output: "
              "%s (set TMPDIR to a writable directory)\n",
              app->run_log, strerror(errno));
      mt_run_env_free(env);
      if (child_fd >= 0)
        close(child_fd);
      return 1;
    }
    stdio[0].flags = UV_IGNORE;
    stdio[1].flags = UV_INHERIT_FD;
    stdio[1].data.fd = app->run_log_fd;
    stdio[2].flags = UV_INHERIT_FD;
    stdio[2].data.fd = app->run_log_fd;
  } else {
    stdio[0].flags = UV_INHERIT_FD;
    stdio[0].data.fd = 0;
    stdio[1].flags = UV_INHERIT_FD;
    stdio[1].data.fd = 1;
    stdio[2].flags = UV_INHERIT_FD;
    stdio[2].data.fd = 2;
  }
  opts.file = app->o->run_argv[0];
  opts.args = app->o->run_argv;
  opts.env = env;
  opts.exit_cb = child_exited;
  opts.stdio = stdio;
  opts.stdio_count = 3;
  if (child_fd >= 0) {
    /* uv_spawn maps descriptors by index: entry 3 becomes the command's
     * fd 3, inherited across its exec (and its own execs). */
    stdio[MT_FINAL_CHILD_FD].flags = UV_INHERIT_FD;
    stdio[MT_FINAL_CHILD_FD].data.fd = child_fd;
    opts.stdio_count = MT_FINAL_CHILD_FD + 1;
  }
  app->child.data = app;
  /* libuv reaps the child through its own SIGCHLD handler (a uv_signal_t
   * inside the loop) and calls child_exited with the status. */
  rc = uv_spawn(&app->loop, &app->child, &opts);
  mt_run_env_free(env);
  /* Only the command holds its end now: its end of file is ours. */
  if (child_fd >= 0)
    close(child_fd);
  if (rc != 0) {
    fprintf(stderr, "memtop: cannot start %s: %s%s\n", app->o->run_argv[0],
            uv_strerror(rc),
            rc == UV_ENOENT ? " (check the name, or give a path)" : "");
    return rc == UV_ENOENT ? 127 : 126;
  }
  app->child_running = 1;
  app->child_start_ns = uv_hrtime();
  app->final->pid = app->child.pid;
  if (app->have_final_poll)
    uv_poll_start(&app->final_poll, UV_READABLE | UV_DISCONNECT, final_poll_cb);
  msc_proc_start_time(app->child.pid, &start_time);
  w = watch_add(app, app->child.pid, start_time);
  if (w == NULL) {
    fprintf(stderr, "memtop: out of memory\n");
    uv_process_kill(&app->child, SIGTERM);
    return 1;
  }
  w->is_child = 1;
  snprintf(w->comm, sizeof w->comm, "%s", child_name(app));
  open_detail(&app->model, app->child.pid);
  snprintf(mt_model_find(&app->model, w->pid)->comm, MS_NAME_MAX, "%s",
           child_name(app));
  if (app->mode == MODE_LIVE)
    snprintf(app->model.status, sizeof app->model.status,
             "%s (PID %d) output: %.160s", child_name(app), w->pid,
             app->run_log);
  watch_schedule(w, RUN_FAST_RETRY_MS);
  return 0;
}

/* ---- the live view: keys, signals, ticks ------------------------------ */

static void rearm_timers(mt_app_t *app) {
  size_t i;

  for (i = 0; i < app->nw; i++)
    if (!app->w[i]->gone && app->w[i]->fails == 0)
      watch_schedule(app->w[i], delay_ms(app));
  if (uv_is_active((uv_handle_t *)&app->tick))
    uv_timer_start(&app->tick, app->tick.timer_cb, delay_ms(app),
                   delay_ms(app));
  if (uv_is_active((uv_handle_t *)&app->rescan))
    uv_timer_start(&app->rescan, rescan_cb, rescan_ms(app), rescan_ms(app));
}

static void keys_cb(uv_poll_t *h, int status, int events) {
  mt_app_t *app = h->data;

  (void)events;
  if (status < 0) {
    uv_poll_stop(h);
    return;
  }
  switch (mt_ui_keys(&app->model)) {
  case MT_ACT_QUIT:
    app_quit(app);
    break;
  case MT_ACT_DELAY:
    if (app->model.delay_s < MT_DELAY_MIN)
      app->model.delay_s = MT_DELAY_MIN;
    rearm_timers(app);
    draw_now(app);
    break;
  case MT_ACT_REDRAW:
    draw_now(app);
    break;
  default:
    break;
  }
}

static void live_tick(uv_timer_t *t) {
  mt_app_t *app = t->data;

  request_draw(app);
  if (app->o->iterations > 0 && ++app->ticks >= app->o->iterations)
    app_quit(app);
}

static void signal_cb(uv_signal_t *h, int signum) {
  mt_app_t *app = h->data;

  if (signum == SIGWINCH) {
    if (app->ui) {
      mt_ui_resize();
      draw_now(app);
    }
    return;
  }
  if (app->child_running) {
    /* A Ctrl-C on the terminal reached the command too (same process
     * group); any other signal is passed on. Then memtop waits for the
     * command, to report its end and return its status. */
    if (!(signum == SIGINT && isatty(STDIN_FILENO)))
      uv_process_kill(&app->child, signum);
    if (app->mode == MODE_POLL)
      return;
  }
  if (!app->child_running && !app->child_exited)
    app->exit_code =
        (app->mode == MODE_LIVE && signum == SIGINT) ? 0 : 128 + signum;
  app->signalled = 1;
  app_quit(app);
}

/* A crash must not leave the terminal in raw mode. */
static void fatal_signal(int sig) {
  mt_ui_end();
  signal(sig, SIG_DFL);
  raise(sig);
}

/* ---- starting and stopping ------------------------------------------- */

static void app_quit(mt_app_t *app) {
  if (app->child_running) {
    /* Leaving the view of a running command ends the command, as
     * quitting `watch` or `perf top` ends what they started. */
    if (!app->quitting) {
      app->quitting = 1;
      if (app->mode == MODE_LIVE && !app->signalled) {
        app->kill_stage = 1;
        uv_process_kill(&app->child, SIGTERM);
      }
      uv_timer_start(&app->grace, grace_cb, RUN_GRACE_MS, 0);
    }
    return;
  }
  app->quitting = 1;
  uv_stop(&app->loop);
}

static void close_if_open(uv_handle_t *h) {
  if (h->loop != NULL && !uv_is_closing(h))
    uv_close(h, NULL);
}

static void app_close(mt_app_t *app) {
  size_t i;

  while (app->nw > 0)
    watch_remove(app, app->w[app->nw - 1]);
  close_if_open((uv_handle_t *)&app->frame);
  close_if_open((uv_handle_t *)&app->tick);
  close_if_open((uv_handle_t *)&app->rescan);
  close_if_open((uv_handle_t *)&app->grace);
  close_if_open((uv_handle_t *)&app->final_wait);
  final_channel_close(app);
  if (app->have_keys)
    close_if_open((uv_handle_t *)&app->keys);
  for (i = 0; i < sizeof app->sig / sizeof app->sig[0]; i++)
    close_if_open((uv_handle_t *)&app->sig[i]);
  if (app->child_running) {
    /* Only on an error path: the command would outlive memtop. */
    uv_process_kill(&app->child, SIGKILL);
  }
  /* uv_stop() may have cut the previous run short: run until every close
   * callback has run (the memory they free is then freed). */
  do
    uv_run(&app->loop, UV_RUN_DEFAULT);
  while (uv_loop_alive(&app->loop));
  uv_loop_close(&app->loop);
  /* The poll handle is closed: the descriptor may go now. */
  if (app->final != NULL)
    mt_final_close(app->final);
  free(app->final);
  free(app->w);
  mt_model_free(&app->model);
  ms_strbuf_free(&app->out);
}

static int timeout_from_env(void) {
  const char *s = getenv("MEMTOP_TIMEOUT_MS");
  long v;

  if (s == NULL || s[0] == '\0')
    return MT_TIMEOUT_MS_DEFAULT;
  if (mt_parse_long(s, 1, 600000, &v) != 0) {
    fprintf(stderr,
            "memtop: ignoring MEMTOP_TIMEOUT_MS=%s (want milliseconds, 1 to "
            "600000); using %d\n",
            s, MT_TIMEOUT_MS_DEFAULT);
    return MT_TIMEOUT_MS_DEFAULT;
  }
  return (int)v;
}

static int live_start(mt_app_t *app) {
  static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGWINCH};
  static const int fatal[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
  const char *term = getenv("TERM");
  size_t i;
  int rc;

  rc = mt_ui_start(&app->model);
  if (rc != 0) {
    fprintf(stderr,
            "memtop: cannot start the live view on this terminal (TERM=%s): "
            "%s; use --once for a plain-text report\n",
            term != NULL ? term : "(unset)", ms_strerror(rc));
    return 2;
  }
  app->ui = 1;
  atexit(mt_ui_end);
  for (i = 0; i < sizeof fatal / sizeof fatal[0]; i++)
    signal(fatal[i], fatal_signal);
  for (i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
    uv_signal_start(&app->sig[i], signal_cb, sigs[i]);
  if (uv_poll_init(&app->loop, &app->keys, STDIN_FILENO) == 0) {
    app->have_keys = 1;
    app->keys.data = app;
    uv_poll_start(&app->keys, UV_READABLE, keys_cb);
  }
  uv_timer_start(&app->tick, live_tick, delay_ms(app), delay_ms(app));
  return 0;
}

int mt_loop_main(const mt_opts_t *o) {
  mt_app_t *app;
  size_t i;
  int rc = 0, code;

  app = calloc(1, sizeof *app);
  if (app == NULL) {
    fprintf(stderr, "memtop: out of memory\n");
    return 1;
  }
  app->o = o;
  app->run_log_fd = -1;
  app->ps = o->cmd == MT_CMD_PS;
  if (app->ps || (o->once && o->cmd == MT_CMD_WATCH))
    app->mode = MODE_ROUNDS;
  else if (o->once && o->cmd == MT_CMD_RUN)
    app->mode = MODE_POLL;
  else
    app->mode = MODE_LIVE;

  /* The live view needs a terminal; say what to use instead, before any
   * command is started. */
  if (app->mode == MODE_LIVE &&
      (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO))) {
    fprintf(stderr, "memtop: the live view needs a terminal (stdin and "
                    "stdout); use --once for a plain-text report, or --once "
                    "--json for JSON lines\n");
    free(app);
    return 2;
  }

  mt_model_init(&app->model);
  app->model.delay_s = o->delay_s;
  app->model.color = o->color;
  app->model.watch_all = o->npids == 0 && o->cmd != MT_CMD_RUN;
  app->timeout_ms = timeout_from_env();
  if (msc_socket_dir(app->sockdir, sizeof app->sockdir) != 0)
    snprintf(app->sockdir, sizeof app->sockdir, "the socket directory");
  /* A target that closes its socket while we write must not kill memtop
   * with SIGPIPE; the write's error says it instead. */
  signal(SIGPIPE, SIG_IGN);

  uv_loop_init(&app->loop);
  uv_timer_init(&app->loop, &app->frame);
  uv_timer_init(&app->loop, &app->tick);
  uv_timer_init(&app->loop, &app->rescan);
  uv_timer_init(&app->loop, &app->grace);
  uv_timer_init(&app->loop, &app->final_wait);
  app->frame.data = app->tick.data = app->rescan.data = app->grace.data = app;
  app->final_wait.data = app;
  for (i = 0; i < sizeof app->sig / sizeof app->sig[0]; i++) {
    uv_signal_init(&app->loop, &app->sig[i]);
    app->sig[i].data = app;
  }

  for (i = 0; i < o->npids; i++) {
    uint64_t st = 0;
    msc_proc_start_time(o->pids[i], &st);
    if (watch_add(app, o->pids[i], st) == NULL) {
      fprintf(stderr, "memtop: out of memory\n");
      rc = 1;
      goto out;
    }
  }

  /* One process named: its detail view straight away (Esc: the list). */
  if (o->npids == 1)
    open_detail(&app->model, o->pids[0]);

  if (app->mode == MODE_LIVE) {
    rc = live_start(app);
    if (rc != 0)
      goto out;
  } else {
    /* Plain modes stop cleanly on SIGINT/SIGTERM too (and with `run`,
     * wait for the command to report its end). */
    for (i = 0; i < 3; i++)
      uv_signal_start(&app->sig[i], signal_cb,
                      i == 0   ? SIGINT
                      : i == 1 ? SIGTERM
                               : SIGHUP);
  }

  if (o->cmd == MT_CMD_RUN) {
    rc = run_start(app);
    if (rc != 0)
      goto out;
  } else if (app->mode == MODE_ROUNDS) {
    round_start(app);
  } else {
    if (app->model.watch_all) {
      rc = rescan(app);
      if (rc != 0) {
        mt_ui_end();
        fprintf(stderr,
                "memtop: cannot list attachable processes in %s: %s (check "
                "MEMSTATS_DIR)\n",
                app->sockdir, ms_strerror(rc));
        rc = 1;
        goto out;
      }
      uv_timer_start(&app->rescan, rescan_cb, rescan_ms(app), rescan_ms(app));
    }
    for (i = 0; i < app->nw; i++)
      watch_schedule(app->w[i], 0);
    draw_now(app);
  }

  if (!app->quitting)
    uv_run(&app->loop, UV_RUN_DEFAULT);
  rc = app->exit_code;

out:
  mt_ui_end();
  app->ui = 0;
  if (app->run_log_fd >= 0) {
    struct stat st;
    if (fstat(app->run_log_fd, &st) == 0 && st.st_size == 0)
      unlink(app->run_log);
    else
      fprintf(stderr, "memtop: the output of %s is in %s\n", child_name(app),
              app->run_log);
    close(app->run_log_fd);
  }
  if (app->mode == MODE_LIVE && o->cmd != MT_CMD_RUN && rc == 0) {
    /* Say why the last targets could not be read, now that the screen is
     * gone: the live view exits 0, but the reason stays visible. */
    for (i = 0; i < app->model.ntargets; i++)
      if (app->model.targets[i]->state == MT_UNREACHABLE)
        fprintf(stderr, "memtop: %s\n", app->model.targets[i]->error);
  }
  code = rc;
  app_close(app);
  free(app);
  return code;
}
