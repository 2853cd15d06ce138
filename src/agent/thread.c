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

int ms__agent_thread_create(pthread_t *t, void *(*fn)(void *), void *arg) {
  pthread_attr_t attr;
  int r = pthread_attr_init(&attr);
  if (r == 0) {
    size_t size = MS__AGENT_STACK;
    long min = sysconf(_SC_THREAD_STACK_MIN);
    if (min > 0 && (size_t)min > size)
      size = (size_t)min;
    r = pthread_attr_setstacksize(&attr, size);
    if (r == 0)
      r = pthread_create(t, &attr, fn, arg);
    pthread_attr_destroy(&attr);
  }
  if (r == EINVAL)
    r = pthread_create(t, NULL, fn, arg);
  if (r == 0)
    ms__self_set_thread((uintptr_t)*t);
  return r;
}
