/*
 * loop.c - memtop's modes, chosen from the command line (see loop.h).
 * Each runs in the shell (shell.h), which makes the loop, the signals and
 * the target set; here the modes get the model and the output they share.
 *
 * Reads never block: each target is a connection on the loop with its own
 * request timeout (conn.c). A target that hangs, dies mid-read or answers
 * garbage is marked unreachable with the reason, and the others go on.
 */
#include "memtop/loop.h"

#include <stdio.h>
#include <string.h>

#include "memtop/command.h"
#include "memtop/out.h"
#include "memtop/profile_cmd.h"
#include "memtop/rounds.h"
#include "memtop/liveview.h"
#include "memtop/shell.h"
#include "pprof/debuginfod.h"
#include "tui/model.h"

/* What the modes of one run share, and each mode's state. One per
 * process: a few KiB, not on the stack. */
static struct {
  mt_model_t model;
  mt_out_t out;
  mt_rounds_t rounds;
  mt_liveview_t view;
} app;

/* `run`: the command, watched through the live view, or with --once
 * through its own poll. */
static int run_command(const mt_opts_t *o) {
  mt_command_cfg_t cfg = {.o = o, .model = &app.model, .out = &app.out};
  mt_command_t *cmd;
  int rc;

  if (!o->once) {
    cfg.inner = &mt_liveview_mode;
    cfg.inner_self = &app.view;
    cfg.live = &app.view.live;
  }
  cmd = mt_command_new(&cfg);
  if (cmd == NULL) {
    fprintf(stderr, "memtop: out of memory\n");
    return 1;
  }
  rc = mt_shell_run(o, &mt_command_mode, cmd);
  mt_command_free(cmd);
  return rc;
}

int mt_loop_main(const mt_opts_t *o) {
  int rc;

  /* serve is main.c's: it runs in memtop-serve alone (main.c says why). */
  if (o->cmd == MT_CMD_PROFILE)
    return mt_profile_main(o);
  memset(&app, 0, sizeof app);
  mt_model_init(&app.model);
  app.model.delay_s = o->delay_s;
  app.model.color = o->color;
  app.model.delay_given = o->delay_given;
  app.model.filter_uid = o->uid;
  app.model.mouse = o->mouse;
  /* --tree lists the processes like the whole view, and keeps the named
   * one's descendants (the set's tree_root). */
  app.model.watch_all = (o->npids == 0 || o->tree) && o->cmd != MT_CMD_RUN;
  app.model.tree = o->tree;
  app.out.tree = o->tree || o->cmd == MT_CMD_RUN;
  app.out.json = o->json;
  app.out.sites = o->sites > 0 ? (size_t)o->sites : 0;
  app.out.filter = &o->filter;
  mt_debuginfod_configure(o->timeout_ms, 0); /* no progress line here */
  app.view.model = &app.model;
  if (o->cmd == MT_CMD_PS || (o->once && o->cmd == MT_CMD_WATCH)) {
    app.rounds.o = o;
    app.rounds.model = &app.model;
    app.rounds.out = &app.out;
    rc = mt_shell_run(o, &mt_rounds_mode, &app.rounds);
  } else if (o->cmd == MT_CMD_RUN) {
    rc = run_command(o);
  } else {
    app.view.watch = 1;
    app.view.say_left = 1;
    rc = mt_shell_run(o, &mt_liveview_mode, &app.view);
  }
  mt_model_free(&app.model);
  mt_out_free(&app.out);
  return rc;
}
