/*
 * test_tmux.c - the live view in a real terminal.
 *
 * Starts `memtop run -d 0.2 -- TARGET` in a detached tmux session of a
 * fixed size, then reads the screen with `tmux capture-pane` and presses
 * keys with `tmux send-keys`, as a user would: the figures are on screen
 * and change; h, space, s, Enter and Esc do what they say; the layout
 * follows a resized window; a killed target stays, marked exited; q gives
 * the terminal back (the alternate screen gone, the tty modes restored).
 *
 * TARGET is the demo workload, $BUILD/contrib/demo, under the preload. The
 * test is skipped, saying why, when tmux, memtop or the demo is missing.
 *
 * Waits are "until the screen shows X", bounded by a generous limit so a
 * broken memtop fails instead of hanging; nothing asserts a duration.
 */
#include <dirent.h>
#include <limits.h>
#include <pwd.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/host.h"
#include "support/run.h"
#include "support/tmux.h"

#define WAIT_LIMIT_MS TMUX_WAIT_LIMIT_MS
#define COLS 100
#define ROWS 30

static char build_dir[1024];
static char tmp_dir[64];
static char target_cmd[2200];
static char preload_env[1300];
/* The preload of the sessions' own targets (host_preload_path). */
static char target_preload[1200];
static const char *skip_reason;
/* Extra shell lines for the next session (the colour and locale tests). */
static const char *session_env = "";
/* The arguments of memtop in the next session (NULL: `memtop run -d 0.2
 * -- TARGET`). */
static const char *session_cmd;
/* Options of `memtop run` in the next default session, before "--". */
static const char *run_opts = "";

/* ================================================================ helpers */

static void find_build_dir(void) {
  assert_int_equal(host_build_dir(build_dir, sizeof build_dir), 0);
}

/* The session's terminal (tests/support/tmux.h): its server's socket and
 * the last capture. */
static tmux_t tm;
#define screen_buf tm.screen
#define sleep_ms tmux_sleep_ms

/* The pane's text, one line per row; with attributes as escape
 * sequences when flags is "-e". */
static const char *capture_pane(const char *flags) {
  return tmux_capture_flags(&tm, flags);
}

static const char *capture(void) {
  return tmux_capture(&tm);
}

static void keys(const char *k) {
  assert_int_equal(tmux_keys(&tm, k), 0);
}

/* Waits until the screen contains (or, with want == 0, lacks) `text`. */
static int wait_screen(const char *text, int want) {
  return tmux_wait_screen(&tm, text, want);
}

#define WAIT_FOR(text) assert_true(wait_screen((text), 1))
#define WAIT_GONE(text) assert_true(wait_screen((text), 0))

/* Line `i` (from 0) of the last capture, in buf. */
static const char *line_of(const char *screen, int i, char *buf, size_t len) {
  const char *p = screen;
  for (; i > 0 && p != NULL; i--) {
    p = strchr(p, '\n');
    if (p != NULL)
      p++;
  }
  buf[0] = '\0';
  if (p != NULL)
    snprintf(buf, len, "%.*s", (int)strcspn(p, "\n"), p);
  return buf;
}

/* The columns a line of the pane takes: its characters (the meters draw
 * with U+2502, three bytes a column). */
static size_t columns_of(const char *s) {
  size_t n = 0;
  for (; *s; s++)
    n += ((unsigned char)*s & 0xc0) != 0x80;
  return n;
}

/* The list row of the target: the first line after the column headers
 * that starts with a PID. */
static int target_row(const char *screen, char *row, size_t len) {
  char line[512];
  int after_header = 0;
  for (int i = 0; i < ROWS + 10; i++) {
    line_of(screen, i, line, sizeof line);
    if (strstr(line, "PID") != NULL && strstr(line, "NAME") != NULL) {
      after_header = 1;
      continue;
    }
    int pid = 0;
    if (after_header && sscanf(line, " %d", &pid) == 1 && pid > 0) {
      snprintf(row, len, "%s", line);
      return pid;
    }
  }
  return -1;
}

/* Quits a `memtop run` view with `key` (q or F10), answering y to the
 * question whether to stop the command. */
static void quit_stop(const char *key) {
  keys(key);
  WAIT_FOR("? y: stop  d: detach (keeps running)  other: stay");
  keys("y");
}

/* A field of /proc/PID/stat after the name: 3 the state, 4 the parent, 6
 * the session. 0 when the process is gone. */
static long proc_stat_field(int pid, int field) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  char *p = strrchr(buf, ')');
  if (p == NULL)
    return 0;
  p += 2;
  for (int i = 3; i < field && p != NULL; i++) {
    p = strchr(p, ' ');
    if (p != NULL)
      p++;
  }
  if (p == NULL)
    return 0;
  return field == 3 ? (long)*p : strtol(p, NULL, 10);
}

/* Running: there, and not a zombie. */
static int proc_running(int pid) {
  long st = proc_stat_field(pid, 3);
  return st != 0 && st != 'Z' && st != 'X';
}

/* Waits until pid no longer runs; returns 1, or 0 after the limit. */
static int wait_ended(int pid) {
  for (long waited = 0; waited < WAIT_LIMIT_MS; waited += 100) {
    if (!proc_running(pid))
      return 1;
    sleep_ms(100);
  }
  return 0;
}

/* ============================================================== fixtures */

