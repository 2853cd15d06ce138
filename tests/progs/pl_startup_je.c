/*
 * pl_startup_je.c - prints jemalloc's own figures of what it has mapped and
 * counts resident (stats.mapped, stats.resident) once the program has
 * started: test_providers runs it bare and under the preload, and what the
 * preload's start-up adds to the program's allocator is bounded.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp,
            size_t newlen);

int main(void) {
  void *p = malloc(100); /* the program's first allocation */
  uint64_t epoch = 1;
  size_t sz = sizeof epoch, mapped = 0, resident = 0;
  if (mallctl("epoch", &epoch, &sz, &epoch, sz) != 0)
    return 1;
  sz = sizeof mapped;
  if (mallctl("stats.mapped", &mapped, &sz, NULL, 0) != 0 ||
      mallctl("stats.resident", &resident, &sz, NULL, 0) != 0)
    return 1;
  printf("mapped %zu resident %zu\n", mapped, resident);
  free(p);
  return 0;
}
