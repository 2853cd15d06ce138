/*
 * profile.c - the heap profile on the wire: the agent's encoder (no
 * allocation: it writes into the agent's own buffer) and memtop's decoder
 * (hostile bytes in, an ms__profile_t out). The format is in profile.h.
 *
 * The decoder keeps what it decodes in growable arrays of its own; records
 * and mappings hold offsets into them while frames arrive (a realloc moves
 * them), and the pointers of the public ms__profile_t are set again after
 * each frame.
 */
#include "wire/profile.h"

#include <stdlib.h>
#include <string.h>

#include "memstats.h"
#include "wire/wire.h"
#include "wire/le.h"

#define RECORD_FIXED 48u
#define MAPPING_FIXED 32u


/* ------------------------------------------------------------------------
 * Encoder
 * ------------------------------------------------------------------------ */
static uint32_t rec_depth(const ms__profile_record_t *r) {
  return r->depth > MS__PROFILE_MAX_DEPTH ? MS__PROFILE_MAX_DEPTH : r->depth;
}

static size_t rec_size(const ms__profile_record_t *r) {
  return 6 + 4 + RECORD_FIXED + (size_t)rec_depth(r) * 8;
}

static size_t map_path_len(const ms__profile_mapping_t *m) {
  return m->path == NULL ? 0 : strnlen(m->path, MS__PROFILE_MAX_PATH);
}

static uint32_t map_bid_len(const ms__profile_mapping_t *m) {
  if (m->build_id == NULL)
    return 0;
  return m->build_id_len > MS__PROFILE_MAX_BUILD_ID ? MS__PROFILE_MAX_BUILD_ID
                                                    : m->build_id_len;
}

static size_t map_size(const ms__profile_mapping_t *m) {
  return 6 + 4 + MAPPING_FIXED + map_path_len(m) + map_bid_len(m);
}

/* What every frame may carry besides its records: the header, the chunk
 * and last markers, and the first frame's identity. */
#define FRAME_OVERHEAD (MS__WIRE_HEADER + 2 * (6 + 8))
#define FIRST_EXTRA(unw) (5 * (6 + 8) + 6 + ((unw) ? strnlen(unw, 64) : 0))

size_t ms__profile_encoded_bound(const ms__profile_t *p, const char *unwinder,
                                 size_t max_payload) {
  if (max_payload < MS__PROFILE_MIN_PAYLOAD)
    return 0;
  /* Each item fits in a frame by itself (the largest record is 2,106
   * bytes, the largest mapping 4,202), so packing wastes at most one
   * item's room per frame: bound the frame count by total / (payload -
   * largest item), plus one. */
  size_t items = 0;
  for (uint32_t i = 0; i < p->nrecords; i++)
    items += rec_size(&p->records[i]);
  for (uint32_t i = 0; i < p->nmappings; i++)
    items += map_size(&p->mappings[i]);
  size_t room = max_payload - FRAME_OVERHEAD - FIRST_EXTRA(unwinder) -
                (6 + 4 + MAPPING_FIXED + MS__PROFILE_MAX_PATH +
                 MS__PROFILE_MAX_BUILD_ID);
  size_t frames = items / room + 2;
  return items + frames * (FRAME_OVERHEAD + 6 + 8) + FIRST_EXTRA(unwinder);
}

static void put_record(ms__wire_writer_t *w, const ms__profile_record_t *r) {
  uint32_t depth = rec_depth(r);
  size_t n = 4 + RECORD_FIXED + (size_t)depth * 8;
  uint8_t *v = ms__wire_put_record(w, MS__TAG_PROF_RECORD, n);
  if (v == NULL)
    return;
  put32(v, RECORD_FIXED);
  put64(v + 4, r->size);
  put64(v + 12, r->alloc_objects);
  put64(v + 20, r->alloc_bytes);
  put64(v + 28, r->free_objects);
  put64(v + 36, r->free_bytes);
  put32(v + 44, (r->truncated || depth < r->depth) ? 1u : 0u);
  put32(v + 48, depth);
  for (uint32_t i = 0; i < depth; i++)
    put64(v + 52 + (size_t)i * 8, r->stack[i]);
}

static void put_mapping(ms__wire_writer_t *w, const ms__profile_mapping_t *m) {
  size_t plen = map_path_len(m);
  uint32_t blen = map_bid_len(m);
  size_t n = 4 + MAPPING_FIXED + plen + blen;
  uint8_t *v = ms__wire_put_record(w, MS__TAG_PROF_MAPPING, n);
  if (v == NULL)
    return;
  put32(v, MAPPING_FIXED);
  put64(v + 4, m->start);
  put64(v + 12, m->limit);
  put64(v + 20, m->offset);
  put32(v + 28, (uint32_t)plen);
  put32(v + 32, blen);
  if (plen > 0)
    memcpy(v + 36, m->path, plen);
  if (blen > 0)
    memcpy(v + 36 + plen, m->build_id, blen);
}

