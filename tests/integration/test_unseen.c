/*
 * test_unseen.c - memory obtained outside malloc is in Sys (issue 10,
 * items 6 and 7): real programs under the preload, read by the real memtop
 * (--once --json) over their real sockets, each run in a private
 * MEMSTATS_DIR.
 *
 *   pl_unseen       glibc's heap, a buffer and a pool the program maps
 *                   itself (partly touched, partly unmapped, partly handed
 *                   back, one grown with mremap), four threads' stacks;
 *   pl_unseen_je    the same on jemalloc, whose own mappings go through
 *                   the interposed mmap too and must not be counted twice;
 *   python3         a script building a large dict and list: its object
 *                   allocator's arenas, labelled "python";
 *   cc1plus         g++ -c on a template-heavy file: GCC's collector;
 *   demo            $BUILD/contrib/demo.
 *
 * In every snapshot, from the JSON's memstats object alone (Go's rule: each
 * class holds its unbacked part, as HeapSys holds HeapReleased): Sys is the
 * sum of the *Sys fields, Prepared is HeapReleased + OffHeapReleased, Ready
 * is Sys - Prepared. Where
 * the allocator's own figures are right (glibc), the resident part of Sys
 * (Ready) is within 5% of the kernel's anonymous RSS, both the snapshot's
 * (KernelAnonRSS, read in the same snapshot) and /proc/PID/status RssAnon
 * read right after it. On jemalloc the allocator's Ready itself overstates
 * its resident memory (issue 10 item 4: metadata mapped but not backed),
 * so there the mappings are checked against what the program mapped.
 *
 * Figures are compared only from snapshots whose stacks and mappings were
 * read in that snapshot (their quality "exact"); no timing is asserted.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/host.h"
#include <jansson.h>

#define LIMIT_S 120 /* a program not ready after this is a failure */
#define MiB (1024.0 * 1024.0)

static char build[1024], memtop[1200], preload[1200], dir[64];

typedef struct child_s {
  pid_t pid;
  int in, out; /* its stdin (closing it ends pl_unseen), its stdout */
} child_t;

/* Starts argv with LD_PRELOAD=ld_preload, stdin and stdout on pipes. */
static child_t spawn(char *const argv[], const char *ld_preload) {
  int pi[2], po[2];
  child_t c;
  assert_int_equal(pipe2(pi, O_CLOEXEC), 0);
  assert_int_equal(pipe2(po, O_CLOEXEC), 0);
  c.pid = fork();
  assert_true(c.pid >= 0);
  if (c.pid == 0) {
    dup2(pi[0], 0);
    dup2(po[1], 1);
    setenv("LD_PRELOAD", ld_preload, 1);
    execvp(argv[0], argv);
    _exit(126);
  }
  close(pi[0]);
  close(po[1]);
  c.in = pi[1];
  c.out = po[0];
  return c;
}

static void stop(child_t c) {
  close(c.in);
  close(c.out);
  kill(c.pid, SIGTERM);
  waitpid(c.pid, NULL, 0);
}

/* Waits for a line with "ready" on the child's stdout; what it printed
 * before is left in said (if not NULL). */
static void wait_ready_said(child_t c, char *said, size_t said_len);
static void wait_ready(child_t c) {
  wait_ready_said(c, NULL, 0);
}

static void wait_ready_said(child_t c, char *said, size_t said_len) {
  char buf[1024];
  size_t n = 0;
  time_t start = time(NULL);
  while (time(NULL) - start < LIMIT_S) {
    struct pollfd p = {.fd = c.out, .events = POLLIN};
    if (poll(&p, 1, 1000) <= 0)
      continue;
    ssize_t r = read(c.out, buf + n, sizeof buf - 1 - n);
    if (r <= 0)
      fail_msg("program %d ended before it was ready", (int)c.pid);
    n += (size_t)r;
    buf[n] = '\0';
    if (strstr(buf, "ready")) {
      if (said)
        snprintf(said, said_len, "%s", buf);
      return;
    }
    if (n == sizeof buf - 1)
      n = 0;
  }
  fail_msg("program %d not ready after %d s", (int)c.pid, LIMIT_S);
}

