/*
 * glibc.c - the glibc malloc provider: mallinfo2(), and an estimate of what
 * the heap has handed back to the kernel from mincore().
 *
 * mallinfo2 walks every free chunk of every arena under that arena's lock:
 * microseconds on a small heap, milliseconds with many arenas, and an
 * application thread that allocates meanwhile waits. So it is sampled at
 * most once a second, and less often when a read is slow (the registry
 * stretches the interval to 100 times the last read's cost).
 *
 * Mapping (see ../shared/notes/allocators.md):
 *   Sys = HeapSys = arena + hblkhd                     exact
 *   HeapInuse     = uordblks + hblkhd                  exact (tcache'd
 *                   chunks count as in use: glibc sees them so)
 *   HeapIdle      = fordblks                           exact
 *   HeapReleased  = non-resident pages of the heaps, at most HeapIdle:
 *                   estimated (glibc does not count what it gave back with
 *                   MADV_DONTNEED, nor top-chunk pages never touched)
 * HeapAlloc, objects and classes come only from tracking (the preload).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/mappings.h"
#include "providers/provider_int.h"

/* glibc's struct mallinfo2 (2.33+), declared here so that building does not
 * need a recent <malloc.h>; the layout is part of glibc's ABI. */
struct ms__mallinfo2 {
  size_t arena, ordblks, smblks, hblks, hblkhd, usmblks, fsmblks, uordblks,
      fordblks, keepcost;
};
typedef struct ms__mallinfo2 (*mallinfo2_fn)(void);

static mallinfo2_fn g_mallinfo2;

static int glibc_detect(void) {
  g_mallinfo2 = (mallinfo2_fn)dlsym(RTLD_DEFAULT, "mallinfo2");
  return g_mallinfo2 != NULL;
}

/* malloc reaches glibc if a probe allocation moves uordblks by its size.
 * Other threads may allocate meanwhile, so a few tries. */
static int glibc_confirm(void) {
  for (int i = 0; i < 3; i++) {
    size_t size = MS__PV_PROBE_SIZE + (size_t)i * 4096;
    struct ms__mallinfo2 a = g_mallinfo2();
    void *p = ms__pv_probe_alloc(size);
    if (!p)
      return 0;
    struct ms__mallinfo2 b = g_mallinfo2();
    ms__pv_probe_free(p);
    if (b.uordblks + b.hblkhd >= a.uordblks + a.hblkhd + size &&
        b.uordblks + b.hblkhd < a.uordblks + a.hblkhd + size + 4096)
      return 1;
  }
  return 0;
}

/* ---- HeapReleased from mincore --------------------------------------------
 * The heaps are the main arena's [heap] (brk) and each other arena's heaps:
 * mappings of HEAP_MAX_SIZE (64 MiB on 64-bit), aligned to it, that start
 * with glibc's heap_info {ar_ptr, prev, size, mprotect_size}. Pages of them
 * that are not resident are memory the heap has released (or never
 * touched): what the model calls Prepared. */

static char g_maps[65536];         /* one read of /proc/self/maps */
static unsigned char g_vec[65536]; /* mincore's page vector, in chunks */

static uint64_t nonresident(uintptr_t start, uintptr_t end, size_t page) {
  uint64_t n = 0;
  for (uintptr_t a = start; a < end;) {
    size_t pages = (end - a) / page;
    if (pages > sizeof g_vec)
      pages = sizeof g_vec;
    if (pages == 0)
      break;
    if (mincore((void *)a, pages * page, g_vec) != 0)
      return n; /* unmapped meanwhile: count what we saw */
    for (size_t i = 0; i < pages; i++)
      n += !(g_vec[i] & 1);
    a += pages * page;
  }
  return n * page;
}

/* Parses one maps line "start-end perms offset dev inode [path]". */
static int parse_maps_line(const char *l, const char *e, uintptr_t *start,
                           uintptr_t *end, int *rw, const char **path) {
  char *p;
  *start = (uintptr_t)strtoull(l, &p, 16);
  if (p >= e || *p != '-')
    return -1;
  *end = (uintptr_t)strtoull(p + 1, &p, 16);
  if (p + 5 >= e)
    return -1;
  *rw = p[1] == 'r' && p[2] == 'w';
  /* Skip perms, offset, dev, inode: four fields. */
  for (int f = 0; f < 4 && p < e; f++) {
    while (p < e && *p == ' ')
      p++;
    while (p < e && *p != ' ')
      p++;
  }
  while (p < e && *p == ' ')
    p++;
  *path = p;
  return 0;
}

/* Returns the non-resident bytes of the heaps, or -1 if maps is unreadable. */
static int64_t heaps_nonresident(void) {
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  uint64_t total = 0;
  size_t have = 0;
  for (;;) {
    ssize_t r = read(fd, g_maps + have, sizeof g_maps - 1 - have);
    if (r < 0) {
      close(fd);
      return -1;
    }
    have += (size_t)r;
    g_maps[have] = '\0';
    /* Handle every complete line; keep a partial last line for later. */
    char *l = g_maps, *nl;
    while ((nl = memchr(l, '\n', have - (size_t)(l - g_maps))) != NULL) {
      uintptr_t s, e;
      int rw;
      const char *path;
      if (parse_maps_line(l, nl, &s, &e, &rw, &path) == 0 && rw) {
        if (nl - path == 6 && memcmp(path, "[heap]", 6) == 0)
          total += nonresident(s, e, page);
        else if (path == nl && ms__arena_heap_at(s, e))
          total += nonresident(s, e, page);
      }
      l = nl + 1;
    }
    size_t rest = have - (size_t)(l - g_maps);
    memmove(g_maps, l, rest);
    have = rest;
    if (r == 0 || have == sizeof g_maps - 1)
      break;
  }
  close(fd);
  return (int64_t)total;
}

static int glibc_sample(ms__pv_sample_t *out, unsigned flags) {
  (void)flags;
  struct ms__mallinfo2 m = g_mallinfo2();
  uint64_t inuse = (uint64_t)m.uordblks + m.hblkhd;
  uint64_t idle = m.fordblks;
  ms__pv_set(out, MS_F_SYS, (uint64_t)m.arena + m.hblkhd, MS_Q_EXACT);
  ms__pv_set(out, MS_F_HEAP_INUSE, inuse, MS_Q_EXACT);
  ms__pv_set(out, MS_F_HEAP_IDLE, idle, MS_Q_EXACT);
  ms__pv_set(out, MS_F_HEAP_SYS, inuse + idle, MS_Q_EXACT);
  out->mapped_blocks = m.hblkhd;
  int64_t nr = heaps_nonresident();
  if (nr >= 0) {
    /* Non-resident in-use pages (allocated, never touched; or swapped)
     * would push the estimate above what is free: it is clamped, so
     * HeapReleased <= HeapIdle holds. */
    uint64_t rel = (uint64_t)nr < idle ? (uint64_t)nr : idle;
    ms__pv_set(out, MS_F_HEAP_RELEASED, rel, MS_Q_ESTIMATED);
  }
  return 0;
}

const ms__provider_t ms__provider_glibc = {
    .name = "glibc",
    .kind = MS__PV_MALLOC,
    .min_interval_ns = 1000000000ull,
    .detect = glibc_detect,
    .confirm = glibc_confirm,
    .sample = glibc_sample,
    .kernel_view = MS__PV_VIEW_ARENAS,
};
