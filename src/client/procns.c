/*
 * procns.c - processes in other namespaces (see client.h): who a process
 * is (its real owner, its PID inside its namespaces, its container), and
 * where its socket is when it runs in another mount or PID namespace (a
 * container, a service with PrivateTmp=).
 *
 * Such a socket lies in the process's own root, reached through
 * /proc/PID/root. That root is the process's to fill: a symbolic link
 * there is resolved by the kernel from memtop's root if memtop walked a
 * plain path, so a hostile process could send memtop to any socket of the
 * host. Every open below is openat2() from the root's descriptor with
 * RESOLVE_IN_ROOT (an absolute link or a ".." stays inside that root) and
 * RESOLVE_NO_MAGICLINKS; the directory and the socket are not links at
 * all (O_NOFOLLOW), and the socket is connected to through its O_PATH
 * descriptor, so what is connected to is what was checked. Who answers is
 * then checked by SO_PEERCRED as for any target (msc_verify_peer): the
 * kernel gives the peer's PID and uid in memtop's namespaces.
 *
 * Everything read here is the process's: bounded, parsed strictly.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "client/client.h"
#include "common/procfs.h"
#include "common/sockdir.h"

#ifndef SYS_openat2
#define SYS_openat2 437
#endif

/* How much of /proc/PID/environ is read for the socket directory: a
 * program's environment is rarely larger, and a variable past this is
 * not seen (the default directory is still tried). */
#define ENVIRON_MAX (64 * 1024)

/* ------------------------------------------------------------------------
 * Who a process is
 * ------------------------------------------------------------------------ */

/* The last number of the line named `name` ("NSpid:\t1298\t4"). */
static int last_field(const char *text, const char *name, long *out) {
  size_t n = strlen(name);
  for (const char *p = text; p != NULL && *p;) {
    if (strncmp(p, name, n) == 0) {
      long v = -1;
      p += n;
      while (*p && *p != '\n') {
        while (*p == ' ' || *p == '\t')
          p++;
        if (*p < '0' || *p > '9')
          break;
        char *end;
        v = strtol(p, &end, 10);
        p = end;
      }
      if (v < 0)
        return -1;
      *out = v;
      return 0;
    }
    p = strchr(p, '\n');
    if (p != NULL)
      p++;
  }
  return -1;
}

static int is_hex(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i]))
      return 0;
  return 1;
}

/* A container id: exactly 64 lowercase hex digits at s, ending at end. */
static int take_id(const char *s, const char *end, msc_ident_t *id,
                   const char *engine) {
  if (end - s != 64 || !is_hex(s, 64))
    return 0;
  memcpy(id->container, s, 64);
  id->container[64] = '\0';
  snprintf(id->engine, sizeof id->engine, "%s", engine);
  return 1;
}

/* A pod's UID as kubelet writes it in a cgroup name: a UUID, with '_'
 * for '-' under the systemd driver. */
static void take_pod(const char *s, const char *end, msc_ident_t *id) {
  char uid[37];
  if (end - s != 36)
    return;
  for (int i = 0; i < 36; i++) {
    char c = s[i] == '_' ? '-' : s[i];
    int dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? c != '-' : !isxdigit((unsigned char)c))
      return;
    uid[i] = (char)tolower((unsigned char)c);
  }
  uid[36] = '\0';
  memcpy(id->pod, uid, sizeof id->pod);
}

/* A systemd unit name: systemd's own characters only. */
static void take_unit(const char *s, const char *end, msc_ident_t *id) {
  size_t n = (size_t)(end - s);
  if (n == 0 || n >= sizeof id->unit)
    return;
  for (size_t i = 0; i < n; i++)
    if (!isalnum((unsigned char)s[i]) && !strchr(":-_.\\@", s[i]))
      return;
  memcpy(id->unit, s, n);
  id->unit[n] = '\0';
}

static int ends_with(const char *s, const char *end, const char *suffix) {
  size_t n = strlen(suffix);
  return (size_t)(end - s) >= n && memcmp(end - n, suffix, n) == 0;
}

