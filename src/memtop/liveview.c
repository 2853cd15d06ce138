/*
 * liveview.c - the live view as a mode of the shell (see liveview.h):
 * per-target timers at the -d interval pull snapshots into the model
 * (live.c); failing targets back off; when no PID was named the socket
 * directory is listed again for new and exited processes; keys, SIGWINCH
 * and the frame timer drive the view (tui/ui.h).
 */
#include "memtop/liveview.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "memstats.h"
#include "client/client.h"
#include "memtop/out.h"
#include "memtop/wake.h"
#include "tui/ui.h"

/* Listing the directory costs a readdir and a /proc read per process:
 * the live view does it at most this often. */
#define RESCAN_MIN_MS 2000

/* The detail view's allocation sites are read on their own cadence, at
 * most every MT_SITES_INTERVAL_S or 5 refreshes, whichever is longer: a
 * profile costs the target a copy of its buckets and memtop a reading of
 * its binaries. */
#define MT_SITES_INTERVAL_S 5.0

/* The -d interval in milliseconds. */
static uint64_t delay_ms(const mt_liveview_t *sc) {
  return (uint64_t)(sc->model->delay_s * 1000.0 + 0.5);
}

/* ---- drawing --------------------------------------------------------- */

static void draw_now(mt_liveview_t *sc) {
  if (!sc->ui)
    return;
  sc->model->now_mono_ns = uv_hrtime();
  mt_model_sort(sc->model);
  mt_ui_draw(sc->model);
}

static void frame_cb(uv_timer_t *t) {
  draw_now(t->data);
}

/* Snapshots arrive one target at a time; a frame shortly after the first
 * of a burst shows them all at once instead of redrawing per target. The
 * live owner's `changed` hook. */
static void request_draw(void *arg) {
  mt_liveview_t *sc = arg;

  if (sc->ui && !uv_is_active((uv_handle_t *)&sc->frame))
    uv_timer_start(&sc->frame, frame_cb, 15, 0);
}

/* ---- the detail view's allocation sites ------------------------------- */

static void sites_cb(void *arg, int pid, mt_site_t *sites, size_t n,
                     int estimated, const char *err) {
  mt_liveview_t *sc = arg;
  mt_target_t *t = mt_model_find(sc->model, pid);

  if (t == NULL) {
    mt_sites_free(sites, n);
    return;
  }
  if (sites != NULL)
    mt_model_set_sites(t, sites, n, estimated, uv_hrtime());
  else
    mt_model_sites_error(t, err != NULL ? err : "no profile");
  request_draw(sc);
}

/* live.c: is pid's next read to bring its profile? Only for the
 * process on the detail view, on the cadence above. */
static int sites_want(void *arg, int pid) {
  mt_liveview_t *sc = arg;
  const mt_model_t *m = sc->model;
  const mt_target_t *t;
  double every = 5 * m->delay_s;

  if (!sc->ui || m->screen != MT_SCREEN_DETAIL || mt_shell_quitting(sc->sh)) {
    mt_sites_live_rest(sc->sites_live); /* nothing to resolve for now */
    return 0;
  }
  if (m->detail_pid != pid)
    return 0;
  t = mt_model_find(sc->model, pid);
  if (t == NULL || t->state != MT_LIVE)
    return 0;
  if (sc->sites_live == NULL) {
    sc->sites_live = mt_sites_live_new(mt_shell_loop(sc->sh), sites_cb, sc);
    if (sc->sites_live == NULL)
      return 0;
    mt_sites_live_filter(sc->sites_live, &mt_shell_opts(sc->sh)->filter);
  }
  if (every < MT_SITES_INTERVAL_S)
    every = MT_SITES_INTERVAL_S;
  return mt_sites_live_due(sc->sites_live, pid, uv_hrtime(),
                           (uint64_t)(every * 1e9));
}

/* live.c: a read brought pid's profile (or why not). */
static void sites_got(void *arg, int pid, mt_tset_profile_t *p) {
  mt_liveview_t *sc = arg;

  mt_sites_live_take(sc->sites_live, pid, p);
}

/* ---- keys, signals, ticks -------------------------------------------- */

/* --tree: the tree's idle processes woken (wake.h), and listed at once. */
static void wake_tree(mt_liveview_t *sc) {
  if (sc->wake != NULL && !mt_shell_quitting(sc->sh) &&
      mt_wake_pass(sc->wake, sc->live.set) > 0)
    mt_tset_rescan(sc->live.set);
}

/* A process of the tree that could not be woken: said once, on the
 * status line. */
