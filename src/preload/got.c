/*
 * got.c - memtop attach --track: the program's calls to the malloc family
 * sent to this library by rewriting the modules' GOT entries, and put back.
 *
 * Loaded late (attach.c), the library's malloc is nobody's: every call
 * site is bound already. ms__got_hook() walks the loaded modules
 * (dl_iterate_phdr), reads each one's PT_DYNAMIC (DT_JMPREL/DT_PLTRELSZ:
 * JUMP_SLOT; DT_RELA/DT_RELASZ: GLOB_DAT, x86-64's and aarch64's:
 * got_reloc.h), names each relocation's symbol from .dynsym, and points
 * the entries of the malloc
 * family, of every C++ operator new/delete and of dlopen at this
 * library's functions. The interposers forward to the allocator the
 * entries held (ms__preload_resolve_late, resolve.c), so nothing recurses.
 * A page of PT_GNU_RELRO (the whole GOT under BIND_NOW) is made writable
 * for the write only, and read-only again.
 *
 * Which modules: all but this library and the dynamic loader (whose
 * allocations go to libc's malloc through pointers of its own, not its
 * GOT), the C library included: its own callers (strdup, getline, fopen,
 * qsort...) then count as they do under LD_PRELOAD, so a block one of
 * them made and the program frees is seen at both ends.
 *
 * Modules loaded later: dlopen's entries point at ms__got_dlopen, which
 * calls the real dlopen and then walks the modules again (an entry that
 * holds this library's function already is left alone). dlopen looks at
 * its return address: a name without a '/' is searched along the
 * caller's RUNPATH, "$ORIGIN" is the caller's directory, and the caller's
 * namespace is the new module's. So ms__got_dlopen is a stub that calls
 * the real dlopen itself only for a path with a '/' and no '$', and
 * otherwise jumps to it (the caller's return address untouched): such a
 * module is rewritten at the next dlopen by path, not at once. (A module
 * of a dlmopen namespace other than the first opening a path through
 * this stub would load it into the first: not handled.)
 *
 * Every rewrite is kept in a table (slot, value before, value written);
 * ms__got_restore() writes the old values back where the slot still holds
 * ours and its module is still loaded (one unloaded since is skipped, its
 * memory gone). Both walks run inside dl_iterate_phdr's callback, under
 * the loader's lock, which also orders them against each other and
 * against dlclose.
 *
 * Not reached: function pointers copied before the attach (a table the
 * program filled with &malloc), R_X86_64_64 or R_AARCH64_ABS64
 * relocations naming malloc in data, calls inside a module bound without
 * the GOT (a static allocator,
 * -fvisibility protected), and a lazy JUMP_SLOT the loader resolves in
 * the very instant it is rewritten (its resolver writes the slot last).
 */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "memstats.h"
#include "preload/got_reloc.h"
#include "preload/preload.h"

#define HAVE_GOT (MS__GOT_MACHINE != 0)

/* The names rewritten. The last is dlopen, sent to ms__got_dlopen. */
static const char *const hooked[] = {"malloc",
                                     "free",
                                     "calloc",
                                     "realloc",
                                     "reallocarray",
                                     "posix_memalign",
                                     "aligned_alloc",
                                     "memalign",
                                     "valloc",
                                     "pvalloc",
                                     "malloc_usable_size",
                                     "_Znwm",
                                     "_Znam",
                                     "_ZnwmSt11align_val_t",
                                     "_ZnamSt11align_val_t",
                                     "_ZnwmRKSt9nothrow_t",
                                     "_ZnamRKSt9nothrow_t",
                                     "_ZnwmSt11align_val_tRKSt9nothrow_t",
                                     "_ZnamSt11align_val_tRKSt9nothrow_t",
                                     "_ZdlPv",
                                     "_ZdaPv",
                                     "_ZdlPvm",
                                     "_ZdaPvm",
                                     "_ZdlPvSt11align_val_t",
                                     "_ZdaPvSt11align_val_t",
                                     "_ZdlPvmSt11align_val_t",
                                     "_ZdaPvmSt11align_val_t",
                                     "_ZdlPvRKSt9nothrow_t",
                                     "_ZdaPvRKSt9nothrow_t",
                                     "_ZdlPvSt11align_val_tRKSt9nothrow_t",
                                     "_ZdaPvSt11align_val_tRKSt9nothrow_t",
                                     "dlopen"};
