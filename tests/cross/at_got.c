/*
 * at_got.c - memtop attach --track's GOT rewrite (src/preload/got.c) in a
 * program built for another processor and run under its emulator
 * (qemu-user): `make cross-aarch64` builds it and the preload for aarch64,
 * tests/integration/test_cross_aarch64.c runs it with qemu-aarch64.
 * qemu-user cannot run ptrace, so the program makes memtop attach
 * --track's calls itself, as tests/progs/pl_loop.c's PL_LOOP_ATTACH does
 * (dlopen, then ms__attach_start(MS__ATTACH_TRACK)), and checks, in this
 * order:
 *   - before: its malloc and dlopen entries are the C library's;
 *   - attached: both are the preload's, and malloc/free called through
 *     the PLT are counted (Mallocs and Frees grow by as many);
 *   - dlopen through the preload's stub (hand-written per processor):
 *     a name without '/' (the jump to the real dlopen, the program's
 *     return address kept) and a path (the call, then the rewrite);
 *   - after ms__attach_stop: the entries are the C library's again.
 * Prints "ok" and exits 0, or says what failed and exits 1.
 *
 * Usage: at_got /ABSOLUTE/PATH/libmemstats-preload.so
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memstats.h"

#define PAIRS 1000

static int failed;

static void check(int ok, const char *what) {
  if (!ok) {
    printf("FAILED: %s\n", what);
    failed = 1;
  }
}

/* The file of the object holding f's address (what the GOT entry holds:
 * each call loads it again, never kept across the attach). */
static const char *__attribute__((noinline)) owner(void *(*get)(void)) {
  Dl_info di;
  void *f = get();
  return dladdr(f, &di) && di.dli_fname ? di.dli_fname : "?";
}
static void *__attribute__((noinline)) malloc_entry(void) {
  return (void *)malloc;
}
static void *__attribute__((noinline)) dlopen_entry(void) {
  return (void *)dlopen;
}

static int in(const char *path, const char *name) {
  const char *b = strrchr(path, '/');
  return strstr(b ? b + 1 : path, name) != NULL;
}

int main(int argc, char **argv) {
  if (argc != 2 || argv[1][0] != '/') {
    fprintf(stderr, "usage: at_got /PATH/libmemstats-preload.so\n");
    return 2;
  }
  void *before = malloc(100); /* a block from before the attach */
  check(in(owner(malloc_entry), "libc"), "malloc is libc's before");
  check(in(owner(dlopen_entry), "libc"), "dlopen is libc's before");

  void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    printf("FAILED: dlopen %s: %s\n", argv[1], dlerror());
    return 1;
  }
  int (*start)(unsigned) = NULL, (*stop)(void) = NULL;
  int (*snap)(ms_snapshot_t *, size_t) = NULL;
  *(void **)&start = dlsym(h, "ms__attach_start");
  *(void **)&stop = dlsym(h, "ms__attach_stop");
  *(void **)&snap = dlsym(h, "ms_snapshot_read");
  if (!start || !stop || !snap) {
    printf("FAILED: the preload has no ms__attach_start/stop\n");
    return 1;
  }
  int r = start(1u); /* MS__ATTACH_TRACK */
  if (r != 0) {
    printf("FAILED: ms__attach_start: %d\n", r);
    return 1;
  }
  check(in(owner(malloc_entry), "libmemstats"), "malloc is the preload's");
  check(in(owner(dlopen_entry), "libmemstats"), "dlopen is the preload's");

  static ms_snapshot_t s0, s1;
  check(snap(&s0, sizeof s0) == 0, "a snapshot before the pairs");
  for (int i = 0; i < PAIRS; i++) {
    void *volatile p = malloc(32 + (size_t)i % 64);
    free(p);
  }
  check(snap(&s1, sizeof s1) == 0, "a snapshot after the pairs");
  printf("mallocs +%llu frees +%llu\n",
         (unsigned long long)(s1.mallocs - s0.mallocs),
         (unsigned long long)(s1.frees - s0.frees));
  check(s1.mallocs - s0.mallocs >= PAIRS, "the mallocs counted");
  check(s1.frees - s0.frees >= PAIRS, "the frees counted");
  free(before); /* from before the attach: must not upset the counts */

  /* Through the stub: a name (the real dlopen, jumped to) and a path
   * (called, then the modules rewritten). */
  void *m = dlopen("libm.so.6", RTLD_NOW);
  check(m != NULL, "dlopen(\"libm.so.6\") through the stub");
  void *again = dlopen(argv[1], RTLD_NOW | RTLD_NOLOAD);
  check(again == h, "dlopen(path) through the stub");
  if (again)
    dlclose(again);
  if (m)
    dlclose(m);

  r = stop();
  check(r == 0, "ms__attach_stop");
  check(in(owner(malloc_entry), "libc"), "malloc is libc's after");
  check(in(owner(dlopen_entry), "libc"), "dlopen is libc's after");
  if (!failed)
    printf("ok\n");
  return failed;
}