static int starts_with(const char *s, const char *end, const char *prefix) {
  size_t n = strlen(prefix);
  return (size_t)(end - s) >= n && memcmp(s, prefix, n) == 0;
}

/* One component of a cgroup path, [s, end); prev is the one before it
 * ("" at the top). The deepest container wins: a later one replaces. */
static void cgroup_component(const char *s, const char *end, const char *prev,
                             size_t prevlen, msc_ident_t *id) {
  static const struct {
    const char *prefix, *engine;
  } scopes[] = {
      {"docker-", "docker"},
      {"cri-containerd-", "containerd"},
      {"crio-", "cri-o"},
      {"libpod-", "podman"},
  };
  if (ends_with(s, end, ".scope")) {
    for (size_t i = 0; i < sizeof scopes / sizeof scopes[0]; i++)
      if (starts_with(s, end, scopes[i].prefix) &&
          take_id(s + strlen(scopes[i].prefix), end - 6, id, scopes[i].engine))
        return;
  }
  if (ends_with(s, end, ".service")) {
    take_unit(s, end, id);
    return;
  }
  /* kubelet: kubepods-burstable-pod<uid>.slice (systemd driver) or
   * pod<uid> (cgroupfs driver). */
  const char *pod = NULL;
  for (const char *p = s; p + 3 <= end; p++)
    if (memcmp(p, "pod", 3) == 0 && (p == s || p[-1] == '-'))
      pod = p + 3;
  if (pod != NULL) {
    const char *pend = ends_with(s, end, ".slice") ? end - 6 : end;
    take_pod(pod, pend, id);
    return;
  }
  /* cgroupfs layouts: /docker/<id>, /kubepods/.../pod<uid>/<id>. */
  if (end - s == 64) {
    const char *engine = "";
    if (prevlen == 6 && memcmp(prev, "docker", 6) == 0)
      engine = "docker";
    take_id(s, end, id, engine);
  }
}

void msc_cgroup_ident(const char *text, msc_ident_t *id) {
  id->container[0] = id->engine[0] = id->pod[0] = id->unit[0] = '\0';
  for (const char *line = text; line != NULL && *line;) {
    const char *nl = strchr(line, '\n');
    const char *lend = nl != NULL ? nl : line + strlen(line);
    /* "hierarchy:controllers:path": the path after the second ':'. */
    const char *c1 = memchr(line, ':', (size_t)(lend - line));
    const char *c2 =
        c1 != NULL ? memchr(c1 + 1, ':', (size_t)(lend - c1 - 1)) : NULL;
    if (c2 != NULL) {
      const char *prev = "";
      size_t prevlen = 0;
      for (const char *p = c2 + 1; p < lend;) {
        while (p < lend && *p == '/')
          p++;
        const char *e = p;
        while (e < lend && *e != '/')
          e++;
        if (e > p)
          cgroup_component(p, e, prev, prevlen, id);
        prev = p;
        prevlen = (size_t)(e - p);
        p = e;
      }
    }
    line = nl != NULL ? nl + 1 : NULL;
  }
}

/* The namespace a /proc/PID/ns link names ("mnt:[4026531841]"), or "". */
static void ns_of(const char *pid, const char *ns, char *buf, size_t len) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%s/ns/%s", pid, ns);
  ssize_t n = readlink(path, buf, len - 1);
  buf[n > 0 ? (size_t)n : 0] = '\0';
}

/* Whether pid's mount or PID namespace is not ours: 1, 0, or -1 when it
 * cannot be told (another user's process, as a user). */
static int foreign_ns(int pid) {
  static const char *const kinds[] = {"mnt", "pid"};
  /* memtop's own, read once: it never enters another namespace. */
  static char mine[2][64];
  char p[16], theirs[64];
  snprintf(p, sizeof p, "%d", pid);
  for (int i = 0; i < 2; i++) {
    if (mine[i][0] == '\0')
      ns_of("self", kinds[i], mine[i], sizeof mine[i]);
    ns_of(p, kinds[i], theirs, sizeof theirs);
    if (mine[i][0] == '\0' || theirs[0] == '\0')
      return -1;
    if (strcmp(mine[i], theirs) != 0)
      return 1;
  }
  return 0;
}

