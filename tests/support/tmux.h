/*
 * tmux.h - test helper: a program in a real terminal, a detached tmux
 * session of a fixed size on a server of its own, read with `capture-pane`
 * and driven with `send-keys`, as tests/integration/test_tmux.c does.
 * Include after <cmocka.h>; header only, like the other helpers here.
 *
 * Waits are "until the screen shows X", bounded by a generous limit so
 * that a broken program fails instead of hanging; nothing asserts a
 * duration.
 */
#ifndef MS_TESTS_SUPPORT_TMUX_H
#define MS_TESTS_SUPPORT_TMUX_H

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "support/host.h"
#include "support/run.h"

#define TMUX_WAIT_LIMIT_MS 20000 /* far beyond what a working memtop needs */

typedef struct tmux_s {
  char sock[256];         /* the server's socket */
  char screen[64 * 1024]; /* the last capture */
} tmux_t;

/* What a test of memtop's live view on the demo needs of the build
 * directory build: tmux, memtop, and the demo, whose path goes into demo
 * (a sanitizer build's own demo cannot take the plain preload, the
 * sanitizer's runtime must come first: such a build keeps a plain demo
 * beside the plain preload, tests/progs/progs.mk). Returns NULL, or why
 * the test is skipped. */
static inline const char *tmux_demo_needs(const char *build, char *demo,
                                          size_t len) {
  snprintf(demo, len, "%s/memtop", build);
  if (!host_have_program("tmux"))
    return "tmux is not installed (apt-get install tmux)";
  if (access(demo, X_OK) != 0)
    return "memtop is not built in this build directory (make)";
  snprintf(demo, len, "%s/plain/contrib/demo", build);
  if (access(demo, X_OK) != 0)
    snprintf(demo, len, "%s/contrib/demo", build);
  if (access(demo, X_OK) != 0)
    return "contrib/demo is not built in this build directory (make)";
  return NULL;
}

static inline void tmux_sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Starts a server of its own at `sock` (a path in the test's own
 * directory) with one detached session "v" of cols x rows running
 * `sh script`, its environment marked MT_TMUX_SESSION=sock from its exec
 * on, so tmux_end finds all it started. Returns 0, or -1. */
static inline int tmux_start(tmux_t *t, const char *sock, int cols, int rows,
                             const char *script) {
  snprintf(t->sock, sizeof t->sock, "%s", sock);
  t->screen[0] = '\0';
  return run_sh("tmux -S '%s' -f /dev/null new-session -d -s v -x %d -y %d "
                "\"env MT_TMUX_SESSION='%s' sh '%s'\"",
                t->sock, cols, rows, t->sock, script) == 0
             ? 0
             : -1;
}

/* Closes the session's terminal: its programs get SIGHUP, and what
 * ignores it (`memtop run`'s command) goes on running. */
static inline void tmux_stop(tmux_t *t) {
  if (t->sock[0] != '\0')
    run_sh("tmux -S '%s' kill-server >/dev/null 2>&1", t->sock);
}

/* The pane's text, one line per row (tmux drops trailing blanks), with
 * capture-pane's `flags` too ("-e": attributes as escape sequences; "-J":
 * wrapped lines joined; "": neither). */
static inline const char *tmux_capture_flags(tmux_t *t, const char *flags) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "tmux -S '%s' capture-pane %s -p -t v 2>/dev/null",
           t->sock, flags);
  FILE *p = popen(cmd, "r");
  t->screen[0] = '\0';
  if (p == NULL)
    return t->screen;
  size_t n = fread(t->screen, 1, sizeof t->screen - 1, p);
  t->screen[n] = '\0';
  pclose(p);
  return t->screen;
}

static inline const char *tmux_capture(tmux_t *t) {
  return tmux_capture_flags(t, "");
}

/* 1 if pid's environment (as it was at its exec) holds the entry `want`. */
static inline int tmux_environ_has(long pid, const char *want) {
  char path[64], env[32 * 1024];
  snprintf(path, sizeof path, "/proc/%ld/environ", pid);
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return 0;
  size_t n = fread(env, 1, sizeof env - 1, f);
  fclose(f);
  env[n] = '\0';
  for (size_t i = 0; i < n; i += strlen(env + i) + 1)
    if (strcmp(env + i, want) == 0)
      return 1;
  return 0;
}

