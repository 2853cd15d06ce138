/*
 * test_targetset.c - the target set (src/targets/targetset.h) driven
 * through fake I/O: connections whose replies the test sends, timers on a
 * clock the test moves, a listing the test writes, and processes the test
 * declares dead. Checked: a snapshot reaches the owner once; failures
 * back off, doubling up to the cap, and recover; an exited process is
 * said gone once and read no more; discovery adds and retires targets
 * (and replaces a reused PID); rounds ask everyone at once and end on
 * `quiet`; and the rounds of --once -n N over the set (rounds.c) count.
 * And one check of the real io (targetset_uv.c): the stale socket check,
 * which reads the process's /proc/PID/maps, runs off the loop.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include <cmocka.h>

#include "memtop/live.h"
#include "tui/model.h"
#include "memtop/out.h"
#include "memtop/rounds.h"
#include "targets/conn.h"
#include "targets/targetset.h"

/* ---- fake clock and timers -------------------------------------------- */

#define MAX_FAKES 64

typedef struct fake_timer_s {
  int used, active, closed;
  uint64_t due_ms;
  mt_tset_timer_fn fn;
  void *target;
} fake_timer_t;

typedef struct fake_conn_s {
  int used, closed;
  int pid;
  mt_tset_reply_fn fn;
  void *target;
  int busy;
  int fetches;
  mt_tset_req_t req; /* what the last fetch asked for */
} fake_conn_t;

static uint64_t now_ms;
static fake_timer_t timers[MAX_FAKES];
static fake_conn_t conns[MAX_FAKES];
static msc_target_t listing[MAX_FAKES];
static size_t nlisting;
static int dead[MAX_FAKES]; /* PIDs whose process is gone */
static size_t ndead;

/* A real clock moves between two reads of it: each read is step_ns
 * later than the one before (0: time stands still between advances). */
static uint64_t step_ns, stepped_ns;

static uint64_t f_now_ns(void *ctx) {
  (void)ctx;
  stepped_ns += step_ns;
  return now_ms * 1000000u + stepped_ns;
}

static void *f_timer_new(void *ctx, mt_tset_timer_fn fn, void *target) {
  (void)ctx;
  for (size_t i = 0; i < MAX_FAKES; i++) {
    if (!timers[i].used) {
      timers[i] = (fake_timer_t){.used = 1, .fn = fn, .target = target};
      return &timers[i];
    }
  }
  return NULL;
}

static void f_timer_start(void *timer, uint64_t ms) {
  fake_timer_t *t = timer;

  assert_false(t->closed);
  t->active = 1;
  t->due_ms = now_ms + ms;
}

static void f_timer_stop(void *timer) {
  ((fake_timer_t *)timer)->active = 0;
}

static void f_timer_close(void *timer) {
  fake_timer_t *t = timer;

  t->active = 0;
  t->closed = 1;
}

/* Moves the clock forward by ms, firing every timer due on the way, in
 * order of their due times. */
static void advance(uint64_t ms) {
  uint64_t end = now_ms + ms;

  for (;;) {
    fake_timer_t *next = NULL;
    for (size_t i = 0; i < MAX_FAKES; i++)
      if (timers[i].active && timers[i].due_ms <= end &&
          (next == NULL || timers[i].due_ms < next->due_ms))
        next = &timers[i];
    if (next == NULL)
      break;
    now_ms = next->due_ms;
    next->active = 0;
    next->fn(next->target);
  }
  now_ms = end;
}

/* ---- fake connections, listing, /proc --------------------------------- */

static void *f_conn_new(void *ctx, int pid, uint64_t start_time,
                        mt_tset_reply_fn fn, void *target) {
  (void)ctx;
  (void)start_time;
  for (size_t i = 0; i < MAX_FAKES; i++) {
    if (!conns[i].used) {
      conns[i] =
          (fake_conn_t){.used = 1, .pid = pid, .fn = fn, .target = target};
      return &conns[i];
    }
  }
  return NULL;
}

static int f_conn_fetch(void *conn, int timeout_ms, const mt_tset_req_t *req) {
  fake_conn_t *c = conn;

  (void)timeout_ms;
  assert_false(c->closed);
  if (c->busy)
    return MS_EAGAIN;
  c->busy = 1;
  c->fetches++;
  c->req = *req;
  return 0;
}

static int f_conn_busy(const void *conn) {
  return ((const fake_conn_t *)conn)->busy;
}

static void f_conn_close(void *conn) {
  fake_conn_t *c = conn;

  c->closed = 1;
  c->busy = 0;
}

static fake_conn_t *conn_of(int pid) {
  for (size_t i = MAX_FAKES; i-- > 0;)
    if (conns[i].used && !conns[i].closed && conns[i].pid == pid)
      return &conns[i];
  return NULL;
}

static ms_snapshot_t snap;

/* The target pid answers its read in flight. */
static void reply_ok(int pid) {
  fake_conn_t *c = conn_of(pid);

  assert_non_null(c);
  assert_true(c->busy);
  c->busy = 0;
  snap.pid = pid;
  snap.start_time = 1000 + (uint64_t)pid;
  c->fn(c->target, 0, &snap, NULL, NULL);
}

/* The target pid answers a profile read: the snapshot, and the profile
 * (err 0) or the agent's refusal of it. Returns whether the owner took
 * the profile. */
static int reply_profile(int pid, int err) {
  fake_conn_t *c = conn_of(pid);
  mt_tset_profile_t p;
  int taken;

  assert_non_null(c);
  assert_true(c->busy);
  assert_true(c->req.profile);
  c->busy = 0;
  snap.pid = pid;
  snap.start_time = 1000 + (uint64_t)pid;
  memset(&p, 0, sizeof p);
  if (err == 0) {
    p.prof = ms__profile_decoded_new();
    assert_non_null(p.prof);
  } else {
    p.err = err;
    snprintf(p.msg, sizeof p.msg, "PID %d: profiling is off", pid);
  }
  c->fn(c->target, 0, &snap, &p, NULL);
  taken = err == 0 && p.prof == NULL;
  ms__profile_decoded_free(p.prof);
  return taken;
}

