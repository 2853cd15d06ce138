/*
 * callgrind.h - test helper: the instructions a program runs, counted by
 * valgrind's callgrind, the same on a loaded machine as on a quiet one
 * (which a timing is not). What one operation costs is the difference of
 * two runs of different lengths divided by the difference of lengths:
 * start-up and exit cancel out. Used by test_hotpath_cost,
 * test_start_cost and test_linked_profile; no cmocka here but in the skip
 * macros, which expand in a test. Header only, like the other helpers
 * here.
 */
#ifndef MS_TESTS_SUPPORT_CALLGRIND_H
#define MS_TESTS_SUPPORT_CALLGRIND_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/host.h"
#include "support/target_proc.h"

/* In a cmocka test: skips it, saying so, where valgrind is not
 * installed. */
#define CG_SKIP_UNLESS_VALGRIND()                                              \
  do {                                                                         \
    if (!host_have_program("valgrind")) {                                      \
      print_message("skipped: valgrind is not installed\n");                   \
      skip();                                                                  \
    }                                                                          \
  } while (0)

/* In a cmocka test: skips it in a sanitizer build, saying why (a string
 * literal): what it counts is the plain build's, or valgrind cannot run
 * what the sanitizer built. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CG_SKIP_IF_SANITIZED(why)                                              \
  do {                                                                         \
    print_message("skipped: " why "\n");                                       \
    skip();                                                                    \
  } while (0)
#else
#define CG_SKIP_IF_SANITIZED(why)                                              \
  do {                                                                         \
  } while (0)
#endif

/* Runs argv (at most 16 words) under `valgrind --tool=callgrind`, its
 * stdin and stdout /dev/null, after the environment changes env
 * (NULL-ended, target_env_apply's form: "NAME=VALUE" sets, "NAME"
 * removes). Returns 0 with the instructions counted in *total, or -1 with
 * the cause in why: the run failed, or valgrind could not read the build's
 * debug information (Debian 12's valgrind and clang 14's DWARF 5: the
 * Makefile builds clang's objects with -gdwarf-4). */
static inline int cg_run(const char *const argv[], const char *const env[],
                         const char *out, unsigned long long *total, char *why,
                         size_t whylen);
static inline int cg_count(const char *const argv[], const char *const env[],
                           unsigned long long *total, char *why,
                           size_t whylen) {
  return cg_run(argv, env, "/dev/null", total, why, whylen);
}

/* cg_count, with callgrind's profile written to the file out (read it
 * with cg_calls). */
static inline int cg_run(const char *const argv[], const char *const env[],
                         const char *out, unsigned long long *total, char *why,
                         size_t whylen) {
  char outarg[1100];
  snprintf(outarg, sizeof outarg, "--callgrind-out-file=%s", out);
  const char *vargv[24] = {"valgrind", "--tool=callgrind", outarg};
  size_t n = 3;
  for (size_t i = 0; argv[i] != NULL && n + 1 < sizeof vargv / sizeof *vargv;
       i++)
    vargv[n++] = argv[i];
  vargv[n] = NULL;
  int err[2];
  if (pipe(err) != 0) {
    snprintf(why, whylen, "pipe: %s", strerror(errno));
    return -1;
  }
  pid_t pid = fork();
  if (pid < 0) {
    snprintf(why, whylen, "fork: %s", strerror(errno));
    close(err[0]);
    close(err[1]);
    return -1;
  }
  if (pid == 0) {
    int null = open("/dev/null", O_RDWR);
    dup2(null, 0);
    dup2(null, 1);
    dup2(err[1], 2);
    close(err[0]);
    for (size_t i = 0; env != NULL && env[i] != NULL; i++)
      target_env_apply(env[i]);
    execvp(vargv[0], (char *const *)vargv);
    _exit(127);
  }
  close(err[1]);
  FILE *f = fdopen(err[0], "r");
  char line[512];
  int found = 0, unreadable = 0;
  *total = 0;
  while (f != NULL && fgets(line, sizeof line, f) != NULL) {
    unsigned long long v;
    const char *c = strstr(line, "Collected : ");
    if (c != NULL && sscanf(c + 12, "%llu", &v) == 1) {
      *total += v;
      found = 1;
    }
    unreadable |= strstr(line, "Possibly corrupted debuginfo") != NULL;
  }
  if (f != NULL)
    fclose(f);
  else
    close(err[0]);
  int st;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0 && found)
    return 0;
  if (unreadable)
    snprintf(why, whylen,
             "valgrind cannot read %.200s's debug information (clang 14's "
             "DWARF 5? the build needs -gdwarf-4)",
             argv[0]);
  else
    snprintf(why, whylen, "valgrind %.200s: exit %d, %s", argv[0],
             WIFEXITED(st) ? WEXITSTATUS(st) : -1,
             found ? "counted" : "no \"Collected\" line");
  return -1;
}

