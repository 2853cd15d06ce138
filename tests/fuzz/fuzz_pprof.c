/*
 * fuzz_pprof.c - memtop's heap-profile outputs on hostile profiles: what
 * the wire decoder accepts (any counts, stacks, mappings) is built into
 * the model, alone and as a delta against itself, listed as text and
 * encoded as profile.proto. Nothing may crash, read out of bounds,
 * overflow a signed figure or put a terminal control into the text; the
 * written profile.proto, unpacked again, must hold only safe strings
 * (names and paths a terminal will show through `go tool pprof`) and
 * values whose sums fit in int64 (pprof adds them so).
 * (Symbolisation reads files, and is left out.)
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "common/sanitize.h"
#include "common/strbuf.h"
#include "pprof/profile.pb-c.h"
#include "pprof/filter.h"
#include "pprof/heap.h"
#include "pprof/pprof.h"
#include "pprof/top.h"
#include "wire/profile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Every string of the written profile is safe on a terminal; the sum of
 * each value over all samples fits in int64. */
static void check_written(const uint8_t *gz, size_t len) {
  size_t cap = 16u << 20;
  uint8_t *raw = malloc(cap);
  z_stream z;
  Perftools__Profiles__Profile *pb;

  if (raw == NULL)
    return;
  memset(&z, 0, sizeof z);
  if (inflateInit2(&z, 15 + 16) != Z_OK)
    abort();
  z.next_in = (Bytef *)(uintptr_t)gz;
  z.avail_in = (uInt)len;
  z.next_out = raw;
  z.avail_out = (uInt)cap;
  if (inflate(&z, Z_FINISH) != Z_STREAM_END)
    abort(); /* not one whole gzip stream */
  pb = perftools__profiles__profile__unpack(NULL, z.total_out, raw);
  inflateEnd(&z);
  if (pb == NULL)
    abort(); /* not a profile.proto protobuf-c reads back */
  for (size_t i = 0; i < pb->n_string_table; i++) {
    const unsigned char *t = (const unsigned char *)pb->string_table[i];
    size_t n = strlen((const char *)t);
    for (size_t k = 0; k < n;) {
      uint32_t cp;
      size_t l = ms__utf8_decode(t + k, n - k, &cp);
      if (l == 0 || ms__cp_unsafe(cp))
        abort(); /* a stranger's control reached the file */
      k += l;
    }
  }
  for (size_t v = 0; v < pb->n_sample_type; v++) {
    int64_t sum = 0;
    for (size_t i = 0; i < pb->n_sample; i++)
      if (v < pb->sample[i]->n_value &&
          __builtin_add_overflow(sum, pb->sample[i]->value[v], &sum))
        abort(); /* pprof's total would wrap */
  }
  perftools__profiles__profile__free_unpacked(pb, NULL);
  free(raw);
}

static void outputs(const ms__profile_t *p, const ms__profile_t *base) {
  ms__strbuf_t b = MS_STRBUF_INIT;
  uint8_t *bytes = NULL;
  size_t len = 0, i;
  mt_heap_t h;

  if (mt_heap_build(p, base, &h) != 0)
    return;
  for (int by = 0; by < MT_HEAP_NVALUES; by++)
    mt_top_text(&b, &h, by, 10);
  for (i = 0; i < b.len; i++)
    if ((unsigned char)b.data[i] < 0x20 && b.data[i] != '\n')
      abort(); /* a control character reached the text */
  if (mt_pprof_encode(&h, &bytes, &len) == 0) {
    if (len == 0)
      abort();
    check_written(bytes, len);
  }
  free(bytes);
  /* The top list's filters (pprof/filter.h) over the stranger's
   * mappings and stacks: the model stays one the list can read. */
  {
    const mt_heap_filter_t f = {.focus = "/", .ignore = "^x", .hide = "so"};
    if (mt_heap_filter(&h, &f) == 0)
      mt_top_text(&b, &h, MT_HEAP_INUSE_SPACE, 10);
  }
  ms__strbuf_free(&b);
  mt_heap_free(&h);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ms__profile_decoded_t *d;

  if (ms__profile_decode_frames(data, size, &d, NULL, NULL) == 0) {
    outputs(&d->profile, NULL);
    outputs(&d->profile, &d->profile);
    ms__profile_decoded_free(d);
  }
  return 0;
}
