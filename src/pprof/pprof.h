/*
 * pprof.h - an mt_heap_t as pprof's profile.proto, gzipped: the file
 * `go tool pprof` and Google's pprof read (memtop side).
 *
 * The layout is Go's heap profile (runtime/pprof/protomem.go): sample
 * types alloc_objects/count, alloc_space/bytes, inuse_objects/count,
 * inuse_space/bytes, default inuse_space; period type space/bytes and
 * period the sampling rate; each sample labelled with its objects' size
 * ("bytes"); and, beyond what Go writes, the functions, files and lines
 * memtop resolved (the mappings say so), so that pprof needs neither the
 * target's binaries nor network.
 */
#ifndef MT_PPROF_PPROF_H
#define MT_PPROF_PPROF_H

#include <stddef.h>
#include <stdint.h>

#include "pprof/heap.h"

/* Encodes h as a gzipped profile.proto into *out (malloc'd; the caller
 * frees it). Returns 0, MS_ENOMEM, or MS_EINVAL if h has values over what
 * profile.proto holds. */
int mt_pprof_encode(const mt_heap_t *h, uint8_t **out, size_t *len);

#endif
