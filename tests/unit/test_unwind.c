/*
 * test_unwind.c - the sampler's cached CFI unwinder (src/profile/cfi.c)
 * against libgcc's (glibc's backtrace()), on many stacks: this file's own
 * frames (no frame pointers), a shared library's built without and with
 * frame pointers (tests/progs/libuw.c), C++ frames in a shared library
 * (tests/progs/libuw_cxx.cc), on the main thread and on another, each
 * stack unwound cold (rules not yet kept) and warm. Every stack must be
 * libgcc's, frame for frame, or given up (-1) where the unwinder says it
 * gives up: in a signal handler it must. And a warm capture of a 20-frame
 * stack costs at most 2,000 instructions, counted by callgrind (a count,
 * not a timing): this binary runs itself with --loop N under valgrind.
 */
#include <dlfcn.h>
#include <execinfo.h>
#include <link.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "profile/profile.h"
#include "support/callgrind.h"
#include "support/host.h"

#define MAXF 256

typedef void (*uw_cb)(void *arg);
typedef int (*recurse_fn)(int depth, uw_cb cb, void *arg);

typedef struct check_s {
  int calls, same, gaveup, mismatched;
  int min_frames;
  char why[256];
} check_t;

/* At the bottom of a stack: the fast unwinder and backtrace() from the
 * same frame. Their first entries are their own return addresses here
 * (different call sites), so the stacks are compared from the caller on;
 * a sanitizer's interceptor may add a frame of its own to backtrace()'s
 * (asan builds), so its list is aligned on the fast one's second entry
 * among its first three. */
__attribute__((noinline)) static void check_here(void *arg) {
  check_t *c = arg;
  uintptr_t fast[MAXF];
  void *slow[MAXF];
  int nf = ms__prof_cfi_unwind(fast, MAXF);
  int ns = backtrace(slow, MAXF);
  __asm__ volatile("" ::: "memory");
  c->calls++;
  if (nf < 0) {
    c->gaveup++;
    return;
  }
  int j = 1;
  while (j < 3 && j < ns && nf > 1 && (uintptr_t)slow[j] != fast[1])
    j++;
  int ok = nf > 1 && j < ns && ns - j == nf - 1;
  for (int i = 1; ok && i < nf; i++)
    ok = fast[i] == (uintptr_t)slow[j + i - 1];
  if (ok) {
    c->same++;
    if (c->min_frames == 0 || nf < c->min_frames)
      c->min_frames = nf;
    return;
  }
  if (c->mismatched++ == 0) {
    int k = 0;
    k += snprintf(c->why + k, sizeof c->why - (size_t)k, "fast %d:", nf);
    for (int i = 0; i < nf && i < 6 && k < 120; i++)
      k += snprintf(c->why + k, sizeof c->why - (size_t)k, " %lx",
                    (unsigned long)fast[i]);
    k += snprintf(c->why + k, sizeof c->why - (size_t)k, " / slow %d:", ns);
    for (int i = 0; i < ns && i < 6 && k < 240; i++)
      k += snprintf(c->why + k, sizeof c->why - (size_t)k, " %lx",
                    (unsigned long)(uintptr_t)slow[i]);
  }
}

/* This file's own frames (the build's flags: -O2, no frame pointers). */
static volatile int g_sink;
__attribute__((noinline)) static int own(int depth, check_t *c) {
  if (depth <= 0) {
    check_here(c);
    return 0;
  }
  volatile char pad[64 + (depth % 3) * 200];
  pad[0] = (char)depth;
  int r = own(depth - 1, c) + pad[0];
  g_sink = r;
  return r;
}

static recurse_fn load(const char *lib, const char *sym) {
  char build[1024], path[1200];
  if (host_build_dir(build, sizeof build) != 0)
    fail_msg("no build directory");
  snprintf(path, sizeof path, "%s/progs/%s", build, lib);
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (h == NULL)
    fail_msg("dlopen %s: %s", path, dlerror());
  recurse_fn f = (recurse_fn)(uintptr_t)dlsym(h, sym);
  if (f == NULL)
    fail_msg("dlsym %s in %s", sym, path);
  return f; /* never closed: its rules stay kept */
}

