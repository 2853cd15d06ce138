/*
 * test_memtop.c - the real memtop binary ($BUILD/memtop) against real
 * targets over real sockets, each test in its own MEMSTATS_DIR:
 *
 *   --once and --once --json of a target linked with -lmemstats, several
 *   targets, -n rounds, watching all, ps; `run --once` returning the
 *   command's status with its final report, the command's own final
 *   figures even when it ends between two polls (directly and through a
 *   shell that execs it, and when it ends with _exit), and the last poll's,
 *   said so, when it is killed; a
 * PID that is not attachable (exit 1, cause and fix); bad usage (exit 2 and the
 * usage); and fake targets that hang, answer garbage or die mid-reply: memtop
 * reports an error for that PID, still reports the others, and does not hang.
 *
 * No timing is asserted: the only clock is a generous limit that turns a
 * hung memtop into a failure instead of a hung test run.
 */
#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "client/client.h"
#include "common/strbuf.h"
#include "support/foreign.h"
#include "support/host.h"
#include "support/hostile.h"
#include "support/run.h"
#include "support/target_proc.h"
#include "wire/wire.h"
#include <jansson.h>

static char build[1024], memtop[1200], target[1200];
static char dir[64];
/* Another user's libmemstats process, alive for the whole run (as root):
 * what a shared machine has, and no test may see (support/foreign.h). */
static foreign_t foreign;

static run_result_t res;
/* A standard descriptor (1 or 2) that mt() closes in the child
 * before it runs the program, or -1. */
static int close_in_child = -1;
/* A user mt()'s child becomes before it runs memtop, or NULL. */
static const struct passwd *run_as;

/* Runs memtop with the given arguments (NULL-terminated) into res. */
static int mt(const char *first, ...) {
  va_list ap;
  va_start(ap, first);
  int r = run_capture_va(&res, memtop, close_in_child, run_as, first, ap);
  va_end(ap);
  return r;
}

/* ---- running things ---- */

typedef struct proc_s {
  pid_t pid;
  int in; /* its stdin: closing it ends mt_target */
} proc_t;

/* Starts mt_target and waits for its "ready <pid>". */
static proc_t start_target(const char *arg) {
  int pi[2], po[2];
  proc_t p;
  char line[128] = {0};
  size_t len = 0;
  ssize_t n;

  assert_int_equal(pipe2(pi, O_CLOEXEC), 0);
  assert_int_equal(pipe2(po, O_CLOEXEC), 0);
  p.pid = fork();
  assert_true(p.pid >= 0);
  if (p.pid == 0) {
    dup2(pi[0], 0);
    dup2(po[1], 1);
    execl(target, target, arg, (char *)NULL);
    _exit(126);
  }
  close(pi[0]);
  close(po[1]);
  while (len < sizeof line - 1 && strchr(line, '\n') == NULL) {
    n = read(po[0], line + len, sizeof line - 1 - len);
    if (n <= 0)
      break;
    len += (size_t)n;
  }
  close(po[0]);
  assert_true(strncmp(line, "ready ", 6) == 0);
  assert_int_equal(atoi(line + 6), p.pid);
  p.in = pi[1];
  return p;
}

static void stop_target(proc_t p) {
  int st;

  close(p.in);
  kill(p.pid, SIGTERM);
  waitpid(p.pid, &st, 0);
}

/* ---- fake targets ---- */

typedef enum fake_e { FAKE_HANG, FAKE_GARBAGE, FAKE_DIE_MID_REPLY } fake_t;

/* A forked child that listens on $MEMSTATS_DIR/<its pid>.sock like an
 * agent, then misbehaves. Returns its PID once the socket is listening. */
static pid_t start_fake(fake_t kind) {
  int ready[2];
  pid_t pid;
  char c;

  assert_int_equal(pipe(ready), 0);
  pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    struct sockaddr_un sa;
    char buf[4096];
    int s, cfd;

    close(ready[0]);
    s = socket(AF_UNIX, SOCK_STREAM, 0);
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s/%d.sock", dir, (int)getpid());
    if (s < 0 || bind(s, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        listen(s, 16) != 0)
      _exit(1);
    if (write(ready[1], "r", 1) != 1)
      _exit(1);
    for (;;) {
      cfd = accept(s, NULL, NULL);
      if (cfd < 0)
        continue;
      switch (kind) {
      case FAKE_HANG:
        break; /* accepted, never answered, never closed */
      case FAKE_GARBAGE: {
        static const char junk[] = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n"
                                   "\r\nhello\x00\xff\xfe garbage garbage";
        if (read(cfd, buf, sizeof buf) < 0)
          _exit(1);
        if (write(cfd, junk, sizeof junk) < 0)
          _exit(1);
        break;
      }
      case FAKE_DIE_MID_REPLY: {
        /* The start of a real frame header, then death. */
        static const char part[] = "MSTW\x01\x00\x01\x00\x00\x10";
        if (read(cfd, buf, sizeof buf) < 0)
          _exit(1);
        if (write(cfd, part, sizeof part - 1) < 0)
          _exit(1);
        _exit(0);
      }
      }
    }
  }
  close(ready[1]);
  assert_int_equal(read(ready[0], &c, 1), 1);
  close(ready[0]);
  return pid;
}

static void stop_fake(pid_t pid) {
  int st;

  kill(pid, SIGKILL);
  waitpid(pid, &st, 0);
}

/* ---- fixtures ---- */

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/test_memtop.XXXXXX");
  if (mkdtemp(dir) == NULL)
    return -1;
  setenv("MEMSTATS_DIR", dir, 1);
  unsetenv("MEMTOP_TIMEOUT_MS");
  close_in_child = -1;
  run_as = NULL;
  return 0;
}

/* The whole run has another user's libmemstats process beside it (as
 * root; otherwise it cannot be made, and is said). */
static int group_setup(void **state) {
  (void)state;
  if (foreign_start(&foreign, build) != 0)
    print_message("no other user's process beside the tests: %s\n",
                  foreign.why);
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  foreign_stop(&foreign);
  return 0;
}

static int teardown(void **state) {
  char cmd[128];

  (void)state;
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system(cmd) == 0 ? 0 : -1;
}

static int count_lines(const char *s) {
  int n = 0;
  for (; *s; s++)
    n += *s == '\n';
  return n;
}

/* Checks what memtop printed when watching all (--once --json: a JSON
 * report a line; ps: a header, then a row a process): each line is one
 * process's, no process twice, each of `ours` (this test's targets, in
 * its own MEMSTATS_DIR) exactly once, and nothing else: with MEMSTATS_DIR
 * set memtop watches that directory alone, root too (not every user's
 * /tmp/memtop-* and /run/user/ * /memtop), so another user's process on
 * the machine (`foreign`'s, as root) is never listed. */
static void assert_watched(int json, const pid_t *ours, size_t n) {
  char copy[sizeof res.out], *line, *save = NULL;
  int seen[64], lines = 0;
  size_t mine = 0;

  assert_true(n <= 8);
  memcpy(copy, res.out, res.nout + 1);
  for (line = strtok_r(copy, "\n", &save); line != NULL;
       line = strtok_r(NULL, "\n", &save)) {
    int pid = 0;
    if (json) {
      json_t *j = json_loads(line, 0, NULL);
      if (j != NULL)
        pid = (int)json_integer_value(json_object_get(j, "pid"));
      json_decref(j);
    } else if (lines == 0 && strstr(line, "PID") != NULL) {
      continue; /* the header */
    } else if (sscanf(line, " %d", &pid) != 1) {
      pid = 0;
    }
    if (pid <= 0 || lines == (int)(sizeof seen / sizeof seen[0]))
      fail_msg("not a process's line: \"%s\" in:\n%s", line, res.out);
    for (int i = 0; i < lines; i++)
      if (seen[i] == pid)
        fail_msg("PID %d listed twice:\n%s", pid, res.out);
    seen[lines++] = pid;
    int is_ours = 0;
    for (size_t i = 0; i < n; i++)
      is_ours |= ours[i] == pid;
    char sock[sizeof dir + 24];
    snprintf(sock, sizeof sock, "%s/%d.sock", dir, pid);
    if (is_ours)
      mine++;
    else if (access(sock, F_OK) == 0)
      fail_msg("PID %d of this test's directory is listed:\n%s", pid, res.out);
    else
      fail_msg("PID %d, not of MEMSTATS_DIR %s (another user's%s), is "
               "listed:\n%s",
               pid, dir, pid == foreign.t.pid ? ": nobody's" : "?", res.out);
  }
  if (mine != n)
    fail_msg("%zu of this test's %zu processes listed:\n%s", mine, n, res.out);
  assert_int_equal(lines, (int)n);
}

/* Runs memtop with the given arguments as `nobody` in an empty socket
 * directory of nobody's: as root, memtop would watch every user's
 * directory, where other programs on the machine may be running. Returns
 * memtop's status, or -1 (and the test is skipped) when there is no
 * `nobody` to be. As another user than root, memtop runs as that user. */
