/*
 * loop.c - memtop's one event loop (see loop.h), and the one file that
 * sees the whole app: it makes the target set (targetset.h) and gives it
 * the owner the mode wants, and wires the owners to the screen, the
 * output and the command.
 *
 * Three ways of driving the same machinery:
 *
 *   live    per-target timers at the -d interval pull snapshots into the
 *           model (live.c); failing targets back off; when no PID was
 *           named the socket directory is rescanned for new and exited
 *           processes; keys, SIGWINCH and the frame timer drive the view
 *           (ui.h);
 *   poll    `run --once`: the same timers without a screen; when the
 *           command exits, its final snapshot is printed;
 *   rounds  --once, -n N, ps (rounds.c): every target is asked at once,
 *           and when all have answered (or timed out) the round is
 *           printed in order.
 *
 * Reads never block: each target is a connection on the loop with its own
 * request timeout (conn.c). A target that hangs, dies mid-read or answers
 * garbage is marked unreachable with the reason, and the others go on.
 *
 * `run` also hands the command one end of a socket pair (final_recv.h): at
 * normal exit the command's library writes its final snapshot there, so
 * what memtop shows at the end is the command's last state, not a poll up
 * to -d old. A command killed by a signal (or ending with _exit) cannot
 * write it: then the last poll stands, and memtop says so (command.c).
 */
#include "memtop/loop.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "memstats.h"
#include "client/client.h"
#include "memtop/command.h"
#include "memtop/live.h"
#include "tui/model.h"
#include "memtop/out.h"
#include "memtop/rounds.h"
#include "memtop/sites_live.h"
#include "pprof/debuginfod.h"
#include "targets/targetset.h"
#include "tui/ui.h"

/* Listing the directory costs a readdir and a /proc read per process:
 * the live view does it at most this often. */
#define RESCAN_MIN_MS 2000

typedef enum mt_mode_e { MODE_LIVE, MODE_POLL, MODE_ROUNDS } mt_mode_t;

/* Everything one mt_loop_main() runs on. */
typedef struct mt_app_s {
  uv_loop_t loop;
  const mt_opts_t *o;
  mt_mode_t mode;
  mt_model_t model;
  mt_tset_t *set;
  mt_live_t live;     /* the set's owner in live and poll */
  mt_rounds_t rounds; /* the set's owner in rounds */
  mt_command_t *cmd;  /* run */
  mt_out_t out;
  int timeout_ms;
  int ui;           /* the live view is on screen */
  uv_timer_t frame; /* coalesces redraws */
  uv_timer_t tick;  /* live: one per -d, counts -n */
  uv_poll_t keys;
  uv_signal_t sig[4]; /* SIGINT SIGTERM SIGHUP SIGWINCH */
  int have_keys;
  long ticks;
  int exit_code, have_exit_code; /* set by a signal */
  int quitting;
  int signalled; /* quitting because of a signal */
  char sockdir[4096];
  /* live: the detail view's allocation sites (sites_live.h) */
  mt_sites_live_t *sites_live;
} mt_app_t;

/* The -d interval in milliseconds. */
static uint64_t delay_ms(const mt_app_t *app) {
  return (uint64_t)(app->model.delay_s * 1000.0 + 0.5);
}

static void app_quit(mt_app_t *app);

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

/* ---- the owners' hooks ------------------------------------------------ */

/* `run --once`: once the command's end is settled, print it and quit. */
static void poll_check(mt_app_t *app) {
  if (!app->quitting && app->cmd != NULL && mt_command_exited(app->cmd) &&
      mt_command_poll_finish(app->cmd, &app->out))
    app_quit(app);
}

/* live.c: a target changed. */
static void on_changed(void *arg) {
  mt_app_t *app = arg;

  if (app->mode == MODE_POLL)
    poll_check(app);
  else
    request_draw(app);
}

/* command.c: the command's end is settled. */
static void on_settled(void *arg) {
  mt_app_t *app = arg;

  if (app->mode == MODE_POLL) {
    poll_check(app);
    return;
  }
  if (app->quitting)
    app_quit(app);
  request_draw(app);
}

/* rounds.c: the last round is printed. */
static void on_rounds_done(void *arg) {
  app_quit(arg);
}

/* ---- the live view: keys, signals, ticks ------------------------------ */

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
  request_draw(app);
}

/* live.c: is pid's next read to bring its profile? Only for the
 * process on the detail view, on the cadence above. */