/* Waits for pid's socket in our directory. */
static void wait_socket(pid_t pid) {
  char path[256];
  snprintf(path, sizeof path, "%s/%d.sock", dir, (int)pid);
  for (int i = 0; i < LIMIT_S * 20 && access(path, F_OK) != 0; i++)
    usleep(50000);
  assert_int_equal(access(path, F_OK), 0);
}

/* memtop --once --json PID, parsed; NULL if memtop could not read it (the
 * process ended). */
static json_t *query(pid_t pid) {
  char out[512 * 1024], p[32];
  int po[2], st;
  snprintf(p, sizeof p, "%d", (int)pid);
  assert_int_equal(pipe2(po, O_CLOEXEC), 0);
  pid_t m = fork();
  assert_true(m >= 0);
  if (m == 0) {
    int null = open("/dev/null", O_RDWR);
    dup2(null, 0);
    dup2(po[1], 1);
    dup2(null, 2);
    execl(memtop, memtop, "--once", "--json", p, (char *)NULL);
    _exit(126);
  }
  close(po[1]);
  size_t n = 0;
  ssize_t r;
  while ((r = read(po[0], out + n, sizeof out - 1 - n)) > 0)
    n += (size_t)r;
  close(po[0]);
  out[n] = '\0';
  assert_int_equal(waitpid(m, &st, 0), m);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
    return NULL;
  json_error_t jerr;
  json_t *j = json_loads(out, 0, &jerr);
  if (!j)
    fail_msg("memtop's output is not one JSON object (%s): %s", jerr.text, out);
  return j;
}

static double num(json_t *j, const char *obj, const char *name) {
  json_t *v = json_object_get(json_object_get(j, obj), name);
  if (!v) {
    /* Say what the snapshot had instead, to find why. */
    char *text = json_dumps(j, JSON_COMPACT);
    print_message("the snapshot without %s.%s: %.6000s\n", obj, name,
                  text ? text : "?");
    free(text);
    fail_msg("no %s.%s in memtop's JSON", obj, name);
  }
  return (double)json_integer_value(v);
}

static int exact(json_t *j, const char *field) {
  const char *q =
      json_string_value(json_object_get(json_object_get(j, "quality"), field));
  return q && strcmp(q, "exact") == 0;
}

/* The stacks and mappings were read in this snapshot. */
/* The mappings were read for this snapshot: their figures are exact
 * (OffHeapReleased is not asked: on jemalloc it also holds the allocator's
 * untouched metadata, an estimate whatever the mappings' age). */
static int fresh(json_t *j) {
  return exact(j, "StackSys") && exact(j, "OtherSys");
}

static int has_provider(json_t *j, const char *name) {
  json_t *a = json_object_get(j, "providers");
  for (size_t i = 0; i < json_array_size(a); i++)
    if (strcmp(json_string_value(json_array_get(a, i)), name) == 0)
      return 1;
  return 0;
}

static double rss_anon(pid_t pid) {
  char path[64], buf[4096];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f)
    return -1;
  double kb = -1;
  while (fgets(buf, sizeof buf, f))
    if (sscanf(buf, "RssAnon: %lf kB", &kb) == 1)
      break;
  fclose(f);
  return kb * 1024.0;
}

/* The identities every snapshot keeps. */
static void check_identities(json_t *j) {
  static const char *const parts[] = {"HeapSys",   "StackSys",    "MSpanSys",
                                      "MCacheSys", "BuckHashSys", "GCSys",
                                      "OtherSys"};
  /* A snapshot taken before the allocator was confirmed (its probe is
   * tried again at the next snapshots: registry.c) has no Ready, and says
   * so: no accounted figures, no Ready in the breakdown. */
  if (json_object_get(j, "accounted") == NULL) {
    assert_null(json_object_get(json_object_get(j, "breakdown"), "Ready"));
    return;
  }
  double sum = 0;
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
    sum += num(j, "memstats", parts[i]);
  if (num(j, "memstats", "Sys") != sum)
    fail_msg("Sys %.0f != the sum of the *Sys fields %.0f",
             num(j, "memstats", "Sys"), sum);
  assert_true(num(j, "breakdown", "Prepared") ==
              num(j, "memstats", "HeapReleased") +
                  num(j, "memstats", "OffHeapReleased"));
  /* Its parts are in their classes. */
  assert_true(num(j, "memstats", "StackReleased") <=
              num(j, "memstats", "StackSys"));
  assert_true(num(j, "memstats", "OtherReleased") <=
              num(j, "memstats", "OtherSys"));
  assert_true(num(j, "memstats", "StackReleased") +
                  num(j, "memstats", "OtherReleased") <=
              num(j, "memstats", "OffHeapReleased"));
  assert_true(num(j, "breakdown", "Ready") ==
              num(j, "memstats", "Sys") - num(j, "breakdown", "Prepared"));
  assert_true(num(j, "accounted", "Ready") == num(j, "breakdown", "Ready"));
}

