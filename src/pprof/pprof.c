/*
 * pprof.c - writing profile.proto (see pprof.h) through protobuf-c, with
 * code generated at build time from pprof's own profile.proto (committed
 * beside this file), and gzipped through zlib.
 *
 * Every message is built in a few arrays allocated for the whole encoding
 * (one per message type), pointed at by the generated structs, packed
 * once, then compressed: a profile of 10,000 buckets is a few MiB at most
 * on the way.
 */
#include "pprof/pprof.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "memstats.h"
#include "pprof/profile.pb-c.h"

typedef Perftools__Profiles__Profile pb_profile_t;
typedef Perftools__Profiles__ValueType pb_value_type_t;
typedef Perftools__Profiles__Sample pb_sample_t;
typedef Perftools__Profiles__Label pb_label_t;
typedef Perftools__Profiles__Mapping pb_mapping_t;
typedef Perftools__Profiles__Location pb_location_t;
typedef Perftools__Profiles__Line pb_line_t;
typedef Perftools__Profiles__Function pb_function_t;

/* The names Go's heap profile uses, appended after the heap's strings. */
enum {
  S_ALLOC_OBJECTS,
  S_ALLOC_SPACE,
  S_INUSE_OBJECTS,
  S_INUSE_SPACE,
  S_COUNT,
  S_BYTES,
  S_SPACE,
  S_COMMENT,
  S__N
};

static int gzip_bytes(const uint8_t *in, size_t len, uint8_t **out,
                      size_t *outlen) {
  z_stream z;
  uLong cap;
  uint8_t *buf;
  int rc;

  memset(&z, 0, sizeof z);
  /* 15 + 16: a gzip header and trailer, as pprof expects on disk. */
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
                   Z_DEFAULT_STRATEGY) != Z_OK)
    return MS_ENOMEM;
  cap = deflateBound(&z, (uLong)len);
  buf = malloc(cap);
  if (buf == NULL) {
    deflateEnd(&z);
    return MS_ENOMEM;
  }
  z.next_in = (Bytef *)(uintptr_t)in;
  z.avail_in = (uInt)len;
  z.next_out = buf;
  z.avail_out = (uInt)cap;
  rc = deflate(&z, Z_FINISH);
  *outlen = z.total_out;
  deflateEnd(&z);
  if (rc != Z_STREAM_END) {
    free(buf);
    return MS_ENOMEM;
  }
  *out = buf;
  return 0;
}

