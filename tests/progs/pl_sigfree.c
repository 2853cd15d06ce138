/*
 * pl_sigfree.c - frees from a signal handler that interrupts frees, run
 * under the preload on tests/progs/libfakeje.c (LD_PRELOAD=preload:
 * libfakeje.so), where the preload measures each free by the
 * allocator's per-thread counter of freed bytes. A second thread sends
 * the main thread SIGUSR1 as fast as it can while the main thread churns
 * a ring of blocks; the handler churns a ring of its own. At the end the
 * snapshot's HeapAlloc must be exactly the live blocks' usable sizes and
 * still be marked exact.
 *
 * Prints key=value lines (tests/integration/test_preload.c reads them):
 * signals, nested (handler frees that interrupted a free), live,
 * live_usable, storm.* deltas, heap_alloc_exact.
 */
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>

#include "pl_snap.h"

#define RING 256
#define HRING 64
#define ITERS 300000L
#define MAX_SIGNALS 30000
#define MAX_ITERS 2000000000L

static void *ring[RING];
static void *hring[HRING];
static volatile sig_atomic_t hcount;
static int stop;
static pthread_t main_thread;
static long signals_sent;
static int sender_done;

static size_t size_at(uint32_t i) {
  uint32_t x = i * 2654435761u;
  x ^= x >> 15;
  return (x & 3) ? 1 + x % 120 : 120 + x % 900;
}

static void on_signal(int sig) {
  (void)sig;
  unsigned k = (unsigned)hcount % HRING;
  free(hring[k]);
  hring[k] = malloc(size_at((uint32_t)hcount + 7));
  hcount = hcount + 1;
}

static void *sender(void *arg) {
  (void)arg;
  /* One signal at a time, each sent once the previous one was handled:
   * the main thread keeps running between them. */
  while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE) &&
         signals_sent < MAX_SIGNALS) {
    sig_atomic_t seen = hcount;
    pthread_kill(main_thread, SIGUSR1);
    signals_sent++;
    while (hcount == seen && !__atomic_load_n(&stop, __ATOMIC_ACQUIRE))
      __asm__ volatile("pause");
  }
  __atomic_store_n(&sender_done, 1, __ATOMIC_RELEASE);
  return NULL;
}

int main(int argc, char **argv) {
  long iters = argc > 1 ? atol(argv[1]) : ITERS;
  int no_signals = argc > 2;
  pl_say("preload=%d", pl_snap_init());
  uint64_t (*nested)(void) =
      (uint64_t(*)(void))dlsym(RTLD_DEFAULT, "fakeje_nested_frees");
  if (!nested) {
    pl_say("error=not running on libfakeje.so");
    return 1;
  }
  main_thread = pthread_self();
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &sa, NULL);
  sigset_t usr1;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  /* The sender is started before the first snapshot and joined after the
   * last: what creating and joining it allocates is outside the deltas. */
  pthread_sigmask(SIG_BLOCK, &usr1, NULL);
  pthread_t t;
  if (no_signals)
    stop = 1;
  if (pthread_create(&t, NULL, sender, NULL) != 0)
    return 1;
  static ms_snapshot_t s0, s1;
  pl_snap(&s0); /* the first one sets up what snapshots keep */
  pl_snap(&s0);
  for (int i = 0; i < HRING; i++)
    hring[i] = malloc(size_at((uint32_t)i + 100000));
  for (int i = 0; i < RING; i++)
    ring[i] = malloc(size_at((uint32_t)i));
  pthread_sigmask(SIG_UNBLOCK, &usr1, NULL);
  /* At least iters pairs, and on until every signal was sent and handled
   * (however slowly this machine delivers them), within a bound that only
   * a stuck sender reaches. */
  for (long i = 0;
       i < iters || !__atomic_load_n(&sender_done, __ATOMIC_ACQUIRE); i++) {
    unsigned k = (unsigned)i % RING;
    free(ring[k]);
    ring[k] = malloc(size_at((uint32_t)i + RING));
    if (i > MAX_ITERS)
      break;
  }
  pthread_sigmask(SIG_BLOCK, &usr1, NULL);
  __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
  uint64_t live_usable = 0;
  for (int i = 0; i < RING; i++)
    live_usable += malloc_usable_size(ring[i]);
  for (int i = 0; i < HRING; i++)
    live_usable += malloc_usable_size(hring[i]);
  pl_snap(&s1);
  pthread_join(t, NULL);
  pl_say("signals=%ld", (long)hcount);
  pl_say("nested=%llu", (unsigned long long)nested());
  pl_say("live=%d", RING + HRING);
  pl_say("live_usable=%llu", (unsigned long long)live_usable);
  pl_say_delta("storm", &s0, &s1);
  pl_say("heap_alloc_exact=%d", s1.quality[MS_F_HEAP_ALLOC] == MS_Q_EXACT);
  return 0;
}
