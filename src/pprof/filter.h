/*
 * filter.h - which samples and frames of a heap profile a top list shows,
 * as pprof chooses them (memtop side).
 *
 * A site is where the program asked for memory, not the allocator or the
 * wrapper it called: the allocation wrappers (MT_HEAP_WRAPPERS: malloc's
 * family, xmalloc, OpenSSL's CRYPTO_malloc, Redis's zmalloc, GLib's
 * g_malloc and g_slice, C++'s operator new and std::allocator, CPython's
 * PyMem and PyObject_Malloc, Rust's __rust_alloc ...) are dropped from
 * each stack as pprof drops a profile's drop_frames (profile.proto;
 * Profile.Prune): going from the root towards the leaf, the first frame whose
 * function, without its argument list, fully matches the list is cut with every
 * frame below it, once a frame that does not match has been seen (a stack of
 * wrappers alone stays whole). Then, as pprof's options of the same name:
 *
 *   focus   keeps only the samples with a frame matching (function name,
 *           file name or mapped object's file name: a search, not anchored)
 *   ignore  drops the samples with a frame matching
 *   hide    takes the matching frames out of every stack (function name or
 *           file name; a location whose object matches goes whole)
 *
 * The expressions are POSIX extended regular expressions (pprof's are
 * RE2: the same for what such a filter is written with).
 *
 * The filter changes the model (samples dropped, frames cut): it runs
 * after mt_heap_symbolize and before a top list, never before the
 * profile.proto writer, whose file stays whole for pprof's own options.
 */
#ifndef MT_PPROF_FILTER_H
#define MT_PPROF_FILTER_H

#include <stddef.h>

#include "pprof/heap.h"

typedef struct mt_heap_filter_s {
  const char *focus;  /* --focus REGEX; NULL: every sample */
  const char *ignore; /* --ignore REGEX; NULL: none dropped */
  const char *hide;   /* --hide REGEX; NULL: none hidden */
  int keep_wrappers;  /* --keep-wrappers: the wrappers stay in the stacks */
} mt_heap_filter_t;

/* The built-in allocation wrappers, an extended regular expression matched
 * whole against a function's name without its argument list. */
extern const char MT_HEAP_WRAPPERS[];

/* The suffixes GCC and LLVM give a function's clones and parts
 * ("xmalloc.constprop.0", "zmalloc.cold"), which the filter takes off a
 * name before matching it, as a regular expression that matches one and
 * what follows it (for a pprof file's drop_frames, where pprof matches
 * names as they are). */
extern const char MT_HEAP_CLONE_SUFFIX[];

/* The bounds of a filter expression (mt_heap_filter_check): its length,
 * its '+' repetitions, one {n,m} with counts up to 100, and no repetition
 * of a repetition, so that compiling it stays small. */
#define MT_HEAP_FILTER_MAX 256
#define MT_HEAP_FILTER_PLUS_MAX 8
#define MT_HEAP_FILTER_COUNT_MAX 100

/* Whether re is within those bounds and compiles (what the command line
 * checks). Returns 0, or MS_EINVAL with the reason (or regerror's words)
 * in err. */
int mt_heap_filter_check(const char *re, char *err, size_t errlen);

/* Applies f (NULL: the wrappers only) to h, after mt_heap_symbolize.
 * Returns 0, MS_EINVAL (an expression that does not compile) or
 * MS_ENOMEM (h is then as it was or filtered in part: still valid). */
int mt_heap_filter(mt_heap_t *h, const mt_heap_filter_t *f);

#endif