#define NHOOKED (sizeof hooked / sizeof hooked[0])

/* This library's function for each name (NULL: not defined here). */
static void *g_mine[NHOOKED];

typedef struct entry_s {
  void **slot;
  void *old, *mine;
} entry_t;

/* Room for 32 names in a few hundred modules; past it, no more rewrites
 * (MEMSTATS_DEBUG says so) and what is rewritten is still restored. */
#define MAX_ENTRIES 8192
static entry_t g_table[MAX_ENTRIES];
static size_t g_n;
/* 1 between ms__got_hook and ms__got_restore: read and written under the
 * loader's lock (in the callbacks), and by the dlopen hook outside it. */
static int g_active;
/* The real dlopen, which dlopen's entries held. */
static void *(*g_dlopen)(const char *, int);

static int g_rewritten; /* slots written by the last walk (tests, debug) */

void *ms__got_dlopen(const char *file, int mode);

/* Whether addr lies in one of the module's loaded segments. */
static int in_module(const struct dl_phdr_info *info, uintptr_t addr) {
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD)
      continue;
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
    if (addr >= lo && addr - lo < ph->p_memsz)
      return 1;
  }
  return 0;
}

/* Writes v into slot, making a RELRO page writable around the write.
 * Returns 0, or mprotect's -errno. */
static int write_slot(const struct dl_phdr_info *info, void **slot, void *v) {
  long ps = sysconf(_SC_PAGESIZE);
  uintptr_t a = (uintptr_t)slot;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_GNU_RELRO)
      continue;
    uintptr_t lo = (info->dlpi_addr + ph->p_vaddr) & ~(uintptr_t)(ps - 1);
    uintptr_t hi = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
    /* The loader rounds RELRO's end down: the last partial page stays
     * writable. */
    hi &= ~(uintptr_t)(ps - 1);
    if (a < lo || a >= hi)
      continue;
    void *page = (void *)(a & ~(uintptr_t)(ps - 1));
    if (mprotect(page, (size_t)ps, PROT_READ | PROT_WRITE) != 0)
      return -errno;
    __atomic_store_n(slot, v, __ATOMIC_RELEASE);
    mprotect(page, (size_t)ps, PROT_READ);
    return 0;
  }
  __atomic_store_n(slot, v, __ATOMIC_RELEASE);
  return 0;
}

/* A dynamic entry's address: glibc has relocated most d_ptr in place, the
 * vDSO's are not. */
static uintptr_t dyn_ptr(const struct dl_phdr_info *info, uintptr_t p) {
  return p < info->dlpi_addr ? p + info->dlpi_addr : p;
}

static int skip_module(const struct dl_phdr_info *info) {
  if (in_module(info, (uintptr_t)(void *)ms__got_dlopen))
    return 1; /* this library */
  const char *n = info->dlpi_name ? info->dlpi_name : "";
  return strstr(n, "/ld-linux") != NULL || strstr(n, "linux-vdso") != NULL ||
         strncmp(n, "ld-linux", 8) == 0;
}

