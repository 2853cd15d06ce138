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
 */
#include <dlfcn.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <gelf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "memstats.h"
#include "pprof/heap.h"
#include "pprof/tfiles.h"

/* The deepest chain of inlined calls followed at one address. */
#define MAX_INLINE 32

/* What the Dwfl callbacks know of a module: its userdata, one per
 * mapping (a module's is its first mapping's). */
typedef struct sym_mod_s {
  mt_tfiles_t *files;
  const char *path; /* the main file, as the target names it */
  int dwarf;        /* its DWARF may be read: 1, 0, or -1 not known yet */
  int alt_given;    /* its dwz file was found here */
} sym_mod_t;

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

/* The function named `sys` (a linkage name) as pprof wants it: name
 * demangled, system_name as it is. */
static uint32_t add_function(mt_heap_t *h, const char *sys, const char *file,
                             int64_t start_line) {
  demangle_fn dm;
  char *plain = NULL, unversioned[512];
  const char *at = strchr(sys, '@');
  int status = -1;
  uint32_t f;

  /* A symbol's version ("__libc_start_main@@GLIBC_2.34") is not part of
   * the function's name; the system name keeps it. */
  if (at != NULL && at != sys && (size_t)(at - sys) < sizeof unversioned) {
    memcpy(unversioned, sys, (size_t)(at - sys));
    unversioned[at - sys] = '\0';
  } else {
    snprintf(unversioned, sizeof unversioned, "%s", sys);
  }
  if (sys[0] == '_' && sys[1] == 'Z' && (dm = demangler()) != NULL)
    plain = dm(unversioned, NULL, NULL, &status);
  f = mt_heap_function(h, status == 0 && plain != NULL ? plain : unversioned,
                       sys, file, start_line);
  free(plain);
  return f;
}

/* The load bias of the file at fd mapped at m: the difference between
 * the addresses in the process and the file's own virtual addresses.
 * Returns 0, or -1 if no loadable segment holds the mapping's offset. */
static int load_bias(int fd, const mt_heap_mapping_t *m, uint64_t *bias,
                     int *is_exec) {
  Elf *elf;
  GElf_Ehdr eh;
  GElf_Phdr ph;
  size_t n, i;
  int rc = -1;

  elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
  if (elf == NULL)
    return -1;
  if (gelf_getehdr(elf, &eh) == NULL || elf_getphdrnum(elf, &n) != 0)
    goto out;
  *is_exec = eh.e_type == ET_EXEC;
  if (*is_exec) {
    *bias = 0;
    rc = 0;
    goto out;
  }
  for (i = 0; i < n; i++) {
    uint64_t seg_page;

    if (gelf_getphdr(elf, (int)i, &ph) == NULL || ph.p_type != PT_LOAD)
      continue;
    /* A mapping starts on a page: the segment's first page may begin
     * before p_offset. */
    seg_page = ph.p_align > 1 ? ph.p_offset & ~(ph.p_align - 1) : ph.p_offset;
    if (m->offset < seg_page || m->offset >= ph.p_offset + ph.p_filesz)
      continue;
    /* The mapping's start holds file offset m->offset, which the file
     * places at p_vaddr + (offset - p_offset). */
    *bias = m->start - (ph.p_vaddr + m->offset - ph.p_offset);
    rc = 0;
    break;
  }
out:
  elf_end(elf);
  return rc;
}

static void hex_id(const unsigned char *bits, int len, char *out,
                   size_t outlen) {
  int i;

  out[0] = '\0';
  for (i = 0; i < len && (size_t)(2 * i + 2) < outlen; i++)
    snprintf(out + 2 * i, 3, "%02x", bits[i]);
}

/* Reports mapping m's file to dwfl, or finds the module already reported
 * for it. Returns the module, or NULL with m->unresolved set. */
