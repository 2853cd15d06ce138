/*
 * conn.c - one target's connection on the loop (see conn.h).
 *
 * States: no pipe (disconnected) -> connecting -> connected. A request is
 * "in flight" from mt_conn_fetch_flags() until the callback runs; a timer
 * bounds it, armed once per request and never re-armed: the deadline is
 * for the whole exchange (connect, question, every byte of the answer, a
 * profile's last frame), so a target that trickles its answer a byte or a
 * frame at a time cannot keep memtop waiting past it. Any error closes the
 * pipe (the next fetch connects again with a
 * new session), so a half-read reply can never be mistaken for the next one.
 *
 * Each pipe is its own allocation, freed in its close callback, so a new
 * connection can start while libuv is still closing the old one. The
 * connection object itself is freed once its timer, any pipe and any
 * explanation being made are done.
 *
 * Why a target did not answer is found in its /proc files (its descriptor
 * table counted against its limit: a walk as long as the table, a
 * million entries for some servers, and one that waits on a hung /proc):
 * never on the loop. The explanation is made on libuv's pool and the
 * request ends when it is ready, or EXPLAIN_MS after its deadline with
 * what the loop knows without it, whichever comes first.
 */
#include "targets/conn.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define READ_CHUNK 65536
/* How long after a request's deadline its explanation may take. */
#define EXPLAIN_MS 1000
#define REPLY_MAX (8u << 20) /* a reply bigger than this is garbage */

typedef struct mt_pipe_s {
  uv_pipe_t handle; /* first: the handle's address is the struct's */
  uv_connect_t connect_req;
  mt_conn_t *conn; /* holds a reference until the pipe is closed */
} mt_pipe_t;

typedef struct mt_write_s {
  uv_write_t req;
  mt_conn_t *conn;
  uint8_t *bytes;
} mt_write_t;

struct mt_conn_s {
  uv_loop_t *loop;
  int pid;
  uint64_t start_time;
  mt_conn_cb cb;
  void *arg;
  mt_pipe_t *pipe; /* NULL while disconnected */
  int connected;   /* the pipe's connect succeeded */
  msc_session_t *session;
  int busy;         /* a request is in flight */
  int closing;      /* mt_conn_close() was called */
  int handles;      /* open handles and requests that point at us */
  uv_timer_t timer; /* the request's deadline */
  int timeout_ms;
  uint64_t got;           /* bytes received for the request in flight */
  uint64_t req_flags;     /* MS__REQ_* of the request in flight */
  int want_prof;          /* the request asks for the profile too */
  int have_snap;          /* its snapshot has come (the profile is next) */
  mt_conn_profile_t prof; /* the profile's outcome, during the callback */
  uint8_t *rbuf;          /* received bytes not yet consumed */
  size_t rlen, rcap;
  /* Decoded into, handed to the callback; allocated once a connection
   * is made, so that a target that never answers costs no snapshot. */
  ms_snapshot_t *snap;
  char path[MSC_NSPATH_MAX]; /* the socket, for people */
  /* Where it was found (msc_locate): what to connect to, the O_PATH
   * descriptor behind that (a socket in another root) until the connect
   * is made, and the PID the target knows itself by. */
  msc_sockref_t ref;
  /* Who the process is, for the next locate only (mt_conn_set_ident). */
  msc_ident_t id;
  int have_id;
  /* A failure found before connecting (an unsafe socket directory),
   * reported from the timer so that the callback never runs inside
   * mt_conn_fetch_flags(). */
  int early_err;
  char early_msg[512];
  /* The explanation of a timeout being made on the pool (explain_t), for
   * request number `seq`; the timer then bounds the wait for it. */
  int explaining;
  uint64_t seq;
};

/* A timeout's explanation, made on libuv's pool from copies (the
 * connection may be closed meanwhile: it is kept until explain_done). */
typedef struct explain_s {
  uv_work_t req;
  mt_conn_t *conn;
  uint64_t seq;
  int pid, timeout_ms;
  char path[MSC_NSPATH_MAX];
  char msg[512];
} explain_t;