/* /proc's RssAnon read just before the last query (fresh_snapshot): a
 * program whose memory moves (the demo) is compared with what /proc said
 * on both sides of the snapshot, not with one read after it. */
static double g_anon_before = -1;

/* Ready within 5% of the anonymous RSS, the snapshot's and /proc's. */
static void check_accounted(json_t *j, pid_t pid, const char *what) {
  double ready = num(j, "breakdown", "Ready");
  double anon = num(j, "kernel", "anonrss");
  double after = rss_anon(pid);
  double lo = g_anon_before < after ? g_anon_before : after;
  double hi = g_anon_before > after ? g_anon_before : after;
  print_message("%s: Ready %.1f MiB, KernelAnonRSS %.1f MiB, /proc RssAnon "
                "%.1f MiB before and %.1f MiB after, OtherSys %.1f MiB, "
                "StackSys %.1f MiB\n",
                what, ready / MiB, anon / MiB, g_anon_before / MiB, after / MiB,
                num(j, "memstats", "OtherSys") / MiB,
                num(j, "memstats", "StackSys") / MiB);
  assert_true(anon > 0);
  if (ready < anon * 0.95 || ready > anon * 1.05)
    fail_msg("%s: Ready %.1f MiB is not within 5%% of the anonymous RSS "
             "%.1f MiB",
             what, ready / MiB, anon / MiB);
  if (lo > 0 && (ready < lo * 0.95 || ready > hi * 1.05))
    fail_msg("%s: Ready %.1f MiB is not within 5%% of /proc RssAnon "
             "(%.1f MiB before the snapshot, %.1f MiB after)",
             what, ready / MiB, g_anon_before / MiB, after / MiB);
}

/* Queries pid until a snapshot has read its mappings itself; NULL if the
 * process ended first. */
static json_t *fresh_snapshot(pid_t pid) {
  for (int i = 0; i < LIMIT_S * 4; i++) {
    g_anon_before = rss_anon(pid);
    json_t *j = query(pid);
    if (!j)
      return NULL;
    check_identities(j);
    if (fresh(j))
      return j;
    json_decref(j);
    usleep(250000);
  }
  fail_msg("no snapshot of %d read its mappings afresh", (int)pid);
  return NULL;
}

static int setup(void **state) {
  (void)state;
  if (host_build_dir(build, sizeof build) != 0 ||
      host_preload_path(build, preload, sizeof preload) != 0)
    return -1;
  snprintf(memtop, sizeof memtop, "%s/memtop", build);
  snprintf(dir, sizeof dir, "/tmp/ms-unseen-XXXXXX");
  if (!mkdtemp(dir))
    return -1;
  setenv("MEMSTATS_DIR", dir, 1);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  return system(cmd) == 0 ? 0 : -1;
}

/* What pl_unseen maps itself: its buffer (64 MiB), its pool (32 - 8
 * unmapped) and 16 MiB grown by mremap; resident of it: 24 MiB of the
 * buffer, 20 MiB of the pool (4 handed back), the 16 MiB grown. */
#define PL_UNSEEN_MAPPED (104.0 * MiB)
#define PL_UNSEEN_OTHER (60.0 * MiB)

