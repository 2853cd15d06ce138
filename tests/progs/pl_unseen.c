/*
 * pl_unseen.c - memory a program obtains outside malloc, for
 * tests/integration/test_unseen.c: a heap of mixed blocks through malloc,
 * a buffer and a pool the program maps itself (one touched in part, one
 * mapped and then partly unmapped and handed back), and threads whose
 * stacks hold touched frames. Says "ready" once all of it is in place,
 * then waits for its stdin to close. Built twice: on glibc (pl_unseen) and
 * linked with jemalloc (pl_unseen_je).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "say.h"

#define NTHREADS 4
#define MiB (1024u * 1024u)

static pthread_barrier_t g_ready, g_end;

static void *thread_main(void *arg) {
  /* 256 KiB of this thread's stack touched. */
  volatile char frame[256 * 1024];
  /* Written through the volatile array itself: a memset through a cast
   * lets clang drop the stores, and with them the touched pages. */
  for (size_t i = 0; i < sizeof frame; i += 64)
    frame[i] = (char)(long)arg;
  pthread_barrier_wait(&g_ready);
  pthread_barrier_wait(&g_end);
  return (void *)(long)frame[100];
}

int main(void) {
  /* The heap: 40 MiB of mixed blocks, every other one freed. */
  enum { N = 40000 };
  static char *blocks[N];
  for (int i = 0; i < N; i++) {
    size_t n = 64 + (size_t)(i % 97) * 21;
    blocks[i] = malloc(n);
    if (!blocks[i])
      return 1;
    memset(blocks[i], 1, n);
  }
  for (int i = 0; i < N; i += 2) {
    free(blocks[i]);
    blocks[i] = NULL;
  }
  char *big = malloc(32 * MiB);
  if (!big)
    return 1;
  memset(big, 2, 32 * MiB);

  /* A buffer of 64 MiB mapped by the program, 24 MiB of it touched. */
  char *buf = mmap(NULL, 64 * MiB, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (buf == MAP_FAILED)
    return 1;
  memset(buf, 3, 24 * MiB);
  /* A pool of 32 MiB: touched, its middle 8 MiB unmapped (two pieces
   * left), and 4 MiB of the rest handed back. */
  char *pool = mmap(NULL, 32 * MiB, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (pool == MAP_FAILED)
    return 1;
  memset(pool, 4, 32 * MiB);
  munmap(pool + 12 * MiB, 8 * MiB);
  madvise(pool + 24 * MiB, 4 * MiB, MADV_DONTNEED);
  /* A grown mapping (mremap) keeps its place in the count. */
  char *grown = mmap(NULL, 4 * MiB, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (grown == MAP_FAILED)
    return 1;
  grown = mremap(grown, 4 * MiB, 16 * MiB, MREMAP_MAYMOVE);
  if (grown == MAP_FAILED)
    return 1;
  memset(grown, 5, 16 * MiB);

  pthread_t t[NTHREADS];
  pthread_barrier_init(&g_ready, NULL, NTHREADS + 1);
  pthread_barrier_init(&g_end, NULL, NTHREADS + 1);
  for (long i = 0; i < NTHREADS; i++)
    if (pthread_create(&t[i], NULL, thread_main, (void *)(i + 1)) != 0)
      return 1;
  pthread_barrier_wait(&g_ready);
  prog_say("ready %d", (int)getpid());

  char c;
  while (read(0, &c, 1) > 0)
    ;
  pthread_barrier_wait(&g_end);
  for (int i = 0; i < NTHREADS; i++)
    pthread_join(t[i], NULL);
  return big[5] + buf[5] + pool[5] + grown[5] == 14 ? 0 : 1;
}
