/*
 * client.c - memtop's side of the protocol (see client.h): finding the
 * sockets, the session state machine, and a blocking fetch.
 *
 * Every message the user may see names the PID, the cause and, where one
 * helps, what to do about it.
 */
#include "client/client.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/procfs.h"
#include "common/sockdir.h"
#include "wire/wire.h"

void msc_explain_unsafe(int pid, const char *path, const char *why, char *buf,
                        size_t len) {
  char dir[MSC_PATH_MAX], fix[320];
  uid_t uid = geteuid();
  struct stat st;

  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (slash != NULL && slash != dir)
    *slash = '\0';
  /* The directory of another user's process is judged for that user. */
  if (msc_socket_dir(fix, sizeof fix) != 0 || strcmp(fix, dir) != 0) {
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/%d", pid);
    if (stat(proc, &st) == 0)
      uid = st.st_uid;
  }
  ms__sockdir_fix(dir, uid, fix, sizeof fix);
  snprintf(buf, len, "PID %d: not trusting the socket directory %s: %s; %s",
           pid, dir, why != NULL && why[0] ? why : "unsafe", fix);
}

int msc_sockdir_refusal(char *buf, size_t len) {
  char dir[MSC_PATH_MAX], fix[320];
  const char *why = NULL;

  if (len > 0)
    buf[0] = '\0';
  /* One whose sockets cannot fit in a Unix socket's address: no agent
   * can serve there. */
  char full[4096];
  if (ms__sockdir_path(full, sizeof full) == 0 && MSC_SOCKDIR_TOO_LONG(full)) {
    snprintf(buf, len,
             "not using the socket directory %s: it is too long (%zu "
             "bytes), a socket in it would not fit in a Unix socket's %d; "
             "set MEMSTATS_DIR to a shorter directory",
             full, strlen(full), MSC_PATH_MAX - 1);
    return 1;
  }
  if (msc_socket_dir(dir, sizeof dir) != 0 ||
      ms__sockdir_check(dir, geteuid(), &why) != MS_EUNSAFE)
    return 0;
  ms__sockdir_fix(dir, geteuid(), fix, sizeof fix);
  snprintf(buf, len, "not trusting the socket directory %s: %s; %s", dir,
           why != NULL && why[0] ? why : "unsafe", fix);
  return 1;
}

void msc_explain_connect(int pid, int err, const char *path, char *buf,
                         size_t len) {
  if ((err == MS_ENOENT || err == MS_ECONNREFUSED) &&
      msc_proc_maps_libmemstats(pid)) {
    snprintf(buf, len,
             "PID %d runs libmemstats but does not accept connections on %s "
             "yet: its agent is starting, it is a forked child that has "
             "allocated nothing since the fork, it was started with "
             "MEMSTATS_AGENT=0 or another MEMSTATS_DIR, or `memtop detach` "
             "stopped it (`memtop attach %d` starts it)",
             pid, path, pid);
    return;
  }
  switch (err) {
  case MS_ENOENT:
    snprintf(buf, len,
             "PID %d: no memstats socket at %s: the process does not run "
             "libmemstats (load it with `memtop attach %d`, or start it "
             "with `memtop run -- CMD`, or link it with -lmemstats; check "
             "that MEMSTATS_DIR is the same for both)",
             pid, path, pid);
    break;
  case MS_ECONNREFUSED:
    snprintf(buf, len,
             "PID %d: %s refuses connections: its agent is not running "
             "(a stale socket, or MEMSTATS_AGENT=0 in the target)",
             pid, path);
    break;
  case MS_EINVAL:
    /* The only EINVAL on the way to a connect: a path that does not fit
     * in a Unix socket's address (msc_socket_path, connect_path). */
    snprintf(buf, len,
             "PID %d: the socket's path (the socket directory and "
             "\"%d.sock\") is longer than a Unix socket's %d bytes: set "
             "MEMSTATS_DIR to a shorter directory, for the program and "
             "memtop alike",
             pid, pid, MSC_PATH_MAX - 1);
    break;
  case MS_EACCES:
  case -EPERM:
    snprintf(buf, len,
             "PID %d: permission denied on %s: the process belongs to "
             "another user (run memtop as that user, or as root)",
             pid, path);
    break;
  default:
    snprintf(buf, len, "PID %d: cannot connect to %s: %s", pid, path,
             ms_strerror(err));
    break;
  }
}

