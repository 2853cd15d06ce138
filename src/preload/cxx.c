/*
 * cxx.c - every C++ operator new and delete, written in C under their
 * Itanium-ABI names.
 *
 * Why all of them: jemalloc, tcmalloc and mimalloc export their own
 * operators, which never call malloc, so a shim that wraps only malloc sees
 * a program's news vanish (and its deletes free blocks it never counted).
 * Each hook forwards to the next definition (dlsym(RTLD_NEXT), looked up on
 * first use) and counts the block by usable size exactly once:
 *
 *   - around the call into the real operator this thread's guard is set,
 *     so when the real operator is libstdc++'s (which calls malloc/free,
 *     i.e. us) the nested call passes through uncounted;
 *   - throwing operator new is served by the real *nothrow* operator (which
 *     runs the new_handler loop the same way) and, if that fails, throws
 *     std::bad_alloc itself. A C frame cannot run a cleanup while an
 *     exception unwinds through it, and a guard left set would silently
 *     stop counting on this thread; asking the nothrow operator never
 *     throws through us.
 *
 * Where no C++ runtime defines an operator (a C program calling
 * _Znwm by hand), the hooks fall back to malloc/posix_memalign and free.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>

#include "preload/preload.h"

/* std::align_val_t is a size_t; std::nothrow_t is passed by reference and
 * never read. */
typedef const void *ms__nothrow_ref;

MS__PRELOAD_API void *_Znwm(size_t n);
MS__PRELOAD_API void *_Znam(size_t n);
MS__PRELOAD_API void *_ZnwmSt11align_val_t(size_t n, size_t al);
MS__PRELOAD_API void *_ZnamSt11align_val_t(size_t n, size_t al);
MS__PRELOAD_API void *_ZnwmRKSt9nothrow_t(size_t n, ms__nothrow_ref nt);
MS__PRELOAD_API void *_ZnamRKSt9nothrow_t(size_t n, ms__nothrow_ref nt);
MS__PRELOAD_API void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t n, size_t al,
                                                         ms__nothrow_ref nt);
MS__PRELOAD_API void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t n, size_t al,
                                                         ms__nothrow_ref nt);
MS__PRELOAD_API void _ZdlPv(void *p);
MS__PRELOAD_API void _ZdaPv(void *p);
MS__PRELOAD_API void _ZdlPvm(void *p, size_t n);
MS__PRELOAD_API void _ZdaPvm(void *p, size_t n);
MS__PRELOAD_API void _ZdlPvSt11align_val_t(void *p, size_t al);
MS__PRELOAD_API void _ZdaPvSt11align_val_t(void *p, size_t al);
MS__PRELOAD_API void _ZdlPvmSt11align_val_t(void *p, size_t n, size_t al);
MS__PRELOAD_API void _ZdaPvmSt11align_val_t(void *p, size_t n, size_t al);
MS__PRELOAD_API void _ZdlPvRKSt9nothrow_t(void *p, ms__nothrow_ref nt);
MS__PRELOAD_API void _ZdaPvRKSt9nothrow_t(void *p, ms__nothrow_ref nt);
MS__PRELOAD_API void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *p, size_t al,
                                                         ms__nothrow_ref nt);
MS__PRELOAD_API void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *p, size_t al,
                                                         ms__nothrow_ref nt);

/* ---- the next definitions ----------------------------------------------*/

enum {
  NEW,
  NEW_A,
  NEW_AL,
  NEW_A_AL,
  NEW_NT,
  NEW_A_NT,
  NEW_AL_NT,
  NEW_A_AL_NT,
  DEL,
  DEL_A,
  DEL_SZ,
  DEL_A_SZ,
  DEL_AL,
  DEL_A_AL,
  DEL_SZ_AL,
  DEL_A_SZ_AL,
  DEL_NT,
  DEL_A_NT,
  DEL_AL_NT,
  DEL_A_AL_NT,
  THROW_BAD_ALLOC,
  THROW_BAD_ALLOC_LIBCXX,
  NSYMS
};

