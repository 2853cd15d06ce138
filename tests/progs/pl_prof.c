/*
 * pl_prof.c - a program with known allocation sites for the heap
 * profile's tests (tests/integration/test_profile.c), run under the
 * preload with MEMSTATS_PROFILE_RATE=1. Built with -rdynamic, so that it
 * can tell the test where its functions are (dladdr1: start and size).
 *
 *   pl_prof sites    f_big holds 3 * N blocks of SIZE bytes, f_small N,
 *                    f_freed allocated N and freed them all
 *   pl_prof threads  four threads each hold N blocks from f_thread
 *   pl_prof deep     f_deep recurses 300 deep, then allocates
 *   pl_prof fork     f_parent holds N blocks; the child then holds N from
 *                    f_child, allocates (and frees) now and then until its
 *                    agent has made its socket (a fork child's agent
 *                    starts at an allocation of its own a while after the
 *                    fork), and says its pid
 *   pl_prof full     f_many allocates blocks of 64 different sizes
 *   pl_prof wide     f_wide allocates 100 sizes at each of 200 recursion
 *                    depths: 20,000 buckets, a profile of several frames
 *   pl_prof realloc  f_realloc_kept holds N blocks whose realloc to
 *                    SIZE_MAX / 4 bytes failed (ENOMEM: each block is kept,
 *                    and is still its sample), f_realloc_moved holds N
 *                    blocks it grew by realloc to 64 KiB
 *   pl_prof signals  a timer signal's handler allocates and frees while
 *                    the main thread does (and is sampled), 1,000 times
 *   pl_prof large    for the default rate: f_large_a holds 1,200 blocks of
 *                    1 MiB, f_large_b 400, f_large_freed allocated 400 and
 *                    freed each at once; prints "truth FN COUNT BYTES" (the
 *                    blocks' usable sizes) for each. The blocks are glibc's
 *                    own mmaps, touched only in their first bytes: 1.6 GB
 *                    of address space, a few MB resident
 *   pl_prof small    for the default rate, small blocks: f_churn_32
 *                    allocates and frees 33,000,000 blocks of 32 bytes one
 *                    at a time, f_churn_mixed 4,000,000 of 16 sizes from 64
 *                    to 1024 bytes, f_hold keeps 20,000 blocks of 64 KiB
 *                    (1.3 GB of address space, their bodies never touched:
 *                    some 80 MB resident); prints "truth FN COUNT BYTES"
 *                    (usable sizes) for each
 *
 * Each prints "fn NAME START END" for its functions, then "ready PID"
 * (every process that stays), and waits for stdin to close.
 */
#include <errno.h>
#include <dlfcn.h>
#include <link.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "say.h"

#define N 16
#define SIZE 1000

/* Exported and volatile: the compiler may not drop a block it keeps. */
extern void *volatile g_keep[4096];
void *volatile g_keep[4096];
static int g_nkeep;

static void keep(void *p) {
  memset(p, 1, 16);
  g_keep[g_nkeep++] = p;
}

extern void *volatile g_wide[20000];
void *volatile g_wide[20000];
static int g_nwide;

static void keep_wide(void *p) {
  g_wide[g_nwide++] = p;
}

/* gcc could clone a function for a constant argument (a new symbol):
 * noclone, which clang does not know (nor does it clone). */
#if defined(__clang__)
#define NOINLINE __attribute__((noinline, used))
#else
#define NOINLINE __attribute__((noinline, noclone, used))
#endif

/* Exported (-rdynamic), so declared. */
void f_big(void);
void f_small(void);
void f_freed(void);
void f_thread(void);
int f_deep(int n);
void f_parent(void);
void f_child(void);
void f_many(void);
int f_wide(int n, int at);
void f_signal(void);
void f_large_a(void);
void f_large_b(void);
void f_large_freed(void);
void f_churn_32(void);
void f_churn_mixed(void);
void f_hold(void);
void f_realloc_kept(void);
void f_realloc_moved(void);

NOINLINE void f_big(void) {
  for (int i = 0; i < 3 * N; i++)
    keep(malloc(SIZE));
  __asm__ volatile("");
}

NOINLINE void f_small(void) {
  for (int i = 0; i < N; i++)
    keep(malloc(SIZE));
  __asm__ volatile("");
}

NOINLINE void f_freed(void) {
  /* Volatile: clang -O2 deletes a malloc/free pair it can see whole. */
  void *volatile p[N];
  for (int i = 0; i < N; i++) {
    p[i] = malloc(SIZE);
    memset(p[i], 2, 16);
  }
  for (int i = 0; i < N; i++)
    free(p[i]);
  __asm__ volatile("");
}

