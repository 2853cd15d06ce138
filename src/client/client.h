/*
 * client.h - memtop's side of the protocol: finding targets, and talking to
 * one. The protocol itself is a state machine with no I/O (a "session"), so
 * memtop's libuv loop (memtop/conn.c) and the tests' blocking helpers
 * (tests/support/fetch.h) share every byte of it, and the words for what
 * fails (msc_explain_*).
 */
#ifndef MS_CLIENT_CLIENT_H
#define MS_CLIENT_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "memstats.h"
#include "wire/profile.h"
#include "wire/wire.h"

#define MSC_PATH_MAX 108 /* sizeof(sun_path) */

/* A path for people that may name a socket through another process's
 * root ("/proc/PID/root" and a socket path inside it). */
#define MSC_NSPATH_MAX (MSC_PATH_MAX + 48)
/* Whether a socket directory is too long for its sockets: <dir>/<pid>.sock
 * (a PID of up to 7 digits, as pid_max allows) must fit in a Unix
 * socket's address, or no library can bind there. */
#define MSC_SOCKDIR_TOO_LONG(dir)                                              \
  (strlen(dir) + sizeof "/4194304.sock" > MSC_PATH_MAX)

/* Who a process is, as /proc says from memtop's side (procns.c): its real
 * owner, its PID inside its own namespaces, and the container, pod and
 * service its cgroup names. Every string is checked against what the
 * engines write (hex ids, a pod's UUID, a unit's characters): a cgroup a
 * process named itself cannot put anything else there. */
typedef struct msc_ident_s {
  uid_t uid;    /* the real owner: the first field of the Uid: line */
  int have_uid; /* uid was read */
  int nspid;    /* the PID inside its innermost PID namespace (NSpid's last
                   field); the PID itself when it shares memtop's */
  int foreign;  /* in another mount or PID namespace than memtop's */
  int ppid;     /* its parent, as memtop sees it (PPid:; 0: none seen, as
                   for a process whose parent is outside memtop's PID
                   namespace) */
  char container[65]; /* the container's id (64 hex digits), or "" */
  char engine[16];    /* docker, containerd, cri-o, podman, or "" */
  char pod[37];       /* the Kubernetes pod's UID, or "" */
  char unit[65];      /* the systemd service it runs in, or "" */
} msc_ident_t;

typedef struct msc_target_s {
  int pid;
  uid_t uid;                 /* owner of the socket */
  uint64_t start_time;       /* from /proc/PID/stat, 0 if unknown */
  char comm[MS_NAME_MAX];    /* from /proc/PID/comm */
  char path[MSC_NSPATH_MAX]; /* the socket (through /proc/PID/root when the
                                process runs in another namespace) */
  uint64_t ino;              /* the socket's inode when it was listed */
  msc_ident_t id;            /* who the process is (have_uid 0: unknown) */
} msc_target_t;

/* The socket directory for the calling user, by DESIGN.md's rules
 * ($MEMSTATS_DIR, $XDG_RUNTIME_DIR/memtop, /tmp/memtop-$UID). */
int msc_socket_dir(char *buf, size_t len);
/* The socket path of `pid` in that directory. */
int msc_socket_path(int pid, char *buf, size_t len);

/* Finds the socket of pid: in our directory, else in the default
 * directories of the process's owner (as root, every user's). Returns 0
 * with path filled, MS_ENOENT (path: where it was looked for), MS_EACCES
 * (path: the directory we may not enter), MS_EUNSAFE (*why says why). */
int msc_find_socket(int pid, char *path, size_t len, const char **why);

/* ---- processes in other namespaces (procns.c) ---- */

/* Reads who pid is (msc_ident_t): the Uid: and NSpid: lines of
 * /proc/PID/status, /proc/PID/cgroup, and whether its mount or PID
 * namespace is not memtop's. Returns 0, MS_EINVAL or MS_ESRCH. */
int msc_proc_ident(int pid, msc_ident_t *id);

