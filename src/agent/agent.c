/*
 * agent.c - the agent thread: serves snapshots on <dir>/<pid>.sock.
 *
 * One thread, one poll() loop, every socket non-blocking and close-on-exec.
 * The agent lives inside someone else's program, so it keeps to itself:
 * all signals are blocked on its thread (they go to the program's threads
 * as before), sends use MSG_NOSIGNAL (a vanished client is no SIGPIPE),
 * buffers are mmap'd once at start (no malloc, which may be the one being
 * tracked), and it never prints unless MEMSTATS_DEBUG=1.
 *
 * Its descriptors are its own (fds.c): the thread has a descriptor table
 * of its own, where the program cannot close or replace them and where
 * nothing of the program's is held, and the program's table holds none of
 * the agent's. Another thread wakes it (stop, exit) by connecting to its
 * socket, or, failing that, by opening its wake pipe (both ends in the
 * agent's table) again through /proc/self/task/TID/fd/N, or by copying it
 * with pidfd_getfd(2), for one write: a descriptor of its own for that
 * instant, as any libc call that opens a file (wake_thread). A program
 * that has become another user since the start (root to nobody) still
 * wakes it so. Where the table cannot be unshared, every
 * descriptor is in the program's table, placed at its top and checked
 * before each use: a descriptor found closed or replaced is
 * abandoned (never closed: the number is the program's now), and the agent
 * recovers (a new socket at the same path; clients are dropped) or stops,
 * saying so under MEMSTATS_DEBUG=1. The order in that mode: the identities
 * are checked before each poll() round, so that a number the program has
 * taken is not polled (its events would be the program's); poll() itself
 * holds the files it was given, so a number replaced while it waits does
 * not wake it; after it returns, POLLNVAL (a number closed) abandons the
 * descriptor at once, and the identity is checked again right before each
 * read, accept, send and close. What remains is the instant between that
 * check and the call, in which only another thread of the program that
 * closes numbers it does not own could act: the unshared table, the
 * normal case, has no such instant.
 *
 * At the process's descriptor limit accept4() fails (EMFILE) and the
 * connection stays queued, so the listening socket stays readable: the
 * agent keeps one spare descriptor, releases it to accept the connection,
 * tells the client that the target is out of file descriptors (MS_EMFILE),
 * closes it and takes its spare again. When even that fails, it stops
 * watching the socket for a while that doubles up to a second: it never
 * spins.
 *
 * A client that hangs is closed after a timeout; when all slots are taken,
 * the least recently active idle client makes room, so a burst of silent
 * connections cannot lock out memtop for long.
 *
 * At normal exit (the atexit handler below) the agent also sends the final
 * snapshot that `memtop run` asks for with MEMSTATS_FINAL_FD (final_send.c).
 * On _exit() or a fatal signal nothing of ours runs, and nothing is sent:
 * memtop then shows the last snapshot it polled, and says so.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "common/env.h"
#include "agent/thread.h"
#include "common/procfs.h"
#include "common/sockdir.h"
#include "core/engine.h"
#include "core/util.h"
#include "profile/profile.h"

#define MAX_CLIENTS 32
#define ACCEPT_BURST 64
/* A client with a partial request or an unsent reply must make progress
 * within this; an idle one may stay this long between requests. */
#define IO_TIMEOUT_NS (5ull * 1000000000ull)
#define IDLE_TIMEOUT_NS (300ull * 1000000000ull)
#define IN_CAP (MS__WIRE_HEADER + MS__WIRE_MAX_REQUEST)
#define OUT_CAP (2 * MS__AGENT_REPLY_MAX)
/* How long the listening socket is left alone after accept4() failed for
 * want of descriptors or memory: doubling from the first to the second. */
#define ACCEPT_BACKOFF_MIN_NS (10ull * 1000000ull)
#define ACCEPT_BACKOFF_MAX_NS (1000ull * 1000000ull)
/* Once the wake pipe is lost, stop() may have to wake the agent by
 * connecting to its socket, which needs the path; the agent then also
 * looks at the stop flag this often. */
#define WAKE_LOST_POLL_MS 1000

typedef struct client_s {
  ms__own_fd_t fd; /* fd.fd -1: free slot */
  size_t in_len;
  size_t out_off, out_len;
  uint64_t last_progress; /* CLOCK_MONOTONIC */
  int eof;                /* the client will send no more */
  int closing;            /* close once the output is sent */
  uint8_t *in, *out;
  /* A heap profile being sent after out's bytes (request.c): the
   * agent's own mapping, given back once sent or on close. */
  uint8_t *prof;
  size_t prof_off, prof_len, prof_map;
} client_t;

/* Whether the client has output waiting (replies or a profile). */
static int client_pending(const client_t *c) {
  return c->out_len > c->out_off || c->prof != NULL;
}

static void client_drop_profile(client_t *c) {
  ms__agent_profile_free(c->prof, c->prof_map);
  c->prof = NULL;
  c->prof_off = c->prof_len = c->prof_map = 0;
}

/* What the agent's fork handlers write, at the start of the fork section
 * (core/engine.h, MS__FORK_DATA): this object comes first in the
 * library's link order, so aligning this one variable of the section
 * aligns the section, and what every layer's fork handlers write shares
 * one page. The names below are its fields. */
static struct {
  pthread_mutex_t lock;
  int running;
  /* Set by the fork handler in a child whose parent ran the agent: the
   * child's is started later, outside the handler
   * (ms__agent_after_fork). */
  int fork_pending;
  uint8_t *bufs;
  char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
} g_fork MS__FORK_DATA __attribute__((aligned(4096))) = {
    PTHREAD_MUTEX_INITIALIZER, 0, 0, NULL, {0}};
#define g_lock g_fork.lock
#define g_running g_fork.running
#define g_fork_pending g_fork.fork_pending
#define g_bufs g_fork.bufs
#define g_path g_fork.path
static int g_stop; /* read by the thread, set by stop: atomics */
/* A deferred start's phase (ms__agent_start_deferred), atomic: the
 * thread and stop race for DEFERRING, and whoever moves it first decides
 * whether the socket is ever made. */
enum { PHASE_NOW, PHASE_DEFERRING, PHASE_SETTING, PHASE_STOPPED };
static int g_phase;
/* The futex a deferred start's thread sleeps on: set (and woken) by stop,
 * and by ms_agent_start(), which wants the socket now. */
static int g_wakeup;
/* How long a deferred start waits (MEMSTATS_AGENT_DELAY_MS, read at each
 * start). */
static uint64_t g_defer_ns = MS__AGENT_DEFER_NS;
static pthread_t g_thread;
/* The agent's descriptors: in its own table when g_private, else in the
 * program's (the wake pipe's too: see wake_thread). */
