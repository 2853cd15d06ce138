/*
 * serve.c - `memtop serve` (see serve.h): one more owner of the target set
 * (targetset.h), the rounds that read it, and the scrapes that wait for a
 * round.
 *
 * The set discovers continuously: it lists the attachable processes every
 * MT_SERVE_RESCAN_MS (new ones join and are read at once, those that
 * exited are marked gone and dropped at the next listing, keep_gone_ms 0).
 * Each target keeps its latest snapshot (the `snapshot` callback), served
 * with its age. A scrape asks every target at once for a snapshot
 * (mt_tset_fetch_all), on memtop's libuv loop, and no process that has
 * exited since is served (each is checked against /proc when the answer is
 * written). The scrape is answered when every target asked has answered or
 * failed, or after MT_SERVE_WAIT_MS, whichever comes first: a target that
 * hangs (stopped, deadlocked, hostile) costs a scrape that bound and no
 * more, and its last snapshot is served with its age (its request goes on
 * in the background, bounded by --timeout). Scrapes closer together
 * than -d share one round's figures.
 *
 * It is a mode of the shell (shell.h): the shell makes the loop, the set
 * and the signals (SIGINT, SIGTERM: stop, exit 0); this file the server
 * and the rounds.
 *
 * Reads happen at scrapes, not on a cadence of their own: the set is timed
 * only for its listing, and its per-target timers read a target only until
 * it has a first snapshot (`request` skips the rest), so 200 processes
 * scraped every 15 s are read every 15 s.
 */
#include "memtop/serve.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "memstats.h"
#include "client/client.h"
#include "common/sanitize.h"
#include "emit/emit.h"
#include "exporter/httpd.h"
#include "exporter/negotiate.h"
#include "memtop/shell.h"
#include "targets/targetset.h"
#include "exporter/webconfig.h"

typedef struct serve_s serve_t;

/* What serve keeps of a target (the set's target's `user`). */
typedef struct sv_target_s {
  ms_snapshot_t *snap; /* the latest answer; NULL until the first */
  uint64_t errors;     /* failed reads */
  int pending;         /* the current round waits for its answer */
  uint64_t asked_ns;   /* mt_tset_now_ns() of the request in flight */
  char exe[MS__PROM_EXE_MAX + 1];
} sv_target_t;

struct serve_s {
  const mt_opts_t *o;
  mt_webconfig_t web;
  mt_httpd_t *http;
  mt_tset_t *set;
  uint64_t fresh_ns; /* -d: figures this young are served as they are */
  int in_round;
  size_t pending;
  uint64_t round_end_ns;
  mt_scrape_t **waiting; /* scrapes waiting for the round */
  size_t nwaiting, capwaiting;
  uv_timer_t bound;
  mt_shell_t *sh;
  int stopping;
};

static void answer_all(serve_t *sv);
static void round_check_end(serve_t *sv);

/* ------------------------------------------------------------------------
 * The target set's callbacks
 * ------------------------------------------------------------------------ */

/* Whether t is still the process it was: alive, and not a new process
 * that has its PID (start time compared). */
static int target_alive(const mt_tset_target_t *t) {
  uint64_t st = 0;
  if (msc_proc_start_time(t->pid, &st) != 0)
    return 0;
  return t->start_time == 0 || st == t->start_time;
}

/* The round no longer waits for t's answer. */
static void round_drop(serve_t *sv, sv_target_t *u) {
  if (!u->pending)
    return;
  u->pending = 0;
  sv->pending--;
  round_check_end(sv);
}

static int on_added(void *arg, mt_tset_target_t *t) {
  (void)arg;
  sv_target_t *u = calloc(1, sizeof *u);
  if (!u)
    return -1;
  /* The program's path, where /proc lets us read it (another user's
   * process, as a user, does not): a label, so made safe when written. */
  char link[64];
  snprintf(link, sizeof link, "/proc/%d/exe", t->pid);
  ssize_t n = readlink(link, u->exe, sizeof u->exe - 1);
  u->exe[n > 0 ? (size_t)n : 0] = '\0';
  t->user = u;
  return 0;
}

static void on_retired(void *arg, mt_tset_target_t *t) {
  serve_t *sv = arg;
  sv_target_t *u = t->user;
  if (!u)
    return;
  t->user = NULL;
  /* A target dropped while the round waited for it no longer holds the
   * round open (its reply will not come). */
  round_drop(sv, u);
  free(u->snap);
  free(u);
}

/* A timed read is due: only a target never read yet is read between
 * scrapes (a new one, so that the next scrape has its figures). */
