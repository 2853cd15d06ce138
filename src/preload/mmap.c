/*
 * mmap.c - mmap, mmap64, munmap, mremap and madvise of
 * libmemstats-preload.so: the private anonymous mappings a program makes
 * itself are listed, with the caller's address, in the table of
 * src/core/maptable.c, so that memory obtained outside malloc (Python's
 * arenas, a compiler's collector, pools, buffers) is in Sys, and what of
 * them it hands back with MADV_FREE in core/ranges.c's, so that those
 * pages are Prepared (see src/providers/mappings.c for what is counted where).
 *
 * Each call is forwarded to the next definition (libc's, or a sanitizer's)
 * found with dlsym(RTLD_NEXT); until that lookup is done, and from inside
 * it, the system call is made directly. Nothing here allocates, locks or
 * prints: a slot claimed with one compare-and-swap per mapping, a scan of
 * the table's used part per unmapping. A range is taken off the table
 * before the real munmap (and before a MAP_FIXED mapping replaces it), so
 * the kernel cannot hand it to another thread's mmap while it is listed.
 * Whatever the next function returns is returned unchanged, errno
 * included. libc's internal mappings (malloc's, thread stacks, the dynamic
 * loader's) do not come through here.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/maptable.h"
#include "core/ranges.h"
#include "preload/preload.h"

MS__PRELOAD_API void *mmap(void *addr, size_t len, int prot, int flags, int fd,
                           off_t off);
MS__PRELOAD_API void *mmap64(void *addr, size_t len, int prot, int flags,
                             int fd, off_t off);
MS__PRELOAD_API int munmap(void *addr, size_t len);
MS__PRELOAD_API void *mremap(void *old, size_t old_len, size_t new_len,
                             int flags, ...);
MS__PRELOAD_API int madvise(void *addr, size_t len, int advice);

typedef void *(*mmap_fn)(void *, size_t, int, int, int, off_t);
typedef int (*munmap_fn)(void *, size_t);
typedef void *(*mremap_fn)(void *, size_t, size_t, int, ...);
typedef int (*madvise_fn)(void *, size_t, int);

static struct {
  mmap_fn mmap;
  munmap_fn munmap;
  mremap_fn mremap;
  madvise_fn madvise;
} g_next;
/* 0: not looked up; 1: a thread is looking; 2: done (a pointer may be
 * NULL: then the system call is made directly). */
static int g_state;

