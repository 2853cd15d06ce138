/*
 * fields.c - the one table of snapshot fields (see fields.h).
 *
 * Names follow Go's runtime.MemStats exactly, because tools that read Go's
 * expvar "memstats" object then read ours. Prometheus names follow the
 * Prometheus conventions (base units, "_bytes", "_total"): a field counted
 * in nanoseconds keeps its unit here and the Prometheus emitter scales it to
 * seconds, which is why those names end in "_seconds". A column is here
 * only while the tree reads it (prom_name and help: emit/prometheus.c).
 */
#include "common/fields.h"

#include <limits.h>
#include <string.h>

#define U64(member) offsetof(ms_snapshot_t, member), MS__CT_U64
#define U32(member) offsetof(ms_snapshot_t, member), MS__CT_U32
#define INT(member) offsetof(ms_snapshot_t, member), MS__CT_INT
#define DBL(member) offsetof(ms_snapshot_t, member), MS__CT_DOUBLE
#define ARR(member) offsetof(ms_snapshot_t, member), MS__CT_NONE

/* Designated initialisers keep each row at its enum index, so the table
 * cannot drift from the enum; test_emit checks every row's id anyway. */
const ms__field_info_t ms__fields[MS_F__COUNT] = {
    /* ---- General ---- */
    /* Alloc is HeapAlloc under another name: served once, as
     * memstats_heap_alloc_bytes. Its own name would also be the
     * OpenMetrics family of TotalAlloc's counter (memstats_alloc_bytes),
     * which a scrape may not serve twice. */
    [MS_F_ALLOC] = {MS_F_ALLOC, "Alloc", U64(alloc), MS__UNIT_BYTES, 1, NULL,
                    NULL,
                    "Bytes of allocated heap objects (same as HeapAlloc)."},
    [MS_F_TOTAL_ALLOC] = {MS_F_TOTAL_ALLOC, "TotalAlloc", U64(total_alloc),
                          MS__UNIT_BYTES, 1, NULL, "memstats_alloc_bytes_total",
                          "Cumulative bytes allocated for heap objects."},
    [MS_F_SYS] = {MS_F_SYS, "Sys", U64(sys), MS__UNIT_BYTES, 1, NULL,
                  "memstats_sys_bytes",
                  "Bytes of memory obtained from the OS (Ready+Prepared)."},
    [MS_F_LOOKUPS] = {MS_F_LOOKUPS, "Lookups", U64(lookups), MS__UNIT_COUNT, 1,
                      NULL, "memstats_lookups_total",
                      "Pointer lookups performed by the runtime."},
    [MS_F_MALLOCS] = {MS_F_MALLOCS, "Mallocs", U64(mallocs), MS__UNIT_COUNT, 1,
                      NULL, "memstats_mallocs_total",
                      "Cumulative count of heap objects allocated."},
    [MS_F_FREES] = {MS_F_FREES, "Frees", U64(frees), MS__UNIT_COUNT, 1, NULL,
                    "memstats_frees_total",
                    "Cumulative count of heap objects freed."},
    /* ---- Heap ---- */
    [MS_F_HEAP_ALLOC] = {MS_F_HEAP_ALLOC, "HeapAlloc", U64(heap_alloc),
                         MS__UNIT_BYTES, 1, NULL, "memstats_heap_alloc_bytes",
                         "Bytes of allocated heap objects."},
    [MS_F_HEAP_SYS] = {MS_F_HEAP_SYS, "HeapSys", U64(heap_sys), MS__UNIT_BYTES,
                       1, NULL, "memstats_heap_sys_bytes",
                       "Bytes of heap memory obtained from the OS."},
    [MS_F_HEAP_IDLE] = {MS_F_HEAP_IDLE, "HeapIdle", U64(heap_idle),
                        MS__UNIT_BYTES, 1, NULL, "memstats_heap_idle_bytes",
                        "Bytes in idle (unused) heap spans, released or not."},
    [MS_F_HEAP_INUSE] = {MS_F_HEAP_INUSE, "HeapInuse", U64(heap_inuse),
                         MS__UNIT_BYTES, 1, NULL, "memstats_heap_inuse_bytes",
                         "Bytes in in-use heap spans."},
    [MS_F_HEAP_RELEASED] =
        {MS_F_HEAP_RELEASED, "HeapReleased", U64(heap_released), MS__UNIT_BYTES,
         1, NULL, "memstats_heap_released_bytes",
         "Bytes of heap memory returned to the OS (Prepared)."},
    [MS_F_HEAP_OBJECTS] = {MS_F_HEAP_OBJECTS, "HeapObjects", U64(heap_objects),
                           MS__UNIT_COUNT, 1, NULL, "memstats_heap_objects",
                           "Number of allocated heap objects."},
    /* ---- Stacks ---- */
    [MS_F_STACK_INUSE] = {MS_F_STACK_INUSE, "StackInuse", U64(stack_inuse),
                          MS__UNIT_BYTES, 1, NULL, "memstats_stack_inuse_bytes",
                          "Bytes in stack spans."},
    [MS_F_STACK_SYS] = {MS_F_STACK_SYS, "StackSys", U64(stack_sys),
                        MS__UNIT_BYTES, 1, NULL, "memstats_stack_sys_bytes",
                        "Bytes of stack memory obtained from the OS."},
    /* ---- Off-heap ---- */
    [MS_F_MSPAN_INUSE] = {MS_F_MSPAN_INUSE, "MSpanInuse", U64(mspan_inuse),
                          MS__UNIT_BYTES, 1, NULL, "memstats_mspan_inuse_bytes",
                          "Bytes of allocator metadata in use."},
    [MS_F_MSPAN_SYS] =
        {MS_F_MSPAN_SYS, "MSpanSys", U64(mspan_sys), MS__UNIT_BYTES, 1, NULL,
         "memstats_mspan_sys_bytes",
         "Bytes of memory obtained from the OS for allocator metadata."},
    [MS_F_MCACHE_INUSE] = {MS_F_MCACHE_INUSE, "MCacheInuse", U64(mcache_inuse),
                           MS__UNIT_BYTES, 1, NULL,
                           "memstats_mcache_inuse_bytes",
                           "Bytes of thread-cache structures in use."},
    [MS_F_MCACHE_SYS] =
        {MS_F_MCACHE_SYS, "MCacheSys", U64(mcache_sys), MS__UNIT_BYTES, 1, NULL,
         "memstats_mcache_sys_bytes",
         "Bytes of memory obtained from the OS for thread caches."},
    [MS_F_BUCK_HASH_SYS] =
        {MS_F_BUCK_HASH_SYS, "BuckHashSys", U64(buck_hash_sys), MS__UNIT_BYTES,
         1, NULL, "memstats_buck_hash_sys_bytes",
         "Bytes of memory in the heap profiler's bucket table."},
    [MS_F_GC_SYS] = {MS_F_GC_SYS, "GCSys", U64(gc_sys), MS__UNIT_BYTES, 1, NULL,
                     "memstats_gc_sys_bytes",
                     "Bytes of memory in garbage-collection metadata."},
    [MS_F_OTHER_SYS] =
        {MS_F_OTHER_SYS, "OtherSys", U64(other_sys), MS__UNIT_BYTES, 1, NULL,
         "memstats_other_sys_bytes",
         "Bytes of memory in miscellaneous off-heap allocations."},
    /* ---- GC ---- */
    [MS_F_NEXT_GC] = {MS_F_NEXT_GC, "NextGC", U64(next_gc), MS__UNIT_BYTES, 1,
                      NULL, "memstats_next_gc_bytes",
                      "Target heap size of the next garbage collection."},
    [MS_F_LAST_GC] = {MS_F_LAST_GC, "LastGC", U64(last_gc), MS__UNIT_UNIX_NS, 1,
                      NULL, "memstats_last_gc_time_seconds",
                      "Time the last garbage collection finished (Unix)."},
    /* PauseTotalNs is served as the pause histogram's _sum: a counter
     * of its own would be named memstats_gc_pause_seconds_total, whose
     * OpenMetrics family is the histogram's name. */
    [MS_F_PAUSE_TOTAL_NS] = {MS_F_PAUSE_TOTAL_NS, "PauseTotalNs",
                             U64(pause_total_ns), MS__UNIT_NS, 1, NULL, NULL,
                             "Cumulative time in stop-the-world pauses."},
    [MS_F_PAUSE_NS] = {MS_F_PAUSE_NS, "PauseNs", ARR(pause_ns), MS__UNIT_ARRAY,
                       1, NULL, NULL,
                       "The last 256 pauses and their end times (circular "
                       "buffers PauseNs and PauseEnd)."},
    [MS_F_NUM_GC] = {MS_F_NUM_GC, "NumGC", U32(num_gc), MS__UNIT_COUNT, 1, NULL,
                     "memstats_gc_cycles_total",
                     "Number of completed garbage-collection cycles."},
    [MS_F_NUM_FORCED_GC] = {MS_F_NUM_FORCED_GC, "NumForcedGC",
                            U32(num_forced_gc), MS__UNIT_COUNT, 1, NULL,
                            "memstats_gc_forced_cycles_total",
                            "Number of cycles forced by the application."},
    [MS_F_GC_CPU_FRACTION] = {MS_F_GC_CPU_FRACTION, "GCCPUFraction",
                              DBL(gc_cpu_fraction), MS__UNIT_RATIO, 1, NULL,
                              "memstats_gc_cpu_fraction",
                              "Fraction of CPU time used by the collector "
                              "since the program started."},
    [MS_F_ENABLE_GC] =
        {MS_F_ENABLE_GC, "EnableGC", INT(enable_gc), MS__UNIT_BOOL, 1, NULL,
         "memstats_gc_enabled",
         "Whether the program has an enabled garbage collector."},
    [MS_F_DEBUG_GC] = {MS_F_DEBUG_GC, "DebugGC", INT(debug_gc), MS__UNIT_BOOL,
                       1, NULL, NULL, "Currently unused (as in Go)."},
    [MS_F_BY_SIZE] =
        {MS_F_BY_SIZE, "BySize", ARR(by_size), MS__UNIT_ARRAY, 1, NULL, NULL,
         "Per size class: largest object size, objects allocated and freed."},
    /* ---- beyond Go ---- */
    [MS_F_PAUSE_HIST] = {MS_F_PAUSE_HIST, "PauseHist", ARR(pause_hist),
                         MS__UNIT_ARRAY, 0, NULL, "memstats_gc_pause_seconds",
                         "Distribution of every stop-the-world pause since the "
                         "program started."},
    [MS_F_KERNEL_RSS] =
        {MS_F_KERNEL_RSS, "KernelRSS", U64(kernel_rss), MS__UNIT_BYTES, 0,
         "rss", "memstats_kernel_rss_bytes",
         "Resident set size as the kernel sees it (/proc/PID/statm)."},
    [MS_F_KERNEL_VSZ] =
        {MS_F_KERNEL_VSZ, "KernelVSZ", U64(kernel_vsz), MS__UNIT_BYTES, 0,
         "vsz", "memstats_kernel_vsz_bytes",
         "Virtual memory size as the kernel sees it (/proc/PID/statm)."},
    [MS_F_KERNEL_LAZYFREE] = {MS_F_KERNEL_LAZYFREE, "KernelLazyFree",
                              U64(kernel_lazyfree), MS__UNIT_BYTES, 0,
                              "lazyfree", "memstats_kernel_lazyfree_bytes",
                              "Resident pages marked MADV_FREE, reclaimable by "
                              "the kernel (smaps_rollup LazyFree)."},
    [MS_F_KERNEL_ANON_HUGE] = {MS_F_KERNEL_ANON_HUGE, "KernelAnonHuge",
                               U64(kernel_anon_huge), MS__UNIT_BYTES, 0,
                               "anonhuge", "memstats_kernel_anon_huge_bytes",
                               "Anonymous memory in transparent huge pages "
                               "(smaps_rollup AnonHugePages)."},
    [MS_F_KERNEL_SWAP] = {MS_F_KERNEL_SWAP, "KernelSwap", U64(kernel_swap),
                          MS__UNIT_BYTES, 0, "swap",
                          "memstats_kernel_swap_bytes",
                          "Memory swapped out (smaps_rollup Swap)."},
    [MS_F_KERNEL_ANON_RSS] =
        {MS_F_KERNEL_ANON_RSS, "KernelAnonRSS", U64(kernel_anon_rss),
         MS__UNIT_BYTES, 0, "anonrss", "memstats_kernel_anon_rss_bytes",
         "Anonymous resident memory as the kernel sees it (RssAnon of "
         "/proc/PID/status): what Ready should account for."},
    [MS_F_OFF_HEAP_RELEASED] =
        {MS_F_OFF_HEAP_RELEASED, "OffHeapReleased", U64(off_heap_released),
         MS__UNIT_BYTES, MS__GO_TOO, NULL, "memstats_off_heap_released_bytes",
         "Bytes of the off-heap classes (stacks, mappings outside the "
         "allocator, its untouched metadata) mapped but not backed; each "
         "class holds its part, and Prepared is HeapReleased plus this."},
    [MS_F_PYTHON_ARENAS] =
        {MS_F_PYTHON_ARENAS, "PythonArenas", U64(python_arenas), MS__UNIT_COUNT,
         0, NULL, "memstats_python_arenas",
         "Arenas of Python's object allocator (pymalloc) mapped."},
    [MS_F_PYTHON_ARENA_SYS] =
        {MS_F_PYTHON_ARENA_SYS, "PythonArenaSys", U64(python_arena_sys),
         MS__UNIT_BYTES, 0, NULL, "memstats_python_arena_bytes",
         "Bytes mapped for Python's object allocator arenas (part of "
         "OtherSys)."},
    [MS_F_PYTHON_ARENA_RESIDENT] = {MS_F_PYTHON_ARENA_RESIDENT,
                                    "PythonArenaResident",
                                    U64(python_arena_resident), MS__UNIT_BYTES,
                                    0, NULL,
                                    "memstats_python_arena_resident_bytes",
                                    "Bytes of Python's object allocator arenas "
                                    "the kernel backs (part of OtherSys)."},
    [MS_F_PYTHON_ARENA_INUSE] =
        {MS_F_PYTHON_ARENA_INUSE, "PythonArenaInuse", U64(python_arena_inuse),
         MS__UNIT_BYTES, 0, NULL, "memstats_python_arena_inuse_bytes",
         "Resident bytes of Python's object allocator pools holding at least "
         "one block (part of PythonArenaResident)."},
    [MS_F_PYTHON_ARENA_ALLOC] =
        {MS_F_PYTHON_ARENA_ALLOC, "PythonArenaAlloc", U64(python_arena_alloc),
         MS__UNIT_BYTES, 0, NULL, "memstats_python_arena_alloc_bytes",
         "Bytes in blocks Python's object allocator has allocated (part of "
         "PythonArenaInuse)."},
    [MS_F_HEAP_SAMPLE_AGE] =
        {MS_F_HEAP_SAMPLE_AGE, "HeapSampleAge", U64(heap_sample_age_ns),
         MS__UNIT_NS, 0, NULL, "memstats_heap_sample_age_seconds",
         "Age of the allocator's sample the heap figures come from (0: taken "
         "for this snapshot)."},
    [MS_F_STACK_RELEASED] =
        {MS_F_STACK_RELEASED, "StackReleased", U64(stack_released),
         MS__UNIT_BYTES, MS__GO_TOO, NULL, "memstats_stack_released_bytes",
         "Bytes of thread stacks mapped but not backed (part of StackSys and "
         "of OffHeapReleased)."},
    [MS_F_OTHER_RELEASED] =
        {MS_F_OTHER_RELEASED, "OtherReleased", U64(other_released),
         MS__UNIT_BYTES, MS__GO_TOO, NULL, "memstats_other_released_bytes",
         "Bytes of mappings outside the allocator mapped but not backed (part "
         "of OtherSys and of OffHeapReleased)."},
    [MS_F_MEMSTATS_SELF] =
        {MS_F_MEMSTATS_SELF, "MemstatsSelf", U64(memstats_self), MS__UNIT_BYTES,
         0, NULL, "memstats_self_bytes",
         "Resident bytes libmemstats itself holds in the process (its "
         "thread's stack, buffers, data, the profile table BuckHashSys); "
         "in no class but BuckHashSys."},
    [MS_F_MEMSTATS_SELF_SYS] =
        {MS_F_MEMSTATS_SELF_SYS, "MemstatsSelfSys", U64(memstats_self_sys),
         MS__UNIT_BYTES, 0, NULL, "memstats_self_sys_bytes",
         "Bytes libmemstats itself has mapped in the process (its thread's "
         "stack, buffers, data, the profile table)."},
    [MS_F_KERNEL_RSS_FILE] =
        {MS_F_KERNEL_RSS_FILE, "KernelRssFile", U64(kernel_rss_file),
         MS__UNIT_BYTES, 0, "rssfile", "memstats_kernel_rss_file_bytes",
         "File-backed resident memory (RssFile of /proc/PID/status: code, "
         "libraries, mapped files)."},
    [MS_F_KERNEL_RSS_SHMEM] =
        {MS_F_KERNEL_RSS_SHMEM, "KernelRssShmem", U64(kernel_rss_shmem),
         MS__UNIT_BYTES, 0, "rssshmem", "memstats_kernel_rss_shmem_bytes",
         "Resident shared memory (RssShmem of /proc/PID/status: shared "
         "anonymous mappings, System V and POSIX shared memory)."},
    [MS_F_SHARED_ANON] =
        {MS_F_SHARED_ANON, "SharedAnon", U64(shared_anon), MS__UNIT_BYTES, 0,
         NULL, "memstats_shared_anon_bytes",
         "Bytes of shared anonymous mappings the program made (MAP_SHARED | "
         "MAP_ANONYMOUS); shared memory, not in Sys."},
    [MS_F_SHARED_ANON_RESIDENT] =
        {MS_F_SHARED_ANON_RESIDENT, "SharedAnonResident",
         U64(shared_anon_resident), MS__UNIT_BYTES, 0, NULL,
         "memstats_shared_anon_resident_bytes",
         "Bytes of the program's shared anonymous mappings in memory, "
         "touched by this process or another (mincore: may exceed this "
         "process's RssShmem)."},
};

