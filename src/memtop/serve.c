/*
 * serve.c - `memtop serve` (see serve.h): the targets, the rounds that
 * read them, and the scrapes that wait for a round.
 *
 * memtop lists the attachable processes every MT_SERVE_RESCAN_MS (new
 * ones join and are read at once, vanished ones leave). A scrape asks
 * every target at once for a snapshot, on memtop's libuv loop, and no
 * process that has exited since is served (each is checked against
 * /proc when the answer is written). The scrape is answered when every target
 * has answered or failed, or after MT_SERVE_WAIT_MS, whichever comes first: a
 * target that hangs (stopped, deadlocked, hostile) costs a scrape that bound
 * and no more, and its last snapshot is served with its age (its request goes
 * on in the background, bounded by MEMTOP_TIMEOUT_MS). Scrapes closer together
 * than -d share one round's figures.
 *
 * This file is the whole of serve's target set; it uses the same
 * connections (conn.h) and discovery (client.h) as the live view.
 */
#include "memtop/serve.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "memstats.h"
#include "client/client.h"
#include "common/sanitize.h"
#include "emit/emit.h"
#include "memtop/conn.h"
#include "memtop/httpd.h"
#include "memtop/loop.h"
#include "memtop/negotiate.h"
#include "memtop/webconfig.h"

typedef struct serve_s serve_t;

typedef struct sv_target_s {
  serve_t *sv;
  int pid;
  uint64_t start_time;
  mt_conn_t *conn;
  ms_snapshot_t *snap; /* the latest answer; NULL until the first */
  uint64_t got_ns;     /* uv_hrtime() when it came */
  uint64_t errors;     /* failed reads */
  int pending;         /* the current round waits for its answer */
  uint64_t asked_ns;   /* uv_hrtime() of the request in flight */
  int gone;            /* the process exited: served no more */
  int seen;            /* found by the last discovery */
  char exe[MS__PROM_EXE_MAX + 1];
} sv_target_t;

struct serve_s {
  uv_loop_t loop;
  const mt_opts_t *o;
  mt_webconfig_t web;
  mt_httpd_t *http;
  sv_target_t **t;
  size_t n, cap;
  int timeout_ms;
  uint64_t fresh_ns; /* -d: figures this young are served as they are */
  int in_round;
  size_t pending;
  uint64_t round_end_ns;
  mt_scrape_t **waiting; /* scrapes waiting for the round */
  size_t nwaiting, capwaiting;
  uv_timer_t bound;
  uv_timer_t rescan; /* discovery, every MT_SERVE_RESCAN_MS */
  uv_signal_t sig[2];
  int stopping;
};

static void answer_all(serve_t *sv);

/* ------------------------------------------------------------------------
 * Targets
 * ------------------------------------------------------------------------ */

static void target_free(sv_target_t *t) {
  if (t->conn)
    mt_conn_close(t->conn);
  free(t->snap);
  free(t);
}

/* Whether t is still the process it was: alive, and not a new process
 * that has its PID (start time compared). */
static int target_alive(const sv_target_t *t) {
  uint64_t st = 0;
  if (msc_proc_start_time(t->pid, &st) != 0)
    return 0;
  return t->start_time == 0 || st == t->start_time;
}

static void round_check_end(serve_t *sv);
static void rescan(serve_t *sv);

static void on_result(mt_conn_t *c, int status, const ms_snapshot_t *snap,
                      const char *msg, void *arg) {
  sv_target_t *t = arg;
  serve_t *sv = t->sv;
  (void)c;
  (void)msg;
  if (status == 0 && snap) {
    if (!t->snap)
      t->snap = malloc(sizeof *t->snap);
    if (t->snap) {
      memcpy(t->snap, snap, sizeof *t->snap);
      t->got_ns = uv_hrtime();
    }
  } else {
    t->errors++;
    /* Gone or replaced: served no more from now on. */
    if (status == MS_ESRCH || status == MS_ESTALE || !target_alive(t))
      t->gone = 1;
  }
  if (t->pending) {
    t->pending = 0;
    sv->pending--;
    round_check_end(sv);
  }
}

/* Asks t for a snapshot; 0 if the request is on its way. */
static int target_ask(serve_t *sv, sv_target_t *t) {
  if (mt_conn_fetch_flags(t->conn, sv->timeout_ms, 0) != 0)
    return -1;
  t->asked_ns = uv_hrtime();
  return 0;
}

