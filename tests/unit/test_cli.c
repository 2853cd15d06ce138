/*
 * test_cli.c - memtop's command line (src/memtop/cli.c) and the pure
 * helpers of `memtop run` (src/memtop/run.c): every form of the grammar,
 * strict numbers, and each kind of bad usage with its reason. (That the
 * binary exits 2 and prints the usage is checked in test_memtop.)
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
#include "memtop/cli.h"
#include "memtop/run.h"

static mt_opts_t o;
static char err[512];

/* Parses a NULL-terminated list of words after "memtop". */
static int parse_env(const char *no_color, ...) {
  static char *argv[64];
  static char store[64][128];
  va_list ap;
  const char *w;
  int argc = 0;

  argv[argc++] = (char *)"memtop";
  va_start(ap, no_color);
  while ((w = va_arg(ap, const char *)) != NULL) {
    snprintf(store[argc], sizeof store[argc], "%s", w);
    argv[argc] = store[argc];
    argc++;
  }
  va_end(ap);
  argv[argc] = NULL;
  return mt_cli_parse(argc, argv, no_color, &o, err, sizeof err);
}
#define parse(...) parse_env(NULL, __VA_ARGS__, (const char *)NULL)
#define parse0() parse_env(NULL, (const char *)NULL)

static void test_defaults(void **state) {
  (void)state;
  assert_int_equal(parse0(), 0);
  assert_int_equal(o.cmd, MT_CMD_WATCH);
  assert_int_equal(o.once, 0);
  assert_int_equal(o.json, 0);
  assert_int_equal(o.npids, 0);
  assert_int_equal(o.iterations, 0);
  assert_int_equal(o.color, 1);
  assert_true(o.delay_s == MT_DELAY_DEFAULT);
}

static void test_pids_and_options_interleaved(void **state) {
  (void)state;
  assert_int_equal(parse("12", "-d", "0.5", "34", "--once"), 0);
  assert_int_equal(o.npids, 2);
  assert_int_equal(o.pids[0], 12);
  assert_int_equal(o.pids[1], 34);
  assert_true(o.delay_s == 0.5);
  assert_int_equal(o.once, 1);
  /* Long forms, and --opt=value. */
  assert_int_equal(parse("--delay=2", "--iterations", "7", "5"), 0);
  assert_true(o.delay_s == 2.0);
  assert_int_equal(o.iterations, 7);
  /* The same PID twice is watched once. */
  assert_int_equal(parse("5", "5", "6", "5"), 0);
  assert_int_equal(o.npids, 2);
  /* After "--" every word is a PID. */
  assert_int_equal(parse("--once", "--", "42"), 0);
  assert_int_equal(o.npids, 1);
  assert_int_equal(o.pids[0], 42);
}

static void test_once_json(void **state) {
  (void)state;
  assert_int_equal(parse("--once", "--json", "1"), 0);
  assert_int_equal(o.once, 1);
  assert_int_equal(o.json, 1);
  /* JSON is a plain mode by itself. */
  assert_int_equal(parse("--json"), 0);
  assert_int_equal(o.once, 1);
  assert_int_equal(parse("--once", "-n", "3", "-d", "0.1"), 0);
  assert_int_equal(o.iterations, 3);
}

/* --tree: one PID and its descendants, live or --once/--json; anything
 * else is refused with the form that works. */
static void test_tree(void **state) {
  (void)state;
  assert_int_equal(parse("1234", "--tree"), 0);
  assert_int_equal(o.tree, 1);
  assert_int_equal(o.npids, 1);
  assert_int_equal(parse("--tree", "--json", "1234"), 0);
  assert_int_equal(o.once, 1);
  assert_int_equal(parse("--tree", "--once"), MS_EINVAL);
  assert_non_null(strstr(err, "memtop PID --tree"));
  assert_int_equal(parse("--tree", "1", "2"), MS_EINVAL);
  assert_int_equal(parse("--tree", "run", "--", "true"), MS_EINVAL);
  assert_int_equal(parse("--tree", "ps"), MS_EINVAL);
  assert_int_equal(parse("1234"), 0);
  assert_int_equal(o.tree, 0);
}

