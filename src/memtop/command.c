/*
 * command.c - `memtop run` on the loop (see command.h): starts the command
 * with the preload, watches it, and settles its end: its exit status, and
 * the final snapshot its library writes on the channel of final_recv.h.
 *
 * The command hands memtop one end of a socket pair (final_recv.h): at
 * normal exit its library writes its final snapshot there, so what memtop
 * shows at the end is the command's last state, not a poll up to -d old.
 * A command killed by a signal (or ending with _exit) cannot write it:
 * then the last poll stands, and memtop says so.
 *
 * On screen, quitting while the command runs asks (keys.c): stop it, or
 * detach and leave it running, as a tmux session is left. The command
 * then runs in a session of its own: the terminal's keys and hangup reach
 * memtop only, which passes on the signals it means for the command, and
 * a closed terminal (SIGHUP) detaches rather than kills.
 *
 * The command's whole process tree is followed (issue 21): memtop is a
 * child subreaper (PR_SET_CHILD_SUBREAPER), so a daemon that double-forks
 * is re-parented to memtop rather than to init, and the set takes every
 * attachable process below memtop (tree_root), listed every
 * RUN_RESCAN_MS whatever the -d. memtop reaps what is re-parented to it
 * (SIGCHLD). The command's exit is not the end while a descendant that
 * loaded the library lives: `run` ends when the command and all of those
 * have ended, with the command's exit status. A process of the tree that
 * maps the preload but has no agent (a forked child that has not allocated
 * since the fork: nginx's master and idle workers) is woken, once
 * (wake.h).
 */
#include "memtop/command.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include "memstats.h"
#include "client/client.h"
#include "common/sockdir.h"
#include "memtop/live.h"
#include "memtop/run.h"
#include "memtop/tree.h"
#include "memtop/wake.h"
#include "targets/final_recv.h"
#include "tui/model.h"

extern char **environ;

/* How long a command gets to exit after memtop asked it to, before the
 * next, stronger signal. */
#define RUN_GRACE_MS 5000
/* How long memtop waits, after the command has exited, for its final
 * snapshot or for the end of the channel. The library writes the frame
 * before the process ends, so it is normally there already; the channel
 * only stays open past the exit when a child of the command still holds
 * the inherited descriptor. */
#define RUN_FINAL_WAIT_MS 300
/* How often the command's tree is listed (new workers, a daemon) and
 * what was re-parented to memtop reaped: a worker that lives a few
 * tenths of a second is seen, whatever the -d. One listing is a readdir
 * of the socket directory and a /proc read per socket. */
#define RUN_RESCAN_MS 250
/* The most children of memtop looked at per pass (re-parented orphans). */
#define RUN_CHILDREN_MAX 4096

struct mt_command_s {
  mt_command_cfg_t cfg;
  mt_shell_t *sh;
  uv_loop_t *loop;
  mt_tset_t *set;
  int screen;     /* the live view owns the terminal: output to a file */
  mt_live_t poll; /* `run --once`: the live owner, without a screen */
  int ending;     /* quitting while the command ran: its end is under way */
  int signalled;  /* quitting because of a signal */
  int detached;   /* memtop leaves and the command keeps running */
  char err[512];  /* the words being made */
  uv_process_t child;
  int closing; /* cmd_close() ran: the owner hears nothing more */
  int running, exited, status;
  int kill_stage;
  uint64_t start_ns, exit_ns;
  mt_tset_target_t *target; /* the command's PID in the set */
  uv_timer_t grace;         /* escalate signals to a command that lingers */
  /* The final snapshot (final_recv.h). */
  mt_final_t final;
  uv_poll_t final_poll;
  uv_timer_t final_wait;
  int have_final_poll;
  int resolved; /* the command exited and the channel was settled */
  int used;     /* the model holds the command's final snapshot */
  char final_env[2][64];
  char log[4096];
  int log_fd;
  /* The tree (issue 21). */
  uv_timer_t tree_timer;      /* lists the tree, reaps orphans */
  uv_signal_t chld;           /* SIGCHLD: an orphan ended */
  int subreaper;              /* prctl(PR_SET_CHILD_SUBREAPER) took */
  int printed;                /* `run --once`: the end was printed */
  char preload_name[256];     /* the preload's file name, as in /proc maps */
  mt_wake_t *wake;            /* wakes its idle processes (NULL: ENOMEM) */
  mt_wake_fails_t wake_fails; /* those that could not be, on the status */
};

static void settled(mt_command_t *c);
static void poll_check(mt_command_t *c);
static const mt_mode_t poll_mode;
static void cmd_end(mt_command_t *c, int terminate);

/* ---- what it is ------------------------------------------------------ */

static const char *cmd_name(const mt_command_t *c) {
  const char *slash;
  char *const *argv = c->cfg.o->run_argv;

  if (argv == NULL || argv[0] == NULL)
    return "command";
  slash = strrchr(argv[0], '/');
  return slash != NULL ? slash + 1 : argv[0];
}

