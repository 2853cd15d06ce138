/*
 * sizeclass.c - the size classes of tracked objects.
 *
 * 8 bytes, then 16-byte steps up to 128, then four classes per power of two
 * up to 1 MiB (jemalloc's spacing): at most 25% of a class is rounding, and
 * 61 classes cover every small object. Larger objects are counted as large.
 */
#include "core/engine.h"

int ms__size_class(uint64_t size) {
  if (size <= 8)
    return 0;
  if (size <= 128)
    return (int)((size + 15) / 16);
  if (size > MS__MAX_SMALL)
    return -1;
  /* size is in (2^b, 2^(b+1)]: four classes of 2^(b-2) each. */
  int b = 63 - __builtin_clzll(size - 1);
  uint64_t off = (size - 1 - (1ull << b)) >> (b - 2);
  return 9 + (b - 7) * 4 + (int)off;
}

uint64_t ms__class_size(int cls) {
  if (cls <= 0)
    return 8;
  if (cls <= 8)
    return 16u * (unsigned)cls;
  if (cls >= MS__NCLASSES)
    return MS__MAX_SMALL;
  int k = cls - 9;
  int b = 7 + k / 4;
  return (1ull << b) + (uint64_t)(k % 4 + 1) * (1ull << (b - 2));
}
