/*
 * fetch.h - test and benchmark helper: one snapshot from a target, blocking.
 * The transport is this file's (a socket, poll, a buffer); everything else
 * is memtop's own code: finding the socket (msc_find_socket), checking the
 * peer (msc_verify_peer), the protocol (the client session, as memtop's
 * libuv connection drives it) and the words for what fails
 * (msc_explain_*, memtop's wording). Header only, like the other helpers
 * here.
 */
#ifndef MS_TESTS_SUPPORT_FETCH_H
#define MS_TESTS_SUPPORT_FETCH_H

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "client/client.h"
#include "memstats.h"
#include "wire/wire.h"

/* Connects to a socket path, waiting at most timeout_ms for room in the
 * listen queue. Returns the fd or a negative errno-style code. */
static inline int fetch_connect(const char *path, int timeout_ms) {
  struct sockaddr_un sa;
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  if (strlen(path) >= sizeof sa.sun_path)
    return MS_EINVAL;
  memcpy(sa.sun_path, path, strlen(path) + 1);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return -errno;
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    int e = errno;
    struct pollfd p = {fd, POLLOUT, 0};
    int err = 0;
    socklen_t el = sizeof err;
    if (e != EAGAIN && e != EINPROGRESS) {
      close(fd);
      return -e;
    }
    if (poll(&p, 1, timeout_ms) <= 0) {
      close(fd);
      return MS_ETIMEDOUT;
    }
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
    if (err != 0) {
      close(fd);
      return -err;
    }
  }
  return fd;
}

/* What a fetch asks for and waits for: a snapshot (into *snap, with
 * request flags) or a heap profile (into *profile). */
typedef struct fetch_want_s {
  int profile;
  uint64_t flags;
  ms_snapshot_t *snap;
  ms__profile_decoded_t **out;
} fetch_want_t;

/* Sends the request and feeds the replies to the session until what was
 * asked for or an error. Returns 0 or a negative code with errbuf set. */
