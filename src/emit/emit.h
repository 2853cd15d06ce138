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
#include "client/client.h"
#include "common/strbuf.h"

/* IEC units with one decimal and no space: "1.2GiB", "612.0MiB", "512.0B".
 * Negative values keep their sign. Writes at most len bytes (NUL included);
 * returns buf. */
char *mt_fmt_iec(char *buf, size_t len, int64_t bytes);

/* The mark a figure carries before it for its quality: "~" for an
 * estimate, "" otherwise (an unavailable figure is shown as "-" in place
 * of its number, not marked). Every output spells the mark through this. */
const char *mt_quality_mark(ms_quality_t q);

/* A figure as shown to people: "~" before an estimate, "-" when
 * unavailable, else the IEC form. */
char *mt_fmt_bytes_q(char *buf, size_t len, int64_t bytes, ms_quality_t q);

/* A duration for people, unit chosen so the figure stays below 1000:
 * "850ns", "1.5us", "12.0ms", "2.5s", "3m05s", "2h07m", "4d03h". Negative
 * durations keep their sign. Returns buf. */
char *mt_fmt_duration(char *buf, size_t len, int64_t ns);

/* A Unix time in nanoseconds as "2026-11-27 14:08:39 UTC" (strftime's
 * "%Y-%m-%d %H:%M:%S UTC" of gmtime_r), computed here: glibc's gmtime_r
 * reads the time zone (/etc/localtime) at its first call, for a time it
 * gives in UTC. Returns buf. */
char *mt_fmt_utc(char *buf, size_t len, uint64_t unix_ns);

/* One scalar field of *s as shown to people, by its unit in the field table
 * (bytes in IEC, counts as integers, durations, ratios in percent,
 * booleans as yes/no), with "~" before an estimate and "-" when
 * unavailable. Unix times are shown relative to the snapshot's time ("1.2s
 * ago", "never" for 0). Compound fields give "". Returns buf. */
char *mt_fmt_field(char *buf, size_t len, const ms_snapshot_t *s, ms_field_t f);

/* The pause figures every output shows, in ns, -1 where there is none (no
 * pause yet, or the figures unavailable): p50 and p99 from the histogram,
 * which holds every pause since the start (the ring only the last 256);
 * the maximum exact from the ring while the ring holds every pause
 * (NumGC <= 256), the histogram's bucket edge after that; and no quantile
 * above an exact maximum (a bucket's upper edge can be). Each with the
 * quality it comes with. */
typedef struct mt_pauses_s {
  int64_t p50, p99, max;
  ms_quality_t q_p50, q_p99, q_max;
} mt_pauses_t;
void mt_pauses(const ms_snapshot_t *s, mt_pauses_t *out);

/* The unbacked part of MSpanSys: what of OffHeapReleased the stacks and the
 * mappings outside the allocator (StackReleased, OtherReleased) do not hold,
 * the allocator's untouched metadata (jemalloc's). Sets *v and returns the
 * worst quality of the three, or MS_Q_UNAVAILABLE (and *v = 0) when one is
 * unknown or they do not add up. */
ms_quality_t mt_mspan_released(const ms_snapshot_t *s, uint64_t *v);

/* Whether s keeps OffHeapReleased outside its classes, a term of Sys of its
 * own, as a target of 0.2 as it first shipped did (it sends no per-class
 * parts): its classes then hold only their backed bytes. */
int mt_off_heap_outside(const ms_snapshot_t *s);

/* The resident bytes libmemstats itself holds outside every class
 * (MemstatsSelf less its profile table, BuckHashSys, which is in Sys): a
 * part of the kernel's anonymous RSS that Ready does not hold. 0 when
 * unknown. */
int64_t mt_self_outside(const ms_snapshot_t *s);

/* A float64 exactly as Go's encoding/json writes it: the shortest digits
 * that read back as the same double, in 'f' form unless |v| < 1e-6 or
 * |v| >= 1e21, where it is 'e' form with Go's exponent ("1e-7", "1e+21").
 * Non-finite values, which Go refuses to encode, give "null". A buffer of
 * MT_GO_FLOAT_MAX bytes always suffices. Returns buf. */
