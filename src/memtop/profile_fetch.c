/*
 * profile_fetch.c - `memtop profile`'s request (see profile_fetch.h).
 *
 * The connection is msc_connect()'s (the socket found by the same rules,
 * the peer verified with SO_PEERCRED), the handshake and any refusal or
 * error are the session's (client.c), and the answer's MS__MSG_PROFILE
 * frames go to the profile decoder (wire/profile.c) one by one, as they
 * arrive: a profile may span many frames, each within the wire's payload
 * bound, and the decoder bounds the whole.
 */
#include "memtop/profile_fetch.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client/client.h"
#include "memstats.h"
#include "wire/wire.h"

int mt_profile_fetch(int pid, int timeout_ms, ms__profile_decoded_t **out,
                     char *errbuf, size_t errlen) {
  msc_session_t *s = NULL;
  ms__profile_decoded_t *d = NULL;
  const msc_hello_t *hello;
  uint64_t start_time = 0;
  uint8_t *buf = NULL;
  size_t cap = 64 * 1024, have = 0, reqlen = 0, sent = 0;
  const uint8_t *req = NULL;
  int fd, r;

  *out = NULL;
  fd = msc_connect(pid, timeout_ms, &start_time, errbuf, errlen);
  if (fd < 0)
    return fd;
  s = msc_session_new(pid, start_time);
  d = ms__profile_decoded_new();
  buf = malloc(cap);
  if (s == NULL || d == NULL || buf == NULL) {
    r = MS_ENOMEM;
    snprintf(errbuf, errlen, "PID %d: out of memory", pid);
    goto out;
  }
  r = msc_session_request_profile(s, MS__PROFREQ_NONE, &req, &reqlen);
  if (r != 0) {
    snprintf(errbuf, errlen, "PID %d: cannot make the request", pid);
    goto out;
  }
  for (;;) {
    struct pollfd p = {fd, (short)(POLLIN | (sent < reqlen ? POLLOUT : 0)), 0};
    int pr = poll(&p, 1, timeout_ms);
    ssize_t n;

    if (pr < 0 && errno == EINTR)
      continue;
    if (pr <= 0) {
      r = MS_ETIMEDOUT;
      snprintf(errbuf, errlen,
               "PID %d: no answer within %d ms while reading its heap "
               "profile (the process may be stopped or overloaded; "
               "MEMTOP_TIMEOUT_MS waits longer)",
               pid, timeout_ms);
      goto out;
    }
    if (sent < reqlen && (p.revents & POLLOUT)) {
      n = send(fd, req + sent, reqlen - sent, MSG_NOSIGNAL);
      if (n > 0)
        sent += (size_t)n;
    }
    if (!(p.revents & (POLLIN | POLLHUP | POLLERR)))
      continue;
    if (have == cap) {
      /* One frame at most is held: a payload within the bound. */
      uint8_t *nb;
      if (cap >= MS__WIRE_HEADER + MS__WIRE_MAX_PAYLOAD) {
        r = MS_EPROTO;
        snprintf(errbuf, errlen, "malformed reply from PID %d: too long", pid);
        goto out;
      }
      nb = realloc(buf, cap * 2);
      if (nb == NULL) {
        r = MS_ENOMEM;
        snprintf(errbuf, errlen, "PID %d: out of memory", pid);
        goto out;
      }
      buf = nb;
      cap *= 2;
    }
    n = recv(fd, buf + have, cap - have, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (n <= 0) {
      r = MS_EPROTO;
      snprintf(errbuf, errlen,
               "malformed reply from PID %d: the connection closed in the "
               "middle of its heap profile",
               pid);
      goto out;
    }
    have += (size_t)n;
    for (;;) {
      ms__frame_t f;
      const char *why = NULL;
      size_t used = 0;
      msc_event_t ev;

      r = ms__wire_frame(buf, have, MS__WIRE_MAX_PAYLOAD, &f, &why);
      if (r == MS_EAGAIN)
        break;
      if (r == 0 && f.type == MS__MSG_PROFILE) {
        hello = msc_session_hello(s);
        if (hello == NULL) {
          r = MS_EPROTO;
          snprintf(errbuf, errlen,
                   "malformed reply from PID %d: a profile before the "
                   "handshake",
                   pid);
          goto out;
        }
        r = ms__profile_decode_frame(d, buf + MS__WIRE_HEADER, f.length, &why);
        if (r != 0) {
          snprintf(errbuf, errlen, "malformed heap profile from PID %d: %s",
                   pid,
                   r == MS_ENOMEM ? "out of memory"
                   : why          ? why
                                  : "?");
          goto out;
        }
        used = MS__WIRE_HEADER + (size_t)f.length;
        memmove(buf, buf + used, have - used);
        have -= used;
        if (!d->complete)
          continue;
        if (d->profile.pid != hello->pid ||
            d->profile.start_time != hello->start_time) {
          r = MS_EPROTO;
          snprintf(errbuf, errlen,
                   "malformed reply from PID %d: the profile is of another "
                   "process (PID %d)",
                   pid, (int)d->profile.pid);
          goto out;
        }
        *out = d;
        d = NULL;
        r = 0;
        goto out;
      }
      /* The handshake, a refusal, an error, or a bad frame: the
       * session's to judge. */
      r = msc_session_feed(s, buf, have, &used, NULL, &ev);
      if (ev.type == MSC_EV_ERROR) {
        snprintf(errbuf, errlen, "%s", ev.msg);
        r = ev.err != 0 ? ev.err : MS_EPROTO;
        goto out;
      }
      if (r != 0) {
        snprintf(errbuf, errlen, "malformed reply from PID %d", pid);
        goto out;
      }
      memmove(buf, buf + used, have - used);
      have -= used;
      if (used == 0)
        break;
    }
  }
out:
  ms__profile_decoded_free(d);
  msc_session_free(s);
  free(buf);
  close(fd);
  return r;
}
