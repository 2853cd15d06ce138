/*
 * test_build.c - the build as a packager meets it.
 *
 * The products carry the distribution's hardening (the Makefile's
 * HARDEN_CFLAGS and HARDEN_LDFLAGS): full RELRO (a GNU_RELRO segment and
 * BIND_NOW), the stack protector (__stack_chk_fail imported), glibc's
 * checking functions from _FORTIFY_SOURCE (some __*_chk imported), and
 * memtop as a position-independent executable (ELF type DYN). Read with
 * readelf and nm, as lintian and checksec do.
 *
 * Each side links only its own layers (CONTRIBUTING.md): memtop none of the
 * target side's engine, providers, agent or preload, and the library and
 * the preload none of memtop's emitters (nm).
 *
 * contrib/setup-deps.sh on a machine that is not Debian (no dpkg-query in
 * PATH) installs nothing: it names what is missing and the packages that
 * provide it, fails only when a required piece is missing, and never runs
 * apt-get.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/host.h"
#include "support/run.h"

#ifndef MS_TEST_HARDEN
#define MS_TEST_HARDEN 1
#endif
#ifndef MS_TEST_FORTIFY
#define MS_TEST_FORTIFY 1
#endif
#ifndef MT_TEST_UV_STATIC
#define MT_TEST_UV_STATIC 1
#endif

static char build_dir[1024];
static char out[65536];

/* Runs the shell command cmd, its stdout and stderr into out. Returns its
 * exit status, or -1 if it did not exit normally. */
static int sh(const char *cmd) {
  return run_output(cmd, out, sizeof out);
}

static int setup(void **state) {
  (void)state;
  return host_build_dir(build_dir, sizeof build_dir);
}

/* ---- hardening ------------------------------------------------------------
 */

/* Checks one product of the build; pie: it must be a PIE executable. */
static void check_hardened(const char *name, int pie) {
  char path[1200], cmd[1500];

  if (!MS_TEST_HARDEN)
    skip(); /* built with HARDEN=0 */
  if (!host_have_program("readelf") || !host_have_program("nm"))
    skip();
  snprintf(path, sizeof path, "%s/%s", build_dir, name);
  if (access(path, R_OK) != 0)
    fail_msg("%s is missing: build it with `make` first", path);

  snprintf(cmd, sizeof cmd, "readelf -lW '%s'", path);
  assert_int_equal(sh(cmd), 0);
  if (!strstr(out, "GNU_RELRO"))
    fail_msg("%s has no GNU_RELRO segment (-Wl,-z,relro)", name);
  snprintf(cmd, sizeof cmd, "readelf -dW '%s'", path);
  assert_int_equal(sh(cmd), 0);
  if (!strstr(out, "BIND_NOW") && !strstr(out, "Flags: NOW"))
    fail_msg("%s is not bound at load (-Wl,-z,now):\n%s", name, out);
  snprintf(cmd, sizeof cmd, "readelf -hW '%s'", path);
  assert_int_equal(sh(cmd), 0);
  if (!strstr(out, "DYN ("))
    fail_msg("%s: ELF type is not DYN%s", name, pie ? " (-pie)" : "");
  if (pie) {
    snprintf(cmd, sizeof cmd, "readelf -dW '%s'", path);
    assert_int_equal(sh(cmd), 0);
    if (!strstr(out, "PIE"))
      fail_msg("%s is not a position-independent executable (-pie)", name);
  }

  snprintf(cmd, sizeof cmd, "nm -D '%s'", path);
  assert_int_equal(sh(cmd), 0);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  if (!strstr(out, " __stack_chk_fail"))
    fail_msg("%s has no stack protector (-fstack-protector-strong)", name);
#endif
  if (MS_TEST_FORTIFY && !strstr(out, "_chk@"))
    fail_msg("%s calls none of glibc's checking functions "
             "(-D_FORTIFY_SOURCE=3)",
             name);
}

static void test_memtop_hardened(void **state) {
  (void)state;
  check_hardened("memtop", 1);
}

static void test_memtop_serve_hardened(void **state) {
  (void)state;
  check_hardened("memtop-serve", 1);
}

static void test_library_hardened(void **state) {
  (void)state;
  check_hardened("libmemstats.so", 0);
}

static void test_preload_hardened(void **state) {
  (void)state;
  check_hardened("libmemstats-preload.so", 0);
}

/* ---- each side links only its layers ----------------------------------------
 * memtop links common, wire, client, emit and its own folder: none of the
 * engine, the providers, the agent or the preload (their constructors would
 * run in memtop: the engine's registers membarrier). libmemstats and the
 * preload carry no emitter (memtop's alone). Read with nm, symbol names
 * only. */

