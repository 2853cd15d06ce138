/*
 * target.h - test helper: a target program under test's control (one of
 * tests/progs with the agent linked in, or any program under the
 * preload: target_proc.h starts and stops it), its socket directory, and
 * raw connections to it. Include after <cmocka.h>; header only, like the
 * other helpers here.
 */
#ifndef MS_TESTS_SUPPORT_TARGET_H
#define MS_TESTS_SUPPORT_TARGET_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client/client.h"
#include "support/target_proc.h"

/* target_launch, asserting that the program started. */
static inline void target_exec(target_t *t, const char *const argv[],
                               const char *dir, const char *const *env,
                               const char *const *env2, const int *keep,
                               int nkeep) {
  assert_int_equal(target_launch(t, argv, dir, env, env2, keep, nkeep), 0);
}

/* Starts prog (no arguments) as target_exec does, and waits for its
 * first line, which it leaves in line. */
static inline void target_spawn(target_t *t, const char *prog, const char *dir,
                                const char *const *env, const char *const *env2,
                                const int *keep, int nkeep, char *line,
                                size_t linelen) {
  const char *argv[] = {prog, NULL};
  target_exec(t, argv, dir, env, env2, keep, nkeep);
  assert_int_equal(target_read_line(t->out, line, linelen), 0);
}

/* Sends the target a command line and reads its one-line answer into
 * buf. */
static inline void target_ask(target_t *t, const char *cmd, char *buf,
                              size_t len) {
  assert_int_equal(write(t->in, cmd, strlen(cmd)), (ssize_t)strlen(cmd));
  assert_int_equal(target_read_line(t->out, buf, len), 0);
}

/* A plain connection to a socket path, reads timing out after 10 s.
 * Returns the fd or a negative errno. */
static inline int target_connect(const char *path) {
  struct sockaddr_un sa;
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -errno;
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    int e = errno;
    close(fd);
    return -e;
  }
  struct timeval tv = {10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

/* A fresh socket directory from the mkdtemp template tmpl (in dir, of
 * len bytes), made the process's MEMSTATS_DIR, with the agent's other
 * settings at their defaults. Returns 0 or -1. */
static inline int target_dir_setup(char *dir, size_t len, const char *tmpl) {
  snprintf(dir, len, "%s", tmpl);
  if (mkdtemp(dir) == NULL)
    return -1;
  setenv("MEMSTATS_DIR", dir, 1);
  unsetenv("MEMSTATS_AGENT");
  unsetenv("MEMSTATS_MIN_INTERVAL_MS");
  /* A target's socket made before its main() runs, as the tests connect
   * once it says it is ready (under the preload it is made 50 ms after
   * the start by default: test_start_cost checks that delay). */
  setenv("MEMSTATS_AGENT_DELAY_MS", "0", 1);
  signal(SIGPIPE, SIG_IGN);
  return 0;
}

/* Removes a directory and everything below it. */
static inline int target_dir_remove(const char *dir) {
  DIR *d = opendir(dir);
  if (d == NULL)
    return unlink(dir);
  struct dirent *e;
  char p[1024];
  while ((e = readdir(d)) != NULL) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
      continue;
    int n = snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    if (n < 0 || (size_t)n >= sizeof p)
      continue;
    struct stat st;
    if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
      target_dir_remove(p);
    else
      unlink(p);
  }
  closedir(d);
  return rmdir(dir);
}

#endif