static void test_delay_limits(void **state) {
  static const char *bad[] = {"0.09", "0",   "-1",    "abc",   "",
                              "1x",   "nan", "inf",   " 1",    "1e9",
                              "0x10", "1,5", "0.1.1", "86401", "--1"};
  size_t i;

  (void)state;
  assert_int_equal(parse("-d", "0.1"), 0);
  assert_true(o.delay_s == 0.1);
  assert_int_equal(parse("-d", "86400"), 0);
  assert_int_equal(parse("-d", "1e-1"), 0);
  for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(parse("-d", bad[i]), MS_EINVAL);
    assert_non_null(strstr(err, "delay"));
  }
  assert_int_equal(parse("-d", "0.05"), MS_EINVAL);
  assert_non_null(strstr(err, "at least 0.1"));
}

/* --timeout SECS, the one deadline of a request; MEMTOP_TIMEOUT_MS (ms)
 * read once, by mt_cli_timeout(), only when the option is not given. */
static void test_timeout(void **state) {
  static const char *bad[] = {"0", "-1", "abc", "", "nan", "601", "0.0001"};

  (void)state;
  assert_int_equal(parse0(), 0);
  assert_int_equal(o.timeout_ms, MT_TIMEOUT_DEFAULT_MS);
  assert_int_equal(mt_cli_timeout(&o, NULL, err, sizeof err), 0);
  assert_int_equal(o.timeout_ms, 10000);
  assert_int_equal(mt_cli_timeout(&o, "250", err, sizeof err), 0);
  assert_int_equal(o.timeout_ms, 250);
  assert_int_equal(parse0(), 0);
  assert_int_equal(mt_cli_timeout(&o, "5s", err, sizeof err), MS_EINVAL);
  assert_non_null(strstr(err, "ignoring MEMTOP_TIMEOUT_MS=5s"));
  assert_int_equal(o.timeout_ms, MT_TIMEOUT_DEFAULT_MS);
  assert_int_equal(mt_cli_timeout(&o, "600001", err, sizeof err), MS_EINVAL);

  assert_int_equal(parse("--timeout", "2.5", "--once"), 0);
  assert_int_equal(o.timeout_ms, 2500);
  assert_int_equal(mt_cli_timeout(&o, "250", err, sizeof err), 0);
  assert_int_equal(o.timeout_ms, 2500); /* the option wins */
  assert_int_equal(parse("profile", "--timeout", "0.001", "1"), 0);
  assert_int_equal(o.timeout_ms, 1);
  assert_int_equal(parse("serve", "--timeout", "600"), 0);
  assert_int_equal(o.timeout_ms, 600000);
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(parse("--timeout", bad[i]), MS_EINVAL);
    assert_non_null(strstr(err, "--timeout"));
  }
}

static void test_iterations_limits(void **state) {
  static const char *bad[] = {"0", "-1", "3.5", "x",
                              "",  "1 ", "+2",  "99999999999999999999"};
  size_t i;

  (void)state;
  assert_int_equal(parse("-n", "1"), 0);
  assert_int_equal(o.iterations, 1);
  for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
    assert_int_equal(parse("-n", bad[i]), MS_EINVAL);
}