static void reply_fail(int pid, int status) {
  fake_conn_t *c = conn_of(pid);

  assert_non_null(c);
  assert_true(c->busy);
  c->busy = 0;
  c->fn(c->target, status, NULL, NULL, "PID n: no answer");
}

static int fetches(int pid) {
  fake_conn_t *c = conn_of(pid);

  return c != NULL ? c->fetches : -1;
}

static int f_discover(void *ctx, msc_target_t **out, size_t *n) {
  (void)ctx;
  *out = malloc((nlisting ? nlisting : 1) * sizeof **out);
  if (*out == NULL)
    return MS_ENOMEM;
  memcpy(*out, listing, nlisting * sizeof **out);
  *n = nlisting;
  return 0;
}

/* The listed sockets the set said refused connections. */
static int stale_calls, stale_pid;

static void f_stale(void *ctx, const msc_target_t *t) {
  (void)ctx;
  stale_calls++;
  stale_pid = t->pid;
}

static int f_proc_gone(void *ctx, int pid, uint64_t start_time) {
  (void)ctx;
  (void)start_time;
  for (size_t i = 0; i < ndead; i++)
    if (dead[i] == pid)
      return 1;
  return 0;
}

static void list(size_t n, const int *pids) {
  nlisting = n;
  for (size_t i = 0; i < n; i++) {
    memset(&listing[i], 0, sizeof listing[i]);
    listing[i].pid = pids[i];
    listing[i].start_time = 1000 + (uint64_t)pids[i];
    snprintf(listing[i].comm, sizeof listing[i].comm, "p%d", pids[i]);
  }
}

/* ---- the owner: counts what it is told -------------------------------- */

typedef struct owner_s {
  int added, retired, snapshots, failures, gone, quiet, probed;
  int last_status, last_pid;
  uint64_t failure_answer;   /* what failure() returns */
  int skip;                  /* request(): skip reads (paused) */
  uint64_t flags;            /* request(): wire flags to ask */
  int profiles;              /* reads that brought a profile (taken) */
  int prof_err;              /* ... or the refusal's code */
  int profile_then_snapshot; /* a profile came just before its snapshot */
  int profile_waiting;       /* a profile came, its snapshot not yet */
} owner_t;

static owner_t own;

static const mt_tset_req_t profile_req = {.profile = 1};
static const mt_tset_req_t smaps_req = {.wire_flags = 0x1};

static int o_added(void *arg, mt_tset_target_t *t) {
  (void)arg;
  own.added++;
  own.last_pid = t->pid;
  return 0;
}

static void o_retired(void *arg, mt_tset_target_t *t) {
  (void)arg;
  own.retired++;
  own.last_pid = t->pid;
}

static int o_request(void *arg, mt_tset_target_t *t, mt_tset_req_t *req) {
  (void)arg;
  (void)t;
  req->wire_flags = own.flags;
  return own.skip;
}

static void o_profile(void *arg, mt_tset_target_t *t, mt_tset_profile_t *p) {
  (void)arg;
  (void)t;
  assert_non_null(p);
  assert_false(own.profile_waiting);
  own.profile_waiting = 1;
  if (p->prof != NULL) {
    own.profiles++;
    ms__profile_decoded_free(p->prof); /* taken */
    p->prof = NULL;
  } else {
    own.prof_err = p->err;
  }
}

static void o_snapshot(void *arg, mt_tset_target_t *t, const ms_snapshot_t *s) {
  (void)arg;
  assert_int_equal(s->pid, t->pid);
  own.snapshots++;
  own.profile_then_snapshot += own.profile_waiting;
  own.profile_waiting = 0;
  own.last_pid = t->pid;
}

static uint64_t o_failure(void *arg, mt_tset_target_t *t, int status,
                          const char *msg) {
  (void)arg;
  assert_non_null(msg);
  own.failures++;
  own.last_status = status;
  own.last_pid = t->pid;
  return own.failure_answer;
}

static void o_gone(void *arg, mt_tset_target_t *t, int status,
                   const char *msg) {
  (void)arg;
  (void)msg;
  own.gone++;
  own.last_status = status;
  own.last_pid = t->pid;
}

static void o_quiet(void *arg) {
  (void)arg;
  own.quiet++;
}

static void o_probed(void *arg) {
  (void)arg;
  own.probed++;
}

static const mt_tset_cbs_t owner_cbs = {
    .added = o_added,
    .retired = o_retired,
    .request = o_request,
    .profile = o_profile,
    .snapshot = o_snapshot,
    .failure = o_failure,
    .gone = o_gone,
    .quiet = o_quiet,
    .probed = o_probed,
};

/* Parents for tree_root: pid -> ppid (0 for the rest). */
static int parent_pid[8], parent_ppid[8];
static size_t nparents;

static int f_parent_of(void *ctx, int pid) {
  (void)ctx;
  for (size_t i = 0; i < nparents; i++)
    if (parent_pid[i] == pid)
      return parent_ppid[i];
  return 0;
}

static mt_tset_io_t fake_io = {
    .now_ns = f_now_ns,
    .conn_new = f_conn_new,
    .conn_fetch = f_conn_fetch,
    .conn_busy = f_conn_busy,
    .conn_close = f_conn_close,
    .timer_new = f_timer_new,
    .timer_start = f_timer_start,
    .timer_stop = f_timer_stop,
    .timer_close = f_timer_close,
    .discover = f_discover,
    .stale = f_stale,
    .proc_gone = f_proc_gone,
    .parent_of = f_parent_of,
};

static int reset(void **state) {
  (void)state;
  now_ms = 5000;
  step_ns = stepped_ns = 0;
  memset(timers, 0, sizeof timers);
  memset(conns, 0, sizeof conns);
  nlisting = ndead = nparents = 0;
  stale_calls = stale_pid = 0;
  memset(&own, 0, sizeof own);
  own.failure_answer = MT_TSET_BACKOFF;
  return 0;
}

