/*
 * fuzz_wire_decode.c - memtop's side of the wire, on hostile bytes: the
 * frame reader, every payload decoder, and the session state machine fed
 * the input as a stream. A decoded snapshot must survive a re-encoding
 * round trip unchanged.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"
#include "wire/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static ms_snapshot_t g_snap, g_again;
static uint8_t g_enc[MS__WIRE_SNAPSHOT_MAX];

static void check_round_trip(void) {
  ms__wire_writer_t w;
  ms__wire_writer_init(&w, g_enc, sizeof g_enc);
  if (ms__wire_encode_snapshot(&w, &g_snap, NULL) != 0)
    abort();
  if (ms__wire_decode_snapshot(g_enc + MS__WIRE_HEADER, w.len - MS__WIRE_HEADER,
                               &g_again, NULL) != 0)
    abort();
  if (memcmp(&g_snap, &g_again, sizeof g_snap) != 0)
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* Every decoder straight on the bytes. */
  ms__wire_hello_t h;
  uint64_t flags;
  int code;
  char reason[64];
  const char *why;
  ms__wire_decode_hello(data, size, &h, &why);
  ms__wire_decode_request(data, size, &flags, &why);
  ms__wire_decode_error(data, size, &code, reason, sizeof reason, &why);
  if (ms__wire_decode_snapshot(data, size, &g_snap, &why) == 0)
    check_round_trip();

  /* The session, as memtop's loop drives it. The first byte picks the
   * expected start time check (on or off). */
  msc_session_t *s = msc_session_new(0, 0);
  if (s == NULL)
    return 0;
  const uint8_t *req;
  size_t len;
  msc_session_request_snapshot(s, &req, &len);
  size_t off = 0;
  while (off <= size) {
    size_t used;
    msc_event_t ev;
    int r = msc_session_feed(s, data + off, size - off, &used, &g_snap, &ev);
    if (used > size - off)
      abort();
    if (ev.type == MSC_EV_SNAPSHOT)
      check_round_trip();
    if (r != 0 || used == 0)
      break;
    off += used;
  }
  msc_session_free(s);
  return 0;
}
