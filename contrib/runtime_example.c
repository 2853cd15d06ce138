/*
 * runtime_example.c - a small language runtime that reports its own memory
 * through libmemstats' public API, so that memtop can watch it.
 *
 * The "runtime" has a heap of 1 MiB chunks mapped with mmap (its spans),
 * objects of a few size classes carved from them by a bump pointer and
 * recycled through per-class free lists, and a stop-the-world mark-sweep
 * collector that runs when the heap has grown by as much as was live after
 * the previous collection (Go's GOGC=100), plus one forced collection a
 * second (as runtime.GC() would). Empty chunks go idle; chunks idle through
 * two collections are handed back to the kernel (MADV_DONTNEED).
 *
 * What it tells the library, and when:
 *   ms_heap_move   a chunk mapped (NONE->IDLE), first used (IDLE->INUSE),
 *                  emptied by a sweep (INUSE->IDLE), released
 *                  (IDLE->RELEASED), reused (RELEASED->INUSE)
 *   ms_object_alloc_at / ms_object_free_at   every object, by its address
 *                  and size (the free before the sweep puts it on a free
 *                  list), so that `memtop profile PID` shows which of the
 *                  runtime's functions hold its objects (mutate, under
 *                  alloc_obj); ms_object_alloc / ms_object_free count the
 *                  same without the profile
 *   ms_sys_add     the chunk table (MSpan) and the mark stack (GC)
 *   ms_gc_begin / ms_gc_end   each collection's pause; ms_gc_set_next
 *                  the heap size the next one aims at
 *
 * Usage: runtime_example SECONDS [--check]
 * Prints nothing by default. With --check it compares, at the end, its own
 * bookkeeping with ms_snapshot_read() and prints each figure; the exit
 * status is 1 if any differs (tests/integration/test_providers.c).
 */
#include <memstats.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define CHUNK (1u << 20)
#define MAX_CHUNKS 256
#define NCLASSES 6
#define NROOTS 4096

static const uint32_t class_size[NCLASSES] = {32, 64, 128, 256, 512, 1024};

/* An object: a header, then two references and a payload. */
typedef struct obj_s {
  uint32_t cls;
  uint32_t marked;
  struct obj_s *next_free; /* on a free list */
  struct obj_s *ref[2];
} obj_t;

typedef enum { CH_NONE, CH_IDLE, CH_INUSE, CH_RELEASED } chunk_state_t;

typedef struct chunk_s {
  char *base;
  uint32_t cls;
  uint32_t live;     /* live objects after the last sweep, plus new ones */
  uint32_t used;     /* bump pointer: objects carved so far */
  uint32_t idle_gcs; /* collections spent idle */
  chunk_state_t state;
} chunk_t;

static chunk_t *g_chunks; /* the chunk table: MSpanSys */
static int g_nchunks;
static obj_t *g_free[NCLASSES];
static int g_current[NCLASSES] = {-1, -1, -1, -1, -1, -1};
static obj_t *g_roots[NROOTS];
static obj_t **g_mark_stack; /* GCSys */
static size_t g_mark_cap;

/* The runtime's own bookkeeping, to compare with the snapshot. */
static struct {
  uint64_t mallocs, frees, live_objects, live_bytes, total_bytes;
  uint64_t inuse, idle, released; /* heap bytes by state */
  uint64_t num_gc, num_forced, next_gc, gc_sys, mspan_sys;
} g_book;

static uint64_t g_alloc_since_gc;
static uint64_t g_rng = 88172645463325252ull;

static uint64_t rnd(void) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return g_rng;
}

static const ms_span_state_t to_span[] = {MS_SPAN_NONE, MS_SPAN_IDLE,
                                          MS_SPAN_INUSE, MS_SPAN_RELEASED};

static uint64_t *book_of(chunk_state_t st) {
  switch (st) {
  case CH_IDLE:
    return &g_book.idle;
  case CH_INUSE:
    return &g_book.inuse;
  case CH_RELEASED:
    return &g_book.released;
  default:
    return NULL;
  }
}

static void chunk_move(chunk_t *c, chunk_state_t to) {
  ms_heap_move(to_span[c->state], to_span[to], CHUNK);
  uint64_t *from_b = book_of(c->state), *to_b = book_of(to);
  if (from_b)
    *from_b -= CHUNK;
  if (to_b)
    *to_b += CHUNK;
  c->state = to;
}

/* Returns a chunk for class cls: an idle or released one, or a new one. */
static int chunk_get(uint32_t cls) {
  for (int i = 0; i < g_nchunks; i++) {
    chunk_t *c = &g_chunks[i];
    if (c->state == CH_IDLE || c->state == CH_RELEASED) {
      chunk_move(c, CH_INUSE);
      c->cls = cls;
      c->used = c->live = c->idle_gcs = 0;
      return i;
    }
  }
  if (g_nchunks == MAX_CHUNKS)
    return -1;
  void *base = mmap(NULL, CHUNK, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED)
    return -1;
  chunk_t *c = &g_chunks[g_nchunks];
  memset(c, 0, sizeof *c);
  c->base = base;
  c->state = CH_NONE;
  chunk_move(c, CH_IDLE); /* mapped */
  chunk_move(c, CH_INUSE);
  c->cls = cls;
  return g_nchunks++;
}