/* The engine's, the providers', the snapshot's composition's, the agent's
 * and the preload's symbols; engine_init (static, in shard.c) is the one
 * that calls membarrier. */
#define TARGET_SYMS                                                            \
  "^(ms__(shard|engine|providers?_|preload|track|agent|tls|gc_|map_|mappings|" \
  "final_|boehm|pv_|snapshot_|read_(try)?lock|read_unlock|pause_read|"         \
  "sys_read|class_)|ms_snapshot_read$|engine_init$)"
#define EMIT_SYMS "^mt_(emit|fmt)_"

/* The names in product `name` that match the extended regex re, one a line
 * into out; returns how many. */
static int symbols_matching(const char *name, const char *re) {
  char path[1200], cmd[1600];

  if (!host_have_program("nm"))
    skip();
  snprintf(path, sizeof path, "%s/%s", build_dir, name);
  if (access(path, R_OK) != 0)
    fail_msg("%s is missing: build it with `make` first", path);
  snprintf(cmd, sizeof cmd, "nm '%s' | awk '{print $NF}' | grep -E '%s'", path,
           re);
  int st = sh(cmd);
  assert_true(st == 0 || st == 1); /* grep: 1 is "no line matched" */
  int n = 0;
  for (const char *p = out; *p; p++)
    n += *p == '\n';
  return n;
}

static void test_memtop_without_engine(void **state) {
  (void)state;
  /* The pattern finds the engine where it is (else it could never fail). */
  assert_true(symbols_matching("libmemstats.so", TARGET_SYMS) > 0);
  if (symbols_matching("memtop", TARGET_SYMS) != 0)
    fail_msg("memtop links the target side's code:\n%.2000s", out);
  assert_true(symbols_matching("memtop", EMIT_SYMS) > 0);
}

static void test_library_without_emit(void **state) {
  (void)state;
  if (symbols_matching("libmemstats.so", EMIT_SYMS) != 0)
    fail_msg("libmemstats.so carries memtop's emitters:\n%.2000s", out);
  if (symbols_matching("libmemstats-preload.so", EMIT_SYMS) != 0)
    fail_msg("the preload carries memtop's emitters:\n%.2000s", out);
}

/* ---- memtop starts without the exporter's libraries ------------------------
 * Every command but `serve` starts without libmicrohttpd, GnuTLS (and the
 * p11-kit, nettle, gmp ... it loads), libyaml and libcrypt: loading them
 * cost more than the rest of memtop's start-up. memtop-serve has them.
 * Read from the dynamic section (NEEDED), as the loader reads it. */
#define EXPORTER_LIBS "libmicrohttpd|libgnutls|libyaml|libcrypt\\."

/* What the loader says it loaded for `memtop -V` (LD_DEBUG=files), its
 * "file=" lines piped through `then` ("" or "| grep ..."): sh()'s
 * status, the lines in out. */
static int memtop_v_loaded(const char *then) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd,
           "LD_DEBUG=files '%s/memtop' -V 2>&1 >/dev/null | grep 'file=' %s",
           build_dir, then);
  return sh(cmd);
}

static int needed_matching(const char *name, const char *re) {
  char path[1200], cmd[1600];

  if (!host_have_program("readelf"))
    skip();
  snprintf(path, sizeof path, "%s/%s", build_dir, name);
  if (access(path, R_OK) != 0)
    fail_msg("%s is missing: build it with `make` first", path);
  snprintf(cmd, sizeof cmd, "readelf -dW '%s' | grep NEEDED | grep -E '%s'",
           path, re);
  int st = sh(cmd);
  assert_true(st == 0 || st == 1);
  int n = 0;
  for (const char *p = out; *p; p++)
    n += *p == '\n';
  return n;
}

static void test_memtop_without_exporter_libs(void **state) {
  (void)state;
  /* The pattern finds them where they are (else it could never fail). */
  assert_int_equal(needed_matching("memtop-serve", EXPORTER_LIBS), 4);
  if (needed_matching("memtop", EXPORTER_LIBS) != 0)
    fail_msg("memtop loads the exporter's libraries at start:\n%s", out);
}

/* ---- nor the symboliser's, nor curses ------------------------------------
 * libdw and libelf (with the liblzma, libbz2 and libz they bring),
 * protobuf-c and zlib serve profiles only: memtop loads them when it
 * first resolves names or writes a profile.proto file (pprof/libs.h);
 * ncursesw and libtinfo the live view only, which loads them as it starts
 * (tui/view_curses.c); never at start. Read from NEEDED, and from what the
 * loader says it loaded for `memtop -V` (LD_DEBUG=files); test_memtop checks
 * --once. */
#define SYMBOLISER_LIBS                                                        \
  "libdw\\.|libelf\\.|libprotobuf-c|liblzma|libbz2|libz\\.|libncurses|"        \
  "libtinfo"

