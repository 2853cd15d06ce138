/*
 * sym_int.h - what the symboliser's two halves share (internal to
 * src/pprof): sym.c reads names, files and lines with libdw; symcache.c
 * remembers them, and the files and modules they came from (sym.h).
 */
#ifndef MT_PPROF_SYM_INT_H
#define MT_PPROF_SYM_INT_H

#include <elfutils/libdwfl.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "pprof/sym.h"
#include "pprof/tfiles.h"

/* The deepest chain of inlined calls followed at one address. */
#define MAX_INLINE 32

/* The load segments a file is remembered with (ELF files have 2-5). */
#define SYM_MAX_LOAD 16

typedef struct sym_load_s {
  uint64_t offset, vaddr, filesz, align;
} sym_load_t;

/* A file the target maps, as read once (its identity, load segments and
 * build id), at one load bias; and the module libdwfl has for it, reported
 * on the first address that is not known yet. It is the module's userdata,
 * which the Dwfl callbacks read. */
typedef struct sym_file_s {
  struct sym_file_s *next;
  mt_sym_cache_t *cache;
  char *path; /* as the target names it */
  dev_t dev;
  ino_t ino;
  off_t size;
  struct timespec mtime;
  int is_exec;
  uint64_t bias;
  sym_load_t load[SYM_MAX_LOAD];
  size_t nload;
  char build_id[2 * 64 + 1]; /* the file's own, lower-case hex; "" none */
  uint32_t fkey;             /* its identity's key in the address table */
  int seen;                  /* named by the profile being resolved */
  Dwfl_Module *mod;          /* NULL: not reported to the Dwfl held */
  int idle;                  /* profiles since an address missed in it */
  int reported;              /* tried, since the Dwfl was made */
  const char *unresolved;    /* why that report failed */
  int dwarf;     /* its DWARF may be read: 1, 0, or -1 not known yet */
  int alt_given; /* its dwz file was found here */
} sym_file_t;

/* One frame of a remembered address: what mt_heap_function takes. */
typedef struct sym_frame_s {
  const char *name, *system_name, *file;
  int64_t start_line, line;
} sym_frame_t;

struct mt_sym_cache_s {
  int have_target;
  int pid;
  uint64_t start_time;
  mt_tfiles_t *tf; /* the rights of the call under way */
  Dwfl *dwfl;
  sym_file_t *files;
  char **fkeys; /* identities: "b:<build id>" or "s:dev:ino:size:mtime" */
  size_t nfkeys;
  struct sym_entry_s *table; /* open addressing, a power of two */
  size_t cap, count, bytes;
  mt_sym_stats_t st;
};

/* The callbacks of every Dwfl the cache makes: no file opened by name,
 * debug files found as the target could find them (sym.c). Only once
 * mt_libs_dw() returned 0. */
const Dwfl_Callbacks *mt__sym_callbacks(void);

/* The frames at address addr of mod, the innermost first, into
 * lines[MAX_INLINE + 1]: names as the symbol table and the DWARF give
 * them (valid while the module is). Returns how many. */
uint32_t mt__sym_resolve(Dwfl_Module *mod, Dwarf_Addr addr, sym_frame_t *lines);

/* The function named `sys` (a linkage name) as pprof shows it, into
 * buf, or a string __cxa_demangle made (to free) in *made: the
 * symbol's version ("__libc_start_main@@GLIBC_2.34") left out, a C++
 * name demangled. */
const char *mt__sym_plain_name(const char *sys, char *buf, size_t len,
                               char **made);

/* bits as lower-case hex into out (at most outlen bytes with the NUL). */
void mt__sym_hex_id(const unsigned char *bits, int len, char *out,
                    size_t outlen);

#endif
