/*
 * pprof.c - writing profile.proto (see pprof.h) through protobuf-c, with
 * code generated at build time from pprof's own profile.proto (committed
 * beside this file), and gzipped through zlib as it is packed.
 *
 * A Profile message is written as several, one after the other: protobuf
 * reads concatenated messages as one (repeated fields append, a scalar's
 * last value wins), so the string table, mappings and functions go first,
 * then the samples and the locations in batches of a few thousand, then
 * the scalars and sample types last. Only one batch of the generated
 * structs exists at a time and the packed bytes go straight into zlib,
 * which hands its output to the caller's sink: writing a profile of a
 * million locations and sixteen million stack entries costs a few MiB
 * beside the heap model, not the hundreds a whole message would.
 * protobuf-c and zlib are loaded by the first write (libs.h).
 *
 * Every string is the heap's made safe (common/sanitize.h): function
 * names, files and mapping paths come from a stranger's process and
 * binaries, and `go tool pprof -top` prints them on a terminal as they
 * are in the file.
 */
#include "pprof/pprof.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "common/strbuf.h"
#include "memstats.h"
#include "pprof/filter.h"
#include "pprof/libs.h"
#include "pprof/pb_dl.h"
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
  S_DROP_FRAMES,
  S__N
};

/* A batch: at most this many samples or locations, and about this many
 * location ids or lines in them. */
#define BATCH 4096u
#define BATCH_REFS 65536u

/* ---- the gzip stream ---------------------------------------------------- */

typedef struct gz_s {
  ProtobufCBuffer base; /* protobuf-c appends the packed bytes here */
  z_stream z;
  mt_pprof_sink_fn sink;
  void *ctx;
  uint8_t in[64 * 1024], out[64 * 1024];
  size_t nin;
  int err;
} gz_t;

/* Deflates what is staged in g->in (with flush Z_FINISH: all of it and
 * the trailer), handing full output buffers to the sink. */
static void gz_run(gz_t *g, int flush) {
  int rc;

  g->z.next_in = g->in;
  g->z.avail_in = (uInt)g->nin;
  do {
    g->z.next_out = g->out;
    g->z.avail_out = sizeof g->out;
    rc = mt_z.deflate(&g->z, flush);
    if (rc == Z_STREAM_ERROR) {
      g->err = MS_ENOMEM;
      return;
    }
    size_t n = sizeof g->out - g->z.avail_out;
    if (n > 0 && g->err == 0) {
      int s = g->sink(g->ctx, g->out, n);
      if (s != 0)
        g->err = s;
    }
  } while (g->z.avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END));
  g->nin = 0;
}

static void gz_append(ProtobufCBuffer *b, size_t len, const uint8_t *data) {
  gz_t *g = (gz_t *)(void *)b;

  while (len > 0 && g->err == 0) {
    size_t n = sizeof g->in - g->nin;
    if (n > len)
      n = len;
    memcpy(g->in + g->nin, data, n);
    g->nin += n;
    data += n;
    len -= n;
    if (g->nin == sizeof g->in)
      gz_run(g, Z_NO_FLUSH);
  }
}

/* Packs one Profile message (a part of the whole) into the stream. */
static void put_part(gz_t *g, const pb_profile_t *part) {
  if (g->err == 0)
    perftools__profiles__profile__pack_to_buffer(part, &g->base);
}

/* ---- the parts ---------------------------------------------------------- */

/* The string table: the model's strings, sanitised (one that needs no
 * change is the model's own; the copies made are listed in safe[], for
 * the caller to free), then the profile's own names and the comment.
 * Returns 0 or MS_ENOMEM. */
static int fill_strings(const mt_heap_t *h, char *comment_text,
                        char *drop_frames, char **strings, char **safe,
                        size_t *nsafe) {
  static const char *const names[S__N] = {[S_ALLOC_OBJECTS] = "alloc_objects",
                                          [S_ALLOC_SPACE] = "alloc_space",
                                          [S_INUSE_OBJECTS] = "inuse_objects",
                                          [S_INUSE_SPACE] = "inuse_space",
                                          [S_COUNT] = "count",
                                          [S_BYTES] = "bytes",
                                          [S_SPACE] = "space",
                                          [S_COMMENT] = NULL,
                                          [S_DROP_FRAMES] = NULL};
  size_t s0 = h->nstrings, i;

  for (i = 0; i < s0; i++) {
    ms__strbuf_t b = MS_STRBUF_INIT;
    ms__strbuf_put_safe(&b, h->strings[i], (size_t)-1);
    if (b.oom) {
      ms__strbuf_free(&b);
      return MS_ENOMEM;
    }
    if (b.data == NULL || strcmp(b.data, h->strings[i]) == 0) {
      strings[i] = h->strings[i];
      ms__strbuf_free(&b);
    } else {
      strings[i] = safe[(*nsafe)++] = b.data;
    }
  }
  for (i = 0; i < S__N; i++)
    strings[s0 + i] = (char *)(uintptr_t)names[i];
  strings[s0 + S_COMMENT] = comment_text;
  strings[s0 + S_DROP_FRAMES] = drop_frames;
  return 0;
}

