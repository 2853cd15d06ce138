/*
 * libuw.c - stacks of many shapes in a shared library, for test_unwind:
 * uw_recurse(depth, cb, arg) calls cb(arg) at the bottom of depth frames
 * that cycle through the shapes a compiler makes (a small frame, a large
 * one, alloca's RBP-based frame, many callee-saved registers, an
 * indirect call), each kept from being inlined or turned into a jump.
 * Built twice: without frame pointers (libuw.so, the default at -O2) and
 * with them (libuw_fp.so).
 */
#include <alloca.h>
#include <stdint.h>
#include <string.h>

#define UW_API __attribute__((visibility("default")))
#define NOINLINE __attribute__((noinline))

typedef void (*uw_cb)(void *arg);
static volatile int g_sink;

static int step(int depth, uw_cb cb, void *arg);

NOINLINE static int shape_small(int depth, uw_cb cb, void *arg) {
  int r = step(depth - 1, cb, arg);
  g_sink = r;
  return r + 1;
}

NOINLINE static int shape_large(int depth, uw_cb cb, void *arg) {
  volatile char buf[5000];
  buf[depth % 5000] = (char)depth;
  int r = step(depth - 1, cb, arg);
  return r + buf[depth % 5000];
}

NOINLINE static int shape_alloca(int depth, uw_cb cb, void *arg) {
  size_t n = 16 + (size_t)(depth * 24) % 300;
  char *p = alloca(n);
  memset(p, depth, n);
  __asm__ volatile("" : : "r"(p) : "memory");
  int r = step(depth - 1, cb, arg);
  return r + p[n - 1];
}

NOINLINE static int shape_regs(int depth, uw_cb cb, void *arg) {
  /* Values live across the call: rbx, r12-r15 (and rbp without frame
   * pointers) are saved and restored. */
  volatile int a = depth, b = depth * 3, c = depth * 5, d = depth * 7;
  int x = a, y = b, z = c, w = d;
  int r = step(depth - 1, cb, arg);
  return r + x * y + z * w + (x ^ w);
}

typedef int (*shape_fn)(int, uw_cb, void *);
static shape_fn volatile g_indirect = shape_small;

NOINLINE static int shape_indirect(int depth, uw_cb cb, void *arg) {
  int r = g_indirect(depth, cb, arg);
  g_sink = r;
  return r + 2;
}

NOINLINE static int step(int depth, uw_cb cb, void *arg) {
  if (depth <= 0) {
    cb(arg);
    return 0;
  }
  int r;
  switch (depth % 5) {
  case 0:
    r = shape_small(depth, cb, arg);
    break;
  case 1:
    r = shape_large(depth, cb, arg);
    break;
  case 2:
    r = shape_alloca(depth, cb, arg);
    break;
  case 3:
    r = shape_regs(depth, cb, arg);
    break;
  default:
    r = shape_indirect(depth - 1, cb, arg);
    break;
  }
  g_sink = r;
  return r;
}

UW_API int uw_recurse(int depth, uw_cb cb, void *arg);
UW_API int uw_recurse(int depth, uw_cb cb, void *arg) {
  int r = step(depth, cb, arg);
  g_sink = r;
  return r;
}
