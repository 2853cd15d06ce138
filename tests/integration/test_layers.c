/*
 * test_layers.c - the folder rules of CONTRIBUTING.md, as tests/lint-layers.sh
 * checks them from the #include lines (make lint runs it too).
 *
 * The tree as it is passes. Each kind of violation, planted in a copy of
 * the tree or in a small tree of its own, fails the check and is named by
 * file and line: an upward include, a cycle between folders, the tool's
 * side including the target's (and the reverse), another folder's
 * internal header, a folder that has no place in the layers, and a circle
 * between the files of one folder (x.c and x.h are one file there).
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

#include "support/run.h"

#define LINT "tests/lint-layers.sh"

static char out[65536];
static char tmp[256];

/* Runs the shell command cmd, its stdout and stderr into out. Returns its
 * exit status, or -1 if it did not exit normally. */
static int sh(const char *cmd) {
  return run_output(cmd, out, sizeof out);
}

static int setup(void **state) {
  (void)state;
  snprintf(tmp, sizeof tmp, "/tmp/test_layers.XXXXXX");
  return mkdtemp(tmp) ? 0 : -1;
}

static int teardown(void **state) {
  char cmd[512];
  (void)state;
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
  return sh(cmd) == 0 ? 0 : -1;
}

/* Writes `text` and a newline to tmp/tree/path, creating its folder. */
static void put(const char *path, const char *text) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           "mkdir -p \"$(dirname '%s/tree/%s')\" && printf '%%s\\n' '%s' "
           ">> '%s/tree/%s'",
           tmp, path, text, tmp, path);
  assert_int_equal(sh(cmd), 0);
}

/* A small tree that keeps the rules: one header per layer, each including
 * the one below it on its side. */
static void fresh_tree(void) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf '%s/tree'", tmp);
  assert_int_equal(sh(cmd), 0);
  put("common/c.h", "#include \"memstats.h\"");
  put("wire/w.h", "#include \"common/c.h\"");
  put("core/e.h", "#include \"wire/w.h\"");
  put("providers/p.h", "#include \"core/e.h\"");
  put("providers/p_int.h", "#include \"providers/p.h\"");
  put("compose/s.h", "#include \"providers/p.h\"");
  put("agent/a.h", "#include \"compose/s.h\"");
  put("preload/l.c", "#include \"agent/a.h\"");
  put("client/k.h", "#include \"wire/w.h\"");
  put("emit/m.h", "#include \"client/k.h\"");
  put("pprof/h.h", "#include \"emit/m.h\"");
  put("targets/s.h", "#include \"pprof/h.h\"");
  put("tui/v.h", "#include \"emit/m.h\"");
  put("exporter/x.h", "#include \"common/c.h\"");
  put("memtop/t.c", "#include \"emit/m.h\"");
  put("memtop/t.c", "#include \"targets/s.h\"");
  put("memtop/t.c", "#include \"tui/v.h\"");
  put("memtop/t.c", "#include \"exporter/x.h\"");
}

/* Runs the lint on tmp/tree; returns its exit status. */
static int lint_tree(void) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "sh " LINT " '%s/tree'", tmp);
  return sh(cmd);
}

static void expect_violation(const char *what) {
  int st = lint_tree();
  if (st != 1 || !strstr(out, what))
    fail_msg("expected exit 1 and \"%s\"; got %d:\n%s", what, st, out);
}

static void test_tree_passes(void **state) {
  (void)state;
  int st = sh("sh " LINT " src");
  if (st != 0)
    fail_msg("the tree breaks its layers:\n%s", out);
  assert_non_null(strstr(out, "no upward include, no cycle"));
  assert_non_null(strstr(out, "no file circle"));
}

static void test_small_tree_passes(void **state) {
  (void)state;
  fresh_tree();
  if (lint_tree() != 0)
    fail_msg("a tree that keeps the rules fails:\n%s", out);
}

/* The real tree, with one upward include planted in a copy of it. */
static void test_planted_upward_include(void **state) {
  char cmd[1024];
  (void)state;
  snprintf(cmd, sizeof cmd,
           "rm -rf '%s/tree' && cp -R src '%s/tree' && "
           "printf '#include \"providers/providers.h\"\\n' >> "
           "'%s/tree/core/engine.h'",
           tmp, tmp, tmp);
  assert_int_equal(sh(cmd), 0);
  expect_violation("core/engine.h:");
  assert_non_null(strstr(out, "core may not include providers/"));
}

static void test_cycle(void **state) {
  (void)state;
  fresh_tree();
  put("common/c.h", "#include \"wire/w.h\"");
  expect_violation("a cycle between folders: ");
  assert_non_null(strstr(out, "common may not include wire/"));
}

static void test_tool_includes_target(void **state) {
  (void)state;
  fresh_tree();
  put("memtop/t.c", "#include \"agent/a.h\"");
  expect_violation("memtop may not include agent/");
  fresh_tree();
  put("client/k.h", "#include \"core/e.h\"");
  expect_violation("client may not include core/");
}

/* The tool's parts (target set, live view, exporter) are one step: each
 * may include the folders below it, none another part, none the app. */
