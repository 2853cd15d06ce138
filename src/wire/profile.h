/*
 * profile.h - a heap profile as it crosses the wire (internal).
 *
 * The agent answers MS__MSG_PROFILE_REQ with the records of its sampled
 * heap profile and the mappings of the process; memtop decodes them into
 * an ms__profile_t and writes pprof's profile.proto (or a top list) from
 * it. This header is the one contract between the two halves: the target
 * side fills and encodes it, the tool side decodes and reads it.
 *
 * Counts are as sampled (not scaled): memtop unsamples them as Go does,
 * with the sampling rate the profile carries. A record is one bucket,
 * keyed by (stack, size): every object it counts has that size, as in
 * Go's mprof.go.
 */
#ifndef MS_WIRE_PROFILE_H
#define MS_WIRE_PROFILE_H

#include <stddef.h>
#include <stdint.h>

/* The deepest stack a record carries (MEMSTATS_PROFILE_DEPTH is capped
 * here). */
#define MS__PROFILE_MAX_DEPTH 256u

/* One bucket: the objects of one size allocated from one call stack,
 * over the profile's lifetime (alloc_*) and freed since (free_*); in use
 * = alloc - free. Figures come from the last completed cut (Go's
 * three-stage accounting), so an in-use figure is never torn. */
typedef struct ms__profile_record_s {
  uint64_t size;                   /* bytes asked for, per object */
  uint64_t alloc_objects, alloc_bytes;
  uint64_t free_objects, free_bytes;
  uint32_t depth;                  /* entries in stack */
  int truncated;                   /* the stack was deeper than depth */
  const uint64_t *stack;           /* return addresses, innermost first */
} ms__profile_record_t;

/* One mapping of the target's address space that holds code. */
typedef struct ms__profile_mapping_s {
  uint64_t start, limit;  /* [start, limit) */
  uint64_t offset;        /* file offset of start */
  const char *path;       /* as in /proc/PID/maps; may be "" */
  const uint8_t *build_id;/* GNU build id, or NULL */
  uint32_t build_id_len;
} ms__profile_mapping_t;

typedef struct ms__profile_s {
  int32_t pid;
  uint64_t start_time;       /* field 22 of /proc/PID/stat */
  uint64_t time_unix_ns;     /* when the profile was cut */
  uint64_t rate;             /* mean bytes between samples; 1: every one */
  uint64_t buckets_dropped;  /* samples not recorded: bucket table full */
  uint32_t nrecords;
  const ms__profile_record_t *records;
  uint32_t nmappings;
  const ms__profile_mapping_t *mappings;
} ms__profile_t;

#endif
