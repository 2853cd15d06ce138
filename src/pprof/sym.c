/*
 * sym.c - names, files and lines for a heap profile's addresses, from the
 * target's binaries, through elfutils' libdwfl (the library perf and
 * systemd-coredump use for this; not a hand-written ELF or DWARF reader).
 *
 * The profile carries the mappings the addresses were taken in (path,
 * range, file offset, build id), so the binaries are reported to an
 * offline Dwfl by path (dwfl_report_elf), each at the load bias its
 * mapping implies, rather than read from /proc/PID/maps: the same code
 * then serves a live process and one that has exited, and a mapping's
 * file is checked against the build id the target saw. A file that was
 * rebuilt or replaced since (its build id differs) is not used: its names
 * would be wrong, and an address left unresolved is honest.
 *
 * An address is resolved to its frames, the innermost first: the function
 * the DWARF scopes place it in (an inlined one among them) with the line
 * dwfl_module_getsrc gives, then each caller an inlined call was made
 * from, at the call's line (DW_AT_call_line), up to the real function.
 * Without DWARF (a stripped binary and no debug file found) the symbol
 * table still gives the function. C++ names are demangled when a
 * __cxa_demangle is at hand (libstdc++, looked up at run time: memtop does
 * not link it).
 *
 * What is resolved is remembered (sym.h, symcache.c, which reports the
 * files to libdwfl and asks this file for each address not known yet):
 * mt_heap_symbolize is a cache used once; the live view keeps one
 * between its profiles.
 *
 * libdw and libelf are loaded when the first cache symbolises (libs.h):
 * every call into them goes through mt_dw.
 */
#include <dlfcn.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <gelf.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "memstats.h"
#include "pprof/debuginfod.h"
#include "pprof/heap.h"
#include "pprof/libs.h"
#include "pprof/sym_int.h"
#include "pprof/tfiles.h"

typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);

static demangle_fn demangler(void) {
  static int looked;
  static demangle_fn fn;
  void *lib;

  if (!looked) {
    looked = 1;
    fn = (demangle_fn)dlsym(RTLD_DEFAULT, "__cxa_demangle");
    if (fn == NULL) {
      lib = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
      if (lib != NULL)
        fn = (demangle_fn)dlsym(lib, "__cxa_demangle");
    }
  }
  return fn;
}

void mt__sym_hex_id(const unsigned char *bits, int len, char *out,
                    size_t outlen) {
  int i;

  out[0] = '\0';
  for (i = 0; i < len && (size_t)(2 * i + 2) < outlen; i++)
    snprintf(out + 2 * i, 3, "%02x", bits[i]);
}

/* ---- Separate debug files, found as the target could find them ---- */

/* Never a file by name: every module is reported with its descriptor.
 * libdwfl's find_elf contract: a descriptor, or -1 for none. */
static int find_elf_none(Dwfl_Module *mod, void **userdata, const char *modname,
                         Dwarf_Addr base, char **file_name, Elf **elfp) {
  (void)mod, (void)userdata, (void)modname, (void)base;
  *file_name = NULL;
  *elfp = NULL;
  return -1;
}

/* fd if the ELF file in it has build id (id, len); else closes it, -1
 * (a descriptor or -1: what find_debuginfo hands libdwfl). */
static int same_build_id(int fd, const void *id, size_t len) {
  Elf *elf = mt_dw.elf_begin(fd, ELF_C_READ_MMAP, NULL);
  const void *have = NULL;
  ssize_t n = elf != NULL ? mt_dw.dwelf_elf_gnu_build_id(elf, &have) : -1;
  int same = n > 0 && (size_t)n == len && memcmp(have, id, len) == 0;

  if (elf != NULL)
    mt_dw.elf_end(elf);
  if (!same) {
    close(fd);
    return -1;
  }
  return fd;
}

/* The debug file /usr/lib/debug/.build-id/xx/rest.debug for a build id:
 * a descriptor, or -1 for none (open(2)'s contract, what find_debuginfo
 * hands libdwfl; not an MS_E* code). */
static int by_build_id(sym_file_t *sm, const unsigned char *id, size_t len) {
  char path[sizeof "/usr/lib/debug/.build-id/" + 2 * 64 + 8];
  const char *why;
  size_t o, i;
  int fd;

  if (len < 2 || len > 64)
    return -1;
  o = (size_t)snprintf(path, sizeof path, "/usr/lib/debug/.build-id/%02x/",
                       id[0]);
  for (i = 1; i < len; i++)
    o += (size_t)snprintf(path + o, sizeof path - o, "%02x", id[i]);
  snprintf(path + o, sizeof path - o, ".debug");
  fd = mt_tfiles_open(sm->cache->tf, path, &why);
  return fd < 0 ? -1 : same_build_id(fd, id, len);
}

