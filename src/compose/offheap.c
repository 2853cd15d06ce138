/*
 * offheap.c - the mappings' figures in a snapshot: the stacks and the
 * anonymous mappings the allocator does not see (read by the mappings
 * reader, src/providers/mappings.c) added to StackSys, OtherSys, their
 * released parts and OffHeapReleased, Python's arenas, what libmemstats
 * itself holds and the shared anonymous memory, each under the source
 * "mappings" (or "python", when Python's arenas are most of OtherSys); and
 * for an allocator that cannot tell backed memory from committed
 * (mimalloc), its heap figures re-split by the resident pages of its own
 * mappings.
 */
#include <stdint.h>

#include "common/fields.h"
#include "compose/compose_int.h"
#include "core/engine.h"
#include "core/ranges.h"
#include "core/util.h"
#include "providers/mappings.h"

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
static int heap_backing(ms_snapshot_t *s, const ms__maps_figures_t *f) {
  if (!f->have_alloc || f->alloc_mapped == 0 ||
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

void ms__offheap_fill(ms_snapshot_t *s, int cached_only, int heap_backing_on) {
  uint64_t now = ms__now_mono_ns();
  if (heap_backing_on)
    ms__mappings_want(MS__MAPS_ALLOC);
  int fresh = ms__mappings_update(cached_only, now);
  uint64_t read_ns;
  const ms__maps_figures_t *f = ms__mappings_cached(&read_ns);
  if (!f)
    return;
  /* Exact while the read is younger than a snapshot's own default
   * interval (a served snapshot may be that old itself); older figures,
   * or a table that overflowed, are estimates. */
  ms_quality_t q = (fresh || now - read_ns < MS__MAPS_EXACT_NS) && !f->lost
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
  ms_quality_t ql = f->other_lazy || ms__lazy_ranges.lost ? MS_Q_ESTIMATED : q;
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
    heap_backing(s, f);
  /* Sys is summed from its terms later, unless a provider set it already:
   * then it grows by what was added here. */
  if (ms__field_known(s, MS_F_SYS))
    add_to(s, MS_F_SYS,
           f->stack_resident + f->stack_unbacked + f->other_resident +
               f->other_unbacked,
           q, s->source[MS_F_SYS] == 0xff ? -1 : s->source[MS_F_SYS]);
}
