/*
 * libatmod.c - a module tests/progs/at_alloc dlopens after memtop attach
 * --track (test_attach): its calls to malloc and free go through its own
 * GOT, which only the library's dlopen hook can have rewritten.
 */
#include <stdlib.h>
#include <string.h>

__attribute__((visibility("default"))) long at_mod_churn(long n);

long at_mod_churn(long n) {
  long made = 0;
  for (long i = 0; i < n; i++) {
    char *p = malloc(32 + (size_t)(i % 64));
    if (!p)
      continue;
    memset(p, 0, 8);
    free(p);
    made++;
  }
  return made;
}