int msc_proc_ppid(int pid) {
  char path[64], buf[4096];
  long ppid;
  if (pid <= 0)
    return MS_EINVAL;
  snprintf(path, sizeof path, "/proc/%d/status", pid);
  if (ms__read_small_file(path, buf, sizeof buf) <= 0 ||
      last_field(buf, "PPid:", &ppid) != 0 || ppid > 0x3fffffff)
    return MS_ESRCH;
  return (int)ppid;
}

int msc_proc_ident(int pid, msc_ident_t *id) {
  char path[64], buf[4096];
  unsigned long long ruid;
  long nspid;

  if (pid <= 0 || id == NULL)
    return MS_EINVAL;
  memset(id, 0, sizeof *id);
  id->nspid = pid;
  snprintf(path, sizeof path, "/proc/%d/status", pid);
  if (ms__read_small_file(path, buf, sizeof buf) <= 0)
    return MS_ESRCH;
  const char *u = strstr(buf, "\nUid:");
  if (u != NULL && sscanf(u + 5, "%llu", &ruid) == 1) {
    id->uid = (uid_t)ruid;
    id->have_uid = 1;
  }
  if (last_field(buf, "NSpid:", &nspid) == 0 && nspid > 0 &&
      nspid <= 0x3fffffff)
    id->nspid = (int)nspid;
  long ppid;
  if (last_field(buf, "PPid:", &ppid) == 0 && ppid <= 0x3fffffff)
    id->ppid = (int)ppid;
  id->foreign = foreign_ns(pid) == 1 || id->nspid != pid;
  snprintf(path, sizeof path, "/proc/%d/cgroup", pid);
  if (ms__read_small_file(path, buf, sizeof buf) > 0)
    msc_cgroup_ident(buf, id);
  return 0;
}

/* ------------------------------------------------------------------------
 * A socket inside another root
 * ------------------------------------------------------------------------ */

static int open_in(int dirfd, const char *path, uint64_t flags,
                   uint64_t resolve) {
  struct open_how how;
  memset(&how, 0, sizeof how);
  how.flags = flags | O_CLOEXEC;
  how.resolve = resolve;
  int fd;
  do
    fd = (int)syscall(SYS_openat2, dirfd, path, &how, sizeof how);
  while (fd < 0 && errno == EAGAIN);
  return fd;
}

/* The uid that host uid `uid` is inside pid's user namespace
 * (/proc/PID/uid_map: "inside outside count" lines), or -1 if it has
 * none there. */
static long long uid_inside(int pid, uid_t uid) {
  char path[64], buf[2048];
  snprintf(path, sizeof path, "/proc/%d/uid_map", pid);
  if (ms__read_small_file(path, buf, sizeof buf) <= 0)
    return -1;
  for (const char *p = buf; p != NULL && *p;) {
    unsigned long long in, out, count;
    if (sscanf(p, "%llu %llu %llu", &in, &out, &count) == 3 && uid >= out &&
        uid - out < count)
      return (long long)(in + (uid - out));
    p = strchr(p, '\n');
    if (p != NULL)
      p++;
  }
  return -1;
}

/* Up to max absolute socket directories pid's environment names
 * (MEMSTATS_DIR, else XDG_RUNTIME_DIR/memtop), copied into dirs. */