static int g_private;
static ms__own_fd_t g_listen = {-1, 0, 0, 0};
static ms__own_fd_t g_wake_r = {-1, 0, 0, 0};
static ms__own_fd_t g_wake_w = {-1, 0, 0, 0};
static ms__own_fd_t g_reserve = {-1, 0, 0, 0};
static int g_agent_tid; /* the thread's, for /proc/self/task/TID/fd */
static int g_wake_lost; /* atomic: the agent no longer reads the pipe */
/* The start handshake: the thread sets up its table and socket, then
 * posts g_ready with the result in g_setup_err. */
static sem_t g_ready;
static int g_setup_err;
static uint64_t g_accept_resume; /* CLOCK_MONOTONIC; 0: watching */
static uint64_t g_accept_backoff;
static size_t g_bufs_len;
static client_t g_clients[MAX_CLIENTS];
static int g_hooks_installed;
static int g_said_unsafe;
/* What MEMSTATS_DEBUG=1 has been told once already. */
static int g_said_lost_client, g_said_emfile, g_said_accept;

/* ------------------------------------------------------------------------
 * Clients
 * ------------------------------------------------------------------------ */
static void client_close(client_t *c) {
  client_drop_profile(c);
  ms__own_close(&c->fd);
}

/* Whether the client's descriptor is still ours; if not, the slot is
 * given up without touching the number. */
static int client_usable(client_t *c) {
  if (ms__own_ok(&c->fd))
    return 1;
  if (c->fd.fd >= 0 && !g_said_lost_client) {
    g_said_lost_client = 1;
    ms__debug("agent: the program closed or replaced a client's descriptor "
              "(fd %d); that client is dropped, the descriptor left alone",
              c->fd.fd);
  }
  c->fd.fd = -1;
  return 0;
}

/* Sends buf[*off, len) without blocking. Returns 1 when all is sent, 0
 * when the socket is full, or send's negative errno if the client is
 * gone. */
static int send_part(client_t *c, const uint8_t *buf, size_t *off, size_t len,
                     uint64_t now) {
  while (*off < len) {
    ssize_t n =
        send(c->fd.fd, buf + *off, len - *off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      *off += (size_t)n;
      c->last_progress = now;
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return 0;
    return n < 0 ? -errno : -EPIPE;
  }
  return 1;
}

/* Sends what is pending: the replies, then a profile being streamed.
 * Returns 0, or a negative errno if the client is gone (-EBADF: the
 * program took its descriptor over). */
static int client_flush(client_t *c, uint64_t now) {
  if (client_pending(c) && !client_usable(c))
    return -EBADF;
  int r = send_part(c, c->out, &c->out_off, c->out_len, now);
  if (r <= 0)
    return r;
  c->out_off = c->out_len = 0;
  if (c->prof != NULL) {
    r = send_part(c, c->prof, &c->prof_off, c->prof_len, now);
    if (r <= 0)
      return r;
    client_drop_profile(c);
  }
  return 0;
}

/* Handles whatever whole requests are buffered, replying into out. */
static void client_serve(client_t *c) {
  if (c->prof != NULL)
    return; /* the next reply follows the profile being sent */
  if (c->out_off > 0) {
    memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
    c->out_len -= c->out_off;
    c->out_off = 0;
  }
  ms__wire_writer_t w;
  ms__wire_writer_init(&w, c->out, OUT_CAP);
  w.len = c->out_len;
  size_t used = ms__agent_handle(c->in, c->in_len, &w, &c->closing);
  c->out_len = w.len;
  ms__agent_take_profile(&c->prof, &c->prof_len, &c->prof_map);
  c->prof_off = 0;
  if (used > 0) {
    memmove(c->in, c->in + used, c->in_len - used);
    c->in_len -= used;
  }
}

static void client_read(client_t *c, uint64_t now) {
  if (!client_usable(c))
    return;
  while (!c->eof && !c->closing && c->in_len < IN_CAP) {
    ssize_t n =
        recv(c->fd.fd, c->in + c->in_len, IN_CAP - c->in_len, MSG_DONTWAIT);
    if (n > 0) {
      c->in_len += (size_t)n;
      c->last_progress = now;
      client_serve(c);
      if (OUT_CAP - c->out_len < MS__AGENT_REPLY_MAX || c->prof != NULL)
        break;
      continue;
    }
    if (n == 0) {
      c->eof = 1;
      break;
    }
    if (errno == EINTR)
      continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      c->eof = c->closing = 1;
    break;
  }
}

/* The slot to give a new connection: a free one, else the least recently
 * active client with nothing left to send; -1 if every client is busy. */
static int pick_slot(void) {
  int victim = -1;
  for (int i = 0; i < MAX_CLIENTS; i++) {
    if (g_clients[i].fd.fd < 0)
      return i;
    if (!client_pending(&g_clients[i]) &&
        (victim < 0 ||
         g_clients[i].last_progress < g_clients[victim].last_progress))
      victim = i;
  }
  if (victim >= 0)
    client_close(&g_clients[victim]);
  return victim;
}

/* Says why in one non-blocking send, then closes fd (just accepted). */
static void refuse(int fd, int code, const char *why) {
  uint8_t buf[MS__WIRE_SMALL_MAX];
  ms__wire_writer_t w;
  ms__wire_writer_init(&w, buf, sizeof buf);
  if (ms__wire_encode_error(&w, MS__MSG_REFUSED, code, why) == 0) {
    ssize_t n = send(fd, buf, w.len, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)n;
  }
  close(fd);
}

static void take_reserve(void) {
  if (g_reserve.fd < 0)
    ms__own_take(&g_reserve, socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0),
                 g_private);
}

/* accept4() failed for want of descriptors (err: EMFILE, the process's
 * limit; ENFILE, the system's): the spare one makes room for the
 * connection at the head of the queue, which is told why and closed.
 * Returns 1 if a connection was dropped so, 0 if not. */
static int drop_one_for_emfile(int err) {
  if (!ms__own_ok(&g_reserve)) {
    g_reserve.fd = -1; /* lost in the program's table: left alone */
    return 0;
  }
  ms__own_close(&g_reserve);
  int fd = accept4(g_listen.fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd >= 0) {
    char msg[192];
    struct rlimit rl;
    if (err == ENFILE)
      snprintf(msg, sizeof msg,
               "the target is out of file descriptors: the system's file "
               "table is full (raise fs.file-max, or find what holds them)");
    else if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
      snprintf(msg, sizeof msg,
               "the target is out of file descriptors (all %llu that its "
               "RLIMIT_NOFILE allows are open): raise its limit (ulimit -n) "
               "or find what holds them (ls /proc/%d/fd)",
               (unsigned long long)rl.rlim_cur, (int)getpid());
    else
      snprintf(msg, sizeof msg,
               "the target is out of file descriptors: raise its limit "
               "(ulimit -n) or find what holds them (ls /proc/%d/fd)",
               (int)getpid());
    refuse(fd, MS_EMFILE, msg);
  }
  take_reserve();
  return fd >= 0;
}