static int group_setup(void **state) {
  (void)state;
  find_build_dir();
  /* The demo workload. */
  char demo[1200];
  skip_reason = tmux_demo_needs(build_dir, demo, sizeof demo);
  if (skip_reason != NULL)
    return 0;
  snprintf(tmp_dir, sizeof tmp_dir, "/tmp/memtop-tmux-XXXXXX");
  if (mkdtemp(tmp_dir) == NULL)
    return -1;
  snprintf(target_cmd, sizeof target_cmd, "'%s'", demo);
  /* (When it is missing, the path it names: the test fails there.) */
  (void)host_preload_path(build_dir, target_preload, sizeof target_preload);
  /* A sanitizer-built preload cannot go into an uninstrumented program;
   * the build keeps a plain one for that (tests/progs/progs.mk). */
  preload_env[0] = '\0';
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  char plain[1200];
  snprintf(plain, sizeof plain, "%s/plain/libmemstats-preload.so", build_dir);
  if (access(plain, R_OK) == 0)
    snprintf(preload_env, sizeof preload_env, "export MEMTOP_PRELOAD='%s'\n",
             plain);
#endif
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  if (tmp_dir[0] != '\0')
    run_sh("rm -rf '%s'", tmp_dir);
  return 0;
}

/* A fresh session per test: memtop on a 100x30 terminal, and after it
 * exits, its status and the terminal's modes written down. */
static int session_setup(void **state) {
  (void)state;
  if (skip_reason != NULL)
    return 0;
  char script[128];
  snprintf(script, sizeof script, "%s/run.sh", tmp_dir);
  FILE *f = fopen(script, "w");
  if (f == NULL)
    return -1;
  fprintf(f,
          "export MEMSTATS_DIR='%s/sock' TMPDIR='%s' LANG=C.UTF-8 "
          "LC_ALL=C.UTF-8 XDG_CONFIG_HOME='%s/config'\n"
          "unset NO_COLOR\n"
          "%s%s"
          "rm -f '%s/stty.txt'\n"
          "'%s/memtop' run -d 0.2 %s-- %s\n"
          "echo \"MEMTOP-EXIT=$?\"\n"
          "stty -a > '%s/stty.tmp' && mv '%s/stty.tmp' '%s/stty.txt'\n"
          "exec sleep 600\n",
          tmp_dir, tmp_dir, tmp_dir, preload_env, session_env, tmp_dir,
          build_dir, run_opts, target_cmd, tmp_dir, tmp_dir, tmp_dir);
  fclose(f);
  if (session_cmd != NULL) {
    /* The script again, with this memtop command line. */
    char line[1400];
    snprintf(line, sizeof line, "'%s/memtop' %s", build_dir, session_cmd);
    f = fopen(script, "w");
    if (f == NULL)
      return -1;
    fprintf(f,
            "export MEMSTATS_DIR='%s/sock' TMPDIR='%s' LANG=C.UTF-8 "
            "LC_ALL=C.UTF-8 XDG_CONFIG_HOME='%s/config'\n"
            "%s"
            "%s\n"
            "echo \"MEMTOP-EXIT=$?\"\n"
            "exec sleep 600\n",
            tmp_dir, tmp_dir, tmp_dir, session_env, line);
    fclose(f);
  }
  /* 0700 again after a test that opened it (test_list_unsafe_dir). */
  run_sh("mkdir -p -m 700 '%s/sock' && chmod 700 '%s/sock'", tmp_dir, tmp_dir);
  /* A server of its own per session, its socket in our directory: the
   * last one may still be on its way out after kill-server, and a new
   * session on its socket would die with it. */
  static int sessions;
  char sock[128];
  snprintf(sock, sizeof sock, "%s/tmux-%d", tmp_dir, ++sessions);
  if (tmux_start(&tm, sock, COLS, ROWS, script) != 0)
    return -1;
  return 0;
}

/* The same with NO_COLOR set and a locale that is not UTF-8. */
static int plain_session_setup(void **state) {
  session_env = "export NO_COLOR=1 LANG=C LC_ALL=C\n";
  int rc = session_setup(state);
  session_env = "";
  return rc;
}

/* Closes the session's terminal: memtop gets SIGHUP, and leaves `run`'s
 * command running. */
static void kill_server(void) {
  tmux_stop(&tm);
}

/* Kills what the session left running (`run`'s command outlives a
 * closed terminal): what was started with this test's MEMSTATS_DIR. */
static void kill_left_running(void) {
  char want[128];
  snprintf(want, sizeof want, "MEMSTATS_DIR=%s/sock", tmp_dir);
  tmux_kill_left(want);
}

static int session_teardown(void **state) {
  (void)state;
  if (skip_reason == NULL) {
    tmux_end(&tm);
    kill_left_running();
  }
  return 0;
}

/* This test's session replaced by one with the shell lines env run before
 * memtop and memtop's arguments cmd (NULL: `run -d 0.2 -- TARGET`). */
static void new_session(void **state, const char *env, const char *cmd) {
  session_teardown(state);
  session_env = env;
  session_cmd = cmd;
  int rc = session_setup(state);
  session_env = "";
  session_cmd = NULL;
  assert_int_equal(rc, 0);
}

#define SKIP_IF_NEEDED()                                                       \
  do {                                                                         \
    if (skip_reason != NULL) {                                                 \
      print_message("skipped: %s\n", skip_reason);                             \
      skip();                                                                  \
    }                                                                          \
  } while (0)

/* Waits for the target's row in the list; returns its PID. memtop run
 * opens on the target's detail view: Esc goes to the list. */
