/*
 * sites_live.c - the live view's allocation sites (see sites_live.h).
 */
#include "memtop/sites_live.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memstats.h"
#include "pprof/debuginfod.h"
#include "pprof/filter.h"
#include "pprof/heap.h"
#include "pprof/sym.h"
#include "pprof/top.h"

struct mt_sites_live_s {
  uv_loop_t *loop;
  mt_sites_live_cb cb;
  void *arg;
  uv_work_t work;
  /* What was resolved, kept from one profile to the next (the worker's:
   * one job at a time). */
  mt_sym_cache_t *cache;
  const mt_heap_filter_t *filter; /* the command line's, or NULL */
  int busy;                       /* a profile is being resolved */
  int closed;                     /* mt_sites_live_close() came while busy */
  int last_pid;
  uint64_t last_ns;
  /* The profile being resolved and the result (the worker's while busy). */
  int pid;
  ms__profile_decoded_t *prof;
  mt_site_t *sites;
  size_t nsites;
  int estimated;
  char err[256];
};

static char *dup_or_empty(const char *s) {
  return strdup(s != NULL ? s : "");
}

/* One frame of a chain as the panel shows it: "function file:line", or
 * the object and the offset in it, or the address. */
static char *frame_text(const mt_heap_t *h, const mt_heap_location_t *loc,
                        uint32_t l) {
  char buf[1024];

  if (l < loc->nlines) {
    const mt_heap_function_t *fn = &h->functions[loc->lines[l].function];
    const char *file = h->strings[fn->filename];
    const char *base = strrchr(file, '/');

    if (file[0] == '\0')
      snprintf(buf, sizeof buf, "%s", h->strings[fn->name]);
    else if (loc->lines[l].line > 0)
      snprintf(buf, sizeof buf, "%s %s:%lld", h->strings[fn->name],
               base != NULL ? base + 1 : file, (long long)loc->lines[l].line);
    else
      snprintf(buf, sizeof buf, "%s %s", h->strings[fn->name],
               base != NULL ? base + 1 : file);
  } else if (loc->mapping != 0 && loc->mapping <= h->nmappings) {
    const mt_heap_mapping_t *m = &h->mappings[loc->mapping - 1];
    const char *file = h->strings[m->filename];
    const char *base = strrchr(file, '/');

    snprintf(buf, sizeof buf, "%s+0x%llx", base != NULL ? base + 1 : file,
             (unsigned long long)(loc->address - m->start + m->offset));
  } else {
    snprintf(buf, sizeof buf, "0x%llx", (unsigned long long)loc->address);
  }
  return strdup(buf);
}

/* The frames of sample i, innermost first (inlined calls each a frame),
 * at most MT_SITE_CHAIN_MAX. Returns 0 or MS_ENOMEM. */
static int copy_chain(mt_site_t *d, const mt_heap_t *h, size_t i) {
  const mt_heap_sample_t *hs;
  size_t j;

  if (i >= h->nsamples)
    return 0;
  hs = &h->samples[i];
  d->chain = calloc(MT_SITE_CHAIN_MAX, sizeof *d->chain);
  if (d->chain == NULL)
    return MS_ENOMEM;
  for (j = 0; j < hs->nlocations && d->nchain < MT_SITE_CHAIN_MAX; j++) {
    const mt_heap_location_t *loc = &h->locations[hs->locations[j]];
    uint32_t l = 0;

    do {
      if ((d->chain[d->nchain] = frame_text(h, loc, l)) == NULL)
        return MS_ENOMEM;
      d->nchain++;
    } while (++l < loc->nlines && d->nchain < MT_SITE_CHAIN_MAX);
  }
  /* As long as it is: the model keeps a chain per site for minutes. */
  if (d->nchain > 0) {
    char **shrunk = realloc(d->chain, d->nchain * sizeof *d->chain);
    if (shrunk != NULL)
      d->chain = shrunk;
  }
  return 0;
}

/* d as the model keeps site s of h (its strings copied). Returns 0 or
 * MS_ENOMEM. */