/* Leaves the listening socket alone for a while that doubles. */
static void accept_back_off(uint64_t now, int err) {
  g_accept_backoff = g_accept_backoff == 0 ? ACCEPT_BACKOFF_MIN_NS
                     : g_accept_backoff >= ACCEPT_BACKOFF_MAX_NS / 2
                         ? ACCEPT_BACKOFF_MAX_NS
                         : 2 * g_accept_backoff;
  g_accept_resume = now + g_accept_backoff;
  if (!g_said_accept) {
    g_said_accept = 1;
    ms__debug("agent: cannot accept connections (%s); waiting before trying "
              "again",
              strerror(err));
  }
}

/* Whether a peer's uid is one our user namespace has no name for: the
 * kernel reports the overflow uid for it, and either the peer is outside
 * our PID namespace too (its PID reads 0) or the overflow uid is not one
 * of our namespace's own (a container's "nobody" would be). That is a
 * process outside the namespace: memtop run by the host's root for a
 * rootless container, say. To connect at all it had to get through our
 * socket directory and socket (0700 and 0600, ours) as a uid other than
 * ours, which takes a capability over them (root's CAP_DAC_OVERRIDE in
 * a namespace above ours), so it is taken as root. Read at each
 * connection: a program may enter a namespace after it started. */
static int peer_from_outside(uid_t uid, pid_t pid) {
  char buf[1024];
  uint64_t overflow;
  unsigned long long in, out, count;

  if (ms__read_small_file("/proc/sys/kernel/overflowuid", buf, sizeof buf) <= 0)
    return 0;
  buf[strcspn(buf, "\n")] = '\0';
  if (ms__parse_uint(buf, UINT32_MAX, &overflow) != 0 || uid != (uid_t)overflow)
    return 0;
  if (pid == 0)
    return 1;
  if (ms__read_small_file("/proc/self/uid_map", buf, sizeof buf) <= 0)
    return 0;
  for (const char *p = buf; p != NULL && *p;) {
    if (sscanf(p, "%llu %llu %llu", &in, &out, &count) != 3 ||
        (overflow >= in && overflow - in < count))
      return 0; /* a uid of ours after all, or a map we cannot read */
    p = strchr(p, '\n');
    if (p != NULL)
      p++;
  }
  return 1;
}

static void accept_clients(uint64_t now) {
  for (int k = 0; k < ACCEPT_BURST; k++) {
    if (!ms__own_ok(&g_listen))
      return; /* found and recovered at the top of the next round */
    int fd = accept4(g_listen.fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      int e = errno;
      if (e == EAGAIN || e == EWOULDBLOCK)
        return;
      if (e == EINTR || e == ECONNABORTED)
        continue;
      if ((e == EMFILE || e == ENFILE) && drop_one_for_emfile(e)) {
        if (!g_said_emfile) {
          g_said_emfile = 1;
          ms__debug("agent: the process is out of file descriptors; "
                    "connections are refused with the reason");
        }
        continue;
      }
      accept_back_off(now, e);
      return;
    }
    g_accept_backoff = 0;
    int slot = pick_slot();
    if (slot < 0) {
      refuse(fd, MS_EAGAIN, "the agent is busy: too many clients");
      continue;
    }
    client_t *c = &g_clients[slot];
    if (ms__own_take(&c->fd, fd, g_private) < 0)
      continue;
    fd = c->fd.fd;
    c->in_len = c->out_off = c->out_len = 0;
    client_drop_profile(c); /* a slot given up kept its profile */
    c->eof = c->closing = 0;
    c->last_progress = now;
    ms__wire_writer_t w;
    ms__wire_writer_init(&w, c->out, OUT_CAP);
    struct ucred cred;
    socklen_t cl = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0 ||
        cl != sizeof cred) {
      client_close(c);
      continue;
    }
    /* A process that is not dumpable (a setuid or setgid program, one
     * whose user changed, or one that said so, as ssh-agent does) is one
     * the kernel lets only root trace or read: its figures and its code's
     * addresses go to root only too. Asked each time: a program may
     * change it at any moment. */
    int root_only = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 1;
    if (cred.uid != 0 && (root_only || cred.uid != geteuid()) &&
        !peer_from_outside(cred.uid, cred.pid)) {
      char msg[160];
      if (root_only)
        snprintf(msg, sizeof msg,
                 "permission refused: process %d is not dumpable (setuid, "
                 "setgid, or it said so); only root may read it",
                 (int)getpid());
      else
        snprintf(msg, sizeof msg,
                 "permission refused: uid %u may not read process %d (owned "
                 "by uid %u); run memtop as that user or as root",
                 (unsigned)cred.uid, (int)getpid(), (unsigned)geteuid());
      ms__wire_encode_error(&w, MS__MSG_REFUSED, MS_EREFUSED, msg);
      c->closing = 1;
    } else {
      ms__agent_hello(&w);
    }
    c->out_len = w.len;
    if (client_flush(c, now) != 0)
      client_close(c);
  }
}

/* ------------------------------------------------------------------------
 * The agent's descriptors
 * ------------------------------------------------------------------------ */

/* Makes the listening socket at g_path. It is bound under a temporary
 * name beside it (".<pid>.new", no longer than g_path, and no name memtop
 * lists), made 0600 and listening there, and only then renamed into
 * place: whoever finds <pid>.sock finds it accepting. Bound in place, it
 * refused connections until listen(), and memtop took a socket refusing
 * connections for a stale one and removed it, leaving a live agent that
 * no one could find. rename() also replaces a stale socket at g_path (a
 * process that had our PID, our own program before an exec, or our own
 * lost one) in one step. Returns 0 or a negative code. */
static int listen_open(void) {
  struct sockaddr_un sa;
  struct stat st;
  const char *slash = strrchr(g_path, '/');
  int fd, r, n;

  if (slash == NULL)
    return MS_EINVAL;
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  n = snprintf(sa.sun_path, sizeof sa.sun_path, "%.*s/.%d.new",
               (int)(slash - g_path), g_path, (int)getpid());
  if (n < 0 || (size_t)n >= sizeof sa.sun_path)
    return MS_EINVAL;
  /* Anything at g_path but a socket is not ours to replace; a socket
   * left at the temporary name is ours (our PID's). */
  if (lstat(g_path, &st) == 0 && !S_ISSOCK(st.st_mode)) {
    ms__debug("agent not started: %s exists and is not a socket", g_path);
    return MS_EEXIST;
  }
  if (lstat(sa.sun_path, &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      ms__debug("agent not started: %s exists and is not a socket",
                sa.sun_path);
      return MS_EEXIST;
    }
    unlink(sa.sun_path);
  }
  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -errno;
  if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    r = -errno;
    ms__debug("agent not started: bind %s: %s", sa.sun_path, strerror(errno));
    close(fd);
    return r;
  }
  /* The directory is 0700 already; this is the second lock on the door. */
  if (chmod(sa.sun_path, 0600) != 0 || listen(fd, SOMAXCONN) != 0 ||
      rename(sa.sun_path, g_path) != 0) {
    r = -errno;
    ms__debug("agent not started: %s: %s", g_path, strerror(errno));
    unlink(sa.sun_path);
    close(fd);
    return r;
  }
  r = ms__own_take(&g_listen, fd, g_private);
  if (r < 0) {
    unlink(g_path);
    return r;
  }
  return 0;
}

