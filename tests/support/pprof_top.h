/*
 * pprof_top.h - test helper: what the real `go tool pprof -top` reads in
 * a profile file, in exact bytes (-unit=B), and one function's flat and
 * cum figures from its list. Header only, like the other helpers here.
 */
#ifndef MS_TESTS_SUPPORT_PPROF_TOP_H
#define MS_TESTS_SUPPORT_PPROF_TOP_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

/* Runs `go tool pprof -top -unit=B -nodefraction=0` on file for the
 * sample type sample_index (NULL: the profile's default), with HOME and
 * GOCACHE under home (a scratch directory of the test's), into out (len
 * bytes, NUL-terminated). Returns pprof's exit status, or -1. */
static inline int pprof_top(const char *file, const char *sample_index,
                            const char *home, char *out, size_t len) {
  char cmd[4096];
  size_t n = 0, r;
  snprintf(cmd, sizeof cmd,
           "HOME='%s' GOCACHE='%s/gocache' go tool pprof -top -unit=B "
           "-symbolize=none -nodefraction=0 %s%s '%s' 2>&1",
           home, home, sample_index != NULL ? "-sample_index=" : "",
           sample_index != NULL ? sample_index : "", file);
  FILE *p = popen(cmd, "r");
  if (p == NULL)
    return -1;
  while (n < len - 1 && (r = fread(out + n, 1, len - 1 - n, p)) > 0)
    n += r;
  out[n] = '\0';
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* One figure of a -top line ("48000B", "0", "64"): its value; end set
 * past it. */
static inline long long pprof_top_figure(const char *s, const char **end) {
  char *e;
  long long v = strtoll(s, &e, 10);
  if (*e == 'B')
    e++;
  *end = e;
  return v;
}

/* The flat and cum figures of function fn in pprof_top's output (the
 * line "FLAT FLAT% SUM% CUM CUM% fn"). Returns 0, or -1 when fn has no
 * line (pprof leaves out a function with nothing in the sample type). */
static inline int pprof_top_values(const char *top, const char *fn,
                                   long long *flat, long long *cum) {
  size_t fl = strlen(fn);
  for (const char *p = top; p != NULL && *p != '\0';) {
    size_t n = strcspn(p, "\n");
    /* The name ends the line, after two spaces. */
    if (n > fl + 2 && memcmp(p + n - fl, fn, fl) == 0 &&
        memcmp(p + n - fl - 2, "  ", 2) == 0) {
      const char *q = p;
      *flat = pprof_top_figure(q, &q);
      strtod(q, (char **)&q); /* flat% */
      q += *q == '%';
      strtod(q, (char **)&q); /* sum% */
      q += *q == '%';
      *cum = pprof_top_figure(q, &q);
      return 0;
    }
    p += n + (p[n] == '\n');
  }
  return -1;
}

#endif
