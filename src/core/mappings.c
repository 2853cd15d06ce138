/*
 * mappings.c - memory obtained from the OS outside the allocator: thread
 * stacks, and the anonymous mappings a program (or a runtime inside it:
 * Python's object allocator, GCC's collector, a pool, a JIT) makes with
 * mmap itself. Go's Sys is everything the runtime obtained from the OS;
 * without these a native process's Sys can show a third of its memory.
 *
 * Where the figures come from:
 *   - Foreign mappings: the preload interposes mmap, munmap and mremap
 *     (src/preload/mmap.c) and lists every private anonymous mapping made
 *     through them in the table below, with the caller's address. glibc's
 *     own mappings (malloc's arenas and large blocks, thread stacks, the
 *     dynamic loader's) are made by internal calls that never reach an
 *     interposer, so the table holds only what code outside libc mapped.
 *     An allocator that maps through the PLT (jemalloc, tcmalloc,
 *     mimalloc, Boehm GC) is told apart at read time by the caller's
 *     object (dladdr): its memory is its provider's, already in HeapSys.
 *     Interposing rather than classifying /proc/self/maps: an anonymous
 *     line of the maps file does not say who made it (glibc's large
 *     blocks, jemalloc's extents and Python's arenas look alike), and
 *     adjacent mappings of different owners merge into one line.
 *   - Stacks: the main thread's ([stack] in /proc/self/maps) and each
 *     pthread stack, found in /proc/self/maps as glibc lays them out: a
 *     read-write anonymous mapping right above its PROT_NONE guard
 *     (allocate_stack in glibc); glibc's own arena heaps have their
 *     PROT_NONE part above, up to their 64 MiB boundary, or start with a
 *     heap_info on a 64 MiB boundary (two or more heaps merged into one
 *     line), so they are not taken for one. Stacks glibc keeps cached
 *     after their thread ended are counted too: that memory is still the
 *     process's. A pthread
 *     created with guardsize 0 is not recognised (its stack shows in the
 *     gap between Ready and the kernel's anonymous RSS).
 *
 * What is counted, and how: only what the kernel backs is Ready. A
 * mapping's whole size goes to OtherSys, a stack's to StackSys (its
 * resident pages, by mincore, to StackInuse); the part of them the kernel
 * does not back (never touched, or handed back with MADV_DONTNEED) to
 * OtherReleased and StackReleased, and to their sum OffHeapReleased, a
 * term of Prepared, as HeapSys holds HeapReleased.
 * What libmemstats itself holds (the agent thread's stack, the mappings
 * made from its own object, its data and bss) is in no class but its own
 * figure, MemstatsSelf (core/self.c); the program's shared anonymous
 * mappings are shared memory, apart from Sys (core/ranges.c).
 * The resident part of Sys is then comparable with the kernel's RssAnon
 * (KernelAnonRSS), and the gap between them is what nothing here accounts
 * for (the data and bss of the program and its libraries once written,
 * mappings made with a raw system call, and anything an allocator keeps
 * outside its own statistics).
 *
 * Cost: one read of /proc/self/maps (the kernel holds the process's mmap
 * lock for reading while it writes the text) and one mincore per 256 MiB
 * counted (one per pymalloc arena, with one process_vm_readv of its pool
 * headers: src/core/pymalloc.c; glibc's heaps too, while glibc is the
 * malloc: their resident pages bound its figures between two of its
 * samples), at most four times a second and at most 1% of the time (100 x
 * the cost of the last read), from the reader's thread; never on
 * the program's threads. The interposer's cost is a slot claimed with one
 * compare-and-swap per mmap, and a scan of the table's used part per
 * munmap: as many slots as the most mappings the program held at once
 * (its own only; the table's size bounds it).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/fields.h"
#include "core/engine.h"
#include "core/util.h"
#include "core/mappings.h"
#include "core/pymalloc.h"
#include "core/ranges.h"
#include "core/self.h"

/* ---- the table ------------------------------------------------------------
 * A slot is free when start is 0, being written when it is MS__SLOT_BUSY,
 * and holds [start, end) made by code at ra otherwise. A claimer takes a
 * free slot with a compare-and-swap to BUSY, writes end and ra, then
 * publishes start (release). Updates of one slot by two threads at once
 * would need the program to unmap one range from two threads at once: the
 * figures could then be wrong, never the memory touched (nothing here
 * dereferences a listed address; mincore on a stale range fails cleanly). */
#define MS__MAP_SLOTS 16384u
#define MS__SLOT_BUSY ((uintptr_t)1)

