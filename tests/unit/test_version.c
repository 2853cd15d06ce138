/*
 * test_version.c - the version is written once: include/memstats.h's
 * MS_VERSION_MAJOR/MINOR/PATCH, and MS_VERSION_STRING spelling the same
 * three numbers. The Makefile reads its VERSION (the installed library's
 * file name, memstats.pc's Version) from the header and passes it here as
 * MS_TEST_VERSION; the library's ms_version_string() is the header's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "memstats.h"

#ifndef MS_TEST_VERSION
#error "the Makefile passes MS_TEST_VERSION (its VERSION) to the tests"
#endif

/* The string spells the numbers. */
static void test_string_is_the_numbers(void **state) {
  char want[64];

  (void)state;
  snprintf(want, sizeof want, "%d.%d.%d", MS_VERSION_MAJOR, MS_VERSION_MINOR,
           MS_VERSION_PATCH);
  assert_string_equal(MS_VERSION_STRING, want);
}

/* The Makefile's VERSION is the header's, and so is the library's. */
static void test_one_version(void **state) {
  (void)state;
  assert_string_equal(MS_TEST_VERSION, MS_VERSION_STRING);
  assert_string_equal(ms_version_string(), MS_VERSION_STRING);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_string_is_the_numbers),
      cmocka_unit_test(test_one_version),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