static void wake_say(void *arg, int pid, const char *words) {
  mt_liveview_t *sc = arg;

  mt_wake_fail_status(&sc->wake_fails, pid, words, sc->model->status,
                      sizeof sc->model->status);
  request_draw(sc);
}

/* The list of every attachable process says so when the user's socket
 * directory is skipped as unsafe (instead of "No attachable process"),
 * and stops saying it once the directory is fixed: looked at on every
 * tick (one lstat). */
static void note_refused_dir(mt_liveview_t *sc) {
  if (sc->model->watch_all)
    (void)msc_sockdir_refusal(sc->model->list_refused,
                              sizeof sc->model->list_refused);
}

static void tick_cb(uv_timer_t *t) {
  mt_liveview_t *sc = t->data;
  const mt_opts_t *o = mt_shell_opts(sc->sh);

  note_refused_dir(sc);
  wake_tree(sc);
  request_draw(sc);
  if (o->iterations > 0 && ++sc->ticks >= o->iterations)
    mt_shell_quit(sc->sh);
}

/* `a`, confirmed (keys.c): memtop attach on the process, the outcome on
 * the status line, and its next read at once. The calls hold the loop a
 * millisecond or so (up to the attach's bounds), as the user asked. */
static void attach_asked(mt_liveview_t *sc) {
  mt_model_t *m = sc->model;
  int pid = m->attach_pid;
  mt_tset_target_t *st;

  m->attach_pid = 0;
  if (pid <= 0)
    return;
  if (mt_wake_attach(pid, m->status, sizeof m->status) == 0 &&
      (st = mt_tset_find(sc->live.set, pid)) != NULL && !st->gone)
    mt_tset_schedule(sc->live.set, st, 0);
  draw_now(sc);
}

static void keys_cb(uv_poll_t *h, int status, int events) {
  mt_liveview_t *sc = h->data;

  (void)events;
  if (status < 0) {
    uv_poll_stop(h);
    return;
  }
  switch (mt_ui_keys(sc->model)) {
  case MT_ACT_QUIT:
    mt_shell_quit(sc->sh);
    break;
  case MT_ACT_ATTACH:
    attach_asked(sc);
    break;
  case MT_ACT_DELAY:
    if (sc->model->delay_s < MT_DELAY_MIN)
      sc->model->delay_s = MT_DELAY_MIN;
    mt_tset_set_interval(sc->live.set, delay_ms(sc));
    if (uv_is_active((uv_handle_t *)&sc->tick))
      uv_timer_start(&sc->tick, tick_cb, delay_ms(sc), delay_ms(sc));
    draw_now(sc);
    break;
  case MT_ACT_REDRAW:
    draw_now(sc);
    break;
  default:
    break;
  }
}

/* A new size redraws; anything else ends the view (SIGINT is how a user
 * leaves it: exit 0). */
static void view_signal(void *self, int signum) {
  mt_liveview_t *sc = self;

  if (signum == SIGWINCH) {
    if (sc->ui) {
      mt_ui_resize();
      draw_now(sc);
    }
    return;
  }
  mt_shell_exit(sc->sh, signum == SIGINT ? 0 : 128 + signum);
  mt_shell_quit(sc->sh);
}

/* A crash must not leave the terminal in raw mode. */
static void fatal_signal(int sig) {
  mt_ui_end();
  signal(sig, SIG_DFL);
  raise(sig);
}

/* ---- starting and stopping ------------------------------------------- */

static int view_setup(void *self, mt_shell_t *sh, mt_shell_setup_t *su) {
  mt_liveview_t *sc = self;

  sc->sh = sh;
  uv_timer_init(mt_shell_loop(sh), &sc->frame);
  uv_timer_init(mt_shell_loop(sh), &sc->tick);
  sc->frame.data = sc->tick.data = sc;
  if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
    /* `memtop run -- CMD < FILE` meant the file for the command: its
     * redirection goes inside, where the live view leaves the terminal
     * to memtop. */
    int run_input = mt_shell_opts(sh)->cmd == MT_CMD_RUN &&
                    !isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
    fprintf(stderr,
            "memtop: the live view needs a terminal (stdin and stdout); use "
            "--once for a plain-text report, or --once --json for JSON "
            "lines%s\n",
            run_input ? "; to give the command a file as its input, "
                        "redirect it inside: memtop run -- sh -c 'CMD < FILE'"
                      : "");
    return 2;
  }
  sc->live = (mt_live_t){.model = sc->model,
                         .screen = 1,
                         .changed = request_draw,
                         .want_profile = sites_want,
                         .profile = sites_got,
                         .arg = sc};
  su->set.timed = 1;
  su->set.rescan_min_ms = sc->model->watch_all ? RESCAN_MIN_MS : 0;
  /* --tree: the PID named and its descendants (the one PID cli.c let
   * through). */
  if (mt_shell_opts(sh)->tree)
    su->set.tree_root = mt_shell_opts(sh)->pids[0];
  su->cbs = &mt_live_cbs;
  su->arg = &sc->live;
  su->set_out = &sc->live.set;
  su->signals = MT_SIG_PLAIN | MT_SIG_WINCH;
  return 0;
}

