/*
 * wire.c - encoding and decoding of the agent protocol (see wire.h).
 *
 * Everything is explicit little-endian byte by byte, so the format does not
 * depend on the host's layout of ms_snapshot_t; the field table in
 * common/fields.h says where each snapshot field lives.
 */
#include "wire/wire.h"
#include "wire/le.h"

#include <string.h>

#include "common/fields.h"

/* ------------------------------------------------------------------------
 * Little-endian helpers
 * ------------------------------------------------------------------------ */

void ms__wire_patch_u64(uint8_t *buf, uint64_t v) {
  put64(buf, v);
}

/* ------------------------------------------------------------------------
 * Writer
 * ------------------------------------------------------------------------ */
void ms__wire_writer_init(ms__wire_writer_t *w, uint8_t *buf, size_t cap) {
  w->buf = buf;
  w->cap = cap;
  w->len = 0;
  w->frame = 0;
  w->overflow = 0;
}

/* Reserves n bytes at the end, or marks the writer overflowed. */
static uint8_t *reserve(ms__wire_writer_t *w, size_t n) {
  if (w->overflow || w->cap - w->len < n) {
    w->overflow = 1;
    return NULL;
  }
  uint8_t *p = w->buf + w->len;
  w->len += n;
  return p;
}

void ms__wire_begin(ms__wire_writer_t *w, ms__msg_type_t type) {
  /* A frame that overflowed is dropped whole, so a new frame starts
   * clean even after a failed one. */
  w->overflow = 0;
  w->frame = w->len;
  uint8_t *p = reserve(w, MS__WIRE_HEADER);
  if (p == NULL)
    return;
  memcpy(p, MS__WIRE_MAGIC, 4);
  put16(p + 4, MS__WIRE_VERSION);
  put16(p + 6, (uint16_t)type);
  put32(p + 8, 0);
  put32(p + 12, 0);
}

static uint8_t *put_record(ms__wire_writer_t *w, uint16_t tag, size_t n) {
  if (n > UINT32_MAX) {
    w->overflow = 1;
    return NULL;
  }
  uint8_t *p = reserve(w, 6 + n);
  if (p == NULL)
    return NULL;
  put16(p, tag);
  put32(p + 2, (uint32_t)n);
  return p + 6;
}

uint8_t *ms__wire_put_record(ms__wire_writer_t *w, uint16_t tag, size_t n) {
  return put_record(w, tag, n);
}

void ms__wire_put_u64(ms__wire_writer_t *w, uint16_t tag, uint64_t v) {
  uint8_t *p = put_record(w, tag, 8);
  if (p != NULL)
    put64(p, v);
}

void ms__wire_put_str(ms__wire_writer_t *w, uint16_t tag, const char *s,
                      size_t maxlen) {
  size_t n = s == NULL ? 0 : strnlen(s, maxlen);
  uint8_t *p = put_record(w, tag, n);
  if (p != NULL && n > 0)
    memcpy(p, s, n);
}

void ms__wire_put_bytes(ms__wire_writer_t *w, uint16_t tag, const void *src,
                        size_t n) {
  uint8_t *p = put_record(w, tag, n);
  if (p != NULL && n > 0)
    memcpy(p, src, n);
}

int ms__wire_end(ms__wire_writer_t *w) {
  if (w->overflow || w->len - w->frame < MS__WIRE_HEADER) {
    w->len = w->frame;
    w->overflow = 1;
    return MS_ENOSPC;
  }
  put32(w->buf + w->frame + 8, (uint32_t)(w->len - w->frame - MS__WIRE_HEADER));
  return 0;
}

/* ------------------------------------------------------------------------
 * Encoders
 * ------------------------------------------------------------------------ */
int ms__wire_encode_hello(ms__wire_writer_t *w, const ms__wire_hello_t *h) {
  ms__wire_begin(w, MS__MSG_HELLO);
  ms__wire_put_u64(w, MS__TAG_PID, (uint64_t)(int64_t)h->pid);
  ms__wire_put_u64(w, MS__TAG_START_TIME, h->start_time);
  ms__wire_put_str(w, MS__TAG_COMM, h->comm, sizeof h->comm);
  ms__wire_put_str(w, MS__TAG_LIB_VERSION, h->lib_version,
                   sizeof h->lib_version);
  ms__wire_put_u64(w, MS__TAG_PROTO_VERSION, h->proto_version);
  for (uint32_t i = 0; i < h->nproviders && i < MS_MAX_PROVIDERS; i++)
    ms__wire_put_str(w, MS__TAG_PROVIDER, h->providers[i], MS_NAME_MAX);
  ms__wire_put_u64(w, MS__TAG_CAPABILITIES, h->capabilities);
  return ms__wire_end(w);
}