static int wait_target(char *row, size_t len) {
  long esc_at = -1;
  for (long waited = 0; waited < WAIT_LIMIT_MS; waited += 100) {
    /* One Esc at a time: curses waits to tell a lone Esc from a key's
     * escape sequence, and a stream of them would never be lone. */
    if (strstr(capture(), "Ready+Prepared") != NULL &&
        (esc_at < 0 || waited - esc_at >= 2000)) {
      keys("Escape");
      esc_at = waited;
    }
    int pid = target_row(capture(), row, len);
    if (pid > 0 && strstr(row, "MiB") != NULL)
      return pid;
    sleep_ms(100);
  }
  print_error("no target row with figures; the screen shows:\n%s\n",
              screen_buf);
  fail();
  return -1;
}

/* ================================================================= tests */

static void test_figures_change(void **state) {
  (void)state;
  SKIP_IF_NEEDED();
  char first[512], row[512];
  wait_target(first, sizeof first);
  assert_non_null(strstr(screen_buf, "memtop"));
  assert_non_null(strstr(screen_buf, "READY"));
  /* The figures move as the target allocates and frees. */
  int changed = 0;
  for (long waited = 0; waited < WAIT_LIMIT_MS && !changed; waited += 200) {
    sleep_ms(200);
    target_row(capture(), row, sizeof row);
    changed = strcmp(row, first) != 0;
  }
  if (!changed)
    print_error("the row stayed \"%s\"\n", first);
  assert_true(changed);
}

static void test_keys(void **state) {
  (void)state;
  SKIP_IF_NEEDED();
  char row[512], a[512], b[512];
  wait_target(row, sizeof row);

  /* h: help; any key back. */
  keys("h");
  WAIT_FOR("Keys");
  keys("Escape");
  WAIT_FOR("PID");
  WAIT_GONE("Keys");

  /* The list opens sorted by Ready+Prepared (TOTAL), as htop by memory;
   * s moves the sort to the next column, READY. */
  WAIT_FOR("TOTAL*");
  keys("s");
  WAIT_FOR("READY*");
  WAIT_GONE("TOTAL*");

  /* space: PAUSED, and the figures hold still. */
  keys("Space");
  WAIT_FOR("PAUSED");
  sleep_ms(300);
  target_row(capture(), a, sizeof a);
  sleep_ms(1500); /* several refreshes at -d 0.2 */
  target_row(capture(), b, sizeof b);
  assert_string_equal(a, b);
  keys("Space");
  WAIT_GONE("PAUSED");

  /* Enter opens the process, Esc goes back. */
  keys("Enter");
  WAIT_FOR("Ready+Prepared");
  WAIT_FOR("Sys by class");
  WAIT_FOR("HeapAlloc");
  keys("Escape");
  WAIT_FOR("READY");
  WAIT_GONE("Sys by class");
}

/* The detail view's allocation sites (issue 12, item 6): the demo's heap
 * profile read on its own cadence, its allocating function named (heap_add
 * calls malloc), and 'a' switching to the allocation rate. */
static void test_alloc_sites(void **state) {
  (void)state;
  SKIP_IF_NEEDED();
  /* memtop run opens on the target's detail view. */
  WAIT_FOR("Alloc sites in use (a: by rate)");
  WAIT_FOR("heap_add");
  keys("a");
  WAIT_FOR("Alloc sites by rate (a: in use)");
  keys("a");
  WAIT_FOR("Alloc sites in use (a: by rate)");
  /* c: the size classes and back (issue 23); e: the selected site's call
   * chain, heap_add called by main. */
  keys("c");
  WAIT_FOR("Size classes by live bytes");
  WAIT_GONE("Alloc sites in use");
  keys("c");
  WAIT_FOR("Alloc sites in use (a: by rate)");
  keys("e");
  WAIT_FOR("Call chain of the site");
  WAIT_FOR(" by main ");
  keys("e");
  WAIT_FOR("Alloc sites in use (a: by rate)");
  quit_stop("q");
  WAIT_FOR("MEMTOP-EXIT=0");
}

static void test_resize(void **state) {
  (void)state;
  SKIP_IF_NEEDED();
  char row[512], line[512];
  wait_target(row, sizeof row);
  WAIT_FOR("FRAG");
  /* Narrower: the list keeps the breakdown's first figures and drops what
   * does not fit. */
  assert_int_equal(tmux_resize(&tm, 60, 15), 0);
  WAIT_GONE("FRAG");
  WAIT_FOR("READY");
  for (int i = 0; i < 15; i++)
    assert_true(columns_of(line_of(screen_buf, i, line, sizeof line)) <= 60);
  /* The status line follows to the new last row. */
  assert_true(strlen(line_of(screen_buf, 14, line, sizeof line)) > 0);
  /* Wider: every column, the provider included. */
  assert_int_equal(tmux_resize(&tm, 180, 40), 0);
  WAIT_FOR("PROVIDER");
  WAIT_FOR("OBJECTS");
  assert_true(strlen(line_of(screen_buf, 39, line, sizeof line)) > 0);
  /* The detail view at a small size drops sections but keeps the bar. */
  keys("Enter");
  WAIT_FOR("Sys by class");
  assert_int_equal(tmux_resize(&tm, 40, 12), 0);
  WAIT_GONE("Sys by class");
  WAIT_FOR("Ready+Prepared");
}