static void check_pl_unseen(json_t *j) {
  double other = num(j, "memstats", "OtherSys");
  double backed = other - num(j, "memstats", "OtherReleased");
  /* Its own mappings whole, and nothing of the allocator's: a little more
   * (the libraries' own small mappings) is allowed. */
  if (other < PL_UNSEEN_MAPPED || other > PL_UNSEEN_MAPPED + 2 * MiB)
    fail_msg("OtherSys %.1f MiB, want the program's own 104 MiB mapped",
             other / MiB);
  if (backed < PL_UNSEEN_OTHER || backed > PL_UNSEEN_OTHER + 2 * MiB)
    fail_msg("OtherSys - OtherReleased %.1f MiB, want the program's own "
             "60 MiB resident",
             backed / MiB);
  /* Four threads' 256 KiB frames and the main stack (the agent's is
   * libmemstats's own, not the program's). */
  double stack = num(j, "memstats", "StackSys");
  if (stack < 4 * 256 * 1024)
    fail_msg("StackSys %.0f bytes, want at least the four threads' 1 MiB "
             "(StackInuse %.0f, OffHeapReleased %.0f)",
             stack, num(j, "memstats", "StackInuse"),
             num(j, "memstats", "OffHeapReleased"));
  /* The untouched 40 MiB of the buffer, the 4 MiB handed back, the
   * threads' untouched stack. */
  assert_true(num(j, "memstats", "OffHeapReleased") >= 44 * MiB);
  assert_true(num(j, "memstats", "OtherReleased") >= 44 * MiB);
  assert_true(has_provider(j, "mappings"));
}

static void run_pl_unseen(const char *prog, int compare_rss) {
  char path[1300];
  snprintf(path, sizeof path, "%s/progs/%s", build, prog);
  char *argv[] = {path, NULL};
  child_t c = spawn(argv, preload);
  wait_ready(c);
  /* A mappings read younger than 100 ms is served as exact, and one may
   * have been made just before the program was ready (its threads' frames
   * not yet touched): past 300 ms, an exact read is one made after it. */
  usleep(300000);
  json_t *j = fresh_snapshot(c.pid);
  assert_non_null(j);
  check_pl_unseen(j);
  if (compare_rss)
    check_accounted(j, c.pid, prog);
  json_decref(j);
  stop(c);
}

static void test_program_glibc(void **state) {
  (void)state;
  run_pl_unseen("pl_unseen", 1);
}

static void test_program_jemalloc(void **state) {
  (void)state;
  if (!host_have_library("libjemalloc.so.2"))
    skip();
  run_pl_unseen("pl_unseen_je", 0);
}

static void test_python(void **state) {
  (void)state;
  if (access("/usr/bin/python3", X_OK) != 0)
    skip();
  char *argv[] = {(char *)"/usr/bin/python3", (char *)"-c",
                  (char *)"import sys\n"
                          "d = {i: str(i) * 3 for i in range(600000)}\n"
                          "l = [(i, float(i)) for i in range(400000)]\n"
                          /* Python's own count of its arenas, from
                           * sys._debugmallocstats() (on stderr). */
                          "import os\n"
                          "r, w = os.pipe()\n"
                          "e = os.dup(2)\n"
                          "os.dup2(w, 2)\n"
                          "sys._debugmallocstats()\n"
                          "os.dup2(e, 2)\n"
                          "os.close(w)\n"
                          "t = b''\n"
                          "while True:\n"
                          "    b = os.read(r, 65536)\n"
                          "    if not b: break\n"
                          "    t += b\n"
                          "for x in t.decode().splitlines():\n"
                          "    if 'arenas allocated current' in x or "
                          "'bytes/arena' in x: print(x)\n"
                          "print('ready', flush=True)\n"
                          "sys.stdin.read()\n",
                  NULL};
  child_t c = spawn(argv, preload);
  char said[1024];
  wait_ready_said(c, said, sizeof said);
  json_t *j = fresh_snapshot(c.pid);
  assert_non_null(j);
  /* Its object allocator's arenas are labelled, and are most of it. */
  assert_true(has_provider(j, "python"));
  assert_true(num(j, "memstats", "OtherSys") >
              0.5 * num(j, "kernel", "anonrss"));
  /* ... and a heap of their own: as many arenas, as many bytes, as
   * Python's own statistics say ("# arenas allocated current = 65",
   * "65 arenas * 1048576 bytes/arena = 68,157,440"). */
  const char *cur = strstr(said, "arenas allocated current");
  const char *per = strstr(said, "bytes/arena");
  assert_non_null(cur);
  assert_non_null(per);
  unsigned long arenas = 0, per_arena = 0, times = 0;
  assert_int_equal(sscanf(strchr(cur, '=') + 1, "%lu", &arenas), 1);
  const char *line = per;
  while (line > said && line[-1] != '\n')
    line--;
  assert_int_equal(sscanf(line, "%lu arenas * %lu", &times, &per_arena), 2);
  assert_true(times == arenas);
  print_message("python3: %lu arenas of %lu bytes by its own count; "
                "memtop: %.0f arenas, %.0f bytes mapped, %.0f resident\n",
                arenas, per_arena, num(j, "python", "Arenas"),
                num(j, "python", "ArenaSys"),
                num(j, "python", "ArenaResident"));
  assert_true(arenas > 0);
  assert_true(num(j, "python", "Arenas") == (double)arenas);
  assert_true(num(j, "python", "ArenaSys") == (double)arenas * per_arena);
  assert_true(num(j, "python", "ArenaResident") <=
              num(j, "python", "ArenaSys"));
  assert_true(num(j, "python", "ArenaResident") <=
              num(j, "memstats", "OtherSys"));
  assert_true(exact(j, "PythonArenas") && exact(j, "PythonArenaSys") &&
              exact(j, "PythonArenaResident"));
  check_accounted(j, c.pid, "python3");
  json_decref(j);
  stop(c);
}

