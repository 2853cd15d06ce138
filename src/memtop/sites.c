/*
 * sites.c - top allocation sites for --once (see sites.h): the same
 * model and top list as `memtop profile --format text`, written into the
 * report or the JSON line.
 */
#include "memtop/sites.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "emit/emit.h"
#include "memstats.h"
#include "client/client.h"
#include "pprof/filter.h"
#include "pprof/heap.h"
#include "pprof/top.h"

/* The frames a site's chain lists at most (the live view's panel keeps
 * as many). */
#define CHAIN_MAX 48

/* One frame of a chain: line l of location loc (the function, its file
 * and line), or, where nothing was resolved, its address and the object
 * it is in, as a site is written. */
static void json_frame(ms__strbuf_t *out, const mt_heap_t *h,
                       const mt_heap_location_t *loc, uint32_t l) {
  if (l < loc->nlines) {
    const mt_heap_function_t *fn = &h->functions[loc->lines[l].function];
    const char *name = h->strings[fn->name], *file = h->strings[fn->filename];

    ms__strbuf_puts(out, "{\"function\":");
    mt_json_string(out, name, strlen(name));
    ms__strbuf_puts(out, ",\"file\":");
    mt_json_string(out, file, strlen(file));
    ms__strbuf_printf(out, ",\"line\":%" PRId64 "}", loc->lines[l].line);
    return;
  }
  ms__strbuf_printf(out, "{\"function\":null,\"address\":\"0x%" PRIx64 "\"",
                    loc->address);
  if (loc->mapping != 0 && loc->mapping <= h->nmappings) {
    const mt_heap_mapping_t *m = &h->mappings[loc->mapping - 1];
    const char *file = h->strings[m->filename];

    if (file[0] != '\0') {
      ms__strbuf_puts(out, ",\"module\":");
      mt_json_string(out, file, strlen(file));
      ms__strbuf_printf(out, ",\"module_offset\":%" PRIu64,
                        loc->address - m->start + m->offset);
    }
  }
  ms__strbuf_puts(out, "}");
}

/* The call chain of the stack that holds most at a site (its heaviest
 * sample), innermost first, each inlined call a frame of its own, as the
 * live view's panel shows it: "chain":[...], empty for a site with
 * nothing of its own; "chain_truncated" when the frames went past
 * CHAIN_MAX or the target's own limit of stack depth. */
static void json_chain(ms__strbuf_t *out, const mt_heap_t *h, size_t sample) {
  const mt_heap_sample_t *hs =
      sample < h->nsamples ? &h->samples[sample] : NULL;
  size_t j, n = 0;
  int cut = hs != NULL && hs->truncated;

  ms__strbuf_puts(out, ",\"chain\":[");
  for (j = 0; hs != NULL && j < hs->nlocations; j++) {
    const mt_heap_location_t *loc = &h->locations[hs->locations[j]];
    uint32_t l = 0;

    do {
      if (n == CHAIN_MAX) {
        cut = 1;
        goto end;
      }
      if (n++ > 0)
        ms__strbuf_puts(out, ",");
      json_frame(out, h, loc, l);
    } while (++l < loc->nlines);
  }
end:
  ms__strbuf_printf(out, "],\"chain_truncated\":%s", cut ? "true" : "false");
}

