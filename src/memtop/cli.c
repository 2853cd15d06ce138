/*
 * cli.c - parsing memtop's command line (see cli.h and DESIGN.md, "The
 * memtop command").
 *
 * The grammar is "memtop [OPTIONS] [COMMAND] [OPTIONS] [ARGS]": options may
 * come before or after the command word and between PIDs, as users of top
 * and ps expect, but for `run` everything after "--" (or after the first
 * word that is not an option) is the command to start, untouched. getopt
 * runs in "+" mode (stop at the first non-option) so that we decide
 * ourselves what each bare word is.
 */
#include "memtop/cli.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pwd.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "memstats.h"

enum {
  OPT_ONCE = 256,
  OPT_JSON,
  OPT_NO_COLOR,
  OPT_LISTEN,
  OPT_SECONDS,
  OPT_FORMAT,
  OPT_SITES,
  OPT_WEB_CONFIG,
  OPT_TIMEOUT,
  OPT_UNSAFE_NO_AUTH,
  OPT_NO_MOUSE,
  OPT_FOCUS,
  OPT_IGNORE,
  OPT_HIDE,
  OPT_KEEP_WRAPPERS,
  OPT_TELEMETRY_PATH,
  OPT_NO_SIZE_CLASSES,
  OPT_GROUP_BY,
  OPT_TREE,
  OPT_TRACK
};

static const struct option long_options[] = {
    {"delay", required_argument, NULL, 'd'},
    {"iterations", required_argument, NULL, 'n'},
    {"once", no_argument, NULL, OPT_ONCE},
    {"json", no_argument, NULL, OPT_JSON},
    {"no-color", no_argument, NULL, OPT_NO_COLOR},
    {"no-colour", no_argument, NULL, OPT_NO_COLOR},
    {"output", required_argument, NULL, 'o'},
    {"listen", required_argument, NULL, OPT_LISTEN},
    {"web.listen-address", required_argument, NULL, OPT_LISTEN},
    {"seconds", required_argument, NULL, OPT_SECONDS},
    {"format", required_argument, NULL, OPT_FORMAT},
    {"sites", required_argument, NULL, OPT_SITES},
    {"web-config", required_argument, NULL, OPT_WEB_CONFIG},
    {"web.config.file", required_argument, NULL, OPT_WEB_CONFIG},
    {"web.telemetry-path", required_argument, NULL, OPT_TELEMETRY_PATH},
    {"no-size-classes", no_argument, NULL, OPT_NO_SIZE_CLASSES},
    {"group-by", required_argument, NULL, OPT_GROUP_BY},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"unsafe-no-auth", no_argument, NULL, OPT_UNSAFE_NO_AUTH},
    {"pid", required_argument, NULL, 'p'},
    {"user", required_argument, NULL, 'u'},
    {"no-mouse", no_argument, NULL, OPT_NO_MOUSE},
    {"focus", required_argument, NULL, OPT_FOCUS},
    {"ignore", required_argument, NULL, OPT_IGNORE},
    {"hide", required_argument, NULL, OPT_HIDE},
    {"keep-wrappers", no_argument, NULL, OPT_KEEP_WRAPPERS},
    {"tree", no_argument, NULL, OPT_TREE},
    {"track", no_argument, NULL, OPT_TRACK},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0}};