static mt_tset_opts_t timed_opts(void) {
  return (mt_tset_opts_t){.timed = 1,
                          .interval_ms = 100,
                          .backoff_max_ms = 800,
                          .timeout_ms = 2000,
                          .keep_gone_ms = 1000};
}

static mt_tset_t *new_set(const mt_tset_opts_t *o) {
  mt_tset_t *s = mt_tset_new(&fake_io, o, &owner_cbs, NULL);

  assert_non_null(s);
  return s;
}

/* ---- tests ------------------------------------------------------------ */

/* A timed target is read at once, then every interval; each reply is one
 * snapshot callback, and a timer that fires while a read is on its way
 * starts no second one. */
static void test_snapshot_once(void **state) {
  mt_tset_opts_t o = timed_opts();
  mt_tset_t *s = new_set(&o);
  mt_tset_target_t *t;

  (void)state;
  t = mt_tset_add(s, 42, 0, 0);
  assert_non_null(t);
  assert_int_equal(own.added, 1);
  assert_int_equal(fetches(42), 0);
  mt_tset_start(s);
  advance(0);
  assert_int_equal(fetches(42), 1);
  assert_true(mt_tset_busy(s, t));
  reply_ok(42);
  assert_int_equal(own.snapshots, 1);
  assert_int_equal(own.quiet, 1);
  assert_true(t->ok);
  assert_int_equal(t->start_time, 1042); /* learnt from the snapshot */
  assert_int_equal(t->last_ok_ns, now_ms * 1000000u);
  advance(99);
  assert_int_equal(fetches(42), 1);
  advance(1);
  assert_int_equal(fetches(42), 2);
  /* No answer yet: the next tick asks nothing more. */
  advance(100);
  assert_int_equal(fetches(42), 2);
  reply_ok(42);
  assert_int_equal(own.snapshots, 2);
  mt_tset_free(s);
  assert_int_equal(own.retired, 1);
  assert_true(conn_of(42) == NULL); /* closed */
}

/* Failures back off: interval * 2^n, capped; a success resets it. */
static void test_backoff(void **state) {
  static const uint64_t waits[] = {200, 400, 800, 800};
  mt_tset_opts_t o = timed_opts();
  mt_tset_t *s = new_set(&o);
  mt_tset_target_t *t = mt_tset_add(s, 7, 0, 0);
  int n;

  (void)state;
  mt_tset_schedule(s, t, 0);
  advance(0);
  for (size_t i = 0; i < sizeof waits / sizeof waits[0]; i++) {
    n = fetches(7);
    reply_fail(7, MS_ETIMEDOUT);
    assert_int_equal(own.failures, (int)i + 1);
    assert_int_equal(own.last_status, MS_ETIMEDOUT);
    assert_int_equal(t->fails, i + 1);
    advance(waits[i] - 1);
    assert_int_equal(fetches(7), n);
    advance(1);
    assert_int_equal(fetches(7), n + 1);
  }
  assert_int_equal(own.gone, 0);
  reply_ok(7);
  assert_int_equal(t->fails, 0);
  assert_int_equal(own.snapshots, 1);
  n = fetches(7);
  advance(100);
  assert_int_equal(fetches(7), n + 1);
  mt_tset_free(s);
}

/* The owner's own wait (run: the socket is not there yet) is used as is
 * and does not count towards the back-off. */
static void test_owner_wait(void **state) {
  mt_tset_opts_t o = timed_opts();
  mt_tset_t *s = new_set(&o);
  mt_tset_target_t *t = mt_tset_add(s, 9, 0, MT_TSET_OWNED);

  (void)state;
  own.failure_answer = 20;
  mt_tset_schedule(s, t, 0);
  advance(0);
  reply_fail(9, MS_ENOENT);
  assert_int_equal(t->fails, 0);
  advance(19);
  assert_int_equal(fetches(9), 1);
  advance(1);
  assert_int_equal(fetches(9), 2);
  /* An owned target is never checked in /proc: dead there, it fails. */
  dead[ndead++] = 9;
  reply_fail(9, MS_ENOENT);
  assert_int_equal(own.gone, 0);
  assert_int_equal(own.failures, 2);
  /* Its end is the owner's to say; a read on its way still reports a
   * snapshot, a failure is dropped, and `quiet` still comes. */
  advance(20);
  assert_int_equal(fetches(9), 3);
  mt_tset_mark_gone(s, t);
  reply_fail(9, MS_EPROTO);
  assert_int_equal(own.failures, 2);
  assert_int_equal(own.gone, 0);
  assert_int_equal(own.quiet, 3);
  advance(10000);
  assert_int_equal(fetches(9), 3);
  mt_tset_free(s);
}

/* A process that exits: gone fires once, no failure, no more reads, and
 * a listing that no longer has it says nothing more. */
static void test_gone_once(void **state) {
  mt_tset_opts_t o = timed_opts();
  mt_tset_t *s = new_set(&o);
  mt_tset_target_t *t = mt_tset_add(s, 11, 1011, 0);

  (void)state;
  mt_tset_start(s);
  advance(0);
  reply_ok(11);
  advance(100);
  dead[ndead++] = 11;
  reply_fail(11, MS_EPROTO);
  assert_int_equal(own.gone, 1);
  assert_int_equal(own.last_status, MS_EPROTO);
  assert_int_equal(own.failures, 0);
  assert_true(t->gone);
  assert_false(t->ok);
  advance(100000);
  assert_int_equal(fetches(11), 2);
  list(0, NULL);
  assert_int_equal(mt_tset_rescan(s), 0);
  assert_int_equal(own.gone, 1);
  mt_tset_free(s);
}

/* Discovery: new processes are probed at once by their first read and
 * join (in PID order) when it answers; one that vanished is said gone
 * once, kept keep_gone_ms, then retired; a gone PID that names a new
 * process is replaced. */
