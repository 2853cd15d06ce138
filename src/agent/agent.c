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
 * A client that hangs is closed after a timeout; when all slots are taken,
 * the least recently active idle client makes room, so a burst of silent
 * connections cannot lock out memtop for long. *
 * At normal exit (the atexit handler below) the agent also sends the final
 * snapshot that `memtop run` asks for with MEMSTATS_FINAL_FD (final.c).
 * On _exit() or a fatal signal nothing of ours runs, and nothing is sent:
 * memtop then shows the last snapshot it polled, and says so.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "core/engine.h"

#define MAX_CLIENTS 32
#define ACCEPT_BURST 64
/* A client with a partial request or an unsent reply must make progress
 * within this; an idle one may stay this long between requests. */
#define IO_TIMEOUT_NS (5ull * 1000000000ull)
#define IDLE_TIMEOUT_NS (300ull * 1000000000ull)
#define IN_CAP (MS__WIRE_HEADER + MS__WIRE_MAX_REQUEST)
#define OUT_CAP (2 * MS__AGENT_REPLY_MAX)

typedef struct client_s {
  int fd; /* -1: free slot */
  size_t in_len;
  size_t out_off, out_len;
  uint64_t last_progress; /* CLOCK_MONOTONIC */
  int eof;                /* the client will send no more */
  int closing;            /* close once the output is sent */
  uint8_t *in, *out;
} client_t;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_running;
static int g_stop; /* read by the thread, set by stop: atomics */
static pthread_t g_thread;
static int g_listen = -1;
static int g_wake[2] = {-1, -1};
static char g_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
static uint8_t *g_bufs;
static size_t g_bufs_len;
static client_t g_clients[MAX_CLIENTS];
static int g_hooks_installed;
static int g_said_unsafe;

/* ------------------------------------------------------------------------
 * Clients
 * ------------------------------------------------------------------------ */
static void client_close(client_t *c) {
  if (c->fd >= 0)
    close(c->fd);
  c->fd = -1;
}

/* Sends what is pending. Returns 0, or -1 if the client is gone. */
static int client_flush(client_t *c, uint64_t now) {
  while (c->out_off < c->out_len) {
    ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
                     MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      c->out_off += (size_t)n;
      c->last_progress = now;
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return 0;
    return -1;
  }
  c->out_off = c->out_len = 0;
  return 0;
}

/* Handles whatever whole requests are buffered, replying into out. */
static void client_serve(client_t *c) {
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
  if (used > 0) {
    memmove(c->in, c->in + used, c->in_len - used);
    c->in_len -= used;
  }
}

