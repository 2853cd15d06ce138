/*
 * outfile.h - the files memtop writes (`memtop profile -o FILE`, its
 * default memtop-PID.pb.gz): written whole into a new temporary file in
 * the same directory, then renamed into place, never through anything
 * already at the path.
 *
 * memtop often runs as root, in a directory a stranger can write in (the
 * default name carries the target's PID, which the target's owner knows
 * in advance). So nothing there is opened for writing: a symbolic link,
 * a FIFO, a device or a directory at the path is refused, saying why; a
 * regular file is replaced, not truncated (a hard link to another file
 * keeps that file's bytes). The temporary file is created with O_EXCL
 * and O_NOFOLLOW, mode 0600 until it is complete, then given the mode a
 * new file gets (0644 less the umask) and renamed over the path, which
 * replaces a link planted meanwhile instead of following it. "-" is
 * standard output, written as it is.
 */
#ifndef MS_MEMTOP_OUTFILE_H
#define MS_MEMTOP_OUTFILE_H

#include <stddef.h>

typedef struct mt_outfile_s {
  int fd;         /* write here: the temporary file, or standard output */
  int dirfd;      /* the path's directory (O_PATH), or -1 for standard output */
  char tmp[32];   /* the temporary file's name in it */
  char name[256]; /* the path's last component */
} mt_outfile_t;

/* Starts writing path ("-": standard output). Returns 0 with f->fd to
 * write to, or a negative errno with *why saying the cause and what to
 * do, in words for "cannot write PATH: <why>". */
int mt_outfile_open(mt_outfile_t *f, const char *path, const char **why);

/* Writes len bytes to f. Returns 0 or a negative errno (*why set). */
int mt_outfile_write(mt_outfile_t *f, const void *data, size_t len,
                     const char **why);

/* Finishes: the temporary file made durable and renamed into place.
 * Returns 0 or a negative errno (*why set); either way f is closed and,
 * on error, the temporary file removed. */
int mt_outfile_commit(mt_outfile_t *f, const char **why);

/* Gives up: closes f and removes the temporary file. */
void mt_outfile_abort(mt_outfile_t *f);

/* open, write, commit: the whole of data[0, len) as path. */
int mt_outfile_save(const char *path, const void *data, size_t len,
                    const char **why);

#endif
