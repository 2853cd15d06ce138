/*
 * self.c - what libmemstats itself holds in the program's process, so that
 * it is reported as its own figure (MemstatsSelf) instead of as the
 * program's memory: the agent thread's stack, the mappings the library
 * makes through the preload's mmap (the agent's buffers, the engine's
 * shards, a profile's encoding), and its own data and bss. The profile
 * table is mapped with the raw system call and is BuckHashSys, Go's class
 * for it.
 *
 * The agent's stack is told apart by the thread's descriptor: glibc (and
 * musl) place it inside the thread's stack mapping, and pthread_t is its
 * address. The library's own object by the address of a function of its
 * own (dladdr), once.
 */
#include <dlfcn.h>
#include <link.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>

#include "core/self.h"
#include "core/util.h"

static uintptr_t g_thread;

/* Both the creator (when pthread_create returns) and the new thread (at
 * its first step) set it, to the same value: the second finds it set and
 * writes nothing. The thread's first step may come after the creator has
 * forked (a loaded machine, or one CPU), and a write then is a copy of
 * this page in the parent, and the child's copy counted as its own
 * (test_preload test_fork_child_copies_one_page: 2 pages, in 85% of runs
 * with the program on one CPU). */
void ms__self_set_thread(uintptr_t thread) {
  if (__atomic_load_n(&g_thread, __ATOMIC_ACQUIRE) != thread)
    __atomic_store_n(&g_thread, thread, __ATOMIC_RELEASE);
}

int ms__self_stack(uintptr_t start, uintptr_t end) {
  uintptr_t t = __atomic_load_n(&g_thread, __ATOMIC_ACQUIRE);
  return t != 0 && start <= t && t < end;
}

/* The base of this library's object, looked up once (0: not found, or
 * the library is linked into the program itself, whose mappings and data
 * it cannot tell from its own). */
static const void *own_base(void) {
  static const void *base;
  static int done;
  if (!__atomic_load_n(&done, __ATOMIC_ACQUIRE)) {
    Dl_info di, main_di;
    const void *b = NULL;
    unsigned long entry = getauxval(AT_ENTRY);
    if (dladdr((const void *)&own_base, &di) && di.dli_fbase &&
        !(entry && dladdr((const void *)entry, &main_di) &&
          main_di.dli_fbase == di.dli_fbase))
      b = di.dli_fbase;
    __atomic_store_n(&base, b, __ATOMIC_RELAXED);
    __atomic_store_n(&done, 1, __ATOMIC_RELEASE);
  }
  return __atomic_load_n(&base, __ATOMIC_RELAXED);
}

int ms__self_object(const void *base) {
  return base != NULL && base == own_base();
}

/* The writable PT_LOAD segments of this library's object, found once. */
#define MS__SELF_SEGS 4
static struct {
  int done, n;
  uintptr_t start[MS__SELF_SEGS], end[MS__SELF_SEGS];
} g_segs;

static int find_segs(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  (void)arg;
  /* Only a shared object of its own (libmemstats.so, the preload): linked
   * statically, the library's data are the program's and cannot be told
   * apart. */
  uintptr_t base = (uintptr_t)own_base();
  if (base == 0 || !info->dlpi_name || !info->dlpi_name[0])
    return 0;
  int mine = 0;
  for (int i = 0; i < info->dlpi_phnum && !mine; i++)
    if (info->dlpi_phdr[i].p_type == PT_LOAD &&
        info->dlpi_phdr[i].p_offset == 0 &&
        info->dlpi_addr + info->dlpi_phdr[i].p_vaddr == base)
      mine = 1;
  if (!mine)
    return 0;
  uintptr_t ps = ms__page_size();
  for (int i = 0; i < info->dlpi_phnum && g_segs.n < MS__SELF_SEGS; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_W))
      continue;
    uintptr_t s = (info->dlpi_addr + ph->p_vaddr) & ~(ps - 1);
    uintptr_t e =
        (info->dlpi_addr + ph->p_vaddr + ph->p_memsz + ps - 1) & ~(ps - 1);
    g_segs.start[g_segs.n] = s;
    g_segs.end[g_segs.n] = e;
    g_segs.n++;
  }
  return 1;
}

uint64_t ms__self_static(uint64_t *mapped) {
  *mapped = 0;
  if (!g_segs.done) {
    dl_iterate_phdr(find_segs, NULL);
    g_segs.done = 1;
  }
  uint64_t res = 0;
  for (int k = 0; k < g_segs.n; k++) {
    uint64_t m;
    res += ms__resident(g_segs.start[k], g_segs.end[k], &m);
    *mapped += m;
  }
  return res;
}