int ms__profile_encode(const ms__profile_t *p, const char *unwinder,
                       uint8_t *buf, size_t cap, size_t max_payload,
                       size_t *len) {
  if (max_payload < MS__PROFILE_MIN_PAYLOAD)
    return MS_EINVAL;
  ms__wire_writer_t w;
  ms__wire_writer_init(&w, buf, cap);
  /* Items are records, then mappings: item k < nrecords is a record. */
  size_t nitems = (size_t)p->nrecords + p->nmappings;
  size_t k = 0;
  uint64_t chunk = 0;
  do {
    ms__wire_begin(&w, MS__MSG_PROFILE);
    size_t frame = w.len - MS__WIRE_HEADER;
    ms__wire_put_u64(&w, MS__TAG_PROF_CHUNK, chunk);
    if (chunk == 0) {
      /* A pid the profile does not know (0) is left out, not sent as 0,
       * which a reader refuses. */
      if (p->pid > 0)
        ms__wire_put_u64(&w, MS__TAG_PID, (uint64_t)(int64_t)p->pid);
      ms__wire_put_u64(&w, MS__TAG_START_TIME, p->start_time);
      ms__wire_put_u64(&w, MS__TAG_TIME_UNIX, p->time_unix_ns);
      ms__wire_put_u64(&w, MS__TAG_PROF_RATE, p->rate);
      ms__wire_put_u64(&w, MS__TAG_PROF_DROPPED, p->buckets_dropped);
      if (unwinder != NULL)
        ms__wire_put_str(&w, MS__TAG_PROF_UNWINDER, unwinder, 64);
    }
    if (w.overflow)
      return MS_ENOSPC;
    /* Room for the last marker is kept in every frame. Every item fits in
     * a frame of MS__PROFILE_MIN_PAYLOAD, so each frame takes one. */
    for (; k < nitems; k++) {
      size_t need = k < p->nrecords
                        ? rec_size(&p->records[k])
                        : map_size(&p->mappings[k - p->nrecords]);
      if (w.len - frame - MS__WIRE_HEADER + need + (6 + 8) > max_payload)
        break;
      if (k < p->nrecords)
        put_record(&w, &p->records[k]);
      else
        put_mapping(&w, &p->mappings[k - p->nrecords]);
      if (w.overflow)
        return MS_ENOSPC;
    }
    if (k == nitems)
      ms__wire_put_u64(&w, MS__TAG_PROF_LAST, 1);
    if (ms__wire_end(&w) != 0)
      return MS_ENOSPC;
    chunk++;
  } while (k < nitems);
  *len = w.len;
  return 0;
}

/* ------------------------------------------------------------------------
 * Decoder
 * ------------------------------------------------------------------------ */
typedef struct rec_s {
  ms__profile_record_t r;
  size_t stack_off; /* into store->words */
} rec_t;

typedef struct map_s {
  ms__profile_mapping_t m;
  size_t path_off, bid_off; /* into store->bytes */
} map_t;

struct ms__profile_store_s {
  rec_t *recs;
  size_t nrecs, caprecs;
  map_t *maps;
  size_t nmaps, capmaps;
  uint64_t *words;
  size_t nwords, capwords;
  uint8_t *bytes;
  size_t nbytes, capbytes;
  ms__profile_record_t *out_recs;
  ms__profile_mapping_t *out_maps;
  uint64_t frames;
  size_t total; /* payload bytes decoded so far */
  int broken;
  int have_pid, have_start;
  char unwinder[64];
};

/* Grows *arr (elements of size esz) to hold at least need. */
static int grow(void **arr, size_t *cap, size_t need, size_t esz) {
  if (need <= *cap)
    return 0;
  size_t n = *cap ? *cap : 16;
  while (n < need)
    n *= 2;
  if (n > SIZE_MAX / esz)
    return MS_ENOMEM;
  void *p = realloc(*arr, n * esz);
  if (p == NULL)
    return MS_ENOMEM;
  *arr = p;
  *cap = n;
  return 0;
}

ms__profile_decoded_t *ms__profile_decoded_new(void) {
  ms__profile_decoded_t *d = calloc(1, sizeof *d);
  if (d == NULL)
    return NULL;
  d->store = calloc(1, sizeof *d->store);
  if (d->store == NULL) {
    free(d);
    return NULL;
  }
  d->unwinder = "";
  return d;
}