static int mt_alone(const char *a1, const char *a2) {
  char alone[64];
  const struct passwd *pw = NULL;
  int st;

  if (geteuid() == 0) {
    pw = getpwnam("nobody");
    if (pw == NULL) {
      print_message("skipped: no user `nobody` to watch an empty "
                    "directory as\n");
      skip();
      return -1;
    }
  }
  /* Not under dir, which nobody may not enter. */
  snprintf(alone, sizeof alone, "/tmp/test_memtop_alone.XXXXXX");
  assert_non_null(mkdtemp(alone));
  if (pw != NULL)
    assert_int_equal(chown(alone, pw->pw_uid, pw->pw_gid), 0);
  setenv("MEMSTATS_DIR", alone, 1);
  run_as = pw;
  st = mt(a1, a2, NULL);
  run_as = NULL;
  setenv("MEMSTATS_DIR", dir, 1);
  assert_int_equal(rmdir(alone), 0);
  return st;
}

/* ---- the tests ---- */

static void test_once_text(void **state) {
  proc_t p = start_target(NULL);
  char prefix[64];

  (void)state;
  assert_int_equal(mt("--once", run_pidstr(p.pid), NULL), 0);
  snprintf(prefix, sizeof prefix, "%d mt_target: Ready+Prepared=", p.pid);
  assert_true(strncmp(res.out, prefix, strlen(prefix)) == 0);
  /* The seed-format line: Ready splits into data, fragOverhead, idle. */
  assert_non_null(strstr(res.out, "fragOverhead:1.0MiB"));
  /* Prepared is the 1 MiB the program released and its stacks' unbacked
   * part (OffHeapReleased): exact in test_once_json. */
  assert_non_null(strstr(res.out, "; Prepared="));
  assert_non_null(strstr(res.out, "HeapObjects"));
  assert_non_null(strstr(res.out, "3072"));
  assert_int_equal(res.nerr, 0);
  stop_target(p);
}

/* --once loads none of the libraries only profiles need (libdw, libelf
 * and what they bring, protobuf-c, zlib: pprof/libs.h) nor the live
 * view's (ncursesw, libtinfo), at start or later: the loader names every
 * object it loads (LD_DEBUG=files). */
static void test_once_loads_no_symboliser(void **state) {
  static const char *const libs[] = {
      "file=libdw.", "file=libelf.", "file=libprotobuf-c", "file=liblzma",
      "file=libbz2", "file=libz.",   "file=libncurses",    "file=libtinfo"};
  proc_t p = start_target(NULL);
  size_t i;

  (void)state;
  setenv("LD_DEBUG", "files", 1);
  int st = mt("--once", run_pidstr(p.pid), NULL);
  unsetenv("LD_DEBUG");
  stop_target(p);
  assert_int_equal(st, 0);
  /* The loader spoke (else this could never fail). */
  assert_non_null(strstr(res.err, "file=libc.so.6"));
  for (i = 0; i < sizeof libs / sizeof libs[0]; i++)
    if (strstr(res.err, libs[i]) != NULL)
      fail_msg("memtop --once loaded %s* (LD_DEBUG=files):\n%s", libs[i] + 5,
               res.err);
}

static void test_once_json(void **state) {
  proc_t p = start_target(NULL);
  json_error_t jerr;
  json_t *j, *ms;

  (void)state;
  assert_int_equal(mt("--once", "--json", run_pidstr(p.pid), NULL), 0);
  assert_int_equal(count_lines(res.out), 1);
  j = json_loads(res.out, 0, &jerr);
  assert_non_null(j);
  assert_int_equal(json_integer_value(json_object_get(j, "pid")), p.pid);
  assert_string_equal(json_string_value(json_object_get(j, "comm")),
                      "mt_target");
  ms = json_object_get(j, "memstats");
  assert_non_null(ms);
  assert_int_equal(json_integer_value(json_object_get(ms, "HeapObjects")),
                   3072);
  assert_int_equal(json_integer_value(json_object_get(ms, "HeapReleased")),
                   1 << 20);
  /* Prepared: what the program released, and the part of its stacks the
   * kernel does not back (OffHeapReleased; issue 10). */
  assert_int_equal(
      json_integer_value(
          json_object_get(json_object_get(j, "breakdown"), "Prepared")),
      (1 << 20) + json_integer_value(json_object_get(
                      json_object_get(j, "accounted"), "OffHeapReleased")));
  assert_non_null(json_object_get(j, "quality"));
  json_decref(j);
  stop_target(p);
}

/* --once asks for smaps_rollup: the "kernel" object has the smaps figures,
 * exact. A target that wrote 64 MiB and gave it back with MADV_FREE shows
 * it as LazyFree (unless the kernel has no MADV_FREE, or already reclaimed
 * the pages under memory pressure: then the test says so and skips). */
static void test_once_json_smaps(void **state) {
  proc_t p = start_target("lazyfree");
  json_error_t jerr;
  json_t *j, *k, *q;
  json_int_t lazy, rss;

  (void)state;
  assert_int_equal(mt("--once", "--json", run_pidstr(p.pid), NULL), 0);
  j = json_loads(res.out, 0, &jerr);
  assert_non_null(j);
  k = json_object_get(j, "kernel");
  q = json_object_get(j, "quality");
  assert_non_null(k);
  assert_non_null(q);
  assert_true(json_is_integer(json_object_get(k, "rss")));
  assert_true(json_is_integer(json_object_get(k, "vsz")));
  assert_true(json_is_integer(json_object_get(k, "lazyfree")));
  assert_true(json_is_integer(json_object_get(k, "anonhuge")));
  assert_true(json_is_integer(json_object_get(k, "swap")));
  assert_string_equal(json_string_value(json_object_get(q, "KernelLazyFree")),
                      "exact");
  assert_string_equal(json_string_value(json_object_get(q, "KernelSwap")),
                      "exact");
  /* LazyFree pages stay resident until the kernel reclaims them. */
  lazy = json_integer_value(json_object_get(k, "lazyfree"));
  rss = json_integer_value(json_object_get(k, "rss"));
  assert_true(rss >= lazy);
  json_decref(j);

  /* The text report's Kernel section names the same figures. */
  assert_int_equal(mt("--once", run_pidstr(p.pid), NULL), 0);
  assert_non_null(strstr(res.out, "\nKernel\n"));
  assert_non_null(strstr(res.out, "LazyFree"));
  assert_non_null(strstr(res.out, "AnonHuge"));
  assert_non_null(strstr(res.out, "Swap"));
  stop_target(p);
  if (lazy == 0) {
    print_message("LazyFree stayed 0 after MADV_FREE on 64 MiB: this kernel "
                  "lacks MADV_FREE or reclaimed the pages at once\n");
    skip();
  }
  assert_true(lazy > 0);
  assert_true(lazy <= 64 << 20);
}

static void test_several_targets_and_rounds(void **state) {
  proc_t a = start_target(NULL), b = start_target("churn");
  json_error_t jerr;
  char *line, *save = NULL;
  int i = 0, want[4];

  (void)state;
  want[0] = want[2] = b.pid; /* the order named on the command line */
  want[1] = want[3] = a.pid;
  assert_int_equal(mt("--once", "--json", "-n", "2", "-d", "0.1",
                      run_pidstr(b.pid), run_pidstr(a.pid), NULL),
                   0);
  assert_int_equal(count_lines(res.out), 4);
  for (line = strtok_r(res.out, "\n", &save); line != NULL;
       line = strtok_r(NULL, "\n", &save), i++) {
    json_t *j = json_loads(line, 0, &jerr);
    assert_non_null(j);
    assert_int_equal(json_integer_value(json_object_get(j, "pid")), want[i]);
    json_decref(j);
  }
  /* Text reports of several processes are separated by a blank line. */
  assert_int_equal(mt("--once", run_pidstr(a.pid), run_pidstr(b.pid), NULL), 0);
  assert_non_null(strstr(res.out, "\n\n"));
  stop_target(a);
  stop_target(b);
}

static void test_watch_all_and_ps(void **state) {
  proc_t a = start_target(NULL), b = start_target(NULL);
  char want[64];

  const pid_t ours[] = {a.pid, b.pid};

  (void)state;
  /* No PID: every attachable process in MEMSTATS_DIR, and only those:
   * not nobody's process in /tmp/memtop-65534 (as root). */
  assert_int_equal(mt("--once", "--json", NULL), 0);
  assert_watched(1, ours, 2);
  snprintf(want, sizeof want, "\"pid\":%d,", a.pid);
  assert_non_null(strstr(res.out, want));
  snprintf(want, sizeof want, "\"pid\":%d,", b.pid);
  assert_non_null(strstr(res.out, want));

  assert_int_equal(mt("ps", NULL), 0);
  assert_non_null(strstr(res.out, "PID"));
  assert_non_null(strstr(res.out, "READY+PREPARED"));
  assert_watched(0, ours, 2);
  snprintf(want, sizeof want, "%d ", a.pid);
  assert_non_null(strstr(res.out, want));
  assert_non_null(strstr(res.out, "mt_target"));
  stop_target(a);
  stop_target(b);

  /* Nothing to watch: a message saying how to get something. */
  assert_int_equal(mt_alone("--once", NULL), 1);
  assert_non_null(strstr(res.err, "no attachable processes"));
  assert_non_null(strstr(res.err, "memtop run"));
  assert_int_equal(mt_alone("ps", NULL), 0);
  assert_int_equal(count_lines(res.out), 1);
}