/* The mappings, ids from 1 in the model's order. */
static void fill_mappings(const mt_heap_t *h, pb_mapping_t *maps,
                          pb_mapping_t **mapp) {
  size_t i;

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
}

/* The functions, ids from 1 in the model's order. */
static void fill_functions(const mt_heap_t *h, pb_function_t *funcs,
                           pb_function_t **funcp) {
  size_t i;

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
}

/* The string table, the mappings and the functions, in one part. */
static void put_tables(gz_t *g, const mt_heap_t *h, char *comment_text,
                       char *drop_frames) {
  pb_profile_t part = PERFTOOLS__PROFILES__PROFILE__INIT;
  size_t s0 = h->nstrings, i, nsafe = 0;
  char **strings = calloc(s0 + S__N, sizeof *strings);
  char **safe = calloc(s0 + 1, sizeof *safe);
  pb_mapping_t *maps = calloc(h->nmappings + 1, sizeof *maps);
  pb_mapping_t **mapp = calloc(h->nmappings + 1, sizeof *mapp);
  pb_function_t *funcs = calloc(h->nfunctions + 1, sizeof *funcs);
  pb_function_t **funcp = calloc(h->nfunctions + 1, sizeof *funcp);
  int rc = MS_ENOMEM;

  if (strings && safe && maps && mapp && funcs && funcp)
    rc = fill_strings(h, comment_text, drop_frames, strings, safe, &nsafe);
  if (rc != 0) {
    g->err = rc;
    goto out;
  }
  part.n_string_table = s0 + S__N;
  part.string_table = strings;
  fill_mappings(h, maps, mapp);
  part.n_mapping = h->nmappings;
  part.mapping = mapp;
  fill_functions(h, funcs, funcp);
  part.n_function = h->nfunctions;
  part.function = funcp;
  put_part(g, &part);
out:
  for (i = 0; safe != NULL && i < nsafe; i++)
    free(safe[i]);
  free(safe);
  free(strings);
  free(maps);
  free(mapp);
  free(funcs);
  free(funcp);
}

/* The samples, a batch at a time. */
static void put_samples(gz_t *g, const mt_heap_t *h, int64_t bytes_key) {
  pb_sample_t *samples = calloc(BATCH, sizeof *samples);
  pb_sample_t **samplep = calloc(BATCH, sizeof *samplep);
  pb_label_t *labels = calloc(BATCH, sizeof *labels);
  pb_label_t **labelp = calloc(BATCH, sizeof *labelp);
  int64_t *values = calloc(BATCH * MT_HEAP_NVALUES, sizeof *values);
  uint64_t *ids = calloc(BATCH_REFS + MS__PROFILE_MAX_DEPTH, sizeof *ids);
  size_t i = 0, j;

  if (!samples || !samplep || !labels || !labelp || !values || !ids) {
    g->err = MS_ENOMEM;
    goto out;
  }
  while (i < h->nsamples && g->err == 0) {
    pb_profile_t part = PERFTOOLS__PROFILES__PROFILE__INIT;
    size_t n = 0, k = 0;

    for (; i < h->nsamples && n < BATCH && k < BATCH_REFS; i++, n++) {
      const mt_heap_sample_t *hs = &h->samples[i];
      pb_sample_t *s = &samples[n];

      perftools__profiles__sample__init(s);
      s->n_value = MT_HEAP_NVALUES;
      s->value = values + n * MT_HEAP_NVALUES;
      memcpy(s->value, hs->value, sizeof hs->value);
      s->n_location_id = hs->nlocations;
      s->location_id = ids + k;
      for (j = 0; j < hs->nlocations; j++)
        ids[k++] = (uint64_t)hs->locations[j] + 1;
      /* Go labels each sample with its objects' size. */
      if (hs->size > 0) {
        perftools__profiles__label__init(&labels[n]);
        labels[n].key = bytes_key;
        labels[n].num = hs->size;
        labelp[n] = &labels[n];
        s->n_label = 1;
        s->label = &labelp[n];
      }
      samplep[n] = s;
    }
    part.n_sample = n;
    part.sample = samplep;
    put_part(g, &part);
  }
out:
  free(samples);
  free(samplep);
  free(labels);
  free(labelp);
  free(values);
  free(ids);
}

