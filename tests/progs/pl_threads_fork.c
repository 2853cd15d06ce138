/*
 * pl_threads_fork.c - threads, fork and exec under the preload.
 *
 * Phase "threads": NTHREADS threads each allocate NBLOCKS blocks and hand
 * them to the next thread, which frees them; each thread also keeps a block
 * in a pthread key whose destructor frees it at thread exit (after the
 * engine's own thread-exit destructor may have run). Between the snapshot
 * taken once every thread is running and the one taken after joining them:
 * NTHREADS * (NBLOCKS + 1) mallocs, as many frees, nothing live.
 *
 * Phase "fork": the child's first snapshot equals the parent's last one
 * before fork(), and its own NCHILD mallocs add to it.
 *
 * Phase "exec": with allocating threads running, fork and exec this program
 * again ("exec-child"); the new image is under the preload too (it
 * inherited LD_PRELOAD) and counts its own NCHILD mallocs.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pl_snap.h"

#define NTHREADS 4
#define NBLOCKS 1000
#define NCHILD 500

static void *handoff[NTHREADS][NBLOCKS];
static pthread_barrier_t started, made;
static pthread_key_t key;
static void *volatile escape;
static ms_snapshot_t s0, s1;

static void *worker(void *arg) {
  int me = (int)(long)arg;
  pthread_barrier_wait(&started);
  pthread_setspecific(key, malloc(64)); /* freed by the key destructor */
  for (int i = 0; i < NBLOCKS; i++)
    handoff[me][i] = malloc((size_t)(16 + (i * 13 + me) % 500));
  pthread_barrier_wait(&made);
  int other = (me + 1) % NTHREADS; /* free another thread's blocks */
  for (int i = 0; i < NBLOCKS; i++)
    free(handoff[other][i]);
  return NULL;
}

static void phase_threads(void) {
  pthread_t t[NTHREADS];
  pthread_key_create(&key, free);
  pthread_barrier_init(&started, NULL, NTHREADS + 1);
  pthread_barrier_init(&made, NULL, NTHREADS);
  for (int i = 0; i < NTHREADS; i++)
    pthread_create(&t[i], NULL, worker, (void *)(long)i);
  pl_snap(&s0);
  pthread_barrier_wait(&started);
  for (int i = 0; i < NTHREADS; i++)
    pthread_join(t[i], NULL);
  pl_snap(&s1);
  pl_say_delta("threads", &s0, &s1);
}

static void child_pattern(const char *tag, const ms_snapshot_t *base) {
  static void *blocks[NCHILD];
  static ms_snapshot_t c;
  for (int i = 0; i < NCHILD; i++)
    blocks[i] = malloc((size_t)(8 + i % 300));
  pl_snap(&c);
  pl_say_delta(tag, base, &c);
  for (int i = 0; i < NCHILD; i++)
    free(blocks[i]);
}

static void phase_fork(void) {
  static ms_snapshot_t before, in_child;
  pl_snap(&before);
  pid_t pid = fork();
  if (pid == 0) {
    pl_snap(&in_child);
    pl_say_delta("fork.at_fork", &before, &in_child);
    child_pattern("fork.child", &in_child);
    _exit(0);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  pl_say("fork.status=%d", st);
}

static volatile int stop;

static void *churn(void *arg) {
  (void)arg;
  while (!stop) {
    void *p = malloc(100);
    escape = p;
    free(p);
  }
  return NULL;
}

static void phase_exec(void) {
  pthread_t t[2];
  for (int i = 0; i < 2; i++)
    pthread_create(&t[i], NULL, churn, NULL);
  pid_t pid = fork();
  if (pid == 0) {
    execl("/proc/self/exe", "pl_threads_fork", "exec-child", (char *)NULL);
    _exit(127);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  stop = 1;
  for (int i = 0; i < 2; i++)
    pthread_join(t[i], NULL);
  pl_say("exec.status=%d", st);
}

int main(int argc, char **argv) {
  int have = pl_snap_init();
  if (argc > 1 && strcmp(argv[1], "exec-child") == 0) {
    static ms_snapshot_t base;
    pl_say("exec.preload=%d", have);
    pl_snap(&base);
    pl_snap(&base);
    pl_say("exec.mallocs_positive=%d", base.mallocs > 0);
    child_pattern("exec.child", &base);
    return 0;
  }
  pl_say("preload=%d", have);
  pl_snap(&s0); /* warm-up */
  phase_threads();
  phase_fork();
  phase_exec();
  return 0;
}