static void expect_all_same(const check_t *c, int calls, int min_depth) {
  if (c->mismatched)
    fail_msg("%d of %d stacks differ from libgcc's; first: %s", c->mismatched,
             c->calls, c->why);
  assert_int_equal(c->calls, calls);
  assert_int_equal(c->gaveup, 0);
  assert_int_equal(c->same, calls);
  assert_true(c->min_frames >= min_depth);
}

/* Where there is no such unwinder (not x86-64), the sampler keeps to
 * libgcc's and there is nothing here to test. */
static int g_have_cfi;
static int setup(void **state) {
  (void)state;
  g_have_cfi = ms__prof_cfi_init() == 0;
  return 0;
}
#define NEED_CFI()                                                             \
  do {                                                                         \
    if (!g_have_cfi)                                                           \
      skip();                                                                  \
  } while (0)

static void test_own_frames(void **state) {
  (void)state;
  NEED_CFI();
  check_t c = {0};
  /* Each depth twice: cold (its rules made), then warm (kept). */
  for (int d = 0; d < 30; d++) {
    own(d, &c);
    own(d, &c);
  }
  expect_all_same(&c, 60, 3);
}

static void run_lib(const char *lib, const char *sym) {
  recurse_fn f = load(lib, sym);
  check_t c = {0};
  for (int d = 0; d < 40; d++) {
    f(d, check_here, &c);
    f(d, check_here, &c);
  }
  expect_all_same(&c, 80, 3);
}

static void test_shared_no_frame_pointers(void **state) {
  (void)state;
  NEED_CFI();
  run_lib("libuw.so", "uw_recurse");
}

static void test_shared_frame_pointers(void **state) {
  (void)state;
  NEED_CFI();
  run_lib("libuw_fp.so", "uw_recurse");
}

static void test_shared_cxx(void **state) {
  (void)state;
  NEED_CFI();
  run_lib("libuw_cxx.so", "uwx_recurse");
}

/* The sampler's capture (ms__prof_cfi_capture) is the same walk, with
 * the first return addresses in a range left out and the rest cut at a
 * limit, truncation said: against the full walk from the same frame
 * (whose first entries are the two calls' own return addresses). */
typedef struct capture_check_s {
  int calls, bad;
  char why[160];
} capture_check_t;

static void capture_bad(capture_check_t *c, const char *what, int depth) {
  if (c->bad++ == 0)
    snprintf(c->why, sizeof c->why, "%s (stack of %d frames)", what, depth);
}

__attribute__((noinline)) static void check_capture(void *arg) {
  capture_check_t *c = arg;
  uintptr_t full[MAXF];
  uint64_t cap[MAXF];
  int trunc = -1;
  int nf = ms__prof_cfi_unwind(full, MAXF);
  int nc = ms__prof_cfi_capture(cap, MAXF, 0, 0, &trunc);
  c->calls++;
  if (nf < 4 || nc != nf || trunc != 0) {
    capture_bad(c, "whole: not as many frames as the walk's", nf);
    return;
  }
  for (int i = 1; i < nf; i++)
    if (cap[i] != full[i]) {
      capture_bad(c, "whole: another frame than the walk's", nf);
      return;
    }
  /* The first frame left out (the range holds this function, where its
   * return address is, and none of libuw.so's), then cut three frames
   * short of the stack: the rest is the walk's, truncated. */
  uintptr_t self = (uintptr_t)&check_capture, len = 65536;
  nc = ms__prof_cfi_capture(cap, (uint32_t)(nf - 4), self, len, &trunc);
  if (nc != nf - 4 || trunc != 1) {
    capture_bad(c, "cut: not truncated at the limit", nf);
    return;
  }
  for (int i = 0; i < nc; i++)
    if (cap[i] != full[i + 1]) {
      capture_bad(c, "cut: another frame than the walk's", nf);
      return;
    }
  /* Exactly as deep as the limit: whole, not truncated. */
  nc = ms__prof_cfi_capture(cap, (uint32_t)(nf - 1), self, len, &trunc);
  if (nc != nf - 1 || trunc != 0)
    capture_bad(c, "at the limit: said truncated", nf);
}