static int valid(ms_field_t f) {
  return (unsigned)f < (unsigned)MS_F__COUNT;
}

uint64_t ms__field_u64(const ms_snapshot_t *s, ms_field_t f) {
  if (!valid(f))
    return 0;
  const char *p = (const char *)s + ms__fields[f].offset;
  switch (ms__fields[f].ctype) {
  case MS__CT_U64: {
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
  }
  case MS__CT_U32: {
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
  }
  case MS__CT_INT: {
    int v;
    memcpy(&v, p, sizeof v);
    /* Booleans and flags are never negative; a negative value from a
     * confused provider reads as 0 rather than as 2^64-1. */
    return v < 0 ? 0 : (uint64_t)v;
  }
  case MS__CT_DOUBLE: {
    double v;
    memcpy(&v, p, sizeof v);
    /* Only meaningful for whole numbers; ratios should be read with
     * ms__field_double(). NaN, negatives and out-of-range values give 0
     * instead of undefined behaviour. */
    if (!(v >= 0.0) || v >= 18446744073709551616.0)
      return 0;
    return (uint64_t)v;
  }
  case MS__CT_NONE:
    break;
  }
  return 0;
}

double ms__field_double(const ms_snapshot_t *s, ms_field_t f) {
  if (!valid(f))
    return 0.0;
  if (ms__fields[f].ctype == MS__CT_DOUBLE) {
    double v;
    memcpy(&v, (const char *)s + ms__fields[f].offset, sizeof v);
    return v;
  }
  return (double)ms__field_u64(s, f);
}