/* The locations and their lines, a batch at a time. */
static void put_locations(gz_t *g, const mt_heap_t *h) {
  pb_location_t *locs = calloc(BATCH, sizeof *locs);
  pb_location_t **locp = calloc(BATCH, sizeof *locp);
  pb_line_t *lines = NULL, **linep = NULL;
  size_t caplines = 0, i = 0, j;

  if (!locs || !locp) {
    g->err = MS_ENOMEM;
    goto out;
  }
  while (i < h->nlocations && g->err == 0) {
    pb_profile_t part = PERFTOOLS__PROFILES__PROFILE__INIT;
    size_t n = 0, k = 0, need = 0, e;

    for (e = i; e < h->nlocations && e - i < BATCH && need < BATCH_REFS; e++)
      need += h->locations[e].nlines;
    if (need > caplines) {
      free(lines);
      free(linep);
      lines = calloc(need, sizeof *lines);
      linep = calloc(need, sizeof *linep);
      caplines = need;
      if (lines == NULL || linep == NULL) {
        g->err = MS_ENOMEM;
        goto out;
      }
    }
    for (; i < e; i++, n++) {
      const mt_heap_location_t *hl = &h->locations[i];

      perftools__profiles__location__init(&locs[n]);
      locs[n].id = i + 1;
      locs[n].mapping_id = hl->mapping;
      locs[n].address = hl->address;
      locs[n].n_line = hl->nlines;
      locs[n].line = linep != NULL ? linep + k : NULL;
      for (j = 0; j < hl->nlines; j++, k++) {
        perftools__profiles__line__init(&lines[k]);
        lines[k].function_id = (uint64_t)hl->lines[j].function + 1;
        lines[k].line = hl->lines[j].line;
        linep[k] = &lines[k];
      }
      locp[n] = &locs[n];
    }
    part.n_location = n;
    part.location = locp;
    put_part(g, &part);
  }
out:
  free(locs);
  free(locp);
  free(lines);
  free(linep);
}

/* The scalars and the sample types, last: whatever an earlier part said
 * of them, the last value wins. */
static void put_header(gz_t *g, const mt_heap_t *h, size_t s0) {
  static const int vt_type[MT_HEAP_NVALUES] = {S_ALLOC_OBJECTS, S_ALLOC_SPACE,
                                               S_INUSE_OBJECTS, S_INUSE_SPACE};
  static const int vt_unit[MT_HEAP_NVALUES] = {S_COUNT, S_BYTES, S_COUNT,
                                               S_BYTES};
  pb_profile_t part = PERFTOOLS__PROFILES__PROFILE__INIT;
  pb_value_type_t vt[MT_HEAP_NVALUES + 1], *vtp[MT_HEAP_NVALUES];
  int64_t comment[1];
  size_t i;

  for (i = 0; i < MT_HEAP_NVALUES; i++) {
    perftools__profiles__value_type__init(&vt[i]);
    vt[i].type = (int64_t)(s0 + (size_t)vt_type[i]);
    vt[i].unit = (int64_t)(s0 + (size_t)vt_unit[i]);
    vtp[i] = &vt[i];
  }
  perftools__profiles__value_type__init(&vt[MT_HEAP_NVALUES]);
  vt[MT_HEAP_NVALUES].type = (int64_t)(s0 + S_SPACE);
  vt[MT_HEAP_NVALUES].unit = (int64_t)(s0 + S_BYTES);
  part.n_sample_type = MT_HEAP_NVALUES;
  part.sample_type = vtp;
  part.period_type = &vt[MT_HEAP_NVALUES];
  part.period = (int64_t)h->rate;
  part.default_sample_type = (int64_t)(s0 + S_INUSE_SPACE);
  part.time_nanos = (int64_t)h->time_nanos;
  part.duration_nanos = (int64_t)h->duration_nanos;
  comment[0] = (int64_t)(s0 + S_COMMENT);
  part.n_comment = 1;
  part.comment = comment;
  /* The allocation wrappers, which pprof cuts from every stack as it
   * reads the file (Profile.RemoveUninteresting) as memtop's own lists
   * do (filter.h): its sites are theirs, while the file keeps every
   * frame. */
  part.drop_frames = (int64_t)(s0 + S_DROP_FRAMES);
  put_part(g, &part);
}