void msc_explain_timeout(int pid, int timeout_ms, int connected,
                         const char *path, char *buf, size_t len) {
  unsigned long nfd, lim;
  if (!connected)
    snprintf(buf, len,
             "PID %d: connecting to %s took longer than %d ms: the target may "
             "be stopped (SIGSTOP, a debugger) or overloaded",
             pid, path, timeout_ms);
  else if (msc_proc_fds_full(pid, &nfd, &lim))
    snprintf(buf, len,
             "PID %d: no answer within %d ms: the target is out of file "
             "descriptors (%lu open, its RLIMIT_NOFILE allows %lu): raise its "
             "limit (ulimit -n) or find what holds them (ls /proc/%d/fd)",
             pid, timeout_ms, nfd, lim, pid);
  else
    snprintf(buf, len,
             "PID %d: no answer within %d ms: the target's agent is hung or "
             "the process is stopped (SIGSTOP, a debugger)",
             pid, timeout_ms);
}

static void proc_comm(int pid, char *comm, size_t len) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/comm", pid);
  comm[0] = '\0';
  if (ms__read_small_file(path, comm, len) > 0)
    comm[strcspn(comm, "\n")] = '\0';
}

static int pid_alive(int pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d", pid);
  return access(path, F_OK) == 0;
}

/* Connects to a socket path, waiting at most timeout_ms. Returns the fd,
 * or a negative code (MS_ECONNREFUSED: nobody listens there). */
static int connect_path(const char *path, int timeout_ms) {
  struct sockaddr_un sa;
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  if (strlen(path) >= sizeof sa.sun_path)
    return MS_EINVAL;
  strcpy(sa.sun_path, path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return -errno;
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    int e = errno;
    if (e != EAGAIN && e != EINPROGRESS) {
      close(fd);
      return -e;
    }
    /* The listen queue is full: wait for room. */
    struct pollfd p = {fd, POLLOUT, 0};
    if (poll(&p, 1, timeout_ms) <= 0) {
      close(fd);
      return MS_ETIMEDOUT;
    }
    int err = 0;
    socklen_t el = sizeof err;
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
    if (err != 0) {
      close(fd);
      return -err;
    }
  }
  return fd;
}

/* ------------------------------------------------------------------------
 * Discovery
 * ------------------------------------------------------------------------ */
typedef struct list_s {
  msc_target_t *v;
  size_t n, cap;
} list_t;

static int list_has(const list_t *l, int pid) {
  for (size_t i = 0; i < l->n; i++)
    if (l->v[i].pid == pid)
      return 1;
  return 0;
}

/* The PID of a name "<pid><suffix>" (suffix ".sock": a socket; the agent
 * binds ".<pid>.new" first, prefix "."), or -1. */
static int parse_pid_name(const char *name, const char *prefix,
                          const char *suffix) {
  uint64_t pid;
  char digits[24];
  size_t n = strlen(name), pl = strlen(prefix), sl = strlen(suffix);
  if (n <= pl + sl || n - pl - sl >= sizeof digits ||
      strncmp(name, prefix, pl) != 0 || strcmp(name + n - sl, suffix) != 0)
    return -1;
  memcpy(digits, name + pl, n - pl - sl);
  digits[n - pl - sl] = '\0';
  if (digits[0] == ' ' || ms__parse_uint(digits, INT32_MAX, &pid) != 0 ||
      pid == 0)
    return -1;
  return (int)pid;
}

static int parse_sock_name(const char *name) {
  return parse_pid_name(name, "", ".sock");
}

/* A socket an agent bound under its temporary name (".<pid>.new", see
 * agent.c's listen_open) and never renamed into place, its process
 * killed in between: removed once that PID is gone, like a stale
 * <pid>.sock (the next agent of the same PID would remove it too). */
