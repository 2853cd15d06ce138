/*
 * sites.h - the top allocation sites added to `--once` reports and JSON
 * lines when --sites N asks for them (issue 12, item 7).
 */
#ifndef MS_MEMTOP_SITES_H
#define MS_MEMTOP_SITES_H

#include <stddef.h>

#include "common/strbuf.h"
#include "wire/profile.h"

/* Resolves pid's heap profile d (read by the caller: the rounds ask for
 * it beside the snapshot, mt_tset_req_t.profile) and appends its top `n`
 * sites by in-use space: as a text section after a report, or, with json
 * set, as a "profile" member of the JSON object just written to out
 * (which must end with that object's closing brace). A profile that could
 * not be read (d NULL, err says why) is said in the section or as
 * "profile":{"error":...}, never fatal: the report stands. The sites are
 * those filter leaves (pprof/filter.h; NULL: the allocation wrappers
 * dropped, nothing else). */
struct mt_heap_filter_s;
void mt_sites_append(ms__strbuf_t *out, int pid, const ms__profile_decoded_t *d,
                     const char *err, size_t n, int json,
                     const struct mt_heap_filter_s *filter);

#endif
