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
 *
 * Where the next operators are the C++ runtime's own (libstdc++'s or
 * libc++'s), which allocate with malloc and free with free, the unaligned
 * ones go to this library's malloc and free directly (via_malloc): the
 * same blocks the runtime's operators would get from the same malloc,
 * counted once, without the guarded round trip through the runtime and
 * back into our malloc. Only a failed allocation takes the runtime's own
 * operator, for its new_handler loop and its std::bad_alloc.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

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

/* Nonzero when the next unaligned operators new and delete are the C++
 * runtime's (libstdc++'s or libc++'s), which are malloc and free with a
 * new_handler loop around malloc: set once by ms__preload_cxx_resolve,
 * from the constructor, and never cleared. */
static int via_malloc;
static void use_malloc(void);

/* What the operators load first: syms[i] when it is there and the plain
 * copy may run (the profiler off), else NULL, and the operator takes its
 * other path (looking up, falling back, or the profiling copy): with the
 * profiler off the operators test nothing more than they did before it. */
static void *plain[NSYMS];

/* The same for the profiling copy: syms[i] once it is there and the
 * profiler is on (which it never turns off), else NULL: the other path
 * then takes it without looking the operator up again nor the state. */
static void *prof_op[NSYMS];

/* Publishes a looked-up f to plain[i] unless the profiler is on. The
 * profiler is turned on by storing the state and then clearing plain[];
 * this stores plain[i] and then reads the state (both sequentially
 * consistent), so either it sees the profiler on and clears its own
 * store, or the clearing comes after its store. */
static void publish(int i, void *f) {
  if (f == MISSING || i == THROW_BAD_ALLOC || i == THROW_BAD_ALLOC_LIBCXX)
    return;
  __atomic_store_n(&plain[i], f, __ATOMIC_SEQ_CST);
  int st = __atomic_load_n(&ms__real_state, __ATOMIC_SEQ_CST);
  if (st == MS__REAL_PROF || st == MS__REAL_FORKED_PROF) {
    __atomic_store_n(&plain[i], NULL, __ATOMIC_SEQ_CST);
    __atomic_store_n(&prof_op[i], f, __ATOMIC_RELEASE);
  }
}

void ms__preload_cxx_profile_on(void) {
  for (int i = 0; i < NSYMS; i++) {
    __atomic_store_n(&plain[i], NULL, __ATOMIC_SEQ_CST);
    void *f = __atomic_load_n(&syms[i], __ATOMIC_ACQUIRE);
    if (f != NULL && f != MISSING && i != THROW_BAD_ALLOC &&
        i != THROW_BAD_ALLOC_LIBCXX)
      __atomic_store_n(&prof_op[i], f, __ATOMIC_RELEASE);
  }
}

/* Looks operator i up (see sym). */
static __attribute__((noinline)) void *sym_lookup(int i) {
  void *f = __atomic_load_n(&syms[i], __ATOMIC_ACQUIRE);
  if (f != NULL)
    return f;
  /* dlsym may call malloc: that is counted like any allocation (the guard
   * is not set here). Two threads racing store the same value. */
  if (!ms__preload_complete())
    ms__preload_resolve();
  if (i == THROW_BAD_ALLOC || i == THROW_BAD_ALLOC_LIBCXX)
    f = dlsym(RTLD_DEFAULT, sym_names[i]);
  else
    f = ms__preload_next(sym_names[i]);
  if (!f)
    f = MISSING;
  __atomic_store_n(&syms[i], f, __ATOMIC_RELEASE);
  publish(i, f);
  return f;
}

/* The real operator i, or NULL if no runtime defines it. */
static inline __attribute__((always_inline)) void *sym(int i) {
  void *f = __atomic_load_n(&syms[i], __ATOMIC_ACQUIRE);
  if (__builtin_expect(f == NULL, 0))
    f = sym_lookup(i);
  return f == MISSING ? NULL : f;
}

/* Whether f is defined by the C++ runtime (libstdc++ or libc++): its file
 * name. dladdr takes the loader lock but does not allocate. */
