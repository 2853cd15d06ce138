/*
 * at_alloc.c - a program started bare (never linked with libmemstats, nor
 * run under the preload) for memtop attach's tests: N threads (argv[1],
 * default 8) allocating and freeing all the time, each keeping a few
 * hundred blocks alive, and the main thread reading commands on stdin
 * (blocked in read(): an attach interrupts it inside a system call):
 *
 *   pause   the workers park; answers "paused" once all have
 *   resume  they go on; "resumed"
 *   info    "inuse N sys N count N": glibc's mallinfo2 read in-process
 *           (uordblks + hblkhd, arena + hblkhd) and the workers' rounds
 *   where   "malloc OBJECT": the file name of the object its GOT entry
 *           for malloc points into (libc.so.6, or libmemstats-preload.so
 *           while memtop attach --track has rewritten it)
 *   dlopen PATH  loads PATH (tests/progs/libatmod.c) and runs its
 *           at_mod_churn(100000): "churned N", N malloc/free pairs made
 *           through the module's own GOT
 *   sites   frees the blocks the last `sites` kept (made before an attach,
 *           or while detached, for the heap profile's test), then: at_big
 *           keeps 48 blocks of 1000 bytes, at_small 16, at_freed makes 16
 *           and frees them; "sites"
 *
 * Starts with "ready PID"; EOF ends it with status 0. Built without
 * libmemstats (tests/progs/progs.mk), and with -static as at_static where
 * the C library's archive is installed (without the dlopen command).
 */
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* gcc could clone a function for a constant argument (a new symbol):
 * noclone, which clang does not know (nor does it clone). */
#if defined(__clang__)
#define NOINLINE __attribute__((noinline, used))
#else
#define NOINLINE __attribute__((noinline, noclone, used))
#endif

#define SITE_N 16
#define SITE_SIZE 1000

/* The blocks `sites` keeps. Exported and volatile: the compiler may not
 * drop a block it keeps. */
extern void *volatile at_kept[4 * SITE_N];
void *volatile at_kept[4 * SITE_N];
static int at_nkept;

static void keep(void *p) {
  memset(p, 1, 16);
  at_kept[at_nkept++] = p;
}

/* The known call sites (external: named in the heap profile). */
void at_big(void);
void at_small(void);
void at_freed(void);

NOINLINE void at_big(void) {
  for (int i = 0; i < 3 * SITE_N; i++)
    keep(malloc(SITE_SIZE));
  __asm__ volatile("");
}

NOINLINE void at_small(void) {
  for (int i = 0; i < SITE_N; i++)
    keep(malloc(SITE_SIZE));
  __asm__ volatile("");
}

NOINLINE void at_freed(void) {
  /* Volatile: clang -O2 deletes a malloc/free pair it can see whole. */
  void *volatile p[SITE_N];
  for (int i = 0; i < SITE_N; i++) {
    p[i] = malloc(SITE_SIZE);
    memset(p[i], 2, 16);
  }
  for (int i = 0; i < SITE_N; i++)
    free(p[i]);
  __asm__ volatile("");
}

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER;
static int g_pause, g_parked;
static unsigned long g_count;

static void *worker(void *arg) {
  unsigned seed = (unsigned)(uintptr_t)arg * 2654435761u;
  void *keep[256] = {0};
  for (unsigned long i = 0;; i++) {
    seed = seed * 1103515245u + 12345u;
    unsigned k = (seed >> 8) % 256;
    free(keep[k]);
    keep[k] = malloc(16 + (seed >> 4) % 4000);
    if (keep[k])
      memset(keep[k], 1, 16);
    if (i % 1024 == 0) {
      pthread_mutex_lock(&g_lock);
      g_count++;
      if (g_pause) {
        g_parked++;
        pthread_cond_broadcast(&g_cond);
        while (g_pause)
          pthread_cond_wait(&g_cond, &g_lock);
        g_parked--;
      }
      pthread_mutex_unlock(&g_lock);
    }
  }
  return NULL;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 8;
  if (n < 0 || n > 64)
    n = 8;
  for (int i = 0; i < n; i++) {
    pthread_t t;
    if (pthread_create(&t, NULL, worker, (void *)(uintptr_t)(i + 1)) != 0)
      return 1;
  }
  printf("ready %d\n", (int)getpid());
  fflush(stdout);
  /* Static, not on the stack: memtop attach looks at the top of each
   * thread's stack for return addresses into the allocator, and a large
   * buffer there keeps stale ones from earlier calls. */
  static char line[4200];
  while (fgets(line, sizeof line, stdin)) {
    if (strncmp(line, "pause", 5) == 0) {
      pthread_mutex_lock(&g_lock);
      g_pause = 1;
      while (g_parked < n)
        pthread_cond_wait(&g_cond, &g_lock);
      pthread_mutex_unlock(&g_lock);
      printf("paused\n");
    } else if (strncmp(line, "resume", 6) == 0) {
      pthread_mutex_lock(&g_lock);
      g_pause = 0;
      pthread_cond_broadcast(&g_cond);
      pthread_mutex_unlock(&g_lock);
      printf("resumed\n");
    } else if (strncmp(line, "info", 4) == 0) {
      struct mallinfo2 m = mallinfo2();
      pthread_mutex_lock(&g_lock);
      unsigned long c = g_count;
      pthread_mutex_unlock(&g_lock);
      printf("inuse %zu sys %zu count %lu\n", m.uordblks + m.hblkhd,
             m.arena + m.hblkhd, c);
    } else if (strncmp(line, "where", 5) == 0) {
      /* Taking malloc's address loads its GOT entry (a PIE). */
      void *(*volatile fp)(size_t) = malloc;
      Dl_info d;
      const char *name = "?";
      if (dladdr(*(void **)&fp, &d) && d.dli_fname) {
        name = strrchr(d.dli_fname, '/');
        name = name ? name + 1 : d.dli_fname;
      }
      printf("malloc %s\n", name);
    }
    /* Not in at_static: dlopen in a static program draws the linker's
     * warning, and at_static's test never loads a module. */
#ifndef AT_STATIC
    else if (strncmp(line, "dlopen ", 7) == 0) {
      line[strcspn(line, "\n")] = '\0';
      void *h = dlopen(line + 7, RTLD_NOW);
      long (*churn)(long) = NULL;
      if (h)
        *(void **)&churn = dlsym(h, "at_mod_churn");
      printf("churned %ld\n", churn ? churn(100000) : -1L);
    }
#endif
    else if (strncmp(line, "sites", 5) == 0) {
      for (int i = 0; i < at_nkept; i++)
        free(at_kept[i]);
      at_nkept = 0;
      at_big();
      at_small();
      at_freed();
      printf("sites\n");
    } else
      printf("?\n");
    fflush(stdout);
  }
  return 0;
}