static void remove_dead_bound(const char *dir, const char *name, uid_t owner) {
  char path[MSC_PATH_MAX];
  struct stat st;
  int pid = parse_pid_name(name, ".", ".new");
  int n;

  if (pid <= 0 || pid_alive(pid))
    return;
  n = snprintf(path, sizeof path, "%s/%s", dir, name);
  if (n > 0 && (size_t)n < sizeof path && lstat(path, &st) == 0 &&
      S_ISSOCK(st.st_mode) && st.st_uid == owner)
    unlink(path);
}

/* ---- a directory's last listing, for msc_list_reuse ---- */

/* What a directory held when it was last read: kept while the directory
 * is unchanged (its inode, mtime and ctime, as lstat says) and for at
 * most DIRS_FRESH_NS, since a socket added or removed changes the
 * directory's times, and its process's identity (owner, start time,
 * comm) cannot change while its socket is the same. A directory changed
 * within DIRS_RACY_NS before its reading is not kept: the kernel's
 * coarse clock may give a later change the same time. */
#define DIRS_FRESH_NS (30 * 1000000000ull)
#define DIRS_RACY_NS (1000000000ull)
#define DIRS_MAX 8
typedef struct dir_seen_s {
  char dir[MSC_PATH_MAX];
  dev_t dev;
  ino_t ino;
  struct timespec mtim, ctim;
  uint64_t read_ns; /* CLOCK_MONOTONIC; 0: an empty slot */
  msc_target_t *v;
  size_t n;
} dir_seen_t;
static dir_seen_t dirs_seen[DIRS_MAX];
static pthread_mutex_t dirs_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long long dirs_reads; /* full readings (msc_list_reads) */

static uint64_t clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int same_time(const struct timespec *a, const struct timespec *b) {
  return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

/* Adds the kept listing of dir (lstat's dst) to l if it may be reused:
 * 1 if it was, 0 if dir has to be read, or MS_ENOMEM. */
static int dir_reuse(const char *dir, const struct stat *dst, list_t *l) {
  int r = 0;
  pthread_mutex_lock(&dirs_lock);
  for (size_t i = 0; i < DIRS_MAX; i++) {
    dir_seen_t *d = &dirs_seen[i];
    if (d->read_ns == 0 || strcmp(d->dir, dir) != 0)
      continue;
    if (d->dev != dst->st_dev || d->ino != dst->st_ino ||
        !same_time(&d->mtim, &dst->st_mtim) ||
        !same_time(&d->ctim, &dst->st_ctim) ||
        clock_ns(CLOCK_MONOTONIC) - d->read_ns > DIRS_FRESH_NS)
      break;
    r = 1;
    for (size_t k = 0; k < d->n && r == 1; k++) {
      if (list_has(l, d->v[k].pid))
        continue;
      if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        msc_target_t *v = realloc(l->v, cap * sizeof *v);
        if (v == NULL) {
          r = MS_ENOMEM;
          break;
        }
        l->v = v;
        l->cap = cap;
      }
      l->v[l->n++] = d->v[k];
    }
    break;
  }
  pthread_mutex_unlock(&dirs_lock);
  return r;
}

/* Keeps what reading dir (lstat's dst, read from real-time started_rt)
 * added to l, v[from .. l->n), unless the directory changed too
 * recently to tell a later change apart. */