int mt_pprof_encode(const mt_heap_t *h, uint8_t **out, size_t *len) {
  pb_profile_t prof = PERFTOOLS__PROFILES__PROFILE__INIT;
  pb_value_type_t vt[MT_HEAP_NVALUES + 1], *vtp[MT_HEAP_NVALUES];
  pb_sample_t *samples = NULL, **samplep = NULL;
  pb_label_t *labels = NULL, **labelp = NULL;
  pb_mapping_t *maps = NULL, **mapp = NULL;
  pb_location_t *locs = NULL, **locp = NULL;
  pb_line_t *lines = NULL, **linep = NULL;
  pb_function_t *funcs = NULL, **funcp = NULL;
  uint64_t *loc_ids = NULL;
  int64_t *values = NULL, comment[1];
  char **strings = NULL, comment_text[160];
  uint8_t *packed = NULL;
  size_t nlines = 0, nloc_ids = 0, i, j, k, s0, packed_len;
  static const char *const names[S__N] = {[S_ALLOC_OBJECTS] = "alloc_objects",
                                          [S_ALLOC_SPACE] = "alloc_space",
                                          [S_INUSE_OBJECTS] = "inuse_objects",
                                          [S_INUSE_SPACE] = "inuse_space",
                                          [S_COUNT] = "count",
                                          [S_BYTES] = "bytes",
                                          [S_SPACE] = "space",
                                          [S_COMMENT] = NULL};
  static const int vt_type[MT_HEAP_NVALUES] = {S_ALLOC_OBJECTS, S_ALLOC_SPACE,
                                               S_INUSE_OBJECTS, S_INUSE_SPACE};
  static const int vt_unit[MT_HEAP_NVALUES] = {S_COUNT, S_BYTES, S_COUNT,
                                               S_BYTES};
  int rc = MS_ENOMEM;

  if (h == NULL || out == NULL || len == NULL || h->nstrings == 0)
    return MS_EINVAL;
  *out = NULL;
  *len = 0;
  for (i = 0; i < h->nlocations; i++)
    nlines += h->locations[i].nlines;
  for (i = 0; i < h->nsamples; i++)
    nloc_ids += h->samples[i].nlocations;

  /* The string table: the heap's, then the profile's own names. */
  s0 = h->nstrings;
  strings = calloc(s0 + S__N, sizeof *strings);
  samples = calloc(h->nsamples + 1, sizeof *samples);
  samplep = calloc(h->nsamples + 1, sizeof *samplep);
  labels = calloc(h->nsamples + 1, sizeof *labels);
  labelp = calloc(h->nsamples + 1, sizeof *labelp);
  values = calloc(h->nsamples * MT_HEAP_NVALUES + 1, sizeof *values);
  loc_ids = calloc(nloc_ids + 1, sizeof *loc_ids);
  maps = calloc(h->nmappings + 1, sizeof *maps);
  mapp = calloc(h->nmappings + 1, sizeof *mapp);
  locs = calloc(h->nlocations + 1, sizeof *locs);
  locp = calloc(h->nlocations + 1, sizeof *locp);
  lines = calloc(nlines + 1, sizeof *lines);
  linep = calloc(nlines + 1, sizeof *linep);
  funcs = calloc(h->nfunctions + 1, sizeof *funcs);
  funcp = calloc(h->nfunctions + 1, sizeof *funcp);
  if (!strings || !samples || !samplep || !labels || !labelp || !values ||
      !loc_ids || !maps || !mapp || !locs || !locp || !lines || !linep ||
      !funcs || !funcp)
    goto out;
  memcpy(strings, h->strings, s0 * sizeof *strings);
  for (i = 0; i < S__N; i++)
    strings[s0 + i] = (char *)(uintptr_t)names[i];
  prof.n_string_table = s0 + S__N;
  prof.string_table = strings;

  /* A comment says what pprof cannot know: whether it is a delta, and
   * what the sampler dropped (its bucket table full). */
  snprintf(comment_text, sizeof comment_text,
           "memtop heap profile of PID %d%s; sampling rate %llu bytes%s",
           (int)h->pid, h->delta ? " (growth over the interval)" : "",
           (unsigned long long)h->rate,
           h->buckets_dropped ? "; samples dropped: bucket table full" : "");
  strings[s0 + S_COMMENT] = comment_text;
  comment[0] = (int64_t)(s0 + S_COMMENT);
  prof.n_comment = 1;
  prof.comment = comment;

  for (i = 0; i < MT_HEAP_NVALUES; i++) {
    perftools__profiles__value_type__init(&vt[i]);
    vt[i].type = (int64_t)(s0 + (size_t)vt_type[i]);
    vt[i].unit = (int64_t)(s0 + (size_t)vt_unit[i]);
    vtp[i] = &vt[i];
  }
  perftools__profiles__value_type__init(&vt[MT_HEAP_NVALUES]);
  vt[MT_HEAP_NVALUES].type = (int64_t)(s0 + S_SPACE);
  vt[MT_HEAP_NVALUES].unit = (int64_t)(s0 + S_BYTES);
  prof.n_sample_type = MT_HEAP_NVALUES;
  prof.sample_type = vtp;
  prof.period_type = &vt[MT_HEAP_NVALUES];
  prof.period = (int64_t)h->rate;
  prof.default_sample_type = (int64_t)(s0 + S_INUSE_SPACE);
  prof.time_nanos = (int64_t)h->time_nanos;
  prof.duration_nanos = (int64_t)h->duration_nanos;

  for (i = 0, k = 0; i < h->nsamples; i++) {
    const mt_heap_sample_t *hs = &h->samples[i];
    pb_sample_t *s = &samples[i];

    perftools__profiles__sample__init(s);
    s->n_value = MT_HEAP_NVALUES;
    s->value = values + i * MT_HEAP_NVALUES;
    memcpy(s->value, hs->value, sizeof hs->value);
    s->n_location_id = hs->nlocations;
    s->location_id = loc_ids + k;
    for (j = 0; j < hs->nlocations; j++)
      loc_ids[k++] = (uint64_t)hs->locations[j] + 1;
    /* Go labels each sample with its objects' size. */
    if (hs->size > 0) {
      perftools__profiles__label__init(&labels[i]);
      labels[i].key = (int64_t)(s0 + S_BYTES);
      labels[i].num = hs->size;
      labelp[i] = &labels[i];
      s->n_label = 1;
      s->label = &labelp[i];
    }
    samplep[i] = s;
  }
  prof.n_sample = h->nsamples;
  prof.sample = samplep;

  for (i = 0; i < h->nmappings; i++) {
    const mt_heap_mapping_t *hm = &h->mappings[i];

    perftools__profiles__mapping__init(&maps[i]);
    maps[i].id = i + 1;
    maps[i].memory_start = hm->start;
    maps[i].memory_limit = hm->limit;
    maps[i].file_offset = hm->offset;
    maps[i].filename = hm->filename;
    maps[i].build_id = hm->build_id;
    /* Set only where memtop resolved the mapping: pprof then keeps
     * these names, and symbolizes the others itself if it can. */
    maps[i].has_functions = hm->symbolized;
    maps[i].has_filenames = hm->symbolized;
    maps[i].has_line_numbers = hm->symbolized;
    maps[i].has_inline_frames = hm->symbolized;
    mapp[i] = &maps[i];
  }
  prof.n_mapping = h->nmappings;
  prof.mapping = mapp;

  for (i = 0, k = 0; i < h->nlocations; i++) {
    const mt_heap_location_t *hl = &h->locations[i];

    perftools__profiles__location__init(&locs[i]);
    locs[i].id = i + 1;
    locs[i].mapping_id = hl->mapping;
    locs[i].address = hl->address;
    locs[i].n_line = hl->nlines;
    locs[i].line = linep + k;
    for (j = 0; j < hl->nlines; j++, k++) {
      perftools__profiles__line__init(&lines[k]);
      lines[k].function_id = (uint64_t)hl->lines[j].function + 1;
      lines[k].line = hl->lines[j].line;
      linep[k] = &lines[k];
    }
    locp[i] = &locs[i];
  }
  prof.n_location = h->nlocations;
  prof.location = locp;

  for (i = 0; i < h->nfunctions; i++) {
    const mt_heap_function_t *hf = &h->functions[i];

    perftools__profiles__function__init(&funcs[i]);
    funcs[i].id = i + 1;
    funcs[i].name = hf->name;
    funcs[i].system_name = hf->system_name;
    funcs[i].filename = hf->filename;
    funcs[i].start_line = hf->start_line;
    funcp[i] = &funcs[i];
  }
  prof.n_function = h->nfunctions;
  prof.function = funcp;

  packed_len = perftools__profiles__profile__get_packed_size(&prof);
  packed = malloc(packed_len + 1);
  if (packed == NULL)
    goto out;
  if (perftools__profiles__profile__pack(&prof, packed) != packed_len) {
    rc = MS_EINVAL;
    goto out;
  }
  rc = gzip_bytes(packed, packed_len, out, len);
out:
  free(packed);
  free(strings);
  free(samples);
  free(samplep);
  free(labels);
  free(labelp);
  free(values);
  free(loc_ids);
  free(maps);
  free(mapp);
  free(locs);
  free(locp);
  free(lines);
  free(linep);
  free(funcs);
  free(funcp);
  return rc;
}
