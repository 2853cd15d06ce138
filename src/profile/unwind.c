/*
 * unwind.c - the call stack of a sampled allocation.
 *
 * Why unwind by the tables: most binaries a user profiles come from a
 * distribution built without frame pointers (Debian's python3, sqlite3,
 * git), so a frame-pointer walk stops after a frame or two, or follows
 * garbage. The stacks must be unwound from the DWARF call-frame
 * information (.eh_frame).
 *
 * Why glibc's backtrace() and not libunwind: both unwind by .eh_frame;
 * backtrace() goes through libgcc_s's unwinder (the one every C++
 * exception takes, so it is present, tested and cached per object by
 * dl_iterate_phdr), and it opens nothing. libunwind 1.6 (Debian's
 * libunwind8) was tried first, dlopen'ed with UNW_CACHE_PER_THREAD: on
 * its first capture it creates a pipe in the program's descriptor table
 * to validate memory, and later closes and reopens those numbers, which
 * by then may be the program's own (test_agent_fds's bash script lost its
 * fd 4 that way, and in the agent's private table the listening socket
 * was replaced). A library inside someone else's program may not touch
 * descriptors it cannot prove are its own, so libunwind is not used.
 *
 * The target side depends on libc alone (DESIGN.md): the first
 * backtrace() loads libgcc_s with dlopen, which allocates and takes the
 * loader's lock, so it is never called first from malloc. Where cfi.c's
 * unwinder runs (x86-64), libgcc's is only its fallback, and loading it
 * is most of what a short-lived process (a compiler driver, a shell's
 * child) paid for the profiler: it is loaded later, outside any
 * allocation, by ms__prof_unwind_load(), which the agent thread calls
 * before it builds the first profile, and once it has run
 * MS__PROF_LIBGCC_AFTER_NS (a process that lives on). Until then a
 * capture cfi.c gives up on (a signal frame, a stack it cannot bound) is
 * recorded without its stack, marked truncated. Elsewhere libgcc's is the
 * only unwinder and is loaded at init, from the preload's constructor.
 * The profile says which unwinder is in use (MS__TAG_PROF_UNWINDER) and
 * MEMSTATS_DEBUG=1 prints it.
 *
 * On x86-64 a capture first tries the sampler's own unwinder (cfi.c):
 * the same .eh_frame rules, read once per return address and kept, so a
 * warm stack costs a lookup a frame rather than libgcc's interpretation
 * of each frame's CFA program; where it gives up (a signal frame, a rule
 * it does not handle, a stack it cannot bound) the capture is libgcc's,
 * as before. test_unwind checks that both give the same stacks.
 *
 * A capture runs with the sampling thread marked busy (sampler.c): a
 * malloc nested in it (from the unwinder, or a signal handler) is counted
 * like any other but never sampled, so no capture nests.
 */
#include <execinfo.h>
#include <link.h>
#include <string.h>

#include "profile/profile.h"

/* libgcc's unwinder: 0 not loaded (yet), 1 tried and none, 2 glibc's
 * backtrace() (atomic: set by the thread that loads it, read by every
 * capture). */
static int g_kind;
static int g_loading; /* atomic: a thread is loading it */
static int g_init;    /* ms__prof_unwind_init() has run */
/* Whether cfi.c's unwinder goes first, and this library's text: frames
 * in it (the sampler, malloc) are left out (profile.h). */
int ms__prof_cfi_first;
uintptr_t ms__prof_self_lo, ms__prof_self_len;

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
      ms__prof_self_lo = lo;
      ms__prof_self_len = hi - lo;
      return 1;
    }
  }
  return 0;
}

void ms__prof_unwind_init(void) {
  if (g_init)
    return;
  g_init = 1;
  dl_iterate_phdr(find_self, (void *)(uintptr_t)&ms__prof_unwind_init);
  ms__prof_cfi_first = ms__prof_cfi_init() == 0;
  if (!ms__prof_cfi_first)
    ms__prof_unwind_load(); /* the only unwinder: now, not inside malloc */
  ms__debug("profile: stacks unwound by %s%s", ms__prof_unwinder(),
            ms__prof_unwind_pending() ? " (libgcc's, its fallback, loaded "
                                        "with the first profile)"
                                      : "");
}

void ms__prof_unwind_load(void) {
  if (__atomic_load_n(&g_kind, __ATOMIC_ACQUIRE) != 0)
    return;
  int idle = 0;
  if (!__atomic_compare_exchange_n(&g_loading, &idle, 1, 0, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE))
    return; /* another thread is loading it */
  /* The first backtrace() loads libgcc_s. */
  void *warm[4];
  __atomic_store_n(&g_kind, backtrace(warm, 4) > 0 ? 2 : 1, __ATOMIC_RELEASE);
}

int ms__prof_unwind_pending(void) {
  return g_init && __atomic_load_n(&g_kind, __ATOMIC_ACQUIRE) == 0;
}

const char *ms__prof_unwinder(void) {
  int libgcc = __atomic_load_n(&g_kind, __ATOMIC_ACQUIRE) == 2;
  return ms__prof_cfi_first
             ? (libgcc ? "cached-cfi+glibc-backtrace" : "cached-cfi")
         : libgcc ? "glibc-backtrace"
                  : "none";
}

/* How many of backtrace()'s first frames to leave out. The stack starts
 * after this library's own frames, which are the first few; and above
 * them there may be a frame of whoever wraps backtrace() (a sanitizer's
 * interceptor, in a sanitized libmemstats.so: the profile of a linked
 * program then showed __interceptor_backtrace as the site of
 * everything). So the stack starts after the last of this library's
 * frames among the first 16, not at the first frame outside it. */
static int self_frames(const uintptr_t *pcs, int n) {
  int i = 0;
  for (int j = 0; j < n && j < 16; j++)
    if (pcs[j] - ms__prof_self_lo < ms__prof_self_len)
      i = j + 1;
  return i;
}

/* libgcc's capture, where cfi.c's gave up or is not built: backtrace()
 * into a buffer with room for this library's own frames (a few) and one
 * past the limit, which tells a deeper stack apart. Out of line
 * (ms__prof_backtrace, profile.h, tries cfi.c's first), so that cfi.c's
 * capture pays for neither the buffer nor the copy. */
uint32_t ms__prof_backtrace_libgcc(uint64_t *out, uint32_t max,
                                   int *truncated) {
  union {
    void *p[MS__PROFILE_MAX_DEPTH + 16];
    uintptr_t a[MS__PROFILE_MAX_DEPTH + 16];
  } u;
  if (__atomic_load_n(&g_kind, __ATOMIC_ACQUIRE) != 2) {
    /* No stack: cfi.c gave up and libgcc's is not loaded (yet). */
    *truncated = ms__prof_cfi_first;
    return 0;
  }
  int want =
      (int)(max + 16 > MS__PROFILE_MAX_DEPTH + 16 ? MS__PROFILE_MAX_DEPTH + 16
                                                  : max + 16);
  int n = backtrace(u.p, want);
  int i = self_frames(u.a, n);
  uint32_t left = (uint32_t)(n - i);
  uint32_t k = left < max ? left : max;
#if UINTPTR_MAX == UINT64_MAX
  memcpy(out, &u.a[i], k * sizeof *out);
#else
  for (uint32_t m = 0; m < k; m++)
    out[m] = (uint64_t)u.a[i + m];
#endif
  /* Stopped at the limit with frames left, or the capture itself filled
   * its buffer: deeper than recorded. */
  *truncated = left > max || n == want;
  return k;
}