static void test_capture_skips_and_cuts(void **state) {
  (void)state;
  NEED_CFI();
  recurse_fn f = load("libuw.so", "uw_recurse");
  capture_check_t c = {0};
  for (int d = 0; d < 20; d++)
    f(d, check_capture, &c);
  if (c.bad)
    fail_msg("%d of %d captures wrong; first: %s", c.bad, c.calls, c.why);
  assert_int_equal(c.calls, 20);
}

static void *thread_body(void *arg) {
  check_t *c = arg;
  recurse_fn a = load("libuw.so", "uw_recurse");
  recurse_fn b = load("libuw_cxx.so", "uwx_recurse");
  for (int d = 0; d < 25; d++) {
    a(d, check_here, c);
    b(d, check_here, c);
    own(d, c);
  }
  return NULL;
}

/* Another thread's stack (bounded by its thread pointer, not by the main
 * thread's stack end), ending in clone's frame as libgcc's does. */
static void test_other_thread(void **state) {
  (void)state;
  NEED_CFI();
  check_t c = {0};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, thread_body, &c), 0);
  assert_int_equal(pthread_join(t, NULL), 0);
  expect_all_same(&c, 75, 3);
}

/* The loader's lock (dl_iterate_phdr's) held by another thread while
 * this one captures through frames whose rules are not kept yet: the
 * capture must not wait for it (a program's thread may hold it while
 * calling malloc; libgcc's unwinder, Debian 12's, does wait). The holder lets
 * go after 10 s in any case, so a capture that waited fails this test instead
 * of hanging it. */
static pthread_mutex_t g_hold_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_hold_cv = PTHREAD_COND_INITIALIZER;
static int g_held, g_captured, g_held_too_long;

static int hold_lock(struct dl_phdr_info *info, size_t size, void *data) {
  (void)info;
  (void)size;
  (void)data;
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 10;
  pthread_mutex_lock(&g_hold_mu);
  g_held = 1;
  pthread_cond_broadcast(&g_hold_cv);
  while (!g_captured && !g_held_too_long)
    if (pthread_cond_timedwait(&g_hold_cv, &g_hold_mu, &until) != 0)
      g_held_too_long = 1;
  pthread_mutex_unlock(&g_hold_mu);
  return 1;
}

/* Only the fast unwinder: libgcc's (backtrace()) takes the loader's
 * lock when it looks a frame up, so it cannot run here. */
__attribute__((noinline)) static void capture_fast(void *arg) {
  uintptr_t fast[MAXF];
  *(int *)arg = ms__prof_cfi_unwind(fast, MAXF);
  __asm__ volatile("" ::: "memory");
}

static void *lock_holder(void *arg) {
  (void)arg;
  dl_iterate_phdr(hold_lock, NULL);
  return NULL;
}

static void test_loader_lock_not_taken(void **state) {
  (void)state;
  NEED_CFI();
  /* Loaded (which takes the lock) before the lock is held; its frames'
   * rules are made during the capture. */
  recurse_fn f = load("libuw_fp.so", "uw_recurse");
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, lock_holder, NULL), 0);
  pthread_mutex_lock(&g_hold_mu);
  while (!g_held)
    pthread_cond_wait(&g_hold_cv, &g_hold_mu);
  pthread_mutex_unlock(&g_hold_mu);
  int n = -2;
  f(12, capture_fast, &n); /* cold: the library's rules are made here */
  pthread_mutex_lock(&g_hold_mu);
  g_captured = 1;
  pthread_cond_broadcast(&g_hold_cv);
  pthread_mutex_unlock(&g_hold_mu);
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_false(g_held_too_long);
  assert_true(n > 12);
  /* And what it gave is libgcc's stack (the lock free again). */
  check_t c = {0};
  f(12, check_here, &c);
  expect_all_same(&c, 1, 12);
}

