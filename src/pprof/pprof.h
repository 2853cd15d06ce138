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
 * target's binaries nor network; and the allocation wrappers memtop's
 * own lists skip (filter.h's MT_HEAP_WRAPPERS) as its drop_frames, which
 * pprof cuts from the stacks it reads, while the file keeps every frame.
 */
#ifndef MT_PPROF_PPROF_H
#define MT_PPROF_PPROF_H

#include <stddef.h>
#include <stdint.h>

#include "pprof/heap.h"

/* Where mt_pprof_write puts the gzipped bytes, a piece at a time: returns
 * 0, or a nonzero code that stops the writing (and is its result). */
typedef int (*mt_pprof_sink_fn)(void *ctx, const void *data, size_t len);

/* Writes h as a gzipped profile.proto to sink, packed and compressed a
 * batch at a time (what it holds beside h is a few MiB, whatever h's
 * size), every string made safe for a terminal (common/sanitize.h: a
 * stranger's function names and paths). Returns 0, MS_EINVAL, MS_ENOMEM,
 * MS_ENOSYS (protobuf-c or zlib cannot be loaded: mt_heap_strerror says
 * which) or the sink's code. */
int mt_pprof_write(const mt_heap_t *h, mt_pprof_sink_fn sink, void *ctx);

/* mt_pprof_write into *out (malloc'd; the caller frees it). Returns 0,
 * MS_EINVAL, MS_ENOMEM or MS_ENOSYS. */
int mt_pprof_encode(const mt_heap_t *h, uint8_t **out, size_t *len);

#endif
