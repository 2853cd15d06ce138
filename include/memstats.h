/*
 * memstats.h - the public interface of libmemstats.
 *
 * libmemstats keeps Go-style memory statistics (the model of Go's
 * runtime.MemStats) for a native process, takes consistent snapshots of them
 * without stopping the program's threads, and serves them to memtop on a
 * private Unix socket named after the process ID.
 *
 * Conventions, as in libuv:
 *   - every function that can fail returns 0 or a negative errno-style
 *     code (MS_E*); ms_strerror() turns a code into words (an int that is
 *     a value, as ms_pause_hist_bucket()'s index, says so where declared);
 *   - the caller owns every struct it passes in; reads copy into it;
 *   - structs that may grow are read with their size (ms_snapshot_read()).
 *
 * This is the only public header. Symbols prefixed ms_ / MS_ are public.
 */
#ifndef MEMSTATS_H
#define MEMSTATS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(MS_BUILDING_LIBRARY) && defined(__GNUC__)
#define MS_EXTERN __attribute__((visibility("default")))
#else
#define MS_EXTERN /* nothing */
#endif

#define MS_VERSION_MAJOR 0
#define MS_VERSION_MINOR 2
#define MS_VERSION_PATCH 0
#define MS_VERSION_STRING "0.2.0"

/* ------------------------------------------------------------------------
 * Error codes: negative errno values, so they compose with system calls.
 * ------------------------------------------------------------------------ */
#define MS_EINVAL (-22)        /* invalid argument */
#define MS_ENOMEM (-12)        /* out of memory */
#define MS_ENOENT (-2)         /* no such process or socket */
#define MS_EACCES (-13)        /* permission refused */
#define MS_EAGAIN (-11)        /* try again (busy, rate-limited) */
#define MS_ENOSYS (-38)        /* not available from this provider/build */
#define MS_EPROTO (-71)        /* malformed message on the wire */
#define MS_ETIMEDOUT (-110)    /* no answer in time */
#define MS_ECONNREFUSED (-111) /* nobody listens: stale socket */
#define MS_ESRCH (-3)          /* the process does not exist */
#define MS_EEXIST (-17)        /* already started */
#define MS_ENOSPC (-28)        /* a fixed table is full */
#define MS_EMFILE (-24)        /* the target is out of file descriptors */
#define MS_EVERSION (-1001)    /* peer speaks a newer, incompatible version */
#define MS_EUNSAFE                                                             \
  (-1002)                   /* socket directory unsafe (symlink, owner, mode)  \
                             */
#define MS_ESTALE (-1003)   /* PID reused: the process is not the target */
#define MS_EREFUSED (-1004) /* the target refused us (another user) */

/* Returns a static English description of an MS_E* code (or errno). Never
 * NULL; thread-safe. */
MS_EXTERN const char *ms_strerror(int err);

/* The library's version, e.g. "0.1.0". */
MS_EXTERN const char *ms_version_string(void);

/* ------------------------------------------------------------------------
 * Fields and their quality.
 *
 * Every scalar field of a snapshot has an identifier, so that its quality
 * (exact, estimated, unavailable) and the provider that gave it can be said
 * per field. The order is Go's MemStats order and is part of the ABI: new
 * fields are only ever appended before MS_F__COUNT.
 * ------------------------------------------------------------------------ */