static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t errlen, const char *fmt, ...) {
  va_list ap;

  if (err != NULL && errlen > 0) {
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return MS_EINVAL;
}

static const char *command_name(mt_cmd_t c) {
  switch (c) {
  case MT_CMD_RUN:
    return "run";
  case MT_CMD_PS:
    return "ps";
  case MT_CMD_PROFILE:
    return "profile";
  case MT_CMD_SERVE:
    return "serve";
  case MT_CMD_ATTACH:
    return "attach";
  case MT_CMD_DETACH:
    return "detach";
  default:
    return "watch";
  }
}

static int command_word(const char *w, mt_cmd_t *out) {
  static const struct {
    const char *word;
    mt_cmd_t cmd;
  } words[] = {{"run", MT_CMD_RUN},         {"ps", MT_CMD_PS},
               {"profile", MT_CMD_PROFILE}, {"serve", MT_CMD_SERVE},
               {"attach", MT_CMD_ATTACH},   {"detach", MT_CMD_DETACH}};
  size_t i;

  for (i = 0; i < sizeof words / sizeof words[0]; i++) {
    if (strcmp(w, words[i].word) == 0) {
      *out = words[i].cmd;
      return 1;
    }
  }
  return 0;
}

/* One PID: a word of the command line (positional, where a word that is
 * no number may be a mistyped command) or of -p's list (never a command). */
static int add_pid(mt_opts_t *o, const char *w, int positional, char *err,
                   size_t errlen) {
  long pid;
  size_t i;

  if (ms__parse_long(w, 1, MT_PID_MAX, &pid) != 0) {
    if (positional && o->cmd == MT_CMD_WATCH && o->npids == 0 && w[0] >= 'a' &&
        w[0] <= 'z')
      return fail(err, errlen,
                  "unknown command '%s' (commands: run, ps, profile, serve, "
                  "attach, detach)",
                  w);
    return fail(err, errlen, "'%s' is not a process ID (1..%d)", w, MT_PID_MAX);
  }
  /* Naming a process twice watches it once. */
  for (i = 0; i < o->npids; i++)
    if (o->pids[i] == (int)pid)
      return 0;
  if (o->npids == MT_MAX_PIDS)
    return fail(err, errlen, "too many process IDs (at most %d)", MT_MAX_PIDS);
  o->pids[o->npids++] = (int)pid;
  return 0;
}

/* -p PID,PID,... as top and htop take it (also given several times). */
static int add_pid_list(mt_opts_t *o, const char *list, char *err,
                        size_t errlen) {
  char word[32];
  const char *p = list;
  if (*p == '\0')
    return fail(err, errlen, "-p needs process IDs, e.g. -p 1234,5678");
  while (*p != '\0') {
    size_t n = strcspn(p, ",");
    if (n == 0 || n >= sizeof word)
      return fail(err, errlen, "'%s' is not a list of process IDs (-p 1,2)",
                  list);
    memcpy(word, p, n);
    word[n] = '\0';
    if (add_pid(o, word, 0, err, errlen) != 0)
      return MS_EINVAL;
    p += n;
    if (*p == ',')
      p++;
  }
  return 0;
}

/* -u USER: a name of the password database or a number, as top takes it. */
static int take_user(mt_opts_t *o, const char *user, char *err, size_t errlen) {
  struct passwd pw, *res = NULL;
  char buf[1024];
  long uid;
  if (ms__parse_long(user, 0, 0x7fffffffL, &uid) == 0) {
    o->uid = (int)uid;
    return 0;
  }
  if (getpwnam_r(user, &pw, buf, sizeof buf, &res) != 0 || res == NULL)
    return fail(err, errlen, "unknown user '%s' (-u takes a name or a uid)",
                user);
  o->uid = (int)res->pw_uid;
  return 0;
}

/* What the parse has seen so far, beyond *o. */
typedef struct cli_seen_s {
  int help, version; /* -h, -V */
  int cmd;           /* a command word */
  int delay, iter;   /* -d, -n given */
  int format;        /* --format given */
  int pid_option;    /* -p given */
  int user;          /* -u given */
} cli_seen_t;

/* The commands that take one process ID. */
static int one_pid(mt_cmd_t c) {
  return c == MT_CMD_PROFILE || c == MT_CMD_ATTACH || c == MT_CMD_DETACH;
}

/* More words after "--": every one is a PID, even one that looks like an
 * option. getopt must not be called again: once it has seen "--" it keeps
 * pointing back at the first word after it. */
static int rest_are_pids(int argc, char **argv, mt_opts_t *o, char *err,
                         size_t errlen) {
  for (; optind < argc; optind++) {
    if (one_pid(o->cmd))
      return fail(err, errlen, "%s takes one process ID (got '%s')",
                  command_name(o->cmd), argv[optind]);
    if (add_pid(o, argv[optind], 1, err, errlen) != 0)
      return MS_EINVAL;
  }
  return 0;
}

/* A bare word at argv[optind], or the first word after "--": run's
 * command, the command word, or a PID. Returns 0 to go on parsing, 1 when
 * every word has been taken, or MS_EINVAL. */
static int bare_word(int argc, char **argv, mt_opts_t *o, cli_seen_t *seen,
                     char *err, size_t errlen) {
  int dashdash = optind > 1 && strcmp(argv[optind - 1], "--") == 0;

  if (o->cmd == MT_CMD_RUN) {
    o->run_argv = argv + optind;
    o->run_argc = argc - optind;
    return 1;
  }
  if (!seen->cmd && !dashdash && o->npids == 0 &&
      command_word(argv[optind], &o->cmd)) {
    seen->cmd = 1;
    optind++;
    return 0;
  }
  if (o->cmd == MT_CMD_PS || o->cmd == MT_CMD_SERVE)
    return fail(err, errlen, "'%s' takes no arguments (got '%s')",
                command_name(o->cmd), argv[optind]);
  if (one_pid(o->cmd) && o->npids == 1)
    return fail(err, errlen, "%s takes one process ID (got '%s')",
                command_name(o->cmd), argv[optind]);
  if (add_pid(o, argv[optind], 1, err, errlen) != 0)
    return MS_EINVAL;
  optind++;
  if (!dashdash)
    return 0;
  return rest_are_pids(argc, argv, o, err, errlen) != 0 ? MS_EINVAL : 1;
}

/* One option getopt returned (c). Returns 0 or MS_EINVAL. */
static int take_option(int c, char **argv, mt_opts_t *o, cli_seen_t *seen,
                       char *err, size_t errlen) {
  switch (c) {
  case 'd':
    if (ms__parse_double(optarg, MT_DELAY_MIN, MT_DELAY_MAX, &o->delay_s))
      return fail(err, errlen,
                  "invalid delay '%s': give seconds, at least %.1f and at "
                  "most %.0f (e.g. -d 0.5)",
                  optarg, MT_DELAY_MIN, MT_DELAY_MAX);
    seen->delay = 1;
    o->delay_given = 1;
    return 0;
  case OPT_TRACK:
    o->track = 1;
    return 0;
  case 'p':
    seen->pid_option = 1;
    return add_pid_list(o, optarg, err, errlen);
  case 'u':
    seen->user = 1;
    return take_user(o, optarg, err, errlen);
  case OPT_NO_MOUSE:
    o->mouse = 0;
    return 0;
  case 'n':
    if (ms__parse_long(optarg, 1, 1000000000L, &o->iterations))
      return fail(err, errlen,
                  "invalid iteration count '%s': give a whole number, at "
                  "least 1",
                  optarg);
    seen->iter = 1;
    return 0;
  case 'o':
    if (optarg[0] == '\0')
      return fail(err, errlen, "-o needs a file name");
    o->output = optarg;
    return 0;
  case OPT_LISTEN:
    if (optarg[0] == '\0')
      return fail(err, errlen,
                  "--web.listen-address needs an address (HOST:PORT)");
    o->listen = optarg;
    return 0;
  case OPT_SECONDS:
    if (ms__parse_long(optarg, 1, MT_PROFILE_SECONDS_MAX, &o->seconds))
      return fail(err, errlen,
                  "invalid --seconds '%s': give whole seconds, 1 to %d", optarg,
                  MT_PROFILE_SECONDS_MAX);
    return 0;
  case OPT_FORMAT:
    if (strcmp(optarg, "pprof") == 0)
      o->format = MT_PROFILE_PPROF;
    else if (strcmp(optarg, "text") == 0)
      o->format = MT_PROFILE_TEXT;
    else
      return fail(err, errlen, "invalid --format '%s': pprof or text", optarg);
    seen->format = 1;
    return 0;
  case OPT_SITES:
    if (ms__parse_long(optarg, 1, MT_SITES_MAX, &o->sites))
      return fail(err, errlen,
                  "invalid --sites '%s': give a number of sites, 1 to %d",
                  optarg, MT_SITES_MAX);
    return 0;
  case OPT_WEB_CONFIG:
    if (optarg[0] == '\0')
      return fail(err, errlen, "--web.config.file needs a file name");
    o->web_config = optarg;
    return 0;
  case OPT_TIMEOUT: {
    double v;
    if (ms__parse_double(optarg, 0.001, MT_TIMEOUT_MAX_MS / 1000.0, &v))
      return fail(err, errlen,
                  "invalid --timeout '%s': give seconds, at least 0.001 and "
                  "at most %d (e.g. --timeout 2.5)",
                  optarg, MT_TIMEOUT_MAX_MS / 1000);
    o->timeout_ms = (int)(v * 1000.0 + 0.5);
    if (o->timeout_ms < 1)
      o->timeout_ms = 1;
    o->timeout_given = 1;
    return 0;
  }
  case OPT_UNSAFE_NO_AUTH:
    o->unsafe_no_auth = 1;
    return 0;
  case OPT_FOCUS:
  case OPT_IGNORE:
  case OPT_HIDE: {
    const char *name = c == OPT_FOCUS    ? "--focus"
                       : c == OPT_IGNORE ? "--ignore"
                                         : "--hide";
    char why[128];

    if (optarg[0] == '\0')
      return fail(err, errlen, "%s needs a regular expression", name);
    if (mt_heap_filter_check(optarg, why, sizeof why) != 0)
      return fail(err, errlen, "invalid %s '%s': %s", name, optarg, why);
    if (c == OPT_FOCUS)
      o->filter.focus = optarg;
    else if (c == OPT_IGNORE)
      o->filter.ignore = optarg;
    else
      o->filter.hide = optarg;
    return 0;
  }
  case OPT_KEEP_WRAPPERS:
    o->filter.keep_wrappers = 1;
    return 0;
  case OPT_TELEMETRY_PATH:
    /* A path of its own: not the landing page, not pprof's, nothing a
     * URL would have to escape. */
    if (optarg[0] != '/' || optarg[1] == '\0' ||
        strlen(optarg) > MT_TELEMETRY_PATH_MAX ||
        strspn(optarg, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                       "0123456789/-._~") != strlen(optarg) ||
        strncmp(optarg, "/debug/", 7) == 0)
      return fail(err, errlen,
                  "invalid --web.telemetry-path '%s': give a path such as "
                  "/metrics (letters, digits, / - . _ ~; not / itself nor "
                  "under /debug/)",
                  optarg);
    o->telemetry_path = optarg;
    return 0;
  case OPT_NO_SIZE_CLASSES:
    o->no_size_classes = 1;
    return 0;
  case OPT_GROUP_BY:
    if (strcmp(optarg, "comm") == 0)
      o->group_by = MT_GROUP_COMM;
    else if (strcmp(optarg, "exe") == 0)
      o->group_by = MT_GROUP_EXE;
    else if (strcmp(optarg, "cmdline") == 0)
      o->group_by = MT_GROUP_CMDLINE;
    else if (strcmp(optarg, "cgroup") == 0)
      o->group_by = MT_GROUP_CGROUP;
    else
      return fail(err, errlen,
                  "invalid --group-by '%s': comm, exe, cmdline or cgroup",
                  optarg);
    return 0;
  case OPT_TREE:
    o->tree = 1;
    return 0;
  case OPT_ONCE:
    o->once = 1;
    return 0;
  case OPT_JSON:
    o->json = 1;
    return 0;
  case OPT_NO_COLOR:
    o->color = 0;
    return 0;
  case 'h':
    seen->help = 1;
    return 0;
  case 'V':
    seen->version = 1;
    return 0;
  case ':':
    if (optopt != 0)
      return fail(err, errlen, "option -%c needs a value", optopt);
    return fail(err, errlen, "option '%s' needs a value", argv[optind - 1]);
  default:
    if (optopt != 0)
      return fail(err, errlen, "unknown option -%c", optopt);
    return fail(err, errlen, "unknown option '%s'", argv[optind - 1]);
  }
}

/* The options that apply to some commands only, and what each command
 * needs. Returns 0 or MS_EINVAL. */
static int check_command(mt_opts_t *o, const cli_seen_t *seen, char *err,
                         size_t errlen) {
  if (o->output != NULL && o->cmd != MT_CMD_PROFILE)
    return fail(err, errlen, "-o/--output only applies to 'profile'");
  if (o->listen != NULL && o->cmd != MT_CMD_SERVE)
    return fail(err, errlen, "--web.listen-address only applies to 'serve'");
  if (o->web_config != NULL && o->cmd != MT_CMD_SERVE)
    return fail(err, errlen, "--web.config.file only applies to 'serve'");
  if (seen->pid_option && o->cmd != MT_CMD_WATCH)
    return fail(err, errlen, "-p/--pid applies to the live view and --once");
  if (seen->user && o->cmd != MT_CMD_WATCH && o->cmd != MT_CMD_PS)
    return fail(err, errlen,
                "-u/--user applies to the live view, --once, --json and ps");
  if (o->unsafe_no_auth && o->cmd != MT_CMD_SERVE)
    return fail(err, errlen, "--unsafe-no-auth only applies to 'serve'");
  if (o->cmd != MT_CMD_SERVE &&
      (o->telemetry_path || o->no_size_classes || o->group_by))
    return fail(err, errlen, "%s only applies to 'serve'",
                o->telemetry_path    ? "--web.telemetry-path"
                : o->no_size_classes ? "--no-size-classes"
                                     : "--group-by");
  if (o->track && o->cmd != MT_CMD_ATTACH)
    return fail(err, errlen, "--track only applies to 'attach'");
  if (o->cmd != MT_CMD_PROFILE && (o->seconds != 0 || seen->format))
    return fail(err, errlen, "%s only applies to 'profile'",
                o->seconds != 0 ? "--seconds" : "--format");
  if (o->sites != 0 && o->cmd != MT_CMD_PROFILE &&
      !(o->cmd == MT_CMD_WATCH && o->once))
    return fail(err, errlen,
                "--sites applies to --once (and --json) and to 'profile "
                "--format text'");
  if ((o->filter.focus != NULL || o->filter.ignore != NULL ||
       o->filter.hide != NULL || o->filter.keep_wrappers) &&
      !(o->cmd == MT_CMD_PROFILE && o->format == MT_PROFILE_TEXT) &&
      !(o->cmd == MT_CMD_WATCH && (!o->once || o->sites != 0)))
    return fail(err, errlen,
                "--focus, --ignore, --hide and --keep-wrappers apply to the "
                "sites of 'profile --format text', of --sites and of the "
                "live view (a pprof file holds every sample: give pprof "
                "its own -focus, -ignore, -hide)");
  if (o->tree && (o->cmd != MT_CMD_WATCH || o->npids != 1))
    return fail(err, errlen,
                "--tree watches one process and its descendants: memtop "
                "PID --tree [--once [--json]] ('run' follows its command's "
                "tree without it)");
  if (o->sites != 0 && o->cmd == MT_CMD_PROFILE && o->format != MT_PROFILE_TEXT)
    return fail(err, errlen,
                "--sites applies to '--format text' (a pprof file holds "
                "every site)");

  switch (o->cmd) {
  case MT_CMD_RUN:
    if (o->run_argc == 0)
      return fail(err, errlen,
                  "'run' needs a command: memtop run [OPTIONS] -- CMD [ARGS]");
    if (o->once && seen->iter)
      return fail(err, errlen,
                  "'run --once' prints one report when the command exits; "
                  "-n does not apply");
    return 0;
  case MT_CMD_PROFILE:
    if (o->npids != 1)
      return fail(err, errlen,
                  "'profile' needs one process ID: memtop "
                  "profile PID [-o FILE] [--seconds N] [--format pprof|text]");
    /* fall through */
  case MT_CMD_ATTACH:
  case MT_CMD_DETACH:
    if ((o->cmd == MT_CMD_ATTACH || o->cmd == MT_CMD_DETACH) && o->npids != 1)
      return fail(err, errlen, "'%s' needs one process ID: memtop %s PID",
                  command_name(o->cmd), command_name(o->cmd));
    /* fall through */
  case MT_CMD_PS:
  case MT_CMD_SERVE:
    if (o->once || seen->iter || (seen->delay && o->cmd != MT_CMD_SERVE))
      return fail(err, errlen, "%s does not apply to '%s'",
                  o->once ? (o->json ? "--json" : "--once")
                          : (seen->iter ? "-n/--iterations" : "-d/--delay"),
                  command_name(o->cmd));
    return 0;
  default:
    return 0;
  }
}

int mt_cli_parse(int argc, char **argv, const char *no_color, mt_opts_t *o,
                 char *err, size_t errlen) {
  cli_seen_t seen;
  int c, rc;

  if (o == NULL || argv == NULL || argc < 1)
    return fail(err, errlen, "no arguments");
  /* All but the PID table past its first entry (an entry past npids is
   * never read): 16 KiB, five pages of a fresh process written for
   * nothing at every start. */
  memset(o, 0, offsetof(mt_opts_t, pids) + sizeof o->pids[0]);
  memset(&o->npids, 0, sizeof *o - offsetof(mt_opts_t, npids));
  memset(&seen, 0, sizeof seen);
  o->cmd = MT_CMD_WATCH;
  o->delay_s = MT_DELAY_DEFAULT;
  o->timeout_ms = MT_TIMEOUT_DEFAULT_MS;
  o->color = !(no_color != NULL && no_color[0] != '\0');
  o->uid = -1;
  o->mouse = 1;
  if (err != NULL && errlen > 0)
    err[0] = '\0';

  optind = 0; /* glibc: 0 re-initialises getopt completely */
  opterr = 0; /* we word the messages ourselves */
  for (;;) {
    c = getopt_long(argc, argv, "+:d:n:o:p:u:hV", long_options, NULL);
    if (c == -1) {
      if (optind >= argc)
        break;
      rc = bare_word(argc, argv, o, &seen, err, errlen);
      if (rc < 0)
        return rc;
      if (rc == 1)
        break;
      continue;
    }
    if (take_option(c, argv, o, &seen, err, errlen) != 0)
      return MS_EINVAL;
  }

  if (seen.help) {
    o->cmd = MT_CMD_HELP;
    return 0;
  }
  if (seen.version) {
    o->cmd = MT_CMD_VERSION;
    return 0;
  }
  if (o->json)
    o->once = 1; /* JSON lines are a plain mode: there is no live JSON */
  return check_command(o, &seen, err, errlen);
}

int mt_cli_timeout(mt_opts_t *o, const char *env, char *err, size_t errlen) {
  long v;

  if (err != NULL && errlen > 0)
    err[0] = '\0';
  if (o->timeout_given || env == NULL || env[0] == '\0')
    return 0;
  if (ms__parse_long(env, 1, MT_TIMEOUT_MAX_MS, &v) != 0)
    return fail(err, errlen,
                "ignoring MEMTOP_TIMEOUT_MS=%s (want milliseconds, 1 to %d); "
                "using %d",
                env, MT_TIMEOUT_MAX_MS, o->timeout_ms);
  o->timeout_ms = (int)v;
  return 0;
}

void mt_cli_usage(FILE *f) {
  fputs("Usage: memtop [OPTIONS] [PID...]\n"
        "       memtop --once [--json] [-n N] [-d SECS] [PID...]\n"
        "       memtop PID --tree [--once [--json]]\n"
        "       memtop run [OPTIONS] -- CMD [ARGS...]\n"
        "       memtop ps\n"
        "       memtop profile PID [-o FILE] [--seconds N] "
        "[--format pprof|text]\n"
        "       memtop attach [--track] PID | memtop detach PID\n"
        "       memtop serve [--web.listen-address ADDR] "
        "[--web.config.file FILE]\n"
        "                    [--web.telemetry-path PATH] [--no-size-classes]\n"
        "                    [--group-by RULE] [--unsafe-no-auth]\n"
        "Try 'memtop --help' for more information.\n",
        f);
}

void mt_cli_help(FILE *f) {
  fputs(
      "Usage: memtop [OPTIONS] [PID...]\n"
      "Show where a running program's memory goes, live: Ready and Prepared\n"
      "memory split into data, fragmentation overhead and idle, the\n"
      "allocator's size classes and, with a collector, GC pauses.\n"
      "\n"
      "Commands:\n"
      "  memtop                     live view of every attachable process\n"
      "  memtop PID...              live view of these processes\n"
      "  memtop run -- CMD [ARGS]   start CMD with libmemstats preloaded and\n"
      "                             watch it; exits with CMD's exit status\n"
      "  memtop --once [PID...]     one plain-text report, then exit\n"
      "  memtop --once --json [PID...]\n"
      "                             the same as JSON lines, one per process\n"
      "  memtop ps                  list attachable processes and exit\n"
      "  memtop profile PID [-o FILE] [--seconds N] [--format pprof|text]\n"
      "                             write PID's heap profile: a gzipped\n"
      "                             profile.proto for `go tool pprof` "
      "(default\n"
      "                             file ./memtop-PID.pb.gz; -o - for "
      "stdout),\n"
      "                             or a top list of allocation sites\n"
      "  memtop serve [--web.listen-address ADDR] [--web.config.file FILE]\n"
      "                             Prometheus /metrics of every attachable\n"
      "                             process (default 127.0.0.1:9464; :PORT\n"
      "                             for every interface), a landing page at\n"
      "                             /, /debug/pprof/heap?pid=N[&seconds=S]\n"
      "                             for go tool pprof; FILE in\n"
      "                             exporter-toolkit's format: TLS, basic\n"
      "                             auth, re-read when it changes (as root\n"
      "                             it needs basic auth, or --unsafe-no-auth\n"
      "                             to show every user's processes to anyone\n"
      "                             who can connect); --listen and\n"
      "                             --web-config are the same flags\n"
      "  memtop attach PID          load libmemstats into PID, a process\n"
      "                             started without it (ptrace, no debugger;\n"
      "                             its allocator's figures from then on)\n"
      "  memtop attach --track PID  also count its mallocs and frees from\n"
      "                             then on (its GOT entries rewritten)\n"
      "  memtop detach PID          stop what attach started\n"
      "\n"
      "Options:\n"
      "  -d, --delay SECS       refresh interval in seconds, not tenths as\n"
      "                         in htop (default 1, at least 0.1)\n"
      "  -p, --pid PID,...      watch these processes (as top -p; the same\n"
      "                         as naming them)\n"
      "  -u, --user USER        only USER's processes (the owner's real uid),\n"
      "                         in the live view, --once, --json and ps\n"
      "                         (a name or a uid; the key u changes it)\n"
      "      --no-mouse         the live view leaves the mouse to the\n"
      "                         terminal (to select text)\n"
      "  -n, --iterations N     stop after N refreshes; with --once, print N\n"
      "                         reports SECS apart (like top -b -n N)\n"
      "      --once             plain text on stdout instead of the live view\n"
      "      --json             JSON lines instead of text (implies --once)\n"
      "      --tree             with one PID: it and its descendants, as they\n"
      "                         start, in tree order with their parent PID\n"
      "      --no-color         no colours (also when NO_COLOR is set)\n"
      "      --timeout SECS     give up on a process whose answer is not\n"
      "                         whole after SECS (default 10), so that one\n"
      "                         slow process never holds up the others\n"
      "  -o, --output FILE      profile: where to write (- for stdout)\n"
      "      --seconds N        profile: the growth over N seconds (two\n"
      "                         profiles N seconds apart, the first\n"
      "                         subtracted, like Go's ?seconds=N)\n"
      "      --format FMT       profile: pprof (default) or text\n"
      "      --sites N          with --once: add the top N allocation sites\n"
      "                         to each report or JSON line; with profile\n"
      "                         --format text: list N sites (default 20)\n"
      "      --focus REGEX      sites (--sites, profile --format text, the\n"
      "                         live view): only the samples with a frame\n"
      "                         matching REGEX (function, file or object),\n"
      "                         as pprof's -focus\n"
      "      --ignore REGEX     ...without the samples with a frame matching\n"
      "      --hide REGEX       ...with the frames matching taken out\n"
      "      --keep-wrappers    ...with the allocation wrappers (malloc,\n"
      "                         xmalloc, zmalloc, g_malloc, operator new,\n"
      "                         std::allocator ...), which are otherwise\n"
      "                         skipped: a site is their caller\n"
      "      --web.telemetry-path PATH\n"
      "                         serve: where the metrics are (default\n"
      "                         /metrics)\n"
      "      --no-size-classes  serve: leave out the size-class series (a\n"
      "                         few hundred per jemalloc process)\n"
      "      --group-by RULE    serve: a `group` label that outlives the\n"
      "                         PID: comm, exe, cmdline (its first 128\n"
      "                         bytes) or cgroup (e.g. the systemd unit)\n"
      "  -h, --help             this help\n"
      "  -V, --version          the version\n"
      "\n"
      "Keys in the live view (htop's where they mean the same):\n"
      "  F10,q quit   F1,h,? help   F2 setup   F3,/ search   F4,\\ filter\n"
      "  F5,t tree   F6,<,> sort   M by memory   N by PID   I invert   u user\n"
      "  p command line   space pause   d delay   arrows, mouse move\n"
      "  Enter open a process   Esc back\n"
      "  run: q asks: y stops CMD, d detaches and leaves it running; a\n"
      "  closed terminal detaches too\n"
      "Settings: $XDG_CONFIG_HOME/memtop/memtoprc, written by F2.\n"
      "\n"
      "A process is attachable when it runs libmemstats: linked with\n"
      "-lmemstats, or started with `memtop run -- CMD` (which preloads\n"
      "libmemstats-preload.so). Sockets live in $MEMSTATS_DIR, else\n"
      "$XDG_RUNTIME_DIR/memtop, else /tmp/memtop-$UID.\n"
      "\n"
      "Environment: NO_COLOR, MEMSTATS_DIR, MEMTOP_PRELOAD (the preload\n"
      "library `run` uses), MEMTOP_TIMEOUT_MS (--timeout in milliseconds,\n"
      "when the option is not given), DEBUGINFOD_URLS (servers to fetch\n"
      "missing debug files from, as perf and gdb do).\n"
      "\n"
      "Exit status: 0 success; 1 a target could not be read; 2 bad usage.\n"
      "With `run`: CMD's exit status (128+N if killed by signal N).\n"
      "\n"
      "Examples:\n"
      "  memtop run -- python3 app.py     watch a program from its start\n"
      "  memtop --once 1234               one report for PID 1234\n"
      "  memtop --once --json -n 60 1234  a minute of JSON lines\n"
      "  memtop profile 1234 && go tool pprof -top memtop-1234.pb.gz\n"
      "  memtop profile --seconds 30 --format text 1234\n"
      "                                   what grew in 30 s, by site\n"
      "\n"
      "See memtop(1).\n",
      f);
}
