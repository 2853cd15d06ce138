/*
 * final_send.c - the final snapshot, the library's side: what `memtop
 * run` learns when its command exits (memtop's side, which receives it,
 * is src/targets/final_recv.c).
 *
 * memtop polls its command's socket at the -d rate, so whatever it last
 * read can be up to a whole interval old when the command ends, and a
 * short command may end before the first poll. To show the real final
 * figures, `memtop run` hands the command one end of an AF_UNIX stream
 * socket pair and says where it is in the environment:
 *
 *   MEMSTATS_FINAL_FD=N     the socket's descriptor number in the command
 *   MEMSTATS_FINAL_PPID=P   only a process whose parent is P writes (memtop
 *                           sets its own PID: its command is its child)
 *   MEMSTATS_FINAL_PID=P    only the process P writes (for launchers that
 *                           know the PID before the exec; memtop cannot,
 *                           since libuv forks and execs in one call)
 *
 * At normal exit (exit() or a return from main: the agent's atexit
 * handler) the library takes one last snapshot and writes it to fd N as
 * one ordinary snapshot frame of the wire protocol. The filters matter
 * because children inherit the descriptor and the environment: only the
 * command itself writes, not what it forks or runs. A shell script that
 * execs its program keeps its PID, its parent and the descriptor, and an
 * exec runs no atexit handlers, so only the final image's exit writes.
 *
 * _exit() and _Exit() run no atexit handlers: the preload interposes them
 * and writes from there (ms__agent_quick_exit, src/preload/preload.c),
 * except in a vfork() child. Nothing is written on a fatal signal (no code
 * of ours runs then), nor on _exit() in a program that links the library
 * without the preload; memtop falls back to the last snapshot it polled,
 * and says so.
 *
 * Programs call exit() and _exit() from signal handlers, and a handler may
 * have interrupted the allocator (holding its locks) or an update of our
 * own counters on the same thread. Taking the snapshot then must not wait
 * for either, or the program would never end: from inside an update of the
 * counters nothing is sent (ms__engine_busy_here), and when the thread's
 * signal mask says it may be in a handler no allocator is sampled (the
 * providers' last samples are used, MS__READ_CACHED).
 *
 * The rules of the agent apply: no stdio, no malloc (the buffers are
 * static), send(MSG_NOSIGNAL) so that a reader that went away is no
 * SIGPIPE, a bounded wait so that exit never hangs on a reader that stops
 * reading, and no write at all unless the descriptor is still the socket
 * that was there at start (the program may have closed it and opened
 * something else under the same number).
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "common/env.h"
#include "common/procfs.h"
#include "compose/snapshot.h"
#include "core/engine.h"
#include "core/util.h"
#include "providers/providers.h"

/* How long exit may wait for the reader to take the frame, in all. */
#define FINAL_SEND_TIMEOUT_MS 1000
/* How long exit waits for the snapshot lock held by another thread. */
#define FINAL_LOCK_TRIES 200
#define FINAL_LOCK_WAIT_NS 1000000L

static struct {
  int fd;    /* -1: no final snapshot wanted */
  int pid;   /* 0: any */
  int ppid;  /* 0: any */
  dev_t dev; /* the socket that was there at start */
  ino_t ino;
} g_final = {-1, 0, 0, 0, 0};

static ms_snapshot_t g_final_snap;
static uint8_t g_final_buf[MS__WIRE_SNAPSHOT_MAX];

void ms__final_setup(const char *fd_s, const char *pid_s, const char *ppid_s) {
  uint64_t v;
  struct stat st;
  int fd;

  g_final.fd = -1;
  g_final.pid = g_final.ppid = 0;
  if (fd_s == NULL || fd_s[0] == '\0')
    return;
  if (ms__parse_uint(fd_s, 1u << 30, &v) != 0) {
    ms__debug("MEMSTATS_FINAL_FD=%.32s is not a descriptor number; no "
              "final snapshot",
              fd_s);
    return;
  }
  /* Only a socket: a regular file or a pipe under that number is not the
   * one memtop made, and a byte of ours must never land in it. */
  if (fstat((int)v, &st) != 0 || !S_ISSOCK(st.st_mode)) {
    ms__debug("MEMSTATS_FINAL_FD=%d is not an open socket; no final "
              "snapshot",
              (int)v);
    return;
  }
  fd = (int)v;
  g_final.dev = st.st_dev;
  g_final.ino = st.st_ino;
  if (pid_s != NULL && pid_s[0] != '\0') {
    if (ms__parse_uint(pid_s, INT32_MAX, &v) != 0 || v == 0) {
      ms__debug("MEMSTATS_FINAL_PID=%.32s is not a PID; no final snapshot",
                pid_s);
      return;
    }
    g_final.pid = (int)v;
  }
  if (ppid_s != NULL && ppid_s[0] != '\0') {
    if (ms__parse_uint(ppid_s, INT32_MAX, &v) != 0 || v == 0) {
      ms__debug("MEMSTATS_FINAL_PPID=%.32s is not a PID; no final snapshot",
                ppid_s);
      return;
    }
    g_final.ppid = (int)v;
  }
  g_final.fd = fd;
}

/* The signal mask of the thread that started the agent (the program's
 * main thread, as a rule), for ms__maybe_in_signal_handler(). */
static sigset_t g_start_mask;
static int g_have_start_mask;

