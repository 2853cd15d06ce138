/*
 * fuzz_profile_decode.c - memtop's side of a heap profile on hostile
 * bytes: the frame-by-frame decoder fed the input as a stream of frames,
 * and as one payload. A decoded profile must survive a re-encoding round
 * trip unchanged (same records and mappings).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/profile.h"
#include "wire/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ms__profile_decoded_t *d;
  if (ms__profile_decode_frames(data, size, &d, NULL, NULL) == 0) {
    check_round_trip(&d->profile);
    ms__profile_decoded_free(d);
  }
  if (ms__profile_decode(data, size, &d, NULL) == 0) {
    check_round_trip(&d->profile);
    ms__profile_decoded_free(d);
  }
  return 0;
}