typedef enum ms_field_e {
  /* General */
  MS_F_ALLOC = 0,
  MS_F_TOTAL_ALLOC,
  MS_F_SYS,
  MS_F_LOOKUPS,
  MS_F_MALLOCS,
  MS_F_FREES,
  /* Heap */
  MS_F_HEAP_ALLOC,
  MS_F_HEAP_SYS,
  MS_F_HEAP_IDLE,
  MS_F_HEAP_INUSE,
  MS_F_HEAP_RELEASED,
  MS_F_HEAP_OBJECTS,
  /* Stacks */
  MS_F_STACK_INUSE,
  MS_F_STACK_SYS,
  /* Off-heap */
  MS_F_MSPAN_INUSE,
  MS_F_MSPAN_SYS,
  MS_F_MCACHE_INUSE,
  MS_F_MCACHE_SYS,
  MS_F_BUCK_HASH_SYS,
  MS_F_GC_SYS,
  MS_F_OTHER_SYS,
  /* GC */
  MS_F_NEXT_GC,
  MS_F_LAST_GC,
  MS_F_PAUSE_TOTAL_NS,
  MS_F_PAUSE_NS, /* the ring PauseNs/PauseEnd as a whole */
  MS_F_NUM_GC,
  MS_F_NUM_FORCED_GC,
  MS_F_GC_CPU_FRACTION,
  MS_F_ENABLE_GC,
  MS_F_DEBUG_GC,
  MS_F_BY_SIZE,    /* the size classes as a whole */
  MS_F_PAUSE_HIST, /* the pause histogram as a whole */
  /* Kernel view */
  MS_F_KERNEL_RSS,
  MS_F_KERNEL_VSZ,
  MS_F_KERNEL_LAZYFREE,
  MS_F_KERNEL_ANON_HUGE,
  MS_F_KERNEL_SWAP,
  /* Beyond Go: memory seen outside the allocator (src/core/mappings.c) */
  MS_F_KERNEL_ANON_RSS,   /* RssAnon of /proc/self/status */
  MS_F_OFF_HEAP_RELEASED, /* a *Sys term: mapped, not backed, off-heap */
  /* Beyond Go: Python's object allocator, a heap inside OtherSys */
  MS_F_PYTHON_ARENAS,
  MS_F_PYTHON_ARENA_SYS,
  MS_F_PYTHON_ARENA_RESIDENT,
  MS_F_PYTHON_ARENA_INUSE, /* of the resident part: pools holding blocks */
  MS_F_PYTHON_ARENA_ALLOC, /* of those: bytes in allocated blocks */
  /* Beyond Go: how old the allocator's sample behind the heap figures is */
  MS_F_HEAP_SAMPLE_AGE,
  /* Beyond Go: the unbacked part of a class, per class (their sum with
   * the allocator's unbacked metadata is OffHeapReleased) */
  MS_F_STACK_RELEASED,
  MS_F_OTHER_RELEASED,
  /* Beyond Go: what libmemstats itself holds in the process */
  MS_F_MEMSTATS_SELF,
  MS_F_MEMSTATS_SELF_SYS,
  /* Beyond Go: shared and file-backed memory */
  MS_F_KERNEL_RSS_FILE,  /* RssFile of /proc/self/status */
  MS_F_KERNEL_RSS_SHMEM, /* RssShmem of /proc/self/status */
  MS_F_SHARED_ANON,
  MS_F_SHARED_ANON_RESIDENT,
  MS_F__COUNT
} ms_field_t;

typedef enum ms_quality_e {
  MS_Q_UNAVAILABLE = 0, /* the provider does not have this number */
  MS_Q_ESTIMATED = 1,   /* an estimate: never show it as exact */
  MS_Q_EXACT = 2
} ms_quality_t;

/* Returns the Go MemStats name of a field ("HeapAlloc"), or NULL. */
MS_EXTERN const char *ms_field_name(ms_field_t field);
/* Returns "exact", "estimated" or "unavailable". */
MS_EXTERN const char *ms_quality_name(ms_quality_t q);

/* ------------------------------------------------------------------------
 * The snapshot.
 * ------------------------------------------------------------------------ */
#define MS_PAUSE_RING 256 /* Go's len(PauseNs) */
/* The room for per-field quality and source in a snapshot: fields can be
 * added up to this without moving anything (MS_F__COUNT <= this). */
#define MS_F_CAPACITY 128
#define MS_MAX_SIZE_CLASSES 256 /* room for jemalloc's bins + extents */
#define MS_MAX_PROVIDERS 8
#define MS_NAME_MAX 64

/* Pause histogram, laid out as Go 1.20's timeHistogram: bucket 0 is
 * underflow (negative durations), then MS_PAUSE_HIST_SUPER super-buckets of
 * MS_PAUSE_HIST_SUB sub-buckets each (super-bucket 0 covers [0, 256 ns),
 * super-bucket k >= 1 covers [2^(7+k), 2^(8+k)) ns), then overflow
 * (>= 2^47 ns). At most 25% relative error. */
