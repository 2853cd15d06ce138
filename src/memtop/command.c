/*
 * command.c - `memtop run` on the loop (see loop_int.h): starts the command
 * with the preload, watches it, and settles its end: its exit status, and
 * the final snapshot its library writes on the channel of final.h.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "memstats.h"
#include "client/client.h"
#include "memtop/final.h"
#include "memtop/loop_int.h"
#include "memtop/model.h"
#include "memtop/run.h"

extern char **environ;

/* How long a command gets to exit after memtop asked it to, before the
 * next, stronger signal. */
#define RUN_GRACE_MS 5000
/* How long memtop waits, after the command has exited, for its final
 * snapshot or for the end of the channel. The library writes the frame
 * before the process ends, so it is normally there already; the channel
 * only stays open past the exit when a child of the command still holds
 * the inherited descriptor. */
#define RUN_FINAL_WAIT_MS 300

/* ---- run: the command ------------------------------------------------ */

const char *mt_command_name(const mt_app_t *app) {
  const char *slash;

  if (app->o->run_argv == NULL || app->o->run_argv[0] == NULL)
    return "command";
  slash = strrchr(app->o->run_argv[0], '/');
  return slash != NULL ? slash + 1 : app->o->run_argv[0];
}

void mt_command_exit_words(const mt_app_t *app, char *buf, size_t len) {
  if (app->child_status > 128)
    snprintf(buf, len, "exited: killed by signal %d (%s)",
             app->child_status - 128, strsignal(app->child_status - 128));
  else
    snprintf(buf, len, "exited with status %d", app->child_status);
}

/* `run --once`: the command has exited and its end is settled: print its
 * final snapshot, or else the last one polled (once no read is in flight,
 * since a reply on its way is newer), saying which it is. */
void mt_command_poll_finish(mt_app_t *app) {
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
      mt_warn("PID %d (%s) sent no final figures (a process killed "
              "by a signal cannot): the report is from the last poll, "
              "%.1f s before it ended",
              w->pid, t->comm[0] ? t->comm : mt_command_name(app), before);
    }
    mt_emit_snapshot(app, &t->snap);
    mt_flush_out(app);
  } else {
    mt_warn("PID %d (%s) exited before memtop could read its "
            "statistics%s%s",
            w->pid, mt_command_name(app), t != NULL && t->error[0] ? ": " : "",
            t != NULL && t->error[0] ? t->error : "");
  }
  mt_app_quit(app);
}

static void final_poll_closed(uv_handle_t *h) {
  mt_app_t *app = h->data;

  mt_final_close(app->final);
}

/* Closes memtop's end of the channel: the poll handle first, then (in its
 * close callback) the descriptor, so that the loop never watches a number
 * that may already name something else. */
void mt_command_close_channel(mt_app_t *app) {
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
  mt_command_close_channel(app);
  mt_command_exit_words(app, words, sizeof words);
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
      mt_app_quit(app);
    mt_request_draw(app);
    break;
  case MODE_POLL:
    mt_command_poll_finish(app);
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
    mt_command_exit_words(app, words, sizeof words);
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
  mt_command_grace(app);
}

void mt_command_grace(mt_app_t *app) {
  uv_timer_start(&app->grace, grace_cb, RUN_GRACE_MS, 0);
}

int mt_command_start(mt_app_t *app) {
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
    mt_warn("%s", err);
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
    mt_warn("cannot make the channel for %s's final figures (%s): "
            "the report at its end will be the last poll's",
            mt_command_name(app), strerror(rc < 0 ? -rc : EMFILE));
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
      mt_warn("cannot create %s for the command's output: "
              "%s (set TMPDIR to a writable directory)",
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
    /* The handle is initialised even when the spawn fails (libuv >= 1.24):
     * closed, so that the loop can be closed and its memory freed. */
    uv_close((uv_handle_t *)&app->child, NULL);
    mt_warn("cannot start %s: %s%s", app->o->run_argv[0], uv_strerror(rc),
            rc == UV_ENOENT ? " (check the name, or give a path)" : "");
    return rc == UV_ENOENT ? 127 : 126;
  }
  app->child_running = 1;
  app->child_start_ns = uv_hrtime();
  app->final->pid = app->child.pid;
  if (app->have_final_poll)
    uv_poll_start(&app->final_poll, UV_READABLE | UV_DISCONNECT, final_poll_cb);
  msc_proc_start_time(app->child.pid, &start_time);
  w = mt_watch_add(app, app->child.pid, start_time);
  if (w == NULL) {
    fprintf(stderr, "memtop: out of memory\n");
    uv_process_kill(&app->child, SIGTERM);
    return 1;
  }
  w->is_child = 1;
  snprintf(w->comm, sizeof w->comm, "%s", mt_command_name(app));
  mt_open_detail(&app->model, app->child.pid);
  snprintf(mt_model_find(&app->model, w->pid)->comm, MS_NAME_MAX, "%s",
           mt_command_name(app));
  if (app->mode == MODE_LIVE)
    snprintf(app->model.status, sizeof app->model.status,
             "%s (PID %d) output: %.160s", mt_command_name(app), w->pid,
             app->run_log);
  mt_watch_schedule(w, RUN_FAST_RETRY_MS);
  return 0;
}