void ms__profile_decoded_free(ms__profile_decoded_t *d) {
  if (d == NULL)
    return;
  struct ms__profile_store_s *s = d->store;
  if (s != NULL) {
    free(s->recs);
    free(s->maps);
    free(s->words);
    free(s->bytes);
    free(s->out_recs);
    free(s->out_maps);
    free(s);
  }
  free(d);
}

/* Copies n bytes of a path into the byte arena, control characters and
 * NULs made '?', and a NUL after. */
static int add_text(struct ms__profile_store_s *s, const uint8_t *v, size_t n,
                    size_t *off) {
  if (grow((void **)&s->bytes, &s->capbytes, s->nbytes + n + 1, 1))
    return MS_ENOMEM;
  *off = s->nbytes;
  for (size_t i = 0; i < n; i++)
    s->bytes[s->nbytes + i] =
        (v[i] < 0x20 || v[i] == 0x7f) ? (uint8_t)'?' : v[i];
  s->bytes[s->nbytes + n] = 0;
  s->nbytes += n + 1;
  return 0;
}

static int decode_record(struct ms__profile_store_s *s, const uint8_t *v,
                         uint32_t n, const char **why) {
  if (n < 4 || get32(v) < RECORD_FIXED || get32(v) > n - 4) {
    *why = "profile record shorter than its fixed part";
    return MS_EPROTO;
  }
  uint32_t fixed = get32(v);
  const uint8_t *f = v + 4;
  uint32_t depth = get32(f + 44);
  if (depth > MS__PROFILE_MAX_DEPTH) {
    *why = "profile record deeper than the limit";
    return MS_EPROTO;
  }
  if ((uint64_t)depth * 8 > (uint64_t)(n - 4 - fixed)) {
    *why = "profile record shorter than its stack";
    return MS_EPROTO;
  }
  if (s->nrecs >= MS__PROFILE_MAX_RECORDS) {
    *why = "profile with too many records";
    return MS_EPROTO;
  }
  if (grow((void **)&s->recs, &s->caprecs, s->nrecs + 1, sizeof *s->recs) ||
      grow((void **)&s->words, &s->capwords, s->nwords + depth + 1,
           sizeof *s->words))
    return MS_ENOMEM;
  rec_t *r = &s->recs[s->nrecs++];
  memset(r, 0, sizeof *r);
  r->r.size = get64(f);
  r->r.alloc_objects = get64(f + 8);
  r->r.alloc_bytes = get64(f + 16);
  r->r.free_objects = get64(f + 24);
  r->r.free_bytes = get64(f + 32);
  r->r.truncated = (get32(f + 40) & 1u) != 0;
  r->r.depth = depth;
  r->stack_off = s->nwords;
  const uint8_t *st = f + fixed;
  for (uint32_t i = 0; i < depth; i++)
    s->words[s->nwords++] = get64(st + (size_t)i * 8);
  return 0;
}

static int decode_mapping(struct ms__profile_store_s *s, const uint8_t *v,
                          uint32_t n, const char **why) {
  if (n < 4 || get32(v) < MAPPING_FIXED || get32(v) > n - 4) {
    *why = "profile mapping shorter than its fixed part";
    return MS_EPROTO;
  }
  uint32_t fixed = get32(v);
  const uint8_t *f = v + 4;
  uint64_t start = get64(f), limit = get64(f + 8);
  uint32_t plen = get32(f + 24), blen = get32(f + 28);
  if (start > limit) {
    *why = "profile mapping ends before it starts";
    return MS_EPROTO;
  }
  if (plen > MS__PROFILE_MAX_PATH || blen > MS__PROFILE_MAX_BUILD_ID ||
      (uint64_t)plen + blen > (uint64_t)(n - 4 - fixed)) {
    *why = "profile mapping path or build id too long";
    return MS_EPROTO;
  }
  if (s->nmaps >= MS__PROFILE_MAX_MAPPINGS) {
    *why = "profile with too many mappings";
    return MS_EPROTO;
  }
  if (grow((void **)&s->maps, &s->capmaps, s->nmaps + 1, sizeof *s->maps))
    return MS_ENOMEM;
  map_t m;
  memset(&m, 0, sizeof m);
  m.m.start = start;
  m.m.limit = limit;
  m.m.offset = get64(f + 16);
  m.m.build_id_len = blen;
  const uint8_t *tail = f + fixed;
  /* A path stops at its first NUL, as a C string would. */
  size_t pl = 0;
  while (pl < plen && tail[pl] != 0)
    pl++;
  if (add_text(s, tail, pl, &m.path_off))
    return MS_ENOMEM;
  if (blen > 0) {
    if (grow((void **)&s->bytes, &s->capbytes, s->nbytes + blen, 1))
      return MS_ENOMEM;
    m.bid_off = s->nbytes;
    memcpy(s->bytes + s->nbytes, tail + plen, blen);
    s->nbytes += blen;
  }
  s->maps[s->nmaps++] = m;
  return 0;
}