static int in_cxx_runtime(void *f) {
  Dl_info d;
  if (f == NULL || f == MISSING || !dladdr(f, &d) || d.dli_fname == NULL)
    return 0;
  const char *name = strrchr(d.dli_fname, '/');
  name = name ? name + 1 : d.dli_fname;
  return strncmp(name, "libstdc++.so", 12) == 0 ||
         strncmp(name, "libc++.so", 9) == 0;
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
                  : ms__preload_next(sym_names[i]);
    if (f) {
      __atomic_store_n(&syms[i], f, __ATOMIC_RELEASE);
      publish(i, f);
    } else if (i == NEW) {
      /* No C++ runtime is loaded (most of what a shell or make runs):
       * then none of the others is there either, and each failed dlsym
       * formats and allocates an error. Left for first use, as for a
       * runtime loaded later. */
      return;
    }
  }
  static const int unaligned[] = {NEW,   NEW_A,  NEW_NT,   NEW_A_NT, DEL,
                                  DEL_A, DEL_SZ, DEL_A_SZ, DEL_NT,   DEL_A_NT};
  int all = 1;
  for (size_t k = 0; k < sizeof unaligned / sizeof unaligned[0]; k++)
    all &=
        in_cxx_runtime(__atomic_load_n(&syms[unaligned[k]], __ATOMIC_ACQUIRE));
  if (all) {
    __atomic_store_n(&via_malloc, 1, __ATOMIC_RELEASE);
    use_malloc();
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

/* Calls the real nothrow operator f with the guard set, and counts its
 * block (prof: which copy, a constant). */
static inline __attribute__((always_inline)) void *
new_call(void *f, size_t n, size_t al, int prof) {
  void *p;
  ms__pl(&ms__tls)->guard = 1;
  if (al)
    p = ((new_al_nt_fn)f)(n, al, &nothrow_tag);
  else
    p = ((new_nt_fn)f)(n, &nothrow_tag);
  ms__pl(&ms__tls)->guard = 0;
  if (al)
    ms__preload_count_alloc(p, prof);
  else
    ms__preload_count_alloc_n(p, n, prof);
  return p;
}

/* No plain copy to run: the operator is looked up, missing (fallback), or
 * the profiler is on. One function for each of the four nothrow operators
 * (nt_index a constant in it), out of the operator: with the profiling
 * copy inline, the operator's plain copy paid for the registers it saves
 * (clang: 10 instructions a new/delete pair, test_hotpath_cost). */
static inline __attribute__((always_inline)) void *
new_other(int nt_index, size_t n, size_t al) {
  void *f = __atomic_load_n(&prof_op[nt_index], __ATOMIC_ACQUIRE);
  if (__builtin_expect(f != NULL, 1))
    return new_call(f, n, al, 1);
  f = sym(nt_index);
  if (__builtin_expect(!f, 0))
    return new_fallback(n, al);
  return MS__PL_COPIES(__builtin_expect(ms__preload_profiling(), 1), new_call,
                       f, n, al);
}
typedef void *(*new_other_fn)(size_t, size_t);
#define NEW_OTHER(idx)                                                         \
  static __attribute__((noinline)) void *other_##idx(size_t n, size_t al) {    \
    return new_other(idx, n, al);                                              \
  }
NEW_OTHER(NEW_NT)
NEW_OTHER(NEW_A_NT)
NEW_OTHER(NEW_AL_NT)
NEW_OTHER(NEW_A_AL_NT)