static int on_request(void *arg, mt_tset_target_t *t, mt_tset_req_t *req) {
  sv_target_t *u = t->user;
  (void)req;
  if (!u || u->snap)
    return 1;
  u->asked_ns = mt_tset_now_ns(((serve_t *)arg)->set);
  return 0;
}

static void on_snapshot(void *arg, mt_tset_target_t *t,
                        const ms_snapshot_t *s) {
  serve_t *sv = arg;
  sv_target_t *u = t->user;
  if (!u->snap)
    u->snap = malloc(sizeof *u->snap);
  if (u->snap)
    memcpy(u->snap, s, sizeof *u->snap);
  round_drop(sv, u);
}

static uint64_t on_failure(void *arg, mt_tset_target_t *t, int status,
                           const char *msg) {
  serve_t *sv = arg;
  sv_target_t *u = t->user;
  (void)msg;
  /* Replaced by a new process under its PID: served no more. */
  if (status == MS_ESTALE)
    mt_tset_mark_gone(sv->set, t);
  u->errors++;
  round_drop(sv, u);
  return MT_TSET_BACKOFF;
}

static void on_gone(void *arg, mt_tset_target_t *t, int status,
                    const char *msg) {
  serve_t *sv = arg;
  sv_target_t *u = t->user;
  (void)msg;
  if (status != 0)
    u->errors++;
  round_drop(sv, u);
}

/* ------------------------------------------------------------------------
 * Rounds
 * ------------------------------------------------------------------------ */

static void round_check_end(serve_t *sv) {
  /* A process just listed is waited for too, until its probe (its first
   * read) ends: the first scrape has the processes there are. */
  if (!sv->in_round || sv->pending > 0 ||
      (sv->set != NULL && mt_tset_probing(sv->set) > 0))
    return;
  sv->in_round = 0;
  sv->round_end_ns = uv_hrtime();
  answer_all(sv);
}

static void on_probed(void *arg) {
  round_check_end(arg);
}

static void round_start(serve_t *sv) {
  if (sv->in_round)
    return;
  sv->in_round = 1;
  size_t n = mt_tset_count(sv->set);
  uint64_t now = mt_tset_now_ns(sv->set);
  /* A target still busy with an earlier request is not asked again: the
   * round waits for that answer if it was asked lately (just found), not
   * if it has been waiting longer than a scrape may (it hangs: its last
   * figures are served, with their age). The others are asked now, all
   * at once (2: to be asked). */
  for (size_t i = 0; i < n; i++) {
    mt_tset_target_t *t = mt_tset_at(sv->set, i);
    sv_target_t *u = t->user;
    if (t->gone)
      u->pending = 0;
    else if (!mt_tset_busy(sv->set, t))
      u->pending = 2;
    else
      u->pending = now - u->asked_ns < (uint64_t)MT_SERVE_WAIT_MS * 1000000u;
  }
  /* No reply runs inside this call, no target joins or leaves. */
  mt_tset_fetch_all(sv->set, NULL);
  for (size_t i = 0; i < n; i++) {
    mt_tset_target_t *t = mt_tset_at(sv->set, i);
    sv_target_t *u = t->user;
    if (u->pending == 2) {
      u->pending = mt_tset_busy(sv->set, t);
      u->asked_ns = now;
    }
    sv->pending += (size_t)u->pending;
  }
  round_check_end(sv);
}

/* ------------------------------------------------------------------------
 * Scrapes
 * ------------------------------------------------------------------------ */

/* The exposition of every target now, in the text format or
 * OpenMetrics, into *body (its oom flag set if memory ran out). */
static void render(serve_t *sv, int openmetrics, ms__strbuf_t *body) {
  uint64_t now = mt_tset_now_ns(sv->set);
  size_t count = mt_tset_count(sv->set);
  ms__prom_target_t *pt = calloc(count ? count : 1, sizeof *pt);
  size_t n = 0;
  if (!pt) {
    body->oom = 1;
    return;
  }
  for (size_t i = 0; i < count; i++) {
    mt_tset_target_t *t = mt_tset_at(sv->set, i);
    sv_target_t *u = t->user;
    /* A process that exited since the round is served no more; the
     * round does not wait for it (its failure is not reported, the
     * set having been told), and the next listing drops it. */
    if (!t->gone && !target_alive(t))
      mt_tset_mark_gone(sv->set, t);
    if (t->gone) {
      if (u->pending) {
        u->pending = 0;
        sv->pending--;
      }
      continue;
    }
    pt[n].pid = t->pid;
    pt[n].snap = u->snap;
    pt[n].exe = u->exe[0] ? u->exe : NULL;
    pt[n].container = t->id.container;
    pt[n].pod = t->id.pod;
    pt[n].scrape_errors = u->errors;
    if (u->snap)
      pt[n].age_ns = u->snap->age_ns + (now - t->last_ok_ns);
    n++;
  }
  ms__emit_prometheus(body, openmetrics, pt, n, MS_VERSION_STRING);
  free(pt);
}