/* Nonzero if memtop's stdout has a line for pid: a ps row or a report's
 * first line ("PID name: ..."), or a JSON object of it. */
static int lists_pid(pid_t pid) {
  char row[32], json[32];
  const char *line = res.out;

  snprintf(row, sizeof row, "%d ", (int)pid);
  snprintf(json, sizeof json, "\"pid\":%d,", (int)pid);
  while (*line != '\0') {
    const char *p = line;
    while (*p == ' ')
      p++;
    if (strncmp(p, row, strlen(row)) == 0)
      return 1;
    const char *end = strchr(line, '\n');
    size_t len = end != NULL ? (size_t)(end - line) : strlen(line);
    if (len > strlen(json) && memmem(line, len, json, strlen(json)) != NULL)
      return 1;
    line += len + (end != NULL);
  }
  return 0;
}

/* A socket directory the listing skips as unsafe (open to group or
 * others, a symbolic link) hides the processes in it: ps and --once say
 * so, with the cause and the fix (--once with exit status 1; ps's stays
 * 0, as for an empty list), instead of an empty list or "no attachable
 * processes" of a directory that holds one. */
static void test_list_unsafe_dir(void **state) {
  proc_t a = start_target(NULL);
  char link[96];

  (void)state;
  assert_int_equal(chmod(dir, 0755), 0);
  assert_int_equal(mt("ps", NULL), 0);
  assert_false(lists_pid(a.pid));
  assert_non_null(strstr(res.err, "not trusting the socket directory"));
  assert_non_null(strstr(res.err, dir));
  assert_non_null(strstr(res.err, "open to group or others"));
  assert_non_null(strstr(res.err, "chmod 700"));
  assert_int_equal(mt("--once", NULL), 1);
  assert_false(lists_pid(a.pid));
  assert_non_null(strstr(res.err, "open to group or others"));
  assert_non_null(strstr(res.err, "chmod 700"));
  assert_null(strstr(res.err, "no attachable processes"));
  assert_int_equal(chmod(dir, 0700), 0);

  /* Through a symbolic link: remove the link (a chmod would change the
   * directory it points to). */
  snprintf(link, sizeof link, "%s.link", dir);
  assert_int_equal(symlink(dir, link), 0);
  setenv("MEMSTATS_DIR", link, 1);
  assert_int_equal(mt("--once", "--json", NULL), 1);
  assert_false(lists_pid(a.pid));
  assert_non_null(strstr(res.err, "is a symbolic link"));
  assert_null(strstr(res.err, "no attachable processes"));
  setenv("MEMSTATS_DIR", dir, 1);
  unlink(link);

  /* The same directory made safe again lists it, and says nothing. */
  assert_int_equal(mt("ps", NULL), 0);
  assert_true(lists_pid(a.pid));
  assert_null(strstr(res.err, "not trusting"));
  stop_target(a);
}

/* Another user's process in its own default directory (nobody's, in
 * /tmp/memtop-65534): root's memtop lists it when no MEMSTATS_DIR is set
 * (every user's directory), and never when one is, even an empty one. */
static void test_other_users_unseen(void **state) {
  (void)state;
  if (foreign.t.pid <= 0) {
    print_message("skipped: %s\n", foreign.why);
    skip();
  }
  assert_int_equal(mt("ps", NULL), 0);
  assert_false(lists_pid(foreign.t.pid));
  assert_int_equal(mt("--once", "--json", NULL), 1); /* nothing to watch */
  assert_false(lists_pid(foreign.t.pid));
  assert_non_null(strstr(res.err, "no attachable processes"));

  /* The same memtop, with no MEMSTATS_DIR: root's view of the machine. */
  unsetenv("MEMSTATS_DIR");
  unsetenv("XDG_RUNTIME_DIR");
  mt("ps", NULL);
  setenv("MEMSTATS_DIR", dir, 1);
  if (!lists_pid(foreign.t.pid))
    fail_msg("root's ps without MEMSTATS_DIR does not list nobody's PID %d "
             "(%s):\n%s",
             (int)foreign.t.pid, foreign.sock, res.out);
}

/* -u USER filters --once, --json and ps by the process's real owner, as
 * top -u does: another user's process is left out, and a filter that
 * leaves none says so. As root without MEMSTATS_DIR (every user's
 * directory), -u nobody shows nobody's process and not root's. */
static void test_user_filter(void **state) {
  proc_t a = start_target(NULL);
  char me[32], other[32];

  (void)state;
  snprintf(me, sizeof me, "%u", (unsigned)getuid());
  snprintf(other, sizeof other, "%u", (unsigned)getuid() + 4321);
  assert_int_equal(mt("--once", "--json", "-u", me, NULL), 0);
  assert_true(lists_pid(a.pid));
  assert_int_equal(mt("--once", "-u", me, NULL), 0);
  assert_true(lists_pid(a.pid));
  assert_int_equal(mt("ps", "-u", me, NULL), 0);
  assert_true(lists_pid(a.pid));

  assert_int_equal(mt("ps", "-u", other, NULL), 0);
  assert_false(lists_pid(a.pid));
  assert_int_equal(mt("--once", "--json", "-u", other, NULL), 1);
  assert_false(lists_pid(a.pid));
  assert_non_null(strstr(res.err, "none of the 1 attachable processes"));

  if (foreign.t.pid > 0) {
    unsetenv("MEMSTATS_DIR");
    unsetenv("XDG_RUNTIME_DIR");
    mt("--once", "--json", "-u", "nobody", NULL);
    int seen = lists_pid(foreign.t.pid), ours = lists_pid(a.pid);
    mt("ps", "-u", "nobody", NULL);
    int seen_ps = lists_pid(foreign.t.pid);
    mt("ps", "-u", "root", NULL);
    int hidden_ps = !lists_pid(foreign.t.pid);
    setenv("MEMSTATS_DIR", dir, 1);
    assert_true(seen && seen_ps && hidden_ps);
    assert_false(ours);
  } else {
    print_message("part skipped: %s\n", foreign.why);
  }
  stop_target(a);
}

static void test_not_attachable(void **state) {
  pid_t plain;
  char want[64];
  int st;

  (void)state;
  /* A live process that does not run libmemstats. */
  plain = fork();
  if (plain == 0) {
    pause();
    _exit(0);
  }
  assert_int_equal(mt("--once", run_pidstr(plain), NULL), 1);
  snprintf(want, sizeof want, "PID %d", plain);
  assert_non_null(strstr(res.err, want));
  assert_non_null(strstr(res.err, "no memstats socket")); /* the cause */
  assert_non_null(strstr(res.err, "memtop run"));         /* the fix */
  assert_int_equal(res.nout, 0);
  kill(plain, SIGKILL);
  waitpid(plain, &st, 0);

  /* A process that does not exist (the one just reaped). */
  assert_int_equal(mt("--once", "--json", run_pidstr(plain), NULL), 1);
  assert_non_null(strstr(res.err, "no such process"));
  assert_non_null(strstr(res.err, want));

  /* A process that runs libmemstats but has no socket (yet: an agent
   * starting looks the same) is not told to start with the library. */
  setenv("MEMSTATS_AGENT", "0", 1);
  proc_t quiet = start_target(NULL);
  unsetenv("MEMSTATS_AGENT");
  assert_int_equal(mt("--once", run_pidstr(quiet.pid), NULL), 1);
  snprintf(want, sizeof want, "PID %d runs libmemstats", quiet.pid);
  if (strstr(res.err, want) == NULL)
    fail_msg("not said to run libmemstats: %.600s", res.err);
  assert_non_null(strstr(res.err, "starting"));
  assert_non_null(strstr(res.err, "MEMSTATS_AGENT=0"));
  assert_null(strstr(res.err, "memtop run"));
  stop_target(quiet);
}