static const char *const sym_names[NSYMS] = {
    "_Znwm", "_Znam", "_ZnwmSt11align_val_t", "_ZnamSt11align_val_t",
    "_ZnwmRKSt9nothrow_t", "_ZnamRKSt9nothrow_t",
    "_ZnwmSt11align_val_tRKSt9nothrow_t", "_ZnamSt11align_val_tRKSt9nothrow_t",
    "_ZdlPv", "_ZdaPv", "_ZdlPvm", "_ZdaPvm", "_ZdlPvSt11align_val_t",
    "_ZdaPvSt11align_val_t", "_ZdlPvmSt11align_val_t", "_ZdaPvmSt11align_val_t",
    "_ZdlPvRKSt9nothrow_t", "_ZdaPvRKSt9nothrow_t",
    "_ZdlPvSt11align_val_tRKSt9nothrow_t",
    "_ZdaPvSt11align_val_tRKSt9nothrow_t",
    /* std::__throw_bad_alloc() of libstdc++ and of libc++. */
    "_ZSt17__throw_bad_allocv", "_ZNSt3__117__throw_bad_allocEv"};

/* NULL: not looked up yet; MISSING: looked up, not there (looked up again
 * never: a runtime loaded later by dlopen is found on the next process). */
#define MISSING ((void *)1)
static void *syms[NSYMS];

static void *sym(int i) {
  void *f = __atomic_load_n(&syms[i], __ATOMIC_ACQUIRE);
  if (__builtin_expect(f == NULL, 0)) {
    /* dlsym may call malloc: that is counted like any allocation (the
     * guard is not set here). Two threads racing store the same value. */
    if (!ms__preload_ready())
      ms__preload_resolve();
    if (i == THROW_BAD_ALLOC || i == THROW_BAD_ALLOC_LIBCXX)
      f = dlsym(RTLD_DEFAULT, sym_names[i]);
    else
      f = dlsym(RTLD_NEXT, sym_names[i]);
    if (!f)
      f = MISSING;
    __atomic_store_n(&syms[i], f, __ATOMIC_RELEASE);
  }
  return f == MISSING ? NULL : f;
}

/* Called by the constructor: looks up every operator the C++ runtimes
 * already loaded define, so that dlsym's own allocations happen at load
 * time and not inside the program's first new. What is not found yet is
 * looked up again on first use (a runtime dlopen'ed later). */
void ms__preload_cxx_resolve(void) {
  for (int i = 0; i < NSYMS; i++) {
    if (__atomic_load_n(&syms[i], __ATOMIC_ACQUIRE))
      continue;
    void *f = (i == THROW_BAD_ALLOC || i == THROW_BAD_ALLOC_LIBCXX)
                  ? dlsym(RTLD_DEFAULT, sym_names[i])
                  : dlsym(RTLD_NEXT, sym_names[i]);
    if (f)
      __atomic_store_n(&syms[i], f, __ATOMIC_RELEASE);
  }
}

typedef void *(*new_fn)(size_t);
typedef void *(*new_al_fn)(size_t, size_t);
typedef void *(*new_nt_fn)(size_t, ms__nothrow_ref);
typedef void *(*new_al_nt_fn)(size_t, size_t, ms__nothrow_ref);
typedef void (*del_fn)(void *);
typedef void (*del_sz_fn)(void *, size_t);
typedef void (*del_sz_al_fn)(void *, size_t, size_t);
typedef void (*del_nt_fn)(void *, ms__nothrow_ref);
typedef void (*del_al_nt_fn)(void *, size_t, ms__nothrow_ref);
typedef void (*throw_fn)(void);

/* The object the real nothrow operators get a reference to. */
static const char nothrow_tag;

/* ---- operator new -------------------------------------------------------*/