/* Whether the agent's own table keeps the program's stderr: under
 * MEMSTATS_DEBUG=1, and in a sanitizer build, whose reports from the
 * agent thread go to its descriptor 2. */
static int keep_stderr(void) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return 1;
#else
  return ms__env_is_1("MEMSTATS_DEBUG");
#endif
}

/* One byte into fd, a descriptor of the caller's own that should be the
 * wake pipe's write end, which is closed after. The byte goes only if fd is
 * that pipe (its identity, as ms__own_same checks it): a thread number
 * used again (the agent's thread gone, another made) names another
 * file. Returns 0 if the byte was written (or the pipe was full, which
 * wakes the agent as well), else -1. */
static int wake_write(int fd) {
  struct stat st;
  int r = -1;
  if (fd < 0)
    return -1;
  if (fstat(fd, &st) == 0 && st.st_dev == g_wake_w.dev &&
      st.st_ino == g_wake_w.ino) {
    ssize_t w = write(fd, "x", 1);
    r = w == 1 || (w < 0 && errno == EAGAIN) ? 0 : -1;
  }
  close(fd);
  return r;
}

/* The wake pipe's write end, opened again through /proc from any thread
 * (the pipe itself, not the agent's descriptor): a descriptor the caller
 * closes, or -1 as open(2) returns it. Opening it checks the pipe's own
 * mode, which wake_make opened to every user for writing: a program that
 * drops its privileges (root to nobody) is another user than the pipe's
 * owner from then on. Only a process allowed to trace this one may follow
 * the /proc link at all. */
static int wake_open(void) {
  char p[80];
  if (g_wake_w.fd < 0)
    return -1;
  snprintf(p, sizeof p, "/proc/self/task/%d/fd/%d", g_agent_tid, g_wake_w.fd);
  return open(p, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
}

#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL
#endif

/* The wake pipe's write end copied from the agent's own table with
 * pidfd_getfd(2), through a pidfd of its thread (PIDFD_THREAD, Linux
 * 6.9): no file is looked up, so it needs neither /proc (a chroot) nor
 * any right on a file, and the kernel lets a process take its own
 * threads' descriptors whatever its user. A descriptor the caller closes,
 * or -1. */
static int wake_pidfd(void) {
#if defined(SYS_pidfd_open) && defined(SYS_pidfd_getfd)
  if (g_wake_w.fd < 0 || g_agent_tid <= 0)
    return -1;
  int pfd = (int)syscall(SYS_pidfd_open, g_agent_tid, PIDFD_THREAD);
  if (pfd < 0)
    return -1;
  int fd = (int)syscall(SYS_pidfd_getfd, pfd, g_wake_w.fd, 0);
  close(pfd);
  return fd;
#else
  return -1;
#endif
}

/* The wake pipe, made by the thread in its own table (or at the top of the
 * program's). Returns 0 or a negative code. */
static int wake_make(void) {
  int p[2];
  if (pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0)
    return -errno;
  if (g_private) {
    /* 0-2 of the new table are held by the pipe and copies of its read
     * end (or 2 by stderr, kept): ms__debug() writes to 2, so none of
     * them may ever be a client's socket. */
    for (;;) {
      int d = fcntl(p[0], F_DUPFD_CLOEXEC, 0);
      if (d < 0)
        break;
      if (d > 2) {
        close(d);
        break;
      }
    }
  }
  /* In the program's table the write end first, so that it is placed
   * above the read end: a program going up the numbers (a loop of close
   * or dup2) meets the read end first, which the agent then leaves alone;
   * the other way round, the write end closed first hangs the read end up,
   * and the agent closes it (wake_read), giving back a number the program
   * was about to reach. */
  int r = ms__own_take(&g_wake_w, p[1], g_private);
  if (r < 0) {
    close(p[0]);
    return r;
  }
  /* In its own table the write end is reached from the program's threads
   * by opening it again (wake_open), which checks the pipe's mode against
   * the caller's user of the moment: writable by all, so that a program
   * that becomes another user after the start can still stop the agent. */
  if (g_private)
    fchmod(g_wake_w.fd, 0222);
  r = ms__own_take(&g_wake_r, p[0], g_private);
  return r < 0 ? r : 0;
}

/* After the thread has ended: the wake pipe's write end is closed in the
 * program's table; the numbers of the agent's own table, which went with
 * its thread, are forgotten. */
static void forget_after_join(void) {
  if (!g_wake_w.private_table) {
    ms__own_close(&g_wake_w);
    return;
  }
  g_wake_w.fd = g_wake_r.fd = g_listen.fd = g_reserve.fd = -1;
  for (int i = 0; i < MAX_CLIENTS; i++)
    g_clients[i].fd.fd = -1;
}

/* The thread's first work: its own table, its wake pipe, its spare
 * descriptor and its socket. Returns 0 or a negative code. */
static int agent_setup(void) {
  /* Kept in the new table: stderr where keep_stderr() says (else the
   * table holds no file of the program's at all: not even a program that
   * closes its stderr to tell a reader it is done is kept waiting by
   * us). */
  int keep[1] = {keep_stderr() ? 2 : -1};
  g_agent_tid = (int)syscall(SYS_gettid);
  int r = ms__fds_go_private(keep, 1);
  g_private = r == 0;
  if (!g_private)
    ms__debug("agent: no descriptor table of its own (unshare: %s); its "
              "descriptors stay in the program's, placed high and checked "
              "before each use",
              strerror(-r));
  r = wake_make();
  if (r != 0)
    return r;
  take_reserve();
  return listen_open();
}

/* Closes the thread's descriptors (those still its own). A table of its
 * own goes with the thread (the kernel closes what is in it as the thread
 * ends): nothing is closed here then, which also spares
 * ThreadSanitizer, which knows one table only, a close that looks like one
 * of the program's numbers (stop's own socket, made as the thread ends).
 * The numbers stay set for stop_locked and wake_thread, which read them
 * (wake_w) until the thread has been joined. */
static void agent_teardown(void) {
  for (int i = 0; i < MAX_CLIENTS; i++) {
    client_drop_profile(&g_clients[i]);
    if (!g_private)
      ms__own_close(&g_clients[i].fd);
  }
  if (g_private)
    return;
  ms__own_close(&g_listen);
  ms__own_close(&g_wake_r);
  ms__own_close(&g_reserve);
}

/* In the program's table (no unshared table), before each round: the
 * wake pipe and the socket are still ours, or are given up (and the
 * socket made again at the same path). Returns 0, or listen_open's
 * negative code if the agent must stop. */
static int check_shared(void) {
  if (g_wake_r.fd >= 0 && !ms__own_ok(&g_wake_r)) {
    ms__debug("agent: the program closed or replaced the agent's wake pipe "
              "(fd %d); left alone",
              g_wake_r.fd);
    g_wake_r.fd = -1;
    __atomic_store_n(&g_wake_lost, 1, __ATOMIC_RELEASE);
  }
  if (g_reserve.fd >= 0 && !ms__own_ok(&g_reserve))
    g_reserve.fd = -1;
  if (ms__own_ok(&g_listen))
    return 0;
  ms__debug("agent: the program closed or replaced the agent's socket (fd "
            "%d); left alone, and a new one made at %s",
            g_listen.fd, g_path);
  g_listen.fd = -1;
  int r = listen_open();
  if (r != 0) {
    ms__debug("agent stopped: cannot make its socket again: %s",
              ms_strerror(r));
    return r;
  }
  return 0;
}

/* The wake pipe said something: the byte of stop(), or that every write
 * end is closed (the program closed ours: POLLHUP for ever after), after
 * which the agent stops watching it. The pipe is never read: its only
 * byte comes from stop(), which sets g_stop first, so the loop ends
 * without it. A read would be the one call on a number of the program's
 * table that can block: should the program put a blocking file of its own
 * over the number between the check and the read (the window of agent.c's
 * opening comment), the agent took its data and, once that was read, slept
 * in read() for ever, never again making its socket (test_agent_fds's
 * dup2 case, with a pause put in that window, hung every time). */
static void wake_read(short revents) {
  if ((revents & POLLNVAL) || !ms__own_ok(&g_wake_r)) {
    g_wake_r.fd = -1; /* the number is the program's: left alone */
  } else if (revents & (POLLHUP | POLLERR)) {
    ms__own_close(&g_wake_r);
  } else {
    /* stop()'s byte: g_stop is set. A byte without it came from another
     * process allowed to trace this one (the pipe is open to every user
     * through /proc: wake_make): in the agent's own table the pipe is
     * read empty (it does not block), else it would wake every poll. */
    if (g_private && !__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE)) {
      char b[64];
      while (read(g_wake_r.fd, b, sizeof b) > 0) {
      }
    }
    return;
  }
  ms__debug("agent: the program closed the agent's wake pipe; the agent "
            "now also checks for stop every %d ms",
            WAKE_LOST_POLL_MS);
  __atomic_store_n(&g_wake_lost, 1, __ATOMIC_RELEASE);
}