static void test_discovery(void **state) {
  static const int first[] = {10, 11}, second[] = {11}, third[] = {11, 12};
  mt_tset_opts_t o = timed_opts();
  mt_tset_t *s;
  mt_tset_target_t *t;

  (void)state;
  o.rescan_min_ms = 2000;
  s = new_set(&o);
  list(2, first);
  mt_tset_start(s); /* the rescan timer: every max(100, 2000) ms */
  assert_int_equal(mt_tset_rescan(s), 0);
  /* Listed and probed, not yet the owner's. */
  assert_int_equal(own.added, 0);
  assert_int_equal(mt_tset_count(s), 0);
  assert_int_equal(mt_tset_probing(s), 2);
  assert_int_equal(fetches(10), 1);
  assert_int_equal(fetches(11), 1);
  reply_ok(11);
  reply_ok(10);
  assert_int_equal(own.added, 2);
  assert_int_equal(own.snapshots, 2);
  assert_int_equal(mt_tset_count(s), 2);
  assert_int_equal(mt_tset_probing(s), 0);
  assert_int_equal(mt_tset_at(s, 0)->pid, 10);
  t = mt_tset_find(s, 10);
  assert_non_null(t);
  assert_string_equal(t->comm, "p10");
  assert_true(t->have_uid);
  advance(0);
  assert_int_equal(fetches(10), 1); /* the next read, an interval later */
  advance(100);
  assert_int_equal(fetches(10), 2);
  reply_ok(10);
  reply_ok(11);

  /* 10 leaves the listing and its process is gone. */
  list(1, second);
  dead[ndead++] = 10;
  advance(2000); /* the rescan timer lists */
  assert_int_equal(own.gone, 1);
  assert_int_equal(own.last_pid, 10);
  assert_int_equal(own.last_status, 0);
  assert_int_equal(mt_tset_count(s), 2); /* kept a while */
  advance(2000);
  assert_int_equal(own.gone, 1);
  assert_int_equal(own.retired, 1); /* 2 s > keep_gone_ms */
  assert_null(mt_tset_find(s, 10));

  /* A new one appears: its probe is still on its way. */
  list(2, third);
  advance(2000);
  assert_int_equal(own.added, 2);
  assert_int_equal(mt_tset_probing(s), 1);
  assert_null(mt_tset_find(s, 12));

  /* 11 dies and its PID is reused by another attachable process; 12's
   * probe times out: it is an agent in trouble, shown with its failure. */
  dead[0] = 11;
  reply_fail(11, MS_EPROTO);
  reply_fail(12, MS_ETIMEDOUT);
  assert_int_equal(own.added, 3);
  assert_int_equal(own.failures, 1);
  assert_non_null(mt_tset_find(s, 12));
  assert_int_equal(own.gone, 2);
  assert_true(mt_tset_find(s, 11)->gone);
  listing[0].start_time = 777;
  ndead = 0;
  assert_int_equal(mt_tset_rescan(s), 0);
  assert_null(mt_tset_find(s, 11)); /* retired; the new one is probed */
  reply_ok(11);
  t = mt_tset_find(s, 11);
  assert_non_null(t);
  assert_false(t->gone);
  assert_int_equal(t->start_time, 777);
  assert_int_equal(own.retired, 2);
  assert_int_equal(own.added, 4);
  mt_tset_free(s);
}

/* Probes, in rounds: a listed socket that refuses connections (its
 * removal left to the io's `stale`) or is served by another process is
 * dropped without a word, and probed again at the next listing; one that
 * does not answer in time is a target with its failure; the round's
 * `quiet` waits for every probe; a candidate no longer listed goes. */
static void test_discovery_probes(void **state) {
  static const int four[] = {1, 2, 3, 4}, two[] = {3, 4};
  mt_tset_opts_t o = {.timeout_ms = 2000, .retire_unlisted = 1};
  mt_tset_t *s = new_set(&o);

  (void)state;
  list(4, four);
  assert_int_equal(mt_tset_rescan(s), 0);
  assert_int_equal(mt_tset_count(s), 0);
  assert_int_equal(mt_tset_probing(s), 4);
  assert_int_equal(fetches(1), 0); /* not timed: the round asks */
  assert_int_equal(mt_tset_fetch_all(s, &smaps_req), 4);
  reply_fail(1, MS_ECONNREFUSED);
  reply_fail(2, MS_EUNSAFE);
  assert_int_equal(stale_calls, 1);
  assert_int_equal(stale_pid, 1);
  reply_fail(3, MS_ETIMEDOUT);
  assert_int_equal(own.quiet, 0);
  assert_int_equal(own.probed, 3);
  reply_ok(4);
  assert_int_equal(own.probed, 4);
  assert_int_equal(own.quiet, 1);
  assert_int_equal(own.added, 2);
  assert_int_equal(own.failures, 1);
  assert_int_equal(own.snapshots, 1);
  assert_int_equal(own.retired, 0);
  assert_int_equal(mt_tset_count(s), 2);
  assert_int_equal(mt_tset_at(s, 0)->pid, 3);
  assert_int_equal(mt_tset_at(s, 1)->pid, 4);
  assert_int_equal(mt_tset_probing(s), 0);

  /* The next round probes 1 and 2 again. */
  assert_int_equal(mt_tset_rescan(s), 0);
  assert_int_equal(mt_tset_probing(s), 2);
  assert_int_equal(mt_tset_fetch_all(s, NULL), 4);
  /* Gone from the listing while probed: their reads no longer count. */
  list(2, two);
  assert_int_equal(mt_tset_rescan(s), 0);
  assert_int_equal(mt_tset_probing(s), 0);
  reply_ok(3);
  reply_ok(4);
  assert_int_equal(own.quiet, 2);
  assert_int_equal(own.added, 2);
  assert_int_equal(own.retired, 0);
  mt_tset_free(s);
  assert_int_equal(own.retired, 2);
}

