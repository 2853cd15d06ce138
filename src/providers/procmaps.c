/*
 * procmaps.c - the one reader of /proc/self/maps on the target side: the
 * mappings reader (mappings.c: stacks, glibc's heaps) and the glibc
 * provider (glibc.c: its heaps' released pages) walk the file through it.
 *
 * The file is read in pieces into one static buffer (no allocation; one
 * reader at a time, the snapshot's reader lock); each whole line is parsed
 * and handed over in order. The kernel holds the process's mmap lock for
 * reading while it writes each piece, so the lines of two pieces may come
 * from two moments: a reader must not assume the lines are one picture.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "providers/provider_int.h"

static const char *hex(const char *p, const char *e, uintptr_t *v) {
  uintptr_t x = 0;
  int n = 0;
  for (; p < e; p++, n++) {
    unsigned d;
    if (*p >= '0' && *p <= '9')
      d = (unsigned)(*p - '0');
    else if (*p >= 'a' && *p <= 'f')
      d = (unsigned)(*p - 'a' + 10);
    else
      break;
    if (n >= 16)
      return NULL;
    x = x << 4 | d;
  }
  *v = x;
  return n ? p : NULL;
}

static const char *skip_field(const char *p, const char *e) {
  while (p < e && *p != ' ')
    p++;
  while (p < e && *p == ' ')
    p++;
  return p;
}

/* Parses one line [p, e); returns 0 if it is not in the kernel's format. */
static int parse_vma(const char *p, const char *e, ms__vma_t *v) {
  uintptr_t ino = 0;
  memset(v, 0, sizeof *v);
  if (!(p = hex(p, e, &v->start)) || p >= e || *p++ != '-' ||
      !(p = hex(p, e, &v->end)) || p >= e || *p++ != ' ' || e - p < 5 ||
      v->end <= v->start)
    return 0;
  memcpy(v->perms, p, 4);
  p = skip_field(p, e); /* perms */
  p = skip_field(p, e); /* offset */
  p = skip_field(p, e); /* dev */
  for (; p < e && *p >= '0' && *p <= '9'; p++)
    ino = ino * 10 + (uintptr_t)(*p - '0');
  while (p < e && *p == ' ')
    p++;
  size_t plen = (size_t)(e - p);
  v->stack = plen == 7 && memcmp(p, "[stack]", 7) == 0;
  v->brk = plen == 6 && memcmp(p, "[heap]", 6) == 0;
  v->anon =
      ino == 0 && (plen == 0 || (plen > 6 && memcmp(p, "[anon:", 6) == 0));
  v->pathless = plen == 0;
  return 1;
}

int ms__maps_walk(void (*fn)(const ms__vma_t *v, void *arg), void *arg) {
  static char buf[16384];
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  int rc = 0;
  size_t have = 0;
  for (;;) {
    ssize_t r = read(fd, buf + have, sizeof buf - have);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0)
      rc = -errno;
    if (r <= 0)
      break;
    have += (size_t)r;
    char *p = buf, *end = buf + have;
    for (;;) {
      char *nl = memchr(p, '\n', (size_t)(end - p));
      if (!nl)
        break;
      ms__vma_t v;
      if (parse_vma(p, nl, &v))
        fn(&v, arg);
      p = nl + 1;
    }
    /* Keep the unfinished line; a line longer than the buffer (a path
     * that long) is dropped. */
    have = (size_t)(end - p);
    if (have == sizeof buf)
      have = 0;
    memmove(buf, p, have);
  }
  close(fd);
  return rc;
}
