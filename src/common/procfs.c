/*
 * procfs.c - reading what the kernel says about a process (/proc files) and
 * numbers from outside (the environment, /proc), for the library and memtop
 * alike. Everything read here is hostile: bounded, checked, and a line or
 * a value that cannot be read is left unread, never guessed.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/procfs.h"
#include "memstats.h"

/* Reads a small /proc file into buf with plain system calls (this runs
 * inside arbitrary programs: no stdio, no allocation). */
ssize_t ms__read_small_file(const char *path, char *buf, size_t len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  size_t n = 0;
  while (n + 1 < len) {
    ssize_t r = read(fd, buf + n, len - 1 - n);
    if (r < 0) {
      r = -errno;
      close(fd);
      return r;
    }
    if (r == 0)
      break;
    n += (size_t)r;
  }
  close(fd);
  buf[n] = '\0';
  return (ssize_t)n;
}

int ms__parse_proc_stat(const char *stat, char *comm, size_t comm_len,
                        uint64_t *start_time) {
  /* "pid (comm) state ppid ...": comm may hold spaces and parentheses, so
   * it ends at the last ')'. starttime is field 22. */
  const char *open_p = strchr(stat, '(');
  const char *close_p = strrchr(stat, ')');
  if (!open_p || !close_p || close_p < open_p)
    return MS_EPROTO;
  if (comm && comm_len) {
    size_t n = (size_t)(close_p - open_p - 1);
    if (n >= comm_len)
      n = comm_len - 1;
    memcpy(comm, open_p + 1, n);
    comm[n] = '\0';
  }
  const char *p = close_p + 1;
  for (int field = 3; field <= 22; field++) {
    while (*p == ' ')
      p++;
    if (!*p)
      return MS_EPROTO;
    if (field == 22) {
      char *end;
      unsigned long long v = strtoull(p, &end, 10);
      if (end == p)
        return MS_EPROTO;
      *start_time = v;
      return 0;
    }
    while (*p && *p != ' ')
      p++;
  }
  return MS_EPROTO;
}

/* One "Name:   <n> kB" line starting at p (ending at '\n' or NUL): if its
 * name is `name`, stores the value in bytes and returns 1; 0 otherwise
 * (another line, or one that cannot be read). */
static int smaps_line(const char *p, const char *name, uint64_t *bytes) {
  size_t n = strlen(name);
  if (strncmp(p, name, n) != 0 || p[n] != ':')
    return 0;
  p += n + 1;
  while (*p == ' ' || *p == '\t')
    p++;
  if (*p < '0' || *p > '9')
    return 0;
  uint64_t kb = 0;
  for (; *p >= '0' && *p <= '9'; p++) {
    unsigned d = (unsigned)(*p - '0');
    if (kb > (UINT64_MAX / 1024 - d) / 10)
      return 0; /* would not fit in bytes: not a figure we can trust */
    kb = kb * 10 + d;
  }
  while (*p == ' ' || *p == '\t')
    p++;
  if (p[0] != 'k' || p[1] != 'B' || (p[2] != '\n' && p[2] != '\0'))
    return 0;
  *bytes = kb * 1024;
  return 1;
}

int ms__proc_kb(const char *text, const char *name, uint64_t *bytes) {
  for (const char *p = text; p && *p;) {
    if (smaps_line(p, name, bytes))
      return 1;
    const char *nl = strchr(p, '\n');
    p = nl ? nl + 1 : NULL;
  }
  return 0;
}

int ms__parse_smaps_rollup(const char *text, ms__smaps_t *out) {
  static const struct {
    const char *name;
    ms_field_t field;
    size_t off;
  } lines[] = {
      {"Rss", MS_F_KERNEL_RSS, offsetof(ms__smaps_t, rss)},
      {"LazyFree", MS_F_KERNEL_LAZYFREE, offsetof(ms__smaps_t, lazyfree)},
      {"AnonHugePages", MS_F_KERNEL_ANON_HUGE,
       offsetof(ms__smaps_t, anon_huge)},
      {"Swap", MS_F_KERNEL_SWAP, offsetof(ms__smaps_t, swap)},
  };
  memset(out, 0, sizeof *out);
  if (text == NULL)
    return 0;
  int found = 0;
  for (const char *p = text; *p;) {
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
      unsigned bit = 1u << (lines[i].field - MS_F_KERNEL_RSS);
      uint64_t v;
      /* The first line of a name counts: a repeated one is not the
       * kernel's format, and taking it would let garbage win. */
      if (!(out->have & bit) && smaps_line(p, lines[i].name, &v)) {
        *(uint64_t *)((char *)out + lines[i].off) = v;
        out->have |= bit;
        found++;
      }
    }
    const char *nl = strchr(p, '\n');
    if (nl == NULL)
      break;
    p = nl + 1;
  }
  return found;
}

int ms__parse_uint(const char *s, uint64_t max, uint64_t *out) {
  if (s == NULL)
    return MS_EINVAL;
  while (*s == ' ' || *s == '\t')
    s++;
  if (*s < '0' || *s > '9')
    return MS_EINVAL;
  uint64_t v = 0;
  for (; *s >= '0' && *s <= '9'; s++) {
    uint64_t d = (uint64_t)(*s - '0');
    if (v > (UINT64_MAX - d) / 10)
      return MS_EINVAL;
    v = v * 10 + d;
  }
  while (*s == ' ' || *s == '\t')
    s++;
  if (*s != '\0' || v > max)
    return MS_EINVAL;
  *out = v;
  return 0;
}
