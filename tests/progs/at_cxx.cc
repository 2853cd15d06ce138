/*
 * at_cxx.cc - a C++ program started bare for memtop attach --track
 * (test_attach): two threads that new and delete all the time (scalar,
 * array, sized and aligned forms), each keeping a few hundred objects;
 * the main thread reads commands on stdin:
 *
 *   info    "count N": the workers' rounds so far
 *
 * Starts with "ready PID"; EOF ends it with status 0.
 */
#include <atomic>
#include <cstdio>
#include <cstring>
#include <new>
#include <thread>
#include <unistd.h>

static std::atomic<unsigned long> g_count;
static std::atomic<int> g_stop;

struct alignas(64) Aligned {
  char bytes[64];
};

static void worker(unsigned seed) {
  char *keep[128] = {};
  Aligned *al[16] = {};
  for (unsigned long i = 0; !g_stop.load(std::memory_order_relaxed); i++) {
    seed = seed * 1103515245u + 12345u;
    unsigned k = (seed >> 8) % 128;
    delete[] keep[k];
    keep[k] = new char[16 + (seed >> 4) % 2000];
    unsigned a = (seed >> 12) % 16;
    delete al[a];
    al[a] = new Aligned();
    if (i % 1024 == 0)
      g_count.fetch_add(1, std::memory_order_relaxed);
  }
  for (char *p : keep)
    delete[] p;
  for (Aligned *p : al)
    delete p;
}

int main() {
  std::thread a(worker, 1u), b(worker, 2u);
  std::printf("ready %d\n", (int)getpid());
  std::fflush(stdout);
  /* Static, not on the stack, as at_alloc's: memtop attach looks at the
   * top of each thread's stack for return addresses into the loader and
   * the allocator, and a buffer there keeps stale ones (the aarch64 VM
   * found the lazy binder's, _dl_runtime_resolve's, in it at every stop
   * while both workers were inside malloc). */
  static char line[64];
  while (std::fgets(line, sizeof line, stdin)) {
    if (std::strncmp(line, "info", 4) == 0)
      std::printf("count %lu\n", g_count.load());
    else
      std::printf("?\n");
    std::fflush(stdout);
  }
  g_stop = 1;
  a.join();
  b.join();
  return 0;
}