/* A run under callgrind whose profiles are kept to be read (cg_calls):
 * in a directory of its own, one profile a process with per_process
 * (callgrind's %p: a fork child's starts with its parent's counts at the
 * fork, unless VALGRIND_OPTS says otherwise), else the one at out. */
typedef struct cg_profile_s {
  char dir[64];             /* its own directory, "" until made */
  char out[96];             /* dir/cg.out, or dir/cg.%p */
  unsigned long long total; /* the instructions counted */
  char why[512];            /* why the run failed */
} cg_profile_t;

/* Makes p's directory, under /tmp and named after name. Returns 0, or
 * -1 (then p->why says why and cg_profile_run fails). */
static inline int cg_profile_begin(cg_profile_t *p, const char *name) {
  p->total = 0;
  p->why[0] = '\0';
  p->out[0] = '\0';
  snprintf(p->dir, sizeof p->dir, "/tmp/%.32s.XXXXXX", name);
  if (mkdtemp(p->dir) != NULL)
    return 0;
  snprintf(p->why, sizeof p->why, "mkdtemp %s: %s", p->dir, strerror(errno));
  p->dir[0] = '\0';
  return -1;
}

/* Runs argv with env as cg_run does, its profile(s) in p's directory.
 * Returns 0, or -1 with the cause in p->why. */
static inline int cg_profile_run(cg_profile_t *p, const char *const argv[],
                                 const char *const env[], int per_process) {
  if (p->dir[0] == '\0')
    return -1;
  snprintf(p->out, sizeof p->out, "%s/%s", p->dir,
           per_process ? "cg.%p" : "cg.out");
  return cg_run(argv, env, p->out, &p->total, p->why, sizeof p->why);
}

/* Removes p's directory and what is in it (the profiles, and whatever
 * else the run left there). */
static inline void cg_profile_end(cg_profile_t *p) {
  DIR *d = p->dir[0] != '\0' ? opendir(p->dir) : NULL;
  struct dirent *e;
  char path[400];
  while (d != NULL && (e = readdir(d)) != NULL)
    if (e->d_name[0] != '.') {
      snprintf(path, sizeof path, "%s/%.255s", p->dir, e->d_name);
      unlink(path);
    }
  if (d != NULL) {
    closedir(d);
    rmdir(p->dir);
  }
  p->dir[0] = '\0';
}

static inline long long cg_calls(const char *path, const char *prefix);

/* Runs argv with env under callgrind (cg_run) in a directory of its own
 * under /tmp named after name, and counts the calls of fns[0..n) (name
 * prefixes, as cg_calls) into calls[], the instructions into *total;
 * removes its profile. Returns 0, or -1 with the cause in why. */
static inline int cg_run_calls(const char *name, const char *const argv[],
                               const char *const env[], const char *const fns[],
                               long long calls[], size_t n,
                               unsigned long long *total, char *why,
                               size_t whylen) {
  cg_profile_t p;
  int rc = cg_profile_begin(&p, name);
  if (rc == 0)
    rc = cg_profile_run(&p, argv, env, 0);
  for (size_t i = 0; i < n; i++)
    calls[i] = rc == 0 ? cg_calls(p.out, fns[i]) : -1;
  cg_profile_end(&p);
  *total = p.total;
  snprintf(why, whylen, "%s", p.why);
  return rc;
}

/* The calls a callgrind profile (cg_run's out) counts to the functions
 * whose names start with prefix (a static function may be renamed
 * name.constprop.0 and the like), from every caller; -1 if the file
 * cannot be read. Names are compressed in the file: the first mention of
 * an id carries its name, later ones the id alone. */
static inline long long cg_calls(const char *path, const char *prefix) {
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return -1;
  enum { MAX_IDS = 32 };
  long ids[MAX_IDS];
  int nids = 0, callee = 0;
  long long sum = 0;
  char line[4096];
  size_t plen = strlen(prefix);
  while (fgets(line, sizeof line, f) != NULL) {
    const char *rest = NULL;
    int is_callee = strncmp(line, "cfn=(", 5) == 0;
    if (is_callee)
      rest = line + 5;
    else if (strncmp(line, "fn=(", 4) == 0)
      rest = line + 4;
    if (rest != NULL) {
      char *end;
      long id = strtol(rest, &end, 10);
      if (*end == ')' && end[1] == ' ' && strncmp(end + 2, prefix, plen) == 0 &&
          nids < MAX_IDS)
        ids[nids++] = id;
      if (is_callee) {
        callee = 0;
        for (int i = 0; i < nids; i++)
          callee |= ids[i] == id;
      }
      continue;
    }
    long long n;
    if (strncmp(line, "calls=", 6) == 0) {
      if (callee && sscanf(line + 6, "%lld", &n) == 1)
        sum += n;
      callee = 0;
    }
  }
  fclose(f);
  return sum;
}

#endif