/* A listing that fails leaves the set as it was. */
static int f_discover_fails(void *ctx, msc_target_t **out, size_t *n) {
  (void)ctx;
  (void)out;
  (void)n;
  return MS_EACCES;
}

static void test_discovery_error(void **state) {
  mt_tset_opts_t o = timed_opts();
  mt_tset_io_t io = fake_io;
  mt_tset_t *s;

  (void)state;
  io.discover = f_discover_fails;
  s = mt_tset_new(&io, &o, &owner_cbs, NULL);
  assert_non_null(s);
  mt_tset_add(s, 3, 0, 0);
  assert_int_equal(mt_tset_rescan(s), MS_EACCES);
  assert_int_equal(mt_tset_count(s), 1);
  assert_int_equal(own.retired, 0);
  mt_tset_free(s);
}

/* Rounds: not timed; every target is asked at once, `quiet` ends the
 * round once all have reported; a listing retires the unlisted at once. */
static void test_rounds(void **state) {
  static const int three[] = {1, 2, 3}, two[] = {1, 3};
  mt_tset_opts_t o = {.timeout_ms = 2000, .retire_unlisted = 1};
  mt_tset_t *s = new_set(&o);

  (void)state;
  list(3, three);
  for (int round = 0; round < 3; round++) {
    assert_int_equal(mt_tset_rescan(s), 0);
    assert_int_equal(mt_tset_fetch_all(s, &smaps_req), 3);
    assert_int_equal(conn_of(2)->req.wire_flags, 0x1);
    reply_ok(1);
    reply_fail(2, MS_ETIMEDOUT);
    assert_int_equal(own.quiet, round);
    reply_ok(3);
    assert_int_equal(own.quiet, round + 1);
    assert_true(mt_tset_find(s, 1)->ok);
    assert_false(mt_tset_find(s, 2)->ok);
  }
  assert_int_equal(own.added, 3);
  assert_int_equal(own.failures, 3);
  /* No timers: nothing is read between rounds. */
  advance(100000);
  assert_int_equal(fetches(1), 3);
  list(2, two);
  assert_int_equal(mt_tset_rescan(s), 0);
  assert_int_equal(own.retired, 1);
  assert_int_equal(own.gone, 0);
  assert_null(mt_tset_find(s, 2));
  /* A target that is gone is not asked. */
  dead[ndead++] = 3;
  assert_int_equal(mt_tset_fetch_all(s, NULL), 2);
  reply_ok(1);
  reply_fail(3, MS_EPROTO);
  assert_int_equal(own.gone, 1);
  assert_int_equal(mt_tset_fetch_all(s, NULL), 1);
  reply_ok(1);
  mt_tset_free(s);
}

/* Paused (request skips), the cadence goes on without reads; a new
 * interval re-arms the healthy targets, not the failing ones. */
static void test_pause_and_interval(void **state) {
  mt_tset_opts_t o = timed_opts();
  mt_tset_t *s = new_set(&o);
  mt_tset_target_t *a = mt_tset_add(s, 1, 0, 0), *b = mt_tset_add(s, 2, 0, 0);

  (void)state;
  mt_tset_start(s);
  own.flags = 0x1;
  advance(0);
  assert_int_equal(conn_of(1)->req.wire_flags, 0x1);
  reply_ok(1);
  reply_fail(2, MS_ETIMEDOUT); /* next read of 2 in 200 ms */
  own.skip = 1;
  advance(1000);
  assert_int_equal(fetches(1), 1);
  assert_int_equal(fetches(2), 1);
  own.skip = 0;
  advance(100);
  assert_int_equal(fetches(1), 2);
  assert_int_equal(fetches(2), 2);
  reply_ok(1);
  reply_fail(2, MS_ETIMEDOUT); /* fails 2: next read in 400 ms */
  mt_tset_set_interval(s, 1000);
  assert_int_equal(a->fails, 0);
  assert_int_equal(b->fails, 2);
  advance(400);
  assert_int_equal(fetches(2), 3); /* its back-off, not the new interval */
  assert_int_equal(fetches(1), 2);
  advance(599);
  assert_int_equal(fetches(1), 2);
  advance(1);
  assert_int_equal(fetches(1), 3);
  mt_tset_stop(s);
  advance(100000);
  assert_int_equal(fetches(1), 3);
  mt_tset_free(s);
}

/* An owner that refuses a target (out of memory) leaves no trace. */
static int o_refuse(void *arg, mt_tset_target_t *t) {
  (void)arg;
  (void)t;
  return -1;
}

static void test_added_refused(void **state) {
  mt_tset_opts_t o = timed_opts();
  mt_tset_cbs_t cbs = owner_cbs;
  mt_tset_t *s;

  (void)state;
  cbs.added = o_refuse;
  s = mt_tset_new(&fake_io, &o, &cbs, NULL);
  assert_null(mt_tset_add(s, 5, 0, 0));
  assert_int_equal(mt_tset_count(s), 0);
  assert_true(conns[0].closed);
  assert_true(timers[0].closed);
  mt_tset_free(s);
  assert_int_equal(own.retired, 0);
}

/* ---- rounds.c over the set: --once -n 3 -------------------------------- */

static int rounds_done;

static void on_done(void *arg) {
  (void)arg;
  rounds_done++;
}

