// pl_newdel.cc - the C++ counterpart of pl_loop: PAIRS times, delete the
// oldest of a ring of 64 objects and new another, alternating a
// new-expression of a class (freed by the sized operator delete) and an
// array of a mixed small size (freed by the unsized operator delete[]).
// Run under callgrind by tests/integration/test_hotpath_cost.c.
//
//   pl_newdel PAIRS
#include <cstdio>
#include <cstdlib>

namespace {

struct Obj {
  char bytes[48];
};

constexpr int kRing = 64;

} // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: pl_newdel PAIRS\n");
    return 2;
  }
  long pairs = std::strtol(argv[1], nullptr, 10);
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
