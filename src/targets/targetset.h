/*
 * targetset.h - the set of targets memtop watches: which processes, when
 * each is read, backing off from failing ones, noticing the ones that
 * exited, and (when asked) finding new ones by listing the socket
 * directory. It knows nothing of screens, reports or the command line: it
 * reports through a small table of callbacks (mt_tset_cbs_t), and whoever
 * owns it decides what a snapshot, a failure or an end means.
 *
 * Its I/O comes through a second table (mt_tset_io_t): connections,
 * timers, the clock, the listing and the /proc check. mt_tset_io_uv()
 * gives the real ones (conn.c on a libuv loop, uv timers, uv_hrtime,
 * msc_list, /proc/PID/stat); a test gives fakes and drives time
 * itself (tests/unit/test_targetset.c).
 *
 * Who uses it, and how:
 *
 *   live view       every PID named, or discovery (rescan_min_ms) with
 *                   exited targets kept keep_gone_ms; timed reads at the
 *                   -d interval; `request` skips reads while paused and
 *                   asks smaps for the detail view;
 *   --once, -n, ps  not timed: each round is mt_tset_rescan() (when no
 *                   PID is named, retire_unlisted) and mt_tset_fetch_all();
 *                   `quiet` ends the round;
 *   run             the command's PID added MT_TSET_OWNED (its end is
 *                   the owner's to say, mt_tset_mark_gone); `failure`
 *                   returns a short wait while its socket is not there;
 *   profile         one PID, not timed, one mt_tset_fetch_all() (twice,
 *                   N seconds apart, from the owner's timer) asking
 *                   for the profile (mt_tset_req_t): it arrives through
 *                   the `profile` callback, before the snapshot's;
 *   serve           discovery, timed, keep_gone_ms 0: `snapshot` keeps
 *                   the latest one (its age is mt_tset_now_ns() minus
 *                   last_ok_ns), `gone` says a PID died, `retired` drops
 *                   it at the next listing.
 *
 * None of these needs a change here: the options say which PIDs and
 * whether to discover, the cadence, the back-off and its cap, the rescan
 * interval and what a listing does with targets it did not find; the
 * callbacks say what a reply means.
 *
 * Callbacks run from the loop, never from inside the call that asked for
 * a read, except `added` and `retired`, which run inside mt_tset_add(),
 * mt_tset_rescan(), mt_tset_remove() and mt_tset_free(): they are
 * notices, not completions. A callback may call mt_tset_schedule() and
 * mt_tset_mark_gone(); `snapshot`, `failure` and `gone` must not remove
 * their target, and no callback frees the set.
 *
 * The profile's reply is the io's to decode (conn.c learns the request,
 * targetset_uv.c passes the decoded profile to the reply function): the
 * set only hands it to the owner's `profile` callback.
 */
#ifndef MS_TARGETS_TARGETSET_H
#define MS_TARGETS_TARGETSET_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "memstats.h"
#include "client/client.h"

typedef struct mt_tset_s mt_tset_t;

/* One watched process. The set owns it; the owner reads it and may use
 * `user` (the set never touches it). Freed after `retired` has run. */
typedef struct mt_tset_target_s {
  int pid;
  uint64_t start_time; /* 0: not known yet (the first snapshot says) */
  uid_t uid;           /* the process's real owner (its Uid: line) */
  int have_uid;
  /* Who the process is: owner, PID inside its namespaces, container,
   * pod, service (from the listing, or the io's identify for a PID
   * named; id.have_uid 0 when not known). */
  msc_ident_t id;
  char comm[MS_NAME_MAX]; /* from the listing ("" if named) */
  unsigned flags;         /* MT_TSET_* given to mt_tset_add() */
  unsigned fails;         /* consecutive failed reads (the back-off's) */
  int ok;                 /* the last read succeeded */
  int gone;               /* the process ended: no more reads */
  uint64_t last_ok_ns;    /* mt_tset_now_ns() at the last snapshot, or 0 */
  uint64_t gone_ns;       /* mt_tset_now_ns() when it was found gone */
  uint64_t asked_ns;      /* mt_tset_now_ns() when the last read was asked
                           * (whoever asked: a listing's first read too) */
  void *user;             /* the owner's */
  /* The set's own: */
  void *conn;
  void *timer;
  int inflight; /* a read is on its way */
  int seen;     /* found by the current listing */
} mt_tset_target_t;

