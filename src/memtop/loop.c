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
 *
 * The loop is split by concern (loop_int.h): this file holds the app's
 * lifecycle (the live view's timers, keys and signals, quitting, and
 * mt_loop_main); the targets and their reads are in targets.c, rounds and
 * their output in rounds.c, and `run`'s command in command.c.
 */
#include "memtop/loop.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "memstats.h"
#include "client/client.h"
#include "common/strbuf.h"
#include "memtop/final.h"
#include "memtop/loop_int.h"
#include "memtop/model.h"
#include "memtop/ui.h"

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
void mt_request_draw(mt_app_t *app) {
  if (app->ui && !uv_is_active((uv_handle_t *)&app->frame))
    uv_timer_start(&app->frame, frame_cb, 15, 0);
}

/* ---- the live view: keys, signals, ticks ------------------------------ */

static void rearm_timers(mt_app_t *app) {
  size_t i;

  for (i = 0; i < app->nw; i++)
    if (!app->w[i]->gone && app->w[i]->fails == 0)
      mt_watch_schedule(app->w[i], mt_delay_ms(app));
  if (uv_is_active((uv_handle_t *)&app->tick))
    uv_timer_start(&app->tick, app->tick.timer_cb, mt_delay_ms(app),
                   mt_delay_ms(app));
  if (uv_is_active((uv_handle_t *)&app->rescan))
    mt_rescan_start(app);
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
    mt_app_quit(app);
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

/* The detail view's allocation sites are read on their own cadence, at
 * most every MT_SITES_INTERVAL_S or 5 refreshes, whichever is longer: a
 * profile costs the target a copy of its buckets and memtop a reading of
 * its binaries. */
#define MT_SITES_INTERVAL_S 5.0

static void sites_cb(void *arg, int pid, mt_site_t *sites, size_t n,
                     int estimated, const char *err) {
  mt_app_t *app = arg;
  mt_target_t *t = mt_model_find(&app->model, pid);

  if (t == NULL) {
    mt_sites_free(sites, n);
    return;
  }
  if (sites != NULL)
    mt_model_set_sites(t, sites, n, estimated, uv_hrtime());
  else
    mt_model_sites_error(t, err != NULL ? err : "no profile");
  mt_request_draw(app);
}

static void sites_poll(mt_app_t *app) {
  const mt_target_t *t;
  double every = 5 * app->model.delay_s;

  if (!app->ui || app->model.screen != MT_SCREEN_DETAIL || app->quitting)
    return;
  t = mt_model_find(&app->model, app->model.detail_pid);
  if (t == NULL || t->state != MT_LIVE)
    return;
  if (app->sites_live == NULL) {
    app->sites_live = mt_sites_live_new(&app->loop, sites_cb, app);
    if (app->sites_live == NULL)
      return;
  }
  if (every < MT_SITES_INTERVAL_S)
    every = MT_SITES_INTERVAL_S;
  mt_sites_live_poll(app->sites_live, t->pid, app->timeout_ms, uv_hrtime(),
                     (uint64_t)(every * 1e9));
}

static void live_tick(uv_timer_t *t) {
  mt_app_t *app = t->data;

  mt_request_draw(app);
  sites_poll(app);
  if (app->o->iterations > 0 && ++app->ticks >= app->o->iterations)
    mt_app_quit(app);
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
  mt_app_quit(app);
}

/* A crash must not leave the terminal in raw mode. */
static void fatal_signal(int sig) {
  mt_ui_end();
  signal(sig, SIG_DFL);
  raise(sig);
}

/* ---- starting and stopping ------------------------------------------- */

void mt_app_quit(mt_app_t *app) {
  if (app->child_running) {
    /* Leaving the view of a running command ends the command, as
     * quitting `watch` or `perf top` ends what they started. */
    if (!app->quitting) {
      app->quitting = 1;
      if (app->mode == MODE_LIVE && !app->signalled) {
        app->kill_stage = 1;
        uv_process_kill(&app->child, SIGTERM);
      }
      mt_command_grace(app);
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
    mt_watch_remove(app, app->w[app->nw - 1]);
  /* A profile read in flight finishes on its thread during the run
   * below; its result is then dropped. */
  mt_sites_live_close(app->sites_live);
  app->sites_live = NULL;
  close_if_open((uv_handle_t *)&app->frame);
  close_if_open((uv_handle_t *)&app->tick);
  close_if_open((uv_handle_t *)&app->rescan);
  close_if_open((uv_handle_t *)&app->grace);
  close_if_open((uv_handle_t *)&app->final_wait);
  mt_command_close_channel(app);
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
  ms__strbuf_free(&app->out);
}

static int timeout_from_env(void) {
  const char *s = getenv("MEMTOP_TIMEOUT_MS");
  long v;

  if (s == NULL || s[0] == '\0')
    return MT_TIMEOUT_MS_DEFAULT;
  if (mt_parse_long(s, 1, 600000, &v) != 0) {
    mt_warn("ignoring MEMTOP_TIMEOUT_MS=%s (want milliseconds, 1 to "
            "600000); using %d",
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

  /* Said before curses starts: with no TERM, or one that cannot move the
   * cursor, curses would draw nothing a person could read. */
  if (term == NULL || term[0] == '\0') {
    mt_warn("the live view needs to know the terminal, and TERM is not "
            "set: set it to your terminal's type (e.g. TERM=xterm-256color), "
            "or use --once for a plain-text report");
    return 2;
  }
  if (strcmp(term, "dumb") == 0) {
    mt_warn("the live view cannot draw on TERM=dumb (a terminal that cannot "
            "move the cursor): use --once for a plain-text report (-n N -d "
            "SECS for a report every SECS), or run memtop in a terminal "
            "emulator");
    return 2;
  }
  rc = mt_ui_start(&app->model);
  if (rc == MS_ENOSYS) {
    mt_warn("the terminal type TERM=%s is unknown to this system's terminfo: "
            "install its entry (Debian: ncurses-term) or set TERM to a known "
            "type such as xterm-256color; or use --once for a plain-text "
            "report",
            term);
    return 2;
  }
  if (rc != 0) {
    mt_warn("cannot start the live view on this terminal (TERM=%s): "
            "%s; use --once for a plain-text report",
            term, ms_strerror(rc));
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
  uv_timer_start(&app->tick, live_tick, mt_delay_ms(app), mt_delay_ms(app));
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
    if (mt_watch_add(app, o->pids[i], st) == NULL) {
      fprintf(stderr, "memtop: out of memory\n");
      rc = 1;
      goto out;
    }
  }

  /* One process named: its detail view straight away (Esc: the list). */
  if (o->npids == 1)
    mt_open_detail(&app->model, o->pids[0]);

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
    rc = mt_command_start(app);
    if (rc != 0)
      goto out;
  } else if (app->mode == MODE_ROUNDS) {
    mt_round_start(app);
  } else {
    if (app->model.watch_all) {
      rc = mt_rescan(app);
      if (rc != 0) {
        mt_ui_end();
        mt_warn("cannot list attachable processes in %s: %s (check "
                "MEMSTATS_DIR)",
                app->sockdir, ms_strerror(rc));
        rc = 1;
        goto out;
      }
      mt_rescan_start(app);
    }
    for (i = 0; i < app->nw; i++)
      mt_watch_schedule(app->w[i], 0);
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
      mt_warn("the output of %s is in %s", mt_command_name(app), app->run_log);
    close(app->run_log_fd);
  }
  if (app->mode == MODE_LIVE && o->cmd != MT_CMD_RUN && rc == 0) {
    /* Say why the last targets could not be read, now that the screen is
     * gone: the live view exits 0, but the reason stays visible. */
    for (i = 0; i < app->model.ntargets; i++)
      if (app->model.targets[i]->state == MT_UNREACHABLE) {
        /* memtop is leaving: it retries nothing any more. */
        const char *e = app->model.targets[i]->error;
        size_t n = strlen(e), k = strlen("; retrying");
        if (n >= k && strcmp(e + n - k, "; retrying") == 0)
          n -= k;
        mt_warn("%.*s", (int)n, e);
      }
  }
  code = rc;
  app_close(app);
  free(app);
  return code;
}
