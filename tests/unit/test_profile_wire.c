/*
 * test_profile_wire.c - the heap profile on the wire (src/wire/profile.c):
 * round trips through one and many frames, forward compatibility (unknown
 * records and longer fixed parts skipped), and hostile bytes (truncation at
 * every length, frames out of order or after the last, impossible values),
 * and the bounds: a profile past one of profile.h's limits is refused as
 * too large, and decoding costs what each frame's bytes cost (counted in
 * instructions by valgrind's callgrind, not timed).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "client/client.h"
#include "wire/profile.h"
#include "wire/wire.h"
#include "support/callgrind.h"

#define NREC 300
#define NMAP 5

static uint64_t g_stacks[NREC][MS__PROFILE_MAX_DEPTH];
static ms__profile_record_t g_recs[NREC];
static ms__profile_mapping_t g_maps[NMAP];
static uint8_t g_bid[20];
static char g_paths[NMAP][64];

static ms__profile_t make(uint32_t nrec) {
  for (uint32_t i = 0; i < nrec; i++) {
    uint32_t depth = (i * 7) % (MS__PROFILE_MAX_DEPTH + 1);
    for (uint32_t j = 0; j < depth; j++)
      g_stacks[i][j] = 0x400000u + i * 0x1000u + j;
    g_recs[i] = (ms__profile_record_t){
        .size = 16u + i,
        .alloc_objects = 10u + i,
        .alloc_bytes = (10u + i) * (16u + i),
        .free_objects = i,
        .free_bytes = (uint64_t)i * (16u + i),
        .depth = depth,
        .truncated = (int)(i % 2),
        .stack = g_stacks[i],
    };
  }
  for (int i = 0; i < 20; i++)
    g_bid[i] = (uint8_t)(0xa0 + i);
  for (int i = 0; i < NMAP; i++) {
    snprintf(g_paths[i], sizeof g_paths[i], "/usr/lib/lib%d.so", i);
    g_maps[i] = (ms__profile_mapping_t){
        .start = 0x7f0000000000ull + (uint64_t)i * 0x100000,
        .limit = 0x7f0000080000ull + (uint64_t)i * 0x100000,
        .offset = 0x1000u * (uint64_t)i,
        .path = i == 3 ? "" : g_paths[i],
        .build_id = i == 2 ? NULL : g_bid,
        .build_id_len = i == 2 ? 0 : 20,
    };
  }
  return (ms__profile_t){
      .pid = 4242,
      .start_time = 987654,
      .time_unix_ns = 1700000000123456789ull,
      .rate = 524288,
      .buckets_dropped = 7,
      .frees_lost = 3,
      .since_unix_ns = 1699999999000000001ull,
      .nrecords = nrec,
      .records = g_recs,
      .nmappings = NMAP,
      .mappings = g_maps,
  };
}

static void same(const ms__profile_t *a, const ms__profile_t *b) {
  assert_int_equal(a->pid, b->pid);
  assert_int_equal(a->start_time, b->start_time);
  assert_int_equal(a->time_unix_ns, b->time_unix_ns);
  assert_int_equal(a->rate, b->rate);
  assert_int_equal(a->buckets_dropped, b->buckets_dropped);
  assert_int_equal(a->frees_lost, b->frees_lost);
  assert_int_equal(a->since_unix_ns, b->since_unix_ns);
  assert_int_equal(a->nrecords, b->nrecords);
  assert_int_equal(a->nmappings, b->nmappings);
  for (uint32_t i = 0; i < a->nrecords; i++) {
    const ms__profile_record_t *x = &a->records[i], *y = &b->records[i];
    assert_int_equal(x->size, y->size);
    assert_int_equal(x->alloc_objects, y->alloc_objects);
    assert_int_equal(x->alloc_bytes, y->alloc_bytes);
    assert_int_equal(x->free_objects, y->free_objects);
    assert_int_equal(x->free_bytes, y->free_bytes);
    assert_int_equal(x->depth, y->depth);
    assert_int_equal(!!x->truncated, !!y->truncated);
    if (x->depth > 0)
      assert_memory_equal(x->stack, y->stack, x->depth * 8u);
  }
  for (uint32_t i = 0; i < a->nmappings; i++) {
    const ms__profile_mapping_t *x = &a->mappings[i], *y = &b->mappings[i];
    assert_int_equal(x->start, y->start);
    assert_int_equal(x->limit, y->limit);
    assert_int_equal(x->offset, y->offset);
    assert_string_equal(x->path, y->path);
    assert_int_equal(x->build_id_len, y->build_id_len);
    if (x->build_id_len)
      assert_memory_equal(x->build_id, y->build_id, x->build_id_len);
    else
      assert_null(y->build_id);
  }
}

static uint8_t *encode(const ms__profile_t *p, size_t max_payload,
                       size_t *len) {
  size_t cap = ms__profile_encoded_bound(p, "libunwind", max_payload);
  assert_true(cap > 0);
  uint8_t *buf = malloc(cap);
  assert_non_null(buf);
  assert_int_equal(
      ms__profile_encode(p, "libunwind", buf, cap, max_payload, len), 0);
  assert_true(*len <= cap);
  return buf;
}

/* Counts the frames and checks each is within the bound. */
static int frames(const uint8_t *buf, size_t len, size_t max_payload) {
  int n = 0;
  size_t off = 0;
  while (off < len) {
    ms__frame_t f;
    assert_int_equal(
        ms__wire_frame(buf + off, len - off, max_payload, &f, NULL), 0);
    assert_int_equal(f.type, MS__MSG_PROFILE);
    off += MS__WIRE_HEADER + f.length;
    n++;
  }
  assert_int_equal(off, len);
  return n;
}

