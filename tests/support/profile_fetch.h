/*
 * profile_fetch.h - test helper: fetch a target's heap profile over its
 * real socket, blocking (hello, MS__MSG_PROFILE_REQ, frames until the
 * last), decoded by the wire module's decoder. Header only.
 */
#ifndef MS_TESTS_SUPPORT_PROFILE_FETCH_H
#define MS_TESTS_SUPPORT_PROFILE_FETCH_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "wire/profile.h"
#include "wire/wire.h"

/* Reads one whole frame into *buf (grown as needed). Returns 0 with the
 * frame at (*buf)[0, MS__WIRE_HEADER + f->length), or an MS_E* code. */
static inline int pf_read_frame(int fd, uint8_t **buf, size_t *cap,
                                ms__frame_t *f) {
  size_t have = 0;
  for (;;) {
    const char *why = NULL;
    int r = ms__wire_frame(*buf, have, MS__WIRE_MAX_PAYLOAD, f, &why);
    if (r == 0)
      return 0;
    if (r != MS_EAGAIN) {
      fprintf(stderr, "profile fetch: %s\n", why ? why : "bad frame");
      return r;
    }
    size_t want = have < MS__WIRE_HEADER ? MS__WIRE_HEADER
                                         : MS__WIRE_HEADER + (size_t)f->length;
    if (have >= MS__WIRE_HEADER) {
      ms__wire_frame(*buf, MS__WIRE_HEADER, MS__WIRE_MAX_PAYLOAD, f, NULL);
      want = MS__WIRE_HEADER + (size_t)((*buf)[8] | (*buf)[9] << 8 |
                                        (*buf)[10] << 16 |
                                        (uint32_t)(*buf)[11] << 24);
    }
    if (want > *cap) {
      uint8_t *n = realloc(*buf, want);
      if (n == NULL)
        return MS_ENOMEM;
      *buf = n;
      *cap = want;
    }
    ssize_t n = recv(fd, *buf + have, want - have, 0);
    if (n <= 0) {
      fprintf(stderr, "profile fetch: %s after %zu bytes\n",
              n == 0 ? "connection closed" : strerror(errno), have);
      return n == 0 ? MS_EPROTO : MS_ETIMEDOUT;
    }
    have += (size_t)n;
  }
}

/* The profile frames the last pf_fetch() received. */
static int pf_frames;

/* Fetches pid's profile from dir/<pid>.sock. Returns 0 with *out (free
 * with ms__profile_decoded_free) and *caps the hello's capabilities, or
 * an MS_E* code (an error frame's own code). */
static inline int pf_fetch(const char *dir, int pid,
                           ms__profile_decoded_t **out, uint64_t *caps) {
  *out = NULL;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return MS_ENOMEM;
  struct timeval tv = {20, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  struct sockaddr_un sa;
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s/%d.sock", dir, pid);
  uint8_t *buf = NULL;
  size_t cap = 0;
  ms__profile_decoded_t *d = NULL;
  int r = MS_ECONNREFUSED;
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0)
    goto done;
  ms__frame_t f;
  if ((r = pf_read_frame(fd, &buf, &cap, &f)) != 0)
    goto done;
  ms__wire_hello_t h;
  if (f.type != MS__MSG_HELLO ||
      ms__wire_decode_hello(buf + MS__WIRE_HEADER, f.length, &h, NULL) != 0) {
    fprintf(stderr, "profile fetch: frame of type %u instead of a hello\n",
            (unsigned)f.type);
    r = MS_EPROTO;
    goto done;
  }
  if (caps != NULL)
    *caps = h.capabilities;
  uint8_t req[64];
  ms__wire_writer_t w;
  ms__wire_writer_init(&w, req, sizeof req);
  ms__wire_encode_request(&w, MS__MSG_PROFILE_REQ, 0);
  if (send(fd, req, w.len, MSG_NOSIGNAL) != (ssize_t)w.len) {
    fprintf(stderr, "profile fetch: sending the request: %s\n",
            strerror(errno));
    r = MS_EPROTO;
    goto done;
  }
  d = ms__profile_decoded_new();
  if (d == NULL) {
    r = MS_ENOMEM;
    goto done;
  }
  pf_frames = 0;
  while (!d->complete) {
    if ((r = pf_read_frame(fd, &buf, &cap, &f)) != 0)
      goto done;
    pf_frames++;
    if (f.type == MS__MSG_ERROR) {
      char reason[256];
      int code = MS_EPROTO;
      ms__wire_decode_error(buf + MS__WIRE_HEADER, f.length, &code, reason,
                            sizeof reason, NULL);
      fprintf(stderr, "profile refused: %s\n", reason);
      r = code;
      goto done;
    }
    if (f.type != MS__MSG_PROFILE) {
      fprintf(stderr, "profile fetch: frame of type %u in the profile\n",
              (unsigned)f.type);
      r = MS_EPROTO;
      goto done;
    }
    const char *why = NULL;
    r = ms__profile_decode_frame(d, buf + MS__WIRE_HEADER, f.length, &why);
    if (r != 0) {
      fprintf(stderr, "profile frame: %s\n", why ? why : "?");
      goto done;
    }
  }
  *out = d;
  d = NULL;
  r = 0;
done:
  ms__profile_decoded_free(d);
  free(buf);
  close(fd);
  return r;
}

#endif
