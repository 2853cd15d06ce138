/*
 * locate.c - where a target is and who it is (client.h): the socket
 * directory and path, the /proc readers (start time, owner, maps, file
 * descriptors), the peer check of a connected socket, and the search of a
 * target's socket in its owner's directories. Below the rest of
 * src/client: the session (client.c) and the namespaces' part (procns.c)
 * both call it, it calls neither.
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

/* ------------------------------------------------------------------------
 * Paths and /proc
 * ------------------------------------------------------------------------ */
int msc_socket_dir(char *buf, size_t len) {
  if (buf == NULL || len == 0)
    return MS_EINVAL;
  return ms__sockdir_path(buf, len);
}

int msc_socket_path(int pid, char *buf, size_t len) {
  char dir[MSC_PATH_MAX];
  if (buf == NULL || pid <= 0)
    return MS_EINVAL;
  int r = msc_socket_dir(dir, sizeof dir);
  if (r != 0)
    return r;
  int n = snprintf(buf, len, "%s/%d.sock", dir, pid);
  return (n < 0 || (size_t)n >= len) ? MS_EINVAL : 0;
}

int msc_proc_start_time(int pid, uint64_t *start_time) {
  char path[64], buf[1024];
  if (pid <= 0 || start_time == NULL)
    return MS_EINVAL;
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  if (ms__read_small_file(path, buf, sizeof buf) <= 0)
    return MS_ESRCH;
  if (ms__parse_proc_stat(buf, NULL, 0, start_time) != 0)
    return MS_ESRCH;
  return 0;
}

int msc_proc_uid(int pid, uid_t *uid) {
  char path[64], buf[2048];
  unsigned long long ruid, euid;
  if (pid <= 0 || uid == NULL)
    return MS_EINVAL;
  snprintf(path, sizeof path, "/proc/%d/status", pid);
  if (ms__read_small_file(path, buf, sizeof buf) <= 0)
    return MS_ESRCH;
  const char *p = strstr(buf, "\nUid:");
  if (p == NULL || sscanf(p + 5, "%llu %llu", &ruid, &euid) != 2)
    return MS_ESRCH;
  *uid = (uid_t)euid;
  return 0;
}

int msc_proc_maps_libmemstats(int pid) {
  char path[64], buf[4096];
  const char *lib = "/libmemstats";
  size_t keep = 0, n;
  ssize_t r;
  int fd, found = 0;

  snprintf(path, sizeof path, "/proc/%d/maps", pid);
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  /* Read in chunks, carrying the end of each so a name split between two
   * reads is still seen. */
  while (!found && (r = read(fd, buf + keep, sizeof buf - 1 - keep)) > 0) {
    n = keep + (size_t)r;
    buf[n] = '\0';
    found = strstr(buf, lib) != NULL;
    keep = n < 16 ? n : 16;
    memmove(buf, buf + n - keep, keep);
  }
  close(fd);
  return found;
}

int msc_proc_fds_full(int pid, unsigned long *open_fds, unsigned long *limit) {
  char path[64], buf[4096];
  unsigned long lim = 0, n = 0;
  ssize_t r;
  int fd;

  snprintf(path, sizeof path, "/proc/%d/limits", pid);
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  r = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (r <= 0)
    return 0;
  buf[r] = '\0';
  /* "Max open files            1024                 1048576    files" */
  const char *line = strstr(buf, "\nMax open files");
  if (line == NULL)
    return 0;
  line += strlen("\nMax open files");
  while (*line == ' ')
    line++;
  char *end;
  errno = 0;
  lim = strtoul(line, &end, 10);
  if (end == line || errno != 0 || lim == 0)
    return 0; /* "unlimited", or unreadable */

  snprintf(path, sizeof path, "/proc/%d/fd", pid);
  DIR *d = opendir(path);
  if (d == NULL)
    return 0;
  /* Counted up to the limit only: whether the table is full is all that
   * is asked, and this runs on memtop's loop (a timeout's words). */
  struct dirent *e;
  while (n < lim && (e = readdir(d)) != NULL)
    if (e->d_name[0] != '.')
      n++;
  closedir(d);
  *open_fds = n;
  *limit = lim;
  return n >= lim;
}