/* top's and htop's -p PID,PID and -u USER, and --no-mouse (issue 23). */
static void test_top_options(void **state) {
  (void)state;
  assert_int_equal(parse("-p", "12,34", "-p", "56", "78"), 0);
  assert_int_equal(o.npids, 4);
  assert_int_equal(o.pids[0], 12);
  assert_int_equal(o.pids[1], 34);
  assert_int_equal(o.pids[2], 56);
  assert_int_equal(o.pids[3], 78);
  assert_int_equal(parse("--pid=7", "--once"), 0);
  assert_int_equal(o.pids[0], 7);
  assert_int_equal(parse("-p", "1,,2"), MS_EINVAL);
  assert_int_equal(parse("-p", "1,x"), MS_EINVAL);
  /* -p's word is a PID, never taken for a mistyped command. */
  assert_int_equal(parse("-p", "abc", "--once"), MS_EINVAL);
  assert_non_null(strstr(err, "'abc' is not a process ID"));
  assert_int_equal(parse("--pid=abc"), MS_EINVAL);
  assert_non_null(strstr(err, "'abc' is not a process ID"));
  assert_int_equal(parse("-p", ""), MS_EINVAL);
  assert_int_equal(parse("run", "-p", "1", "--", "true"), MS_EINVAL);
  /* A user by name or number; one that does not exist is named. */
  assert_int_equal(parse0(), 0);
  assert_int_equal(o.uid, -1);
  assert_int_equal(o.mouse, 1);
  assert_int_equal(o.delay_given, 0);
  assert_int_equal(parse("-u", "root"), 0);
  assert_int_equal(o.uid, 0);
  assert_int_equal(parse("--user", "4321"), 0);
  assert_int_equal(o.uid, 4321);
  assert_int_equal(parse("-u", "no-such-user-memtop"), MS_EINVAL);
  assert_non_null(strstr(err, "unknown user 'no-such-user-memtop'"));
  /* -u filters the live view, --once, --json and ps by owner; a command
   * memtop starts or serves has no user to choose. */
  assert_int_equal(parse("-u", "root", "--once"), 0);
  assert_int_equal(o.uid, 0);
  assert_int_equal(parse("-u", "4321", "--json"), 0);
  assert_int_equal(o.uid, 4321);
  assert_int_equal(parse("ps", "-u", "root"), 0);
  assert_int_equal(o.uid, 0);
  assert_int_equal(parse("run", "-u", "root", "--", "true"), MS_EINVAL);
  assert_non_null(strstr(err, "-u/--user applies to"));
  assert_int_equal(parse("serve", "-u", "root"), MS_EINVAL);
  assert_int_equal(parse("--no-mouse", "-d", "2"), 0);
  assert_int_equal(o.mouse, 0);
  assert_int_equal(o.delay_given, 1);
}

static void test_bad_pids(void **state) {
  (void)state;
  assert_int_equal(parse("0"), MS_EINVAL);
  assert_non_null(strstr(err, "not a process ID"));
  assert_int_equal(parse("12abc"), MS_EINVAL);
  assert_int_equal(parse("99999999"), MS_EINVAL);
  assert_int_equal(parse("-5"), MS_EINVAL); /* an unknown option */
  assert_int_equal(parse("1", "x2"), MS_EINVAL);
  /* A word that is neither a PID nor a command. */
  assert_int_equal(parse("top"), MS_EINVAL);
  assert_non_null(strstr(err, "unknown command 'top'"));
}

static void test_attach_detach(void **state) {
  (void)state;
  assert_int_equal(parse("attach", "1234"), 0);
  assert_int_equal(o.cmd, MT_CMD_ATTACH);
  assert_int_equal(o.npids, 1);
  assert_int_equal(o.pids[0], 1234);
  assert_int_equal(parse("detach", "--", "77"), 0);
  assert_int_equal(o.cmd, MT_CMD_DETACH);
  assert_int_equal(o.pids[0], 77);
  assert_int_equal(parse("attach"), MS_EINVAL);
  assert_non_null(strstr(err, "'attach' needs one process ID"));
  assert_int_equal(parse("detach", "1", "2"), MS_EINVAL);
  assert_non_null(strstr(err, "detach takes one process ID"));
  assert_int_equal(parse("attach", "--once", "1"), MS_EINVAL);
}

static void test_bad_options(void **state) {
  (void)state;
  assert_int_equal(parse("--bogus"), MS_EINVAL);
  assert_non_null(strstr(err, "--bogus"));
  assert_int_equal(parse("-x"), MS_EINVAL);
  assert_non_null(strstr(err, "-x"));
  assert_int_equal(parse("-d"), MS_EINVAL);
  assert_non_null(strstr(err, "needs a value"));
  assert_int_equal(parse("--delay"), MS_EINVAL);
  assert_non_null(strstr(err, "needs a value"));
  assert_int_equal(parse("--once=1"), MS_EINVAL);
}

