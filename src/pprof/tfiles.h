/*
 * tfiles.h - a target's files, opened only as the target itself could
 * open them (memtop side).
 *
 * A heap profile's mappings name files, and the names are the target's
 * word; memtop often runs as root, the target as anybody. So a file a
 * target names is found under the target's own root directory
 * (/proc/PID/root, held open from the moment the PID's start time is
 * checked, so that a reused PID cannot stand in), looked up with O_PATH
 * (which opens nothing: no pty is allocated, no watchdog armed, no FIFO
 * waited on), checked to be a regular file of bounded size, and only
 * then opened for reading, through /proc/self/fd/N, while the calling
 * thread holds the target's filesystem uid, gid and groups.
 *
 * Those three are per thread on Linux: setfsuid and setfsgid (glibc's
 * wrappers are plain system calls) and the raw setgroups system call
 * (glibc's setgroups() would change every thread of memtop, the loop's
 * among them). So a libuv worker takes them for one job and gives them
 * back before the job returns (mt_tfiles_enter, mt_tfiles_leave), and
 * every open made on that thread in between, libdw's own among them, is
 * made with the target's rights. (glibc's set*id() calls apply to every
 * thread, so one made meanwhile would overwrite a job's rights: memtop
 * makes none.) Not thread-safe: one mt_tfiles_t per job.
 */
#ifndef MT_PPROF_TFILES_H
#define MT_PPROF_TFILES_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The largest file read: a debug file of a large program fits. */
#define MT_TFILES_MAX_SIZE ((uint64_t)4 << 30)

typedef struct mt_tfiles_s {
  int rootfd; /* the directory paths are resolved in (O_PATH) */
  int take;   /* nonzero: mt_tfiles_enter takes the ids below */
  uid_t uid;  /* the target's filesystem uid and gid */
  gid_t gid;
  gid_t *groups; /* its supplementary groups */
  size_t ngroups;
  /* What mt_tfiles_enter replaced, for mt_tfiles_leave. */
  int entered;
  uid_t own_uid;
  gid_t own_gid;
  gid_t *own_groups;
  size_t own_ngroups;
} mt_tfiles_t;

/* Prepares to read the files of process pid, which started at start_time
 * (field 22 of /proc/PID/stat; another start time is another process, and
 * nothing of it is read), with its rights. pid 0:
 * memtop's own files with its own rights. If memtop may not look into
 * the target's root directory, paths are resolved from memtop's (as the
 * target's rights still apply). Returns 0, or MS_ESRCH (the process is
 * gone, or the PID is another process's now) or MS_ENOMEM, with words for
 * the user in *why. On error *t needs no mt_tfiles_free. */
int mt_tfiles_init(mt_tfiles_t *t, int pid, uint64_t start_time,
                   const char **why);

/* Gives the calling thread the target's filesystem rights. Returns 0, or
 * MS_EACCES (memtop may not take another user's rights: it is neither
 * root nor the target's user), with the thread's rights unchanged. */
int mt_tfiles_enter(mt_tfiles_t *t, const char **why);

/* Gives the thread back what mt_tfiles_enter replaced. */
void mt_tfiles_leave(mt_tfiles_t *t);

/* Opens path (absolute, as the target sees it) for reading: a regular
 * file of at most MT_TFILES_MAX_SIZE bytes, outside /proc and /sys.
 * Returns the descriptor (O_RDONLY | O_CLOEXEC), or a negative code with
 * the reason in *why: MS_ENOENT (no such file, or no file at all),
 * MS_EACCES (the target may not read it), MS_EINVAL (not a binary: not
 * regular, empty, too large, in /proc or /sys), MS_EAGAIN (it changed
 * while it was opened), or open's -errno. Call it between mt_tfiles_enter
 * and mt_tfiles_leave. */
int mt_tfiles_open(mt_tfiles_t *t, const char *path, const char **why);

/* What mt_tfiles_open would open, looked up and checked the same way but
 * not opened (nothing is read): its stat in *st, the file's identity
 * (device, inode, size, modification time) for a cache of what was read
 * from it. Returns 0, or mt_tfiles_open's negative code with the reason
 * in *why. Call it between mt_tfiles_enter and mt_tfiles_leave. */
struct stat;
int mt_tfiles_stat(mt_tfiles_t *t, const char *path, struct stat *st,
                   const char **why);

void mt_tfiles_free(mt_tfiles_t *t);

#endif