static void cmd_exit_words(const mt_command_t *c, char *buf, size_t len) {
  if (c->status > 128)
    snprintf(buf, len, "exited: killed by signal %d (%s)", c->status - 128,
             strsignal(c->status - 128));
  else
    snprintf(buf, len, "exited with status %d", c->status);
}

static int cmd_running(const mt_command_t *c) {
  return c->running;
}

static int cmd_exited(const mt_command_t *c) {
  return c->exited;
}

static int cmd_status(const mt_command_t *c) {
  return c->status;
}

static double cmd_age_s(const mt_command_t *c) {
  return (double)(uv_hrtime() - c->start_ns) / 1e9;
}

/* The model's view of the command, or NULL. */
static mt_target_t *command_target(const mt_command_t *c) {
  return c->target != NULL ? mt_model_find(c->cfg.model, c->target->pid) : NULL;
}

/* Seconds between the model's last snapshot of the command and its exit. */
static double last_poll_before_exit(const mt_command_t *c,
                                    const mt_target_t *t) {
  return c->exit_ns > t->snap.time_mono_ns && t->snap.time_mono_ns != 0
             ? (double)(c->exit_ns - t->snap.time_mono_ns) / 1e9
             : 0;
}

/* ---- the tree --------------------------------------------------------- */

/* memtop's children (the command, and what was re-parented to memtop
 * since it became a subreaper), from /proc/self/task/TID/children: an
 * orphan is re-parented to one of memtop's threads. Returns how many
 * PIDs were put in out (at most cap). */
static size_t own_children(int *out, size_t cap) {
  char path[64], buf[4096];
  struct dirent *e;
  size_t n = 0;
  DIR *d = opendir("/proc/self/task");

  if (d == NULL)
    return 0;
  while (n < cap && (e = readdir(d)) != NULL) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9' || strlen(e->d_name) > 12)
      continue;
    /* The name is at most 12 digits (checked above); the precision says
     * so to the compiler too, which cannot see the check. */
    snprintf(path, sizeof path, "/proc/self/task/%.12s/children", e->d_name);
    FILE *f = fopen(path, "re");
    if (f == NULL)
      continue;
    /* "PID PID ... ": read a word at a time, bounded by cap. */
    while (n < cap && fscanf(f, "%4095s", buf) == 1) {
      char *end;
      long pid = strtol(buf, &end, 10);
      if (*end == '\0' && pid > 0 && pid <= 0x3fffffff)
        out[n++] = (int)pid;
    }
    fclose(f);
  }
  closedir(d);
  return n;
}

/* Reaps the children that ended, but the command while libuv has not
 * reaped it (its exit callback needs its status): the others are orphans
 * re-parented to memtop, whose status is no one's. */
static void reap_orphans(mt_command_t *c) {
  int pids[RUN_CHILDREN_MAX], st;
  size_t n = own_children(pids, RUN_CHILDREN_MAX);

  for (size_t i = 0; i < n; i++)
    if (!(c->running && pids[i] == c->child.pid))
      waitpid(pids[i], &st, WNOHANG);
}

/* Whether pid, a child of memtop, keeps the tree alive: it has the
 * preload mapped (its /proc/PID/maps names it: a process forked by the
 * command, whose socket may not be listed yet), or it has no mapping at
 * all: it is ending, or has ended and is not reaped yet. An ending
 * process drops its memory before the kernel re-parents its children
 * (do_exit: exit_mm, then exit_notify), so the middle process of a
 * daemon's double fork, caught between the two, shows no mapping while
 * the daemon still names it as its parent; a moment later the daemon is
 * memtop's, and the check after the middle one is reaped sees it
 * (test_trees test_run_daemon: memtop ended with the daemon re-parented
 * to init, 4 runs in 30 at load 9-12). */
static int keeps_tree(const mt_command_t *c, int pid) {
  char path[64], line[1024];
  int found = 0;
  long lines = 0;
  FILE *f;

  if (c->preload_name[0] == '\0')
    return 0;
  snprintf(path, sizeof path, "/proc/%d/maps", pid);
  f = fopen(path, "re");
  if (f == NULL)
    return 0;
  /* Bounded: a process with millions of mappings costs a few reads. */
  while (!found && lines < 100000 && fgets(line, sizeof line, f) != NULL) {
    lines++;
    found = strstr(line, c->preload_name) != NULL;
  }
  /* Empty: no process that runs has no mapping (a read error aside). */
  if (lines == 0 && !ferror(f))
    found = 1;
  fclose(f);
  return found;
}

/* Whether a child of memtop other than the command has the preload
 * mapped (an orphan re-parented to memtop, a daemon, whose socket is not
 * there yet) or is ending (keeps_tree). The children are found by each
 * process's PPid (every PID of /proc read), not by
 * /proc/self/task/TID/children, whose walk may skip a child while children come
 * and go (proc(5)): this decides the end, and runs only when no target of the
 * tree is left. */
