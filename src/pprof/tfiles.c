/*
 * tfiles.c - a target's files, opened only as the target itself could
 * open them (see tfiles.h).
 */
#include "pprof/tfiles.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/procfs.h"
#include "memstats.h"

#ifndef SYS_openat2
#define SYS_openat2 437
#endif

/* The supplementary groups read from a target's status: more than this
 * many and the rest are left out (fewer rights, never more). */
#define MAX_GROUPS 1024

/* Reads a small file relative to dir; NUL-terminates. Returns the length
 * or openat's negative errno. */
static ssize_t read_at(int dir, const char *name, char *buf, size_t len) {
  size_t have = 0;
  int fd = openat(dir, name, O_RDONLY | O_CLOEXEC | O_NOCTTY);

  if (fd < 0)
    return -errno;
  while (have + 1 < len) {
    ssize_t n = read(fd, buf + have, len - 1 - have);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    have += (size_t)n;
  }
  close(fd);
  buf[have] = '\0';
  return (ssize_t)have;
}

/* The n-th number (from 0) on the status line that starts with key, as
 * "Uid:\treal\teffective\tsaved\tfs". Returns 0, or MS_EPROTO if the line
 * is not there or not so. */
static int status_id(const char *status, const char *key, int n,
                     unsigned long *out) {
  const char *p = strstr(status, key);
  char *end;

  if (p == NULL)
    return MS_EPROTO;
  p += strlen(key);
  for (int i = 0;; i++) {
    unsigned long v;

    while (*p == ' ' || *p == '\t')
      p++;
    if (*p < '0' || *p > '9')
      return MS_EPROTO;
    errno = 0;
    v = strtoul(p, &end, 10);
    if (errno != 0 || v > (unsigned long)(uid_t)-2)
      return MS_EPROTO;
    if (i == n) {
      *out = v;
      return 0;
    }
    p = end;
  }
}

/* The "Groups:" line's numbers. A number the buffer cut short is not
 * taken: only a number its separator follows is whole. */
static int status_groups(const char *status, mt_tfiles_t *t) {
  const char *p = strstr(status, "\nGroups:");
  char *end;

  t->ngroups = 0;
  if (p == NULL)
    return 0;
  t->groups = malloc(MAX_GROUPS * sizeof *t->groups);
  if (t->groups == NULL)
    return MS_ENOMEM;
  p += strlen("\nGroups:");
  while (t->ngroups < MAX_GROUPS) {
    unsigned long v;

    while (*p == ' ' || *p == '\t')
      p++;
    if (*p < '0' || *p > '9')
      break;
    errno = 0;
    v = strtoul(p, &end, 10);
    if (errno != 0 || v > (unsigned long)(gid_t)-2 ||
        (*end != ' ' && *end != '\t' && *end != '\n'))
      break;
    t->groups[t->ngroups++] = (gid_t)v;
    p = end;
  }
  return 0;
}