static Dwfl_Module *report(Dwfl *dwfl, mt_heap_t *h, mt_heap_mapping_t *m,
                           sym_mod_t *sm) {
  const char *path = h->strings[m->filename];
  char have[2 * 64 + 1];
  const unsigned char *bits;
  GElf_Addr vaddr;
  uint64_t bias;
  Dwfl_Module *mod;
  void **userdata = NULL;
  int fd, len, is_exec = 0;

  if (path[0] != '/') {
    m->unresolved = "no file (an anonymous or special mapping)";
    return NULL;
  }
  /* A module already reported at this address holds this mapping too
   * (a file's text and data are separate mappings at one bias). */
  mod = dwfl_addrmodule(dwfl, m->start);
  if (mod != NULL) {
    const char *mainfile = NULL;
    dwfl_module_info(mod, NULL, NULL, NULL, NULL, NULL, &mainfile, NULL);
    if (mainfile != NULL && strcmp(mainfile, path) == 0)
      goto check; /* the build id is this mapping's to check too */
  }
  /* The path is the target's word: opened as the target could, only if
   * it is a regular file (tfiles.c). */
  fd = mt_tfiles_open(sm->files, path, &m->unresolved);
  if (fd < 0)
    return NULL;
  if (load_bias(fd, m, &bias, &is_exec) != 0) {
    close(fd);
    m->unresolved = "the file does not match the mapping";
    return NULL;
  }
  dwfl_report_begin_add(dwfl);
  /* On success libdwfl owns fd (and never opens the name itself). */
  mod = dwfl_report_elf(dwfl, path, path, fd, is_exec ? 0 : bias, true);
  dwfl_report_end(dwfl, NULL, NULL);
  if (mod == NULL) {
    close(fd);
    m->unresolved = "not an ELF file libdwfl can read";
    return NULL;
  }
  dwfl_module_info(mod, &userdata, NULL, NULL, NULL, NULL, NULL, NULL);
  if (userdata != NULL && *userdata == NULL)
    *userdata = sm;
check:
  if (m->build_id != 0) {
    Dwarf_Addr b;
    (void)dwfl_module_getelf(mod, &b);
    len = dwfl_module_build_id(mod, &bits, &vaddr);
    hex_id(bits, len > 0 ? len : 0, have, sizeof have);
    if (len <= 0 || strcmp(have, h->strings[m->build_id]) != 0) {
      /* The module stays reported (libdwfl has no way to take one back)
       * but this mapping's addresses are not looked up in it. */
      m->unresolved = "the file's build id differs from the process's "
                      "(rebuilt or replaced since)";
      return NULL;
    }
  }
  return mod;
}

/* ---- Separate debug files, found as the target could find them ---- */

/* Never a file by name: every module is reported with its descriptor. */
static int find_elf_none(Dwfl_Module *mod, void **userdata, const char *modname,
                         Dwarf_Addr base, char **file_name, Elf **elfp) {
  (void)mod, (void)userdata, (void)modname, (void)base;
  *file_name = NULL;
  *elfp = NULL;
  return -1;
}

/* fd if the ELF file in it has build id (id, len); else closes it, -1. */
static int same_build_id(int fd, const void *id, size_t len) {
  Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
  const void *have = NULL;
  ssize_t n = elf != NULL ? dwelf_elf_gnu_build_id(elf, &have) : -1;
  int same = n > 0 && (size_t)n == len && memcmp(have, id, len) == 0;

  if (elf != NULL)
    elf_end(elf);
  if (!same) {
    close(fd);
    return -1;
  }
  return fd;
}

/* The debug file /usr/lib/debug/.build-id/xx/rest.debug for a build id. */
static int by_build_id(sym_mod_t *sm, const unsigned char *id, size_t len) {
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
  fd = mt_tfiles_open(sm->files, path, &why);
  return fd < 0 ? -1 : same_build_id(fd, id, len);
}

/* libdwfl's find_debuginfo: the module's debug file by its build id, or by
 * its .gnu_debuglink name (a plain name, looked for where GDB looks: the
 * binary's directory, its .debug, /usr/lib/debug/DIR) and then checked
 * against the build id; or, asked for the dwz file a module's DWARF
 * shares (.gnu_debugaltlink), that file by its build id. Every open goes
 * through tfiles; *debuginfo_file_name stays NULL, since libdwfl would
 * open a name left there itself. */