static int library_child(const mt_command_t *c) {
  int self = (int)getpid(), found = 0;
  struct dirent *e;
  DIR *d = opendir("/proc");

  if (d == NULL)
    return 0;
  while (!found && (e = readdir(d)) != NULL) {
    char *end;
    long pid = strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0 || pid > 0x3fffffff ||
        (c->running && pid == c->child.pid))
      continue;
    if (msc_proc_ppid((int)pid) == self && keeps_tree(c, (int)pid))
      found = 1;
  }
  closedir(d);
  return found;
}

/* Whether the command's tree still runs the library, the command aside:
 * a target of the set not gone, a listed process being probed, or a
 * child of memtop with the preload mapped or ending (library_child). */
static int tree_alive(const mt_command_t *c) {
  for (size_t i = 0; i < mt_tset_count(c->set); i++) {
    const mt_tset_target_t *st = mt_tset_at(c->set, i);
    if (st != c->target && !st->gone)
      return 1;
  }
  if (mt_tset_probing(c->set) > 0)
    return 1;
  return library_child(c);
}

/* `run --once`: every process of the tree memtop read, in tree order,
 * each with its parent (JSON "ppid"); the command's figures are its
 * final ones, the others' their last poll's. */
static void print_tree(mt_command_t *c, mt_out_t *out) {
  size_t n = mt_tset_count(c->set), k = 0;
  mt_tset_target_t **v = calloc(n + 1, sizeof *v);

  if (v == NULL) {
    out->buf.oom = 1;
    return;
  }
  for (size_t i = 0; i < n; i++) {
    const mt_target_t *t =
        mt_model_find(c->cfg.model, mt_tset_at(c->set, i)->pid);
    if (t != NULL && t->have_snapshot)
      v[k++] = mt_tset_at(c->set, i);
  }
  mt_tree_order(v, k, NULL);
  for (size_t i = 0; i < k; i++)
    mt_out_snapshot_who(out, &mt_model_find(c->cfg.model, v[i]->pid)->snap,
                        &v[i]->id, NULL, NULL, NULL);
  free(v);
}

static void tree_cb(uv_timer_t *timer) {
  mt_command_t *c = timer->data;

  reap_orphans(c);
  if (!mt_shell_quitting(c->sh)) {
    /* Woken first: the listing then finds their sockets. */
    if (c->wake != NULL)
      mt_wake_pass(c->wake, c->set);
    mt_tset_rescan(c->set);
  }
  if (!c->screen)
    poll_check(c);
}

/* A process of the tree that could not be woken: said once, on the
 * status line or on stderr. */
static void wake_say(void *arg, int pid, const char *words) {
  mt_command_t *c = arg;

  if (c->screen)
    mt_wake_fail_status(&c->wake_fails, pid, words, c->cfg.model->status,
                        sizeof c->cfg.model->status);
  else
    mt_warn("PID %d of the tree has no agent and was not woken: %s", pid,
            words);
}

static void chld_cb(uv_signal_t *h, int signum) {
  (void)signum;
  reap_orphans(h->data);
}

/* ---- its end --------------------------------------------------------- */

static int cmd_poll_finish(mt_command_t *c, mt_out_t *out) {
  const mt_target_t *t;

  if (c->target == NULL || !c->resolved)
    return 0;
  /* A reply on its way is newer than the last poll. */
  if (!c->used && mt_tset_busy(c->set, c->target))
    return 0;
  t = command_target(c);
  if (t != NULL && t->have_snapshot) {
    if (!c->used)
      mt_warn("PID %d (%s) sent no final figures (a process killed "
              "by a signal cannot): the report is from the last poll, "
              "%.1f s before it ended",
              c->target->pid, t->comm[0] ? t->comm : cmd_name(c),
              last_poll_before_exit(c, t));
  } else {
    mt_warn("PID %d (%s) exited before memtop could read its "
            "statistics%s%s",
            c->target->pid, cmd_name(c), t != NULL && t->error[0] ? ": " : "",
            t != NULL && t->error[0] ? t->error : "");
  }
  print_tree(c, out);
  mt_out_flush(out);
  c->printed = 1;
  return 1;
}

static void final_poll_closed(uv_handle_t *h) {
  mt_command_t *c = h->data;

  mt_final_close(&c->final);
}

/* Closes memtop's end of the channel: the poll handle first, then (in its
 * close callback) the descriptor, so that the loop never watches a number
 * that may already name something else. */
static void close_channel(mt_command_t *c) {
  if (c->have_final_poll) {
    c->have_final_poll = 0;
    if (!uv_is_closing((uv_handle_t *)&c->final_poll))
      uv_close((uv_handle_t *)&c->final_poll, final_poll_closed);
  } else {
    mt_final_close(&c->final);
  }
}

/* The command has exited and its final snapshot arrived, or cannot come
 * any more: put it in the model (or say the figures are the last poll's)
 * and tell the owner. Runs once. */
