/*
 * top.c - a heap profile's top sites (see top.h).
 *
 * A site is one frame: a function at one line (pprof's -lines
 * granularity), or, where memtop could not resolve an address, the
 * address itself. A sample's values count flat at its innermost frame
 * and cum once at every site of its stack (once only, even when a
 * recursive stack passes a site several times), as pprof counts them.
 */
#include "pprof/top.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sanitize.h"
#include "emit/emit.h"
#include "memstats.h"

typedef struct site_int_s {
  mt_top_site_t site;
  uint64_t k1, k2; /* function + 1 and line; or 0 and the address */
  size_t stamp;    /* the last sample counted in cum, + 1 */
} site_int_t;

typedef struct sites_s {
  site_int_t *v;
  size_t n, cap;
  uint32_t *slot; /* index + 1 */
  size_t nslot;
  int by; /* the value the heaviest sample is chosen by */
} sites_t;

static uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t h = a * 0x9e3779b97f4a7c15ull ^ (b + 0x632be59bd9b4e019ull);
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ull;
  return h ^ (h >> 29);
}

static int rehash(sites_t *s) {
  size_t cap = s->nslot ? s->nslot * 2 : 256, i, j;
  uint32_t *slot = calloc(cap, sizeof *slot);

  if (slot == NULL)
    return MS_ENOMEM;
  for (i = 0; i < s->n; i++) {
    for (j = mix(s->v[i].k1, s->v[i].k2) & (cap - 1); slot[j] != 0;)
      j = (j + 1) & (cap - 1);
    slot[j] = (uint32_t)(i + 1);
  }
  free(s->slot);
  s->slot = slot;
  s->nslot = cap;
  return 0;
}

/* The site for (k1, k2), added if new; NULL on ENOMEM. An unresolved
 * site (k1 0, k2 its address) is in mapping m (index + 1, 0: none), the
 * one its location found. */
static site_int_t *site_of(sites_t *s, const mt_heap_t *h, uint64_t k1,
                           uint64_t k2, uint32_t m) {
  site_int_t *si;
  size_t j;

  if ((s->n + 1) * 2 > s->nslot && rehash(s) != 0)
    return NULL;
  for (j = mix(k1, k2) & (s->nslot - 1); s->slot[j] != 0;
       j = (j + 1) & (s->nslot - 1)) {
    si = &s->v[s->slot[j] - 1];
    if (si->k1 == k1 && si->k2 == k2)
      return si;
  }
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 64;
    site_int_t *v = realloc(s->v, cap * sizeof *v);
    if (v == NULL)
      return NULL;
    s->v = v;
    s->cap = cap;
  }
  si = &s->v[s->n];
  memset(si, 0, sizeof *si);
  si->k1 = k1;
  si->k2 = k2;
  si->site.heaviest = SIZE_MAX;
  if (k1 != 0) {
    const mt_heap_function_t *f = &h->functions[k1 - 1];
    si->site.function = h->strings[f->name];
    si->site.file = h->strings[f->filename];
    si->site.line = (int64_t)k2;
  } else {
    si->site.file = "";
    si->site.module = "";
    si->site.address = k2;
    if (m != 0 && m <= h->nmappings) {
      const mt_heap_mapping_t *hm = &h->mappings[m - 1];
      si->site.module = h->strings[hm->filename];
      si->site.module_offset = k2 - hm->start + hm->offset;
    }
  }
  s->slot[j] = (uint32_t)++s->n;
  return si;
}

static int compare_sites(const void *a, const void *b, void *arg) {
  const mt_top_site_t *x = a, *y = b;
  int by_value = *(const int *)arg;
  int c;

  if (x->flat[by_value] != y->flat[by_value])
    return x->flat[by_value] > y->flat[by_value] ? -1 : 1;
  if (x->cum[by_value] != y->cum[by_value])
    return x->cum[by_value] > y->cum[by_value] ? -1 : 1;
  if ((x->function == NULL) != (y->function == NULL))
    return x->function == NULL ? 1 : -1;
  if (x->function != NULL && (c = strcmp(x->function, y->function)) != 0)
    return c;
  if (x->line != y->line)
    return x->line < y->line ? -1 : 1;
  return x->address < y->address ? -1 : x->address > y->address;
}

