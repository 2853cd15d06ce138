/*
 * test_wire.c - the wire format and memtop's session state machine, with
 * no sockets: round trips of every field, forward compatibility (unknown
 * records skipped, missing ones unavailable), and hostile bytes.
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
#include "common/fields.h"
#include "wire/wire.h"

static uint8_t g_buf[2 * MS__WIRE_SNAPSHOT_MAX];

/* A snapshot with a distinct value in every field. */
static void fill(ms_snapshot_t *s) {
  memset(s, 0, sizeof *s);
  s->struct_size = sizeof *s;
  s->lib_version = 0x000100;
  s->pid = 4242;
  s->start_time = 987654321;
  snprintf(s->comm, sizeof s->comm, "server");
  s->seq = 17;
  s->time_unix_ns = 1700000000123456789ull;
  s->time_mono_ns = 55555;
  s->age_ns = 0;
  s->nproviders = MS_MAX_PROVIDERS;
  for (int i = 0; i < MS_MAX_PROVIDERS; i++) {
    memset(s->providers[i], 'a' + i, MS_NAME_MAX - 1);
    s->providers[i][MS_NAME_MAX - 1] = '\0';
  }
  for (int f = 0; f < MS_F__COUNT; f++) {
    if (ms__fields[f].ctype == MS__CT_DOUBLE)
      ms__field_set_double(s, (ms_field_t)f, 0.125 + f);
    else if (ms__fields[f].ctype != MS__CT_NONE)
      ms__field_set_u64(s, (ms_field_t)f,
                        ms__fields[f].ctype == MS__CT_U64
                            ? 0x0102030405060708ull * (uint64_t)(f + 1)
                            : (uint64_t)(f + 1));
    s->quality[f] = (uint8_t)(f % 3);
    s->source[f] = f % 4 == 0 ? 0xff : (uint8_t)(f % MS_MAX_PROVIDERS);
  }
  /* The room past the last field: unavailable, from no provider, as every
   * snapshot has it (memstats.h). */
  memset(s->source + MS_F__COUNT, 0xff, MS_F_CAPACITY - MS_F__COUNT);
  for (int i = 0; i < MS_PAUSE_RING; i++) {
    s->pause_ns[i] = 1000u + (uint64_t)i;
    s->pause_end[i] = 1700000000000000000ull + (uint64_t)i;
  }
  s->nsize_classes = MS_MAX_SIZE_CLASSES;
  for (int i = 0; i < MS_MAX_SIZE_CLASSES; i++) {
    s->by_size[i].size = 16u * (uint64_t)(i + 1);
    s->by_size[i].mallocs = 100u + (uint64_t)i;
    s->by_size[i].frees = 50u + (uint64_t)i;
  }
  for (int i = 0; i < MS_PAUSE_HIST_BUCKETS; i++)
    s->pause_hist.counts[i] = (uint64_t)i * 3;
}

static size_t encode(const ms_snapshot_t *s) {
  ms__wire_writer_t w;
  ms__wire_writer_init(&w, g_buf, sizeof g_buf);
  assert_int_equal(ms__wire_encode_snapshot(&w, s, NULL), 0);
  return w.len;
}

static void test_snapshot_round_trip(void **state) {
  (void)state;
  static ms_snapshot_t in, out;
  fill(&in);
  size_t n = encode(&in);
  assert_true(n <= MS__WIRE_SNAPSHOT_MAX);
  ms__frame_t f;
  assert_int_equal(ms__wire_frame(g_buf, n, MS__WIRE_MAX_PAYLOAD, &f, NULL), 0);
  assert_int_equal(f.type, MS__MSG_SNAPSHOT);
  assert_int_equal(f.version, MS__WIRE_VERSION);
  assert_int_equal(MS__WIRE_HEADER + f.length, n);
  const char *why = NULL;
  assert_int_equal(
      ms__wire_decode_snapshot(g_buf + MS__WIRE_HEADER, f.length, &out, &why),
      0);
  assert_memory_equal(&in, &out, sizeof in);
}