static int bufs_map(void);

/* A deferred start's wait, on the thread: g_defer_ns, or less if stop or
 * ms_agent_start() comes first (each sets g_wakeup and wakes this futex).
 * Returns 1 if the thread is to make its socket now, 0 if stop took the
 * start back. */
static int deferred_wait(void) {
  uint64_t end = ms__now_mono_ns() + g_defer_ns;
  for (;;) {
    if (__atomic_load_n(&g_wakeup, __ATOMIC_ACQUIRE))
      break;
    uint64_t now = ms__now_mono_ns();
    if (now >= end)
      break;
    struct timespec ts = {(time_t)((end - now) / 1000000000ull),
                          (long)((end - now) % 1000000000ull)};
    syscall(SYS_futex, &g_wakeup, FUTEX_WAIT_PRIVATE, 0, &ts, NULL, 0);
  }
  int expect = PHASE_DEFERRING;
  return __atomic_compare_exchange_n(&g_phase, &expect, PHASE_SETTING, 0,
                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) &&
         !__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE);
}

/* ------------------------------------------------------------------------
 * The loop
 * ------------------------------------------------------------------------ */
static void *agent_main(void *arg) {
  (void)arg;
  struct pollfd pfd[2 + MAX_CLIENTS];
  int who[2 + MAX_CLIENTS];
  ms__prof_exclude_thread();
  /* Named by itself (prctl), not by its creator (pthread_setname_np
   * writes /proc/self/task/TID/comm): see wake_thread on /proc. */
  prctl(PR_SET_NAME, "memstats-agent", 0, 0, 0);
  if (__atomic_load_n(&g_phase, __ATOMIC_ACQUIRE) != PHASE_NOW) {
    if (!deferred_wait())
      return NULL;
    int r = bufs_map();
    if (r == 0)
      r = agent_setup();
    /* Set up (or failed): a start waiting for it goes on. */
    __atomic_store_n(&g_phase, PHASE_NOW, __ATOMIC_RELEASE);
    syscall(SYS_futex, &g_phase, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
    if (r != 0) {
      ms__debug("agent not started: %s", ms_strerror(r));
      agent_teardown();
      return NULL;
    }
  } else {
    g_setup_err = agent_setup();
    sem_post(&g_ready);
    if (g_setup_err != 0) {
      agent_teardown();
      return NULL;
    }
  }
  /* libgcc's unwinder, the profiler's fallback, is loaded here, off the
   * program's threads, once the process has lived on a while: a
   * short-lived one never loads it (profile/unwind.c). */
  uint64_t libgcc_at = ms__now_mono_ns() + MS__PROF_LIBGCC_AFTER_NS;
  while (!__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE)) {
    uint64_t now = ms__now_mono_ns();
    int n = 0;
    uint64_t next = now + IDLE_TIMEOUT_NS;
    if (libgcc_at != 0 && ms__prof_unwind_pending()) {
      if (libgcc_at <= now) {
        ms__prof_unwind_load();
        libgcc_at = 0;
      } else if (libgcc_at < next) {
        next = libgcc_at;
      }
    }
    if (!g_private && check_shared() != 0)
      break;
    take_reserve();
    if (g_accept_resume != 0 && g_accept_resume <= now)
      g_accept_resume = 0;
    if (g_accept_resume != 0 && g_accept_resume < next)
      next = g_accept_resume;
    /* A negative descriptor is skipped by poll(): slot 0 stays the wake
     * pipe and slot 1 the socket, whatever is watched. */
    pfd[n].fd = g_wake_r.fd;
    pfd[n].events = POLLIN;
    pfd[n++].revents = 0;
    pfd[n].fd = g_accept_resume != 0 ? -1 : g_listen.fd;
    pfd[n].events = POLLIN;
    pfd[n++].revents = 0;
    for (int i = 0; i < MAX_CLIENTS; i++) {
      client_t *c = &g_clients[i];
      if (c->fd.fd < 0 || !client_usable(c))
        continue;
      int busy = c->in_len > 0 || client_pending(c) || c->closing;
      uint64_t deadline =
          c->last_progress + (busy ? IO_TIMEOUT_NS : IDLE_TIMEOUT_NS);
      if (deadline <= now) {
        client_close(c);
        continue;
      }
      if (deadline < next)
        next = deadline;
      short ev = 0;
      if (!c->eof && !c->closing && c->in_len < IN_CAP &&
          OUT_CAP - c->out_len >= MS__AGENT_REPLY_MAX && c->prof == NULL)
        ev |= POLLIN;
      if (client_pending(c))
        ev |= POLLOUT;
      pfd[n].fd = c->fd.fd;
      pfd[n].events = ev;
      pfd[n].revents = 0;
      who[n++] = i;
    }
    int timeout = (int)((next - now) / 1000000ull) + 1;
    if (__atomic_load_n(&g_wake_lost, __ATOMIC_ACQUIRE) &&
        timeout > WAKE_LOST_POLL_MS)
      timeout = WAKE_LOST_POLL_MS;
    int r = poll(pfd, (nfds_t)n, timeout);
    if (r < 0)
      continue; /* EINTR: signals are blocked, but be safe */
    now = ms__now_mono_ns();
    if (pfd[0].revents)
      wake_read(pfd[0].revents);
    if (__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE))
      break;
    for (int k = 2; k < n; k++) {
      client_t *c = &g_clients[who[k]];
      if (c->fd.fd != pfd[k].fd)
        continue;
      if (pfd[k].revents & POLLNVAL) {
        client_usable(c); /* closed under us: the slot is given up */
        continue;
      }
      if (pfd[k].revents & (POLLIN | POLLHUP | POLLERR))
        client_read(c, now);
      if (client_pending(c) && client_flush(c, now) != 0) {
        client_close(c);
        continue;
      }
      /* Requests left waiting for output room can go now. */
      if (c->in_len > 0 && !c->closing && c->prof == NULL) {
        client_serve(c);
        if (client_flush(c, now) != 0) {
          client_close(c);
          continue;
        }
      }
      if ((c->eof || c->closing) && !client_pending(c))
        client_close(c);
    }
    if (pfd[1].revents & POLLIN)
      accept_clients(now);
    else if (pfd[1].revents & (POLLERR | POLLHUP))
      accept_back_off(now, EIO); /* not ours any more, or broken: the next
                                    round's check finds out which */
  }
  agent_teardown();
  return NULL;
}