/* mt_tset_add() flags. */
#define MT_TSET_OWNED                                                          \
  0x1u /* the owner says when it ends (a child it                              \
          started): no /proc check, never retired by a                         \
          listing */

/* What one read asks for: the request callback fills it (zeroed on
 * entry), mt_tset_fetch_all() takes one for all, and the io's conn_fetch
 * reads it. */
typedef struct mt_tset_req_s {
  uint64_t wire_flags; /* MS__REQ_*: the wire's request flags */
  int profile; /* the heap profile too: the `profile` callback gets it */
} mt_tset_req_t;

/* What a read asked with mt_tset_req_t.profile brought beside its
 * snapshot: the `profile` callback's argument. The profile is
 * the callback's to take (set prof to NULL and free it later with
 * ms__profile_decoded_free); left there, it is freed after the call.
 * The agent may refuse the profile alone (MS_ENOSYS: it does not sample):
 * then prof is NULL and err, msg say why, and the read still succeeded.
 * A reply that breaks off or is malformed fails the whole read. */
typedef struct mt_tset_profile_s {
  ms__profile_decoded_t *prof;
  int err;       /* MS_E* when prof is NULL */
  char msg[256]; /* words for the user (the PID, the cause) then */
} mt_tset_profile_t;

/* A failure callback's answer: back off as the options say. Any other
 * value is a wait in milliseconds before the next read, and the failure
 * does not count towards the back-off (a command whose socket is not
 * open yet). */
#define MT_TSET_BACKOFF UINT64_MAX

/* What the owner is told. `arg` is mt_tset_new()'s. */
typedef struct mt_tset_cbs_s {
  /* A target joined the set (mt_tset_add(), or a listing found it).
   * Return 0, or nonzero to refuse it (out of memory): it is then
   * dropped without `retired`. May be NULL. */
  int (*added)(void *arg, mt_tset_target_t *t);
  /* A target leaves the set (a listing dropped it, mt_tset_remove(),
   * mt_tset_free()); free what `user` holds. May be NULL. */
  void (*retired)(void *arg, mt_tset_target_t *t);
  /* A timed read is due: fill *req (zeroed on entry) and return 0, or
   * nonzero to skip this read (paused); the target keeps its cadence.
   * May be NULL (read, nothing asked beyond the snapshot). */
  int (*request)(void *arg, mt_tset_target_t *t, mt_tset_req_t *req);
  /* A read asked with the profile succeeded: what came of it (never
   * NULL), just before that read's `snapshot`. May be NULL (the profile
   * is then freed). */
  void (*profile)(void *arg, mt_tset_target_t *t, mt_tset_profile_t *p);
  /* A read succeeded: the snapshot (valid during the call only). Runs
   * once per successful read, also for a target that was marked gone
   * while its read was on its way. */
  void (*snapshot)(void *arg, mt_tset_target_t *t, const ms_snapshot_t *s);
  /* A read failed and the process is still there: status (MS_E*) and the
   * connection's words for the user (never NULL). Returns
   * MT_TSET_BACKOFF or a wait in ms (see above); ignored when not timed.
   * Not called for a target already gone. */
  uint64_t (*failure)(void *arg, mt_tset_target_t *t, int status,
                      const char *msg);
  /* The process ended (a failed read found it gone: status and msg are
   * that read's; or a listing did: status 0, msg NULL). Once per target;
   * no read follows. Not called for MT_TSET_OWNED targets. */
  void (*gone)(void *arg, mt_tset_target_t *t, int status, const char *msg);
  /* No read is on its way any more (after the last one's callback).
   * May be NULL. */
  void (*quiet)(void *arg);
  /* A listed process's probe (its first read) ended: it joined the set
   * (`added` and its snapshot or failure have run) or it was dropped
   * unseen; mt_tset_probing() counts the ones left. May be NULL. */
  void (*probed)(void *arg);
} mt_tset_cbs_t;