#define MS_PAUSE_HIST_MIN_BITS 9
#define MS_PAUSE_HIST_MAX_BITS 48
#define MS_PAUSE_HIST_SUB_BITS 2
#define MS_PAUSE_HIST_SUB (1 << MS_PAUSE_HIST_SUB_BITS)
#define MS_PAUSE_HIST_SUPER                                                    \
  (MS_PAUSE_HIST_MAX_BITS - MS_PAUSE_HIST_MIN_BITS + 1)
#define MS_PAUSE_HIST_BUCKETS (MS_PAUSE_HIST_SUPER * MS_PAUSE_HIST_SUB + 2)

typedef struct ms_size_class_s {
  uint64_t size;    /* the largest object size in this class, bytes */
  uint64_t mallocs; /* cumulative objects allocated in this class */
  uint64_t frees;   /* cumulative objects freed in this class */
} ms_size_class_t;

typedef struct ms_pause_hist_s {
  uint64_t counts[MS_PAUSE_HIST_BUCKETS]; /* see MS_PAUSE_HIST_* above */
} ms_pause_hist_t;

typedef struct ms_snapshot_s {
  /* Set by the library: the size of the layout it filled (sizeof
   * ms_snapshot_t, or the smaller size an older caller passed), and its
   * version. ms_breakdown() reads no field past struct_size (0: all). */
  uint32_t struct_size;
  uint32_t lib_version; /* MAJOR << 16 | MINOR << 8 | PATCH */

  /* ---- identity ---- */
  int32_t pid;
  uint64_t start_time;    /* field 22 of /proc/PID/stat (clock ticks) */
  char comm[MS_NAME_MAX]; /* program name */
  uint64_t seq;           /* snapshot sequence number, from 1 */
  uint64_t time_unix_ns;  /* wall clock when computed */
  uint64_t time_mono_ns;  /* CLOCK_MONOTONIC when computed */
  uint64_t age_ns;        /* how old it was when served (0 if fresh) */
  uint32_t nproviders;
  char providers[MS_MAX_PROVIDERS][MS_NAME_MAX]; /* "tracked", "glibc", ... */

  /* ---- Go's MemStats, field for field ---- */
  uint64_t alloc, total_alloc, sys, lookups, mallocs, frees;
  uint64_t heap_alloc, heap_sys, heap_idle, heap_inuse, heap_released,
      heap_objects;
  uint64_t stack_inuse, stack_sys;
  uint64_t mspan_inuse, mspan_sys, mcache_inuse, mcache_sys;
  uint64_t buck_hash_sys, gc_sys, other_sys;
  uint64_t next_gc, last_gc, pause_total_ns;
  uint64_t pause_ns[MS_PAUSE_RING];  /* circular, newest at (num_gc+255)%256 */
  uint64_t pause_end[MS_PAUSE_RING]; /* Unix ns at each pause's end */
  uint32_t num_gc, num_forced_gc;
  double gc_cpu_fraction;
  int enable_gc, debug_gc;
  uint32_t nsize_classes;
  ms_size_class_t by_size[MS_MAX_SIZE_CLASSES];

  /* ---- beyond Go ---- */
  ms_pause_hist_t pause_hist;      /* every pause since start */
  uint64_t kernel_rss, kernel_vsz; /* /proc/self/statm, bytes */
  uint64_t kernel_lazyfree, kernel_anon_huge, kernel_swap; /* smaps_rollup */

  /* Per field: an ms_quality_t, and the index into providers[] of the
   * provider that gave it (0xff: none). Room for MS_F_CAPACITY fields, so
   * that new fields move nothing: entries past MS_F__COUNT are
   * unavailable. */
  uint8_t quality[MS_F_CAPACITY];
  uint8_t source[MS_F_CAPACITY];

  /* ---- added in 0.2 ----
   * New fields are appended here, never inserted above: a caller built
   * against an older header passes its smaller size to ms_snapshot_read()
   * and gets the fields its struct has. */
  /* The kernel's anonymous RSS (RssAnon of /proc/self/status), read with
   * every snapshot: what the classes above should account for (Ready). */
  uint64_t kernel_anon_rss;
  /* The unbacked part of the off-heap classes: as HeapSys holds
   * HeapReleased, each class holds its own mapped but unbacked bytes
   * (StackSys the whole stack mappings, OtherSys the whole mappings made
   * outside the allocator, MSpanSys, on jemalloc, its metadata mapped but
   * never touched), and this is their sum: never touched, or handed back.
   * A term of Prepared (HeapReleased + OffHeapReleased); Sys is the sum of
   * the *Sys fields. (0.2 as it first shipped kept it outside the classes,
   * a term of Sys of its own; a caller of that layout still gets that.) */
  uint64_t off_heap_released;
  /* A Python interpreter's object allocator (pymalloc) in the process: its
   * arenas (1 MiB each in CPython 3.10 and later), as the preload's mmap
   * interposer sees them made from Python's own code, how many bytes they
   * map and how many of those the kernel backs (pools in use or once used;
   * pymalloc carves pools from an arena in order and never hands a pool's
   * pages back, so the rest was never touched). Part of OtherSys (the rest,
   * unbacked, of OtherReleased too); unavailable where no Python arena is
   * mapped. */
  uint64_t python_arenas;
  uint64_t python_arena_sys;
  uint64_t python_arena_resident;
  /* What of python_arena_resident is in use, read from pymalloc's pool
   * headers as sys._debugmallocstats() reads them: the resident bytes of
   * pools holding at least one block (as HeapInuse holds spans in use),
   * and the bytes in allocated blocks ("# bytes in allocated blocks", as
   * HeapAlloc). Estimated where a header could not be read or failed its
   * checks (the whole resident part of that arena is then counted in
   * both). The breakdown counts the arenas by these: empty pools are idle,
   * free blocks of pools in use fragOverhead, allocated blocks data. */
  uint64_t python_arena_inuse;
  uint64_t python_arena_alloc;
  /* The age, in nanoseconds, of the allocator's sample that the heap
   * figures come from (0: taken for this snapshot). glibc's is taken at
   * most once a second, and less often on a large heap (100 times the CPU
   * a sample costs); in between its figures are moved by what the preload
   * counted, and bounded by the kernel's view of its heaps, as estimates.
   * Unavailable where no allocator's sample owns the heap figures. */
  uint64_t heap_sample_age_ns;

  /* ---- added after 0.2's first release ----
   * The parts of OffHeapReleased in StackSys and in OtherSys (the rest of
   * it, on jemalloc, is in MSpanSys). What of OtherSys is in use is
   * OtherSys - OtherReleased. */
  uint64_t stack_released;
  uint64_t other_released;
  /* What libmemstats itself holds in the process: its agent thread's
   * stack, the mappings it makes (the agent's buffers, the engine's
   * per-thread counters, a profile being sent), its own data and bss, and
   * the profile table (BuckHashSys). Resident bytes (MemstatsSelf) and
   * mapped bytes (MemstatsSelfSys). None of it is in the program's
   * classes but BuckHashSys, Go's class for the profile table; the
   * mappings are known to it under the preload only. */
  uint64_t memstats_self;
  uint64_t memstats_self_sys;
  /* The kernel's resident shared memory (RssShmem: shared anonymous
   * mappings, System V and POSIX shared memory, tmpfs files mapped) and
   * file-backed memory (RssFile: code, libraries, mapped files), from
   * /proc/self/status; neither is in RssAnon nor in any class of Sys. */
  uint64_t kernel_rss_file;
  uint64_t kernel_rss_shmem;
  /* The shared anonymous mappings the program made itself (mmap with
   * MAP_SHARED | MAP_ANONYMOUS, as the preload sees it; inherited across
   * fork): their size, and their pages in memory, touched by this process
   * or another that shares them (mincore's view, which may exceed this
   * process's RssShmem). Shared memory, no part of Sys. */
  uint64_t shared_anon;
  uint64_t shared_anon_resident;
} ms_snapshot_t;

