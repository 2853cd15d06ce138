/*
 * symcache.c - what the symboliser remembers (see sym.h): addresses'
 * frames, the files a target maps and the Dwfl's modules. What it looks
 * up, it asks sym.c.
 */
#include <gelf.h>
#include <elfutils/libdwelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "memstats.h"
#include "pprof/heap.h"
#include "pprof/libs.h"
#include "pprof/sym_int.h"
#include "pprof/tfiles.h"

/* At most this many addresses are remembered, in at most this many bytes
 * of frames, and this many file identities: past any, the cache starts
 * over (a profile has far fewer: the agent's bucket table is bounded). */
#define SYM_MAX_ENTRIES (1u << 16)
#define SYM_MAX_BYTES ((size_t)16 << 20)
#define SYM_MAX_FKEYS 4096
/* A module (what libdw read and decompressed of a file) is let go after
 * this many profiles in a row whose addresses in it were all known. */
#define SYM_MODULE_IDLE 2

/* An address in a file (its own virtual address) and its frames, the
 * innermost first, in one block with their strings. fkey 0: a free slot. */
typedef struct sym_entry_s {
  uint64_t vaddr;
  uint32_t fkey;
  uint32_t nframes;
  sym_frame_t *frames;
  size_t size; /* of the block */
} sym_entry_t;

/* ---- The table of addresses ---- */

static uint64_t entry_hash(uint32_t fkey, uint64_t vaddr) {
  uint64_t x = vaddr ^ ((uint64_t)fkey << 40) ^ fkey;

  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return x;
}

static sym_entry_t *table_find(mt_sym_cache_t *c, uint32_t fkey,
                               uint64_t vaddr) {
  size_t i;

  if (c->cap == 0)
    return NULL;
  for (i = entry_hash(fkey, vaddr) & (c->cap - 1); c->table[i].fkey != 0;
       i = (i + 1) & (c->cap - 1))
    if (c->table[i].fkey == fkey && c->table[i].vaddr == vaddr)
      return &c->table[i];
  return NULL;
}

/* Places e in a table of room enough (no check). */
static sym_entry_t *table_place(sym_entry_t *t, size_t cap,
                                const sym_entry_t *e) {
  size_t i = entry_hash(e->fkey, e->vaddr) & (cap - 1);

  while (t[i].fkey != 0)
    i = (i + 1) & (cap - 1);
  t[i] = *e;
  return &t[i];
}

/* Keeps only the entries keep() says (all if keep is NULL) in a table of
 * cap slots. Returns 0, or MS_ENOMEM (the table is then as it was). */
static int table_rebuild(mt_sym_cache_t *c, size_t cap,
                         int (*keep)(mt_sym_cache_t *, const sym_entry_t *)) {
  sym_entry_t *t = calloc(cap, sizeof *t);
  size_t i;

  if (t == NULL)
    return MS_ENOMEM;
  c->count = 0;
  for (i = 0; i < c->cap; i++) {
    sym_entry_t *e = &c->table[i];
    if (e->fkey == 0)
      continue;
    if (keep == NULL || keep(c, e)) {
      table_place(t, cap, e);
      c->count++;
    } else {
      c->bytes -= e->size;
      free(e->frames);
    }
  }
  free(c->table);
  c->table = t;
  c->cap = cap;
  return 0;
}

static void table_clear(mt_sym_cache_t *c) {
  size_t i;

  for (i = 0; i < c->cap; i++)
    free(c->table[i].frames);
  free(c->table);
  c->table = NULL;
  c->cap = c->count = c->bytes = 0;
}

/* Remembers the frames of (fkey, vaddr): a copy, in one block. Returns
 * the entry, or NULL on ENOMEM. */