/* The debug file named by a .gnu_debuglink (a plain name), looked for
 * where GDB looks: the binary's directory, its .debug, /usr/lib/debug/DIR;
 * checked against the build id (id, len). A descriptor, or -1 for none
 * (open(2)'s contract, as by_build_id). */
static int by_debuglink(sym_file_t *sm, const char *debuglink_file,
                        const unsigned char *id, int len) {
  const char *slash, *why;
  char path[PATH_MAX];
  int fd, i;

  slash = strrchr(sm->path, '/');
  for (i = 0; i < 3; i++) {
    int dirlen = (int)(slash - sm->path);
    int w = i == 0   ? snprintf(path, sizeof path, "%.*s/%s", dirlen, sm->path,
                                debuglink_file)
            : i == 1 ? snprintf(path, sizeof path, "%.*s/.debug/%s", dirlen,
                                sm->path, debuglink_file)
                     : snprintf(path, sizeof path, "/usr/lib/debug%.*s/%s",
                                dirlen, sm->path, debuglink_file);

    if (w < 0 || (size_t)w >= sizeof path || strcmp(path, sm->path) == 0)
      continue;
    fd = mt_tfiles_open(sm->cache->tf, path, &why);
    if (fd >= 0 && (fd = same_build_id(fd, id, (size_t)len)) >= 0)
      return fd;
  }
  return -1;
}

/* libdwfl's find_debuginfo: the module's debug file by its build id, or by
 * its .gnu_debuglink name (a plain name, looked for where GDB looks: the
 * binary's directory, its .debug, /usr/lib/debug/DIR) and then checked
 * against the build id, or from the debuginfod servers; or, asked for the
 * dwz file a module's DWARF shares (.gnu_debugaltlink), that file by its
 * build id, here or from the servers. Every open goes
 * through tfiles; *debuginfo_file_name stays NULL, since libdwfl would
 * open a name left there itself. Returns a descriptor, or -1 for none
 * (libdwfl's contract for the callback, not an MS_E* code). */
static int find_debuginfo(Dwfl_Module *mod, void **userdata,
                          const char *modname, Dwarf_Addr base,
                          const char *file_name, const char *debuglink_file,
                          GElf_Word debuglink_crc, char **debuginfo_file_name) {
  sym_file_t *sm = *userdata;
  const unsigned char *id;
  const char *own_link = NULL;
  GElf_Addr vaddr, loadbase;
  GElf_Word crc;
  Elf *main_elf;
  int len, fd;

  (void)modname, (void)base, (void)file_name, (void)debuglink_crc;
  *debuginfo_file_name = NULL;
  if (sm == NULL)
    return -1;
  main_elf = mt_dw.dwfl_module_getelf(mod, &loadbase);
  if (main_elf != NULL)
    own_link = mt_dw.dwelf_elf_gnu_debuglink(main_elf, &crc);
  if (debuglink_file != NULL && debuglink_file != own_link) {
    /* Not the main file's debug link: the dwz file (libdwfl has the
     * module's DWARF already, so this returns it without a search). */
    const void *alt_id;
    const char *alt_name;
    Dwarf_Addr bias;
    Dwarf *dw = mt_dw.dwfl_module_getdwarf(mod, &bias);
    ssize_t n = dw != NULL
                    ? mt_dw.dwelf_dwarf_gnu_debugaltlink(dw, &alt_name, &alt_id)
                    : -1;

    if (n <= 0)
      return -1;
    fd = by_build_id(sm, alt_id, (size_t)n);
    if (fd < 0 && (fd = mt_debuginfod_find(alt_id, (size_t)n, alt_name)) >= 0)
      fd = same_build_id(fd, alt_id, (size_t)n);
    sm->alt_given = fd >= 0;
    return fd;
  }
  len = mt_dw.dwfl_module_build_id(mod, &id, &vaddr);
  if (len <= 0)
    return -1; /* a debug link alone is checked by CRC: not done here */
  fd = by_build_id(sm, id, (size_t)len);
  if (fd >= 0)
    return fd;
  if (debuglink_file != NULL && strchr(debuglink_file, '/') == NULL &&
      (fd = by_debuglink(sm, debuglink_file, id, len)) >= 0)
    return fd;
  /* Found nowhere here: the debuginfod servers, where the user names
   * some (debuginfod.h). */
  fd = mt_debuginfod_find(id, (size_t)len, sm->path);
  return fd < 0 ? -1 : same_build_id(fd, id, (size_t)len);
}

