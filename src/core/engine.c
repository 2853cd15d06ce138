/*
 * engine.c - the engine's cut into a snapshot: the reader lock that
 * serialises every reader of the engine (and of the caches the snapshot's
 * other sources keep beside it), and ms__engine_read(), which takes the
 * consistent cut of the shards, the off-heap counters and the pause ring
 * into the engine's fields of a snapshot. What else a snapshot holds is
 * composed a layer up (src/compose/snapshot.c).
 */
#include <pthread.h>
#include <stddef.h>
#include <string.h>

#include "common/fields.h"
#include "core/engine.h"
#include "core/pause.h"
#include "core/shard.h"
#include "core/sizeclass.h"
#include "core/sysstat.h"

static pthread_mutex_t g_read_lock MS__FORK_DATA = PTHREAD_MUTEX_INITIALIZER;

void ms__read_lock(void) {
  pthread_mutex_lock(&g_read_lock);
}

int ms__read_trylock(void) {
  return pthread_mutex_trylock(&g_read_lock) == 0 ? 0 : MS_EAGAIN;
}

void ms__read_unlock(void) {
  pthread_mutex_unlock(&g_read_lock);
}

/* A fork child gets the lock free and the shards of its one thread. */
MS__FORK_TEXT static void atfork_prepare(void) {
  pthread_mutex_lock(&g_read_lock);
}
MS__FORK_TEXT static void atfork_parent(void) {
  pthread_mutex_unlock(&g_read_lock);
}
MS__FORK_TEXT static void atfork_child(void) {
  ms__shards_after_fork_child();
  /* A plain store, not pthread_mutex_unlock: a fork child's handlers may
   * only do async-signal-safe work. */
  g_read_lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
}

MS__FORK_TEXT void ms__fini(void) {}