static void encode_field(ms__wire_writer_t *w, const ms_snapshot_t *s,
                         ms_field_t f) {
  uint16_t tag = (uint16_t)(MS__TAG_FIELD + f);
  uint8_t *p;
  switch (f) {
  case MS_F_PAUSE_NS: {
    /* Up to the last slot written: the reader zero-fills the rest (wire.h),
     * so the ring of a program that never paused costs nothing, where it
     * was half of every snapshot. */
    uint32_t n = MS_PAUSE_RING;
    while (n > 0 && s->pause_ns[n - 1] == 0 && s->pause_end[n - 1] == 0)
      n--;
    p = put_record(w, tag, 2 + 4 + (size_t)n * 16);
    if (p == NULL)
      return;
    put32(p + 2, n);
    for (uint32_t i = 0; i < n; i++) {
      put64(p + 6 + i * 16, s->pause_ns[i]);
      put64(p + 6 + i * 16 + 8, s->pause_end[i]);
    }
    break;
  }
  case MS_F_BY_SIZE: {
    uint32_t n = s->nsize_classes;
    if (n > MS_MAX_SIZE_CLASSES)
      n = MS_MAX_SIZE_CLASSES;
    p = put_record(w, tag, 2 + 4 + (size_t)n * 24);
    if (p == NULL)
      return;
    put32(p + 2, n);
    for (uint32_t i = 0; i < n; i++) {
      put64(p + 6 + i * 24, s->by_size[i].size);
      put64(p + 6 + i * 24 + 8, s->by_size[i].mallocs);
      put64(p + 6 + i * 24 + 16, s->by_size[i].frees);
    }
    break;
  }
  case MS_F_PAUSE_HIST:
    p = put_record(w, tag, 2 + 4 + MS_PAUSE_HIST_BUCKETS * 8);
    if (p == NULL)
      return;
    put32(p + 2, MS_PAUSE_HIST_BUCKETS);
    for (int i = 0; i < MS_PAUSE_HIST_BUCKETS; i++)
      put64(p + 6 + i * 8, s->pause_hist.counts[i]);
    break;
  default:
    p = put_record(w, tag, 2 + 8);
    if (p == NULL)
      return;
    put64(p + 2, ms__field_bits(s, &ms__fields[f]));
    break;
  }
  p[0] = s->quality[f];
  p[1] = s->source[f];
}

int ms__wire_encode_snapshot(ms__wire_writer_t *w, const ms_snapshot_t *s,
                             size_t *age_at) {
  ms__wire_begin(w, MS__MSG_SNAPSHOT);
  ms__wire_put_u64(w, MS__TAG_PID, (uint64_t)(int64_t)s->pid);
  ms__wire_put_u64(w, MS__TAG_START_TIME, s->start_time);
  ms__wire_put_str(w, MS__TAG_COMM, s->comm, sizeof s->comm);
  ms__wire_put_u64(w, MS__TAG_LIB_VERSION_NUM, s->lib_version);
  ms__wire_put_u64(w, MS__TAG_SEQ, s->seq);
  ms__wire_put_u64(w, MS__TAG_TIME_UNIX, s->time_unix_ns);
  ms__wire_put_u64(w, MS__TAG_TIME_MONO, s->time_mono_ns);
  ms__wire_put_u64(w, MS__TAG_AGE, s->age_ns);
  if (age_at != NULL)
    *age_at = w->len - 8;
  for (uint32_t i = 0; i < s->nproviders && i < MS_MAX_PROVIDERS; i++)
    ms__wire_put_str(w, MS__TAG_PROVIDER, s->providers[i], MS_NAME_MAX);
  for (int f = 0; f < MS_F__COUNT; f++)
    encode_field(w, s, (ms_field_t)f);
  return ms__wire_end(w);
}

int ms__wire_encode_request(ms__wire_writer_t *w, ms__msg_type_t type,
                            uint64_t flags) {
  ms__wire_begin(w, type);
  if (type == MS__MSG_HELLO)
    ms__wire_put_u64(w, MS__TAG_PROTO_VERSION, MS__WIRE_VERSION);
  else
    ms__wire_put_u64(w, MS__TAG_FLAGS, flags);
  return ms__wire_end(w);
}

int ms__wire_encode_error(ms__wire_writer_t *w, ms__msg_type_t type, int code,
                          const char *reason) {
  ms__wire_begin(w, type);
  ms__wire_put_u64(w, MS__TAG_CODE, (uint64_t)(int64_t)code);
  ms__wire_put_str(w, MS__TAG_REASON, reason, 512);
  return ms__wire_end(w);
}

