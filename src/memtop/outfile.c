/*
 * outfile.c - writing memtop's output files without following what a
 * stranger put at their path (see outfile.h).
 */
#include "memtop/outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Why an existing path is not written, by its type. */
static const char *refusal(mode_t mode, int *err) {
  if (S_ISLNK(mode)) {
    *err = -ELOOP;
    return "it is a symbolic link, and memtop does not write through a "
           "link it did not make: remove it, or name another file with -o";
  }
  if (S_ISDIR(mode)) {
    *err = -EISDIR;
    return "it is a directory: name a file in it with -o";
  }
  *err = -EEXIST;
  return "it is not a regular file (a FIFO, a device or a socket), and "
         "memtop writes only regular files: name another file with -o, or "
         "-o - for standard output";
}

/* A name no one has guessed: ".memtop-" and 16 random hex digits. */
static void temp_name(char *out, size_t len) {
  static unsigned long long counter;
  unsigned long long r = 0;

  if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
    r = ((unsigned long long)getpid() << 32) ^ (unsigned long long)time(NULL) ^
        (++counter * 0x9e3779b97f4a7c15ull);
  snprintf(out, len, ".memtop-%016llx", r);
}

int mt_outfile_open(mt_outfile_t *f, const char *path, const char **why) {
  char dir[4096];
  const char *slash, *base;
  struct stat st;
  int err, tries;

  memset(f, 0, sizeof *f);
  f->fd = f->dirfd = -1;
  if (strcmp(path, "-") == 0) {
    f->fd = STDOUT_FILENO;
    return 0;
  }
  slash = strrchr(path, '/');
  base = slash != NULL ? slash + 1 : path;
  if (base[0] == '\0' || strcmp(base, ".") == 0 || strcmp(base, "..") == 0) {
    *why = "it names a directory: name a file in it with -o";
    return -EISDIR;
  }
  if (strlen(base) >= sizeof f->name) {
    *why = "its name is too long";
    return -ENAMETOOLONG;
  }
  if (slash == NULL)
    snprintf(dir, sizeof dir, ".");
  else if (slash == path)
    snprintf(dir, sizeof dir, "/");
  else if ((size_t)(slash - path) < sizeof dir)
    snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
  else {
    *why = "its directory's name is too long";
    return -ENAMETOOLONG;
  }
  snprintf(f->name, sizeof f->name, "%s", base);
  /* The directory is the caller's choice, links and all; what is in it
   * is looked at, never followed. */
  f->dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (f->dirfd < 0) {
    err = -errno;
    *why = err == -ENOENT ? "its directory does not exist"
                          : "its directory cannot be opened";
    return err;
  }
  if (fstatat(f->dirfd, f->name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
      !S_ISREG(st.st_mode)) {
    *why = refusal(st.st_mode, &err);
    mt_outfile_abort(f);
    return err;
  }
  for (tries = 0; tries < 64; tries++) {
    temp_name(f->tmp, sizeof f->tmp);
    f->fd = openat(f->dirfd, f->tmp,
                   O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (f->fd >= 0 || errno != EEXIST)
      break;
  }
  if (f->fd < 0) {
    err = -errno;
    f->tmp[0] = '\0';
    *why = err == -EACCES || err == -EPERM || err == -EROFS
               ? "its directory is not writable"
               : "a temporary file cannot be made in its directory";
    mt_outfile_abort(f);
    return err;
  }
  return 0;
}

int mt_outfile_write(mt_outfile_t *f, const void *data, size_t len,
                     const char **why) {
  const unsigned char *p = data;

  while (len > 0) {
    ssize_t n = write(f->fd, p, len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      *why = n < 0 && errno == ENOSPC ? "no space left on the device"
                                      : "a write failed";
      return n < 0 ? -errno : -EIO;
    }
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

int mt_outfile_commit(mt_outfile_t *f, const char **why) {
  mode_t mask;
  int err = 0;

  if (f->dirfd < 0) {
    f->fd = -1; /* standard output stays open */
    return 0;
  }
  mask = umask(0);
  umask(mask);
  if (fchmod(f->fd, 0644 & ~mask) != 0 || fsync(f->fd) != 0) {
    err = -errno;
    *why = "the file could not be completed";
  }
  if (close(f->fd) != 0 && err == 0) {
    err = -errno;
    *why = "the file could not be completed";
  }
  f->fd = -1;
  /* rename replaces whatever is at the name now (a link planted since the
   * check included) and never follows it. */
  if (err == 0 && renameat(f->dirfd, f->tmp, f->dirfd, f->name) != 0) {
    err = -errno;
    *why = err == -EISDIR || err == -ENOTEMPTY
               ? "it is a directory: name a file in it with -o"
               : "the new file could not be renamed into place";
  }
  if (err == 0)
    f->tmp[0] = '\0';
  mt_outfile_abort(f);
  return err;
}

void mt_outfile_abort(mt_outfile_t *f) {
  if (f->dirfd < 0)
    return;
  if (f->fd >= 0)
    close(f->fd);
  f->fd = -1;
  if (f->tmp[0] != '\0')
    unlinkat(f->dirfd, f->tmp, 0);
  f->tmp[0] = '\0';
  close(f->dirfd);
  f->dirfd = -1;
}

int mt_outfile_save(const char *path, const void *data, size_t len,
                    const char **why) {
  mt_outfile_t f;
  int rc = mt_outfile_open(&f, path, why);

  if (rc != 0)
    return rc;
  rc = mt_outfile_write(&f, data, len, why);
  if (rc != 0) {
    mt_outfile_abort(&f);
    return rc;
  }
  return mt_outfile_commit(&f, why);
}
