// pl_prof_cxx.cc - C++ allocation sites for the heap profile's tests
// (tests/integration/test_profile_e2e.c), run under the preload with
// MEMSTATS_PROFILE_RATE=1. Each function of namespace sites allocates with
// one form of new and keeps what it got: plain (operator new(size_t)),
// array (operator new[]), aligned (operator new(size_t, align_val_t)),
// aligned array, and nothrow (operator new(size_t, nothrow_t)); each a
// different number of objects, so that no two sites hold the same bytes.
// For each it says "truth NAME COUNT BYTES" (NAME demangled, as the profile
// names it; BYTES the blocks' usable sizes), then "ready PID", and waits
// for stdin to close.
#include <malloc.h>
#include <stdint.h>
#include <unistd.h>

#include <new>

#include "say.h"

// Trivially destructible element types: an array new asks exactly
// count * size (no cookie before the elements), so the pointer it returns
// is the block's, and malloc_usable_size can be asked of it.
struct Plain {
  char bytes[100];
};
struct alignas(64) Aligned {
  char bytes[200];
};

extern void *volatile g_cxx_keep[256];
void *volatile g_cxx_keep[256];
static int g_n;
static unsigned long long g_count, g_bytes;

static void keep(void *p) {
  static_cast<char *>(p)[0] = 1;
  g_cxx_keep[g_n++] = p;
  g_count++;
  g_bytes += malloc_usable_size(p);
}

#define NOINLINE __attribute__((noinline))

namespace sites {

NOINLINE void plain_new() {
  for (int i = 0; i < 10; i++)
    keep(new Plain());
  __asm__ volatile("");
}

NOINLINE void array_new() {
  for (int i = 0; i < 11; i++)
    keep(new Plain[7]());
  __asm__ volatile("");
}

NOINLINE void aligned_new() {
  for (int i = 0; i < 12; i++)
    keep(new Aligned());
  __asm__ volatile("");
}

NOINLINE void aligned_array_new() {
  for (int i = 0; i < 13; i++)
    keep(new Aligned[3]());
  __asm__ volatile("");
}

NOINLINE void nothrow_new() {
  for (int i = 0; i < 14; i++)
    keep(new (std::nothrow) Plain());
  __asm__ volatile("");
}

} // namespace sites

static void site(const char *name, void (*fn)()) {
  g_count = g_bytes = 0;
  fn();
  prog_say("truth %s %llu %llu", name, g_count, g_bytes);
}

int main() {
  site("sites::plain_new()", sites::plain_new);
  site("sites::array_new()", sites::array_new);
  site("sites::aligned_new()", sites::aligned_new);
  site("sites::aligned_array_new()", sites::aligned_array_new);
  site("sites::nothrow_new()", sites::nothrow_new);
  prog_say("ready %d", (int)getpid());
  char c;
  while (read(0, &c, 1) > 0)
    ;
  return 0;
}