/* Points the public profile at the store's arrays as they are now. */
static int publish(ms__profile_decoded_t *d) {
  struct ms__profile_store_s *s = d->store;
  size_t nr = s->nrecs ? s->nrecs : 1, nm = s->nmaps ? s->nmaps : 1;
  ms__profile_record_t *r = realloc(s->out_recs, nr * sizeof *r);
  if (r == NULL)
    return MS_ENOMEM;
  s->out_recs = r;
  ms__profile_mapping_t *m = realloc(s->out_maps, nm * sizeof *m);
  if (m == NULL)
    return MS_ENOMEM;
  s->out_maps = m;
  for (size_t i = 0; i < s->nrecs; i++) {
    r[i] = s->recs[i].r;
    r[i].stack = s->words + s->recs[i].stack_off;
  }
  for (size_t i = 0; i < s->nmaps; i++) {
    m[i] = s->maps[i].m;
    m[i].path = (const char *)s->bytes + s->maps[i].path_off;
    m[i].build_id =
        m[i].build_id_len ? s->bytes + s->maps[i].bid_off : NULL;
  }
  d->profile.records = r;
  d->profile.nrecords = (uint32_t)s->nrecs;
  d->profile.mappings = m;
  d->profile.nmappings = (uint32_t)s->nmaps;
  d->unwinder = s->unwinder;
  return 0;
}

static int get_u64(const uint8_t *v, uint32_t n, uint64_t *out,
                   const char **why) {
  if (n < 8) {
    *why = "integer record shorter than 8 bytes";
    return MS_EPROTO;
  }
  *out = get64(v);
  return 0;
}

/* A header value: set by the first frame, repeated only identically. */
static int header_u64(struct ms__profile_store_s *s, uint64_t *dst,
                      uint64_t x, const char **why) {
  if (s->frames > 0 && *dst != x) {
    *why = "profile frames disagree about the profile's identity";
    return MS_EPROTO;
  }
  *dst = x;
  return 0;
}

static int decode_frame(ms__profile_decoded_t *d, const uint8_t *p,
                        size_t len, const char **why) {
  struct ms__profile_store_s *s = d->store;
  ms__profile_t *pf = &d->profile;
  if (d->complete) {
    *why = "profile frame after the last one";
    return MS_EPROTO;
  }
  if (len > MS__PROFILE_MAX_TOTAL - s->total) {
    *why = "profile larger than the limit";
    return MS_EPROTO;
  }
  s->total += len;
  size_t off = 0;
  int have_chunk = 0, last = 0;
  while (off < len) {
    if (len - off < 6) {
      *why = "truncated record header";
      return MS_EPROTO;
    }
    uint16_t tag = get16(p + off);
    uint32_t n = get32(p + off + 2);
    if (len - off - 6 < n) {
      *why = "record length past the end of the message";
      return MS_EPROTO;
    }
    const uint8_t *v = p + off + 6;
    off += 6 + (size_t)n;
    uint64_t x = 0;
    int r = 0;
    switch (tag) {
    case MS__TAG_PROF_CHUNK:
      if (get_u64(v, n, &x, why))
        return MS_EPROTO;
      if (have_chunk || x != s->frames) {
        *why = "profile frame out of order";
        return MS_EPROTO;
      }
      have_chunk = 1;
      break;
    case MS__TAG_PROF_LAST:
      if (get_u64(v, n, &x, why))
        return MS_EPROTO;
      last = x != 0;
      break;
    case MS__TAG_PID: {
      if (get_u64(v, n, &x, why))
        return MS_EPROTO;
      uint64_t old = (uint64_t)(int64_t)pf->pid;
      if ((int64_t)x <= 0 || (int64_t)x > INT32_MAX ||
          (s->have_pid && old != x)) {
        *why = "profile with an impossible or changing pid";
        return MS_EPROTO;
      }
      pf->pid = (int32_t)x;
      s->have_pid = 1;
      break;
    }
    case MS__TAG_START_TIME:
      if (get_u64(v, n, &x, why))
        return MS_EPROTO;
      if (s->have_start && pf->start_time != x) {
        *why = "profile frames disagree about the start time";
        return MS_EPROTO;
      }
      pf->start_time = x;
      s->have_start = 1;
      break;
    case MS__TAG_TIME_UNIX:
      if (get_u64(v, n, &x, why) || header_u64(s, &pf->time_unix_ns, x, why))
        return MS_EPROTO;
      break;
    case MS__TAG_PROF_RATE:
      if (get_u64(v, n, &x, why) || header_u64(s, &pf->rate, x, why))
        return MS_EPROTO;
      break;
    case MS__TAG_PROF_DROPPED:
      if (get_u64(v, n, &x, why) ||
          header_u64(s, &pf->buckets_dropped, x, why))
        return MS_EPROTO;
      break;
    case MS__TAG_PROF_UNWINDER: {
      size_t i = 0;
      memset(s->unwinder, 0, sizeof s->unwinder);
      for (; i < n && i + 1 < sizeof s->unwinder && v[i] != 0; i++)
        s->unwinder[i] = (v[i] < 0x20 || v[i] == 0x7f) ? '?' : (char)v[i];
      break;
    }
    case MS__TAG_PROF_RECORD:
      r = decode_record(s, v, n, why);
      break;
    case MS__TAG_PROF_MAPPING:
      r = decode_mapping(s, v, n, why);
      break;
    default:
      break; /* a newer sender's: skipped */
    }
    if (r != 0)
      return r;
  }
  if (!have_chunk) {
    *why = "profile frame without its chunk number";
    return MS_EPROTO;
  }
  s->frames++;
  if (last)
    d->complete = 1;
  return publish(d);
}

