/*
 * test_agent_thread.c - the agent's thread knows its stack as the
 * library's own from its first instruction (src/agent/thread.c), not only
 * once its creator returns from pthread_create: a creator that does not
 * run again for a while (a loaded machine) left the thread to make its
 * socket and serve a snapshot that counted its stack as the program's
 * (test_self: StackSys the main stack's 132 KiB plus the agent's 320 KiB).
 *
 * pthread_create is interposed here (the library's archive is linked into
 * this program, whose definition wins): after the real one, the creator
 * waits until the new thread has looked, so the creator loses that race
 * every time. No sleeping, no timing.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "agent/thread.h"
#include "core/self.h"

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *),
                         void *);

static int g_hold;      /* the creator waits for the thread's look */
static sem_t g_looked;  /* posted by the thread once it has looked */
static int g_own = -1;  /* whether its stack was the library's own then */
static void *g_got_arg; /* the argument the body was given */

int pthread_create(pthread_t *t, const pthread_attr_t *attr,
                   void *(*fn)(void *), void *arg) {
  create_fn real = (create_fn)dlsym(RTLD_NEXT, "pthread_create");
  if (real == NULL)
    return EAGAIN;
  int r = real(t, attr, fn, arg);
  if (r == 0 && g_hold)
    while (sem_wait(&g_looked) != 0 && errno == EINTR) {
    }
  return r;
}

/* The agent's body, as agent_main starts: is its own stack the library's
 * (the descriptor, pthread_self(), is what marks it)? */
static void *body(void *arg) {
  uintptr_t self = (uintptr_t)pthread_self();
  g_got_arg = arg;
  g_own = ms__self_stack(self, self + 1);
  sem_post(&g_looked);
  return NULL;
}

static void test_stack_own_before_creator_returns(void **state) {
  (void)state;
  static int token;
  pthread_t t;
  assert_int_equal(sem_init(&g_looked, 0, 0), 0);
  ms__self_set_thread(0);
  g_hold = 1;
  assert_int_equal(ms__agent_thread_create(&t, body, &token), 0);
  g_hold = 0;
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_int_equal(g_own, 1);
  assert_ptr_equal(g_got_arg, &token);
  /* And after: the creator's word agrees. */
  assert_true(ms__self_stack((uintptr_t)t, (uintptr_t)t + 1));
  sem_destroy(&g_looked);
  ms__self_set_thread(0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stack_own_before_creator_returns),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
