/*
 * breakdown.c - the Ready/Prepared breakdown of a snapshot (ms_breakdown()),
 * by the formulas of DESIGN.md and the seed program:
 *
 *   inuse        = HeapInuse + StackInuse + MSpanInuse + MCacheInuse
 *                  + BuckHashSys + GCSys + (OtherSys - OtherReleased)
 *   Prepared     = HeapReleased + OffHeapReleased
 *   Ready        = Sys - Prepared
 *   fragOverhead = HeapInuse - HeapAlloc
 *   data         = inuse - fragOverhead
 *   idle         = Ready - inuse
 *
 * OffHeapReleased (beyond Go: the unbacked part of the off-heap classes,
 * which each class holds, as HeapSys holds HeapReleased; src/providers/
 * mappings.c) is a term of Prepared, and OtherReleased (its part in
 * OtherSys) is no part of inuse: OtherSys counts whole into inuse only
 * where it is all backed. A snapshot without them (Go's, an older
 * library's) has them unavailable: they then count as 0 and change no
 * quality.
 *
 * 0.2 as it first shipped kept OffHeapReleased outside the classes, a term
 * of Sys of its own, with every class holding only its backed bytes. Such
 * a snapshot (an older target's, read over the wire, or a caller's struct
 * of that layout) has OffHeapReleased but no OtherReleased, and is read by
 * its own rule: Sys = the sum of the *Sys fields and OffHeapReleased.
 *
 * Python's arenas (beyond Go) are a heap inside OtherSys, and count as a
 * heap does: their empty pools are idle, not inuse (PythonArenaResident -
 * PythonArenaInuse leaves inuse), and the free blocks of their pools in
 * use are fragOverhead (PythonArenaInuse - PythonArenaAlloc joins it), so
 * data holds their allocated blocks only. A snapshot with arenas but
 * without their in-use figures counts them whole, as data, estimated.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/fields.h"
#include "memstats.h"

/* Differences are taken in unsigned arithmetic, where wrapping is defined,
 * and read back as two's complement: a provider that breaks an identity
 * (HeapAlloc > HeapInuse, say) then shows a negative figure, not 2^64-x, and
 * the compiler sees no signed overflow. */
static int64_t as_signed(uint64_t v) {
  int64_t r;
  memcpy(&r, &v, sizeof r);
  return r;
}

/* 0.1's ms_breakdown_t (and 0.2's as it first shipped) ends where
 * struct_size begins. When a figure is appended, the size before it joins
 * the sizes ms_breakdown_read() accepts. */
#define MS__BREAKDOWN_SIZE_0_1 offsetof(ms_breakdown_t, struct_size)

/* Whether the caller's snapshot reaches offset end: struct_size 0 is a
 * snapshot filled by hand, taken as whole. */
static int covers(const ms_snapshot_t *snap, size_t end) {
  return snap->struct_size == 0 || snap->struct_size >= end;
}

/* The exported symbol of 0.1 (memstats.h maps the name to
 * ms_breakdown_read for code built against this header). */
#undef ms_breakdown
MS_EXTERN int ms_breakdown(const ms_snapshot_t *snap, ms_breakdown_t *out) {
  return ms_breakdown_read(snap, out, MS__BREAKDOWN_SIZE_0_1);
}

/* Python's arenas as a heap (see above): how much of OtherSys's resident
 * part leaves inuse (*free: empty pools) and joins fragOverhead (*frag:
 * free blocks of pools in use), and the quality that reading has. A
 * snapshot without arenas changes nothing (exact, zeros). */
static void python_heap(const ms_snapshot_t *snap, uint64_t *free,
                        uint64_t *frag, ms_quality_t *q) {
  *free = *frag = 0;
  *q = MS_Q_EXACT;
  size_t have_arenas = offsetof(ms_snapshot_t, python_arena_resident) + 8;
  size_t have_inuse = offsetof(ms_snapshot_t, python_arena_alloc) + 8;
  if ((snap->struct_size != 0 && snap->struct_size < have_arenas) ||
      ms__field_quality(snap, MS_F_PYTHON_ARENAS) == MS_Q_UNAVAILABLE ||
      snap->python_arenas == 0)
    return;
  if ((snap->struct_size != 0 && snap->struct_size < have_inuse) ||
      ms__field_quality(snap, MS_F_PYTHON_ARENA_INUSE) == MS_Q_UNAVAILABLE ||
      ms__field_quality(snap, MS_F_PYTHON_ARENA_ALLOC) == MS_Q_UNAVAILABLE ||
      snap->python_arena_inuse > snap->python_arena_resident ||
      snap->python_arena_alloc > snap->python_arena_inuse) {
    *q = MS_Q_ESTIMATED; /* in use, all of it, as far as anyone knows */
    return;
  }
  *free = snap->python_arena_resident - snap->python_arena_inuse;
  *frag = snap->python_arena_inuse - snap->python_arena_alloc;
  *q = ms__quality_worst(ms__field_quality(snap, MS_F_PYTHON_ARENA_INUSE),
                         ms__field_quality(snap, MS_F_PYTHON_ARENA_ALLOC));
}

