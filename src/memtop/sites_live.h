/*
 * sites_live.h - the live view's allocation sites: a target's heap
 * profile, read by the target set beside a snapshot (mt_tset_req_t.profile,
 * asked from live.c's request hook when mt_sites_live_due() says so),
 * then resolved and reduced to its top sites off the loop's thread (a
 * libuv work request: the symbolisation reads the target's binaries),
 * one at a time, on a slower cadence than the snapshots. What was
 * resolved is kept from one profile to the next (pprof/sym.h): an
 * address is looked up in the target's DWARF once, not at every refresh.
 */
#ifndef MS_MEMTOP_SITES_LIVE_H
#define MS_MEMTOP_SITES_LIVE_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "tui/model.h"
#include "targets/targetset.h"
#include "pprof/sym.h"

/* The most sites kept per profile (by in-use bytes, and as many by bytes
 * allocated, for the rate view). */
#define MT_SITES_LIVE_MAX 128

typedef struct mt_sites_live_s mt_sites_live_t;

/* Runs on the loop's thread with a result: sites (ownership passes to
 * the callee; NULL with err set when the profile could not be read). */
typedef void (*mt_sites_live_cb)(void *arg, int pid, mt_site_t *sites, size_t n,
                                 int estimated, const char *err);

/* NULL on ENOMEM. */
mt_sites_live_t *mt_sites_live_new(uv_loop_t *loop, mt_sites_live_cb cb,
                                   void *arg);
/* The samples and frames the sites are made of (pprof/filter.h): f is
 * kept (it must outlive s), read on the worker thread; NULL (the
 * default) drops the allocation wrappers only. Set before the first
 * profile. */
struct mt_heap_filter_s;
void mt_sites_live_filter(mt_sites_live_t *s, const struct mt_heap_filter_s *f);
/* Whether pid's profile is to be asked for now (with its next snapshot):
 * not while one is being resolved, nor when the last for pid was asked
 * less than interval_ns ago (monotonic now_ns). Returns 1 (and counts it
 * as asked) or 0. */
int mt_sites_live_due(mt_sites_live_t *s, int pid, uint64_t now_ns,
                      uint64_t interval_ns);
/* What a read asking for the profile brought for pid: the profile is
 * taken (p->prof set to NULL) and resolved off the loop, the callback
 * runs when done; a profile refused runs the callback with its words at
 * once. Returns 1 if taken, 0 if one is already being resolved. */
int mt_sites_live_take(mt_sites_live_t *s, int pid, mt_tset_profile_t *p);
/* Frees s; a profile being resolved finishes on its thread and its
 * result is dropped (the loop must run until it is done, as it does for closing
 * handles). */
void mt_sites_live_close(mt_sites_live_t *s);

/* The sites are not being shown: what the symbolisation holds only
 * while addresses keep coming (the DWARF it read) is let go now rather
 * than at the next refresh, which may be long in coming. What was
 * resolved is kept. A no-op while a profile is being resolved. */
void mt_sites_live_rest(mt_sites_live_t *s);

/* What the symbolisation cache has done and holds, when no profile is
 * being resolved (for the tests and the bench). Returns 0, MS_EAGAIN
 * while a profile is being resolved, MS_ENOENT when nothing was resolved
 * yet, or MS_EINVAL (s NULL). */
int mt_sites_live_stats(const mt_sites_live_t *s, mt_sym_stats_t *out);

/* The top sites of a resolved profile as the model keeps them (exposed
 * for the tests). Returns 0 or MS_ENOMEM. */
struct mt_heap_s;
int mt_sites_from_heap(const struct mt_heap_s *h, size_t max, mt_site_t **out,
                       size_t *n);

#endif