static int find_debuginfo(Dwfl_Module *mod, void **userdata,
                          const char *modname, Dwarf_Addr base,
                          const char *file_name, const char *debuglink_file,
                          GElf_Word debuglink_crc, char **debuginfo_file_name) {
  sym_mod_t *sm = *userdata;
  const unsigned char *id;
  const char *own_link = NULL, *slash, *why;
  char path[PATH_MAX];
  GElf_Addr vaddr, loadbase;
  GElf_Word crc;
  Elf *main_elf;
  int len, fd, i;

  (void)modname, (void)base, (void)file_name, (void)debuglink_crc;
  *debuginfo_file_name = NULL;
  if (sm == NULL)
    return -1;
  main_elf = dwfl_module_getelf(mod, &loadbase);
  if (main_elf != NULL)
    own_link = dwelf_elf_gnu_debuglink(main_elf, &crc);
  if (debuglink_file != NULL && debuglink_file != own_link) {
    /* Not the main file's debug link: the dwz file (libdwfl has the
     * module's DWARF already, so this returns it without a search). */
    const void *alt_id;
    const char *alt_name;
    Dwarf_Addr bias;
    Dwarf *dw = dwfl_module_getdwarf(mod, &bias);
    ssize_t n =
        dw != NULL ? dwelf_dwarf_gnu_debugaltlink(dw, &alt_name, &alt_id) : -1;

    if (n <= 0)
      return -1;
    fd = by_build_id(sm, alt_id, (size_t)n);
    sm->alt_given = fd >= 0;
    return fd;
  }
  len = dwfl_module_build_id(mod, &id, &vaddr);
  if (len <= 0)
    return -1; /* a debug link alone is checked by CRC: not done here */
  fd = by_build_id(sm, id, (size_t)len);
  if (fd >= 0 || debuglink_file == NULL || strchr(debuglink_file, '/') != NULL)
    return fd;
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
    fd = mt_tfiles_open(sm->files, path, &why);
    if (fd >= 0 && (fd = same_build_id(fd, id, (size_t)len)) >= 0)
      return fd;
  }
  return -1;
}

/* Whether mod's DWARF may be read: it is there, and reading it makes
 * libdw open no file by a name the DWARF gives (a split unit's .dwo,
 * whose skeleton is in the binary; a dwz file not found by
 * find_debuginfo). */
static int dwarf_usable(Dwfl_Module *mod) {
  void **userdata = NULL;
  sym_mod_t *sm;
  const void *alt_id;
  const char *alt_name;
  Dwarf_Addr bias;
  Dwarf_CU *cu = NULL;
  Dwarf *dw;
  uint8_t type;

  dwfl_module_info(mod, &userdata, NULL, NULL, NULL, NULL, NULL, NULL);
  sm = userdata != NULL ? *userdata : NULL;
  if (sm == NULL)
    return 0;
  if (sm->dwarf >= 0)
    return sm->dwarf;
  sm->dwarf = 0;
  dw = dwfl_module_getdwarf(mod, &bias);
  if (dw == NULL)
    return 0;
  if (dwelf_dwarf_gnu_debugaltlink(dw, &alt_name, &alt_id) > 0 &&
      !sm->alt_given)
    return 0;
  while (dwarf_get_units(dw, cu, &cu, NULL, &type, NULL, NULL) == 0)
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

  if (dwarf_attr_integrate(die, DW_AT_linkage_name, &a) != NULL &&
      (s = dwarf_formstring(&a)) != NULL)
    return s;
  if (dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &a) != NULL &&
      (s = dwarf_formstring(&a)) != NULL)
    return s;
  if (dwarf_attr_integrate(die, DW_AT_name, &a) != NULL &&
      (s = dwarf_formstring(&a)) != NULL)
    return s;
  return NULL;
}

static int64_t die_decl_line(Dwarf_Die *die) {
  int line = 0;

  return dwarf_decl_line(die, &line) == 0 ? line : 0;
}

/* The compilation unit holding addr. libdw finds it through
 * .debug_aranges, which clang does not emit (and elfutils before 0.191
 * does not make up from the units' ranges): then each unit's ranges are
 * asked in turn. */
static Dwarf_Die *unit_of(Dwfl_Module *mod, Dwarf_Addr addr, Dwarf_Addr *bias) {
  Dwarf_Die *cu = dwfl_module_addrdie(mod, addr, bias);

  if (cu != NULL)
    return cu;
  while ((cu = dwfl_module_nextcu(mod, cu, bias)) != NULL)
    if (dwarf_haspc(cu, addr - *bias) > 0)
      return cu;
  return NULL;
}

