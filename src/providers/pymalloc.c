/*
 * pymalloc.c - what of Python's object allocator is in use, read from its
 * pool headers.
 *
 * pymalloc (CPython's Objects/obmalloc.c) maps arenas of ARENA_SIZE bytes
 * (1 MiB on 64-bit since 3.10, 256 KiB before) and carves them, in address
 * order from the first POOL_SIZE boundary, into pools (16 KiB where the
 * radix tree is built in, the default on 64-bit since 3.10; 4 KiB
 * before). Each pool starts with a header that says which size class it
 * serves and how many of its blocks are allocated:
 *
 *   struct pool_header {
 *       union { block *_padding; uint count; } ref;  allocated blocks
 *       block *freeblock;                            free list, or NULL
 *       struct pool_header *nextpool, *prevpool;
 *       uint arenaindex, szidx, nextoffset, maxnextoffset;
 *   };
 *
 * sys._debugmallocstats() sums count x INDEX2SIZE(szidx) over the carved
 * pools ("# bytes in allocated blocks"); so does this file, without the
 * GIL (which this thread cannot take safely: PyGILState_Ensure during the
 * interpreter's finalisation ends the calling thread, and waiting for it
 * would make the agent as slow as the program's longest hold) and without
 * Python's arena table (malloc'd, its address in a static of libpython).
 * The headers are read with process_vm_readv, which copies what is mapped
 * and fails on what is not: the program may unmap an arena at any moment,
 * and a plain load would then kill it. Only pools whose first page the
 * kernel backs are read (mincore): a pool never carved was never touched,
 * and reading it would fault the zero page in for nothing.
 *
 * The program changes the headers while they are read, so each is checked
 * against what pymalloc itself guarantees before it is trusted:
 *   - szidx < 32 and maxnextoffset == POOL_SIZE - INDEX2SIZE(szidx) (which
 *     also tells the pool size: the first pool of an arena decides it);
 *   - POOL_OVERHEAD + 2 x size <= nextoffset <= POOL_SIZE, on a block
 *     boundary, and count <= the blocks carved so far (count's upper half,
 *     the union's padding, is never written);
 *   - freeblock NULL or a carved block of this pool;
 *   - the same arenaindex in every pool of the arena;
 *   - carved pools before virgin ones (all zeros), as pymalloc carves them.
 * A pool caught mid-update (a new pool's szidx is DUMMY_SIZE_IDX, 0xffff,
 * for a moment) fails, and its arena is then unknown: its resident bytes
 * count as in use, and the figures say they are estimated. A count caught
 * one block before or after an allocation passes: a block's error.
 *
 * Cost: one mincore and at most two process_vm_readv per arena (its
 * headers, 48 bytes per pool, in one call), no allocation: the buffers
 * are static, used under the reader lock only.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "providers/pymalloc.h"
#include "core/util.h"

_Static_assert(sizeof(ms__pypool_hdr_t) == MS__PYPOOL_OVERHEAD,
               "pool_header is 48 bytes on 64-bit");

/* An arena of up to 16 MiB of 4 KiB pages, up to 256 pools (1 MiB arenas
 * of 4 KiB pools): the caller passes pymalloc's ARENA_SIZE only. */
#define MS__PY_PAGES_MAX 4096u
#define MS__PY_POOLS_MAX 256u

static unsigned char g_vec[MS__PY_PAGES_MAX];
static ms__pypool_hdr_t g_hdr[MS__PY_POOLS_MAX];
static struct iovec g_local[MS__PY_POOLS_MAX], g_remote[MS__PY_POOLS_MAX];
static uint32_t g_pool_size; /* the size the last arena's pools had */

/* Copies the n headers g_remote[] names into g_hdr[]. process_vm_readv
 * stops at the first address that is not mapped; where a seccomp filter
 * forbids it, /proc/self/mem reads the same way. Returns 0 if all were
 * read, else a negative errno (-EFAULT: a header no longer mapped). */
static int read_headers(unsigned n) {
  for (unsigned i = 0; i < n; i++) {
    g_local[i].iov_base = &g_hdr[i];
    g_local[i].iov_len = sizeof g_hdr[i];
    g_remote[i].iov_len = sizeof g_hdr[i];
  }
  ssize_t want = (ssize_t)(n * sizeof g_hdr[0]);
  ssize_t r = process_vm_readv(getpid(), g_local, n, g_remote, n, 0);
  if (r == want)
    return 0;
  if (r >= 0 || (errno != ENOSYS && errno != EPERM))
    return r >= 0 ? -EFAULT : -errno;
  int fd = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  int ok = 1;
  for (unsigned i = 0; i < n && ok; i++)
    ok = pread(fd, &g_hdr[i], sizeof g_hdr[i],
               (off_t)(uintptr_t)g_remote[i].iov_base) ==
         (ssize_t)sizeof g_hdr[i];
  close(fd);
  return ok ? 0 : -EFAULT;
}

enum { POOL_BAD = -1, POOL_VIRGIN = 0, POOL_CARVED = 1 };

/* What the header h of the pool at p (ps bytes) is; *aidx is the arena
 * index the arena's pools had so far (UINT32_MAX: none yet). */
