/*
 * out.h - memtop's plain output: reports and JSON lines gathered into a
 * buffer and written to stdout a round at a time, and the warnings on
 * stderr. Used by the rounds (--once, -n, ps) and by `run --once`.
 */
#ifndef MS_MEMTOP_OUT_H
#define MS_MEMTOP_OUT_H

#include "memstats.h"
#include "common/strbuf.h"
#include "client/client.h"
#include "wire/profile.h"

typedef struct mt_out_s {
  ms__strbuf_t buf;
  int json;     /* JSON lines instead of reports */
  int nemitted; /* reports so far (a blank line between two) */
  int broken;   /* stdout went away or failed: nothing more is written */
  int failed;   /* a write failed or memory ran out: memtop exits 1 */
  size_t sites; /* --sites N: each snapshot's top N allocation sites */
  const struct mt_heap_filter_s *filter; /* --focus ...: what they are of */
  int tree; /* a process tree (run, --tree): reports name the parent */
} mt_out_t;

/* Adds one snapshot to the output, as a report or a JSON line. */
void mt_out_snapshot(mt_out_t *out, const ms_snapshot_t *s);

/* The same, and with `sites` the process's top allocation sites after
 * it, from its heap profile prof read with the snapshot (NULL: err says
 * why there is none). */
void mt_out_snapshot_sites(mt_out_t *out, const ms_snapshot_t *s,
                           const ms__profile_decoded_t *prof, const char *err);

/* The same, and a JSON line says who the process is (id, and user its
 * owner's name or NULL: mt_emit_json_who); id NULL: as above. */
void mt_out_snapshot_who(mt_out_t *out, const ms_snapshot_t *s,
                         const msc_ident_t *id, const char *user,
                         const ms__profile_decoded_t *prof, const char *err);

/* Writes the output gathered so far to stdout. A reader that went away
 * stops the output quietly; other failures are said and set `failed`. */
void mt_out_flush(mt_out_t *out);

/* Frees the buffer. */
void mt_out_free(mt_out_t *out);

/* Says "memtop: <message>" on stderr, the formatted message made safe
 * (common/sanitize.h): a message quotes a target's reason, a process
 * name, a path or a variable, any of them a stranger's. */
void mt_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