static void test_parts_apart(void **state) {
  (void)state;
  fresh_tree();
  put("tui/v.h", "#include \"targets/s.h\"");
  expect_violation("tui may not include targets/");
  fresh_tree();
  put("exporter/x.h", "#include \"tui/v.h\"");
  expect_violation("exporter may not include tui/");
  fresh_tree();
  put("targets/s.h", "#include \"memtop/t.h\"");
  expect_violation("targets may not include memtop/");
}

static void test_target_includes_tool(void **state) {
  (void)state;
  fresh_tree();
  put("agent/a.h", "#include \"emit/m.h\"");
  expect_violation("agent may not include emit/");
}

static void test_internal_header(void **state) {
  (void)state;
  fresh_tree();
  put("agent/a.h", "#include \"providers/p_int.h\"");
  expect_violation("includes providers/p_int.h, internal to providers/");
}

static void test_unknown_folder(void **state) {
  (void)state;
  fresh_tree();
  put("serve/s.c", "#include \"client/k.h\"");
  expect_violation("serve: a folder that is not a layer");
  fresh_tree();
  put("memtop/t.c", "#include \"serve/s.h\"");
  expect_violation("includes serve/, which is not a layer");
}

/* The target side reads the environment through common/env.c only (under
 * AT_SECURE it ignores every MEMSTATS_* variable there); the tool's side
 * may read it as it likes. */
static void test_env_reader(void **state) {
  (void)state;
  fresh_tree();
  put("preload/l.c", "  const char *p = getenv(\"MEMSTATS_EXIT_REPORT\");");
  expect_violation("preload/l.c:2: reads the environment");
  fresh_tree();
  put("core/x.c", "  v = secure_getenv(\"MEMSTATS_DEBUG\");");
  expect_violation("core/x.c:1: reads the environment");
  fresh_tree();
  put("common/env.c", "  return getenv(name);");
  put("memtop/t.c", "  const char *t = getenv(\"TERM\");");
  if (lint_tree() != 0)
    fail_msg("common/env.c and the tool may read the environment:\n%s", out);
}

/* Within a folder, files that include each other's headers are one file
 * in two: the circle is named with the include lines that close it. */
static void test_file_circle(void **state) {
  (void)state;
  fresh_tree();
  put("memtop/live.h", "#include \"tui/v.h\"");
  put("memtop/live.c", "#include \"memtop/live.h\"");
  put("memtop/command.h", "#include \"memtop/live.h\"");
  put("memtop/command.c", "#include \"memtop/command.h\"");
  if (lint_tree() != 0)
    fail_msg("a file including its own header and another's fails:\n%s", out);
  put("memtop/live.c", "#include \"memtop/command.h\"");
  expect_violation("memtop: a circle between files: ");
  assert_non_null(strstr(out, "command -> live -> command"));
  assert_non_null(strstr(out, "memtop/command.h:1"));
  assert_non_null(strstr(out, "memtop/live.c:2"));
  /* Three files, one include without the folder's name. */
  fresh_tree();
  put("tui/a.c", "#include \"tui/b.h\"");
  put("tui/b.c", "#include \"c.h\"");
  put("tui/c.h", "#include \"tui/a.h\"");
  expect_violation("tui: a circle between files: ");
  assert_non_null(strstr(out, "a -> b -> c -> a"));
}

/* x_int.h is x's internal half: x.c including it, and it x.h, is none. */
static void test_int_header_is_its_file(void **state) {
  (void)state;
  fresh_tree();
  put("pprof/sym.h", "#include \"emit/m.h\"");
  put("pprof/sym_int.h", "#include \"pprof/sym.h\"");
  put("pprof/sym.c", "#include \"pprof/sym_int.h\"");
  put("pprof/sym_dwarf.c", "#include \"pprof/sym_int.h\"");
  if (lint_tree() != 0)
    fail_msg("x.c, x.h and x_int.h are one file:\n%s", out);
}

/* The engine's circles (engine with pause, shard and sysstat: each part
 * took the feeding flags from engine.h, which declares them all) are
 * ended, and one planted back fails like any other. */
static void test_engine_circle(void **state) {
  (void)state;
  fresh_tree();
  put("core/engine.c", "#include \"core/pause.h\"");
  put("core/pause.c", "#include \"core/engine.h\"");
  expect_violation("core: a circle between files: ");
  assert_non_null(strstr(out, "engine -> pause -> engine"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tree_passes),
      cmocka_unit_test(test_small_tree_passes),
      cmocka_unit_test(test_planted_upward_include),
      cmocka_unit_test(test_cycle),
      cmocka_unit_test(test_tool_includes_target),
      cmocka_unit_test(test_parts_apart),
      cmocka_unit_test(test_target_includes_tool),
      cmocka_unit_test(test_internal_header),
      cmocka_unit_test(test_unknown_folder),
      cmocka_unit_test(test_env_reader),
      cmocka_unit_test(test_file_circle),
      cmocka_unit_test(test_int_header_is_its_file),
      cmocka_unit_test(test_engine_circle),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
