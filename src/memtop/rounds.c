/*
 * rounds.c - --once, -n N and ps (see loop_int.h): every target is asked
 * at once, and when all have answered (or timed out) the round is printed
 * in order, as reports, JSON lines or the ps table.
 */
#include <errno.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <uv.h>

#include "memstats.h"
#include "common/sanitize.h"
#include "common/strbuf.h"
#include "emit/emit.h"
#include "memtop/conn.h"
#include "memtop/loop_int.h"
#include "memtop/model.h"
#include "memtop/sites.h"
#include "wire/wire.h"

/* ---- plain output ---------------------------------------------------- */

void mt_warn(const char *fmt, ...) {
  char raw[2048], safe[4 * sizeof raw + 1];
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(raw, sizeof raw, fmt, ap);
  va_end(ap);
  /* A message cut short may end inside a UTF-8 sequence: the sanitiser
   * shows those bytes as escapes. */
  ms__sanitize(safe, sizeof safe, raw, sizeof raw, (size_t)-1);
  fprintf(stderr, "memtop: %s\n", safe);
}

void mt_flush_out(mt_app_t *app) {
  if (app->out.oom) {
    fprintf(stderr, "memtop: out of memory while formatting the report\n");
    app->exit_code = 1;
  } else if (app->out.len > 0 && !app->stdout_broken) {
    if (fwrite(app->out.data, 1, app->out.len, stdout) != app->out.len ||
        fflush(stdout) != 0) {
      /* A reader that went away (`memtop --once -n 100 | head`) is not
       * an error worth a message; anything else is. */
      if (errno == EBADF) {
        fprintf(stderr, "memtop: writing the report failed: standard "
                        "output is closed (give it a file, or >/dev/null "
                        "to discard the report)\n");
        app->exit_code = 1;
      } else if (errno != EPIPE) {
        fprintf(stderr, "memtop: writing the report failed: %s\n",
                strerror(errno));
        app->exit_code = 1;
      }
      app->stdout_broken = 1;
    }
  }
  ms__strbuf_reset(&app->out);
}

void mt_emit_snapshot(mt_app_t *app, const ms_snapshot_t *s) {
  /* --sites N: the profile is read after the snapshot, blocking, as
   * --once is a batch mode (the live view's panel has its own cadence). */
  size_t sites = app->o->sites > 0 ? (size_t)app->o->sites : 0;

  if (app->o->json) {
    ms__emit_json(&app->out, s);
    if (sites > 0)
      mt_sites_append(&app->out, s->pid, sites, 1, app->timeout_ms);
    ms__strbuf_puts(&app->out, "\n");
    return;
  }
  /* Reports are paragraphs: a blank line between processes and rounds. */
  if (app->nemitted++ > 0)
    ms__strbuf_puts(&app->out, "\n");
  ms__emit_report(&app->out, s);
  if (sites > 0)
    mt_sites_append(&app->out, s->pid, sites, 0, app->timeout_ms);
}

static void emit_ps(mt_app_t *app) {
  char user[32];
  const struct passwd *pw;
  const mt_target_t *t;
  const mt_watch_t *w;
  size_t i;

  ms__emit_ps_header(&app->out);
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
    /* The name, the user and the providers are a stranger's: the emitter
     * makes them safe and keeps them in their columns. */
    ms__emit_ps_line(&app->out, w->pid, user, t->comm[0] ? t->comm : w->comm,
                     w->ok && t->have_snapshot ? &t->snap : NULL);
  }
}

/* ---- rounds ---------------------------------------------------------- */

static void round_timer_cb(uv_timer_t *t) {
  mt_round_start(t->data);
}

void mt_round_end(mt_app_t *app) {
  uint64_t elapsed_ms, next_ms;
  const mt_target_t *t;
  mt_watch_t *w;
  size_t i, left = 0;

  if (app->ps)
    emit_ps(app);
  for (i = 0; i < app->nw; i++) {
    w = app->w[i];
    t = mt_model_find(&app->model, w->pid);
    if (w->ok && t != NULL && t->have_snapshot) {
      if (!app->ps)
        mt_emit_snapshot(app, &t->snap);
      continue;
    }
    /* A process found by listing that exited before it answered is not
     * a failure: it is simply not there any more. */
    if (w->gone && app->o->npids == 0)
      continue;
    /* A process that exited is said once, not every round after. */
    if (w->gone && w->said_gone)
      continue;
    w->said_gone = w->gone;
    mt_flush_out(app); /* keep stdout and stderr in order on a terminal */
    mt_warn("%s", w->err[0] ? w->err : "no answer");
    if (!app->ps)
      app->exit_code = 1;
  }
  for (i = 0; i < app->nw; i++)
    left += !app->w[i]->gone;
  mt_flush_out(app);
  app->rounds++;
  /* Named processes that have all exited leave nothing to report: more
   * rounds would only print nothing, -d apart. */
  if (app->stdout_broken || (app->o->npids > 0 && left == 0) ||
      app->rounds >= mt_rounds_wanted(app)) {
    mt_app_quit(app);
    return;
  }
  elapsed_ms = (uv_hrtime() - app->round_start_ns) / 1000000u;
  next_ms = elapsed_ms >= mt_delay_ms(app) ? 0 : mt_delay_ms(app) - elapsed_ms;
  uv_timer_start(&app->tick, round_timer_cb, next_ms, 0);
}

void mt_round_start(mt_app_t *app) {
  size_t i;
  int rc;

  app->round_start_ns = uv_hrtime();
  if (app->o->npids == 0) {
    rc = mt_rescan(app);
    if (rc != 0) {
      mt_warn("cannot list attachable processes in %s: %s (check "
              "MEMSTATS_DIR)",
              app->sockdir, ms_strerror(rc));
      app->exit_code = 1;
      mt_app_quit(app);
      return;
    }
    if (app->nw == 0 && !app->ps && app->rounds == 0) {
      mt_warn("no attachable processes in %s (start a program with "
              "`memtop run -- CMD`, or link it with -lmemstats)",
              app->sockdir);
      app->exit_code = 1;
    }
  }
  app->pending = 0;
  for (i = 0; i < app->nw; i++) {
    app->w[i]->ok = 0;
    app->w[i]->pending = !app->w[i]->gone;
    app->pending += app->w[i]->pending;
  }
  if (app->pending == 0) {
    mt_round_end(app);
    return;
  }
  /* Every request goes out at once: a hung target costs one timeout for
   * the whole round, not one per target. */
  for (i = 0; i < app->nw; i++)
    if (app->w[i]->pending)
      mt_conn_fetch_flags(app->w[i]->conn, app->timeout_ms,
                          app->ps ? 0 : MS__REQ_SMAPS);
}