/* ------------------------------------------------------------------------
 * Start, stop, exit, fork
 * ------------------------------------------------------------------------ */
/* Forgets the descriptors of the agent's table after fork() (the child
 * has the table of the thread that forked, not the agent's) or closes
 * them (they are in the program's table, which the child copied). */
static void child_drop_agent_fds(void) {
  ms__own_fd_t *all[4 + MAX_CLIENTS];
  int n = 0;
  all[n++] = &g_listen;
  all[n++] = &g_wake_r;
  all[n++] = &g_wake_w;
  all[n++] = &g_reserve;
  for (int i = 0; i < MAX_CLIENTS; i++)
    all[n++] = &g_clients[i].fd;
  /* Only what is set is written: a page of ours the child does not
   * write is one it never copies. */
  for (int i = 0; i < n; i++) {
    if (all[i]->fd < 0)
      continue;
    if (all[i]->private_table)
      all[i]->fd = -1;
    else
      ms__own_close(all[i]);
  }
}

static void release_bufs(void) {
  if (g_bufs != NULL)
    munmap(g_bufs, g_bufs_len);
  g_bufs = NULL;
}

static void unsafe_once(const char *dir, const char *why) {
  if (g_said_unsafe)
    return;
  g_said_unsafe = 1;
  /* The fix depends on the cause: a chmod on a symbolic link would change
   * the directory it points to, and another user's directory is not ours
   * to chmod. */
  char fix[320];
  ms__sockdir_fix(dir, geteuid(), fix, sizeof fix);
  ms__debug("agent not started: %s (%s); %s", why, dir, fix);
}

/* ---- start_locked's steps ---- */

/* The environment's word on the agent: 0 if MEMSTATS_AGENT=0 says not to
 * start it, else 1, with the minimum interval between two reads
 * (MEMSTATS_MIN_INTERVAL_MS) and a deferred start's delay
 * (MEMSTATS_AGENT_DELAY_MS) set and the cached snapshot dropped. */
static int settings_read(void) {
  const char *env = ms__env("MEMSTATS_AGENT");
  uint64_t v;
  if (env != NULL && ms__parse_uint(env, UINT64_MAX, &v) == 0 && v == 0) {
    ms__debug("agent not started: MEMSTATS_AGENT=0");
    return 0;
  }
  env = ms__env("MEMSTATS_MIN_INTERVAL_MS");
  v = 100;
  if (env != NULL && ms__parse_uint(env, 24ull * 3600 * 1000, &v) != 0) {
    ms__debug("MEMSTATS_MIN_INTERVAL_MS=%.32s is not a number of "
              "milliseconds; using 100",
              env);
    v = 100;
  }
  ms__agent_set_interval(v * 1000000ull);
  ms__agent_cache_reset();
  env = ms__env("MEMSTATS_AGENT_DELAY_MS");
  v = MS__AGENT_DEFER_NS / 1000000ull;
  if (env != NULL && ms__parse_uint(env, 3600ull * 1000, &v) != 0) {
    ms__debug("MEMSTATS_AGENT_DELAY_MS=%.32s is not a number of "
              "milliseconds up to an hour; using %llu",
              env, (unsigned long long)(MS__AGENT_DEFER_NS / 1000000ull));
    v = MS__AGENT_DEFER_NS / 1000000ull;
  }
  g_defer_ns = v * 1000000ull;
  return 1;
}

/* The socket directory, made safe, and the socket's path in g_path.
 * Returns 0, or ms__sockdir_*'s code or MS_EINVAL (g_path then empty). */
static int socket_path_make(void) {
  char dir[sizeof g_path];
  const char *why = "unknown";
  int r = ms__sockdir_path(dir, sizeof dir);
  if (r != 0) {
    ms__debug("agent not started: socket directory path too long");
    return r;
  }
  r = ms__sockdir_prepare(dir, &why);
  if (r != 0) {
    unsafe_once(dir, why);
    return r;
  }
  int n = snprintf(g_path, sizeof g_path, "%s/%d.sock", dir, (int)getpid());
  if (n < 0 || (size_t)n >= sizeof g_path) {
    ms__debug("agent not started: socket path too long (%s)", dir);
    g_path[0] = '\0';
    return MS_EINVAL;
  }
  return 0;
}