static void test_exited_marked(void **state) {
  (void)state;
  SKIP_IF_NEEDED();
  char row[512];
  int pid = wait_target(row, sizeof row);
  assert_int_equal(kill(pid, SIGKILL), 0);
  WAIT_FOR("[exited]");
  /* Its last figures stay on screen. */
  int again = target_row(capture(), row, sizeof row);
  assert_int_equal(again, pid);
  assert_non_null(strstr(row, "[exited]"));
  assert_non_null(strstr(row, "MiB"));
}

static void test_quit_restores(void **state) {
  (void)state;
  SKIP_IF_NEEDED();
  char row[512], path[128];
  wait_target(row, sizeof row);
  quit_stop("q");
  WAIT_FOR("MEMTOP-EXIT=");
  /* The alternate screen is gone: only the shell's own output remains. */
  assert_null(strstr(screen_buf, "READY"));
  assert_null(strstr(screen_buf, "memtop 0.1"));
  /* And the terminal is back in cooked mode with echo. (The shell writes
   * stty's output to a temporary file and renames it: the file is whole
   * once it exists.) */
  snprintf(path, sizeof path, "%s/stty.txt", tmp_dir);
  char modes[4096];
  assert_true(tmux_wait_file(path, modes, sizeof modes));
  for (char *p = modes; *p; p++)
    if (*p == '\n' || *p == ';')
      *p = ' ';
  if (strstr(modes, " icanon ") == NULL || strstr(modes, " echo ") == NULL)
    print_error("tty modes after memtop: %s\n", modes);
  assert_non_null(strstr(modes, " icanon "));
  assert_non_null(strstr(modes, " echo "));
}

/* q on `memtop run`'s view asks: another key stays, y stops the command
 * (memtop waits for its end and returns its status). */
static void test_quit_run_stop(void **state) {
  (void)state;
  SKIP_IF_NEEDED();
  char row[512], ask[64];
  int pid = wait_target(row, sizeof row);
  keys("q");
  WAIT_FOR("? y: stop  d: detach (keeps running)  other: stay");
  snprintf(ask, sizeof ask, "Stop demo (PID %d)?", pid);
  assert_non_null(strstr(screen_buf, ask));
  /* Any other key: the view stays, the command runs. */
  keys("x");
  WAIT_GONE("? y: stop");
  WAIT_FOR("F10 quit");
  assert_null(strstr(screen_buf, "MEMTOP-EXIT="));
  assert_true(proc_running(pid));
  /* F10 asks the same; y stops it. */
  keys("F10");
  WAIT_FOR("? y: stop  d: detach (keeps running)  other: stay");
  keys("y");
  WAIT_FOR("MEMTOP-EXIT=0");
  assert_true(wait_ended(pid));
}

/* y stops the command's whole job, as a terminal's Ctrl-C would: the
 * program a shell command started (sh -c 'DEMO; exit 7', as `memtop run
 * -- sh -c 'sqlite3 db < FILE'` is run) stops with the shell, not left
 * running on its own once memtop has gone. */
static void test_quit_run_stop_job(void **state) {
  SKIP_IF_NEEDED();
  char cmd[2600], row[512], path[96];
  int kid = 0;
  snprintf(cmd, sizeof cmd, "run -d 0.2 -- sh -c \"%s; exit 7\"", target_cmd);
  /* preload_env: under a sanitizer, the plain preload for the plain sh. */
  new_session(state, preload_env, cmd);
  int sh = wait_target(row, sizeof row);
  snprintf(path, sizeof path, "/proc/%d/task/%d/children", sh, sh);
  for (long waited = 0; kid <= 0 && waited < WAIT_LIMIT_MS; waited += 100) {
    FILE *f = fopen(path, "r");
    if (f != NULL) {
      if (fscanf(f, "%d", &kid) != 1)
        kid = 0;
      fclose(f);
    }
    if (kid <= 0)
      sleep_ms(100);
  }
  assert_true(kid > 0);
  quit_stop("q");
  WAIT_FOR("MEMTOP-EXIT=");
  assert_true(wait_ended(sh));
  if (!wait_ended(kid)) {
    kill(kid, SIGKILL);
    fail_msg("the shell's child %d still runs after y stopped the command",
             kid);
  }
}

/* d leaves the command running: memtop exits 0 and says where its output
 * goes; the command has a session of its own, so that no hangup of the
 * terminal reaches it; killing the session's terminal leaves it running. */
static void test_quit_run_detach(void **state) {
  (void)state;
  SKIP_IF_NEEDED();
  char row[512], said[64];
  int pid = wait_target(row, sizeof row);
  int memtop_pid = (int)proc_stat_field(pid, 4);
  assert_true(memtop_pid > 0);
  assert_int_equal(proc_stat_field(pid, 6), pid); /* its own session */
  keys("q");
  WAIT_FOR("? y: stop  d: detach (keeps running)  other: stay");
  keys("d");
  WAIT_FOR("MEMTOP-EXIT=0");
  snprintf(said, sizeof said, "left demo (PID %d) running", pid);
  assert_non_null(strstr(screen_buf, said));
  assert_non_null(strstr(screen_buf, "kill"));
  assert_true(wait_ended(memtop_pid));
  assert_true(proc_running(pid));
  /* The terminal goes: the command still runs. */
  kill_server();
  assert_true(proc_running(pid));
  assert_int_equal(kill(pid, SIGKILL), 0);
  assert_true(wait_ended(pid));
  assert_int_equal(session_setup(state), 0); /* for the teardown */
}