/* Issue 19, item 2: Python's free pool blocks were "data". 1.5 million
 * small objects (a tuple and a float each), every other one freed: the
 * pools stay in use, half their blocks free. data must hold the blocks
 * Python says are allocated ("# bytes in allocated blocks" of
 * sys._debugmallocstats()), within 5%, not the arenas' resident pages
 * (before: data 184.7 MiB with 92.5 MiB of allocated blocks, exact). */
static void test_python_freed_half(void **state) {
  (void)state;
  if (access("/usr/bin/python3", X_OK) != 0)
    skip();
  char *argv[] = {(char *)"/usr/bin/python3", (char *)"-c",
                  (char *)"import sys, os\n"
                          "l = [(i, float(i)) for i in range(750000)]\n"
                          "del l[::2]\n"
                          "r, w = os.pipe()\n"
                          "e = os.dup(2)\n"
                          "os.dup2(w, 2)\n"
                          "sys._debugmallocstats()\n"
                          "os.dup2(e, 2)\n"
                          "os.close(w)\n"
                          "t = b''\n"
                          "while True:\n"
                          "    b = os.read(r, 65536)\n"
                          "    if not b: break\n"
                          "    t += b\n"
                          "for x in t.decode().splitlines():\n"
                          "    if 'bytes in allocated blocks' in x: print(x)\n"
                          "print('ready', flush=True)\n"
                          "sys.stdin.read()\n",
                  NULL};
  child_t c = spawn(argv, preload);
  char said[1024];
  wait_ready_said(c, said, sizeof said);
  const char *line = strstr(said, "bytes in allocated blocks");
  assert_non_null(line);
  double truth = 0;
  for (const char *p = strchr(line, '=') + 1; *p && *p != '\n'; p++)
    if (*p >= '0' && *p <= '9')
      truth = truth * 10 + (*p - '0');
  /* The pool headers are read on their own cadence (at most 4/s, and 1%
   * of the time): a snapshot in between has estimates. */
  json_t *j = NULL;
  for (int i = 0; i < LIMIT_S * 4; i++) {
    j = fresh_snapshot(c.pid);
    assert_non_null(j);
    /* (A library without the field has nothing to wait for.) */
    if (exact(j, "PythonArenaAlloc") ||
        !json_object_get(json_object_get(j, "quality"), "PythonArenaAlloc"))
      break;
    json_decref(j);
    j = NULL;
    usleep(250000);
  }
  assert_non_null(j);
  /* data is every inuse term but Python's arenas (the C heap's objects,
   * stacks, metadata, the rest of OtherSys) and their allocated blocks. */
  double rest =
      num(j, "memstats", "HeapAlloc") + num(j, "memstats", "StackInuse") +
      num(j, "memstats", "MSpanInuse") + num(j, "memstats", "MCacheInuse") +
      num(j, "memstats", "BuckHashSys") + num(j, "memstats", "GCSys") +
      num(j, "memstats", "OtherSys") - num(j, "memstats", "OtherReleased") -
      num(j, "python", "ArenaResident");
  double data = num(j, "breakdown", "Data");
  print_message("python3, half of 750000 pairs freed: %.1f MiB in allocated "
                "blocks by its own count; memtop: data %.1f MiB, of which "
                "%.1f MiB not Python's, arenas %.1f MiB resident\n",
                truth / MiB, data / MiB, rest / MiB,
                num(j, "python", "ArenaResident") / MiB);
  assert_true(truth > 30 * MiB);
  if (data < rest + truth * 0.95 || data > rest + truth * 1.05)
    fail_msg("data %.1f MiB is not the rest %.1f MiB + Python's allocated "
             "blocks %.1f MiB (within 5%%)",
             data / MiB, rest / MiB, truth / MiB);
  double alloc = num(j, "python", "ArenaAlloc");
  print_message("memtop: PythonArenaAlloc %.0f, PythonArenaInuse %.0f\n", alloc,
                num(j, "python", "ArenaInuse"));
  assert_true(alloc >= truth * 0.95 && alloc <= truth * 1.05);
  assert_true(num(j, "python", "ArenaInuse") >= alloc);
  assert_true(num(j, "python", "ArenaInuse") <=
              num(j, "python", "ArenaResident"));
  assert_true(exact(j, "PythonArenaInuse") && exact(j, "PythonArenaAlloc"));
  check_accounted(j, c.pid, "python3");
  json_decref(j);
  stop(c);
}

