/*
 * tree.c - targets in tree order (see tree.h).
 */
#include "memtop/tree.h"

#include <stdlib.h>
#include <string.h>

/* The index of v[i]'s parent among v[0..n), or n. */
static size_t parent_at(mt_tset_target_t *const *v, size_t n, size_t i) {
  int ppid = v[i]->id.ppid;

  for (size_t j = 0; ppid > 0 && j < n; j++)
    if (j != i && v[j]->pid == ppid)
      return j;
  return n;
}

void mt_tree_order(mt_tset_target_t **v, size_t n, int *depth) {
  size_t *parent = malloc(n * sizeof *parent + 1);
  size_t *stack = malloc(n * sizeof *stack + 1);
  int *sdepth = malloc(n * sizeof *sdepth + 1);
  mt_tset_target_t **out = malloc(n * sizeof *out + 1);
  size_t i, k = 0, top;

  if (depth != NULL)
    memset(depth, 0, n * sizeof *depth);
  if (parent == NULL || stack == NULL || sdepth == NULL || out == NULL)
    goto done; /* the order as it was: flat */
  for (i = 0; i < n; i++)
    parent[i] = parent_at(v, n, i);
  /* A loop of parents (PIDs reused): its first member in the order
   * becomes a root, which breaks it. */
  for (i = 0; i < n; i++) {
    size_t p = parent[i];
    for (size_t steps = 0; p < n && steps < n; steps++) {
      if (p == i) {
        parent[i] = n;
        break;
      }
      p = parent[p];
    }
  }
  /* Depth first from each root in order; children pushed last first, so
   * they come out in their order. */
  for (i = 0; i < n; i++) {
    if (parent[i] != n)
      continue;
    top = 0;
    stack[top] = i;
    sdepth[top++] = 0;
    while (top > 0) {
      size_t x = stack[--top];
      int d = sdepth[top];
      if (depth != NULL)
        depth[k] = d;
      out[k++] = v[x];
      for (size_t j = n; j-- > 0;)
        if (parent[j] == x && top < n) {
          stack[top] = j;
          sdepth[top++] = d + 1;
        }
    }
  }
  if (k == n)
    memcpy(v, out, n * sizeof *v);
  else if (depth != NULL)
    memset(depth, 0, n * sizeof *depth);
done:
  free(parent);
  free(stack);
  free(sdepth);
  free(out);
}
