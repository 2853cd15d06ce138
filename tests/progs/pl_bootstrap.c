/*
 * pl_bootstrap.c - the preload's bootstrap buffer, reached from a program:
 * the allocation functions the preload serves from its static buffer while
 * it looks up the next allocator (tests/integration/test_preload.c).
 *
 * The program defines malloc itself (forwarding to glibc's __libc_malloc),
 * so the preload calls it while it resolves, on the thread that resolves
 * (its probe of whose malloc the program calls: malloc(16)), where the
 * preload's own entry points answer from the bootstrap buffer. On each of
 * its first calls of 16 bytes this malloc asks pvalloc(1) until the
 * bootstrap serves it (its block lies in the preload's own image:
 * dladdr); there it asks pvalloc of a size within a page of SIZE_MAX,
 * which must fail with ENOMEM rather than wrap to 0 bytes.
 * Then, from main, the preload's malloc_usable_size and free (twice) of
 * that block: 4096 (pvalloc's page), and a free that leaves it alone,
 * with a block of the preload's malloc live meanwhile (sampled, with
 * MEMSTATS_PROFILE_RATE=1: then free on jemalloc finds the bootstrap
 * block in the profile's filter, src/preload/malloc.c).
 * Prints "boot=B", "huge_null=N", "huge_errno=E", "boot_usable=U" and
 * "boot_freed=1" lines, and exits 0.
 */
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern void *__libc_malloc(size_t n);
extern void __libc_free(void *p);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t size);

/* The rest of a replacement malloc (glibc asks for the four): glibc's. */
void free(void *p) {
  __libc_free(p);
}
void *calloc(size_t n, size_t size) {
  return __libc_calloc(n, size);
}
void *realloc(void *p, size_t size) {
  return __libc_realloc(p, size);
}

static int g_tries = 64, g_boot, g_huge_null = -1, g_huge_errno = -1;
static void *g_small; /* the bootstrap block, once served */

void *malloc(size_t n) {
  if (n == 16 && !g_boot && g_tries > 0) {
    g_tries--;
    int saved = errno;
    void *small = pvalloc(1);
    Dl_info d;
    g_boot = small && dladdr(small, &d) && d.dli_fname &&
             strstr(d.dli_fname, "libmemstats-preload") != NULL;
    if (!g_boot) {
      __libc_free(small);
      errno = saved;
      return __libc_malloc(n);
    }
    g_small = small;
    errno = 0;
    /* Volatile: the compiler may not assume what pvalloc does with it. */
    volatile size_t huge = SIZE_MAX - 100;
    void *p = pvalloc(huge);
    g_huge_null = p == NULL;
    g_huge_errno = errno;
    errno = saved;
  }
  return __libc_malloc(n);
}

int main(void) {
  printf("boot=%d\nhuge_null=%d\nhuge_errno=%d\n", g_boot, g_huge_null,
         g_huge_errno);
  /* The preload's own functions (next after this program's) on the
   * bootstrap block, once the next allocator is known: its size, and a
   * free that must leave it alone (never give it to glibc). */
  size_t (*usable)(void *) =
      (size_t(*)(void *))dlsym(RTLD_NEXT, "malloc_usable_size");
  void (*pfree)(void *) = (void (*)(void *))dlsym(RTLD_NEXT, "free");
  void *(*pmalloc)(size_t) = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
  if (g_small && usable && pfree && pmalloc) {
    printf("boot_usable=%zu\n", usable(g_small));
    void *live = pmalloc(100);
    pfree(g_small);
    pfree(g_small);
    pfree(live);
    printf("boot_freed=1\n");
  }
  return 0;
}