static void test_round_trip_one_frame(void **state) {
  (void)state;
  ms__profile_t p = make(3);
  size_t len;
  uint8_t *buf = encode(&p, MS__WIRE_MAX_PAYLOAD, &len);
  assert_int_equal(frames(buf, len, MS__WIRE_MAX_PAYLOAD), 1);
  ms__profile_decoded_t *d;
  assert_int_equal(ms__profile_decode(buf + MS__WIRE_HEADER,
                                      len - MS__WIRE_HEADER, &d, NULL),
                   0);
  assert_true(d->complete);
  assert_string_equal(d->unwinder, "libunwind");
  same(&p, &d->profile);
  ms__profile_decoded_free(d);
  free(buf);
}

static void test_round_trip_chunked(void **state) {
  (void)state;
  ms__profile_t p = make(NREC);
  size_t len, used;
  uint8_t *buf = encode(&p, MS__PROFILE_MIN_PAYLOAD, &len);
  /* 300 records of up to 256 frames: many frames of at most 16 KiB. */
  assert_true(frames(buf, len, MS__PROFILE_MIN_PAYLOAD) > 10);
  ms__profile_decoded_t *d;
  assert_int_equal(ms__profile_decode_frames(buf, len, &d, &used, NULL), 0);
  assert_int_equal(used, len);
  same(&p, &d->profile);
  ms__profile_decoded_free(d);
  /* One frame alone is not a whole profile. */
  const char *why = NULL;
  assert_int_equal(ms__profile_decode(buf + MS__WIRE_HEADER,
                                      len - MS__WIRE_HEADER, &d, &why),
                   MS_EPROTO);
  assert_null(d);
  assert_non_null(why);
  free(buf);
}

static void test_encode_bounds(void **state) {
  (void)state;
  ms__profile_t p = make(NREC);
  size_t len;
  uint8_t small[100];
  assert_int_equal(
      ms__profile_encode(&p, NULL, small, sizeof small, 1 << 20, &len),
      MS_ENOSPC);
  assert_int_equal(
      ms__profile_encode(&p, NULL, small, sizeof small, 4096, &len), MS_EINVAL);
  /* A record deeper than the limit is cut there and marked truncated. */
  static uint64_t deep[MS__PROFILE_MAX_DEPTH + 10];
  ms__profile_record_t r = {.size = 8,
                            .alloc_objects = 1,
                            .alloc_bytes = 8,
                            .depth = MS__PROFILE_MAX_DEPTH + 10,
                            .stack = deep};
  ms__profile_t q = {.pid = 1, .rate = 1, .nrecords = 1, .records = &r};
  uint8_t *buf = encode(&q, MS__WIRE_MAX_PAYLOAD, &len);
  ms__profile_decoded_t *d;
  assert_int_equal(ms__profile_decode_frames(buf, len, &d, NULL, NULL), 0);
  assert_int_equal(d->profile.records[0].depth, MS__PROFILE_MAX_DEPTH);
  assert_true(d->profile.records[0].truncated);
  ms__profile_decoded_free(d);
  free(buf);
}

