/*
 * fuzz_profile_decode.c - memtop's side of a heap profile on hostile
 * bytes: the frame-by-frame decoder fed the input as a stream of frames,
 * as one payload, and as one payload sent again and again (an input that
 * starts with 'R' and a 16-bit count: the frame's chunk number rewritten
 * each time, as a sender of many small frames would). A decoded profile
 * must survive a re-encoding round trip unchanged (same records and
 * mappings), and stay within the decoder's memory bound: what it holds
 * is linear in the bytes it was given (a few times their size, plus the
 * first blocks of its arenas) and within profile.h's limits.
 */
#include <malloc.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/profile.h"
#include "wire/wire.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FUZZ_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(FUZZ_ASAN)
#define FUZZ_ASAN 1
#endif
#ifdef FUZZ_ASAN
/* AddressSanitizer's runtime (gcc's and clang's), as its
 * sanitizer/allocator_interface.h declares it (a header gcc lacks). */
size_t __sanitizer_get_current_allocated_bytes(void);
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The bytes the process has allocated and not freed (under
 * AddressSanitizer its allocator's count, else glibc's). */
static size_t allocated_now(void) {
#ifdef FUZZ_ASAN
  return __sanitizer_get_current_allocated_bytes();
#else
  struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;
#endif
}

/* What a decoded profile may hold for `fed` bytes of payload: its arrays
 * and its arenas' blocks grow by doubling (a record of 58 bytes on the
 * wire is 56 in memory, a stack word is a word, a path its bytes), and
 * the arenas' first blocks are there however little came. */
#define BOUND(fed) (4 * (size_t)(fed) + (1u << 20))

static void check_bound(const ms__profile_decoded_t *d, size_t before,
                        size_t fed) {
  size_t now = allocated_now();
  const ms__profile_t *p = &d->profile;
  uint64_t words = 0, text = 0;

  if (now > before && now - before > BOUND(fed))
    abort(); /* the decoder holds more than its input allows */
  if (p->nrecords > MS__PROFILE_MAX_RECORDS ||
      p->nmappings > MS__PROFILE_MAX_MAPPINGS || p->rate > MS__PROFILE_MAX_RATE)
    abort();
  for (uint32_t i = 0; i < p->nrecords; i++)
    words += p->records[i].depth;
  for (uint32_t i = 0; i < p->nmappings; i++)
    text += strlen(p->mappings[i].path) + 1 + p->mappings[i].build_id_len;
  if (words > MS__PROFILE_MAX_FRAMES || text > MS__PROFILE_MAX_MAPPING_BYTES)
    abort();
}

static void check_round_trip(const ms__profile_t *p) {
  size_t cap = ms__profile_encoded_bound(p, NULL, MS__PROFILE_MIN_PAYLOAD);
  uint8_t *buf = malloc(cap ? cap : 1);
  size_t len;
  if (buf == NULL)
    return;
  if (ms__profile_encode(p, NULL, buf, cap, MS__PROFILE_MIN_PAYLOAD, &len))
    abort();
  ms__profile_decoded_t *d;
  if (ms__profile_decode_frames(buf, len, &d, NULL, NULL) != 0)
    abort();
  const ms__profile_t *q = &d->profile;
  if (q->nrecords != p->nrecords || q->nmappings != p->nmappings ||
      q->pid != p->pid || q->rate != p->rate)
    abort();
  for (uint32_t i = 0; i < p->nrecords; i++) {
    const ms__profile_record_t *a = &p->records[i], *b = &q->records[i];
    if (a->size != b->size || a->alloc_bytes != b->alloc_bytes ||
        a->depth != b->depth || !a->truncated != !b->truncated ||
        (a->depth && memcmp(a->stack, b->stack, a->depth * 8u) != 0))
      abort();
  }
  for (uint32_t i = 0; i < p->nmappings; i++) {
    const ms__profile_mapping_t *a = &p->mappings[i], *b = &q->mappings[i];
    if (a->start != b->start || a->limit != b->limit ||
        strcmp(a->path, b->path) != 0 || a->build_id_len != b->build_id_len)
      abort();
  }
  ms__profile_decoded_free(d);
  free(buf);
}

/* The payload sent `times` times, its chunk number (if it starts with
 * one) rewritten to 0, 1, ... */
static void repeated(const uint8_t *data, size_t size, unsigned times) {
  uint8_t *p = malloc(size ? size : 1);
  size_t before = allocated_now(), fed = 0;
  ms__profile_decoded_t *d = ms__profile_decoded_new();
  int chunk = size >= 14 && data[0] == MS__TAG_PROF_CHUNK && data[1] == 0;
  if (p == NULL || d == NULL)
    goto out;
  memcpy(p, data, size);
  for (unsigned k = 0; k < times; k++) {
    if (chunk)
      for (int i = 0; i < 8; i++)
        p[6 + i] = (uint8_t)((uint64_t)k >> (8 * i));
    if (ms__profile_decode_frame(d, p, size, NULL) != 0)
      break;
    fed += size;
    check_bound(d, before, fed);
  }
  if (d->complete)
    check_round_trip(&d->profile);
out:
  ms__profile_decoded_free(d);
  free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ms__profile_decoded_t *d;
  size_t before;

  if (size >= 3 && data[0] == 'R') {
    repeated(data + 3, size - 3, ((unsigned)data[1] << 8 | data[2]) % 4096);
    return 0;
  }
  before = allocated_now();
  if (ms__profile_decode_frames(data, size, &d, NULL, NULL) == 0) {
    check_bound(d, before, size);
    check_round_trip(&d->profile);
    ms__profile_decoded_free(d);
  }
  before = allocated_now();
  if (ms__profile_decode(data, size, &d, NULL) == 0) {
    check_bound(d, before, size);
    check_round_trip(&d->profile);
    ms__profile_decoded_free(d);
  }
  return 0;
}
