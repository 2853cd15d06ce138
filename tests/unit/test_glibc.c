/*
 * test_glibc.c - the glibc provider (src/providers/glibc.c) against a
 * program that unmaps memory while it is sampled.
 *
 * To tell glibc's arena heaps, the sample looks at the first bytes of
 * every read-write anonymous mapping that starts on a 64 MiB boundary in
 * /proc/self/maps. The program's threads may unmap such a mapping between
 * the read of maps and that look: the look must then find nothing, not
 * fault (the target would die of SIGSEGV; a stress program did so in 2 of
 * 21 runs of 200000 snapshots). Kernels that align large anonymous
 * mappings (6.7 and later) give such boundaries out often.
 *
 * No timing is asserted: a thread maps and unmaps a region on a 64 MiB
 * boundary as fast as it can while this thread samples; on the old code
 * the process died within the loop.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include <cmocka.h>

#include "providers/provider_int.h"

#define M64 (64ul << 20)
#define SAMPLES 20000

static volatile int g_stop;
static volatile unsigned long g_flips;
static uintptr_t g_at; /* a free address on a 64 MiB boundary */

static void *flip(void *arg) {
  (void)arg;
  while (!g_stop) {
    void *p = mmap((void *)g_at, 4ul << 20, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == MAP_FAILED)
      continue;
    if (p != (void *)g_at) { /* a kernel before 4.17 took it as a hint */
      munmap(p, 4ul << 20);
      continue;
    }
    g_flips++;
    munmap(p, 4ul << 20);
  }
  return NULL;
}

/* The sample survives mappings that go away while it reads them, and
 * still gives its figures. */
static void test_sample_while_unmapping(void **state) {
  (void)state;
  if (!ms__provider_glibc.detect()) {
    print_message("skipped: no mallinfo2 (glibc before 2.33)\n");
    skip();
  }
  /* A 64 MiB boundary with nothing mapped there: reserve twice that,
   * keep the boundary, give the reservation back. */
  char *r = mmap(NULL, 2 * M64, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(r != MAP_FAILED);
  g_at = ((uintptr_t)r + M64 - 1) & ~(M64 - 1);
  assert_int_equal(munmap(r, 2 * M64), 0);

  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, flip, NULL), 0);
  static ms__pv_sample_t s;
  for (int i = 0; i < SAMPLES; i++) {
    memset(&s, 0, sizeof s);
    assert_int_equal(ms__provider_glibc.sample(&s, 0), 0);
    assert_int_equal(s.q[MS_F_HEAP_SYS], MS_Q_EXACT);
    assert_int_not_equal(s.q[MS_F_HEAP_RELEASED], MS_Q_UNAVAILABLE);
  }
  g_stop = 1;
  assert_int_equal(pthread_join(t, NULL), 0);
  print_message("%d samples while the region was mapped and unmapped %lu "
                "times\n",
                SAMPLES, g_flips);
  assert_true(g_flips > 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sample_while_unmapping),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
