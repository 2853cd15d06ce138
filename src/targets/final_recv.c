/*
 * final_recv.c - collecting the command's final snapshot (see
 * final_recv.h and
 * src/agent/final_send.c for the other end).
 */
#include "targets/final_recv.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

void mt_final_init(mt_final_t *f, int pid) {
  f->fd = -1;
  f->pid = pid;
  f->have = f->eof = f->bad = 0;
  f->len = 0;
}

int mt_final_open(mt_final_t *f, int *child_fd) {
  int sv[2];

  /* Both ends close-on-exec in memtop: the spawn dup2()s the command's
   * end to MT_FINAL_CHILD_FD, which the exec keeps. Our reads use
   * MSG_DONTWAIT, so neither end's file status flags change. */
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    return -errno;
  /* The command only writes: shutting our writing side lets a read on
   * its end, should a program ever make one, see end of file rather than
   * wait forever. */
  shutdown(sv[0], SHUT_WR);
  f->fd = sv[0];
  *child_fd = sv[1];
  return 0;
}

size_t mt_final_feed(mt_final_t *f, const uint8_t *p, size_t n) {
  size_t room, take, off = 0;
  ms__frame_t fr;
  const char *why = NULL;
  int rc;

  if (f->bad)
    return 0;
  room = sizeof f->buf - f->len;
  take = n < room ? n : room;
  memcpy(f->buf + f->len, p, take);
  f->len += take;
  for (;;) {
    rc = ms__wire_frame(f->buf + off, f->len - off,
                        sizeof f->buf - MS__WIRE_HEADER, &fr, &why);
    if (rc == MS_EAGAIN)
      break;
    if (rc != 0) {
      f->bad = 1;
      return take;
    }
    if (fr.type == MS__MSG_SNAPSHOT &&
        ms__wire_decode_snapshot(f->buf + off + MS__WIRE_HEADER, fr.length,
                                 &f->tmp, &why) == 0 &&
        (f->pid == 0 || f->tmp.pid == f->pid)) {
      f->snap = f->tmp;
      f->have = 1;
    }
    off += MS__WIRE_HEADER + fr.length;
  }
  memmove(f->buf, f->buf + off, f->len - off);
  f->len -= off;
  /* A frame larger than the buffer cannot be a snapshot from the
   * library: the channel is not what it should be. */
  if (f->len == sizeof f->buf) {
    f->bad = 1;
    return take;
  }
  /* What did not fit is taken on the next call, after this frame made
   * room. */
  if (take < n)
    return take + mt_final_feed(f, p + take, n - take);
  return take;
}

int mt_final_drain(mt_final_t *f) {
  uint8_t chunk[16384];
  ssize_t n;

  if (f->fd < 0)
    return 1;
  while (!f->bad) {
    n = recv(f->fd, chunk, sizeof chunk, MSG_DONTWAIT);
    if (n > 0) {
      mt_final_feed(f, chunk, (size_t)n);
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return 0;
    f->eof = 1; /* end of file, or an error: nothing more will come */
    return 1;
  }
  return 1;
}

void mt_final_close(mt_final_t *f) {
  if (f->fd >= 0)
    close(f->fd);
  f->fd = -1;
}
