/*
 * test_procinfo.c - what the live view reads from /proc itself
 * (src/tui/procinfo.c), against a /proc of files made by the test: the
 * real owner (not the effective one, not the socket's), the command line
 * with its NULs as blanks and cut at its buffer, a PID reused by another
 * process read as nothing, the machine's memory; and the model reading
 * them once per process (mt_model_update with proc_root), and again only
 * for the rows on screen; the first read taking uid and parent from the
 * owner's record (one file, the command line), a later one the status
 * and the command line (two files, not three).
 */
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

#include "memstats.h"
#include "tui/model.h"
#include "tui/procinfo.h"

static char root[64];

static void put(const char *rel, const char *data, size_t len) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", root, rel);
  char *slash = strrchr(path, '/');
  *slash = '\0';
  mkdir(path, 0700);
  *slash = '/';
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, len, f), len);
  fclose(f);
}

#define PUT(rel, lit) put((rel), (lit), sizeof(lit) - 1)

static int setup(void **state) {
  (void)state;
  snprintf(root, sizeof root, "/tmp/memtop-proc-XXXXXX");
  if (mkdtemp(root) == NULL)
    return -1;
  /* Process 123, started at tick 55555, real uid 0, effective 4000000. */
  PUT("123/stat", "123 (de mo)) S 1 1 1 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 "
                  "1 0 55555 1000 2000\n");
  PUT("123/status", "Name:\tde mo)\nUmask:\t0022\nState:\tS (sleeping)\n"
                    "Uid:\t0\t4000000\t4000000\t4000000\n"
                    "Gid:\t0\t0\t0\t0\n");
  PUT("123/cmdline", "nginx: worker process\0-c\0/etc/nginx.conf\0");
  /* Process 124: a uid with no name, a hidden command line (a kernel
   * thread's is empty). */
  PUT("124/stat", "124 (kworker) S 2 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 "
                  "77 0 0\n");
  PUT("124/status", "Name:\tkworker\nUid:\t3999999\t0\t0\t0\n");
  PUT("124/cmdline", "");
  PUT("meminfo", "MemTotal:       16318412 kB\nMemFree:  1 kB\n"
                 "MemAvailable:    8000000 kB\nSwapTotal:       2097148 kB\n"
                 "SwapFree:        1048574 kB\n");
  return 0;
}

static int teardown(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  return system(cmd) == 0 ? 0 : -1;
}

static void test_owner_and_cmdline(void **state) {
  (void)state;
  mt_procinfo_t p;
  char root_name[64];
  assert_int_equal(mt_procinfo_read(root, 123, 55555, &p), 0);
  /* The real uid: who started it, not whom it runs as. */
  assert_int_equal(p.uid, 0);
  assert_int_equal(p.ppid, 1); /* past a comm with ") " in it */
  mt_procinfo_user(0, root_name, sizeof root_name);
  assert_string_equal(p.user, root_name);
  assert_string_equal(p.cmdline, "nginx: worker process -c /etc/nginx.conf");

  assert_int_equal(mt_procinfo_read(root, 124, 0, &p), 0);
  assert_int_equal(p.uid, 3999999);
  assert_int_equal(p.ppid, 2);
  assert_string_equal(p.user, "3999999"); /* no name: the number */
  assert_string_equal(p.cmdline, "");

  /* Another process under the same PID: nothing of it is taken. */
  assert_int_equal(mt_procinfo_read(root, 123, 55556, &p), MS_ESTALE);
  assert_int_equal(p.uid, -1);
  assert_int_equal(p.ppid, -1);
  assert_string_equal(p.cmdline, "");
  assert_int_equal(mt_procinfo_read(root, 999, 0, &p), MS_ENOENT);
}

/* A command line longer than its buffer is cut, and still ends. */
static void test_long_cmdline(void **state) {
  (void)state;
  static char big[5000];
  mt_procinfo_t p;
  memset(big, 'a', sizeof big);
  for (size_t i = 7; i < sizeof big; i += 8)
    big[i] = '\0';
  PUT("125/stat", "125 (x) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 9 0 0\n");
  PUT("125/status", "Name:\tx\nUid:\t1\t1\t1\t1\n");
  put("125/cmdline", big, sizeof big);
  assert_int_equal(mt_procinfo_read(root, 125, 0, &p), 0);
  assert_int_equal(strlen(p.cmdline), sizeof p.cmdline - 1);
  assert_non_null(strstr(p.cmdline, "aaaaaaa aaaaaaa"));
}

