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
#include <sys/uio.h>
#include <unistd.h>

#include "core/util.h"
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
  /* Threads that allocate all the time (a program memtop attach joined
   * late) move uordblks between any two reads. A block above the largest
   * mmap threshold glibc sets (32 MiB) is mapped on its own and moves
   * hblks by one and hblkhd by its size, which only another such block
   * moves: rare. Its pages are never touched but the header's. */
  size_t big = (size_t)40 << 20;
  struct ms__mallinfo2 a = g_mallinfo2();
  void *p = ms__pv_probe_alloc(big);
  if (!p)
    return 0;
  struct ms__mallinfo2 b = g_mallinfo2();
  ms__pv_probe_free(p);
  return b.hblks == a.hblks + 1 && b.hblkhd >= a.hblkhd + big &&
         b.hblkhd < a.hblkhd + big + 8192;
}

/* ---- HeapReleased from mincore --------------------------------------------
 * The heaps are the main arena's [heap] (brk) and each other arena's heaps:
 * mappings of HEAP_MAX_SIZE (64 MiB on 64-bit), aligned to it, that start
 * with glibc's heap_info {ar_ptr, prev, size, mprotect_size}. Pages of them
 * that are not resident are memory the heap has released (or never
 * touched): what the model calls Prepared. */

/* glibc's heap_info, at the start of each arena heap. */
typedef struct ms__heap_info_s {
  void *ar_ptr;
  struct ms__heap_info_s *prev;
  size_t size;
  size_t mprotect_size;
} ms__heap_info_t;

/* Copies len bytes of this process's memory at addr into out without
 * touching addr: the mapping was listed in /proc/self/maps a moment ago,
 * but the program's threads may have unmapped it since, and a plain load
 * would then kill the program with SIGSEGV (test_glibc's stress did at
 * once). An unmapped page is an error here. Where a seccomp filter
 * forbids process_vm_readv, /proc/self/mem reads the same way (EIO).
 * Returns 0, or a negative errno if the bytes could not all be read
 * (-EFAULT: not all of them are mapped). */
static int read_self(uintptr_t addr, void *out, size_t len) {
  struct iovec local = {out, len}, remote = {(void *)addr, len};
  ssize_t n = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
  if (n == (ssize_t)len)
    return 0;
  if (n >= 0 || (errno != ENOSYS && errno != EPERM))
    return n >= 0 ? -EFAULT : -errno;
  int fd = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  n = pread(fd, out, len, (off_t)addr);
  close(fd);
  return n == (ssize_t)len ? 0 : -EFAULT;
}

int ms__arena_heap_at(uintptr_t start, uintptr_t end) {
  /* A line longer than one heap is several of them merged (below). */
  if (start % MS__HEAP_MAX != 0 || end <= start ||
      end - start < sizeof(ms__heap_info_t))
    return 0;
  ms__heap_info_t h;
  if (read_self(start, &h, sizeof h) != 0)
    return 0; /* gone meanwhile: not a heap any more */
  uintptr_t ar = (uintptr_t)h.ar_ptr, prev = (uintptr_t)h.prev;
  if (h.size == 0 || h.size > MS__HEAP_MAX || h.mprotect_size < h.size ||
      h.mprotect_size > MS__HEAP_MAX || ar == 0 || ar % sizeof(void *) != 0)
    return 0;
  /* The first heap of an arena holds the arena itself right after the
   * heap_info; later heaps point back to the previous one. */
  if (ar > start && ar < start + 256)
    return 1;
  return prev != 0 && prev % MS__HEAP_MAX == 0;
}

int ms__mmapped_chunk_at(uintptr_t start, uintptr_t end) {
  /* What sysmalloc_mmap lays at the start of its own mapping: prev_size 0,
   * then the chunk's size, a whole number of pages, with IS_MMAPPED (2)
   * set and NON_MAIN_ARENA (4) clear. The mapping may be longer than the
   * chunk (the kernel merges adjacent mappings into one line). */
  uint64_t w[2];
  if (end <= start || end - start < sizeof w || read_self(start, w, sizeof w))
    return 0;
  uint64_t size = w[1] & ~(uint64_t)7;
  return w[0] == 0 && (w[1] & 6) == 2 && size >= 4096 && size % 4096 == 0 &&
         size <= end - start;
}

/* A line of the maps file that is one of the heaps: [heap] or a pathless
 * read-write line starting with a heap_info. */
static void heap_vma(const ms__vma_t *v, void *arg) {
  uint64_t *total = arg;
  if (v->perms[0] != 'r' || v->perms[1] != 'w')
    return;
  if (v->brk || (v->pathless && ms__arena_heap_at(v->start, v->end))) {
    uint64_t mapped;
    uint64_t res = ms__resident(v->start, v->end, &mapped);
    *total += mapped - res;
  }
}

/* Returns the non-resident bytes of the heaps, or ms__maps_walk's negative
 * code if maps is unreadable. */
static int64_t heaps_nonresident(void) {
  uint64_t total = 0;
  int r = ms__maps_walk(heap_vma, &total);
  if (r != 0)
    return r;
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