static int environ_dirs(int pid, char dirs[][MSC_PATH_MAX], int max) {
  char path[64];
  int k = 0;
  snprintf(path, sizeof path, "/proc/%d/environ", pid);
  char *env = malloc(ENVIRON_MAX + 1);
  if (env == NULL)
    return 0;
  ssize_t n = ms__read_small_file(path, env, ENVIRON_MAX + 1);
  const char *memstats = NULL, *xdg = NULL;
  for (ssize_t i = 0; n > 0 && i < n; i += (ssize_t)strlen(env + i) + 1) {
    if (strncmp(env + i, "MEMSTATS_DIR=", 13) == 0)
      memstats = env + i + 13;
    else if (strncmp(env + i, "XDG_RUNTIME_DIR=", 16) == 0)
      xdg = env + i + 16;
  }
  /* As sockdir.c chooses: the first that is set wins, but the next is
   * tried too (a setuid program's agent ignores MEMSTATS_DIR). */
  if (memstats != NULL && memstats[0] == '/' && k < max &&
      snprintf(dirs[k], MSC_PATH_MAX, "%s", memstats) < MSC_PATH_MAX)
    k++;
  if (xdg != NULL && xdg[0] == '/' && k < max &&
      snprintf(dirs[k], MSC_PATH_MAX, "%s/memtop", xdg) < MSC_PATH_MAX)
    k++;
  free(env);
  return k;
}

/* Looks for "<nspid>.sock" in dir inside rootfd, for a process owned by
 * `owner`. Returns 0 with ref filled (ref->fd open), MS_ENOENT, MS_EACCES
 * or MS_EUNSAFE (*why). */
static int find_in_root(int rootfd, int pid, const char *dir, uid_t owner,
                        msc_sockref_t *ref, const char **why) {
  char name[32];
  struct stat st;
  int n = snprintf(ref->path, sizeof ref->path, "/proc/%d/root%s/%d.sock", pid,
                   dir, ref->nspid);
  if (n < 0 || (size_t)n >= sizeof ref->path)
    return MS_ENOENT;
  int dfd = open_in(rootfd, dir, O_PATH | O_DIRECTORY | O_NOFOLLOW,
                    RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
  if (dfd < 0) {
    if (errno == ENOTDIR || errno == ELOOP) {
      *why = "the socket directory is a symbolic link or not a directory";
      return MS_EUNSAFE;
    }
    return errno == EACCES ? MS_EACCES : MS_ENOENT;
  }
  /* sockdir.c's rules, on what was opened. */
  if (fstat(dfd, &st) != 0 || !S_ISDIR(st.st_mode)) {
    close(dfd);
    *why = "the socket directory is not a directory";
    return MS_EUNSAFE;
  }
  if (st.st_uid != owner && st.st_uid != 0) {
    close(dfd);
    *why = "the socket directory is owned by another user";
    return MS_EUNSAFE;
  }
  if ((st.st_mode & 077) != 0) {
    close(dfd);
    *why = "the socket directory is open to group or others (want 0700)";
    return MS_EUNSAFE;
  }
  uid_t dir_uid = st.st_uid;
  snprintf(name, sizeof name, "%d.sock", ref->nspid);
  int fd =
      open_in(dfd, name, O_PATH | O_NOFOLLOW,
              RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
  close(dfd);
  if (fd < 0)
    return errno == EACCES ? MS_EACCES : MS_ENOENT;
  if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode) || st.st_uid != dir_uid) {
    close(fd);
    *why = S_ISLNK(st.st_mode) ? "the socket is a symbolic link"
                               : "the socket is not a socket of the "
                                 "directory's owner";
    return MS_EUNSAFE;
  }
  ref->fd = fd;
  ref->uid = st.st_uid;
  ref->ino = (uint64_t)st.st_ino;
  snprintf(ref->connect, sizeof ref->connect, "/proc/self/fd/%d", fd);
  return 0;
}

/* The socket of a process in other namespaces, whose owner is `owner`
 * (its effective uid as memtop sees it). `only`: that directory alone. */