static void answer(serve_t *sv, mt_scrape_t *s) {
  ms__strbuf_t body = MS_STRBUF_INIT;
  render(sv, mt_scrape_openmetrics(s), &body);
  mt_scrape_answer(s, &body);
  ms__strbuf_free(&body);
}

static void answer_all(serve_t *sv) {
  uv_timer_stop(&sv->bound);
  /* The scrapes waiting now are answered with the figures of this
   * moment: rendered once per format, gzipped at most once, and sent to
   * each from the same buffers (memtop's cost does not grow with the
   * scrapers but with the formats). Answering may not add scrapes (the
   * server calls the hook from its own run only), so the list is stable
   * here. */
  mt_answer_t *shared[2] = {NULL, NULL};
  int made[2] = {0, 0};
  for (size_t i = 0; i < sv->nwaiting; i++) {
    int om = mt_scrape_openmetrics(sv->waiting[i]) != 0;
    if (!made[om]) {
      ms__strbuf_t body = MS_STRBUF_INIT;
      render(sv, om, &body);
      shared[om] = mt_answer_new(&body, om);
      made[om] = 1;
    }
    mt_scrape_answer_with(sv->waiting[i], shared[om]);
  }
  mt_answer_release(shared[0]);
  mt_answer_release(shared[1]);
  sv->nwaiting = 0;
  /* The answers may have let the round's last waits go (processes that
   * exited): it ends here then, with no one left to answer. */
  if (sv->in_round && sv->pending == 0) {
    sv->in_round = 0;
    sv->round_end_ns = uv_hrtime();
  }
}

/* The bound: the scrapes are answered with what memtop has, and the
 * round ends here. The reads still on their way go on in the background
 * (their answers are kept when they come); the next scrape's round asks
 * everyone else again and does not wait for them (asked longer ago than
 * the bound). Were the round left open until they end, every scrape would
 * wait the bound again and serve the others' figures of the first one,
 * for as long as a hung read may take (--timeout). */
static void bound_cb(uv_timer_t *timer) {
  serve_t *sv = timer->data;
  size_t n = mt_tset_count(sv->set);
  for (size_t i = 0; i < n; i++)
    ((sv_target_t *)mt_tset_at(sv->set, i)->user)->pending = 0;
  sv->pending = 0;
  answer_all(sv);
  sv->in_round = 0;
  sv->round_end_ns = uv_hrtime();
}

static void on_scrape(void *arg, mt_scrape_t *s) {
  serve_t *sv = arg;
  if (!sv->in_round && sv->round_end_ns &&
      uv_hrtime() - sv->round_end_ns < sv->fresh_ns) {
    answer(sv, s);
    return;
  }
  if (sv->nwaiting == sv->capwaiting) {
    size_t cap = sv->capwaiting ? sv->capwaiting * 2 : 8;
    mt_scrape_t **w = realloc(sv->waiting, cap * sizeof *w);
    if (!w) {
      answer(sv, s); /* what memtop has, at once */
      return;
    }
    sv->waiting = w;
    sv->capwaiting = cap;
  }
  sv->waiting[sv->nwaiting++] = s;
  if (sv->nwaiting == 1)
    uv_timer_start(&sv->bound, bound_cb, MT_SERVE_WAIT_MS, 0);
  round_start(sv);
}

/* ------------------------------------------------------------------------
 * The command
 * ------------------------------------------------------------------------ */

/* SIGINT or SIGTERM: the scrapes waiting are answered, the server
 * stops, and so does memtop (exit 0). */
static void on_signal(void *self, int signum) {
  serve_t *sv = self;
  (void)signum;
  if (sv->stopping)
    return;
  sv->stopping = 1;
  answer_all(sv);
  mt_httpd_stop(sv->http);
  sv->http = NULL;
  /* No round is waited for any more: retiring the targets (the shell
   * frees the set) answers no one. */
  sv->in_round = 0;
  mt_shell_stop(sv->sh);
}

static const mt_tset_cbs_t serve_cbs = {.added = on_added,
                                        .retired = on_retired,
                                        .request = on_request,
                                        .snapshot = on_snapshot,
                                        .failure = on_failure,
                                        .gone = on_gone,
                                        .probed = on_probed};

/* Before the loop runs: the address, the web config, the refusal as root
 * without a password, the server; then the set's options. Returns 0, 2
 * for an address that is no address, or 1. */