/* The pause ring travels up to its last slot written: none for a program
 * that never paused (a snapshot half the size), three for three pauses,
 * all of it once it wrapped; each decodes to the same snapshot. */
static void test_pause_ring_trimmed(void **state) {
  (void)state;
  static ms_snapshot_t in, out;
  fill(&in);
  size_t full = encode(&in);
  const uint32_t counts[] = {0, 3, MS_PAUSE_RING - 1, MS_PAUSE_RING};
  for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
    uint32_t c = counts[k];
    fill(&in);
    for (uint32_t i = c; i < MS_PAUSE_RING; i++)
      in.pause_ns[i] = in.pause_end[i] = 0;
    size_t n = encode(&in);
    assert_int_equal(n, full - (MS_PAUSE_RING - c) * 16);
    const char *why = NULL;
    assert_int_equal(ms__wire_decode_snapshot(g_buf + MS__WIRE_HEADER,
                                              n - MS__WIRE_HEADER, &out, &why),
                     0);
    assert_memory_equal(&in, &out, sizeof in);
  }
  /* A pause of 0 ns ended at a known time is a slot written. */
  fill(&in);
  for (uint32_t i = 5; i < MS_PAUSE_RING; i++)
    in.pause_ns[i] = in.pause_end[i] = 0;
  in.pause_ns[4] = 0;
  assert_int_equal(encode(&in), full - (MS_PAUSE_RING - 5) * 16);
}

static void test_age_patch(void **state) {
  (void)state;
  static ms_snapshot_t in, out;
  fill(&in);
  ms__wire_writer_t w;
  ms__wire_writer_init(&w, g_buf, sizeof g_buf);
  size_t at;
  assert_int_equal(ms__wire_encode_snapshot(&w, &in, &at), 0);
  ms__wire_patch_u64(g_buf + at, 123456789);
  assert_int_equal(ms__wire_decode_snapshot(g_buf + MS__WIRE_HEADER,
                                            w.len - MS__WIRE_HEADER, &out,
                                            NULL),
                   0);
  assert_int_equal(out.age_ns, 123456789);
}

/* A newer sender's unknown records are skipped; a missing field reads as
 * unavailable. */
static void test_forward_compat(void **state) {
  (void)state;
  static ms_snapshot_t in, out;
  fill(&in);
  ms__wire_writer_t w;
  ms__wire_writer_init(&w, g_buf, sizeof g_buf);
  ms__wire_begin(&w, MS__MSG_SNAPSHOT);
  ms__wire_put_u64(&w, 999, 1); /* unknown tag */
  ms__wire_put_u64(&w, MS__TAG_PID, (uint64_t)in.pid);
  ms__wire_put_bytes(&w, 12345, "future", 6); /* unknown tag */
  /* A wider scalar record: the first 8 bytes are the value. */
  uint8_t rec[2 + 16] = {MS_Q_EXACT, 0xff, 0x2a};
  ms__wire_put_bytes(&w, MS__TAG_FIELD + MS_F_HEAP_ALLOC, rec, sizeof rec);
  /* A field this reader does not know yet. */
  ms__wire_put_bytes(&w, MS__TAG_FIELD + MS_F__COUNT + 5, rec, sizeof rec);
  /* A quality from the future is not shown as exact. */
  uint8_t fut[10] = {7, 0xff, 9};
  ms__wire_put_bytes(&w, MS__TAG_FIELD + MS_F_SYS, fut, sizeof fut);
  /* A histogram with another bucket layout cannot be used. */
  uint8_t hist[2 + 4 + 8] = {MS_Q_EXACT, 0xff, 1, 0, 0, 0, 5};
  ms__wire_put_bytes(&w, MS__TAG_FIELD + MS_F_PAUSE_HIST, hist, sizeof hist);
  assert_int_equal(ms__wire_end(&w), 0);
  assert_int_equal(ms__wire_decode_snapshot(g_buf + MS__WIRE_HEADER,
                                            w.len - MS__WIRE_HEADER, &out,
                                            NULL),
                   0);
  assert_int_equal(out.pid, in.pid);
  assert_int_equal(out.heap_alloc, 0x2a);
  assert_int_equal(out.quality[MS_F_HEAP_ALLOC], MS_Q_EXACT);
  assert_int_equal(out.sys, 9);
  assert_int_equal(out.quality[MS_F_SYS], MS_Q_ESTIMATED);
  assert_int_equal(out.quality[MS_F_PAUSE_HIST], MS_Q_UNAVAILABLE);
  for (int f = 0; f < MS_F__COUNT; f++) {
    if (f == MS_F_HEAP_ALLOC || f == MS_F_SYS)
      continue;
    assert_int_equal(out.quality[f], MS_Q_UNAVAILABLE);
    assert_int_equal(out.source[f], 0xff);
  }
  assert_int_equal(out.mallocs, 0);
  assert_int_equal(out.nproviders, 0);
}