/* Runs a shell command line; its stdout and stderr in buf. */
static void shell_output(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void shell_output(char *buf, size_t len, const char *fmt, ...) {
  char cmd[4096];
  va_list ap;
  size_t n;

  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  n = fread(buf, 1, len - 1, p);
  buf[n] = '\0';
  pclose(p);
}

/* What a program under the preload says with MEMSTATS_DEBUG=1 when its
 * agent cannot start: the cause and the fix that fits it. */
static void test_agent_start_messages(void **state) {
  char preload[1300], out[4096];

  (void)state;
  if (host_preload_path(build, preload, sizeof preload) != 0)
    skip();
  /* A symbolic link as MEMSTATS_DIR: remove the link (a chmod 700 would
   * change the directory it points to). */
  shell_output(out, sizeof out,
               "mkdir -m 700 '%s/real' && ln -s '%s/real' '%s/link' && "
               "MEMSTATS_DIR='%s/link' MEMSTATS_DEBUG=1 LD_PRELOAD='%s' "
               "/bin/true 2>&1",
               dir, dir, dir, dir, preload);
  if (strstr(out, "remove the symbolic link") == NULL ||
      strstr(out, "chmod 700") != NULL)
    fail_msg("symlinked MEMSTATS_DIR: %s", out);
  /* A small address-space limit: no room for the agent's thread, said so,
   * not "resource busy, try again". */
  shell_output(out, sizeof out,
               "ulimit -v 10000; MEMSTATS_DEBUG=1 LD_PRELOAD='%s' /bin/true "
               "2>&1",
               preload);
  if (strstr(out, "agent") != NULL && (strstr(out, "RLIMIT_AS") == NULL ||
                                       strstr(out, "resource busy") != NULL))
    fail_msg("small RLIMIT_AS: %s", out);
}

/* memtop --once over `n` PIDs that do not exist (the highest the kernel
 * allows, skipping any that lives): its peak resident size in KiB
 * (ru_maxrss). */
static long maxrss_dead_pids(int n) {
  static char pids[4096][16];
  static char *argv[4096 + 3];
  struct rusage ru;
  int st, i;
  pid_t m;

  argv[0] = memtop;
  argv[1] = (char *)"--once";
  int pid = 4194303; /* PID_MAX_LIMIT - 1 */
  for (i = 0; i < n && i < 4096; i++, pid--) {
    char proc[32];
    snprintf(proc, sizeof proc, "/proc/%d", pid);
    if (access(proc, F_OK) == 0) {
      i--;
      continue;
    }
    snprintf(pids[i], sizeof pids[i], "%d", pid);
    argv[2 + i] = pids[i];
  }
  argv[2 + i] = NULL;
  m = fork();
  assert_true(m >= 0);
  if (m == 0) {
    int null = open("/dev/null", O_RDWR);
    dup2(null, 1);
    dup2(null, 2);
    execv(memtop, argv);
    _exit(126);
  }
  assert_int_equal(wait4(m, &st, 0, &ru), m);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 1);
  return ru.ru_maxrss;
}

/* A PID that is not attachable costs little: the heavy state of a target
 * (its history, the connection's snapshot) waits until it answers. 4,096
 * dead PIDs cost the old memtop 287 MB, 70 KiB each. */
static void test_memory_per_dead_pid(void **state) {
  long one, many, per;

  (void)state;
  one = maxrss_dead_pids(1);
  many = maxrss_dead_pids(4096);
  per = (many - one) / 4096;
  print_message("memtop --once over 4096 dead PIDs: %ld KiB peak RSS (1 PID: "
                "%ld KiB), %ld KiB per PID\n",
                many, one, per);
  assert_true(per < 24);
}

/* --once -n 1000 -d 0.1 PID whose target exits: its end is said once,
 * with the PID and the name, and memtop stops (exit 1) instead of
 * printing nothing every 0.1 s for the remaining rounds. */
static void test_rounds_target_exits(void **state) {
  proc_t p = start_target(NULL);
  char out[128], err[128], want[96], buf[4096];
  time_t start = time(NULL);
  int fo, fe, st, n = 0;
  pid_t m;

  (void)state;
  snprintf(out, sizeof out, "%s/out", dir);
  snprintf(err, sizeof err, "%s/err", dir);
  m = fork();
  assert_true(m >= 0);
  if (m == 0) {
    fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    fe = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fo, 1);
    dup2(fe, 2);
    execl(memtop, memtop, "--once", "-n", "1000", "-d", "0.1",
          run_pidstr(p.pid), (char *)NULL);
    _exit(126);
  }
  /* The first report, then the target ends. */
  for (;;) {
    FILE *f = fopen(out, "r");
    size_t got = f != NULL ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f != NULL)
      fclose(f);
    buf[got] = '\0';
    if (strstr(buf, "Ready+Prepared=") != NULL)
      break;
    if (time(NULL) - start > RUN_LIMIT_S) {
      kill(m, SIGKILL);
      fail_msg("no first report within %d s", RUN_LIMIT_S);
    }
    usleep(20000);
  }
  stop_target(p);
  while (waitpid(m, &st, WNOHANG) == 0) {
    if (time(NULL) - start > RUN_LIMIT_S) {
      kill(m, SIGKILL);
      waitpid(m, &st, 0);
      fail_msg("memtop went on after its only target exited");
    }
    usleep(20000);
  }
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 1);
  FILE *f = fopen(err, "r");
  assert_non_null(f);
  size_t got = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[got] = '\0';
  snprintf(want, sizeof want, "memtop: PID %d (mt_target) exited\n", p.pid);
  if (strstr(buf, want) == NULL)
    fail_msg("want '%s' on stderr, got: %.600s", want, buf);
  for (const char *q = buf; (q = strstr(q, "exited")) != NULL; q++)
    n++;
  assert_int_equal(n, 1);
}

static void test_bad_usage(void **state) {
  static const char *bad[][3] = {
      {"--bogus", NULL, NULL}, {"-d", "0.05", NULL},        {"-d", "abc", NULL},
      {"-n", "0", NULL},       {"notacommand", NULL, NULL}, {"run", NULL, NULL},
      {"ps", "12", NULL}};
  size_t i;

  (void)state;
  for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(mt(bad[i][0], bad[i][1], bad[i][2], NULL), 2);
    assert_true(strncmp(res.err, "memtop: ", 8) == 0);
    assert_non_null(strstr(res.err, "Usage: memtop"));
    assert_int_equal(res.nout, 0);
  }
  /* A bad regular expression: the C library's words as they are (one
   * backslash, not "\\("), the argument's controls still escaped. */
  assert_int_equal(mt("profile", "1", "--focus", "(", NULL), 2);
  assert_non_null(strstr(res.err, "invalid --focus '(': Unmatched ( or \\("));
  assert_null(strstr(res.err, "\\\\"));
  assert_int_equal(mt("profile", "1", "--focus", "\x1b[31m(", NULL), 2);
  assert_non_null(strstr(res.err, "invalid --focus '\\x1b[31m('"));
  assert_no_terminal_codes("usage error", res.err, res.nerr);
  /* The live view without a terminal: say what to use instead. */
  assert_int_equal(mt(NULL), 2);
  assert_non_null(strstr(res.err, "--once"));
}

static void test_help_version_later_commands(void **state) {
  (void)state;
  assert_int_equal(mt("--help", NULL), 0);
  assert_non_null(strstr(res.out, "Usage: memtop"));
  assert_non_null(strstr(res.out, "--delay"));
  assert_non_null(strstr(res.out, "Exit status"));
  assert_int_equal(mt("-V", NULL), 0);
  assert_non_null(strstr(res.out, "memtop 0."));
  /* profile is built now: a process without the library is said so,
   * by PID, with the hint, as --once says it. */
  assert_int_equal(mt("profile", "1", NULL), 1);
  assert_non_null(strstr(res.err, "PID 1"));
  assert_null(strstr(res.err, "not available yet"));
  assert_int_equal(res.nout, 0);
  /* serve is here (test_serve runs it): a listen address that is no
   * address is bad usage, one that cannot be had an error that says
   * why. */
  assert_int_equal(mt("serve", "--listen", "nonsense", NULL), 2);
  assert_non_null(strstr(res.err, "--web.listen-address 'nonsense'"));
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in sa = {0};
  socklen_t len = sizeof sa;
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
  assert_int_equal(listen(fd, 1), 0);
  assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", ntohs(sa.sin_port));
  assert_int_equal(mt("serve", "--listen", addr, "--unsafe-no-auth", NULL), 1);
  assert_non_null(strstr(res.err, "another program serves that port"));
  close(fd);
}

static void test_hung_target(void **state) {
  proc_t good = start_target(NULL);
  pid_t hung = start_fake(FAKE_HANG);
  char want[64];

  (void)state;
  setenv("MEMTOP_TIMEOUT_MS", "300", 1);
  assert_int_equal(mt("--once", run_pidstr(hung), run_pidstr(good.pid), NULL),
                   1);
  snprintf(want, sizeof want, "PID %d: no answer", hung);
  assert_non_null(strstr(res.err, want));
  /* --once does not try again: it must not say it will. */
  assert_null(strstr(res.err, "retrying"));
  /* The other target is reported all the same. */
  snprintf(want, sizeof want, "%d mt_target: Ready+Prepared=", good.pid);
  assert_non_null(strstr(res.out, want));
  /* With rounds to come it does, and says so, except after the last. */
  assert_int_equal(mt("--once", "-n", "2", "-d", "0.1", run_pidstr(hung), NULL),
                   1);
  assert_non_null(strstr(res.err, "; retrying\n"));
  assert_int_equal(count_lines(res.err), 2);
  assert_null(strstr(strchr(res.err, '\n') + 1, "retrying"));
  /* Watching all: the hung one is an error, the good one a report. */
  assert_int_equal(mt("--once", "--json", NULL), 1);
  assert_watched(1, &good.pid, 1);
  snprintf(want, sizeof want, "PID %d", hung);
  assert_non_null(strstr(res.err, want));
  stop_fake(hung);
  stop_target(good);
}

static void test_garbage_target(void **state) {
  pid_t bad = start_fake(FAKE_GARBAGE);
  char want[64];

  (void)state;
  assert_int_equal(mt("--once", run_pidstr(bad), NULL), 1);
  snprintf(want, sizeof want, "PID %d: ", bad);
  assert_non_null(strstr(res.err, want));
  assert_int_equal(res.nout, 0);
  assert_int_equal(
      mt("--once", "--json", "-n", "2", "-d", "0.1", run_pidstr(bad), NULL), 1);
  assert_non_null(strstr(res.err, want));
  stop_fake(bad);
}