static void dir_keep(const char *dir, const struct stat *dst,
                     uint64_t started_rt, const list_t *l, size_t from) {
  uint64_t mt = (uint64_t)dst->st_mtim.tv_sec * 1000000000u +
                (uint64_t)dst->st_mtim.tv_nsec;
  uint64_t ct = (uint64_t)dst->st_ctim.tv_sec * 1000000000u +
                (uint64_t)dst->st_ctim.tv_nsec;
  size_t n = l->n - from;
  dir_seen_t *d = NULL;
  if (strlen(dir) >= sizeof d->dir || mt + DIRS_RACY_NS > started_rt ||
      ct + DIRS_RACY_NS > started_rt)
    return;
  msc_target_t *v = malloc(n > 0 ? n * sizeof *v : 1);
  if (v == NULL)
    return;
  if (n > 0)
    memcpy(v, l->v + from, n * sizeof *v);
  pthread_mutex_lock(&dirs_lock);
  /* Its own slot, else an empty one, else the oldest. */
  for (size_t i = 0; i < DIRS_MAX && d == NULL; i++)
    if (dirs_seen[i].read_ns != 0 && strcmp(dirs_seen[i].dir, dir) == 0)
      d = &dirs_seen[i];
  for (size_t i = 0; i < DIRS_MAX && d == NULL; i++)
    if (dirs_seen[i].read_ns == 0)
      d = &dirs_seen[i];
  if (d == NULL) {
    d = &dirs_seen[0];
    for (size_t i = 1; i < DIRS_MAX; i++)
      if (dirs_seen[i].read_ns < d->read_ns)
        d = &dirs_seen[i];
  }
  free(d->v);
  snprintf(d->dir, sizeof d->dir, "%s", dir);
  d->dev = dst->st_dev;
  d->ino = dst->st_ino;
  d->mtim = dst->st_mtim;
  d->ctim = dst->st_ctim;
  d->read_ns = clock_ns(CLOCK_MONOTONIC);
  d->v = v;
  d->n = n;
  pthread_mutex_unlock(&dirs_lock);
}

unsigned long long msc_list_reads(void) {
  pthread_mutex_lock(&dirs_lock);
  unsigned long long n = dirs_reads;
  pthread_mutex_unlock(&dirs_lock);
  return n;
}

/* Adds dir's candidates to l (see msc_list): nothing is connected to.
 * With reuse, an unchanged directory's last listing (dir_reuse). */
static int scan_dir(const char *dir, int must_be_mine, list_t *l, int reuse) {
  struct stat dst;
  const char *why;
  if (lstat(dir, &dst) != 0)
    return 0;
  /* A directory anyone could have planted sockets in is not trusted. */
  if (ms__sockdir_check(dir, must_be_mine ? geteuid() : dst.st_uid, &why))
    return 0;
  int kept = reuse ? dir_reuse(dir, &dst, l) : 0;
  if (kept != 0)
    return kept < 0 ? kept : 0;
  uint64_t started_rt = clock_ns(CLOCK_REALTIME);
  size_t from = l->n;
  DIR *d = opendir(dir);
  if (d == NULL)
    return 0;
  pthread_mutex_lock(&dirs_lock);
  dirs_reads++;
  pthread_mutex_unlock(&dirs_lock);
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    int pid = parse_sock_name(e->d_name);
    if (e->d_name[0] == '.')
      remove_dead_bound(dir, e->d_name, dst.st_uid);
    if (pid <= 0 || list_has(l, pid))
      continue;
    msc_target_t t;
    memset(&t, 0, sizeof t);
    int n = snprintf(t.path, sizeof t.path, "%s/%s", dir, e->d_name);
    if (n < 0 || (size_t)n >= sizeof t.path)
      continue;
    struct stat st;
    if (lstat(t.path, &st) != 0 || !S_ISSOCK(st.st_mode) ||
        st.st_uid != dst.st_uid)
      continue;
    if (!pid_alive(pid)) {
      /* Stale: its process is gone. Unless someone still listens there:
       * a process in another PID namespace that shares this directory
       * names its socket after its PID there, which is no PID here. */
      int fd = connect_path(t.path, 0);
      if (fd >= 0)
        close(fd);
      else if (fd != MS_ETIMEDOUT)
        unlink(t.path);
      continue;
    }
    /* Only a PID of the directory's owner is listed from it (another
     * user's directory could otherwise claim PID 1): root's directory is
     * root's to fill. Who serves the socket is checked when it is
     * connected to (msc_verify_peer). */
    uid_t owner;
    if (msc_proc_uid(pid, &owner) != 0 ||
        (owner != dst.st_uid && dst.st_uid != 0))
      continue;
    t.pid = pid;
    t.uid = st.st_uid;
    t.ino = (uint64_t)st.st_ino;
    if (msc_proc_start_time(pid, &t.start_time) != 0 ||
        msc_proc_ident(pid, &t.id) != 0)
      continue;
    proc_comm(pid, t.comm, sizeof t.comm);
    if (l->n == l->cap) {
      size_t cap = l->cap ? l->cap * 2 : 16;
      msc_target_t *v = realloc(l->v, cap * sizeof *v);
      if (v == NULL) {
        closedir(d);
        return MS_ENOMEM;
      }
      l->v = v;
      l->cap = cap;
    }
    l->v[l->n++] = t;
  }
  closedir(d);
  if (reuse)
    dir_keep(dir, &dst, started_rt, l, from);
  return 0;
}

