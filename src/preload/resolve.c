/*
 * resolve.c - finding the next allocator, and the bootstrap buffer.
 *
 * The next malloc is looked up with dlsym(RTLD_NEXT) on the first call that
 * needs it, not in a constructor: other libraries' constructors (and the
 * dynamic loader itself) call malloc before ours runs. dlsym may itself
 * call malloc or calloc (for its error state); those nested calls, and any
 * other thread's calls during the lookup, are served from a static buffer,
 * so nothing ever waits for the lookup and nothing recurses into it.
 */
#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "preload/preload.h"

ms__real_t ms__real;
/* Read by every allocation, written by the fork child handler (the state
 * FORKED): in the fork section (core/engine.h), on a cache line of its
 * own. */
int ms__real_state MS__FORK_DATA __attribute__((aligned(64)));
uint64_t ms__free_gate = MS__GATE_NOT_READY | MS__GATE_NOT_GLIBC;

/* Set on the thread that is inside dlsym, so its nested calls go to the
 * bootstrap buffer. */
static __thread int tls_resolving __attribute__((tls_model("initial-exec")));

/* When the next allocator has no malloc_usable_size (no known one lacks
 * it), blocks are still counted as objects, with zero bytes; the engine is
 * then not told that it has exact object figures. */
static size_t no_usable_size(void *p) {
  (void)p;
  return 0;
}

/* gperftools' malloc_usable_size (tc_malloc_size) asks
 * MallocExtension::instance(), which is a default object answering 0 for
 * every block until tcmalloc's own constructor has registered its
 * implementation; and libstdc++'s constructors, which run before
 * tcmalloc's, already allocate. Blocks counted then as 0 bytes would be
 * freed later as their real size. So tcmalloc's blocks are measured by
 * the registered implementation's function itself, which is exported and
 * does not depend on the registration: TCMallocImplementation::
 * GetAllocatedSize(const void *), a member function that reads only its
 * argument (the pagemap and the size-class table, set up by the first
 * tcmalloc call, i.e. before any block exists). It is called as the
 * Itanium ABI calls a member function, `this` first; the object passed is
 * zeroed static memory, large enough for the class's few fields. The debug
 * variant (libtcmalloc_debug) puts a header in front of blocks and
 * registers another implementation: there, malloc_usable_size is kept. */
typedef size_t (*tc_size_fn)(const void *self, const void *p);
static tc_size_fn tc_allocated_size;
static const uint64_t tc_self[16];

static size_t tc_usable(void *p) {
  return tc_allocated_size(tc_self, p);
}

/* The base address of the loaded object that holds addr (dladdr's
 * dli_fbase, the link map's l_map_start), or NULL. Neither call
 * allocates. _dl_find_object (glibc 2.35) looks the address up in a
 * sorted table, without a lock; dladdr, the fallback (older glibc, or an
 * address it does not know), takes the loader lock and also searches the
 * object's whole symbol table for the nearest symbol: for libc, tens of
 * thousands of instructions a call, which with the lookups below made
 * two thirds of the instructions of a preloaded /bin/true. */
static void *object_base(void *addr) {
#if defined(DLFO_STRUCT_HAS_EH_DBASE)
  struct dl_find_object fo;
  if (_dl_find_object(addr, &fo) == 0)
    return fo.dlfo_map_start;
#endif
  Dl_info fi;
  return dladdr(addr, &fi) ? fi.dli_fbase : NULL;
}

/* 1 once the library, loaded late, has been told to track (attach.c):
 * the next definitions are then looked up as the loader bound the
 * program, not by RTLD_NEXT (ms__preload_next). */
static int g_late_next;

/* Whether p is the start of a symbol a module defines: not an
 * executable's PLT stub, which an executable that takes a function's
 * address makes its canonical address (dladdr knows defined symbols
 * only), and not one of this library's. */
