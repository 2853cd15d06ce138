/*
 * profile.c - the heap profile on the wire: the agent's encoder (no
 * allocation: it writes into the agent's own buffer) and memtop's decoder
 * (hostile bytes in, an ms__profile_t out). The format is in profile.h.
 *
 * The decoder keeps records and mappings in growable arrays, and their
 * stacks, paths and build ids in arenas of blocks that never move: a frame
 * costs what its own bytes cost, whatever came before it (a sender's
 * 200,000 one-record frames are 200,000 small steps, not a copy of every
 * record after each). What a profile may hold is bounded in profile.h.
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
#define FIRST_EXTRA(unw) (7 * (6 + 8) + 6 + ((unw) ? strnlen(unw, 64) : 0))

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
  size_t room =
      max_payload - FRAME_OVERHEAD - FIRST_EXTRA(unwinder) -
      (6 + 4 + MAPPING_FIXED + MS__PROFILE_MAX_PATH + MS__PROFILE_MAX_BUILD_ID);
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
      ms__wire_put_u64(&w, MS__TAG_PROF_FREES_LOST, p->frees_lost);
      if (p->since_unix_ns != 0)
        ms__wire_put_u64(&w, MS__TAG_PROF_SINCE, p->since_unix_ns);
      if (unwinder != NULL)
        ms__wire_put_str(&w, MS__TAG_PROF_UNWINDER, unwinder, 64);
    }
    if (w.overflow)
      return MS_ENOSPC;
    /* Room for the last marker is kept in every frame. Every item fits in
     * a frame of MS__PROFILE_MIN_PAYLOAD, so each frame takes one. */
    for (; k < nitems; k++) {
      size_t need = k < p->nrecords ? rec_size(&p->records[k])
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

/* Stacks, paths and build ids are kept in arenas of fixed-size blocks
 * that never move, so that a record's stack and a mapping's path point
 * into them from the moment they are decoded: no frame copies what an
 * earlier one decoded. Every item fits in one block (a stack of at most
 * MS__PROFILE_MAX_DEPTH words, a path and a build id of at most
 * MS__PROFILE_MAX_PATH + 1 + MS__PROFILE_MAX_BUILD_ID bytes). */
#define WORD_BLOCK (1u << 16)  /* words, at most */
#define BYTE_BLOCK (64u << 10) /* bytes, at most */
/* The first block is small and each next one twice the last, up to the
 * block size: a small profile holds little (memtop holds many at once,
 * against MS__PROFILE_MAX_HELD), a large one few blocks. */
#define FIRST_BLOCK 4096u /* bytes */

typedef struct block_s {
  struct block_s *next;
  size_t used, cap;
  unsigned char data[];
} block_t;

struct ms__profile_store_s;
static int charge(struct ms__profile_store_s *s, size_t n);

/* n bytes (aligned to 8) from the arena whose current block is *head, a
 * new block started when the current one has no room: twice the last
 * (FIRST_BLOCK at first), at most `block` bytes, at least n. NULL when
 * out of memory. */
static void *arena_take(struct ms__profile_store_s *s, block_t **head, size_t n,
                        size_t block) {
  block_t *b = *head;
  n = (n + 7) & ~(size_t)7;
  if (b == NULL || b->cap - b->used < n) {
    size_t cap = b == NULL ? FIRST_BLOCK : 2 * b->cap;
    if (cap > block)
      cap = block;
    if (cap < n)
      cap = n;
    if (charge(s, sizeof *b + cap) != 0)
      return NULL;
    b = malloc(sizeof *b + cap);
    if (b == NULL)
      return NULL;
    b->next = *head;
    b->used = 0;
    b->cap = cap;
    *head = b;
  }
  void *p = b->data + b->used;
  b->used += n;
  return p;
}

static void arena_free(block_t *b) {
  while (b != NULL) {
    block_t *next = b->next;
    free(b);
    b = next;
  }
}

/* The bytes every decoded profile of the process holds, together
 * (MS__PROFILE_MAX_HELD): charged as arrays grow and blocks are taken,
 * given back when a profile is freed (perhaps on another thread). */
static size_t g_held;

struct ms__profile_store_s {
  size_t held;       /* this profile's part of g_held */
  const char *nomem; /* why the last allocation failed */
  ms__profile_record_t *recs;
  size_t nrecs, caprecs;
  ms__profile_mapping_t *maps;
  size_t nmaps, capmaps;
  block_t *words; /* stacks */
  block_t *bytes; /* paths, build ids */
  size_t nwords;  /* stack words of all records */
  size_t nbytes;  /* bytes of all paths and build ids */
  uint64_t frames;
  size_t total; /* payload bytes decoded so far */
  int broken;
  int have_pid, have_start;
  char unwinder[64];
};

/* The stack of a record of depth 0: a valid pointer to nothing. */
static const uint64_t no_stack[1];

/* Takes n bytes of g_held for s: MS_ENOMEM (s->nomem set) if all the
 * profiles being decoded would then hold more than MS__PROFILE_MAX_HELD. */
static int charge(struct ms__profile_store_s *s, size_t n) {
  size_t now = __atomic_add_fetch(&g_held, n, __ATOMIC_RELAXED);
  if (now > MS__PROFILE_MAX_HELD || now < n) {
    __atomic_sub_fetch(&g_held, n, __ATOMIC_RELAXED);
    s->nomem = "profile too large: the profiles memtop is reading at once "
               "would hold more than 192 MiB (other targets' among them)";
    return MS_ENOMEM;
  }
  s->held += n;
  return 0;
}

/* Grows *arr (elements of size esz) to hold at least need, doubling. */
static int grow(struct ms__profile_store_s *s, void **arr, size_t *cap,
                size_t need, size_t esz) {
  if (need <= *cap)
    return 0;
  size_t n = *cap ? *cap : 16;
  while (n < need)
    n *= 2;
  if (n > SIZE_MAX / esz)
    return MS_ENOMEM;
  if (charge(s, (n - *cap) * esz) != 0)
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
  d->store->nomem = "out of memory";
  d->unwinder = "";
  return d;
}

void ms__profile_decoded_free(ms__profile_decoded_t *d) {
  if (d == NULL)
    return;
  struct ms__profile_store_s *s = d->store;
  if (s != NULL) {
    __atomic_sub_fetch(&g_held, s->held, __ATOMIC_RELAXED);
    free(s->recs);
    free(s->maps);
    arena_free(s->words);
    arena_free(s->bytes);
    free(s);
  }
  free(d);
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
    *why = "profile too large: more records than a profile holds (262,144)";
    return MS_EPROTO;
  }
  if (depth > MS__PROFILE_MAX_FRAMES - s->nwords) {
    *why = "profile too large: more stack frames in all than a profile "
           "holds (8,388,608)";
    return MS_EPROTO;
  }
  if (grow(s, (void **)&s->recs, &s->caprecs, s->nrecs + 1, sizeof *s->recs)) {
    *why = s->nomem;
    return MS_ENOMEM;
  }
  uint64_t *stack = (uint64_t *)no_stack;
  if (depth > 0) {
    stack = arena_take(s, &s->words, (size_t)depth * 8, WORD_BLOCK * 8);
    if (stack == NULL) {
      *why = s->nomem;
      return MS_ENOMEM;
    }
  }
  ms__profile_record_t *r = &s->recs[s->nrecs++];
  memset(r, 0, sizeof *r);
  r->size = get64(f);
  r->alloc_objects = get64(f + 8);
  r->alloc_bytes = get64(f + 16);
  r->free_objects = get64(f + 24);
  r->free_bytes = get64(f + 32);
  r->truncated = (get32(f + 40) & 1u) != 0;
  r->depth = depth;
  const uint8_t *st = f + fixed;
  for (uint32_t i = 0; i < depth; i++)
    stack[i] = get64(st + (size_t)i * 8);
  r->stack = stack;
  s->nwords += depth;
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
    *why = "profile too large: more mappings than a profile holds (65,536)";
    return MS_EPROTO;
  }
  const uint8_t *tail = f + fixed;
  /* A path stops at its first NUL, as a C string would. */
  size_t pl = 0;
  while (pl < plen && tail[pl] != 0)
    pl++;
  if (pl + 1 + blen > MS__PROFILE_MAX_MAPPING_BYTES - s->nbytes) {
    *why = "profile too large: more bytes of mapping paths than a profile "
           "holds (8 MiB)";
    return MS_EPROTO;
  }
  if (grow(s, (void **)&s->maps, &s->capmaps, s->nmaps + 1, sizeof *s->maps)) {
    *why = s->nomem;
    return MS_ENOMEM;
  }
  uint8_t *text = arena_take(s, &s->bytes, pl + 1 + blen, BYTE_BLOCK);
  if (text == NULL) {
    *why = s->nomem;
    return MS_ENOMEM;
  }
  s->nbytes += pl + 1 + blen;
  /* Control characters and NULs made '?' (what the tool's outputs do
   * with the rest is theirs: they sanitise what they show). */
  for (size_t i = 0; i < pl; i++)
    text[i] = (tail[i] < 0x20 || tail[i] == 0x7f) ? (uint8_t)'?' : tail[i];
  text[pl] = 0;
  memcpy(text + pl + 1, tail + plen, blen);
  ms__profile_mapping_t *m = &s->maps[s->nmaps++];
  memset(m, 0, sizeof *m);
  m->start = start;
  m->limit = limit;
  m->offset = get64(f + 16);
  m->path = (const char *)text;
  m->build_id = blen > 0 ? text + pl + 1 : NULL;
  m->build_id_len = blen;
  return 0;
}