/* A signal frame is libgcc's to unwind: the fast unwinder gives up
 * there, cold and warm, and never returns a different stack. */
static check_t g_sig;
static void on_signal(int sig) {
  (void)sig;
  own(2, &g_sig);
}

static void test_signal_frame_gives_up(void **state) {
  (void)state;
  NEED_CFI();
  memset(&g_sig, 0, sizeof g_sig);
  struct sigaction sa, old;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  assert_int_equal(sigaction(SIGUSR1, &sa, &old), 0);
  raise(SIGUSR1);
  raise(SIGUSR1);
  sigaction(SIGUSR1, &old, NULL);
  if (g_sig.mismatched)
    fail_msg("a signal frame's stack differs: %s", g_sig.why);
  assert_int_equal(g_sig.calls, 2);
  assert_int_equal(g_sig.gaveup, 2);
}

/* The mode callgrind runs: n warm captures by the sampler's capture
 * (ms__prof_backtrace, at the default depth of 64) of a stack of some 36
 * frames, 16 levels deep in the shared library without frame pointers. */
static uint64_t g_frames[MS__PROFILE_DEFAULT_DEPTH];
static void capture_only(void *arg) {
  long n = *(long *)arg;
  int truncated;
  for (long i = 0; i < n; i++)
    if (ms__prof_backtrace(g_frames, MS__PROFILE_DEFAULT_DEPTH, &truncated) <
        20)
      exit(3);
}

static int loop_mode(long n) {
  ms__prof_unwind_init();
  char build[1024], path[1200];
  if (host_build_dir(build, sizeof build) != 0)
    return 2;
  snprintf(path, sizeof path, "%s/progs/libuw.so", build);
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  recurse_fn f = h ? (recurse_fn)(uintptr_t)dlsym(h, "uw_recurse") : NULL;
  if (f == NULL)
    return 2;
  long one = 1;
  f(16, capture_only, &one); /* cold: the rules are made */
  f(16, capture_only, &n);
  return 0;
}

static void test_warm_capture_cost(void **state) {
  (void)state;
  NEED_CFI();
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  /* valgrind cannot run a sanitized binary, and its count would be the
   * sanitizer's. */
  print_message("skipped: built with a sanitizer\n");
  skip();
#endif
  if (!host_have_program("valgrind"))
    skip();
  char self[1024];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  assert_true(len > 0);
  self[len] = '\0';
  unsigned long long lo = 0, hi = 0;
  char why[512];
  const char *argv_lo[] = {self, "--loop", "1000", NULL};
  const char *argv_hi[] = {self, "--loop", "3000", NULL};
  if (cg_count(argv_lo, NULL, &lo, why, sizeof why) != 0 ||
      cg_count(argv_hi, NULL, &hi, why, sizeof why) != 0)
    fail_msg("%s", why);
  double per = (double)(hi - lo) / 2000.0;
  printf("a warm capture of a 36-frame stack: %.0f instructions\n", per);
  assert_true(per > 0);
  assert_true(per <= 2000);
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--loop") == 0)
    return loop_mode(atol(argv[2]));
  const struct CMUnitTest tests[] = {
      /* First, while no rule of libuw_fp.so is kept. */
      cmocka_unit_test(test_loader_lock_not_taken),
      cmocka_unit_test(test_own_frames),
      cmocka_unit_test(test_shared_no_frame_pointers),
      cmocka_unit_test(test_shared_frame_pointers),
      cmocka_unit_test(test_shared_cxx),
      cmocka_unit_test(test_other_thread),
      cmocka_unit_test(test_capture_skips_and_cuts),
      cmocka_unit_test(test_signal_frame_gives_up),
      cmocka_unit_test(test_warm_capture_cost),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
