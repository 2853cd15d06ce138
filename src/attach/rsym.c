/*
 * rsym.c - another process's objects and their dynamic symbols, read from
 * its memory (see rsym.h).
 */
#include "attach/rsym.h"

#include <elf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "attach/arch.h"
#include "memstats.h"

/* Bounds on what a process's memory may make us read. */
#define MAX_SYMS 200000
#define MAX_STRSZ (8u << 20)
#define MAX_DYN 1024
#define MAX_PHDR 64

static int rd(pid_t pid, uint64_t addr, void *buf, size_t len) {
  struct iovec local = {buf, len}, remote = {(void *)(uintptr_t)addr, len};
  ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
  if (n == (ssize_t)len)
    return 0;
  return n < 0 && (errno == EPERM || errno == EACCES) ? MS_EACCES : MS_EPROTO;
}

static const char *base_name(const char *p) {
  const char *s = strrchr(p, '/');
  return s ? s + 1 : p;
}

/* Which of the objects a maps path is (by its file name), or NULL. */
static mt_robj_t *which(mt_rmaps_t *m, const char *path) {
  const char *b = base_name(path);
  if (strncmp(b, "libc.so", 7) == 0 || strncmp(b, "libc-2.", 7) == 0)
    return &m->libc;
  if (strncmp(b, "ld-linux", 8) == 0 ||
      (strncmp(b, "ld-", 3) == 0 && strstr(b, ".so") != NULL))
    return &m->ld;
  if (strncmp(b, "libdl.so", 8) == 0 || strncmp(b, "libdl-", 6) == 0)
    return &m->libdl;
  if (strncmp(b, "libmemstats", 11) == 0)
    return &m->memstats;
  return NULL;
}

int mt_rsym_maps(pid_t pid, mt_rmaps_t *out) {
  char path[64];
  memset(out, 0, sizeof *out);
  snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
  FILE *f = fopen(path, "re");
  if (!f)
    return errno == EACCES || errno == EPERM ? MS_EACCES : MS_ESRCH;
  char line[MT_RSYM_PATH_MAX + 128];
  while (fgets(line, sizeof line, f)) {
    unsigned long long lo, hi, off;
    char perms[8];
    int at = 0;
    if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %n", &lo, &hi, perms, &off,
               &at) != 4 ||
        at <= 0)
      continue;
    char *p = line + at;
    p[strcspn(p, "\n")] = '\0';
    if (p[0] != '/')
      continue;
    mt_robj_t *o = which(out, p);
    if (!o)
      continue;
    if (!o->found) {
      if (off != 0)
        continue; /* its first line maps offset 0 */
      o->found = 1;
      o->base = lo;
      snprintf(o->path, sizeof o->path, "%s", p);
    } else if (strcmp(o->path, p) != 0)
      continue; /* a second object of the same name */
    if (perms[2] == 'x') {
      if (o->text_lo == 0 || lo < o->text_lo)
        o->text_lo = lo;
      if (hi > o->text_hi)
        o->text_hi = hi;
    }
  }
  fclose(f);
  return 0;
}

/* An address of the dynamic section: glibc relocates some in place (adds
 * the load base); others keep the link-time value. */
static uint64_t dyn_addr(uint64_t base, uint64_t v) {
  return v < base ? v + base : v;
}

/* The number of symbols from the GNU hash table: one past the highest
 * index of any chain. Returns 0 if it cannot be read. */
static size_t gnu_hash_count(pid_t pid, uint64_t gh) {
  uint32_t h[4];
  if (rd(pid, gh, h, sizeof h) != 0 || h[0] == 0 || h[0] > MAX_SYMS ||
      h[2] > (1u << 20))
    return 0;
  uint32_t nb = h[0], symoff = h[1];
  uint64_t buckets = gh + 16 + (uint64_t)h[2] * 8;
  uint32_t *b = malloc((size_t)nb * 4);
  if (!b)
    return 0;
  uint32_t last = 0;
  if (rd(pid, buckets, b, (size_t)nb * 4) == 0)
    for (uint32_t i = 0; i < nb; i++)
      if (b[i] > last)
        last = b[i];
  free(b);
  if (last < symoff)
    return symoff;
  uint64_t chain = buckets + (uint64_t)nb * 4;
  for (uint32_t i = last; i < MAX_SYMS; i++) {
    uint32_t c;
    if (rd(pid, chain + (uint64_t)(i - symoff) * 4, &c, 4) != 0)
      return 0;
    if (c & 1)
      return (size_t)i + 1;
  }
  return 0;
}

int mt_rsym_load(pid_t pid, uint64_t base, mt_rsyms_t *out) {
  memset(out, 0, sizeof *out);
  out->base = base;
  Elf64_Ehdr eh;
  int r = rd(pid, base, &eh, sizeof eh);
  if (r != 0)
    return r;
  if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0 ||
      eh.e_phnum > MAX_PHDR)
    return MS_EPROTO;
#if defined(MT_ARCH_HOST)
  /* Code for another processor (a program qemu-user runs, whose maps
   * show its own C library): never one to call into with our registers. */
  if (eh.e_machine != MT_ARCH_HOST->machine)
    return MS_EPROTO;
