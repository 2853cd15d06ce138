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
#include <limits.h>
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

#define WAIT_LIMIT_MS 20000 /* far beyond what a working memtop needs */
#define COLS 100
#define ROWS 30

static char build_dir[1024];
static char tmp_dir[64];
static char tmux_sock[128];
static char target_cmd[2200];
static char preload_env[1300];
static const char *skip_reason;
/* Extra shell lines for the next session (the colour and locale tests). */
static const char *session_env = "";
/* The arguments of memtop in the next session (NULL: `memtop run -d 0.2
 * -- TARGET`). */
static const char *session_cmd;
static char screen_buf[64 * 1024];

/* ================================================================ helpers */

static void find_build_dir(void) {
  assert_int_equal(host_build_dir(build_dir, sizeof build_dir), 0);
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* The pane's text, one line per row; with attributes as escape
 * sequences when flags is "-e". */
static const char *capture_pane(const char *flags) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "tmux -S %s capture-pane %s -p -t v 2>/dev/null",
           tmux_sock, flags);
  FILE *p = popen(cmd, "r");
  size_t n = 0;
  screen_buf[0] = '\0';
  if (p == NULL)
    return screen_buf;
  n = fread(screen_buf, 1, sizeof screen_buf - 1, p);
  screen_buf[n] = '\0';
  pclose(p);
  return screen_buf;
}

static const char *capture(void) {
  return capture_pane("");
}

static void keys(const char *k) {
  assert_int_equal(run_sh("tmux -S %s send-keys -t v %s", tmux_sock, k), 0);
}

/* Waits until the screen contains (or, with want == 0, lacks) `text`. */
static int wait_screen(const char *text, int want) {
  for (long waited = 0; waited < WAIT_LIMIT_MS; waited += 100) {
    if ((strstr(capture(), text) != NULL) == want)
      return 1;
    sleep_ms(100);
  }
  print_error("the screen never %s \"%s\"; it shows:\n%s\n",
              want ? "showed" : "lost", text, screen_buf);
  return 0;
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

/* ============================================================== fixtures */

static int group_setup(void **state) {
  (void)state;
  find_build_dir();
  char memtop[1200];
  snprintf(memtop, sizeof memtop, "%s/memtop", build_dir);
  if (!host_have_program("tmux")) {
    skip_reason = "tmux is not installed (apt-get install tmux)";
    return 0;
  }
  if (access(memtop, X_OK) != 0) {
    skip_reason = "memtop is not built in this build directory (make)";
    return 0;
  }
  snprintf(tmp_dir, sizeof tmp_dir, "/tmp/memtop-tmux-XXXXXX");
  if (mkdtemp(tmp_dir) == NULL)
    return -1;

  /* The demo workload. A sanitizer build's own demo cannot take the plain
   * preload (the sanitizer's runtime must come first): such a build keeps
   * a plain demo beside the plain preload (tests/progs/progs.mk). */
  char demo[1200];
  snprintf(demo, sizeof demo, "%s/plain/contrib/demo", build_dir);
  if (access(demo, X_OK) != 0)
    snprintf(demo, sizeof demo, "%s/contrib/demo", build_dir);
  if (access(demo, X_OK) != 0) {
    skip_reason = "contrib/demo is not built in this build directory (make)";
    return 0;
  }
  snprintf(target_cmd, sizeof target_cmd, "'%s'", demo);
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
          "LC_ALL=C.UTF-8\n"
          "unset NO_COLOR\n"
          "%s%s"
          "rm -f '%s/stty.txt'\n"
          "'%s/memtop' run -d 0.2 -- %s\n"
          "echo \"MEMTOP-EXIT=$?\"\n"
          "stty -a > '%s/stty.tmp' && mv '%s/stty.tmp' '%s/stty.txt'\n"
          "exec sleep 600\n",
          tmp_dir, tmp_dir, preload_env, session_env, tmp_dir, build_dir,
          target_cmd, tmp_dir, tmp_dir, tmp_dir);
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
            "LC_ALL=C.UTF-8\n"
            "%s"
            "%s\n"
            "echo \"MEMTOP-EXIT=$?\"\n"
            "exec sleep 600\n",
            tmp_dir, tmp_dir, session_env, line);
    fclose(f);
  }
  run_sh("mkdir -p -m 700 '%s/sock'", tmp_dir);
  /* A server of its own per session, its socket in our directory: the
   * last one may still be on its way out after kill-server, and a new
   * session on its socket would die with it. */
  static int sessions;
  snprintf(tmux_sock, sizeof tmux_sock, "%s/tmux-%d", tmp_dir, ++sessions);
  if (run_sh("tmux -S %s -f /dev/null new-session -d -s v -x %d -y %d "
             "\"sh '%s'\"",
             tmux_sock, COLS, ROWS, script) != 0)
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

