/*
 * targetset_uv.c - the target set's real I/O (see targetset.h,
 * mt_tset_io_uv): connections are conn.c's on a libuv loop, timers are
 * uv timers, the clock is uv_hrtime, the listing is msc_list_reuse, the
 * stale socket check msc_remove_stale on libuv's pool, and whether a
 * process is gone is read from /proc/PID/stat.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "memstats.h"
#include "client/client.h"
#include "targets/conn.h"
#include "targets/targetset.h"

typedef struct uv_conn_s {
  mt_conn_t *c;
  mt_tset_reply_fn fn;
  void *target;
} uv_conn_t;

typedef struct uv_tm_s {
  uv_timer_t h;
  mt_tset_timer_fn fn;
  void *target;
} uv_tm_t;

static uint64_t uv_now_ns(void *ctx) {
  (void)ctx;
  return uv_hrtime();
}

static void conn_reply(mt_conn_t *c, int status, const ms_snapshot_t *snap,
                       const char *msg, void *arg) {
  uv_conn_t *u = arg;
  mt_conn_profile_t *cp = status == 0 ? mt_conn_profile(c) : NULL;
  mt_tset_profile_t p;

  if (cp == NULL) {
    u->fn(u->target, status, snap, NULL, msg);
    return;
  }
  /* The owner's form of it; what the owner does not take goes back to
   * the connection, which frees it. */
  memset(&p, 0, sizeof p);
  p.prof = cp->prof;
  p.err = cp->err;
  memcpy(p.msg, cp->msg, sizeof p.msg);
  cp->prof = NULL;
  u->fn(u->target, status, snap, &p, msg);
  cp->prof = p.prof;
}

static void *conn_new(void *ctx, int pid, uint64_t start_time,
                      mt_tset_reply_fn fn, void *target) {
  uv_conn_t *u = calloc(1, sizeof *u);

  if (u == NULL)
    return NULL;
  u->fn = fn;
  u->target = target;
  u->c = mt_conn_new(ctx, pid, start_time, conn_reply, u);
  if (u->c == NULL) {
    free(u);
    return NULL;
  }
  return u;
}

static void conn_ident(void *conn, const msc_ident_t *id) {
  uv_conn_t *u = conn;

  mt_conn_set_ident(u->c, id);
}

static int conn_fetch(void *conn, int timeout_ms, const mt_tset_req_t *req) {
  uv_conn_t *u = conn;

  if (req->profile)
    return mt_conn_fetch_profile(u->c, timeout_ms, req->wire_flags);
  return mt_conn_fetch_flags(u->c, timeout_ms, req->wire_flags);
}

static int conn_busy(const void *conn) {
  const uv_conn_t *u = conn;

  return mt_conn_busy(u->c);
}

static void conn_close(void *conn) {
  uv_conn_t *u = conn;

  /* After this no reply runs, so the adapter may go now. */
  mt_conn_close(u->c);
  free(u);
}

static void timer_cb(uv_timer_t *h) {
  uv_tm_t *t = h->data;

  t->fn(t->target);
}

static void *timer_new(void *ctx, mt_tset_timer_fn fn, void *target) {
  uv_tm_t *t = calloc(1, sizeof *t);

  if (t == NULL)
    return NULL;
  uv_timer_init(ctx, &t->h);
  t->h.data = t;
  t->fn = fn;
  t->target = target;
  return t;
}

static void timer_start(void *timer, uint64_t ms) {
  uv_tm_t *t = timer;

  uv_timer_start(&t->h, timer_cb, ms, 0);
}

static void timer_stop(void *timer) {
  uv_tm_t *t = timer;

  uv_timer_stop(&t->h);
}

static void timer_freed(uv_handle_t *h) {
  free(h->data);
}

static void timer_close(void *timer) {
  uv_tm_t *t = timer;

  uv_close((uv_handle_t *)&t->h, timer_freed);
}

static int discover(void *ctx, msc_target_t **out, size_t *n) {
  (void)ctx;
  return msc_list_reuse(out, n);
}

/* The stale check reads /proc/PID/maps: as long as the process's
 * mappings, and waiting for its mmap lock (held by a large munmap, or a
 * process stopped in the middle of one). It runs on libuv's pool, on a
 * copy of the listing's entry, never on the loop. */
typedef struct stale_work_s {
  uv_work_t req;
  msc_target_t t;
} stale_work_t;

static void stale_work(uv_work_t *req) {
  stale_work_t *w = req->data;

  msc_remove_stale(&w->t);
}

static void stale_done(uv_work_t *req, int status) {
  (void)status;
  free(req->data);
}

static void stale(void *ctx, const msc_target_t *t) {
  stale_work_t *w = malloc(sizeof *w);

  if (w == NULL)
    return; /* the next listing finds it again */
  w->t = *t;
  w->req.data = w;
  if (uv_queue_work(ctx, &w->req, stale_work, stale_done) != 0)
    free(w);
}

/* Nonzero if `pid` no longer is the process we watch: no /proc entry, a
 * zombie, or another process with the same PID (start time differs). */
static int proc_gone(void *ctx, int pid, uint64_t start_time) {
  char path[64], buf[1024], *p;
  unsigned long long st = 0;
  ssize_t n;
  int fd, field;

  (void)ctx;
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return errno == ENOENT || errno == ESRCH;
  n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0)
    return 1;
  buf[n] = '\0';
  /* The name may hold spaces and parentheses: fields start after the
   * last ')'. Field 3 is the state, field 22 the start time. */
  p = strrchr(buf, ')');
  if (p == NULL || p[1] != ' ')
    return 0;
  p += 2;
  if (*p == 'Z' || *p == 'X')
    return 1;
  for (field = 3; field < 22 && p != NULL; field++) {
    p = strchr(p, ' ');
    if (p != NULL)
      p++;
  }
  if (p != NULL && sscanf(p, "%llu", &st) == 1 && start_time != 0 &&
      st != start_time)
    return 1;
  return 0;
}

static int identify(void *ctx, int pid, msc_ident_t *id) {
  (void)ctx;
  return msc_proc_ident(pid, id);
}

static int parent_of(void *ctx, int pid) {
  (void)ctx;
  return msc_proc_ppid(pid);
}

void mt_tset_io_uv(mt_tset_io_t *io, void *loop) {
  io->now_ns = uv_now_ns;
  io->conn_new = conn_new;
  io->conn_ident = conn_ident;
  io->conn_fetch = conn_fetch;
  io->conn_busy = conn_busy;
  io->conn_close = conn_close;
  io->timer_new = timer_new;
  io->timer_start = timer_start;
  io->timer_stop = timer_stop;
  io->timer_close = timer_close;
  io->discover = discover;
  io->stale = stale;
  io->proc_gone = proc_gone;
  io->identify = identify;
  io->parent_of = parent_of;
  io->ctx = loop;
}