static void test_frame_checks(void **state) {
  (void)state;
  uint8_t h[MS__WIRE_HEADER] = {'M', 'S', 'T', 'W', 1, 0, 3, 0,
                                4,   0,   0,   0,   0, 0, 0, 0};
  ms__frame_t f;
  const char *why;
  /* Every prefix of a good header asks for more bytes. */
  for (size_t i = 0; i <= sizeof h; i++)
    assert_int_equal(ms__wire_frame(h, i, 100, &f, &why), MS_EAGAIN);
  uint8_t full[MS__WIRE_HEADER + 4];
  memcpy(full, h, sizeof h);
  assert_int_equal(ms__wire_frame(full, sizeof full, 100, &f, &why), 0);
  assert_int_equal(f.length, 4);
  /* Garbage is refused at its first byte. */
  uint8_t g = 'X';
  assert_int_equal(ms__wire_frame(&g, 1, 100, &f, &why), MS_EPROTO);
  assert_non_null(strstr(why, "magic"));
  h[4] = 0;
  assert_int_equal(ms__wire_frame(h, 6, 100, &f, &why), MS_EPROTO);
  h[4] = 2;
  assert_int_equal(ms__wire_frame(h, 6, 100, &f, &why), MS_EVERSION);
  assert_int_equal(f.version, 2);
  h[4] = 1;
  assert_int_equal(ms__wire_frame(h, sizeof h, 3, &f, &why), MS_EPROTO);
  assert_non_null(strstr(why, "length"));
  h[15] = 1;
  assert_int_equal(ms__wire_frame(h, sizeof h, 100, &f, &why), MS_EPROTO);
}

/* Every truncation of a good message, and every single-byte corruption,
 * decodes to an error or to fewer fields, never past the bytes given. */
static void test_truncation_and_corruption(void **state) {
  (void)state;
  static ms_snapshot_t in, out;
  fill(&in);
  size_t n = encode(&in);
  size_t plen = n - MS__WIRE_HEADER;
  for (size_t cut = 0; cut < plen; cut++) {
    uint8_t *p = malloc(cut + 1); /* exact size: ASan sees any over-read */
    memcpy(p, g_buf + MS__WIRE_HEADER, cut);
    int r = ms__wire_decode_snapshot(p, cut, &out, NULL);
    assert_true(r == 0 || r == MS_EPROTO);
    ms__frame_t f;
    assert_int_equal(ms__wire_frame(g_buf, MS__WIRE_HEADER + cut,
                                    MS__WIRE_MAX_PAYLOAD, &f, NULL),
                     MS_EAGAIN);
    free(p);
  }
  srand(7);
  uint8_t *p = malloc(plen);
  for (int i = 0; i < 3000; i++) {
    memcpy(p, g_buf + MS__WIRE_HEADER, plen);
    p[(size_t)rand() % plen] = (uint8_t)rand();
    int r = ms__wire_decode_snapshot(p, plen, &out, NULL);
    assert_true(r == 0 || r == MS_EPROTO);
    assert_true(out.nsize_classes <= MS_MAX_SIZE_CLASSES);
    assert_true(out.nproviders <= MS_MAX_PROVIDERS);
    for (uint32_t k = 0; k < out.nproviders; k++)
      assert_true(strlen(out.providers[k]) < MS_NAME_MAX);
  }
  free(p);
}

