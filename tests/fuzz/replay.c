/*
 * replay.c - runs a libFuzzer harness without libFuzzer: feeds every file
 * given on the command line (a directory: every file in it) to
 * LLVMFuzzerTestOneInput. With no arguments it replays the seed corpus
 * tests/fuzz/corpus/<name>/, <name> being this binary's name, looked for
 * from the current directory and from the source tree the binary was
 * built in ($BUILD/fuzz-replay/../../..). `make check` runs it this way.
 */
#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    fprintf(stderr, "replay: cannot open %s\n", path);
    return -1;
  }
  size_t cap = 4096, n = 0;
  uint8_t *buf = malloc(cap);
  size_t r;
  while (buf != NULL && (r = fread(buf + n, 1, cap - n, f)) > 0) {
    n += r;
    if (n == cap) {
      uint8_t *nb = realloc(buf, cap * 2);
      if (nb == NULL)
        break;
      buf = nb;
      cap *= 2;
    }
  }
  fclose(f);
  if (buf == NULL)
    return -1;
  /* An exact-size copy, so a sanitizer sees any read past the input. */
  uint8_t *exact = malloc(n ? n : 1);
  if (exact == NULL) {
    free(buf);
    return -1;
  }
  memcpy(exact, buf, n);
  free(buf);
  LLVMFuzzerTestOneInput(exact, n);
  free(exact);
  return 0;
}

/* Returns the number of files run, or -1 on error. */
static int run_path(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0) {
    fprintf(stderr, "replay: no such file or directory: %s\n", path);
    return -1;
  }
  if (!S_ISDIR(st.st_mode))
    return run_file(path) == 0 ? 1 : -1;
  DIR *d = opendir(path);
  if (d == NULL)
    return -1;
  int count = 0;
  struct dirent *e;
  char p[4096];
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.')
      continue;
    snprintf(p, sizeof p, "%s/%s", path, e->d_name);
    if (stat(p, &st) != 0 || !S_ISREG(st.st_mode))
      continue;
    if (run_file(p) != 0) {
      closedir(d);
      return -1;
    }
    count++;
  }
  closedir(d);
  return count;
}

int main(int argc, char **argv) {
  if (LLVMFuzzerInitialize)
    LLVMFuzzerInitialize(&argc, &argv);
  int total = 0;
  if (argc > 1) {
    for (int i = 1; i < argc; i++) {
      int n = run_path(argv[i]);
      if (n < 0)
        return 1;
      total += n;
    }
  } else {
    const char *name = strrchr(argv[0], '/');
    name = name ? name + 1 : argv[0];
    char dir[8192], exe[4096];
    snprintf(dir, sizeof dir, "tests/fuzz/corpus/%s", name);
    struct stat st;
    if (stat(dir, &st) != 0) {
      ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
      if (k > 0) {
        exe[k] = '\0';
        *strrchr(exe, '/') = '\0';
        snprintf(dir, sizeof dir, "%s/../../../tests/fuzz/corpus/%s", exe,
                 name);
      }
    }
    total = run_path(dir);
    if (total <= 0) {
      fprintf(stderr, "replay: no corpus for %s (looked in %s)\n", name, dir);
      return 1;
    }
  }
  printf("replayed %d input(s)\n", total);
  return 0;
}