static int session_teardown(void **state) {
  (void)state;
  if (skip_reason == NULL)
    run_sh("tmux -S %s kill-server >/dev/null 2>&1", tmux_sock);
  return 0;
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

  /* s: the sort moves from PID to the next column, NAME. */
  WAIT_FOR("PID*");
  keys("s");
  WAIT_FOR("NAME*");
  WAIT_GONE("PID*");

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
  keys("q");
  WAIT_FOR("MEMTOP-EXIT=0");
}

static void test_resize(void **state) {
  (void)state;
  SKIP_IF_NEEDED();
  char row[512], line[512];
  wait_target(row, sizeof row);
  WAIT_FOR("PREPARED");
  /* Narrower: the list keeps the breakdown and drops what does not fit. */
  assert_int_equal(
      run_sh("tmux -S %s resize-window -t v -x 60 -y 15", tmux_sock), 0);
  WAIT_GONE("PREPARED");
  WAIT_FOR("READY");
  for (int i = 0; i < 15; i++)
    assert_true(strlen(line_of(screen_buf, i, line, sizeof line)) <= 60);
  /* The status line follows to the new last row. */
  assert_true(strlen(line_of(screen_buf, 14, line, sizeof line)) > 0);
  /* Wider: every column, the provider included. */
  assert_int_equal(
      run_sh("tmux -S %s resize-window -t v -x 130 -y 40", tmux_sock), 0);
  WAIT_FOR("PROVIDER");
  WAIT_FOR("OBJECTS");
  assert_true(strlen(line_of(screen_buf, 39, line, sizeof line)) > 0);
  /* The detail view at a small size drops sections but keeps the bar. */
  keys("Enter");
  WAIT_FOR("Sys by class");
  assert_int_equal(
      run_sh("tmux -S %s resize-window -t v -x 40 -y 12", tmux_sock), 0);
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
  keys("q");
  WAIT_FOR("MEMTOP-EXIT=");
  /* The alternate screen is gone: only the shell's own output remains. */
  assert_null(strstr(screen_buf, "READY"));
  assert_null(strstr(screen_buf, "memtop 0.1"));
  /* And the terminal is back in cooked mode with echo. (The shell writes
   * stty's output to a temporary file and renames it: the file is whole
   * once it exists.) */
  snprintf(path, sizeof path, "%s/stty.txt", tmp_dir);
  FILE *f = NULL;
  for (long waited = 0; waited < WAIT_LIMIT_MS && f == NULL; waited += 100) {
    f = fopen(path, "r");
    if (f == NULL)
      sleep_ms(100);
  }
  assert_non_null(f);
  char modes[4096];
  size_t n = fread(modes, 1, sizeof modes - 1, f);
  modes[n] = '\0';
  fclose(f);
  for (char *p = modes; *p; p++)
    if (*p == '\n' || *p == ';')
      *p = ' ';
  if (strstr(modes, " icanon ") == NULL || strstr(modes, " echo ") == NULL)
    print_error("tty modes after memtop: %s\n", modes);
  assert_non_null(strstr(modes, " icanon "));
  assert_non_null(strstr(modes, " echo "));
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
  };

  SKIP_IF_NEEDED();
  session_teardown(state); /* this test makes its own sessions */
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    session_env = cases[i].env;
    session_cmd = "";
    assert_int_equal(session_setup(state), 0);
    session_env = "";
    session_cmd = NULL;
    WAIT_FOR("MEMTOP-EXIT=");
    if (strstr(screen_buf, cases[i].said) == NULL ||
        strstr(screen_buf, "MEMTOP-EXIT=2") == NULL)
      fail_msg("with %s want \"%s\" and exit 2; the screen shows:\n%s",
               cases[i].env, cases[i].said, screen_buf);
    assert_null(strstr(screen_buf, "not available from this provider"));
    session_teardown(state);
  }
  assert_int_equal(session_setup(state), 0); /* for the teardown */
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
      cmocka_unit_test_setup_teardown(test_colour_utf8, session_setup,
                                      session_teardown),
      cmocka_unit_test_setup_teardown(test_no_colour_ascii, plain_session_setup,
                                      session_teardown),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