/* Resident and lazily freed bytes of pid's mapping at addr, as the kernel
 * has them (/proc/PID/smaps: Rss, LazyFree). Returns 0, or -1. */
static int smaps_of(pid_t pid, unsigned long addr, double *rss, double *lazy) {
  char path[64], line[512];
  snprintf(path, sizeof path, "/proc/%d/smaps", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f)
    return -1;
  int in = 0, found = 0;
  *rss = *lazy = 0;
  while (fgets(line, sizeof line, f)) {
    unsigned long a, b, kb;
    if (sscanf(line, "%lx-%lx ", &a, &b) == 2 && strchr(line, ' ') &&
        strchr(line, '-') < strchr(line, ' ')) {
      in = a == addr;
      found |= in;
      continue;
    }
    if (in && sscanf(line, "Rss: %lu kB", &kb) == 1)
      *rss = kb * 1024.0;
    if (in && sscanf(line, "LazyFree: %lu kB", &kb) == 1)
      *lazy = kb * 1024.0;
  }
  fclose(f);
  return found ? 0 : -1;
}

/* Pages a program handed back with MADV_FREE are Prepared (issue 19 item
 * 10): pl_lazy maps 32 MiB, writes it, frees 16 MiB of it so; the part of
 * OtherSys in use is what the kernel holds of that mapping and has not
 * marked LazyFree (its smaps Rss - LazyFree), the rest OtherReleased. */
static void test_program_madv_free(void **state) {
  (void)state;
  char path[1300], said[1024];
  snprintf(path, sizeof path, "%s/progs/pl_lazy", build);
  char *argv[] = {path, NULL};
  child_t c = spawn(argv, preload);
  wait_ready_said(c, said, sizeof said);
  unsigned long addr = 0;
  int pid = 0;
  const char *r = strstr(said, "ready ");
  assert_non_null(r);
  assert_int_equal(sscanf(r, "ready %d %lx", &pid, &addr), 2);
  (void)pid;
  usleep(300000);
  json_t *j = fresh_snapshot(c.pid);
  assert_non_null(j);
  double rss = 0, lazy = 0;
  assert_int_equal(smaps_of(c.pid, addr, &rss, &lazy), 0);
  double other = num(j, "memstats", "OtherSys");
  double backed = other - num(j, "memstats", "OtherReleased");
  print_message("pl_lazy: its mapping Rss %.1f MiB, LazyFree %.1f MiB; "
                "OtherSys %.1f MiB, OtherReleased %.1f MiB (%s)\n",
                rss / MiB, lazy / MiB, other / MiB,
                num(j, "memstats", "OtherReleased") / MiB,
                json_string_value(json_object_get(json_object_get(j, "quality"),
                                                  "OtherReleased")));
  if (lazy == 0 && rss >= 32 * MiB) {
    json_decref(j);
    stop(c);
    skip(); /* a kernel without MADV_FREE's accounting in smaps */
  }
  assert_true(other >= 32 * MiB && other <= 34 * MiB);
  /* What the kernel says is in use, within the libraries' own small
   * mappings above, and within 1 MiB below: the kernel leaves pages still
   * in its per-CPU batches out of a MADV_FREE (LazyFree read 16 KiB short
   * of the 16 MiB once in three runs under ASan), which the interposer
   * cannot see; so the figure is an estimate, and says so. */
  assert_string_equal(json_string_value(json_object_get(
                          json_object_get(j, "quality"), "OtherReleased")),
                      "estimated");
  if (backed < rss - lazy - 1 * MiB || backed > rss - lazy + 2 * MiB)
    fail_msg("OtherSys - OtherReleased %.0f bytes, want the mapping's Rss - "
             "LazyFree %.0f bytes (Rss %.0f, LazyFree %.0f)",
             backed, rss - lazy, rss, lazy);
  json_decref(j);
  stop(c);
}

