/*
 * fuzz_agent_request.c - the agent's request handler on hostile bytes, as
 * a client would send them. Every reply it writes must be a well-formed
 * frame that memtop's decoder accepts, and it may never consume more than
 * it was given.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdlib.h>

#include "agent/agent.h"
#include "wire/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static uint8_t g_out[4 * MS__AGENT_REPLY_MAX];
static ms_snapshot_t g_snap;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  /* Serve from the cache most of the time, as under load. */
  ms__agent_set_interval(1000000000ull);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ms__wire_writer_t w;
  ms__wire_writer_init(&w, g_out, sizeof g_out);
  ms__agent_hello(&w);
  int close_after = 0;
  size_t off = 0;
  /* Feed the input the way the agent's loop does: handle, keep what is
   * left, and stop when the handler wants more bytes or hangs up. */
  while (off < size && !close_after) {
    if (w.cap - w.len < MS__AGENT_REPLY_MAX)
      w.len = 0;
    size_t used = ms__agent_handle(data + off, size - off, &w, &close_after);
    if (used > size - off)
      abort();
    if (used == 0)
      break;
    off += used;
  }
  /* The replies decode. */
  size_t at = 0;
  while (at < w.len) {
    ms__frame_t f;
    const char *why;
    if (ms__wire_frame(w.buf + at, w.len - at, MS__WIRE_MAX_PAYLOAD, &f,
                       &why) != 0)
      abort();
    const uint8_t *p = w.buf + at + MS__WIRE_HEADER;
    if (f.type == MS__MSG_SNAPSHOT &&
        ms__wire_decode_snapshot(p, f.length, &g_snap, &why) != 0)
      abort();
    if (f.type == MS__MSG_ERROR) {
      int code;
      if (ms__wire_decode_error(p, f.length, &code, NULL, 0, &why) != 0 ||
          code >= 0)
        abort();
    }
    at += MS__WIRE_HEADER + f.length;
  }
  return 0;
}
