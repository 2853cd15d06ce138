/*
 * debuginfod.c - debug files from debuginfod servers, through
 * libdebuginfod loaded at run time (see debuginfod.h).
 */
#include "pprof/debuginfod.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/sanitize.h"
#include "emit/emit.h"

/* libdebuginfod's interface (elfutils' debuginfod.h, stable since 0.178),
 * declared here: memtop neither links the library nor needs its header. */
typedef struct debuginfod_client debuginfod_client;
typedef int (*dfd_progress_fn)(debuginfod_client *, long, long);

typedef struct dfd_lib_s {
  debuginfod_client *(*begin)(void);
  void (*end)(debuginfod_client *);
  int (*find_debuginfo)(debuginfod_client *, const unsigned char *, int,
                        char **);
  void (*set_progressfn)(debuginfod_client *, dfd_progress_fn);
} dfd_lib_t;

/* Build ids that found nothing lately: not asked again for a while. */
#define FAILED_MAX 64
#define FAILED_FOR_NS (600ull * 1000000000ull)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int loaded; /* 1 loaded, -1 not installed, 0 not tried */
static dfd_lib_t lib;
static debuginfod_client *client;
static int timeout_ms = 10000;
static int cancelled; /* set from any thread: atomic */
static int progress;
static struct {
  unsigned char id[64];
  size_t len;
  uint64_t when;
} failed[FAILED_MAX];
static size_t nfailed;

/* The fetch under way, for the progress callback (under lock). */
static struct {
  uint64_t deadline;
  const char *name;
  int said; /* its line has been started */
  int tty;
  uint64_t last_ns;
} cur;

static uint64_t now_ns(void) {
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void mt_debuginfod_configure(int ms, int say_progress) {
  pthread_mutex_lock(&lock);
  if (ms > 0)
    timeout_ms = ms;
  progress = say_progress;
  pthread_mutex_unlock(&lock);
}

/* Loads the library once (under lock). Returns 1 or 0. */
static int load(void) {
  void *h;

  if (loaded != 0)
    return loaded > 0;
  loaded = -1;
  h = dlopen("libdebuginfod.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h == NULL)
    return 0;
  *(void **)&lib.begin = dlsym(h, "debuginfod_begin");
  *(void **)&lib.end = dlsym(h, "debuginfod_end");
  *(void **)&lib.find_debuginfo = dlsym(h, "debuginfod_find_debuginfo");
  *(void **)&lib.set_progressfn = dlsym(h, "debuginfod_set_progressfn");
  if (lib.begin == NULL || lib.end == NULL || lib.find_debuginfo == NULL ||
      lib.set_progressfn == NULL) {
    dlclose(h);
    return 0;
  }
  loaded = 1; /* kept loaded: libcurl's global state stays with it */
  return 1;
}

/* Called by libdebuginfod while it transfers: says so once (and the
 * bytes on a terminal), and stops the fetch at the deadline. Returns
 * nonzero to stop it. */
static int on_progress(debuginfod_client *c, long done, long total) {
  uint64_t now = now_ns();

  (void)c;
  if (progress && !cur.said) {
    cur.said = 1;
    fprintf(stderr, "memtop: fetching debug info for %s from debuginfod...%s",
            cur.name, cur.tty ? "" : "\n");
  }
  if (progress && cur.tty && done > 0 && now - cur.last_ns > 100000000ull) {
    char a[32], b[32];

    cur.last_ns = now;
    mt_fmt_iec(a, sizeof a, (int64_t)done);
    mt_fmt_iec(b, sizeof b, total > 0 ? (int64_t)total : 0);
    fprintf(stderr,
            "\rmemtop: fetching debug info for %s from debuginfod: %s%s%s",
            cur.name, a, total > 0 ? " of " : "", total > 0 ? b : "");
  }
  return now >= cur.deadline || __atomic_load_n(&cancelled, __ATOMIC_RELAXED);
}

void mt_debuginfod_cancel(void) {
  __atomic_store_n(&cancelled, 1, __ATOMIC_RELAXED);
}

static int failed_lately(const unsigned char *id, size_t len, uint64_t now) {
  size_t i;

  for (i = 0; i < nfailed; i++)
    if (failed[i].len == len && memcmp(failed[i].id, id, len) == 0)
      return now - failed[i].when < FAILED_FOR_NS;
  return 0;
}

static void failed_add(const unsigned char *id, size_t len, uint64_t now) {
  size_t i, oldest = 0;

  for (i = 0; i < nfailed; i++) {
    if (failed[i].len == len && memcmp(failed[i].id, id, len) == 0)
      break;
    if (failed[i].when < failed[oldest].when)
      oldest = i;
  }
  if (i == nfailed)
    i = nfailed < FAILED_MAX ? nfailed++ : oldest;
  memcpy(failed[i].id, id, len);
  failed[i].len = len;
  failed[i].when = now;
}

int mt_debuginfod_find(const unsigned char *id, size_t len, const char *path) {
  const char *urls = getenv("DEBUGINFOD_URLS");
  const char *base = path != NULL ? strrchr(path, '/') : NULL;
  char name[256];
  char *got = NULL;
  uint64_t now = now_ns();
  int fd = -1;

  if (urls == NULL || urls[0] == '\0' || len == 0 || len > 64 ||
      __atomic_load_n(&cancelled, __ATOMIC_RELAXED))
    return -1;
  pthread_mutex_lock(&lock);
  if (!load() || failed_lately(id, len, now))
    goto out;
  if (client == NULL && (client = lib.begin()) == NULL)
    goto out;
  lib.set_progressfn(client, on_progress);
  /* The name as a terminal may show it (a stranger's path). */
  ms__sanitize(name, sizeof name, base != NULL ? base + 1 : "?", (size_t)-1,
               60);
  cur.name = name;
  cur.deadline = now + (uint64_t)timeout_ms * 1000000ull;
  cur.said = 0;
  cur.tty = isatty(2);
  cur.last_ns = 0;
  fd = lib.find_debuginfo(client, id, (int)len, &got);
  free(got);
  if (progress && cur.said && cur.tty)
    fprintf(stderr,
            "\rmemtop: fetching debug info for %s from debuginfod: "
            "%s\033[K\n",
            name, fd >= 0 ? "done" : "not found");
  if (fd < 0) {
    fd = -1;
    failed_add(id, len, now);
  }
out:
  pthread_mutex_unlock(&lock);
  return fd;
}
