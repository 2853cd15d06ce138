/*
 * linked.c - the heap profile of a program that links libmemstats: a
 * language runtime or custom allocator reports its objects with their
 * addresses (ms_object_alloc_at, ms_object_free_at in memstats.h), and
 * they are sampled as the preload samples malloc (src/preload/preload.h):
 * the same countdown in ms__tls.prof_left, the same slow paths
 * (sampler.c), the same table, served by the same agent code.
 *
 * The fast paths are the preload's, written out here once more because
 * the preload's are compiled into its entry points under its own switch
 * (ms__preload_sample/_unsample, MS__PRELOAD_PROFILER) and live in a
 * folder this one may not include. An allocation pays one subtract from
 * the countdown and one branch not taken; a free one load of
 * ms__prof_live and one branch not taken (with a sampled object live
 * somewhere, one load of the filter more). With MEMSTATS_PROFILE_RATE=0
 * ms__prof_live is never set, and the countdown, set to INT64_MAX by the
 * first call on each thread (sampler.c), does not run out in 8 EiB of
 * allocations: the branch is taken once per thread.
 *
 * Start-up: the sampler's table is mapped and the unwinder warmed up
 * (libgcc_s dlopen'ed) by ms__prof_init(), which must not run inside an
 * allocation. In libmemstats.so that is this file's constructor; at rate
 * 0 it reads the environment only (nothing mapped, nothing loaded). The
 * preload carries these objects too, and there its own constructor calls
 * ms__prof_init() after it has found the next allocator (src/preload/
 * preload.c): this constructor, which runs first (the library's objects
 * come first in the preload's link, and so in its .init_array), leaves it
 * to it. It tells the two apart by a function only the preload defines,
 * referenced weakly and hidden: resolved to the preload's own in the
 * preload, to NULL when linked into anything else. Being in the file that
 * defines ms_object_alloc_at, the constructor comes along wherever a
 * static link (libmemstats.a) pulls the function in.
 */
#include <stdint.h>

#include "core/engine.h"
#include "core/hotpath.h"
#include "memstats.h"
#include "profile/profile.h"

/* Defined in the preload only (src/preload/preload.h). */
extern void ms__preload_profile_on(void)
    __attribute__((weak, visibility("hidden")));

__attribute__((constructor)) static void linked_profile_start(void) {
  if (ms__preload_profile_on != NULL)
    return; /* the preload's constructor does it, in its order */
  ms__prof_init();
}

/* The paths that call into the sampler, out of line: inline, their calls
 * made the compiler save registers and build a frame on every call, the
 * unsampled ones included (gcc 12 does not shrink-wrap them). */
static __attribute__((noinline)) void alloc_sampled(const void *p,
                                                    uint64_t size) {
  ms__tls_t *t = &ms__tls;
  ms__track_alloc_in(t, size);
  ms__prof_sampled(t, (void *)(uintptr_t)p, size);
}

static __attribute__((noinline)) void free_maybe_sampled(const void *p,
                                                         uint64_t size) {
  if (__atomic_load_n(&ms__prof_filter[ms__prof_filter_index(p)],
                      __ATOMIC_RELAXED) != 0)
    ms__prof_freed((void *)(uintptr_t)p);
  ms__track_free_in(&ms__tls, size);
}

MS_EXTERN void ms_object_alloc_at(const void *p, uint64_t size) {
  ms__tls_t *t = &ms__tls;
  ms__feed(MS__FEED_OBJECTS | MS__FEED_API);
  if (__builtin_expect((t->prof_left -= (int64_t)size) < 0, 0)) {
    alloc_sampled(p, size);
    return;
  }
  ms__track_alloc_in(t, size);
}

MS_EXTERN void ms_object_free_at(const void *p, uint64_t size) {
  ms__feed(MS__FEED_OBJECTS | MS__FEED_API);
  /* A sampled object is unsampled before it is counted, and so before the
   * caller can hand its address out again (NULL: its filter count is 0,
   * as no sample has that address). */
  if (__builtin_expect(__atomic_load_n(&ms__prof_live, __ATOMIC_RELAXED) != 0,
                       0)) {
    free_maybe_sampled(p, size);
    return;
  }
  ms__track_free_in(&ms__tls, size);
}
