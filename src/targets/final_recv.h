/*
 * final_recv.h - `memtop run`'s end of the final-snapshot channel (the
 * library's end is src/agent/final_send.c).
 *
 * memtop makes an AF_UNIX stream socket pair, gives one end to the command
 * as descriptor MT_FINAL_CHILD_FD with MEMSTATS_FINAL_FD and
 * MEMSTATS_FINAL_PPID in its environment, and keeps the other. At normal
 * exit the command's library writes one snapshot frame there; this module
 * collects it. The reading is split from the decoding: mt_final_feed() is
 * a pure function of the bytes, tested on its own and fed by
 * mt_final_drain() from the socket.
 */
#ifndef MS_TARGETS_FINAL_RECV_H
#define MS_TARGETS_FINAL_RECV_H

#include <stddef.h>
#include <stdint.h>

#include "memstats.h"
#include "wire/wire.h"

/* The descriptor number the command gets (stdio is 0-2). */
#define MT_FINAL_CHILD_FD 3

typedef struct mt_final_s {
  int fd;   /* memtop's end, -1 once closed */
  int pid;  /* the command's PID: anybody else's frame is ignored */
  int have; /* snap holds the command's final snapshot */
  int eof;  /* every holder of the other end has closed it */
  int bad;  /* the bytes were not frames: reading stopped */
  ms_snapshot_t snap;
  ms_snapshot_t tmp;
  size_t len;
  uint8_t buf[2 * MS__WIRE_SNAPSHOT_MAX];
} mt_final_t;

/* An empty channel (no socket yet), for the command `pid` (0: unknown
 * yet; set f->pid before feeding). */
void mt_final_init(mt_final_t *f, int pid);

/* Makes the socket pair: f->fd is memtop's end (close-on-exec,
 * non-blocking); *child_fd is the command's end (close-on-exec too: the
 * spawn puts a copy at MT_FINAL_CHILD_FD; close *child_fd after the
 * spawn). Returns 0 or a negative errno. */
int mt_final_open(mt_final_t *f, int *child_fd);

/* Takes bytes from the socket: whole snapshot frames of f->pid become
 * f->snap (the last one wins); frames of other PIDs and other types are
 * skipped; bytes that are not frames set f->bad. Returns the number of
 * bytes taken (all of them unless f->bad). */
size_t mt_final_feed(mt_final_t *f, const uint8_t *p, size_t n);

/* Reads what the socket holds now, without blocking, and feeds it.
 * Returns 1 when nothing more can come (end of file, an error, or
 * f->bad), else 0. */
int mt_final_drain(mt_final_t *f);

/* Closes memtop's end. */
void mt_final_close(mt_final_t *f);

#endif
