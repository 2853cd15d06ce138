/*
 * sizeclass.h - the size classes of tracked objects (internal to the
 * target side; see sizeclass.c). The class of a size is inline: it runs on
 * every tracked malloc and free.
 */
#ifndef MS_CORE_SIZECLASS_H
#define MS_CORE_SIZECLASS_H

#include <stdint.h>

/* 16-byte steps up to 128 bytes, then four classes per power of two up to
 * MS__MAX_SMALL; larger objects are "large" (counted, not classed). */
#define MS__NCLASSES 61
#define MS__MAX_SMALL (1u << 20)
/* The class of every size up to MS__CLASS_TABLE_MAX, indexed by
 * (size + 7) / 8: every class boundary up to there is a multiple of 8, so
 * one byte load replaces the arithmetic below on the common sizes. */
#define MS__CLASS_TABLE_MAX 1024u
extern const uint8_t ms__class_by8[MS__CLASS_TABLE_MAX / 8 + 1]
    __attribute__((visibility("hidden")));
/* The class of a size above 128 bytes, by arithmetic (jemalloc's
 * size-to-index): size is in (2^b, 2^(b+1)], where class 9 + (b - 7) * 4
 * starts, and (size - 1) >> (b - 2) is 4 + which of its four classes of
 * 2^(b-2) bytes size falls in: a bit scan, a shift and two adds. */
static inline int ms__size_class_log(uint64_t size) {
  int b = 63 - __builtin_clzll(size - 1);
  return 4 * b - 23 + (int)((size - 1) >> (b - 2));
}
/* The class of a size up to MS__MAX_SMALL (the caller has checked): the
 * table, or above it the arithmetic; ms__track_fast (hotpath.h) makes the
 * same split, and test_engine checks both against ms__class_size. */
static inline int ms__size_class_small(uint64_t size) {
  if (__builtin_expect(size <= MS__CLASS_TABLE_MAX, 1))
    return ms__class_by8[(size + 7) >> 3];
  return ms__size_class_log(size);
}
/* Returns the class of a size (0 .. MS__NCLASSES-1), or -1 if large. */
static inline int ms__size_class(uint64_t size) {
  if (__builtin_expect(size > MS__MAX_SMALL, 0))
    return -1;
  return ms__size_class_small(size);
}
/* The largest size in a class. */
uint64_t ms__class_size(int cls);

#endif