/* Resolves one location. Returns 0 or -1 on ENOMEM. */
static int resolve(mt_heap_t *h, Dwfl_Module *mod, mt_heap_location_t *l) {
  mt_heap_line_t lines[MAX_INLINE + 1];
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

  sym = dwfl_module_addrinfo(mod, l->address, &off, &esym, NULL, NULL, NULL);
  dwarf = dwarf_usable(mod);
  dl = dwarf ? dwfl_module_getsrc(mod, l->address) : NULL;
  if (dl != NULL)
    file = dwfl_lineinfo(dl, &la, &lineno, NULL, NULL, NULL);

  cu = dwarf ? unit_of(mod, l->address, &bias) : NULL;
  if (cu != NULL && dl == NULL) {
    /* The unit found without aranges: its own line table. */
    Dwarf_Line *ln = dwarf_getsrc_die(cu, l->address - bias);
    if (ln != NULL && dwarf_lineno(ln, &lineno) == 0)
      file = dwarf_linesrc(ln, NULL, NULL);
  }
  line = lineno;
  if (cu != NULL) {
    nscopes = dwarf_getscopes(cu, l->address - bias, &scopes);
    if (dwarf_getsrcfiles(cu, &files, NULL) != 0)
      files = NULL;
  }
  /* Past an inlined function, dwarf_getscopes goes on with the scopes of
   * its abstract definition (its class, its namespace: where its name was
   * declared), not with the functions it was inlined into: those are the
   * DIE's own parents, which dwarf_getscopes_die gives. So the innermost
   * function's scope is found first, and its parents followed. */
  for (i = 0; i < nscopes; i++) {
    int tag = dwarf_tag(&scopes[i]);

    if (tag == DW_TAG_inlined_subroutine || tag == DW_TAG_subprogram) {
      nchain = dwarf_getscopes_die(&scopes[i], &chain);
      break;
    }
  }
  for (i = 0; i < nchain && n < MAX_INLINE; i++) {
    int tag = dwarf_tag(&chain[i]);
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
    decl_file = dwarf_decl_file(&chain[i]);
    if (decl_file == NULL)
      decl_file = file;
    lines[n].function = add_function(h, name, decl_file ? decl_file : "",
                                     die_decl_line(&chain[i]));
    lines[n].line = line;
    n++;
    if (tag == DW_TAG_subprogram)
      break;
    /* The caller of an inlined call is at the call's line and file. */
    line = 0;
    call_file = NULL;
    if (dwarf_formudata(dwarf_attr(&chain[i], DW_AT_call_line, &a), &w) == 0)
      line = (int64_t)w;
    if (files != NULL &&
        dwarf_formudata(dwarf_attr(&chain[i], DW_AT_call_file, &a), &w) == 0)
      call_file = dwarf_filesrc(files, (size_t)w, NULL, NULL);
    file = call_file;
  }
  free(chain);
  free(scopes);
  if (n == 0 && sym != NULL) {
    /* No DWARF here: the symbol table's function, and the line table's
     * line if there is one. */
    lines[0].function = add_function(h, sym, file != NULL ? file : "", 0);
    lines[0].line = line;
    n = 1;
  }
  if (n == 0)
    return 0;
  l->lines = malloc(n * sizeof *l->lines);
  if (l->lines == NULL)
    return -1;
  memcpy(l->lines, lines, n * sizeof *l->lines);
  l->nlines = n;
  return 0;
}

int mt_heap_symbolize(mt_heap_t *h, int pid, uint64_t start_time) {
  static const Dwfl_Callbacks callbacks = {
      .find_elf = find_elf_none,
      .find_debuginfo = find_debuginfo,
      .section_address = dwfl_offline_section_address,
  };
  Dwfl *dwfl = NULL;
  Dwfl_Module **mods = NULL;
  sym_mod_t *sms = NULL;
  mt_tfiles_t files;
  const char *why = NULL;
  size_t i;
  int rc = 0;

  if (h->nmappings == 0)
    return 0;
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
  elf_version(EV_CURRENT);
  dwfl = dwfl_begin(&callbacks);
  mods = calloc(h->nmappings, sizeof *mods);
  sms = calloc(h->nmappings, sizeof *sms);
  if (dwfl == NULL || mods == NULL || sms == NULL) {
    rc = MS_ENOMEM;
    goto out;
  }
  for (i = 0; i < h->nmappings; i++) {
    sms[i] = (sym_mod_t){&files, h->strings[h->mappings[i].filename], -1, 0};
    mods[i] = report(dwfl, h, &h->mappings[i], &sms[i]);
  }
  for (i = 0; i < h->nlocations; i++) {
    mt_heap_location_t *l = &h->locations[i];

    if (l->mapping == 0 || mods[l->mapping - 1] == NULL || l->nlines > 0)
      continue;
    if (resolve(h, mods[l->mapping - 1], l) != 0) {
      rc = MS_ENOMEM;
      goto out;
    }
  }
  for (i = 0; i < h->nmappings; i++)
    h->mappings[i].symbolized = mods[i] != NULL;
  if (mt_heap_oom(h))
    rc = MS_ENOMEM;
out:
  free(mods);
  if (dwfl != NULL)
    dwfl_end(dwfl);
  free(sms);
  mt_tfiles_leave(&files);
  mt_tfiles_free(&files);
  return rc;
}