/* ------------------------------------------------------------------------
 * Decoders
 * ------------------------------------------------------------------------ */
int ms__wire_frame(const uint8_t *buf, size_t len, size_t max_payload,
                   ms__frame_t *f, const char **why) {
  static const char magic[4] = MS__WIRE_MAGIC;
  const char *w = NULL;
  /* Judge the bytes we have as early as possible, so garbage is refused
   * at its first byte rather than after a timeout. */
  for (size_t i = 0; i < 4 && i < len; i++)
    if (buf[i] != (uint8_t)magic[i]) {
      w = "bad magic (not a memstats frame)";
      goto fail;
    }
  if (len >= 6) {
    uint16_t v = get16(buf + 4);
    if (v == 0) {
      w = "bad version 0";
      goto fail;
    }
    if (v > MS__WIRE_VERSION) {
      if (why != NULL)
        *why = "protocol version newer than this reader's";
      if (f != NULL)
        f->version = v;
      return MS_EVERSION;
    }
  }
  if (len >= 12 && get32(buf + 8) > max_payload) {
    w = "frame length over the limit";
    goto fail;
  }
  if (len >= 16 && get32(buf + 12) != 0) {
    w = "reserved header bits set";
    goto fail;
  }
  if (len < MS__WIRE_HEADER)
    return MS_EAGAIN;
  uint32_t n = get32(buf + 8);
  if (len - MS__WIRE_HEADER < n)
    return MS_EAGAIN;
  if (f != NULL) {
    f->version = get16(buf + 4);
    f->type = get16(buf + 6);
    f->length = n;
  }
  return 0;
fail:
  if (why != NULL)
    *why = w;
  return MS_EPROTO;
}

/* Steps over one record: *off advances past it. Returns 1 with the
 * record, 0 at the end, MS_EPROTO if the record runs past the payload. */
static int next_record(const uint8_t *p, size_t len, size_t *off, uint16_t *tag,
                       const uint8_t **val, uint32_t *vlen, const char **why) {
  if (*off == len)
    return 0;
  if (len - *off < 6) {
    *why = "truncated record header";
    return MS_EPROTO;
  }
  *tag = get16(p + *off);
  *vlen = get32(p + *off + 2);
  if (len - *off - 6 < *vlen) {
    *why = "record length past the end of the message";
    return MS_EPROTO;
  }
  *val = p + *off + 6;
  *off += 6 + (size_t)*vlen;
  return 1;
}

static int get_u64(const uint8_t *v, uint32_t n, uint64_t *out,
                   const char **why) {
  /* A newer sender may widen a value's record; the first 8 bytes stay. */
  if (n < 8) {
    *why = "integer record shorter than 8 bytes";
    return MS_EPROTO;
  }
  *out = get64(v);
  return 0;
}

/* Copies a string record; control characters become '?', because names
 * from a target end up on a terminal. */
static void get_str(const uint8_t *v, uint32_t n, char *dst, size_t cap) {
  /* Cleared whole, so a repeated record leaves nothing of the first. */
  memset(dst, 0, cap);
  size_t i = 0;
  for (; i < n && i + 1 < cap && v[i] != 0; i++)
    dst[i] = (v[i] < 0x20 || v[i] == 0x7f) ? '?' : (char)v[i];
  dst[i] = '\0';
}

/* The identity both the hello and the snapshot carry, under the same tags:
 * where each decoder keeps it. */
typedef struct identity_s {
  int32_t *pid;
  uint64_t *start_time;
  char *comm;
  size_t comm_cap;
  uint32_t *nproviders;
  char (*providers)[MS_NAME_MAX];
} identity_t;

/* Decodes one identity record into *id. Returns 1 if the tag was one of
 * them, 0 if not (the caller's own tag), MS_EPROTO with *why set if it was
 * and is malformed: a pid no process can have is refused, whichever
 * message carries it (a pid names the process memtop signals and reads in
 * /proc). */
static int decode_identity(const identity_t *id, uint16_t tag, const uint8_t *v,
                           uint32_t n, const char **why) {
  uint64_t x;
  switch (tag) {
  case MS__TAG_PID:
    if (get_u64(v, n, &x, why))
      return MS_EPROTO;
    if ((int64_t)x <= 0 || (int64_t)x > INT32_MAX) {
      *why = "an impossible pid";
      return MS_EPROTO;
    }
    *id->pid = (int32_t)x;
    return 1;
  case MS__TAG_START_TIME:
    return get_u64(v, n, id->start_time, why) ? MS_EPROTO : 1;
  case MS__TAG_COMM:
    get_str(v, n, id->comm, id->comm_cap);
    return 1;
  case MS__TAG_PROVIDER:
    if (*id->nproviders < MS_MAX_PROVIDERS)
      get_str(v, n, id->providers[(*id->nproviders)++], MS_NAME_MAX);
    return 1;
  default:
    return 0;
  }
}