/* The parent of pid as memtop sees it (the PPid: line of
 * /proc/PID/status): > 0, 0 when it has none here, or MS_ESRCH. */
int msc_proc_ppid(int pid);

/* Fills id's container, engine, pod and unit from the text of a
 * /proc/PID/cgroup file (other members untouched). Pure; no allocation. */
void msc_cgroup_ident(const char *text, msc_ident_t *id);

/* Where a socket was found, and how to reach it. A socket in another
 * mount namespace is opened through /proc/PID/root with openat2
 * (RESOLVE_IN_ROOT, no symbolic link followed at the directory or the
 * socket, no magic link anywhere), and connected to through the O_PATH
 * descriptor held in fd ("/proc/self/fd/N" in `connect`), so that
 * nothing the process put in its root can send memtop outside it. */
typedef struct msc_sockref_s {
  char path[MSC_NSPATH_MAX];  /* for people */
  char connect[MSC_PATH_MAX]; /* what to connect() to ("": nothing) */
  int fd;                     /* the O_PATH descriptor behind it, or -1 */
  int nspid;                  /* the PID the agent knows itself by */
  uid_t uid;                  /* the socket's owner */
  uint64_t ino;               /* the socket's inode */
} msc_sockref_t;

/* Finds pid's socket as msc_find_socket() does and, for a process in
 * another mount or PID namespace, in the socket directory it uses inside
 * its own root (its MEMSTATS_DIR or XDG_RUNTIME_DIR/memtop from
 * /proc/PID/environ where memtop may read it, memtop's own MEMSTATS_DIR,
 * then /tmp/memtop-UID with the uid it has inside its user namespace,
 * from /proc/PID/uid_map), named after its PID there (NSpid). ref->fd is
 * -1 or a descriptor the caller closes with msc_sockref_close() once
 * connected. Returns 0, MS_ENOENT, MS_EACCES, MS_ESRCH or MS_EUNSAFE
 * (*why says why), with ref->path saying where it looked. */
int msc_locate(int pid, msc_sockref_t *ref, const char **why);
/* msc_locate for a caller that has just read who pid is (id from
 * msc_proc_ident(), or NULL when that failed), rather than reading it
 * again. */
int msc_locate_ident(int pid, const msc_ident_t *id, msc_sockref_t *ref,
                     const char **why);
void msc_sockref_close(msc_sockref_t *ref);

/* Adds to *v (*n of *cap, grown with realloc) the attachable processes
 * found in other mount or PID namespaces (a socket found as msc_locate
 * does; only in the directory named `only` inside each root when it is
 * not NULL), skipping PIDs has(arg, pid) says are listed already.
 * With reuse, a process the last listing found in memtop's own
 * namespaces, less than 30 s ago and in the same /proc directory, is not
 * asked again. Connects to nothing, removes nothing. Returns 0 or
 * MS_ENOMEM. */
int msc_list_namespaces(msc_target_t **v, size_t *n, size_t *cap,
                        const char *only, int reuse, int (*has)(void *, int),
                        void *arg);
/* How many times listings read pid's namespaces while it stayed in
 * memtop's (0: not in the last listing, or in another namespace): for
 * the test that keeps the reuse. */
unsigned msc_ns_checks(int pid);

/* Field 22 of /proc/PID/stat. Returns 0, MS_ESRCH (no such process). */
int msc_proc_start_time(int pid, uint64_t *start_time);

/* The effective uid of pid (the Uid: line of /proc/PID/status). Returns 0
 * or MS_ESRCH. */
int msc_proc_uid(int pid, uid_t *uid);

/* Nonzero if pid has libmemstats or its preload mapped (/proc/PID/maps):
 * a process that has no socket yet is then starting, not without the
 * library. 0 when it cannot be told (another user's process). */
int msc_proc_maps_libmemstats(int pid);

