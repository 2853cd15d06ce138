/*
 * pl_lazy.c - a program that hands pages of its own mapping back with
 * MADV_FREE and shares memory, for tests/integration/test_unseen.c: it
 * maps 32 MiB, writes all of it, hands back the middle 16 MiB with
 * MADV_FREE (they stay resident until the kernel needs them), maps 8 MiB
 * shared and anonymous and writes 4 MiB of it, says "ready PID ADDR
 * SHARED" with the two mappings' addresses, and waits for its stdin to
 * close.
 */
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "say.h"

#define MiB (1024u * 1024u)

int main(void) {
  /* A page of PROT_NONE on either side: the kernel merges adjacent
   * anonymous mappings of the same protection, and smaps would then say
   * the neighbour's pages with this one's. */
  long ps = sysconf(_SC_PAGESIZE);
  char *g = mmap(NULL, 32 * MiB + 2 * (size_t)ps, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (g == MAP_FAILED)
    return 1;
  char *p = g + ps;
  if (mprotect(p, 32 * MiB, PROT_READ | PROT_WRITE) != 0)
    return 1;
  memset(p, 7, 32 * MiB);
#ifdef MADV_FREE
  if (madvise(p + 8 * MiB, 16 * MiB, MADV_FREE) != 0)
    return 2;
#else
  return 2;
#endif
  char *sh = mmap(NULL, 8 * MiB, PROT_READ | PROT_WRITE,
                  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED)
    return 3;
  memset(sh, 9, 4 * MiB);
  prog_say("ready %d %lx %lx", (int)getpid(), (unsigned long)(uintptr_t)p,
           (unsigned long)(uintptr_t)sh);
  char c;
  while (read(0, &c, 1) > 0)
    ;
  return p[0] == 7 && sh[0] == 9 ? 0 : 1;
}