int msc_verify_peer(int fd, int pid, const char *path, char *msg, size_t len) {
  struct ucred cred;
  socklen_t cl = sizeof cred;
  uid_t owner;

  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0 ||
      cl != sizeof cred) {
    snprintf(msg, len,
             "PID %d: cannot tell which process serves %s (SO_PEERCRED: %s): "
             "not trusting it",
             pid, path, strerror(errno));
    return MS_EUNSAFE;
  }
  if (msc_proc_uid(pid, &owner) != 0) {
    snprintf(msg, len, "PID %d: no such process", pid);
    return MS_ESRCH;
  }
  if ((int)cred.pid != pid) {
    snprintf(msg, len,
             "PID %d: not trusting %s: it is served by PID %d (uid %u), not "
             "by PID %d; another process put it there to impersonate PID %d "
             "(remove the socket, and check who can write to its directory)",
             pid, path, (int)cred.pid, (unsigned)cred.uid, pid, pid);
    return MS_EUNSAFE;
  }
  /* Root may serve any process's socket (a program that started as root
   * and then dropped its privileges keeps root's socket). */
  if (cred.uid != owner && cred.uid != 0) {
    snprintf(msg, len,
             "PID %d: not trusting %s: it is served by uid %u, but PID %d "
             "belongs to uid %u (the PID was reused while another user's "
             "process kept the socket; remove the socket)",
             pid, path, (unsigned)cred.uid, pid, (unsigned)owner);
    return MS_EUNSAFE;
  }
  return 0;
}

/* ------------------------------------------------------------------------
 * Where a target's socket is
 * ------------------------------------------------------------------------ */
int msc_find_socket(int pid, char *path, size_t len, const char **why) {
  char dir[MSC_PATH_MAX];
  struct stat st;
  /* Empty when no path can be made (too long): never what was there. */
  if (path != NULL && len > 0)
    path[0] = '\0';
  int r = msc_socket_path(pid, path, len);
  if (r != 0)
    return r;
  if (lstat(path, &st) == 0) {
    if (msc_socket_dir(dir, sizeof dir) == 0 &&
        ms__sockdir_check(dir, geteuid(), why) != 0) {
      /* As root, a directory that is the process's owner's own (a user's
       * MEMSTATS_DIR kept by sudo -E) is as safe as that owner's default
       * ones below: only that owner could have put the socket there. */
      char proc[64];
      struct stat ps;
      const char *why2 = NULL;
      snprintf(proc, sizeof proc, "/proc/%d", pid);
      if (geteuid() != 0 || stat(proc, &ps) != 0 || ps.st_uid == 0 ||
          ms__sockdir_check(dir, ps.st_uid, &why2) != 0)
        return MS_EUNSAFE;
    }
    return 0;
  }
  int first_errno = errno;
  char first[MSC_PATH_MAX];
  snprintf(first, sizeof first, "%s", path);
  char proc[64];
  snprintf(proc, sizeof proc, "/proc/%d", pid);
  /* Not in our directory: the owner's default directories (ours too, when
   * MEMSTATS_DIR points elsewhere: discovery as root lists those). */
  if (stat(proc, &st) == 0) {
    char cand[2][MSC_PATH_MAX];
    snprintf(cand[0], sizeof cand[0], "/run/user/%u/memtop/%d.sock",
             (unsigned)st.st_uid, pid);
    snprintf(cand[1], sizeof cand[1], "/tmp/memtop-%u/%d.sock",
             (unsigned)st.st_uid, pid);
    for (int i = 0; i < 2; i++) {
      struct stat sst;
      if (lstat(cand[i], &sst) == 0) {
        snprintf(path, len, "%s", cand[i]);
        snprintf(dir, sizeof dir, "%s", cand[i]);
        *strrchr(dir, '/') = '\0';
        if (ms__sockdir_check(dir, st.st_uid, why) != 0)
          return MS_EUNSAFE;
        return 0;
      }
      if (errno == EACCES && first_errno != EACCES) {
        snprintf(path, len, "%s", cand[i]);
        return MS_EACCES;
      }
    }
  }
  snprintf(path, len, "%s", first);
  return first_errno == EACCES ? MS_EACCES : MS_ENOENT;
}