static void conn_unref(mt_conn_t *c) {
  if (--c->handles == 0 && c->closing) {
    msc_session_free(c->session);
    msc_sockref_close(&c->ref);
    free(c->rbuf);
    free(c->snap);
    ms__profile_decoded_free(c->prof.prof);
    free(c);
  }
}

static void pipe_closed(uv_handle_t *h) {
  mt_pipe_t *p = (mt_pipe_t *)h;

  if (p->conn != NULL)
    conn_unref(p->conn);
  free(p);
}

/* Lets go of the pipe (if any) and the session: the next request starts a
 * new connection. */
static void drop_pipe(mt_conn_t *c) {
  if (c->pipe != NULL) {
    /* The connect callback may still run (with UV_ECANCELED): it must
     * find that the pipe is no longer ours. */
    if (!uv_is_closing((uv_handle_t *)&c->pipe->handle))
      uv_close((uv_handle_t *)&c->pipe->handle, pipe_closed);
    c->pipe = NULL;
  }
  c->connected = 0;
  c->rlen = 0;
  msc_session_free(c->session);
  c->session = NULL;
}

/* Ends the request in flight. The callback may close the connection. */
static void finish(mt_conn_t *c, int status, const char *msg) {
  uv_timer_stop(&c->timer);
  if (status != 0)
    drop_pipe(c);
  if (!c->busy)
    return;
  c->busy = 0;
  c->cb(c, status, status == 0 ? c->snap : NULL, msg, c->arg);
  /* What the callback did not take goes. (The callback may have closed
   * the connection: the memory is freed later, not now.) */
  ms__profile_decoded_free(c->prof.prof);
  c->prof.prof = NULL;
}

/* The profile's part of the exchange is over: err 0 with the session's
 * profile, or the agent's refusal (the snapshot still stands). */
static void finish_profile(mt_conn_t *c, int err, const char *msg) {
  memset(&c->prof, 0, sizeof c->prof);
  if (err == 0) {
    c->prof.prof = msc_session_take_profile(c->session);
    if (c->prof.prof == NULL)
      err = MS_EPROTO;
  }
  if (err != 0) {
    c->prof.err = err;
    snprintf(c->prof.msg, sizeof c->prof.msg, "%s",
             msg != NULL && msg[0] != '\0' ? msg : ms_strerror(err));
  }
  finish(c, 0, NULL);
}