int mt_pprof_write(const mt_heap_t *h, mt_pprof_sink_fn sink, void *ctx) {
  char comment_text[480];
  char *drop_frames;
  size_t drop_len;
  gz_t *g;
  int rc;

  if (h == NULL || sink == NULL || h->nstrings == 0)
    return MS_EINVAL;
  if ((rc = mt_libs_pb()) != 0)
    return rc;
  /* The wrappers as the filter matches them: pprof matches names whole
   * and as they are, so a clone's suffix ("xmalloc.constprop.0") is part
   * of the expression. */
  drop_len = strlen(MT_HEAP_WRAPPERS) + strlen(MT_HEAP_CLONE_SUFFIX) + 8;
  drop_frames = malloc(drop_len);
  if (drop_frames == NULL)
    return MS_ENOMEM;
  snprintf(drop_frames, drop_len, "(%s)(%s)?", MT_HEAP_WRAPPERS,
           MT_HEAP_CLONE_SUFFIX);
  g = calloc(1, sizeof *g);
  if (g == NULL) {
    free(drop_frames);
    return MS_ENOMEM;
  }
  g->base.append = gz_append;
  g->sink = sink;
  g->ctx = ctx;
  /* 15 + 16: a gzip header and trailer, as pprof expects on disk. */
  if (mt_z.deflateInit2_(&g->z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
                         Z_DEFAULT_STRATEGY, ZLIB_VERSION,
                         (int)sizeof(z_stream)) != Z_OK) {
    free(g);
    free(drop_frames);
    return MS_ENOMEM;
  }
  /* A comment says what pprof cannot know: whether it is a delta, since
   * when the target samples (memtop attach --track), what the sampler
   * dropped (its bucket table full), frees the target could not record,
   * and whether memtop cut impossible figures. */
  char lost[96] = "", since[160] = "";
  if (h->frees_lost > 0)
    snprintf(lost, sizeof lost,
             "; %llu frees of sampled blocks not recorded (shown in use)",
             (unsigned long long)h->frees_lost);
  if (mt_heap_since_text(h, since + 2, sizeof since - 2))
    memcpy(since, "; ", 2);
  snprintf(comment_text, sizeof comment_text,
           "memtop heap profile of PID %d%s; sampling rate %llu bytes%s%s%s%s",
           (int)h->pid, h->delta ? " (growth over the interval)" : "",
           (unsigned long long)h->rate, since,
           h->buckets_dropped ? "; samples dropped: bucket table full" : "",
           lost,
           h->capped ? "; impossible figures cut to keep sums in range" : "");
  put_tables(g, h, comment_text, drop_frames);
  put_samples(g, h, (int64_t)(h->nstrings + S_BYTES));
  put_locations(g, h);
  put_header(g, h, h->nstrings);
  if (g->err == 0)
    gz_run(g, Z_FINISH);
  mt_z.deflateEnd(&g->z);
  rc = g->err;
  free(g);
  free(drop_frames);
  return rc;
}

/* ---- into memory -------------------------------------------------------- */

typedef struct mem_sink_s {
  uint8_t *data;
  size_t len, cap;
} mem_sink_t;

static int to_memory(void *ctx, const void *data, size_t len) {
  mem_sink_t *m = ctx;

  if (len > m->cap - m->len) {
    size_t cap = m->cap ? m->cap : 64 * 1024;
    uint8_t *p;
    while (cap - m->len < len)
      cap *= 2;
    p = realloc(m->data, cap);
    if (p == NULL)
      return MS_ENOMEM;
    m->data = p;
    m->cap = cap;
  }
  memcpy(m->data + m->len, data, len);
  m->len += len;
  return 0;
}

int mt_pprof_encode(const mt_heap_t *h, uint8_t **out, size_t *len) {
  mem_sink_t m = {NULL, 0, 0};
  int rc;

  if (out == NULL || len == NULL)
    return MS_EINVAL;
  *out = NULL;
  *len = 0;
  rc = mt_pprof_write(h, to_memory, &m);
  if (rc != 0) {
    free(m.data);
    return rc;
  }
  *out = m.data;
  *len = m.len;
  return 0;
}