static void test_help_and_version(void **state) {
  (void)state;
  assert_int_equal(parse("-h"), 0);
  assert_int_equal(o.cmd, MT_CMD_HELP);
  assert_int_equal(parse("--once", "12", "--help"), 0);
  assert_int_equal(o.cmd, MT_CMD_HELP);
  assert_int_equal(parse("run", "--help", "--", "ls"), 0);
  assert_int_equal(o.cmd, MT_CMD_HELP);
  assert_int_equal(parse("-V"), 0);
  assert_int_equal(o.cmd, MT_CMD_VERSION);
  assert_int_equal(parse("--version"), 0);
  assert_int_equal(o.cmd, MT_CMD_VERSION);
}

/* The help's and the usage's layout: a line that is not indented never
 * follows an indented one unless it starts a part of its own ("Word:",
 * or the usage's "Try 'memtop --help'"),
 * no line is past 79 columns, and the usage names `memtop serve` once (a
 * stray "auth," line under `memtop detach`, and a second serve line with
 * the old flag names, were there). */
static void check_layout(void (*print)(FILE *), const char *what) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_non_null(f);
  print(f);
  fclose(f);
  int serve = 0, prev_indented = 0;
  for (char *line = buf; *line;) {
    char *nl = strchr(line, '\n');
    size_t n = nl ? (size_t)(nl - line) : strlen(line);
    if (n > 79)
      fail_msg("%s: a line of %zu columns: %.*s", what, n, (int)n, line);
    if (n > 0 && line[0] != ' ' && prev_indented &&
        strncmp(line, "Try '", 5) != 0) {
      size_t word = strspn(line, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                 "abcdefghijklmnopqrstuvwxyz ");
      if (word == 0 || word >= n || line[word] != ':' || line[0] < 'A' ||
          line[0] > 'Z')
        fail_msg("%s: a line out of place: %.*s", what, (int)n, line);
    }
    prev_indented = n > 0 && line[0] == ' ';
    if (strncmp(line, "       memtop serve", 19) == 0)
      serve++;
    line += n + (nl != NULL);
  }
  assert_true(serve <= 1);
  free(buf);
}

static void test_help_layout(void **state) {
  (void)state;
  check_layout(mt_cli_help, "memtop --help");
  check_layout(mt_cli_usage, "memtop's usage");
}

/* The shell completion (share/bash-completion/memtop, DESIGN.md's
 * share/) offers every long option the help names: --tree and --timeout
 * were missing. Read from the source tree (the tests run from its top). */
static void test_completion_knows_every_option(void **state) {
  (void)state;
  FILE *c = fopen("share/bash-completion/memtop", "r");
  if (c == NULL) {
    print_message("skipped: no share/bash-completion/memtop here\n");
    skip();
  }
  static char comp[65536];
  size_t clen = fread(comp, 1, sizeof comp - 1, c);
  fclose(c);
  comp[clen] = '\0';
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_non_null(f);
  mt_cli_help(f);
  fclose(f);
  int seen = 0;
  for (const char *p = buf; (p = strstr(p, "--")) != NULL;) {
    size_t n = 2 + strspn(p + 2, "abcdefghijklmnopqrstuvwxyz0123456789.-");
    if (n > 3) {
      char opt[64];
      snprintf(opt, sizeof opt, "%.*s", (int)n, p);
      while (opt[strlen(opt) - 1] == '.' || opt[strlen(opt) - 1] == '-')
        opt[strlen(opt) - 1] = '\0';
      /* As a word of its own: followed by a blank, a quote or a ')'. */
      int found = 0;
      for (const char *q = comp; (q = strstr(q, opt)) != NULL; q++) {
        char after = q[strlen(opt)];
        if (after == ' ' || after == '"' || after == '\'' || after == ')' ||
            after == '\n')
          found = 1;
      }
      if (!found)
        fail_msg("the bash completion does not offer %s", opt);
      seen++;
    }
    p += n;
  }
  assert_true(seen > 20);
  free(buf);
}