static int locate_ns(int pid, uid_t owner, const char *only, msc_sockref_t *ref,
                     const char **why) {
  char dirs[4][MSC_PATH_MAX], root[64];
  int k = 0, first = MS_ENOENT;

  if (only != NULL) {
    snprintf(dirs[k++], MSC_PATH_MAX, "%s", only);
  } else {
    k = environ_dirs(pid, dirs, 2);
    const char *ours = getenv("MEMSTATS_DIR");
    if (ours != NULL && ours[0] == '/')
      snprintf(dirs[k++], MSC_PATH_MAX, "%s", ours);
    long long in = uid_inside(pid, owner);
    if (in >= 0)
      snprintf(dirs[k++], MSC_PATH_MAX, "/tmp/memtop-%lld", in);
  }
  snprintf(root, sizeof root, "/proc/%d/root", pid);
  int rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (rootfd < 0) {
    snprintf(ref->path, sizeof ref->path, "%s", root);
    return errno == EACCES || errno == EPERM ? MS_EACCES : MS_ENOENT;
  }
  char firstpath[MSC_NSPATH_MAX] = "";
  for (int i = 0; i < k; i++) {
    int r = find_in_root(rootfd, pid, dirs[i], owner, ref, why);
    if (r == 0) {
      close(rootfd);
      return 0;
    }
    /* Said is the first trouble, else the first place looked at. */
    if (firstpath[0] == '\0' || (first == MS_ENOENT && r != MS_ENOENT)) {
      memcpy(firstpath, ref->path, sizeof firstpath);
      first = r;
    }
  }
  close(rootfd);
  if (firstpath[0] != '\0')
    memcpy(ref->path, firstpath, sizeof ref->path);
  return first;
}

static void sockref_init(msc_sockref_t *ref) {
  memset(ref, 0, sizeof *ref);
  ref->fd = -1;
}

void msc_sockref_close(msc_sockref_t *ref) {
  if (ref != NULL && ref->fd >= 0) {
    close(ref->fd);
    ref->fd = -1;
  }
}

int msc_locate(int pid, msc_sockref_t *ref, const char **why) {
  msc_ident_t id;

  if (ref == NULL || why == NULL)
    return MS_EINVAL;
  return msc_locate_ident(pid, msc_proc_ident(pid, &id) == 0 ? &id : NULL, ref,
                          why);
}

int msc_locate_ident(int pid, const msc_ident_t *id, msc_sockref_t *ref,
                     const char **why) {
  uid_t euid;
  struct stat st;

  if (ref == NULL || why == NULL)
    return MS_EINVAL;
  sockref_init(ref);
  ref->nspid = pid;
  if (id == NULL || !id->foreign) {
    char path[MSC_PATH_MAX];
    int r = msc_find_socket(pid, path, sizeof path, why);
    snprintf(ref->path, sizeof ref->path, "%s", path);
    snprintf(ref->connect, sizeof ref->connect, "%s", path);
    if (r == 0 && lstat(path, &st) == 0) {
      ref->uid = st.st_uid;
      ref->ino = (uint64_t)st.st_ino;
    }
    return r;
  }
  ref->nspid = id->nspid;
  if (msc_proc_uid(pid, &euid) != 0)
    return MS_ESRCH;
  return locate_ns(pid, euid, NULL, ref, why);
}

/* The processes a listing found in memtop's own namespaces, so that the
 * live view's listing every 2 s does not ask each of the machine's
 * processes again (two readlinks each: most of that listing's system
 * time). A process is known by its PID and the inode number of its
 * /proc/PID directory, which readdir gives for nothing: a new process on
 * a reused PID gets a new directory and inode (as does one whose entry
 * the kernel evicted, asked again then). A verdict is kept NS_FRESH_NS at
 * most: a process that moves into another namespace later (unshare,
 * setns) is found at the first listing after that. Sorted by PID. */
#define NS_FRESH_NS (30 * 1000000000ull)
typedef struct ns_seen_s {
  int pid;
  unsigned checks; /* how many times its namespaces were read */
  uint64_t ino;
  uint64_t read_ns; /* CLOCK_MONOTONIC */
} ns_seen_t;
static ns_seen_t *ns_seen;
static size_t ns_nseen;
static pthread_mutex_t ns_lock = PTHREAD_MUTEX_INITIALIZER;

static int ns_by_pid(const void *a, const void *b) {
  const ns_seen_t *x = a, *y = b;
  return (x->pid > y->pid) - (x->pid < y->pid);
}

/* pid's entry in the kept table (ns_lock held), or NULL. */
static const ns_seen_t *ns_find(int pid) {
  ns_seen_t key = {.pid = pid};
  return ns_nseen == 0
             ? NULL
             : bsearch(&key, ns_seen, ns_nseen, sizeof key, ns_by_pid);
}

