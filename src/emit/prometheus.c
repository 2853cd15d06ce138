/*
 * prometheus.c - the Prometheus exposition of many snapshots at once: the
 * text format 0.0.4 and OpenMetrics 1.0, which `memtop serve` answers a
 * scrape with.
 *
 * Names come from the field table (common/fields.h: the prom_name column)
 * and from the few families below that are not one field (the breakdown,
 * the pause histogram, the size classes, identity and memtop's health).
 * The type follows the name, as the Prometheus conventions tie them: a name
 * ending in "_total" is a counter, anything else a gauge; "_bytes" and
 * "_seconds" give OpenMetrics' UNIT; a field counted in nanoseconds is
 * written in seconds.
 *
 * Both formats want every family's samples together under one HELP and
 * TYPE, so the walk goes family by family, and within a family target by
 * target. A family's header is written before its first sample only: a
 * family that no target has is left out altogether.
 *
 * Quality. An estimated figure keeps its name and labels (a "quality"
 * label would split a series in two whenever a provider's quality changes,
 * and would stop `a / b` from matching when one side is exact and the other
 * estimated); instead memstats_estimated{metric="<name>"} 1 is served
 * beside it, per target, so a dashboard can mark it and a query can leave
 * it out (`... unless on(pid) memstats_estimated{metric="..."}`). An
 * unavailable figure is not served at all: absent, never zero.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fields.h"
#include "common/sanitize.h"
#include "emit/emit.h"

/* The pause histogram's upper bounds (le), in ns: every power of two from
 * 2^10 ns (about 1 us) to 2^34 ns (about 17 s). They are edges of the
 * snapshot's own buckets, so each of its buckets falls wholly under or
 * above each bound and the counts are exact, not apportioned (but for a
 * pause of exactly 2^k ns, which the snapshot files above the edge). */
#define LE_FIRST_BIT 10
#define LE_LAST_BIT 34

static ms_quality_t qual(const ms_snapshot_t *s, ms_field_t f) {
  uint8_t q = s->quality[f];
  return q <= MS_Q_EXACT ? (ms_quality_t)q : MS_Q_UNAVAILABLE;
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && memcmp(s + n - m, suffix, m) == 0;
}

/* ------------------------------------------------------------------------
 * Families
 * ------------------------------------------------------------------------ */

typedef enum kind_e { K_GAUGE, K_COUNTER, K_HISTOGRAM, K_INFO } kind_t;

typedef struct family_s {
  const char *name; /* the sample name without _total/_info/_bucket */
  const char *help;
  kind_t kind;
  int started; /* header written */
} family_t;

typedef struct walk_s {
  ms__strbuf_t *out;
  int om; /* OpenMetrics 1.0 */
  /* Each target's labels, made once per exposition (a process has a few
   * hundred samples): target i's are labels.data[at[i] .. at[i + 1]). */
  const mt_prom_target_t *targets;
  ms__strbuf_t labels;
  size_t *at;
} walk_t;

/* A family named as its samples are ("memstats_mallocs_total"): its kind
 * and base name follow from the suffix. */
static family_t family_of(const char *sample_name, const char *help,
                          kind_t kind) {
  family_t f = {sample_name, help, kind, 0};
  return f;
}

/* HELP text is ours, but escaped as each format asks all the same
 * (backslash and newline; OpenMetrics also the double quote). */
static void put_help_text(walk_t *w, const char *help) {
  for (const char *c = help; *c; c++) {
    if (*c == '\\')
      ms__strbuf_puts(w->out, "\\\\");
    else if (*c == '\n')
      ms__strbuf_puts(w->out, "\\n");
    else if (*c == '"' && w->om)
      ms__strbuf_puts(w->out, "\\\"");
    else
      ms__strbuf_append(w->out, c, 1);
  }
}

/* The name a family goes by in its header lines: in OpenMetrics a counter
 * is named without _total and an info metric without _info; in 0.0.4 every
 * family is named as its samples. */
