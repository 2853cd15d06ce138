/*
 * env.c - the library's one reader of the environment.
 *
 * In a setuid, setgid or file-capability program the environment comes
 * from whoever ran it, and the rights from the file: a variable that
 * names a file or a directory would have the library create or write it
 * with rights its invoker does not have (MEMSTATS_EXIT_REPORT=/etc/nologin,
 * MEMSTATS_DIR=/etc/cron.d made by root), and one that names a descriptor
 * (MEMSTATS_FINAL_FD) would send the program's figures wherever the
 * invoker pointed. The kernel says when a program runs so (AT_SECURE in
 * its auxiliary vector, what glibc's secure_getenv asks); the library then
 * reads every MEMSTATS_* variable and XDG_RUNTIME_DIR as unset and runs on
 * its defaults, so that no path through it can forget the rule: this is
 * the only place that calls getenv for them (tests/lint-layers.sh).
 *
 * MEMSTATS_DEBUG is one of those variables: under AT_SECURE it says one
 * thing only, once, on stderr (which the kernel's loader has made sure is
 * open): that the variables are ignored. Nothing else the library could
 * say (its socket's path, what failed) is told to an invoker who does not
 * have the program's rights.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "common/env.h"

int ms__env_secure(void) {
  /* 0: not asked yet, 1: no, 2: yes. getauxval reads the vector the
   * kernel gave at exec, which never changes. */
  static int cached;
  int v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
  if (v == 0) {
    v = getauxval(AT_SECURE) != 0 ? 2 : 1;
    __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
  }
  return v == 2;
}

/* Whether a secure program ignores name. */
static int ignored(const char *name) {
  return strncmp(name, "MEMSTATS_", 9) == 0 ||
         strcmp(name, "XDG_RUNTIME_DIR") == 0;
}

/* Under AT_SECURE with MEMSTATS_DEBUG=1: the one line, once. */
static void say_ignored(void) {
  static int said;
  if (__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
    return;
  const char *d = getenv("MEMSTATS_DEBUG");
  if (d == NULL || strcmp(d, "1") != 0)
    return;
  char buf[200];
  int n = snprintf(buf, sizeof buf,
                   "libmemstats[%d]: setuid, setgid or capability program "
                   "(AT_SECURE): every MEMSTATS_* variable (this one too) and "
                   "XDG_RUNTIME_DIR ignored\n",
                   (int)getpid());
  if (n > 0 && (size_t)n < sizeof buf) {
    ssize_t w = write(2, buf, (size_t)n);
    (void)w;
  }
}

const char *ms__env(const char *name) {
  if (ignored(name) && ms__env_secure()) {
    say_ignored();
    return NULL;
  }
  return getenv(name);
}

int ms__env_is_1(const char *name) {
  const char *v = ms__env(name);
  return v != NULL && strcmp(v, "1") == 0;
}
