/*
 * loop_int.h - what the files of memtop's event loop share (see loop.h
 * for the one entry point). Internal to src/memtop: the loop is split by
 * concern, and each file calls the others only through what is declared
 * here.
 *
 *   loop.c      the app's lifecycle: the live view's timers, keys and
 *               signals, quitting and closing, mt_loop_main;
 *   targets.c   the targets: watches, discovery and rescans, reading each
 *               target on its timer, backing off from failing ones;
 *   rounds.c    --once, -n N and ps: rounds of reads and their output;
 *   command.c   `memtop run`: the command, its final snapshot, its exit.
 */
#ifndef MS_MEMTOP_LOOP_INT_H
#define MS_MEMTOP_LOOP_INT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "memstats.h"
#include "common/strbuf.h"
#include "memtop/cli.h"
#include "memtop/conn.h"
#include "memtop/final.h"
#include "memtop/model.h"
#include "memtop/sites_live.h"

typedef enum mt_mode_e { MODE_LIVE, MODE_POLL, MODE_ROUNDS } mt_mode_t;

/* How long `run` keeps trying fast while the command has not opened its
 * socket yet, and how fast. */
#define RUN_FAST_RETRY_MS 20
#define RUN_WAIT_NOTE_S 5.0

typedef struct mt_app_s mt_app_t;

/* One target memtop reads: a process and its connection. The app owns
 * it (app->w); mt_watch_remove() frees it. */
typedef struct mt_watch_s {
  mt_app_t *app;
  int pid;
  uint64_t start_time;
  uid_t uid;
  int have_uid;
  char comm[MS_NAME_MAX];
  mt_conn_t *conn;
  uv_timer_t timer; /* live and poll: when to read next */
  unsigned fails;   /* consecutive failed reads, for the back-off */
  int pending;      /* rounds: a reply is due */
  int ok;           /* the last read succeeded */
  int gone;         /* the process exited: no more reads */
  int said_gone;    /* rounds: its end has been said (said once) */
  int seen;         /* found by the last rescan */
  int is_child;     /* started by `run` */
  char err[512];    /* the last read's error */
  /* Live view: when smaps_rollup was last asked for (uv_hrtime, 0: not
   * since the detail view opened on this process), and the figures of the
   * last reply that had them, carried into the plain snapshots between. */
  uint64_t smaps_asked_ns;
  int have_smaps;
  uint64_t smaps_value[MS_F_KERNEL_SWAP - MS_F_KERNEL_LAZYFREE + 1];
} mt_watch_t;

/* Everything one mt_loop_main() runs on; loop.c makes and frees it. */
struct mt_app_s {
  uv_loop_t loop;
  const mt_opts_t *o;
  mt_mode_t mode;
  int ps;
  mt_model_t model;
  mt_watch_t **w;
  size_t nw, capw;
  int timeout_ms;
  int ui;            /* the live view is on screen */
  uv_timer_t frame;  /* coalesces redraws */
  uv_timer_t tick;   /* live: one per -d, counts -n; rounds: next round */
  uv_timer_t rescan; /* live, watching all: look for new targets */
  uv_timer_t grace;  /* run: escalate signals to a command that lingers */
  uv_poll_t keys;
  uv_signal_t sig[4]; /* SIGINT SIGTERM SIGHUP SIGWINCH */
  int have_keys;
  long ticks, rounds;
  uint64_t round_start_ns;
  size_t pending;
  int nemitted;
  int exit_code;
  int quitting;
  int signalled; /* quitting because of a signal */
  int stdout_broken;
  /* run */
  uv_process_t child;
  int child_running, child_exited, child_status;
  int kill_stage;
  uint64_t child_start_ns, child_exit_ns;
  /* run: the final snapshot (final.h) */
  mt_final_t *final;
  uv_poll_t final_poll;
  uv_timer_t final_wait;
  int have_final_poll;
  int final_resolved; /* the command exited and the channel was settled */
  int final_used;     /* the model holds the command's final snapshot */
  char final_env[2][64];
  char run_log[4096];
  int run_log_fd;
  char sockdir[4096];
  ms__strbuf_t out;
  /* live: the detail view's allocation sites (sites_live.h) */
  mt_sites_live_t *sites_live;
};