static sym_entry_t *table_add(mt_sym_cache_t *c, uint32_t fkey, uint64_t vaddr,
                              const sym_frame_t *raw, uint32_t n) {
  char bufs[MAX_INLINE + 1][512], *made[MAX_INLINE + 1];
  const char *names[MAX_INLINE + 1];
  size_t size = n * sizeof(sym_frame_t), i;
  sym_entry_t e = {vaddr, fkey, n, NULL, 0};
  char *p;

  if (c->count + 1 > SYM_MAX_ENTRIES || c->bytes > SYM_MAX_BYTES)
    table_clear(c);
  if ((c->count + 1) * 2 > c->cap &&
      table_rebuild(c, c->cap ? 2 * c->cap : 256, NULL) != 0)
    return NULL;
  for (i = 0; i < n; i++) {
    names[i] = mt__sym_plain_name(raw[i].system_name, bufs[i], sizeof bufs[i],
                                  &made[i]);
    size +=
        strlen(names[i]) + strlen(raw[i].system_name) + strlen(raw[i].file) + 3;
  }
  e.frames = n > 0 ? malloc(size) : NULL;
  if (e.frames != NULL) {
    p = (char *)(e.frames + n);
    for (i = 0; i < n; i++) {
      const char *src[3] = {names[i], raw[i].system_name, raw[i].file};
      const char **dst[3] = {&e.frames[i].name, &e.frames[i].system_name,
                             &e.frames[i].file};
      for (int k = 0; k < 3; k++) {
        size_t len = strlen(src[k]) + 1;
        memcpy(p, src[k], len);
        *dst[k] = p;
        p += len;
      }
      e.frames[i].start_line = raw[i].start_line;
      e.frames[i].line = raw[i].line;
    }
  }
  for (i = 0; i < n; i++)
    free(made[i]);
  if (n > 0 && e.frames == NULL)
    return NULL;
  e.size = e.frames != NULL ? size : 0;
  c->count++;
  c->bytes += e.size;
  return table_place(c->table, c->cap, &e);
}

/* The location's frames, from an entry, into h. Returns 0 or MS_ENOMEM. */
static int apply(mt_heap_t *h, const sym_entry_t *e, mt_heap_location_t *l) {
  uint32_t i;

  if (e->nframes == 0)
    return 0;
  l->lines = malloc(e->nframes * sizeof *l->lines);
  if (l->lines == NULL)
    return MS_ENOMEM;
  for (i = 0; i < e->nframes; i++) {
    const sym_frame_t *f = &e->frames[i];
    l->lines[i].function =
        mt_heap_function(h, f->name, f->system_name, f->file, f->start_line);
    l->lines[i].line = f->line;
  }
  l->nlines = e->nframes;
  return 0;
}

/* ---- The files a target maps ---- */

static int same_file(const sym_file_t *f, const struct stat *st) {
  return f->dev == st->st_dev && f->ino == st->st_ino &&
         f->size == st->st_size && f->mtime.tv_sec == st->st_mtim.tv_sec &&
         f->mtime.tv_nsec == st->st_mtim.tv_nsec;
}

/* The load bias of f mapped at m: the difference between the addresses
 * in the process and the file's own virtual addresses. Returns 0, or
 * MS_ENOENT if no loadable segment holds the mapping's offset. */
static int bias_of(const sym_file_t *f, const mt_heap_mapping_t *m,
                   uint64_t *bias) {
  size_t i;

  if (f->is_exec) {
    *bias = 0;
    return 0;
  }
  for (i = 0; i < f->nload; i++) {
    const sym_load_t *ph = &f->load[i];
    /* A mapping starts on a page: the segment's first page may begin
     * before p_offset. */
    uint64_t seg_page =
        ph->align > 1 ? ph->offset & ~(ph->align - 1) : ph->offset;

    if (m->offset < seg_page || m->offset >= ph->offset + ph->filesz)
      continue;
    /* The mapping's start holds file offset m->offset, which the file
     * places at p_vaddr + (offset - p_offset). */
    *bias = m->start - (ph->vaddr + m->offset - ph->offset);
    return 0;
  }
  return MS_ENOENT;
}

/* The key of f's identity: its build id, or where it has none what the
 * file system says of it. Returns it (from 1), or 0 on ENOMEM. */