/* Sums of a stranger's figures saturate instead of overflowing. */
static int64_t add_sat(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r))
    return b > 0 ? INT64_MAX : INT64_MIN;
  return r;
}

static int count(sites_t *s, const mt_heap_t *h, size_t sample, uint64_t k1,
                 uint64_t k2, uint32_t m, int flat) {
  const mt_heap_sample_t *hs = &h->samples[sample];
  site_int_t *si = site_of(s, h, k1, k2, m);
  int k;

  if (si == NULL)
    return MS_ENOMEM;
  for (k = 0; flat && k < MT_HEAP_NVALUES; k++)
    si->site.flat[k] = add_sat(si->site.flat[k], hs->value[k]);
  if (flat && (si->site.heaviest == SIZE_MAX ||
               hs->value[s->by] > h->samples[si->site.heaviest].value[s->by]))
    si->site.heaviest = sample;
  if (si->stamp != sample + 1) {
    si->stamp = sample + 1;
    for (k = 0; k < MT_HEAP_NVALUES; k++)
      si->site.cum[k] = add_sat(si->site.cum[k], hs->value[k]);
  }
  return 0;
}

int mt_top_sites(const mt_heap_t *h, int by, mt_top_site_t **out, size_t *n) {
  sites_t s = {0};
  mt_top_site_t *res = NULL;
  size_t i, j, l;

  if (h == NULL || out == NULL || n == NULL || by < 0 || by >= MT_HEAP_NVALUES)
    return MS_EINVAL;
  s.by = by;
  for (i = 0; i < h->nsamples; i++) {
    const mt_heap_sample_t *hs = &h->samples[i];

    for (j = 0; j < hs->nlocations; j++) {
      const mt_heap_location_t *loc = &h->locations[hs->locations[j]];

      if (loc->nlines == 0) {
        if (count(&s, h, i, 0, loc->address, loc->mapping, j == 0) != 0)
          goto oom;
        continue;
      }
      for (l = 0; l < loc->nlines; l++)
        if (count(&s, h, i, (uint64_t)loc->lines[l].function + 1,
                  (uint64_t)loc->lines[l].line, 0, j == 0 && l == 0) != 0)
          goto oom;
    }
  }
  /* The sites are moved down to the start of their own array (a site is
   * the first member of its site_int_t), not copied into another: a
   * stranger's million addresses cost one array, not two. */
  free(s.slot);
  s.slot = NULL;
  if (s.v == NULL && (s.v = calloc(1, sizeof *s.v)) == NULL)
    goto oom;
  res = (mt_top_site_t *)(void *)s.v;
  for (i = 0; i < s.n; i++)
    memmove(&res[i], &s.v[i].site, sizeof *res);
  if (s.n > 0) {
    mt_top_site_t *shrunk = realloc(res, s.n * sizeof *res);
    if (shrunk != NULL)
      res = shrunk;
  }
  qsort_r(res, s.n, sizeof *res, compare_sites, &by);
  *out = res;
  *n = s.n;
  return 0;
oom:
  free(s.v);
  free(s.slot);
  return MS_ENOMEM;
}

/* A figure, marked '~' when the profile was sampled (an estimate; a
 * zero is exact either way). */
static void put_bytes(ms__strbuf_t *out, int64_t v, int estimated, int w) {
  char num[40], cell[48];

  estimated = estimated && v != 0;
  mt_fmt_iec(num, sizeof num, v);
  snprintf(cell, sizeof cell, "%s%s",
           mt_quality_mark(estimated ? MS_Q_ESTIMATED : MS_Q_EXACT), num);
  ms__strbuf_printf(out, "%*s", w, cell);
}

static void put_count(ms__strbuf_t *out, int64_t v, int estimated, int w) {
  char cell[48];

  estimated = estimated && v != 0;
  snprintf(cell, sizeof cell, "%s%" PRId64,
           mt_quality_mark(estimated ? MS_Q_ESTIMATED : MS_Q_EXACT), v);
  ms__strbuf_printf(out, "%*s", w, cell);
}

static void put_percent(ms__strbuf_t *out, int64_t v, int64_t total) {
  if (total == 0)
    ms__strbuf_puts(out, "      -");
  else
    ms__strbuf_printf(out, " %5.1f%%", 100.0 * (double)v / (double)total);
}

