/*
 * libnodlopen.c - libnodlopen.so: a dlopen that refuses the libraries
 * named in $MT_TEST_NO_DLOPEN (sonames separated by commas), as if they
 * were not installed, and opens every other as the real one does. Loaded
 * with LD_PRELOAD into memtop, so that a test sees what memtop says of a
 * missing library it loads at run time (pprof/libs.h).
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#define API __attribute__((visibility("default")))

API void *dlopen(const char *file, int mode);

static int refused(const char *file) {
  const char *list = getenv("MT_TEST_NO_DLOPEN"), *end;
  size_t n = file != NULL ? strlen(file) : 0;

  for (; list != NULL && n > 0 && *list != '\0'; list = *end ? end + 1 : end) {
    end = strchr(list, ',');
    if (end == NULL)
      end = list + strlen(list);
    if ((size_t)(end - list) == n && memcmp(list, file, n) == 0)
      return 1;
  }
  return 0;
}

API void *dlopen(const char *file, int mode) {
  void *(*real)(const char *, int) =
      (void *(*)(const char *, int))dlsym(RTLD_NEXT, "dlopen");

  if (refused(file))
    return NULL;
  return real(file, mode);
}
