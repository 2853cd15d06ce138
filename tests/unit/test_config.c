/*
 * test_config.c - memtoprc (src/tui/config.c): the live view's settings
 * written by the setup screen and read back at start, the round trip
 * whole; what the command line said wins; a file with garbage, unknown
 * keys or a newer memtop's settings still loads what it can.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "memstats.h"
#include "tui/config.h"
#include "tui/model.h"

static char dir[64];

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/memtop-config-XXXXXX");
  if (mkdtemp(dir) == NULL)
    return -1;
  return 0;
}

static int teardown(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system(cmd) == 0 ? 0 : -1;
}

static void test_path(void **state) {
  (void)state;
  char path[1024], want[1024];
  setenv("XDG_CONFIG_HOME", dir, 1);
  assert_int_equal(mt_config_path(path, sizeof path), 0);
  snprintf(want, sizeof want, "%s/memtop/memtoprc", dir);
  assert_string_equal(path, want);
  /* A relative XDG_CONFIG_HOME is ignored (the XDG rules): HOME's. */
  setenv("XDG_CONFIG_HOME", "relative", 1);
  setenv("HOME", "/home/someone", 1);
  assert_int_equal(mt_config_path(path, sizeof path), 0);
  assert_string_equal(path, "/home/someone/.config/memtop/memtoprc");
  unsetenv("HOME");
  unsetenv("XDG_CONFIG_HOME");
  assert_int_equal(mt_config_path(path, sizeof path), MS_ENOENT);
  setenv("XDG_CONFIG_HOME", dir, 1);
  assert_int_equal(mt_config_path(path, 8), MS_ENOSPC);
}

/* What the setup screen writes is what the next start reads. */
static void test_round_trip(void **state) {
  (void)state;
  char path[1024];
  struct stat st;
  mt_model_t a, b;
  setenv("XDG_CONFIG_HOME", dir, 1);
  assert_int_equal(mt_config_path(path, sizeof path), 0);
  mt_model_init(&a);
  mt_model_init(&b);
  assert_int_equal(mt_config_load(&b, path), MS_ENOENT); /* no file yet */

  a.sort = MT_SORT_RSS;
  a.sort_reverse = 1;
  a.delay_s = 2.5;
  a.scheme = MT_SCHEME_LIGHT;
  a.show_cmdline = 0;
  a.mouse = 0;
  a.columns = MT_COLUMNS_ALL & ~(1u << MT_COL_USER) & ~(1u << MT_COL_FRAG);
  /* The directory does not exist: it is made, for the user alone. */
  assert_int_equal(mt_config_save(&a, path), 0);
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0600);
  char d[1100];
  snprintf(d, sizeof d, "%s/memtop", dir);
  assert_int_equal(stat(d, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0700);

  assert_int_equal(mt_config_load(&b, path), 0);
  assert_int_equal(b.sort, MT_SORT_RSS);
  assert_int_equal(b.sort_reverse, 1);
  assert_true(b.delay_s == 2.5);
  assert_int_equal(b.scheme, MT_SCHEME_LIGHT);
  assert_int_equal(b.show_cmdline, 0);
  assert_int_equal(b.mouse, 0);
  assert_int_equal(b.columns, a.columns);

  /* Written again (replaced whole), and read by a start with -d: the
   * command line's delay stays. */
  a.delay_s = 7;
  assert_int_equal(mt_config_save(&a, path), 0);
  mt_model_t c;
  mt_model_init(&c);
  c.delay_s = 0.3;
  c.delay_given = 1;
  assert_int_equal(mt_config_load(&c, path), 0);
  assert_true(c.delay_s == 0.3);
  assert_int_equal(c.sort, MT_SORT_RSS);
  mt_model_free(&a);
  mt_model_free(&b);
  mt_model_free(&c);
}

/* Garbage, unknown keys and bad values are skipped, the rest applies;
 * --no-mouse is not turned back on by the file. */
static void test_parse_hostile(void **state) {
  (void)state;
  mt_model_t m;
  mt_model_init(&m);
  m.mouse = 0; /* --no-mouse */
  int n = mt_config_parse(&m, "# a comment\n"
                              "sort = ready   # trailing comment\n"
                              "reverse=maybe\n"
                              "delay=0.01\n"
                              "scheme=neon\n"
                              "mouse=1\n"
                              "future_setting=42\n"
                              "\x1b[2J garbage without equals\n"
                              "columns=rss,,bogus,data\r\n"
                              "cmdline=no");
  assert_int_equal(n, 4); /* sort, mouse, columns, cmdline */
  assert_int_equal(m.sort, MT_SORT_READY);
  assert_int_equal(m.sort_reverse, 0);
  assert_true(m.delay_s == 1.0); /* below the minimum: refused */
  assert_int_equal(m.scheme, MT_SCHEME_DEFAULT);
  assert_int_equal(m.mouse, 0);
  assert_int_equal(m.show_cmdline, 0);
  /* PID and NAME always show. */
  assert_int_equal(m.columns, 1u << MT_COL_RSS | 1u << MT_COL_DATA |
                                  1u << MT_COL_PID | 1u << MT_COL_NAME);
  /* A line longer than any setting is skipped whole. */
  char big[2000];
  memset(big, 'x', sizeof big);
  memcpy(big, "sort=pid", 8);
  big[sizeof big - 1] = '\0';
  assert_int_equal(mt_config_parse(&m, big), 0);
  assert_int_equal(m.sort, MT_SORT_READY);
  mt_model_free(&m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_path),
      cmocka_unit_test(test_round_trip),
      cmocka_unit_test(test_parse_hostile),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
