/*
 * le.h - the explicit little-endian byte order of the wire (internal to
 * src/wire): byte by byte, so the format does not depend on the host's
 * layout. The snapshot's encoder (wire.c) and the profile's (wire/profile.c)
 * both write and read through these. On a little-endian host a read or
 * a write is one move (memcpy): gcc does not merge the byte loops, and a
 * snapshot has some 800 numbers (the pause rings, the size classes),
 * which memtop decodes for every target every second.
 */
#ifndef MS_WIRE_LE_H
#define MS_WIRE_LE_H

#include <stdint.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define MS__WIRE_HOST_LE 1
#else
#define MS__WIRE_HOST_LE 0
#endif

static inline void put16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}

static inline void put32(uint8_t *p, uint32_t v) {
  if (MS__WIRE_HOST_LE) {
    memcpy(p, &v, sizeof v);
    return;
  }
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

static inline void put64(uint8_t *p, uint64_t v) {
  if (MS__WIRE_HOST_LE) {
    memcpy(p, &v, sizeof v);
    return;
  }
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint16_t get16(const uint8_t *p) {
  return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t get32(const uint8_t *p) {
  if (MS__WIRE_HOST_LE) {
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
  }
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}

static inline uint64_t get64(const uint8_t *p) {
  uint64_t v = 0;
  if (MS__WIRE_HOST_LE) {
    memcpy(&v, p, sizeof v);
    return v;
  }
  for (int i = 7; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

#endif