/* Nonzero if pid has as many descriptors open as its soft RLIMIT_NOFILE
 * allows (/proc/PID/fd against the "Max open files" line of
 * /proc/PID/limits), with both counts in *open and *limit: its agent then
 * cannot take a connection, and a silence is not a hang. 0 when it cannot
 * be told (another user's process, no limit). */
int msc_proc_fds_full(int pid, unsigned long *open, unsigned long *limit);

/* Verifies the server end of a connected socket with SO_PEERCRED: the
 * process that listens is `pid` itself, and its uid is the one that owns
 * pid (or root). Returns 0, or MS_EUNSAFE with words for the user in msg
 * (who answered instead), or MS_ESRCH if pid is gone. `path` is named in
 * the message. */
int msc_verify_peer(int fd, int pid, const char *path, char *msg, size_t len);

/* Why msc_list found nothing in the user's own socket directory
 * (msc_socket_dir): it skips one that is not safe (a symbolic link,
 * another user's, open to group or others), as the library refuses to
 * serve there, and a listing must not say "no attachable processes" of
 * it. Returns 1 with "not trusting the socket directory DIR: CAUSE; FIX"
 * in buf when the directory exists and is not safe, or "not using the
 * socket directory DIR: CAUSE; FIX" when its sockets' paths cannot fit in
 * a Unix socket's address, else 0 (buf empty). One lstat: cheap enough
 * for every listing. */
int msc_sockdir_refusal(char *buf, size_t len);

/* Words for an unsafe socket directory (msc_find_socket's MS_EUNSAFE for
 * the socket at `path`, with its *why): the PID, the directory, the cause
 * and the fix. */
void msc_explain_unsafe(int pid, const char *path, const char *why, char *buf,
                        size_t len);

/* Words for a failed connect to `pid`'s socket at `path` (err an MS_E*
 * code: MS_ENOENT, MS_ECONNREFUSED, MS_EACCES, or any other), with the fix.
 * The one wording of these failures, whoever connects. */
void msc_explain_connect(int pid, int err, const char *path, char *buf,
                         size_t len);

/* Words for a request to `pid` that had no answer within timeout_ms:
 * connected says whether the connect to `path` itself had completed. A
 * target out of file descriptors (/proc/PID/fd against its limit) is told
 * from a hung or stopped one. */
void msc_explain_timeout(int pid, int timeout_ms, int connected,
                         const char *path, char *buf, size_t len);

/* Lists the candidates for attaching, without connecting to any (it
 * never blocks on a target: memtop's loop probes each through its own
 * connection, conn.c): every live PID with a socket in the user's
 * directory (as root, every user's default directory too, unless
 * MEMSTATS_DIR is set: then that directory only), from a directory that
 * is safe, owned by the user who owns the PID (or by root). Removes the
 * sockets of PIDs that are gone. *out is malloc'd (caller frees); sorted
 * by pid. Returns 0 or a negative code. */
int msc_list(msc_target_t **out, size_t *count);
/* msc_list for a caller that lists again and again (the live view's
 * rescan): a directory whose inode, mtime and ctime are unchanged since
 * it was last read this way, at most 30 s ago, gives the same entries
 * again without reading it or /proc (a socket added or removed changes
 * the directory's times). Stale sockets are removed, and a process whose
 * socket stayed behind is dropped, at the next full reading. */
int msc_list_reuse(msc_target_t **out, size_t *count);
/* How many times a directory was read (not reused) by either: for the
 * test that keeps the reuse. */
unsigned long long msc_list_reads(void);

/* A listed socket (msc_list) refused connections: removes it if it is
 * stale, that is if it is still the socket listed (same inode) and its
 * PID is gone or runs a program without libmemstats. A live PID that
 * runs libmemstats keeps its socket: it may be an agent starting (an older
 * one binds in place before it listens) or one started with
 * MEMSTATS_AGENT=0 after an exec. Returns 1 if it removed it, else 0. */
int msc_remove_stale(const msc_target_t *t);

