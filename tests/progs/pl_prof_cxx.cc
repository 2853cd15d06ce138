// pl_prof_cxx.cc - C++ allocation sites for the heap profile's tests
// (tests/integration/test_profile_e2e.c), run under the preload with
// MEMSTATS_PROFILE_RATE=1. Each function of namespace sites allocates with
// one form of new and keeps what it got: plain (operator new(size_t)),
// array (operator new[]), aligned (operator new(size_t, align_val_t)),
// aligned array, and nothrow (operator new(size_t, nothrow_t)); each a
// different number of objects, so that no two sites hold the same bytes.
// A sixth, vector_new, makes std::vectors of 100 longs with new: the
// vector by a plain new in the site itself, its buffer by operator new
// called from the vector's constructor, std::allocator's code inlined
// into the site (so the site is the last of that address's inline chain,
// not a frame of its own). For each it says "truth NAME COUNT BYTES"
// (NAME demangled, as the profile names it; BYTES the blocks' usable
// sizes), then "ready PID", and waits for stdin to close.
//
// pl_prof_cxx small, for the default rate (test_default_rate_small_cxx):
// small blocks allocated and deleted at once, 33,000,000 of 32 bytes by
// operator new(size_t) and the unsized operator delete(void *)
// (churn_plain), 20,000,000 objects of 64 bytes by new and delete
// expressions, which call the sized operator delete(void *, size_t)
// (churn_sized); 4,000,000 of 16 sizes from 64 to 1024 bytes
// freed by the sized operator delete (churn_mixed); and 20,000 arrays of
// 64 KiB held (hold: address space, their bodies untouched).
#include <malloc.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <new>
#include <vector>

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

static void keep_as_is(void *p) {
  g_cxx_keep[g_n++] = p;
  g_count++;
  g_bytes += malloc_usable_size(p);
}

static void keep(void *p) {
  static_cast<char *>(p)[0] = 1;
  keep_as_is(p);
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

NOINLINE void vector_new() {
  for (int i = 0; i < 15; i++) {
    std::vector<long> *v = new std::vector<long>(100);
    keep_as_is(v);
    keep_as_is(v->data());
  }
  __asm__ volatile("");
}

// The small mode's sites. A pointer read back through a volatile object,
// so that no compiler pairs a new with its delete and drops both.
struct Obj64 {
  char bytes[64];
};

NOINLINE void churn_plain() {
  for (int i = 0; i < 33000000; i++) {
    void *volatile p = ::operator new(32);
    g_count++;
    g_bytes += malloc_usable_size(p);
    ::operator delete(p);
  }
  __asm__ volatile("");
}

NOINLINE void churn_sized() {
  for (int i = 0; i < 20000000; i++) {
    Obj64 *volatile p = new Obj64;
    g_count++;
    g_bytes += malloc_usable_size(p);
    delete p;
  }
  __asm__ volatile("");
}

NOINLINE void churn_mixed() {
  for (int i = 0; i < 4000000; i++) {
    size_t n = 64 + 64 * (size_t)(i % 16);
    void *volatile p = ::operator new(n);
    g_count++;
    g_bytes += malloc_usable_size(p);
    ::operator delete(p, n);
  }
  __asm__ volatile("");
}

extern char *volatile g_cxx_hold[20000];
char *volatile g_cxx_hold[20000];

NOINLINE void hold() {
  for (int i = 0; i < 20000; i++) {
    char *p = new char[64 << 10];
    g_count++;
    g_bytes += malloc_usable_size(p);
    g_cxx_hold[i] = p;
  }
  __asm__ volatile("");
}

} // namespace sites

static void site(const char *name, void (*fn)()) {
  g_count = g_bytes = 0;
  fn();
  prog_say("truth %s %llu %llu", name, g_count, g_bytes);
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "small") == 0) {
    site("sites::hold()", sites::hold);
    site("sites::churn_plain()", sites::churn_plain);
    site("sites::churn_sized()", sites::churn_sized);
    site("sites::churn_mixed()", sites::churn_mixed);
    prog_say("ready %d", (int)getpid());
    char c;
    while (read(0, &c, 1) > 0)
      ;
    return 0;
  }
  site("sites::plain_new()", sites::plain_new);
  site("sites::array_new()", sites::array_new);
  site("sites::aligned_new()", sites::aligned_new);
  site("sites::aligned_array_new()", sites::aligned_array_new);
  site("sites::nothrow_new()", sites::nothrow_new);
  site("sites::vector_new()", sites::vector_new);
  prog_say("ready %d", (int)getpid());
  char c;
  while (read(0, &c, 1) > 0)
    ;
  return 0;
}