static void test_rounds_count(void **state) {
  mt_opts_t opts;
  mt_model_t model;
  mt_out_t out;
  mt_rounds_t r;
  mt_tset_opts_t o = {.timeout_ms = 2000};
  uv_loop_t loop;
  int saved = dup(STDOUT_FILENO);
  FILE *null = freopen("/dev/null", "w", stdout);

  (void)state;
  assert_non_null(null);
  memset(&opts, 0, sizeof opts);
  opts.cmd = MT_CMD_WATCH;
  opts.uid = -1; /* no -u, as the command line leaves it */
  opts.once = opts.json = 1;
  opts.iterations = 3;
  opts.delay_s = 0.1;
  opts.pids[0] = 77;
  opts.npids = 1;
  mt_model_init(&model);
  model.delay_s = opts.delay_s;
  memset(&out, 0, sizeof out);
  out.json = 1;
  memset(&r, 0, sizeof r);
  uv_loop_init(&loop);
  mt_rounds_init(&r, &loop);
  r.o = &opts;
  r.model = &model;
  r.out = &out;
  r.sockdir = "/nowhere";
  r.done = on_done;
  r.set = mt_tset_new(&fake_io, &o, &mt_rounds_cbs, &r);
  assert_non_null(r.set);
  assert_non_null(mt_tset_add(r.set, 77, 0, 0));
  assert_non_null(mt_model_find(&model, 77)); /* the owner made it */
  rounds_done = 0;
  mt_rounds_start(&r);
  while (rounds_done == 0) {
    if (conn_of(77)->busy)
      reply_ok(77);
    else
      uv_run(&loop, UV_RUN_ONCE);
  }
  assert_int_equal(rounds_done, 1);
  assert_int_equal(r.rounds, 3);
  assert_int_equal(fetches(77), 3);
  assert_int_equal(out.nemitted, 0); /* JSON lines: no paragraphs */
  assert_int_equal(r.exit_code, 0);
  mt_tset_free(r.set);
  assert_null(mt_model_find(&model, 77));
  mt_rounds_close(&r);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&loop), 0);
  mt_model_free(&model);
  mt_out_free(&out);
  fflush(stdout);
  dup2(saved, STDOUT_FILENO);
  close(saved);
}

/* An owner's profile request (memtop profile): it reaches the connection
 * as asked, the profile reaches the owner once, through the profile
 * callback just before the read's snapshot, and the owner may take it; a
 * failed read is a failure (no snapshot, no profile), and a refused
 * profile is a snapshot with the refusal's words. */
static void test_profile_request(void **state) {
  mt_tset_opts_t o = {.timeout_ms = 2000};
  mt_tset_t *s;

  (void)state;
  s = new_set(&o);
  assert_non_null(mt_tset_add(s, 42, 1042, 0));
  assert_int_equal(mt_tset_fetch_all(s, &profile_req), 1);
  assert_int_equal(fetches(42), 1);
  assert_true(reply_profile(42, 0));
  assert_int_equal(own.snapshots, 1);
  assert_int_equal(own.profiles, 1);
  assert_int_equal(own.profile_then_snapshot, 1);
  assert_int_equal(own.quiet, 1);
  /* Not timed: nothing more is read. */
  advance(10000);
  assert_int_equal(fetches(42), 1);
  assert_int_equal(own.profiles, 1);

  /* The failure path: the read breaks off (a malformed frame, a
   * timeout). */
  assert_int_equal(mt_tset_fetch_all(s, &profile_req), 1);
  reply_fail(42, MS_ETIMEDOUT);
  assert_int_equal(own.failures, 1);
  assert_int_equal(own.last_status, MS_ETIMEDOUT);
  assert_int_equal(own.snapshots, 1);
  assert_int_equal(own.profiles, 1);
  assert_int_equal(own.quiet, 2);
  assert_false(mt_tset_find(s, 42)->ok);

  /* Refused alone: the snapshot stands, the profile's words come. */
  assert_int_equal(mt_tset_fetch_all(s, &profile_req), 1);
  assert_false(reply_profile(42, MS_ENOSYS));
  assert_int_equal(own.snapshots, 2);
  assert_int_equal(own.profile_then_snapshot, 2);
  assert_int_equal(own.profiles, 1);
  assert_int_equal(own.prof_err, MS_ENOSYS);
  assert_int_equal(own.quiet, 3);
  mt_tset_free(s);
}

/* The live view's reads (live.c's request hook): the process on the detail
 * view asks for its smaps figures and, when the sites panel is due, its
 * heap profile, both on one read. The profile's request once rode the
 * wire's flag word, and the smaps request overwrote it: opening the
 * detail view lost the panel's first profile (it then waited a whole
 * interval). */
static int want_every_time(void *arg, int pid) {
  (void)arg;
  return pid == 42;
}

static void test_live_detail_asks_both(void **state) {
  mt_tset_opts_t o = timed_opts();
  mt_model_t m;
  mt_live_t live;
  mt_tset_t *s;

  (void)state;
  mt_model_init(&m);
  m.screen = MT_SCREEN_DETAIL;
  m.detail_pid = 42;
  memset(&live, 0, sizeof live);
  live.model = &m;
  live.screen = 1;
  live.want_profile = want_every_time;
  s = mt_tset_new(&fake_io, &o, &mt_live_cbs, &live);
  assert_non_null(s);
  live.set = s;
  assert_non_null(mt_tset_add(s, 42, 1042, 0));
  mt_tset_schedule(s, mt_tset_find(s, 42), 0);
  advance(0);
  assert_int_equal(fetches(42), 1);
  assert_true(conn_of(42)->req.profile);
  assert_int_equal(conn_of(42)->req.wire_flags, MS__REQ_SMAPS);
  mt_tset_free(s);
  mt_model_free(&m);
}

/* ---- the real io: the stale check off the loop ------------------------- */

static uv_sem_t hold;

static void hold_work(uv_work_t *w) {
  (void)w;
  uv_sem_wait(&hold);
}

static void hold_done(uv_work_t *w, int status) {
  (void)w;
  (void)status;
}

/* A listed socket that refused connections is removed if it is stale:
 * msc_remove_stale() reads /proc/PID/maps, which waits for the process's
 * mmap lock and is as long as its mappings. The loop hands it to libuv's
 * pool and goes on: with the pool's one thread held (UV_THREADPOOL_SIZE=1,
 * set in main), the socket is still there when stale() returns, and gone
 * once the pool has run. */
