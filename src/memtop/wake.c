/*
 * wake.c - the idle processes of a followed tree, woken (see wake.h).
 */
#include "memtop/wake.h"

#include <dirent.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "attach/attach.h"
#include "client/client.h"
#include "memstats.h"
#include "memtop/run.h"

/* The most processes of a tree looked at per pass, and the most
 * processes remembered as tried (then the ones gone are forgotten). */
#define TREE_MAX 4096
#define TRIED_MAX 4096
/* Stops tried while every thread is busy in the loader or the allocator
 * (1, 2, ... ms apart: about 0.2 s at most, the loop's thread waiting). */
#define WAKE_TRIES 20

typedef struct tried_s {
  int pid;
  uint64_t start_time;
} tried_t;

struct mt_wake_s {
  int root;
  mt_wake_say_fn say;
  void *arg;
  tried_t *tried;
  size_t ntried;
  int *tree; /* one pass's processes */
};

mt_wake_t *mt_wake_new(int root, mt_wake_say_fn say, void *arg) {
  mt_wake_t *w = calloc(1, sizeof *w);

  if (w == NULL)
    return NULL;
  w->tried = calloc(TRIED_MAX, sizeof *w->tried);
  w->tree = calloc(TREE_MAX, sizeof *w->tree);
  if (w->tried == NULL || w->tree == NULL) {
    mt_wake_free(w);
    return NULL;
  }
  w->root = root;
  w->say = say;
  w->arg = arg;
  return w;
}

void mt_wake_free(mt_wake_t *w) {
  if (w == NULL)
    return;
  free(w->tried);
  free(w->tree);
  free(w);
}

/* ---- the tree --------------------------------------------------------- */

/* Appends pid's children (each of its threads' children file) to
 * tree[*n..cap). */
static void add_children(int pid, int *tree, size_t *n, size_t cap) {
  char path[96];
  struct dirent *e;
  DIR *d;

  snprintf(path, sizeof path, "/proc/%d/task", pid);
  d = opendir(path);
  if (d == NULL)
    return;
  while (*n < cap && (e = readdir(d)) != NULL) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9' || strlen(e->d_name) > 12)
      continue;
    /* At most 12 digits (checked above): the precision tells the compiler. */
    snprintf(path, sizeof path, "/proc/%d/task/%.12s/children", pid, e->d_name);
    FILE *f = fopen(path, "re");
    long c;
    if (f == NULL)
      continue;
    while (*n < cap && fscanf(f, "%ld", &c) == 1)
      if (c > 0 && c <= 0x3fffffff)
        tree[(*n)++] = (int)c;
    fclose(f);
  }
  closedir(d);
}

/* root and its descendants into w->tree, root first. Returns how many. A
 * PID met twice (children files read while processes come and go) costs
 * a second look, no loop: the walk stops at TREE_MAX. */
static size_t walk(mt_wake_t *w) {
  size_t n = 0, i;

  w->tree[n++] = w->root;
  for (i = 0; i < n && n < TREE_MAX; i++)
    add_children(w->tree[i], w->tree, &n, TREE_MAX);
  return n;
}

/* ---- who is due --------------------------------------------------------*/

/* Milliseconds since pid started, from its start time (clock ticks since
 * boot), or -1 if it cannot be told. */
static long long age_ms(uint64_t start_time) {
  struct timespec ts;
  long hz = sysconf(_SC_CLK_TCK);

  if (hz <= 0 || clock_gettime(CLOCK_BOOTTIME, &ts) != 0)
    return -1;
  long long now = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
  long long at = (long long)(start_time * 1000 / (uint64_t)hz);
  return now >= at ? now - at : 0;
}

static int was_tried(const mt_wake_t *w, int pid, uint64_t start_time) {
  for (size_t i = 0; i < w->ntried; i++)
    if (w->tried[i].pid == pid && w->tried[i].start_time == start_time)
      return 1;
  return 0;
}

/* Remembers pid as tried; when the table is full, the processes that
 * have gone (or whose PID names another now) are forgotten first. */
static void remember(mt_wake_t *w, int pid, uint64_t start_time) {
  if (w->ntried == TRIED_MAX) {
    size_t k = 0;
    for (size_t i = 0; i < w->ntried; i++) {
      uint64_t st;
      if (msc_proc_start_time(w->tried[i].pid, &st) == 0 &&
          st == w->tried[i].start_time)
        w->tried[k++] = w->tried[i];
    }
    w->ntried = k;
    if (k == TRIED_MAX)
      w->ntried = 0; /* every one alive: start again, at worst a retry */
  }
  w->tried[w->ntried].pid = pid;
  w->tried[w->ntried++].start_time = start_time;
}