void ms__field_set_u64(ms_snapshot_t *s, ms_field_t f, uint64_t v) {
  if (!valid(f))
    return;
  char *p = (char *)s + ms__fields[f].offset;
  switch (ms__fields[f].ctype) {
  case MS__CT_U64:
    memcpy(p, &v, sizeof v);
    break;
  case MS__CT_U32: {
    /* Saturate rather than wrap: a too-large count stays visibly large. */
    uint32_t w = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
    memcpy(p, &w, sizeof w);
    break;
  }
  case MS__CT_INT: {
    int w = v > (uint64_t)INT_MAX ? INT_MAX : (int)v;
    memcpy(p, &w, sizeof w);
    break;
  }
  case MS__CT_DOUBLE: {
    double d = (double)v;
    memcpy(p, &d, sizeof d);
    break;
  }
  case MS__CT_NONE:
    break;
  }
}

void ms__field_set_double(ms_snapshot_t *s, ms_field_t f, double v) {
  if (!valid(f))
    return;
  if (ms__fields[f].ctype == MS__CT_DOUBLE) {
    memcpy((char *)s + ms__fields[f].offset, &v, sizeof v);
    return;
  }
  if (ms__fields[f].ctype == MS__CT_NONE)
    return;
  /* Integer fields: round to nearest, clamping what does not fit. */
  uint64_t u;
  if (!(v > 0.0))
    u = 0;
  else if (v >= 18446744073709551615.0)
    u = UINT64_MAX;
  else
    u = (uint64_t)(v + 0.5);
  ms__field_set_u64(s, f, u);
}

