/*
 * wire.h - the protocol between libmemstats's agent and memtop (internal).
 *
 * No I/O here: encoders write into a caller's fixed buffer, decoders read a
 * caller's bytes. Both sides link this one module, so they cannot disagree.
 *
 * A message is a frame:
 *
 *   offset  size  field
 *   0       4     magic "MSTW"
 *   4       2     version (little-endian), MS__WIRE_VERSION
 *   6       2     type (ms__msg_type_t)
 *   8       4     payload length, at most the receiver's bound
 *   12      4     reserved, 0
 *   16      ...   payload: a sequence of tagged fields
 *
 * and a payload is a sequence of (tag u16, length u32, value) records, all
 * little-endian. A reader skips tags it does not know, and a field it does
 * not find reads as unavailable, so either side may be newer than the other
 * without a version change. The version changes only if the framing itself
 * does; a reader refuses a frame of a newer version (MS_EVERSION).
 *
 * A snapshot field travels as one record per ms_field_t, tag
 * MS__TAG_FIELD + id, value = quality u8, source u8, then the figure: a
 * u64 (or a double's bits) for scalars, a counted array for the compound
 * fields (pause ring, size classes, histogram). A reader zero-fills what a
 * shorter array than its own does not hold (every reader since the first
 * has), so the pause ring travels without its trailing empty slots: a
 * program with no collector sends none of its 4 KiB.
 */
#ifndef MS_WIRE_WIRE_H
#define MS_WIRE_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "memstats.h"

#define MS__WIRE_MAGIC "MSTW"
#define MS__WIRE_VERSION 1
#define MS__WIRE_HEADER 16
/* The largest payload memtop accepts (room for later heap profiles). */
#define MS__WIRE_MAX_PAYLOAD (4u << 20)
/* The largest request the agent accepts: requests are a few records. */
#define MS__WIRE_MAX_REQUEST 4096u
/* An upper bound on an encoded snapshot message, header included. */
#define MS__WIRE_SNAPSHOT_MAX                                                  \
  (MS__WIRE_HEADER + 16 * 16 + (MS_MAX_PROVIDERS + 1) * (6 + MS_NAME_MAX) +    \
   MS_F__COUNT * (6 + 2 + 8) + (6 + 2 + 4 + MS_PAUSE_RING * 16) +              \
   (6 + 2 + 4 + MS_MAX_SIZE_CLASSES * 24) +                                    \
   (6 + 2 + 4 + MS_PAUSE_HIST_BUCKETS * 8))
/* An upper bound on every other message the agent sends. */
#define MS__WIRE_SMALL_MAX 1024

typedef enum ms__msg_type_e {
  MS__MSG_HELLO = 1,        /* both ways: identity and capabilities */
  MS__MSG_SNAPSHOT_REQ = 2, /* memtop -> agent */
  MS__MSG_SNAPSHOT = 3,     /* agent -> memtop */
  MS__MSG_REFUSED = 4,      /* agent -> memtop, then the agent closes */
  MS__MSG_ERROR = 5,        /* agent -> memtop: this request failed */
  /* Reserved for later requests, so that they need no new version. */
  MS__MSG_PROFILE_REQ = 6,
  MS__MSG_PROFILE = 7,
  MS__MSG_GC_REQ = 8,
  MS__MSG_GC_DONE = 9
} ms__msg_type_t;

/* Capability bits in a hello: what requests the agent answers. */
#define MS__CAP_SNAPSHOT 0x1u
#define MS__CAP_PROFILE 0x2u
#define MS__CAP_FORCE_GC 0x4u
#define MS__CAP_SMAPS 0x8u

/* Snapshot request flags. */
#define MS__REQ_SMAPS 0x1u /* also read smaps_rollup (expensive) */

/* Record tags. Tags are never reused: a new record gets a new tag. */
enum {
  /* hello */
  MS__TAG_PID = 1,
  MS__TAG_START_TIME = 2,
  MS__TAG_COMM = 3,
  MS__TAG_LIB_VERSION = 4, /* string, "0.1.0" */
  MS__TAG_PROTO_VERSION = 5,
  MS__TAG_PROVIDER = 6, /* string, once per provider, in order */
  MS__TAG_CAPABILITIES = 7,
  /* snapshot identity */
  MS__TAG_SEQ = 16,
  MS__TAG_TIME_UNIX = 17,
  MS__TAG_TIME_MONO = 18,
  MS__TAG_AGE = 19,
  MS__TAG_LIB_VERSION_NUM = 20, /* ms_snapshot_t.lib_version */
  /* requests */
  MS__TAG_FLAGS = 32,
  /* refusal and error */
  MS__TAG_CODE = 48,   /* an MS_E* code, as a signed 64-bit value */
  MS__TAG_REASON = 49, /* words for the user */
  /* one record per ms_field_t: MS__TAG_FIELD + id */
  MS__TAG_FIELD = 256,
  MS__TAG_FIELD_END = 256 + 1024
};