static int copy_site(mt_site_t *d, const mt_top_site_t *s, const mt_heap_t *h) {
  memset(d, 0, sizeof *d);
  if (copy_chain(d, h, s->heaviest) != 0)
    return MS_ENOMEM;
  d->function = s->function != NULL ? strdup(s->function) : NULL;
  d->file = dup_or_empty(s->file);
  d->module = dup_or_empty(s->module);
  d->line = s->line;
  d->address = s->address;
  d->module_offset = s->module_offset;
  d->inuse_space = s->flat[MT_HEAP_INUSE_SPACE];
  d->inuse_objects = s->flat[MT_HEAP_INUSE_OBJECTS];
  d->alloc_space = s->flat[MT_HEAP_ALLOC_SPACE];
  d->alloc_rate = -1;
  return (s->function != NULL && d->function == NULL) || d->file == NULL ||
                 d->module == NULL
             ? MS_ENOMEM
             : 0;
}

static int same(const mt_top_site_t *a, const mt_top_site_t *b) {
  return a->function == b->function && a->line == b->line &&
         a->address == b->address;
}

int mt_sites_from_heap(const struct mt_heap_s *h, size_t max, mt_site_t **out,
                       size_t *n) {
  mt_top_site_t *by_inuse = NULL, *by_alloc = NULL;
  size_t ni = 0, na = 0, i, j, k = 0;
  mt_site_t *res = NULL;
  int rc;

  *out = NULL;
  *n = 0;
  rc = mt_top_sites(h, MT_HEAP_INUSE_SPACE, &by_inuse, &ni);
  if (rc == 0)
    rc = mt_top_sites(h, MT_HEAP_ALLOC_SPACE, &by_alloc, &na);
  if (rc != 0)
    goto out;
  res = calloc(2 * max + 1, sizeof *res);
  if (res == NULL) {
    rc = MS_ENOMEM;
    goto out;
  }
  /* The top by in use, then those of the top by bytes allocated not
   * among them (a site whose objects are freed at once allocates much
   * and holds nothing). Only flat sites: a site with nothing of its own
   * is a caller. */
  for (i = 0; i < ni && k < max; i++) {
    if (by_inuse[i].flat[MT_HEAP_INUSE_SPACE] <= 0)
      break;
    if (copy_site(&res[k++], &by_inuse[i], h) != 0)
      goto oom;
  }
  for (i = 0; i < na && i < max; i++) {
    int seen = 0;
    if (by_alloc[i].flat[MT_HEAP_ALLOC_SPACE] <= 0)
      break;
    for (j = 0; j < ni && j < max && !seen; j++)
      seen = by_inuse[j].flat[MT_HEAP_INUSE_SPACE] > 0 &&
             same(&by_inuse[j], &by_alloc[i]);
    if (!seen && copy_site(&res[k++], &by_alloc[i], h) != 0)
      goto oom;
  }
  *out = res;
  *n = k;
  res = NULL;
  goto out;
oom:
  rc = MS_ENOMEM;
  mt_sites_free(res, k);
  res = NULL;
out:
  free(by_inuse);
  free(by_alloc);
  return rc;
}