static void final_resolve(mt_command_t *c) {
  mt_target_t *t = command_target(c);
  mt_model_t *m = c->cfg.model;
  char words[256];
  size_t n;

  if (c->resolved)
    return;
  c->resolved = 1;
  uv_timer_stop(&c->final_wait);
  close_channel(c);
  cmd_exit_words(c, words, sizeof words);
  n = strlen(words);
  if (t != NULL && c->final.have) {
    m->now_mono_ns = uv_hrtime();
    mt_model_update(m, t, &c->final.snap);
    c->used = 1;
    snprintf(words + n, sizeof words - n, "; final figures");
  } else if (t != NULL && t->have_snapshot) {
    snprintf(words + n, sizeof words - n,
             "; figures from the last poll, %.1f s before (no final "
             "figures: killed by a signal?)",
             last_poll_before_exit(c, t));
  }
  if (t != NULL)
    mt_model_fail(m, t, 1, words);
  if (!c->closing)
    settled(c);
}

/* Reads the final-snapshot channel; once the command has exited, settles
 * its end as soon as the snapshot is there or the channel is closed. */
static void final_read(mt_command_t *c) {
  int done = mt_final_drain(&c->final);

  if (done && c->have_final_poll)
    uv_poll_stop(&c->final_poll);
  if (c->exited && (done || c->final.have))
    final_resolve(c);
}

static void final_poll_cb(uv_poll_t *h, int status, int events) {
  (void)status;
  (void)events;
  final_read(h->data);
}

static void final_wait_cb(uv_timer_t *timer) {
  final_resolve(timer->data);
}

static void child_exited(uv_process_t *p, int64_t exit_status,
                         int term_signal) {
  mt_command_t *c = p->data;
  mt_target_t *t;
  char words[128];

  c->running = 0;
  c->exited = 1;
  c->exit_ns = uv_hrtime();
  c->status = mt_run_exit_status((long)exit_status, term_signal);
  c->cfg.model->run_pid = 0; /* nothing left to ask about at quit */
  uv_close((uv_handle_t *)p, NULL);
  uv_timer_stop(&c->grace);
  if (c->target != NULL) {
    mt_tset_mark_gone(c->set, c->target);
    t = command_target(c);
    cmd_exit_words(c, words, sizeof words);
    if (t != NULL)
      mt_model_fail(c->cfg.model, t, 1, words);
  }
  /* The frame was written before the process ended: it is in the socket
   * now, unless there was none. Wait a little only when the channel is
   * still open without it (a child of the command holds it). */
  final_read(c);
  if (!c->resolved) {
    if (c->final.fd < 0)
      final_resolve(c);
    else
      uv_timer_start(&c->final_wait, final_wait_cb, RUN_FINAL_WAIT_MS, 0);
  }
}

/* Signals the command. On screen it leads a session and process group of
 * its own (setsid): the whole group is signalled, as a terminal signals
 * its foreground job, so that what a shell command started (sh -c
 * 'sqlite3 db < FILE') stops with it; daemons, in sessions of their own,
 * are not reached. */
static void cmd_signal(mt_command_t *c, int signum) {
  pid_t pid = (pid_t)c->child.pid;

  if (c->screen && pid > 0 && getpgid(pid) == pid && kill(-pid, signum) == 0)
    return;
  uv_process_kill(&c->child, signum);
}

/* The command did not exit after it was asked to: ask harder. */
static void grace_cb(uv_timer_t *t) {
  mt_command_t *c = t->data;

  if (!c->running)
    return;
  c->kill_stage++;
  cmd_signal(c, c->kill_stage >= 2 ? SIGKILL : SIGTERM);
  cmd_end(c, 0);
}

static void cmd_end(mt_command_t *c, int terminate) {
  if (terminate && c->running) {
    c->kill_stage = 1;
    cmd_signal(c, SIGTERM);
  }
  uv_timer_start(&c->grace, grace_cb, RUN_GRACE_MS, 0);
}

static void cmd_kill(mt_command_t *c, int signum) {
  if (c->running)
    cmd_signal(c, signum);
}

/* ---- starting it ----------------------------------------------------- */

mt_command_t *mt_command_new(const mt_command_cfg_t *cfg) {
  mt_command_t *c = calloc(1, sizeof *c);

  if (c == NULL)
    return NULL;
  c->cfg = *cfg;
  c->screen = cfg->inner != NULL;
  if (cfg->inner == NULL) {
    c->cfg.inner = &poll_mode;
    c->cfg.inner_self = c;
  }
  c->log_fd = -1;
  mt_final_init(&c->final, 0);
  return c;
}

/* The final-snapshot channel, its variables added to env. Without it (no
 * descriptors left) the command still runs, and the end shows the last
 * poll. Returns the command's end, a descriptor, or -1 as open(2) does
 * when there is none (not an error: the command runs without it). */
static int open_channel(mt_command_t *c, char **env) {
  int rc, child_fd = -1;

  rc = mt_final_open(&c->final, &child_fd);
  if (rc == 0 && uv_poll_init(c->loop, &c->final_poll, c->final.fd) == 0) {
    c->have_final_poll = 1;
    c->final_poll.data = c;
    snprintf(c->final_env[0], sizeof c->final_env[0], "MEMSTATS_FINAL_FD=%d",
             MT_FINAL_CHILD_FD);
    snprintf(c->final_env[1], sizeof c->final_env[1], "MEMSTATS_FINAL_PPID=%d",
             (int)getpid());
    mt_run_env_final(env, c->final_env[0], c->final_env[1]);
    return child_fd;
  }
  mt_warn("cannot make the channel for %s's final figures (%s): "
          "the report at its end will be the last poll's",
          cmd_name(c), strerror(rc < 0 ? -rc : EMFILE));
  if (child_fd >= 0)
    close(child_fd);
  mt_final_close(&c->final);
  return -1;
}

