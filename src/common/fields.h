/*
 * fields.h - the one definition of every snapshot field: its Go MemStats
 * name, where it lives in ms_snapshot_t, its type and unit, where the JSON
 * emitter puts it, and its Prometheus name and help line. Every emitter
 * (text, JSON, wire, Prometheus, the live view) walks this table instead of
 * naming fields itself.
 */
#ifndef MS_COMMON_FIELDS_H
#define MS_COMMON_FIELDS_H

#include <stddef.h>
#include <stdint.h>

#include "memstats.h"

typedef enum ms__unit_e {
  MS__UNIT_BYTES,   /* bytes */
  MS__UNIT_COUNT,   /* a count of objects or events */
  MS__UNIT_NS,      /* nanoseconds (a duration) */
  MS__UNIT_UNIX_NS, /* a point in time, Unix nanoseconds */
  MS__UNIT_RATIO,   /* a double in [0, 1] */
  MS__UNIT_BOOL,    /* an int, 0 or 1 */
  MS__UNIT_ARRAY    /* a compound field (ring, classes, histogram) */
} ms__unit_t;

typedef enum ms__ctype_e {
  MS__CT_U64,
  MS__CT_U32,
  MS__CT_INT,
  MS__CT_DOUBLE,
  MS__CT_NONE /* compound: no scalar value */
} ms__ctype_t;

typedef struct ms__field_info_s {
  ms_field_t id;
  const char *go_name; /* "HeapAlloc": Go's MemStats / JSON name */
  size_t offset;       /* offsetof(ms_snapshot_t, ...) */
  ms__ctype_t ctype;
  ms__unit_t unit;
  /* 1 (MS__GO) if this is one of Go's MemStats fields; MS__GO_TOO for a
   * field beyond Go that --json's "memstats" object carries after Go's,
   * because Go's identities need it there (Prepared = HeapReleased +
   * OffHeapReleased: a reader of Go's layout ignores a member it does not
   * know); 0 for the others. */
  int in_go;
  /* A figure of the kernel's: its key in --json's "kernel" object ("rss");
   * NULL for every other field. */
  const char *kernel_key;
  const char *prom_name; /* "memstats_heap_alloc_bytes", NULL if none */
  const char *help;      /* one line, for Prometheus's HELP */
} ms__field_info_t;

#define MS__GO 1
#define MS__GO_TOO 2

/* The table, indexed by ms_field_t (ms__fields[i].id == i). */
extern const ms__field_info_t ms__fields[MS_F__COUNT];

/* The field's scalar value as a double / uint64 (0 for compound fields). */
double ms__field_double(const ms_snapshot_t *s, ms_field_t f);
uint64_t ms__field_u64(const ms_snapshot_t *s, ms_field_t f);
/* Sets a scalar field from a uint64 / double (compound fields: no-op). */
void ms__field_set_u64(ms_snapshot_t *s, ms_field_t f, uint64_t v);
void ms__field_set_double(ms_snapshot_t *s, ms_field_t f, double v);
/* The raw 64 bits of a scalar field, as the wire carries them (exact round
 * trip; no conversion), and the reverse. */
uint64_t ms__field_bits(const ms_snapshot_t *s, const ms__field_info_t *fi);
void ms__field_set_bits(ms_snapshot_t *s, const ms__field_info_t *fi,
                        uint64_t v);
/* Looks a field up by its Go name: returns its index (an ms_field_t), or
 * -1 if unknown (no field, not an error code). */
int ms__field_by_go_name(const char *name);

/* A field's quality, read defensively: a byte this library does not know (a
 * newer peer, a corrupt or hand-made snapshot) counts as unavailable, so
 * nothing claims more than is known. Every reader of a quality byte goes
 * through this. */
static inline ms_quality_t ms__field_quality(const ms_snapshot_t *s,
                                             ms_field_t f) {
  if ((unsigned)f >= (unsigned)MS_F__COUNT)
    return MS_Q_UNAVAILABLE;
  uint8_t q = s->quality[f];
  return q <= MS_Q_EXACT ? (ms_quality_t)q : MS_Q_UNAVAILABLE;
}

/* Whether the provider has the field at all (exact or estimated). */
static inline int ms__field_known(const ms_snapshot_t *s, ms_field_t f) {
  return ms__field_quality(s, f) != MS_Q_UNAVAILABLE;
}

/* The quality of a figure computed from two others: the worse of them
 * (MS_Q_UNAVAILABLE < MS_Q_ESTIMATED < MS_Q_EXACT). */
static inline ms_quality_t ms__quality_worst(ms_quality_t a, ms_quality_t b) {
  return a < b ? a : b;
}

/* Sets a field's quality and source provider index in one go. */
static inline void ms__set_quality(ms_snapshot_t *s, ms_field_t f,
                                   ms_quality_t q, int source) {
  s->quality[f] = (uint8_t)q;
  s->source[f] = (uint8_t)(source < 0 ? 0xff : source);
}

#endif
