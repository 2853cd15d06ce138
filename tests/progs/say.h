/*
 * say.h - one line to stdout with a single write(2), for the target
 * programs the tests run under the preload: no stdio buffer, so a line is
 * never lost or split when the program forks, exits early or is killed.
 */
#ifndef MS_TESTS_PROGS_SAY_H
#define MS_TESTS_PROGS_SAY_H

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

__attribute__((format(printf, 1, 2), unused)) static void
prog_say(const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
  va_end(ap);
  if (n < 0)
    return;
  if ((size_t)n > sizeof buf - 2)
    n = (int)sizeof buf - 2;
  buf[n++] = '\n';
  ssize_t w = write(1, buf, (size_t)n);
  (void)w;
}

#endif