/* The nothrow path every operator new goes through. */
static inline __attribute__((always_inline)) void *
new_counted(int nt_index, new_other_fn other, size_t n, size_t al) {
  void *f = __atomic_load_n(&plain[nt_index], __ATOMIC_ACQUIRE);
  if (__builtin_expect(!f, 0))
    return other(n, al);
  return new_call(f, n, al, 0);
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

static __attribute__((noinline)) void *next_Znwm(size_t n) {
  NEW_PASSTHROUGH(NEW, ((new_fn)f_)(n));
  void *p = new_counted(NEW_NT, other_NEW_NT, n, 0);
  return p ? p : new_failed(NEW, n, 0);
}

static __attribute__((noinline)) void *next_Znam(size_t n) {
  NEW_PASSTHROUGH(NEW_A, ((new_fn)f_)(n));
  void *p = new_counted(NEW_A_NT, other_NEW_A_NT, n, 0);
  return p ? p : new_failed(NEW_A, n, 0);
}

void *_ZnwmSt11align_val_t(size_t n, size_t al) {
  NEW_PASSTHROUGH(NEW_AL, ((new_al_fn)f_)(n, al));
  void *p = new_counted(NEW_AL_NT, other_NEW_AL_NT, n, al);
  return p ? p : new_failed(NEW_AL, n, al);
}

void *_ZnamSt11align_val_t(size_t n, size_t al) {
  NEW_PASSTHROUGH(NEW_A_AL, ((new_al_fn)f_)(n, al));
  void *p = new_counted(NEW_A_AL_NT, other_NEW_A_AL_NT, n, al);
  return p ? p : new_failed(NEW_A_AL, n, al);
}

static __attribute__((noinline)) void *
next_ZnwmRKSt9nothrow_t(size_t n, ms__nothrow_ref nt) {
  NEW_PASSTHROUGH(NEW_NT, ((new_nt_fn)f_)(n, nt));
  return new_counted(NEW_NT, other_NEW_NT, n, 0);
}

static __attribute__((noinline)) void *
next_ZnamRKSt9nothrow_t(size_t n, ms__nothrow_ref nt) {
  NEW_PASSTHROUGH(NEW_A_NT, ((new_nt_fn)f_)(n, nt));
  return new_counted(NEW_A_NT, other_NEW_A_NT, n, 0);
}

void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t n, size_t al,
                                         ms__nothrow_ref nt) {
  NEW_PASSTHROUGH(NEW_AL_NT, ((new_al_nt_fn)f_)(n, al, nt));
  return new_counted(NEW_AL_NT, other_NEW_AL_NT, n, al);
}

void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t n, size_t al,
                                         ms__nothrow_ref nt) {
  NEW_PASSTHROUGH(NEW_A_AL_NT, ((new_al_nt_fn)f_)(n, al, nt));
  return new_counted(NEW_A_AL_NT, other_NEW_A_AL_NT, n, al);
}

/* ---- operator delete ----------------------------------------------------*/

/* Calls the real delete operator f of index idx (a constant but in
 * delete_other) with its own arguments. */
static inline __attribute__((always_inline)) void
del_call(int idx, void *f, void *p, size_t n, size_t al, ms__nothrow_ref nt) {
  switch (idx) {
  case DEL:
  case DEL_A:
    ((del_fn)f)(p);
    break;
  case DEL_SZ:
  case DEL_A_SZ:
    ((del_sz_fn)f)(p, n);
    break;
  case DEL_AL:
  case DEL_A_AL:
    ((del_sz_fn)f)(p, al);
    break;
  case DEL_SZ_AL:
  case DEL_A_SZ_AL:
    ((del_sz_al_fn)f)(p, n, al);
    break;
  case DEL_NT:
  case DEL_A_NT:
    ((del_nt_fn)f)(p, nt);
    break;
  default: /* DEL_AL_NT, DEL_A_AL_NT */
    ((del_al_nt_fn)f)(p, al, nt);
    break;
  }
}

/* Counts the free (unless nested), then calls the real operator with the
 * guard set. A sized delete without alignment is counted by its size. */
static inline __attribute__((always_inline)) void
delete_in(int idx, void *f, void *p, size_t n, size_t al, ms__nothrow_ref nt,
          int prof) {
  if (ms__pl(&ms__tls)->guard || !p) {
    del_call(idx, f, p, n, al, nt);
    return;
  }
  if (__builtin_expect(ms__bootstrap_owns(p), 0))
    return;
  if (idx == DEL_SZ || idx == DEL_A_SZ)
    ms__preload_count_free_n(p, n, prof);
  else
    ms__preload_count_free(p, prof);
  ms__pl(&ms__tls)->guard = 1;
  del_call(idx, f, p, n, al, nt);
  ms__pl(&ms__tls)->guard = 0;
}

/* No plain copy to run (see new_other). Without a runtime, the block came
 * from new_fallback: free. */