/* The clients' buffers, mapped. Returns 0 or MS_ENOMEM. */
static int bufs_map(void) {
  g_bufs_len = (size_t)MAX_CLIENTS * (IN_CAP + OUT_CAP);
  g_bufs = mmap(NULL, g_bufs_len, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (g_bufs == MAP_FAILED) {
    g_bufs = NULL;
    return MS_ENOMEM;
  }
  /* A fork child has no use for them (its agent maps its own): not
   * copied, fork has fewer pages to share. */
  madvise(g_bufs, g_bufs_len, MADV_DONTFORK);
  for (int i = 0; i < MAX_CLIENTS; i++) {
    g_clients[i].in = g_bufs + (size_t)i * (IN_CAP + OUT_CAP);
    g_clients[i].out = g_clients[i].in + IN_CAP;
  }
  return 0;
}

/* Every descriptor slot empty, before the thread starts (a fork child's
 * handler reads them, a deferred start's included). */
static void slots_reset(void) {
  for (int i = 0; i < MAX_CLIENTS; i++)
    g_clients[i].fd.fd = -1;
  g_listen.fd = g_wake_r.fd = g_wake_w.fd = g_reserve.fd = -1;
  g_accept_resume = g_accept_backoff = 0;
  __atomic_store_n(&g_wake_lost, 0, __ATOMIC_RELEASE);
}

/* Creates the thread and waits until it has made its socket. Returns 0,
 * or a negative code: the thread's setup error (the thread then joined),
 * MS_ENOMEM where a limit leaves no room for a thread, or another
 * failure's -errno. */
static int thread_start(void) {
  int deferred = __atomic_load_n(&g_phase, __ATOMIC_RELAXED) != PHASE_NOW;
  if (!deferred && sem_init(&g_ready, 0, 0) != 0)
    return -errno;
  /* The thread inherits the creator's signal mask: block everything so
   * the program's signals keep going to the program's threads. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  __atomic_store_n(&g_stop, 0, __ATOMIC_RELEASE);
  int r = ms__agent_thread_create(&g_thread, agent_main, NULL);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (r == EAGAIN) {
    /* Not "busy, try again": a limit leaves no room for the thread. */
    ms__debug("agent not started: cannot create its thread: the process's "
              "address-space limit (RLIMIT_AS, ulimit -v) has no room for "
              "its stack, or its user is at the thread limit "
              "(RLIMIT_NPROC, ulimit -u)");
    if (!deferred)
      sem_destroy(&g_ready);
    return MS_ENOMEM;
  }
  if (r != 0) {
    if (!deferred)
      sem_destroy(&g_ready);
    return -r;
  }
  if (deferred)
    return 0;
  while (sem_wait(&g_ready) != 0 && errno == EINTR) {
  }
  sem_destroy(&g_ready);
  r = g_setup_err;
  if (r != 0)
    pthread_join(g_thread, NULL);
  return r;
}

/* Starts the agent, under g_lock. Returns 0 (also when the environment
 * says not to start it), or a negative code with nothing left behind. */
static int start_locked(int deferred) {
  __atomic_store_n(&g_fork_pending, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&g_phase, PHASE_NOW, __ATOMIC_RELAXED);
  if (!settings_read())
    return 0;
  if (g_defer_ns == 0)
    deferred = 0; /* MEMSTATS_AGENT_DELAY_MS=0: the socket before main() */
  int r = socket_path_make();
  if (r != 0)
    return r;
  slots_reset();
  /* Deferred: the thread maps its buffers when it makes its socket. */
  r = deferred ? 0 : bufs_map();
  if (r != 0) {
    g_path[0] = '\0';
    return r;
  }
  __atomic_store_n(&g_wakeup, 0, __ATOMIC_RELAXED);
  if (deferred)
    __atomic_store_n(&g_phase, PHASE_DEFERRING, __ATOMIC_RELEASE);
  r = thread_start();
  if (r != 0) {
    forget_after_join();
    g_path[0] = '\0';
    release_bufs();
    return r;
  }
  g_running = 1;
  return 0;
}

/* A connection to the agent's socket, which the thread watches (closed
 * at once). Returns 0 if it connected, else socket's or connect's negative
 * errno. */