/* Runs once per io fetch that started: status 0 with the snapshot (and
 * the profile, if the fetch asked for it; else NULL), or a negative MS_E*
 * code and a message. */
typedef void (*mt_tset_reply_fn)(void *target, int status,
                                 const ms_snapshot_t *s,
                                 mt_tset_profile_t *prof, const char *msg);
typedef void (*mt_tset_timer_fn)(void *target);

/* The set's I/O. `ctx` is the first argument of each. */
typedef struct mt_tset_io_s {
  /* Monotonic nanoseconds. */
  uint64_t (*now_ns)(void *ctx);
  /* A connection to pid (start_time 0: unchecked) whose replies go to
   * fn(target, ...); NULL on ENOMEM. fetch: 0, or an error (no reply
   * then); a reply never runs inside fetch. busy: a fetch is on its way.
   * close: no reply runs after it. */
  void *(*conn_new)(void *ctx, int pid, uint64_t start_time,
                    mt_tset_reply_fn fn, void *target);
  /* Who the connection's process is, read just now (identify): its next
   * connect need not read it again. May be NULL. */
  void (*conn_ident)(void *conn, const msc_ident_t *id);
  int (*conn_fetch)(void *conn, int timeout_ms, const mt_tset_req_t *req);
  int (*conn_busy)(const void *conn);
  void (*conn_close)(void *conn);
  /* A one-shot timer calling fn(target); start re-arms it; close frees
   * it (it never fires after stop or close). NULL on ENOMEM. */
  void *(*timer_new)(void *ctx, mt_tset_timer_fn fn, void *target);
  void (*timer_start)(void *timer, uint64_t ms);
  void (*timer_stop)(void *timer);
  void (*timer_close)(void *timer);
  /* The candidates for attaching (msc_list(): a listing that connects to
   * nothing; the set probes each with its first read): 0 or an MS_E*
   * code; *out is freed by the set with free(). */
  int (*discover)(void *ctx, msc_target_t **out, size_t *n);
  /* A listed socket refused connections (its first read said
   * MS_ECONNREFUSED): remove it if it is stale (msc_remove_stale()). May
   * be NULL. */
  void (*stale)(void *ctx, const msc_target_t *t);
  /* Who pid is (msc_proc_ident()), for a target added by PID rather than
   * found by a listing: 0 or an MS_E* code. May be NULL. */
  int (*identify)(void *ctx, int pid, msc_ident_t *id);
  /* The parent of pid (msc_proc_ppid()): > 0, 0 for none, or a negative
   * code (gone). Needed with tree_root; may be NULL otherwise. */
  int (*parent_of)(void *ctx, int pid);
  /* Nonzero if pid is no longer the process started at start_time (no
   * /proc entry, a zombie, the PID reused). */
  int (*proc_gone)(void *ctx, int pid, uint64_t start_time);
  void *ctx;
} mt_tset_io_t;

typedef struct mt_tset_opts_s {
  /* Timed reads: each target on its own timer, every interval_ms (the
   * -d); after n failures in a row the wait is interval_ms * 2^n, at most
   * backoff_max_ms. 0: reads only on mt_tset_fetch_all(). */
  int timed;
  uint64_t interval_ms;
  uint64_t backoff_max_ms;
  int timeout_ms; /* per read */
  /* Discovery on a timer (timed only): mt_tset_start() lists the
   * directory every max(interval_ms, rescan_min_ms); 0: only when the
   * owner calls mt_tset_rescan(). New targets found are read at once. */
  uint64_t rescan_min_ms;
  /* What a listing does with a target it did not find: 1, retire it at
   * once (a round takes the processes found now); 0, keep it while its
   * process lives, mark it gone when not, and retire it keep_gone_ms
   * after it went. */
  int retire_unlisted;
  uint64_t keep_gone_ms;
  /* A process tree (issue 21: memtop run follows its command's tree,
   * memtop PID --tree a running parent's): > 0, a listing takes only
   * this PID and its descendants (the io's parent_of walks up from each
   * listed PID). A daemon that double-forks is re-parented to the
   * nearest subreaper: a tree_root that is memtop itself, made one with
   * prctl(PR_SET_CHILD_SUBREAPER), keeps it in the tree. 0: every
   * process listed. */
  int tree_root;
} mt_tset_opts_t;

