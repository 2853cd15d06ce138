/*
 * sites_live.h - the live view's allocation sites: a target's heap
 * profile read, resolved and reduced to its top sites off the loop's
 * thread (a libuv work request: the fetch blocks and the symbolisation
 * reads the target's files), one at a time, on a slower cadence than the
 * snapshots.
 */
#ifndef MS_MEMTOP_SITES_LIVE_H
#define MS_MEMTOP_SITES_LIVE_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "memtop/model.h"

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
/* Starts reading pid's profile, unless a read is in flight or the last
 * one for pid began less than interval_ns ago (monotonic now_ns). Returns
 * 1 if started. */
int mt_sites_live_poll(mt_sites_live_t *s, int pid, int timeout_ms,
                       uint64_t now_ns, uint64_t interval_ns);
/* Frees s; a read in flight finishes on its thread and its result is
 * dropped (the loop must run until it is done, as it does for closing
 * handles). */
void mt_sites_live_close(mt_sites_live_t *s);

/* The top sites of a resolved profile as the model keeps them (exposed
 * for the tests). Returns 0 or MS_ENOMEM. */
struct mt_heap_s;
int mt_sites_from_heap(const struct mt_heap_s *h, size_t max, mt_site_t **out,
                       size_t *n);

#endif
