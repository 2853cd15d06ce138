/*
 * request.c - what the agent answers, with no sockets in sight: a client's
 * bytes in, reply frames out. The fuzz harness drives this directly.
 *
 * Snapshots are rate limited as in the seed program: one is computed at
 * most once per interval, and requests in between get the cached one with
 * its age. The cache is kept encoded, so a cached answer is a copy and an
 * 8-byte patch. Everything lives in static storage: the agent runs inside
 * a process whose malloc may be the one being tracked.
 *
 * A request may ask for smaps_rollup (MS__REQ_SMAPS). The rule: a cached
 * snapshot inside the interval answers a plain request whatever it holds,
 * and a smaps request only if it was taken with smaps; otherwise a smaps
 * request computes a fresh snapshot with smaps at once, which then answers
 * both kinds for the rest of its interval. So at most two snapshots are
 * computed per interval (one plain, then one with smaps), and smaps_rollup
 * itself is read at most once per its own slower cadence (compose/snapshot.c):
 * inside it, the snapshot carries the figures of the last read.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent/agent.h"
#include "core/engine.h"
#include "core/util.h"
#include "compose/snapshot.h"
#include "profile/profile.h"
#include "wire/profile.h"

static struct {
  uint64_t interval_ns;
  int valid;
  unsigned flags;    /* MS__READ_* the cached snapshot was taken with */
  int pid;           /* whose snapshot this is: a forked child is not */
  uint64_t computed; /* CLOCK_MONOTONIC when it was computed */
  ms_snapshot_t snap;
  size_t enc_len;
  size_t age_at; /* offset of the age value in enc[] */
  uint8_t enc[MS__WIRE_SNAPSHOT_MAX];
} g_cache = {100 * 1000000ull, 0, 0, 0, 0, {0}, 0, 0, {0}};

void ms__agent_set_interval(uint64_t ns) {
  g_cache.interval_ns = ns;
}

void ms__agent_cache_reset(void) {
  g_cache.valid = 0;
}

/* Brings the cache up to date if it is older than the interval or lacks
 * what `flags` (MS__READ_*) asks for. Returns 0 or the error of
 * ms_snapshot_read(). */
static int refresh(uint64_t now, unsigned flags) {
  if (g_cache.valid && g_cache.pid == (int)getpid() &&
      now - g_cache.computed < g_cache.interval_ns &&
      (g_cache.flags & flags) == flags)
    return 0;
  int r = ms__snapshot_read_opts(&g_cache.snap, sizeof g_cache.snap, flags);
  if (r != 0)
    return r;
  g_cache.snap.age_ns = 0;
  ms__wire_writer_t w;
  ms__wire_writer_init(&w, g_cache.enc, sizeof g_cache.enc);
  r = ms__wire_encode_snapshot(&w, &g_cache.snap, &g_cache.age_at);
  if (r != 0) {
    g_cache.valid = 0;
    return r;
  }
  g_cache.enc_len = w.len;
  g_cache.computed = now;
  g_cache.flags = flags;
  g_cache.pid = (int)getpid();
  g_cache.valid = 1;
  return 0;
}

int ms__agent_snapshot_flags(ms__wire_writer_t *out, uint64_t req_flags) {
  uint64_t now = ms__now_mono_ns();
  /* Request flags this agent does not know are a newer memtop's: ignored. */
  unsigned flags = (req_flags & MS__REQ_SMAPS) ? MS__READ_SMAPS : 0;
  int r = refresh(now, flags);
  if (r != 0)
    return ms__wire_encode_error(out, MS__MSG_ERROR, r,
                                 "the snapshot could not be taken");
  if (out->cap - out->len < g_cache.enc_len)
    return MS_ENOSPC;
  uint8_t *dst = out->buf + out->len;
  memcpy(dst, g_cache.enc, g_cache.enc_len);
  ms__wire_patch_u64(dst + g_cache.age_at, now - g_cache.computed);
  out->len += g_cache.enc_len;
  return 0;
}

int ms__agent_hello(ms__wire_writer_t *out) {
  ms__wire_hello_t h;
  memset(&h, 0, sizeof h);
  /* Identity comes from the snapshot code, which knows how to read the
   * start time and name; the providers are those of the latest snapshot. */
  if (refresh(ms__now_mono_ns(), 0) == 0) {
    const ms_snapshot_t *s = &g_cache.snap;
    h.pid = s->pid;
    h.start_time = s->start_time;
    memcpy(h.comm, s->comm, sizeof h.comm);
    h.nproviders =
        s->nproviders > MS_MAX_PROVIDERS ? MS_MAX_PROVIDERS : s->nproviders;
    memcpy(h.providers, s->providers, sizeof h.providers);
  } else {
    h.pid = (int)getpid();
  }
  h.comm[sizeof h.comm - 1] = '\0';
  snprintf(h.lib_version, sizeof h.lib_version, "%s", MS_VERSION_STRING);
  h.proto_version = MS__WIRE_VERSION;
  h.capabilities = MS__CAP_SNAPSHOT | MS__CAP_SMAPS;
  if (ms__prof_rate() != 0)
    h.capabilities |= MS__CAP_PROFILE;
  return ms__wire_encode_hello(out, &h);
}