static void test_hello_error_request(void **state) {
  (void)state;
  ms__wire_hello_t h, o;
  memset(&h, 0, sizeof h);
  h.pid = 77;
  h.start_time = 1234;
  snprintf(h.comm, sizeof h.comm, "a\tb\x1b[31m");
  snprintf(h.lib_version, sizeof h.lib_version, "0.1.0");
  h.proto_version = 1;
  h.nproviders = 2;
  snprintf(h.providers[0], MS_NAME_MAX, "glibc");
  snprintf(h.providers[1], MS_NAME_MAX, "tracked");
  h.capabilities = MS__CAP_SNAPSHOT;
  ms__wire_writer_t w;
  ms__wire_writer_init(&w, g_buf, sizeof g_buf);
  assert_int_equal(ms__wire_encode_hello(&w, &h), 0);
  assert_int_equal(ms__wire_decode_hello(g_buf + MS__WIRE_HEADER,
                                         w.len - MS__WIRE_HEADER, &o, NULL),
                   0);
  assert_int_equal(o.pid, 77);
  assert_int_equal(o.start_time, 1234);
  /* Control characters from a target never reach a terminal. */
  assert_string_equal(o.comm, "a?b?[31m");
  assert_string_equal(o.providers[1], "tracked");
  assert_int_equal(o.nproviders, 2);
  assert_int_equal(o.capabilities, MS__CAP_SNAPSHOT);

  ms__wire_writer_init(&w, g_buf, sizeof g_buf);
  assert_int_equal(
      ms__wire_encode_error(&w, MS__MSG_REFUSED, MS_EREFUSED, "go away"), 0);
  int code;
  char reason[8];
  assert_int_equal(ms__wire_decode_error(g_buf + MS__WIRE_HEADER,
                                         w.len - MS__WIRE_HEADER, &code, reason,
                                         sizeof reason, NULL),
                   0);
  assert_int_equal(code, MS_EREFUSED);
  assert_string_equal(reason, "go away");
  /* A positive or absurd code reads as a protocol error. */
  ms__wire_writer_init(&w, g_buf, sizeof g_buf);
  ms__wire_encode_error(&w, MS__MSG_ERROR, 5, "x");
  ms__wire_decode_error(g_buf + MS__WIRE_HEADER, w.len - MS__WIRE_HEADER, &code,
                        reason, sizeof reason, NULL);
  assert_int_equal(code, MS_EPROTO);

  ms__wire_writer_init(&w, g_buf, sizeof g_buf);
  ms__wire_encode_request(&w, MS__MSG_SNAPSHOT_REQ, MS__REQ_SMAPS);
  uint64_t flags;
  assert_int_equal(ms__wire_decode_request(g_buf + MS__WIRE_HEADER,
                                           w.len - MS__WIRE_HEADER, &flags,
                                           NULL),
                   0);
  assert_int_equal(flags, MS__REQ_SMAPS);
}

/* The hello and the snapshot decode their identity alike: a pid no process
 * can have (0, negative, past int32) is refused by both, not cast. */
static void test_identity_pid(void **state) {
  (void)state;
  static const uint64_t bad[] = {0, (uint64_t)-1, (uint64_t)INT32_MAX + 1,
                                 1ull << 40};
  static ms_snapshot_t s;
  ms__wire_hello_t h;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0] + 1; i++) {
    uint64_t pid = i < sizeof bad / sizeof bad[0] ? bad[i] : 4242;
    int want = i < sizeof bad / sizeof bad[0] ? MS_EPROTO : 0;
    for (int type = 0; type < 2; type++) {
      ms__wire_writer_t w;
      ms__wire_writer_init(&w, g_buf, sizeof g_buf);
      ms__wire_begin(&w, type ? MS__MSG_SNAPSHOT : MS__MSG_HELLO);
      ms__wire_put_u64(&w, MS__TAG_PID, pid);
      ms__wire_put_str(&w, MS__TAG_COMM, "x", 2);
      assert_int_equal(ms__wire_end(&w), 0);
      const char *why = NULL;
      int r = type ? ms__wire_decode_snapshot(g_buf + MS__WIRE_HEADER,
                                              w.len - MS__WIRE_HEADER, &s, &why)
                   : ms__wire_decode_hello(g_buf + MS__WIRE_HEADER,
                                           w.len - MS__WIRE_HEADER, &h, &why);
      assert_int_equal(r, want);
      if (want) {
        assert_non_null(why);
        assert_non_null(strstr(why, "pid"));
      } else {
        assert_int_equal(type ? s.pid : h.pid, 4242);
        assert_string_equal(type ? s.comm : h.comm, "x");
      }
    }
  }
}