typedef struct ms__frame_s {
  uint16_t version;
  uint16_t type;
  uint32_t length; /* of the payload */
} ms__frame_t;

/* ---- writing ---- */

/* Writes messages into a caller's buffer. On overflow the writer stops
 * writing and remembers it; ms__wire_end() then fails. */
typedef struct ms__wire_writer_s {
  uint8_t *buf;
  size_t cap;
  size_t len;
  size_t frame; /* offset of the open frame's header */
  int overflow;
} ms__wire_writer_t;

void ms__wire_writer_init(ms__wire_writer_t *w, uint8_t *buf, size_t cap);
/* Opens a frame of `type` (records follow). */
void ms__wire_begin(ms__wire_writer_t *w, ms__msg_type_t type);
void ms__wire_put_u64(ms__wire_writer_t *w, uint16_t tag, uint64_t v);
void ms__wire_put_str(ms__wire_writer_t *w, uint16_t tag, const char *s,
                      size_t maxlen);
void ms__wire_put_bytes(ms__wire_writer_t *w, uint16_t tag, const void *p,
                        size_t n);
/* Appends a record of n bytes and returns where its value goes (the
 * caller fills all n bytes), or NULL on overflow. */
uint8_t *ms__wire_put_record(ms__wire_writer_t *w, uint16_t tag, size_t n);
/* Closes the frame: writes its length. Returns 0, or MS_ENOSPC if the
 * buffer was too small (the frame is then dropped from the buffer). */
int ms__wire_end(ms__wire_writer_t *w);

/* The agent's hello, the snapshot, a request, a refusal or an error, each
 * a whole frame appended to the writer. Return 0 or MS_ENOSPC. */
typedef struct ms__wire_hello_s {
  int32_t pid;
  uint64_t start_time;
  char comm[MS_NAME_MAX];
  char lib_version[32];
  uint32_t proto_version;
  uint32_t nproviders;
  char providers[MS_MAX_PROVIDERS][MS_NAME_MAX];
  uint64_t capabilities;
} ms__wire_hello_t;

int ms__wire_encode_hello(ms__wire_writer_t *w, const ms__wire_hello_t *h);
/* If age_at is not NULL, it receives the offset in w->buf of the 8-byte
 * age value, so that a cached encoding can be served with a new age. */
int ms__wire_encode_snapshot(ms__wire_writer_t *w, const ms_snapshot_t *s,
                             size_t *age_at);
int ms__wire_encode_request(ms__wire_writer_t *w, ms__msg_type_t type,
                            uint64_t flags);
int ms__wire_encode_error(ms__wire_writer_t *w, ms__msg_type_t type, int code,
                          const char *reason);
/* Overwrites a little-endian u64 at buf (used to patch an age). */
void ms__wire_patch_u64(uint8_t *buf, uint64_t v);

/* ---- reading: every byte is hostile ---- */

/* Looks at the start of buf. Returns:
 *   0            a whole frame is there: *f is filled, the frame is
 *                MS__WIRE_HEADER + f->length bytes;
 *   MS_EAGAIN    not enough bytes yet (the header seen so far is valid);
 *   MS_EPROTO    bad magic, reserved bits or a length over max_payload;
 *   MS_EVERSION  a newer version than this reader's.
 * On error *why says what was wrong (a static string). */
int ms__wire_frame(const uint8_t *buf, size_t len, size_t max_payload,
                   ms__frame_t *f, const char **why);

/* Decode a payload (the bytes after the header). All return 0 or
 * MS_EPROTO with *why set; they never read outside [p, p+len). */
int ms__wire_decode_hello(const uint8_t *p, size_t len, ms__wire_hello_t *h,
                          const char **why);
/* Fills every field of *s it finds; the others read as unavailable
 * (quality MS_Q_UNAVAILABLE, source 0xff, value 0). */
int ms__wire_decode_snapshot(const uint8_t *p, size_t len, ms_snapshot_t *s,
                             const char **why);
int ms__wire_decode_request(const uint8_t *p, size_t len, uint64_t *flags,
                            const char **why);
/* A refusal or an error: *code is an MS_E* code (MS_EPROTO if the sender
 * gave none or a positive one), reason is NUL-terminated. */
int ms__wire_decode_error(const uint8_t *p, size_t len, int *code, char *reason,
                          size_t reason_len, const char **why);

#endif