/* A closed terminal (the tmux server killed: SIGHUP) never kills the
 * command silently: memtop leaves it running, detached, as d does. */
static void test_hangup_detaches(void **state) {
  (void)state;
  SKIP_IF_NEEDED();
  char row[512];
  int pid = wait_target(row, sizeof row);
  int memtop_pid = (int)proc_stat_field(pid, 4);
  assert_true(memtop_pid > 0);
  kill_server();
  assert_true(wait_ended(memtop_pid));
  assert_true(proc_running(pid));
  assert_int_equal(kill(pid, SIGKILL), 0);
  assert_true(wait_ended(pid));
  assert_int_equal(session_setup(state), 0); /* for the teardown */
}

/* An unsafe socket directory is said at once, before the screen: the
 * command's library would refuse to serve there. */
static void test_run_unsafe_dir(void **state) {
  (void)state;
  SKIP_IF_NEEDED();
  new_session(state,
              "export MEMSTATS_DIR=\"$TMPDIR/unsafe\"\n"
              "mkdir -p \"$MEMSTATS_DIR\" && chmod 777 \"$MEMSTATS_DIR\"\n",
              NULL);
  WAIT_FOR("MEMTOP-EXIT=1");
  capture_pane("-J"); /* the message, its wrapped lines joined */
  assert_non_null(strstr(screen_buf, "not starting demo"));
  assert_non_null(strstr(screen_buf, "open to group or others"));
  assert_non_null(strstr(screen_buf, "chmod 700"));
}

/* The pane with its attributes, as escape sequences (capture-pane -e). */
static const char *capture_sgr(void) {
  return capture_pane("-e");
}

/* Whether any SGR sequence sets a foreground or background colour. */
static int has_colour(const char *s) {
  for (const char *p = strstr(s, "\033["); p != NULL;
       p = strstr(p + 1, "\033[")) {
    const char *q = p + 2;
    while (*q != '\0' && *q != 'm' && (*q == ';' || (*q >= '0' && *q <= '9'))) {
      int v = (int)strtol(q, (char **)&q, 10);
      if ((v >= 30 && v <= 38) || (v >= 40 && v <= 48) ||
          (v >= 90 && v <= 97) || (v >= 100 && v <= 107))
        return 1;
      if (*q == ';')
        q++;
    }
  }
  return 0;
}

static int has_non_ascii(const char *s) {
  for (; *s; s++)
    if ((unsigned char)*s >= 0x80)
      return 1;
  return 0;
}

/* The default session: UTF-8 locale and colours. */
static void test_colour_utf8(void **state) {
  (void)state;
  SKIP_IF_NEEDED();
  char row[512];
  wait_target(row, sizeof row);
  keys("Enter");
  WAIT_FOR("\xe2\x96\x88 data"); /* U+2588, the data fill */
  assert_true(has_colour(capture_sgr()));
}

/* NO_COLOR and LANG=C: attributes only, and ASCII only. */
static void test_no_colour_ascii(void **state) {
  (void)state;
  SKIP_IF_NEEDED();
  char row[512];
  wait_target(row, sizeof row);
  keys("Enter");
  WAIT_FOR("# data");
  WAIT_FOR("~ Prepared");
  assert_false(has_non_ascii(capture()));
  const char *sgr = capture_sgr();
  if (has_colour(sgr))
    print_error("colour escapes with NO_COLOR set:\n%s\n", sgr);
  assert_false(has_colour(sgr));
  /* Attributes remain: the title bar is in reverse video. */
  assert_non_null(strstr(sgr, "\033[7m"));
}

/* A mouse report as a terminal sends it in xterm's normal tracking mode
 * (what ncurses asks for): ESC [ M, then 32 + the button (0 the left one
 * pressed, 3 released) and 33 + column, 33 + row (from 0). A click is a
 * press and a release; a double click two clicks. */
static void mouse_click(int row, int col, int times) {
  char hex[256];
  size_t n = 0;
  hex[0] = '\0';
  for (int i = 0; i < times; i++)
    for (int b = 0; b <= 3; b += 3)
      n += (size_t)snprintf(hex + n, sizeof hex - n, " 1b 5b 4d %02x %02x %02x",
                            32 + b, 33 + col, 33 + row);
  assert_int_equal(run_sh("tmux -S %s send-keys -t v -H%s", tm.sock, hex), 0);
}

/* Whether the program in the pane asked the terminal to report the
 * mouse (tmux knows the pane's modes). */
static int mouse_tracking(void) {
  char cmd[512], out[64] = "";
  snprintf(cmd, sizeof cmd,
           "tmux -S %s display-message -p -t v "
           "'#{mouse_standard_flag}#{mouse_button_flag}#{mouse_any_flag}'",
           tm.sock);
  FILE *p = popen(cmd, "r");
  if (p == NULL)
    return -1;
  size_t n = fread(out, 1, sizeof out - 1, p);
  out[n] = '\0';
  pclose(p);
  return strchr(out, '1') != NULL;
}

/* htop's habits (issue 23): the USER column is the real owner, NAME the
 * command line (p: the short name), a machine-wide memory line, F1 help,
 * F3 search, F4 filter, F10 quit. */