static sv_target_t *target_add(serve_t *sv, const msc_target_t *m) {
  if (sv->n == sv->cap) {
    size_t cap = sv->cap ? sv->cap * 2 : 16;
    sv_target_t **t = realloc(sv->t, cap * sizeof *t);
    if (!t)
      return NULL;
    sv->t = t;
    sv->cap = cap;
  }
  sv_target_t *t = calloc(1, sizeof *t);
  if (!t)
    return NULL;
  t->sv = sv;
  t->pid = m->pid;
  t->start_time = m->start_time;
  t->conn = mt_conn_new(&sv->loop, m->pid, m->start_time, on_result, t);
  if (!t->conn) {
    free(t);
    return NULL;
  }
  /* The program's path, where /proc lets us read it (another user's
   * process, as a user, does not): a label, so made safe when written. */
  char link[64];
  snprintf(link, sizeof link, "/proc/%d/exe", m->pid);
  ssize_t n = readlink(link, t->exe, sizeof t->exe - 1);
  t->exe[n > 0 ? (size_t)n : 0] = '\0';
  sv->t[sv->n++] = t;
  return t;
}

static void target_remove_at(serve_t *sv, size_t i) {
  sv_target_t *t = sv->t[i];
  if (t->pending) {
    t->pending = 0;
    sv->pending--;
  }
  target_free(t);
  sv->t[i] = sv->t[--sv->n];
}

static sv_target_t *target_find(serve_t *sv, int pid) {
  for (size_t i = 0; i < sv->n; i++)
    if (sv->t[i]->pid == pid)
      return sv->t[i];
  return NULL;
}

/* Lists the attachable processes: new ones join, those that vanished or
 * whose PID a new process took leave. */
static void rescan(serve_t *sv) {
  msc_target_t *found = NULL;
  size_t n = 0;
  if (msc_discover(&found, &n) != 0)
    return; /* no directory yet: nothing to serve, nothing to drop */
  for (size_t i = 0; i < sv->n; i++)
    sv->t[i]->seen = 0;
  for (size_t i = 0; i < n; i++) {
    sv_target_t *t = target_find(sv, found[i].pid);
    if (t && found[i].start_time && t->start_time &&
        t->start_time != found[i].start_time) {
      for (size_t j = 0; j < sv->n; j++)
        if (sv->t[j] == t) {
          target_remove_at(sv, j);
          break;
        }
      t = NULL;
    }
    if (!t)
      t = target_add(sv, &found[i]);
    if (t)
      t->seen = 1;
  }
  free(found);
  for (size_t i = sv->n; i-- > 0;)
    if (!sv->t[i]->seen || sv->t[i]->gone)
      target_remove_at(sv, i);
  /* A target removed while the round waited for it no longer holds the
   * round open. */
  round_check_end(sv);
}

/* ------------------------------------------------------------------------
 * Rounds
 * ------------------------------------------------------------------------ */

static void round_check_end(serve_t *sv) {
  if (!sv->in_round || sv->pending > 0)
    return;
  sv->in_round = 0;
  sv->round_end_ns = uv_hrtime();
  answer_all(sv);
}

static void round_start(serve_t *sv) {
  if (sv->in_round)
    return;
  sv->in_round = 1;
  uint64_t now = uv_hrtime();
  for (size_t i = 0; i < sv->n; i++) {
    sv_target_t *t = sv->t[i];
    /* A target still busy with an earlier request is not asked again:
     * the round waits for that answer if it was asked lately (just
     * found), not if it has been waiting longer than a scrape may (it
     * hangs: its last figures are served, with their age). */
    if (mt_conn_busy(t->conn)) {
      if (now - t->asked_ns >= (uint64_t)MT_SERVE_WAIT_MS * 1000000u)
        continue;
    } else if (target_ask(sv, t) != 0) {
      continue;
    }
    t->pending = 1;
    sv->pending++;
  }
  round_check_end(sv);
}

/* ------------------------------------------------------------------------
 * Scrapes
 * ------------------------------------------------------------------------ */

static void answer(serve_t *sv, mt_scrape_t *s) {
  uint64_t now = uv_hrtime();
  ms__prom_target_t *pt = calloc(sv->n ? sv->n : 1, sizeof *pt);
  ms__strbuf_t body = MS_STRBUF_INIT;
  size_t n = 0;
  if (pt) {
    for (size_t i = 0; i < sv->n; i++) {
      sv_target_t *t = sv->t[i];
      /* A process that exited since the round is served no more. */
      if (t->gone || !target_alive(t)) {
        t->gone = 1;
        continue;
      }
      pt[n].pid = t->pid;
      pt[n].snap = t->snap;
      pt[n].exe = t->exe[0] ? t->exe : NULL;
      pt[n].scrape_errors = t->errors;
      if (t->snap)
        pt[n].age_ns = t->snap->age_ns + (now - t->got_ns);
      n++;
    }
    ms__emit_prometheus(&body, mt_scrape_openmetrics(s), pt, n,
                        MS_VERSION_STRING);
    free(pt);
  } else {
    body.oom = 1;
  }
  mt_scrape_answer(s, &body);
  ms__strbuf_free(&body);
}