int ms__profile_decode_frame(ms__profile_decoded_t *d, const uint8_t *payload,
                             size_t len, const char **why) {
  const char *dummy;
  if (why == NULL)
    why = &dummy;
  if (d == NULL || d->store == NULL || (payload == NULL && len > 0)) {
    *why = "no decoder";
    return MS_EINVAL;
  }
  if (d->store->broken) {
    *why = "an earlier frame of this profile was malformed";
    return MS_EPROTO;
  }
  int r = decode_frame(d, payload, len, why);
  if (r != 0)
    d->store->broken = 1;
  return r;
}

int ms__profile_decode(const uint8_t *payload, size_t len,
                       ms__profile_decoded_t **out, const char **why) {
  const char *dummy;
  if (why == NULL)
    why = &dummy;
  *out = NULL;
  ms__profile_decoded_t *d = ms__profile_decoded_new();
  if (d == NULL)
    return MS_ENOMEM;
  int r = ms__profile_decode_frame(d, payload, len, why);
  if (r == 0 && !d->complete) {
    *why = "profile continues past this frame";
    r = MS_EPROTO;
  }
  if (r != 0) {
    ms__profile_decoded_free(d);
    return r;
  }
  *out = d;
  return 0;
}

int ms__profile_decode_frames(const uint8_t *buf, size_t len,
                              ms__profile_decoded_t **out, size_t *used,
                              const char **why) {
  const char *dummy;
  if (why == NULL)
    why = &dummy;
  *out = NULL;
  ms__profile_decoded_t *d = ms__profile_decoded_new();
  if (d == NULL)
    return MS_ENOMEM;
  size_t off = 0;
  int r = 0;
  while (!d->complete) {
    ms__frame_t f;
    r = ms__wire_frame(buf + off, len - off, MS__WIRE_MAX_PAYLOAD, &f, why);
    if (r == MS_EAGAIN) {
      *why = "profile frames end before the last one";
      r = MS_EPROTO;
    }
    if (r != 0)
      break;
    const uint8_t *payload = buf + off + MS__WIRE_HEADER;
    off += MS__WIRE_HEADER + f.length;
    if (f.type == MS__MSG_ERROR) {
      char reason[8];
      int code = MS_EPROTO;
      ms__wire_decode_error(payload, f.length, &code, reason, sizeof reason,
                            why);
      *why = "the target answered with an error";
      r = code;
      break;
    }
    if (f.type != MS__MSG_PROFILE) {
      *why = "a frame other than a profile among the profile's";
      r = MS_EPROTO;
      break;
    }
    r = ms__profile_decode_frame(d, payload, f.length, why);
    if (r != 0)
      break;
  }
  if (used != NULL)
    *used = off;
  if (r != 0) {
    ms__profile_decoded_free(d);
    return r;
  }
  *out = d;
  return 0;
}
