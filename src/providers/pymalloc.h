/*
 * pymalloc.h - what of one arena of Python's object allocator (pymalloc)
 * is in use, read from its pool headers (internal; see pymalloc.c).
 */
#ifndef MS_PROVIDERS_PYMALLOC_H
#define MS_PROVIDERS_PYMALLOC_H

#include <stdint.h>

/* The figures of one arena. in_use and alloc are known only when every
 * pool header the kernel backs was read and passed the checks; otherwise
 * (known 0) they are both the whole resident size, an upper bound. */
typedef struct ms__pyarena_s {
  uint64_t resident; /* bytes the kernel backs (mincore) */
  uint64_t mapped;   /* bytes mincore could see (the arena, unless gone) */
  uint64_t in_use;   /* resident bytes of pools holding a block at least */
  uint64_t alloc;    /* bytes in allocated blocks (count x block size) */
  uint32_t pools;    /* pools in use */
  int known;         /* in_use and alloc were read, not assumed */
} ms__pyarena_t;

/* Reads the arena [start, end) of this process (ARENA_SIZE bytes, as the
 * mmap interposer listed it): its resident pages with mincore, then the
 * header of each pool whose first page is resident with one
 * process_vm_readv (never a load: the program may unmap the arena
 * meanwhile), and sums the blocks each pool says are allocated. Checks
 * every header before trusting it (size class, offsets within the pool,
 * free list inside the pool, the same arena index in every pool, pools
 * carved in address order); a header that fails leaves the arena unknown.
 * No allocation, no lock: the agent's thread, under the reader lock. */
void ms__pyarena_read(uintptr_t start, uintptr_t end, ms__pyarena_t *out);

/* pymalloc's pool header, as CPython 3.8 to 3.13 lay it out on 64-bit
 * (struct pool_header in Objects/obmalloc.c), for the tests' layouts. */
typedef struct ms__pypool_hdr_s {
  uint64_t count;     /* union { block *; uint count; }: the low 32 bits */
  uint64_t freeblock; /* the pool's free list, or 0 */
  uint64_t nextpool, prevpool;
  uint32_t arenaindex, szidx, nextoffset, maxnextoffset;
} ms__pypool_hdr_t;

/* POOL_OVERHEAD: the header rounded up to ALIGNMENT (16). */
#define MS__PYPOOL_OVERHEAD 48u
/* INDEX2SIZE: block size of size class i (ALIGNMENT 16 on 64-bit). */
#define MS__PYPOOL_BLOCK(i) (((uint32_t)(i) + 1u) << 4)
/* NB_SMALL_SIZE_CLASSES: 512 / 16. */
#define MS__PYPOOL_CLASSES 32u

#endif
