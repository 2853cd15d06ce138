/*
 * run.c - finding the preload library and preparing the environment for
 * `memtop run` (see run.h).
 */
#include "memtop/run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memstats.h"

/* Copies the directory part of `path` into dir ("." when there is none). */
static void dir_of(const char *path, char *dir, size_t len) {
  const char *slash = strrchr(path, '/');

  if (slash == NULL) {
    snprintf(dir, len, ".");
    return;
  }
  if (slash == path)
    slash++; /* "/memtop": the directory is "/" */
  snprintf(dir, len, "%.*s", (int)(slash - path), path);
}

/* Where `make install` put the preload (PRELOADDIR, passed by the
 * Makefile): a directory of its own under LIBDIR, since the preload carries
 * libmemstats' soname; /usr/local/lib/memtop by default, under /usr/lib64
 * or a multiarch directory such as /usr/lib/x86_64-linux-gnu when a
 * packager sets LIBDIR. */
#ifndef MT_PRELOAD_DIR
#define MT_PRELOAD_DIR "/usr/local/lib/memtop"
#endif

int mt_run_find_preload(const char *exe, const char *override, char *out,
                        size_t len, char *err, size_t errlen) {
  return mt_run_find_preload_in(exe, override, MT_PRELOAD_DIR, out, len, err,
                                errlen);
}

int mt_run_find_serve(const char *exe, char *out, size_t len, char *err,
                      size_t errlen) {
  return mt_run_find_private(exe, MT_SERVE_NAME, X_OK, MT_PRELOAD_DIR, out, len,
                             err, errlen);
}

int mt_run_find_preload_in(const char *exe, const char *override,
                           const char *libdir, char *out, size_t len, char *err,
                           size_t errlen) {
  int n;

  if (override != NULL && override[0] != '\0') {
    if (access(override, R_OK) != 0) {
      snprintf(err, errlen,
               "MEMTOP_PRELOAD=%s: no such readable file (unset it to use "
               "the library installed with memtop)",
               override);
      return MS_ENOENT;
    }
    n = snprintf(out, len, "%s", override);
    return n < 0 || (size_t)n >= len ? MS_EINVAL : 0;
  }
  return mt_run_find_private(exe, MT_PRELOAD_NAME, R_OK, libdir, out, len, err,
                             errlen);
}

int mt_run_find_private(const char *exe, const char *name, int mode,
                        const char *libdir, char *out, size_t len, char *err,
                        size_t errlen) {
  char dir[4096], cand[3][4096 + 64];
  int i, n, ncand = 2;

  dir_of(exe != NULL ? exe : "", dir, sizeof dir);
  /* The build tree puts memtop and its private files side by side; an
   * install puts memtop in $PREFIX/bin and them in $PREFIX/lib/memtop (found
   * relative to the binary, so a staged or moved install finds its own), or
   * in the directory it was configured with (lib64, multiarch). */
  snprintf(cand[0], sizeof cand[0], "%s/%s", dir, name);
  snprintf(cand[1], sizeof cand[1], "%s/../lib/memtop/%s", dir, name);
  if (libdir != NULL && libdir[0] != '\0')
    snprintf(cand[ncand++], sizeof cand[2], "%s/%s", libdir, name);
  for (i = 0; i < ncand; i++) {
    if (access(cand[i], mode) == 0) {
      n = snprintf(out, len, "%s", cand[i]);
      return n < 0 || (size_t)n >= len ? MS_EINVAL : 0;
    }
  }
  snprintf(err, errlen,
           "cannot find %s (looked for %s, %s%s%s): install memtop with "
           "`make install`%s",
           name, cand[0], cand[1], ncand > 2 ? " and " : "",
           ncand > 2 ? cand[2] : "",
           strcmp(name, MT_PRELOAD_NAME) == 0
               ? ", or set MEMTOP_PRELOAD to the library's path"
               : "");
  return MS_ENOENT;
}

/* Nonzero if the LD_PRELOAD list `list` (separated by ':' or blanks, as
 * ld.so reads it) already holds `path`. */
static int preload_has(const char *list, const char *path) {
  size_t plen = strlen(path), n;
  const char *p = list;

  while (*p != '\0') {
    p += strspn(p, ": \t");
    n = strcspn(p, ": \t");
    if (n == plen && strncmp(p, path, n) == 0)
      return 1;
    p += n;
  }
  return 0;
}

char **mt_run_env(char *const *env, const char *preload) {
  static const char key[] = "LD_PRELOAD=";
  size_t n = 0, i, j = 0, klen = sizeof key - 1;
  const char *old = NULL;
  char **out, *entry;
  size_t elen;

  while (env != NULL && env[n] != NULL)
    n++;
  /* Room for LD_PRELOAD and the final-snapshot entries (mt_run_env_final). */
  out = calloc(n + 2 + MT_RUN_ENV_EXTRA, sizeof *out);
  if (out == NULL)
    return NULL;
  for (i = 0; i < n; i++)
    if (strncmp(env[i], key, klen) == 0 && old == NULL)
      old = env[i] + klen;
  /* Ours goes first, so that the tracking malloc wraps whatever allocator
   * an earlier preload (jemalloc, tcmalloc) brings. */
  if (old != NULL && old[0] != '\0' && !preload_has(old, preload))
    elen = klen + strlen(preload) + 1 + strlen(old) + 1;
  else if (old != NULL && old[0] != '\0')
    elen = klen + strlen(old) + 1;
  else
    elen = klen + strlen(preload) + 1;
  entry = malloc(elen);
  if (entry == NULL) {
    free(out);
    return NULL;
  }
  if (old != NULL && old[0] != '\0' && !preload_has(old, preload))
    snprintf(entry, elen, "%s%s:%s", key, preload, old);
  else if (old != NULL && old[0] != '\0')
    snprintf(entry, elen, "%s%s", key, old);
  else
    snprintf(entry, elen, "%s%s", key, preload);
  out[j++] = entry;
  for (i = 0; i < n; i++)
    if (strncmp(env[i], key, klen) != 0)
      out[j++] = env[i];
  out[j] = NULL;
  return out;
}

void mt_run_env_final(char **env, char *fd_entry, char *ppid_entry) {
  static const char prefix[] = "MEMSTATS_FINAL_";
  size_t i, j = 0;

  /* A memtop run inside a memtop run: the inner command's channel is the
   * inner memtop's, and a stale MEMSTATS_FINAL_PID would silence it. */
  for (i = 0; env[i] != NULL; i++)
    if (strncmp(env[i], prefix, sizeof prefix - 1) != 0)
      env[j++] = env[i];
  env[j++] = fd_entry;
  env[j++] = ppid_entry;
  env[j] = NULL;
}

void mt_run_env_free(char **env) {
  if (env == NULL)
    return;
  free(env[0]); /* the one string we made; the rest are borrowed */
  free(env);
}

int mt_run_exit_status(long exit_status, int term_signal) {
  if (term_signal > 0)
    return 128 + term_signal;
  return (int)(exit_status & 0xff);
}