__attribute__((constructor)) static void engine_start(void) {
  ms__engine_init();
  pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

int ms__snapshot_add_provider(ms_snapshot_t *s, const char *name) {
  for (uint32_t i = 0; i < s->nproviders; i++)
    if (strcmp(s->providers[i], name) == 0)
      return (int)i;
  if (s->nproviders >= MS_MAX_PROVIDERS)
    return -1;
  int idx = (int)s->nproviders++;
  strncpy(s->providers[idx], name, MS_NAME_MAX - 1);
  s->providers[idx][MS_NAME_MAX - 1] = '\0';
  return idx;
}

static void set_exact(ms_snapshot_t *s, ms_field_t f, int src) {
  ms__set_quality(s, f, MS_Q_EXACT, src);
}

/* The mapped-block counters of the last cut (engine.h). */
static ms__mapped_t g_last_mapped;

void ms__engine_last_mapped(ms__mapped_t *out) {
  *out = g_last_mapped;
}

/* ms__track_since: 1 once called; the base HeapAlloc's estimate adds the
 * counted delta to (INT64_MIN: unknown). Written under the reader lock,
 * read by ms__engine_read under it. */
static int g_since;
static int64_t g_since_base;

void ms__track_since(int64_t inuse) {
  ms__shard_totals_t t;
  ms__read_lock();
  ms__shards_read(&t);
  /* A second attach finds the counts of the first: the base is what
   * makes the estimate equal the allocator's figure now. */
  g_since_base =
      inuse < 0 ? INT64_MIN : inuse - (int64_t)(t.alloc_bytes - t.free_bytes);
  g_since = 1;
  ms__read_unlock();
  ms__feed(MS__FEED_OBJECTS | MS__FEED_TRACKED);
}

void ms__engine_read(ms_snapshot_t *s) {
  unsigned fed = ms__engine_fed();
  ms__shard_totals_t t;
  ms__shards_read(&t);
  g_last_mapped.alloc_usable = t.mapped_alloc_usable;
  g_last_mapped.free_usable = t.mapped_free_usable;
  g_last_mapped.alloc = t.mapped_alloc;
  g_last_mapped.free = t.mapped_free;

  /* "tracked": the preload counts every malloc; "runtime": the program
   * itself reports through the public accounting API. Objects come from the
   * preload when it is there (a runtime may report pauses beside it). */
  int src = -1, osrc = -1;
  if (fed & MS__FEED_TRACKED)
    osrc = ms__snapshot_add_provider(s, g_since ? "tracked(since attach)"
                                                : "tracked");
  else if (ms__track_off_reason())
    ms__snapshot_add_provider(s, ms__track_off_reason());
  if (fed & MS__FEED_API)
    src = ms__snapshot_add_provider(s, "runtime");
  if (!(fed & MS__FEED_TRACKED))
    osrc = src;
  if (fed & MS__FEED_OBJECTS) {
    s->mallocs = t.mallocs;
    s->frees = t.frees;
    s->heap_objects = t.mallocs - t.frees;
    s->total_alloc = t.alloc_bytes;
    s->heap_alloc = t.alloc_bytes - t.free_bytes;
    s->nsize_classes = MS__NCLASSES;
    for (int c = 0; c < MS__NCLASSES; c++) {
      s->by_size[c].size = ms__class_size(c);
      s->by_size[c].mallocs = t.class_allocs[c];
      s->by_size[c].frees = t.class_frees[c];
    }
    set_exact(s, MS_F_MALLOCS, osrc);
    set_exact(s, MS_F_FREES, osrc);
    set_exact(s, MS_F_HEAP_OBJECTS, osrc);
    set_exact(s, MS_F_TOTAL_ALLOC, osrc);
    set_exact(s, MS_F_HEAP_ALLOC, osrc);
    set_exact(s, MS_F_BY_SIZE, osrc);
    s->lookups = 0; /* nothing here looks up pointers, as in Go >= 1.x */
    set_exact(s, MS_F_LOOKUPS, osrc);
    if (g_since && (fed & MS__FEED_TRACKED)) {
      /* Since the attach only (ms__track_since). */
      int64_t est =
          g_since_base == INT64_MIN
              ? -1
              : g_since_base + (int64_t)(t.alloc_bytes - t.free_bytes);
      s->heap_alloc = est > 0 ? (uint64_t)est : 0;
      ms__set_quality(s, MS_F_HEAP_ALLOC,
                      est < 0 ? MS_Q_UNAVAILABLE : MS_Q_ESTIMATED, osrc);
      s->heap_objects = 0;
      ms__set_quality(s, MS_F_HEAP_OBJECTS, MS_Q_UNAVAILABLE, -1);
      s->nsize_classes = 0;
      ms__set_quality(s, MS_F_BY_SIZE, MS_Q_UNAVAILABLE, -1);
    }
  }
  if (fed & MS__FEED_HEAP) {
    s->heap_inuse = (uint64_t)t.heap[MS_SPAN_INUSE];
    s->heap_released = (uint64_t)t.heap[MS_SPAN_RELEASED];
    s->heap_idle = (uint64_t)(t.heap[MS_SPAN_IDLE] + t.heap[MS_SPAN_RELEASED]);
    s->heap_sys = s->heap_idle + s->heap_inuse;
    set_exact(s, MS_F_HEAP_INUSE, src);
    set_exact(s, MS_F_HEAP_RELEASED, src);
    set_exact(s, MS_F_HEAP_IDLE, src);
    set_exact(s, MS_F_HEAP_SYS, src);
  }
  int64_t sys[MS_SYS__COUNT], inuse[MS_SYS__COUNT];
  ms__sys_read(sys, inuse);
  static const struct {
    ms_sys_class_t cls;
    ms_field_t sys_f, inuse_f;
    size_t sys_off, inuse_off;
  } classes[] = {
      {MS_SYS_STACK, MS_F_STACK_SYS, MS_F_STACK_INUSE,
       offsetof(ms_snapshot_t, stack_sys),
       offsetof(ms_snapshot_t, stack_inuse)},
      {MS_SYS_MSPAN, MS_F_MSPAN_SYS, MS_F_MSPAN_INUSE,
       offsetof(ms_snapshot_t, mspan_sys),
       offsetof(ms_snapshot_t, mspan_inuse)},
      {MS_SYS_MCACHE, MS_F_MCACHE_SYS, MS_F_MCACHE_INUSE,
       offsetof(ms_snapshot_t, mcache_sys),
       offsetof(ms_snapshot_t, mcache_inuse)},
      {MS_SYS_BUCKHASH, MS_F_BUCK_HASH_SYS, MS_F__COUNT,
       offsetof(ms_snapshot_t, buck_hash_sys), 0},
      {MS_SYS_GC, MS_F_GC_SYS, MS_F__COUNT, offsetof(ms_snapshot_t, gc_sys), 0},
      {MS_SYS_OTHER, MS_F_OTHER_SYS, MS_F__COUNT,
       offsetof(ms_snapshot_t, other_sys), 0},
  };
  for (size_t i = 0; i < sizeof classes / sizeof classes[0]; i++) {
    if (!(fed & MS__FEED_SYS(classes[i].cls)))
      continue;
    *(uint64_t *)((char *)s + classes[i].sys_off) =
        (uint64_t)sys[classes[i].cls];
    set_exact(s, classes[i].sys_f, src);
    if (classes[i].inuse_f != MS_F__COUNT) {
      *(uint64_t *)((char *)s + classes[i].inuse_off) =
          (uint64_t)inuse[classes[i].cls];
      set_exact(s, classes[i].inuse_f, src);
    }
  }
  ms__pause_read(s);
}
