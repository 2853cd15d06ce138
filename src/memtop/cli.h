/*
 * cli.h - memtop's command line: what the user asked for, parsed and
 * checked, with no side effect. main.c calls mt_cli_parse() and acts on the
 * result; tests call it directly.
 */
#ifndef MS_MEMTOP_CLI_H
#define MS_MEMTOP_CLI_H

#include <stddef.h>
#include <stdio.h>

#include "common/parse.h"
#include "pprof/filter.h"
#include "tui/model.h"

#define MT_PID_MAX 4194304 /* the kernel's PID_MAX_LIMIT (2^22) */
#define MT_MAX_PIDS 4096   /* PIDs named on one command line */

typedef enum mt_cmd_e {
  MT_CMD_WATCH = 0, /* memtop [PID...]: live view, or --once/--json */
  MT_CMD_RUN,       /* memtop run [OPTS] -- CMD ARGS */
  MT_CMD_PS,        /* memtop ps */
  MT_CMD_PROFILE,   /* memtop profile PID [-o FILE] [--seconds N] ... */
  MT_CMD_SERVE,     /* memtop serve [--listen ADDR] [--web-config FILE] */
  MT_CMD_ATTACH,    /* memtop attach PID */
  MT_CMD_DETACH,    /* memtop detach PID */
  MT_CMD_HELP,      /* -h, --help */
  MT_CMD_VERSION    /* -V, --version */
} mt_cmd_t;

#define MT_PROFILE_SECONDS_MAX 86400 /* a day, as for -d */
/* The deadline of one request to a target (connect, question, the whole
 * answer, a heap profile's last frame): --timeout, else MEMTOP_TIMEOUT_MS. */
#define MT_TIMEOUT_DEFAULT_MS 10000
#define MT_TIMEOUT_MAX_MS 600000
#define MT_SITES_MAX 10000

typedef enum mt_profile_format_e {
  MT_PROFILE_PPROF = 0, /* gzipped profile.proto (the default) */
  MT_PROFILE_TEXT       /* a top list for a terminal */
} mt_profile_format_t;

/* serve --group-by: what the `group` label holds (a process's identity
 * that outlives its PID). */
typedef enum mt_group_by_e {
  MT_GROUP_NONE = 0, /* no group label */
  MT_GROUP_COMM,     /* the command name (/proc/PID/comm) */
  MT_GROUP_EXE,      /* the program's path (/proc/PID/exe) */
  MT_GROUP_CMDLINE,  /* the command line, its first MT_GROUP_MAX bytes */
  MT_GROUP_CGROUP    /* the cgroup v2 path (a systemd unit, a container) */
} mt_group_by_t;

#define MT_GROUP_MAX 128          /* bytes of a group label's value */
#define MT_TELEMETRY_PATH_MAX 256 /* --web.telemetry-path */

typedef struct mt_opts_s {
  mt_cmd_t cmd;
  int once;        /* plain text instead of the live view */
  int json;        /* JSON lines (implies once) */
  double delay_s;  /* -d */
  long iterations; /* -n; 0 = until quit */
  int color;       /* 0 with --no-color or NO_COLOR set and non-empty */
  int pids[MT_MAX_PIDS];
  size_t npids;    /* 0 = every attachable process */
  char **run_argv; /* run: CMD ARGS, NULL-terminated (points into argv) */
  int run_argc;
  const char *output; /* profile: -o FILE */
  long seconds;       /* profile: --seconds N, the delta's span; 0: none */
  mt_profile_format_t format; /* profile: --format */
  long sites;                 /* profile --format text: --sites N; 0: default */
  const char *listen;         /* serve: --web.listen-address (--listen) ADDR */
  const char *web_config;     /* serve: --web.config.file (--web-config) FILE */
  int timeout_ms;             /* --timeout: one request's deadline */
  int timeout_given;          /* --timeout was on the command line */
  int unsafe_no_auth;         /* serve: --unsafe-no-auth (root, no users) */
  int delay_given;            /* -d was on the command line */
  int uid;                    /* -u: the live view's user, -1 all */
  int mouse;                  /* 0 with --no-mouse */
  int tree;  /* --tree: the PID named and its descendants (issue 21) */
  int track; /* attach: --track, count from now on */
  /* --focus, --ignore, --hide, --keep-wrappers (checked expressions):
   * the sites of profile --format text, --sites and the live view. */
  mt_heap_filter_t filter;
  const char *telemetry_path; /* serve: --web.telemetry-path; NULL: /metrics */
  int no_size_classes;        /* serve: --no-size-classes */
  mt_group_by_t group_by;     /* serve: --group-by */
} mt_opts_t;

/* Parses argv into *o. `no_color` is the value of $NO_COLOR (or NULL).
 * Returns 0, or MS_EINVAL on bad usage with a one-line reason (no
 * "memtop:" prefix, no newline) in err. Uses getopt_long, so it is not
 * reentrant; it resets getopt's state itself and can be called repeatedly. */
int mt_cli_parse(int argc, char **argv, const char *no_color, mt_opts_t *o,
                 char *err, size_t errlen);

/* The one reading of MEMTOP_TIMEOUT_MS (milliseconds, 1 to
 * MT_TIMEOUT_MAX_MS; `env` is its value or NULL): it sets o->timeout_ms
 * unless --timeout did. Returns 0, or MS_EINVAL with words for a warning
 * in err when the value is not one (it is then ignored: the deadline stays
 * the default, as a bad NO_COLOR would not stop memtop either). */
int mt_cli_timeout(mt_opts_t *o, const char *env, char *err, size_t errlen);

/* The short usage (for bad usage, on stderr) and the full --help text. */
void mt_cli_usage(FILE *f);
void mt_cli_help(FILE *f);

#endif