/* Whether mod's DWARF may be read: it is there, and reading it makes
 * libdw open no file by a name the DWARF gives (a split unit's .dwo,
 * whose skeleton is in the binary; a dwz file not found by
 * find_debuginfo). */
static int dwarf_usable(Dwfl_Module *mod) {
  void **userdata = NULL;
  sym_file_t *sm;
  const void *alt_id;
  const char *alt_name;
  Dwarf_Addr bias;
  Dwarf_CU *cu = NULL;
  Dwarf *dw;
  uint8_t type;

  mt_dw.dwfl_module_info(mod, &userdata, NULL, NULL, NULL, NULL, NULL, NULL);
  sm = userdata != NULL ? *userdata : NULL;
  if (sm == NULL)
    return 0;
  if (sm->dwarf >= 0)
    return sm->dwarf;
  sm->dwarf = 0;
  dw = mt_dw.dwfl_module_getdwarf(mod, &bias);
  if (dw == NULL)
    return 0;
  if (mt_dw.dwelf_dwarf_gnu_debugaltlink(dw, &alt_name, &alt_id) > 0 &&
      !sm->alt_given)
    return 0;
  while (mt_dw.dwarf_get_units(dw, cu, &cu, NULL, &type, NULL, NULL) == 0)
    if (type == DW_UT_skeleton)
      return 0;
  sm->dwarf = 1;
  return 1;
}

/* The name of a DWARF function DIE: its linkage name where it has one (a
 * C++ function), else its name, following abstract origins (an inlined
 * instance has neither itself). */
static const char *die_name(Dwarf_Die *die) {
  Dwarf_Attribute a;
  const char *s;

  if (mt_dw.dwarf_attr_integrate(die, DW_AT_linkage_name, &a) != NULL &&
      (s = mt_dw.dwarf_formstring(&a)) != NULL)
    return s;
  if (mt_dw.dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &a) != NULL &&
      (s = mt_dw.dwarf_formstring(&a)) != NULL)
    return s;
  if (mt_dw.dwarf_attr_integrate(die, DW_AT_name, &a) != NULL &&
      (s = mt_dw.dwarf_formstring(&a)) != NULL)
    return s;
  return NULL;
}

static int64_t die_decl_line(Dwarf_Die *die) {
  int line = 0;

  return mt_dw.dwarf_decl_line(die, &line) == 0 ? line : 0;
}

/* The compilation unit holding addr. libdw finds it through
 * .debug_aranges, which clang does not emit (and elfutils before 0.191
 * does not make up from the units' ranges): then each unit's ranges are
 * asked in turn. */
static Dwarf_Die *unit_of(Dwfl_Module *mod, Dwarf_Addr addr, Dwarf_Addr *bias) {
  Dwarf_Die *cu = mt_dw.dwfl_module_addrdie(mod, addr, bias);

  if (cu != NULL)
    return cu;
  while ((cu = mt_dw.dwfl_module_nextcu(mod, cu, bias)) != NULL)
    if (mt_dw.dwarf_haspc(cu, addr - *bias) > 0)
      return cu;
  return NULL;
}

/* The frames at address addr of mod, the innermost first, into
 * lines[MAX_INLINE + 1]: names as the symbol table and the DWARF give
 * them (valid while the module is). Returns how many. */
