/*
 * tree.h - the targets of a set in tree order (issue 21: process trees),
 * for the plain outputs that list them: `memtop run --once` and
 * `memtop PID --tree --once`. Each process comes after its parent, from
 * the parent PID the set's record holds (mt_tset_target_t.id.ppid, read
 * from /proc at each listing), so a worker is listed under the server
 * that forked it and a daemon under what it was re-parented to.
 */
#ifndef MS_MEMTOP_TREE_H
#define MS_MEMTOP_TREE_H

#include <stddef.h>

#include "targets/targetset.h"

/* Puts v[0..n) in tree order: a target whose parent is among them comes
 * after its parent (and its parent's earlier children's subtrees), in the
 * order it had; the others are roots, in the order they had. depth (n
 * ints, or NULL) gets each one's depth (0 for a root). A loop of parents
 * (PIDs reused) is broken where it is first met. Out of memory, the order
 * is left as it was (every depth 0). O(n^2): n is the few processes one
 * tree holds. */
void mt_tree_order(mt_tset_target_t **v, size_t n, int *depth);

#endif