static uint32_t fkey_of(mt_sym_cache_t *c, const sym_file_t *f) {
  char key[sizeof f->build_id + 96];
  char **grown;
  size_t i;

  if (f->build_id[0] != '\0')
    snprintf(key, sizeof key, "b:%s", f->build_id);
  else
    snprintf(key, sizeof key, "s:%llu:%llu:%lld:%lld.%09ld",
             (unsigned long long)f->dev, (unsigned long long)f->ino,
             (long long)f->size, (long long)f->mtime.tv_sec, f->mtime.tv_nsec);
  for (i = 0; i < c->nfkeys; i++)
    if (strcmp(c->fkeys[i], key) == 0)
      return (uint32_t)i + 1;
  grown = realloc(c->fkeys, (c->nfkeys + 1) * sizeof *grown);
  if (grown == NULL)
    return 0;
  c->fkeys = grown;
  c->fkeys[c->nfkeys] = strdup(key);
  if (c->fkeys[c->nfkeys] == NULL)
    return 0;
  return (uint32_t)++c->nfkeys;
}

/* f has no module now: the next address of it not known reports it
 * anew. */
static void file_unreported(sym_file_t *f) {
  f->mod = NULL;
  f->idle = 0;
  f->reported = 0;
  f->unresolved = NULL;
  f->dwarf = -1;
  f->alt_given = 0;
}

/* Lets the Dwfl go, every module with it. */
static void dwfl_drop(mt_sym_cache_t *c) {
  sym_file_t *f;

  if (c->dwfl == NULL)
    return;
  mt_dw.dwfl_end(c->dwfl);
  c->dwfl = NULL;
  for (f = c->files; f != NULL; f = f->next) {
    if (f->mod != NULL)
      c->st.drops++;
    file_unreported(f);
  }
}

/* Lets go the modules of the files gone() says, keeping the others (the
 * Dwfl too, unless none is left): libdwfl forgets every module not
 * reported again between dwfl_report_begin and dwfl_report_end, and a
 * module reported again by its name and range is the one it had. */
static void modules_let_go(mt_sym_cache_t *c, int (*gone)(const sym_file_t *)) {
  sym_file_t *f;
  int drop = 0, keep = 0;

  for (f = c->files; f != NULL; f = f->next)
    if (f->mod != NULL) {
      if (gone(f))
        drop = 1;
      else
        keep = 1;
    }
  if (!drop)
    return;
  if (!keep) {
    dwfl_drop(c);
    return;
  }
  mt_dw.dwfl_report_begin(c->dwfl);
  for (f = c->files; f != NULL; f = f->next) {
    Dwarf_Addr low, high;

    if (f->mod == NULL || gone(f))
      continue;
    mt_dw.dwfl_module_info(f->mod, NULL, &low, &high, NULL, NULL, NULL, NULL);
    if (mt_dw.dwfl_report_module(c->dwfl, f->path, low, high) != f->mod) {
      /* Not the module it had (none fails so): start over. */
      mt_dw.dwfl_report_end(c->dwfl, NULL, NULL);
      dwfl_drop(c);
      return;
    }
  }
  mt_dw.dwfl_report_end(c->dwfl, NULL, NULL);
  for (f = c->files; f != NULL; f = f->next)
    if (f->mod != NULL && gone(f)) {
      c->st.drops++;
      file_unreported(f);
    }
}

static int file_idle(const sym_file_t *f) {
  return f->idle >= SYM_MODULE_IDLE;
}

static int file_unseen(const sym_file_t *f) {
  return !f->seen;
}

/* Reads the file at path (whose stat st is) as mapped at m: its load
 * segments, its build id. Returns it (added to c's files), or NULL with
 * m->unresolved set (or ENOMEM in *rc). */