/* The breakdown shown by memtop, computed from a snapshot:
 *   inuse        = HeapInuse + StackInuse + MSpanInuse + MCacheInuse
 *                  + BuckHashSys + GCSys + (OtherSys - OtherReleased)
 *   Prepared     = HeapReleased + OffHeapReleased
 *   Ready        = Sys - Prepared
 *   fragOverhead = HeapInuse - HeapAlloc
 *   data         = inuse - fragOverhead
 *   idle         = Ready - inuse
 * where Python's arenas, a heap inside OtherSys, count as a heap does:
 * OtherSys's term in inuse is less their empty pools (PythonArenaResident
 * - PythonArenaInuse), and fragOverhead has their pools' free blocks too
 * (PythonArenaInuse - PythonArenaAlloc). Where their in-use part is not
 * known (an older library's snapshot), they count whole and inuse, data
 * and idle are estimated.
 * Values are signed so that a provider that breaks an identity shows it
 * instead of wrapping. The struct grows as the snapshot does: new figures
 * are appended after struct_size, never inserted above, and a caller built
 * against an older header gets the figures its struct has (see
 * ms_breakdown_read()). */
typedef struct ms_breakdown_s {
  int64_t ready, prepared, inuse, frag_overhead, data, idle;
  ms_quality_t q_ready, q_prepared, q_inuse, q_frag_overhead, q_data, q_idle;
  /* Ready+Prepared: Sys by definition, so as well known as Sys is, even
   * when the split between Ready and Prepared is an estimate. */
  int64_t total;
  ms_quality_t q_total;
  /* Nonzero when Sys != the sum of the *Sys fields (for a snapshot of
   * 0.2 as it first shipped, whose classes leave OffHeapReleased out: the
   * sum of the *Sys fields and OffHeapReleased). */
  int sys_mismatch;

  /* ---- added in 0.2 ----
   * Set by the library: the size of the layout it filled (the caller's
   * size, or sizeof ms_breakdown_t of the library if that is smaller).
   * 0.1's struct ends before it. New figures are appended after it. */
  uint32_t struct_size;
} ms_breakdown_t;