static void answer_all(serve_t *sv) {
  uv_timer_stop(&sv->bound);
  /* Answering may not add scrapes (the server calls the hook from its
   * own run only), so the list is stable here. */
  for (size_t i = 0; i < sv->nwaiting; i++)
    answer(sv, sv->waiting[i]);
  sv->nwaiting = 0;
}

static void bound_cb(uv_timer_t *timer) {
  answer_all(timer->data);
}

/* Discovery runs on its own timer, off the scrapes' path (listing the
 * directories and /proc costs about 16 ms for 200 processes): a process
 * joins within MT_SERVE_RESCAN_MS, read at once so that the next scrape
 * has its figures. One that exits leaves sooner: every answer checks
 * that each process is still the one it was. */
static void rescan_cb(uv_timer_t *timer) {
  serve_t *sv = timer->data;
  rescan(sv);
  /* The new ones (and those never read yet) are read now. */
  for (size_t i = 0; i < sv->n; i++) {
    sv_target_t *t = sv->t[i];
    if (!t->snap && !mt_conn_busy(t->conn))
      target_ask(sv, t);
  }
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

static void on_signal(uv_signal_t *h, int signum) {
  serve_t *sv = h->data;
  (void)signum;
  if (sv->stopping)
    return;
  sv->stopping = 1;
  answer_all(sv);
  mt_httpd_stop(sv->http);
  sv->http = NULL;
  for (size_t i = 0; i < sv->n; i++)
    target_free(sv->t[i]);
  sv->n = 0;
  uv_close((uv_handle_t *)&sv->bound, NULL);
  uv_close((uv_handle_t *)&sv->rescan, NULL);
  uv_close((uv_handle_t *)&sv->sig[0], NULL);
  uv_close((uv_handle_t *)&sv->sig[1], NULL);
}

static int timeout_ms(void) {
  const char *s = getenv("MEMTOP_TIMEOUT_MS");
  long v;
  if (s && *s && mt_parse_long(s, 1, 600000, &v) == 0)
    return (int)v;
  return MT_TIMEOUT_MS_DEFAULT;
}

int mt_serve_main(const mt_opts_t *o) {
  static serve_t sv; /* one per process, as the signals are */
  char err[1024], safe[4 * sizeof err + 1];
  memset(&sv, 0, sizeof sv);
  sv.o = o;
  sv.timeout_ms = timeout_ms();
  sv.fresh_ns = (uint64_t)(o->delay_s * 1e9);
  signal(SIGPIPE, SIG_IGN);

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
      mt_webconfig_load(o->web_config, &sv.web, err, sizeof err) != 0) {
    ms__sanitize(safe, sizeof safe, err, sizeof err, (size_t)-1);
    fprintf(stderr, "memtop: --web-config %s\n", safe);
    return 1;
  }
  if (uv_loop_init(&sv.loop) != 0) {
    fprintf(stderr, "memtop: cannot start the event loop\n");
    mt_webconfig_free(&sv.web);
    return 1;
  }
  mt_httpd_hooks_t hooks = {on_scrape, &sv};
  int rc = mt_httpd_start(&sv.loop, o->listen, &sv.web, &hooks, &sv.http, err,
                          sizeof err);
  if (rc != 0) {
    ms__sanitize(safe, sizeof safe, err, sizeof err, (size_t)-1);
    fprintf(stderr, "memtop: %s\n", safe);
    uv_loop_close(&sv.loop);
    mt_webconfig_free(&sv.web);
    return 1;
  }
  uv_timer_init(&sv.loop, &sv.bound);
  sv.bound.data = &sv;
  uv_timer_init(&sv.loop, &sv.rescan);
  sv.rescan.data = &sv;
  /* The processes there are now, asked at once: the first scrape has
   * them. */
  rescan_cb(&sv.rescan);
  uv_timer_start(&sv.rescan, rescan_cb, MT_SERVE_RESCAN_MS, MT_SERVE_RESCAN_MS);
  static const int signums[2] = {SIGINT, SIGTERM};
  for (int i = 0; i < 2; i++) {
    uv_signal_init(&sv.loop, &sv.sig[i]);
    sv.sig[i].data = &sv;
    uv_signal_start(&sv.sig[i], on_signal, signums[i]);
  }
  char url[160];
  mt_httpd_url(sv.http, url, sizeof url);
  fprintf(stderr, "memtop: serving %s%s\n", url,
          sv.web.nusers ? " (basic authentication)" : "");
  fflush(stderr);

  uv_run(&sv.loop, UV_RUN_DEFAULT);
  uv_loop_close(&sv.loop);
  free(sv.t);
  free(sv.waiting);
  mt_webconfig_free(&sv.web);
  return 0;
}