MS_EXTERN int ms_breakdown_read(const ms_snapshot_t *snap, ms_breakdown_t *out,
                                size_t size) {
  /* Only the sizes a header ever had (as ms_snapshot_read() takes them),
   * or a newer header's larger struct. */
  if (!snap || !out ||
      (size != MS__BREAKDOWN_SIZE_0_1 && size < sizeof(ms_breakdown_t)))
    return MS_EINVAL;

  /* A snapshot of an older caller's layout (struct_size says so) ends
   * before these fields and their quality: none of them is read. */
  int have_ohr = covers(snap, offsetof(ms_snapshot_t, off_heap_released) +
                                  sizeof snap->off_heap_released) &&
                 ms__field_known(snap, MS_F_OFF_HEAP_RELEASED);
  int split = covers(snap, offsetof(ms_snapshot_t, other_released) +
                               sizeof snap->other_released) &&
              ms__field_known(snap, MS_F_OTHER_RELEASED);
  /* 0.2's first rule: the unbacked part outside every class. */
  int ohr_outside = have_ohr && !split;

  static const ms_field_t inuse_terms[] = {
      MS_F_HEAP_INUSE,    MS_F_STACK_INUSE, MS_F_MSPAN_INUSE, MS_F_MCACHE_INUSE,
      MS_F_BUCK_HASH_SYS, MS_F_GC_SYS,      MS_F_OTHER_SYS,
  };
  const uint64_t inuse_vals[] = {
      snap->heap_inuse,   snap->stack_inuse,   snap->mspan_inuse,
      snap->mcache_inuse, snap->buck_hash_sys, snap->gc_sys,
      snap->other_sys,
  };
  uint64_t inuse = 0;
  ms_quality_t q_inuse = MS_Q_EXACT;
  for (size_t i = 0; i < sizeof inuse_terms / sizeof inuse_terms[0]; i++) {
    inuse += inuse_vals[i];
    q_inuse =
        ms__quality_worst(q_inuse, ms__field_quality(snap, inuse_terms[i]));
  }
  /* OtherSys's unbacked part is in use by nobody: it is Prepared. */
  if (split) {
    inuse -= snap->other_released;
    q_inuse = ms__quality_worst(q_inuse,
                                ms__field_quality(snap, MS_F_OTHER_RELEASED));
  }

  uint64_t ohr = have_ohr ? snap->off_heap_released : 0;
  uint64_t prepared = snap->heap_released + ohr;
  uint64_t ready = snap->sys - prepared;
  uint64_t frag = snap->heap_inuse - snap->heap_alloc;
  uint64_t py_free, py_frag;
  ms_quality_t q_py;
  python_heap(snap, &py_free, &py_frag, &q_py);
  inuse -= py_free;
  frag += py_frag;
  q_inuse = ms__quality_worst(q_inuse, q_py);
  uint64_t data = inuse - frag;
  uint64_t idle = ready - inuse;

  ms_breakdown_t b;
  memset(&b, 0, sizeof b);
  b.q_inuse = q_inuse;
  b.q_prepared = ms__field_quality(snap, MS_F_HEAP_RELEASED);
  if (have_ohr)
    b.q_prepared = ms__quality_worst(
        b.q_prepared, ms__field_quality(snap, MS_F_OFF_HEAP_RELEASED));
  b.q_ready =
      ms__quality_worst(ms__field_quality(snap, MS_F_SYS), b.q_prepared);
  b.q_frag_overhead = ms__quality_worst(
      ms__quality_worst(ms__field_quality(snap, MS_F_HEAP_INUSE),
                        ms__field_quality(snap, MS_F_HEAP_ALLOC)),
      q_py);
  b.q_data = ms__quality_worst(b.q_inuse, b.q_frag_overhead);
  b.q_idle = ms__quality_worst(b.q_ready, b.q_inuse);

  /* An unavailable figure is reported as 0 with its quality saying so:
   * whatever arithmetic on placeholder zeros gives is not a number anyone
   * should read. */
  b.inuse = b.q_inuse ? as_signed(inuse) : 0;
  b.prepared = b.q_prepared ? as_signed(prepared) : 0;
  b.ready = b.q_ready ? as_signed(ready) : 0;
  b.frag_overhead = b.q_frag_overhead ? as_signed(frag) : 0;
  b.data = b.q_data ? as_signed(data) : 0;
  b.idle = b.q_idle ? as_signed(idle) : 0;
  b.q_total = ms__field_quality(snap, MS_F_SYS);
  b.total = b.q_total ? as_signed(snap->sys) : 0;

  /* Sys == sum(*Sys) can only be checked when every term is known; with a
   * term unavailable the identity is unverifiable, not broken. */
  static const ms_field_t sys_terms[] = {
      MS_F_SYS,        MS_F_HEAP_SYS,      MS_F_STACK_SYS, MS_F_MSPAN_SYS,
      MS_F_MCACHE_SYS, MS_F_BUCK_HASH_SYS, MS_F_GC_SYS,    MS_F_OTHER_SYS,
  };
  int checkable = 1;
  for (size_t i = 0; i < sizeof sys_terms / sizeof sys_terms[0]; i++)
    if (ms__field_quality(snap, sys_terms[i]) == MS_Q_UNAVAILABLE)
      checkable = 0;
  uint64_t sum = snap->heap_sys + snap->stack_sys + snap->mspan_sys +
                 snap->mcache_sys + snap->buck_hash_sys + snap->gc_sys +
                 snap->other_sys + (ohr_outside ? ohr : 0);
  b.sys_mismatch = checkable && sum != snap->sys;

  /* Only what the caller's struct has room for: a prefix of this layout
   * (0.1's struct ends before struct_size, which it then never sees). */
  size_t n = size < sizeof b ? size : sizeof b;
  b.struct_size = (uint32_t)n;
  memcpy(out, &b, n);
  return 0;
}