static void failf(mt_conn_t *c, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void failf(mt_conn_t *c, int status, const char *fmt, ...) {
  char msg[512];
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  finish(c, status, msg);
}

/* libuv's UV_E* codes are negative errno values on Unix, as MS_E* codes
 * are, so they pass through unchanged. */
#define from_uv(e) (e)

static void timed_out(uv_timer_t *t);

/* The request's end when nothing came and the explanation is not to be
 * had (late, or not made): what the loop knows without /proc. */
static void fail_unexplained(mt_conn_t *c) {
  failf(c, MS_ETIMEDOUT,
        "PID %d: no answer within %d ms: the target's agent is hung or the "
        "process is stopped (SIGSTOP, a debugger)",
        c->pid, c->timeout_ms);
}

static void explain_work(uv_work_t *req) {
  explain_t *e = req->data;

  msc_explain_timeout(e->pid, e->timeout_ms, 1, e->path, e->msg, sizeof e->msg);
}

static void explain_done(uv_work_t *req, int status) {
  explain_t *e = req->data;
  mt_conn_t *c = e->conn;

  (void)status;
  /* Given up on (EXPLAIN_MS passed, the connection closed) or for an
   * earlier request: the words are dropped. */
  if (c->explaining && c->busy && c->seq == e->seq) {
    c->explaining = 0;
    finish(c, MS_ETIMEDOUT, e->msg);
  }
  free(e);
  conn_unref(c);
}

/* A connected request's deadline passed with nothing received: the pipe
 * goes, and the explanation is made on the pool (see the opening
 * comment). Returns 0, or, if it could not be queued, MS_ENOMEM or
 * uv_queue_work()'s code (libuv's are -errno on Unix). */
static int explain_start(mt_conn_t *c) {
  explain_t *e = calloc(1, sizeof *e);
  int rc;

  if (e == NULL)
    return MS_ENOMEM;
  e->req.data = e;
  e->conn = c;
  e->seq = c->seq;
  e->pid = c->pid;
  e->timeout_ms = c->timeout_ms;
  memcpy(e->path, c->path, sizeof e->path);
  rc = uv_queue_work(c->loop, &e->req, explain_work, explain_done);
  if (rc != 0) {
    free(e);
    return rc;
  }
  c->handles++;
  c->explaining = 1;
  drop_pipe(c);
  uv_timer_start(&c->timer, timed_out, EXPLAIN_MS, 0);
  return 0;
}

static void timed_out(uv_timer_t *t) {
  mt_conn_t *c = t->data;
  int err = c->early_err;

  /* Whether memtop tries again is the caller's to say. */
  if (c->explaining) {
    c->explaining = 0; /* late: a hung /proc, or a busy pool */
    fail_unexplained(c);
  } else if (err != 0) {
    c->early_err = 0;
    failf(c, err, "%s", c->early_msg);
  } else if (c->connected && c->got > 0) {
    /* Some of the answer came, not all of it: a target that is busy, was
     * stopped mid-answer, or sends slowly on purpose. */
    failf(c, MS_ETIMEDOUT,
          "PID %d: the answer was not whole within %d ms (%llu bytes came%s): "
          "the target is overloaded, stopped mid-answer, or answers slowly on "
          "purpose; memtop gave up on it (--timeout sets the deadline)",
          c->pid, c->timeout_ms, (unsigned long long)c->got,
          c->have_snap ? ", the heap profile's last frame did not" : "");
  } else if (!c->connected) {
    char msg[512]; /* not connected: said without reading /proc */
    msc_explain_timeout(c->pid, c->timeout_ms, 0, c->path, msg, sizeof msg);
    finish(c, MS_ETIMEDOUT, msg);
  } else if (explain_start(c) != 0) {
    fail_unexplained(c);
  }
}

static void write_done(uv_write_t *req, int status) {
  mt_write_t *w = (mt_write_t *)req;
  mt_conn_t *c = w->conn;

  free(w->bytes);
  free(w);
  /* A target that refuses us (another user, out of descriptors) writes
   * its reason and closes at once, so our request may meet a closed
   * socket: the reason is still there to read, and the read side reports
   * it (or the end of the connection, or the timeout). */
  if (status < 0 && status != UV_ECANCELED && status != UV_EPIPE &&
      status != UV_ECONNRESET && !c->closing && c->busy)
    failf(c, from_uv(status), "PID %d: sending the request failed: %s", c->pid,
          uv_strerror(status));
  conn_unref(c);
}

static int send_request(mt_conn_t *c) {
  const uint8_t *bytes, *pbytes = NULL;
  uint8_t first[256];
  size_t len, plen = 0;
  mt_write_t *w;
  uv_buf_t buf;
  int rc;

  c->have_snap = 0;
  rc = msc_session_request_snapshot_flags(c->session, c->req_flags, &bytes,
                                          &len);
  if (rc != 0)
    return rc;
  if (c->want_prof) {
    /* The session's buffer is reused by the profile's request: keep the
     * snapshot's first. Both go in one write; the agent answers in
     * order. */
    if (len > sizeof first)
      return MS_EINVAL;
    memcpy(first, bytes, len);
    bytes = first;
    rc = msc_session_request_profile(c->session, &pbytes, &plen);
    if (rc != 0)
      return rc;
  }
  /* A request of a few dozen bytes nearly always fits the socket's
   * buffer: written at once, it needs no queued write, no copy and no
   * change to the poll set (200 targets at 1 Hz: 200 epoll_ctl a second).
   * What could not be written now is queued as before. */
  size_t done = 0;
  if (plen == 0) {
    buf = uv_buf_init((char *)bytes, (unsigned)len);
    rc = uv_try_write((uv_stream_t *)&c->pipe->handle, &buf, 1);
    if (rc == (int)len)
      return 0;
    if (rc > 0)
      done = (size_t)rc;
  }
  w = calloc(1, sizeof *w);
  if (w == NULL)
    return MS_ENOMEM;
  /* The session's buffer is reused by its next call; the write may still
   * be queued then, so it gets its own copy. */
  w->bytes = malloc(len + plen ? len + plen : 1);
  if (w->bytes == NULL) {
    free(w);
    return MS_ENOMEM;
  }
  memcpy(w->bytes, bytes + done, len - done);
  if (plen > 0)
    memcpy(w->bytes + len, pbytes, plen);
  len += plen - done;
  w->conn = c;
  buf = uv_buf_init((char *)w->bytes, (unsigned)len);
  rc = uv_write(&w->req, (uv_stream_t *)&c->pipe->handle, &buf, 1, write_done);
  if (rc != 0) {
    free(w->bytes);
    free(w);
    return from_uv(rc);
  }
  c->handles++;
  return 0;
}

static void alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
  mt_pipe_t *p = (mt_pipe_t *)h;
  mt_conn_t *c = p->conn;
  uint8_t *grown;
  size_t cap;

  (void)hint;
  buf->base = NULL;
  buf->len = 0;
  if (c == NULL)
    return;
  if (c->rcap - c->rlen < READ_CHUNK) {
    cap = c->rlen + READ_CHUNK;
    grown = realloc(c->rbuf, cap);
    if (grown == NULL)
      return; /* libuv reports UV_ENOBUFS to read_cb */
    c->rbuf = grown;
    c->rcap = cap;
  }
  buf->base = (char *)c->rbuf + c->rlen;
  buf->len = c->rcap - c->rlen;
}

