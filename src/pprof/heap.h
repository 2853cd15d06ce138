/*
 * heap.h - a heap profile made ready for output (memtop side).
 *
 * The agent sends what its sampler counted (wire/profile.h: buckets keyed
 * by stack and size, as sampled, and the process's mappings). An mt_heap_t
 * is that profile as pprof's profile.proto models it: samples whose values
 * are unsampled exactly as Go's runtime/pprof does, locations (one per
 * distinct return address), functions, mappings, and one string table.
 * Every output reads this one model: the profile.proto writer (pprof.c),
 * the top list (top.c). Strings in it are as the target's files gave them:
 * an output for a terminal sanitises them.
 *
 * Building takes three steps: mt_heap_build() (values and locations),
 * mt_heap_symbolize() (names, files and lines from the target's binaries,
 * sym.c), then any output. Nothing here talks to a target.
 */
#ifndef MT_PPROF_HEAP_H
#define MT_PPROF_HEAP_H

#include <stddef.h>
#include <stdint.h>

#include "wire/profile.h"

/* The sample values, in profile.proto's order (Go's heap profile). */
enum {
  MT_HEAP_ALLOC_OBJECTS = 0, /* count */
  MT_HEAP_ALLOC_SPACE,       /* bytes */
  MT_HEAP_INUSE_OBJECTS,     /* count */
  MT_HEAP_INUSE_SPACE,       /* bytes */
  MT_HEAP_NVALUES
};

/* One frame of a location: a function and the line in it. A location has
 * several when calls were inlined (the innermost first, as in pprof). */
typedef struct mt_heap_line_s {
  uint32_t function; /* index into functions */
  int64_t line;      /* 0: unknown */
} mt_heap_line_t;

typedef struct mt_heap_function_s {
  uint32_t name;        /* string index: demangled */
  uint32_t system_name; /* string index: as in the symbol table */
  uint32_t filename;    /* string index; 0: unknown */
  int64_t start_line;   /* 0: unknown */
} mt_heap_function_t;

typedef struct mt_heap_location_s {
  /* The return address minus one: an address inside the call instruction,
   * which is the call site's line (pprof's convention for non-leaf
   * frames, and what its legacy heap-profile parser does). */
  uint64_t address;
  uint32_t mapping; /* index + 1 into mappings; 0: in none */
  uint32_t nlines;  /* 0: not resolved */
  mt_heap_line_t *lines;
} mt_heap_location_t;

typedef struct mt_heap_mapping_s {
  uint64_t start, limit, offset;
  uint32_t filename; /* string index */
  uint32_t build_id; /* string index: the id in lower-case hex; 0: none */
  int symbolized;    /* functions (and where known lines) were resolved */
  /* Why the mapping's addresses are left unresolved (a static string), or
   * NULL. */
  const char *unresolved;
} mt_heap_mapping_t;

typedef struct mt_heap_sample_s {
  int64_t value[MT_HEAP_NVALUES]; /* unsampled, as Go's pprof does */
  int64_t size;                   /* bytes per object: the bucket's size */
  uint32_t nlocations;
  uint32_t *locations; /* indexes into locations, innermost first */
  int truncated;       /* the stack was deeper than the sampler's limit */
} mt_heap_sample_t;

typedef struct mt_heap_s {
  int32_t pid;
  uint64_t time_nanos;     /* when the (last) profile was cut */
  uint64_t duration_nanos; /* a delta's span; 0 otherwise */
  uint64_t rate;           /* the sampling period, bytes */
  uint64_t buckets_dropped;
  uint64_t frees_lost; /* the target's count since it started (a delta's
                          too): those blocks show as in use */
  /* When the target's sampling began (ns since the epoch), where it began
   * after the process's start (memtop attach --track); 0: with it. */
  uint64_t since_nanos;
  int delta;

  mt_heap_sample_t *samples;
  size_t nsamples;
  mt_heap_location_t *locations;
  size_t nlocations;
  mt_heap_function_t *functions;
  size_t nfunctions;
  mt_heap_mapping_t *mappings;
  size_t nmappings;

  /* Figures were cut to keep their sums within int64 (a stranger's
   * impossible counts): see mt_heap_build. */
  int capped;

  /* The string table: strings[0] is "" (profile.proto's rule). */
  char **strings;
  size_t nstrings;

  void *internal; /* the builder's indexes (heap.c) */
} mt_heap_t;

