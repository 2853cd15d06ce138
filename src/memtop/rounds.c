/*
 * rounds.c - --once, -n N and ps (see rounds.h): every target is asked
 * at once, and when all have answered (or timed out) the round is printed
 * in order, as reports, JSON lines or the ps table.
 */
#include "memtop/rounds.h"

#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "memstats.h"
#include "client/client.h"
#include "emit/emit.h"
#include "memtop/live.h"
#include "memtop/tree.h"
#include "memtop/wake.h"
#include "wire/wire.h"

/* What a round keeps per target (the set target's `user`). */
typedef struct round_target_s {
  int said_gone; /* its end has been said (said once) */
  /* --sites: the heap profile read with this round's snapshot, or why
   * there is none. */
  ms__profile_decoded_t *prof;
  char prof_err[256];
} round_target_t;

static long rounds_wanted(const mt_rounds_t *r) {
  return r->o->iterations > 0 ? r->o->iterations : 1;
}

static uint64_t delay_ms(const mt_rounds_t *r) {
  return (uint64_t)(r->model->delay_s * 1000.0 + 0.5);
}

/* ---- the set's callbacks --------------------------------------------- */

static int round_added(void *arg, mt_tset_target_t *st) {
  mt_rounds_t *r = arg;

  return mt_live_adopt(r->model, st, sizeof(round_target_t));
}

static void round_retired(void *arg, mt_tset_target_t *st) {
  mt_rounds_t *r = arg;
  round_target_t *rt = st->user;

  if (rt != NULL)
    ms__profile_decoded_free(rt->prof);
  mt_live_drop(r->model, st);
}

/* --sites: the profile read with the round's snapshot. */
static void round_profile(void *arg, mt_tset_target_t *st,
                          mt_tset_profile_t *p) {
  round_target_t *rt = st->user;

  (void)arg;
  ms__profile_decoded_free(rt->prof);
  rt->prof = p->prof; /* taken */
  p->prof = NULL;
  snprintf(rt->prof_err, sizeof rt->prof_err, "%s",
           rt->prof != NULL ? "" : p->msg);
}

static void round_snapshot(void *arg, mt_tset_target_t *st,
                           const ms_snapshot_t *snap) {
  mt_rounds_t *r = arg;

  mt_live_record(r->model, r->set, st, snap);
}

static uint64_t round_failure(void *arg, mt_tset_target_t *st, int status,
                              const char *msg) {
  mt_rounds_t *r = arg;
  mt_target_t *t = mt_model_find(r->model, st->pid);

  (void)status;
  r->model->now_mono_ns = mt_tset_now_ns(r->set);
  /* Say "retrying" only where memtop will: a round with others after. */
  snprintf(r->err, sizeof r->err, "%s%s", msg,
           r->rounds + 1 < rounds_wanted(r) ? "; retrying" : "");
  if (t != NULL)
    mt_model_fail(r->model, t, 0, r->err);
  return MT_TSET_BACKOFF;
}

static void round_gone(void *arg, mt_tset_target_t *st, int status,
                       const char *msg) {
  mt_rounds_t *r = arg;

  mt_live_ended(r->model, r->set, st, status, msg);
}

static void round_end(mt_rounds_t *r);

static void round_quiet(void *arg) {
  mt_rounds_t *r = arg;

  if (r->in_round)
    round_end(r);
}

const mt_tset_cbs_t mt_rounds_cbs = {
    .added = round_added,
    .retired = round_retired,
    .profile = round_profile,
    .snapshot = round_snapshot,
    .failure = round_failure,
    .gone = round_gone,
    .quiet = round_quiet,
};

/* ---- printing a round ------------------------------------------------ */

/* The name of st's owner (its real uid, from /proc), its uid when it
 * has none, "?" when it is not known. Returns 1 if it is a name. */
static int owner_name(const mt_tset_target_t *st, char *user, size_t len) {
  const struct passwd *pw = st->have_uid ? getpwuid(st->uid) : NULL;

  if (pw != NULL)
    snprintf(user, len, "%s", pw->pw_name);
  else if (st->have_uid)
    snprintf(user, len, "%u", (unsigned)st->uid);
  else
    snprintf(user, len, "?");
  return pw != NULL;
}

/* -u USER: is st USER's? A process of another user, or one whose owner
 * is not known, is left out as top -u leaves it: not printed, and its
 * failure is not memtop's. */
static int of_user(const mt_rounds_t *r, const mt_tset_target_t *st) {
  return r->o->uid < 0 || (st->have_uid && st->uid == (uid_t)r->o->uid);
}

/* How many targets of the round -u lets through. */
static size_t count_of_user(const mt_rounds_t *r) {
  size_t i, n = 0;

  for (i = 0; i < mt_tset_count(r->set); i++)
    n += of_user(r, mt_tset_at(r->set, i));
  return n;
}

