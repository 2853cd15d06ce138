/*
 * unwind.c - the call stack of a sampled allocation.
 *
 * Why libunwind: most binaries a user profiles come from a distribution
 * built without frame pointers (Debian's python3, sqlite3, git), so a
 * frame-pointer walk stops after a frame or two, or follows garbage. The
 * stacks must be unwound from the DWARF call-frame information
 * (.eh_frame), which is what libunwind does, with a per-thread cache of
 * what it has parsed (unw_backtrace's fast path, and
 * UNW_CACHE_PER_THREAD for the slow one): after warm-up a capture costs
 * about a microsecond, rare enough at one sample per 512 KiB. It is the
 * unwinder gperftools uses for the same job, and Debian ships it.
 *
 * The target side depends on libc alone (DESIGN.md), so libunwind is
 * dlopen'ed (libunwind.so.8, which carries the x86-64 local unwinder's
 * symbols itself) from the preload's constructor, never from malloc: its
 * loading allocates. If it is absent, glibc's backtrace() is used (it
 * unwinds by the same tables through libgcc_s, loaded here once, ahead of
 * any sample, for the same reason). The profile says which one is in use
 * (MS__TAG_PROF_UNWINDER) and MEMSTATS_DEBUG=1 prints it.
 *
 * A capture may still allocate inside libunwind (its thread-local cache
 * lives in dynamic TLS, made on a thread's first capture): the sampler
 * marks the thread busy around the capture, so such a nested malloc is
 * counted like any other but never sampled (no recursion), and a signal
 * handler's malloc during a capture is not sampled either.
 */
#include <dlfcn.h>
#include <execinfo.h>
#include <link.h>
#include <string.h>

#include "profile/profile.h"

typedef int (*unw_backtrace_fn)(void **, int);
typedef int (*unw_set_caching_fn)(void *, int);

/* libunwind's unw_caching_policy_t: UNW_CACHE_PER_THREAD. */
#define UNW_CACHE_PER_THREAD 2

static unw_backtrace_fn g_unw_backtrace;
static int g_kind; /* 0 none, 1 libunwind, 2 glibc backtrace */
/* This library's text: frames in it (the sampler, malloc) are left out. */
static uintptr_t g_self_lo, g_self_hi;

static int find_self(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  uintptr_t me = (uintptr_t)data;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
      continue;
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
    uintptr_t hi = lo + ph->p_memsz;
    if (me >= lo && me < hi) {
      g_self_lo = lo;
      g_self_hi = hi;
      return 1;
    }
  }
  return 0;
}

void ms__prof_unwind_init(void) {
  if (g_kind != 0)
    return;
  dl_iterate_phdr(find_self, (void *)(uintptr_t)&ms__prof_unwind_init);
  void *h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
  if (h != NULL) {
    g_unw_backtrace = (unw_backtrace_fn)dlsym(h, "unw_backtrace");
    unw_set_caching_fn set =
        (unw_set_caching_fn)dlsym(h, "_ULx86_64_set_caching_policy");
    void **as = (void **)dlsym(h, "_ULx86_64_local_addr_space");
    if (set != NULL && as != NULL)
      set(*as, UNW_CACHE_PER_THREAD);
  }
  void *warm[4];
  if (g_unw_backtrace != NULL) {
    g_kind = 1;
    g_unw_backtrace(warm, 4);
  } else {
    /* The first backtrace() loads libgcc_s: here, not inside malloc. */
    backtrace(warm, 4);
    g_kind = 2;
  }
  ms__debug("profile: stacks unwound by %s", ms__prof_unwinder());
}

const char *ms__prof_unwinder(void) {
  return g_kind == 1 ? "libunwind" : g_kind == 2 ? "glibc-backtrace" : "none";
}

uint32_t ms__prof_backtrace(uint64_t *out, uint32_t max, int *truncated) {
  /* Room for this library's own frames (a few) and one past the limit,
   * which tells a deeper stack apart. */
  void *pcs[MS__PROFILE_MAX_DEPTH + 16];
  int want = (int)(max + 16 > MS__PROFILE_MAX_DEPTH + 16
                       ? MS__PROFILE_MAX_DEPTH + 16
                       : max + 16);
  int n = 0;
  if (g_kind == 1)
    n = g_unw_backtrace(pcs, want);
  else if (g_kind == 2)
    n = backtrace(pcs, want);
  int i = 0;
  while (i < n && (uintptr_t)pcs[i] >= g_self_lo &&
         (uintptr_t)pcs[i] < g_self_hi)
    i++;
  uint32_t k = 0;
  for (; i < n && k < max; i++)
    out[k++] = (uint64_t)(uintptr_t)pcs[i];
  /* Stopped at the limit with frames left, or the capture itself filled
   * its buffer: deeper than recorded. */
  *truncated = i < n || n == want;
  return k;
}
