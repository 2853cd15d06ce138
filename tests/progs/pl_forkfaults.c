/*
 * pl_forkfaults.c - the page faults of a fork-heavy loop, as a shell's
 * subshells or make's children make them (issue 18 item 12): the parent
 * allocates and frees a block, forks, and waits; each child allocates and
 * frees a block and ends with exit(), which runs every library's
 * destructors. Run bare and under the preload by test_start_cost, which
 * compares the two: page faults are counted by the kernel, the same on a
 * loaded machine as on a quiet one.
 *
 * Every page the child writes after the fork is a copy-on-write fault,
 * every page of code it runs that the parent had mapped is a fault too (a
 * fork does not copy the page table entries of a file's read-only
 * mappings), and every page the parent writes between two forks is one
 * in the parent.
 *
 * With the argument 1, one child and no output: test_start_cost counts
 * under callgrind what that child runs. Else the output: fork.children=N,
 * fork.child_faults (the children's minor faults summed), fork.parent_faults
 * (the parent's over the same loop), and fork.cpu_ns, the CPU time of the
 * loop, its children's included. An argument n=N runs N children instead
 * of 40 (bench_preload times the loop). With the argument thread, the loop
 * runs beside an idle thread of the program's own (blocked in pause()):
 * what glibc's fork costs a process that has ever made a thread (its
 * multi-threaded path: every arena and stdio lock taken and reset, the
 * thread's stack reclaimed in the child), the floor of a preloaded
 * program whose agent thread runs.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "say.h"

#define CHILDREN 40

static int one_child(void) {
  pid_t c = fork();
  if (c < 0)
    return -1;
  if (c == 0) {
    void *volatile p = malloc(64);
    free(p);
    exit(0);
  }
  int st;
  if (waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
    return -1;
  void *volatile p = malloc(64);
  free(p);
  return 0;
}

static long long cpu_ns(const struct rusage *r) {
  return (r->ru_utime.tv_sec + r->ru_stime.tv_sec) * 1000000000ll +
         (r->ru_utime.tv_usec + r->ru_stime.tv_usec) * 1000ll;
}

static void *idle(void *arg) {
  (void)arg;
  for (;;)
    pause();
  return NULL;
}

int main(int argc, char **argv) {
  void *volatile p = malloc(100);
  free(p);
  /* `pl_forkfaults 1`: one child and nothing else (test_start_cost counts
   * what it runs under callgrind, from the fork on). */
  if (argc > 1 && strcmp(argv[1], "1") == 0)
    return one_child() != 0;
  int children = CHILDREN, thread = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "thread") == 0)
      thread = 1;
    else if (strncmp(argv[i], "n=", 2) == 0 && atoi(argv[i] + 2) > 0)
      children = atoi(argv[i] + 2);
    else
      return 2;
  }
  pthread_t t;
  if (thread && pthread_create(&t, NULL, idle, NULL) != 0)
    return 1;
  /* The first fork maps what every later one finds mapped already. */
  for (int i = 0; i < 2; i++)
    if (one_child() != 0)
      return 1;
  struct rusage self0, kids0, self1, kids1;
  getrusage(RUSAGE_SELF, &self0);
  getrusage(RUSAGE_CHILDREN, &kids0);
  for (int i = 0; i < children; i++)
    if (one_child() != 0)
      return 1;
  getrusage(RUSAGE_SELF, &self1);
  getrusage(RUSAGE_CHILDREN, &kids1);
  prog_say("fork.children=%d", children);
  prog_say("fork.child_faults=%ld", kids1.ru_minflt - kids0.ru_minflt);
  prog_say("fork.parent_faults=%ld", self1.ru_minflt - self0.ru_minflt);
  prog_say("fork.cpu_ns=%lld",
           cpu_ns(&self1) - cpu_ns(&self0) + cpu_ns(&kids1) - cpu_ns(&kids0));
  return 0;
}
