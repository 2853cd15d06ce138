/*
 * emit.h - the emitters of a snapshot: one walk over the field table
 * (common/fields.h), several outputs. memtop's text, JSON and live view
 * and `memtop serve` all print figures through these, so a figure has one
 * name and one format everywhere.
 */
#ifndef MS_EMIT_EMIT_H
#define MS_EMIT_EMIT_H

#include <stddef.h>
#include <stdint.h>

#include "memstats.h"
#include "common/strbuf.h"

/* IEC units with one decimal and no space: "1.2GiB", "612.0MiB", "512.0B".
 * Negative values keep their sign. Writes at most len bytes (NUL included);
 * returns buf. */
char *ms__fmt_iec(char *buf, size_t len, int64_t bytes);

/* A figure as shown to people: "~" before an estimate, "-" when
 * unavailable, else the IEC form. */
char *ms__fmt_bytes_q(char *buf, size_t len, int64_t bytes, ms_quality_t q);

/* The seed-format line, without pid and name:
 * "Ready+Prepared=1.2GiB (Ready=1.0GiB (data:612.0MiB + fragOverhead:180.0MiB
 *  + idle:232.0MiB) ; Prepared=205.0MiB)" */
int ms__emit_line(ms_strbuf_t *out, const ms_snapshot_t *s);

/* The whole --once report for one process: "PID COMM: <line>\n" followed by
 * Sys by class, heap, GC and size classes, estimates marked "~". */
int ms__emit_report(ms_strbuf_t *out, const ms_snapshot_t *s);

/* One JSON object, no newline: pid, comm, start_time, time_unix_ns,
 * age_ms, providers, memstats (Go's MemStats layout: field order, names and
 * value forms as Go's encoding/json writes them; unavailable fields are
 * left out), breakdown, quality, kernel. */
int ms__emit_json(ms_strbuf_t *out, const ms_snapshot_t *s);

/* Only the "memstats" object, exactly as Go's encoding/json writes a
 * runtime.MemStats (all fields, compact). */
int ms__emit_go_memstats(ms_strbuf_t *out, const ms_snapshot_t *s);

#endif
