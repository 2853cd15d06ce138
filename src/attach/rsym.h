/*
 * rsym.h - the objects mapped in another process and their dynamic
 * symbols, read from its memory (memtop side).
 *
 * The symbols are read where the dynamic loader read them, in the
 * process's own memory (the object's PT_DYNAMIC, .dynsym and .dynstr)
 * with process_vm_readv, not from the file its maps line names: a library
 * upgraded on disk since the program started (maps says "(deleted)") or a
 * file that memtop sees elsewhere (another mount namespace) would give
 * addresses of another build. Reading needs the same right as ptrace, and
 * every size is bounded: the memory is the process's word.
 */
#ifndef MT_ATTACH_RSYM_H
#define MT_ATTACH_RSYM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define MT_RSYM_PATH_MAX 4096

/* One object as /proc/PID/maps shows it. */
typedef struct mt_robj_s {
  int found;
  uint64_t base;             /* the address its offset 0 is mapped at */
  uint64_t text_lo, text_hi; /* its executable lines, first to last */
  char path[MT_RSYM_PATH_MAX];
} mt_robj_t;

/* The objects memtop attach looks for. */
typedef struct mt_rmaps_s {
  mt_robj_t libc, ld, libdl, memstats;
} mt_rmaps_t;

/* Reads /proc/PID/maps. Returns 0, or MS_ESRCH / MS_EACCES. */
int mt_rsym_maps(pid_t pid, mt_rmaps_t *out);

/* One object's dynamic symbols, read from pid's memory. */
typedef struct mt_rsyms_s {
  uint64_t base;
  unsigned char *sym; /* Elf64_Sym[nsym] */
  size_t nsym;
  char *str;
  size_t strsz;
} mt_rsyms_t;

/* Reads the object mapped at base. Returns 0, or MS_EPROTO (not an ELF
 * object as expected, or one for another processor than memtop's: a
 * program an emulator runs), MS_ENOMEM, MS_EACCES. mt_rsym_free after
 * 0. */
int mt_rsym_load(pid_t pid, uint64_t base, mt_rsyms_t *out);
void mt_rsym_free(mt_rsyms_t *s);

/* The address of a defined function or object named name, or 0. */
uint64_t mt_rsym_find(const mt_rsyms_t *s, const char *name);

/* The text around the defined functions named in names (NULL-ended):
 * from the end of the nearest other function below the lowest of them to
 * the start of the nearest other one above the highest, so that the
 * static functions among them (glibc's _int_malloc, sysmalloc ...) are
 * inside. Returns 0 and sets [*lo, *hi), or MS_ENOENT if none is
 * defined. */
int mt_rsym_around(const mt_rsyms_t *s, const char *const *names, uint64_t *lo,
                   uint64_t *hi);

#endif