static void emit_ps(mt_rounds_t *r) {
  char user[32];
  const mt_target_t *t;
  const mt_tset_target_t *st;
  size_t i;

  mt_emit_ps_header(&r->out->buf);
  for (i = 0; i < mt_tset_count(r->set); i++) {
    st = mt_tset_at(r->set, i);
    t = mt_model_find(r->model, st->pid);
    if (st->gone || t == NULL || !of_user(r, st))
      continue;
    owner_name(st, user, sizeof user);
    /* The name, the user and the providers are a stranger's: the emitter
     * makes them safe and keeps them in their columns. */
    mt_emit_ps_line(&r->out->buf, st->pid, user,
                    t->comm[0] ? t->comm : st->comm, st->id.container,
                    st->ok && t->have_snapshot ? &t->snap : NULL);
  }
}

/* Prints the round's snapshots (or the ps table) and says the targets
 * that could not be read. Returns how many targets are not gone. */
static size_t print_round(mt_rounds_t *r) {
  const mt_target_t *t;
  mt_tset_target_t *st;
  round_target_t *rt;
  size_t i, left = 0, n = mt_tset_count(r->set);
  int ps = r->o->cmd == MT_CMD_PS;
  /* --tree: in tree order, each after its parent. */
  mt_tset_target_t **order = r->o->tree ? calloc(n + 1, sizeof *order) : NULL;

  if (order != NULL) {
    for (i = 0; i < n; i++)
      order[i] = mt_tset_at(r->set, i);
    mt_tree_order(order, n, NULL);
  }
  if (ps)
    emit_ps(r);
  for (i = 0; i < n; i++) {
    st = order != NULL ? order[i] : mt_tset_at(r->set, i);
    rt = st->user;
    left += !st->gone;
    if (!of_user(r, st))
      continue;
    t = mt_model_find(r->model, st->pid);
    if (st->ok && t != NULL && t->have_snapshot) {
      if (!ps) {
        char user[32];
        /* The owner's name is the JSON line's ("user"); the text report
         * has none, and getpwuid reads /etc/nsswitch.conf and
         * /etc/passwd (or asks nscd, sssd, LDAP) for nothing. */
        int named = r->out->json && owner_name(st, user, sizeof user);
        mt_out_snapshot_who(r->out, &t->snap, &st->id, named ? user : NULL,
                            rt->prof, rt->prof_err[0] ? rt->prof_err : NULL);
      }
      ms__profile_decoded_free(rt->prof);
      rt->prof = NULL;
      continue;
    }
    /* A process found by listing that exited before it answered is not
     * a failure: it is simply not there any more. */
    if (st->gone && (r->o->npids == 0 || r->o->tree))
      continue;
    /* A process that exited is said once, not every round after. */
    if (st->gone && rt->said_gone)
      continue;
    rt->said_gone = st->gone;
    mt_out_flush(r->out); /* keep stdout and stderr in order on a terminal */
    mt_warn("%s", t != NULL && t->error[0] ? t->error : "no answer");
    if (!ps)
      r->exit_code = 1;
  }
  free(order);
  mt_out_flush(r->out);
  return left;
}

static void next_cb(uv_timer_t *t) {
  mt_rounds_start(t->data);
}

/* Every target of the round has answered or failed: prints the round,
 * then starts the next one at the next -d or says it is done. */
static void round_end(mt_rounds_t *r) {
  uint64_t elapsed_ms, next_ms;
  size_t left;

  r->in_round = 0;
  left = print_round(r);
  /* Said once the listing's candidates have answered (or been found not
   * to be agents). A socket directory the listing skipped as unsafe is
   * said first, ps included (whose status stays 0, as for an empty
   * list): its processes are there but not listed. */
  char why[MSC_PATH_MAX + 512];
  if ((r->o->npids == 0 || r->o->tree) && r->rounds == 0 &&
      msc_sockdir_refusal(why, sizeof why)) {
    mt_warn("%s (memtop lists no process from it)", why);
    if (r->o->cmd != MT_CMD_PS)
      r->exit_code = 1;
  } else if (r->o->npids == 0 && mt_tset_count(r->set) == 0 &&
             r->o->cmd != MT_CMD_PS && r->rounds == 0) {
    mt_warn("no attachable processes in %s (start a program with "
            "`memtop run -- CMD`, or link it with -lmemstats)",
            r->sockdir);
    r->exit_code = 1;
  } else if (r->o->uid >= 0 && count_of_user(r) == 0 &&
             r->o->cmd != MT_CMD_PS && r->rounds == 0) {
    const struct passwd *pw = getpwuid((uid_t)r->o->uid);
    mt_warn("none of the %zu attachable processes in %s is %s's (uid %d, "
            "-u)",
            mt_tset_count(r->set), r->sockdir, pw != NULL ? pw->pw_name : "?",
            r->o->uid);
    r->exit_code = 1;
  }
  if (r->o->tree && mt_tset_count(r->set) == 0 && r->rounds == 0) {
    mt_warn("neither PID %d nor a process below it runs libmemstats (in "
            "%s): `memtop ps` lists the processes memtop can attach to",
            r->o->pids[0], r->sockdir);
    r->exit_code = 1;
  }
  r->rounds++;
  /* Named processes that have all exited leave nothing to report: more
   * rounds would only print nothing, -d apart. */
  if (r->out->broken || (r->o->npids > 0 && left == 0) ||
      r->rounds >= rounds_wanted(r)) {
    r->done(r->arg);
    return;
  }
  elapsed_ms = (mt_tset_now_ns(r->set) - r->round_start_ns) / 1000000u;
  next_ms = elapsed_ms >= delay_ms(r) ? 0 : delay_ms(r) - elapsed_ms;
  uv_timer_start(&r->next, next_cb, next_ms, 0);
}