static void test_htop_keys(void **state) {
  (void)state;
  SKIP_IF_NEEDED();
  char row[512];
  char user[64];
  struct passwd *pw = getpwuid(getuid());
  snprintf(user, sizeof user, "%.8s", pw != NULL ? pw->pw_name : "");
  wait_target(row, sizeof row);
  assert_non_null(strstr(screen_buf, "Mem["));
  assert_non_null(strstr(screen_buf, "USER"));
  assert_non_null(strstr(screen_buf, "RSS"));
  if (pw != NULL && strstr(row, user) == NULL)
    fail_msg("no user %s in the row \"%s\"", user, row);
  /* The command line: the demo's full path, as it was started (its
   * start: a long path is cut to the column); p: the short name. */
  char path[32];
  snprintf(path, sizeof path, "%.16s", target_cmd + 1); /* past the quote */
  if (strstr(row, path) == NULL)
    fail_msg("no \"%s\" in the row \"%s\"", path, row);
  keys("p");
  WAIT_GONE(path);
  WAIT_FOR(" demo");
  keys("p");
  WAIT_FOR(path);

  keys("F1");
  WAIT_FOR("Keys");
  WAIT_FOR("F4 \\");
  keys("Escape");
  WAIT_GONE("Keys");

  keys("F4");
  WAIT_FOR("Filter by name, user or PID");
  keys("z z z");
  WAIT_FOR("No process matches the filter (1 hidden)");
  keys("Escape");
  WAIT_FOR(path);
  keys("F4");
  keys("d e m o Enter");
  WAIT_FOR("Filter \"demo\": 1 of 1 shown");
  keys("F3");
  WAIT_FOR("Search (F3 next");
  /* In a prompt q is text, not quit (after a z: no path has "zq"). */
  keys("z q Enter");
  WAIT_FOR("No process matches \"zq\"");

  quit_stop("F10");
  WAIT_FOR("MEMTOP-EXIT=0");
}

/* The mouse: a click on a column's title sorts by it, a double click on a
 * row opens the process. */
static void test_mouse(void **state) {
  (void)state;
  SKIP_IF_NEEDED();
  char row[512];
  wait_target(row, sizeof row);
  WAIT_FOR("TOTAL*");
  assert_true(mouse_tracking());
  /* The titles are on row 3: "    PID USER ..."; USER from column 8. */
  mouse_click(3, 9, 1);
  WAIT_FOR("USER*");
  WAIT_GONE("TOTAL*");
  mouse_click(4, 3, 2);
  WAIT_FOR("Sys by class");
  quit_stop("q");
  WAIT_FOR("MEMTOP-EXIT=0");
  /* The terminal no longer reports the mouse to the shell. */
  assert_false(mouse_tracking());
}

/* F6: htop's sort picker over the left of the list ("Sort by" on the
 * titles' row, one key a row from row 4: PID, USER, TOTAL, READY ...):
 * Down and Enter sort by the next key, Esc leaves the sort alone, a
 * click on an entry sorts by it. */
static void test_sort_picker(void **state) {
  (void)state;
  SKIP_IF_NEEDED();
  char row[512];
  wait_target(row, sizeof row);
  WAIT_FOR("TOTAL*");
  keys("F6");
  WAIT_FOR("Sort by: Up/Down choose");
  WAIT_FOR("*TOTAL");
  keys("Down Enter");
  WAIT_FOR("READY*");
  WAIT_GONE("Sort by");
  keys("F6");
  WAIT_FOR("Sort by");
  keys("Up Up Escape");
  WAIT_GONE("Sort by");
  WAIT_FOR("READY*");
  /* RSS is the ninth key: row 4 + 8. */
  keys("F6");
  WAIT_FOR("*READY");
  mouse_click(12, 3, 1);
  WAIT_FOR("RSS*");
  WAIT_GONE("Sort by");
  quit_stop("q");
  WAIT_FOR("MEMTOP-EXIT=0");
}

/* --no-mouse leaves the mouse alone: a click changes nothing. */
static int no_mouse_setup(void **state) {
  run_opts = "--no-mouse ";
  int rc = session_setup(state);
  run_opts = "";
  return rc;
}

static void test_no_mouse(void **state) {
  (void)state;
  SKIP_IF_NEEDED();
  char row[512];
  wait_target(row, sizeof row);
  WAIT_FOR("TOTAL*");
  assert_false(mouse_tracking());
  quit_stop("q");
  WAIT_FOR("MEMTOP-EXIT=0");
}

/* t: the tree view. A shell and the two workers it forked, all three
 * preloaded, in the list of every process: the workers go under the
 * shell, with htop's connectors. */
static void test_tree(void **state) {
  (void)state;
  SKIP_IF_NEEDED();
  char env[6000];
  snprintf(env, sizeof env,
           "LD_PRELOAD='%s' sh -c \"%s & %s & wait\" >/dev/null 2>&1 &\n",
           target_preload, target_cmd, target_cmd);
  new_session(state, env, "-d 0.2");
  WAIT_FOR("3 processes");
  keys("t");
  WAIT_FOR("\xe2\x94\x9c\xe2\x94\x80 "); /* the first worker: a sibling below */
  WAIT_FOR("\xe2\x94\x94\xe2\x94\x80 "); /* the last one */
  /* The shell is above both. */
  const char *sh = strstr(screen_buf, "sh -c");
  assert_non_null(sh);
  assert_true(sh < strstr(screen_buf, "\xe2\x94\x9c\xe2\x94\x80 "));
  keys("t");
  WAIT_GONE("\xe2\x94\x94\xe2\x94\x80 ");
  keys("q");
  WAIT_FOR("MEMTOP-EXIT=0");
}