static int list_has_cb(void *l, int pid) {
  return list_has(l, pid);
}

static int by_pid(const void *a, const void *b) {
  const msc_target_t *x = a, *y = b;
  return (x->pid > y->pid) - (x->pid < y->pid);
}

static int list_dirs(msc_target_t **out, size_t *count, int reuse) {
  if (out == NULL || count == NULL)
    return MS_EINVAL;
  *out = NULL;
  *count = 0;
  list_t l = {NULL, 0, 0};
  char dir[MSC_PATH_MAX];
  int r = 0;
  /* MEMSTATS_DIR names one directory and means that one only: root's
   * listing of every user's default directory is for a root that did not
   * name one (a test's private directory must not show a stranger's
   * processes). */
  const char *only = getenv("MEMSTATS_DIR");
  if (msc_socket_dir(dir, sizeof dir) == 0)
    r = scan_dir(dir, 1, &l, reuse);
  if (r == 0 && geteuid() == 0 && (only == NULL || only[0] == '\0')) {
    static const char *const patterns[] = {"/tmp/memtop-*",
                                           "/run/user/*/memtop"};
    for (size_t p = 0; r == 0 && p < 2; p++) {
      glob_t g;
      if (glob(patterns[p], GLOB_NOSORT, NULL, &g) != 0)
        continue;
      for (size_t i = 0; r == 0 && i < g.gl_pathc; i++)
        r = scan_dir(g.gl_pathv[i], 0, &l, reuse);
      globfree(&g);
    }
  }
  /* Processes in other mount or PID namespaces (containers, services
   * with a private /tmp): their sockets are in their own roots. With
   * MEMSTATS_DIR set, that directory's path in each root only. */
  if (r == 0)
    r = msc_list_namespaces(&l.v, &l.n, &l.cap,
                            only != NULL && only[0] != '\0' ? dir : NULL, reuse,
                            list_has_cb, &l);
  if (r != 0) {
    free(l.v);
    return r;
  }
  if (l.n > 1)
    qsort(l.v, l.n, sizeof *l.v, by_pid);
  *out = l.v;
  *count = l.n;
  return 0;
}

int msc_list(msc_target_t **out, size_t *count) {
  return list_dirs(out, count, 0);
}

int msc_list_reuse(msc_target_t **out, size_t *count) {
  return list_dirs(out, count, 1);
}

int msc_remove_stale(const msc_target_t *t) {
  struct stat st;

  /* A socket in another process's root is not memtop's to remove: its
   * agent removes it, and the path walks through that root. */
  if (t == NULL || t->id.foreign || lstat(t->path, &st) != 0 ||
      !S_ISSOCK(st.st_mode) || (uint64_t)st.st_ino != t->ino ||
      st.st_uid != t->uid)
    return 0; /* not the socket that refused: a new one, or gone */
  if (pid_alive(t->pid) && msc_proc_maps_libmemstats(t->pid))
    return 0;
  return unlink(t->path) == 0;
}