static double status_kb(pid_t pid, const char *name) {
  char path[64], buf[4096];
  size_t n = strlen(name);
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f)
    return -1;
  double kb = -1;
  while (fgets(buf, sizeof buf, f))
    if (strncmp(buf, name, n) == 0 && buf[n] == ':' &&
        sscanf(buf + n + 1, "%lf kB", &kb) == 1)
      break;
  fclose(f);
  return kb * 1024.0;
}

/* Shared memory is said, not hidden (issue 19 item 9): pl_lazy's shared
 * anonymous mapping (8 MiB, 4 MiB written) is its own figure, the same as
 * the kernel's smaps says of it, and no part of Sys; RssShmem and RssFile
 * are the kernel's, as /proc/PID/status has them. */
static void test_program_shared(void **state) {
  (void)state;
  char path[1300], said[1024];
  snprintf(path, sizeof path, "%s/progs/pl_lazy", build);
  char *argv[] = {path, NULL};
  child_t c = spawn(argv, preload);
  wait_ready_said(c, said, sizeof said);
  unsigned long addr = 0, shared = 0;
  int pid = 0;
  const char *r = strstr(said, "ready ");
  assert_non_null(r);
  assert_int_equal(sscanf(r, "ready %d %lx %lx", &pid, &addr, &shared), 3);
  usleep(300000);
  json_t *j = fresh_snapshot(c.pid);
  assert_non_null(j);
  double rss = 0, lazy = 0;
  assert_int_equal(smaps_of(c.pid, shared, &rss, &lazy), 0);
  double shmem = status_kb(c.pid, "RssShmem");
  double file = status_kb(c.pid, "RssFile");
  print_message(
      "pl_lazy: shared mapping Rss %.1f MiB, /proc RssShmem %.1f "
      "MiB, RssFile %.1f MiB; memtop: shared %.1f of %.1f MiB, "
      "rssshmem %.1f MiB, rssfile %.1f MiB, OtherSys %.1f MiB\n",
      rss / MiB, shmem / MiB, file / MiB,
      num(j, "shared", "AnonResident") / MiB, num(j, "shared", "Anon") / MiB,
      num(j, "kernel", "rssshmem") / MiB, num(j, "kernel", "rssfile") / MiB,
      num(j, "memstats", "OtherSys") / MiB);
  assert_true(num(j, "kernel", "rssshmem") == shmem);
  assert_true(num(j, "kernel", "rssfile") == file);
  assert_true(num(j, "shared", "Anon") == 8 * MiB);
  assert_true(num(j, "shared", "AnonResident") == rss);
  assert_true(rss == 4 * MiB);
  /* Not in Sys: OtherSys is the private mapping (32 MiB) and the
   * libraries' own small ones. */
  assert_true(num(j, "memstats", "OtherSys") <= 34 * MiB);
  json_decref(j);
  stop(c);
}

/* The pid of the cc1plus among the sockets of our directory, or 0. */
static pid_t find_cc1plus(void) {
  DIR *d = opendir(dir);
  struct dirent *e;
  pid_t found = 0;
  if (!d)
    return 0;
  while ((e = readdir(d)) != NULL) {
    int pid;
    char path[300], comm[64] = "";
    if (sscanf(e->d_name, "%d.sock", &pid) != 1)
      continue;
    snprintf(path, sizeof path, "/proc/%d/comm", pid);
    FILE *f = fopen(path, "r");
    if (!f)
      continue;
    if (fgets(comm, sizeof comm, f) && strncmp(comm, "cc1plus", 7) == 0)
      found = pid;
    fclose(f);
  }
  closedir(d);
  return found;
}