static void test_meminfo(void **state) {
  (void)state;
  mt_meminfo_t mi = {0};
  assert_int_equal(mt_procinfo_meminfo(root, &mi), 0);
  assert_true(mi.have);
  assert_int_equal(mi.mem_total, 16318412ull * 1024);
  assert_int_equal(mi.mem_available, 8000000ull * 1024);
  assert_int_equal(mi.swap_total, 2097148ull * 1024);
  assert_int_equal(mi.swap_free, 1048574ull * 1024);
  mt_meminfo_t none = {0};
  assert_int_equal(mt_procinfo_meminfo("/nonexistent-proc", &none), MS_ENOENT);
  assert_false(none.have);
}

/* The model reads /proc when the live view gave it a root, once per
 * process; the tests that build a model by hand read nothing. */
static void test_model_reads_once(void **state) {
  (void)state;
  static ms_snapshot_t s;
  mt_model_t m;
  mt_model_init(&m);
  memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  s.pid = 123;
  s.start_time = 55555;
  snprintf(s.comm, sizeof s.comm, "nginx");
  mt_target_t *t = mt_model_target(&m, 123);
  assert_int_equal(t->proc.uid, -1);
  mt_model_update(&m, t, &s);
  assert_int_equal(t->proc.uid, -1); /* no proc_root: nothing read */
  assert_false(m.machine.have);

  m.proc_root = root;
  t->start_time = 0;
  mt_model_update(&m, t, &s);
  assert_int_equal(t->proc.uid, 0);
  assert_string_equal(mt_target_name(&m, t),
                      "nginx: worker process -c /etc/nginx.conf");
  assert_true(m.machine.have);
  /* Once: a changed file is not read again for the same process. */
  PUT("123/cmdline", "changed\0");
  mt_model_update(&m, t, &s);
  assert_string_equal(t->proc.cmdline,
                      "nginx: worker process -c /etc/nginx.conf");
  /* A new start time is a new process: read again. */
  s.start_time = 66666;
  PUT("123/stat", "123 (x) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 66666 0 "
                  "0\n");
  mt_model_update(&m, t, &s);
  assert_string_equal(t->proc.cmdline, "changed");
  m.show_cmdline = 0;
  assert_string_equal(mt_target_name(&m, t), "nginx");
  mt_model_free(&m);
}

/* Read again every MT_PROC_REREAD_NS, and only the rows on screen: of
 * 40 processes on a 10-row list, the first refreshes read each once,
 * refreshes within the interval read none, and one after it reads the
 * 10 shown (a changed command line is seen there, not on a hidden row);
 * the detail view's process alone when it is open. */