int ms__field_by_go_name(const char *name) {
  if (!name)
    return -1;
  for (int i = 0; i < MS_F__COUNT; i++)
    if (strcmp(ms__fields[i].go_name, name) == 0)
      return i;
  return -1;
}

MS_EXTERN const char *ms_field_name(ms_field_t field) {
  return valid(field) ? ms__fields[field].go_name : NULL;
}

MS_EXTERN const char *ms_quality_name(ms_quality_t q) {
  switch (q) {
  case MS_Q_EXACT:
    return "exact";
  case MS_Q_ESTIMATED:
    return "estimated";
  case MS_Q_UNAVAILABLE:
    break;
  }
  /* A quality byte this library does not know (a newer peer, a corrupt
   * snapshot) is treated as "unavailable": never claim more than we know. */
  return "unavailable";
}

/* The raw 64 bits of a scalar field (a double's bit pattern, an int
 * sign-extended), as the wire carries them: a round trip is exact. */
uint64_t ms__field_bits(const ms_snapshot_t *s, const ms__field_info_t *fi) {
  const char *at = (const char *)s + fi->offset;
  switch (fi->ctype) {
  case MS__CT_U64: {
    uint64_t v;
    memcpy(&v, at, sizeof v);
    return v;
  }
  case MS__CT_U32: {
    uint32_t v;
    memcpy(&v, at, sizeof v);
    return v;
  }
  case MS__CT_INT: {
    int v;
    memcpy(&v, at, sizeof v);
    return (uint64_t)(int64_t)v;
  }
  case MS__CT_DOUBLE: {
    double d;
    uint64_t v;
    memcpy(&d, at, sizeof d);
    memcpy(&v, &d, sizeof v);
    return v;
  }
  default:
    return 0;
  }
}

void ms__field_set_bits(ms_snapshot_t *s, const ms__field_info_t *fi,
                        uint64_t v) {
  char *at = (char *)s + fi->offset;
  switch (fi->ctype) {
  case MS__CT_U64:
    memcpy(at, &v, sizeof v);
    break;
  case MS__CT_U32: {
    uint32_t x = (uint32_t)v;
    memcpy(at, &x, sizeof x);
    break;
  }
  case MS__CT_INT: {
    int x = (int)(int64_t)v;
    memcpy(at, &x, sizeof x);
    break;
  }
  case MS__CT_DOUBLE: {
    double d;
    memcpy(&d, &v, sizeof d);
    memcpy(at, &d, sizeof d);
    break;
  }
  default:
    break;
  }
}