/* Computes the breakdown of *snap into *out, which is size bytes owned by
 * the caller (pass sizeof *out). Each figure's quality is the worst quality
 * of the fields it is computed from. A struct smaller than this library's
 * (built against an older header) gets the figures it has, a larger one
 * (a newer header) those this library knows, with struct_size saying how
 * far; nothing past size is written. Returns 0, or MS_EINVAL if an
 * argument is NULL or size is no header's ms_breakdown_t. Pure function;
 * thread-safe. */
MS_EXTERN int ms_breakdown_read(const ms_snapshot_t *snap, ms_breakdown_t *out,
                                size_t size);

/* 0.1's entry point, kept for programs built against 0.1's header: it
 * fills 0.1's layout and nothing past it. Code built against this header
 * calls ms_breakdown_read() with its own struct's size through the macro,
 * so that its struct may grow with the header. */
MS_EXTERN int ms_breakdown(const ms_snapshot_t *snap, ms_breakdown_t *out);
#define ms_breakdown(snap, out) ms_breakdown_read((snap), (out), sizeof *(out))

/* Takes a consistent snapshot of this process's statistics into *snap,
 * which is sizeof(ms_snapshot_t) == size bytes owned by the caller (pass
 * sizeof *snap). No application thread waits for it: writers caught in the
 * middle of an update are waited for, nobody else. Fills identity, the
 * engine's figures and the latest figures of every active provider. Safe to
 * call from any thread; concurrent readers are serialised. A caller built
 * against an older header passes its own, smaller size and gets the fields
 * its struct has (converted where the meaning changed: a class of 0.1's
 * and 0.2's layouts holds only its backed bytes, and 0.1's Sys leaves out
 * OffHeapReleased, which it does not know). Returns 0, or MS_EINVAL (NULL,
 * or a size that is no layout of any version). */
MS_EXTERN int ms_snapshot_read(ms_snapshot_t *snap, size_t size);

