/*
 * fds.c - the agent's descriptors, and how it keeps them its own.
 *
 * Programs close descriptors they did not open (closefrom(3),
 * close_range, a shell's `exec 4<file`, dup2 over a number), and daemons
 * close 0-2 and expect the next open() to return 0. A descriptor number
 * is only a name in a table the program owns: once the program has
 * closed or replaced one of ours, the number is the program's, and a
 * read, accept, write or close on it harms the program (its data read
 * away, its TCP clients answered by us, its files closed under it).
 *
 * So the agent thread takes a descriptor table of its own
 * (unshare(CLONE_FILES)) and closes there every descriptor it inherited
 * but its own: what the program does to its table no longer reaches the
 * agent's, what the agent opens (its socket, its clients, /proc files read
 * for a snapshot) never takes a number the program was about to get, and
 * the agent holds no reference to the program's files (a pipe the
 * program closes still reaches EOF). The locks of the program's files are
 * safe: POSIX record locks belong to the table they were taken through,
 * so a close in ours releases none of them. Every descriptor of the
 * agent's table is then provably its own, and is used without checks.
 *
 * Nothing of the agent's is in the program's table then, not even the
 * pipe that wakes it (ms_agent_stop(), exit, from the program's threads):
 * they connect to its socket instead (agent.c, wake_thread).
 *
 * Where the table cannot be unshared (a seccomp filter may forbid
 * unshare, as container runtimes' do; close_range needs Linux 5.9), every
 * descriptor of the agent stays in the program's table: each is placed at
 * the top of it (below RLIMIT_NOFILE and 1024, see dup_high for why
 * there), and its identity (device and inode, which no other open file
 * shares) is checked before each use; one the program has closed or
 * replaced is abandoned, never closed (see agent.c for the check-then-use
 * window that remains in that mode).
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent/agent.h"

/* How far below the top of the table (RLIMIT_NOFILE, at most 1024)
 * descriptors placed high start: room for every client and the rest.
 * Not higher than 1024, so that the table of a program with a large
 * limit does not grow to millions of entries for our sake. */
#define HIGH_TOP 1024
#define HIGH_ROOM 64

int ms__own_same(const ms__own_fd_t *o) {
  struct stat st;
  if (o->fd < 0)
    return 0;
  return fstat(o->fd, &st) == 0 && st.st_dev == o->dev && st.st_ino == o->ino;
}

int ms__own_ok(const ms__own_fd_t *o) {
  if (o->fd < 0)
    return 0;
  return o->private_table ? 1 : ms__own_same(o);
}

/* The top of the numbers a descriptor placed high takes: min(RLIMIT_NOFILE,
 * 1024). */
static int high_top(void) {
  struct rlimit rl;
  rlim_t top = HIGH_TOP;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < top)
    top = rl.rlim_cur;
  return (int)top;
}

/* A copy of fd at the highest free number in [top - HIGH_ROOM, top),
 * searched downwards, or -1 (no descriptor: none was free). Shells take their
 * own numbers from 10 up (dash, zsh and ksh's saved descriptors, bash's {var}
 * redirections) and bash also from 255 down (its script, its saved
 * descriptors); scripts name 3 to 9 by convention (all POSIX promises). The top
 * of the table is what none of them takes unless a script names that very
 * number; the lowest free number at or above a base (F_DUPFD alone) was 960 or
 * 961 at the usual limit of 1024, which a script had chosen. */
static int dup_high(int fd) {
  int top = high_top();
  int low = top > HIGH_ROOM + 3 ? top - HIGH_ROOM : 3;
  for (int n = top - 1; n >= low; n--) {
    if (fcntl(n, F_GETFD) != -1 || errno != EBADF)
      continue; /* taken */
    int d = fcntl(fd, F_DUPFD_CLOEXEC, n);
    if (d >= 0 && d < top)
      return d;
    if (d >= 0)
      close(d); /* n was taken meanwhile, and everything up to the top */
  }
  return -1;
}

int ms__own_take(ms__own_fd_t *o, int fd, int private_table) {
  struct stat st;
  o->fd = -1;
  if (fd < 0)
    return MS_EINVAL;
  if (!private_table) {
    /* Just made by us, so the number is ours to close. If the table is
     * full up there, it stays where it is. */
    int high = dup_high(fd);
    if (high >= 0) {
      close(fd);
      fd = high;
    }
  }
  if (fstat(fd, &st) != 0) {
    int r = -errno;
    close(fd);
    return r;
  }
  o->fd = fd;
  o->dev = st.st_dev;
  o->ino = st.st_ino;
  o->private_table = private_table;
  return fd;
}

void ms__own_close(ms__own_fd_t *o) {
  if (ms__own_ok(o))
    close(o->fd);
  o->fd = -1;
}

#ifndef CLOSE_RANGE_UNSHARE
#define CLOSE_RANGE_UNSHARE (1u << 1)
#endif

/* close_range(2) over [lo, hi], or -1 with errno. */
static int close_span(unsigned lo, unsigned hi, unsigned flags) {
#ifdef SYS_close_range
  return (int)syscall(SYS_close_range, lo, hi, flags);
#else
  (void)lo;
  (void)hi;
  (void)flags;
  errno = ENOSYS;
  return -1;
#endif
}

int ms__fds_go_private(const int *keep, int n) {
  unsigned top = 0;
  for (int i = 0; i < n; i++)
    if (keep[i] >= 0 && (unsigned)keep[i] + 1 > top)
      top = (unsigned)keep[i] + 1;
  /* close_range() with CLOSE_RANGE_UNSHARE gives the thread a table of
   * its own made of the numbers below top only (not a copy of a large
   * one to be emptied) in one call; container runtimes' seccomp filters
   * that forbid unshare(2) allow it. Otherwise unshare(2), and only where
   * close_range can then empty the new table without reading /proc: made
   * sure of first, since a table unshared cannot be shared again. The
   * kernel unshares only a table that another task shares, and closes in
   * place otherwise: the thread that started the agent waits for this
   * call (agent.c) with the same table, so it is always shared here. */
  if (close_span(top, ~0u, CLOSE_RANGE_UNSHARE) != 0) {
    if (close_span(~0u, ~0u, 0) != 0)
      return -errno;
    if (unshare(CLONE_FILES) != 0)
      return -errno;
    close_span(top, ~0u, 0);
  }
  /* Every number below top but those in keep (ascending) is closed: they
   * are the program's files, which this table must not hold on to. */
  unsigned lo = 0;
  for (int i = 0; i < n; i++) {
    if (keep[i] < 0 || (unsigned)keep[i] < lo)
      continue;
    if ((unsigned)keep[i] > lo)
      close_span(lo, (unsigned)keep[i] - 1, 0);
    lo = (unsigned)keep[i] + 1;
  }
  return 0;
}