/* Go's scaleHeapSample (runtime/pprof/protomem.go): the number of objects
 * and bytes a sampled (count, bytes) pair stands for at `rate`, with
 * scale = 1 / (1 - exp(-(bytes/count)/rate)). rate <= 1 means every
 * allocation was recorded: no scaling. 0 counts give 0. exp is libm's,
 * loaded at the first call (pprof/libs.h); where libm cannot be loaded
 * the pair is left as sampled (mt_heap_build fails first). */
void mt_heap_scale(int64_t count, int64_t bytes, uint64_t rate,
                   int64_t *out_count, int64_t *out_bytes);

/* The most distinct locations (return addresses) a heap holds: what is
 * built from a profile, and written from it, stays within a few hundred
 * MiB however a stranger chose its addresses. */
#define MT_HEAP_MAX_LOCATIONS (1u << 20)

/* Builds *h from a decoded profile. With base not NULL, the result is
 * the growth from base to p (what Go's ?seconds=N gives): each sample is
 * p's unsampled values less base's for the same stack and size, so in-use
 * figures may be negative. The mappings are p's. Every figure is kept
 * within INT64_MAX / (number of samples), so that sums of them cannot
 * overflow (h->capped says a figure was cut). Returns 0, MS_ENOMEM,
 * MS_EINVAL (a record with no stack, a depth or a sampling rate over the
 * limit), MS_ENOSYS (libm cannot be loaded: pprof/libs.h) or MS_ENOSPC:
 * the profile is too large (more records, stack words or mappings than
 * wire/profile.h allows, or more than MT_HEAP_MAX_LOCATIONS distinct
 * addresses). */
int mt_heap_build(const ms__profile_t *p, const ms__profile_t *base,
                  mt_heap_t *h);

/* What a profile whose sampling began late (since_nanos, memtop attach
 * --track) says of it: "samples since memtop attach --track at
 * 2026-11-27 14:08:39 UTC; blocks allocated before are not in the
 * profile", into buf (len bytes). Returns 1, or 0 (buf empty) for a
 * profile sampled from the process's start. */
int mt_heap_since_text(const mt_heap_t *h, char *buf, size_t len);

/* ms_strerror() for what mt_heap_build, mt_heap_symbolize and the outputs
 * return, MS_ENOSPC said as a profile too large, with what to do, and
 * MS_ENOSYS as the library that could not be loaded, with its package
 * (pprof/libs.h). */
const char *mt_heap_strerror(int rc);

/* Resolves functions, files and lines from the binaries named by the
 * mappings (sym.c), which are those of process pid, started at start_time
 * (the profile's: another process with that PID is not read). They are
 * read as that process sees them (under /proc/PID/root) and only as it
 * could read them itself: with its user's rights, and only regular files
 * (pprof/tfiles.h). pid 0: memtop's own files with its own rights. A
 * mapping whose file cannot be read so, or whose build id differs from
 * the one the profile carries, is left unresolved with the reason in its
 * `unresolved` (so is every mapping of a process that has gone). Returns
 * 0, MS_ENOMEM or MS_ENOSYS (libdw or libelf cannot be loaded). */
int mt_heap_symbolize(mt_heap_t *h, int pid, uint64_t start_time);

/* Adds s to the string table (once): its index, or 0 on ENOMEM (which
 * sets the heap's out-of-memory flag, reported by mt_heap_symbolize). */
uint32_t mt_heap_string(mt_heap_t *h, const char *s);

/* Adds a function (once per name, system name, file, start line). */
uint32_t mt_heap_function(mt_heap_t *h, const char *name,
                          const char *system_name, const char *file,
                          int64_t start_line);

/* Nonzero if an allocation failed while adding strings or functions. */
int mt_heap_oom(const mt_heap_t *h);

void mt_heap_free(mt_heap_t *h);

#endif