/* A frame written by hand: records appended to a writer. */
static uint8_t g_hand[8192];

static ms__wire_writer_t hand_begin(uint64_t chunk) {
  ms__wire_writer_t w;
  ms__wire_writer_init(&w, g_hand, sizeof g_hand);
  ms__wire_begin(&w, MS__MSG_PROFILE);
  ms__wire_put_u64(&w, MS__TAG_PROF_CHUNK, chunk);
  ms__wire_put_u64(&w, MS__TAG_PID, 77);
  return w;
}

static int hand_decode(ms__wire_writer_t *w, ms__profile_decoded_t **d,
                       const char **why) {
  ms__wire_put_u64(w, MS__TAG_PROF_LAST, 1);
  assert_int_equal(ms__wire_end(w), 0);
  return ms__profile_decode(g_hand + MS__WIRE_HEADER, w->len - MS__WIRE_HEADER,
                            d, why);
}

static void test_forward_compatible(void **state) {
  (void)state;
  ms__wire_writer_t w = hand_begin(0);
  /* An unknown record, and a record with a longer fixed part. */
  ms__wire_put_u64(&w, 999, 5);
  uint8_t *v = ms__wire_put_record(&w, MS__TAG_PROF_RECORD, 4 + 56 + 16);
  memset(v, 0, 4 + 56 + 16);
  v[0] = 56;        /* fixed part: 48 known + 8 of a newer sender */
  v[4] = 32;        /* size */
  v[4 + 8] = 3;     /* alloc_objects */
  v[4 + 44] = 2;    /* depth */
  v[4 + 56] = 0x11; /* stack[0] */
  v[4 + 64] = 0x22; /* stack[1] */
  ms__profile_decoded_t *d;
  assert_int_equal(hand_decode(&w, &d, NULL), 0);
  assert_int_equal(d->profile.pid, 77);
  assert_int_equal(d->profile.nrecords, 1);
  assert_int_equal(d->profile.records[0].size, 32);
  assert_int_equal(d->profile.records[0].alloc_objects, 3);
  assert_int_equal(d->profile.records[0].depth, 2);
  assert_int_equal(d->profile.records[0].stack[0], 0x11);
  assert_int_equal(d->profile.records[0].stack[1], 0x22);
  ms__profile_decoded_free(d);
}

