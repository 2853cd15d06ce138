/*
 * test_wake_status.c - the live view's status line for the processes of
 * a followed tree that could not be woken (src/memtop/wake.c,
 * mt_wake_fail_status): a second failure does not overwrite the first,
 * the line counts them and keeps the first's and the last's reasons, and
 * stays within the status line.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "memtop/wake.h"
#include "tui/model.h"

static void test_one_then_more(void **state) {
  mt_model_t *m = calloc(1, sizeof *m);
  mt_wake_fails_t f;

  (void)state;
  assert_non_null(m);
  memset(&f, 0, sizeof f);
  mt_wake_fail_status(&f, 12, "process 12 (w) is stopped", m->status,
                      sizeof m->status);
  assert_string_equal(m->status, "PID 12 not woken: process 12 (w) is stopped");
  mt_wake_fail_status(&f, 14, "every thread of process 14 was busy", m->status,
                      sizeof m->status);
  assert_string_equal(m->status,
                      "2 processes not woken: PID 12: process 12 (w) is "
                      "stopped; PID 14: every thread of process 14 was busy");
  mt_wake_fail_status(&f, 16, "no process 16", m->status, sizeof m->status);
  assert_string_equal(m->status,
                      "3 processes not woken: PID 12: process 12 (w) is "
                      "stopped; PID 16: no process 16 (and 1 more)");
  free(m);
}

/* Long reasons (an attach's refusals run to 300 bytes): both PIDs and the
 * count still fit in the status line. */
static void test_long_reasons_fit(void **state) {
  char status[sizeof((mt_model_t *)0)->status], words[1024];
  mt_wake_fails_t f;

  (void)state;
  memset(&f, 0, sizeof f);
  memset(words, 'x', sizeof words - 1);
  words[sizeof words - 1] = '\0';
  mt_wake_fail_status(&f, 2000000001, words, status, sizeof status);
  assert_non_null(strstr(status, "PID 2000000001 not woken: xxx"));
  for (int i = 0; i < 3; i++)
    mt_wake_fail_status(&f, 2000000002 + i, words, status, sizeof status);
  assert_true(strlen(status) < sizeof status - 1);
  assert_non_null(strstr(status, "4 processes not woken: PID 2000000001: x"));
  assert_non_null(strstr(status, "; PID 2000000004: x"));
  assert_non_null(strstr(status, "x (and 2 more)"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_one_then_more),
      cmocka_unit_test(test_long_reasons_fit),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
