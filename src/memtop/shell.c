/*
 * shell.c - memtop's application shell (see shell.h): the loop, the
 * signals, the timeout policy and the target set, made and closed in one
 * order for every mode.
 */
#include "memtop/shell.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "memstats.h"
#include "client/client.h"

static const int signums[] = {SIGINT, SIGTERM, SIGHUP, SIGWINCH};
#define NSIGS (sizeof signums / sizeof signums[0])

struct mt_shell_s {
  uv_loop_t loop;
  const mt_opts_t *o;
  const mt_mode_t *mode;
  void *self;
  mt_tset_t *set;
  uv_signal_t sig[NSIGS]; /* MT_SIG_INT << i */
  int quitting;
  int exit_code, have_exit_code; /* mt_shell_exit() */
  char sockdir[4096];
};

uv_loop_t *mt_shell_loop(mt_shell_t *sh) {
  return &sh->loop;
}

const mt_opts_t *mt_shell_opts(const mt_shell_t *sh) {
  return sh->o;
}

const char *mt_shell_sockdir(const mt_shell_t *sh) {
  return sh->sockdir;
}

mt_tset_t *mt_shell_set(const mt_shell_t *sh) {
  return sh->set;
}

int mt_shell_quitting(const mt_shell_t *sh) {
  return sh->quitting;
}

void mt_shell_exit(mt_shell_t *sh, int code) {
  sh->exit_code = code;
  sh->have_exit_code = 1;
}

void mt_shell_stop(mt_shell_t *sh) {
  sh->quitting = 1;
  if (sh->set != NULL)
    mt_tset_stop(sh->set);
  uv_stop(&sh->loop);
}

void mt_shell_quit(mt_shell_t *sh) {
  sh->quitting = 1;
  if (sh->mode->quit != NULL)
    sh->mode->quit(sh->self);
  else
    mt_shell_stop(sh);
}

static void signal_cb(uv_signal_t *h, int signum) {
  mt_shell_t *sh = h->data;

  if (sh->mode->signal != NULL) {
    sh->mode->signal(sh->self, signum);
    return;
  }
  mt_shell_exit(sh, 128 + signum);
  mt_shell_quit(sh);
}

/* The shell's defaults for the set's options (see mt_shell_setup_t). */
static void defaults(const mt_shell_t *sh, mt_shell_setup_t *su) {
  memset(su, 0, sizeof *su);
  su->set.interval_ms = (uint64_t)(sh->o->delay_s * 1000.0 + 0.5);
  su->set.backoff_max_ms = (uint64_t)(MT_BACKOFF_MAX_S * 1000);
  su->set.timeout_ms = sh->o->timeout_ms;
  su->set.keep_gone_ms = (uint64_t)(MT_EXITED_KEEP_S * 1000);
}

/* The set, with the PIDs named on the command line; none for a mode that
 * wants none. Returns 0 or 1 (out of memory, said). */
static int make_set(mt_shell_t *sh, const mt_shell_setup_t *su) {
  const mt_opts_t *o = sh->o;
  mt_tset_io_t io;
  uint64_t st;
  size_t i;

  if (su->cbs == NULL)
    return 0;
  mt_tset_io_uv(&io, &sh->loop);
  sh->set = mt_tset_new(&io, &su->set, su->cbs, su->arg);
  if (su->set_out != NULL)
    *su->set_out = sh->set;
  for (i = 0; sh->set != NULL && i < o->npids; i++) {
    st = 0;
    msc_proc_start_time(o->pids[i], &st);
    if (mt_tset_add(sh->set, o->pids[i], st, 0) == NULL)
      break;
  }
  if (sh->set != NULL && i == o->npids)
    return 0;
  fprintf(stderr, "memtop: out of memory\n");
  return 1;
}

static void start_signals(mt_shell_t *sh, unsigned want) {
  size_t i;

  for (i = 0; i < NSIGS; i++)
    if (want & (MT_SIG_INT << i))
      uv_signal_start(&sh->sig[i], signal_cb, signums[i]);
}

static void close_all(mt_shell_t *sh) {
  size_t i;

  if (sh->mode->close != NULL)
    sh->mode->close(sh->self);
  mt_tset_free(sh->set);
  sh->set = NULL;
  for (i = 0; i < NSIGS; i++)
    if (!uv_is_closing((uv_handle_t *)&sh->sig[i]))
      uv_close((uv_handle_t *)&sh->sig[i], NULL);
  /* uv_stop() may have cut the last run short: run until every close
   * callback has run (the memory they free is then freed). */
  do
    uv_run(&sh->loop, UV_RUN_DEFAULT);
  while (uv_loop_alive(&sh->loop));
  uv_loop_close(&sh->loop);
  if (sh->mode->free != NULL)
    sh->mode->free(sh->self);
}

int mt_shell_run(const mt_opts_t *o, const mt_mode_t *mode, void *self) {
  static mt_shell_t shell; /* one per process, as the signals are */
  mt_shell_t *sh = &shell;
  mt_shell_setup_t su;
  size_t i;
  int rc;

  memset(sh, 0, sizeof *sh);
  sh->o = o;
  sh->mode = mode;
  sh->self = self;
  if (msc_socket_dir(sh->sockdir, sizeof sh->sockdir) != 0)
    snprintf(sh->sockdir, sizeof sh->sockdir, "the socket directory");
  if (uv_loop_init(&sh->loop) != 0) {
    fprintf(stderr, "memtop: cannot start the event loop\n");
    return 1;
  }
  signal(SIGPIPE, SIG_IGN);
  for (i = 0; i < NSIGS; i++) {
    uv_signal_init(&sh->loop, &sh->sig[i]);
    sh->sig[i].data = sh;
  }
  defaults(sh, &su);
  rc = mode->setup(self, sh, &su);
  if (rc == 0)
    rc = make_set(sh, &su);
  if (rc == 0) {
    start_signals(sh, su.signals);
    rc = mode->start(self);
  }
  if (rc == 0) {
    if (!sh->quitting)
      uv_run(&sh->loop, UV_RUN_DEFAULT);
    if (sh->have_exit_code)
      rc = sh->exit_code;
    else if (mode->status != NULL)
      rc = mode->status(self);
  }
  if (mode->finish != NULL)
    mode->finish(self, rc);
  close_all(sh);
  return rc;
}