static void test_hostile_values(void **state) {
  (void)state;
  ms__profile_decoded_t *d;
  const char *why;
  /* Depth over the limit. */
  ms__wire_writer_t w = hand_begin(0);
  uint8_t *v = ms__wire_put_record(&w, MS__TAG_PROF_RECORD, 4 + 48);
  memset(v, 0, 52);
  v[0] = 48;
  v[4 + 44] = 0xff;
  v[4 + 45] = 0xff;
  assert_int_equal(hand_decode(&w, &d, &why), MS_EPROTO);
  /* A depth the record has no room for. */
  w = hand_begin(0);
  v = ms__wire_put_record(&w, MS__TAG_PROF_RECORD, 4 + 48 + 8);
  memset(v, 0, 60);
  v[0] = 48;
  v[4 + 44] = 2;
  assert_int_equal(hand_decode(&w, &d, &why), MS_EPROTO);
  /* A fixed part longer than the record. */
  w = hand_begin(0);
  v = ms__wire_put_record(&w, MS__TAG_PROF_RECORD, 4 + 48);
  memset(v, 0, 52);
  v[0] = 49;
  assert_int_equal(hand_decode(&w, &d, &why), MS_EPROTO);
  /* A mapping that ends before it starts, and one whose path runs past. */
  w = hand_begin(0);
  v = ms__wire_put_record(&w, MS__TAG_PROF_MAPPING, 4 + 32);
  memset(v, 0, 36);
  v[0] = 32;
  v[4] = 1; /* start 1, limit 0 */
  assert_int_equal(hand_decode(&w, &d, &why), MS_EPROTO);
  w = hand_begin(0);
  v = ms__wire_put_record(&w, MS__TAG_PROF_MAPPING, 4 + 32 + 3);
  memset(v, 0, 39);
  v[0] = 32;
  v[4 + 24] = 4; /* path of 4 bytes, 3 there */
  assert_int_equal(hand_decode(&w, &d, &why), MS_EPROTO);
  /* Control characters in a path become '?'; it stops at a NUL. */
  w = hand_begin(0);
  v = ms__wire_put_record(&w, MS__TAG_PROF_MAPPING, 4 + 32 + 6);
  memset(v, 0, 42);
  v[0] = 32;
  v[4 + 8] = 1;
  v[4 + 24] = 6;
  memcpy(v + 36, "a\x1b[2\0z", 6);
  assert_int_equal(hand_decode(&w, &d, &why), 0);
  assert_string_equal(d->profile.mappings[0].path, "a?[2");
  ms__profile_decoded_free(d);
  /* A frame without its chunk number, and an impossible pid. */
  ms__wire_writer_init(&w, g_hand, sizeof g_hand);
  ms__wire_begin(&w, MS__MSG_PROFILE);
  assert_int_equal(hand_decode(&w, &d, &why), MS_EPROTO);
  w = hand_begin(0);
  ms__wire_put_u64(&w, MS__TAG_PID, (uint64_t)-5);
  assert_int_equal(hand_decode(&w, &d, &why), MS_EPROTO);
}

static void test_frames_out_of_order(void **state) {
  (void)state;
  ms__profile_t p = make(NREC);
  size_t len;
  uint8_t *buf = encode(&p, MS__PROFILE_MIN_PAYLOAD, &len);
  ms__frame_t f0, f1;
  assert_int_equal(ms__wire_frame(buf, len, MS__WIRE_MAX_PAYLOAD, &f0, NULL),
                   0);
  size_t o1 = MS__WIRE_HEADER + f0.length;
  assert_int_equal(
      ms__wire_frame(buf + o1, len - o1, MS__WIRE_MAX_PAYLOAD, &f1, NULL), 0);
  const char *why = NULL;
  /* The second frame first. */
  ms__profile_decoded_t *d = ms__profile_decoded_new();
  assert_non_null(d);
  assert_int_equal(
      ms__profile_decode_frame(d, buf + o1 + MS__WIRE_HEADER, f1.length, &why),
      MS_EPROTO);
  assert_non_null(why);
  /* Broken once, broken for good. */
  assert_int_equal(
      ms__profile_decode_frame(d, buf + MS__WIRE_HEADER, f0.length, &why),
      MS_EPROTO);
  ms__profile_decoded_free(d);
  /* The first frame twice. */
  d = ms__profile_decoded_new();
  assert_int_equal(
      ms__profile_decode_frame(d, buf + MS__WIRE_HEADER, f0.length, &why), 0);
  assert_false(d->complete);
  assert_int_equal(
      ms__profile_decode_frame(d, buf + MS__WIRE_HEADER, f0.length, &why),
      MS_EPROTO);
  ms__profile_decoded_free(d);
  free(buf);
  /* A frame after the last. */
  p = make(2);
  buf = encode(&p, MS__WIRE_MAX_PAYLOAD, &len);
  d = ms__profile_decoded_new();
  assert_int_equal(ms__profile_decode_frame(d, buf + MS__WIRE_HEADER,
                                            len - MS__WIRE_HEADER, &why),
                   0);
  assert_true(d->complete);
  assert_int_equal(ms__profile_decode_frame(d, buf + MS__WIRE_HEADER,
                                            len - MS__WIRE_HEADER, &why),
                   MS_EPROTO);
  ms__profile_decoded_free(d);
  free(buf);
}

/* Every prefix of a chunked profile is refused cleanly (ASan in make asan
 * catches an over-read), and so is every single-byte change or a clean
 * decode. */