int mt_tfiles_init(mt_tfiles_t *t, int pid, uint64_t start_time,
                   const char **why) {
  char path[64], buf[16384];
  unsigned long uid, gid;
  uint64_t started;
  int proc, rc;

  memset(t, 0, sizeof *t);
  t->rootfd = -1;
  if (pid <= 0) {
    t->rootfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (t->rootfd < 0) {
      *why = "the root directory cannot be opened";
      return MS_ESRCH;
    }
    return 0;
  }
  /* The process's directory, held: what is read from it below is of one
   * process, even if the PID is reused meanwhile. */
  snprintf(path, sizeof path, "/proc/%d", pid);
  proc = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (proc < 0) {
    *why = "the process has exited";
    return MS_ESRCH;
  }
  rc = MS_ESRCH;
  *why = "the process has exited";
  if (read_at(proc, "stat", buf, sizeof buf) <= 0 ||
      ms__parse_proc_stat(buf, NULL, 0, &started) != 0)
    goto out;
  /* The profile's own start time is the target's word: 0 is no
   * exception. */
  if (started != start_time) {
    *why = "the process has exited (another one has its PID now)";
    goto out;
  }
  if (read_at(proc, "status", buf, sizeof buf) <= 0)
    goto out;
  /* The fourth number: the ids the kernel checks file access with. */
  if (status_id(buf, "\nUid:", 3, &uid) != 0 ||
      status_id(buf, "\nGid:", 3, &gid) != 0) {
    *why = "the process's user is unknown";
    goto out;
  }
  t->uid = (uid_t)uid;
  t->gid = (gid_t)gid;
  rc = status_groups(buf, t);
  if (rc != 0) {
    *why = "out of memory";
    goto out;
  }
  t->take = 1;
  /* The target's root, as it sees its files (a container's, a chroot's);
   * if memtop may not look there (a target that cannot be traced by
   * memtop's user), its own. */
  t->rootfd = openat(proc, "root", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (t->rootfd < 0)
    t->rootfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (t->rootfd < 0) {
    rc = MS_ESRCH;
    goto out;
  }
  rc = 0;
out:
  close(proc);
  if (rc != 0)
    mt_tfiles_free(t);
  return rc;
}

/* The thread's own groups: setgroups(2) itself, not glibc's wrapper,
 * which would apply them to every thread. */
static int thread_setgroups(const gid_t *g, size_t n) {
#ifdef SYS_setgroups32
  /* 32-bit x86 and ARM: SYS_setgroups takes 16-bit ids there. */
  return (int)syscall(SYS_setgroups32, n, g);
#else
  return (int)syscall(SYS_setgroups, n, g);
#endif
}

int mt_tfiles_enter(mt_tfiles_t *t, const char **why) {
  int n;

  if (!t->take || t->entered)
    return 0;
  t->own_uid = (uid_t)setfsuid((uid_t)-1);
  t->own_gid = (gid_t)setfsgid((gid_t)-1);
  n = getgroups(0, NULL);
  if (n < 0)
    n = 0;
  free(t->own_groups);
  t->own_groups = malloc(((size_t)n + 1) * sizeof *t->own_groups);
  if (t->own_groups == NULL) {
    *why = "out of memory";
    return MS_ENOMEM;
  }
  n = getgroups(n, t->own_groups);
  t->own_ngroups = n > 0 ? (size_t)n : 0;

  if (thread_setgroups(t->groups, t->ngroups) != 0) {
    /* Not privileged. The target's own user's rights are memtop's. */
    if (t->own_uid == t->uid)
      return 0;
    *why = "memtop may not take the target's user's rights to read its "
           "files (run it as root or as that user)";
    return MS_EACCES;
  }
  t->entered = 1;
  (void)setfsgid(t->gid);
  (void)setfsuid(t->uid);
  if ((uid_t)setfsuid((uid_t)-1) != t->uid ||
      (gid_t)setfsgid((gid_t)-1) != t->gid) {
    mt_tfiles_leave(t);
    *why = "memtop could not take the target's user's rights to read its "
           "files";
    return MS_EACCES;
  }
  return 0;
}

void mt_tfiles_leave(mt_tfiles_t *t) {
  if (!t->entered)
    return;
  /* Back to uid 0 gives back the capabilities setfsuid took away. */
  (void)setfsuid(t->own_uid);
  (void)setfsgid(t->own_gid);
  (void)thread_setgroups(t->own_groups, t->own_ngroups);
  t->entered = 0;
}

/* path looked up under the target's root, opening nothing: ".." and
 * absolute symbolic links stay inside that root, and no /proc magic link
 * is followed. Other symbolic links are followed (no O_NOFOLLOW): the
 * debug files under /usr/lib/debug/.build-id are links, and what a link
 * leads to is checked as any file is, with the same rights. */
static int lookup(mt_tfiles_t *t, const char *path) {
  struct open_how how;
  int fd;

  memset(&how, 0, sizeof how);
  how.flags = O_PATH | O_CLOEXEC;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  /* EAGAIN: a rename under the root raced the lookup; tried again, a
   * few times only. */
  for (int tries = 0; tries < 3; tries++) {
    fd = (int)syscall(SYS_openat2, t->rootfd, path, &how, sizeof how);
    if (fd >= 0 || errno != EAGAIN)
      break;
  }
  if (fd < 0 && (errno == ENOSYS || errno == EPERM)) {
    /* A kernel before 5.6, or a seccomp filter that refuses system calls
     * it does not know: the same lookup, without the confinement (the
     * rights are still the target's). */
    while (*path == '/')
      path++;
    fd = openat(t->rootfd, path, O_PATH | O_CLOEXEC);
  }
  return fd;
}

/* path found as mt_tfiles_open finds it, and checked as it checks it:
 * the O_PATH descriptor (nothing opened), its stat in *st. Else returns
 * MS_ENOENT (no such file), MS_EACCES (the target may not look it up) or
 * MS_EINVAL (not a binary: special, empty or too large), with the reason
 * in *why. */
static int find(mt_tfiles_t *t, const char *path, struct stat *st,
                const char **why) {
  struct statfs fs;
  int where;

  if (path[0] != '/') {
    *why = "no file (an anonymous or special mapping)";
    return MS_ENOENT;
  }
  where = lookup(t, path);
  if (where < 0) {
    int denied = errno == EACCES;
    *why = denied ? "the target itself may not read the file"
                  : "the file cannot be found";
    return denied ? MS_EACCES : MS_ENOENT;
  }
  if (fstat(where, st) != 0 || !S_ISREG(st->st_mode)) {
    close(where);
    *why = "not a regular file";
    return MS_EINVAL;
  }
  /* /proc and /sys files are regular and empty, or of a made-up size:
   * none is a binary. */
  if (st->st_size <= 0 || (uint64_t)st->st_size > MT_TFILES_MAX_SIZE ||
      (fstatfs(where, &fs) == 0 &&
       (fs.f_type == PROC_SUPER_MAGIC || fs.f_type == SYSFS_MAGIC ||
        fs.f_type == DEBUGFS_MAGIC || fs.f_type == TRACEFS_MAGIC))) {
    close(where);
    *why = st->st_size <= 0 ? "an empty or special file"
                            : "not a binary (too large or special)";
    return MS_EINVAL;
  }
  return where;
}

int mt_tfiles_stat(mt_tfiles_t *t, const char *path, struct stat *st,
                   const char **why) {
  int where = find(t, path, st, why);

  if (where < 0)
    return where;
  close(where);
  return 0;
}

int mt_tfiles_open(mt_tfiles_t *t, const char *path, const char **why) {
  char self[64];
  struct stat st, st2;
  int where, fd;

  where = find(t, path, &st, why);
  if (where < 0)
    return where;
  /* The real open, of that very file: its permissions are checked now,
   * against the thread's (the target's) rights. */
  snprintf(self, sizeof self, "/proc/self/fd/%d", where);
  fd = open(self, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  close(where);
  if (fd < 0) {
    int denied = errno == EACCES || errno == EPERM;
    *why = denied ? "the target itself may not read the file"
                  : "the file cannot be read";
    return denied ? MS_EACCES : -errno;
  }
  if (fstat(fd, &st2) != 0 || st2.st_dev != st.st_dev ||
      st2.st_ino != st.st_ino || !S_ISREG(st2.st_mode)) {
    close(fd);
    *why = "the file changed while it was opened";
    return MS_EAGAIN;
  }
  return fd;
}

void mt_tfiles_free(mt_tfiles_t *t) {
  mt_tfiles_leave(t);
  if (t->rootfd >= 0)
    close(t->rootfd);
  t->rootfd = -1;
  free(t->groups);
  free(t->own_groups);
  t->groups = t->own_groups = NULL;
  t->ngroups = t->own_ngroups = 0;
}