/* The profile prepared by the last request, until the caller takes it. */
static struct {
  uint8_t *map;
  size_t len, map_len;
} g_profile;

void ms__agent_take_profile(uint8_t **map, size_t *len, size_t *map_len) {
  *map = g_profile.map;
  *len = g_profile.len;
  *map_len = g_profile.map_len;
  g_profile.map = NULL;
}

/* Set once by memtop attach's start (agent.h); read by request handlers. */
static int g_attached;

void ms__agent_mark_attached(void) {
  __atomic_store_n(&g_attached, 1, __ATOMIC_RELAXED);
}

/* Answers a profile request: the encoded profile waits in g_profile for
 * the caller to stream it, or an error frame says why there is none. */
static void profile_request(ms__wire_writer_t *out) {
  int32_t pid = (int32_t)getpid();
  uint64_t start_time = 0;
  if (refresh(ms__now_mono_ns(), 0) == 0 && g_cache.snap.pid == pid)
    start_time = g_cache.snap.start_time;
  int r = ms__agent_profile_build(pid, start_time, &g_profile.map,
                                  &g_profile.len, &g_profile.map_len);
  if (r == MS_ENOSYS && __atomic_load_n(&g_attached, __ATOMIC_RELAXED))
    ms__wire_encode_error(out, MS__MSG_ERROR, r,
                          "no heap profile: libmemstats was loaded by "
                          "memtop attach, after the program's allocations "
                          "began, and samples none without --track (`memtop "
                          "attach --track` samples from then on; `memtop "
                          "run` from the start)");
  else if (r == MS_ENOSYS)
    ms__wire_encode_error(out, MS__MSG_ERROR, r,
                          "heap profiling is off in this process "
                          "(MEMSTATS_PROFILE_RATE=0, or no memory for its "
                          "table)");
  else if (r == MS_EAGAIN)
    ms__wire_encode_error(out, MS__MSG_ERROR, r,
                          "other heap profiles are being sent; try again");
  else if (r != 0)
    ms__wire_encode_error(out, MS__MSG_ERROR, r,
                          "the heap profile could not be prepared");
}

size_t ms__agent_handle(const uint8_t *in, size_t len, ms__wire_writer_t *out,
                        int *close_after) {
  size_t used = 0;
  char msg[128];
  /* A profile from an earlier call that nobody took (the fuzz harness). */
  if (g_profile.map != NULL) {
    ms__agent_profile_free(g_profile.map, g_profile.map_len);
    g_profile.map = NULL;
  }
  while (!*close_after && out->cap - out->len >= MS__AGENT_REPLY_MAX &&
         g_profile.map == NULL) {
    ms__frame_t f;
    const char *why = "malformed request";
    int r =
        ms__wire_frame(in + used, len - used, MS__WIRE_MAX_REQUEST, &f, &why);
    if (r == MS_EAGAIN)
      break;
    if (r == MS_EVERSION) {
      snprintf(msg, sizeof msg,
               "protocol version %u is newer than this agent's (%u): use a "
               "memtop as old as libmemstats %s",
               (unsigned)f.version, (unsigned)MS__WIRE_VERSION,
               MS_VERSION_STRING);
      ms__wire_encode_error(out, MS__MSG_ERROR, MS_EVERSION, msg);
      *close_after = 1;
      break;
    }
    if (r != 0) {
      /* The stream cannot be resynchronised after a bad frame. */
      ms__wire_encode_error(out, MS__MSG_ERROR, MS_EPROTO, why);
      *close_after = 1;
      break;
    }
    const uint8_t *payload = in + used + MS__WIRE_HEADER;
    used += MS__WIRE_HEADER + f.length;
    switch (f.type) {
    case MS__MSG_HELLO: {
      ms__wire_hello_t h;
      if (ms__wire_decode_hello(payload, f.length, &h, &why) != 0) {
        ms__wire_encode_error(out, MS__MSG_ERROR, MS_EPROTO, why);
        *close_after = 1;
      }
      break;
    }
    case MS__MSG_SNAPSHOT_REQ: {
      uint64_t flags;
      if (ms__wire_decode_request(payload, f.length, &flags, &why) != 0) {
        ms__wire_encode_error(out, MS__MSG_ERROR, MS_EPROTO, why);
        *close_after = 1;
        break;
      }
      ms__agent_snapshot_flags(out, flags);
      break;
    }
    case MS__MSG_PROFILE_REQ: {
      uint64_t flags; /* none known yet: a newer memtop's are ignored */
      if (ms__wire_decode_request(payload, f.length, &flags, &why) != 0) {
        ms__wire_encode_error(out, MS__MSG_ERROR, MS_EPROTO, why);
        *close_after = 1;
        break;
      }
      profile_request(out);
      break;
    }
    case MS__MSG_GC_REQ:
      ms__wire_encode_error(out, MS__MSG_ERROR, MS_ENOSYS,
                            "forcing a collection is not supported by this "
                            "version of libmemstats");
      break;
    default:
      /* A newer memtop's request: say so and keep the connection. */
      snprintf(msg, sizeof msg, "unknown request type %u", (unsigned)f.type);
      ms__wire_encode_error(out, MS__MSG_ERROR, MS_ENOSYS, msg);
      break;
    }
  }
  return used;
}