NOINLINE void f_realloc_kept(void) {
  for (int i = 0; i < N; i++) {
    void *p = malloc(SIZE);
    keep(p);
    errno = 0;
    /* Volatile: the compiler may not assume what realloc returns. */
    size_t huge = SIZE_MAX / 4;
    void *volatile q = realloc(p, *(volatile size_t *)&huge);
    if (q != NULL || errno != ENOMEM) {
      prog_say("realloc of %zu bytes did not fail with ENOMEM", huge);
      exit(1);
    }
  }
  __asm__ volatile("");
}

NOINLINE void f_realloc_moved(void) {
  for (int i = 0; i < N; i++) {
    void *p = malloc(SIZE);
    memset(p, 3, 16);
    keep(realloc(p, 65536));
  }
  __asm__ volatile("");
}

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

NOINLINE void f_thread(void) {
  for (int i = 0; i < N; i++) {
    void *p = malloc(SIZE);
    pthread_mutex_lock(&g_lock);
    keep(p);
    pthread_mutex_unlock(&g_lock);
  }
  __asm__ volatile("");
}

static void *thread_main(void *arg) {
  (void)arg;
  f_thread();
  return NULL;
}

NOINLINE int f_deep(int n) {
  if (n == 0) {
    keep(malloc(SIZE));
    return 1;
  }
  int r = f_deep(n - 1);
  __asm__ volatile("" ::"r"(r));
  return r + 1;
}

NOINLINE void f_parent(void) {
  for (int i = 0; i < N; i++)
    keep(malloc(SIZE));
  __asm__ volatile("");
}

NOINLINE void f_child(void) {
  for (int i = 0; i < N; i++)
    keep(malloc(SIZE));
  __asm__ volatile("");
}

NOINLINE void f_many(void) {
  for (int i = 0; i < 64; i++)
    keep(malloc(64 + 16 * (size_t)i));
  __asm__ volatile("");
}

/* Allocates 100 blocks of different sizes at depth `at` of a recursion. */
NOINLINE int f_wide(int n, int at) {
  if (n == at) {
    for (int i = 0; i < 100; i++)
      keep_wide(malloc(16 + 16 * (size_t)i));
    return 1;
  }
  int r = f_wide(n + 1, at);
  __asm__ volatile("" ::"r"(r));
  return r + 1;
}

/* A signal handler's allocations: malloc and free are not
 * async-signal-safe by POSIX, but programs do it, and glibc's allows it
 * where the interrupted code is not inside malloc itself; the preload's
 * own paths must survive it whatever the handler interrupts of theirs. */
static volatile sig_atomic_t g_signals;

NOINLINE void f_signal(void) {
  void *volatile p = malloc(64);
  free(p);
}

static void on_alarm(int sig) {
  (void)sig;
  f_signal();
  g_signals++;
}

/* The large mode's sites (their own arrays: 1,600 blocks). */
#define LARGE (1u << 20)
extern void *volatile g_large[1600];
void *volatile g_large[1600];
static int g_nlarge;

static unsigned long long g_truth_count, g_truth_bytes;

static void keep_large(void *p) {
  memset(p, 3, 16);
  g_truth_count++;
  g_truth_bytes += malloc_usable_size(p);
  g_large[g_nlarge++] = p;
}

NOINLINE void f_large_a(void) {
  for (int i = 0; i < 1200; i++)
    keep_large(malloc(LARGE));
  __asm__ volatile("");
}

NOINLINE void f_large_b(void) {
  for (int i = 0; i < 400; i++)
    keep_large(malloc(LARGE));
  __asm__ volatile("");
}

NOINLINE void f_large_freed(void) {
  for (int i = 0; i < 400; i++) {
    void *volatile p = malloc(LARGE);
    memset(p, 4, 16);
    g_truth_count++;
    g_truth_bytes += malloc_usable_size(p);
    free(p);
  }
  __asm__ volatile("");
}

/* The small mode's sites. Each block's usable size is asked for (glibc
 * may hand out a chunk a little larger than the request). */
#define CHURN_32 33000000
#define CHURN_MIXED 4000000
#define HOLD 20000
#define HOLD_SIZE (64u << 10)
extern void *volatile g_hold[HOLD];
void *volatile g_hold[HOLD];

NOINLINE void f_churn_32(void) {
  for (int i = 0; i < CHURN_32; i++) {
    void *volatile p = malloc(32);
    g_truth_count++;
    g_truth_bytes += malloc_usable_size(p);
    free(p);
  }
  __asm__ volatile("");
}

NOINLINE void f_churn_mixed(void) {
  for (int i = 0; i < CHURN_MIXED; i++) {
    void *volatile p = malloc(64 + 64 * (size_t)(i % 16));
    g_truth_count++;
    g_truth_bytes += malloc_usable_size(p);
    free(p);
  }
  __asm__ volatile("");
}