/* The worker thread: what reads files (the target's binaries). */
static void work_cb(uv_work_t *w) {
  mt_sites_live_t *s = w->data;
  ms__profile_decoded_t *d = s->prof;
  mt_heap_t h;
  int rc;

  s->sites = NULL;
  s->nsites = 0;
  s->err[0] = '\0';
  if (d->profile.rate == 0) {
    snprintf(s->err, sizeof s->err,
             "PID %d samples nothing (MEMSTATS_PROFILE_RATE=0)", s->pid);
    goto out;
  }
  if (s->cache == NULL && (s->cache = mt_sym_cache_new()) == NULL) {
    snprintf(s->err, sizeof s->err, "PID %d: the heap profile: %s", s->pid,
             ms_strerror(MS_ENOMEM));
    goto out;
  }
  rc = mt_heap_build(&d->profile, NULL, &h);
  if (rc == 0) {
    /* With the target's rights, on this worker thread alone. */
    rc = mt_sym_cache_symbolize(s->cache, &h, s->pid, d->profile.start_time);
    if (rc == 0)
      rc = mt_heap_filter(&h, s->filter);
    if (rc == 0)
      rc = mt_sites_from_heap(&h, MT_SITES_LIVE_MAX, &s->sites, &s->nsites);
    s->estimated = h.rate > 1;
    mt_heap_free(&h);
  }
  if (rc != 0)
    snprintf(s->err, sizeof s->err, "PID %d: the heap profile: %s", s->pid,
             mt_heap_strerror(rc));
out:
  ms__profile_decoded_free(d);
  s->prof = NULL;
  /* What this refresh freed (the profile, the model, DWARF the cache let
   * go) goes back to the system rather than staying in this worker's
   * arena until the next. */
  malloc_trim(0);
}

static void after_cb(uv_work_t *w, int status) {
  mt_sites_live_t *s = w->data;

  s->busy = 0;
  if (s->closed) {
    mt_sites_free(s->sites, s->nsites);
    mt_sym_cache_free(s->cache);
    free(s);
    return;
  }
  if (status != 0 && s->err[0] == '\0')
    snprintf(s->err, sizeof s->err, "the profile's read was cancelled");
  s->cb(s->arg, s->pid, s->sites, s->nsites, s->estimated,
        s->sites != NULL ? NULL : s->err);
  s->sites = NULL;
  s->nsites = 0;
}

mt_sites_live_t *mt_sites_live_new(uv_loop_t *loop, mt_sites_live_cb cb,
                                   void *arg) {
  mt_sites_live_t *s = calloc(1, sizeof *s);

  if (s == NULL)
    return NULL;
  s->loop = loop;
  s->cb = cb;
  s->arg = arg;
  s->work.data = s;
  return s;
}

void mt_sites_live_filter(mt_sites_live_t *s, const mt_heap_filter_t *f) {
  if (s != NULL)
    s->filter = f;
}

int mt_sites_live_due(mt_sites_live_t *s, int pid, uint64_t now_ns,
                      uint64_t interval_ns) {
  if (s == NULL || s->busy || pid <= 0)
    return 0;
  if (pid == s->last_pid && now_ns - s->last_ns < interval_ns)
    return 0;
  s->last_pid = pid;
  s->last_ns = now_ns;
  return 1;
}

int mt_sites_live_take(mt_sites_live_t *s, int pid, mt_tset_profile_t *p) {
  if (s == NULL || s->busy || p == NULL)
    return 0;
  if (p->prof == NULL) {
    s->cb(s->arg, pid, NULL, 0, 0, p->msg[0] ? p->msg : "no profile");
    return 1;
  }
  s->pid = pid;
  s->prof = p->prof;
  if (uv_queue_work(s->loop, &s->work, work_cb, after_cb) != 0) {
    s->prof = NULL;
    return 0;
  }
  p->prof = NULL;
  s->busy = 1;
  return 1;
}

void mt_sites_live_close(mt_sites_live_t *s) {
  if (s == NULL)
    return;
  if (s->busy) {
    s->closed = 1; /* after_cb frees */
    /* A debug file being fetched for it is not waited for. */
    mt_debuginfod_cancel();
    return;
  }
  mt_sym_cache_free(s->cache);
  free(s);
}

void mt_sites_live_rest(mt_sites_live_t *s) {
  if (s != NULL && !s->busy && mt_sym_cache_rest(s->cache))
    malloc_trim(0);
}

int mt_sites_live_stats(const mt_sites_live_t *s, mt_sym_stats_t *out) {
  if (s == NULL)
    return MS_EINVAL;
  if (s->busy)
    return MS_EAGAIN;
  if (s->cache == NULL)
    return MS_ENOENT;
  mt_sym_cache_stats(s->cache, out);
  return 0;
}
