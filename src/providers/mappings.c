/*
 * mappings.c - the mappings reader: memory obtained from the OS outside the
 * allocator: thread stacks, and the anonymous mappings a program (or a runtime
 * inside it: Python's object allocator, GCC's collector, a pool, a JIT) makes
 * with mmap itself. Go's Sys is everything the runtime obtained from the OS;
 * without these a native process's Sys can show a third of its memory.
 *
 * Where the figures come from:
 *   - Foreign mappings: the preload interposes mmap, munmap and mremap
 *     (src/preload/mmap.c) and lists every private anonymous mapping made
 *     through them in its table (src/core/maptable.c), with the caller's
 *     address; this file tells who made each. glibc's
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
 * headers: pymalloc.c; glibc's heaps too, while glibc is the
 * malloc: their resident pages bound its figures between two of its
 * samples), at most four times a second and at most 1% of the time (100 x
 * the cost of the last read), from the reader's thread; never on
 * the program's threads. What the figures add to a snapshot, and the
 * re-split of a heap whose allocator cannot tell backed memory from
 * committed (mimalloc), are src/compose/offheap.c's.
 */
#include <dlfcn.h>
#include <string.h>
#include <time.h>

#include "core/maptable.h"
#include "core/ranges.h"
#include "core/self.h"
#include "core/util.h"
#include "providers/mappings.h"
#include "providers/provider_int.h"
#include "providers/pymalloc.h"

