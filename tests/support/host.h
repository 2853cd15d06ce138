/*
 * host.h - test and benchmark helper: where this build is, which preload
 * the target programs get, and what the machine has installed. Header
 * only, like the other helpers here: every test is one C file.
 */
#ifndef MS_TESTS_SUPPORT_HOST_H
#define MS_TESTS_SUPPORT_HOST_H

#include <elf.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* $BUILD: the parent of the directory this binary is in ($BUILD/tests,
 * $BUILD/bench). Returns 0, or -1 if it cannot be told. */
static inline int host_build_dir(char *buf, size_t len) {
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0)
    return -1;
  exe[n] = '\0';
  for (int i = 0; i < 2; i++) {
    char *slash = strrchr(exe, '/');
    if (!slash)
      return -1;
    *slash = '\0';
  }
  size_t l = strlen(exe);
  if (l >= len)
    return -1;
  memcpy(buf, exe, l + 1);
  return 0;
}

/* The preload to give the uninstrumented target programs: under a
 * sanitizer the build's own is instrumented and cannot load into them,
 * and the build keeps a plain one in $BUILD/plain (tests/progs/progs.mk);
 * else the build's own. Returns 0, or -1 if that file is not there. */
static inline int host_preload_path(const char *build, char *buf, size_t len) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  snprintf(buf, len, "%s/plain/libmemstats-preload.so", build);
  if (access(buf, R_OK) == 0)
    return 0;
#endif
  snprintf(buf, len, "%s/libmemstats-preload.so", build);
  return access(buf, R_OK) == 0 ? 0 : -1;
}

/* Whether an executable `name` is in $PATH. */
static inline int host_have_program(const char *name) {
  const char *path = getenv("PATH");
  if (!path)
    return 0;
  char buf[4096];
  const char *p = path;
  while (*p) {
    const char *colon = strchr(p, ':');
    size_t len = colon ? (size_t)(colon - p) : strlen(p);
    snprintf(buf, sizeof buf, "%.*s/%s", (int)len, p, name);
    if (access(buf, X_OK) == 0)
      return 1;
    if (!colon)
      break;
    p = colon + 1;
  }
  return 0;
}

/* Whether the library `name` is in one of the loader's usual directories:
 * looked for, not loaded (a malloc debugging library must not come into
 * this process); LD_PRELOAD of a missing one only warns, and a run would
 * then measure glibc under another allocator's name. */
static inline int host_have_library(const char *name) {
  static const char *const dirs[] = {"/lib/x86_64-linux-gnu",
                                     "/usr/lib/x86_64-linux-gnu",
                                     "/lib/aarch64-linux-gnu",
                                     "/usr/lib/aarch64-linux-gnu",
                                     "/lib64",
                                     "/usr/lib64",
                                     "/lib",
                                     "/usr/lib"};
  char path[4096];
  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
    snprintf(path, sizeof path, "%s/%s", dirs[i], name);
    if (access(path, R_OK) == 0)
      return 1;
  }
  return 0;
}

/* The GNU build id among a loaded object's PT_NOTE segments (as
 * dl_iterate_phdr reports the object): copied to out, at most cap bytes.
 * Returns its length, or 0 if it has none (or a longer one). */
static inline size_t host_note_build_id(const struct dl_phdr_info *info,
                                        unsigned char *out, size_t cap) {
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_NOTE)
      continue;
    const unsigned char *p =
        (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
    const unsigned char *end = p + ph->p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      const ElfW(Nhdr) *n = (const ElfW(Nhdr) *)(const void *)p;
      const unsigned char *name = p + sizeof *n;
      const unsigned char *desc = name + ((n->n_namesz + 3) & ~3u);
      if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 &&
          memcmp(name, "GNU", 4) == 0 && n->n_descsz <= cap) {
        memcpy(out, desc, n->n_descsz);
        return n->n_descsz;
      }
      p = desc + ((n->n_descsz + 3) & ~3u);
    }
  }
  return 0;
}

/* The whole of a file (malloc'd, NUL-terminated; *len, if given, its
 * length without the NUL), or NULL if it cannot be read. */
static inline char *host_read_all(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  char *data = NULL;
  size_t n = 0, cap = 0, got;

  if (f == NULL)
    return NULL;
  do {
    if (cap - n < 4096) {
      char *p = realloc(data, cap = cap * 2 + 4096 + 1);
      if (p == NULL) {
        free(data);
        fclose(f);
        return NULL;
      }
      data = p;
    }
    got = fread(data + n, 1, cap - n - 1, f);
    n += got;
  } while (got > 0);
  fclose(f);
  data[n] = '\0';
  if (len != NULL)
    *len = n;
  return data;
}

#endif