static void test_truncated_and_flipped(void **state) {
  (void)state;
  ms__profile_t p = make(40);
  size_t len;
  uint8_t *buf = encode(&p, MS__PROFILE_MIN_PAYLOAD, &len);
  for (size_t n = 0; n < len; n++) {
    uint8_t *copy = malloc(n ? n : 1);
    memcpy(copy, buf, n);
    ms__profile_decoded_t *d;
    assert_int_not_equal(ms__profile_decode_frames(copy, n, &d, NULL, NULL), 0);
    assert_null(d);
    free(copy);
  }
  for (size_t i = 0; i < len; i += 7) {
    uint8_t *copy = malloc(len);
    memcpy(copy, buf, len);
    copy[i] ^= 0x5a;
    ms__profile_decoded_t *d = NULL;
    if (ms__profile_decode_frames(copy, len, &d, NULL, NULL) == 0)
      ms__profile_decoded_free(d);
    free(copy);
  }
  free(buf);
}

static void test_error_frame(void **state) {
  (void)state;
  ms__wire_writer_t w;
  ms__wire_writer_init(&w, g_hand, sizeof g_hand);
  assert_int_equal(
      ms__wire_encode_error(&w, MS__MSG_ERROR, MS_ENOSYS, "profiling is off"),
      0);
  ms__profile_decoded_t *d;
  const char *why = NULL;
  assert_int_equal(ms__profile_decode_frames(g_hand, w.len, &d, NULL, &why),
                   MS_ENOSYS);
  assert_null(d);
}

/* The session state machine (memtop's side, no I/O): a profile asked for
 * arrives in several frames, is reported once whole, and is the caller's;
 * a refusal concerns that request only; a profile not asked for ends the
 * session. */
static void test_session_profile(void **state) {
  (void)state;
  ms__profile_t p = make(NREC);
  size_t plen;
  uint8_t *prof = encode(&p, MS__PROFILE_MIN_PAYLOAD, &plen);
  static uint8_t hello[MS__WIRE_SMALL_MAX];
  ms__wire_writer_t w;
  ms__wire_writer_init(&w, hello, sizeof hello);
  ms__wire_hello_t h = {.pid = 4242,
                        .start_time = 987654,
                        .proto_version = MS__WIRE_VERSION,
                        .capabilities = MS__CAP_SNAPSHOT | MS__CAP_PROFILE};
  assert_int_equal(ms__wire_encode_hello(&w, &h), 0);
  size_t hlen = w.len;

  msc_session_t *s = msc_session_new(4242, 987654);
  const uint8_t *req;
  size_t reqlen, used;
  msc_event_t ev;
  /* A profile before one is asked for: the session ends. */
  assert_int_equal(msc_session_feed(s, hello, hlen, &used, NULL, &ev), 0);
  assert_int_equal(ev.type, MSC_EV_HELLO);
  assert_int_equal(msc_session_feed(s, prof, plen, &used, NULL, &ev),
                   MS_EPROTO);
  assert_int_equal(ev.type, MSC_EV_ERROR);
  msc_session_free(s);

  s = msc_session_new(4242, 987654);
  assert_int_equal(msc_session_request_profile(s, &req, &reqlen), 0);
  ms__frame_t f;
  assert_int_equal(ms__wire_frame(req, reqlen, 64, &f, NULL), 0);
  assert_int_equal(f.type, MS__MSG_HELLO);
  assert_int_equal(ms__wire_frame(req + MS__WIRE_HEADER + f.length,
                                  reqlen - MS__WIRE_HEADER - f.length, 64, &f,
                                  NULL),
                   0);
  assert_int_equal(f.type, MS__MSG_PROFILE_REQ);
  assert_int_equal(msc_session_feed(s, hello, hlen, &used, NULL, &ev), 0);
  /* The profile's frames, fed as they would arrive. */
  size_t off = 0;
  int frames = 0, done = 0;
  while (off < plen) {
    assert_int_equal(
        msc_session_feed(s, prof + off, plen - off, &used, NULL, &ev), 0);
    assert_true(used > 0);
    off += used;
    frames++;
    if (ev.type == MSC_EV_PROFILE)
      done = 1;
    else
      assert_int_equal(ev.type, MSC_EV_NONE);
  }
  assert_true(done);
  assert_true(frames > 1);
  ms__profile_decoded_t *d = msc_session_take_profile(s);
  assert_non_null(d);
  assert_null(msc_session_take_profile(s));
  same(&p, &d->profile);
  ms__profile_decoded_free(d);
  /* A refusal ends that request, not the session. */
  assert_int_equal(msc_session_request_profile(s, &req, &reqlen), 0);
  ms__wire_writer_init(&w, g_hand, sizeof g_hand);
  ms__wire_encode_error(&w, MS__MSG_ERROR, MS_ENOSYS, "profiling is off");
  assert_int_equal(msc_session_feed(s, g_hand, w.len, &used, NULL, &ev),
                   MS_ENOSYS);
  assert_int_equal(ev.type, MSC_EV_ERROR);
  assert_null(msc_session_take_profile(s));
  assert_int_equal(msc_session_request_profile(s, &req, &reqlen), 0);
  off = 0;
  while (off < plen) {
    msc_session_feed(s, prof + off, plen - off, &used, NULL, &ev);
    off += used;
  }
  assert_int_equal(ev.type, MSC_EV_PROFILE);
  d = msc_session_take_profile(s);
  assert_non_null(d);
  ms__profile_decoded_free(d);
  msc_session_free(s);
  free(prof);
}