int msc_discover(msc_target_t **out, size_t *count) {
  msc_target_t *v;
  size_t n, kept = 0;
  int r = msc_list(&v, &n);

  if (r != 0)
    return r;
  for (size_t i = 0; i < n; i++) {
    int fd;
    if (v[i].id.foreign) {
      /* Through its O_PATH descriptor (procns.c), found again. */
      msc_sockref_t ref;
      const char *why;
      fd = msc_locate(v[i].pid, &ref, &why) == 0
               ? connect_path(ref.connect, 200)
               : MS_ENOENT;
      msc_sockref_close(&ref);
    } else {
      fd = connect_path(v[i].path, 200);
    }
    if (fd == MS_ECONNREFUSED)
      msc_remove_stale(&v[i]);
    if (fd < 0)
      continue;
    char why_not[256];
    int trusted =
        msc_verify_peer(fd, v[i].pid, v[i].path, why_not, sizeof why_not) == 0;
    close(fd);
    if (trusted)
      v[kept++] = v[i];
  }
  *out = v;
  *count = kept;
  return 0;
}

/* ------------------------------------------------------------------------
 * The session
 * ------------------------------------------------------------------------ */
enum { ST_NEW, ST_WAIT_HELLO, ST_READY, ST_DEAD };

struct msc_session_s {
  int pid;
  int nspid; /* the PID the target knows itself by */
  uint64_t expected_start_time;
  int state;
  int dead_err;
  char dead_msg[256];
  msc_hello_t hello;
  uint8_t req[2 * 64];
  /* The heap profile being received (asked for), frame by frame, and
   * whether it is complete (then msc_session_take_profile gives it). */
  ms__profile_decoded_t *prof;
};

msc_session_t *msc_session_new(int pid, uint64_t expected_start_time) {
  msc_session_t *s = calloc(1, sizeof *s);
  if (s == NULL)
    return NULL;
  s->pid = pid;
  s->nspid = pid;
  s->expected_start_time = expected_start_time;
  s->state = ST_NEW;
  return s;
}

void msc_session_set_nspid(msc_session_t *s, int nspid) {
  if (s != NULL && nspid > 0)
    s->nspid = nspid;
}

void msc_session_free(msc_session_t *s) {
  if (s != NULL)
    ms__profile_decoded_free(s->prof);
  free(s);
}

const msc_hello_t *msc_session_hello(const msc_session_t *s) {
  return (s != NULL && s->state == ST_READY) ? &s->hello : NULL;
}

int msc_session_request_snapshot(msc_session_t *s, const uint8_t **out,
                                 size_t *len) {
  return msc_session_request_snapshot_flags(s, 0, out, len);
}

int msc_session_request_snapshot_flags(msc_session_t *s, uint64_t flags,
                                       const uint8_t **out, size_t *len) {
  if (s == NULL || out == NULL || len == NULL)
    return MS_EINVAL;
  ms__wire_writer_t w;
  ms__wire_writer_init(&w, s->req, sizeof s->req);
  if (s->state == ST_NEW) {
    ms__wire_encode_request(&w, MS__MSG_HELLO, 0);
    s->state = ST_WAIT_HELLO;
  }
  int r = ms__wire_encode_request(&w, MS__MSG_SNAPSHOT_REQ, flags);
  if (r != 0)
    return r;
  *out = s->req;
  *len = w.len;
  return 0;
}

int msc_session_request_profile(msc_session_t *s, const uint8_t **out,
                                size_t *len) {
  if (s == NULL || out == NULL || len == NULL)
    return MS_EINVAL;
  ms__profile_decoded_t *d = ms__profile_decoded_new();
  if (d == NULL)
    return MS_ENOMEM;
  ms__wire_writer_t w;
  ms__wire_writer_init(&w, s->req, sizeof s->req);
  if (s->state == ST_NEW) {
    ms__wire_encode_request(&w, MS__MSG_HELLO, 0);
    s->state = ST_WAIT_HELLO;
  }
  int r = ms__wire_encode_request(&w, MS__MSG_PROFILE_REQ, MS__PROFREQ_NONE);
  if (r != 0) {
    ms__profile_decoded_free(d);
    return r;
  }
  /* A profile asked for earlier and not finished is forgotten: the agent
   * answers requests in order, so its frames come first and would be
   * refused; ask again only after MSC_EV_PROFILE or an error. */
  ms__profile_decoded_free(s->prof);
  s->prof = d;
  *out = s->req;
  *len = w.len;
  return 0;
}