static chunk_t *chunk_of(const obj_t *o) {
  for (int i = 0; i < g_nchunks; i++)
    if ((const char *)o >= g_chunks[i].base &&
        (const char *)o < g_chunks[i].base + CHUNK)
      return &g_chunks[i];
  return NULL;
}

static void collect(int forced);

static obj_t *alloc_obj(uint32_t cls) {
  if (g_alloc_since_gc >= g_book.next_gc - g_book.live_bytes)
    collect(0);
  obj_t *o = g_free[cls];
  if (o) {
    g_free[cls] = o->next_free;
  } else {
    int ci = g_current[cls];
    if (ci < 0 || g_chunks[ci].used == CHUNK / class_size[cls] ||
        g_chunks[ci].cls != cls || g_chunks[ci].state != CH_INUSE) {
      ci = chunk_get(cls);
      if (ci < 0)
        return NULL;
      g_current[cls] = ci;
    }
    chunk_t *c = &g_chunks[ci];
    o = (obj_t *)(c->base + (size_t)c->used++ * class_size[cls]);
  }
  memset(o, 0, sizeof *o);
  o->cls = cls;
  chunk_of(o)->live++;
  uint32_t size = class_size[cls];
  ms_object_alloc_at(o, size);
  g_book.mallocs++;
  g_book.live_objects++;
  g_book.live_bytes += size;
  g_book.total_bytes += size;
  g_alloc_since_gc += size;
  return o;
}

/* ---- the collector
 * ---------------------------------------------------------*/

static void push(obj_t *o, size_t *n) {
  if (!o || o->marked)
    return;
  o->marked = 1;
  if (*n == g_mark_cap) {
    size_t cap = g_mark_cap ? g_mark_cap * 2 : 4096;
    obj_t **s = realloc(g_mark_stack, cap * sizeof *s);
    if (!s)
      return; /* the object stays marked, its children are not traced */
    ms_sys_add(MS_SYS_GC, (int64_t)((cap - g_mark_cap) * sizeof *s), 0);
    g_book.gc_sys += (cap - g_mark_cap) * sizeof *s;
    g_mark_stack = s;
    g_mark_cap = cap;
  }
  g_mark_stack[(*n)++] = o;
}

static void collect(int forced) {
  ms_gc_begin(forced);
  size_t n = 0;
  for (int i = 0; i < NROOTS; i++)
    push(g_roots[i], &n);
  while (n > 0) {
    obj_t *o = g_mark_stack[--n];
    push(o->ref[0], &n);
    push(o->ref[1], &n);
  }
  /* Sweep: rebuild the free lists from unmarked objects of in-use chunks. */
  for (int k = 0; k < NCLASSES; k++) {
    g_free[k] = NULL;
    g_current[k] = -1;
  }
  for (int i = 0; i < g_nchunks; i++) {
    chunk_t *c = &g_chunks[i];
    if (c->state != CH_INUSE) {
      if (c->state == CH_IDLE && ++c->idle_gcs >= 2) {
        madvise(c->base, CHUNK, MADV_DONTNEED);
        chunk_move(c, CH_RELEASED);
      }
      continue;
    }
    uint32_t size = class_size[c->cls];
    c->live = 0;
    obj_t *free_list = NULL;
    for (uint32_t j = 0; j < c->used; j++) {
      obj_t *o = (obj_t *)(c->base + (size_t)j * size);
      if (o->marked) {
        o->marked = 0;
        c->live++;
      } else if (o->cls != UINT32_MAX) {
        ms_object_free_at(o, size);
        g_book.frees++;
        g_book.live_objects--;
        g_book.live_bytes -= size;
        o->cls = UINT32_MAX; /* swept */
        o->next_free = free_list;
        free_list = o;
      } else {
        o->next_free = free_list;
        free_list = o;
      }
    }
    if (c->live == 0) {
      c->idle_gcs = 0;
      chunk_move(c, CH_IDLE);
      continue;
    }
    /* Chain this chunk's free objects onto its class's list. */
    while (free_list) {
      obj_t *next = free_list->next_free;
      free_list->next_free = g_free[c->cls];
      g_free[c->cls] = free_list;
      free_list = next;
    }
    if (c->used < CHUNK / size)
      g_current[c->cls] = i;
  }
  g_alloc_since_gc = 0;
  g_book.next_gc =
      g_book.live_bytes * 2 < 4 * CHUNK ? 4 * CHUNK : g_book.live_bytes * 2;
  ms_gc_set_next(g_book.next_gc);
  g_book.num_gc++;
  g_book.num_forced += forced != 0;
  ms_gc_end();
}