/* ---- bounds: too large, and linear ------------------------------------- */

/* A frame of records of depth `depth` (as many as fit in one payload of
 * the reader's bound), into buf; *chunk_at is the offset of its chunk
 * number's value, which the caller rewrites to send it again. */
static size_t big_frame(uint8_t *buf, size_t cap, uint32_t depth,
                        uint32_t *nrec, size_t *chunk_at) {
  ms__wire_writer_t w;
  ms__wire_writer_init(&w, buf, cap);
  ms__wire_begin(&w, MS__MSG_PROFILE);
  *chunk_at = w.len + 6;
  ms__wire_put_u64(&w, MS__TAG_PROF_CHUNK, 0);
  ms__wire_put_u64(&w, MS__TAG_PID, 77);
  size_t rec = 6 + 4 + 48 + (size_t)depth * 8;
  *nrec = 0;
  while (w.len + rec + 64 < MS__WIRE_HEADER + MS__WIRE_MAX_PAYLOAD &&
         w.len + rec + 64 < cap) {
    uint8_t *v = ms__wire_put_record(&w, MS__TAG_PROF_RECORD, rec - 6);
    memset(v, 0, rec - 6);
    v[0] = 48;
    v[4] = 16;
    v[4 + 8] = 1;
    memcpy(v + 4 + 44, &depth, 4);
    for (uint32_t i = 0; i < depth; i++)
      v[4 + 48 + i * 8] = (uint8_t)(i + 1);
    (*nrec)++;
  }
  assert_int_equal(ms__wire_end(&w), 0);
  return w.len;
}

/* Feeds the frame in buf again and again, numbered 0, 1, ... until the
 * decoder refuses it or `frames` are in. Returns the decoder's last code. */
static int feed_again(ms__profile_decoded_t *d, uint8_t *buf, size_t len,
                      size_t chunk_at, uint64_t frames, const char **why) {
  int r = 0;
  for (uint64_t k = 0; k < frames && r == 0; k++) {
    for (int i = 0; i < 8; i++)
      buf[chunk_at + (size_t)i] = (uint8_t)(k >> (8 * i));
    r = ms__profile_decode_frame(d, buf + MS__WIRE_HEADER,
                                 len - MS__WIRE_HEADER, why);
  }
  return r;
}

/* Past each bound, the profile is refused as too large, saying so: more
 * stack words than the agent's table holds (records x depth), more
 * records, more bytes of mapping paths; and a sampling rate no agent
 * uses. */
