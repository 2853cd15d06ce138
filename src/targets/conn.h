/*
 * conn.h - one target's connection, on memtop's libuv loop: a uv_pipe_t to
 * the target's socket driving a protocol session (client/client.h). It
 * never blocks: connects, writes and reads are the loop's, and every
 * request has a deadline for the whole exchange, so a stopped, hung, dying
 * or trickling target costs nothing but a timer, and never more than the
 * deadline.
 *
 * The connection is kept between requests (the handshake is paid once) and
 * re-made transparently when the target closed it.
 */
#ifndef MS_TARGETS_CONN_H
#define MS_TARGETS_CONN_H

#include <stdint.h>
#include <uv.h>

#include "memstats.h"
#include "client/client.h"

typedef struct mt_conn_s mt_conn_t;

/* What a profile request brought beside its snapshot (mt_conn_profile()):
 * the decoded heap profile, or why there is none (the agent refused it,
 * e.g. MS_ENOSYS when it does not sample; the snapshot still stands). */
typedef struct mt_conn_profile_s {
  ms__profile_decoded_t *prof; /* the taker's: may be set to NULL */
  int err;                     /* MS_E* when prof is NULL */
  char msg[256];               /* words for the user when prof is NULL */
} mt_conn_profile_t;

/* Runs once per mt_conn_fetch_flags(): status 0 and the snapshot (valid during
 * the call only), or a negative MS_E* code and a message for the user that
 * names the PID, the cause and, where one helps, a hint. */
typedef void (*mt_conn_cb)(mt_conn_t *c, int status, const ms_snapshot_t *snap,
                           const char *msg, void *arg);

/* A connection to `pid`, whose start time must be `start_time` (0: do not
 * check). NULL on ENOMEM. Nothing happens until mt_conn_fetch_flags(). */
mt_conn_t *mt_conn_new(uv_loop_t *loop, int pid, uint64_t start_time,
                       mt_conn_cb cb, void *arg);

/* Who pid is, read just now (msc_proc_ident()): the next connect finds
 * the socket with it rather than reading /proc again. Once: each later
 * connect reads it anew (a process may move to another namespace). */
void mt_conn_set_ident(mt_conn_t *c, const msc_ident_t *id);

/* Asks for one snapshot; the callback runs exactly once, later (never
 * from inside this call), unless the connection is closed first: at the
 * latest timeout_ms after this call (MS_ETIMEDOUT), however the target
 * sends its answer; when a target that accepted the connection sent
 * nothing, up to a second later, while the reason is read from its /proc
 * files on libuv's pool (conn.c). flags
 * are request flags (MS__REQ_SMAPS: also the kernel's smaps_rollup
 * figures, which cost the target about 10 ms per GiB resident). Returns
 * 0, MS_EAGAIN if a request is already in flight, or MS_ENOMEM (then the
 * callback does not run). */
int mt_conn_fetch_flags(mt_conn_t *c, int timeout_ms, uint64_t flags);

/* Asks for one snapshot (flags as above) and then the heap profile, in
 * one exchange: the callback runs once, with the snapshot, after the
 * profile's last frame (or the agent's refusal of it). The profile comes
 * in frames of at most MS__WIRE_MAX_PAYLOAD, each decoded as it arrives
 * (the decoder bounds the whole); timeout_ms is the deadline of the whole
 * exchange, the profile's last frame included: frames that keep coming do
 * not extend it. Returns as mt_conn_fetch_flags(). */
int mt_conn_fetch_profile(mt_conn_t *c, int timeout_ms, uint64_t flags);

/* During a callback of mt_conn_fetch_profile() with status 0: what came
 * of the profile (NULL otherwise). The profile left in it is freed after
 * the callback. */
mt_conn_profile_t *mt_conn_profile(mt_conn_t *c);

/* Nonzero while a request is in flight. */
int mt_conn_busy(const mt_conn_t *c);

/* Closes the connection; the callback of a request in flight does not run.
 * The memory is freed once libuv has closed the handles. */
void mt_conn_close(mt_conn_t *c);

#endif
