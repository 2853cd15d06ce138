/*
 * util.c - clocks, the page size, the one mincore walker and the
 * library's only way to speak (MEMSTATS_DEBUG).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "common/env.h"
#include "core/util.h"

size_t ms__page_size(void) {
  static size_t cached;
  size_t ps = __atomic_load_n(&cached, __ATOMIC_RELAXED);
  if (!ps) {
    long v = sysconf(_SC_PAGESIZE);
    ps = v > 0 ? (size_t)v : 4096;
    __atomic_store_n(&cached, ps, __ATOMIC_RELAXED);
  }
  return ps;
}

uint64_t ms__resident(uintptr_t start, uintptr_t end, uint64_t *mapped) {
  static unsigned char vec[65536];
  uintptr_t ps = ms__page_size();
  uint64_t res = 0, seen = 0;
  for (uintptr_t p = start; p < end;) {
    uintptr_t n = (end - p) / ps;
    if (n > sizeof vec)
      n = sizeof vec;
    if (n == 0)
      break;
    if (mincore((void *)p, n * ps, vec) == 0) {
      for (uintptr_t i = 0; i < n; i++)
        res += vec[i] & 1;
      seen += n * ps;
    }
    p += n * ps;
  }
  if (mapped)
    *mapped = seen;
  return res * ps;
}

uint64_t ms__now_mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t ms__now_unix_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The library lives inside other people's programs: it says nothing unless
 * MEMSTATS_DEBUG=1, and then only with one write(2) per message, formatted
 * on the stack (no stdio buffers, no allocation). */
void ms__debug(const char *fmt, ...) {
  if (!ms__env_is_1("MEMSTATS_DEBUG"))
    return;
  char buf[512];
  int n = snprintf(buf, sizeof buf, "libmemstats[%d]: ", (int)getpid());
  if (n < 0 || (size_t)n >= sizeof buf - 2)
    return; /* never: the prefix is short, but no step is trusted */
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
  va_end(ap);
  if (m < 0)
    return;
  size_t len = (size_t)n + (size_t)m;
  if (len > sizeof buf - 2)
    len = sizeof buf - 2;
  buf[len++] = '\n';
  ssize_t w = write(2, buf, len);
  (void)w;
}