/* The -d interval in milliseconds. */
static inline uint64_t mt_delay_ms(const mt_app_t *app) {
  return (uint64_t)(app->model.delay_s * 1000.0 + 0.5);
}

/* How many rounds --once and ps make (-n, else one). */
static inline long mt_rounds_wanted(const mt_app_t *app) {
  return app->o->iterations > 0 ? app->o->iterations : 1;
}

/* ---- loop.c: the app ------------------------------------------------- */

/* Ends the app: stops the loop. While `run`'s command runs, it sees to
 * the command's end first; the loop stops once that end is reported. */
void mt_app_quit(mt_app_t *app);

/* Redraws the live view shortly, once for a burst of snapshots (nothing
 * without the live view). */
void mt_request_draw(mt_app_t *app);

/* ---- targets.c: the targets ------------------------------------------ */

/* Starts watching `pid` (start_time 0: not known yet), with a target in
 * the model and a connection; reads start with mt_watch_schedule() or a
 * round. NULL on ENOMEM. */
mt_watch_t *mt_watch_add(mt_app_t *app, int pid, uint64_t start_time);

/* Stops reading w and frees it; its target stays in the model until
 * mt_model_remove(). */
void mt_watch_remove(mt_app_t *app, mt_watch_t *w);

/* Reads w in `ms` milliseconds (live, poll); then every -d, or later
 * while its reads fail. */
void mt_watch_schedule(mt_watch_t *w, uint64_t ms);

/* Opens the live view on pid's detail view (one process watched). */
void mt_open_detail(mt_model_t *m, int pid);

/* Lists the attachable processes: watches the new ones and retires the
 * vanished ones, as the mode wants. Returns 0 or the discovery error. */
int mt_rescan(mt_app_t *app);

/* Starts (or restarts, after -d changed) the live view's rescan timer. */
void mt_rescan_start(mt_app_t *app);

/* ---- rounds.c: --once, -n N, ps -------------------------------------- */

/* Starts a round: lists the targets again when no PID was named, then
 * asks every target at once. */
void mt_round_start(mt_app_t *app);

/* Every target of the round has answered or failed: prints the round,
 * then starts the next one at the next -d or quits. */
void mt_round_end(mt_app_t *app);

/* Adds one snapshot to the output, as a report or a JSON line. */
void mt_emit_snapshot(mt_app_t *app, const ms_snapshot_t *s);

/* Says "memtop: <message>" on stderr, the formatted message made safe
 * (common/sanitize.h): a message quotes a target's reason, a process
 * name, a path or a variable, any of them a stranger's. */
void mt_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Writes the output gathered so far to stdout. A reader that went away
 * stops the output quietly; other failures are said and exit 1. */
void mt_flush_out(mt_app_t *app);

/* ---- command.c: `memtop run` ----------------------------------------- */

/* Starts the command with the preload and the final-snapshot channel, and
 * watches it. Returns 0, or memtop's exit status after saying why on
 * stderr (127: not found, 126: not started, 1: anything else). */
int mt_command_start(mt_app_t *app);

/* The command's name, for messages: its argv[0] without the directory. */
const char *mt_command_name(const mt_app_t *app);

/* How the command ended, in words ("exited with status 3"). */
void mt_command_exit_words(const mt_app_t *app, char *buf, size_t len);

/* Gives the command RUN_GRACE_MS (command.c) to exit, then sends it a stronger
 * signal (SIGTERM, then SIGKILL). */
void mt_command_grace(mt_app_t *app);

/* `run --once`: once the command's end is settled and no read is in
 * flight, prints its final (or last) snapshot and quits; else nothing. */
void mt_command_poll_finish(mt_app_t *app);

/* Closes memtop's end of the final-snapshot channel (the descriptor goes
 * when the loop has closed the poll handle). */
void mt_command_close_channel(mt_app_t *app);

#endif
