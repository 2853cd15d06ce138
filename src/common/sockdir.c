/*
 * sockdir.c - where sockets live, and whether that place is safe.
 *
 * The directory is the only access control a Unix socket has before
 * SO_PEERCRED, so it must be ours alone: a symlink could send our socket
 * (or memtop) somewhere an attacker chose, and a group- or world-writable
 * directory lets others plant sockets that impersonate a target.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/env.h"
#include "common/sockdir.h"
#include "memstats.h"

int ms__sockdir_path(char *buf, size_t len) {
  const char *env = ms__env("MEMSTATS_DIR");
  int n;
  if (env != NULL && env[0] != '\0') {
    n = snprintf(buf, len, "%s", env);
  } else if ((env = ms__env("XDG_RUNTIME_DIR")) != NULL && env[0] != '\0') {
    n = snprintf(buf, len, "%s/memtop", env);
  } else {
    n = snprintf(buf, len, "/tmp/memtop-%u", (unsigned)geteuid());
  }
  if (n < 0 || (size_t)n >= len)
    return MS_EINVAL;
  /* A trailing slash would make "<dir>//<pid>.sock"; harmless, but the
   * paths we show people should be clean. */
  while (n > 1 && buf[n - 1] == '/')
    buf[--n] = '\0';
  return 0;
}

int ms__sockdir_check(const char *dir, uid_t uid, const char **why) {
  struct stat st;
  if (lstat(dir, &st) != 0) {
    if (errno == ENOENT)
      return MS_ENOENT;
    *why = "cannot stat the socket directory";
    return MS_EUNSAFE;
  }
  if (S_ISLNK(st.st_mode)) {
    *why = "the socket directory is a symbolic link";
    return MS_EUNSAFE;
  }
  if (!S_ISDIR(st.st_mode)) {
    *why = "the socket directory is not a directory";
    return MS_EUNSAFE;
  }
  if (st.st_uid != uid) {
    *why = "the socket directory is owned by another user";
    return MS_EUNSAFE;
  }
  if ((st.st_mode & 077) != 0) {
    *why = "the socket directory is open to group or others (want 0700)";
    return MS_EUNSAFE;
  }
  return 0;
}

void ms__sockdir_fix(const char *dir, uid_t uid, char *buf, size_t len) {
  struct stat st;
  if (buf == NULL || len == 0)
    return;
  if (lstat(dir, &st) != 0)
    snprintf(buf, len, "create %s with mode 0700, or set MEMSTATS_DIR", dir);
  else if (S_ISLNK(st.st_mode))
    snprintf(buf, len,
             "remove the symbolic link %s (rm %s), or set MEMSTATS_DIR to a "
             "real directory of your own with mode 0700",
             dir, dir);
  else if (!S_ISDIR(st.st_mode))
    snprintf(buf, len,
             "remove %s, or set MEMSTATS_DIR to a directory of your own with "
             "mode 0700",
             dir);
  else if (st.st_uid != uid)
    snprintf(buf, len,
             "remove %s (uid %u made it, perhaps to impersonate your "
             "processes), or set MEMSTATS_DIR to a directory of your own "
             "with mode 0700",
             dir, (unsigned)st.st_uid);
  else
    snprintf(buf, len, "chmod 700 %s", dir);
}

int ms__sockdir_prepare(const char *dir, const char **why) {
  uid_t uid = geteuid();
  int r = ms__sockdir_check(dir, uid, why);
  if (r != MS_ENOENT)
    return r;
  /* mkdir applies the umask, which can only remove bits: 0700 or less,
   * and less (e.g. 0500) is caught by the write below failing, not here. */
  if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
    *why = "cannot create the socket directory";
    return errno == EACCES ? MS_EACCES : MS_ENOENT;
  }
  r = ms__sockdir_check(dir, uid, why);
  return r == MS_ENOENT ? MS_EUNSAFE : r;
}