/* The list of every process in a socket directory memtop does not
 * trust (open to group or others): the empty list says so, with the fix
 * on a row of its own, rather than "No attachable process"; once the
 * directory is made safe, its process is listed. */
static void test_list_unsafe_dir(void **state) {
  (void)state;
  SKIP_IF_NEEDED();
  char env[6000];
  snprintf(env, sizeof env,
           "LD_PRELOAD='%s' %s >/dev/null 2>&1 &\n"
           "for i in $(seq 200); do\n"
           "  ls \"$MEMSTATS_DIR\"/*.sock >/dev/null 2>&1 && break\n"
           "  sleep 0.1\n"
           "done\n"
           "chmod 755 \"$MEMSTATS_DIR\"\n",
           target_preload, target_cmd);
  new_session(state, env, "-d 0.2");
  WAIT_FOR("not trusting the socket directory");
  assert_non_null(strstr(screen_buf, "open to group or others"));
  WAIT_FOR("To list it: chmod 700");
  assert_null(strstr(screen_buf, "No attachable process"));
  run_sh("chmod 700 '%s/sock'", tmp_dir);
  WAIT_FOR("1 process");
  WAIT_GONE("not trusting");
  keys("q");
  WAIT_FOR("MEMTOP-EXIT=0");
}

/* memtop PID on a process started without the library (issue 22's key
 * where memtop meets one): its detail view says it runs no agent and
 * that a attaches; a asks first, any other key gives up (nothing loaded:
 * no socket), y attaches, and its figures come. */
static void test_attach_key(void **state) {
  (void)state;
  SKIP_IF_NEEDED();
  char env[2048], cmd[512], pidfile[128], sock[160];
  snprintf(pidfile, sizeof pidfile, "%s/bare.pid", tmp_dir);
  /* preload_env: under a sanitizer, the plain preload is the one memtop
   * attach loads into the bare program. */
  /* The process is `sh` for its first second, then `sleep`: memtop
   * finds it before its exec, and must name it as it is now. */
  snprintf(env, sizeof env,
           "%ssh -c 'sleep 1; exec sleep 600' & echo $! > '%s'\n", preload_env,
           pidfile);
  snprintf(cmd, sizeof cmd, "-d 0.2 \"$(cat '%s')\"", pidfile);
  new_session(state, env, cmd);
  WAIT_FOR("Press a to attach");
  FILE *f = fopen(pidfile, "r");
  int pid = 0;
  assert_non_null(f);
  assert_int_equal(fscanf(f, "%d", &pid), 1);
  fclose(f);
  snprintf(sock, sizeof sock, "%s/sock/%d.sock", tmp_dir, pid);
  keys("a");
  WAIT_FOR("y: attach");
  WAIT_FOR("Attach memtop to sleep (PID");
  keys("n");
  WAIT_GONE("y: attach");
  assert_int_not_equal(access(sock, F_OK), 0); /* nothing loaded */
  keys("a");
  WAIT_FOR("y: attach");
  keys("y");
  WAIT_FOR("Ready+Prepared");
  assert_int_equal(access(sock, F_OK), 0);
  keys("q");
  WAIT_FOR("MEMTOP-EXIT=0");
}

/* A name with a combining mark ("cafe" and U+0301, as a decomposed
 * "caf\u00e9" is written) reaches the terminal whole, the accent over its
 * e, never as '?' (issue 23): in the list's NAME (the command line) and,
 * with p, as the short name. */
static void test_combining_name(void **state) {
  (void)state;
  SKIP_IF_NEEDED();
  char env[6000], demo[1200], link[1200];
  /* target_cmd is the demo's path in quotes. */
  snprintf(demo, sizeof demo, "%.*s", (int)strlen(target_cmd) - 2,
           target_cmd + 1);
  snprintf(link, sizeof link, "%s/cafe\xcc\x81", tmp_dir);
  unlink(link);
  assert_int_equal(symlink(demo, link), 0);
  snprintf(env, sizeof env, "LD_PRELOAD='%s' '%s' >/dev/null 2>&1 &\n",
           target_preload, link);
  new_session(state, env, "-d 0.2");
  WAIT_FOR("/cafe\xcc\x81");
  assert_null(strstr(screen_buf, "cafe?"));
  keys("p");
  WAIT_FOR(" cafe\xcc\x81");
  assert_null(strstr(screen_buf, "cafe?"));
  keys("q");
  WAIT_FOR("MEMTOP-EXIT=0");
  unlink(link);
}

/* Waits for the light scheme's title line (white on blue). */
static int wait_title_blue(void) {
  return tmux_wait_screen_flags(&tm, "-e", "\033[44mmemtop", 1);
}

/* F2's settings go to $XDG_CONFIG_HOME/memtop/memtoprc and come back on
 * the next start: the round trip through the real file. */