typedef struct ms__map_slot_s {
  uintptr_t start, end;
  const void *ra;
} ms__map_slot_t;

static ms__map_slot_t g_slots[MS__MAP_SLOTS];
static unsigned g_hwm;    /* slots [0, g_hwm) have been used (never drops) */
static unsigned g_hint;   /* where the next claim starts looking */
static int g_lost;        /* a mapping found no free slot */
static int g_want_alloc;  /* measure the allocator's own mappings too */
static int g_want_arenas; /* measure glibc's arena heaps too */
static const void *g_alloc_fn;

static void put_range(uintptr_t start, uintptr_t end, const void *ra) {
  unsigned hint = __atomic_load_n(&g_hint, __ATOMIC_RELAXED);
  for (unsigned k = 0; k < MS__MAP_SLOTS; k++) {
    unsigned i = (hint + k) % MS__MAP_SLOTS;
    ms__map_slot_t *s = &g_slots[i];
    uintptr_t zero = 0;
    if (__atomic_load_n(&s->start, __ATOMIC_RELAXED) != 0 ||
        !__atomic_compare_exchange_n(&s->start, &zero, MS__SLOT_BUSY, 0,
                                     __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
      continue;
    __atomic_store_n(&s->end, end, __ATOMIC_RELAXED);
    __atomic_store_n(&s->ra, ra, __ATOMIC_RELAXED);
    __atomic_store_n(&s->start, start, __ATOMIC_RELEASE);
    unsigned hwm = __atomic_load_n(&g_hwm, __ATOMIC_RELAXED);
    while (hwm < i + 1 &&
           !__atomic_compare_exchange_n(&g_hwm, &hwm, i + 1, 1,
                                        __ATOMIC_RELEASE, __ATOMIC_RELAXED))
      ;
    __atomic_store_n(&g_hint, i + 1, __ATOMIC_RELAXED);
    return;
  }
  __atomic_store_n(&g_lost, 1, __ATOMIC_RELAXED);
}

void ms__map_note(void *addr, size_t len, const void *ra) {
  uintptr_t ps = ms__page_size();
  uintptr_t start = (uintptr_t)addr;
  if (len == 0 || start <= MS__SLOT_BUSY || start + len < start)
    return;
  put_range(start, (start + len + ps - 1) & ~(ps - 1), ra);
}

void ms__map_forget(void *addr, size_t len) {
  uintptr_t ps = ms__page_size();
  uintptr_t a = (uintptr_t)addr, b = (a + len + ps - 1) & ~(ps - 1);
  if (len == 0 || b < a)
    return;
  unsigned hwm = __atomic_load_n(&g_hwm, __ATOMIC_ACQUIRE);
  for (unsigned i = 0; i < hwm; i++) {
    ms__map_slot_t *s = &g_slots[i];
    uintptr_t st = __atomic_load_n(&s->start, __ATOMIC_ACQUIRE);
    if (st <= MS__SLOT_BUSY)
      continue;
    uintptr_t en = __atomic_load_n(&s->end, __ATOMIC_RELAXED);
    if (en <= a || st >= b)
      continue;
    if (a <= st && en <= b) {
      /* The next claim starts at the slot freed last: a program that maps
       * and unmaps in a loop reuses one slot, and the scanned part stays
       * as long as the most mappings it held at once. */
      if (__atomic_compare_exchange_n(&s->start, &st, 0, 0, __ATOMIC_RELEASE,
                                      __ATOMIC_RELAXED))
        __atomic_store_n(&g_hint, i, __ATOMIC_RELAXED);
    } else if (a <= st) {
      __atomic_store_n(&s->start, b, __ATOMIC_RELEASE);
    } else if (en <= b) {
      __atomic_store_n(&s->end, a, __ATOMIC_RELEASE);
    } else { /* a hole in the middle: two pieces */
      __atomic_store_n(&s->end, a, __ATOMIC_RELEASE);
      put_range(b, en, __atomic_load_n(&s->ra, __ATOMIC_RELAXED));
    }
  }
}

const void *ms__map_owner(void *addr) {
  uintptr_t a = (uintptr_t)addr;
  unsigned hwm = __atomic_load_n(&g_hwm, __ATOMIC_ACQUIRE);
  for (unsigned i = 0; i < hwm; i++) {
    ms__map_slot_t *s = &g_slots[i];
    uintptr_t st = __atomic_load_n(&s->start, __ATOMIC_ACQUIRE);
    if (st > MS__SLOT_BUSY && st <= a &&
        a < __atomic_load_n(&s->end, __ATOMIC_RELAXED))
      return __atomic_load_n(&s->ra, __ATOMIC_RELAXED);
  }
  return NULL;
}

void ms__map_set_allocator(const void *malloc_fn) {
  __atomic_store_n(&g_alloc_fn, malloc_fn, __ATOMIC_RELAXED);
}

/* ---- reading --------------------------------------------------------------*/

/* Resident pages of [start, end), by mincore in steps of 256 MiB; a step
 * that is no longer mapped (ENOMEM) counts neither as resident nor as
 * unbacked: *mapped gets only what mincore could see. */
static uint64_t resident(uintptr_t start, uintptr_t end, uint64_t *mapped) {
  static unsigned char vec[65536];
  uintptr_t ps = ms__page_size();
  uint64_t res = 0;
  *mapped = 0;
  for (uintptr_t p = start; p < end;) {
    uintptr_t n = (end - p) / ps;
    if (n > sizeof vec)
      n = sizeof vec;
    if (n == 0)
      break;
    if (mincore((void *)p, n * ps, vec) == 0) {
      for (uintptr_t i = 0; i < n; i++)
        res += vec[i] & 1;
      *mapped += n * ps;
    }
    p += n * ps;
  }
  return res * ps;
}

/* Who made a mapping, by the object its caller's address is in. */
enum { OWNER_OTHER = 0, OWNER_ALLOCATOR, OWNER_PYTHON, OWNER_SELF };

static int starts_with(const char *s, const char *prefix) {
  return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* dladdr looks for the nearest symbol through the whole object, tens of
 * microseconds in a large one: the callers seen (a program maps from a
 * handful of places) are remembered, and so are the objects. */
static int owner_kind_of(const void *ra);

static int owner_kind(const void *ra) {
  static struct {
    const void *ra;
    int kind;
  } seen[64];
  static unsigned nseen, next;
  for (unsigned i = 0; i < nseen; i++)
    if (seen[i].ra == ra)
      return seen[i].kind;
  int kind = owner_kind_of(ra);
  unsigned i = nseen < sizeof seen / sizeof seen[0] ? nseen++ : next++ % nseen;
  seen[i].ra = ra;
  seen[i].kind = kind;
  return kind;
}

static int owner_kind_of(const void *ra) {
  static struct {
    const void *base;
    int kind;
  } cache[16];
  static unsigned ncache;
  Dl_info di, ai;
  if (!ra || !dladdr(ra, &di) || !di.dli_fname)
    return OWNER_OTHER;
  for (unsigned i = 0; i < ncache; i++)
    if (cache[i].base == di.dli_fbase)
      return cache[i].kind;
  const char *base = strrchr(di.dli_fname, '/');
  base = base ? base + 1 : di.dli_fname;
  const void *afn = __atomic_load_n(&g_alloc_fn, __ATOMIC_RELAXED);
  int kind = OWNER_OTHER;
  if (ms__self_object(di.dli_fbase))
    kind = OWNER_SELF;
  else if ((afn && dladdr(afn, &ai) && ai.dli_fbase == di.dli_fbase) ||
      starts_with(base, "libjemalloc") || starts_with(base, "libtcmalloc") ||
      starts_with(base, "libmimalloc") || starts_with(base, "libgc.") ||
      starts_with(base, "libgc-"))
    kind = OWNER_ALLOCATOR;
  else if (starts_with(base, "python") || starts_with(base, "libpython"))
    kind = OWNER_PYTHON;
  if (ncache < sizeof cache / sizeof cache[0]) {
    cache[ncache].base = di.dli_fbase;
    cache[ncache].kind = kind;
    ncache++;
  }
  return kind;
}

/* One line of /proc/self/maps: "start-end perms offset dev inode path". */
typedef struct ms__vma_s {
  uintptr_t start, end;
  char perms[5];
  int anon;  /* inode 0 and no path (or an [anon:...] name) */
  int stack; /* the main thread's [stack] */
  int brk;   /* [heap]: the main arena's, where malloc is glibc's */
} ms__vma_t;

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
  return 1;
}

static void stack_vma(ms__maps_figures_t *f, uintptr_t start, uintptr_t end) {
  uint64_t mapped;
  uint64_t res = resident(start, end, &mapped);
  if (ms__self_stack(start, end)) { /* the agent's: the library's own */
    f->self_resident += res;
    f->self_mapped += mapped;
    return;
  }
  f->stack_resident += res;
  f->stack_unbacked += mapped - res;
  f->threads_stacks++;
}

/* The largest pthread stack recognised: glibc's default is the stack
 * rlimit (8 MiB); larger read-write regions above a PROT_NONE one are
 * heaps and reservations of runtimes (a sanitizer's shadow memory is
 * terabytes), which walking with mincore would take seconds. */
#define MS__STACK_MAX ((uintptr_t)256 << 20)

/* glibc's arena heaps (HEAP_MAX, 64 MiB on 64-bit) start 64 MiB-aligned
 * with their read-write part, and reserve the rest of their 64 MiB as
 * PROT_NONE right above it; a heap after another heap's reserved tail has
 * a PROT_NONE mapping below it too, as a stack has its guard. */
#define MS__HEAP_MAX ((uintptr_t)64 << 20)

/* A read-write anonymous mapping right above a PROT_NONE one: a pthread
 * stack above its guard (allocate_stack in glibc), unless it is one of
 * glibc's arena heaps or too large to be a stack. */
static int stack_like(const ms__vma_t *prev, const ms__vma_t *v) {
  return v->anon && memcmp(v->perms, "rw-p", 4) == 0 && prev->anon &&
         prev->end == v->start && memcmp(prev->perms, "---p", 4) == 0 &&
         v->end - v->start <= MS__STACK_MAX &&
         ms__map_owner((void *)v->start) == NULL;
}

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
 * Returns 0, or -1 if the bytes could not all be read. */
static int read_self(uintptr_t addr, void *out, size_t len) {
  struct iovec local = {out, len}, remote = {(void *)addr, len};
  ssize_t n = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
  if (n == (ssize_t)len)
    return 0;
  if (n >= 0 || (errno != ENOSYS && errno != EPERM))
    return -1;
  int fd = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  n = pread(fd, out, len, (off_t)addr);
  close(fd);
  return n == (ssize_t)len ? 0 : -1;
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

/* Where the stack in v, a stack-like line, ends: at the first 64 MiB
 * boundary in it from which it is glibc's arena heaps instead (v->start:
 * no stack at all; v->end: no heap). A heap whose read-write part fills
 * its 64 MiB and the next heap mapped right above it (glibc's new_heap
 * tries the address after the last heap first) are one line of the maps
 * file, since the kernel merges adjacent mappings of the same kind: 64 MiB
 * and more, above the PROT_NONE reserve of yet another heap. Such a line,
 * up to MS__STACK_MAX, was taken for a thread stack whole (a four-arena
 * program: StackSys 128.1 MiB exact against 61 KiB of real stacks, once
 * in five runs), so each boundary of the line is looked at for a
 * heap_info. A 64 MiB-aligned line is a heap, whatever it starts with,
 * when its read-write part fills its 64 MiB, or when the next mapping is
 * its PROT_NONE reserve up to the end of the 64 MiB (next NULL: v was the
 * last line). A 64 MiB-aligned start alone does not say it: kernels that
 * align large anonymous mappings to huge-page boundaries (6.7 and later)
 * put thread stacks on 64 MiB boundaries once in 16 or so, and such a
 * stack was taken for a heap and not counted. Nor do the lines alone:
 * /proc/self/maps is read in pieces, and a heap that grows between two
 * reads (its read-write part taken from its reserve) ends where its
 * reserve no longer starts; such a heap was taken for a stack
 * (test_unseen's demo: StackSys 9.5 MiB, Ready 29.2 MiB against 19.9 MiB
 * of anonymous RSS, once in a loaded make check). The bottom of a stack's
 * mapping is the last its thread would touch, zeros: no heap_info. */
static uintptr_t stack_end(const ms__vma_t *v, const ms__vma_t *next) {
  if (v->start % MS__HEAP_MAX == 0) {
    if (v->end - v->start == MS__HEAP_MAX)
      return v->start;
    if (next && next->anon && next->start == v->end &&
        memcmp(next->perms, "---p", 4) == 0 &&
        next->end == ((v->end + MS__HEAP_MAX - 1) & ~(MS__HEAP_MAX - 1)))
      return v->start;
  }
  /* At most MS__STACK_MAX / 64 MiB + 1 boundaries (stack_like). */
  for (uintptr_t b = (v->start + MS__HEAP_MAX - 1) & ~(MS__HEAP_MAX - 1);
       b < v->end && b >= v->start; b += MS__HEAP_MAX)
    if (ms__arena_heap_at(b, v->end))
      return b;
  return v->end;
}

/* Counts the stack part of a stack-like line. */
static void stack_candidate(ms__maps_figures_t *f, const ms__vma_t *v,
                            const ms__vma_t *next) {
  uintptr_t end = stack_end(v, next);
  if (end > v->start)
    stack_vma(f, v->start, end);
}

/* glibc's heaps, for the kernel's view of them: the main arena's [heap]
 * and every read-write line that starts with an arena heap (the heaps the
 * kernel merged into one line with it included). Their read-write size and
 * resident pages bound what glibc's figures, shifted since its last
 * sample, may call mapped and backed (a trim between two samples). */
static void arena_vma(ms__maps_figures_t *f, const ms__vma_t *v) {
  if (!v->brk && !(v->anon && memcmp(v->perms, "rw-p", 4) == 0 &&
                   ms__arena_heap_at(v->start, v->end)))
    return;
  uint64_t mapped;
  f->arena_resident += resident(v->start, v->end, &mapped);
  f->arena_mapped += mapped;
}

/* Walks /proc/self/maps for the stacks (and glibc's heaps, if wanted). */
static void read_stacks(ms__maps_figures_t *f) {
  static char buf[16384];
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return;
  size_t have = 0;
  ms__vma_t prev, cand;
  int have_prev = 0, have_cand = 0;
  memset(&cand, 0, sizeof cand);
  for (;;) {
    ssize_t r = read(fd, buf + have, sizeof buf - have);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      break;
    have += (size_t)r;
    char *p = buf, *end = buf + have;
    for (;;) {
      char *nl = memchr(p, '\n', (size_t)(end - p));
      if (!nl)
        break;
      ms__vma_t v;
      if (parse_vma(p, nl, &v)) {
        /* A stack-like line waits for the line after it: its heap
         * reserve, if it is a heap. */
        if (have_cand)
          stack_candidate(f, &cand, &v);
        have_cand = 0;
        if (g_want_arenas)
          arena_vma(f, &v);
        if (v.stack) {
          stack_vma(f, v.start, v.end);
        } else if (have_prev && stack_like(&prev, &v)) {
          cand = v;
          have_cand = 1;
        }
        prev = v;
        have_prev = 1;
      }
      p = nl + 1;
    }
    /* Keep the unfinished line; a line longer than the buffer (a path
     * that long) is dropped. */
    have = (size_t)(end - p);
    if (have == sizeof buf)
      have = 0;
    memmove(buf, p, have);
  }
  if (have_cand)
    stack_candidate(f, &cand, NULL);
  close(fd);
}

/* One of pymalloc's arenas: in OtherSys like any other mapping, and a heap
 * of its own whose pool headers say what of it is in use
 * (src/core/pymalloc.c). Reading them costs about a microsecond per pool
 * in use (process_vm_readv pins each page it copies from), some 65 ms per
 * GiB of Python heap, against some 2 us per arena for mincore alone: the
 * headers are read on their own slower cadence (ms__mappings_fill sets
 * g_py_walk), and past MS__PY_ARENAS_READ arenas in one read the rest are
 * only measured, their in-use part unknown. */
#define MS__PY_ARENAS_READ 16384u

static int g_py_walk = 1;     /* read the pool headers in this read */
static uint64_t g_py_walk_ns; /* what reading them cost in this read */

static void python_arena(ms__maps_figures_t *f, uintptr_t st, uintptr_t en) {
  ms__pyarena_t a;
  if (g_py_walk && f->python_arenas < MS__PY_ARENAS_READ) {
    uint64_t t0 = ms__now_mono_ns();
    ms__pyarena_read(st, en, &a);
    g_py_walk_ns += ms__now_mono_ns() - t0;
    f->python_walked++;
  } else {
    memset(&a, 0, sizeof a);
    a.resident = resident(st, en, &a.mapped);
    a.in_use = a.alloc = a.resident;
  }
  f->other_resident += a.resident;
  f->other_unbacked += a.mapped - a.resident;
  f->python_resident += a.resident;
  f->python_mapped += a.mapped;
  f->python_arenas++;
  f->python_in_use += a.in_use;
  f->python_alloc += a.alloc;
  f->python_unknown += !a.known;
}

void ms__mappings_read(ms__maps_figures_t *f) {
  memset(f, 0, sizeof *f);
  read_stacks(f);
  unsigned hwm = __atomic_load_n(&g_hwm, __ATOMIC_ACQUIRE);
  for (unsigned i = 0; i < hwm; i++) {
    ms__map_slot_t *s = &g_slots[i];
    uintptr_t st = __atomic_load_n(&s->start, __ATOMIC_ACQUIRE);
    if (st <= MS__SLOT_BUSY)
      continue;
    uintptr_t en = __atomic_load_n(&s->end, __ATOMIC_RELAXED);
    int kind = owner_kind(__atomic_load_n(&s->ra, __ATOMIC_RELAXED));
    if (en <= st || (kind == OWNER_ALLOCATOR && !g_want_alloc))
      continue;
    /* pymalloc maps each arena on its own, ARENA_SIZE bytes: 1 MiB since
     * CPython 3.10, 256 KiB before. Python's other mappings of its own
     * (a 16 KiB one in 3.11) stay in OtherSys, not counted as arenas. */
    if (kind == OWNER_PYTHON &&
        (en - st == (uintptr_t)1 << 20 || en - st == (uintptr_t)256 << 10)) {
      python_arena(f, st, en);
      continue;
    }
    uint64_t mapped;
    uint64_t res = resident(st, en, &mapped);
    if (kind == OWNER_ALLOCATOR || kind == OWNER_SELF) {
      *(kind == OWNER_SELF ? &f->self_resident : &f->alloc_resident) += res;
      *(kind == OWNER_SELF ? &f->self_mapped : &f->alloc_mapped) += mapped;
      continue;
    }
    /* Pages the program handed back with MADV_FREE are Prepared while
     * the kernel keeps them (core/ranges.c). */
    uint64_t lazy = ms__ranges_resident(&ms__lazy_ranges, st, en, NULL);
    lazy = lazy < res ? lazy : res;
    res -= lazy;
    f->other_lazy += lazy;
    f->other_resident += res;
    f->other_unbacked += mapped - res;
  }
  f->shared_resident = ms__ranges_resident(&ms__shared_ranges, 0, UINTPTR_MAX,
                                           &f->shared_mapped);
  uint64_t static_mapped;
  f->self_resident += ms__self_static(&static_mapped);
  f->self_mapped += static_mapped;
  f->lost = __atomic_load_n(&g_lost, __ATOMIC_RELAXED);
  f->have_alloc = g_want_alloc;
  f->have_arenas = g_want_arenas;
}

int ms__mappings_alloc_view(uint64_t *res_out, uint64_t *mapped_out) {
  uint64_t res = 0, all = 0;
  unsigned hwm = __atomic_load_n(&g_hwm, __ATOMIC_ACQUIRE);
  for (unsigned i = 0; i < hwm; i++) {
    ms__map_slot_t *s = &g_slots[i];
    uintptr_t st = __atomic_load_n(&s->start, __ATOMIC_ACQUIRE);
    if (st <= MS__SLOT_BUSY)
      continue;
    uintptr_t en = __atomic_load_n(&s->end, __ATOMIC_RELAXED);
    if (en <= st || owner_kind(__atomic_load_n(&s->ra, __ATOMIC_RELAXED)) !=
                        OWNER_ALLOCATOR)
      continue;
    uint64_t mapped;
    res += resident(st, en, &mapped);
    all += mapped;
  }
  *res_out = res;
  *mapped_out = all;
  return __atomic_load_n(&g_lost, __ATOMIC_RELAXED) ? -1 : 0;
}

/* ---- into the snapshot ----------------------------------------------------*/

static struct {
  int have;
  uint64_t last_ns, cost_ns;
  ms__maps_figures_t fig;
} g_cache;

void ms__mappings_want(unsigned what) {
  /* Measured from the first snapshot that asks: a read made before that
   * is taken again. */
  if ((what & MS__MAPS_ALLOC) && !g_want_alloc) {
    g_want_alloc = 1;
    g_cache.have = 0;
  }
  if ((what & MS__MAPS_ARENAS) && !g_want_arenas) {
    g_want_arenas = 1;
    g_cache.have = 0;
  }
}

const ms__maps_figures_t *ms__mappings_cached(uint64_t *read_ns) {
  if (!g_cache.have)
    return NULL;
  *read_ns = g_cache.last_ns;
  return &g_cache.fig;
}

static void add_to(ms_snapshot_t *s, ms_field_t f, uint64_t v, ms_quality_t q,
                   int idx) {
  if (!ms__field_known(s, f)) {
    ms__field_set_u64(s, f, v);
    ms__set_quality(s, f, q, idx);
    return;
  }
  uint64_t was = ms__field_u64(s, f);
  ms__field_set_u64(s, f, was + v);
  /* The field's source is whoever gave most of it. */
  if (v > was)
    s->source[f] = (uint8_t)(idx < 0 ? 0xff : idx);
  if (s->quality[f] > q)
    s->quality[f] = (uint8_t)q;
}

/* For an allocator that cannot tell backed memory from committed memory
 * (mimalloc): re-splits the heap figures its provider set by the resident
 * pages of the allocator's own mappings (HeapReleased = HeapSys - backed,
 * HeapInuse at most backed, HeapIdle the rest), all estimated. Returns 0
 * and changes nothing when the interposer listed none of its mappings (the
 * library linked, no preload): the provider's figures then stand. */
static int heap_backing(ms_snapshot_t *s) {
  const ms__maps_figures_t *f = &g_cache.fig;
  if (!g_cache.have || !g_want_alloc || f->alloc_mapped == 0 ||
      !ms__field_known(s, MS_F_HEAP_SYS))
    return 0;
  uint64_t sys = s->heap_sys;
  uint64_t backed = f->alloc_resident < sys ? f->alloc_resident : sys;
  uint64_t inuse = ms__field_known(s, MS_F_HEAP_INUSE) && s->heap_inuse < backed
                       ? s->heap_inuse
                       : backed;
  ms_field_t fs[] = {MS_F_HEAP_RELEASED, MS_F_HEAP_INUSE, MS_F_HEAP_IDLE};
  uint64_t vs[] = {sys - backed, inuse, sys - inuse};
  for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++) {
    ms__field_set_u64(s, fs[i], vs[i]);
    if (s->quality[fs[i]] == MS_Q_UNAVAILABLE ||
        s->quality[fs[i]] == MS_Q_EXACT)
      s->quality[fs[i]] = MS_Q_ESTIMATED;
  }
  return 1;
}

/* The last read of Python's pool headers: when, what it cost, and what of
 * the arenas' resident bytes it found in use and allocated. */
static struct {
  int have;
  uint64_t last_ns, cost_ns;
  double in_use, alloc; /* fractions of the resident bytes */
} g_walk;

/* After a read: one that read the headers is remembered; one that did not
 * takes the last read's fractions of today's resident bytes, estimated
 * (every arena counts as unknown). */
static void python_walked(ms__maps_figures_t *f, uint64_t done) {
  if (f->python_walked) {
    g_walk.have = 1;
    g_walk.last_ns = done;
    g_walk.cost_ns = g_py_walk_ns;
    g_walk.in_use = f->python_resident
                        ? (double)f->python_in_use / (double)f->python_resident
                        : 1.0;
    g_walk.alloc = f->python_resident
                       ? (double)f->python_alloc / (double)f->python_resident
                       : 1.0;
  } else if (f->python_arenas && g_walk.have) {
    f->python_in_use = (uint64_t)((double)f->python_resident * g_walk.in_use);
    f->python_alloc = (uint64_t)((double)f->python_resident * g_walk.alloc);
    if (f->python_alloc > f->python_in_use)
      f->python_alloc = f->python_in_use;
    f->python_unknown = f->python_arenas;
  }
}

void ms__mappings_fill(ms_snapshot_t *s, int cached_only, int heap_backing_on) {
  uint64_t now = ms__now_mono_ns();
  int fresh = 0;
  if (heap_backing_on)
    ms__mappings_want(MS__MAPS_ALLOC);
  uint64_t interval = 100 * g_cache.cost_ns;
  if (interval < MS__MAPS_MIN_INTERVAL_NS)
    interval = MS__MAPS_MIN_INTERVAL_NS;
  if (!cached_only && (!g_cache.have || now - g_cache.last_ns >= interval)) {
    /* Python's pool headers: read at most once per max(MS__MAPS_MIN_
     * INTERVAL_NS, 100 x their last cost), so that a large Python heap
     * does not slow the cadence of everything else. */
    uint64_t walk_interval = 100 * g_walk.cost_ns;
    if (walk_interval < MS__MAPS_MIN_INTERVAL_NS)
      walk_interval = MS__MAPS_MIN_INTERVAL_NS;
    g_py_walk = !g_walk.have || now - g_walk.last_ns >= walk_interval;
    g_py_walk_ns = 0;
    ms__mappings_read(&g_cache.fig);
    uint64_t done = ms__now_mono_ns();
    g_cache.cost_ns = done - now - g_py_walk_ns;
    g_cache.last_ns = done;
    g_cache.have = 1;
    fresh = 1;
    python_walked(&g_cache.fig, done);
    g_py_walk = 1;
    ms__debug("memstats: mappings read in %llu us: %u stacks, %llu KiB "
              "resident; outside the allocator %llu KiB resident, %u "
              "python arenas (%llu KiB in allocated blocks, %u unread; "
              "headers read in %llu us)%s\n",
              (unsigned long long)(g_cache.cost_ns / 1000),
              g_cache.fig.threads_stacks,
              (unsigned long long)(g_cache.fig.stack_resident >> 10),
              (unsigned long long)(g_cache.fig.other_resident >> 10),
              g_cache.fig.python_arenas,
              (unsigned long long)(g_cache.fig.python_alloc >> 10),
              g_cache.fig.python_unknown,
              (unsigned long long)(g_py_walk_ns / 1000),
              g_cache.fig.lost ? " (table full: some not counted)" : "");
  }
  if (!g_cache.have)
    return;
  const ms__maps_figures_t *f = &g_cache.fig;
  /* Exact while the read is younger than a snapshot's own default
   * interval (a served snapshot may be that old itself); older figures,
   * or a table that overflowed, are estimates. */
  ms_quality_t q =
      (fresh || now - g_cache.last_ns < MS__MAPS_EXACT_NS) && !f->lost
          ? MS_Q_EXACT
          : MS_Q_ESTIMATED;
  int idx = ms__snapshot_add_provider(s, "mappings");
  int oidx = idx, python_idx = -1;
  if (f->python_arenas) {
    python_idx = ms__snapshot_add_provider(s, "python");
    if (python_idx >= 0 && f->python_resident * 2 >= f->other_resident)
      oidx = python_idx;
  }
  /* Each class holds its unbacked part, as HeapSys holds HeapReleased. */
  add_to(s, MS_F_STACK_SYS, f->stack_resident + f->stack_unbacked, q, idx);
  add_to(s, MS_F_STACK_INUSE, f->stack_resident, q, idx);
  add_to(s, MS_F_STACK_RELEASED, f->stack_unbacked, q, idx);
  add_to(s, MS_F_OTHER_SYS, f->other_resident + f->other_unbacked, q, oidx);
  /* MADV_FREE'd pages the program may have written again since: an
   * estimate. */
  ms_quality_t ql =
      f->other_lazy || ms__lazy_ranges.lost ? MS_Q_ESTIMATED : q;
  add_to(s, MS_F_OTHER_RELEASED, f->other_unbacked, ql, oidx);
  add_to(s, MS_F_OFF_HEAP_RELEASED, f->stack_unbacked + f->other_unbacked, ql,
         idx);
  if (f->python_arenas) {
    /* Python's object allocator, a heap of its own inside OtherSys, with
     * what of it is in use read from its pool headers (pymalloc.c): an
     * estimate where an arena's headers could not be read. */
    int pidx = python_idx >= 0 ? python_idx : idx;
    ms_quality_t qu = f->python_unknown ? MS_Q_ESTIMATED : q;
    add_to(s, MS_F_PYTHON_ARENAS, f->python_arenas, q, pidx);
    add_to(s, MS_F_PYTHON_ARENA_SYS, f->python_mapped, q, pidx);
    add_to(s, MS_F_PYTHON_ARENA_RESIDENT, f->python_resident, q, pidx);
    add_to(s, MS_F_PYTHON_ARENA_INUSE, f->python_in_use, qu, pidx);
    add_to(s, MS_F_PYTHON_ARENA_ALLOC, f->python_alloc, qu, pidx);
  }
  /* libmemstats itself: apart from every class, with the profile table
   * (BuckHashSys, the one part of it in Sys) named in it. */
  uint64_t buck = ms__field_known(s, MS_F_BUCK_HASH_SYS) ? s->buck_hash_sys : 0;
  add_to(s, MS_F_MEMSTATS_SELF, f->self_resident + buck, q, idx);
  add_to(s, MS_F_MEMSTATS_SELF_SYS, f->self_mapped + buck, q, idx);
  /* Shared anonymous memory the program mapped: apart from Sys. */
  ms_quality_t qs = ms__shared_ranges.lost ? MS_Q_ESTIMATED : q;
  add_to(s, MS_F_SHARED_ANON, f->shared_mapped, qs, idx);
  add_to(s, MS_F_SHARED_ANON_RESIDENT, f->shared_resident, qs, idx);
  if (heap_backing_on)
    heap_backing(s);
  /* Sys is summed from its terms later, unless a provider set it already:
   * then it grows by what was added here. */
  if (ms__field_known(s, MS_F_SYS))
    add_to(s, MS_F_SYS,
           f->stack_resident + f->stack_unbacked + f->other_resident +
               f->other_unbacked,
           q, s->source[MS_F_SYS] == 0xff ? -1 : s->source[MS_F_SYS]);
}