static void hook_relocs(const struct dl_phdr_info *info, const ElfW(Rela) * r,
                        size_t n, const ElfW(Sym) * symtab, const char *strtab,
                        size_t strsz) {
#if HAVE_GOT
  for (size_t i = 0; i < n; i++) {
    unsigned type = (unsigned)ELF64_R_TYPE(r[i].r_info);
    if (!ms__got_slot_reloc(MS__GOT_MACHINE, type))
      continue;
    size_t si = (size_t)ELF64_R_SYM(r[i].r_info);
    if (si == 0 || symtab[si].st_name >= strsz)
      continue;
    const char *name = strtab + symtab[si].st_name;
    for (size_t k = 0; k < NHOOKED; k++) {
      if (!g_mine[k] || strcmp(name, hooked[k]) != 0)
        continue;
      void **slot = (void **)(info->dlpi_addr + r[i].r_offset);
      void *old = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
      if (old == g_mine[k])
        break;
      if (g_n >= MAX_ENTRIES) {
        ms__debug("attach --track: the table of rewritten entries is full");
        return;
      }
      if (write_slot(info, slot, g_mine[k]) != 0)
        break;
      g_table[g_n].slot = slot;
      g_table[g_n].old = old;
      g_table[g_n++].mine = g_mine[k];
      g_rewritten++;
      break;
    }
  }
#else
  (void)info, (void)r, (void)n, (void)symtab, (void)strtab, (void)strsz;
#endif
}

static int hook_module(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  (void)arg;
  if (!__atomic_load_n(&g_active, __ATOMIC_ACQUIRE) || skip_module(info))
    return 0;
  const ElfW(Dyn) *dyn = NULL;
  for (int i = 0; i < info->dlpi_phnum; i++)
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
      dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
  if (!dyn)
    return 0;
  uintptr_t symtab = 0, strtab = 0, jmprel = 0, rela = 0;
  size_t strsz = 0, pltrelsz = 0, relasz = 0;
  long pltrel = DT_RELA;
  for (; dyn->d_tag != DT_NULL; dyn++) {
    switch (dyn->d_tag) {
    case DT_SYMTAB:
      symtab = dyn_ptr(info, dyn->d_un.d_ptr);
      break;
    case DT_STRTAB:
      strtab = dyn_ptr(info, dyn->d_un.d_ptr);
      break;
    case DT_STRSZ:
      strsz = dyn->d_un.d_val;
      break;
    case DT_JMPREL:
      jmprel = dyn_ptr(info, dyn->d_un.d_ptr);
      break;
    case DT_PLTRELSZ:
      pltrelsz = dyn->d_un.d_val;
      break;
    case DT_PLTREL:
      pltrel = (long)dyn->d_un.d_val;
      break;
    case DT_RELA:
      rela = dyn_ptr(info, dyn->d_un.d_ptr);
      break;
    case DT_RELASZ:
      relasz = dyn->d_un.d_val;
      break;
    default:
      break;
    }
  }
  if (!symtab || !strtab)
    return 0;
  const ElfW(Sym) *sy = (const ElfW(Sym) *)symtab;
  const char *st = (const char *)strtab;
  if (jmprel && pltrel == DT_RELA)
    hook_relocs(info, (const ElfW(Rela) *)jmprel, pltrelsz / sizeof(ElfW(Rela)),
                sy, st, strsz);
  if (rela)
    hook_relocs(info, (const ElfW(Rela) *)rela, relasz / sizeof(ElfW(Rela)), sy,
                st, strsz);
  return 0;
}

static int restore_module(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  (void)arg;
  for (size_t i = 0; i < g_n; i++) {
    entry_t *e = &g_table[i];
    if (!e->slot || !in_module(info, (uintptr_t)e->slot))
      continue;
    if (__atomic_load_n(e->slot, __ATOMIC_ACQUIRE) == e->mine &&
        write_slot(info, e->slot, e->old) == 0)
      g_rewritten++;
    e->slot = NULL;
  }
  return 0;
}

/* The real dlopen, then the modules it loaded are rewritten too: for a
 * path, whose caller does not matter (see the head of this file). */
void *ms__got_dlopen_path(const char *file, int mode);
void *ms__got_dlopen_path(const char *file, int mode) {
  void *h = g_dlopen(file, mode);
  if (h && __atomic_load_n(&g_active, __ATOMIC_ACQUIRE))
    dl_iterate_phdr(hook_module, NULL);
  return h;
}