static inline __attribute__((always_inline)) void
delete_other(int idx, void *p, size_t n, size_t al, ms__nothrow_ref nt) {
  void *f = __atomic_load_n(&prof_op[idx], __ATOMIC_ACQUIRE);
  if (__builtin_expect(f != NULL, 1)) {
    delete_in(idx, f, p, n, al, nt, 1);
    return;
  }
  f = sym(idx);
  if (__builtin_expect(!f, 0))
    ms__preload_free(p);
  else
    MS__PL_COPIES(__builtin_expect(ms__preload_profiling(), 1), delete_in, idx,
                  f, p, n, al, nt);
}

/* One function each (idx a constant in it), so that the profiling copy
 * is out of the operator: inline, its registers would be saved on every
 * call of the plain copy too (4 instructions a delete: callgrind). */
typedef void (*delete_other_fn)(void *, size_t, size_t, ms__nothrow_ref);
#define DELETE_OTHER(idx)                                                      \
  static __attribute__((noinline)) void other_##idx(                           \
      void *p, size_t n, size_t al, ms__nothrow_ref nt) {                      \
    delete_other(idx, p, n, al, nt);                                           \
  }
DELETE_OTHER(DEL)
DELETE_OTHER(DEL_A)
DELETE_OTHER(DEL_SZ)
DELETE_OTHER(DEL_A_SZ)
DELETE_OTHER(DEL_AL)
DELETE_OTHER(DEL_A_AL)
DELETE_OTHER(DEL_SZ_AL)
DELETE_OTHER(DEL_A_SZ_AL)
DELETE_OTHER(DEL_NT)
DELETE_OTHER(DEL_A_NT)
DELETE_OTHER(DEL_AL_NT)
DELETE_OTHER(DEL_A_AL_NT)

static inline __attribute__((always_inline)) void
delete_op(int idx, delete_other_fn other, void *p, size_t n, size_t al,
          ms__nothrow_ref nt) {
  void *f = __atomic_load_n(&plain[idx], __ATOMIC_ACQUIRE);
  if (__builtin_expect(!f, 0))
    other(p, n, al, nt);
  else
    delete_in(idx, f, p, n, al, nt, 0);
}

static __attribute__((noinline)) void next_ZdlPv(void *p) {
  delete_op(DEL, other_DEL, p, 0, 0, NULL);
}

static __attribute__((noinline)) void next_ZdaPv(void *p) {
  delete_op(DEL_A, other_DEL_A, p, 0, 0, NULL);
}

/* Sized: the size tells the usable size where the classes are known. */
static __attribute__((noinline)) void next_ZdlPvm(void *p, size_t n) {
  delete_op(DEL_SZ, other_DEL_SZ, p, n, 0, NULL);
}

static __attribute__((noinline)) void next_ZdaPvm(void *p, size_t n) {
  delete_op(DEL_A_SZ, other_DEL_A_SZ, p, n, 0, NULL);
}

void _ZdlPvSt11align_val_t(void *p, size_t al) {
  delete_op(DEL_AL, other_DEL_AL, p, 0, al, NULL);
}

void _ZdaPvSt11align_val_t(void *p, size_t al) {
  delete_op(DEL_A_AL, other_DEL_A_AL, p, 0, al, NULL);
}

void _ZdlPvmSt11align_val_t(void *p, size_t n, size_t al) {
  delete_op(DEL_SZ_AL, other_DEL_SZ_AL, p, n, al, NULL);
}

void _ZdaPvmSt11align_val_t(void *p, size_t n, size_t al) {
  delete_op(DEL_A_SZ_AL, other_DEL_A_SZ_AL, p, n, al, NULL);
}

static __attribute__((noinline)) void
next_ZdlPvRKSt9nothrow_t(void *p, ms__nothrow_ref nt) {
  delete_op(DEL_NT, other_DEL_NT, p, 0, 0, nt);
}

static __attribute__((noinline)) void
next_ZdaPvRKSt9nothrow_t(void *p, ms__nothrow_ref nt) {
  delete_op(DEL_A_NT, other_DEL_A_NT, p, 0, 0, nt);
}

void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *p, size_t al,
                                         ms__nothrow_ref nt) {
  delete_op(DEL_AL_NT, other_DEL_AL_NT, p, 0, al, nt);
}

void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *p, size_t al,
                                         ms__nothrow_ref nt) {
  delete_op(DEL_A_AL_NT, other_DEL_A_AL_NT, p, 0, al, nt);
}