static void test_setup_config(void **state) {
  (void)state;
  SKIP_IF_NEEDED();
  char row[512], path[256], text[2048];
  snprintf(path, sizeof path, "%s/config/memtop/memtoprc", tmp_dir);
  unlink(path);
  wait_target(row, sizeof row);
  keys("F2");
  WAIT_FOR("Setup (saved in");
  WAIT_FOR("Sort by             total");
  keys("Left"); /* the sort: the previous key, USER */
  WAIT_FOR("Sort by             user");
  keys("Down Down Down Right"); /* the colour scheme: light */
  WAIT_FOR("Colour scheme       light");
  keys("Escape");
  WAIT_FOR("USER*");
  /* The light scheme: the title white on blue (the default's is black on
   * cyan). */
  assert_true(wait_title_blue());
  assert_true(tmux_wait_file(path, text, sizeof text));
  assert_non_null(strstr(text, "sort=user\n"));
  assert_non_null(strstr(text, "scheme=light\n"));
  quit_stop("q");
  WAIT_FOR("MEMTOP-EXIT=0");

  /* A new memtop reads it: it opens sorted by USER. */
  session_teardown(state);
  assert_int_equal(session_setup(state), 0);
  wait_target(row, sizeof row);
  WAIT_FOR("USER*");
  assert_true(wait_title_blue());
  quit_stop("q");
  WAIT_FOR("MEMTOP-EXIT=0");
  unlink(path);
}

/* A terminal memtop cannot draw on is named, with the fix: TERM unset,
 * unknown to terminfo, or dumb (which showed a blank screen). */
static void test_term_unusable(void **state) {
  static const struct {
    const char *env, *said;
  } cases[] = {
      {"unset TERM\n", "the live view needs to know the terminal, and TERM"},
      /* ncurses' newterm() keeps the pre-screen it made when the terminal
       * turns out unknown (libtinfo's new_prescr): its leak, not memtop's,
       * which LeakSanitizer would turn into exit 1 under make asan. */
      {"export TERM=nosuchterm-xyz "
       "ASAN_OPTIONS=\"${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0\"\n",
       "memtop: the terminal type TERM=nosuchterm-xyz is unknown"},
      {"export TERM=dumb\n", "memtop: the live view cannot draw on TERM=dumb"},
      /* curses is loaded by the live view alone (view_curses.c): where it
       * cannot be (tests/progs/libnodlopen.so refuses it), the library
       * and its package are named. */
      {NULL, "memtop: the live view needs libncursesw.so.6 (ncurses;"},
  };
  static char no_curses[1600];

  SKIP_IF_NEEDED();
  snprintf(no_curses, sizeof no_curses,
           "export LD_PRELOAD='%s/progs/libnodlopen.so' "
           "MT_TEST_NO_DLOPEN=libncursesw.so.6 "
           "ASAN_OPTIONS=\"${ASAN_OPTIONS:+$ASAN_OPTIONS:}"
           "verify_asan_link_order=0\"\n",
           build_dir);
  /* This test makes its own sessions; the last is left for the
   * teardown. */
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    new_session(state, cases[i].env != NULL ? cases[i].env : no_curses, "");
    WAIT_FOR("MEMTOP-EXIT=");
    if (strstr(screen_buf, cases[i].said) == NULL ||
        strstr(screen_buf, "MEMTOP-EXIT=2") == NULL)
      fail_msg("with %s want \"%s\" and exit 2; the screen shows:\n%s",
               cases[i].env != NULL ? cases[i].env : no_curses, cases[i].said,
               screen_buf);
    assert_null(strstr(screen_buf, "not available from this provider"));
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_term_unusable, session_setup,
                                      session_teardown),
      cmocka_unit_test_setup_teardown(test_figures_change, session_setup,
                                      session_teardown),
      cmocka_unit_test_setup_teardown(test_alloc_sites, session_setup,
                                      session_teardown),
      cmocka_unit_test_setup_teardown(test_keys, session_setup,
                                      session_teardown),
      cmocka_unit_test_setup_teardown(test_resize, session_setup,
                                      session_teardown),
      cmocka_unit_test_setup_teardown(test_exited_marked, session_setup,
                                      session_teardown),
      cmocka_unit_test_setup_teardown(test_quit_restores, session_setup,
                                      session_teardown),
      cmocka_unit_test_setup_teardown(test_quit_run_stop, session_setup,
                                      session_teardown),
      cmocka_unit_test_setup_teardown(test_quit_run_stop_job, session_setup,
                                      session_teardown),
      cmocka_unit_test_setup_teardown(test_quit_run_detach, session_setup,
                                      session_teardown),
      cmocka_unit_test_setup_teardown(test_hangup_detaches, session_setup,
                                      session_teardown),
      cmocka_unit_test_setup_teardown(test_run_unsafe_dir, session_setup,
                                      session_teardown),
      cmocka_unit_test_setup_teardown(test_colour_utf8, session_setup,
                                      session_teardown),
      cmocka_unit_test_setup_teardown(test_no_colour_ascii, plain_session_setup,
                                      session_teardown),
      cmocka_unit_test_setup_teardown(test_htop_keys, session_setup,
                                      session_teardown),
      cmocka_unit_test_setup_teardown(test_sort_picker, session_setup,
                                      session_teardown),
      cmocka_unit_test_setup_teardown(test_combining_name, session_setup,
                                      session_teardown),
      cmocka_unit_test_setup_teardown(test_mouse, session_setup,
                                      session_teardown),
      cmocka_unit_test_setup_teardown(test_no_mouse, no_mouse_setup,
                                      session_teardown),
      cmocka_unit_test_setup_teardown(test_setup_config, session_setup,
                                      session_teardown),
      cmocka_unit_test_setup_teardown(test_list_unsafe_dir, session_setup,
                                      session_teardown),
      cmocka_unit_test_setup_teardown(test_tree, session_setup,
                                      session_teardown),
      cmocka_unit_test_setup_teardown(test_attach_key, session_setup,
                                      session_teardown),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
