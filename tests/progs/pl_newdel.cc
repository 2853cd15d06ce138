// pl_newdel.cc - the C++ counterpart of pl_loop: PAIRS times, delete the
// oldest of a ring of 64 objects and new another, alternating a
// new-expression of a class (freed by the sized operator delete) and an
// array of a mixed small size (freed by the unsized operator delete[]).
// With "random": a ring of 256 arrays of sizes spread evenly over
// 16..4096 bytes (pl_loop random's sizes), each freed by delete[].
// Run under callgrind by tests/integration/test_hotpath_cost.c and
// tests/bench/bench_preload.c.
//
//   pl_newdel PAIRS [random]
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

struct Obj {
  char bytes[48];
};

constexpr int kRing = 64;
constexpr int kRandomRing = 256;

// pl_loop's random sizes: the same xorshift, 16..4096 bytes.
void random_loop(long pairs) {
  static std::size_t sizes[256];
  std::uint32_t x = 2463534242u;
  for (auto &s : sizes) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    s = 16 + x % 4081;
  }
  char *volatile ring[kRandomRing] = {};
  for (long i = 0; i < pairs; i++) {
    unsigned slot = static_cast<unsigned>(i) % kRandomRing;
    delete[] ring[slot];
    ring[slot] = new char[sizes[static_cast<unsigned>(i) % 256]];
  }
  for (auto &r : ring)
    delete[] r;
}

} // namespace

int main(int argc, char **argv) {
  bool random = argc == 3 && std::strcmp(argv[2], "random") == 0;
  if (argc != 2 && !random) {
    std::fprintf(stderr, "usage: pl_newdel PAIRS [random]\n");
    return 2;
  }
  long pairs = std::strtol(argv[1], nullptr, 10);
  if (random) {
    random_loop(pairs);
    std::puts("done");
    return 0;
  }
  // Volatile slots: the compiler cannot pair up and drop new and delete.
  Obj *volatile objs[kRing] = {};
  char *volatile arrays[kRing] = {};
  for (long i = 0; i < pairs; i++) {
    int slot = static_cast<int>(i % kRing);
    if (i & 1) {
      delete objs[slot];
      objs[slot] = new Obj;
    } else {
      delete[] arrays[slot];
      arrays[slot] = new char[16 + (i * 37) % 480];
    }
  }
  for (int i = 0; i < kRing; i++) {
    delete objs[i];
    delete[] arrays[i];
  }
  std::puts("done");
  return 0;
}
