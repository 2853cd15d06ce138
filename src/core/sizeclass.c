/*
 * sizeclass.c - the size classes of tracked objects.
 *
 * 8 bytes, then 16-byte steps up to 128, then four classes per power of two
 * up to 1 MiB (jemalloc's spacing): at most 25% of a class is rounding, and
 * 61 classes cover every small object. Larger objects are counted as large.
 * ms__size_class() itself is inline in sizeclass.h.
 */
#include "core/sizeclass.h"

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