/* A set with no targets. io and cbs are copied. NULL on ENOMEM. */
mt_tset_t *mt_tset_new(const mt_tset_io_t *io, const mt_tset_opts_t *o,
                       const mt_tset_cbs_t *cbs, void *arg);

/* Retires every target (`retired` runs for each) and frees the set. */
void mt_tset_free(mt_tset_t *s);

/* Watches pid (start_time 0: not known yet); `added` runs. Timed reads
 * start with mt_tset_schedule() or mt_tset_start(). NULL on ENOMEM or if
 * `added` refused it. A PID already watched returns its target. */
mt_tset_target_t *mt_tset_add(mt_tset_t *s, int pid, uint64_t start_time,
                              unsigned flags);

/* Stops reading t and frees it (`retired` runs first). */
void mt_tset_remove(mt_tset_t *s, mt_tset_target_t *t);

/* Timed: reads t in ms milliseconds, then every interval. */
void mt_tset_schedule(mt_tset_t *s, mt_tset_target_t *t, uint64_t ms);

/* Timed: reads every target now and starts the rescan timer if
 * rescan_min_ms asks for one. */
void mt_tset_start(mt_tset_t *s);

/* No more timed reads or rescans (reads on their way still report). */
void mt_tset_stop(mt_tset_t *s);

/* A new -d: healthy targets are next read one interval from now (failing
 * ones keep their back-off), the rescan timer follows. */
void mt_tset_set_interval(mt_tset_t *s, uint64_t interval_ms);

/* Asks every target not gone at once for req (NULL: the snapshot only;
 * a hung target costs one timeout for all); `ok` is cleared on every
 * target first. Returns how many reads started: `quiet` runs when they
 * have all reported, and not at all when none started. */
size_t mt_tset_fetch_all(mt_tset_t *s, const mt_tset_req_t *req);

/* Lists the attachable processes, connecting to none: a new one is a
 * candidate, which the owner does not see until its first read (the
 * probe: at once when timed, else at the next mt_tset_fetch_all(), which
 * counts it among the reads it started) has answered or failed as an
 * agent in trouble would; then `added` runs, and its snapshot or failure
 * follows. One whose socket refuses connections, is served by another
 * process, or has gone, is dropped unseen (and probed again at the next
 * listing if it is still listed). A gone target whose PID now names
 * another process is replaced, and the targets not found are treated as
 * retire_unlisted says. Returns 0 or the listing's error (the set is
 * unchanged then). */
int mt_tset_rescan(mt_tset_t *s);

/* How many listed processes are still being probed (not yet targets). */
size_t mt_tset_probing(const mt_tset_t *s);

/* The owner says t's process ended (MT_TSET_OWNED): no more reads; a
 * read on its way still reports a snapshot, a failure is dropped. */
void mt_tset_mark_gone(mt_tset_t *s, mt_tset_target_t *t);

/* Nonzero while t has a read on its way. */
int mt_tset_busy(const mt_tset_t *s, const mt_tset_target_t *t);

size_t mt_tset_count(const mt_tset_t *s);
mt_tset_target_t *mt_tset_at(const mt_tset_t *s, size_t i);
mt_tset_target_t *mt_tset_find(const mt_tset_t *s, int pid);

/* The set's clock (the io's), in monotonic nanoseconds. */
uint64_t mt_tset_now_ns(const mt_tset_t *s);

/* The real io: conn.c on `loop` (a uv_loop_t *), uv timers, uv_hrtime,
 * msc_list, msc_remove_stale and /proc. */
void mt_tset_io_uv(mt_tset_io_t *io, void *loop);

#endif
