/*
 * golden.h - test helper: output pinned byte for byte by a file under
 * tests/data/golden/. MS_UPDATE_GOLDEN=1 rewrites the files from the
 * output instead (review the diff, then commit it). Include after
 * <cmocka.h>; header only, like the other helpers here.
 */
#ifndef MS_TESTS_SUPPORT_GOLDEN_H
#define MS_TESTS_SUPPORT_GOLDEN_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/govec.h"

/* The whole file, NUL-terminated, its length in *len; NULL if it cannot be
 * read (errno says why). The caller frees it. */
static inline char *golden_read(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (f == NULL)
    return NULL;
  size_t cap = 4096, n = 0, got;
  char *buf = malloc(cap);
  while (buf != NULL && (got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
    n += got;
    if (cap - n - 1 == 0) {
      char *nb = realloc(buf, cap * 2);
      if (nb == NULL)
        free(buf);
      buf = nb;
      cap *= 2;
    }
  }
  fclose(f);
  if (buf == NULL)
    return NULL;
  buf[n] = '\0';
  *len = n;
  return buf;
}

/* Compares got (len bytes) with tests/data/golden/<name>; on a difference,
 * shows the first line that differs (and the whole output when it is
 * short enough to read) and fails the test. */
static inline void golden_check(const char *name, const char *got,
                                size_t got_len) {
  char path[1024];
  snprintf(path, sizeof path, "%s/golden/%s", govec_data_dir(), name);
  const char *update = getenv("MS_UPDATE_GOLDEN");
  if (update != NULL && strcmp(update, "1") == 0) {
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(got, 1, got_len, f) != got_len || fclose(f) != 0)
      fail_msg("cannot write %s: %s", path, strerror(errno));
    print_message("updated %s\n", path);
    return;
  }
  size_t want_len = 0;
  char *want = golden_read(path, &want_len);
  if (want == NULL)
    fail_msg("cannot read golden file %s (%s): run from the source root, or "
             "write it with MS_UPDATE_GOLDEN=1 after checking the output",
             path, strerror(errno));
  if (want_len != got_len || memcmp(want, got, got_len) != 0) {
    /* Point at the first line that differs. */
    size_t i = 0, line = 1, start = 0;
    while (i < want_len && i < got_len && want[i] == got[i]) {
      if (want[i] == '\n') {
        line++;
        start = i + 1;
      }
      i++;
    }
    const char *we = memchr(want + start, '\n', want_len - start);
    const char *ge = memchr(got + start, '\n', got_len - start);
    int wl = (int)((we ? (size_t)(we - want) : want_len) - start);
    int gl = (int)((ge ? (size_t)(ge - got) : got_len) - start);
    print_error("%s line %zu differs:\n  want: %.*s\n  got:  %.*s\n", path,
                line, wl > 300 ? 300 : wl, want + start, gl > 300 ? 300 : gl,
                got + start);
    if (got_len <= 16384)
      print_error("whole output:\n%.*s\n", (int)got_len, got);
    free(want);
    fail_msg("output differs from %s (MS_UPDATE_GOLDEN=1 rewrites it)", path);
  }
  free(want);
}

#endif
