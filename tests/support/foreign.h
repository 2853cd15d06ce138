/*
 * foreign.h - test helper: another user's libmemstats process on the
 * machine, as a shared machine has them. As root, foreign_start() runs
 * tests/progs/mt_target as `nobody` (setpriv to its uid and gid, no
 * supplementary groups, killed when the test dies) with neither
 * MEMSTATS_DIR nor XDG_RUNTIME_DIR, so that its agent serves from
 * nobody's default directory, /tmp/memtop-<uid> (65534 on Debian): the
 * directory root's discovery lists when it names no MEMSTATS_DIR. A test
 * whose own MEMSTATS_DIR is set must never see it. Header only, like the
 * other helpers here; no cmocka, so that a group setup can use it.
 */
#ifndef MS_TESTS_SUPPORT_FOREIGN_H
#define MS_TESTS_SUPPORT_FOREIGN_H

#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "support/target_proc.h"

typedef struct foreign_s {
  target_t t;    /* t.pid > 0 while it runs */
  uid_t uid;     /* nobody's */
  char sock[96]; /* its socket, /tmp/memtop-<uid>/<pid>.sock */
  char why[160]; /* why it was not started (not root, no nobody...) */
} foreign_t;

/* Starts build/progs/mt_target as nobody and waits for its "ready PID"
 * and its socket. Returns 0, or -1 with the reason in f->why (nothing is
 * left running then). */
static inline int foreign_start(foreign_t *f, const char *build) {
  char prog[1200], ids[64], line[64];
  const struct passwd *pw;
  struct stat st;

  memset(f, 0, sizeof *f);
  if (geteuid() != 0) {
    snprintf(f->why, sizeof f->why,
             "not root: another user's process "
             "needs setpriv (CI runs as root)");
    return -1;
  }
  pw = getpwnam("nobody");
  if (pw == NULL) {
    snprintf(f->why, sizeof f->why, "there is no user `nobody`");
    return -1;
  }
  f->uid = pw->pw_uid;
  snprintf(prog, sizeof prog, "%s/progs/mt_target", build);
  snprintf(ids, sizeof ids, "%u", (unsigned)pw->pw_uid);
  char gid[32];
  snprintf(gid, sizeof gid, "%u", (unsigned)pw->pw_gid);
  const char *argv[] = {
      "setpriv",        "--reuid",     ids,    "--regid", gid,
      "--clear-groups", "--pdeathsig", "KILL", prog,      NULL};
  static const char *const env[] = {"MEMSTATS_DIR", "XDG_RUNTIME_DIR",
                                    "MEMSTATS_AGENT", NULL};
  if (target_launch(&f->t, argv, NULL, env, NULL, NULL, 0) != 0) {
    snprintf(f->why, sizeof f->why, "cannot start setpriv");
    return -1;
  }
  if (target_read_line(f->t.out, line, sizeof line) != 0 ||
      strncmp(line, "ready ", 6) != 0) {
    target_kill(&f->t);
    f->t.pid = 0;
    snprintf(f->why, sizeof f->why,
             "mt_target as nobody did not start (said '%.60s'): is "
             "/tmp/memtop-%u someone else's?",
             line, (unsigned)pw->pw_uid);
    return -1;
  }
  snprintf(f->sock, sizeof f->sock, "/tmp/memtop-%u/%d.sock",
           (unsigned)pw->pw_uid, (int)f->t.pid);
  /* ms_agent_start() has returned before "ready": the socket is there. */
  if (lstat(f->sock, &st) != 0 || !S_ISSOCK(st.st_mode)) {
    target_kill(&f->t);
    f->t.pid = 0;
    snprintf(f->why, sizeof f->why, "nobody's agent made no socket at %s",
             f->sock);
    return -1;
  }
  return 0;
}

/* Ends it, and removes its socket. Killed, not told to end by closing its
 * stdin: a test's forked children (fake agents, killed by the failure
 * that ended the test) may hold that pipe open. */
static inline void foreign_stop(foreign_t *f) {
  if (f->t.pid <= 0)
    return;
  target_kill(&f->t);
  unlink(f->sock);
  f->t.pid = 0;
}

#endif