static sym_file_t *file_read(mt_sym_cache_t *c, const char *path,
                             const struct stat *st, mt_heap_mapping_t *m,
                             int *rc) {
  struct stat st2;
  sym_file_t *f = calloc(1, sizeof *f);
  const void *id = NULL;
  Elf *elf = NULL;
  GElf_Ehdr eh;
  GElf_Phdr ph;
  size_t n, i;
  ssize_t idlen;
  int fd = -1;

  if (f == NULL || (f->path = strdup(path)) == NULL) {
    *rc = MS_ENOMEM;
    goto fail;
  }
  /* The path is the target's word: opened as the target could, only if
   * it is a regular file (tfiles.c), and only if it is the one just
   * looked up. */
  fd = mt_tfiles_open(c->tf, path, &m->unresolved);
  if (fd < 0)
    goto fail;
  c->st.reads++;
  if (fstat(fd, &st2) != 0 || st2.st_dev != st->st_dev ||
      st2.st_ino != st->st_ino) {
    m->unresolved = "the file changed while it was opened";
    goto fail;
  }
  f->dev = st2.st_dev;
  f->ino = st2.st_ino;
  f->size = st2.st_size;
  f->mtime = st2.st_mtim;
  m->unresolved = "the file does not match the mapping";
  elf = mt_dw.elf_begin(fd, ELF_C_READ_MMAP, NULL);
  if (elf == NULL || mt_dw.gelf_getehdr(elf, &eh) == NULL ||
      mt_dw.elf_getphdrnum(elf, &n) != 0)
    goto fail;
  f->is_exec = eh.e_type == ET_EXEC;
  for (i = 0; i < n && f->nload < SYM_MAX_LOAD; i++) {
    if (mt_dw.gelf_getphdr(elf, (int)i, &ph) == NULL || ph.p_type != PT_LOAD)
      continue;
    f->load[f->nload++] =
        (sym_load_t){ph.p_offset, ph.p_vaddr, ph.p_filesz, ph.p_align};
  }
  idlen = mt_dw.dwelf_elf_gnu_build_id(elf, &id);
  mt__sym_hex_id(id, idlen > 0 && idlen <= 64 ? (int)idlen : 0, f->build_id,
                 sizeof f->build_id);
  mt_dw.elf_end(elf);
  elf = NULL;
  close(fd);
  fd = -1;
  if (bias_of(f, m, &f->bias) != 0)
    goto fail;
  m->unresolved = NULL;
  if (c->nfkeys >= SYM_MAX_FKEYS) {
    /* Not with a real process (and the cache starts over before). */
    m->unresolved = "too many files";
    goto fail;
  }
  f->fkey = fkey_of(c, f);
  if (f->fkey == 0) {
    *rc = MS_ENOMEM;
    goto fail;
  }
  f->cache = c;
  f->dwarf = -1;
  f->next = c->files;
  c->files = f;
  return f;
fail:
  if (elf != NULL)
    mt_dw.elf_end(elf);
  if (fd >= 0)
    close(fd);
  if (f != NULL)
    free(f->path);
  free(f);
  return NULL;
}

/* The file mapping m is of, read once, found again by its path, identity
 * and bias. Returns NULL with m->unresolved set when its addresses are
 * not to be resolved (or ENOMEM in *rc). */
static sym_file_t *file_for(mt_sym_cache_t *c, mt_heap_t *h,
                            mt_heap_mapping_t *m, int *rc) {
  const char *path = h->strings[m->filename];
  struct stat st;
  sym_file_t *f;
  uint64_t bias;

  if (path[0] != '/') {
    m->unresolved = "no file (an anonymous or special mapping)";
    return NULL;
  }
  /* A lookup, nothing opened: the file as the target sees it now. */
  if (mt_tfiles_stat(c->tf, path, &st, &m->unresolved) != 0)
    return NULL;
  for (f = c->files; f != NULL; f = f->next)
    if (strcmp(f->path, path) == 0 && same_file(f, &st) &&
        bias_of(f, m, &bias) == 0 && bias == f->bias)
      break;
  if (f == NULL && (f = file_read(c, path, &st, m, rc)) == NULL)
    return NULL;
  f->seen = 1;
  if (m->build_id != 0 && strcmp(f->build_id, h->strings[m->build_id]) != 0) {
    /* Its names would be wrong: an address left unresolved is honest. */
    m->unresolved = "the file's build id differs from the process's "
                    "(rebuilt or replaced since)";
    return NULL;
  }
  return f;
}

static int fkey_used(mt_sym_cache_t *c, const sym_entry_t *e) {
  const sym_file_t *f;

  for (f = c->files; f != NULL; f = f->next)
    if (f->fkey == e->fkey)
      return 1;
  return 0;
}

