/*
 * test_self.c - libmemstats's own memory is not the program's (issue 19,
 * item 4): a program under the preload (cat, waiting on its stdin) read by
 * the real memtop (--once --json) over its real socket, in a private
 * MEMSTATS_DIR, and compared with the kernel's view of the same process
 * (/proc/PID/maps, smaps, task/TID/syscall):
 *
 *   - the agent thread's stack is small (not the stack rlimit's 8 MiB,
 *     even with `ulimit -s` at 64 MiB), four times what it touches serving
 *     snapshots and a heap profile at least, and no part of StackSys:
 *     a program of one thread has the main stack's size as StackSys, and
 *     its unbacked part (smaps Size - Rss) as StackReleased, exactly;
 *   - MemstatsSelf holds the agent stack's resident bytes and the profile
 *     table (BuckHashSys); MemstatsSelfSys its whole stack mapping.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "support/host.h"
#include "support/run.h"
#include "support/target.h"

static char build[1024], memtop[1200], preload[1200], dir[64];
static run_result_t res;

static int setup(void **state) {
  (void)state;
  if (host_build_dir(build, sizeof build) != 0 ||
      host_preload_path(build, preload, sizeof preload) != 0)
    return -1;
  snprintf(memtop, sizeof memtop, "%s/memtop", build);
  return target_dir_setup(dir, sizeof dir, "/tmp/ms-self-XXXXXX");
}

static int teardown(void **state) {
  (void)state;
  return target_dir_remove(dir);
}

/* A mapping of /proc/PID/smaps: its range, Size and Rss in bytes. */
typedef struct vma_s {
  uintptr_t start, end;
  uint64_t size, rss;
} vma_t;

/* The mapping of pid holding addr (or, addr 0, the one named name).
 * Returns 0, or -1 if there is none. */
static int smaps_find(pid_t pid, uintptr_t addr, const char *name, vma_t *out) {
  char path[64], line[512];
  snprintf(path, sizeof path, "/proc/%d/smaps", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f)
    return -1;
  int in = 0, found = 0;
  while (fgets(line, sizeof line, f)) {
    unsigned long a, b;
    char rest[256] = "";
    if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %255s", &a, &b, rest) >= 2 &&
        strchr(line, '-') < strchr(line, ' ')) {
      if (found && in)
        break;
      in = addr ? (a <= addr && addr < b) : strcmp(rest, name) == 0;
      if (in) {
        found = 1;
        out->start = a;
        out->end = b;
      }
      continue;
    }
    unsigned long kb;
    if (in && sscanf(line, "Size: %lu kB", &kb) == 1)
      out->size = (uint64_t)kb * 1024;
    if (in && sscanf(line, "Rss: %lu kB", &kb) == 1)
      out->rss = (uint64_t)kb * 1024;
  }
  fclose(f);
  return found ? 0 : -1;
}

/* The agent thread's stack pointer, as the kernel has it while the thread
 * waits in a system call (task/TID/syscall: "nr args... sp pc"), or 0. */