/* msc_list, then a blocking probe of each (a connect, at most 200 ms, and
 * SO_PEERCRED), for tools and tests outside memtop's loop: lists attachable
 * processes: every live PID with a socket in the user's
 * directory (as root, every user's default directory too, unless
 * MEMSTATS_DIR is set: then that directory only). Removes stale sockets
 * (msc_remove_stale for those that refuse connections). Lists a PID only if the
 * process serving its socket is that PID, and the user who owns the
 * directory owns the PID (or the directory is root's). *out is malloc'd (caller
 * frees); sorted by pid. Returns 0 or a negative code. */
int msc_discover(msc_target_t **out, size_t *count);

/* ---- the protocol state machine (no I/O) ---- */
typedef struct msc_session_s msc_session_t;

typedef enum msc_event_type_e {
  MSC_EV_NONE = 0, /* need more bytes */
  MSC_EV_HELLO,    /* handshake received and verified */
  MSC_EV_SNAPSHOT, /* a snapshot was decoded into the caller's struct */
  MSC_EV_PROFILE,  /* a whole heap profile: msc_session_take_profile() */
  MSC_EV_ERROR     /* refused, malformed, PID reused...: see .err */
} msc_event_type_t;

/* The handshake as the wire decodes it (pid, start time, comm, library
 * version, protocol version, providers, capabilities). */
typedef ms__wire_hello_t msc_hello_t;

typedef struct msc_event_s {
  msc_event_type_t type;
  int err;       /* MS_E* with MSC_EV_ERROR */
  char msg[256]; /* words for the user: cause and, where one helps, a hint */
} msc_event_t;

/* A new session for the target `pid` whose start time should be
 * `expected_start_time` (0: do not check). NULL on ENOMEM. */
msc_session_t *msc_session_new(int pid, uint64_t expected_start_time);
/* The target runs in another PID namespace, where it is nspid: its
 * handshake must say nspid, and its snapshots and profiles are given
 * the PID memtop knows it by. */
void msc_session_set_nspid(msc_session_t *s, int nspid);
void msc_session_free(msc_session_t *s);
/* The bytes to send to ask for one snapshot (the first call also says
 * hello). The pointer stays valid until the next call on the session. */
int msc_session_request_snapshot(msc_session_t *s, const uint8_t **out,
                                 size_t *len);
/* The same with request flags: MS__REQ_SMAPS also asks for the kernel's
 * smaps_rollup figures (LazyFree, AnonHugePages, Swap, and Rss from smaps),
 * which cost the target about 10 ms per GiB resident: ask for them only
 * where they are shown. An agent that predates the flag ignores it (the
 * figures then read as unavailable). */
int msc_session_request_snapshot_flags(msc_session_t *s, uint64_t flags,
                                       const uint8_t **out, size_t *len);
/* The bytes to send to ask for the heap profile (the first call also says
 * hello). The profile comes as several frames: msc_session_feed() reports
 * MSC_EV_PROFILE once the last has been decoded (MSC_EV_NONE, bytes used,
 * for the others), or MSC_EV_ERROR (the agent's refusal, e.g. MS_ENOSYS
 * when profiling is off; or a malformed frame, which ends the session).
 * Returns 0, MS_EINVAL or MS_ENOMEM. */
int msc_session_request_profile(msc_session_t *s, const uint8_t **out,
                                size_t *len);
/* After MSC_EV_PROFILE: the profile, now the caller's (free it with
 * ms__profile_decoded_free); NULL if none is complete. */
ms__profile_decoded_t *msc_session_take_profile(msc_session_t *s);
/* Feeds received bytes. Consumes at most one message per call: *used says
 * how many bytes it took (call again with the rest). On MSC_EV_SNAPSHOT,
 * *snap holds the snapshot. */
int msc_session_feed(msc_session_t *s, const uint8_t *data, size_t len,
                     size_t *used, ms_snapshot_t *snap, msc_event_t *ev);
/* The handshake, once MSC_EV_HELLO has been seen (else NULL). */
const msc_hello_t *msc_session_hello(const msc_session_t *s);

#endif