static void client_read(client_t *c, uint64_t now) {
  while (!c->eof && !c->closing && c->in_len < IN_CAP) {
    ssize_t n =
        recv(c->fd, c->in + c->in_len, IN_CAP - c->in_len, MSG_DONTWAIT);
    if (n > 0) {
      c->in_len += (size_t)n;
      c->last_progress = now;
      client_serve(c);
      if (OUT_CAP - c->out_len < MS__AGENT_REPLY_MAX)
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
    if (g_clients[i].fd < 0)
      return i;
    if (g_clients[i].out_len == g_clients[i].out_off &&
        (victim < 0 ||
         g_clients[i].last_progress < g_clients[victim].last_progress))
      victim = i;
  }
  if (victim >= 0)
    client_close(&g_clients[victim]);
  return victim;
}

static void accept_clients(uint64_t now) {
  for (int k = 0; k < ACCEPT_BURST; k++) {
    int fd = accept4(g_listen, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0)
      return; /* EAGAIN, or a transient error: poll again */
    int slot = pick_slot();
    if (slot < 0) {
      /* Every slot is mid-reply: say so in one non-blocking send. */
      uint8_t buf[MS__WIRE_SMALL_MAX];
      ms__wire_writer_t w;
      ms__wire_writer_init(&w, buf, sizeof buf);
      if (ms__wire_encode_error(&w, MS__MSG_REFUSED, MS_EAGAIN,
                                "the agent is busy: too many clients") == 0) {
        ssize_t n = send(fd, buf, w.len, MSG_NOSIGNAL | MSG_DONTWAIT);
        (void)n;
      }
      close(fd);
      continue;
    }
    client_t *c = &g_clients[slot];
    c->fd = fd;
    c->in_len = c->out_off = c->out_len = 0;
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
    if (cred.uid != geteuid() && cred.uid != 0) {
      char msg[160];
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
 * The loop
 * ------------------------------------------------------------------------ */
static void *agent_main(void *arg) {
  (void)arg;
  struct pollfd pfd[2 + MAX_CLIENTS];
  int who[2 + MAX_CLIENTS];
  while (!__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE)) {
    uint64_t now = ms__now_mono_ns();
    int n = 0;
    uint64_t next = now + IDLE_TIMEOUT_NS;
    pfd[n].fd = g_wake[0];
    pfd[n++].events = POLLIN;
    pfd[n].fd = g_listen;
    pfd[n++].events = POLLIN;
    for (int i = 0; i < MAX_CLIENTS; i++) {
      client_t *c = &g_clients[i];
      if (c->fd < 0)
        continue;
      int busy = c->in_len > 0 || c->out_len > c->out_off || c->closing;
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
          OUT_CAP - c->out_len >= MS__AGENT_REPLY_MAX)
        ev |= POLLIN;
      if (c->out_len > c->out_off)
        ev |= POLLOUT;
      pfd[n].fd = c->fd;
      pfd[n].events = ev;
      pfd[n].revents = 0;
      who[n++] = i;
    }
    int timeout = (int)((next - now) / 1000000ull) + 1;
    int r = poll(pfd, (nfds_t)n, timeout);
    if (r < 0)
      continue; /* EINTR: signals are blocked, but be safe */
    now = ms__now_mono_ns();
    if (pfd[0].revents) {
      char b[64];
      while (read(g_wake[0], b, sizeof b) > 0) {
      }
    }
    if (__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE))
      break;
    for (int k = 2; k < n; k++) {
      client_t *c = &g_clients[who[k]];
      if (c->fd != pfd[k].fd)
        continue;
      if (pfd[k].revents & (POLLIN | POLLHUP | POLLERR))
        client_read(c, now);
      if (c->out_len > c->out_off && client_flush(c, now) != 0) {
        client_close(c);
        continue;
      }
      /* Requests left waiting for output room can go now. */
      if (c->in_len > 0 && !c->closing) {
        client_serve(c);
        if (client_flush(c, now) != 0) {
          client_close(c);
          continue;
        }
      }
      if ((c->eof || c->closing) && c->out_len == c->out_off)
        client_close(c);
    }
    if (pfd[1].revents & POLLIN)
      accept_clients(now);
  }
  return NULL;
}

/* ------------------------------------------------------------------------
 * Start, stop, exit, fork
 * ------------------------------------------------------------------------ */
static void close_all_fds(void) {
  for (int i = 0; i < MAX_CLIENTS; i++)
    client_close(&g_clients[i]);
  if (g_listen >= 0)
    close(g_listen);
  if (g_wake[0] >= 0)
    close(g_wake[0]);
  if (g_wake[1] >= 0)
    close(g_wake[1]);
  g_listen = g_wake[0] = g_wake[1] = -1;
  if (g_bufs != NULL)
    munmap(g_bufs, g_bufs_len);
  g_bufs = NULL;
}

static void unsafe_once(const char *dir, const char *why) {
  if (g_said_unsafe)
    return;
  g_said_unsafe = 1;
  ms__debug("agent not started: %s (%s); fix it with: chmod 700 %s, or set "
            "MEMSTATS_DIR to a private directory",
            why, dir, dir);
}

static int start_locked(void) {
  const char *env = getenv("MEMSTATS_AGENT");
  uint64_t v;
  if (env != NULL && ms__parse_uint(env, UINT64_MAX, &v) == 0 && v == 0) {
    ms__debug("agent not started: MEMSTATS_AGENT=0");
    return 0;
  }
  env = getenv("MEMSTATS_MIN_INTERVAL_MS");
  v = 100;
  if (env != NULL && ms__parse_uint(env, 24ull * 3600 * 1000, &v) != 0) {
    ms__debug("MEMSTATS_MIN_INTERVAL_MS=%.32s is not a number of "
              "milliseconds; using 100",
              env);
    v = 100;
  }
  ms__agent_set_interval(v * 1000000ull);
  ms__agent_cache_reset();

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
  struct sockaddr_un sa;
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  int n = snprintf(sa.sun_path, sizeof sa.sun_path, "%s/%d.sock", dir,
                   (int)getpid());
  if (n < 0 || (size_t)n >= sizeof sa.sun_path) {
    ms__debug("agent not started: socket path too long (%s)", dir);
    return MS_EINVAL;
  }

  g_bufs_len = (size_t)MAX_CLIENTS * (IN_CAP + OUT_CAP);
  g_bufs = mmap(NULL, g_bufs_len, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (g_bufs == MAP_FAILED) {
    g_bufs = NULL;
    return MS_ENOMEM;
  }
  for (int i = 0; i < MAX_CLIENTS; i++) {
    g_clients[i].fd = -1;
    g_clients[i].in = g_bufs + (size_t)i * (IN_CAP + OUT_CAP);
    g_clients[i].out = g_clients[i].in + IN_CAP;
  }

  g_listen = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (g_listen < 0) {
    r = -errno;
    goto fail;
  }
  /* A socket left by a process that had our PID (or by our own program
   * before an exec) is in the way; anything else there is not ours. */
  struct stat st;
  if (lstat(sa.sun_path, &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      ms__debug("agent not started: %s exists and is not a socket",
                sa.sun_path);
      r = MS_EEXIST;
      goto fail;
    }
    unlink(sa.sun_path);
  }
  if (bind(g_listen, (struct sockaddr *)&sa, sizeof sa) != 0) {
    r = -errno;
    ms__debug("agent not started: bind %s: %s", sa.sun_path, strerror(errno));
    goto fail;
  }
  memcpy(g_path, sa.sun_path, sizeof g_path);
  /* The directory is 0700 already; this is the second lock on the door. */
  if (chmod(g_path, 0600) != 0 || listen(g_listen, SOMAXCONN) != 0) {
    r = -errno;
    goto fail;
  }
  if (pipe2(g_wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    r = -errno;
    g_wake[0] = g_wake[1] = -1;
    goto fail;
  }

  /* The thread inherits the creator's signal mask: block everything so
   * the program's signals keep going to the program's threads. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  __atomic_store_n(&g_stop, 0, __ATOMIC_RELEASE);
  r = pthread_create(&g_thread, NULL, agent_main, NULL);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (r != 0) {
    r = -r;
    goto fail;
  }
  pthread_setname_np(g_thread, "memstats-agent");
  g_running = 1;
  return 0;
fail:
  if (g_path[0] != '\0')
    unlink(g_path);
  g_path[0] = '\0';
  close_all_fds();
  return r;
}

/* Stops the thread; with a deadline (at exit) it gives up waiting rather
 * than hang the program's exit. */
static void stop_locked(int at_exit) {
  if (!g_running)
    return;
  __atomic_store_n(&g_stop, 1, __ATOMIC_RELEASE);
  ssize_t w = write(g_wake[1], "x", 1);
  (void)w;
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
    pthread_join(g_thread, NULL);
  }
  if (g_path[0] != '\0')
    unlink(g_path);
  g_path[0] = '\0';
  close_all_fds();
  g_running = 0;
}

/* The agent's part of a normal exit (exit() or a return from main; for
 * _exit(), see ms__agent_quick_exit; a fatal signal runs no code of ours):
 * the socket goes away, and if `memtop run` asked for it
 * (MEMSTATS_FINAL_FD, final.c) the final snapshot is sent, after the
 * thread has stopped so that it is the last word. */
static void at_exit(void) {
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

void ms__agent_quick_exit(void) {
  if (pthread_mutex_trylock(&g_lock) == 0) {
    if (g_running && g_path[0] != '\0')
      unlink(g_path);
    pthread_mutex_unlock(&g_lock);
  } else if (g_path[0] != '\0') {
    unlink(g_path);
  }
  ms__final_write();
}

static void fork_prepare(void) {
  pthread_mutex_lock(&g_lock);
}

static void fork_parent(void) {
  pthread_mutex_unlock(&g_lock);
}

/* The child has no agent thread, and the listening socket is the
 * parent's: close the inherited fds (never unlink the parent's path) and
 * serve the child's own <pid>.sock. */
static void fork_child(void) {
  pthread_mutex_init(&g_lock, NULL);
  if (!g_running)
    return;
  g_running = 0;
  g_path[0] = '\0';
  close_all_fds();
  ms__agent_cache_reset();
  pthread_mutex_lock(&g_lock);
  start_locked();
  pthread_mutex_unlock(&g_lock);
}

int ms_agent_start(void) {
  pthread_mutex_lock(&g_lock);
  int r;
  if (g_running) {
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
  r = start_locked();
out:
  pthread_mutex_unlock(&g_lock);
  return r;
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