/* Failure of a throwing operator new: std::bad_alloc, as the C++ runtime
 * throws it. If no runtime can be found the real throwing operator is
 * called with no guard set; it throws (and, should memory have come free
 * meanwhile, returns a block that malloc has counted if it went through
 * malloc). */
static void *new_failed(int real_index, size_t n, size_t al) {
  throw_fn t = (throw_fn)sym(THROW_BAD_ALLOC);
  if (!t)
    t = (throw_fn)sym(THROW_BAD_ALLOC_LIBCXX);
  if (t)
    t();
  void *f = sym(real_index);
  if (f && al)
    return ((new_al_fn)f)(n, al);
  if (f)
    return ((new_fn)f)(n);
  return NULL;
}

/* Without a C++ runtime: malloc or posix_memalign, counted here. */
static void *new_fallback(size_t n, size_t al) {
  if (n == 0)
    n = 1;
  if (!al)
    return ms__preload_malloc(n);
  void *p = NULL;
  if (ms__preload_posix_memalign(&p, al < sizeof(void *) ? sizeof(void *) : al,
                                 n) != 0)
    return NULL;
  return p;
}

/* The nothrow path every operator new goes through. */
static inline void *new_counted(int nt_index, size_t n, size_t al) {
  void *f = sym(nt_index);
  if (__builtin_expect(!f, 0))
    return new_fallback(n, al);
  void *p;
  ms__pl(&ms__tls)->guard = 1;
  if (al)
    p = ((new_al_nt_fn)f)(n, al, &nothrow_tag);
  else
    p = ((new_nt_fn)f)(n, &nothrow_tag);
  ms__pl(&ms__tls)->guard = 0;
  if (al)
    ms__preload_count_alloc(p);
  else
    ms__preload_count_alloc_n(p, n);
  return p;
}

/* Nested inside a real operator (libstdc++'s nothrow new calls the
 * throwing one): pass through to the real one, uncounted. A tail call, so
 * a bad_alloc it throws does not even unwind through our frame. */
#define NEW_PASSTHROUGH(idx, call)                                             \
  do {                                                                         \
    if (__builtin_expect(ms__pl(&ms__tls)->guard, 0)) {                        \
      void *f_ = sym(idx);                                                     \
      if (f_)                                                                  \
        return call;                                                           \
    }                                                                          \
  } while (0)

void *_Znwm(size_t n) {
  NEW_PASSTHROUGH(NEW, ((new_fn)f_)(n));
  void *p = new_counted(NEW_NT, n, 0);
  return p ? p : new_failed(NEW, n, 0);
}

void *_Znam(size_t n) {
  NEW_PASSTHROUGH(NEW_A, ((new_fn)f_)(n));
  void *p = new_counted(NEW_A_NT, n, 0);
  return p ? p : new_failed(NEW_A, n, 0);
}

void *_ZnwmSt11align_val_t(size_t n, size_t al) {
  NEW_PASSTHROUGH(NEW_AL, ((new_al_fn)f_)(n, al));
  void *p = new_counted(NEW_AL_NT, n, al);
  return p ? p : new_failed(NEW_AL, n, al);
}

void *_ZnamSt11align_val_t(size_t n, size_t al) {
  NEW_PASSTHROUGH(NEW_A_AL, ((new_al_fn)f_)(n, al));
  void *p = new_counted(NEW_A_AL_NT, n, al);
  return p ? p : new_failed(NEW_A_AL, n, al);
}

void *_ZnwmRKSt9nothrow_t(size_t n, ms__nothrow_ref nt) {
  NEW_PASSTHROUGH(NEW_NT, ((new_nt_fn)f_)(n, nt));
  return new_counted(NEW_NT, n, 0);
}

void *_ZnamRKSt9nothrow_t(size_t n, ms__nothrow_ref nt) {
  NEW_PASSTHROUGH(NEW_A_NT, ((new_nt_fn)f_)(n, nt));
  return new_counted(NEW_A_NT, n, 0);
}