static void test_color(void **state) {
  (void)state;
  assert_int_equal(parse("--no-color"), 0);
  assert_int_equal(o.color, 0);
  assert_int_equal(parse_env("1", (const char *)NULL), 0);
  assert_int_equal(o.color, 0);
  /* NO_COLOR counts only when non-empty (no-color.org). */
  assert_int_equal(parse_env("", (const char *)NULL), 0);
  assert_int_equal(o.color, 1);
}

static void test_run(void **state) {
  (void)state;
  assert_int_equal(parse("run", "-d", "0.5", "--", "sleep", "-x", "1"), 0);
  assert_int_equal(o.cmd, MT_CMD_RUN);
  assert_true(o.delay_s == 0.5);
  assert_int_equal(o.run_argc, 3);
  assert_string_equal(o.run_argv[0], "sleep");
  assert_string_equal(o.run_argv[1], "-x");
  assert_null(o.run_argv[3]);
  /* Without "--", the command starts at the first bare word, and its own
   * options stay its own. */
  assert_int_equal(parse("run", "python3", "-c", "pass"), 0);
  assert_int_equal(o.run_argc, 3);
  assert_string_equal(o.run_argv[1], "-c");
  /* Options before the command word count too. */
  assert_int_equal(parse("--once", "run", "--", "true"), 0);
  assert_int_equal(o.cmd, MT_CMD_RUN);
  assert_int_equal(o.once, 1);
  /* A command word after "--" is the command's, not memtop's. */
  assert_int_equal(parse("run", "--", "run", "ps"), 0);
  assert_string_equal(o.run_argv[0], "run");

  assert_int_equal(parse("run"), MS_EINVAL);
  assert_non_null(strstr(err, "needs a command"));
  assert_int_equal(parse("run", "--"), MS_EINVAL);
  assert_int_equal(parse("run", "--once", "-n", "2", "--", "true"), MS_EINVAL);
  assert_int_equal(parse("run", "-d", "0", "--", "true"), MS_EINVAL);
}

static void test_ps_profile_serve(void **state) {
  (void)state;
  assert_int_equal(parse("ps"), 0);
  assert_int_equal(o.cmd, MT_CMD_PS);
  assert_int_equal(parse("ps", "12"), MS_EINVAL);
  assert_int_equal(parse("ps", "--once"), MS_EINVAL);
  assert_int_equal(parse("ps", "-n", "2"), MS_EINVAL);

  assert_int_equal(parse("profile", "12", "-o", "heap.pb.gz"), 0);
  assert_int_equal(o.cmd, MT_CMD_PROFILE);
  assert_int_equal(o.pids[0], 12);
  assert_string_equal(o.output, "heap.pb.gz");
  assert_int_equal(parse("profile"), MS_EINVAL);
  assert_int_equal(parse("profile", "1", "2"), MS_EINVAL);
  assert_int_equal(parse("profile", "x"), MS_EINVAL);
  assert_int_equal(parse("-o", "f", "12"), MS_EINVAL);
  assert_non_null(strstr(err, "profile"));

  assert_int_equal(parse("serve", "--listen", ":9100"), 0);
  assert_int_equal(o.cmd, MT_CMD_SERVE);
  assert_string_equal(o.listen, ":9100");
  assert_int_equal(parse("serve", "1"), MS_EINVAL);
  assert_int_equal(parse("--listen", ":1"), MS_EINVAL);
  /* A command word may come only first. */
  assert_int_equal(parse("12", "ps"), MS_EINVAL);
}

/* serve's node_exporter flags (the old ones their aliases), the
 * telemetry path, --no-size-classes and --group-by, and where they do
 * not apply. */