static void header(walk_t *w, family_t *f) {
  if (f->started)
    return;
  f->started = 1;
  const char *n = f->name;
  size_t len = strlen(n);
  const char *type = "gauge";
  switch (f->kind) {
  case K_COUNTER:
    type = "counter";
    if (w->om && ends_with(n, "_total"))
      len -= 6;
    break;
  case K_INFO:
    type = w->om ? "info" : "gauge";
    if (w->om && ends_with(n, "_info"))
      len -= 5;
    break;
  case K_HISTOGRAM:
    type = "histogram";
    break;
  case K_GAUGE:
    break;
  }
  ms__strbuf_printf(w->out, "# HELP %.*s ", (int)len, n);
  put_help_text(w, f->help);
  ms__strbuf_printf(w->out, "\n# TYPE %.*s %s\n", (int)len, n, type);
  if (w->om) {
    const char *unit = NULL;
    /* The family name (len) must end in the unit for UNIT to apply. */
    if (len >= 6 && memcmp(n + len - 6, "_bytes", 6) == 0)
      unit = "bytes";
    else if (len >= 8 && memcmp(n + len - 8, "_seconds", 8) == 0)
      unit = "seconds";
    if (unit)
      ms__strbuf_printf(w->out, "# UNIT %.*s %s\n", (int)len, n, unit);
  }
}

/* ------------------------------------------------------------------------
 * Labels and values
 * ------------------------------------------------------------------------ */

/* A label value from outside (a process name, a path): made safe first
 * (common/sanitize.h: controls, invalid UTF-8 and the like become visible
 * escapes, so the value is valid UTF-8 as both formats require), then
 * escaped as a label value (backslash, double quote, newline). */
static void label_value_to(ms__strbuf_t *out, const char *s, size_t n) {
  char safe[MT_PROM_EXE_MAX * MS__SAFE_UNIT_MAX + 1];
  ms__sanitize(safe, sizeof safe, s, n, (size_t)-1);
  for (const char *c = safe; *c; c++) {
    if (*c == '\\')
      ms__strbuf_puts(out, "\\\\");
    else if (*c == '"')
      ms__strbuf_puts(out, "\\\"");
    else if (*c == '\n')
      ms__strbuf_puts(out, "\\n");
    else
      ms__strbuf_append(out, c, 1);
  }
}

static void put_label_value(walk_t *w, const char *s, size_t n) {
  label_value_to(w->out, s, n);
}

/* pid, comm and, where known, exe, container and pod: the labels of every
 * per-process sample, without the closing brace. */
static void make_target_labels(ms__strbuf_t *out, const mt_prom_target_t *t) {
  const ms_snapshot_t *s = t->snap;
  ms__strbuf_printf(out, "{pid=\"%" PRId32 "\",comm=\"", t->pid);
  if (s)
    label_value_to(out, s->comm, strnlen(s->comm, sizeof s->comm));
  ms__strbuf_puts(out, "\"");
  if (t->exe && t->exe[0]) {
    ms__strbuf_puts(out, ",exe=\"");
    label_value_to(out, t->exe, strnlen(t->exe, MT_PROM_EXE_MAX));
    ms__strbuf_puts(out, "\"");
  }
  /* As cAdvisor and kube-state-metrics name them, so that a query can
   * join memtop's series with theirs. */
  if (t->container && t->container[0]) {
    ms__strbuf_puts(out, ",container=\"");
    label_value_to(out, t->container, strnlen(t->container, MS_NAME_MAX));
    ms__strbuf_puts(out, "\"");
  }
  if (t->pod && t->pod[0]) {
    ms__strbuf_puts(out, ",pod=\"");
    label_value_to(out, t->pod, strnlen(t->pod, MS_NAME_MAX));
    ms__strbuf_puts(out, "\"");
  }
  if (t->group) {
    ms__strbuf_puts(out, ",group=\"");
    label_value_to(out, t->group, strnlen(t->group, MT_PROM_EXE_MAX));
    ms__strbuf_puts(out, "\"");
  }
}

static void put_target_labels(walk_t *w, const mt_prom_target_t *t) {
  size_t i = (size_t)(t - w->targets);
  if (w->labels.data)
    ms__strbuf_append(w->out, w->labels.data + w->at[i],
                      w->at[i + 1] - w->at[i]);
}

static void put_double(walk_t *w, double v) {
  if (isnan(v)) {
    ms__strbuf_puts(w->out, "NaN");
  } else if (isinf(v)) {
    ms__strbuf_puts(w->out, v > 0 ? "+Inf" : "-Inf");
  } else {
    char f[MT_GO_FLOAT_MAX];
    ms__strbuf_puts(w->out, mt_fmt_go_float(f, sizeof f, v));
  }
}

