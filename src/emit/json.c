/*
 * json.c - the JSON emitters: the --json object of DESIGN.md and, inside
 * it, the "memstats" object in exactly the form Go's encoding/json gives a
 * runtime.MemStats (the layout expvar serves), so that tools reading Go's
 * memstats read ours. Both walk the field table: a field's name and value
 * form are defined there once.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/fields.h"
#include "emit/emit.h"

/* Appends "key": with the comma that separates it from the previous member.
 * Keys are our own identifiers (no character needs escaping). */
static void key(ms__strbuf_t *out, int *first, const char *k) {
  ms__strbuf_printf(out, "%s\"%s\":", *first ? "" : ",", k);
  *first = 0;
}

static void u64_array(ms__strbuf_t *out, const uint64_t *v, size_t n) {
  ms__strbuf_append(out, "[", 1);
  for (size_t i = 0; i < n; i++)
    ms__strbuf_printf(out, "%s%" PRIu64, i ? "," : "", v[i]);
  ms__strbuf_append(out, "]", 1);
}

/* One of Go's fields, valued as encoding/json values it: uint64 and uint32
 * as integers, bool as true/false, float64 in Go's shortest form, arrays
 * and the BySize structs member by member. PauseNs stands for the ring as a
 * whole, so it writes PauseEnd too, which follows it in Go's struct. */
static void go_member(ms__strbuf_t *out, int *first, const ms_snapshot_t *s,
                      const ms__field_info_t *fi) {
  key(out, first, fi->go_name);
  switch (fi->id) {
  case MS_F_PAUSE_NS:
    u64_array(out, s->pause_ns, MS_PAUSE_RING);
    key(out, first, "PauseEnd");
    u64_array(out, s->pause_end, MS_PAUSE_RING);
    return;
  case MS_F_BY_SIZE: {
    uint32_t n = s->nsize_classes;
    if (n > MS_MAX_SIZE_CLASSES)
      n = MS_MAX_SIZE_CLASSES;
    ms__strbuf_append(out, "[", 1);
    for (uint32_t i = 0; i < n; i++)
      ms__strbuf_printf(out,
                        "%s{\"Size\":%" PRIu64 ",\"Mallocs\":%" PRIu64
                        ",\"Frees\":%" PRIu64 "}",
                        i ? "," : "", s->by_size[i].size, s->by_size[i].mallocs,
                        s->by_size[i].frees);
    ms__strbuf_append(out, "]", 1);
    return;
  }
  default:
    break;
  }
  switch (fi->ctype) {
  case MS__CT_DOUBLE: {
    char f[MT_GO_FLOAT_MAX];
    ms__strbuf_puts(out,
                    mt_fmt_go_float(f, sizeof f, ms__field_double(s, fi->id)));
    break;
  }
  case MS__CT_INT:
  case MS__CT_U64:
  case MS__CT_U32:
    if (fi->unit == MS__UNIT_BOOL)
      ms__strbuf_puts(out, ms__field_u64(s, fi->id) ? "true" : "false");
    else
      ms__strbuf_printf(out, "%" PRIu64, ms__field_u64(s, fi->id));
    break;
  case MS__CT_NONE:
    /* A compound field this emitter does not know how to write: null keeps
     * the object valid and says nothing false. */
    ms__strbuf_puts(out, "null");
    break;
  }
}

/* The memstats object; with all == 0 (--json), unavailable fields are left
 * out, and the beyond-Go terms of Go's identities (OffHeapReleased and its
 * parts) follow Go's fields, so that a reader of this one object can
 * reconcile Prepared; with all == 1, exactly Go's fields. */
static void go_memstats(ms__strbuf_t *out, const ms_snapshot_t *s, int all) {
  int first = 1;
  ms__strbuf_append(out, "{", 1);
  for (int f = 0; f < MS_F__COUNT; f++) {
    const ms__field_info_t *fi = &ms__fields[f];
    if (fi->in_go != MS__GO && (all || fi->in_go != MS__GO_TOO))
      continue;
    if (!all && ms__field_quality(s, (ms_field_t)f) == MS_Q_UNAVAILABLE)
      continue;
    go_member(out, &first, s, fi);
  }
  ms__strbuf_append(out, "}", 1);
}