static void test_target_dies_mid_reply(void **state) {
  pid_t dying = start_fake(FAKE_DIE_MID_REPLY);
  char want[64];

  (void)state;
  assert_int_equal(mt("--once", run_pidstr(dying), NULL), 1);
  snprintf(want, sizeof want, "PID %d", dying);
  assert_non_null(strstr(res.err, want));
  assert_non_null(strstr(res.err, "exited"));
  stop_fake(dying);
}

/* In a sanitizer build the preload carries the sanitizer's runtime, which
 * refuses to load into a program that was not built with it: `run` cannot
 * work there, and the run tests skip. */
/* The preload `memtop run` gives its commands (MEMTOP_PRELOAD): under a
 * sanitizer the build's plain one (tests/support/host.h), so that memtop
 * itself runs instrumented. */
static char run_preload[1300];

static int preload_usable(void) {
  char env[1400];
  char *argv[] = {(char *)"/bin/true", NULL};
  char *envp[] = {env, NULL};
  int st;
  pid_t pid;

  snprintf(env, sizeof env, "LD_PRELOAD=%s", run_preload);
  pid = fork();
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    execve(argv[0], argv, envp);
    _exit(126);
  }
  return waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static int have_python3(void) {
  return access("/usr/bin/python3", X_OK) == 0;
}

static void test_run_once(void **state) {
  (void)state;
  if (!have_python3() || !preload_usable())
    skip();
  /* The command's own status comes back, with its final report. */
  assert_int_equal(
      mt("run", "--once", "-d", "0.1", "--", "/usr/bin/python3", "-c",
         "import time\nx = [bytearray(1000) for _ in range(20000)]\n"
         "print('child output')\ntime.sleep(0.8)\nraise SystemExit(3)",
         NULL),
      3);
  assert_non_null(strstr(res.out, "child output"));
  assert_non_null(strstr(res.out, " python3: Ready+Prepared="));
  assert_non_null(strstr(res.out, "tracked"));
  /* JSON too. */
  assert_int_equal(mt("run", "--once", "--json", "-d", "0.1", "--",
                      "/usr/bin/python3", "-c", "import time\ntime.sleep(0.5)",
                      NULL),
                   0);
  assert_non_null(strstr(res.out, "\"comm\":\"python3\""));
}

static void test_run_status(void **state) {
  (void)state;
  if (!preload_usable())
    skip();
  /* Whatever memtop could read, the status is the command's. */
  assert_int_equal(mt("run", "--once", "--", "/bin/sh", "-c", "exit 5", NULL),
                   5);
  assert_int_equal(
      mt("run", "--once", "--", "/bin/sh", "-c", "kill -9 $$", NULL), 137);
}

/* Commands that never start need no preload that can load: this runs
 * under the sanitizers too (LeakSanitizer found the loop left unclosed
 * after a failed spawn). */
static void test_run_cannot_start(void **state) {
  (void)state;
  /* A command that is not there: the shell's 127, with the cause. */
  assert_int_equal(mt("run", "--once", "--", "/nonexistent/cmd", NULL), 127);
  assert_non_null(strstr(res.err, "/nonexistent/cmd"));
  assert_non_null(strstr(res.err, "no such file"));
  /* One that cannot be executed: the shell's 126. */
  assert_int_equal(mt("run", "--once", "--", "/etc/passwd", NULL), 126);
  assert_non_null(strstr(res.err, "permission denied"));
  /* ... with the cause and the fix, not the errno alone (a directory
   * too). */
  assert_non_null(strstr(res.err, "chmod +x"));
  assert_int_equal(mt("run", "--once", "--", "/tmp", NULL), 126);
  assert_non_null(strstr(res.err, "a directory"));
  /* A preload that is not there: said, with the fix. */
  setenv("MEMTOP_PRELOAD", "/nonexistent/libmemstats-preload.so", 1);
  assert_int_equal(mt("run", "--once", "--", "/bin/true", NULL), 1);
  assert_non_null(strstr(res.err, "MEMTOP_PRELOAD"));
  setenv("MEMTOP_PRELOAD", run_preload, 1);
}

/* `memtop run -- CMD < FILE` on a terminal: the live view cannot read
 * keys from the file, and says so with the way to give the command its
 * input (redirected inside); memtop's stdout a terminal (a pty), its
 * stdin /dev/null, its stderr a pipe. */
static void test_run_input_redirected(void **state) {
  char err[2048], *slave;
  int master, pe[2], st;
  size_t n = 0;
  ssize_t k;

  (void)state;
  master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  assert_true(master >= 0);
  assert_int_equal(grantpt(master), 0);
  assert_int_equal(unlockpt(master), 0);
  slave = ptsname(master);
  assert_non_null(slave);
  assert_int_equal(pipe2(pe, O_CLOEXEC), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int in = open("/dev/null", O_RDONLY), out = open(slave, O_RDWR);
    if (in < 0 || out < 0 || dup2(in, 0) != 0 || dup2(out, 1) != 1 ||
        dup2(pe[1], 2) != 2)
      _exit(125);
    execl(memtop, memtop, "run", "--", "/bin/true", (char *)NULL);
    _exit(126);
  }
  close(pe[1]);
  while (n < sizeof err - 1 &&
         (k = read(pe[0], err + n, sizeof err - 1 - n)) > 0)
    n += (size_t)k;
  err[n] = '\0';
  close(pe[0]);
  assert_int_equal(waitpid(pid, &st, 0), pid);
  close(master);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 2);
  if (strstr(err, "needs a terminal") == NULL ||
      strstr(err, "sh -c 'CMD < FILE'") == NULL)
    fail_msg("stderr: %s", err);
}

/* A socket directory whose socket path cannot fit in a Unix socket's
 * address (108 bytes): `run` says so before it starts the command (its
 * library could never serve), and a PID named is told the same, not
 * "invalid argument" on a path made of what the buffer held. */
static void test_sockdir_too_long(void **state) {
  char longdir[256], pid[16];

  (void)state;
  snprintf(longdir, sizeof longdir, "%s/%0120d", dir, 0);
  snprintf(pid, sizeof pid, "%d", (int)getpid());
  setenv("MEMSTATS_DIR", longdir, 1);
  assert_int_equal(mt("run", "--once", "--", "/bin/true", NULL), 1);
  assert_non_null(strstr(res.err, "too long"));
  assert_non_null(strstr(res.err, "shorter directory"));
  assert_int_equal(mt("--once", pid, NULL), 1);
  if (strstr(res.err, "longer than a Unix socket") == NULL ||
      strstr(res.err, "invalid argument") != NULL)
    fail_msg("--once: %s", res.err);
  assert_int_equal(mt("profile", pid, "-o", "/dev/null", NULL), 1);
  if (strstr(res.err, "longer than a Unix socket") == NULL)
    fail_msg("profile: %s", res.err);
  assert_no_terminal_codes("stderr", res.err, res.nerr);
  /* A listing says why it lists nothing, not "no attachable processes". */
  assert_int_equal(mt("--once", NULL), 1);
  if (strstr(res.err, "too long") == NULL)
    fail_msg("--once: %s", res.err);
  assert_int_equal(mt("ps", NULL), 0);
  assert_non_null(strstr(res.err, "too long"));
  setenv("MEMSTATS_DIR", dir, 1);
}

/* A socket directory the command's library would refuse (open to
 * others, another user's, a symbolic link): `memtop run` says why and
 * what to do before it starts the command, instead of waiting for a
 * socket that never comes; on screen too (the check comes before the
 * terminal's). */
static void test_run_unsafe_dir(void **state) {
  char unsafe[64], link[80], mark[96], script[160];
  struct stat st;

  (void)state;
  snprintf(unsafe, sizeof unsafe, "/tmp/memtop-unsafe-XXXXXX");
  assert_non_null(mkdtemp(unsafe));
  assert_int_equal(chmod(unsafe, 0777), 0);
  snprintf(mark, sizeof mark, "%s/started", dir);
  snprintf(script, sizeof script, "touch '%s'", mark);
  setenv("MEMSTATS_DIR", unsafe, 1);
  assert_int_equal(mt("run", "--once", "--", "/bin/sh", "-c", script, NULL), 1);
  assert_non_null(strstr(res.err, unsafe));
  assert_non_null(strstr(res.err, "open to group or others"));
  assert_non_null(strstr(res.err, "chmod 700"));
  assert_int_equal(mt("run", "--", "/bin/sh", "-c", script, NULL), 1);
  assert_non_null(strstr(res.err, "open to group or others"));
  assert_int_equal(stat(mark, &st), -1); /* never started */

  snprintf(link, sizeof link, "%s.link", unsafe);
  assert_int_equal(chmod(unsafe, 0700), 0);
  assert_int_equal(symlink(unsafe, link), 0);
  setenv("MEMSTATS_DIR", link, 1);
  assert_int_equal(mt("run", "--once", "--", "/bin/sh", "-c", script, NULL), 1);
  assert_non_null(strstr(res.err, "is a symbolic link"));
  unlink(link);

  if (geteuid() == 0) {
    assert_int_equal(chown(unsafe, 65534, 65534), 0);
    setenv("MEMSTATS_DIR", unsafe, 1);
    assert_int_equal(mt("run", "--once", "--", "/bin/sh", "-c", script, NULL),
                     1);
    assert_non_null(strstr(res.err, "owned by another user"));
  }
  setenv("MEMSTATS_DIR", dir, 1);
  assert_int_equal(stat(mark, &st), -1);
  rmdir(unsafe);
}