/* Forgets the files the profile no longer maps, their modules and what
 * was resolved in them. */
static void files_sweep(mt_sym_cache_t *c) {
  sym_file_t **p = &c->files, *f;
  int gone = 0;

  modules_let_go(c, file_unseen);
  while ((f = *p) != NULL) {
    if (f->seen) {
      p = &f->next;
      continue;
    }
    *p = f->next;
    free(f->path);
    free(f);
    gone = 1;
  }
  if (gone && c->cap > 0)
    (void)table_rebuild(c, c->cap, fkey_used); /* on ENOMEM: kept */
}

/* f's module in the Dwfl, reported now if it is not yet. NULL with
 * f->unresolved set if it cannot be (or ENOMEM in *rc). */
static Dwfl_Module *module_of(mt_sym_cache_t *c, sym_file_t *f, int *rc) {
  struct stat st;
  Dwfl_Module *mod;
  void **userdata = NULL;
  int fd;

  if (f->mod != NULL || f->reported)
    return f->mod;
  f->reported = 1;
  if (c->dwfl == NULL &&
      (c->dwfl = mt_dw.dwfl_begin(mt__sym_callbacks())) == NULL) {
    *rc = MS_ENOMEM;
    return NULL;
  }
  fd = mt_tfiles_open(c->tf, f->path, &f->unresolved);
  if (fd < 0)
    return NULL;
  if (fstat(fd, &st) != 0 || !same_file(f, &st)) {
    close(fd);
    f->unresolved = "the file changed while it was opened";
    return NULL;
  }
  mt_dw.dwfl_report_begin_add(c->dwfl);
  /* On success libdwfl owns fd (and never opens the name itself). */
  mod = mt_dw.dwfl_report_elf(c->dwfl, f->path, f->path, fd,
                              f->is_exec ? 0 : f->bias, true);
  mt_dw.dwfl_report_end(c->dwfl, NULL, NULL);
  if (mod == NULL) {
    close(fd);
    f->unresolved = "not an ELF file libdwfl can read";
    return NULL;
  }
  c->st.reports++;
  mt_dw.dwfl_module_info(mod, &userdata, NULL, NULL, NULL, NULL, NULL, NULL);
  if (userdata != NULL && *userdata == NULL)
    *userdata = f;
  f->mod = mod;
  return mod;
}

/* ---- The cache ---- */

mt_sym_cache_t *mt_sym_cache_new(void) {
  return calloc(1, sizeof(mt_sym_cache_t));
}

/* Forgets everything (another process's profile comes). */
static void cache_reset(mt_sym_cache_t *c) {
  sym_file_t *f;
  size_t i;

  dwfl_drop(c);
  while ((f = c->files) != NULL) {
    c->files = f->next;
    free(f->path);
    free(f);
  }
  table_clear(c);
  for (i = 0; i < c->nfkeys; i++)
    free(c->fkeys[i]);
  free(c->fkeys);
  c->fkeys = NULL;
  c->nfkeys = 0;
  c->have_target = 0;
}

void mt_sym_cache_free(mt_sym_cache_t *c) {
  if (c == NULL)
    return;
  cache_reset(c);
  free(c);
}

void mt_sym_cache_stats(const mt_sym_cache_t *c, mt_sym_stats_t *out) {
  const sym_file_t *f;

  *out = c->st;
  out->files = 0;
  for (f = c->files; f != NULL; f = f->next)
    out->files++;
  out->modules = 0;
  for (f = c->files; f != NULL; f = f->next)
    out->modules += f->mod != NULL;
  out->entries = c->count;
  out->bytes = c->bytes + c->cap * sizeof(sym_entry_t);
  out->dwfl = c->dwfl != NULL;
}

int mt_sym_cache_rest(mt_sym_cache_t *c) {
  if (c == NULL || c->dwfl == NULL)
    return 0;
  dwfl_drop(c);
  return 1;
}