/* ---- the unaligned operators on the C++ runtime --------------------------
 * Each unaligned operator is an indirect tail call of what impl_<name>
 * holds: next_<name> above (the operator on any runtime), or via_<name>
 * once use_malloc has found the runtime's own operators next (via_malloc):
 * the runtime's operator new is malloc(n ? n : 1) with a new_handler loop
 * around it, its delete free(p), so our malloc and free serve them,
 * guard and all, and only a failed malloc goes on to next_<name> (the
 * runtime's handler loop, its std::bad_alloc). One load and a jump either
 * way: the other runtimes' operators pay no test for this one's. */
#define CXX_NEW_VIA_MALLOC(name, params, args)                                 \
  static __attribute__((noinline)) void *via##name params {                    \
    void *p = ms__preload_malloc(n + (n == 0));                                \
    if (__builtin_expect(p != NULL, 1))                                        \
      return p;                                                                \
    return next##name args;                                                    \
  }                                                                            \
  static void *(*impl##name)params = next##name;                               \
  void *name params {                                                          \
    return __atomic_load_n(&impl##name, __ATOMIC_RELAXED) args;                \
  }
/* (Its other arguments are named, never read: free needs p only.) */
#define CXX_DELETE_VIA_MALLOC(name, params, args)                              \
  static __attribute__((noinline)) void via##name params {                     \
    (void)(0 && (next##name args, 0));                                         \
    ms__preload_free(p);                                                       \
  }                                                                            \
  static void(*impl##name) params = next##name;                                \
  void name params {                                                           \
    __atomic_load_n(&impl##name, __ATOMIC_RELAXED) args;                       \
  }

CXX_NEW_VIA_MALLOC(_Znwm, (size_t n), (n))
CXX_NEW_VIA_MALLOC(_Znam, (size_t n), (n))
CXX_NEW_VIA_MALLOC(_ZnwmRKSt9nothrow_t, (size_t n, ms__nothrow_ref nt), (n, nt))
CXX_NEW_VIA_MALLOC(_ZnamRKSt9nothrow_t, (size_t n, ms__nothrow_ref nt), (n, nt))
CXX_DELETE_VIA_MALLOC(_ZdlPv, (void *p), (p))
CXX_DELETE_VIA_MALLOC(_ZdaPv, (void *p), (p))
CXX_DELETE_VIA_MALLOC(_ZdlPvm, (void *p, size_t n), (p, n))
CXX_DELETE_VIA_MALLOC(_ZdaPvm, (void *p, size_t n), (p, n))
CXX_DELETE_VIA_MALLOC(_ZdlPvRKSt9nothrow_t, (void *p, ms__nothrow_ref nt),
                      (p, nt))
CXX_DELETE_VIA_MALLOC(_ZdaPvRKSt9nothrow_t, (void *p, ms__nothrow_ref nt),
                      (p, nt))

static void use_malloc(void) {
  __atomic_store_n(&impl_Znwm, via_Znwm, __ATOMIC_RELAXED);
  __atomic_store_n(&impl_Znam, via_Znam, __ATOMIC_RELAXED);
  __atomic_store_n(&impl_ZnwmRKSt9nothrow_t, via_ZnwmRKSt9nothrow_t,
                   __ATOMIC_RELAXED);
  __atomic_store_n(&impl_ZnamRKSt9nothrow_t, via_ZnamRKSt9nothrow_t,
                   __ATOMIC_RELAXED);
  __atomic_store_n(&impl_ZdlPv, via_ZdlPv, __ATOMIC_RELAXED);
  __atomic_store_n(&impl_ZdaPv, via_ZdaPv, __ATOMIC_RELAXED);
  __atomic_store_n(&impl_ZdlPvm, via_ZdlPvm, __ATOMIC_RELAXED);
  __atomic_store_n(&impl_ZdaPvm, via_ZdaPvm, __ATOMIC_RELAXED);
  __atomic_store_n(&impl_ZdlPvRKSt9nothrow_t, via_ZdlPvRKSt9nothrow_t,
                   __ATOMIC_RELAXED);
  __atomic_store_n(&impl_ZdaPvRKSt9nothrow_t, via_ZdaPvRKSt9nothrow_t,
                   __ATOMIC_RELAXED);
}
