/*
 * pl_snap.h - how the preload's target programs read their own figures.
 *
 * The pl_* programs are not linked with -lmemstats: under the preload that
 * would put two engines in one process (the preload's, which counts, and
 * libmemstats.so's, which would not). They find ms_snapshot_read at run
 * time instead, so the same binary runs bare (no figures) and preloaded.
 * Output is one "key=value" per line, parsed by tests/integration/
 * test_preload.c; formatting goes through a stack buffer and write(2) so
 * that printing does not allocate between two snapshots.
 */
#ifndef PL_SNAP_H
#define PL_SNAP_H

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "memstats.h"
#include "say.h"

typedef int (*pl_read_fn)(ms_snapshot_t *, size_t);

static pl_read_fn pl_read;

/* Returns 1 if the preload (or the library) is in the process. */
static int pl_snap_init(void) {
  pl_read = (pl_read_fn)dlsym(RTLD_DEFAULT, "ms_snapshot_read");
  return pl_read != NULL;
}

/* Takes a snapshot; a zeroed one without the library. */
static void pl_snap(ms_snapshot_t *s) {
  memset(s, 0, sizeof *s);
  if (pl_read && pl_read(s, sizeof *s) != 0)
    memset(s, 0, sizeof *s);
}

#define pl_say prog_say

/* Prints the deltas b - a as "<tag>.mallocs=...", etc. */
static void pl_say_delta(const char *tag, const ms_snapshot_t *a,
                         const ms_snapshot_t *b) {
  pl_say("%s.mallocs=%lld", tag, (long long)(b->mallocs - a->mallocs));
  pl_say("%s.frees=%lld", tag, (long long)(b->frees - a->frees));
  pl_say("%s.heap_objects=%lld", tag,
         (long long)(b->heap_objects - a->heap_objects));
  pl_say("%s.heap_alloc=%lld", tag, (long long)(b->heap_alloc - a->heap_alloc));
  pl_say("%s.total_alloc=%lld", tag,
         (long long)(b->total_alloc - a->total_alloc));
}

#endif