#define MT_GO_FLOAT_MAX 32
char *mt_fmt_go_float(char *buf, size_t len, double v);

/* Appends n bytes of s as a quoted JSON string: quote, backslash and control
 * characters escaped, invalid UTF-8 replaced by U+FFFD (as Go does), so the
 * output is always valid JSON whatever the bytes (a process name is not
 * guaranteed to be UTF-8); DEL, the C1 controls, bidi controls and the
 * other characters common/sanitize.h calls unsafe are written as \uXXXX
 * (the same string to a reader, no raw control to a terminal). Returns 0
 * or MS_ENOMEM. */
int mt_json_string(ms__strbuf_t *out, const char *s, size_t n);

/* The seed-format line, without pid and name, appended to *out:
 * "Ready+Prepared=1.2GiB (Ready=1.0GiB (data:612.0MiB + fragOverhead:180.0MiB
 *  + idle:232.0MiB) ; Prepared=205.0MiB)". Figures come from
 * ms_breakdown(); Ready+Prepared is Sys and carries Sys's quality. Returns
 * 0, MS_EINVAL or MS_ENOMEM. */
int mt_emit_line(ms__strbuf_t *out, const ms_snapshot_t *s);

/* The whole --once report for one process: "PID COMM: <line>\n" followed by
 * Sys by class, heap, GC, size classes, kernel view and providers,
 * estimates marked "~", unavailable figures "-". Every figure is labelled
 * with its Go field name so it can be traced to a field and its quality.
 * Ends with a newline. Returns 0, MS_EINVAL or MS_ENOMEM. */
int mt_emit_report(ms__strbuf_t *out, const ms_snapshot_t *s);

/* One JSON object, no newline: pid, comm, start_time, time_unix_ns,
 * age_ms, providers, memstats (Go's MemStats layout: field order, names and
 * value forms as Go's encoding/json writes them; unavailable fields are
 * left out; then OffHeapReleased, StackReleased and OtherReleased where
 * known, so that Sys = the sum of the *Sys fields and Prepared =
 * HeapReleased + OffHeapReleased within the one object), breakdown (Ready,
 * Prepared, Data, FragOverhead, Idle; unavailable ones left out), quality
 * (every field by name), kernel (rss, vsz, lazyfree, anonhuge, swap;
 * unavailable ones left out). Always valid JSON, whatever bytes comm holds.
 * Returns 0, MS_EINVAL or MS_ENOMEM. */
int mt_emit_json(ms__strbuf_t *out, const ms_snapshot_t *s);

/* The same object with who the process is after "comm" (id NULL: as
 * mt_emit_json): "user" (user, the name of its real owner, when not
 * NULL), "uid" (its real owner, when known), "ppid" (its parent, when
 * memtop sees one), "ns_pid" (its PID inside its
 * own PID namespace, when that is another), and where known "container",
 * "engine", "pod" and "unit" (its systemd service). Returns as
 * mt_emit_json. */
int mt_emit_json_who(ms__strbuf_t *out, const ms_snapshot_t *s,
                     const msc_ident_t *id, const char *user);

/* `memtop ps`: the column header line. Returns 0 or MS_ENOMEM. */
int mt_emit_ps_header(ms__strbuf_t *out);

/* One line of `memtop ps`: PID, USER, COMM, CONTAINER, READY+PREPARED,
 * PROVIDERS. user and comm come from outside (the password database, the
 * target, /proc/PID/comm): at most MS_NAME_MAX bytes of each are read (a
 * NUL ends them sooner), made safe (common/sanitize.h) and cut to their
 * columns whole; so are the providers of s, joined by ",". container: the
 * container's id (its first 12 characters are shown, as docker ps does),
 * or NULL or "" for none ("-"). s NULL:
 * the process did not answer ("?", and a pointer to the reason, which the
 * caller prints below the table). Returns 0, MS_EINVAL or MS_ENOMEM. */