/* ---- starting a round ------------------------------------------------ */

/* Lists the targets again (no PID named). Returns 0, or
 * mt_tset_rescan()'s MS_E* code when the listing failed (said, and the
 * rounds are done). */
static int relist(mt_rounds_t *r) {
  int rc = mt_tset_rescan(r->set);

  if (rc != 0) {
    mt_warn("cannot list attachable processes in %s: %s (check "
            "MEMSTATS_DIR)",
            r->sockdir, ms_strerror(rc));
    r->exit_code = 1;
    r->done(r->arg);
    return rc;
  }
  return 0;
}

void mt_rounds_start(mt_rounds_t *r) {
  mt_tset_req_t req = {0};
  size_t i;

  r->round_start_ns = mt_tset_now_ns(r->set);
  /* --tree: the idle processes of the tree are woken before the listing
   * that then finds them. */
  if (r->wake != NULL)
    mt_wake_pass(r->wake, r->set);
  if ((r->o->npids == 0 || r->o->tree) && relist(r) != 0)
    return;
  r->in_round = 1;
  if (r->o->cmd != MT_CMD_PS) {
    req.wire_flags = MS__REQ_SMAPS;
    /* --sites: each target's heap profile comes with its snapshot, on
     * the same connection (a profile not read says why in its place). */
    if (r->out->sites > 0)
      req.profile = 1;
  }
  for (i = 0; i < mt_tset_count(r->set); i++) {
    round_target_t *rt = mt_tset_at(r->set, i)->user;
    snprintf(rt->prof_err, sizeof rt->prof_err,
             "the heap profile was "
             "not read");
  }
  if (mt_tset_fetch_all(r->set, &req) == 0)
    round_end(r);
}

void mt_rounds_init(mt_rounds_t *r, uv_loop_t *loop) {
  uv_timer_init(loop, &r->next);
  r->next.data = r;
}

void mt_rounds_close(mt_rounds_t *r) {
  if (!uv_is_closing((uv_handle_t *)&r->next))
    uv_close((uv_handle_t *)&r->next, NULL);
  mt_wake_free(r->wake);
  r->wake = NULL;
}

/* ---- the mode -------------------------------------------------------- */

/* --tree: a process of the tree that could not be woken, said once. */
static void wake_say(void *arg, int pid, const char *words) {
  (void)arg;
  mt_warn("PID %d of the tree has no agent and was not woken: %s", pid, words);
}

static void rounds_done(void *arg) {
  mt_shell_quit(arg);
}

static int rounds_setup(void *self, mt_shell_t *sh, mt_shell_setup_t *su) {
  mt_rounds_t *r = self;

  mt_rounds_init(r, mt_shell_loop(sh));
  if (r->done == NULL) {
    r->done = rounds_done;
    r->arg = sh;
  }
  if (r->sockdir == NULL)
    r->sockdir = mt_shell_sockdir(sh);
  /* Each round lists the processes there are now and asks them all. */
  su->set.retire_unlisted = 1;
  /* --tree: the PID named and its descendants, listed each round. */
  if (r->o->tree) {
    su->set.tree_root = r->o->pids[0];
    r->wake = mt_wake_new(r->o->pids[0], wake_say, r);
  }
  su->cbs = &mt_rounds_cbs;
  su->arg = r;
  su->set_out = &r->set;
  su->signals = MT_SIG_PLAIN;
  return 0;
}

static int rounds_start(void *self) {
  mt_rounds_start(self);
  return 0;
}

static int rounds_status(void *self) {
  const mt_rounds_t *r = self;

  return r->out->failed ? 1 : r->exit_code;
}

static void rounds_close(void *self) {
  mt_rounds_close(self);
}

const mt_mode_t mt_rounds_mode = {
    .setup = rounds_setup,
    .start = rounds_start,
    .status = rounds_status,
    .close = rounds_close,
};