int mt_sym_cache_symbolize(mt_sym_cache_t *c, mt_heap_t *h, int pid,
                           uint64_t start_time) {
  sym_file_t **map = NULL, *f;
  mt_tfiles_t files;
  const char *why = NULL;
  size_t i;
  int rc = 0;

  if (h->nmappings == 0)
    return 0;
  if ((rc = mt_libs_dw()) != 0)
    return rc;
  rc = mt_tfiles_init(&files, pid, start_time, &why);
  if (rc == 0 && (rc = mt_tfiles_enter(&files, &why)) != 0)
    mt_tfiles_free(&files);
  if (rc != 0) {
    /* Nothing is read: every mapping says why. */
    for (i = 0; i < h->nmappings; i++)
      if (h->mappings[i].unresolved == NULL)
        h->mappings[i].unresolved = why;
    return rc == MS_ENOMEM ? rc : 0;
  }
  /* From here to mt_tfiles_leave, every open on this thread, libdw's
   * included, is made with the target's rights. */
  /* Identities are never forgotten within one process's cache (an entry
   * may outlive its file): one whose files keep being replaced starts
   * over now and then. */
  if (!c->have_target || c->pid != pid || c->start_time != start_time ||
      c->nfkeys >= SYM_MAX_FKEYS / 2) {
    cache_reset(c);
    c->have_target = 1;
    c->pid = pid;
    c->start_time = start_time;
  }
  c->tf = &files;
  mt_dw.elf_version(EV_CURRENT);
  map = calloc(h->nmappings, sizeof *map);
  if (map == NULL) {
    rc = MS_ENOMEM;
    goto out;
  }
  for (f = c->files; f != NULL; f = f->next) {
    f->seen = 0;
    if (f->mod == NULL)
      f->reported = 0; /* a report that failed is tried again */
  }
  for (i = 0; i < h->nmappings && rc == 0; i++)
    map[i] = file_for(c, h, &h->mappings[i], &rc);
  if (rc != 0)
    goto out;
  files_sweep(c);
  for (i = 0; i < h->nlocations; i++) {
    mt_heap_location_t *l = &h->locations[i];
    sym_frame_t raw[MAX_INLINE + 1];
    const sym_entry_t *e;
    Dwfl_Module *mod;
    uint64_t vaddr;

    if (l->mapping == 0 || (f = map[l->mapping - 1]) == NULL || l->nlines > 0)
      continue;
    vaddr = l->address - f->bias;
    e = table_find(c, f->fkey, vaddr);
    if (e != NULL) {
      c->st.hits++;
    } else {
      f->idle = -1; /* 0 once this profile is done */
      if ((mod = module_of(c, f, &rc)) == NULL) {
        if (rc != 0)
          goto out;
        continue;
      }
      c->st.lookups++;
      e = table_add(c, f->fkey, vaddr, raw,
                    mt__sym_resolve(mod, l->address, raw));
      if (e == NULL) {
        rc = MS_ENOMEM;
        goto out;
      }
    }
    if (apply(h, e, l) != 0) {
      rc = MS_ENOMEM;
      goto out;
    }
  }
  for (i = 0; i < h->nmappings; i++) {
    f = map[i];
    if (f != NULL && f->mod == NULL && f->reported && f->unresolved != NULL) {
      h->mappings[i].unresolved = f->unresolved;
      f = NULL;
    }
    h->mappings[i].symbolized = f != NULL;
  }
  if (mt_heap_oom(h))
    rc = MS_ENOMEM;
  /* What a module holds (its DWARF, decompressed) is kept while
   * addresses in it keep coming that are not known yet. */
  for (f = c->files; f != NULL; f = f->next)
    if (f->mod != NULL)
      f->idle++;
  modules_let_go(c, file_idle);
out:
  free(map);
  c->tf = NULL;
  mt_tfiles_leave(&files);
  mt_tfiles_free(&files);
  return rc;
}

int mt_heap_symbolize(mt_heap_t *h, int pid, uint64_t start_time) {
  mt_sym_cache_t *c;
  int rc;

  if (h->nmappings == 0)
    return 0;
  c = mt_sym_cache_new();
  if (c == NULL)
    return MS_ENOMEM;
  rc = mt_sym_cache_symbolize(c, h, pid, start_time);
  mt_sym_cache_free(c);
  return rc;
}