void ms__final_init(void) {
  ms__final_setup(ms__env("MEMSTATS_FINAL_FD"), ms__env("MEMSTATS_FINAL_PID"),
                  ms__env("MEMSTATS_FINAL_PPID"));
  if (sigprocmask(SIG_BLOCK, NULL, &g_start_mask) == 0)
    g_have_start_mask = 1;
}

int ms__maybe_in_signal_handler(void) {
  sigset_t cur;
  if (sigprocmask(SIG_BLOCK, NULL, &cur) != 0)
    return 1;
  for (int sig = 1; sig < NSIG; sig++)
    if (sigismember(&cur, sig) == 1 &&
        (!g_have_start_mask || sigismember(&g_start_mask, sig) != 1))
      return 1;
  return 0;
}

/* Whether the descriptor is still the socket it was at start. */
static int final_fd_same(void) {
  struct stat st;
  return fstat(g_final.fd, &st) == 0 && S_ISSOCK(st.st_mode) &&
         st.st_dev == g_final.dev && st.st_ino == g_final.ino;
}

/* Nonzero if this process is the one asked for, and the descriptor is
 * still the socket it was at start. */
static int final_wanted(void) {
  if (g_final.fd < 0)
    return 0;
  if (g_final.pid != 0 && g_final.pid != (int)getpid())
    return 0;
  if (g_final.ppid != 0 && g_final.ppid != (int)getppid())
    return 0;
  return final_fd_same();
}

/* Waits for the snapshot lock to be free, a bounded time. A thread that
 * holds it forever (the agent thread stuck in a provider, or exit() called
 * from a signal handler in the middle of a read) must not hang the
 * program's exit: then there is no final snapshot. Under the lock, the
 * providers' cached samples are dropped: they may be a whole cadence old
 * (a second for glibc), from before the program's last allocations. */
static int lock_free_soon(int expire) {
  struct timespec ts = {0, FINAL_LOCK_WAIT_NS};

  for (int i = 0; i < FINAL_LOCK_TRIES; i++) {
    if (ms__read_trylock() == 0) {
      if (expire)
        ms__providers_expire();
      ms__read_unlock();
      return 1;
    }
    nanosleep(&ts, NULL);
  }
  return 0;
}

/* Sends all of buf, waiting at most FINAL_SEND_TIMEOUT_MS for room.
 * Returns 0, MS_ETIMEDOUT, -EBADF if the descriptor is not the socket any
 * more, or the failed call's negative errno. The descriptor is the program's
 * table's: after each wait (another thread of the program may have closed or
 * replaced it meanwhile: poll says POLLNVAL, or its identity changed) it is
 * checked again before the next send, and given up if it is not the socket any
 * more. */
static int send_all(int fd, const uint8_t *buf, size_t len) {
  uint64_t deadline = ms__now_mono_ns() + FINAL_SEND_TIMEOUT_MS * 1000000ull;
  size_t off = 0;

  while (off < len) {
    ssize_t n = send(fd, buf + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      off += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      uint64_t now = ms__now_mono_ns();
      if (now >= deadline)
        return MS_ETIMEDOUT;
      struct pollfd p = {fd, POLLOUT, 0};
      int r = poll(&p, 1, (int)((deadline - now) / 1000000ull) + 1);
      if (r < 0 && errno != EINTR)
        return -errno;
      if ((r > 0 && (p.revents & POLLNVAL)) || !final_fd_same())
        return -EBADF;
      continue;
    }
    /* EPIPE (memtop went away), ENOTSOCK...: nothing to be done. */
    return n < 0 ? -errno : -EPIPE;
  }
  return 0;
}

static int final_write_now(void) {
  int saved = errno;
  int r = MS_ENOENT;
  int cached = 0;

  if (!final_wanted())
    goto out;
  r = MS_EAGAIN;
  /* Called from a signal handler that interrupted an update of the
   * engine on this thread (_exit() is async-signal-safe, and a program may
   * call it there): a snapshot would wait for that update forever. */
  if (ms__engine_busy_here()) {
    ms__debug("final snapshot: exit inside an update of the counters (a "
              "signal handler); none sent");
    goto out;
  }
  /* Maybe in a signal handler that interrupted the allocator (exit() and
   * _exit() both come here, and programs call them from handlers): then
   * nothing that takes the allocator's locks or allocates may run, so the
   * providers are not sampled again (MS__READ_CACHED): their last samples
   * are used, marked estimated where the tracked heap moved since. */
  cached = ms__maybe_in_signal_handler();
  if (!lock_free_soon(!cached))
    goto out;
  r = ms__snapshot_read_opts(&g_final_snap, sizeof g_final_snap,
                             cached ? MS__READ_CACHED : 0);
  if (r != 0)
    goto out;
  g_final_snap.age_ns = 0;
  ms__wire_writer_t w;
  ms__wire_writer_init(&w, g_final_buf, sizeof g_final_buf);
  r = ms__wire_encode_snapshot(&w, &g_final_snap, NULL);
  if (r != 0)
    goto out;
  r = send_all(g_final.fd, g_final_buf, w.len);
  /* One frame per process: a second exit path (the handler run twice)
   * writes nothing more. */
  g_final.fd = -1;
out:
  if (r != 0 && r != MS_ENOENT)
    ms__debug("final snapshot not sent: %s", ms_strerror(r));
  errno = saved;
  return r;
}

/* Not asked for (nearly every process, and every fork child of a shell
 * or make as it ends): one load, from the fork section's text, and
 * nothing more touched, errno included. */
MS__FORK_TEXT int ms__final_write(void) {
  if (g_final.fd < 0)
    return MS_ENOENT;
  return final_write_now();
}