static int wake_connect(void) {
  struct sockaddr_un sa;
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  memcpy(sa.sun_path, g_path, sizeof sa.sun_path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -errno;
  int r = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0 ? 0 : -errno;
  close(fd);
  return r;
}

/* Wakes the thread for stop. With a table of its own: a connection to
 * its socket, or, when that fails (the path removed, its queue full, or
 * the program now another user than the directory's owner), a byte into
 * the wake pipe opened again through /proc, or else copied from the
 * agent's table with a pidfd (no /proc: a chroot). Not /proc first:
 * each task entry of /proc looked up costs a walk of /proc's dentries
 * when the thread is reaped, which is most of what a process that runs
 * for a millisecond pays for the agent. In the program's
 * table: a byte into the wake pipe's write end, or, when the program has
 * closed the pipe, the connection. A thread not woken at all still sees
 * the stop flag at its next timeout (stop_locked wakes it again).
 * Returns how it was woken (for MEMSTATS_DEBUG; "" the usual way), or
 * NULL if no wake reached it. */
static const char *wake_thread(void) {
  if (g_wake_w.private_table) {
    if (wake_connect() == 0)
      return ""; /* the usual way */
    if (wake_write(wake_open()) == 0)
      return "its wake pipe opened through /proc";
    if (wake_write(wake_pidfd()) == 0)
      return "its wake pipe taken with pidfd_getfd";
    return NULL;
  }
  int woke = 0;
  if (ms__own_same(&g_wake_w)) {
    ssize_t w = write(g_wake_w.fd, "x", 1);
    woke = w == 1 || (w < 0 && errno == EAGAIN);
  }
  if (woke && !__atomic_load_n(&g_wake_lost, __ATOMIC_ACQUIRE))
    return ""; /* the usual way */
  /* Else the thread looks at the stop flag every WAKE_LOST_POLL_MS. */
  if (wake_connect() == 0)
    return "a connection to its socket";
  return woke ? "its wake pipe" : NULL;
}

/* wake_thread, saying under MEMSTATS_DEBUG=1 how the thread was woken
 * when it was not the usual way, or that it was not (the first time only:
 * stop_locked tries each second). */
static void wake_for_stop(int *said) {
  const char *how = wake_thread();
  if (how != NULL && how[0] != '\0' && !(*said & 1)) {
    ms__debug("agent: stop woke the agent thread through %s", how);
    *said |= 1;
  } else if (how == NULL && !(*said & 2)) {
    ms__debug("agent: stop could not wake the agent thread; it stops at its "
              "next timeout");
    *said |= 2;
  }
}

/* Stops the thread; with a deadline (at exit) it gives up waiting rather
 * than hang the program's exit. */
static void stop_locked(int at_exit) {
  if (!g_running)
    return;
  int said = 0;
  __atomic_store_n(&g_stop, 1, __ATOMIC_RELEASE);
  int expect = PHASE_DEFERRING;
  if (__atomic_compare_exchange_n(&g_phase, &expect, PHASE_STOPPED, 0,
                                  __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    /* A deferred start not yet begun: no socket, no buffers. At exit the
     * thread, asleep, ends with the process; else it is woken and
     * joined (it returns at once). */
    g_path[0] = '\0';
    if (!at_exit) {
      __atomic_store_n(&g_wakeup, 1, __ATOMIC_RELEASE);
      syscall(SYS_futex, &g_wakeup, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
      pthread_join(g_thread, NULL);
      forget_after_join();
    }
    g_running = 0;
    return;
  }
  wake_for_stop(&said);
  if (at_exit) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 1;
    if (pthread_timedjoin_np(g_thread, NULL, &ts) != 0) {
      /* The thread is stuck; the process is ending anyway. Leave its
       * fds alone, but take the socket off the filesystem. */
      if (g_path[0] != '\0')
        unlink(g_path);
      g_path[0] = '\0';
      g_running = 0;
      return;
    }
  } else {
    /* Woken again each second, should a wake have been missed. */
    for (;;) {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      ts.tv_sec += 1;
      if (pthread_timedjoin_np(g_thread, NULL, &ts) != ETIMEDOUT)
        break;
      wake_for_stop(&said);
    }
  }
  /* The thread closed its own descriptors on its way out. */
  if (g_path[0] != '\0')
    unlink(g_path);
  g_path[0] = '\0';
  forget_after_join();
  release_bufs();
  g_running = 0;
}

/* The agent's part of a normal exit (exit() or a return from main; for
 * _exit(), see ms__agent_quick_exit; a fatal signal runs no code of ours):
 * the socket goes away, and if `memtop run` asked for it
 * (MEMSTATS_FINAL_FD, final_send.c) the final snapshot is sent, after the
 * thread has stopped so that it is the last word. */
MS__FORK_TEXT static void at_exit(void) {
  /* No agent, none starting (a fork child that ends before its agent
   * starts: most of a shell's): nothing to stop, and no lock taken (its
   * code is more pages such a child would fault in). A start in progress
   * on another thread has set the path before its thread runs. */
  if (!__atomic_load_n(&g_running, __ATOMIC_ACQUIRE) && g_path[0] == '\0') {
    ms__final_write();
    return;
  }
  /* exit() may run while another thread holds the lock (or from a
   * signal handler): then only take the socket away. */
  if (pthread_mutex_trylock(&g_lock) != 0) {
    if (g_path[0] != '\0')
      unlink(g_path);
    ms__final_write();
    return;
  }
  stop_locked(1);
  pthread_mutex_unlock(&g_lock);
  ms__final_write();
}

MS__FORK_TEXT void ms__agent_quick_exit(void) {
  if (pthread_mutex_trylock(&g_lock) == 0) {
    if (g_running && g_path[0] != '\0' &&
        __atomic_load_n(&g_phase, __ATOMIC_ACQUIRE) != PHASE_DEFERRING)
      unlink(g_path);
    pthread_mutex_unlock(&g_lock);
  } else if (g_path[0] != '\0') {
    unlink(g_path);
  }
  ms__final_write();
}

MS__FORK_TEXT static void fork_prepare(void) {
  pthread_mutex_lock(&g_lock);
}

MS__FORK_TEXT static void fork_parent(void) {
  pthread_mutex_unlock(&g_lock);
}

/* The child has no agent thread, and the listening socket is the
 * parent's: the inherited descriptors are dropped (never the parent's
 * path unlinked), and the child's own agent is noted as to be started.
 * Only async-signal-safe work here, as in any code of a multithreaded
 * program's child before exec: plain stores, fstat and close. Starting
 * the thread here (pthread_create, mmap, mkdir, bind, with a wait for the
 * thread) is what POSIX does not allow, and cost every fork about a
 * millisecond, short-lived children (a shell's subshells, make's) most of
 * all. The start is ms__agent_after_fork()'s: the preload's first
 * allocation a while after the fork, or ms_agent_start() in the child. */
MS__FORK_TEXT static void fork_child(void) {
  g_lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
  if (!g_running)
    return;
  g_running = 0;
  g_path[0] = '\0';
  /* The numbers of the agent's own table are not the child's, but nothing
   * reads them before a start sets them again: left as they are, their
   * page is not copied. Those in the program's table are closed. */
  if (!g_private &&
      __atomic_load_n(&g_phase, __ATOMIC_ACQUIRE) != PHASE_DEFERRING)
    child_drop_agent_fds(); /* a deferred start has taken none yet */
  /* Not in the child (MADV_DONTFORK): its agent maps its own. The cached
   * snapshot, the parent's, is never served here (request.c checks its
   * PID), and a start forgets it. */
  g_bufs = NULL;
  __atomic_store_n(&g_fork_pending, 1, __ATOMIC_RELAXED);
}

MS__FORK_TEXT int ms__agent_fork_pending(void) {
  return __atomic_load_n(&g_fork_pending, __ATOMIC_RELAXED);
}

void ms__agent_after_fork(void) {
  if (!__atomic_load_n(&g_fork_pending, __ATOMIC_RELAXED))
    return;
  pthread_mutex_lock(&g_lock);
  if (__atomic_exchange_n(&g_fork_pending, 0, __ATOMIC_RELAXED) && !g_running) {
    int r = start_locked(0);
    if (r != 0)
      ms__debug("agent: the child's agent did not start: %s", ms_strerror(r));
  }
  pthread_mutex_unlock(&g_lock);
}

/* A deferred start asked for now (ms_agent_start() while the thread
 * waits): woken, and waited for until its socket is made, or for 5 s. */
static void deferred_hurry(void) {
  __atomic_store_n(&g_wakeup, 1, __ATOMIC_RELEASE);
  syscall(SYS_futex, &g_wakeup, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
  uint64_t end = ms__now_mono_ns() + 5000000000ull;
  for (;;) {
    int ph = __atomic_load_n(&g_phase, __ATOMIC_ACQUIRE);
    uint64_t now = ms__now_mono_ns();
    if ((ph != PHASE_DEFERRING && ph != PHASE_SETTING) || now >= end)
      return;
    struct timespec ts = {(time_t)((end - now) / 1000000000ull),
                          (long)((end - now) % 1000000000ull)};
    syscall(SYS_futex, &g_phase, FUTEX_WAIT_PRIVATE, ph, &ts, NULL, 0);
  }
}

static int agent_start(int deferred) {
  pthread_mutex_lock(&g_lock);
  int r;
  if (g_running) {
    if (!deferred)
      deferred_hurry();
    r = MS_EEXIST;
    goto out;
  }
  if (!g_hooks_installed) {
    /* Once per program image: an exec'd program starts afresh. */
    ms__final_init();
    if (atexit(at_exit) != 0 ||
        pthread_atfork(fork_prepare, fork_parent, fork_child) != 0) {
      r = MS_ENOMEM;
      goto out;
    }
    g_hooks_installed = 1;
  }
  r = start_locked(deferred);
out:
  pthread_mutex_unlock(&g_lock);
  return r;
}

int ms_agent_start(void) {
  return agent_start(0);
}

int ms__agent_start_deferred(void) {
  return agent_start(1);
}

int ms_agent_stop(void) {
  pthread_mutex_lock(&g_lock);
  stop_locked(0);
  pthread_mutex_unlock(&g_lock);
  return 0;
}

uint64_t ms__agent_cpu_ns(void) {
  uint64_t ns = 0;
  pthread_mutex_lock(&g_lock);
  clockid_t cid;
  struct timespec ts;
  if (g_running && pthread_getcpuclockid(g_thread, &cid) == 0 &&
      clock_gettime(cid, &ts) == 0)
    ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
  pthread_mutex_unlock(&g_lock);
  return ns;
}