static void test_stale_off_the_loop(void **state) {
  char dir[] = "/tmp/test_targetset.XXXXXX";
  struct sockaddr_un sa;
  struct stat st;
  msc_target_t t;
  mt_tset_io_t io;
  uv_loop_t loop;
  uv_work_t w;
  pid_t pid;
  int fd, on_loop;

  (void)state;
  assert_non_null(mkdtemp(dir));
  pid = fork(); /* a PID that has gone: a child, reaped */
  assert_true(pid >= 0);
  if (pid == 0)
    _exit(0);
  assert_int_equal(waitpid(pid, NULL, 0), pid);
  memset(&t, 0, sizeof t);
  t.pid = pid;
  snprintf(t.path, sizeof t.path, "%s/%d.sock", dir, (int)pid);
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  snprintf(sa.sun_path, sizeof sa.sun_path, "%.100s", t.path);
  fd = socket(AF_UNIX, SOCK_STREAM, 0);
  assert_true(fd >= 0);
  assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
  close(fd); /* bound, no one listening: it refuses connections */
  assert_int_equal(lstat(t.path, &st), 0);
  t.ino = (uint64_t)st.st_ino;
  t.uid = st.st_uid;

  assert_int_equal(uv_loop_init(&loop), 0);
  assert_int_equal(uv_sem_init(&hold, 0), 0);
  assert_int_equal(uv_queue_work(&loop, &w, hold_work, hold_done), 0);
  mt_tset_io_uv(&io, &loop);
  io.stale(io.ctx, &t);
  on_loop = lstat(t.path, &st) != 0;
  uv_sem_post(&hold); /* released before any failure: libuv joins it */
  uv_run(&loop, UV_RUN_DEFAULT);
  if (on_loop) {
    uv_loop_close(&loop);
    rmdir(dir);
    fail_msg("stale() removed %s on the loop's thread", t.path);
  }
  assert_int_not_equal(lstat(t.path, &st), 0); /* removed, off the loop */
  assert_int_equal(uv_loop_close(&loop), 0);
  uv_sem_destroy(&hold);
  unlink(t.path);
  rmdir(dir);
}

static int conn_runs, conn_status, conn_seen = -1;
static char conn_msg[512];

static void conn_done(mt_conn_t *c, int status, const ms_snapshot_t *got,
                      const char *msg, void *arg) {
  (void)c;
  (void)got;
  (void)arg;
  conn_runs++;
  conn_status = status;
  snprintf(conn_msg, sizeof conn_msg, "%s", msg != NULL ? msg : "");
}

/* Past the request's deadline, before EXPLAIN_MS has: what the callback
 * did by then, and the pool let go. */
static void conn_check(uv_timer_t *t) {
  conn_seen = conn_runs;
  uv_sem_post(&hold);
  uv_close((uv_handle_t *)t, NULL);
}

/* A socket of our own PID in a fresh MEMSTATS_DIR `dir` (a mkdtemp
 * template) that listens and never accepts, a loop whose pool's one
 * thread is held (hold), and a connection to that socket on it: a read
 * that times out, connected, with its explanation to come from the pool. */
static mt_conn_t *unanswered_start(char *dir, struct sockaddr_un *sa, int *fd,
                                   uv_loop_t *loop, uv_work_t *w) {
  assert_non_null(mkdtemp(dir));
  setenv("MEMSTATS_DIR", dir, 1);
  memset(sa, 0, sizeof *sa);
  sa->sun_family = AF_UNIX;
  snprintf(sa->sun_path, sizeof sa->sun_path, "%.80s/%d.sock", dir,
           (int)getpid());
  *fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(*fd >= 0);
  assert_int_equal(bind(*fd, (struct sockaddr *)sa, sizeof *sa), 0);
  assert_int_equal(listen(*fd, 4), 0);
  assert_int_equal(uv_loop_init(loop), 0);
  assert_int_equal(uv_sem_init(&hold, 0), 0);
  assert_int_equal(uv_queue_work(loop, w, hold_work, hold_done), 0);
  mt_conn_t *c = mt_conn_new(loop, (int)getpid(), 0, conn_done, NULL);
  assert_non_null(c);
  conn_runs = 0;
  conn_seen = -1;
  return c;
}

/* Closes what unanswered_start() made, once the loop has run. */
static void unanswered_end(mt_conn_t *c, const char *dir,
                           const struct sockaddr_un *sa, int fd,
                           uv_loop_t *loop) {
  mt_conn_close(c);
  uv_run(loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(loop), 0);
  uv_sem_destroy(&hold);
  close(fd);
  unlink(sa->sun_path);
  rmdir(dir);
  unsetenv("MEMSTATS_DIR");
}

/* A target that accepts the connection and never answers: why is read
 * from its /proc files (its descriptors counted against its limit, a walk
 * as long as its table, which waits on a hung /proc), on libuv's pool.
 * With the pool's one thread held, the request's deadline passes and no
 * callback runs on the loop; once the pool is let go, the callback brings
 * the explanation. The target is this process, listening on a socket it
 * never accepts from. */
static void test_timeout_explained_off_the_loop(void **state) {
  char dir[] = "/tmp/test_targetset.XXXXXX";
  struct sockaddr_un sa;
  uv_loop_t loop;
  uv_timer_t check;
  uv_work_t w;
  mt_conn_t *c;
  int fd;

  (void)state;
  c = unanswered_start(dir, &sa, &fd, &loop, &w);
  uv_update_time(&loop);
  assert_int_equal(mt_conn_fetch_flags(c, 200, 0), 0);
  /* Due after the deadline (200 ms) and before the explanation's own
   * (a second after it), timers being run in the order they are due. */
  assert_int_equal(uv_timer_init(&loop, &check), 0);
  assert_int_equal(uv_timer_start(&check, conn_check, 700, 0), 0);
  uv_run(&loop, UV_RUN_DEFAULT);
  unanswered_end(c, dir, &sa, fd, &loop);
  if (conn_seen != 0)
    fail_msg("the timeout was explained on the loop's thread: %s", conn_msg);
  assert_int_equal(conn_runs, 1);
  assert_int_equal(conn_status, MS_ETIMEDOUT);
  if (strstr(conn_msg, "no answer within 200 ms") == NULL)
    fail_msg("not the explanation of an accepted, unanswered request: %s",
             conn_msg);
}

