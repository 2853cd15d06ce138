// pl_cxx.cc - every C++ operator new/delete variant under the preload.
//
// Phase "held": 12 explicit operator calls (plain, array, sized, aligned,
// sized+aligned, nothrow, aligned+nothrow) and 3 new-expressions, kept
// alive: 15 mallocs, and HeapAlloc grows by their usable sizes. Phase
// "freed": each is deleted by its matching operator: 15 frees, balanced.
// Phase "bad_alloc": failing throwing and nothrow news change nothing, and
// the counting still works afterwards (one more pair). Phase "containers":
// the standard library's own allocations balance. pl_cxx_je.cc is this
// program linked with jemalloc, which defines its own operators.
#include <malloc.h>
#include <stdint.h>

#include <new>
#include <string>
#include <vector>

extern "C" {
#include "pl_snap.h"
}

namespace {

struct Small {
  char bytes[40];
};
struct alignas(64) Aligned {
  char bytes[100];
};

void *volatile held[16];
ms_snapshot_t s0, s1, s2, s3, s4;

} // namespace

int main() {
  int have = pl_snap_init();
  pl_say("preload=%d", have);
  pl_snap(&s0);
  pl_snap(&s0);

  const std::align_val_t al{64};
  int n = 0;
  held[n++] = ::operator new(24);
  held[n++] = ::operator new[](24);
  held[n++] = ::operator new(50); // sized below: 50 is no class size
  held[n++] = ::operator new[](50);
  held[n++] = ::operator new(100, al);
  held[n++] = ::operator new[](100, al);
  held[n++] = ::operator new(200, al);
  held[n++] = ::operator new[](200, al);
  held[n++] = ::operator new(24, std::nothrow);
  held[n++] = ::operator new[](24, std::nothrow);
  held[n++] = ::operator new(100, al, std::nothrow);
  held[n++] = ::operator new[](100, al, std::nothrow);
  Small *small = new Small();
  int *ints = new int[33]();
  Aligned *aligned = new Aligned();
  held[n++] = small;
  held[n++] = ints;
  held[n++] = aligned;
  pl_snap(&s1);
  uint64_t usable = 0;
  for (int i = 0; i < n; i++)
    usable += malloc_usable_size(held[i]);
  pl_say("held=%d", n);
  pl_say("held_usable=%llu", (unsigned long long)usable);
  pl_say_delta("held", &s0, &s1);

  ::operator delete(held[0]);
  ::operator delete[](held[1]);
  ::operator delete(held[2], 50);
  ::operator delete[](held[3], 50);
  ::operator delete(held[4], al);
  ::operator delete[](held[5], al);
  ::operator delete(held[6], 200, al);
  ::operator delete[](held[7], 200, al);
  ::operator delete(held[8], std::nothrow);
  ::operator delete[](held[9], std::nothrow);
  ::operator delete(held[10], al, std::nothrow);
  ::operator delete[](held[11], al, std::nothrow);
  delete small; // sized delete (C++14)
  delete[] ints;
  delete aligned; // sized, aligned delete (C++17)
  pl_snap(&s2);
  pl_say_delta("freed", &s0, &s2);

  // Impossible sizes: the throwing forms throw std::bad_alloc, the nothrow
  // forms return null, and nothing is counted.
  int caught = 0;
  try {
    held[0] = ::operator new(SIZE_MAX / 2);
  } catch (const std::bad_alloc &) {
    caught++;
  }
  try {
    held[0] = ::operator new[](SIZE_MAX / 2, al);
  } catch (const std::bad_alloc &) {
    caught++;
  }
  int nulls = (::operator new(SIZE_MAX / 2, std::nothrow) == nullptr) +
              (::operator new[](SIZE_MAX / 2, al, std::nothrow) == nullptr);
  held[0] = ::operator new(64); // counting still works on this thread
  ::operator delete(held[0]);
  pl_snap(&s3);
  pl_say("bad_alloc_caught=%d", caught);
  pl_say("nothrow_nulls=%d", nulls);
  pl_say_delta("bad_alloc", &s2, &s3);

  {
    std::vector<std::string> words;
    for (int i = 0; i < 2000; i++)
      words.push_back(
          std::string(20 + i % 50, static_cast<char>('a' + i % 26)));
    std::vector<std::string> copy(words);
    held[0] = &copy;
  }
  pl_snap(&s4);
  pl_say_delta("containers", &s3, &s4);
  return 0;
}