/* Feeds what has been received to the session, one message at a time. */
static void consume(mt_conn_t *c) {
  msc_event_t ev;
  size_t used, off = 0;
  int rc;

  while (c->session != NULL && off < c->rlen) {
    memset(&ev, 0, sizeof ev);
    used = 0;
    rc = msc_session_feed(c->session, c->rbuf + off, c->rlen - off, &used,
                          c->snap, &ev);
    off += used;
    if (c->busy && c->have_snap && ev.type == MSC_EV_ERROR &&
        msc_session_hello(c->session) != NULL) {
      /* The agent refused the profile alone (profiling off, out of
       * memory): the session lives on, the snapshot stands. */
      memmove(c->rbuf, c->rbuf + off, c->rlen - off);
      c->rlen -= off;
      finish_profile(c, ev.err ? ev.err : MS_EPROTO, ev.msg);
      return;
    }
    if (rc < 0 || ev.type == MSC_EV_ERROR) {
      if (ev.msg[0] != '\0') /* the session's words name the PID */
        failf(c, rc < 0 ? rc : (ev.err ? ev.err : MS_EPROTO), "%s", ev.msg);
      else
        failf(c, rc < 0 ? rc : MS_EPROTO,
              "PID %d: the target's reply is malformed (%s); it may run an "
              "incompatible libmemstats",
              c->pid, ms_strerror(rc < 0 ? rc : ev.err));
      return; /* the pipe and its bytes are gone */
    }
    if (ev.type == MSC_EV_SNAPSHOT && c->busy && c->want_prof &&
        !c->have_snap) {
      c->have_snap = 1; /* the profile's frames follow, by the deadline */
      continue;
    }
    if (ev.type == MSC_EV_PROFILE && c->busy && c->have_snap) {
      memmove(c->rbuf, c->rbuf + off, c->rlen - off);
      c->rlen -= off;
      finish_profile(c, 0, NULL);
      return;
    }
    if (ev.type == MSC_EV_SNAPSHOT || ev.type == MSC_EV_PROFILE) {
      /* Bytes after a snapshot would be an unrequested message: keep them
       * for the session all the same. */
      memmove(c->rbuf, c->rbuf + off, c->rlen - off);
      c->rlen -= off;
      if (c->busy && !c->want_prof)
        finish(c, 0, NULL);
      return;
    }
    if (ev.type == MSC_EV_NONE && used == 0)
      break; /* an incomplete message: wait for more */
  }
  memmove(c->rbuf, c->rbuf + off, c->rlen - off);
  c->rlen -= off;
  if (c->rlen > REPLY_MAX)
    failf(c, MS_EPROTO,
          "PID %d: the target sent more than %u MiB without a complete "
          "message; this is not a memstats agent",
          c->pid, REPLY_MAX >> 20);
}

