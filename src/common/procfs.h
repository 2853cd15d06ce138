/*
 * procfs.h - /proc files and numbers from outside, read for the library
 * and for memtop (see procfs.c). Pure but for ms__read_small_file(); no
 * allocation.
 */
#ifndef MS_COMMON_PROCFS_H
#define MS_COMMON_PROCFS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Reads a small file with plain system calls; NUL-terminates. Returns
 * the length read, or the open's or read's negative errno. */
ssize_t ms__read_small_file(const char *path, char *buf, size_t len);
/* Parses /proc/PID/stat: comm and field 22 (start time). */
int ms__parse_proc_stat(const char *stat, char *comm, size_t comm_len,
                        uint64_t *start_time);

/* The figures parsed from a smaps_rollup text, in bytes; `have` has bit
 * (1 << (field - MS_F_KERNEL_RSS)) set for each line that was found. */
typedef struct ms__smaps_s {
  uint64_t rss, lazyfree, anon_huge, swap;
  unsigned have;
} ms__smaps_t;

/* Parses a /proc/PID/smaps_rollup text: "Name:   <n> kB" lines; lines it
 * does not know or cannot read (garbage, a value that would overflow in
 * bytes) are skipped, so a missing figure stays unavailable. Returns the
 * number of figures found. Pure; no allocation. */
int ms__parse_smaps_rollup(const char *text, ms__smaps_t *out);

/* The value in bytes of the first "Name:   <n> kB" line named name in text
 * (/proc/PID/status, smaps_rollup). Returns 1 and sets *bytes, or 0 if
 * there is no such line or it cannot be read. Pure; no allocation. */
int ms__proc_kb(const char *text, const char *name, uint64_t *bytes);

/* Parses a decimal unsigned integer from the environment-style string s:
 * digits only (surrounding blanks allowed), at most max. Returns 0 or
 * MS_EINVAL; garbage never reads as a number. */
int ms__parse_uint(const char *s, uint64_t max, uint64_t *out);

#endif