/* Pause-histogram helpers. ms_pause_hist_bucket() maps a duration to its
 * bucket index (0 underflow .. MS_PAUSE_HIST_BUCKETS-1 overflow);
 * ms_pause_hist_lower() gives a bucket's lower edge in ns (INT64_MIN for
 * underflow), ms_pause_hist_upper() its upper edge, exclusive: the next
 * bucket's lower edge (0 for underflow, INT64_MAX for overflow), so that a
 * pause of d ns is in bucket b when lower(b) <= d < upper(b).
 * ms_pause_hist_quantile() returns the q-quantile (0..1) as the upper edge
 * of the bucket that holds it, clamped to 2^47 ns for overflow, or -1 if
 * the histogram is empty. ms_pause_hist_total() is the number of pauses
 * the histogram counts, the sum of its buckets (0 for NULL). A bucket
 * index below 0 or above the last is read as underflow or overflow. */
MS_EXTERN int ms_pause_hist_bucket(int64_t ns);
MS_EXTERN int64_t ms_pause_hist_lower(int bucket);
MS_EXTERN int64_t ms_pause_hist_upper(int bucket);
MS_EXTERN int64_t ms_pause_hist_quantile(const ms_pause_hist_t *h, double q);
MS_EXTERN uint64_t ms_pause_hist_total(const ms_pause_hist_t *h);

/* ------------------------------------------------------------------------
 * The accounting API: what providers and language runtimes call.
 *
 * Hot-path calls (ms_heap_*, ms_object_*) take no lock and no contended
 * atomic: they update a per-thread shard inside a sequence bracket. They are
 * async-signal-safe with respect to themselves (a call nested in a signal
 * handler goes to a shared shard with atomic updates). They never allocate.
 * ------------------------------------------------------------------------ */

/* States of heap memory, as Go's spans: not mapped, mapped but released to
 * the OS (Prepared), mapped and backed but holding nothing (idle), and
 * in-use (holding objects or reserved for them). */
typedef enum ms_span_state_e {
  MS_SPAN_NONE = 0,
  MS_SPAN_RELEASED,
  MS_SPAN_IDLE,
  MS_SPAN_INUSE,
  MS_SPAN__COUNT
} ms_span_state_t;

/* Moves `bytes` of heap memory from state `from` to state `to`. Mapping new
 * heap is NONE->IDLE (or NONE->RELEASED); unmapping is X->NONE; handing
 * pages back with MADV_DONTNEED/MADV_FREE is IDLE->RELEASED. HeapSys =
 * RELEASED+IDLE+INUSE, HeapIdle = IDLE+RELEASED, HeapReleased = RELEASED,
 * HeapInuse = INUSE. Returns 0 or MS_EINVAL (bad state). */
MS_EXTERN int ms_heap_move(ms_span_state_t from, ms_span_state_t to,
                           uint64_t bytes);

/* An object of `size` bytes was allocated / freed. The engine picks the size
 * class from the size (sizes above the largest class count as large
 * objects). The free must pass the same size as the allocation. */
MS_EXTERN void ms_object_alloc(uint64_t size);
MS_EXTERN void ms_object_free(uint64_t size);

/* Added in 0.2: the same, with the object's address, for the heap profile.
 * An allocator or runtime that calls these instead of ms_object_alloc/free
 * gets its objects in `memtop profile PID` by call stack, as a program run
 * under the preload gets its mallocs: each is counted exactly as
 * ms_object_alloc/free count it, and allocations are sampled as the
 * preload samples malloc (one per MEMSTATS_PROFILE_RATE bytes on average,
 * by the same per-thread countdown; 1 records every object). A sampled
 * allocation records the caller's stack (this library's own frames left
 * out, so the innermost frame is the allocator's function that called
 * this) and p; a free of a sampled p is matched by address and counted
 * freed in the profile. Rules:
 *   - p is the object's address, as the free will pass it; NULL is
 *     counted but never sampled;
 *   - call ms_object_free_at(p, size) before the address can be handed
 *     out again (before the object goes back on a free list), as a
 *     malloc's free is recorded before the block goes back; a free
 *     recorded after the reuse would end the new object's sample;
 *   - an object allocated with ms_object_alloc_at may be freed with
 *     ms_object_free (and the reverse), but then a sample of it stays in
 *     use in the profile until its address is sampled again.
 * The profile exists when MEMSTATS_PROFILE_RATE is not 0 (default 524288
 * bytes); its table is mapped (with a system call, never malloc) by the
 * first sample or the first profile asked for. With
 * MEMSTATS_PROFILE_RATE=0 nothing is set up, and each call costs what
 * ms_object_alloc/free cost plus one predictable branch. Same hot-path
 * rules as the calls above: no lock on the unsampled path (a sampled one
 * takes the profile table's own mutex, held for a few hundred
 * instructions), no allocation,
 * async-signal-safe with respect to themselves (a call from a signal
 * handler that interrupted a sampled one is counted but not sampled, and
 * its free of a sampled object is counted as lost). */
