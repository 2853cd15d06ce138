/*
 * bench_providers.c - what one sample of each provider costs in the target,
 * as a ratio against reading /proc/self/statm (the kernel's cheapest
 * memory figure) measured in the same run.
 *
 * Each allocator is loaded with dlopen (RTLD_GLOBAL, so the providers'
 * dlsym(RTLD_DEFAULT) finds it, as in a program linked with it), its heap
 * is given a known shape through its own entry points (100,000 blocks of
 * mixed small sizes, every other one freed, so free lists are long), and
 * the provider's sample() is timed directly: the registry's cadence is
 * what a snapshot normally pays, this is the cost behind it. A full
 * ms_snapshot_read() (cached samples) is timed too. Medians of many runs.
 * An allocator that cannot be dlopen()ed (jemalloc's initial-exec TLS
 * does not fit a running process) is measured in a copy of this program
 * started with it in LD_PRELOAD. Allocators that are not installed are
 * skipped, with a line saying so.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/procfs.h"
#include "compose/snapshot.h"
#include "providers/provider_int.h"

#define NBLOCKS 100000
static void *g_blocks[NBLOCKS];

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static double median(uint64_t *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_u64);
  return (double)v[n / 2];
}

#define RUNS 201
static uint64_t g_t[RUNS];

static double time_statm(void) {
  char buf[256];
  for (int i = 0; i < RUNS; i++) {
    uint64_t t0 = now_ns();
    ms__read_small_file("/proc/self/statm", buf, sizeof buf);
    g_t[i] = now_ns() - t0;
  }
  return median(g_t, RUNS);
}

static ms__pv_sample_t g_sample;

static double time_sample(const ms__provider_t *pv, int runs) {
  for (int i = 0; i < runs; i++) {
    memset(&g_sample, 0, sizeof g_sample);
    uint64_t t0 = now_ns();
    pv->sample(&g_sample, 0);
    g_t[i] = now_ns() - t0;
  }
  return median(g_t, runs);
}

/* Shapes a heap through an allocator's own malloc/free. */
static void shape(void *(*alloc)(size_t), void (*release)(void *)) {
  for (int i = 0; i < NBLOCKS; i++)
    g_blocks[i] = alloc(16 + (size_t)(i % 61) * 16);
  for (int i = 0; i < NBLOCKS; i += 2)
    if (release)
      release(g_blocks[i]);
}

static void report(const char *name, double ns, double statm) {
  printf("%-22s %10.2f us   %8.2fx statm\n", name, ns / 1000.0, ns / statm);
}

typedef struct {
  const char *lib;
  const ms__provider_t *pv;
  const char *alloc_sym, *free_sym, *init_sym;
} target_t;

/* Runs this program again with lib preloaded, measuring only target i. */
static void rerun_preloaded(const char *self, const char *lib, size_t i) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    char idx[16];
    snprintf(idx, sizeof idx, "%zu", i);
    setenv("LD_PRELOAD", lib, 1);
    execl(self, self, "--only", idx, (char *)NULL);
    _exit(127);
  }
  int status;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0)
    printf("%-22s skipped: could not run with LD_PRELOAD=%s\n", lib, lib);
}

int main(int argc, char **argv) {
  long only = argc == 3 && strcmp(argv[1], "--only") == 0
                  ? strtol(argv[2], NULL, 10)
                  : -1;
  double statm = time_statm();
  if (only < 0) {
    printf("provider sample cost (median of %d; %d blocks, half freed)\n", RUNS,
           NBLOCKS);
    report("/proc/self/statm", statm, statm);
  }

  /* glibc: this process's own malloc. */
  if (only < 0)
    shape(malloc, free);
  if (only < 0 && ms__provider_glibc.detect())
    report("glibc mallinfo2+mincore", time_sample(&ms__provider_glibc, 51),
           statm);

  static const target_t targets[] = {
      {"libjemalloc.so.2", &ms__provider_jemalloc, "malloc", "free", NULL},
      {"libtcmalloc.so.4", &ms__provider_tcmalloc, "tc_malloc", "tc_free",
       NULL},
      {"libmimalloc.so.2", &ms__provider_mimalloc, "mi_malloc", "mi_free",
       NULL},
      {"libgc.so.1", &ms__provider_boehm, "GC_malloc", NULL, "GC_init"},
  };
  for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++) {
    const target_t *t = &targets[i];
    if (only >= 0 && (size_t)only != i)
      continue;
    void *h = dlopen(t->lib, RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
      const char *err = dlerror();
      if (only < 0 && err && strstr(err, "static TLS"))
        rerun_preloaded(argv[0], t->lib, i);
      else
        printf("%-22s skipped: %s\n", t->pv->name, err ? err : t->lib);
      continue;
    }
    if (t->init_sym) {
      void (*init)(void) = (void (*)(void))dlsym(h, t->init_sym);
      if (init)
        init();
    }
    void *(*alloc)(size_t) = (void *(*)(size_t))dlsym(h, t->alloc_sym);
    void (*release)(void *) =
        t->free_sym ? (void (*)(void *))dlsym(h, t->free_sym) : NULL;
    if (!alloc || !t->pv->detect()) {
      printf("%-22s skipped: %s lacks its statistics API\n", t->pv->name,
             t->lib);
      continue;
    }
    shape(alloc, release);
    report(t->pv->name, time_sample(t->pv, RUNS), statm);
  }
  if (only >= 0)
    return 0;

  /* A whole snapshot, the providers' samples cached by their cadence. */
  static ms_snapshot_t s;
  ms_snapshot_read(&s, sizeof s);
  for (int i = 0; i < RUNS; i++) {
    uint64_t t0 = now_ns();
    ms_snapshot_read(&s, sizeof s);
    g_t[i] = now_ns() - t0;
  }
  report("ms_snapshot_read", median(g_t, RUNS), statm);
  return 0;
}
