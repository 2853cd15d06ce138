/*
 * sym.h - a symboliser that remembers what it resolved (memtop side).
 *
 * The live view resolves the profile of one process again and again (every
 * few seconds) and nearly all of its addresses are the same each time.
 * Resolving one costs a walk of the DWARF, and the first walk of a binary
 * costs its DWARF read and, where the debug file's sections are
 * compressed (Debian's libc6-dbg), decompressed: megabytes and tens of
 * milliseconds. So an mt_sym_cache_t keeps, for one process:
 *
 *   - each address's frames (names, files, lines), keyed by the identity
 *     of the file it is in and the address in that file: the file's build
 *     id where it has one, else its device, inode, size and modification
 *     time, so a file replaced on disk is read again, never served the
 *     names of the one it replaced;
 *   - what each mapped file is (its identity, load segments, build id),
 *     checked again at every profile with one lookup and no read;
 *   - the Dwfl and a module for each file while addresses in it keep
 *     missing; a module is let go once two profiles in a row found every
 *     address in its file known (what it holds, the decompressed DWARF, is
 *     the bulk of the cost in memory), or when its file is no longer
 *     mapped, and the Dwfl with the last module.
 *
 * Files are opened, and looked up, only as mt_heap_symbolize does
 * (pprof/tfiles.h): with the target's rights, under its root. A profile of
 * another process (another PID or start time) empties the cache first.
 * Not thread-safe: one thread at a time.
 */
#ifndef MT_PPROF_SYM_H
#define MT_PPROF_SYM_H

#include <stddef.h>
#include <stdint.h>

#include "pprof/heap.h"

typedef struct mt_sym_cache_s mt_sym_cache_t;

/* What a cache has done and holds (for tests and the bench). */
typedef struct mt_sym_stats_s {
  uint64_t lookups; /* addresses resolved through libdw (a DWARF walk) */
  uint64_t hits;    /* addresses answered from the cache */
  uint64_t reads;   /* files opened and their ELF headers read */
  uint64_t reports; /* files reported to libdwfl (their DWARF read anew) */
  uint64_t drops;   /* modules let go (what libdw read of a file) */
  size_t files;     /* mapped files known now */
  size_t modules;   /* of them, with a module now */
  size_t entries;   /* addresses remembered now */
  size_t bytes;     /* what they take, roughly */
  int dwfl;         /* a Dwfl is held now */
} mt_sym_stats_t;

/* NULL on ENOMEM. */
mt_sym_cache_t *mt_sym_cache_new(void);
void mt_sym_cache_free(mt_sym_cache_t *c);

/* mt_heap_symbolize (heap.h), with what c remembers of process pid. */
int mt_sym_cache_symbolize(mt_sym_cache_t *c, mt_heap_t *h, int pid,
                           uint64_t start_time);

void mt_sym_cache_stats(const mt_sym_cache_t *c, mt_sym_stats_t *out);

/* Lets the Dwfl go (and the DWARF it decompressed), keeping what was
 * resolved: for a cache that will not be used for a while. Returns 1 if
 * there was one to let go. */
int mt_sym_cache_rest(mt_sym_cache_t *c);

#endif