static int g_want_alloc;  /* measure the allocator's own mappings too */
static int g_want_arenas; /* measure glibc's arena heaps too */

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
  const void *afn = ms__map_allocator();
  int kind = OWNER_OTHER;
  if (ms__self_object(di.dli_fbase))
    kind = OWNER_SELF;
  else if ((afn && dladdr(afn, &ai) && ai.dli_fbase == di.dli_fbase) ||
           starts_with(base, "libjemalloc") ||
           starts_with(base, "libtcmalloc") ||
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

static void stack_vma(ms__maps_figures_t *f, uintptr_t start, uintptr_t end) {
  uint64_t mapped;
  uint64_t res = ms__resident(start, end, &mapped);
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

/* A read-write anonymous mapping right above a PROT_NONE one: a pthread
 * stack above its guard (allocate_stack in glibc), unless it is one of
 * glibc's arena heaps or too large to be a stack. */
static int stack_like(const ms__vma_t *prev, const ms__vma_t *v) {
  return v->anon && memcmp(v->perms, "rw-p", 4) == 0 && prev->anon &&
         prev->end == v->start && memcmp(prev->perms, "---p", 4) == 0 &&
         v->end - v->start <= MS__STACK_MAX &&
         ms__map_owner((void *)v->start) == NULL;
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
  /* A block glibc mapped for a large malloc (or moved with mremap) that
   * the kernel put right above some PROT_NONE mapping: no stack either
   * (test_unseen's demo read StackSys 3.8 MiB exact, Ready 23.2 MiB
   * against 19.9 MiB of anonymous RSS, once in a loaded make check). A
   * stack's lowest bytes are the last its thread would touch: zeros. */
  if (ms__mmapped_chunk_at(v->start, v->end))
    return v->start;
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
  f->arena_resident += ms__resident(v->start, v->end, &mapped);
  f->arena_mapped += mapped;
}

/* The walk of /proc/self/maps for the stacks (and glibc's heaps, if
 * wanted): a stack-like line waits for the line after it, its heap
 * reserve if it is a heap. */
typedef struct stacks_walk_s {
  ms__maps_figures_t *f;
  ms__vma_t prev, cand;
  int have_prev, have_cand;
} stacks_walk_t;

static void stacks_line(const ms__vma_t *v, void *arg) {
  stacks_walk_t *w = arg;
  if (w->have_cand)
    stack_candidate(w->f, &w->cand, v);
  w->have_cand = 0;
  if (g_want_arenas)
    arena_vma(w->f, v);
  if (v->stack) {
    stack_vma(w->f, v->start, v->end);
  } else if (w->have_prev && stack_like(&w->prev, v)) {
    w->cand = *v;
    w->have_cand = 1;
  }
  w->prev = *v;
  w->have_prev = 1;
}

static void read_stacks(ms__maps_figures_t *f) {
  stacks_walk_t w;
  memset(&w, 0, sizeof w);
  w.f = f;
  (void)ms__maps_walk(stacks_line, &w); /* what could be read counts */
  if (w.have_cand)
    stack_candidate(f, &w.cand, NULL);
}

/* One of pymalloc's arenas: in OtherSys like any other mapping, and a heap
 * of its own whose pool headers say what of it is in use
 * (pymalloc.c). Reading them costs about a microsecond per pool
 * in use (process_vm_readv pins each page it copies from), some 65 ms per
 * GiB of Python heap, against some 2 us per arena for mincore alone: the
 * headers are read on their own slower cadence (ms__mappings_update sets
 * g_py_walk), and past MS__PY_ARENAS_READ arenas in one read the rest are
 * only measured, their in-use part unknown. */
#define MS__PY_ARENAS_READ 16384u

static int g_py_walk = 1;     /* read the pool headers in this read */
static uint64_t g_py_walk_ns; /* what reading them cost in this read */

/* The CPU time of the calling thread, ns: what a read costs is the work
 * it did, not the time it took. On a loaded machine the read of
 * /proc/self/maps waits for a CPU (and for the mmap lock, whose holder
 * may wait for one too); a second so spent would put the next read 100 s
 * away, every snapshot until then on figures from before (as glibc's
 * sample did: registry.c). */
static uint64_t thread_cpu_ns(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
    return 0;
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
static uint64_t (*g_cost_clock)(void) = thread_cpu_ns;

void ms__mappings_cost_clock_for_test(uint64_t (*cpu)(void)) {
  g_cost_clock = cpu ? cpu : thread_cpu_ns;
}

static void python_arena(ms__maps_figures_t *f, uintptr_t st, uintptr_t en) {
  ms__pyarena_t a;
  if (g_py_walk && f->python_arenas < MS__PY_ARENAS_READ) {
    uint64_t t0 = g_cost_clock();
    ms__pyarena_read(st, en, &a);
    g_py_walk_ns += g_cost_clock() - t0;
    f->python_walked++;
  } else {
    memset(&a, 0, sizeof a);
    a.resident = ms__resident(st, en, &a.mapped);
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
  unsigned used = ms__map_used();
  for (unsigned i = 0; i < used; i++) {
    uintptr_t st, en;
    const void *ra;
    if (!ms__map_get(i, &st, &en, &ra))
      continue;
    int kind = owner_kind(ra);
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
    uint64_t res = ms__resident(st, en, &mapped);
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
  f->lost = ms__map_lost();
  f->have_alloc = g_want_alloc;
  f->have_arenas = g_want_arenas;
}

int ms__mappings_alloc_view(uint64_t *res_out, uint64_t *mapped_out) {
  uint64_t res = 0, all = 0;
  unsigned used = ms__map_used();
  for (unsigned i = 0; i < used; i++) {
    uintptr_t st, en;
    const void *ra;
    if (!ms__map_get(i, &st, &en, &ra) || en <= st ||
        owner_kind(ra) != OWNER_ALLOCATOR)
      continue;
    uint64_t mapped;
    res += ms__resident(st, en, &mapped);
    all += mapped;
  }
  *res_out = res;
  *mapped_out = all;
  return ms__map_lost() ? MS_ENOSPC : 0;
}

/* ---- the cadence --------------------------------------------------------*/

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

int ms__mappings_update(int cached_only, uint64_t now) {
  uint64_t interval = 100 * g_cache.cost_ns;
  if (interval < MS__MAPS_MIN_INTERVAL_NS)
    interval = MS__MAPS_MIN_INTERVAL_NS;
  if (cached_only || (g_cache.have && now - g_cache.last_ns < interval))
    return 0;
  /* Python's pool headers: read at most once per max(MS__MAPS_MIN_
   * INTERVAL_NS, 100 x their last cost), so that a large Python heap
   * does not slow the cadence of everything else. */
  uint64_t walk_interval = 100 * g_walk.cost_ns;
  if (walk_interval < MS__MAPS_MIN_INTERVAL_NS)
    walk_interval = MS__MAPS_MIN_INTERVAL_NS;
  g_py_walk = !g_walk.have || now - g_walk.last_ns >= walk_interval;
  g_py_walk_ns = 0;
  uint64_t cpu0 = g_cost_clock();
  ms__mappings_read(&g_cache.fig);
  uint64_t spent = g_cost_clock() - cpu0;
  uint64_t done = ms__now_mono_ns();
  g_cache.cost_ns = spent > g_py_walk_ns ? spent - g_py_walk_ns : 0;
  g_cache.last_ns = done;
  g_cache.have = 1;
  python_walked(&g_cache.fig, done);
  g_py_walk = 1;
  ms__debug(
      "memstats: mappings read in %llu us: %u stacks, %llu KiB "
      "resident; outside the allocator %llu KiB resident, %u "
      "python arenas (%llu KiB in allocated blocks, %u unread; "
      "headers read in %llu us)%s\n",
      (unsigned long long)(g_cache.cost_ns / 1000), g_cache.fig.threads_stacks,
      (unsigned long long)(g_cache.fig.stack_resident >> 10),
      (unsigned long long)(g_cache.fig.other_resident >> 10),
      g_cache.fig.python_arenas,
      (unsigned long long)(g_cache.fig.python_alloc >> 10),
      g_cache.fig.python_unknown, (unsigned long long)(g_py_walk_ns / 1000),
      g_cache.fig.lost ? " (table full: some not counted)" : "");
  return 1;
}