/* Points the public profile at the store's arrays as they are now (a
 * realloc may have moved them; what they point to never moves). */
static int publish(ms__profile_decoded_t *d) {
  struct ms__profile_store_s *s = d->store;
  d->profile.records = s->recs;
  d->profile.nrecords = (uint32_t)s->nrecs;
  d->profile.mappings = s->maps;
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
static int header_u64(struct ms__profile_store_s *s, uint64_t *dst, uint64_t x,
                      const char **why) {
  if (s->frames > 0 && *dst != x) {
    *why = "profile frames disagree about the profile's identity";
    return MS_EPROTO;
  }
  *dst = x;
  return 0;
}

static int decode_frame(ms__profile_decoded_t *d, const uint8_t *p, size_t len,
                        const char **why) {
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
      if (x > MS__PROFILE_MAX_RATE) {
        *why = "profile with an impossible sampling rate (over 1 TiB)";
        return MS_EPROTO;
      }
      break;
    case MS__TAG_PROF_DROPPED:
      if (get_u64(v, n, &x, why) || header_u64(s, &pf->buckets_dropped, x, why))
        return MS_EPROTO;
      break;
    case MS__TAG_PROF_FREES_LOST:
      if (get_u64(v, n, &x, why) || header_u64(s, &pf->frees_lost, x, why))
        return MS_EPROTO;
      break;
    case MS__TAG_PROF_SINCE:
      if (get_u64(v, n, &x, why) || header_u64(s, &pf->since_unix_ns, x, why))
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