/* ---- run: the final snapshot ---- */

#define PL_FINAL_BLOCKS 20000     /* tests/progs/pl_final.c */
#define PL_FINAL_AFTER_VFORK 5000 /* tests/progs/pl_final.c */

static char pl_final[1200];

/* Parses memtop's one JSON line and checks the command's identity. */
static json_t *run_json(const char *comm) {
  json_error_t jerr;
  json_t *j = json_loads(res.out, 0, &jerr);

  if (j == NULL)
    fail_msg("not one JSON object (%s): %s", jerr.text, res.out);
  assert_string_equal(json_string_value(json_object_get(j, "comm")), comm);
  return j;
}

static json_int_t memstat(json_t *j, const char *name) {
  json_t *v = json_object_get(json_object_get(j, "memstats"), name);

  assert_non_null(v);
  return json_integer_value(v);
}

/* `memtop run --once --json` of pl_final HOW: its exit status, and final
 * figures (not the last poll's) with at least min_objects objects. */
static void run_final_ending(const char *how, int status, long min_objects) {
  assert_int_equal(
      mt("run", "--once", "--json", "-d", "10", "--", pl_final, how, NULL),
      status);
  json_t *j = run_json("pl_final");
  assert_true(memstat(j, "HeapObjects") >= min_objects);
  json_decref(j);
  assert_null(strstr(res.err, "last poll"));
}

static void test_run_final_figures(void **state) {
  json_t *j;

  (void)state;
  if (!preload_usable())
    skip();
  /* pl_final allocates after memtop's first poll and ends long before
   * the next one (-d 10): only its final snapshot holds the blocks. */
  assert_int_equal(
      mt("run", "--once", "--json", "-d", "10", "--", pl_final, NULL), 0);
  j = run_json("pl_final");
  assert_true(memstat(j, "HeapObjects") >= PL_FINAL_BLOCKS);
  assert_true(memstat(j, "Mallocs") >= PL_FINAL_BLOCKS);
  assert_true(memstat(j, "HeapAlloc") >= 48 * PL_FINAL_BLOCKS);
  /* The allocator's figures are as fresh as the engine's (not its sample
   * from before the blocks): the heap in use holds every live byte. */
  assert_true(memstat(j, "HeapInuse") >= memstat(j, "HeapAlloc"));
  json_decref(j);
  assert_null(strstr(res.err, "last poll"));

  /* Through a shell that execs it: same PID, and the figures are the
   * program's, not the shell's (whose exec runs no exit handlers). */
  char script[1400];
  snprintf(script, sizeof script, "exec %s", pl_final);
  assert_int_equal(mt("run", "--once", "--json", "-d", "10", "--", "/bin/sh",
                      "-c", script, NULL),
                   0);
  j = run_json("pl_final");
  assert_true(memstat(j, "HeapObjects") >= PL_FINAL_BLOCKS);
  json_decref(j);

  /* The text report is the final one too, under the program's name. */
  assert_int_equal(
      mt("run", "--once", "-d", "10", "--", "/bin/sh", "-c", script, NULL), 0);
  assert_non_null(strstr(res.out, " pl_final: Ready+Prepared="));
  assert_null(strstr(res.err, "last poll"));

  /* _exit() runs no exit handlers: the preload's _exit sends the final
   * snapshot, and the status is the program's. */
  run_final_ending("_exit", 4, PL_FINAL_BLOCKS);
  /* A vfork() child's _exit sends nothing (it shares the program's
   * memory); the program's own exit does, with what it made after. */
  run_final_ending("vfork", 0, PL_FINAL_BLOCKS + PL_FINAL_AFTER_VFORK);
}

static void test_run_killed_falls_back(void **state) {
  char script[1400];
  json_t *j;

  (void)state;
  if (!preload_usable())
    skip();
  /* Killed by a signal, a process sends nothing: the report is the last
   * poll's, memtop says so, and the status is the shell's 128+N. */
  assert_int_equal(
      mt("run", "--once", "--json", "-d", "0.1", "--", pl_final, "kill", NULL),
      128 + SIGKILL);
  assert_non_null(strstr(res.err, "sent no final figures"));
  assert_non_null(strstr(res.err, "the report is from the last poll"));
  j = run_json("pl_final");
  json_decref(j);

  /* The same through a shell that execs it, in text. */
  snprintf(script, sizeof script, "exec %s kill", pl_final);
  assert_int_equal(
      mt("run", "--once", "-d", "0.1", "--", "/bin/sh", "-c", script, NULL),
      128 + SIGKILL);
  assert_non_null(strstr(res.err, "the report is from the last poll"));
  assert_non_null(strstr(res.out, " pl_final: Ready+Prepared="));
}

/* ---- the socket's life ---- */

/* Waits for path to exist, at most RUN_LIMIT_S (a hung program, not a
 * slow one). */
