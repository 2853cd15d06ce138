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
  uint64_t size; /* bytes asked for, per object */
  uint64_t alloc_objects, alloc_bytes;
  uint64_t free_objects, free_bytes;
  uint32_t depth;        /* entries in stack */
  int truncated;         /* the stack was deeper than depth */
  const uint64_t *stack; /* return addresses, innermost first */
} ms__profile_record_t;

/* One mapping of the target's address space that holds code. */
typedef struct ms__profile_mapping_s {
  uint64_t start, limit;   /* [start, limit) */
  uint64_t offset;         /* file offset of start */
  const char *path;        /* as in /proc/PID/maps; may be "" */
  const uint8_t *build_id; /* GNU build id, or NULL */
  uint32_t build_id_len;
} ms__profile_mapping_t;

typedef struct ms__profile_s {
  int32_t pid;
  uint64_t start_time;      /* field 22 of /proc/PID/stat */
  uint64_t time_unix_ns;    /* when the profile was cut */
  uint64_t rate;            /* mean bytes between samples; 1: every one */
  uint64_t buckets_dropped; /* samples not recorded: bucket table full */
  /* Frees of sampled blocks the target could not record (a signal
   * handler's, while its thread was sampling), since it started: those
   * blocks stay in use in the profile. 0 from an older agent. */
  uint64_t frees_lost;
  /* When sampling began (ns since the epoch), where it began after the
   * process's start (memtop attach --track): blocks allocated before it
   * are in no record. 0: with the process, or an older agent. */
  uint64_t since_unix_ns;
  uint32_t nrecords;
  const ms__profile_record_t *records;
  uint32_t nmappings;
  const ms__profile_mapping_t *mappings;
} ms__profile_t;

/* ------------------------------------------------------------------------
 * On the wire (src/wire/profile.c)
 *
 * A request is an MS__MSG_PROFILE_REQ frame with MS__TAG_FLAGS (flags
 * MS__PROFREQ_*; ms__wire_encode_request() writes it). The answer is one
 * or more MS__MSG_PROFILE frames, each within the reader's payload bound
 * (MS__WIRE_MAX_PAYLOAD), or one MS__MSG_ERROR. Each profile frame holds,
 * as tagged records (wire.h's rules: unknown tags are skipped):
 *   MS__TAG_PROF_CHUNK   u64, 0 for the first frame, then 1, 2, ...
 *   MS__TAG_PID, MS__TAG_START_TIME, MS__TAG_TIME_UNIX, MS__TAG_PROF_RATE,
 *   MS__TAG_PROF_DROPPED, MS__TAG_PROF_FREES_LOST, MS__TAG_PROF_SINCE
 *                        u64 each, in the first frame (SINCE only when
 *                        not 0) (a later frame that
 *                        repeats one must agree with the first)
 *   MS__TAG_PROF_UNWINDER  string: which unwinder captured the stacks
 *   MS__TAG_PROF_RECORD  u32 fixed (bytes of the fixed part that follows,
 *                        48 today; a newer sender may add fields at its
 *                        end), u64 size, alloc_objects, alloc_bytes,
 *                        free_objects, free_bytes, u32 flags (bit 0:
 *                        truncated), u32 depth, then depth u64 addresses
 *   MS__TAG_PROF_MAPPING u32 fixed (32 today), u64 start, limit, offset,
 *                        u32 path length, u32 build id length; then the
 *                        path's bytes and the build id's
 *   MS__TAG_PROF_LAST    u64 1, in the last frame only
 *
 * What libmemstats puts in a record: `size` is the block's usable size,
 * the bytes the tracker counts in HeapAlloc (the allocator's class size
 * for a malloc(n), not n: the preload never sees a block's n on free), so
 * the in-use bytes of a profile at rate 1 add up to HeapAlloc's sampled
 * part, and the countdown is drawn over the same bytes. Stacks are return
 * addresses, innermost first, the library's own frames left out: the
 * first one is the caller of malloc, calloc, ... or operator new.
 * ------------------------------------------------------------------------ */
enum {
  MS__TAG_PROF_RATE = 64,
  MS__TAG_PROF_DROPPED = 65,
  MS__TAG_PROF_CHUNK = 66,
  MS__TAG_PROF_LAST = 67,
  MS__TAG_PROF_RECORD = 68,
  MS__TAG_PROF_MAPPING = 69,
  MS__TAG_PROF_UNWINDER = 70,
  MS__TAG_PROF_FREES_LOST = 71,
  MS__TAG_PROF_SINCE = 72
};

/* Profile request flags: none yet (a reader ignores those it does not
 * know). */
#define MS__PROFREQ_NONE 0x0u

/* Bounds a reader enforces on a whole profile (hostile senders), each
 * as large as the agent's own table can make it (sampler.c: at most 2^18
 * buckets and 32 stack words per bucket), so that a reader never refuses
 * a real profile and what it builds from one stays bounded: */