static void test_too_large(void **state) {
  (void)state;
  size_t cap = MS__WIRE_HEADER + MS__WIRE_MAX_PAYLOAD, at, len;
  uint8_t *buf = malloc(cap);
  uint32_t nrec;
  const char *why = NULL;
  assert_non_null(buf);

  /* Depth-256 records: the stack words' bound comes first. */
  len = big_frame(buf, cap, MS__PROFILE_MAX_DEPTH, &nrec, &at);
  ms__profile_decoded_t *d = ms__profile_decoded_new();
  assert_int_equal(feed_again(d, buf, len, at, 1u << 20, &why), MS_EPROTO);
  assert_non_null(strstr(why, "profile too large"));
  assert_non_null(strstr(why, "stack frames"));
  /* The frames before the refused one are all there. */
  assert_true(d->profile.nrecords <=
              MS__PROFILE_MAX_FRAMES / MS__PROFILE_MAX_DEPTH);
  assert_true(d->profile.nrecords + nrec >
              MS__PROFILE_MAX_FRAMES / MS__PROFILE_MAX_DEPTH);
  ms__profile_decoded_free(d);

  /* Depth-0 records: the records' bound. */
  len = big_frame(buf, cap, 0, &nrec, &at);
  d = ms__profile_decoded_new();
  assert_int_equal(feed_again(d, buf, len, at, 1u << 20, &why), MS_EPROTO);
  assert_non_null(strstr(why, "profile too large"));
  assert_non_null(strstr(why, "records"));
  ms__profile_decoded_free(d);

  /* Mappings with paths of 4,096 bytes: the bytes of all paths. */
  ms__wire_writer_t w;
  ms__wire_writer_init(&w, buf, cap);
  ms__wire_begin(&w, MS__MSG_PROFILE);
  at = w.len + 6;
  ms__wire_put_u64(&w, MS__TAG_PROF_CHUNK, 0);
  for (int i = 0; i < 512; i++) {
    uint8_t *v = ms__wire_put_record(&w, MS__TAG_PROF_MAPPING,
                                     4 + 32 + MS__PROFILE_MAX_PATH);
    memset(v, 'p', 4 + 32 + MS__PROFILE_MAX_PATH);
    memset(v, 0, 36);
    v[0] = 32;
    v[4 + 8] = 1;
    v[4 + 25] = MS__PROFILE_MAX_PATH >> 8;
  }
  assert_int_equal(ms__wire_end(&w), 0);
  d = ms__profile_decoded_new();
  assert_int_equal(feed_again(d, buf, w.len, at, 1u << 10, &why), MS_EPROTO);
  assert_non_null(strstr(why, "profile too large"));
  assert_true(d->profile.nmappings <=
              MS__PROFILE_MAX_MAPPING_BYTES / MS__PROFILE_MAX_PATH);
  ms__profile_decoded_free(d);

  /* A rate of 2^40 is MEMSTATS_PROFILE_RATE's largest; one past it is
   * refused (it would print as a negative figure). */
  w = hand_begin(0);
  ms__wire_put_u64(&w, MS__TAG_PROF_RATE, MS__PROFILE_MAX_RATE);
  assert_int_equal(hand_decode(&w, &d, &why), 0);
  ms__profile_decoded_free(d);
  w = hand_begin(0);
  ms__wire_put_u64(&w, MS__TAG_PROF_RATE, UINT64_MAX);
  assert_int_equal(hand_decode(&w, &d, &why), MS_EPROTO);
  free(buf);
}

/* The profiles being decoded at once hold at most MS__PROFILE_MAX_HELD
 * together: two of the largest fit (a delta's), a third is refused with
 * MS_ENOMEM, saying why, until one is freed. Many strangers' profiles,
 * read together by --once --sites, could otherwise add up without end. */
static void test_held_bound(void **state) {
  (void)state;
  size_t cap = MS__WIRE_HEADER + MS__WIRE_MAX_PAYLOAD, at, len;
  uint8_t *buf = malloc(cap);
  uint32_t nrec;
  const char *why = NULL;
  ms__profile_decoded_t *d[3];
  assert_non_null(buf);
  len = big_frame(buf, cap, MS__PROFILE_MAX_DEPTH, &nrec, &at);
  /* As many frames as one profile holds. */
  uint64_t frames = MS__PROFILE_MAX_FRAMES / MS__PROFILE_MAX_DEPTH / nrec;
  for (int i = 0; i < 2; i++) {
    d[i] = ms__profile_decoded_new();
    assert_int_equal(feed_again(d[i], buf, len, at, frames, &why), 0);
  }
  d[2] = ms__profile_decoded_new();
  assert_int_equal(feed_again(d[2], buf, len, at, frames, &why), MS_ENOMEM);
  assert_non_null(strstr(why, "192 MiB"));
  ms__profile_decoded_free(d[2]);
  ms__profile_decoded_free(d[0]);
  d[0] = ms__profile_decoded_new();
  assert_int_equal(feed_again(d[0], buf, len, at, frames, &why), 0);
  ms__profile_decoded_free(d[0]);
  ms__profile_decoded_free(d[1]);
  free(buf);
}