static void test_model_rereads_shown(void **state) {
  (void)state;
  static ms_snapshot_t s;
  char rel[64], stat[128];
  mt_model_t m;
  mt_model_init(&m);
  m.proc_root = root;
  m.sort = MT_SORT_PID;
  m.page_rows = 10;
  for (int pid = 200; pid < 240; pid++) {
    snprintf(rel, sizeof rel, "%d/stat", pid);
    int n = snprintf(stat, sizeof stat,
                     "%d (w) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 %d 0 0\n",
                     pid, 1000 + pid);
    put(rel, stat, (size_t)n);
    snprintf(rel, sizeof rel, "%d/status", pid);
    PUT(rel, "Name:\tw\nUid:\t0\t0\t0\t0\n");
    snprintf(rel, sizeof rel, "%d/cmdline", pid);
    PUT(rel, "worker\0");
  }
  memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  m.now_mono_ns = 1000000000u;
  unsigned long r0 = mt_procinfo_reads;
  for (int round = 0; round < 3; round++) {
    for (int pid = 200; pid < 240; pid++) {
      s.pid = pid;
      s.start_time = (uint64_t)(1000 + pid);
      mt_model_update(&m, mt_model_target(&m, pid), &s);
    }
    mt_model_sort(&m);
    m.now_mono_ns += 1000000000u; /* 1 s a refresh */
  }
  assert_int_equal(mt_procinfo_reads - r0, 40);
  PUT("201/cmdline", "worker: busy\0");
  PUT("235/cmdline", "worker: busy\0");
  m.now_mono_ns += MT_PROC_REREAD_NS;
  r0 = mt_procinfo_reads;
  for (int pid = 200; pid < 240; pid++) {
    s.pid = pid;
    s.start_time = (uint64_t)(1000 + pid);
    mt_model_update(&m, mt_model_find(&m, pid), &s);
  }
  assert_int_equal(mt_procinfo_reads - r0, 10);
  assert_string_equal(mt_model_find(&m, 201)->proc.cmdline, "worker: busy");
  assert_string_equal(mt_model_find(&m, 235)->proc.cmdline, "worker");

  /* The detail view: its process only. */
  m.screen = MT_SCREEN_DETAIL;
  m.detail_pid = 235;
  m.now_mono_ns += MT_PROC_REREAD_NS;
  r0 = mt_procinfo_reads;
  for (int pid = 200; pid < 240; pid++) {
    s.pid = pid;
    s.start_time = (uint64_t)(1000 + pid);
    mt_model_update(&m, mt_model_find(&m, pid), &s);
  }
  assert_int_equal(mt_procinfo_reads - r0, 1);
  assert_string_equal(mt_model_find(&m, 235)->proc.cmdline, "worker: busy");
  mt_model_free(&m);
}

/* The model's reads of a process it has a snapshot of: the first takes
 * the uid and parent the target set recorded and reads the command line
 * alone; one MT_PROC_REREAD_NS later it reads the status (a uid changed
 * since is seen) and the command line; no stat file, no start time. */
static void test_model_reads_few_files(void **state) {
  (void)state;
  static ms_snapshot_t s;
  char root_name[64];
  mt_model_t m;
  mt_model_init(&m);
  m.proc_root = root;
  m.page_rows = 10;
  /* Its stat file says nothing the model may take. */
  PUT("125/stat", "garbage");
  PUT("125/status", "Name:\tsrv\nPPid:\t1\nUid:\t0\t0\t0\t0\n");
  PUT("125/cmdline", "srv\0--port\0"
                     "80\0");
  memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  s.pid = 125;
  s.start_time = 55555;
  m.now_mono_ns = 1000000000u;
  mt_target_t *t = mt_model_target(&m, 125);
  t->ident_uid = 3999999;
  t->ident_ppid = 7;
  unsigned long f0 = mt_procinfo_files;
  mt_model_update(&m, t, &s);
  assert_int_equal(mt_procinfo_files - f0, 1);
  assert_int_equal(t->proc.uid, 3999999);
  assert_int_equal(t->proc.ppid, 7);
  assert_string_equal(t->proc.user, "3999999");
  assert_string_equal(t->proc.cmdline, "srv --port 80");
  mt_model_sort(&m);
  m.now_mono_ns += MT_PROC_REREAD_NS;
  f0 = mt_procinfo_files;
  mt_model_update(&m, t, &s);
  assert_int_equal(mt_procinfo_files - f0, 2);
  assert_int_equal(t->proc.uid, 0); /* the status's real uid */
  assert_int_equal(t->proc.ppid, 1);
  mt_procinfo_user(0, root_name, sizeof root_name);
  assert_string_equal(t->proc.user, root_name);

  /* Without a record, the status gives them (PPid:), the stat is not
   * read. */
  mt_procinfo_t p;
  f0 = mt_procinfo_files;
  assert_int_equal(mt_procinfo_reread(root, 124, -1, -1, &p), 0);
  assert_int_equal(mt_procinfo_files - f0, 2);
  assert_int_equal(p.uid, 3999999);
  assert_int_equal(p.ppid, -1); /* 124's status has no PPid: line */
  assert_int_equal(mt_procinfo_reread(root, 999, -1, -1, &p), MS_ENOENT);
  mt_model_free(&m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_owner_and_cmdline),
      cmocka_unit_test(test_long_cmdline),
      cmocka_unit_test(test_meminfo),
      cmocka_unit_test(test_model_reads_once),
      cmocka_unit_test(test_model_rereads_shown),
      cmocka_unit_test(test_model_reads_few_files),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