static int real_definition(void *p) {
  Dl_info d, self;
  if (!p || !dladdr(p, &d) || d.dli_saddr != p)
    return 0;
  return !dladdr((void *)real_definition, &self) ||
         self.dli_fbase != d.dli_fbase;
}

void *ms__preload_next(const char *name) {
  if (!__atomic_load_n(&g_late_next, __ATOMIC_ACQUIRE))
    return dlsym(RTLD_NEXT, name);
  /* The global scope's definition, which every module was bound to; if
   * that is the executable's PLT stub, the first module in load order
   * that defines the name (the one the stub's own entry holds). */
  void *prog = dlopen(NULL, RTLD_NOW);
  if (!prog)
    return NULL;
  void *f = dlsym(prog, name);
  struct link_map *lm = NULL;
  if (!real_definition(f)) {
    f = NULL;
    if (dlinfo(prog, RTLD_DI_LINKMAP, &lm) == 0 && lm)
      lm = lm->l_next;
    for (; lm && !f; lm = lm->l_next) {
      if (!lm->l_name || !lm->l_name[0])
        continue;
      void *h = dlopen(lm->l_name, RTLD_NOLOAD | RTLD_LAZY);
      if (!h)
        continue;
      void *g = dlsym(h, name);
      if (real_definition(g))
        f = g;
      dlclose(h);
    }
  }
  dlclose(prog);
  return f;
}

static int resolve_with(int probe);

int ms__preload_resolve_late(void) {
  __atomic_store_n(&g_late_next, 1, __ATOMIC_RELEASE);
  int st = __atomic_load_n(&ms__real_state, __ATOMIC_ACQUIRE);
  if (st >= MS__REAL_FORKED) /* READY, PROF or forked */
    return 0;                /* a second attach: as the first left it */
  if (st != MS__REAL_NONE)
    return MS_EAGAIN;
  int r = resolve_with(0);
  if (r != 1)
    return MS_ENOENT;
  ms__preload_size_init();
  ms__preload_cxx_resolve();
  return 0;
}

static void keep_if_same_object(void *base, void **fn) {
  if (*fn && object_base(*fn) != base)
    *fn = NULL;
}

/* Whether the object at base (the next malloc's) defines name. */
static int object_defines(void *base, const char *name) {
  void *f = ms__preload_next(name);
  keep_if_same_object(base, &f);
  return f != NULL;
}

/* Whether the next malloc is one whose malloc_usable_size never allocates:
 * glibc's (only libc defines gnu_get_libc_version; tcmalloc and mimalloc
 * also define __libc_malloc), jemalloc's (mallctl) or mimalloc's
 * (mi_malloc). Each only reads the block's metadata. Anything else, a
 * debugging malloc included, is asked with the guard set. Runs while the
 * state is RESOLVING: what dlsym allocates for a missing name comes from
 * the bootstrap buffer. */
static int usable_is_plain(void *base) {
  return object_defines(base, "gnu_get_libc_version") ||
         object_defines(base, "mallctl") || object_defines(base, "mi_malloc");
}

/* Whether the program's malloc (the global scope's first definition,
 * def_malloc) is this library's. It is not when an allocator was preloaded
 * ahead of us (LD_PRELOAD="libjemalloc.so.2:libmemstats-preload.so") or
 * the program defines it itself (linked with a static allocator): our
 * malloc is then never called, and counting nothing would show zeros as
 * exact figures over the allocator's own. The allocator's provider then
 * gives the heap figures, and the snapshot says why tracking is off
 * (ms__track_off).
 *
 * Comparing addresses is not enough: an executable that takes malloc's
 * address (python3) makes its PLT stub the canonical address, so dlsym
 * names the executable whoever defines malloc. So a probe goes through the
 * program's own lookup: called on this thread while it resolves, our
 * malloc serves it from the bootstrap buffer (freeing that is a no-op);
 * another allocator's block is given back to that allocator's free. */