/* The command's standard descriptors. The live view owns the terminal:
 * the command reads nothing from it and writes its output to a file that
 * memtop names at exit. Returns 0, or the -errno of the log file's
 * creation after saying why. */
static int set_stdio(mt_command_t *c, uv_stdio_container_t *stdio) {
  const char *tmp = getenv("TMPDIR");
  int i;

  if (!c->screen) {
    for (i = 0; i < 3; i++) {
      stdio[i].flags = UV_INHERIT_FD;
      stdio[i].data.fd = i;
    }
    return 0;
  }
  snprintf(c->log, sizeof c->log, "%s/memtop-run-XXXXXX.log",
           tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
  c->log_fd = mkstemps(c->log, 4);
  if (c->log_fd < 0) {
    int e = errno;
    mt_warn("cannot create %s for the command's output: "
            "%s (set TMPDIR to a writable directory)",
            c->log, strerror(e));
    return -e;
  }
  stdio[0].flags = UV_IGNORE;
  stdio[1].flags = UV_INHERIT_FD;
  stdio[1].data.fd = c->log_fd;
  stdio[2].flags = UV_INHERIT_FD;
  stdio[2].data.fd = c->log_fd;
  return 0;
}

/* Starts the command; libuv reaps it through its own SIGCHLD handler (a
 * uv_signal_t inside the loop) and calls child_exited with the status.
 * Returns 0 or a UV_E* code. */
static int spawn(mt_command_t *c, char **env, int child_fd,
                 uv_stdio_container_t *stdio) {
  uv_process_options_t opts;

  memset(&opts, 0, sizeof opts);
  opts.file = c->cfg.o->run_argv[0];
  opts.args = c->cfg.o->run_argv;
  opts.env = env;
  opts.exit_cb = child_exited;
  opts.stdio = stdio;
  opts.stdio_count = 3;
  /* On screen the command has a session of its own (setsid): it reads
   * and writes no terminal, and the terminal's hangup must not kill it
   * behind memtop's back (run_signal says what does). */
  if (c->screen)
    opts.flags |= UV_PROCESS_DETACHED;
  if (child_fd >= 0) {
    /* uv_spawn maps descriptors by index: entry 3 becomes the command's
     * fd 3, inherited across its exec (and its own execs). */
    stdio[MT_FINAL_CHILD_FD].flags = UV_INHERIT_FD;
    stdio[MT_FINAL_CHILD_FD].data.fd = child_fd;
    opts.stdio_count = MT_FINAL_CHILD_FD + 1;
  }
  c->child.data = c;
  return uv_spawn(c->loop, &c->child, &opts);
}

/* The command runs: watch its PID, on the detail view. Returns 0 or 1. */
static int watch_command(mt_command_t *c) {
  uint64_t start_time = 0;
  mt_target_t *t;
  int pid = c->child.pid;

  c->running = 1;
  c->start_ns = uv_hrtime();
  c->final.pid = pid;
  if (c->have_final_poll)
    uv_poll_start(&c->final_poll, UV_READABLE | UV_DISCONNECT, final_poll_cb);
  msc_proc_start_time(pid, &start_time);
  c->target = mt_tset_add(c->set, pid, start_time, MT_TSET_OWNED);
  if (c->target == NULL) {
    fprintf(stderr, "memtop: out of memory\n");
    uv_process_kill(&c->child, SIGTERM);
    return 1;
  }
  snprintf(c->target->comm, sizeof c->target->comm, "%s", cmd_name(c));
  mt_open_detail(c->cfg.model, pid);
  t = command_target(c);
  if (t != NULL)
    snprintf(t->comm, sizeof t->comm, "%s", cmd_name(c));
  if (c->screen) {
    c->cfg.model->run_pid = pid;
    snprintf(c->cfg.model->status, sizeof c->cfg.model->status,
             "%s (PID %d) output: %.160s", cmd_name(c), pid, c->log);
  }
  mt_tset_schedule(c->set, c->target, RUN_FAST_RETRY_MS);
  return 0;
}

static int cmd_start(mt_command_t *c) {
  char exe[4096], preload[4096], err[1024];
  uv_stdio_container_t stdio[MT_FINAL_CHILD_FD + 1];
  char **env = NULL;
  ssize_t n;
  int rc, child_fd = -1;

  n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  exe[n > 0 ? n : 0] = '\0';
  if (mt_run_find_preload(exe, getenv("MEMTOP_PRELOAD"), preload,
                          sizeof preload, err, sizeof err) != 0) {
    mt_warn("%s", err);
    rc = 1;
    goto out;
  }
  {
    const char *slash = strrchr(preload, '/');
    snprintf(c->preload_name, sizeof c->preload_name, "%.255s",
             slash != NULL ? slash + 1 : preload);
  }
  env = mt_run_env(environ, preload);
  if (env == NULL) {
    fprintf(stderr, "memtop: out of memory\n");
    rc = 1;
    goto out;
  }
  child_fd = open_channel(c, env);
  memset(stdio, 0, sizeof stdio);
  if (set_stdio(c, stdio) != 0) {
    rc = 1;
    goto out;
  }
  rc = spawn(c, env, child_fd, stdio);
  if (rc != 0) {
    /* The handle is initialised even when the spawn fails (libuv >= 1.24):
     * closed, so that the loop can be closed and its memory freed. */
    uv_close((uv_handle_t *)&c->child, NULL);
    mt_warn("cannot start %s: %s%s", c->cfg.o->run_argv[0], uv_strerror(rc),
            rc == UV_ENOENT   ? " (check the name, or give a path)"
            : rc == UV_EACCES ? " (a directory, or a file without execute "
                                "permission: name the program, or chmod +x "
                                "it)"
                              : "");
    rc = rc == UV_ENOENT ? 127 : 126;
    goto out;
  }
  rc = watch_command(c);
out:
  mt_run_env_free(env);
  /* Only the command holds its end now: its end of file is ours. */
  if (child_fd >= 0)
    close(child_fd);
  return rc;
}

/* ---- closing --------------------------------------------------------- */

static void cmd_say_log(mt_command_t *c) {
  struct stat st;

  if (c->detached) {
    /* Its output is still to come: the file stays, even empty. */
    mt_warn("left %s (PID %d) running: its output goes to %s; stop it with "
            "`kill %d`",
            cmd_name(c), c->child.pid, c->log_fd >= 0 ? c->log : "its terminal",
            c->child.pid);
    if (c->log_fd >= 0)
      close(c->log_fd);
    c->log_fd = -1;
    return;
  }
  if (c->log_fd < 0)
    return;
  if (fstat(c->log_fd, &st) == 0 && st.st_size == 0)
    unlink(c->log);
  else
    mt_warn("the output of %s is in %s", cmd_name(c), c->log);
  close(c->log_fd);
  c->log_fd = -1;
}

static void close_if_open(uv_handle_t *h) {
  if (h->loop != NULL && !uv_is_closing(h))
    uv_close(h, NULL);
}

static void cmd_close(mt_command_t *c) {
  if (c == NULL)
    return;
  /* The set's targets go with the set: an exit reported while the loop
   * closes touches none of them. */
  c->closing = 1;
  c->target = NULL;
  close_if_open((uv_handle_t *)&c->grace);
  close_if_open((uv_handle_t *)&c->final_wait);
  close_if_open((uv_handle_t *)&c->tree_timer);
  close_if_open((uv_handle_t *)&c->chld);
  close_channel(c);
  if (c->running && c->detached) {
    /* Left running: memtop stops watching for its end, so that the loop
     * can close. Its library sees another parent by the time it ends,
     * and writes no final snapshot (final_send.c). */
    close_if_open((uv_handle_t *)&c->child);
  } else if (c->running) {
    /* Only on an error path: the command would outlive memtop. */
    uv_process_kill(&c->child, SIGKILL);
  }
}

void mt_command_free(mt_command_t *c) {
  if (c == NULL)
    return;
  /* The poll handle is closed: the descriptor may go now. */
  mt_final_close(&c->final);
  mt_wake_free(c->wake);
  free(c);
}

/* ---- the mode: wrapping the owner it watches through ------------------ */

/* `run --once`: once the command's end is settled, print it and quit. */
static void poll_check(mt_command_t *c) {
  if (!mt_shell_quitting(c->sh) && cmd_exited(c) && !c->printed &&
      (c->signalled || !tree_alive(c)) && cmd_poll_finish(c, c->cfg.out))
    mt_shell_quit(c->sh);
}

/* `run --once`'s live owner: a target changed. */
static void poll_changed(void *arg) {
  poll_check(arg);
}

/* `run --once`'s own inner mode: the live owner's timed reads, without a
 * screen; `self` is the command. */
static int poll_setup(void *self, mt_shell_t *sh, mt_shell_setup_t *su) {
  mt_command_t *c = self;

  (void)sh;
  c->poll =
      (mt_live_t){.model = c->cfg.model, .changed = poll_changed, .arg = c};
  c->cfg.live = &c->poll;
  su->set.timed = 1;
  su->cbs = &mt_live_cbs;
  su->arg = &c->poll;
  su->set_out = &c->poll.set;
  su->signals = MT_SIG_PLAIN;
  return 0;
}

static int poll_start(void *self) {
  (void)self;
  return 0;
}

static const mt_mode_t poll_mode = {.setup = poll_setup, .start = poll_start};

/* The command's end is settled: the owner shows it (`run --once` prints
 * it), and memtop stops if it was only waiting for it. */
static void settled(mt_command_t *c) {
  if (mt_shell_quitting(c->sh))
    mt_shell_stop(c->sh);
  mt_live_changed(c->cfg.live);
}

/* Until the command's library has opened its socket, a missing socket is
 * expected: try again soon, and say so if it takes long. */
static uint64_t command_not_yet(mt_command_t *c, mt_target_t *t, int pid) {
  double waited = cmd_age_s(c);

  if (waited <= RUN_WAIT_NOTE_S)
    return RUN_FAST_RETRY_MS;
  snprintf(c->err, sizeof c->err,
           "PID %d (%s) has not opened its memstats socket after %.0f s: "
           "the preload is not in effect (a static or setuid program, "
           "or MEMSTATS_AGENT=0?)",
           pid, cmd_name(c), waited);
  mt_model_fail(c->cfg.model, t, 0, c->err);
  return (uint64_t)(c->cfg.model->delay_s * 1000.0 + 0.5);
}

/* The set's owner: the live owner's table, but for the command's PID
 * whose socket is not there yet. */
static int run_added(void *arg, mt_tset_target_t *st) {
  mt_command_t *c = arg;

  return mt_live_cbs.added(c->cfg.live, st);
}

static void run_retired(void *arg, mt_tset_target_t *st) {
  mt_command_t *c = arg;

  mt_live_cbs.retired(c->cfg.live, st);
}

static int run_request(void *arg, mt_tset_target_t *st, mt_tset_req_t *req) {
  mt_command_t *c = arg;

  return mt_live_cbs.request(c->cfg.live, st, req);
}

static void run_profile(void *arg, mt_tset_target_t *st, mt_tset_profile_t *p) {
  mt_command_t *c = arg;

  mt_live_cbs.profile(c->cfg.live, st, p);
}

static void run_snapshot(void *arg, mt_tset_target_t *st,
                         const ms_snapshot_t *s) {
  mt_command_t *c = arg;

  mt_live_cbs.snapshot(c->cfg.live, st, s);
}

static uint64_t run_failure(void *arg, mt_tset_target_t *st, int status,
                            const char *msg) {
  mt_command_t *c = arg;
  mt_target_t *t = mt_model_find(c->cfg.model, st->pid);
  uint64_t wait;

  if (!(st->flags & MT_TSET_OWNED) || t == NULL || t->have_snapshot ||
      (status != MS_ENOENT && status != MS_ECONNREFUSED))
    return mt_live_cbs.failure(c->cfg.live, st, status, msg);
  c->cfg.model->now_mono_ns = mt_tset_now_ns(c->set);
  wait = command_not_yet(c, t, st->pid);
  mt_live_changed(c->cfg.live);
  return wait;
}

static void run_gone(void *arg, mt_tset_target_t *st, int status,
                     const char *msg) {
  mt_command_t *c = arg;

  mt_live_cbs.gone(c->cfg.live, st, status, msg);
}

static void run_quiet(void *arg) {
  mt_command_t *c = arg;

  mt_live_cbs.quiet(c->cfg.live);
}

static const mt_tset_cbs_t run_cbs = {
    .added = run_added,
    .retired = run_retired,
    .request = run_request,
    .profile = run_profile,
    .snapshot = run_snapshot,
    .failure = run_failure,
    .gone = run_gone,
    .quiet = run_quiet,
};

/* The command's library refuses to serve from a socket directory that
 * is not safe (sockdir.h), and memtop would wait for a socket that never
 * comes: the same rule, checked before the command starts. A directory
 * not there yet is the library's to make. Returns 0, or 1 after saying
 * why and what to do. */
static int check_sockdir(mt_command_t *c, mt_shell_t *sh) {
  const char *dir = mt_shell_sockdir(sh), *why = NULL;
  char fix[512];

  if (MSC_SOCKDIR_TOO_LONG(dir)) {
    mt_warn("not starting %s: the socket directory %s is too long (%zu "
            "bytes): its socket there would not fit in a Unix socket's %d, "
            "so its library could not serve and memtop could never read "
            "it; set MEMSTATS_DIR to a shorter directory",
            cmd_name(c), dir, strlen(dir), MSC_PATH_MAX - 1);
    return 1;
  }
  if (dir[0] != '/' || ms__sockdir_check(dir, geteuid(), &why) != MS_EUNSAFE)
    return 0;
  ms__sockdir_fix(dir, geteuid(), fix, sizeof fix);
  mt_warn("not starting %s: %s: %s, so its library would refuse to serve "
          "there and memtop could never read it; %s",
          cmd_name(c), dir,
          why != NULL ? why : "the socket directory is not safe", fix);
  return 1;
}

static int run_setup(void *self, mt_shell_t *sh, mt_shell_setup_t *su) {
  mt_command_t *c = self;
  int rc;

  c->sh = sh;
  c->loop = mt_shell_loop(sh);
  uv_timer_init(c->loop, &c->grace);
  uv_timer_init(c->loop, &c->final_wait);
  uv_timer_init(c->loop, &c->tree_timer);
  uv_signal_init(c->loop, &c->chld);
  c->grace.data = c->final_wait.data = c->tree_timer.data = c;
  c->chld.data = c;
  if (check_sockdir(c, sh) != 0)
    return 1;
  rc = c->cfg.inner->setup(c->cfg.inner_self, sh, su);
  if (rc != 0)
    return rc;
  /* The tree: every attachable process below memtop, which the command
   * and (memtop being their subreaper) its daemons are. */
  su->set.tree_root = (int)getpid();
  c->cfg.model->tree = 1;
  /* The inner owner's table, wrapped. */
  su->cbs = &run_cbs;
  su->arg = c;
  return 0;
}

static int run_start(void *self) {
  mt_command_t *c = self;
  int rc;

  rc = c->cfg.inner->start(c->cfg.inner_self);
  if (rc != 0)
    return rc;
  c->set = mt_shell_set(c->sh);
  /* A daemon's double fork re-parents it to memtop, not to init: it
   * stays in the tree, and its end is reaped here. */
  c->subreaper = prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0;
  if (!c->subreaper)
    mt_warn("cannot follow daemons the command starts (prctl "
            "PR_SET_CHILD_SUBREAPER: %s): its forked workers are followed",
            strerror(errno));
  uv_signal_start(&c->chld, chld_cb, SIGCHLD);
  c->wake = mt_wake_new((int)getpid(), wake_say, c);
  uv_timer_start(&c->tree_timer, tree_cb, RUN_RESCAN_MS, RUN_RESCAN_MS);
  return cmd_start(c);
}

static void run_signal(void *self, int signum) {
  mt_command_t *c = self;

  if (signum == SIGWINCH) {
    if (c->cfg.inner->signal != NULL)
      c->cfg.inner->signal(c->cfg.inner_self, signum);
    return;
  }
  if (signum == SIGHUP && c->screen && cmd_running(c) && !c->ending) {
    /* The terminal closed: there is nobody left to ask, and the command
     * is left running as `d` leaves it (its own session kept the hangup
     * from it). */
    c->cfg.model->detach = 1;
    mt_shell_exit(c->sh, 128 + signum);
    mt_shell_quit(c->sh);
    return;
  }
  if (cmd_running(c)) {
    /* Without a screen the command shares memtop's terminal: a Ctrl-C
     * there reached it too (same process group). Any other signal, and
     * every one on screen (the command has a session of its own), is
     * passed on. Then memtop waits for the command, to report its end
     * and return its status. */
    if (!(signum == SIGINT && !c->screen && isatty(STDIN_FILENO)))
      cmd_kill(c, signum);
    if (!c->screen) {
      /* ... and not for its daemons, which the signal did not reach. */
      c->signalled = 1;
      return;
    }
  }
  if (!cmd_running(c) && !cmd_exited(c))
    mt_shell_exit(c->sh, c->screen && signum == SIGINT ? 0 : 128 + signum);
  c->signalled = 1;
  mt_shell_quit(c->sh);
}

/* While the command runs, memtop sees to its end first; the loop stops
 * once that end is settled. Leaving the view of a running command ends
 * the command, as quitting `watch` or `perf top` ends what they
 * started, unless the user chose to detach (the model's `detach`, from
 * the quit prompt or a closed terminal): then memtop leaves at once and
 * the command runs on. */
static void run_quit(void *self) {
  mt_command_t *c = self;

  if (!cmd_running(c)) {
    /* `run --once` stopped while following the command's daemons: what
     * was read is printed all the same. */
    if (!c->screen && cmd_exited(c) && !c->printed)
      cmd_poll_finish(c, c->cfg.out);
    mt_shell_stop(c->sh);
    return;
  }
  if (c->ending)
    return;
  if (c->screen && c->cfg.model->detach) {
    c->detached = 1;
    mt_shell_stop(c->sh);
    return;
  }
  c->ending = 1;
  mt_tset_stop(c->set);
  cmd_end(c, c->screen && !c->signalled);
}

static int run_status(void *self) {
  mt_command_t *c = self;

  if (c->cfg.out->failed)
    return 1;
  return cmd_exited(c) ? cmd_status(c) : 0;
}

static void run_finish(void *self, int rc) {
  mt_command_t *c = self;

  if (c->cfg.inner->finish != NULL)
    c->cfg.inner->finish(c->cfg.inner_self, rc);
  cmd_say_log(c);
}

/* The command first: its end, reported while the loop closes, must find
 * no target of the set. */
static void run_close(void *self) {
  mt_command_t *c = self;

  cmd_close(c);
  if (c->cfg.inner->close != NULL)
    c->cfg.inner->close(c->cfg.inner_self);
}

static void run_free(void *self) {
  mt_command_t *c = self;

  if (c->cfg.inner->free != NULL)
    c->cfg.inner->free(c->cfg.inner_self);
}

const mt_mode_t mt_command_mode = {
    .setup = run_setup,
    .start = run_start,
    .signal = run_signal,
    .quit = run_quit,
    .status = run_status,
    .finish = run_finish,
    .close = run_close,
    .free = run_free,
};