/* The child's side of test_linear_decoding: decodes `n` frames of one
 * record each, as a hostile target may send them. */
static int decode_frames_mode(long n) {
  ms__profile_decoded_t *d = ms__profile_decoded_new();
  uint8_t buf[256];
  if (d == NULL)
    return 1;
  for (long k = 0; k < n; k++) {
    ms__wire_writer_t w;
    ms__wire_writer_init(&w, buf, sizeof buf);
    ms__wire_begin(&w, MS__MSG_PROFILE);
    ms__wire_put_u64(&w, MS__TAG_PROF_CHUNK, (uint64_t)k);
    ms__wire_put_u64(&w, MS__TAG_PID, 77);
    uint8_t *v = ms__wire_put_record(&w, MS__TAG_PROF_RECORD, 4 + 48 + 8);
    if (v == NULL)
      return 1;
    memset(v, 0, 60);
    v[0] = 48;
    v[4 + 44] = 1;
    memcpy(v + 52, &k, sizeof k);
    if (k + 1 == n)
      ms__wire_put_u64(&w, MS__TAG_PROF_LAST, 1);
    if (ms__wire_end(&w) != 0 ||
        ms__profile_decode_frame(d, buf + MS__WIRE_HEADER,
                                 w.len - MS__WIRE_HEADER, NULL) != 0)
      return 1;
  }
  int ok = d->complete && d->profile.nrecords == (uint32_t)n;
  ms__profile_decoded_free(d);
  return ok ? 0 : 1;
}

/* Under a sanitizer, instructions are not counted (valgrind cannot run
 * an instrumented binary) and memory is the sanitizer's: those checks are
 * the plain build's. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define PLAIN_BUILD 0
#else
#define PLAIN_BUILD 1
#endif

static const char *g_self;

/* Decoding is linear: 8,000 one-record frames cost the instructions of
 * 4,000 more than 4,000 of them do, a few hundred per frame. (Each frame
 * once copied every record decoded before it: tens of thousands of
 * instructions per frame here, minutes of CPU for a sender's million.) */
static void test_linear_decoding(void **state) {
  (void)state;
  unsigned long long i1 = 0, i2 = 0;
  char why[512];
  if (!PLAIN_BUILD) {
    print_message("skipped: built with a sanitizer, which valgrind cannot "
                  "run\n");
    skip();
  }
  if (system("command -v valgrind >/dev/null 2>&1") != 0) {
    print_message("skipped: valgrind is not installed\n");
    skip();
  }
  const char *a1[] = {g_self, "--decode-frames", "4000", NULL};
  const char *a2[] = {g_self, "--decode-frames", "8000", NULL};
  if (cg_count(a1, NULL, &i1, why, sizeof why) != 0)
    fail_msg("%s", why);
  if (cg_count(a2, NULL, &i2, why, sizeof why) != 0)
    fail_msg("%s", why);
  unsigned long long per_frame = (i2 - i1) / 4000;
  print_message("decoding: %llu instructions per one-record frame\n",
                per_frame);
  assert_true(i2 > i1);
  assert_true(per_frame < 5000);
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--decode-frames") == 0)
    return decode_frames_mode(atol(argv[2]));
  g_self = argv[0];
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trip_one_frame),
      cmocka_unit_test(test_round_trip_chunked),
      cmocka_unit_test(test_encode_bounds),
      cmocka_unit_test(test_forward_compatible),
      cmocka_unit_test(test_hostile_values),
      cmocka_unit_test(test_frames_out_of_order),
      cmocka_unit_test(test_truncated_and_flipped),
      cmocka_unit_test(test_error_frame),
      cmocka_unit_test(test_session_profile),
      cmocka_unit_test(test_too_large),
      cmocka_unit_test(test_held_bound),
      cmocka_unit_test(test_linear_decoding),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