/* ---- the mutator
 * -----------------------------------------------------------*/

static void mutate(void) {
  uint32_t cls = (uint32_t)(rnd() % NCLASSES);
  obj_t *o = alloc_obj(cls);
  if (!o)
    return;
  uint64_t r = rnd();
  int slot = (int)(r % NROOTS);
  if (g_roots[slot] && (r >> 20) % 4 == 0) {
    /* Hang the new object under a root: it lives as long as that root. */
    g_roots[slot]->ref[(r >> 30) & 1] = o;
  } else {
    g_roots[slot] = o; /* the old root's tree becomes garbage */
  }
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int check_u64(const char *name, uint64_t got, uint64_t want) {
  printf("%-14s %12llu %12llu %s\n", name, (unsigned long long)got,
         (unsigned long long)want, got == want ? "ok" : "DIFFERENT");
  return got == want ? 0 : 1;
}

static int check(void) {
  ms_snapshot_t s;
  if (ms_snapshot_read(&s, sizeof s) != 0) {
    printf("ms_snapshot_read failed\n");
    return 1;
  }
  int bad = 0;
  printf("%-14s %12s %12s\n", "field", "snapshot", "runtime");
  bad += check_u64("Mallocs", s.mallocs, g_book.mallocs);
  bad += check_u64("Frees", s.frees, g_book.frees);
  bad += check_u64("HeapObjects", s.heap_objects, g_book.live_objects);
  bad += check_u64("HeapAlloc", s.heap_alloc, g_book.live_bytes);
  bad += check_u64("TotalAlloc", s.total_alloc, g_book.total_bytes);
  bad += check_u64("HeapInuse", s.heap_inuse, g_book.inuse);
  bad += check_u64("HeapIdle", s.heap_idle, g_book.idle + g_book.released);
  bad += check_u64("HeapReleased", s.heap_released, g_book.released);
  bad += check_u64("HeapSys", s.heap_sys,
                   g_book.inuse + g_book.idle + g_book.released);
  bad += check_u64("MSpanSys", s.mspan_sys, g_book.mspan_sys);
  bad += check_u64("GCSys", s.gc_sys, g_book.gc_sys);
  bad += check_u64("NumGC", s.num_gc, g_book.num_gc);
  bad += check_u64("NumForcedGC", s.num_forced_gc, g_book.num_forced);
  bad += check_u64("NextGC", s.next_gc, g_book.next_gc);
  /* Each class holds its unbacked part (the stacks' in StackSys). */
  uint64_t parts = s.heap_sys + s.stack_sys + s.mspan_sys + s.mcache_sys +
                   s.buck_hash_sys + s.gc_sys + s.other_sys;
  bad += check_u64("Sys=sum(*Sys)", s.sys, parts);
  uint64_t hist = ms_pause_hist_total(&s.pause_hist);
  bad += check_u64("PauseHist", hist, g_book.num_gc);
  if (g_book.num_gc > 0 && g_book.num_gc <= MS_PAUSE_RING) {
    uint64_t sum = 0;
    for (uint64_t i = 0; i < g_book.num_gc; i++)
      sum += s.pause_ns[i];
    bad += check_u64("PauseTotalNs", s.pause_total_ns, sum);
  }
  return bad ? 1 : 0;
}

int main(int argc, char **argv) {
  if (argc < 2 || argc > 3 || (argc == 3 && strcmp(argv[2], "--check") != 0)) {
    fprintf(stderr, "usage: %s SECONDS [--check]\n", argv[0]);
    return 2;
  }
  double seconds = strtod(argv[1], NULL);
  int do_check = argc == 3;

  g_chunks = calloc(MAX_CHUNKS, sizeof *g_chunks);
  if (!g_chunks) {
    fprintf(stderr, "runtime_example: out of memory\n");
    return 1;
  }
  ms_sys_add(MS_SYS_MSPAN, MAX_CHUNKS * (int64_t)sizeof *g_chunks,
             MAX_CHUNKS * (int64_t)sizeof *g_chunks);
  g_book.mspan_sys = MAX_CHUNKS * sizeof *g_chunks;
  g_book.next_gc = 4 * CHUNK;
  ms_gc_set_next(g_book.next_gc);
  ms_gc_set_enabled(1);
  ms_agent_start(); /* memtop can watch; failure is not ours to report */

  double start = now_s(), last_forced = start;
  for (;;) {
    for (int i = 0; i < 10000; i++)
      mutate();
    double t = now_s();
    if (t - start >= seconds)
      break;
    if (t - last_forced >= 1.0) {
      collect(1);
      last_forced = t;
    }
  }
  int rc = do_check ? check() : 0;
  ms_agent_stop();
  return rc;
}
