/*
 * test_sockdir.c - where sockets live, and whether that place is safe
 * (common/sockdir.h), by DESIGN.md's rules: $MEMSTATS_DIR if set, else
 * $XDG_RUNTIME_DIR/memtop, else /tmp/memtop-$UID; the directory made with
 * mode 0700; a symbolic link, another user's directory or one open to
 * group or others refused, each with its own reason and fix. memtop's
 * client finds a PID's socket as <dir>/<pid>.sock by the same rules.
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

#include "client/client.h"
#include "common/sockdir.h"
#include "memstats.h"

static char tmp[64];

static int setup(void **state) {
  (void)state;
  snprintf(tmp, sizeof tmp, "/tmp/test_sockdir.XXXXXX");
  return mkdtemp(tmp) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
  return system(cmd) == 0 ? 0 : -1;
}

/* The order of the three places, and an empty variable as unset. */
static void test_path_order(void **state) {
  (void)state;
  char buf[256], want[256];

  setenv("MEMSTATS_DIR", "/a/b/", 1);
  setenv("XDG_RUNTIME_DIR", "/run/user/77", 1);
  assert_int_equal(ms__sockdir_path(buf, sizeof buf), 0);
  assert_string_equal(buf, "/a/b"); /* no trailing slash */

  setenv("MEMSTATS_DIR", "", 1);
  assert_int_equal(ms__sockdir_path(buf, sizeof buf), 0);
  assert_string_equal(buf, "/run/user/77/memtop");

  unsetenv("MEMSTATS_DIR");
  assert_int_equal(ms__sockdir_path(buf, sizeof buf), 0);
  assert_string_equal(buf, "/run/user/77/memtop");

  setenv("XDG_RUNTIME_DIR", "", 1);
  snprintf(want, sizeof want, "/tmp/memtop-%u", (unsigned)geteuid());
  assert_int_equal(ms__sockdir_path(buf, sizeof buf), 0);
  assert_string_equal(buf, want);
  unsetenv("XDG_RUNTIME_DIR");
  assert_int_equal(ms__sockdir_path(buf, sizeof buf), 0);
  assert_string_equal(buf, want);

  /* Too small a buffer is an error, never a cut path. */
  setenv("MEMSTATS_DIR", "/a/long/enough/path", 1);
  assert_int_equal(ms__sockdir_path(buf, 8), MS_EINVAL);

  /* The client's socket of a PID: <pid>.sock in that directory. */
  setenv("MEMSTATS_DIR", tmp, 1);
  assert_int_equal(msc_socket_path(1234, buf, sizeof buf), 0);
  snprintf(want, sizeof want, "%s/1234.sock", tmp);
  assert_string_equal(buf, want);
  unsetenv("MEMSTATS_DIR");
}

/* Made with mode 0700 whatever the umask lets through; then refused when
 * a symbolic link, open to group or others, or another user's. */
static void test_prepare_and_refusals(void **state) {
  (void)state;
  char dir[128], link[128], fix[512];
  const char *why = NULL;

  snprintf(dir, sizeof dir, "%s/socks", tmp);
  mode_t old = umask(0);
  int r = ms__sockdir_prepare(dir, &why);
  umask(old);
  assert_int_equal(r, 0);
  struct stat st;
  assert_int_equal(lstat(dir, &st), 0);
  assert_true(S_ISDIR(st.st_mode));
  assert_int_equal(st.st_mode & 07777, 0700);
  assert_int_equal(ms__sockdir_check(dir, geteuid(), &why), 0);

  /* Another user's: refused for us. */
  assert_int_equal(ms__sockdir_check(dir, geteuid() + 1, &why), MS_EUNSAFE);
  assert_non_null(strstr(why, "another user"));
  ms__sockdir_fix(dir, geteuid() + 1, fix, sizeof fix);
  assert_non_null(strstr(fix, "remove"));

  /* Open to the group: refused, and the fix is a chmod. */
  assert_int_equal(chmod(dir, 0750), 0);
  assert_int_equal(ms__sockdir_prepare(dir, &why), MS_EUNSAFE);
  assert_non_null(strstr(why, "open to group or others"));
  ms__sockdir_fix(dir, geteuid(), fix, sizeof fix);
  assert_non_null(strstr(fix, "chmod 700"));
  assert_int_equal(chmod(dir, 0700), 0);

  /* A symbolic link to a good directory: refused, never followed. */
  snprintf(link, sizeof link, "%s/link", tmp);
  assert_int_equal(symlink(dir, link), 0);
  assert_int_equal(ms__sockdir_prepare(link, &why), MS_EUNSAFE);
  assert_non_null(strstr(why, "symbolic link"));
  ms__sockdir_fix(link, geteuid(), fix, sizeof fix);
  assert_null(strstr(fix, "chmod"));

  /* Missing: ms__sockdir_check says so, for prepare to make it. */
  char gone[160];
  snprintf(gone, sizeof gone, "%s/none", tmp);
  assert_int_equal(ms__sockdir_check(gone, geteuid(), &why), MS_ENOENT);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_path_order),
      cmocka_unit_test(test_prepare_and_refusals),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