static void test_memtop_without_symboliser_libs(void **state) {
  char cmd[1600];

  (void)state;
  /* The pattern finds them where they are (else it could never fail):
   * memtop-serve's exporter gzips its answers with zlib (and memtop-serve,
   * linked without --as-needed, may name the others too: gcc's default on
   * Debian drops them, clang's keeps them). */
  assert_true(needed_matching("memtop-serve", SYMBOLISER_LIBS) >= 1);
  if (needed_matching("memtop", SYMBOLISER_LIBS) != 0)
    fail_msg("memtop loads a mode's libraries at start:\n%s", out);
  assert_int_equal(memtop_v_loaded(""), 0);
  assert_non_null(strstr(out, "file=libc.so.6"));
  snprintf(cmd, sizeof cmd, "| grep -E '%s'", SYMBOLISER_LIBS);
  if (memtop_v_loaded(cmd) != 1)
    fail_msg("memtop -V loads a mode's libraries:\n%s", out);
}

/* ---- memtop starts with libc alone ---------------------------------------
 * Each library the loader maps and relocates before main is paid by every
 * command (`memtop --once PID` from a script, `-V`): libuv is linked from
 * its archive (the Makefile's UV_STATIC, where libuv's archive is
 * installed: then memtop names libc alone) and libm's one function, exp,
 * is loaded by the profiles that use it (pprof/libs.h). Read from NEEDED
 * and from what the loader says it loaded for `memtop -V`
 * (LD_DEBUG=files); the symbol relocations are said (LD_DEBUG=statistics:
 * 564 with libuv and libm loaded, 377 without). */
#define MEMTOP_LIBS                                                            \
  (MT_TEST_UV_STATIC ? "libc\\.so\\.6" : "libc\\.so\\.6|libuv\\.so\\.1")

static void test_memtop_needs_libc_alone(void **state) {
  char cmd[1600];

  (void)state;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  print_message("skipped: a sanitized memtop needs the sanitizers' runtimes\n");
  skip();
#endif
  /* The pattern finds what is there (else it could never fail). */
  assert_int_equal(needed_matching("memtop", "libc\\.so\\.6"), 1);
  int ours = needed_matching("memtop", MEMTOP_LIBS);
  if (needed_matching("memtop", ".") != ours)
    fail_msg("memtop needs more than %s:\n%s", MEMTOP_LIBS, out);
  assert_int_equal(memtop_v_loaded(""), 0);
  assert_non_null(strstr(out, "file=libc.so.6"));
  snprintf(cmd, sizeof cmd, "| grep -vE 'file=(%s) '", MEMTOP_LIBS);
  if (memtop_v_loaded(cmd) != 1)
    fail_msg("memtop -V loads more than %s:\n%s", MEMTOP_LIBS, out);
  snprintf(cmd, sizeof cmd,
           "LD_DEBUG=statistics '%s/memtop' -V 2>&1 >/dev/null | "
           "grep 'final number of relocations:'",
           build_dir);
  if (sh(cmd) == 0)
    print_message("memtop -V: %s", out);
}

/* ---- setup-deps.sh off Debian ---------------------------------------------
 */

/* A directory to serve as PATH: no dpkg-query, an apt-get that leaves a
 * mark if it is ever run, and links to the real programs named. */
static void make_path(char *dir, const char *const *progs) {
  char path[1200], cmd[2048];
  FILE *f;

  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/apt-get", dir);
  f = fopen(path, "w");
  assert_non_null(f);
  fprintf(f, "#!/bin/sh\ntouch '%s/apt-get-ran'\nexit 0\n", dir);
  fclose(f);
  assert_int_equal(chmod(path, 0755), 0);
  for (; *progs != NULL; progs++) {
    snprintf(cmd, sizeof cmd,
             "p=$(command -v '%s') && ln -s \"$p\" '%s/%s' || true", *progs,
             dir, *progs);
    assert_int_equal(sh(cmd), 0);
  }
}

static void remove_dir(const char *dir) {
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(sh(cmd), 0);
}

static int apt_ran(const char *dir) {
  char path[1200];
  snprintf(path, sizeof path, "%s/apt-get-ran", dir);
  return access(path, F_OK) == 0;
}

/* Runs contrib/setup-deps.sh (from the source tree, the current directory
 * of `make check`) with PATH=dir only. */
static int run_setup_deps(const char *dir) {
  char cmd[2048], script[1200];
  if (getcwd(script, sizeof script - 32) == NULL)
    return -1;
  strcat(script, "/contrib/setup-deps.sh");
  if (access(script, R_OK) != 0)
    return -2;
  snprintf(cmd, sizeof cmd, "env -i PATH='%s' /bin/sh '%s'", dir, script);
  return sh(cmd);
}