static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  mt_pipe_t *p = (mt_pipe_t *)s;
  mt_conn_t *c = p->conn;

  (void)buf;
  if (c == NULL || c->pipe != p)
    return;
  if (nread > 0) {
    c->rlen += (size_t)nread;
    if (c->busy)
      c->got += (uint64_t)nread;
    consume(c);
    return;
  }
  if (nread == 0)
    return;
  if (!c->busy) {
    /* The target closed an idle connection (it exited, or it trims idle
     * clients): connect again on the next request. */
    drop_pipe(c);
    return;
  }
  if (nread == UV_EOF)
    failf(c, MS_EPROTO,
          "PID %d: the target closed the connection before answering (it "
          "may have exited or refused us)",
          c->pid);
  else
    failf(c, from_uv((int)nread), "PID %d: reading the reply failed: %s",
          c->pid, uv_strerror((int)nread));
}

static void connected(uv_connect_t *req, int status) {
  mt_pipe_t *p = (mt_pipe_t *)req->data;
  mt_conn_t *c = p->conn;
  char msg[512];
  int rc;

  if (c == NULL || c->pipe != p)
    return; /* abandoned: timed out, or the connection was closed */
  if (status < 0) {
    msc_explain_connect(c->pid, from_uv(status), c->path, msg, sizeof msg);
    finish(c, from_uv(status), msg);
    return;
  }
  /* Whatever the directory, the other end must be the process asked for,
   * run by the user who owns it (or root): a socket planted by another
   * user would otherwise serve figures memtop shows as the target's. */
  uv_os_fd_t fd;
  if (uv_fileno((uv_handle_t *)&p->handle, &fd) != 0)
    fd = -1;
  rc = msc_verify_peer(fd, c->pid, c->path, msg, sizeof msg);
  if (rc != 0) {
    finish(c, rc, msg);
    return;
  }
  if (c->snap == NULL && (c->snap = malloc(sizeof *c->snap)) == NULL) {
    failf(c, MS_ENOMEM, "PID %d: out of memory", c->pid);
    return;
  }
  c->connected = 1;
  rc = uv_read_start((uv_stream_t *)&p->handle, alloc_cb, read_cb);
  if (rc == 0)
    rc = send_request(c);
  if (rc != 0)
    failf(c, rc, "PID %d: sending the request failed: %s", c->pid,
          ms_strerror(rc));
}

mt_conn_t *mt_conn_new(uv_loop_t *loop, int pid, uint64_t start_time,
                       mt_conn_cb cb, void *arg) {
  mt_conn_t *c = calloc(1, sizeof *c);

  if (c == NULL)
    return NULL;
  c->loop = loop;
  c->pid = pid;
  c->start_time = start_time;
  c->cb = cb;
  c->arg = arg;
  if (uv_timer_init(loop, &c->timer) != 0) {
    free(c);
    return NULL;
  }
  c->timer.data = c;
  c->handles = 1; /* the timer */
  c->ref.fd = -1;
  return c;
}

void mt_conn_set_ident(mt_conn_t *c, const msc_ident_t *id) {
  c->id = *id;
  c->have_id = 1;
}

/* Where discovery would find the socket (our directory, else the
 * owner's), looked up again at each connect: the socket of a starting
 * target appears later, and a directory may turn unsafe. On failure the
 * path says where we looked, for the error message. Returns nonzero if
 * the directory is not to be trusted (c->early_* then say why). */