#define MS__PROFILE_MAX_RECORDS (1u << 18)
/* ... the stack words of all its records together (records x depth) ... */
#define MS__PROFILE_MAX_FRAMES (1u << 23)
#define MS__PROFILE_MAX_MAPPINGS (1u << 16)
#define MS__PROFILE_MAX_PATH 4096u
#define MS__PROFILE_MAX_BUILD_ID 64u
/* ... the bytes of its mappings' paths and build ids together ... */
#define MS__PROFILE_MAX_MAPPING_BYTES (8u << 20)
/* ... the sampling rate (MEMSTATS_PROFILE_RATE's own bound) ... */
#define MS__PROFILE_MAX_RATE ((uint64_t)1 << 40)
/* ... and the bytes of all its frames together. */
#define MS__PROFILE_MAX_TOTAL (256u << 20)
/* What all the profiles a process decodes at once may hold together
 * (memtop reads several targets' at a time: --once --sites, a delta's
 * two): room for two of the largest (about 90 MiB each), so that many
 * strangers' profiles cannot add up past it. */
#define MS__PROFILE_MAX_HELD (192u << 20)

/* ---- encoding (the agent) ---- */

/* The smallest payload bound the encoder accepts: room for the largest
 * record and the largest mapping with a frame's own records. */
#define MS__PROFILE_MIN_PAYLOAD 16384u

/* An upper bound on the bytes ms__profile_encode() writes for p with
 * payloads of at most max_payload bytes (headers included). */
size_t ms__profile_encoded_bound(const ms__profile_t *p, const char *unwinder,
                                 size_t max_payload);
/* Writes p as MS__MSG_PROFILE frames into buf[0, cap), each payload at
 * most max_payload bytes (at least MS__PROFILE_MIN_PAYLOAD), the last marked
 * last. unwinder may be NULL. Stacks deeper than MS__PROFILE_MAX_DEPTH are cut
 * there (and marked truncated), paths at MS__PROFILE_MAX_PATH, build ids at
 * MS__PROFILE_MAX_BUILD_ID. Returns 0 with *len the bytes written,
 * MS_ENOSPC if cap is too small (ms__profile_encoded_bound() is enough),
 * or MS_EINVAL for a smaller max_payload. Never allocates. */
int ms__profile_encode(const ms__profile_t *p, const char *unwinder,
                       uint8_t *buf, size_t cap, size_t max_payload,
                       size_t *len);

/* ---- decoding (memtop): every byte is hostile ---- */

/* A profile being decoded, frame by frame. `profile` is valid (possibly
 * partial) after every successful ms__profile_decode_frame(); it and
 * everything it points to (records, stacks, mappings, paths, build ids,
 * unwinder) are owned by this object and live until
 * ms__profile_decoded_free(). Paths and the unwinder name are
 * NUL-terminated, control characters replaced by '?'. */
typedef struct ms__profile_decoded_s {
  ms__profile_t profile;
  int complete;                      /* the last frame has been decoded */
  const char *unwinder;              /* "" if the target did not say */
  struct ms__profile_store_s *store; /* private */
} ms__profile_decoded_t;

/* A new, empty decoded profile. Returns NULL when out of memory. */
ms__profile_decoded_t *ms__profile_decoded_new(void);
/* Adds the payload of one MS__MSG_PROFILE frame (the bytes after the
 * header; frames in the order received), in time and memory linear in the
 * frame's bytes: nothing decoded before is copied again (but for the
 * amortised growth of the record and mapping arrays). Returns 0
 * (d->complete says whether it was the last frame), MS_EPROTO with *why
 * set (a frame out of order, after the last, disagreeing with the first,
 * malformed, or a profile past one of the bounds above: "profile too
 * large: ..."; the object is then unusable but still to be freed), or
 * MS_ENOMEM (out of memory, or MS__PROFILE_MAX_HELD reached by this and
 * the other profiles being decoded; *why says which). why may be NULL. */
int ms__profile_decode_frame(ms__profile_decoded_t *d, const uint8_t *payload,
                             size_t len, const char **why);
/* Decodes a profile that is whole in one payload: *out is a new object
 * (complete) on 0, NULL on error (MS_EPROTO: malformed or not the last
 * frame; MS_ENOMEM). */
int ms__profile_decode(const uint8_t *payload, size_t len,
                       ms__profile_decoded_t **out, const char **why);
/* Decodes whole frames (headers included) from buf[0, len) until the last
 * profile frame: *out is a new complete object on 0, NULL on error
 * (MS_EPROTO, also for a frame of another type or bytes missing;
 * MS_ENOMEM; an MS__MSG_ERROR frame gives its code, with *why the
 * static text "the target answered with an error"). *used, if not NULL,
 * receives the bytes consumed. */
int ms__profile_decode_frames(const uint8_t *buf, size_t len,
                              ms__profile_decoded_t **out, size_t *used,
                              const char **why);
void ms__profile_decoded_free(ms__profile_decoded_t *d);

#endif