/* A whole number in decimal, without printf: an exposition of 200
 * processes has some 20,000 of them. */
static void put_u64(ms__strbuf_t *out, uint64_t v) {
  char d[24];
  size_t i = sizeof d;
  do {
    d[--i] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  ms__strbuf_append(out, d + i, sizeof d - i);
}

/* One sample: name, the target's labels, extra labels (", already
 * formatted" or ""), a value. */
static void sample_u64(walk_t *w, const char *name, const char *suffix,
                       const mt_prom_target_t *t, const char *extra,
                       uint64_t v) {
  ms__strbuf_puts(w->out, name);
  ms__strbuf_puts(w->out, suffix);
  put_target_labels(w, t);
  ms__strbuf_puts(w->out, extra);
  ms__strbuf_append(w->out, "} ", 2);
  put_u64(w->out, v);
  ms__strbuf_append(w->out, "\n", 1);
}

static void sample_i64(walk_t *w, const char *name, const mt_prom_target_t *t,
                       int64_t v) {
  ms__strbuf_puts(w->out, name);
  put_target_labels(w, t);
  ms__strbuf_printf(w->out, "} %" PRId64 "\n", v);
}

static void sample_double(walk_t *w, const char *name, const char *suffix,
                          const mt_prom_target_t *t, double v) {
  ms__strbuf_printf(w->out, "%s%s", name, suffix);
  put_target_labels(w, t);
  ms__strbuf_puts(w->out, "} ");
  put_double(w, v);
  ms__strbuf_puts(w->out, "\n");
}

/* A count of nanoseconds as seconds, exactly, in decimal: "12.5",
 * "0.000000001", "0" (no rounding through a double, and no printf: every
 * duration and time goes through here). */
static void sample_ns(walk_t *w, const char *name, const char *suffix,
                      const mt_prom_target_t *t, uint64_t ns) {
  ms__strbuf_puts(w->out, name);
  ms__strbuf_puts(w->out, suffix);
  put_target_labels(w, t);
  ms__strbuf_append(w->out, "} ", 2);
  put_u64(w->out, ns / 1000000000u);
  uint64_t frac = ns % 1000000000u;
  if (frac) {
    char d[10];
    d[0] = '.';
    for (int i = 9; i >= 1; i--, frac /= 10)
      d[i] = (char)('0' + frac % 10);
    size_t len = 10;
    while (d[len - 1] == '0')
      len--;
    ms__strbuf_append(w->out, d, len);
  }
  ms__strbuf_append(w->out, "\n", 1);
}

/* ------------------------------------------------------------------------
 * The per-process families
 * ------------------------------------------------------------------------ */

/* A field of the table as one sample: in its unit scaled to the base unit
 * (ns to seconds), integers written exactly. */
static void field_sample(walk_t *w, const ms__field_info_t *fi,
                         const mt_prom_target_t *t) {
  const ms_snapshot_t *s = t->snap;
  if (fi->unit == MS__UNIT_NS || fi->unit == MS__UNIT_UNIX_NS)
    sample_ns(w, fi->prom_name, "", t, ms__field_u64(s, fi->id));
  else if (fi->ctype == MS__CT_DOUBLE)
    sample_double(w, fi->prom_name, "", t, ms__field_double(s, fi->id));
  else
    sample_u64(w, fi->prom_name, "", t, "", ms__field_u64(s, fi->id));
}

static void fields_families(walk_t *w, const mt_prom_target_t *ts, size_t n) {
  for (int f = 0; f < MS_F__COUNT; f++) {
    const ms__field_info_t *fi = &ms__fields[f];
    if (!fi->prom_name || fi->ctype == MS__CT_NONE)
      continue;
    family_t fam =
        family_of(fi->prom_name, fi->help,
                  ends_with(fi->prom_name, "_total") ? K_COUNTER : K_GAUGE);
    for (size_t i = 0; i < n; i++) {
      if (!ts[i].snap || qual(ts[i].snap, (ms_field_t)f) == MS_Q_UNAVAILABLE)
        continue;
      header(w, &fam);
      field_sample(w, fi, &ts[i]);
    }
  }
}

/* The breakdown of DESIGN.md, one family per part. */
static const struct breakdown_part_s {
  const char *name;
  const char *help;
  size_t value, quality; /* offsets in ms_breakdown_t */
} breakdown_parts[] = {
    {"memstats_ready_bytes",
     "Ready: mapped and backed, usable now (Sys - Prepared).",
     offsetof(ms_breakdown_t, ready), offsetof(ms_breakdown_t, q_ready)},
    {"memstats_prepared_bytes",
     "Prepared: mapped but handed back to the OS (HeapReleased + "
     "OffHeapReleased).",
     offsetof(ms_breakdown_t, prepared), offsetof(ms_breakdown_t, q_prepared)},
    {"memstats_data_bytes",
     "data: live objects and the in-use memory outside the heap (inuse - "
     "fragOverhead).",
     offsetof(ms_breakdown_t, data), offsetof(ms_breakdown_t, q_data)},
    {"memstats_frag_overhead_bytes",
     "fragOverhead: in-use heap spans not holding objects (HeapInuse - "
     "HeapAlloc).",
     offsetof(ms_breakdown_t, frag_overhead),
     offsetof(ms_breakdown_t, q_frag_overhead)},
    {"memstats_idle_bytes",
     "idle: mapped, backed, holding nothing (Ready - inuse).",
     offsetof(ms_breakdown_t, idle), offsetof(ms_breakdown_t, q_idle)},
};
#define NPARTS (sizeof breakdown_parts / sizeof breakdown_parts[0])

static void part_of(const ms_breakdown_t *b, size_t p, int64_t *v,
                    ms_quality_t *q) {
  memcpy(v, (const char *)b + breakdown_parts[p].value, sizeof *v);
  memcpy(q, (const char *)b + breakdown_parts[p].quality, sizeof *q);
}

static void breakdown_families(walk_t *w, const mt_prom_target_t *ts, size_t n,
                               const ms_breakdown_t *bd) {
  for (size_t p = 0; p < NPARTS; p++) {
    family_t fam =
        family_of(breakdown_parts[p].name, breakdown_parts[p].help, K_GAUGE);
    for (size_t i = 0; i < n; i++) {
      if (!ts[i].snap)
        continue;
      int64_t v;
      ms_quality_t q;
      part_of(&bd[i], p, &v, &q);
      if (q == MS_Q_UNAVAILABLE)
        continue;
      header(w, &fam);
      sample_i64(w, breakdown_parts[p].name, &ts[i], v);
    }
  }
}

/* Whether a target's pause histogram is served: it must be known, and
 * have something to say (a program without a collector and without a
 * pause has no histogram, rather than 26 buckets of zeros). Its _sum is
 * PauseTotalNs, which must be known too. */
static int has_pauses(const ms_snapshot_t *s) {
  if (qual(s, MS_F_PAUSE_HIST) == MS_Q_UNAVAILABLE ||
      qual(s, MS_F_PAUSE_TOTAL_NS) == MS_Q_UNAVAILABLE)
    return 0;
  if (ms_pause_hist_total(&s->pause_hist) > 0)
    return 1;
  return qual(s, MS_F_ENABLE_GC) != MS_Q_UNAVAILABLE && s->enable_gc;
}

#define LE_COUNT (LE_LAST_BIT - LE_FIRST_BIT + 1)

static void pause_family(walk_t *w, const mt_prom_target_t *ts, size_t n) {
  const ms__field_info_t *fi = &ms__fields[MS_F_PAUSE_HIST];
  family_t fam = family_of(fi->prom_name, fi->help, K_HISTOGRAM);
  /* The le labels, written once for all the processes. */
  char les[LE_COUNT][48];
  for (int bit = LE_FIRST_BIT; bit <= LE_LAST_BIT; bit++) {
    char f[MT_GO_FLOAT_MAX];
    snprintf(les[bit - LE_FIRST_BIT], sizeof les[0], ",le=\"%s\"",
             mt_fmt_go_float(f, sizeof f, (double)((int64_t)1 << bit) / 1e9));
  }
  for (size_t i = 0; i < n; i++) {
    const ms_snapshot_t *s = ts[i].snap;
    if (!s || !has_pauses(s))
      continue;
    header(w, &fam);
    uint64_t cum = 0;
    int b = 0;
    for (int bit = LE_FIRST_BIT; bit <= LE_LAST_BIT; bit++) {
      int64_t le = (int64_t)1 << bit;
      /* Every bucket whose values are all below le (its upper edge, which
       * is exclusive, at most le). */
      while (b < MS_PAUSE_HIST_BUCKETS - 1 && ms_pause_hist_upper(b) <= le)
        cum += s->pause_hist.counts[b++];
      sample_u64(w, fi->prom_name, "_bucket", &ts[i], les[bit - LE_FIRST_BIT],
                 cum);
    }
    uint64_t count = ms_pause_hist_total(&s->pause_hist);
    sample_u64(w, fi->prom_name, "_bucket", &ts[i], ",le=\"+Inf\"", count);
    sample_ns(w, fi->prom_name, "_sum", &ts[i], s->pause_total_ns);
    sample_u64(w, fi->prom_name, "_count", &ts[i], "", count);
  }
}

/* The size classes: objects allocated and freed per class, labelled with
 * the class's largest object size in bytes. Classes that never held an
 * object are left out, to keep a jemalloc process from serving hundreds
 * of zero series. */
static void class_families(walk_t *w, const mt_prom_target_t *ts, size_t n) {
  static const struct {
    const char *name, *help;
    size_t off;
  } cols[] = {
      {"memstats_size_class_mallocs_total",
       "Cumulative count of heap objects allocated in this size class "
       "(size: the class's largest object, bytes).",
       offsetof(ms_size_class_t, mallocs)},
      {"memstats_size_class_frees_total",
       "Cumulative count of heap objects freed in this size class (size: "
       "the class's largest object, bytes).",
       offsetof(ms_size_class_t, frees)},
  };
  for (size_t c = 0; c < sizeof cols / sizeof cols[0]; c++) {
    family_t fam = family_of(cols[c].name, cols[c].help, K_COUNTER);
    for (size_t i = 0; i < n; i++) {
      const ms_snapshot_t *s = ts[i].snap;
      if (!s || qual(s, MS_F_BY_SIZE) == MS_Q_UNAVAILABLE)
        continue;
      uint32_t nc = s->nsize_classes > MS_MAX_SIZE_CLASSES ? MS_MAX_SIZE_CLASSES
                                                           : s->nsize_classes;
      for (uint32_t k = 0; k < nc; k++) {
        const ms_size_class_t *sc = &s->by_size[k];
        if (sc->mallocs == 0)
          continue;
        uint64_t v;
        memcpy(&v, (const char *)sc + cols[c].off, sizeof v);
        char lab[48];
        snprintf(lab, sizeof lab, ",size=\"%" PRIu64 "\"", sc->size);
        header(w, &fam);
        sample_u64(w, cols[c].name, "", &ts[i], lab, v);
      }
    }
  }
}

static void info_family(walk_t *w, const mt_prom_target_t *ts, size_t n) {
  family_t fam = family_of("memstats_target_info",
                           "The process's libmemstats: its version and the "
                           "providers its figures come from.",
                           K_INFO);
  for (size_t i = 0; i < n; i++) {
    const ms_snapshot_t *s = ts[i].snap;
    if (!s)
      continue;
    header(w, &fam);
    ms__strbuf_puts(w->out, "memstats_target_info");
    put_target_labels(w, &ts[i]);
    ms__strbuf_puts(w->out, ",provider=\"");
    uint32_t np =
        s->nproviders > MS_MAX_PROVIDERS ? MS_MAX_PROVIDERS : s->nproviders;
    for (uint32_t p = 0; p < np; p++) {
      if (p)
        ms__strbuf_puts(w->out, ",");
      put_label_value(w, s->providers[p],
                      strnlen(s->providers[p], MS_NAME_MAX));
    }
    ms__strbuf_printf(w->out, "\",libmemstats_version=\"%u.%u.%u\"} 1\n",
                      (unsigned)(s->lib_version >> 16) & 0xffu,
                      (unsigned)(s->lib_version >> 8) & 0xffu,
                      (unsigned)s->lib_version & 0xffu);
  }
}

static void age_family(walk_t *w, const mt_prom_target_t *ts, size_t n) {
  family_t fam = family_of("memstats_snapshot_age_seconds",
                           "How old the figures served for this process "
                           "are: the time since the target computed them.",
                           K_GAUGE);
  for (size_t i = 0; i < n; i++) {
    if (!ts[i].snap)
      continue;
    header(w, &fam);
    sample_ns(w, "memstats_snapshot_age_seconds", "", &ts[i], ts[i].age_ns);
  }
}

/* memstats_estimated{metric=...}: one sample per figure served as an
 * estimate (see the opening comment). */
static void estimated_family(walk_t *w, const mt_prom_target_t *ts, size_t n,
                             const ms_breakdown_t *bd, int classes) {
  family_t fam = family_of("memstats_estimated",
                           "1 for each metric of this process whose value "
                           "is an estimate, not an exact figure.",
                           K_GAUGE);
  for (size_t i = 0; i < n; i++) {
    const ms_snapshot_t *s = ts[i].snap;
    if (!s)
      continue;
    char lab[96];
    for (int f = 0; f < MS_F__COUNT; f++) {
      const ms__field_info_t *fi = &ms__fields[f];
      if (!fi->prom_name || qual(s, (ms_field_t)f) != MS_Q_ESTIMATED)
        continue;
      if (f == MS_F_PAUSE_HIST && !has_pauses(s))
        continue;
      header(w, &fam);
      snprintf(lab, sizeof lab, ",metric=\"%s\"", fi->prom_name);
      sample_u64(w, "memstats_estimated", "", &ts[i], lab, 1);
    }
    if (classes && qual(s, MS_F_BY_SIZE) == MS_Q_ESTIMATED) {
      static const char *const cls[] = {"memstats_size_class_mallocs_total",
                                        "memstats_size_class_frees_total"};
      for (size_t c = 0; c < 2; c++) {
        header(w, &fam);
        snprintf(lab, sizeof lab, ",metric=\"%s\"", cls[c]);
        sample_u64(w, "memstats_estimated", "", &ts[i], lab, 1);
      }
    }
    for (size_t p = 0; p < NPARTS; p++) {
      int64_t v;
      ms_quality_t q;
      part_of(&bd[i], p, &v, &q);
      if (q != MS_Q_ESTIMATED)
        continue;
      header(w, &fam);
      snprintf(lab, sizeof lab, ",metric=\"%s\"", breakdown_parts[p].name);
      sample_u64(w, "memstats_estimated", "", &ts[i], lab, 1);
    }
  }
}

/* ------------------------------------------------------------------------
 * memtop's own families
 * ------------------------------------------------------------------------ */

/* One sample of memtop's own, without labels. */
static void self_u64(walk_t *w, const char *name, const char *help,
                     uint64_t v) {
  family_t f = family_of(name, help, K_GAUGE);
  header(w, &f);
  ms__strbuf_printf(w->out, "%s ", name);
  put_u64(w->out, v);
  ms__strbuf_puts(w->out, "\n");
}

static void self_double(walk_t *w, const char *name, const char *help,
                        kind_t kind, double v) {
  family_t f = family_of(name, help, kind);
  header(w, &f);
  ms__strbuf_printf(w->out, "%s ", name);
  put_double(w, v);
  ms__strbuf_puts(w->out, "\n");
}

/* memtop's own process, named as client_golang's process collector names
 * it, so that node_exporter's dashboards and alerts apply. */
static void self_families(walk_t *w, const mt_prom_self_t *p) {
  if (!p)
    return;
  if (p->have_stat) {
    self_double(w, "process_cpu_seconds_total",
                "Total user and system CPU time spent in seconds.", K_COUNTER,
                p->cpu_seconds);
    self_u64(w, "process_resident_memory_bytes",
             "Resident memory size in bytes.", p->resident_bytes);
    self_u64(w, "process_virtual_memory_bytes", "Virtual memory size in bytes.",
             p->virtual_bytes);
    self_double(w, "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds.",
                K_GAUGE, p->start_time_s);
  }
  if (p->have_vmax)
    self_double(w, "process_virtual_memory_max_bytes",
                "Maximum amount of virtual memory available in bytes.", K_GAUGE,
                p->virtual_max_bytes == UINT64_MAX
                    ? -1.0
                    : (double)p->virtual_max_bytes);
  if (p->have_fds) {
    self_u64(w, "process_open_fds", "Number of open file descriptors.",
             p->open_fds);
    self_u64(w, "process_max_fds", "Maximum number of open file descriptors.",
             p->max_fds);
  }
}

/* How long each target's last read took (asked to answered, on memtop's
 * loop): the slow ones, which a scrape serves with their last figures. */
static void duration_family(walk_t *w, const mt_prom_target_t *ts, size_t n) {
  family_t fam = family_of("memtop_scrape_duration_seconds",
                           "How long memtop's last read of this process "
                           "took (asked to answered).",
                           K_GAUGE);
  for (size_t i = 0; i < n; i++) {
    if (!ts[i].read_ns)
      continue;
    header(w, &fam);
    sample_ns(w, "memtop_scrape_duration_seconds", "", &ts[i], ts[i].read_ns);
  }
}

static void memtop_families(walk_t *w, const mt_prom_target_t *ts, size_t n,
                            const char *version) {
  size_t live = 0;
  for (size_t i = 0; i < n; i++)
    live += ts[i].snap != NULL;
  family_t targets = family_of(
      "memtop_targets", "Processes whose figures this scrape serves.", K_GAUGE);
  header(w, &targets);
  ms__strbuf_printf(w->out, "memtop_targets %zu\n", live);

  family_t errs = family_of("memtop_scrape_errors_total",
                            "Times memtop could not read this process "
                            "(refused, timed out, malformed answer).",
                            K_COUNTER);
  for (size_t i = 0; i < n; i++) {
    header(w, &errs);
    ms__strbuf_printf(
        w->out, "memtop_scrape_errors_total{pid=\"%" PRId32 "\"} %" PRIu64 "\n",
        ts[i].pid, ts[i].scrape_errors);
  }

  family_t build = family_of("memtop_build_info",
                             "The memtop serving these metrics.", K_INFO);
  header(w, &build);
  ms__strbuf_puts(w->out, "memtop_build_info{version=\"");
  put_label_value(w, version ? version : "", strlen(version ? version : ""));
  ms__strbuf_puts(w->out, "\"} 1\n");
}

int mt_emit_prometheus(ms__strbuf_t *out, int openmetrics,
                       const mt_prom_target_t *targets, size_t n,
                       const char *memtop_version) {
  mt_prom_opts_t o = {memtop_version, 0, NULL, -1, 0};
  return mt_emit_prometheus_opts(out, openmetrics, targets, n, &o);
}

int mt_emit_prometheus_opts(ms__strbuf_t *out, int openmetrics,
                            const mt_prom_target_t *targets, size_t n,
                            const mt_prom_opts_t *opts) {
  if (!out || (n && !targets) || !opts)
    return MS_EINVAL;
  const char *memtop_version = opts->version;
  walk_t w = {out, openmetrics != 0, targets, MS_STRBUF_INIT, NULL};
  /* Each target's breakdown and labels once, for all its samples. */
  ms_breakdown_t *bd = NULL;
  if (n) {
    bd = calloc(n, sizeof *bd);
    w.at = calloc(n + 1, sizeof *w.at);
    if (!bd || !w.at) {
      free(bd);
      free(w.at);
      return MS_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
      if (targets[i].snap)
        ms_breakdown(targets[i].snap, &bd[i]);
      w.at[i] = w.labels.len;
      make_target_labels(&w.labels, &targets[i]);
      w.at[i + 1] = w.labels.len;
    }
    if (w.labels.oom) {
      free(bd);
      free(w.at);
      ms__strbuf_free(&w.labels);
      return MS_ENOMEM;
    }
  }
  fields_families(&w, targets, n);
  breakdown_families(&w, targets, n, bd);
  pause_family(&w, targets, n);
  if (!opts->no_size_classes)
    class_families(&w, targets, n);
  info_family(&w, targets, n);
  age_family(&w, targets, n);
  estimated_family(&w, targets, n, bd, !opts->no_size_classes);
  duration_family(&w, targets, n);
  memtop_families(&w, targets, n, memtop_version);
  if (opts->late_targets >= 0)
    self_u64(&w, "memtop_scrape_late_targets",
             "Processes served the figures of their last read because this "
             "scrape's read was late (its answer is kept for the next).",
             (uint64_t)opts->late_targets);
  if (opts->figures_unix_ns)
    self_double(&w, "memtop_figures_timestamp_seconds",
                "When memtop gathered the figures served, in seconds since "
                "the epoch: a scrape is answered with the last round's.",
                K_GAUGE, (double)opts->figures_unix_ns / 1e9);
  self_families(&w, opts->self);
  if (w.om)
    ms__strbuf_puts(out, "# EOF\n");
  free(bd);
  free(w.at);
  ms__strbuf_free(&w.labels);
  return out->oom ? MS_ENOMEM : 0;
}