static void test_writer_overflow(void **state) {
  (void)state;
  static ms_snapshot_t in;
  fill(&in);
  uint8_t small[256];
  ms__wire_writer_t w;
  ms__wire_writer_init(&w, small, sizeof small);
  assert_int_equal(ms__wire_encode_request(&w, MS__MSG_SNAPSHOT_REQ, 0), 0);
  size_t before = w.len;
  assert_int_equal(ms__wire_encode_snapshot(&w, &in, NULL), MS_ENOSPC);
  assert_int_equal(w.len, before); /* the failed frame is dropped whole */
  assert_int_equal(ms__wire_encode_request(&w, MS__MSG_SNAPSHOT_REQ, 0), 0);
}

/* ---- the session ---- */
static size_t put_hello(uint8_t *buf, size_t cap, int pid, uint64_t st) {
  ms__wire_hello_t h;
  memset(&h, 0, sizeof h);
  h.pid = pid;
  h.start_time = st;
  snprintf(h.comm, sizeof h.comm, "server");
  ms__wire_writer_t w;
  ms__wire_writer_init(&w, buf, cap);
  ms__wire_encode_hello(&w, &h);
  return w.len;
}

static void test_session(void **state) {
  (void)state;
  static ms_snapshot_t in, out;
  fill(&in);
  msc_session_t *s = msc_session_new(4242, 987654321);
  const uint8_t *req;
  size_t len;
  assert_int_equal(msc_session_request_snapshot(s, &req, &len), 0);
  /* The first request says hello, then asks. */
  ms__frame_t f;
  assert_int_equal(ms__wire_frame(req, len, 4096, &f, NULL), 0);
  assert_int_equal(f.type, MS__MSG_HELLO);
  assert_int_equal(
      ms__wire_frame(req + 16 + f.length, len - 16 - f.length, 4096, &f, NULL),
      0);
  assert_int_equal(f.type, MS__MSG_SNAPSHOT_REQ);
  assert_int_equal(msc_session_request_snapshot(s, &req, &len), 0);
  assert_int_equal(ms__wire_frame(req, len, 4096, &f, NULL), 0);
  assert_int_equal(f.type, MS__MSG_SNAPSHOT_REQ);

  /* Hello and snapshot arrive in one buffer; fed in two steps. */
  size_t n = put_hello(g_buf, sizeof g_buf, 4242, 987654321);
  ms__wire_writer_t w;
  ms__wire_writer_init(&w, g_buf, sizeof g_buf);
  w.len = n;
  ms__wire_encode_snapshot(&w, &in, NULL);
  size_t used;
  msc_event_t ev;
  assert_int_equal(msc_session_feed(s, g_buf, 10, &used, &out, &ev), 0);
  assert_int_equal(used, 0);
  assert_int_equal(ev.type, MSC_EV_NONE);
  assert_int_equal(msc_session_feed(s, g_buf, w.len, &used, &out, &ev), 0);
  assert_int_equal(ev.type, MSC_EV_HELLO);
  assert_int_equal(used, n);
  assert_string_equal(msc_session_hello(s)->comm, "server");
  assert_int_equal(
      msc_session_feed(s, g_buf + used, w.len - used, &used, &out, &ev), 0);
  assert_int_equal(ev.type, MSC_EV_SNAPSHOT);
  assert_memory_equal(&in, &out, sizeof in);

  /* An error about one request leaves the session usable. */
  ms__wire_writer_init(&w, g_buf, sizeof g_buf);
  ms__wire_encode_error(&w, MS__MSG_ERROR, MS_ENOSYS, "no profiles");
  assert_int_equal(msc_session_feed(s, g_buf, w.len, &used, &out, &ev),
                   MS_ENOSYS);
  assert_int_equal(ev.type, MSC_EV_ERROR);
  assert_non_null(strstr(ev.msg, "no profiles"));
  /* Unknown message types are skipped. */
  ms__wire_writer_init(&w, g_buf, sizeof g_buf);
  ms__wire_encode_request(&w, (ms__msg_type_t)200, 0);
  assert_int_equal(msc_session_feed(s, g_buf, w.len, &used, &out, &ev), 0);
  assert_int_equal(used, w.len);
  assert_int_equal(ev.type, MSC_EV_NONE);
  /* A refusal ends it. */
  ms__wire_writer_init(&w, g_buf, sizeof g_buf);
  ms__wire_encode_error(&w, MS__MSG_REFUSED, MS_EREFUSED, "uid 5 refused");
  assert_int_equal(msc_session_feed(s, g_buf, w.len, &used, &out, &ev),
                   MS_EREFUSED);
  assert_non_null(strstr(ev.msg, "refused"));
  assert_int_equal(msc_session_feed(s, g_buf, w.len, &used, &out, &ev),
                   MS_EREFUSED);
  msc_session_free(s);
}