MS_EXTERN void ms_object_alloc_at(const void *p, uint64_t size);
MS_EXTERN void ms_object_free_at(const void *p, uint64_t size);

/* Off-heap memory classes, Go's sysMemStat counters. */
typedef enum ms_sys_class_e {
  MS_SYS_STACK = 0, /* StackSys / StackInuse */
  MS_SYS_MSPAN,     /* allocator metadata: MSpanSys / MSpanInuse */
  MS_SYS_MCACHE,    /* thread caches: MCacheSys / MCacheInuse */
  MS_SYS_BUCKHASH,  /* the profiler's bucket table: BuckHashSys */
  MS_SYS_GC,        /* collector metadata: GCSys */
  MS_SYS_OTHER,     /* everything else: OtherSys */
  MS_SYS__COUNT
} ms_sys_class_t;

/* Adds signed deltas to an off-heap class: sys_delta to its *Sys, and
 * inuse_delta to its *Inuse (for STACK, MSPAN, MCACHE; must be 0 for the
 * others). Atomic; not meant for a per-object hot path. Returns 0 or
 * MS_EINVAL. */
MS_EXTERN int ms_sys_add(ms_sys_class_t cls, int64_t sys_delta,
                         int64_t inuse_delta);

/* Garbage collection. ms_gc_begin() marks the start of a stop-the-world
 * pause, ms_gc_end() its end; the pause is recorded in the ring (PauseNs,
 * PauseEnd), PauseTotalNs, NumGC (NumForcedGC if forced), LastGC and the
 * histogram. ms_gc_pause() records a pause measured by the caller
 * (CLOCK_MONOTONIC start and end, ns). One collection at a time: the
 * collector's own lock serialises callers. No lock, no allocation:
 * callable with the world stopped. Returns 0 or MS_EINVAL (end before
 * begin). */
MS_EXTERN int ms_gc_begin(int forced);
MS_EXTERN int ms_gc_end(void);
MS_EXTERN int ms_gc_pause(uint64_t start_mono_ns, uint64_t end_mono_ns,
                          int forced);
/* Sets NextGC, the heap size the next collection aims at. */
MS_EXTERN void ms_gc_set_next(uint64_t bytes);
/* Adds CPU time spent in the collector (ns); without calls, GCCPUFraction
 * is estimated from the pauses. */
MS_EXTERN void ms_gc_add_cpu(uint64_t ns);
/* Declares whether the program has a collector (EnableGC). */
MS_EXTERN void ms_gc_set_enabled(int enabled);

/* ------------------------------------------------------------------------
 * The agent: serves snapshots on $dir/<pid>.sock (see DESIGN.md).
 * ------------------------------------------------------------------------ */

/* Starts the agent thread. Reads MEMSTATS_* from the environment. Returns 0,
 * MS_EEXIST if already running, MS_EUNSAFE if the socket directory is
 * unsafe, or another negative code; never aborts, never prints unless
 * MEMSTATS_DEBUG=1. A fork() child has no agent (a fork handler may not
 * start a thread): call this in the child to serve it. Under the preload
 * the child's agent starts by itself, at the child's first allocation
 * 100 ms or more after the fork. */
MS_EXTERN int ms_agent_start(void);
/* Stops the agent and removes its socket. Safe to call if not started.
 * A program that has become another user since the start (root to
 * nobody) stops it as well, but may no longer remove the socket from the
 * first user's directory: memtop removes it once the process is gone. */
MS_EXTERN int ms_agent_stop(void);

#ifdef __cplusplus
}
#endif
#endif /* MEMSTATS_H */
