/*
 * libs.h - the libraries only profiles need, loaded when one is made
 * (memtop side).
 *
 * Symbolising reads the target's binaries through elfutils' libdw and
 * libelf (which bring liblzma, libbz2 and libz); writing profile.proto
 * takes protobuf-c and zlib. Nothing else in memtop uses them, and
 * loading them costs every command its start: `memtop --once` or `-V`
 * would map five more libraries and apply thousands more relocations
 * (libdw's alone are 2,700) before main. So memtop does not link them:
 * the first symbolising or writing of a profile dlopens them (by soname,
 * as the package installs them), and calls go through the tables below.
 * A library that cannot be loaded makes that call fail with MS_ENOSYS,
 * and mt_libs_error() names the package to install.
 *
 * The headers are still the libraries' own, so each pointer has the
 * declared function's exact type. Any thread may call the loaders; each
 * loads once, for the life of the process.
 *
 * profile.proto's generated code calls protobuf-c through the names in
 * pb_dl.h, which it is compiled with.
 */
#ifndef MT_PPROF_LIBS_H
#define MT_PPROF_LIBS_H

#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <math.h>
#include <zlib.h>

/* libdw's (with libdwfl and libdwelf) and libelf's functions the
 * symboliser calls (sym.c, symcache.c). */
#define MT_LIBS_DW(X)                                                          \
  X(dwarf_attr)                                                                \
  X(dwarf_attr_integrate)                                                      \
  X(dwarf_decl_file)                                                           \
  X(dwarf_decl_line)                                                           \
  X(dwarf_filesrc)                                                             \
  X(dwarf_formstring)                                                          \
  X(dwarf_formudata)                                                           \
  X(dwarf_get_units)                                                           \
  X(dwarf_getscopes)                                                           \
  X(dwarf_getscopes_die)                                                       \
  X(dwarf_getsrc_die)                                                          \
  X(dwarf_getsrcfiles)                                                         \
  X(dwarf_haspc)                                                               \
  X(dwarf_lineno)                                                              \
  X(dwarf_linesrc)                                                             \
  X(dwarf_tag)                                                                 \
  X(dwelf_dwarf_gnu_debugaltlink)                                              \
  X(dwelf_elf_gnu_build_id)                                                    \
  X(dwelf_elf_gnu_debuglink)                                                   \
  X(dwfl_begin)                                                                \
  X(dwfl_end)                                                                  \
  X(dwfl_lineinfo)                                                             \
  X(dwfl_module_addrdie)                                                       \
  X(dwfl_module_addrinfo)                                                      \
  X(dwfl_module_build_id)                                                      \
  X(dwfl_module_getdwarf)                                                      \
  X(dwfl_module_getelf)                                                        \
  X(dwfl_module_getsrc)                                                        \
  X(dwfl_module_info)                                                          \
  X(dwfl_module_nextcu)                                                        \
  X(dwfl_offline_section_address)                                              \
  X(dwfl_report_begin)                                                         \
  X(dwfl_report_begin_add)                                                     \
  X(dwfl_report_elf)                                                           \
  X(dwfl_report_end)                                                           \
  X(dwfl_report_module)

#define MT_LIBS_ELF(X)                                                         \
  X(elf_begin)                                                                 \
  X(elf_end)                                                                   \
  X(elf_getphdrnum)                                                            \
  X(elf_version)                                                               \
  X(gelf_getehdr)                                                              \
  X(gelf_getphdr)

/* zlib's, for the gzip a profile.proto file is (pprof.c). */
#define MT_LIBS_Z(X)                                                           \
  X(deflateInit2_)                                                             \
  X(deflate)                                                                   \
  X(deflateEnd)

/* libm's, for unsampling a heap profile (heap.c): the one function of
 * libm memtop calls. Linked, libm was a library more for the loader to
 * map and relocate at every start (`memtop -V`, `--once`) for a call
 * only profiles make. */
#define MT_LIBS_M(X) X(exp)

#define MT_LIBS_PTR(f) __typeof__(f) *f;

typedef struct mt_dw_s {
  MT_LIBS_DW(MT_LIBS_PTR)
  MT_LIBS_ELF(MT_LIBS_PTR)
} mt_dw_t;

typedef struct mt_z_s {
  MT_LIBS_Z(MT_LIBS_PTR)
} mt_z_t;

typedef struct mt_m_s {
  MT_LIBS_M(MT_LIBS_PTR)
} mt_m_t;

/* Filled by mt_libs_dw(), mt_libs_pb() and mt_libs_m(); read only after
 * the one that fills it returned 0. */
extern mt_dw_t mt_dw;
extern mt_z_t mt_z;
extern mt_m_t mt_m;

/* Loads libdw and libelf (once). Returns 0, or MS_ENOSYS when either
 * cannot be loaded or lacks a function (mt_libs_error says which). */
int mt_libs_dw(void);

/* Loads protobuf-c and zlib (once). Returns 0 or MS_ENOSYS, as above. */
int mt_libs_pb(void);

/* Loads libm (once). Returns 0 or MS_ENOSYS, as above. */
int mt_libs_m(void);

/* What the last failed load could not find, and the package to install:
 * "libdw.so.1 (elfutils' libdw; Debian and Ubuntu: libdw1, Fedora:
 * elfutils-libs) cannot be loaded: DLERROR". NULL when none failed. */
const char *mt_libs_error(void);

#endif