/* Every decoder's loop: each record in turn, the identity's through
 * decode_identity() (when id is not NULL), the others through the
 * message's own record(), which returns 0 or MS_EPROTO with *why set.
 * Unknown tags are the record()'s to skip. */
typedef int (*record_fn)(void *msg, uint16_t tag, const uint8_t *v, uint32_t n,
                         const char **why);

static int decode_records(const uint8_t *p, size_t len, const identity_t *id,
                          record_fn record, void *msg, const char **why) {
  size_t off = 0;
  uint16_t tag;
  const uint8_t *v;
  uint32_t n;
  int r;
  while ((r = next_record(p, len, &off, &tag, &v, &n, why)) == 1) {
    int known = id != NULL ? decode_identity(id, tag, v, n, why) : 0;
    if (known == 0)
      known = record(msg, tag, v, n, why);
    if (known < 0)
      return known;
  }
  return r < 0 ? r : 0;
}

static int hello_record(void *msg, uint16_t tag, const uint8_t *v, uint32_t n,
                        const char **why) {
  ms__wire_hello_t *h = msg;
  uint64_t x;
  switch (tag) {
  case MS__TAG_LIB_VERSION:
    get_str(v, n, h->lib_version, sizeof h->lib_version);
    break;
  case MS__TAG_PROTO_VERSION:
    if (get_u64(v, n, &x, why))
      return MS_EPROTO;
    h->proto_version = x > UINT32_MAX ? UINT32_MAX : (uint32_t)x;
    break;
  case MS__TAG_CAPABILITIES:
    return get_u64(v, n, &h->capabilities, why);
  default:
    break; /* unknown: skipped */
  }
  return 0;
}

int ms__wire_decode_hello(const uint8_t *p, size_t len, ms__wire_hello_t *h,
                          const char **why) {
  const char *dummy;
  if (why == NULL)
    why = &dummy;
  memset(h, 0, sizeof *h);
  const identity_t id = {&h->pid,        &h->start_time, h->comm,
                         sizeof h->comm, &h->nproviders, h->providers};
  /* A client's hello carries no pid; the caller decides whether one is
   * required, so it is only checked when present. */
  return decode_records(p, len, &id, hello_record, h, why);
}

static int decode_field(ms_snapshot_t *s, ms_field_t f, const uint8_t *v,
                        uint32_t n, const char **why) {
  if (n < 2) {
    *why = "field record without its quality";
    return MS_EPROTO;
  }
  uint8_t q = v[0];
  /* A quality this reader does not know is at least not exact. */
  if (q > MS_Q_EXACT)
    q = MS_Q_ESTIMATED;
  const uint8_t *d = v + 2;
  uint32_t dn = n - 2;
  uint32_t cnt;
  switch (f) {
  case MS_F_PAUSE_NS:
    if (dn < 4)
      goto short_array;
    cnt = get32(d);
    if (cnt > (dn - 4) / 16)
      goto short_array;
    if (cnt > MS_PAUSE_RING)
      cnt = MS_PAUSE_RING;
    memset(s->pause_ns, 0, sizeof s->pause_ns);
    memset(s->pause_end, 0, sizeof s->pause_end);
    for (uint32_t i = 0; i < cnt; i++) {
      s->pause_ns[i] = get64(d + 4 + i * 16);
      s->pause_end[i] = get64(d + 4 + i * 16 + 8);
    }
    break;
  case MS_F_BY_SIZE:
    if (dn < 4)
      goto short_array;
    cnt = get32(d);
    if (cnt > (dn - 4) / 24)
      goto short_array;
    if (cnt > MS_MAX_SIZE_CLASSES)
      cnt = MS_MAX_SIZE_CLASSES;
    memset(s->by_size, 0, sizeof s->by_size);
    for (uint32_t i = 0; i < cnt; i++) {
      s->by_size[i].size = get64(d + 4 + i * 24);
      s->by_size[i].mallocs = get64(d + 4 + i * 24 + 8);
      s->by_size[i].frees = get64(d + 4 + i * 24 + 16);
    }
    s->nsize_classes = cnt;
    break;
  case MS_F_PAUSE_HIST:
    if (dn < 4)
      goto short_array;
    cnt = get32(d);
    if (cnt > (dn - 4) / 8)
      goto short_array;
    memset(&s->pause_hist, 0, sizeof s->pause_hist);
    /* Another bucket layout cannot be mapped onto ours: unavailable. */
    if (cnt != MS_PAUSE_HIST_BUCKETS)
      return 0;
    for (uint32_t i = 0; i < cnt; i++)
      s->pause_hist.counts[i] = get64(d + 4 + i * 8);
    break;
  default: {
    uint64_t x;
    if (dn < 8) {
      *why = "scalar field shorter than 8 bytes";
      return MS_EPROTO;
    }
    x = get64(d);
    ms__field_set_bits(s, &ms__fields[f], x);
    break;
  }
  }
  s->quality[f] = q;
  s->source[f] = v[1];
  return 0;
short_array:
  *why = "array field shorter than its count";
  return MS_EPROTO;
}