static void expect_session_error(int pid, uint64_t st, const uint8_t *b,
                                 size_t n, int err, const char *words) {
  static ms_snapshot_t out;
  msc_session_t *s = msc_session_new(pid, st);
  size_t used;
  msc_event_t ev;
  assert_int_equal(msc_session_feed(s, b, n, &used, &out, &ev), err);
  assert_int_equal(ev.type, MSC_EV_ERROR);
  if (strstr(ev.msg, words) == NULL)
    fail_msg("message: %s", ev.msg);
  msc_session_free(s);
}

static void test_session_errors(void **state) {
  (void)state;
  size_t n = put_hello(g_buf, sizeof g_buf, 4242, 5);
  expect_session_error(4242, 6, g_buf, n, MS_ESTALE, "reused");
  expect_session_error(4243, 5, g_buf, n, MS_ESTALE, "4243");
  g_buf[4] = 9;
  expect_session_error(4242, 5, g_buf, n, MS_EVERSION, "upgrade memtop");
  g_buf[0] = 'x';
  expect_session_error(4242, 5, g_buf, n, MS_EPROTO, "malformed");
  static ms_snapshot_t in;
  fill(&in);
  n = encode(&in);
  expect_session_error(4242, 0, g_buf, n, MS_EPROTO, "before the handshake");
  /* Random bytes: an error or "need more", never a crash. */
  srand(3);
  static ms_snapshot_t out;
  for (int i = 0; i < 2000; i++) {
    uint8_t junk[64];
    for (size_t k = 0; k < sizeof junk; k++)
      junk[k] = (uint8_t)rand();
    if (i % 2)
      memcpy(junk, "MSTW\1\0", 6);
    msc_session_t *s = msc_session_new(1, 0);
    size_t used;
    msc_event_t ev;
    msc_session_feed(s, junk, sizeof junk, &used, &out, &ev);
    assert_true(used <= sizeof junk);
    assert_true(ev.type == MSC_EV_NONE || ev.type == MSC_EV_ERROR ||
                ev.type == MSC_EV_HELLO);
    msc_session_free(s);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_snapshot_round_trip),
      cmocka_unit_test(test_pause_ring_trimmed),
      cmocka_unit_test(test_age_patch),
      cmocka_unit_test(test_forward_compat),
      cmocka_unit_test(test_frame_checks),
      cmocka_unit_test(test_truncation_and_corruption),
      cmocka_unit_test(test_hello_error_request),
      cmocka_unit_test(test_identity_pid),
      cmocka_unit_test(test_writer_overflow),
      cmocka_unit_test(test_session),
      cmocka_unit_test(test_session_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