static int serve_setup(void *self, mt_shell_t *sh, mt_shell_setup_t *su) {
  serve_t *sv = self;
  const mt_opts_t *o = mt_shell_opts(sh);
  char err[1024], safe[4 * sizeof err + 1];
  sv->sh = sh;
  sv->o = o;
  sv->fresh_ns = (uint64_t)(o->delay_s * 1e9);
  uv_timer_init(mt_shell_loop(sh), &sv->bound);
  sv->bound.data = sv;

  /* An address that is no address is bad usage (exit 2), as the other
   * options' errors are; one that cannot be had is said below. */
  struct sockaddr_storage ss;
  socklen_t sslen;
  if (mt_listen_parse(o->listen ? o->listen : MT_LISTEN_DEFAULT, &ss, &sslen,
                      err, sizeof err) != 0) {
    ms__sanitize(safe, sizeof safe, err, sizeof err, (size_t)-1);
    fprintf(stderr, "memtop: %s\n", safe);
    return 2;
  }

  if (o->web_config &&
      mt_webconfig_load(o->web_config, &sv->web, err, sizeof err) != 0) {
    ms__sanitize(safe, sizeof safe, err, sizeof err, (size_t)-1);
    fprintf(stderr, "memtop: --web-config %s\n", safe);
    return 1;
  }
  /* As root memtop reads every user's processes: served with no password,
   * anyone who can connect (every local user, on loopback) would see
   * them all. */
  if (geteuid() == 0 && sv->web.nusers == 0 && !o->unsafe_no_auth) {
    char where[600];
    ms__sanitize(where, sizeof where, o->listen ? o->listen : MT_LISTEN_DEFAULT,
                 strlen(o->listen ? o->listen : MT_LISTEN_DEFAULT), 120);
    fprintf(stderr,
            "memtop: serve refuses to run as root without a password: it "
            "would show every user's processes (names, PIDs, memory) to "
            "anyone who can connect to %s, every local user included. Give "
            "--web-config FILE with basic_auth_users (bcrypt hashes: "
            "htpasswd -nBC 10 USER), or run it as the user whose processes "
            "it serves, or add --unsafe-no-auth to serve them anyway\n",
            where);
    return 1;
  }
  mt_httpd_hooks_t hooks = {on_scrape, sv};
  int rc = mt_httpd_start(mt_shell_loop(sh), o->listen, &sv->web, &hooks,
                          &sv->http, err, sizeof err);
  if (rc != 0) {
    ms__sanitize(safe, sizeof safe, err, sizeof err, (size_t)-1);
    fprintf(stderr, "memtop: %s\n", safe);
    return 1;
  }
  /* Every attachable process, listed every MT_SERVE_RESCAN_MS (timed for
   * the listing and a new target's first read only: `request` skips the
   * rest), a process that exited dropped at the next listing. */
  su->set.timed = 1;
  su->set.interval_ms = MT_SERVE_RESCAN_MS;
  su->set.backoff_max_ms = MT_SERVE_RESCAN_MS;
  su->set.rescan_min_ms = MT_SERVE_RESCAN_MS;
  su->set.retire_unlisted = 0;
  su->set.keep_gone_ms = 0;
  su->cbs = &serve_cbs;
  su->arg = sv;
  su->set_out = &sv->set;
  su->signals = MT_SIG_INT | MT_SIG_TERM;
  return 0;
}

static int serve_start(void *self) {
  serve_t *sv = self;
  /* The processes there are now, asked at once: the first scrape has
   * them. */
  mt_tset_rescan(sv->set);
  mt_tset_start(sv->set);
  char url[160];
  mt_httpd_url(sv->http, url, sizeof url);
  fprintf(stderr, "memtop: serving %s%s\n", url,
          sv->web.nusers ? " (basic authentication)" : "");
  fflush(stderr);
  return 0;
}

static void serve_close(void *self) {
  serve_t *sv = self;
  mt_httpd_stop(sv->http);
  sv->http = NULL;
  /* The set goes next: its targets retired answer no round. */
  sv->in_round = 0;
  if (!uv_is_closing((uv_handle_t *)&sv->bound))
    uv_close((uv_handle_t *)&sv->bound, NULL);
}

static void serve_free(void *self) {
  serve_t *sv = self;
  free(sv->waiting);
  mt_webconfig_free(&sv->web);
}

static const mt_mode_t serve_mode = {
    .setup = serve_setup,
    .start = serve_start,
    .signal = on_signal,
    .close = serve_close,
    .free = serve_free,
};

int mt_serve_main(const mt_opts_t *o) {
  static serve_t sv; /* one per process, as the signals are */
  memset(&sv, 0, sizeof sv);
  return mt_shell_run(o, &serve_mode, &sv);
}