static int sites_want(void *arg, int pid) {
  mt_app_t *app = arg;
  const mt_target_t *t;
  double every = 5 * app->model.delay_s;

  if (!app->ui || app->model.screen != MT_SCREEN_DETAIL || app->quitting) {
    mt_sites_live_rest(app->sites_live); /* nothing to resolve for now */
    return 0;
  }
  if (app->model.detail_pid != pid)
    return 0;
  t = mt_model_find(&app->model, pid);
  if (t == NULL || t->state != MT_LIVE)
    return 0;
  if (app->sites_live == NULL) {
    app->sites_live = mt_sites_live_new(&app->loop, sites_cb, app);
    if (app->sites_live == NULL)
      return 0;
    mt_sites_live_filter(app->sites_live, &app->o->filter);
  }
  if (every < MT_SITES_INTERVAL_S)
    every = MT_SITES_INTERVAL_S;
  return mt_sites_live_due(app->sites_live, pid, uv_hrtime(),
                           (uint64_t)(every * 1e9));
}

/* live.c: a read brought pid's profile (or why not). */
static void sites_got(void *arg, int pid, mt_tset_profile_t *p) {
  mt_app_t *app = arg;

  mt_sites_live_take(app->sites_live, pid, p);
}

static void live_tick(uv_timer_t *t) {
  mt_app_t *app = t->data;

  request_draw(app);
  if (app->o->iterations > 0 && ++app->ticks >= app->o->iterations)
    app_quit(app);
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
    mt_tset_set_interval(app->set, delay_ms(app));
    if (uv_is_active((uv_handle_t *)&app->tick))
      uv_timer_start(&app->tick, live_tick, delay_ms(app), delay_ms(app));
    draw_now(app);
    break;
  case MT_ACT_REDRAW:
    draw_now(app);
    break;
  default:
    break;
  }
}