static int snapshot_record(void *msg, uint16_t tag, const uint8_t *v,
                           uint32_t n, const char **why) {
  ms_snapshot_t *s = msg;
  uint64_t x;
  switch (tag) {
  case MS__TAG_LIB_VERSION_NUM:
    if (get_u64(v, n, &x, why))
      return MS_EPROTO;
    s->lib_version = (uint32_t)x;
    return 0;
  case MS__TAG_SEQ:
    return get_u64(v, n, &s->seq, why);
  case MS__TAG_TIME_UNIX:
    return get_u64(v, n, &s->time_unix_ns, why);
  case MS__TAG_TIME_MONO:
    return get_u64(v, n, &s->time_mono_ns, why);
  case MS__TAG_AGE:
    return get_u64(v, n, &s->age_ns, why);
  default:
    if (tag >= MS__TAG_FIELD && tag < MS__TAG_FIELD + MS_F__COUNT)
      return decode_field(s, (ms_field_t)(tag - MS__TAG_FIELD), v, n, why);
    return 0; /* unknown: skipped */
  }
}

int ms__wire_decode_snapshot(const uint8_t *p, size_t len, ms_snapshot_t *s,
                             const char **why) {
  const char *dummy;
  if (why == NULL)
    why = &dummy;
  memset(s, 0, sizeof *s);
  s->struct_size = sizeof *s;
  memset(s->quality, MS_Q_UNAVAILABLE, sizeof s->quality);
  memset(s->source, 0xff, sizeof s->source);
  const identity_t id = {&s->pid,        &s->start_time, s->comm,
                         sizeof s->comm, &s->nproviders, s->providers};
  int r = decode_records(p, len, &id, snapshot_record, s, why);
  if (r < 0)
    return r;
  /* A snapshot names its process: one without a pid is no process's. */
  if (s->pid == 0) {
    *why = "a snapshot without a pid";
    return MS_EPROTO;
  }
  /* A source must name a provider the message listed. */
  for (int f = 0; f < MS_F__COUNT; f++)
    if (s->source[f] != 0xff && s->source[f] >= s->nproviders)
      s->source[f] = 0xff;
  return 0;
}

static int request_record(void *msg, uint16_t tag, const uint8_t *v, uint32_t n,
                          const char **why) {
  return tag == MS__TAG_FLAGS ? get_u64(v, n, msg, why) : 0;
}

int ms__wire_decode_request(const uint8_t *p, size_t len, uint64_t *flags,
                            const char **why) {
  const char *dummy;
  if (why == NULL)
    why = &dummy;
  *flags = 0;
  return decode_records(p, len, NULL, request_record, flags, why);
}

typedef struct error_msg_s {
  int *code;
  char *reason;
  size_t reason_len;
} error_msg_t;

static int error_record(void *msg, uint16_t tag, const uint8_t *v, uint32_t n,
                        const char **why) {
  error_msg_t *e = msg;
  uint64_t x;
  if (tag == MS__TAG_CODE) {
    if (get_u64(v, n, &x, why))
      return MS_EPROTO;
    int64_t c = (int64_t)x;
    *e->code = (c < 0 && c > -100000) ? (int)c : MS_EPROTO;
  } else if (tag == MS__TAG_REASON && e->reason_len > 0) {
    get_str(v, n, e->reason, e->reason_len);
  }
  return 0;
}

int ms__wire_decode_error(const uint8_t *p, size_t len, int *code, char *reason,
                          size_t reason_len, const char **why) {
  const char *dummy;
  if (why == NULL)
    why = &dummy;
  *code = MS_EPROTO;
  if (reason_len > 0)
    reason[0] = '\0';
  error_msg_t e = {code, reason, reason_len};
  return decode_records(p, len, NULL, error_record, &e, why);
}
