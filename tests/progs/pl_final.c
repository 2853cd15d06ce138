/*
 * pl_final.c - a command for `memtop run` whose end matters: it waits a
 * little (so that memtop has polled it before it allocates), makes
 * PL_FINAL_BLOCKS allocations of 48 bytes that it keeps, and ends at once,
 * well inside memtop's poll interval. Only the final snapshot the library
 * sends at exit (src/agent/final_send.c) can show them.
 *
 *   pl_final          ends with exit status 0 (returns from main)
 *   pl_final kill     ends by SIGKILL: no final snapshot can be sent
 *   pl_final _exit    ends with _exit(4), which runs no exit handlers: the
 *                     preload's own _exit sends it
 *   pl_final handler  frees and mallocs blocks too large for glibc's
 *                     thread cache (so its arena lock is held most of the
 *                     time) until SIGTERM, whose handler calls _exit(7):
 *                     the final snapshot taken there must neither take
 *                     the allocator's locks nor wait for an update the
 *                     handler interrupted (it would hang)
 *   pl_final handler-exit
 *                     the same with exit(7) (not async-signal-safe, but
 *                     programs do it, and it works without us)
 *   pl_final vfork    a vfork() child calls _exit(0) at once, then the
 *                     program makes PL_FINAL_AFTER_VFORK more blocks and
 *                     returns from main: only the program sends one (the
 *                     child shares its memory and must not)
 *
 * tests/integration/test_memtop.c runs it. It is not linked with
 * -lmemstats: it runs under the preload only (tests/progs/progs.mk).
 */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PL_FINAL_BLOCKS 20000
#define PL_FINAL_AFTER_VFORK 5000

/* Kept where the compiler cannot see them go unused. */
static void *volatile blocks[PL_FINAL_BLOCKS];
static void *volatile after[PL_FINAL_AFTER_VFORK];

static int exit_in_handler; /* exit(7), else _exit(7) */

static void on_term(int sig) {
  (void)sig;
  if (exit_in_handler)
    exit(7);
  _exit(7);
}

static void *send_term(void *arg) {
  struct timespec ts = {0, 200 * 1000000L};
  nanosleep(&ts, NULL);
  pthread_kill(*(pthread_t *)arg, SIGTERM);
  return NULL;
}

/* Never returns: SIGTERM ends it from its handler. */
static void churn_until_term(void) {
  static pthread_t self;
  pthread_t t;
  void *volatile ring[16] = {0};
  self = pthread_self();
  signal(SIGTERM, on_term);
  if (pthread_create(&t, NULL, send_term, &self) != 0)
    _exit(1);
  for (unsigned i = 0;; i++) {
    free(ring[i % 16]);
    ring[i % 16] = malloc(2000 + (i % 7) * 1000);
  }
}

int main(int argc, char **argv) {
  const char *how = argc > 1 ? argv[1] : "";
  struct timespec ts = {0, 300 * 1000000L};

  /* The ending without a final snapshot falls back to memtop's last poll:
   * leave room for many polls at -d 0.1, even on a loaded machine. */
  if (strcmp(how, "kill") == 0)
    ts.tv_sec = 2;
  nanosleep(&ts, NULL);
  for (int i = 0; i < PL_FINAL_BLOCKS; i++)
    blocks[i] = malloc(48);
  if (strcmp(how, "kill") == 0)
    raise(SIGKILL);
  if (strcmp(how, "_exit") == 0)
    _exit(4);
  if (strcmp(how, "handler") == 0)
    churn_until_term();
  if (strcmp(how, "handler-exit") == 0) {
    exit_in_handler = 1;
    churn_until_term();
  }
  if (strcmp(how, "vfork") == 0) {
    pid_t pid = vfork();
    if (pid == 0)
      _exit(0);
    if (pid < 0 || waitpid(pid, NULL, 0) != pid)
      return 1;
    /* After the child: a final snapshot of the program has these too. */
    for (int i = 0; i < PL_FINAL_AFTER_VFORK; i++)
      after[i] = malloc(48);
  }
  return 0;
}