void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t n, size_t al,
                                         ms__nothrow_ref nt) {
  NEW_PASSTHROUGH(NEW_AL_NT, ((new_al_nt_fn)f_)(n, al, nt));
  return new_counted(NEW_AL_NT, n, al);
}

void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t n, size_t al,
                                         ms__nothrow_ref nt) {
  NEW_PASSTHROUGH(NEW_A_AL_NT, ((new_al_nt_fn)f_)(n, al, nt));
  return new_counted(NEW_A_AL_NT, n, al);
}

/* ---- operator delete ----------------------------------------------------*/

/* Counts the free (unless nested) with `count`, then calls the real
 * operator with the guard set. Without a runtime, the block came from
 * new_fallback: free. */
#define DELETE_COUNTED(idx, count, call)                                       \
  do {                                                                         \
    void *f_ = sym(idx);                                                       \
    if (!f_) {                                                                 \
      ms__preload_free(p);                                                     \
      return;                                                                  \
    }                                                                          \
    if (ms__pl(&ms__tls)->guard || !p) {                                       \
      call;                                                                    \
      return;                                                                  \
    }                                                                          \
    if (__builtin_expect(ms__bootstrap_owns(p), 0))                            \
      return;                                                                  \
    count;                                                                     \
    ms__pl(&ms__tls)->guard = 1;                                               \
    call;                                                                      \
    ms__pl(&ms__tls)->guard = 0;                                               \
  } while (0)
#define DELETE_BODY(idx, call)                                                 \
  DELETE_COUNTED(idx, ms__preload_count_free(p), call)

void _ZdlPv(void *p) {
  DELETE_BODY(DEL, ((del_fn)f_)(p));
}

void _ZdaPv(void *p) {
  DELETE_BODY(DEL_A, ((del_fn)f_)(p));
}

/* Sized: the size tells the usable size where the classes are known. */
void _ZdlPvm(void *p, size_t n) {
  DELETE_COUNTED(DEL_SZ, ms__preload_count_free_n(p, n), ((del_sz_fn)f_)(p, n));
}

void _ZdaPvm(void *p, size_t n) {
  DELETE_COUNTED(DEL_A_SZ, ms__preload_count_free_n(p, n),
                 ((del_sz_fn)f_)(p, n));
}

void _ZdlPvSt11align_val_t(void *p, size_t al) {
  DELETE_BODY(DEL_AL, ((del_sz_fn)f_)(p, al));
}

void _ZdaPvSt11align_val_t(void *p, size_t al) {
  DELETE_BODY(DEL_A_AL, ((del_sz_fn)f_)(p, al));
}

void _ZdlPvmSt11align_val_t(void *p, size_t n, size_t al) {
  DELETE_BODY(DEL_SZ_AL, ((del_sz_al_fn)f_)(p, n, al));
}

void _ZdaPvmSt11align_val_t(void *p, size_t n, size_t al) {
  DELETE_BODY(DEL_A_SZ_AL, ((del_sz_al_fn)f_)(p, n, al));
}

void _ZdlPvRKSt9nothrow_t(void *p, ms__nothrow_ref nt) {
  DELETE_BODY(DEL_NT, ((del_nt_fn)f_)(p, nt));
}

void _ZdaPvRKSt9nothrow_t(void *p, ms__nothrow_ref nt) {
  DELETE_BODY(DEL_A_NT, ((del_nt_fn)f_)(p, nt));
}

void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *p, size_t al,
                                         ms__nothrow_ref nt) {
  DELETE_BODY(DEL_AL_NT, ((del_al_nt_fn)f_)(p, al, nt));
}

void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *p, size_t al,
                                         ms__nothrow_ref nt) {
  DELETE_BODY(DEL_A_AL_NT, ((del_al_nt_fn)f_)(p, al, nt));
}