unsigned msc_ns_checks(int pid) {
  pthread_mutex_lock(&ns_lock);
  const ns_seen_t *k = ns_find(pid);
  unsigned c = k != NULL ? k->checks : 0;
  pthread_mutex_unlock(&ns_lock);
  return c;
}

int msc_list_namespaces(msc_target_t **v, size_t *n, size_t *cap,
                        const char *only, int reuse, int (*has)(void *, int),
                        void *arg) {
  DIR *d = opendir("/proc");
  struct dirent *e;
  ns_seen_t *kept = NULL;
  size_t nkept = 0, capkept = 0;
  int lost = 0;
  struct timespec ts;

  if (d == NULL)
    return 0;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
  pthread_mutex_lock(&ns_lock);
  while ((e = readdir(d)) != NULL) {
    char *end;
    long pid = strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0 || pid > 0x3fffffff || has(arg, (int)pid))
      continue;
    /* Two readlinks tell most processes apart: only those in another
     * namespace go further. One found in ours at a listing less than
     * NS_FRESH_NS ago, in the same /proc directory, is not asked again. */
    const ns_seen_t *k = ns_find((int)pid);
    uint64_t ino = (uint64_t)e->d_ino;
    int same = k != NULL && k->ino == ino;
    int foreign = 0;
    if (!(reuse && same && now - k->read_ns < NS_FRESH_NS))
      foreign = foreign_ns((int)pid);
    if (foreign == 0) {
      if (nkept == capkept) {
        size_t c = capkept ? capkept * 2 : 256;
        ns_seen_t *grown = realloc(kept, c * sizeof *grown);
        if (grown == NULL) {
          lost = 1; /* nothing kept: the next listing asks them all */
          continue;
        }
        kept = grown;
        capkept = c;
      }
      if (reuse && same && now - k->read_ns < NS_FRESH_NS)
        kept[nkept++] = *k;
      else
        kept[nkept++] =
            (ns_seen_t){(int)pid, same ? k->checks + 1 : 1, ino, now};
      continue;
    }
    if (foreign != 1)
      continue;
    msc_target_t t;
    uid_t euid;
    memset(&t, 0, sizeof t);
    if (msc_proc_ident((int)pid, &t.id) != 0 ||
        msc_proc_uid((int)pid, &euid) != 0)
      continue;
    msc_sockref_t ref;
    const char *why = NULL;
    sockref_init(&ref);
    ref.nspid = t.id.nspid;
    if (locate_ns((int)pid, euid, only, &ref, &why) != 0)
      continue;
    msc_sockref_close(&ref); /* the probe opens it again */
    t.pid = (int)pid;
    t.uid = ref.uid;
    t.ino = ref.ino;
    memcpy(t.path, ref.path, sizeof t.path);
    if (msc_proc_start_time((int)pid, &t.start_time) != 0)
      continue;
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/comm", pid);
    if (ms__read_small_file(path, t.comm, sizeof t.comm) > 0)
      t.comm[strcspn(t.comm, "\n")] = '\0';
    if (*n == *cap) {
      size_t c = *cap ? *cap * 2 : 16;
      msc_target_t *grown = realloc(*v, c * sizeof *grown);
      if (grown == NULL) {
        pthread_mutex_unlock(&ns_lock);
        free(kept);
        closedir(d);
        return MS_ENOMEM;
      }
      *v = grown;
      *cap = c;
    }
    (*v)[(*n)++] = t;
  }
  closedir(d);
  /* The processes of this listing replace the last one's (those gone
   * are forgotten); readdir gives /proc in PID order, sorted anyway. */
  if (lost) {
    free(kept);
    kept = NULL;
    nkept = 0;
  }
  if (nkept > 1)
    qsort(kept, nkept, sizeof *kept, ns_by_pid);
  free(ns_seen);
  ns_seen = kept;
  ns_nseen = nkept;
  pthread_mutex_unlock(&ns_lock);
  return 0;
}
