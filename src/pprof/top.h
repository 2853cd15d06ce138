/*
 * top.h - a heap profile's top allocation sites, as `pprof -top -lines`
 * lists them: per site (a function and line, or an address left
 * unresolved), the bytes and objects allocated there itself (flat) and
 * below it (cum). Read by the text report of `memtop profile --format
 * text`, and by whatever shows the top sites elsewhere.
 */
#ifndef MT_PPROF_TOP_H
#define MT_PPROF_TOP_H

#include <stddef.h>
#include <stdint.h>

#include "common/strbuf.h"
#include "pprof/heap.h"

typedef struct mt_top_site_s {
  /* From the heap's string table (not sanitised); function is NULL for
   * an address that was not resolved. */
  const char *function;
  const char *file; /* "" when unknown */
  int64_t line;     /* 0 when unknown */
  uint64_t address; /* the location's address (unresolved sites) */
  /* An unresolved site's file (the mapping's path, "" if none) and its
   * offset in that file. */
  const char *module;
  uint64_t module_offset;
  int64_t flat[MT_HEAP_NVALUES];
  int64_t cum[MT_HEAP_NVALUES];
  /* The sample (index into h->samples) that counts most in flat[by]
   * here: the stack the live view shows as the site's call chain;
   * SIZE_MAX for a site with nothing flat. */
  size_t heaviest;
} mt_top_site_t;

/* The sites of h, sorted by flat[by] (largest first; then cum[by], then
 * name), into *out (malloc'd; the caller frees). by is
 * MT_HEAP_INUSE_SPACE, MT_HEAP_ALLOC_SPACE, or an objects value. Returns
 * 0, MS_EINVAL or MS_ENOMEM. */
int mt_top_sites(const mt_heap_t *h, int by, mt_top_site_t **out, size_t *n);

/* Appends the top list (at most max sites; 0: all) for a terminal, every
 * name and path sanitised: a header saying what the figures are (in use
 * or allocated, growth or total, estimated when sampled), then one line
 * per site. Returns 0 or MS_ENOMEM. */
int mt_top_text(ms__strbuf_t *out, const mt_heap_t *h, int by, size_t max);

#endif