static void signal_cb(uv_signal_t *h, int signum) {
  mt_app_t *app = h->data;
  mt_command_t *cmd = app->cmd;

  if (signum == SIGWINCH) {
    if (app->ui) {
      mt_ui_resize();
      draw_now(app);
    }
    return;
  }
  if (cmd != NULL && mt_command_running(cmd)) {
    /* A Ctrl-C on the terminal reached the command too (same process
     * group); any other signal is passed on. Then memtop waits for the
     * command, to report its end and return its status. */
    if (!(signum == SIGINT && isatty(STDIN_FILENO)))
      mt_command_kill(cmd, signum);
    if (app->mode == MODE_POLL)
      return;
  }
  if (cmd == NULL || (!mt_command_running(cmd) && !mt_command_exited(cmd))) {
    app->exit_code =
        (app->mode == MODE_LIVE && signum == SIGINT) ? 0 : 128 + signum;
    app->have_exit_code = 1;
  }
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

/* Ends the app: stops the loop. While `run`'s command runs, it sees to
 * the command's end first; the loop stops once that end is settled. */
static void app_quit(mt_app_t *app) {
  if (app->cmd != NULL && mt_command_running(app->cmd)) {
    /* Leaving the view of a running command ends the command, as
     * quitting `watch` or `perf top` ends what they started. */
    if (!app->quitting) {
      app->quitting = 1;
      mt_tset_stop(app->set);
      mt_command_end(app->cmd, app->mode == MODE_LIVE && !app->signalled);
    }
    return;
  }
  app->quitting = 1;
  if (app->set != NULL)
    mt_tset_stop(app->set);
  uv_stop(&app->loop);
}

static void close_if_open(uv_handle_t *h) {
  if (h->loop != NULL && !uv_is_closing(h))
    uv_close(h, NULL);
}

static void app_close(mt_app_t *app) {
  size_t i;

  /* A profile being resolved finishes on its thread during the run
   * below; its result is then dropped. */
  mt_sites_live_close(app->sites_live);
  app->sites_live = NULL;
  /* The command first: its end, reported while the loop closes, must
   * find no target of the set. */
  mt_command_close(app->cmd);
  mt_tset_free(app->set);
  app->set = NULL;
  mt_rounds_close(&app->rounds);
  close_if_open((uv_handle_t *)&app->frame);
  close_if_open((uv_handle_t *)&app->tick);
  if (app->have_keys)
    close_if_open((uv_handle_t *)&app->keys);
  for (i = 0; i < sizeof app->sig / sizeof app->sig[0]; i++)
    close_if_open((uv_handle_t *)&app->sig[i]);
  /* uv_stop() may have cut the previous run short: run until every close
   * callback has run (the memory they free is then freed). */
  do
    uv_run(&app->loop, UV_RUN_DEFAULT);
  while (uv_loop_alive(&app->loop));
  uv_loop_close(&app->loop);
  mt_command_free(app->cmd);
  mt_model_free(&app->model);
  mt_out_free(&app->out);
}

/* Said before curses starts: with no TERM, or one that cannot move the
 * cursor, curses would draw nothing a person could read. Returns 0, or 2
 * after saying why the view cannot start. */
static int ui_start(mt_app_t *app) {
  const char *term = getenv("TERM");
  int rc;

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
  return 0;
}

static int live_start(mt_app_t *app) {
  static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGWINCH};
  static const int fatal[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
  size_t i;
  int rc;

  rc = ui_start(app);
  if (rc != 0)
    return rc;
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

/* The app for *o, its mode chosen. NULL after saying why: out of memory
 * (*rc 1), or the live view without a terminal (*rc 2), said before any
 * command is started. */
static mt_app_t *app_new(const mt_opts_t *o, int *rc) {
  mt_app_t *app;
  mt_mode_t mode;

  if (o->cmd == MT_CMD_PS || (o->once && o->cmd == MT_CMD_WATCH))
    mode = MODE_ROUNDS;
  else if (o->once && o->cmd == MT_CMD_RUN)
    mode = MODE_POLL;
  else
    mode = MODE_LIVE;
  if (mode == MODE_LIVE && (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO))) {
    fprintf(stderr, "memtop: the live view needs a terminal (stdin and "
                    "stdout); use --once for a plain-text report, or --once "
                    "--json for JSON lines\n");
    *rc = 2;
    return NULL;
  }
  app = calloc(1, sizeof *app);
  if (app == NULL) {
    fprintf(stderr, "memtop: out of memory\n");
    *rc = 1;
    return NULL;
  }
  app->o = o;
  app->mode = mode;
  return app;
}

/* The target set, with the owner the mode wants. NULL on ENOMEM. */
static mt_tset_t *make_set(mt_app_t *app) {
  mt_tset_io_t io;
  mt_tset_opts_t so;

  mt_tset_io_uv(&io, &app->loop);
  memset(&so, 0, sizeof so);
  so.timed = app->mode != MODE_ROUNDS;
  so.interval_ms = delay_ms(app);
  so.backoff_max_ms = (uint64_t)(MT_BACKOFF_MAX_S * 1000);
  so.timeout_ms = app->timeout_ms;
  so.rescan_min_ms =
      app->mode == MODE_LIVE && app->model.watch_all ? RESCAN_MIN_MS : 0;
  so.retire_unlisted = app->mode == MODE_ROUNDS;
  so.keep_gone_ms = (uint64_t)(MT_EXITED_KEEP_S * 1000);
  if (app->mode == MODE_ROUNDS)
    return mt_tset_new(&io, &so, &mt_rounds_cbs, &app->rounds);
  return mt_tset_new(&io, &so, &mt_live_cbs, &app->live);
}

/* Everything but the targets and the screen: the model, the loop and its
 * handles, the set and its owner. Returns 0 or 1 (out of memory). */
static int app_init(mt_app_t *app) {
  const mt_opts_t *o = app->o;
  size_t i;

  mt_model_init(&app->model);
  app->model.delay_s = o->delay_s;
  app->model.color = o->color;
  app->model.watch_all = o->npids == 0 && o->cmd != MT_CMD_RUN;
  app->out.json = o->json;
  app->out.sites = o->sites > 0 ? (size_t)o->sites : 0;
  app->out.filter = &o->filter;
  mt_debuginfod_configure(o->timeout_ms, 0); /* no progress line here */
  app->timeout_ms = o->timeout_ms;
  if (msc_socket_dir(app->sockdir, sizeof app->sockdir) != 0)
    snprintf(app->sockdir, sizeof app->sockdir, "the socket directory");
  /* A target that closes its socket while we write must not kill memtop
   * with SIGPIPE; the write's error says it instead. */
  signal(SIGPIPE, SIG_IGN);

  uv_loop_init(&app->loop);
  uv_timer_init(&app->loop, &app->frame);
  uv_timer_init(&app->loop, &app->tick);
  app->frame.data = app->tick.data = app;
  for (i = 0; i < sizeof app->sig / sizeof app->sig[0]; i++) {
    uv_signal_init(&app->loop, &app->sig[i]);
    app->sig[i].data = app;
  }
  mt_rounds_init(&app->rounds, &app->loop);
  app->set = make_set(app);
  if (app->set == NULL)
    return 1;
  app->live = (mt_live_t){.model = &app->model,
                          .set = app->set,
                          .screen = app->mode == MODE_LIVE,
                          .changed = on_changed,
                          .want_profile = sites_want,
                          .profile = sites_got,
                          .arg = app};
  app->rounds.o = o;
  app->rounds.model = &app->model;
  app->rounds.set = app->set;
  app->rounds.out = &app->out;
  app->rounds.sockdir = app->sockdir;
  app->rounds.done = on_rounds_done;
  app->rounds.arg = app;
  return 0;
}

/* Watches the PIDs named; one named opens its detail view straight away
 * (Esc: the list). Returns 0 or 1 (out of memory). */
static int add_named(mt_app_t *app) {
  const mt_opts_t *o = app->o;
  uint64_t st;
  size_t i;

  for (i = 0; i < o->npids; i++) {
    st = 0;
    msc_proc_start_time(o->pids[i], &st);
    if (mt_tset_add(app->set, o->pids[i], st, 0) == NULL)
      return 1;
  }
  if (o->npids == 1)
    mt_open_detail(&app->model, o->pids[0]);
  return 0;
}

/* `run`: the command, watched. Returns 0 or memtop's exit status. */
static int start_command(mt_app_t *app) {
  mt_command_cfg_t cfg = {.loop = &app->loop,
                          .o = app->o,
                          .screen = app->mode == MODE_LIVE,
                          .model = &app->model,
                          .set = app->set,
                          .settled = on_settled,
                          .arg = app};

  app->cmd = mt_command_new(&cfg);
  if (app->cmd == NULL) {
    fprintf(stderr, "memtop: out of memory\n");
    return 1;
  }
  app->live.cmd = app->cmd;
  return mt_command_start(app->cmd);
}

/* The live view of named or listed processes: the first listing, then
 * every target read at once. Returns 0 or 1 (the listing failed). */
static int start_watching(mt_app_t *app) {
  int rc;

  if (app->model.watch_all) {
    rc = mt_tset_rescan(app->set);
    if (rc != 0) {
      mt_ui_end();
      mt_warn("cannot list attachable processes in %s: %s (check "
              "MEMSTATS_DIR)",
              app->sockdir, ms_strerror(rc));
      return 1;
    }
  }
  mt_tset_start(app->set);
  draw_now(app);
  return 0;
}

/* Starts what the mode runs: the screen or the plain modes' signals, then
 * the command, the rounds or the watching. Returns 0 or the exit status. */
static int app_start(mt_app_t *app) {
  size_t i;
  int rc;

  if (app->mode == MODE_LIVE) {
    rc = live_start(app);
    if (rc != 0)
      return rc;
  } else {
    /* Plain modes stop cleanly on SIGINT/SIGTERM too (and with `run`,
     * wait for the command to report its end). */
    for (i = 0; i < 3; i++)
      uv_signal_start(&app->sig[i], signal_cb,
                      i == 0   ? SIGINT
                      : i == 1 ? SIGTERM
                               : SIGHUP);
  }
  if (app->o->cmd == MT_CMD_RUN)
    return start_command(app);
  if (app->mode == MODE_ROUNDS) {
    mt_rounds_start(&app->rounds);
    return 0;
  }
  return start_watching(app);
}

/* memtop's exit status once the loop has ended. */
static int exit_status(const mt_app_t *app) {
  if (app->have_exit_code)
    return app->exit_code;
  if (app->out.failed)
    return 1;
  if (app->cmd != NULL && mt_command_exited(app->cmd))
    return mt_command_status(app->cmd);
  return app->rounds.exit_code;
}

/* The screen is gone: say what is left to say. */
static void app_finish(mt_app_t *app, int rc) {
  const char *e;
  size_t i, n, k = strlen("; retrying");

  mt_ui_end();
  app->ui = 0;
  if (app->cmd != NULL)
    mt_command_say_log(app->cmd);
  if (app->mode != MODE_LIVE || app->o->cmd == MT_CMD_RUN || rc != 0)
    return;
  /* Say why the last targets could not be read, now that the screen is
   * gone: the live view exits 0, but the reason stays visible. memtop is
   * leaving: it retries nothing any more. */
  for (i = 0; i < app->model.ntargets; i++) {
    if (app->model.targets[i]->state != MT_UNREACHABLE)
      continue;
    e = app->model.targets[i]->error;
    n = strlen(e);
    if (n >= k && strcmp(e + n - k, "; retrying") == 0)
      n -= k;
    mt_warn("%.*s", (int)n, e);
  }
}

int mt_loop_main(const mt_opts_t *o) {
  mt_app_t *app;
  int rc = 0;

  app = app_new(o, &rc);
  if (app == NULL)
    return rc;
  if (app_init(app) != 0 || add_named(app) != 0) {
    fprintf(stderr, "memtop: out of memory\n");
    rc = 1;
  }
  if (rc == 0)
    rc = app_start(app);
  if (rc == 0) {
    if (!app->quitting)
      uv_run(&app->loop, UV_RUN_DEFAULT);
    rc = exit_status(app);
  }
  app_finish(app, rc);
  app_close(app);
  free(app);
  return rc;
}