ms__profile_decoded_t *msc_session_take_profile(msc_session_t *s) {
  if (s == NULL || s->prof == NULL || !s->prof->complete)
    return NULL;
  ms__profile_decoded_t *d = s->prof;
  s->prof = NULL;
  return d;
}

static int fail(msc_session_t *s, msc_event_t *ev, int err, int fatal,
                const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static int fail(msc_session_t *s, msc_event_t *ev, int err, int fatal,
                const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ev->msg, sizeof ev->msg, fmt, ap);
  va_end(ap);
  ev->type = MSC_EV_ERROR;
  ev->err = err;
  if (fatal) {
    s->state = ST_DEAD;
    s->dead_err = err;
    memcpy(s->dead_msg, ev->msg, sizeof s->dead_msg);
  }
  return err;
}

/* ---- msc_session_feed's messages: each handler takes a whole frame's
 * payload p (length n), fills ev, and returns 0 or the code fail() gave.
 * A failure the session cannot recover from (a malformed reply, another
 * process) is fatal: the session is dead from then on. */

static int on_hello(msc_session_t *s, const uint8_t *p, uint32_t n,
                    msc_event_t *ev) {
  const char *why = "malformed";
  ms__wire_hello_t h;
  if (ms__wire_decode_hello(p, n, &h, &why) != 0)
    return fail(s, ev, MS_EPROTO, 1, "malformed reply from PID %d: %s", s->pid,
                why);
  if (s->pid > 0 && h.pid != s->nspid)
    return fail(s, ev, MS_ESTALE, 1,
                "PID %d: the socket answered for PID %d%s (a stale or "
                "misplaced socket)",
                s->pid, (int)h.pid,
                s->nspid != s->pid ? " in its namespace" : "");
  if (s->expected_start_time != 0 && h.start_time != s->expected_start_time)
    return fail(s, ev, MS_ESTALE, 1,
                "PID %d is no longer the process that was watched (start "
                "time %llu, expected %llu): the PID was reused",
                s->pid, (unsigned long long)h.start_time,
                (unsigned long long)s->expected_start_time);
  s->hello = h;
  s->state = ST_READY;
  ev->type = MSC_EV_HELLO;
  return 0;
}

static int on_snapshot(msc_session_t *s, const uint8_t *p, uint32_t n,
                       ms_snapshot_t *snap, msc_event_t *ev) {
  const char *why = "malformed";
  if (s->state != ST_READY)
    return fail(s, ev, MS_EPROTO, 1,
                "malformed reply from PID %d: a snapshot before the "
                "handshake",
                s->pid);
  if (snap == NULL)
    return MS_EINVAL;
  if (ms__wire_decode_snapshot(p, n, snap, &why) != 0)
    return fail(s, ev, MS_EPROTO, 1, "malformed reply from PID %d: %s", s->pid,
                why);
  if (snap->pid != s->hello.pid || snap->start_time != s->hello.start_time)
    return fail(s, ev, MS_EPROTO, 1,
                "malformed reply from PID %d: the snapshot is of another "
                "process (PID %d)",
                s->pid, (int)snap->pid);
  /* Shown by the PID memtop knows it by. */
  if (s->pid > 0)
    snap->pid = s->pid;
  ev->type = MSC_EV_SNAPSHOT;
  return 0;
}

