/*
 * su_report.c - a program linked with libmemstats-preload.so itself (not
 * preloaded: the loader ignores LD_PRELOAD in a setuid program), for
 * test_preload's setuid case. It allocates, says "ok euid=N" (so that the
 * test knows whether the setuid bit took effect) and exits normally,
 * which is when the preload writes MEMSTATS_EXIT_REPORT.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(void) {
  char *p = malloc(64);
  if (p == NULL)
    return 1;
  snprintf(p, 64, "ok euid=%u", (unsigned)geteuid());
  puts(p);
  free(p);
  return 0;
}