/* Whether pid has a socket (found as the set's listing finds them). */
static int has_socket(int pid) {
  msc_sockref_t ref;
  const char *why = NULL;
  int r = msc_locate(pid, &ref, &why);

  if (r == 0)
    msc_sockref_close(&ref);
  return r == 0;
}

/* ---- the pass ----------------------------------------------------------*/

int mt_wake_pass(mt_wake_t *w, const mt_tset_t *set) {
  size_t n = walk(w);
  int woken = 0, traced = 0;

  for (size_t i = 0; i < n; i++) {
    int pid = w->tree[i];
    uint64_t st;
    const mt_tset_target_t *t = set != NULL ? mt_tset_find(set, pid) : NULL;

    if (pid == (int)getpid() || (t != NULL && !t->gone))
      continue;
    if (msc_proc_start_time(pid, &st) != 0 || was_tried(w, pid, st))
      continue;
    long long age = age_ms(st);
    if (age >= 0 && age < MT_WAKE_GRACE_MS)
      continue;
    if (!msc_proc_maps_libmemstats(pid) || has_socket(pid))
      continue;
    remember(w, pid, st);
    mt_attach_req_t req = {.pid = pid, .wake_only = 1, .max_tries = WAKE_TRIES};
    mt_attach_res_t res;
    char err[1024];
    int r = mt_attach_run(&req, &res, err, sizeof err);
    traced = 1;
    if (r == 0)
      woken++;
    else if (w->say != NULL)
      w->say(w->arg, pid, err);
  }
  /* The stops were waited for with SIGCHLD blocked on this thread
   * (inject.c): one that meant the end of another child (`run`'s command,
   * an orphan to reap) may have been taken there; a SIGCHLD of our own
   * has libuv and the reaper look again (they wait with WNOHANG). */
  if (traced)
    kill(getpid(), SIGCHLD);
  return woken;
}

void mt_wake_fail_status(mt_wake_fails_t *f, int pid, const char *words,
                         char *status, size_t len) {
  if (f->n < INT_MAX)
    f->n++;
  if (f->n == 1) {
    f->first_pid = pid;
    snprintf(f->first, sizeof f->first, "%s", words);
    snprintf(status, len, "PID %d not woken: %.200s", pid, words);
  } else if (f->n == 2) {
    snprintf(status, len, "2 processes not woken: PID %d: %.90s; PID %d: %.90s",
             f->first_pid, f->first, pid, words);
  } else {
    snprintf(status, len,
             "%d processes not woken: PID %d: %.80s; PID %d: %.80s (and %d "
             "more)",
             f->n, f->first_pid, f->first, pid, words, f->n - 2);
  }
}

/* ---- one process, asked for --------------------------------------------*/

int mt_wake_attach(int pid, char *words, size_t len) {
  char exe[4096], found[4096], lib[PATH_MAX], err[1024];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  mt_attach_res_t res;
  int r;

  exe[n > 0 ? n : 0] = '\0';
  r = mt_run_find_preload(exe, getenv("MEMTOP_PRELOAD"), found, sizeof found,
                          err, sizeof err);
  if (r == 0 && realpath(found, lib) == NULL)
    r = MS_ENOENT;
  if (r != 0) {
    snprintf(words, len, "Not attached: %.400s", err);
    return r;
  }
  mt_attach_req_t req = {.pid = pid, .lib = lib};
  r = mt_attach_run(&req, &res, err, sizeof err);
  /* As after a pass: a SIGCHLD taken while the stops were waited for. */
  kill(getpid(), SIGCHLD);
  if (r != 0)
    snprintf(words, len, "Not attached: %.400s", err);
  else if (res.already)
    snprintf(words, len, "PID %d serves already", pid);
  else
    snprintf(words, len, "%s PID %d (one thread held %.2f ms): %s",
             res.woke ? "Woke" : "Attached to", pid, (double)res.stop_ns / 1e6,
             res.woke ? "its preload serves with full counting"
                      : "its allocator's figures from now on (memtop detach "
                        "undoes it)");
  return r;
}