/* Each 50 ms: once the callback has run (while the pool is held), the
 * pool is let go; after 30 s, let go all the same (the test then fails). */
static void conn_wait(uv_timer_t *t) {
  int *ticks = t->data;
  if (conn_runs == 0 && ++*ticks < 600)
    return;
  conn_seen = conn_runs;
  uv_sem_post(&hold);
  uv_close((uv_handle_t *)t, NULL);
}

/* The explanation's own bound: with the pool held for good (a hung
 * /proc), the callback still runs, without it, and the explanation that
 * comes later is dropped (one callback only). */
static void test_timeout_explanation_late(void **state) {
  char dir[] = "/tmp/test_targetset.XXXXXX";
  struct sockaddr_un sa;
  uv_loop_t loop;
  uv_timer_t wait;
  uv_work_t w;
  mt_conn_t *c;
  int fd, ticks = 0;

  (void)state;
  c = unanswered_start(dir, &sa, &fd, &loop, &w);
  conn_msg[0] = '\0';
  assert_int_equal(mt_conn_fetch_flags(c, 100, 0), 0);
  assert_int_equal(uv_timer_init(&loop, &wait), 0);
  wait.data = &ticks;
  assert_int_equal(uv_timer_start(&wait, conn_wait, 50, 50), 0);
  uv_run(&loop, UV_RUN_DEFAULT);
  unanswered_end(c, dir, &sa, fd, &loop);
  if (conn_seen != 1)
    fail_msg("no callback while the explanation was held (30 s)");
  assert_int_equal(conn_runs, 1);
  assert_int_equal(conn_status, MS_ETIMEDOUT);
  assert_non_null(strstr(conn_msg, "no answer within 100 ms"));
}

/* A tree (tree_root): a listing takes the root's descendants only, at
 * any depth and through processes that are not listed (a shell between),
 * and a daemon re-parented to the root (memtop as a subreaper) is in it;
 * the rest of the machine's targets are not probed. */
static void test_tree(void **state) {
  static const int all[] = {50, 101, 102, 103, 200};
  /* 100 the root; 101 its child; 99 an unlisted shell under 101, 102
   * under it; 103 a daemon whose parent is now the root; 200 elsewhere;
   * 50 above the root. */
  static const int pids[] = {101, 99, 102, 103, 200, 100};
  static const int ppids[] = {100, 101, 99, 100, 1, 50};
  mt_tset_opts_t o = {
      .timeout_ms = 2000, .retire_unlisted = 1, .tree_root = 100};
  mt_tset_t *s;

  (void)state;
  for (nparents = 0; nparents < 6; nparents++) {
    parent_pid[nparents] = pids[nparents];
    parent_ppid[nparents] = ppids[nparents];
  }
  s = new_set(&o);
  list(5, all);
  assert_int_equal(mt_tset_rescan(s), 0);
  assert_int_equal(mt_tset_probing(s), 3);
  assert_int_equal(mt_tset_fetch_all(s, NULL), 3);
  assert_int_equal(fetches(101), 1);
  assert_int_equal(fetches(102), 1);
  assert_int_equal(fetches(103), 1);
  assert_int_equal(fetches(50), -1); /* never a candidate */
  assert_int_equal(fetches(200), -1);
  mt_tset_free(s);
}

/* A listing that finds a target's process gone keeps it keep_gone_ms,
 * though the clock moved on between the listing's start and the moment
 * it marked it gone (the kept time was then negative, wrapped round to
 * a huge one, and an exited worker of `memtop run` vanished at once). */
static void test_gone_kept_on_a_moving_clock(void **state) {
  static const int one[] = {10};
  mt_tset_opts_t o = timed_opts();
  mt_tset_t *s;

  (void)state;
  s = new_set(&o);
  list(1, one);
  assert_int_equal(mt_tset_rescan(s), 0);
  reply_ok(10);
  assert_int_equal(own.added, 1);
  step_ns = 1000; /* a microsecond per read */
  list(0, one);
  dead[ndead++] = 10;
  assert_int_equal(mt_tset_rescan(s), 0);
  assert_int_equal(own.gone, 1);
  assert_int_equal(own.retired, 0);
  assert_non_null(mt_tset_find(s, 10)); /* kept, marked gone */
  advance(2000);
  assert_int_equal(mt_tset_rescan(s), 0);
  assert_int_equal(own.retired, 1); /* 2 s > keep_gone_ms */
  mt_tset_free(s);
}

int main(void) {
  /* test_stale_off_the_loop and test_timeout_explained_off_the_loop hold
   * the pool's one thread. */
  setenv("UV_THREADPOOL_SIZE", "1", 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_snapshot_once, reset),
      cmocka_unit_test_setup(test_backoff, reset),
      cmocka_unit_test_setup(test_owner_wait, reset),
      cmocka_unit_test_setup(test_gone_once, reset),
      cmocka_unit_test_setup(test_discovery, reset),
      cmocka_unit_test_setup(test_discovery_error, reset),
      cmocka_unit_test_setup(test_discovery_probes, reset),
      cmocka_unit_test_setup(test_rounds, reset),
      cmocka_unit_test_setup(test_pause_and_interval, reset),
      cmocka_unit_test_setup(test_added_refused, reset),
      cmocka_unit_test_setup(test_rounds_count, reset),
      cmocka_unit_test_setup(test_profile_request, reset),
      cmocka_unit_test_setup(test_live_detail_asks_both, reset),
      cmocka_unit_test(test_stale_off_the_loop),
      cmocka_unit_test(test_timeout_explained_off_the_loop),
      cmocka_unit_test(test_timeout_explanation_late),
      cmocka_unit_test_setup(test_tree, reset),
      cmocka_unit_test_setup(test_gone_kept_on_a_moving_clock, reset),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