int mt_emit_go_memstats(ms__strbuf_t *out, const ms_snapshot_t *s) {
  if (!out || !s)
    return MS_EINVAL;
  go_memstats(out, s, 1);
  return out->oom ? MS_ENOMEM : 0;
}

int mt_emit_json(ms__strbuf_t *out, const ms_snapshot_t *s) {
  return mt_emit_json_who(out, s, NULL, NULL);
}

/* ,"name":"value" for a value that is set. */
static void json_opt(ms__strbuf_t *out, const char *name, const char *v,
                     size_t max) {
  if (v == NULL || v[0] == '\0')
    return;
  ms__strbuf_printf(out, ",\"%s\":", name);
  mt_json_string(out, v, strnlen(v, max));
}

int mt_emit_json_who(ms__strbuf_t *out, const ms_snapshot_t *s,
                     const msc_ident_t *id, const char *user) {
  if (!out || !s)
    return MS_EINVAL;
  ms_breakdown_t b;
  ms_breakdown(s, &b);

  ms__strbuf_printf(out, "{\"pid\":%" PRId32 ",\"comm\":", s->pid);
  mt_json_string(out, s->comm, strnlen(s->comm, sizeof s->comm));
  if (id != NULL) {
    json_opt(out, "user", user, MS_NAME_MAX);
    if (id->have_uid)
      ms__strbuf_printf(out, ",\"uid\":%u", (unsigned)id->uid);
    if (id->ppid > 0)
      ms__strbuf_printf(out, ",\"ppid\":%d", id->ppid);
    if (id->nspid > 0 && id->nspid != s->pid)
      ms__strbuf_printf(out, ",\"ns_pid\":%d", id->nspid);
    json_opt(out, "container", id->container, sizeof id->container);
    json_opt(out, "engine", id->engine, sizeof id->engine);
    json_opt(out, "pod", id->pod, sizeof id->pod);
    json_opt(out, "unit", id->unit, sizeof id->unit);
  }
  ms__strbuf_printf(out,
                    ",\"start_time\":%" PRIu64 ",\"time_unix_ns\":%" PRIu64
                    ",\"age_ms\":%" PRIu64 ",\"providers\":[",
                    s->start_time, s->time_unix_ns, s->age_ns / 1000000u);
  uint32_t np =
      s->nproviders > MS_MAX_PROVIDERS ? MS_MAX_PROVIDERS : s->nproviders;
  for (uint32_t i = 0; i < np; i++) {
    if (i)
      ms__strbuf_append(out, ",", 1);
    mt_json_string(out, s->providers[i], strnlen(s->providers[i], MS_NAME_MAX));
  }
  ms__strbuf_puts(out, "],\"memstats\":");
  go_memstats(out, s, 0);

  /* The breakdown, named as in the one-line summary; an unavailable figure
   * is left out, as an unavailable field is. */
  const struct {
    const char *name;
    int64_t v;
    ms_quality_t q;
  } parts[] = {
      {"Ready", b.ready, b.q_ready},
      {"Prepared", b.prepared, b.q_prepared},
      {"Data", b.data, b.q_data},
      {"FragOverhead", b.frag_overhead, b.q_frag_overhead},
      {"Idle", b.idle, b.q_idle},
  };
  int first = 1;
  ms__strbuf_puts(out, ",\"breakdown\":{");
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
    if (parts[i].q == MS_Q_UNAVAILABLE)
      continue;
    key(out, &first, parts[i].name);
    ms__strbuf_printf(out, "%" PRId64, parts[i].v);
  }

  first = 1;
  ms__strbuf_puts(out, "},\"quality\":{");
  for (int f = 0; f < MS_F__COUNT; f++) {
    key(out, &first, ms__fields[f].go_name);
    ms__strbuf_printf(out, "\"%s\"",
                      ms_quality_name(ms__field_quality(s, (ms_field_t)f)));
  }

  /* The kernel's view, keyed by the table's kernel_key column ("rss",
   * "vsz", "lazyfree", "anonhuge", "swap", "anonrss"). */
  first = 1;
  ms__strbuf_puts(out, "},\"kernel\":{");
  for (int f = 0; f < MS_F__COUNT; f++) {
    if (!ms__fields[f].kernel_key ||
        ms__field_quality(s, (ms_field_t)f) == MS_Q_UNAVAILABLE)
      continue;
    key(out, &first, ms__fields[f].kernel_key);
    ms__strbuf_printf(out, "%" PRIu64, ms__field_u64(s, (ms_field_t)f));
  }
  /* What the classes account for against the kernel's anonymous RSS
   * (beyond Go): Ready, the unbacked off-heap part of Sys, and the gap
   * (KernelAnonRSS - Ready), where each is known. */
  ms__strbuf_puts(out, "}");
  if (ms__field_quality(s, MS_F_KERNEL_ANON_RSS) != MS_Q_UNAVAILABLE &&
      b.q_ready != MS_Q_UNAVAILABLE) {
    ms__strbuf_printf(out,
                      ",\"accounted\":{\"Ready\":%" PRId64
                      ",\"KernelAnonRSS\":%" PRIu64 ",\"Gap\":%" PRId64,
                      b.ready, s->kernel_anon_rss,
                      (int64_t)(s->kernel_anon_rss - (uint64_t)b.ready));
    if (ms__field_quality(s, MS_F_OFF_HEAP_RELEASED) != MS_Q_UNAVAILABLE)
      ms__strbuf_printf(out, ",\"OffHeapReleased\":%" PRIu64,
                        s->off_heap_released);
    /* Of the gap, what libmemstats itself holds outside the classes. */
    if (ms__field_known(s, MS_F_MEMSTATS_SELF))
      ms__strbuf_printf(out, ",\"Self\":%" PRId64, mt_self_outside(s));
    ms__strbuf_puts(out, "}");
  }
  /* Shared memory the program mapped itself (beyond Go; the kernel's
   * RssShmem and RssFile are in "kernel"). */
  if (ms__field_known(s, MS_F_SHARED_ANON))
    ms__strbuf_printf(
        out, ",\"shared\":{\"Anon\":%" PRIu64 ",\"AnonResident\":%" PRIu64 "}",
        s->shared_anon, s->shared_anon_resident);
  /* What libmemstats itself holds (beyond Go): resident and mapped, its
   * profile table (BuckHashSys) included. */
  if (ms__field_known(s, MS_F_MEMSTATS_SELF))
    ms__strbuf_printf(out,
                      ",\"self\":{\"Resident\":%" PRIu64 ",\"Sys\":%" PRIu64
                      ",\"BuckHashSys\":%" PRIu64 "}",
                      s->memstats_self, s->memstats_self_sys,
                      ms__field_known(s, MS_F_BUCK_HASH_SYS) ? s->buck_hash_sys
                                                             : 0);
  /* Python's object allocator (beyond Go): its arenas, their mapped and
   * resident bytes, where a Python interpreter runs in the process. */
  if (ms__field_known(s, MS_F_PYTHON_ARENAS)) {
    ms__strbuf_printf(out,
                      ",\"python\":{\"Arenas\":%" PRIu64
                      ",\"ArenaSys\":%" PRIu64 ",\"ArenaResident\":%" PRIu64,
                      s->python_arenas, s->python_arena_sys,
                      s->python_arena_resident);
    /* What of them is in use, by the pool headers. */
    if (ms__field_known(s, MS_F_PYTHON_ARENA_INUSE))
      ms__strbuf_printf(out,
                        ",\"ArenaInuse\":%" PRIu64 ",\"ArenaAlloc\":%" PRIu64,
                        s->python_arena_inuse, s->python_arena_alloc);
    ms__strbuf_puts(out, "}");
  }
  ms__strbuf_puts(out, "}");
  return out->oom ? MS_ENOMEM : 0;
}
