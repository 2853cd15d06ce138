/*
 * agent.h - the agent's internals, shared with the fuzz harness (the
 * request handler). The socket directory's rules, which memtop's client
 * applies too, are in common/sockdir.h.
 */
#ifndef MS_AGENT_AGENT_H
#define MS_AGENT_AGENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "memstats.h"
#include "wire/wire.h"

/* ---- requests (request.c) ---- */

/* Handles the bytes a client sent: consumes whole frames from in[0, len)
 * and appends each reply to *out, while *out has room for the largest
 * reply. Returns the number of bytes consumed. Sets *close_after when the
 * connection must end once the replies are sent (a malformed frame, a
 * newer version). Runs on the agent thread only. */
size_t ms__agent_handle(const uint8_t *in, size_t len, ms__wire_writer_t *out,
                        int *close_after);

/* Appends the agent's hello (identity from the latest snapshot). */
int ms__agent_hello(ms__wire_writer_t *out);

/* Appends a snapshot reply: a fresh snapshot if the cached one is older
 * than the interval, else the cached one with its age. req_flags are the
 * request's (MS__REQ_*): with MS__REQ_SMAPS the reply carries the
 * smaps_rollup figures (see request.c for the cache rule). */
int ms__agent_snapshot_flags(ms__wire_writer_t *out, uint64_t req_flags);

/* ---- heap profiles (profile_reply.c, request.c) ---- */

/* Cuts the heap profile, copies it out of the bucket table and encodes it
 * with the process's code mappings into a new mapping of the agent's:
 * *out (map_len bytes mapped) holds *len bytes of MS__MSG_PROFILE frames.
 * Returns 0, MS_ENOSYS (profiling off), MS_EAGAIN (MAX_STREAMS profiles
 * are being sent already) or MS_ENOMEM. The caller sends it and gives it
 * back with ms__agent_profile_free(). */
int ms__agent_profile_build(int32_t pid, uint64_t start_time, uint8_t **out,
                            size_t *len, size_t *map_len);
void ms__agent_profile_free(uint8_t *map, size_t map_len);
/* The profile the last ms__agent_handle() call prepared, to be sent after
 * the replies it wrote; *map NULL if none. The caller owns it from then
 * on. ms__agent_handle() handles no request after a profile until it has
 * been taken (a stream keeps the order of the replies). */
void ms__agent_take_profile(uint8_t **map, size_t *len, size_t *map_len);

/* Rate limit (ns) and cache control. ms__agent_cache_reset() forgets the
 * cached snapshot (after fork: it is the parent's). */
void ms__agent_set_interval(uint64_t ns);
void ms__agent_cache_reset(void);

/* Room a client's output buffer keeps free before another request is
 * handled: the largest reply. */
#define MS__AGENT_REPLY_MAX (MS__WIRE_SNAPSHOT_MAX + MS__WIRE_SMALL_MAX)

/* ---- the final snapshot for `memtop run` (final_send.c) ---- */

/* Reads MEMSTATS_FINAL_FD, MEMSTATS_FINAL_PID and MEMSTATS_FINAL_PPID (at
 * start, before the program can change its environment): see final_send.c.
 * ms__final_setup() takes the three values (NULL or "" for unset) and is
 * what the tests call. A descriptor that is not an open socket, or a
 * value that is not a number, means no final snapshot. */
void ms__final_init(void);
void ms__final_setup(const char *fd_s, const char *pid_s, const char *ppid_s);

/* At exit (exit(), or _exit() through the preload): if a final snapshot
 * was asked for and this process is the one meant, takes a snapshot and
 * sends it as one snapshot frame to the descriptor, waiting at most a
 * second for room. Once per process. Nothing from inside an update of the
 * counters on this thread (a signal handler that interrupted one:
 * ms__engine_busy_here), and no allocator sampled when this may be a
 * signal handler (ms__maybe_in_signal_handler). Returns 0 when sent,
 * MS_ENOENT when not asked for (or not this process), else the reason it
 * was not sent. Never changes errno. */
int ms__final_write(void);