static uintptr_t agent_sp(pid_t pid) {
  char path[512], buf[512];
  snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
  DIR *d = opendir(path);
  if (!d)
    return 0;
  struct dirent *e;
  uintptr_t sp = 0;
  while (!sp && (e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.')
      continue;
    snprintf(path, sizeof path, "/proc/%d/task/%s/comm", (int)pid, e->d_name);
    FILE *f = fopen(path, "r");
    if (!f)
      continue;
    int agent =
        fgets(buf, sizeof buf, f) && strncmp(buf, "memstats-agent", 14) == 0;
    fclose(f);
    if (!agent)
      continue;
    snprintf(path, sizeof path, "/proc/%d/task/%s/syscall", (int)pid,
             e->d_name);
    /* A running thread says "running": read again until it waits. */
    for (int i = 0; i < 200 && !sp; i++) {
      f = fopen(path, "r");
      if (!f)
        break;
      if (fgets(buf, sizeof buf, f)) {
        char *w[16];
        int n = 0;
        for (char *t = strtok(buf, " \n"); t && n < 16; t = strtok(NULL, " \n"))
          w[n++] = t;
        if (n >= 3 && strcmp(w[0], "running") != 0)
          sp = (uintptr_t)strtoull(w[n - 2], NULL, 16);
      }
      fclose(f);
      if (!sp)
        usleep(10000);
    }
  }
  closedir(d);
  return sp;
}

/* Starts cat under the preload, with the stack rlimit at stack_kib (0:
 * as it is), and waits for its socket. */
static target_t start_cat(unsigned stack_kib) {
  char cmd[1600];
  snprintf(cmd, sizeof cmd, "%s%.0u%sLD_PRELOAD=%s exec cat",
           stack_kib ? "ulimit -s " : "", stack_kib, stack_kib ? "; " : "",
           preload);
  const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
  target_t t;
  assert_int_equal(target_launch(&t, argv, dir, NULL, NULL, NULL, 0), 0);
  for (int i = 0; i < 600 && access(t.sock, F_OK) != 0; i++)
    usleep(50000);
  assert_int_equal(access(t.sock, F_OK), 0);
  return t;
}

static json_t *query(pid_t pid) {
  char *argv[] = {memtop, (char *)"--once", (char *)"--json", run_pidstr(pid),
                  NULL};
  assert_int_equal(run_capture(&res, argv, -1), 0);
  json_error_t je;
  json_t *j = json_loads(res.out, 0, &je);
  if (!j)
    fail_msg("memtop's output is not JSON (%s): %s", je.text, res.out);
  return j;
}

static uint64_t num(json_t *j, const char *obj, const char *name) {
  json_t *v = json_object_get(json_object_get(j, obj), name);
  if (!json_is_integer(v))
    fail_msg("no %s.%s in memtop's JSON", obj, name);
  return (uint64_t)json_integer_value(v);
}

static void check_self(unsigned stack_kib) {
  target_t t = start_cat(stack_kib);
  json_t *j = NULL;
  /* The figures of a snapshot whose mappings were read for it. */
  for (int i = 0; i < 100; i++) {
    j = query(t.pid);
    const char *q = json_string_value(
        json_object_get(json_object_get(j, "quality"), "StackSys"));
    if (q && strcmp(q, "exact") == 0)
      break;
    json_decref(j);
    j = NULL;
    usleep(300000);
  }
  assert_non_null(j);
  /* The agent's deepest work: a heap profile, cut, copied and encoded. */
  char prof[128];
  snprintf(prof, sizeof prof, "%s/heap.pb.gz", dir);
  char *pargv[] = {
      memtop, (char *)"profile", run_pidstr(t.pid), (char *)"-o", prof, NULL};
  assert_int_equal(run_capture(&res, pargv, -1), 0);

  uintptr_t sp = agent_sp(t.pid);
  assert_true(sp != 0);
  vma_t agent = {0}, main_stack = {0};
  assert_int_equal(smaps_find(t.pid, sp, NULL, &agent), 0);
  assert_int_equal(smaps_find(t.pid, 0, "[stack]", &main_stack), 0);
  print_message(
      "ulimit -s %u KiB: the agent's stack %" PRIu64 " KiB mapped, %" PRIu64
      " KiB resident; main stack %" PRIu64 " KiB, %" PRIu64
      " KiB resident; StackSys %" PRIu64 ", StackInuse %" PRIu64 "\n",
      stack_kib, agent.size >> 10, agent.rss >> 10, main_stack.size >> 10,
      main_stack.rss >> 10, num(j, "memstats", "StackSys"),
      num(j, "memstats", "StackInuse"));

  /* Small, whatever the stack rlimit says, and four times what the agent
   * touched at most (its descriptor and TLS included). */
  assert_true(agent.size <= (1u << 20));
  assert_true(agent.rss * 4 <= agent.size);
  /* The program's one stack is all of StackSys: the agent's is not in
   * it, and what the kernel does not back of it is StackReleased. */
  assert_int_equal(num(j, "memstats", "StackSys"), main_stack.size);
  assert_int_equal(num(j, "memstats", "StackReleased"),
                   main_stack.size - main_stack.rss);
  print_message("MemstatsSelf %" PRIu64 ", MemstatsSelfSys %" PRIu64
                ", BuckHashSys %" PRIu64 "\n",
                num(j, "self", "Resident"), num(j, "self", "Sys"),
                num(j, "self", "BuckHashSys"));
  /* The agent's stack is the library's own, with its profile table. */
  assert_true(num(j, "self", "Sys") >=
              agent.size + num(j, "self", "BuckHashSys"));
  assert_true(num(j, "self", "Resident") >=
              agent.rss + num(j, "self", "BuckHashSys"));
  assert_true(num(j, "self", "Resident") <= num(j, "self", "Sys"));
  json_decref(j);
  target_wait(&t);
}

static void test_agent_stack_is_small_and_its_own(void **state) {
  (void)state;
  check_self(0);
}

static void test_agent_stack_ignores_stack_rlimit(void **state) {
  (void)state;
  check_self(65536);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_agent_stack_is_small_and_its_own),
      cmocka_unit_test(test_agent_stack_ignores_stack_rlimit),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