/* Where ms__got_dlopen goes for file: ms__got_dlopen_path, or the real
 * dlopen when the caller's identity matters. */
void *ms__got_dlopen_where(const char *file);
void *ms__got_dlopen_where(const char *file) {
  if (file && strchr(file, '/') && !strchr(file, '$'))
    return (void *)ms__got_dlopen_path;
  return (void *)g_dlopen;
}

#if defined(__x86_64__)
/* The stub dlopen's entries point at: the arguments kept, the choice
 * made, and a jump (not a call) to it, so that the real dlopen sees the
 * program's return address. */
__asm__(".text\n"
        ".globl ms__got_dlopen\n"
        ".hidden ms__got_dlopen\n"
        ".type ms__got_dlopen, @function\n"
        "ms__got_dlopen:\n"
        "  endbr64\n"
        "  push %rdi\n"
        "  push %rsi\n"
        "  sub $8, %rsp\n"
        "  call ms__got_dlopen_where\n"
        "  add $8, %rsp\n"
        "  pop %rsi\n"
        "  pop %rdi\n"
        "  jmp *%rax\n"
        ".size ms__got_dlopen, .-ms__got_dlopen\n");
#elif defined(__aarch64__)
/* The same on aarch64: the program's return address is in x30, put back
 * before the jump. A BTI landing pad first (a hint, a no-op where there
 * is no BTI), and the jump through x16, which a callee's own landing pad
 * (bti c, paciasp) accepts. */
__asm__(".text\n"
        ".globl ms__got_dlopen\n"
        ".hidden ms__got_dlopen\n"
        ".type ms__got_dlopen, %function\n"
        "ms__got_dlopen:\n"
        "  hint #34\n"
        "  stp x29, x30, [sp, #-32]!\n"
        "  mov x29, sp\n"
        "  stp x0, x1, [sp, #16]\n"
        "  bl ms__got_dlopen_where\n"
        "  mov x16, x0\n"
        "  ldp x0, x1, [sp, #16]\n"
        "  ldp x29, x30, [sp], #32\n"
        "  br x16\n"
        ".size ms__got_dlopen, .-ms__got_dlopen\n");
#else
void *ms__got_dlopen(const char *file, int mode) {
  return ms__got_dlopen_path(file, mode);
}
#endif

int ms__got_hook(void) {
  if (!HAVE_GOT)
    return MS_ENOSYS;
  if (!g_dlopen) {
    *(void **)&g_dlopen = ms__preload_next("dlopen");
    if (!g_dlopen)
      return MS_ENOSYS;
  }
  /* This library's own functions, by its own handle (a reference from
   * here would be bound to the global scope's, libc's). */
  Dl_info di;
  if (!dladdr((void *)ms__got_dlopen, &di) || !di.dli_fname)
    return MS_ENOENT;
  void *self = dlopen(di.dli_fname, RTLD_NOLOAD | RTLD_NOW);
  if (!self)
    return MS_ENOENT;
  for (size_t k = 0; k + 1 < NHOOKED; k++) {
    void *f = dlsym(self, hooked[k]);
    Dl_info fi;
    g_mine[k] = f && dladdr(f, &fi) && fi.dli_fbase == di.dli_fbase ? f : NULL;
  }
  g_mine[NHOOKED - 1] = (void *)ms__got_dlopen;
  dlclose(self);
  g_rewritten = 0;
  __atomic_store_n(&g_active, 1, __ATOMIC_RELEASE);
  dl_iterate_phdr(hook_module, NULL);
  ms__debug("attach --track: %d GOT entries rewritten", g_rewritten);
  return g_rewritten;
}

int ms__got_restore(void) {
  __atomic_store_n(&g_active, 0, __ATOMIC_RELEASE);
  g_rewritten = 0;
  dl_iterate_phdr(restore_module, NULL);
  int n = g_rewritten;
  g_n = 0;
  ms__debug("attach --track: %d GOT entries restored", n);
  return n;
}