/* Whether this thread may be running a signal handler: its signal mask
 * blocks a signal that the mask of the thread that started the agent did
 * not (a handler blocks its own signal while it runs, unless SA_NODEFER).
 * exit() and _exit() may be called from a handler that interrupted the
 * allocator, whose locks it then holds: the final snapshot then samples no
 * allocator. A thread that blocks signals of its own accord is taken for
 * one too: its final snapshot has the providers' last samples. */
int ms__maybe_in_signal_handler(void);

/* The agent's part of _exit() (the preload interposes it, preload.c): the
 * socket goes away and the final snapshot is sent, as at a normal exit.
 * The thread is left running: the process ends at once. Not for a vfork()
 * child, which shares its parent's memory (the caller tells them apart). */
void ms__agent_quick_exit(void);

/* After fork(), in a child whose parent ran the agent: whether the
 * child's agent is still to be started. The fork handler only notes it
 * (it may do nothing but async-signal-safe work); ms__agent_after_fork()
 * starts it, outside any handler: the preload calls it from an allocation
 * of the child's MS__FORK_GRACE_NS or more after it first looked at the
 * clock (from its 64th allocation on: preload.c), and
 * ms_agent_start() in the child starts it too. A child that ends sooner
 * costs no agent. ms__agent_after_fork() may be called from inside
 * malloc (before the next allocator is): what it calls may allocate. */
#define MS__FORK_GRACE_NS (100ull * 1000000ull)
int ms__agent_fork_pending(void);
void ms__agent_after_fork(void);

/* ms_agent_start() as the preload does it at a program's start: the
 * thread is created, but makes its socket (and maps its buffers) only
 * MS__AGENT_DEFER_NS (MEMSTATS_AGENT_DELAY_MS) later, unless stopped
 * first; the call does not wait for it, and ms_agent_start() in the
 * program makes the socket at once. A program that ends sooner (a
 * compiler's passes, a shell's commands) never binds a socket nor unlinks
 * one, and its exit does not wait for the thread. Returns as
 * ms_agent_start(). */
#define MS__AGENT_DEFER_NS (50ull * 1000000ull)
int ms__agent_start_deferred(void);

/* ---- the agent's own descriptors (fds.c) ---- */

/* A descriptor the agent made, with the identity it had then (device and
 * inode: no other open file shares both). private_table: it lives in the
 * agent thread's own descriptor table, which nothing else can change, so
 * it needs no check; else it is in the program's table. */
typedef struct ms__own_fd_s {
  int fd; /* -1: none, or abandoned */
  int private_table;
  dev_t dev;
  ino_t ino;
} ms__own_fd_t;

/* Records fd (just made by the caller) in *o; in the program's table it
 * is first moved to the highest free number below min(RLIMIT_NOFILE,
 * 1024), where shells and programs do not go unless they name it.
 * Returns the descriptor, or a negative code: MS_EINVAL if fd is
 * negative (the call that was to make it failed), fstat's -errno (fd
 * closed). */
int ms__own_take(ms__own_fd_t *o, int fd, int private_table);

/* Whether o->fd is still the descriptor that was taken: always in the
 * agent's table, by identity in the program's (ms__own_same: checked in
 * any table). */
int ms__own_ok(const ms__own_fd_t *o);
int ms__own_same(const ms__own_fd_t *o);

/* Closes o->fd if it is still ours; a number the program has taken over
 * is left alone. Either way o->fd becomes -1. */
void ms__own_close(ms__own_fd_t *o);

/* Gives the calling thread a descriptor table of its own, in which every
 * number but those in keep[0..n) (ascending; -1 entries ignored) is
 * closed. Returns 0, or a negative errno (nothing changed) where the
 * kernel (close_range needs Linux 5.9) or a seccomp filter does not allow
 * it. */
int ms__fds_go_private(const int *keep, int n);

/* ---- the thread (agent.c) ---- */

/* CPU time the agent thread has used (ns), or 0 if it is not running. For
 * benchmarks. */
uint64_t ms__agent_cpu_ns(void);

/* The library was loaded into the running program by memtop attach
 * (src/preload/attach.c): a profile request is told why there is no heap
 * profile. */
void ms__agent_mark_attached(void);

#endif
