/*
 * rt_prof.c - a program that links libmemstats (no preload) and reports
 * the objects of its own allocator with their addresses
 * (ms_object_alloc_at / ms_object_free_at), for the heap profile of a
 * linked program (tests/integration/test_linked_profile.c).
 *
 * The allocator is a bump arena with one free list (objects of one size):
 * arena_alloc() takes from the free list first, and arena_free() reports
 * the free before the object goes back on the list. Known sites, in this
 * order:
 *
 *   f_big     holds 3 * N objects of SIZE bytes
 *   f_small   holds N
 *   f_freed   allocates N and frees them all (last: no address it gave
 *             back is handed out again, so only ms_object_free_at can
 *             end their samples)
 *
 * It starts its agent, says "ready PID", and waits for stdin to close.
 *
 *   rt_prof pairs N      reports N objects allocated and freed, one at a
 *   rt_prof pairs_at N   time, with ms_object_alloc/free or with the _at
 *                        calls, and exits (no agent): what a pair costs,
 *                        counted in instructions by callgrind
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memstats.h"
#include "progs/say.h"

#define N 16
#define SIZE 1000

#if defined(__clang__)
#define NOINLINE __attribute__((noinline, used))
#else
#define NOINLINE __attribute__((noinline, noclone, used))
#endif

static _Alignas(16) unsigned char g_arena[5 * N * SIZE];
static size_t g_bump;
static void *g_free_list;

/* The allocator's entry points: the innermost frame of every sample. */
NOINLINE static void *arena_alloc(void) {
  void *p = g_free_list;
  if (p != NULL) {
    memcpy(&g_free_list, p, sizeof g_free_list);
  } else {
    if (g_bump + SIZE > sizeof g_arena)
      return NULL;
    p = g_arena + g_bump;
    g_bump += SIZE;
  }
  ms_object_alloc_at(p, SIZE);
  return p;
}

NOINLINE static void arena_free(void *p) {
  ms_object_free_at(p, SIZE);
  memcpy(p, &g_free_list, sizeof g_free_list);
  g_free_list = p;
}

/* Exported and volatile: the compiler may not drop what is kept. */
extern void *volatile g_keep[4 * N];
void *volatile g_keep[4 * N];
static int g_nkeep;

NOINLINE static void f_big(void) {
  for (int i = 0; i < 3 * N; i++)
    g_keep[g_nkeep++] = arena_alloc();
  __asm__ volatile("");
}

NOINLINE static void f_freed(void) {
  void *volatile p[N];
  for (int i = 0; i < N; i++)
    p[i] = arena_alloc();
  for (int i = 0; i < N; i++)
    arena_free(p[i]);
  __asm__ volatile("");
}

NOINLINE static void f_small(void) {
  for (int i = 0; i < N; i++)
    g_keep[g_nkeep++] = arena_alloc();
  __asm__ volatile("");
}

/* The address of each object, as an allocator would pass it. */
static unsigned char g_slots[64];

NOINLINE static void pairs(long n, int at) {
  for (long i = 0; i < n; i++) {
    void *p = &g_slots[i & 63];
    if (at) {
      ms_object_alloc_at(p, 48);
      ms_object_free_at(p, 48);
    } else {
      ms_object_alloc(48);
      ms_object_free(48);
    }
    __asm__ volatile("" ::"r"(p));
  }
}

int main(int argc, char **argv) {
  char buf[64];
  if (argc == 3 && strncmp(argv[1], "pairs", 5) == 0) {
    pairs(atol(argv[2]), strcmp(argv[1], "pairs_at") == 0);
    return 0;
  }
  int rc = ms_agent_start();
  if (rc != 0) {
    prog_say("agent-error %d", rc);
    return 1;
  }
  f_big();
  f_small();
  f_freed();
  prog_say("ready %d", (int)getpid());
  while (read(0, buf, sizeof buf) > 0) {
  }
  ms_agent_stop();
  return 0;
}