static void test_serve_flags(void **state) {
  (void)state;
  assert_int_equal(parse("serve", "--web.listen-address=:9464",
                         "--web.config.file", "w.yml",
                         "--web.telemetry-path=/m", "--no-size-classes",
                         "--group-by", "cgroup"),
                   0);
  assert_string_equal(o.listen, ":9464");
  assert_string_equal(o.web_config, "w.yml");
  assert_string_equal(o.telemetry_path, "/m");
  assert_int_equal(o.no_size_classes, 1);
  assert_int_equal(o.group_by, MT_GROUP_CGROUP);
  assert_int_equal(parse("serve", "--web-config", "x.yml", "--listen", ":1"),
                   0);
  assert_string_equal(o.web_config, "x.yml");
  assert_string_equal(o.listen, ":1");
  assert_null(o.telemetry_path);
  assert_int_equal(o.group_by, MT_GROUP_NONE);
  static const char *const rules[] = {"comm", "exe", "cmdline", "cgroup"};
  for (int i = 0; i < 4; i++) {
    assert_int_equal(parse("serve", "--group-by", rules[i]), 0);
    assert_int_equal(o.group_by, MT_GROUP_COMM + i);
  }
  assert_int_equal(parse("serve", "--group-by", "pid"), MS_EINVAL);
  static const char *const bad[] = {"metrics", "/",     "/debug/pprof/heap",
                                    "/a b",    "/a\"b", "/a?x"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    if (parse("serve", "--web.telemetry-path", bad[i]) != MS_EINVAL)
      fail_msg("--web.telemetry-path '%s' taken", bad[i]);
  assert_int_equal(parse("--no-size-classes"), MS_EINVAL);
  assert_non_null(strstr(err, "serve"));
  assert_int_equal(parse("ps", "--group-by", "comm"), MS_EINVAL);
  assert_int_equal(parse("--web.telemetry-path", "/m", "1"), MS_EINVAL);
  /* Errors name the flags by DESIGN.md's (node_exporter's) names, not
   * by their short aliases. */
  assert_int_equal(parse("--web.listen-address", ":1", "1"), MS_EINVAL);
  assert_non_null(strstr(err, "--web.listen-address only applies"));
  assert_int_equal(parse("--web.config.file", "w.yml", "1"), MS_EINVAL);
  assert_non_null(strstr(err, "--web.config.file only applies"));
  assert_int_equal(parse("serve", "--web.listen-address", ""), MS_EINVAL);
  assert_non_null(strstr(err, "--web.listen-address needs"));
  assert_int_equal(parse("serve", "--web.config.file", ""), MS_EINVAL);
  assert_non_null(strstr(err, "--web.config.file needs"));
}

/* memtop profile's options: --seconds, --format, --sites, and where
 * they do not apply. */
static void test_profile_options(void **state) {
  (void)state;
  assert_int_equal(parse("profile", "12"), 0);
  assert_int_equal(o.seconds, 0);
  assert_int_equal(o.format, MT_PROFILE_PPROF);
  assert_int_equal(o.sites, 0);
  assert_int_equal(parse("profile", "--seconds", "30", "--format", "text",
                         "--sites", "7", "12"),
                   0);
  assert_int_equal(o.seconds, 30);
  assert_int_equal(o.format, MT_PROFILE_TEXT);
  assert_int_equal(o.sites, 7);
  assert_int_equal(parse("profile", "12", "--format", "pprof", "-o", "-"), 0);
  assert_int_equal(o.format, MT_PROFILE_PPROF);
  assert_string_equal(o.output, "-");

  assert_int_equal(parse("profile", "12", "--seconds", "0"), MS_EINVAL);
  assert_non_null(strstr(err, "--seconds"));
  assert_int_equal(parse("profile", "12", "--seconds", "1.5"), MS_EINVAL);
  assert_int_equal(parse("profile", "12", "--seconds", "86401"), MS_EINVAL);
  assert_int_equal(parse("profile", "12", "--format", "svg"), MS_EINVAL);
  assert_non_null(strstr(err, "pprof or text"));
  assert_int_equal(parse("profile", "12", "--sites", "0"), MS_EINVAL);
  /* A pprof file holds every site. */
  assert_int_equal(parse("profile", "12", "--sites", "5"), MS_EINVAL);
  assert_non_null(strstr(err, "--format text"));
  assert_int_equal(parse("--seconds", "5", "12"), MS_EINVAL);
  assert_non_null(strstr(err, "only applies to 'profile'"));
  assert_int_equal(parse("--format", "text", "--once", "12"), MS_EINVAL);
  assert_int_equal(parse("ps", "--sites", "3"), MS_EINVAL);
  /* --once and --json reports gain the top sites; the live view has no
   * panel for them yet. */
  assert_int_equal(parse("--once", "--sites", "5", "12"), 0);
  assert_int_equal(o.sites, 5);
  assert_int_equal(parse("--json", "--sites", "3"), 0);
  assert_int_equal(o.sites, 3);
  assert_int_equal(parse("--sites", "3", "12"), MS_EINVAL);
  assert_non_null(strstr(err, "--once"));
  assert_int_equal(parse("profile", "12", "--once"), MS_EINVAL);
}

static void test_repeatable(void **state) {
  int i;

  (void)state;
  /* getopt keeps global state: each parse must start afresh. */
  for (i = 0; i < 3; i++) {
    assert_int_equal(parse("--bogus"), MS_EINVAL);
    assert_int_equal(parse("-d", "2", "7"), 0);
    assert_int_equal(o.pids[0], 7);
    assert_true(o.delay_s == 2.0);
  }
}

static void test_parse_numbers(void **state) {
  double d;
  long l;

  (void)state;
  assert_int_equal(ms__parse_double("1.5", 0, 2, &d), 0);
  assert_true(d == 1.5);
  assert_int_equal(ms__parse_double("2.5", 0, 2, &d), MS_EINVAL);
  assert_int_equal(ms__parse_double(NULL, 0, 2, &d), MS_EINVAL);
  assert_int_equal(ms__parse_long("-3", -5, 5, &l), 0);
  assert_int_equal(l, -3);
  assert_int_equal(ms__parse_long("-", -5, 5, &l), MS_EINVAL);
  assert_int_equal(ms__parse_long("0x1", 0, 5, &l), MS_EINVAL);
  assert_int_equal(ms__parse_long("6", 0, 5, &l), MS_EINVAL);
}

/* ---- run.c ---- */

static void test_run_env(void **state) {
  char *env1[] = {(char *)"HOME=/root", (char *)"PATH=/bin", NULL};
  char *env2[] = {(char *)"LD_PRELOAD=/x/libjemalloc.so", (char *)"A=1", NULL};
  char *env3[] = {(char *)"LD_PRELOAD=/p/libmemstats-preload.so /y.so", NULL};
  char **e;

  (void)state;
  e = mt_run_env(env1, "/p/libmemstats-preload.so");
  assert_non_null(e);
  assert_string_equal(e[0], "LD_PRELOAD=/p/libmemstats-preload.so");
  assert_string_equal(e[1], "HOME=/root");
  assert_string_equal(e[2], "PATH=/bin");
  assert_null(e[3]);
  mt_run_env_free(e);

  /* Ours first, the user's preloads kept after it, no duplicate entry. */
  e = mt_run_env(env2, "/p/libmemstats-preload.so");
  assert_string_equal(e[0],
                      "LD_PRELOAD=/p/libmemstats-preload.so:/x/libjemalloc.so");
  assert_string_equal(e[1], "A=1");
  assert_null(e[2]);
  mt_run_env_free(e);

  e = mt_run_env(env3, "/p/libmemstats-preload.so");
  assert_string_equal(e[0], "LD_PRELOAD=/p/libmemstats-preload.so /y.so");
  assert_null(e[1]);
  mt_run_env_free(e);
}

static void test_find_preload(void **state) {
  char dir[] = "/tmp/test_cli.XXXXXX", path[4096], out[4096], msg[1024];
  FILE *f;

  (void)state;
  assert_non_null(mkdtemp(dir));
  /* An override that does not exist is an error that names it. */
  assert_int_equal(mt_run_find_preload("/x/bin/memtop", "/nope/lib.so", out,
                                       sizeof out, msg, sizeof msg),
                   MS_ENOENT);
  assert_non_null(strstr(msg, "MEMTOP_PRELOAD=/nope/lib.so"));
  /* Nothing installed: the message says where it looked and the fix. */
  snprintf(path, sizeof path, "%s/bin/memtop", dir);
  assert_int_equal(
      mt_run_find_preload(path, NULL, out, sizeof out, msg, sizeof msg),
      MS_ENOENT);
  assert_non_null(strstr(msg, "make install"));
  assert_non_null(strstr(msg, "MEMTOP_PRELOAD"));
  /* An install: $PREFIX/bin/memtop and $PREFIX/lib/memtop/<preload> (a
   * directory of its own: the preload carries libmemstats' soname). */
  snprintf(path, sizeof path, "%s/lib", dir);
  assert_int_equal(mkdir(path, 0700), 0);
  snprintf(path, sizeof path, "%s/lib/memtop", dir);
  assert_int_equal(mkdir(path, 0700), 0);
  snprintf(path, sizeof path, "%s/bin", dir);
  assert_int_equal(mkdir(path, 0700), 0);
  snprintf(path, sizeof path, "%s/lib/memtop/" MT_PRELOAD_NAME, dir);
  f = fopen(path, "w");
  assert_non_null(f);
  fclose(f);
  snprintf(path, sizeof path, "%s/bin/memtop", dir);
  assert_int_equal(
      mt_run_find_preload(path, "", out, sizeof out, msg, sizeof msg), 0);
  assert_non_null(strstr(out, "/bin/../lib/memtop/" MT_PRELOAD_NAME));
  /* The build tree: side by side, preferred. */
  snprintf(path, sizeof path, "%s/bin/" MT_PRELOAD_NAME, dir);
  f = fopen(path, "w");
  assert_non_null(f);
  fclose(f);
  snprintf(path, sizeof path, "%s/bin/memtop", dir);
  assert_int_equal(
      mt_run_find_preload(path, NULL, out, sizeof out, msg, sizeof msg), 0);
  snprintf(path, sizeof path, "%s/bin/" MT_PRELOAD_NAME, dir);
  assert_string_equal(out, path);
  /* The override wins. */
  assert_int_equal(
      mt_run_find_preload("/x/memtop", path, out, sizeof out, msg, sizeof msg),
      0);
  assert_string_equal(out, path);

  unlink(path);
  snprintf(path, sizeof path, "%s/lib/memtop/" MT_PRELOAD_NAME, dir);
  unlink(path);
  snprintf(path, sizeof path, "%s/lib/memtop", dir);
  rmdir(path);
  snprintf(path, sizeof path, "%s/lib", dir);
  rmdir(path);
  snprintf(path, sizeof path, "%s/bin", dir);
  rmdir(path);
  rmdir(dir);
}

static void test_exit_status(void **state) {
  (void)state;
  assert_int_equal(mt_run_exit_status(0, 0), 0);
  assert_int_equal(mt_run_exit_status(3, 0), 3);
  assert_int_equal(mt_run_exit_status(0, 9), 137);
  assert_int_equal(mt_run_exit_status(0, 15), 143);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_defaults),
      cmocka_unit_test(test_pids_and_options_interleaved),
      cmocka_unit_test(test_once_json),
      cmocka_unit_test(test_tree),
      cmocka_unit_test(test_delay_limits),
      cmocka_unit_test(test_iterations_limits),
      cmocka_unit_test(test_top_options),
      cmocka_unit_test(test_bad_pids),
      cmocka_unit_test(test_bad_options),
      cmocka_unit_test(test_help_and_version),
      cmocka_unit_test(test_help_layout),
      cmocka_unit_test(test_completion_knows_every_option),
      cmocka_unit_test(test_color),
      cmocka_unit_test(test_run),
      cmocka_unit_test(test_ps_profile_serve),
      cmocka_unit_test(test_serve_flags),
      cmocka_unit_test(test_profile_options),
      cmocka_unit_test(test_repeatable),
      cmocka_unit_test(test_timeout),
      cmocka_unit_test(test_parse_numbers),
      cmocka_unit_test(test_run_env),
      cmocka_unit_test(test_find_preload),
      cmocka_unit_test(test_exit_status),
      cmocka_unit_test(test_attach_detach),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