static int wait_for_file(const char *path) {
  struct stat st;
  time_t start = time(NULL);

  while (stat(path, &st) != 0) {
    if (time(NULL) - start > RUN_LIMIT_S)
      return 0;
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  return 1;
}

/* The agent held between its bind and its listen (liblistenpause.so):
 * its socket is not at <pid>.sock yet (it was, refusing connections, and
 * memtop removed it as stale: the agent then served a socket no one could
 * find); memtop's listing meanwhile changes nothing, and once the agent
 * listens, memtop reads it. */
static void test_socket_appears_listening(void **state) {
  char shim[1300], pre[1400], paused[128], go[128], sock[128], line[64];
  const char *argv[] = {target, NULL};
  struct stat st;
  target_t t;

  (void)state;
  snprintf(shim, sizeof shim, "%s/progs/liblistenpause.so", build);
  snprintf(pre, sizeof pre, "LD_PRELOAD=%s", shim);
  /* Under make asan the target is instrumented: its runtime then lets a
   * library come before it. */
  char asan[600];
  const char *ao = getenv("ASAN_OPTIONS");
  snprintf(asan, sizeof asan, "ASAN_OPTIONS=%s%sverify_asan_link_order=0",
           ao != NULL ? ao : "", ao != NULL && ao[0] ? ":" : "");
  const char *env[] = {pre, asan, NULL};
  snprintf(paused, sizeof paused, "%s/listen-paused", dir);
  snprintf(go, sizeof go, "%s/listen-go", dir);
  assert_int_equal(target_launch(&t, argv, dir, env, NULL, NULL, 0), 0);
  snprintf(sock, sizeof sock, "%s/%d.sock", dir, (int)t.pid);
  if (!wait_for_file(paused)) {
    target_kill(&t);
    fail_msg("the agent never reached listen()");
  }
  int bound_in_place = lstat(sock, &st) == 0;
  assert_int_equal(mt("ps", NULL), 0);
  assert_int_equal(mt("--once", "--json", NULL), 1); /* none listed yet */
  int fd = open(go, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  assert_true(fd >= 0);
  close(fd);
  assert_int_equal(target_read_line(t.out, line, sizeof line), 0);
  assert_true(strncmp(line, "ready ", 6) == 0);
  if (bound_in_place) {
    target_kill(&t);
    fail_msg("%s was there, refusing connections, before the agent "
             "listened",
             sock);
  }
  assert_int_equal(mt("--once", run_pidstr(t.pid), NULL), 0);
  target_wait(&t);
}

/* A live process that runs libmemstats (the preload, with
 * MEMSTATS_AGENT=0) and a socket at its PID that refuses connections
 * (made after it started: an agent that has bound and not listened yet
 * looks the same). memtop's listing leaves it: a socket is removed only
 * when its PID is gone or runs another program. */
static void test_refusing_socket_of_live_target_kept(void **state) {
  char pre[1400], sock[128];
  const char *argv[] = {"sleep", "600", NULL};
  struct sockaddr_un sa;
  struct stat st;
  target_t t;

  (void)state;
  if (!preload_usable())
    skip();
  snprintf(pre, sizeof pre, "LD_PRELOAD=%s", run_preload);
  const char *env[] = {pre, "MEMSTATS_AGENT=0", NULL};
  assert_int_equal(target_launch(&t, argv, dir, env, NULL, NULL, 0), 0);
  /* The preload is mapped before sleep's main runs; wait for it. */
  for (int i = 0; i < 100 * RUN_LIMIT_S && !msc_proc_maps_libmemstats(t.pid);
       i++) {
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  assert_true(msc_proc_maps_libmemstats(t.pid));
  snprintf(sock, sizeof sock, "%s/%d.sock", dir, (int)t.pid);
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s/%d.sock", dir, (int)t.pid);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
  close(fd);

  assert_int_equal(mt("ps", NULL), 0);
  assert_int_equal(lstat(sock, &st), 0);
  mt("--once", NULL);
  assert_int_equal(lstat(sock, &st), 0);
  assert_int_equal(mt("--once", run_pidstr(t.pid), NULL), 1);
  assert_non_null(strstr(res.err, "runs libmemstats but does not accept"));
  target_kill(&t);
  /* Its PID gone, the socket is stale: the listing removes it. */
  assert_int_equal(mt("ps", NULL), 0);
  assert_int_not_equal(lstat(sock, &st), 0);
}

/* Binds a socket at dir/name (nobody listens) and leaves it there. */
static void leave_socket(const char *name) {
  struct sockaddr_un sa;

  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s/%s", dir, name);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(fd >= 0);
  assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
  close(fd);
}

/* An agent killed between its bind and its rename leaves its temporary
 * ".<pid>.new": memtop's listing removes it once the PID is gone, and
 * leaves that of a live PID (an agent starting) alone. */
static void test_dead_bound_socket_removed(void **state) {
  char dead_name[64], live_name[64], path[128];
  struct stat st;
  int status;

  (void)state;
  pid_t dead = fork();
  if (dead == 0)
    _exit(0);
  assert_int_equal(waitpid(dead, &status, 0), dead);
  snprintf(dead_name, sizeof dead_name, ".%d.new", (int)dead);
  snprintf(live_name, sizeof live_name, ".%d.new", (int)getpid());
  leave_socket(dead_name);
  leave_socket(live_name);
  assert_int_equal(mt("ps", NULL), 0);
  snprintf(path, sizeof path, "%s/%s", dir, dead_name);
  assert_int_not_equal(lstat(path, &st), 0);
  snprintf(path, sizeof path, "%s/%s", dir, live_name);
  assert_int_equal(lstat(path, &st), 0);
}

/* ---- a stranger's agent ---- */

/* What a hostile process calls itself (PR_SET_NAME keeps 15 bytes): clear
 * the screen is too long, so a retitle, then U+009B and U+202E. */
#define HOSTILE_COMM "\x1b]2;pwn\x07\xc2\x9b\xe2\x80\xae"

/* How a stranger's agent answers a snapshot request. */
enum { ANSWER_NOTHING = 0, ANSWER_SNAPSHOT, ANSWER_REFUSAL, ANSWER_TRICKLE };

/* ANSWER_TRICKLE's heap profile: one tiny frame (no record, never the
 * last) every 100 ms, for as long as the reader stays. Returns when the
 * reader has gone. */
static void trickle_profile(int cfd, const ms__wire_hello_t *h) {
  static uint8_t frame[256];
  ms__wire_writer_t w;

  for (uint64_t chunk = 0;; chunk++) {
    ms__wire_writer_init(&w, frame, sizeof frame);
    ms__wire_begin(&w, MS__MSG_PROFILE);
    ms__wire_put_u64(&w, MS__TAG_PROF_CHUNK, chunk);
    if (chunk == 0) {
      ms__wire_put_u64(&w, MS__TAG_PID, (uint64_t)h->pid);
      ms__wire_put_u64(&w, MS__TAG_START_TIME, h->start_time);
      ms__wire_put_u64(&w, MS__TAG_PROF_RATE, 524288);
    }
    if (ms__wire_end(&w) != 0 ||
        send(cfd, frame, w.len, MSG_NOSIGNAL) != (ssize_t)w.len)
      return;
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
}

/* A forked child named HOSTILE_COMM that listens on
 * $MEMSTATS_DIR/<its pid>.sock like an agent. ANSWER_SNAPSHOT: it speaks
 * the protocol and serves a snapshot whose every string is hostile and as
 * long as the format allows (support/hostile.h); ANSWER_REFUSAL: it
 * refuses with a hostile reason; ANSWER_NOTHING: it accepts and never
 * answers, so memtop shows its /proc name; ANSWER_TRICKLE: it serves its
 * snapshot, then trickles its heap profile for ever (trickle_profile).
 * Returns its PID once it listens. */
static pid_t start_hostile_agent(int answer) {
  int ready[2];
  pid_t pid;
  char c;

  assert_int_equal(pipe(ready), 0);
  pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    static uint8_t in[8192], out[MS__WIRE_SNAPSHOT_MAX];
    static ms_snapshot_t snap;
    ms__wire_hello_t h;
    struct sockaddr_un sa;
    uint64_t start = 0;
    int s, cfd;

    close(ready[0]);
    /* Gone with the test, even when an assertion cut the test short. */
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    prctl(PR_SET_NAME, HOSTILE_COMM, 0, 0, 0);
    if (msc_proc_start_time((int)getpid(), &start) != 0)
      _exit(1);
    hostile_snapshot(&snap, (int32_t)getpid());
    snap.start_time = start;
    memset(&h, 0, sizeof h);
    h.pid = snap.pid;
    h.start_time = start;
    memcpy(h.comm, snap.comm, sizeof h.comm);
    snprintf(h.lib_version, sizeof h.lib_version, "0.1.0");
    h.proto_version = MS__WIRE_VERSION;
    h.nproviders = snap.nproviders;
    memcpy(h.providers, snap.providers, sizeof h.providers);
    h.capabilities = MS__CAP_SNAPSHOT | MS__CAP_PROFILE;

    s = socket(AF_UNIX, SOCK_STREAM, 0);
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s/%d.sock", dir, (int)getpid());
    if (s < 0 || bind(s, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        listen(s, 16) != 0)
      _exit(1);
    if (write(ready[1], "r", 1) != 1)
      _exit(1);
    for (;;) {
      size_t have = 0;
      cfd = accept(s, NULL, NULL);
      if (cfd < 0 || !answer)
        continue; /* without answer: accepted, never answered */
      for (;;) {
        ssize_t n = read(cfd, in + have, sizeof in - have);
        ms__frame_t f;
        const char *why;
        if (n <= 0)
          break;
        have += (size_t)n;
        while (ms__wire_frame(in, have, MS__WIRE_MAX_REQUEST, &f, &why) == 0) {
          size_t flen = MS__WIRE_HEADER + f.length;
          ms__wire_writer_t w;
          ms__wire_writer_init(&w, out, sizeof out);
          if (f.type == MS__MSG_HELLO)
            ms__wire_encode_hello(&w, &h);
          else if (f.type == MS__MSG_SNAPSHOT_REQ && answer == ANSWER_REFUSAL)
            ms__wire_encode_error(&w, MS__MSG_REFUSED, MS_EREFUSED, snap.comm);
          else if (f.type == MS__MSG_SNAPSHOT_REQ)
            ms__wire_encode_snapshot(&w, &snap, NULL);
          run_send_all(cfd, out, w.len);
          memmove(in, in + flen, have - flen);
          have -= flen;
          if (f.type == MS__MSG_PROFILE_REQ && answer == ANSWER_TRICKLE) {
            trickle_profile(cfd, &h);
            have = 0;
            break;
          }
        }
      }
      close(cfd);
    }
  }
  close(ready[1]);
  assert_int_equal(read(ready[0], &c, 1), 1);
  close(ready[0]);
  return pid;
}

/* A target that trickles its answer (its heap profile, one tiny frame
 * every 100 ms, never the last) beside a good one: with --sites, memtop
 * gives up on it at the deadline (--timeout, or MEMTOP_TIMEOUT_MS: one
 * setting), says why, and prints the good one's report; the frames that
 * keep coming do not hold memtop (they re-armed a 2 s timeout each, and
 * memtop printed nothing for anyone, ever). The only clock is the
 * deadline itself, and run.h's limit for a hung memtop. */
static void test_trickling_target(void **state) {
  proc_t good = start_target(NULL);
  pid_t slow = start_hostile_agent(ANSWER_TRICKLE);
  char want[64], why[64];

  (void)state;
  snprintf(want, sizeof want, "%d mt_target: Ready+Prepared=", good.pid);
  snprintf(why, sizeof why, "PID %d: the answer was not whole within 500 ms",
           slow);
  /* Every target (the round waits for all), then the two named. */
  assert_int_equal(mt("--once", "--sites", "3", "--timeout", "0.5", NULL), 1);
  if (strstr(res.out, want) == NULL || strstr(res.err, why) == NULL)
    fail_msg("stdout:\n%.2000s\nstderr:\n%.2000s", res.out, res.err);
  assert_int_equal(mt("--once", "--json", "--sites", "3", "--timeout", "0.5",
                      run_pidstr(slow), run_pidstr(good.pid), NULL),
                   1);
  snprintf(want, sizeof want, "\"pid\":%d,", good.pid);
  assert_non_null(strstr(res.out, want));
  assert_non_null(strstr(res.err, why));
  assert_no_terminal_codes("stderr", res.err, res.nerr);

  /* The same deadline from the environment, when --timeout is not given
   * (and --timeout wins over it). */
  setenv("MEMTOP_TIMEOUT_MS", "500", 1);
  assert_int_equal(mt("--once", "--sites", "3", NULL), 1);
  assert_non_null(strstr(res.err, why));
  snprintf(why, sizeof why, "PID %d: the answer was not whole within 300 ms",
           slow);
  assert_int_equal(
      mt("--once", "--sites", "3", "--timeout", "0.3", run_pidstr(slow), NULL),
      1);
  assert_non_null(strstr(res.err, why));
  setenv("MEMTOP_TIMEOUT_MS", "soon", 1);
  assert_int_equal(mt("--once", run_pidstr(good.pid), NULL), 0);
  assert_non_null(strstr(res.err, "ignoring MEMTOP_TIMEOUT_MS=soon"));
  unsetenv("MEMTOP_TIMEOUT_MS");
  assert_int_equal(mt("--once", "--timeout", "0", NULL), 2);
  assert_non_null(strstr(res.err, "invalid --timeout"));

  stop_fake(slow);
  stop_target(good);
}

/* The safe form of the last provider's name as memtop receives it (the
 * decoder has already turned C0 controls into '?'). */
static void last_provider_shown(ms__strbuf_t *out) {
  static ms_snapshot_t s, d;
  static uint8_t buf[MS__WIRE_SNAPSHOT_MAX];
  ms__wire_writer_t w;

  hostile_snapshot(&s, 1);
  ms__wire_writer_init(&w, buf, sizeof buf);
  assert_int_equal(ms__wire_encode_snapshot(&w, &s, NULL), 0);
  assert_int_equal(ms__wire_decode_snapshot(buf + MS__WIRE_HEADER,
                                            w.len - MS__WIRE_HEADER, &d, NULL),
                   0);
  ms__strbuf_put_safe(out, d.providers[MS_MAX_PROVIDERS - 1], MS_NAME_MAX);
}

static void test_hostile_agent(void **state) {
  pid_t bad = start_hostile_agent(ANSWER_SNAPSHOT);
  ms__strbuf_t last = MS_STRBUF_INIT;
  char want[64];

  (void)state;
  last_provider_shown(&last);
  /* A stranger's snapshot with 8 provider names of 63 bytes: memtop ps
   * (watching all, as root's would) shows it in full, in safe form, and
   * nothing overruns (the old ps wrote past its 256-byte buffer). */
  if (mt("ps", NULL) != 0)
    fail_msg("memtop ps exited %d: %.2000s", res.status, res.err);
  assert_no_terminal_codes("ps stdout", res.out, res.nout);
  assert_no_terminal_codes("ps stderr", res.err, res.nerr);
  snprintf(want, sizeof want, "%d ", bad);
  assert_non_null(strstr(res.out, want));
  assert_watched(0, &bad, 1);
  assert_non_null(strstr(res.out, last.data)); /* every provider, whole */
  ms__strbuf_free(&last);

  assert_int_equal(mt("--once", run_pidstr(bad), NULL), 0);
  assert_no_terminal_codes("report", res.out, res.nout);
  assert_non_null(strstr(res.out, "\\u202e"));
  assert_int_equal(mt("--once", "--json", run_pidstr(bad), NULL), 0);
  assert_no_terminal_codes("json", res.out, res.nout);
  json_t *j = json_loads(res.out, 0, NULL);
  assert_non_null(j);
  assert_int_equal(json_array_size(json_object_get(j, "providers")),
                   MS_MAX_PROVIDERS);
  json_decref(j);
  stop_fake(bad);

  /* A refusal whose reason is hostile: on stderr in its safe form. */
  bad = start_hostile_agent(ANSWER_REFUSAL);
  assert_int_equal(mt("--once", run_pidstr(bad), NULL), 1);
  assert_no_terminal_codes("refusal on stderr", res.err, res.nerr);
  assert_non_null(strstr(res.err, "refused"));
  assert_non_null(strstr(res.err, "\\u202e"));
  stop_fake(bad);
}

static void test_hostile_proc_name(void **state) {
  pid_t quiet = start_hostile_agent(ANSWER_NOTHING);
  char want[64];

  (void)state;
  /* A target that does not answer: ps shows the name from /proc, which
   * the process chose (an ESC sequence once retitled root's terminal). */
  setenv("MEMTOP_TIMEOUT_MS", "300", 1);
  assert_int_equal(mt("ps", NULL), 0);
  assert_no_terminal_codes("ps stdout", res.out, res.nout);
  assert_no_terminal_codes("ps stderr", res.err, res.nerr);
  snprintf(want, sizeof want, "%d ", quiet);
  assert_non_null(strstr(res.out, want));
  assert_non_null(strstr(res.out, "\\x1b]2;pwn\\x07"));
  /* The same name in --once's error message on stderr. */
  assert_int_equal(mt("--once", NULL), 1);
  assert_no_terminal_codes("--once stderr", res.err, res.nerr);
  stop_fake(quiet);
}

/* ---- started with a standard descriptor closed ---- */

static void test_closed_std_fds(void **state) {
  proc_t p = start_target(NULL);
  char prefix[64];

  (void)state;
  snprintf(prefix, sizeof prefix, "%d mt_target: Ready+Prepared=", p.pid);
  /* stdout closed (`memtop --once PID >&-`): no abort in libuv, no report
   * written into one of memtop's own descriptors; the cause and the fix on
   * stderr, exit 1. */
  close_in_child = 1;
  assert_int_equal(mt("--once", run_pidstr(p.pid), NULL), 1);
  assert_non_null(strstr(res.err, "standard output is closed"));
  assert_non_null(strstr(res.err, "/dev/null"));
  assert_int_equal(
      mt("--once", "--json", "-n", "2", "-d", "0.1", run_pidstr(p.pid), NULL),
      1);
  assert_non_null(strstr(res.err, "standard output is closed"));
  assert_int_equal(mt("-V", NULL), 1);
  assert_non_null(strstr(res.err, "cannot write to standard output"));
  /* stderr closed (a cron job, a daemon): the report as usual, exit 0. */
  close_in_child = 2;
  assert_int_equal(mt("--once", run_pidstr(p.pid), NULL), 0);
  assert_true(strncmp(res.out, prefix, strlen(prefix)) == 0);
  /* An error with stderr closed: still the right status. */
  assert_int_equal(mt("--once", "999999999", NULL), 2);
  assert_int_equal(mt("--once", run_pidstr(p.pid), run_pidstr(1), NULL), 1);
  assert_true(strncmp(res.out, prefix, strlen(prefix)) == 0);
  /* stdin closed: nothing changes. */
  close_in_child = 0;
  assert_int_equal(mt("--once", run_pidstr(p.pid), NULL), 0);
  assert_true(strncmp(res.out, prefix, strlen(prefix)) == 0);
  assert_int_equal(res.nerr, 0);
  close_in_child = -1;
  stop_target(p);
}

int main(void) {
  const char *b = getenv("BUILD");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_once_text, setup, teardown),
      cmocka_unit_test_setup_teardown(test_once_loads_no_symboliser, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_once_json, setup, teardown),
      cmocka_unit_test_setup_teardown(test_once_json_smaps, setup, teardown),
      cmocka_unit_test_setup_teardown(test_several_targets_and_rounds, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_watch_all_and_ps, setup, teardown),
      cmocka_unit_test_setup_teardown(test_list_unsafe_dir, setup, teardown),
      cmocka_unit_test_setup_teardown(test_other_users_unseen, setup, teardown),
      cmocka_unit_test_setup_teardown(test_user_filter, setup, teardown),
      cmocka_unit_test_setup_teardown(test_not_attachable, setup, teardown),
      cmocka_unit_test_setup_teardown(test_rounds_target_exits, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_memory_per_dead_pid, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_agent_start_messages, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_bad_usage, setup, teardown),
      cmocka_unit_test_setup_teardown(test_help_version_later_commands, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_hung_target, setup, teardown),
      cmocka_unit_test_setup_teardown(test_garbage_target, setup, teardown),
      cmocka_unit_test_setup_teardown(test_target_dies_mid_reply, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_run_once, setup, teardown),
      cmocka_unit_test_setup_teardown(test_run_status, setup, teardown),
      cmocka_unit_test_setup_teardown(test_run_cannot_start, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sockdir_too_long, setup, teardown),
      cmocka_unit_test_setup_teardown(test_run_input_redirected, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_run_unsafe_dir, setup, teardown),
      cmocka_unit_test_setup_teardown(test_run_final_figures, setup, teardown),
      cmocka_unit_test_setup_teardown(test_run_killed_falls_back, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_socket_appears_listening, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_refusing_socket_of_live_target_kept,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_dead_bound_socket_removed, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_hostile_agent, setup, teardown),
      cmocka_unit_test_setup_teardown(test_trickling_target, setup, teardown),
      cmocka_unit_test_setup_teardown(test_hostile_proc_name, setup, teardown),
      cmocka_unit_test_setup_teardown(test_closed_std_fds, setup, teardown),
  };

  snprintf(build, sizeof build, "%s", b != NULL && b[0] ? b : "build");
  snprintf(memtop, sizeof memtop, "%s/memtop", build);
  snprintf(target, sizeof target, "%s/progs/mt_target", build);
  snprintf(pl_final, sizeof pl_final, "%s/progs/pl_final", build);
  if (access(memtop, X_OK) != 0 || access(target, X_OK) != 0 ||
      access(pl_final, X_OK) != 0) {
    fprintf(stderr, "test_memtop: %s, %s or %s is missing (make test-build)\n",
            memtop, target, pl_final);
    return 1;
  }
  /* Not there: memtop run says so in the tests that need it. */
  (void)host_preload_path(build, run_preload, sizeof run_preload);
  setenv("MEMTOP_PRELOAD", run_preload, 1);
  signal(SIGPIPE, SIG_IGN);
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