static void test_gxx(void **state) {
  (void)state;
  if (!host_have_program("g++"))
    skip();
  char src[128], obj[128];
  snprintf(src, sizeof src, "%s/heavy.cc", dir);
  snprintf(obj, sizeof obj, "%s/heavy.o", dir);
  FILE *f = fopen(src, "w");
  assert_non_null(f);
  /* Deep template instantiations over standard containers: the
   * collector's pages grow to hundreds of MiB for seconds. */
  fputs("#include <map>\n#include <string>\n#include <tuple>\n"
        "#include <vector>\n#include <regex>\n"
        "template <int N> struct F { static constexpr long v = F<N - 1>::v + "
        "F<N - 2>::v % 1000003; };\n"
        "template <> struct F<1> { static constexpr long v = 1; };\n"
        "template <> struct F<0> { static constexpr long v = 0; };\n"
        "template <int N> struct T { std::map<std::string, "
        "std::vector<std::tuple<int, double, std::string>>> m; long f() { "
        "return F<N>::v + T<N - 1>().f(); } };\n"
        "template <> struct T<0> { long f() { return 0; } };\n"
        "long g() { std::regex r(\"a+b*\"); return T<700>().f() + "
        "std::regex_match(\"aab\", r); }\n",
        f);
  fclose(f);
  char *argv[] = {(char *)"g++", (char *)"-ftemplate-depth=2000",
                  (char *)"-O2", (char *)"-c",
                  src,           (char *)"-o",
                  obj,           NULL};
  child_t c = spawn(argv, preload);
  pid_t cc = 0;
  int checked = 0;
  for (int i = 0; i < LIMIT_S * 20 && !checked; i++) {
    if (!cc) {
      cc = find_cc1plus();
      if (!cc) {
        if (waitpid(c.pid, NULL, WNOHANG) == c.pid)
          break;
        usleep(50000);
        continue;
      }
    }
    json_t *j = fresh_snapshot(cc);
    if (!j)
      break; /* cc1plus ended between two snapshots */
    /* Once its collector holds most of its memory. */
    if (num(j, "kernel", "anonrss") >= 64 * MiB) {
      check_accounted(j, cc, "cc1plus");
      checked = 1;
    }
    json_decref(j);
  }
  close(c.in);
  close(c.out);
  int st;
  waitpid(c.pid, &st, 0);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  if (!checked)
    fail_msg("cc1plus ended before a snapshot with 64 MiB anonymous RSS");
}

static void test_demo(void **state) {
  (void)state;
  char demo[1200];
  snprintf(demo, sizeof demo, "%s/plain/contrib/demo", build);
  if (access(demo, X_OK) != 0)
    snprintf(demo, sizeof demo, "%s/contrib/demo", build);
  if (access(demo, X_OK) != 0)
    skip();
  char *argv[] = {demo, NULL};
  child_t c = spawn(argv, preload);
  wait_socket(c.pid);
  /* Its first phase is under way once it holds 8 MiB. The demo allocates
   * and frees all the time: between two samples of glibc's mallinfo2
   * (one a second) its heap figures are the last sample moved by what the
   * preload saw, marked estimated, and an arena that trimmed meanwhile is
   * not in them (Ready once read 15.0 MiB against 10.2 MiB under load).
   * What is promised within 5% is an exact figure: a snapshot with a
   * fresh sample (HeapSys exact). */
  json_t *j = NULL;
  for (int i = 0; i < LIMIT_S * 4; i++) {
    j = fresh_snapshot(c.pid);
    assert_non_null(j);
    if (num(j, "kernel", "anonrss") >= 8 * MiB && exact(j, "HeapSys"))
      break;
    json_decref(j);
    j = NULL;
    usleep(250000);
  }
  assert_non_null(j);
  check_accounted(j, c.pid, "demo");
  json_decref(j);
  stop(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_program_glibc),
      cmocka_unit_test(test_program_jemalloc),
      cmocka_unit_test(test_program_madv_free),
      cmocka_unit_test(test_program_shared),
      cmocka_unit_test(test_python),
      cmocka_unit_test(test_python_freed_half),
      cmocka_unit_test(test_gxx),
      cmocka_unit_test(test_demo),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
