/*
 * thread.c - the agent's thread and its stack.
 *
 * Without attributes a thread's stack is the stack rlimit's size (8 MiB by
 * default, more with a larger `ulimit -s`), mapped whole: of a small
 * daemon's figures it was most of Prepared. The agent needs little: its
 * requests work in static buffers and in mappings of their own, never in
 * large frames.
 *
 * glibc takes the thread's static TLS (every loaded object's __thread
 * variables) out of the stack size asked for: a program with more static
 * TLS than the small stack holds gets EINVAL, and then the thread is made
 * with the default size, as before.
 */
#include <errno.h>
#include <stdint.h>
#include <unistd.h>

#include "agent/thread.h"
#include "core/self.h"

/* What the new thread runs, read by it before anything else (one agent
 * thread is made at a time: its creator waits for its setup). */
static void *(*g_fn)(void *);
static void *g_arg;

/* The thread's first step: its stack is the library's own from its first
 * instruction on, before it makes its socket and serves anything. Its
 * creator, told so only when pthread_create returns, may not run again
 * before the thread has served a snapshot (on a loaded machine): that
 * snapshot counted the agent's stack as a thread of the program's
 * (test_self: StackSys 452 KiB, the main stack 132 KiB and the agent's
 * 320 KiB; 6 runs in 150 at load 4-9). */
static void *agent_thread_start(void *arg) {
  (void)arg;
  void *(*fn)(void *) = __atomic_load_n(&g_fn, __ATOMIC_ACQUIRE);
  ms__self_set_thread((uintptr_t)pthread_self());
  return fn(g_arg);
}

int ms__agent_thread_create(pthread_t *t, void *(*fn)(void *), void *arg) {
  pthread_attr_t attr;
  g_arg = arg;
  __atomic_store_n(&g_fn, fn, __ATOMIC_RELEASE);
  int r = pthread_attr_init(&attr);
  if (r == 0) {
    size_t size = MS__AGENT_STACK;
    long min = sysconf(_SC_THREAD_STACK_MIN);
    if (min > 0 && (size_t)min > size)
      size = (size_t)min;
    r = pthread_attr_setstacksize(&attr, size);
    if (r == 0)
      r = pthread_create(t, &attr, agent_thread_start, NULL);
    pthread_attr_destroy(&attr);
  }
  if (r == EINVAL)
    r = pthread_create(t, NULL, agent_thread_start, NULL);
  if (r == 0)
    ms__self_set_thread((uintptr_t)*t);
  return r;
}