uint32_t mt__sym_resolve(Dwfl_Module *mod, Dwarf_Addr addr,
                         sym_frame_t *lines) {
  uint32_t n = 0;
  const char *sym, *file = NULL, *call_file = NULL;
  int lineno = 0;
  GElf_Off off;
  GElf_Sym esym;
  Dwfl_Line *dl;
  Dwarf_Addr bias = 0, la;
  Dwarf_Die *cu, *scopes = NULL, *chain = NULL;
  Dwarf_Files *files = NULL;
  int nscopes = 0, nchain = 0, i, dwarf;
  int64_t line;

  sym = mt_dw.dwfl_module_addrinfo(mod, addr, &off, &esym, NULL, NULL, NULL);
  dwarf = dwarf_usable(mod);
  dl = dwarf ? mt_dw.dwfl_module_getsrc(mod, addr) : NULL;
  if (dl != NULL)
    file = mt_dw.dwfl_lineinfo(dl, &la, &lineno, NULL, NULL, NULL);

  cu = dwarf ? unit_of(mod, addr, &bias) : NULL;
  if (cu != NULL && dl == NULL) {
    /* The unit found without aranges: its own line table. */
    Dwarf_Line *ln = mt_dw.dwarf_getsrc_die(cu, addr - bias);
    if (ln != NULL && mt_dw.dwarf_lineno(ln, &lineno) == 0)
      file = mt_dw.dwarf_linesrc(ln, NULL, NULL);
  }
  line = lineno;
  if (cu != NULL) {
    nscopes = mt_dw.dwarf_getscopes(cu, addr - bias, &scopes);
    if (mt_dw.dwarf_getsrcfiles(cu, &files, NULL) != 0)
      files = NULL;
  }
  /* Past an inlined function, dwarf_getscopes goes on with the scopes of
   * its abstract definition (its class, its namespace: where its name was
   * declared), not with the functions it was inlined into: those are the
   * DIE's own parents, which dwarf_getscopes_die gives. So the innermost
   * function's scope is found first, and its parents followed. */
  for (i = 0; i < nscopes; i++) {
    int tag = mt_dw.dwarf_tag(&scopes[i]);

    if (tag == DW_TAG_inlined_subroutine || tag == DW_TAG_subprogram) {
      nchain = mt_dw.dwarf_getscopes_die(&scopes[i], &chain);
      break;
    }
  }
  for (i = 0; i < nchain && n < MAX_INLINE; i++) {
    int tag = mt_dw.dwarf_tag(&chain[i]);
    const char *name, *decl_file;
    Dwarf_Attribute a;
    Dwarf_Word w;

    if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_subprogram)
      continue;
    name = die_name(&chain[i]);
    /* The real function's name is the symbol table's when DWARF lacks
     * one (and the two agree otherwise). */
    if (tag == DW_TAG_subprogram && sym != NULL)
      name = sym;
    if (name == NULL)
      name = "??";
    decl_file = mt_dw.dwarf_decl_file(&chain[i]);
    if (decl_file == NULL)
      decl_file = file;
    lines[n] = (sym_frame_t){NULL, name, decl_file ? decl_file : "",
                             die_decl_line(&chain[i]), line};
    n++;
    if (tag == DW_TAG_subprogram)
      break;
    /* The caller of an inlined call is at the call's line and file. */
    line = 0;
    call_file = NULL;
    if (mt_dw.dwarf_formudata(mt_dw.dwarf_attr(&chain[i], DW_AT_call_line, &a),
                              &w) == 0)
      line = (int64_t)w;
    if (files != NULL &&
        mt_dw.dwarf_formudata(mt_dw.dwarf_attr(&chain[i], DW_AT_call_file, &a),
                              &w) == 0)
      call_file = mt_dw.dwarf_filesrc(files, (size_t)w, NULL, NULL);
    file = call_file;
  }
  free(chain);
  free(scopes);
  if (n == 0 && sym != NULL) {
    /* No DWARF here: the symbol table's function, and the line table's
     * line if there is one. */
    lines[0] = (sym_frame_t){NULL, sym, file != NULL ? file : "", 0, line};
    n = 1;
  }
  return n;
}

/* ---- Names as pprof wants them ---- */

/* The function named `sys` (a linkage name) as pprof shows it, into
 * buf, or a string __cxa_demangle made (to free) in *made: the
 * symbol's version ("__libc_start_main@@GLIBC_2.34") left out, a C++
 * name demangled. */
const char *mt__sym_plain_name(const char *sys, char *buf, size_t len,
                               char **made) {
  demangle_fn dm;
  const char *at = strchr(sys, '@');
  int status = -1;

  *made = NULL;
  if (at != NULL && at != sys && (size_t)(at - sys) < len) {
    memcpy(buf, sys, (size_t)(at - sys));
    buf[at - sys] = '\0';
  } else {
    snprintf(buf, len, "%s", sys);
  }
  if (sys[0] == '_' && sys[1] == 'Z' && (dm = demangler()) != NULL) {
    *made = dm(buf, NULL, NULL, &status);
    if (status != 0) {
      free(*made);
      *made = NULL;
    }
  }
  return *made != NULL ? *made : buf;
}

/* ---- What the cache calls ---- */

static Dwfl_Callbacks callbacks = {
    .find_elf = find_elf_none,
    .find_debuginfo = find_debuginfo,
};
static pthread_once_t callbacks_once = PTHREAD_ONCE_INIT;

/* libdw's own function, known once the library is loaded. */
static void callbacks_init(void) {
  callbacks.section_address = mt_dw.dwfl_offline_section_address;
}

const Dwfl_Callbacks *mt__sym_callbacks(void) {
  pthread_once(&callbacks_once, callbacks_init);
  return &callbacks;
}