/* Kills what a session left running once its server is gone (`memtop
 * run`'s command outlives a closed terminal): every process other than
 * this one whose environment holds `entry`, e.g. the session's own
 * "MEMSTATS_DIR=...". Again until none is left: a memtop killed starts
 * nothing more, and what it started before is found the next time. */
static inline void tmux_kill_left(const char *entry) {
  for (long waited = 0; waited < TMUX_WAIT_LIMIT_MS; waited += 100) {
    int found = 0;
    DIR *d = opendir("/proc");
    struct dirent *e;
    if (d == NULL)
      return;
    while ((e = readdir(d)) != NULL) {
      char *end;
      long pid = strtol(e->d_name, &end, 10);
      if (pid > 0 && *end == '\0' && pid != (long)getpid() &&
          tmux_environ_has(pid, entry) && kill((pid_t)pid, SIGKILL) == 0)
        found = 1;
    }
    closedir(d);
    if (!found)
      return;
    tmux_sleep_ms(100);
  }
}

/* Ends the session and all it started: its terminal closed, then every
 * process carrying its mark killed, again until none is left. The next
 * session never meets this one's programs still starting or ending (the
 * shell may not yet have started memtop when the terminal closes, and a
 * shell's `export` is not in its /proc environ: only the mark given at
 * its exec is). */
static inline void tmux_end(tmux_t *t) {
  char mark[300];
  if (t->sock[0] == '\0')
    return;
  tmux_stop(t);
  snprintf(mark, sizeof mark, "MT_TMUX_SESSION=%s", t->sock);
  tmux_kill_left(mark);
}

/* send-keys with `k` as its arguments (tmux key names). */
static inline int tmux_keys(tmux_t *t, const char *k) {
  return run_sh("tmux -S '%s' send-keys -t v %s", t->sock, k);
}

/* Resizes the window (the program gets SIGWINCH). */
static inline int tmux_resize(tmux_t *t, int cols, int rows) {
  return run_sh("tmux -S '%s' resize-window -t v -x %d -y %d", t->sock, cols,
                rows);
}

/* Waits until the screen, captured with `flags` (tmux_capture_flags),
 * contains (or, with want == 0, lacks) `text`; returns 1, or 0 after
 * TMUX_WAIT_LIMIT_MS, printing the screen. */
static inline int tmux_wait_screen_flags(tmux_t *t, const char *flags,
                                         const char *text, int want) {
  for (long waited = 0; waited < TMUX_WAIT_LIMIT_MS; waited += 100) {
    if ((strstr(tmux_capture_flags(t, flags), text) != NULL) == want)
      return 1;
    tmux_sleep_ms(100);
  }
  print_error("the screen never %s \"%s\"; it shows:\n%s\n",
              want ? "showed" : "lost", text, t->screen);
  return 0;
}

static inline int tmux_wait_screen(tmux_t *t, const char *text, int want) {
  return tmux_wait_screen_flags(t, "", text, want);
}

/* Waits until the file at path can be opened (one the session's shell
 * writes: whole once it is there, written beside and renamed) and reads
 * it into buf (len bytes, NUL-terminated, what does not fit left out);
 * returns 1, or 0 after TMUX_WAIT_LIMIT_MS. */
static inline int tmux_wait_file(const char *path, char *buf, size_t len) {
  FILE *f = NULL;
  for (long waited = 0; waited < TMUX_WAIT_LIMIT_MS && f == NULL;
       waited += 100) {
    f = fopen(path, "r");
    if (f == NULL)
      tmux_sleep_ms(100);
  }
  if (f == NULL) {
    print_error("no file %s after %d ms\n", path, TMUX_WAIT_LIMIT_MS);
    return 0;
  }
  size_t n = fread(buf, 1, len - 1, f);
  buf[n] = '\0';
  fclose(f);
  return 1;
}

#endif