NOINLINE void f_hold(void) {
  for (int i = 0; i < HOLD; i++) {
    void *p = malloc(HOLD_SIZE);
    g_truth_count++;
    g_truth_bytes += malloc_usable_size(p);
    g_hold[i] = p;
  }
  __asm__ volatile("");
}

/* Runs one site (large or small mode) and says its truth. */
static void truth_site(const char *name, void (*fn)(void)) {
  g_truth_count = g_truth_bytes = 0;
  fn();
  prog_say("truth %s %llu %llu", name, g_truth_count, g_truth_bytes);
}

static void say_fn(const char *name, void *fn) {
  Dl_info info;
  const ElfW(Sym) *sym = NULL;
  if (dladdr1(fn, &info, (void **)&sym, RTLD_DL_SYMENT) && sym != NULL)
    prog_say("fn %s %lx %lx", name, (unsigned long)(uintptr_t)fn,
             (unsigned long)((uintptr_t)fn + sym->st_size));
}

/* Allocates every 10 ms (10 s at most) until $MEMSTATS_DIR/<pid>.sock
 * exists. */
static void await_own_socket(void) {
  char sock[512];
  const char *dir = getenv("MEMSTATS_DIR");
  snprintf(sock, sizeof sock, "%s/%d.sock", dir ? dir : ".", (int)getpid());
  for (int i = 0; i < 1000 && access(sock, F_OK) != 0; i++) {
    char *volatile p = malloc(16);
    free(p);
    usleep(10000);
  }
}

static void wait_stdin(void) {
  char c;
  while (read(0, &c, 1) > 0)
    ;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "sites";
  say_fn("f_big", (void *)f_big);
  say_fn("f_small", (void *)f_small);
  say_fn("f_freed", (void *)f_freed);
  say_fn("f_thread", (void *)f_thread);
  say_fn("f_deep", (void *)f_deep);
  say_fn("f_parent", (void *)f_parent);
  say_fn("f_child", (void *)f_child);
  say_fn("f_many", (void *)f_many);
  say_fn("f_wide", (void *)f_wide);
  say_fn("f_signal", (void *)f_signal);
  say_fn("f_realloc_kept", (void *)f_realloc_kept);
  say_fn("f_realloc_moved", (void *)f_realloc_moved);
  if (strcmp(mode, "sites") == 0) {
    f_big();
    f_small();
    f_freed();
  } else if (strcmp(mode, "threads") == 0) {
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
      pthread_create(&t[i], NULL, thread_main, NULL);
    for (int i = 0; i < 4; i++)
      pthread_join(t[i], NULL);
  } else if (strcmp(mode, "realloc") == 0) {
    f_realloc_kept();
    f_realloc_moved();
  } else if (strcmp(mode, "deep") == 0) {
    f_deep(300);
  } else if (strcmp(mode, "fork") == 0) {
    f_parent();
    pid_t pid = fork();
    if (pid == 0) {
      f_child();
      await_own_socket();
      prog_say("ready %d", (int)getpid());
      wait_stdin();
      _exit(0);
    }
    prog_say("ready %d", (int)getpid());
    wait_stdin();
    waitpid(pid, NULL, 0);
    return 0;
  } else if (strcmp(mode, "full") == 0) {
    f_many();
  } else if (strcmp(mode, "wide") == 0) {
    for (int at = 0; at < 200; at++)
      f_wide(0, at);
  } else if (strcmp(mode, "large") == 0) {
    /* The freed site last: glibc raises its mmap threshold when an
     * mmapped block is freed, and the held sites' blocks stay mmaps. */
    truth_site("f_large_a", f_large_a);
    truth_site("f_large_b", f_large_b);
    truth_site("f_large_freed", f_large_freed);
  } else if (strcmp(mode, "small") == 0) {
    truth_site("f_hold", f_hold);
    truth_site("f_churn_32", f_churn_32);
    truth_site("f_churn_mixed", f_churn_mixed);
  } else if (strcmp(mode, "signals") == 0) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGPROF, &sa, NULL);
    struct itimerval it = {{0, 200}, {0, 200}};
    setitimer(ITIMER_PROF, &it, NULL);
    /* Until the handler has run 1,000 times (the timer counts this
     * process's CPU time, which this loop spends). */
    while (g_signals < 1000) {
      for (int i = 0; i < 1000; i++) {
        void *volatile p = malloc(32 + (size_t)(i % 100) * 8);
        free(p);
      }
    }
    struct itimerval stop_it = {{0, 0}, {0, 0}};
    setitimer(ITIMER_PROF, &stop_it, NULL);
    f_small();
    prog_say("signals %d", (int)g_signals);
  }
  prog_say("ready %d", (int)getpid());
  wait_stdin();
  return 0;
}