static int locate(mt_conn_t *c) {
  const char *why = NULL;
  int rc;

  msc_sockref_close(&c->ref);
  if (c->have_id)
    rc = msc_locate_ident(c->pid, &c->id, &c->ref, &why);
  else
    rc = msc_locate(c->pid, &c->ref, &why);
  c->have_id = 0;
  memcpy(c->path, c->ref.path, sizeof c->path);
  if (rc != 0 && c->path[0] == '\0')
    snprintf(c->path, sizeof c->path, "%d.sock", c->pid);
  if (rc != 0 && rc != MS_EUNSAFE && c->ref.connect[0] == '\0') {
    /* Not found in another process's root: nothing to connect to (its
     * path for people is not one to walk). Said as a failed connect. */
    msc_explain_connect(c->pid, rc, c->path, c->early_msg, sizeof c->early_msg);
    c->early_err = rc;
    return 1;
  }
  if (rc != MS_EUNSAFE)
    return 0;
  msc_explain_unsafe(c->pid, c->path, why, c->early_msg, sizeof c->early_msg);
  c->early_err = MS_EUNSAFE;
  return 1;
}

static void start_connect(mt_conn_t *c) {
  mt_pipe_t *p;

  c->session = msc_session_new(c->pid, c->start_time);
  msc_session_set_nspid(c->session, c->ref.nspid);
  p = calloc(1, sizeof *p);
  if (c->session == NULL || p == NULL) {
    free(p);
    failf(c, MS_ENOMEM, "PID %d: out of memory", c->pid);
    return;
  }
  if (uv_pipe_init(c->loop, &p->handle, 0) != 0) {
    free(p);
    failf(c, MS_ENOMEM, "PID %d: cannot create a pipe handle", c->pid);
    return;
  }
  p->conn = c;
  p->connect_req.data = p;
  c->pipe = p;
  c->handles++; /* released in pipe_closed */
  /* uv_pipe_connect reports every error, even a synchronous one, through
   * the callback on a later loop iteration. */
  uv_pipe_connect(&p->connect_req, &p->handle,
                  c->ref.connect[0] ? c->ref.connect : c->path, connected);
  /* The connect() itself is made inside that call (a Unix socket's does
   * not wait): the descriptor it went through is no longer needed. */
  msc_sockref_close(&c->ref);
}

static int fetch(mt_conn_t *c, int timeout_ms, uint64_t flags, int prof) {
  int rc;

  if (c == NULL || c->closing)
    return MS_EINVAL;
  if (c->busy)
    return MS_EAGAIN;
  c->busy = 1;
  c->req_flags = flags;
  c->want_prof = prof;
  c->have_snap = 0;
  c->timeout_ms = timeout_ms;
  c->got = 0;
  c->seq++;
  c->explaining = 0;
  /* One deadline for the whole request, never re-armed. */
  uv_timer_start(&c->timer, timed_out, (uint64_t)timeout_ms, 0);
  if (c->pipe == NULL) {
    if (locate(c))
      uv_timer_start(&c->timer, timed_out, 0, 0); /* says why at once */
    else
      start_connect(c);
    return 0;
  }
  if (!c->connected)
    return 0; /* a connect is under way: it sends the request */
  rc = send_request(c);
  if (rc != 0) {
    /* Report it from the loop, not from inside this call: the timer
     * fires at once. */
    drop_pipe(c);
    uv_timer_start(&c->timer, timed_out, 0, 0);
  }
  return 0;
}

int mt_conn_fetch_flags(mt_conn_t *c, int timeout_ms, uint64_t flags) {
  return fetch(c, timeout_ms, flags, 0);
}

int mt_conn_fetch_profile(mt_conn_t *c, int timeout_ms, uint64_t flags) {
  return fetch(c, timeout_ms, flags, 1);
}

mt_conn_profile_t *mt_conn_profile(mt_conn_t *c) {
  return c != NULL && c->want_prof && c->have_snap ? &c->prof : NULL;
}

int mt_conn_busy(const mt_conn_t *c) {
  return c->busy;
}

static void timer_closed(uv_handle_t *h) {
  conn_unref(h->data);
}

void mt_conn_close(mt_conn_t *c) {
  if (c == NULL || c->closing)
    return;
  c->closing = 1;
  c->busy = 0;
  if (c->pipe != NULL) {
    if (!uv_is_closing((uv_handle_t *)&c->pipe->handle))
      uv_close((uv_handle_t *)&c->pipe->handle, pipe_closed);
    c->pipe = NULL;
  }
  uv_close((uv_handle_t *)&c->timer, timer_closed);
}