int mt_top_text(ms__strbuf_t *out, const mt_heap_t *h, int by, size_t max) {
  mt_top_site_t *sites = NULL;
  size_t n = 0, i, shown;
  int64_t total[MT_HEAP_NVALUES] = {0}, sum = 0;
  int objects = by == MT_HEAP_ALLOC_OBJECTS || by == MT_HEAP_INUSE_OBJECTS;
  int space = objects ? by + 1 : by, objs = space - 1;
  int est = h->rate > 1;
  int rc, k;
  char num[40];

  rc = mt_top_sites(h, by, &sites, &n);
  if (rc != 0)
    return rc;
  for (i = 0; i < h->nsamples; i++)
    for (k = 0; k < MT_HEAP_NVALUES; k++)
      total[k] = add_sat(total[k], h->samples[i].value[k]);
  shown = max == 0 || max > n ? n : max;

  ms__strbuf_printf(out, "PID %d: heap profile, %s%s", (int)h->pid,
                    space == MT_HEAP_INUSE_SPACE ? "in-use space"
                                                 : "allocated space",
                    h->delta ? ", growth" : "");
  if (h->delta)
    ms__strbuf_printf(out, " over %.1f s", (double)h->duration_nanos / 1e9);
  if (est) {
    mt_fmt_iec(num, sizeof num, (int64_t)h->rate);
    ms__strbuf_printf(out,
                      "\nSampled every %s on average: figures are "
                      "estimates (~), unsampled as Go does\n",
                      num);
  } else {
    ms__strbuf_puts(out, "\nEvery allocation recorded: figures are exact\n");
  }
  char since[160];
  if (mt_heap_since_text(h, since, sizeof since)) {
    since[0] = 'S';
    ms__strbuf_printf(out, "%s\n", since);
  }
  if (h->buckets_dropped > 0)
    ms__strbuf_printf(out,
                      "The sampler's bucket table was full: %" PRIu64
                      " samples were not recorded, the figures are low\n",
                      h->buckets_dropped);
  if (h->frees_lost > 0)
    ms__strbuf_printf(out,
                      "%" PRIu64 " frees of sampled blocks could not be "
                      "recorded (a signal handler's): those blocks show as "
                      "in use\n",
                      h->frees_lost);
  ms__strbuf_puts(out, "Total: ");
  put_bytes(out, total[space], est, 0);
  ms__strbuf_puts(out, " in ");
  put_count(out, total[objs], est, 0);
  ms__strbuf_printf(out, " objects; %zu of %zu sites shown\n", shown, n);
  ms__strbuf_printf(out, "%11s%7s%7s%12s%7s%11s  %s\n", "flat", "flat%", "sum%",
                    "cum", "cum%", "objects", "site");
  for (i = 0; i < shown; i++) {
    const mt_top_site_t *s = &sites[i];

    sum = add_sat(sum, s->flat[space]);
    put_bytes(out, s->flat[space], est, 11);
    put_percent(out, s->flat[space], total[space]);
    put_percent(out, sum, total[space]);
    put_bytes(out, s->cum[space], est, 12);
    put_percent(out, s->cum[space], total[space]);
    put_count(out, s->flat[objs], est, 11);
    ms__strbuf_puts(out, "  ");
    if (s->function != NULL) {
      ms__strbuf_put_safe(out, s->function, (size_t)-1);
      if (s->file[0] != '\0') {
        ms__strbuf_puts(out, " ");
        ms__strbuf_put_safe(out, s->file, (size_t)-1);
        if (s->line > 0)
          ms__strbuf_printf(out, ":%" PRId64, s->line);
      }
    } else if (s->module[0] != '\0') {
      /* Where it is, as perf says it: the file's name and the offset in
       * it, which addr2line or a debug file can resolve later. */
      const char *base = strrchr(s->module, '/');
      ms__strbuf_put_safe(out, base != NULL ? base + 1 : s->module, (size_t)-1);
      ms__strbuf_printf(out, "+0x%" PRIx64 " (no symbol)", s->module_offset);
    } else {
      ms__strbuf_printf(out, "0x%" PRIx64 " (not resolved)", s->address);
    }
    ms__strbuf_puts(out, "\n");
  }
  free(sites);
  return out->oom ? MS_ENOMEM : 0;
}