static void json_site(ms__strbuf_t *out, const mt_top_site_t *s,
                      const mt_heap_t *h) {
  ms__strbuf_puts(out, "{\"function\":");
  if (s->function != NULL) {
    mt_json_string(out, s->function, strlen(s->function));
    ms__strbuf_puts(out, ",\"file\":");
    mt_json_string(out, s->file, strlen(s->file));
    ms__strbuf_printf(out, ",\"line\":%" PRId64, s->line);
  } else {
    ms__strbuf_printf(out, "null,\"address\":\"0x%" PRIx64 "\"", s->address);
    if (s->module != NULL && s->module[0] != '\0') {
      ms__strbuf_puts(out, ",\"module\":");
      mt_json_string(out, s->module, strlen(s->module));
      ms__strbuf_printf(out, ",\"module_offset\":%" PRIu64, s->module_offset);
    }
  }
  ms__strbuf_printf(
      out,
      ",\"inuse_space\":%" PRId64 ",\"inuse_objects\":%" PRId64
      ",\"alloc_space\":%" PRId64 ",\"alloc_objects\":%" PRId64
      ",\"cum_inuse_space\":%" PRId64,
      s->flat[MT_HEAP_INUSE_SPACE], s->flat[MT_HEAP_INUSE_OBJECTS],
      s->flat[MT_HEAP_ALLOC_SPACE], s->flat[MT_HEAP_ALLOC_OBJECTS],
      s->cum[MT_HEAP_INUSE_SPACE]);
  json_chain(out, h, s->heaviest);
  ms__strbuf_puts(out, "}");
}

static void json_error(ms__strbuf_t *out, const char *msg) {
  ms__strbuf_puts(out, ",\"profile\":{\"error\":");
  mt_json_string(out, msg, strlen(msg));
  ms__strbuf_puts(out, "}}");
}

void mt_sites_append(ms__strbuf_t *out, int pid, const ms__profile_decoded_t *d,
                     const char *why, size_t n, int json,
                     const mt_heap_filter_t *filter) {
  mt_top_site_t *sites = NULL;
  size_t nsites = 0, i;
  mt_heap_t h;
  char err[512];
  int rc, built = 0;

  if (json) {
    /* The profile goes inside the object just written. */
    if (out->len == 0 || out->data[out->len - 1] != '}')
      return;
    out->data[--out->len] = '\0';
  }
  rc = 0;
  if (d == NULL) {
    rc = MS_ENOENT;
    snprintf(err, sizeof err, "%s",
             why != NULL ? why : "the heap profile was not read");
  }
  if (rc == 0 && d->profile.rate == 0) {
    rc = MS_EINVAL;
    snprintf(err, sizeof err,
             "PID %d does not sample its allocations "
             "(MEMSTATS_PROFILE_RATE=0)",
             pid);
  }
  if (rc == 0) {
    rc = mt_heap_build(&d->profile, NULL, &h);
    built = rc == 0;
    if (rc == 0)
      rc = mt_heap_symbolize(&h, pid, d->profile.start_time);
    if (rc == 0)
      rc = mt_heap_filter(&h, filter);
    /* The JSON lists the sites; the text's top list finds its own (two
     * lists of a million sites at once would be twice the memory). */
    if (rc == 0 && json)
      rc = mt_top_sites(&h, MT_HEAP_INUSE_SPACE, &sites, &nsites);
    if (rc != 0)
      snprintf(err, sizeof err, "PID %d: the heap profile: %s", pid,
               mt_heap_strerror(rc));
  }
  if (rc != 0) {
    if (json) {
      json_error(out, err);
    } else {
      ms__strbuf_puts(out, "Top allocation sites: unavailable: ");
      ms__strbuf_put_safe(out, err, sizeof err);
      ms__strbuf_puts(out, "\n");
    }
    goto out;
  }
  if (json) {
    ms__strbuf_printf(out,
                      ",\"profile\":{\"rate\":%" PRIu64
                      ",\"estimated\":%s,\"buckets_dropped\":%" PRIu64
                      ",\"sites\":[",
                      h.rate, h.rate > 1 ? "true" : "false", h.buckets_dropped);
    for (i = 0; i < nsites && i < n; i++) {
      if (i > 0)
        ms__strbuf_puts(out, ",");
      json_site(out, &sites[i], &h);
    }
    ms__strbuf_puts(out, "]}}");
  } else {
    ms__strbuf_puts(out, "Top allocation sites:\n");
    mt_top_text(out, &h, MT_HEAP_INUSE_SPACE, n);
  }
out:
  free(sites);
  if (built)
    mt_heap_free(&h);
}