/* Said before curses starts: with no TERM, or one that cannot move the
 * cursor, curses would draw nothing a person could read. Returns 0, or 2
 * after saying why the view cannot start. */
static int ui_start(mt_liveview_t *sc) {
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
  rc = mt_ui_start(sc->model);
  if (rc == MS_ENOSYS && mt_ui_load_error() != NULL) {
    mt_warn("%s; or use --once for a plain-text report", mt_ui_load_error());
    return 2;
  }
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
  sc->ui = 1;
  return 0;
}

/* The named processes or the listing: the first listing, then every
 * target read at once. Returns 0 or 1 (the listing failed). */
static int start_watching(mt_liveview_t *sc) {
  const mt_opts_t *o = mt_shell_opts(sc->sh);
  int rc;

  /* One PID named opens its detail view straight away (Esc: the list). */
  if (o->npids == 1 && !o->tree)
    mt_open_detail(sc->model, o->pids[0]);
  if (o->tree) {
    sc->wake = mt_wake_new(o->pids[0], wake_say, sc);
    if (sc->wake != NULL)
      mt_wake_pass(sc->wake, sc->live.set);
  }
  note_refused_dir(sc);
  if (sc->model->watch_all) {
    rc = mt_tset_rescan(sc->live.set);
    if (rc != 0) {
      mt_ui_end();
      mt_warn("cannot list attachable processes in %s: %s (check "
              "MEMSTATS_DIR)",
              mt_shell_sockdir(sc->sh), ms_strerror(rc));
      return 1;
    }
  }
  mt_tset_start(sc->live.set);
  draw_now(sc);
  return 0;
}

static int view_start(void *self) {
  static const int fatal[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
  mt_liveview_t *sc = self;
  size_t i;
  int rc;

  rc = ui_start(sc);
  if (rc != 0)
    return rc;
  atexit(mt_ui_end);
  for (i = 0; i < sizeof fatal / sizeof fatal[0]; i++)
    signal(fatal[i], fatal_signal);
  if (uv_poll_init(mt_shell_loop(sc->sh), &sc->keys, STDIN_FILENO) == 0) {
    sc->have_keys = 1;
    sc->keys.data = sc;
    uv_poll_start(&sc->keys, UV_READABLE, keys_cb);
  }
  uv_timer_start(&sc->tick, tick_cb, delay_ms(sc), delay_ms(sc));
  return sc->watch ? start_watching(sc) : 0;
}

/* The screen is gone: say what is left to say. */
static void view_finish(void *self, int rc) {
  mt_liveview_t *sc = self;
  const mt_model_t *m = sc->model;
  const char *e;
  size_t i, n, k = strlen("; retrying");

  mt_ui_end();
  sc->ui = 0;
  if (!sc->say_left || rc != 0)
    return;
  /* Say why the last targets could not be read, now that the screen is
   * gone: the live view exits 0, but the reason stays visible. memtop is
   * leaving: it retries nothing any more. */
  for (i = 0; i < m->ntargets; i++) {
    if (m->targets[i]->state != MT_UNREACHABLE)
      continue;
    e = m->targets[i]->error;
    n = strlen(e);
    if (n >= k && strcmp(e + n - k, "; retrying") == 0)
      n -= k;
    mt_warn("%.*s", (int)n, e);
  }
}

static void close_if_open(uv_handle_t *h) {
  if (h->loop != NULL && !uv_is_closing(h))
    uv_close(h, NULL);
}

static void view_close(void *self) {
  mt_liveview_t *sc = self;

  /* A profile being resolved finishes on its thread while the loop
   * closes; its result is then dropped. */
  mt_sites_live_close(sc->sites_live);
  sc->sites_live = NULL;
  mt_wake_free(sc->wake);
  sc->wake = NULL;
  close_if_open((uv_handle_t *)&sc->frame);
  close_if_open((uv_handle_t *)&sc->tick);
  if (sc->have_keys)
    close_if_open((uv_handle_t *)&sc->keys);
}

const mt_mode_t mt_liveview_mode = {
    .setup = view_setup,
    .start = view_start,
    .signal = view_signal,
    .finish = view_finish,
    .close = view_close,
};
