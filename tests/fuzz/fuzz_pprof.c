/*
 * fuzz_pprof.c - memtop's heap-profile outputs on hostile profiles: what
 * the wire decoder accepts (any counts, stacks, mappings) is built into
 * the model, alone and as a delta against itself, listed as text and
 * encoded as profile.proto. Nothing may crash, read out of bounds,
 * overflow a signed figure or put a terminal control into the text.
 * (Symbolisation reads files, and is left out.)
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/strbuf.h"
#include "pprof/heap.h"
#include "pprof/pprof.h"
#include "pprof/top.h"
#include "wire/profile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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
  if (mt_pprof_encode(&h, &bytes, &len) == 0 && len == 0)
    abort();
  free(bytes);
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