int mt_emit_ps_line(ms__strbuf_t *out, int32_t pid, const char *user,
                    const char *comm, const char *container,
                    const ms_snapshot_t *s);

/* Only the "memstats" object, exactly as Go's encoding/json writes a
 * runtime.MemStats (all fields, compact, whatever their quality; BySize has
 * nsize_classes entries). Returns 0, MS_EINVAL or MS_ENOMEM. */
int mt_emit_go_memstats(ms__strbuf_t *out, const ms_snapshot_t *s);

/* ---- Prometheus (prometheus.c) ---- */

/* The longest exe label value read (bytes of the path). */
#define MT_PROM_EXE_MAX 1024

/* One process as a scrape serves it. snap NULL: memtop knows the process
 * but has no figures for it (only its scrape errors are served). */
typedef struct mt_prom_target_s {
  int32_t pid;
  const ms_snapshot_t *snap; /* borrowed; NULL: none */
  const char *exe;           /* borrowed, NUL-terminated; NULL: unknown */
  uint64_t age_ns;           /* the snapshot's age at this scrape */
  uint64_t scrape_errors;    /* times memtop failed to read it */
  const char *container;     /* borrowed; NULL or "": not in one */
  const char *pod;           /* borrowed; NULL or "": not in one */
  const char *group;         /* the `group` label (--group-by); NULL: none */
  uint64_t read_ns;          /* how long its last read took; 0: unknown */
} mt_prom_target_t;

/* memtop's own process, as client_golang's process collector serves one
 * (process_*): each figure served when its have_ flag is set. */
typedef struct mt_prom_self_s {
  double cpu_seconds;         /* user + system */
  double start_time_s;        /* since the epoch */
  uint64_t resident_bytes;    /* RSS */
  uint64_t virtual_bytes;     /* VmSize */
  uint64_t virtual_max_bytes; /* RLIMIT_AS; UINT64_MAX: unlimited */
  uint64_t open_fds, max_fds;
  unsigned have_stat : 1; /* cpu, start time, resident, virtual */
  unsigned have_fds : 1;  /* open_fds, max_fds */
  unsigned have_vmax : 1;
} mt_prom_self_t;

/* What an exposition leaves out or adds. */
typedef struct mt_prom_opts_s {
  const char *version;        /* memtop_build_info's */
  int no_size_classes;        /* leave out memstats_size_class_* */
  const mt_prom_self_t *self; /* NULL: no process_* families */
  /* memtop_scrape_late_targets: the targets served their last figures
   * because their read was late (serve.c); -1: not served. */
  long late_targets;
  /* memtop_figures_timestamp_seconds: when the figures served were
   * gathered (the end of the round of reads that made them), ns since
   * the epoch; 0: not served. */
  uint64_t figures_unix_ns;
} mt_prom_opts_t;

/* The exposition of n processes, appended to *out: the text format 0.0.4,
 * or OpenMetrics 1.0 (openmetrics nonzero: counters' and info metrics'
 * families named without their suffix, UNIT lines, "# EOF" at the end).
 * One HELP and TYPE per family, its samples for every process together;
 * labels pid, comm and (where known) exe, container and pod, made safe
 * and escaped; estimated
 * figures marked by memstats_estimated{metric=...}, unavailable ones left
 * out; memtop's own families (memtop_targets, memtop_scrape_errors_total,
 * memtop_build_info{version=memtop_version}) at the end. Returns 0,
 * MS_EINVAL or MS_ENOMEM. */
int mt_emit_prometheus(ms__strbuf_t *out, int openmetrics,
                       const mt_prom_target_t *targets, size_t n,
                       const char *memtop_version);

/* The same with options: the size classes left out (the largest part of
 * an exposition, a few hundred series per jemalloc process), memtop's
 * own process_* families, and per target its `group` label (after pid,
 * comm and exe) and memtop_scrape_duration_seconds{pid,...}, the time its
 * last read took. */
int mt_emit_prometheus_opts(ms__strbuf_t *out, int openmetrics,
                            const mt_prom_target_t *targets, size_t n,
                            const mt_prom_opts_t *opts);

#endif