static int calls_reach_us(void *(*def_malloc)(size_t),
                          void (*def_free)(void *)) {
  if (!def_malloc)
    return 1; /* cannot tell: as before */
  void *probe = def_malloc(16);
  if (!probe || ms__bootstrap_owns(probe))
    return 1;
  if (def_free)
    def_free(probe);
  Dl_info d;
  memset(&d, 0, sizeof d);
  const char *name = NULL;
  if (dladdr(*(void **)&def_malloc, &d) && d.dli_fname) {
    name = strrchr(d.dli_fname, '/');
    name = name ? name + 1 : d.dli_fname;
  }
  if (!name || !name[0])
    name = "the program";
  char why[MS_NAME_MAX];
  snprintf(why, sizeof why, "malloc from %s", name);
  ms__track_off(why);
  ms__debug("preload: not tracking: the program's malloc is not ours (%s)",
            why);
  return 0;
}

static int resolve_with(int probe) {
  int st = __atomic_load_n(&ms__real_state, __ATOMIC_ACQUIRE);
  if (st >= MS__REAL_FORKED) /* READY, PROF or forked */
    return 1;
  if (st != MS__REAL_NONE || tls_resolving)
    return 0;
  int expect = MS__REAL_NONE;
  if (!__atomic_compare_exchange_n(&ms__real_state, &expect, MS__REAL_RESOLVING,
                                   0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    return 0;
  tls_resolving = 1;
  ms__real_t r;
  memset(&r, 0, sizeof r);
  /* Casting void * to a function pointer is what dlsym's interface asks. */
  *(void **)&r.malloc = ms__preload_next("malloc");
  *(void **)&r.free = ms__preload_next("free");
  *(void **)&r.calloc = ms__preload_next("calloc");
  *(void **)&r.realloc = ms__preload_next("realloc");
  *(void **)&r.posix_memalign = ms__preload_next("posix_memalign");
  *(void **)&r.aligned_alloc = ms__preload_next("aligned_alloc");
  *(void **)&r.memalign = ms__preload_next("memalign");
  *(void **)&r.valloc = ms__preload_next("valloc");
  *(void **)&r.pvalloc = ms__preload_next("pvalloc");
  *(void **)&r.usable = ms__preload_next("malloc_usable_size");
  void *tc_size =
      ms__preload_next("_ZN22TCMallocImplementation16GetAllocatedSizeEPKv");
  void *tc_debug =
      tc_size ? ms__preload_next(
                    "_ZN25DebugMallocImplementation16GetAllocatedSizeEPKv")
              : NULL;
  /* Whether the malloc the program calls is this one (calls_reach_us),
   * probed while this thread's calls still go to the bootstrap buffer. */
  void *(*def_malloc)(size_t);
  void (*def_free)(void *);
  *(void **)&def_malloc = dlsym(RTLD_DEFAULT, "malloc");
  *(void **)&def_free = dlsym(RTLD_DEFAULT, "free");
  /* Loaded late (attach --track), the program's malloc is the one
   * these entries held, which the GOT now sends here: nothing to probe. */
  int reach_us = probe ? calls_reach_us(def_malloc, def_free) : 1;
  tls_resolving = 0;
  if (!r.malloc || !r.free || !r.calloc || !r.realloc || !r.posix_memalign) {
    /* A static program or a broken search order: nothing to forward to.
     * The bootstrap buffer serves until it runs out. */
    __atomic_store_n(&ms__real_state, MS__REAL_FAILED, __ATOMIC_RELEASE);
    return 0;
  }
  /* An optional entry point from another object than malloc (jemalloc
   * has no pvalloc, so RTLD_NEXT finds glibc's) would hand out blocks that
   * the next free cannot take back: emulate it on posix_memalign instead. */
  void *base = object_base(*(void **)&r.malloc);
  if (base != NULL) {
    keep_if_same_object(base, (void **)&r.aligned_alloc);
    keep_if_same_object(base, (void **)&r.memalign);
    keep_if_same_object(base, (void **)&r.valloc);
    keep_if_same_object(base, (void **)&r.pvalloc);
    /* tcmalloc's own size function, when malloc is tcmalloc's (see
     * tc_usable). */
    keep_if_same_object(base, &tc_size);
    if (tc_size && !tc_debug) {
      *(void **)&tc_allocated_size = tc_size;
      r.usable = tc_usable;
    }
  }
  int exact = r.usable != NULL;
  if (!exact)
    r.usable = no_usable_size;
  /* tcmalloc's own size function reads only its pagemap (tc_usable): no
   * guard needed either. */
  r.usable_kind =
      exact && (r.usable == tc_usable || (base && usable_is_plain(base)))
          ? MS__USABLE_CALL
          : MS__USABLE_GUARDED;
  r.is_glibc = base && object_defines(base, "gnu_get_libc_version");
  ms__real = r;
  __atomic_store_n(&ms__real_state, MS__REAL_READY, __ATOMIC_RELEASE);
  __atomic_fetch_and(&ms__free_gate, ~(uint64_t)MS__GATE_NOT_READY,
                     __ATOMIC_RELEASE);
  ms__malloc_gate_change(0, MS__MGATE_NOT_READY);
  if (exact && reach_us && probe)
    ms__track_enable();
  return exact ? 1 : 2;
}

int ms__preload_resolve(void) {
  return resolve_with(1) != 0;
}

/* ---- sizes by request ---------------------------------------------------*/

size_t ms__preload_by_request_max;
int ms__preload_mi_min_shift;
uint16_t ms__preload_req_table[MS__REQ_TABLE_MAX / 8 + 1];

/* The largest size checked: beyond it blocks are asked (they are rare, and
 * the allocator's large classes could follow another rule). */
#define BY_REQUEST_LIMIT MS__BY_REQUEST_JE_MAX

/* Run once by the constructor, once the next allocator is known and has
 * been used. A class step function f (nallocx) that agrees with
 * ms__class_round at every class size c and at c + 1 agrees everywhere in
 * between, since both are non-decreasing and equal at both ends of each
 * class. A few real blocks are asked too, malloc(0) among them. */
/* glibc: blocks are measured by their chunk header (ms__glibc_usable)
 * instead of a call into malloc_usable_size, once real blocks of every
 * kind (small, aligned, mmapped) have been seen to give glibc's own
 * answer. The probes go straight to glibc, uncounted. None of them moves
 * glibc's dynamic mmap threshold: the small ones are below it, and the
 * mmapped one is above the largest threshold glibc ever sets (32 MiB), so
 * it is mmapped whatever the program did and freeing it changes nothing. */
static void glibc_header_init(void) {
  if (__atomic_load_n(&ms__real.usable_kind, __ATOMIC_RELAXED) !=
      MS__USABLE_CALL)
    return;
  static const struct {
    size_t align, size;
  } probe[] = {{0, 0},
               {0, 1},
               {0, 24},
               {0, 25},
               {0, 100},
               {0, 1000},
               {0, 5000},
               {0, 70000},
               {64, 100},
               {4096, 5000},
               {0, (size_t)40 << 20}};
  int mmapped = 0;
  for (size_t i = 0; i < sizeof probe / sizeof probe[0]; i++) {
    void *p = NULL;
    if (!probe[i].align)
      p = ms__real.malloc(probe[i].size);
    else if (ms__real.posix_memalign(&p, probe[i].align, probe[i].size) != 0)
      p = NULL;
    if (!p)
      return;
    size_t want = ms__real.usable(p);
    size_t got = ms__glibc_usable(p);
    mmapped |= (((const size_t *)p)[-1] & 2) != 0;
    ms__real.free(p);
    if (got != want)
      return;
  }
  /* The mmapped branch was checked too (mmap may be turned off). */
  if (mmapped) {
    __atomic_store_n(&ms__real.usable_kind, MS__USABLE_GLIBC, __ATOMIC_RELAXED);
    /* free's gate says so from now on (after the kind: a free that finds
     * the bit clear may measure by the header without reading it). */
    __atomic_fetch_and(&ms__free_gate, ~(uint64_t)MS__GATE_NOT_GLIBC,
                       __ATOMIC_RELEASE);
    ms__malloc_gate_change(0, MS__MGATE_NOT_GLIBC);
  }
}

/* Not READY nor PROF: looks the next allocator up, then says which copy
 * runs (preload.h). */
MS__FORK_TEXT int ms__preload_mode_slow(void) {
  /* A fork child's allocations come here until its agent starts: the
   * allocator is known (the state was READY or PROF at the fork), and
   * the resolver, out of the fork section, is not even called (a page of
   * text the child would fault in). */
  int st = __atomic_load_n(&ms__real_state, __ATOMIC_ACQUIRE);
  if (MS__REAL_IS_FORKED(st))
    return ms__preload_forked(st);
  if (!ms__preload_resolve())
    return MS__PL_BOOT;
  st = __atomic_load_n(&ms__real_state, __ATOMIC_ACQUIRE);
  if (MS__REAL_IS_FORKED(st))
    return ms__preload_forked(st);
  return ms__preload_profiling() ? MS__PL_PROF : MS__PL_PLAIN;
}

/* READY to PROF, once. A thread that tested READY just before runs its
 * plain copy to the end: it records nothing for the profiler, and no block
 * it frees can be a sampled one (sampling starts after this store, and a
 * block reaches another thread only by a synchronisation that orders this
 * store before that thread's test of the state). */
/* On an allocator that counts what it frees (jemalloc), a sampled block
 * live sends free to free_by_counter's plain copy past one read of the
 * profile's filter (MS__GATE_LIVE_BC, malloc.c), without the bootstrap
 * buffer's test: the buffer is closed (no block from it after this; one
 * could come only to a thread that read the state before the lookup
 * ended, and it gets NULL, as from a full buffer) and the blocks it gave
 * out are pinned in the filter, before the first sample can make the
 * table. */
void ms__preload_profile_on(void) {
  uint64_t bit = MS__GATE_LIVE_OTHER;
  if (ms__preload_glibc_kind()) {
    bit = MS__GATE_LIVE; /* NOT_GLIBC is clear: glibc_header_init */
  } else if (__atomic_load_n(&ms__real_state, __ATOMIC_ACQUIRE) ==
                 MS__REAL_READY &&
             ms__preload_by_counter()) {
    ms__prof_pin(ms__boot_buf, ms__bootstrap_close());
    bit = MS__GATE_LIVE_BC;
  }
  int expect = MS__REAL_READY;
  if (__atomic_compare_exchange_n(&ms__real_state, &expect, MS__REAL_PROF, 0,
                                  __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
    ms__prof_set_gate(&ms__free_gate, bit);
    ms__malloc_gate_change(MS__MGATE_PROF, 0);
    ms__preload_cxx_profile_on();
  }
}

/* ---- a profiling copy's rare paths (preload.h) ---------------------------*/

void ms__preload_alloc_sampled(ms__tls_t *t, void *p, uint64_t size) {
  ms__track_alloc_in(t, size);
  ms__prof_sampled(t, p, size);
}

void ms__preload_mapped_prof(ms__tls_t *t, void *p, ms__glibc_block_t b,
                             int is_free) {
  if (is_free && p != NULL)
    ms__preload_unsample(p, 1);
  ms__track_mapped(b.usable, b.mapped, is_free);
  if (!is_free)
    ms__preload_sample(t, p, b.usable, 1);
}

/* ---- jemalloc's per-thread counter of freed bytes (preload.h) -----------*/

uint64_t *ms__preload_je_counter(ms__tls_t *t) {
  uint64_t *d = NULL;
  size_t sz = sizeof d;
  ms__pl(t)->guard = 1; /* whatever mallctl allocates passes through */
  int r = ms__real.mallctl("thread.deallocatedp", &d, &sz, NULL, 0);
  ms__pl(t)->guard = 0;
  ms__pl(t)->je_freed = r == 0 && d ? d : MS__JE_UNUSABLE;
  return ms__pl(t)->je_freed;
}

/* Measured by its usable size, not by the counter: a handler interrupting
 * this one would move the counter in between. */
void ms__preload_je_free_nested(ms__tls_t *t, void *p) {
  uint64_t size = ms__preload_usable(t, p);
  int prof = ms__preload_profiling();
  ms__preload_unsample(p, prof);
  ms__real.free(p);
  ms__preload_record(t, NULL, size, 1, prof);
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  ms__pl(t)->je_nested += size;
}

/* Turns the counter on if freeing real blocks of several sizes moves it by
 * exactly what malloc_usable_size says, on this thread (the constructor's).
 * The probes go straight to jemalloc, uncounted. */
static void je_counter_init(void *base) {
  void *fn = ms__preload_next("mallctl");
  keep_if_same_object(base, &fn);
  if (!fn)
    return;
  *(void **)&ms__real.mallctl = fn;
  ms__tls_t *t = &ms__tls;
  uint64_t *d = ms__preload_je_counter(t);
  if (d == MS__JE_UNUSABLE) {
    ms__debug("preload: no thread.deallocatedp: frees measured one by one");
    return;
  }
  /* Small classes, and one large one (above jemalloc's 14 KiB small
   * classes: an extent of its own). Nothing of megabytes: a freed extent
   * stays mapped and counted resident as dirty pages until the program's
   * own allocations make jemalloc purge (it has no background thread by
   * default), so a 3 MiB probe left the program 3.3 MB more mapped and
   * resident for as long as it stayed quiet. */
  static const size_t probe[] = {1, 8, 17, 100, 1000, 5000, 20000, 100000};
  for (size_t i = 0; i < sizeof probe / sizeof probe[0]; i++) {
    void *p = ms__real.malloc(probe[i]);
    if (!p)
      return;
    size_t u = ms__real.usable(p);
    uint64_t before = __atomic_load_n(d, __ATOMIC_RELAXED);
    ms__real.free(p);
    uint64_t moved = __atomic_load_n(d, __ATOMIC_RELAXED) - before;
    if (moved != u) {
      ms__debug("preload: freeing a %zu-byte block moved thread.deallocated "
                "by %llu: frees measured one by one",
                u, (unsigned long long)moved);
      return;
    }
  }
  __atomic_store_n(&ms__real.free_by_counter, 1, __ATOMIC_RELAXED);
  ms__debug("preload: frees measured by the allocator's thread.deallocated");
}

size_t ms__request_round_other(size_t n) {
  return ms__mi_class_round(
      n, __atomic_load_n(&ms__preload_mi_min_shift, __ATOMIC_RELAXED));
}

/* The usable size of a real block of n bytes from the next allocator
 * (straight to it, uncounted), or 0 if it gave none (no real block's is:
 * 0 matches no class). */
static size_t real_usable(size_t n) {
  void *p = ms__real.malloc(n);
  if (!p)
    return 0;
  size_t u = ms__real.usable(p);
  ms__real.free(p);
  return u;
}

/* mimalloc: its bins up to MI_BY_REQUEST_LIMIT (well inside its small and
 * medium objects; past them blocks are page-rounded, and asked), checked
 * against its mi_good_size at every bin and one past, and on real blocks,
 * as jemalloc's are against nallocx below. The probes go straight to
 * mimalloc, uncounted. */
#define MI_BY_REQUEST_LIMIT ((size_t)64 << 10)

/* Whether mi_good_size agrees with ms__mi_class_round(., min_shift) at
 * every bin and one past it up to the limit (both are non-decreasing step
 * functions: agreeing there, they agree everywhere in between), and real
 * blocks of some sizes have that usable size. */
static int mi_classes_match(size_t (*good)(size_t), int min_shift) {
  if (good(0) != 8 || good(1) != 8)
    return 0;
  for (size_t c = 8; c < MI_BY_REQUEST_LIMIT;
       c = ms__mi_class_round(c + 1, min_shift))
    if (good(c) != c || good(c + 1) != ms__mi_class_round(c + 1, min_shift))
      return 0;
  static const size_t probe[] = {0,   1,   8,    9,    17,   24,    64,   65,
                                 100, 129, 1000, 4096, 5000, 20000, 65536};
  for (size_t i = 0; i < sizeof probe / sizeof probe[0]; i++)
    if (real_usable(probe[i]) != ms__mi_class_round(probe[i], min_shift))
      return 0;
  return 1;
}

static void mi_classes_init(void *base) {
  void *fn = ms__preload_next("mi_good_size");
  keep_if_same_object(base, &fn);
  if (!fn)
    return;
  size_t (*good)(size_t);
  *(void **)&good = fn;
  int min_shift = good(9) == 16 && good(17) == 24 ? 0 : 1;
  if (!mi_classes_match(good, min_shift))
    return;
  for (size_t k = 0; k <= MS__REQ_TABLE_MAX / 8; k++)
    ms__preload_req_table[k] = (uint16_t)ms__mi_class_round(k * 8, min_shift);
  __atomic_store_n(&ms__preload_mi_min_shift, min_shift, __ATOMIC_RELAXED);
  __atomic_store_n(&ms__preload_by_request_max, MI_BY_REQUEST_LIMIT,
                   __ATOMIC_RELEASE);
  ms__debug("preload: mallocs measured by the allocator's size classes");
}

/* jemalloc's classes: nallocx agrees with ms__class_round at every class
 * and one past it, and real blocks have those sizes. */
static int je_classes_match(size_t (*nallocx)(size_t, int)) {
  if (nallocx(1, 0) != 8)
    return 0;
  for (size_t c = 8; c < BY_REQUEST_LIMIT; c = ms__class_round(c + 1))
    if (nallocx(c, 0) != c || nallocx(c + 1, 0) != ms__class_round(c + 1))
      return 0;
  static const size_t probe[] = {0,   1,    8,    9,    24,    100,   128,
                                 129, 1000, 4096, 5000, 20000, 70000, 300000};
  for (size_t i = 0; i < sizeof probe / sizeof probe[0]; i++)
    if (real_usable(probe[i]) != ms__class_round(probe[i]))
      return 0;
  return 1;
}

/* Any other allocator with a nallocx (tcmalloc): its classes up to
 * MS__REQ_TABLE_MAX read into a table by 8-byte steps, kept only if
 * nallocx gives the table's answer for every size up to there (its class
 * boundaries are multiples of 8) and real blocks of every 8th size have
 * that usable size. */
static int table_classes_init(size_t (*nallocx)(size_t, int)) {
  for (size_t k = 0; k <= MS__REQ_TABLE_MAX / 8; k++) {
    size_t u = nallocx(k * 8, 0);
    if (u < k * 8 || u > UINT16_MAX)
      return 0;
    ms__preload_req_table[k] = (uint16_t)u;
  }
  for (size_t n = 0; n <= MS__REQ_TABLE_MAX; n++)
    if (nallocx(n, 0) != ms__preload_req_table[(n + 7) >> 3])
      return 0;
  for (size_t n = 1; n <= MS__REQ_TABLE_MAX; n += 8)
    if (real_usable(n) != ms__preload_req_table[(n + 7) >> 3])
      return 0;
  return 1;
}

void ms__preload_size_init(void) {
  if (!ms__preload_complete() || ms__real.usable == no_usable_size)
    return;
  if (ms__real.is_glibc) {
    glibc_header_init();
    return;
  }
  size_t (*nallocx)(size_t, int);
  *(void **)&nallocx = ms__preload_next("nallocx");
  void *base = object_base(*(void **)&ms__real.malloc);
  if (base == NULL)
    return;
  if (!nallocx) {
    if (__atomic_load_n(&ms__real.usable_kind, __ATOMIC_RELAXED) ==
        MS__USABLE_CALL)
      mi_classes_init(base);
    return;
  }
  if (__atomic_load_n(&ms__real.usable_kind, __ATOMIC_RELAXED) ==
      MS__USABLE_CALL)
    je_counter_init(base);
  void *fn = *(void **)&nallocx;
  keep_if_same_object(base, &fn);
  if (!fn)
    return;
  if (je_classes_match(nallocx)) {
    for (size_t k = 0; k <= MS__REQ_TABLE_MAX / 8; k++)
      ms__preload_req_table[k] = (uint16_t)ms__class_round(k * 8);
    __atomic_store_n(&ms__preload_by_request_max, BY_REQUEST_LIMIT,
                     __ATOMIC_RELEASE);
    ms__debug("preload: mallocs measured by the allocator's size classes");
  } else if (ms__real.usable == tc_usable && table_classes_init(nallocx)) {
    __atomic_store_n(&ms__preload_by_request_max, MS__REQ_TABLE_MAX,
                     __ATOMIC_RELEASE);
    ms__debug("preload: mallocs measured by the allocator's size classes");
  }
}

/* ---- the bootstrap buffer --------------------------------------------------
 * Every block is preceded by a 16-byte header holding its size, so realloc
 * and malloc_usable_size work on it. 64 KiB is far more than dlsym needs
 * (a few hundred bytes for its error state). The size is kept as a glibc
 * chunk header that says "a mapped chunk of (size + 1) * 8 bytes" (the
 * word before it zero): free's fast path on glibc reads that header
 * before it asks whether the block is a bootstrap one, and a mapped chunk
 * sends it to the slow path (malloc.c, free_glibc_in), which asks. */
#define BOOT_SIZE MS__BOOT_SIZE
#define BOOT_HDR 16

unsigned char ms__boot_buf[BOOT_SIZE] __attribute__((aligned(64)));
static size_t boot_used;
static int boot_closed; /* ms__bootstrap_close */

void *ms__bootstrap_alloc(size_t size, size_t align) {
  if (align < BOOT_HDR)
    align = BOOT_HDR;
  if (align > 4096 || (align & (align - 1)) || size > BOOT_SIZE)
    return NULL;
  size_t need = BOOT_HDR + size + align;
  size_t start = __atomic_fetch_add(&boot_used, need, __ATOMIC_SEQ_CST);
  if (start + need > BOOT_SIZE || start + need < start)
    return NULL;
  /* After ms__bootstrap_close, no block: either this load sees the close,
   * or the close's load of boot_used sees this block's room (both
   * sequentially consistent), and the block is among those it pinned. */
  if (__atomic_load_n(&boot_closed, __ATOMIC_SEQ_CST))
    return NULL;
  uintptr_t base = (uintptr_t)ms__boot_buf + start + BOOT_HDR;
  uintptr_t p = (base + align - 1) & ~(uintptr_t)(align - 1);
  size_t h = ((size + 1) << 3) | 2; /* IS_MMAPPED, never 0 bytes */
  memcpy((void *)(p - sizeof(size_t)), &h, sizeof h);
  /* The buffer is static (zeroed) and never reused, so the block is
   * zeroed too: calloc needs nothing more. */
  return (void *)p;
}

size_t ms__bootstrap_close(void) {
  __atomic_store_n(&boot_closed, 1, __ATOMIC_SEQ_CST);
  size_t used = __atomic_load_n(&boot_used, __ATOMIC_SEQ_CST);
  return used < BOOT_SIZE ? used : BOOT_SIZE;
}

size_t ms__bootstrap_size(const void *p) {
  size_t h;
  memcpy(&h, (const unsigned char *)p - sizeof(size_t), sizeof h);
  return (h >> 3) - 1;
}