#endif
  Elf64_Phdr ph[MAX_PHDR];
  if ((r = rd(pid, base + eh.e_phoff, ph, eh.e_phnum * sizeof ph[0])) != 0)
    return r;
  uint64_t dyn = 0, dynsz = 0;
  for (int i = 0; i < eh.e_phnum; i++)
    if (ph[i].p_type == PT_DYNAMIC) {
      dyn = base + ph[i].p_vaddr;
      dynsz = ph[i].p_memsz;
    }
  if (!dyn || dynsz / sizeof(Elf64_Dyn) == 0)
    return MS_EPROTO;
  size_t nd = dynsz / sizeof(Elf64_Dyn);
  if (nd > MAX_DYN)
    nd = MAX_DYN;
  Elf64_Dyn *d = calloc(nd, sizeof *d);
  if (!d)
    return MS_ENOMEM;
  if ((r = rd(pid, dyn, d, nd * sizeof *d)) != 0) {
    free(d);
    return r;
  }
  uint64_t symtab = 0, strtab = 0, strsz = 0, hash = 0, gnuhash = 0;
  for (size_t i = 0; i < nd && d[i].d_tag != DT_NULL; i++) {
    switch (d[i].d_tag) {
    case DT_SYMTAB:
      symtab = dyn_addr(base, d[i].d_un.d_ptr);
      break;
    case DT_STRTAB:
      strtab = dyn_addr(base, d[i].d_un.d_ptr);
      break;
    case DT_STRSZ:
      strsz = d[i].d_un.d_val;
      break;
    case DT_HASH:
      hash = dyn_addr(base, d[i].d_un.d_ptr);
      break;
    case DT_GNU_HASH:
      gnuhash = dyn_addr(base, d[i].d_un.d_ptr);
      break;
    default:
      break;
    }
  }
  free(d);
  if (!symtab || !strtab || strsz == 0 || strsz > MAX_STRSZ)
    return MS_EPROTO;
  size_t nsym = 0;
  if (hash) {
    uint32_t h[2];
    if (rd(pid, hash, h, sizeof h) == 0)
      nsym = h[1];
  }
  if (nsym == 0 && gnuhash)
    nsym = gnu_hash_count(pid, gnuhash);
  if (nsym == 0 || nsym > MAX_SYMS)
    return MS_EPROTO;
  out->sym = malloc(nsym * sizeof(Elf64_Sym));
  out->str = malloc(strsz + 1);
  if (!out->sym || !out->str) {
    mt_rsym_free(out);
    return MS_ENOMEM;
  }
  if ((r = rd(pid, symtab, out->sym, nsym * sizeof(Elf64_Sym))) != 0 ||
      (r = rd(pid, strtab, out->str, strsz)) != 0) {
    mt_rsym_free(out);
    return r;
  }
  out->str[strsz] = '\0';
  out->nsym = nsym;
  out->strsz = strsz;
  return 0;
}

void mt_rsym_free(mt_rsyms_t *s) {
  free(s->sym);
  free(s->str);
  s->sym = NULL;
  s->str = NULL;
  s->nsym = 0;
}

static const Elf64_Sym *sym_at(const mt_rsyms_t *s, size_t i) {
  return (const Elf64_Sym *)(const void *)s->sym + i;
}

static const char *name_of(const mt_rsyms_t *s, const Elf64_Sym *y) {
  return y->st_name < s->strsz ? s->str + y->st_name : "";
}

static int defined(const Elf64_Sym *y) {
  return y->st_shndx != SHN_UNDEF && y->st_value != 0;
}

uint64_t mt_rsym_find(const mt_rsyms_t *s, const char *name) {
  for (size_t i = 0; i < s->nsym; i++) {
    const Elf64_Sym *y = sym_at(s, i);
    int t = ELF64_ST_TYPE(y->st_info);
    if (defined(y) &&
        (t == STT_FUNC || t == STT_OBJECT || t == STT_GNU_IFUNC) &&
        strcmp(name_of(s, y), name) == 0)
      return s->base + y->st_value;
  }
  return 0;
}

static int named(const char *n, const char *const *names) {
  for (; *names; names++)
    if (strcmp(n, *names) == 0)
      return 1;
  return 0;
}

int mt_rsym_around(const mt_rsyms_t *s, const char *const *names, uint64_t *lo,
                   uint64_t *hi) {
  uint64_t a = UINT64_MAX, b = 0;
  for (size_t i = 0; i < s->nsym; i++) {
    const Elf64_Sym *y = sym_at(s, i);
    if (ELF64_ST_TYPE(y->st_info) == STT_FUNC && defined(y) &&
        named(name_of(s, y), names)) {
      if (y->st_value < a)
        a = y->st_value;
      if (y->st_value + y->st_size > b)
        b = y->st_value + y->st_size;
    }
  }
  if (b == 0)
    return MS_ENOENT;
  /* The nearest other functions on either side. */
  uint64_t below = 0, above = UINT64_MAX;
  for (size_t i = 0; i < s->nsym; i++) {
    const Elf64_Sym *y = sym_at(s, i);
    if (ELF64_ST_TYPE(y->st_info) != STT_FUNC || !defined(y) ||
        named(name_of(s, y), names))
      continue;
    uint64_t end = y->st_value + y->st_size;
    if (end <= a && end > below)
      below = end;
    if (y->st_value >= b && y->st_value < above)
      above = y->st_value;
  }
  *lo = s->base + (below ? below : a);
  *hi = s->base + (above != UINT64_MAX ? above : b);
  return 0;
}