static int check(const ms__pypool_hdr_t *h, uintptr_t p, uint32_t ps,
                 uint32_t *aidx) {
  static const ms__pypool_hdr_t zero;
  if (memcmp(h, &zero, sizeof zero) == 0)
    return POOL_VIRGIN;
  if (h->szidx >= MS__PYPOOL_CLASSES || (h->count >> 32) != 0)
    return POOL_BAD;
  uint32_t size = MS__PYPOOL_BLOCK(h->szidx), ovh = MS__PYPOOL_OVERHEAD;
  if (h->maxnextoffset != ps - size || h->nextoffset < ovh + 2 * size ||
      h->nextoffset > ps || (h->nextoffset - ovh) % size != 0 ||
      (uint32_t)h->count > (h->nextoffset - ovh) / size)
    return POOL_BAD;
  if (h->freeblock != 0 &&
      (h->freeblock < p + ovh || h->freeblock >= p + h->nextoffset ||
       (h->freeblock - p - ovh) % size != 0))
    return POOL_BAD;
  if (*aidx != UINT32_MAX && h->arenaindex != *aidx)
    return POOL_BAD;
  *aidx = h->arenaindex;
  return POOL_CARVED;
}

/* The pool size the arena's first pool says, or 0. */
static uint32_t pool_size(uintptr_t start, uintptr_t end, uintptr_t page) {
  uint32_t tries[] = {g_pool_size, 16384, 4096};
  for (unsigned t = 0; t < sizeof tries / sizeof tries[0]; t++) {
    uint32_t ps = tries[t];
    if (ps == 0 || (t > 0 && ps == g_pool_size))
      continue;
    uintptr_t p0 = (start + ps - 1) & ~(uintptr_t)(ps - 1);
    if (p0 + ps > end || !(g_vec[(p0 - start) / page] & 1))
      continue;
    g_remote[0].iov_base = (void *)p0;
    uint32_t aidx = UINT32_MAX;
    if (read_headers(1) == 0 && check(&g_hdr[0], p0, ps, &aidx) == POOL_CARVED)
      return g_pool_size = ps;
  }
  return 0;
}

void ms__pyarena_read(uintptr_t start, uintptr_t end, ms__pyarena_t *out) {
  memset(out, 0, sizeof *out);
  uintptr_t page = ms__page_size();
  uintptr_t npages = (end - start) / page;
  if (end <= start || npages == 0 || npages > MS__PY_PAGES_MAX ||
      mincore((void *)start, npages * page, g_vec) != 0) {
    out->known = 1; /* gone (or no arena): nothing of it is resident */
    return;
  }
  out->mapped = npages * page;
  for (uintptr_t i = 0; i < npages; i++)
    out->resident += (uint64_t)(g_vec[i] & 1) * page;
  out->known = 1;
  if (out->resident == 0)
    return;
  /* The header laid out above is 64-bit CPython's (little-endian: count in
   * the union's low half); elsewhere nothing is read. */
  if (sizeof(void *) != 8 || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__)
    goto unknown;

  uint32_t ps = pool_size(start, end, page);
  uintptr_t p0 = ps ? (start + ps - 1) & ~(uintptr_t)(ps - 1) : 0;
  unsigned npools = ps ? (unsigned)((end - p0) / ps) : 0;
  if (ps == 0 || npools > MS__PY_POOLS_MAX)
    goto unknown;

  /* Each pool's resident bytes; the headers of those whose first page is
   * resident are read. A pool resident past its first page only (its
   * header swapped out) cannot be read: unknown. */
  uint64_t res[MS__PY_POOLS_MAX];
  unsigned nread = 0;
  for (unsigned i = 0; i < npools; i++) {
    uintptr_t p = p0 + (uintptr_t)i * ps;
    uintptr_t first = (p - start) / page, last = (p + ps - 1 - start) / page;
    res[i] = 0;
    for (uintptr_t k = first; k <= last && k < npages; k++)
      res[i] += g_vec[k] & 1;
    res[i] = res[i] * page < ps ? res[i] * page : ps;
    if (g_vec[first] & 1)
      g_remote[nread++].iov_base = (void *)p;
    else if (res[i])
      goto unknown;
  }
  if (nread && read_headers(nread) != 0)
    goto unknown;

  uint32_t aidx = UINT32_MAX;
  int virgin_seen = 0;
  unsigned k = 0;
  for (unsigned i = 0; i < npools; i++) {
    uintptr_t p = p0 + (uintptr_t)i * ps;
    if (k >= nread || (uintptr_t)g_remote[k].iov_base != p) {
      virgin_seen = 1; /* not resident: never carved */
      continue;
    }
    const ms__pypool_hdr_t *h = &g_hdr[k++];
    int st = check(h, p, ps, &aidx);
    if (st == POOL_BAD || (st == POOL_CARVED && virgin_seen))
      goto unknown;
    if (st == POOL_VIRGIN) {
      virgin_seen = 1;
      continue;
    }
    uint32_t count = (uint32_t)h->count;
    if (count == 0)
      continue; /* empty: free for any size class */
    uint64_t bytes = (uint64_t)count * MS__PYPOOL_BLOCK(h->szidx);
    out->pools++;
    out->in_use += res[i];
    out->alloc += bytes < res[i] ? bytes : res[i];
  }
  return;

unknown:
  out->known = 0;
  out->pools = 0;
  out->in_use = out->resident;
  out->alloc = out->resident;
}