static inline int fetch_exchange(int fd, msc_session_t *s, int pid,
                                 const fetch_want_t *want, int timeout_ms,
                                 const char *path, char *errbuf,
                                 size_t errlen) {
  size_t cap = 64 * 1024, have = 0, reqlen, sent = 0;
  uint8_t *buf = malloc(cap);
  const uint8_t *req;
  int r = MS_EPROTO;
  msc_event_type_t done = want->profile ? MSC_EV_PROFILE : MSC_EV_SNAPSHOT;
  if (buf == NULL) {
    snprintf(errbuf, errlen, "PID %d: out of memory", pid);
    return MS_ENOMEM;
  }
  if (want->profile) {
    if (msc_session_request_profile(s, &req, &reqlen) != 0) {
      free(buf);
      snprintf(errbuf, errlen, "PID %d: out of memory", pid);
      return MS_ENOMEM;
    }
  } else {
    msc_session_request_snapshot_flags(s, want->flags, &req, &reqlen);
  }
  for (;;) {
    struct pollfd p = {fd, (short)(POLLIN | (sent < reqlen ? POLLOUT : 0)), 0};
    int pr = poll(&p, 1, timeout_ms);
    if (pr < 0 && errno == EINTR)
      continue;
    if (pr <= 0) {
      r = MS_ETIMEDOUT;
      msc_explain_timeout(pid, timeout_ms, 1, path, errbuf, errlen);
      break;
    }
    if (sent < reqlen && (p.revents & POLLOUT)) {
      ssize_t n = send(fd, req + sent, reqlen - sent, MSG_NOSIGNAL);
      if (n > 0)
        sent += (size_t)n;
    }
    if (!(p.revents & (POLLIN | POLLHUP | POLLERR)))
      continue;
    if (have == cap) {
      uint8_t *nb = cap < MS__WIRE_HEADER + MS__WIRE_MAX_PAYLOAD
                        ? realloc(buf, cap * 2)
                        : NULL;
      if (nb == NULL) {
        snprintf(errbuf, errlen, "PID %d: the reply is too long", pid);
        break;
      }
      buf = nb;
      cap *= 2;
    }
    ssize_t n = recv(fd, buf + have, cap - have, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (n <= 0) {
      snprintf(errbuf, errlen,
               "PID %d: the target closed the connection before answering "
               "(it may have exited or refused us)",
               pid);
      break;
    }
    have += (size_t)n;
    size_t used;
    msc_event_t ev;
    do {
      memset(&ev, 0, sizeof ev);
      used = 0;
      r = msc_session_feed(s, buf, have, &used, want->snap, &ev);
      memmove(buf, buf + used, have - used);
      have -= used;
    } while (ev.type != MSC_EV_ERROR && ev.type != done && used > 0);
    if (ev.type == MSC_EV_ERROR) {
      snprintf(errbuf, errlen, "%s", ev.msg);
      r = r < 0 ? r : (ev.err ? ev.err : MS_EPROTO);
      break;
    }
    if (ev.type == done) {
      if (want->profile)
        *want->out = msc_session_take_profile(s);
      r = 0;
      break;
    }
  }
  free(buf);
  return r;
}

/* Connects to pid's socket with memtop's checks (the socket directory,
 * the peer's credentials, the handshake) and runs one exchange. A socket
 * that refuses connections and whose process does not map libmemstats is
 * stale and removed (as discovery does) when remove_stale is set. */
static inline int fetch_one(int pid, const fetch_want_t *want, int remove_stale,
                            int timeout_ms, char *errbuf, size_t errlen) {
  char path[MSC_PATH_MAX];
  const char *why = "";
  uint64_t start_time;
  if (msc_proc_start_time(pid, &start_time) != 0) {
    snprintf(errbuf, errlen, "PID %d: no such process", pid);
    return MS_ESRCH;
  }
  int r = msc_find_socket(pid, path, sizeof path, &why);
  if (r == MS_EUNSAFE) {
    msc_explain_unsafe(pid, path, why, errbuf, errlen);
    return r;
  }
  int fd = r != 0 ? r : fetch_connect(path, timeout_ms);
  if (fd < 0) {
    if (fd == MS_ETIMEDOUT) {
      msc_explain_timeout(pid, timeout_ms, 0, path, errbuf, errlen);
      return fd;
    }
    msc_explain_connect(pid, fd, path, errbuf, errlen);
    if (remove_stale && fd == MS_ECONNREFUSED &&
        !msc_proc_maps_libmemstats(pid))
      unlink(path);
    return fd == -EPERM ? MS_EACCES : fd;
  }
  r = msc_verify_peer(fd, pid, path, errbuf, errlen);
  if (r == 0) {
    msc_session_t *s = msc_session_new(pid, start_time);
    if (s == NULL) {
      snprintf(errbuf, errlen, "PID %d: out of memory", pid);
      r = MS_ENOMEM;
    } else {
      r = fetch_exchange(fd, s, pid, want, timeout_ms, path, errbuf, errlen);
      msc_session_free(s);
    }
  }
  close(fd);
  return r;
}

/* Connects to `pid`, verifies the peer and the handshake, reads one
 * snapshot into *snap (flags: request flags, MS__REQ_SMAPS). Returns 0, or
 * a negative code with memtop's words for it in errbuf. A socket that
 * refuses connections and whose process does not map libmemstats is
 * stale, and removed, as discovery does. */
static inline int fetch_snapshot_flags(int pid, uint64_t flags,
                                       ms_snapshot_t *snap, int timeout_ms,
                                       char *errbuf, size_t errlen) {
  errbuf[0] = '\0';
  if (pid <= 0 || snap == NULL) {
    snprintf(errbuf, errlen, "invalid PID %d", pid);
    return MS_EINVAL;
  }
  fetch_want_t want = {.flags = flags, .snap = snap};
  return fetch_one(pid, &want, 1, timeout_ms, errbuf, errlen);
}

/* fetch_snapshot_flags() with no request flags. */
static inline int fetch_snapshot(int pid, ms_snapshot_t *snap, int timeout_ms,
                                 char *errbuf, size_t errlen) {
  return fetch_snapshot_flags(pid, 0, snap, timeout_ms, errbuf, errlen);
}

#ifdef fail_msg /* with <cmocka.h> included first: a test's wait */
/* A snapshot of pid (each read given timeout_ms) read again, every
 * every_ms, at most tries times, until ok(s, arg) holds: 1 once it does,
 * 0 if it never did. A read that fails fails the test, saying why. */
static inline int
fetch_snapshot_until(int pid, ms_snapshot_t *s,
                     int (*ok)(const ms_snapshot_t *, const void *),
                     const void *arg, int every_ms, int tries, int timeout_ms) {
  char err[256];
  for (int k = 0; k < tries; k++) {
    if (k)
      usleep((useconds_t)every_ms * 1000);
    if (fetch_snapshot(pid, s, timeout_ms, err, sizeof err) != 0)
      fail_msg("no snapshot of %d: %s", pid, err);
    if (ok(s, arg))
      return 1;
  }
  return 0;
}
#endif

/* Connects to `pid` (the same peer checks as memtop's connections),
 * fetches its heap profile: *out is the caller's on 0
 * (ms__profile_decoded_free), NULL otherwise; timeout_ms bounds each wait
 * for the target. On error returns a negative code with the words of
 * msc_explain_* in errbuf. (memtop itself reads profiles on its loop,
 * conn.c; this blocking one is for the tests.) */
static inline int fetch_profile(int pid, ms__profile_decoded_t **out,
                                int timeout_ms, char *errbuf, size_t errlen) {
  char dummy[8];
  *out = NULL;
  if (errbuf == NULL || errlen == 0) {
    errbuf = dummy;
    errlen = sizeof dummy;
  }
  errbuf[0] = '\0';
  if (pid <= 0) {
    snprintf(errbuf, errlen, "invalid PID %d", pid);
    return MS_EINVAL;
  }
  fetch_want_t want = {.profile = 1, .out = out};
  return fetch_one(pid, &want, 0, timeout_ms, errbuf, errlen);
}

#endif