static int ready(void) {
  int st = __atomic_load_n(&g_state, __ATOMIC_ACQUIRE);
  if (st == 2)
    return 1;
  int zero = 0;
  if (st != 0 || !__atomic_compare_exchange_n(
                     &g_state, &zero, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
    return 0; /* another thread (or this one, from inside dlsym) looks */
  g_next.mmap = (mmap_fn)dlsym(RTLD_NEXT, "mmap");
  g_next.munmap = (munmap_fn)dlsym(RTLD_NEXT, "munmap");
  g_next.mremap = (mremap_fn)dlsym(RTLD_NEXT, "mremap");
  g_next.madvise = (madvise_fn)dlsym(RTLD_NEXT, "madvise");
  __atomic_store_n(&g_state, 2, __ATOMIC_RELEASE);
  return 1;
}

/* Whether a mapping is one to list: private and anonymous, and not made
 * from inside a real allocator call that the preload forwarded with its
 * guard set (a C++ operator, a size lookup). */
static int listed(int flags) {
  return (flags & MAP_ANONYMOUS) && (flags & MAP_PRIVATE) &&
         !ms__pl(&ms__tls)->guard;
}

/* [addr, addr+len) is going (unmapped, or mapped over): off every table. */
static void forget(void *addr, size_t len) {
  ms__map_forget(addr, len);
  ms__ranges_forget(&ms__lazy_ranges, addr, len);
  ms__ranges_forget(&ms__shared_ranges, addr, len);
}

/* A shared anonymous mapping the program makes: shared memory, listed
 * apart (core/ranges.c). */
static int shared_anon(int flags) {
  return (flags & MAP_ANONYMOUS) && (flags & MAP_SHARED) &&
         !ms__pl(&ms__tls)->guard;
}

static void *do_mmap(void *addr, size_t len, int prot, int flags, int fd,
                     off_t off, const void *ra) {
  if (flags & MAP_FIXED)
    forget(addr, len);
  void *p;
  if (ready() && g_next.mmap)
    p = g_next.mmap(addr, len, prot, flags, fd, off);
  else
    p = (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
  if (p != MAP_FAILED && listed(flags)) {
    int saved = errno;
    if (ms__preload_complete())
      ms__map_set_allocator((const void *)ms__real.malloc);
    ms__map_note(p, len, ra);
    errno = saved;
  } else if (p != MAP_FAILED && shared_anon(flags)) {
    ms__ranges_note(&ms__shared_ranges, p, len);
  }
  return p;
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
  return do_mmap(addr, len, prot, flags, fd, off, __builtin_return_address(0));
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
  return do_mmap(addr, len, prot, flags, fd, off, __builtin_return_address(0));
}

int munmap(void *addr, size_t len) {
  forget(addr, len);
  if (ready() && g_next.munmap)
    return g_next.munmap(addr, len);
  return (int)syscall(SYS_munmap, addr, len);
}

void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...) {
  void *want = NULL;
  if (flags & MREMAP_FIXED) {
    va_list ap;
    va_start(ap, flags);
    want = va_arg(ap, void *);
    va_end(ap);
  }
  /* Off the table first, as munmap does; put back if the call fails. */
  const void *ra = ms__map_owner(old);
  int shared = ms__ranges_holds(&ms__shared_ranges, old);
  if (ra)
    ms__map_forget(old, old_len);
  /* Moved or not, its pages stay backed: no longer lazily freed. */
  ms__ranges_forget(&ms__lazy_ranges, old, old_len);
  if (shared)
    ms__ranges_forget(&ms__shared_ranges, old, old_len);
  void *p;
  if (ready() && g_next.mremap)
    p = g_next.mremap(old, old_len, new_len, flags, want);
  else
    p = (void *)syscall(SYS_mremap, old, old_len, new_len, flags, want);
  if (shared) {
    int saved = errno;
    if (p != MAP_FAILED && (flags & MREMAP_FIXED))
      forget(p, new_len);
    ms__ranges_note(&ms__shared_ranges, p == MAP_FAILED ? old : p,
                    p == MAP_FAILED ? old_len : new_len);
    errno = saved;
  }
  if (ra) {
    int saved = errno;
    if (p == MAP_FAILED) {
      ms__map_note(old, old_len, ra);
    } else {
      if (flags & MREMAP_FIXED)
        ms__map_forget(p, new_len);
      ms__map_note(p, new_len, ra);
    }
    errno = saved;
  }
  return p;
}

/* MADV_FREE on a mapping the program made itself: its pages stay resident
 * until the kernel reclaims them, but they are handed back (Prepared), so
 * the range is noted (core/ranges.c); MADV_DONTNEED and MADV_REMOVE end
 * that (the pages are gone, and a write later backs them again). Whatever
 * the next function returns is returned unchanged, errno included. */
int madvise(void *addr, size_t len, int advice) {
  int r;
  if (ready() && g_next.madvise)
    r = g_next.madvise(addr, len, advice);
  else
    r = (int)syscall(SYS_madvise, addr, len, advice);
  if (r == 0) {
    int saved = errno;
#ifdef MADV_FREE
    if (advice == MADV_FREE && ms__map_owner(addr) != NULL)
      ms__ranges_note(&ms__lazy_ranges, addr, len);
    else
#endif
        if (advice == MADV_DONTNEED || advice == MADV_REMOVE)
      ms__ranges_forget(&ms__lazy_ranges, addr, len);
    errno = saved;
  }
  return r;
}