/* On Debian with nothing installed (a dpkg-query that knows no package):
 * `setup-deps.sh build`, what `make demo` runs, asks apt-get for what the
 * build needs and none of the test suite's packages; with no argument (make
 * check) for those too. As root the fake apt-get prints what it is given;
 * otherwise (no sudo in PATH) the script prints the command to run. */
static void test_setup_deps_build_only(void **state) {
  char dir[] = "/tmp/test_build.XXXXXX", path[1200], cmd[2400], script[1200];
  static const char *const progs[] = {"sh", "id", "cat", NULL};
  FILE *f;

  (void)state;
  make_path(dir, progs);
  snprintf(path, sizeof path, "%s/apt-get", dir);
  f = fopen(path, "w");
  assert_non_null(f);
  fprintf(f, "#!/bin/sh\necho \"apt-get $*\"\nexit 0\n");
  fclose(f);
  snprintf(path, sizeof path, "%s/dpkg-query", dir);
  f = fopen(path, "w");
  assert_non_null(f);
  fprintf(f, "#!/bin/sh\nexit 1\n");
  fclose(f);
  assert_int_equal(chmod(path, 0755), 0);
  assert_non_null(getcwd(script, sizeof script - 32));
  strcat(script, "/contrib/setup-deps.sh");

  snprintf(cmd, sizeof cmd, "env -i PATH='%s' /bin/sh '%s' build 2>&1", dir,
           script);
  sh(cmd);
  if (!strstr(out, "libuv1-dev") || !strstr(out, "libdw-dev") ||
      !strstr(out, "libmicrohttpd-dev"))
    fail_msg("build mode does not install what the build needs:\n%s", out);
  if (strstr(out, "libcmocka-dev") || strstr(out, "golang-go") ||
      strstr(out, "prometheus") || strstr(out, "heaptrack") ||
      strstr(out, "clang"))
    fail_msg("build mode installs the tests' packages:\n%s", out);

  snprintf(cmd, sizeof cmd, "env -i PATH='%s' /bin/sh '%s' 2>&1", dir, script);
  sh(cmd);
  if (!strstr(out, "libuv1-dev") || !strstr(out, "libcmocka-dev") ||
      !strstr(out, "golang-go"))
    fail_msg("the full mode misses packages:\n%s", out);
  remove_dir(dir);
}

/* Nothing there: it fails, names the missing pieces and the packages of
 * other distributions, and installs nothing. */
static void test_setup_deps_not_debian_missing(void **state) {
  char dir[] = "/tmp/test_build.XXXXXX";
  static const char *const none[] = {NULL};

  (void)state;
  make_path(dir, none);
  int rc = run_setup_deps(dir);
  if (rc == -2)
    skip(); /* not run from the source tree */
  assert_int_not_equal(rc, 0);
  if (!strstr(out, "not a Debian-based system") || !strstr(out, "libuv") ||
      !strstr(out, "cmocka") || !strstr(out, "dnf install") ||
      !strstr(out, "libuv-devel") || !strstr(out, "pacman -S"))
    fail_msg("setup-deps did not say what is missing and how to get it:\n%s",
             out);
  assert_false(apt_ran(dir));
  remove_dir(dir);
}

/* Everything the build needs there (this machine's tools, without
 * dpkg-query): it succeeds, so `make check` goes on, and runs no apt-get. */
static void test_setup_deps_not_debian_complete(void **state) {
  char dir[] = "/tmp/test_build.XXXXXX";
  static const char *const all[] = {
      "cc",   "gcc",        "clang",    "as",      "ld",
      "make", "pkg-config", "tmux",     "python3", "sqlite3",
      "git",  "heaptrack",  "protoc-c", NULL};

  (void)state;
  make_path(dir, all);
  int rc = run_setup_deps(dir);
  if (rc == -2)
    skip();
  if (rc != 0 || !strstr(out, "everything the build needs is there"))
    fail_msg("setup-deps failed off Debian with everything present "
             "(exit %d):\n%s",
             rc, out);
  assert_false(apt_ran(dir));
  remove_dir(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_memtop_hardened),
      cmocka_unit_test(test_memtop_serve_hardened),
      cmocka_unit_test(test_memtop_without_exporter_libs),
      cmocka_unit_test(test_memtop_without_symboliser_libs),
      cmocka_unit_test(test_memtop_needs_libc_alone),
      cmocka_unit_test(test_library_hardened),
      cmocka_unit_test(test_preload_hardened),
      cmocka_unit_test(test_memtop_without_engine),
      cmocka_unit_test(test_library_without_emit),
      cmocka_unit_test(test_setup_deps_build_only),
      cmocka_unit_test(test_setup_deps_not_debian_missing),
      cmocka_unit_test(test_setup_deps_not_debian_complete),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