/* One frame of a profile asked for; the event only with the last. */
static int on_profile(msc_session_t *s, const uint8_t *p, uint32_t n,
                      msc_event_t *ev) {
  const char *why = "malformed";
  if (s->state != ST_READY)
    return fail(s, ev, MS_EPROTO, 1,
                "malformed reply from PID %d: a profile before the "
                "handshake",
                s->pid);
  if (s->prof == NULL || s->prof->complete)
    return fail(s, ev, MS_EPROTO, 1,
                "malformed reply from PID %d: a profile not asked for", s->pid);
  int r = ms__profile_decode_frame(s->prof, p, n, &why);
  if (r != 0)
    return fail(s, ev, r, 1, "%s reply from PID %d: %s",
                r == MS_ENOMEM ? "out of memory decoding the" : "malformed",
                s->pid, why);
  if (!s->prof->complete)
    return 0; /* more frames to come */
  if (s->prof->profile.pid != s->hello.pid ||
      s->prof->profile.start_time != s->hello.start_time)
    return fail(s, ev, MS_EPROTO, 1,
                "malformed reply from PID %d: the profile is of another "
                "process (PID %d)",
                s->pid, (int)s->prof->profile.pid);
  if (s->pid > 0)
    s->prof->profile.pid = s->pid;
  ev->type = MSC_EV_PROFILE;
  return 0;
}

/* The agent's error or refusal (type MS__MSG_ERROR or MS__MSG_REFUSED). */
static int on_error(msc_session_t *s, uint16_t type, const uint8_t *p,
                    uint32_t n, msc_event_t *ev) {
  const char *why = "malformed";
  int code;
  char reason[192];
  if (ms__wire_decode_error(p, n, &code, reason, sizeof reason, &why) != 0)
    return fail(s, ev, MS_EPROTO, 1, "malformed reply from PID %d: %s", s->pid,
                why);
  if (reason[0] == '\0')
    snprintf(reason, sizeof reason, "%s", ms_strerror(code));
  if (type == MS__MSG_REFUSED)
    return fail(s, ev, code, 1, "PID %d refused the connection: %s", s->pid,
                reason);
  /* After a malformed request or a version clash the agent hangs up;
   * other errors concern one request only (a profile asked for is then
   * not coming). */
  if (s->prof != NULL && !s->prof->complete) {
    ms__profile_decoded_free(s->prof);
    s->prof = NULL;
  }
  return fail(s, ev, code, code == MS_EPROTO || code == MS_EVERSION,
              "PID %d: %s", s->pid, reason);
}

int msc_session_feed(msc_session_t *s, const uint8_t *data, size_t len,
                     size_t *used, ms_snapshot_t *snap, msc_event_t *ev) {
  if (s == NULL || used == NULL || ev == NULL || (data == NULL && len > 0))
    return MS_EINVAL;
  memset(ev, 0, sizeof *ev);
  *used = 0;
  if (s->state == ST_DEAD) {
    ev->type = MSC_EV_ERROR;
    ev->err = s->dead_err;
    memcpy(ev->msg, s->dead_msg, sizeof ev->msg);
    return ev->err;
  }
  ms__frame_t f;
  const char *why = "malformed";
  int r = ms__wire_frame(data, len, MS__WIRE_MAX_PAYLOAD, &f, &why);
  if (r == MS_EAGAIN)
    return 0;
  if (r == MS_EVERSION)
    return fail(s, ev, MS_EVERSION, 1,
                "PID %d speaks protocol version %u, newer than this memtop's "
                "(%u): upgrade memtop",
                s->pid, (unsigned)f.version, MS__WIRE_VERSION);
  if (r != 0)
    return fail(s, ev, MS_EPROTO, 1, "malformed reply from PID %d: %s", s->pid,
                why);
  *used = MS__WIRE_HEADER + (size_t)f.length;
  const uint8_t *p = data + MS__WIRE_HEADER;
  switch (f.type) {
  case MS__MSG_HELLO:
    return on_hello(s, p, f.length, ev);
  case MS__MSG_SNAPSHOT:
    return on_snapshot(s, p, f.length, snap, ev);
  case MS__MSG_PROFILE:
    return on_profile(s, p, f.length, ev);
  case MS__MSG_REFUSED:
  case MS__MSG_ERROR:
    return on_error(s, f.type, p, f.length, ev);
  default:
    /* A message type from a newer agent: skipped. */
    return 0;
  }
}
