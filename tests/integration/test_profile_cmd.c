/*
 * test_profile_cmd.c - `memtop profile` end to end on memtop's side: the
 * command line, the fetch over a real socket (the client's socket and
 * SO_PEERCRED checks, the handshake, a profile chunked in many frames),
 * names resolved from this binary, the file written and read by the real
 * `go tool pprof -top`, the text format, the --seconds delta, and a
 * target that answers with an error.
 *
 * The target is a thread of this test serving its own PID's socket in a
 * private MEMSTATS_DIR with the agent's wire encoders (hello, and the
 * profile as wire/profile.c encodes it), so the peer check holds: the
 * process that listens is the PID asked for. Its stacks are return
 * addresses inside this binary's own functions.
 *
 * The file is written as root would write it in a directory a stranger
 * can write in: what the stranger planted at the name (a symbolic link, a
 * hard link, a FIFO, a directory) is never written through, nor waited
 * on.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <dirent.h>
#include <dlfcn.h>
#include <link.h>
#include <signal.h>
#include <unistd.h>
#include <zlib.h>

#include "client/client.h"
#include "common/strbuf.h"
#include "memstats.h"
#include "memtop/cli.h"
#include "memtop/profile_cmd.h"
#include "pprof/filter.h"
#include "pprof/heap.h"
#include "pprof/profile.pb-c.h"
#include "wire/profile.h"
#include "wire/wire.h"
#include "support/callgrind.h"
#include "support/host.h"
#include "support/run.h"
#include "support/target.h"

static char dir[64];
static pid_t g_http; /* test_debuginfod's server, stopped by teardown */

static __attribute__((noinline)) void capture(uint64_t *out) {
  *out = (uint64_t)(uintptr_t)__builtin_return_address(0);
  __asm__ volatile("" ::: "memory");
}

/* Each site stores its own mark, so that the compiler cannot fold the
 * two identical functions into one (gcc -O2's -fipa-icf). */
static volatile int mark;

static __attribute__((noinline)) void leaky_cache_fill(uint64_t *ra) {
  mark = 1;
  capture(&ra[0]);
  ra[1] = (uint64_t)(uintptr_t)__builtin_return_address(0);
  __asm__ volatile("" ::: "memory");
}

static __attribute__((noinline)) void request_buffers(uint64_t *ra) {
  mark = 2;
  capture(&ra[0]);
  ra[1] = (uint64_t)(uintptr_t)__builtin_return_address(0);
  __asm__ volatile("" ::: "memory");
}

/* What the fake target serves: `answers` connections, the n-th with
 * leaky_cache_fill's bucket grown by n * 100 objects, or an error. */
typedef struct server_s {
  int fd;
  int answers;
  int error;
  pthread_t thread;
  uint64_t stack[2][2];
  ms__profile_mapping_t map[8];
  char paths[8][PATH_MAX];
  uint32_t nmap;
} server_t;

/* If set, makes the n-th answer's profile instead (a hostile one). */
static void (*g_make)(int n, ms__profile_t *p);

static void own_mappings(server_t *s) {
  char exe[PATH_MAX], line[PATH_MAX + 256], path[PATH_MAX], perms[8];
  unsigned long long start, end, off;
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  FILE *maps = fopen("/proc/self/maps", "r");

  assert_true(n > 0);
  exe[n] = '\0';
  assert_non_null(maps);
  while (fgets(line, sizeof line, maps) != NULL && s->nmap < 8) {
    path[0] = '\0';
    if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %4095s", &start, &end, perms,
               &off, path) < 4 ||
        strcmp(path, exe) != 0 || perms[2] != 'x')
      continue;
    snprintf(s->paths[s->nmap], PATH_MAX, "%s", path);
    s->map[s->nmap] =
        (ms__profile_mapping_t){start, end, off, s->paths[s->nmap], NULL, 0};
    s->nmap++;
  }
  fclose(maps);
  assert_true(s->nmap > 0);
}

static int write_all(int fd, const uint8_t *p, size_t n) {
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0)
      return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

static void *serve(void *arg) {
  server_t *s = arg;
  int i;

  for (i = 0; i < s->answers; i++) {
    ms__profile_record_t rec[2];
    ms__wire_hello_t h;
    ms__wire_writer_t w;
    ms__profile_t p;
    ms_snapshot_t snap;
    uint8_t req[4096], *buf;
    size_t cap, len = 0;
    int c = accept(s->fd, NULL, NULL);

    if (c < 0)
      return NULL;
    (void)recv(c, req, sizeof req, 0);
    memset(&h, 0, sizeof h);
    h.pid = (int32_t)getpid();
    msc_proc_start_time(getpid(), &h.start_time);
    snprintf(h.comm, sizeof h.comm, "test");
    snprintf(h.lib_version, sizeof h.lib_version, "%s", MS_VERSION_STRING);
    h.proto_version = MS__WIRE_VERSION;
    h.capabilities = MS__CAP_SNAPSHOT | MS__CAP_PROFILE;
    memset(&p, 0, sizeof p);
    memset(rec, 0, sizeof rec);
    rec[0].size = 4096;
    rec[0].alloc_objects = 300 + 100 * (uint64_t)i;
    rec[0].alloc_bytes = rec[0].alloc_objects * 4096;
    rec[1].size = 256;
    rec[1].alloc_objects = 40;
    rec[1].alloc_bytes = 40 * 256;
    rec[1].free_objects = 30;
    rec[1].free_bytes = 30 * 256;
    rec[0].depth = rec[1].depth = 2;
    rec[0].stack = s->stack[0];
    rec[1].stack = s->stack[1];
    p.pid = h.pid;
    p.start_time = h.start_time;
    p.time_unix_ns = 1700000000000000000ull + (uint64_t)i * 1000000000u;
    p.rate = 1;
    p.nrecords = 2;
    p.records = rec;
    p.nmappings = s->nmap;
    p.mappings = s->map;
    if (g_make != NULL)
      g_make(i, &p);
    cap = 4096 + sizeof snap * 2 +
          ms__profile_encoded_bound(&p, "test", MS__PROFILE_MIN_PAYLOAD);
    buf = malloc(cap);
    ms__wire_writer_init(&w, buf, cap);
    ms__wire_encode_hello(&w, &h);
    /* memtop asks for a snapshot and then the profile, in one exchange
     * (conn.c): answered in order, as the agent does. */
    memset(&snap, 0, sizeof snap);
    snap.pid = h.pid;
    snap.start_time = h.start_time;
    snprintf(snap.comm, sizeof snap.comm, "test");
    assert_int_equal(ms__wire_encode_snapshot(&w, &snap, NULL), 0);
    len = w.len;
    if (s->error) {
      ms__wire_encode_error(&w, MS__MSG_ERROR, MS_ENOSYS,
                            "heap profiles are not served by this version");
      len = w.len;
    } else {
      size_t plen = 0;
      assert_int_equal(ms__profile_encode(&p, "test", buf + len, cap - len,
                                          MS__PROFILE_MIN_PAYLOAD, &plen),
                       0);
      len += plen;
    }
    (void)write_all(c, buf, len);
    free(buf);
    close(c);
  }
  return NULL;
}

static void server_start(server_t *s, int answers, int error) {
  struct sockaddr_un sa;

  memset(s, 0, sizeof *s);
  s->answers = answers;
  s->error = error;
  leaky_cache_fill(s->stack[0]);
  request_buffers(s->stack[1]);
  own_mappings(s);
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s/%d.sock", dir, (int)getpid());
  unlink(sa.sun_path);
  s->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(s->fd >= 0);
  assert_int_equal(bind(s->fd, (struct sockaddr *)&sa, sizeof sa), 0);
  chmod(sa.sun_path, 0600);
  assert_int_equal(listen(s->fd, 4), 0);
  assert_int_equal(pthread_create(&s->thread, NULL, serve, s), 0);
}

static void server_stop(server_t *s) {
  pthread_join(s->thread, NULL);
  close(s->fd);
}

/* The process run_profile asks (0: this one). */
static pid_t g_target;

/* Runs `memtop profile PID ARGS...` (NULL-terminated) as main() does. */
static int run_profile(const char *arg, ...) {
  static mt_opts_t o;
  char pid[16], err[256];
  char *argv[16];
  int argc = 0;
  va_list ap;

  snprintf(pid, sizeof pid, "%d", g_target > 0 ? (int)g_target : (int)getpid());
  argv[argc++] = (char *)"memtop";
  argv[argc++] = (char *)"profile";
  argv[argc++] = pid;
  va_start(ap, arg);
  for (; arg != NULL && argc < 15; arg = va_arg(ap, const char *))
    argv[argc++] = (char *)arg;
  va_end(ap);
  argv[argc] = NULL;
  if (mt_cli_parse(argc, argv, NULL, &o, err, sizeof err) != 0)
    fail_msg("usage refused: %s", err);
  return mt_profile_main(&o);
}

static char *pprof_top(const char *args, const char *file) {
  char cmd[3 * PATH_MAX], out[PATH_MAX];

  snprintf(out, sizeof out, "%s/top.txt", dir);
  snprintf(cmd, sizeof cmd,
           "HOME=%s GOCACHE=%s/gocache TZ=UTC go tool pprof -top "
           "-symbolize=none %s %s >%s 2>&1",
           dir, dir, args, file, out);
  if (system(cmd) != 0) {
    char *why = host_read_all(out, NULL);
    fail_msg("go tool pprof failed: %s", why != NULL ? why : "?");
  }
  return host_read_all(out, NULL);
}

static int setup(void **state) {
  (void)state;
  return target_dir_setup(dir, sizeof dir, "/tmp/test_profile_cmd.XXXXXX");
}

static int teardown(void **state) {
  (void)state;
  if (g_http > 0) {
    kill(g_http, SIGTERM);
    waitpid(g_http, NULL, 0);
  }
  return target_dir_remove(dir);
}

/* memtop profile PID -o FILE: a profile pprof reads, with this test's
 * function names (the profile crossed the socket in several frames). */
static void test_pprof_file(void **state) {
  server_t s;
  char file[PATH_MAX], *top;

  (void)state;
  if (system("command -v go >/dev/null 2>&1") != 0) {
    print_message("skipped: go (golang-go) is not installed\n");
    skip();
  }
  snprintf(file, sizeof file, "%s/out.pb.gz", dir);
  server_start(&s, 1, 0);
  assert_int_equal(run_profile("-o", file, NULL), 0);
  server_stop(&s);
  top = pprof_top("-nodefraction=0", file);
  /* 300 objects of 4 KiB in use, and 10 of 256 B (pprof's kB: KiB). */
  assert_non_null(strstr(top, "Type: inuse_space"));
  assert_non_null(strstr(top, "1200kB 99.79% 99.79%     1200kB 99.79%  "
                              "leaky_cache_fill\n"));
  assert_non_null(strstr(top, "2.50kB  0.21%   100%     2.50kB  0.21%  "
                              "request_buffers\n"));
  free(top);
}

/* This process's standard error (where run_profile's memtop writes)
 * into errfile, emptied first, until stderr_back(what it returns). */
static int stderr_into(const char *errfile) {
  int fd = open(errfile, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  assert_true(fd >= 0);
  fflush(stderr);
  int saved = dup(2);
  assert_true(saved >= 0);
  assert_int_equal(dup2(fd, 2), 2);
  close(fd);
  return saved;
}

static void stderr_back(int saved) {
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
}

static void one_record(int n, ms__profile_t *p) {
  (void)n;
  p->nrecords = 1;
}

/* What memtop profile -o FILE says it wrote, in the singular for one
 * stack and size and a rate of 1 byte ("1 stacks and sizes, sampling rate
 * 1 bytes" before), in the plural for two. */
static void test_wrote_count(void **state) {
  char file[PATH_MAX], errfile[PATH_MAX], *err;
  server_t s;
  int saved, rc;

  (void)state;
  snprintf(file, sizeof file, "%s/count.pb.gz", dir);
  snprintf(errfile, sizeof errfile, "%s/count.err", dir);
  for (int i = 0; i < 2; i++) {
    saved = stderr_into(errfile);
    g_make = i == 0 ? one_record : NULL;
    server_start(&s, 1, 0);
    rc = run_profile("-o", file, NULL);
    server_stop(&s);
    g_make = NULL;
    stderr_back(saved);
    assert_int_equal(rc, 0);
    err = host_read_all(errfile, NULL);
    assert_non_null(err);
    if (strstr(err, i == 0
                        ? "(1 stack and size, sampling rate 1 byte)"
                        : "(2 stacks and sizes, sampling rate 1 byte)") == NULL)
      fail_msg("stderr: %s", err);
    free(err);
  }
}

/* --format text: the top list, here in -o's file: exact figures (rate
 * 1), the sites by name. */
static void test_text(void **state) {
  server_t s;
  char file[PATH_MAX], *text;

  (void)state;
  snprintf(file, sizeof file, "%s/out.txt", dir);
  server_start(&s, 1, 0);
  assert_int_equal(
      run_profile("--format", "text", "--sites", "5", "-o", file, NULL), 0);
  server_stop(&s);
  text = host_read_all(file, NULL);
  assert_non_null(text);
  assert_non_null(strstr(text, "heap profile, in-use space\n"
                               "Every allocation recorded: figures are "
                               "exact\n"));
  assert_non_null(strstr(text, "Total: 1.2MiB in 310 objects"));
  assert_non_null(strstr(text, "1.2MiB  99.8%  99.8%      1.2MiB  99.8%"
                               "        300  leaky_cache_fill "));
  assert_non_null(strstr(text, "test_profile_cmd.c:"));
  free(text);
}

/* --seconds 1: two profiles a second apart, the first subtracted: the
 * 100 objects leaky_cache_fill allocated meanwhile, and nothing of
 * request_buffers (unchanged). */
static void test_seconds_delta(void **state) {
  server_t s;
  char file[PATH_MAX], *text;

  (void)state;
  snprintf(file, sizeof file, "%s/delta.txt", dir);
  server_start(&s, 2, 0);
  assert_int_equal(
      run_profile("--seconds", "1", "--format", "text", "-o", file, NULL), 0);
  server_stop(&s);
  text = host_read_all(file, NULL);
  assert_non_null(text);
  assert_non_null(strstr(text, "in-use space, growth over 1.0 s\n"));
  assert_non_null(strstr(text, "allocated space, growth over 1.0 s\n"));
  assert_non_null(strstr(text, "Total: 400.0KiB in 100 objects"));
  assert_non_null(strstr(text, "leaky_cache_fill"));
  assert_null(strstr(text, "request_buffers"));
  free(text);
}

/* A target that does not serve profiles: exit status 1. */
static void test_error_answer(void **state) {
  server_t s;

  (void)state;
  server_start(&s, 1, 1);
  assert_int_equal(run_profile(NULL), 1);
  server_stop(&s);
}

/* A target that does not sample (rate 0 in its profile): said, exit
 * status 1, no file, and with --seconds no second read (the fake target
 * answers once: a second read would fail on its own words). */
static void not_sampling(int n, ms__profile_t *p) {
  (void)n;
  p->rate = 0;
  p->nrecords = 0;
}

static void test_not_sampling(void **state) {
  char file[PATH_MAX], errfile[PATH_MAX], *err;
  server_t s;
  int saved, rc;

  (void)state;
  snprintf(file, sizeof file, "%s/rate0.pb.gz", dir);
  snprintf(errfile, sizeof errfile, "%s/rate0.err", dir);
  saved = stderr_into(errfile);
  g_make = not_sampling;
  server_start(&s, 1, 0);
  rc = run_profile("--seconds", "1", "-o", file, NULL);
  server_stop(&s);
  g_make = NULL;
  stderr_back(saved);
  assert_int_equal(rc, 1);
  assert_int_equal(access(file, F_OK), -1);
  err = host_read_all(errfile, NULL);
  assert_non_null(err);
  assert_non_null(strstr(err, "does not sample its allocations "
                              "(MEMSTATS_PROFILE_RATE=0 in its environment)"));
  assert_null(strstr(err, "profiling for"));
  free(err);
}

/* A target that exits between the two profiles of --seconds, leaving its
 * socket behind (killed): said as its end, not as a refused connection
 * blamed on its agent; status 1, no file. The target is a child serving
 * one answer with its own PID, reaped as soon as it has answered, a
 * second before the second read. */
static void *reap(void *arg) {
  waitpid(*(pid_t *)arg, NULL, 0);
  return NULL;
}

static void test_exit_between_profiles(void **state) {
  char file[PATH_MAX], errfile[PATH_MAX], *err, c;
  int saved, rc, ready[2];
  pthread_t reaper;
  server_t s;
  pid_t child;

  (void)state;
  snprintf(file, sizeof file, "%s/gone.pb.gz", dir);
  snprintf(errfile, sizeof errfile, "%s/gone.err", dir);
  assert_int_equal(pipe2(ready, O_CLOEXEC), 0);
  child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    server_start(&s, 1, 0);
    if (write(ready[1], "r", 1) != 1)
      _exit(1);
    server_stop(&s); /* one answer, then gone, the socket left behind */
    _exit(0);
  }
  close(ready[1]);
  assert_int_equal(read(ready[0], &c, 1), 1);
  close(ready[0]);
  assert_int_equal(pthread_create(&reaper, NULL, reap, &child), 0);
  saved = stderr_into(errfile);
  g_target = child;
  rc = run_profile("--seconds", "1", "-o", file, NULL);
  g_target = 0;
  stderr_back(saved);
  pthread_join(reaper, NULL);
  assert_int_equal(rc, 1);
  assert_int_equal(access(file, F_OK), -1);
  err = host_read_all(errfile, NULL);
  assert_non_null(err);
  if (strstr(err, "exited before the second profile") == NULL ||
      strstr(err, "refuses connections") != NULL)
    fail_msg("stderr:\n%s", err);
  free(err);
}

/* ---- what a stranger plants at the output's name ------------------------ */

static void put_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  assert_int_equal(fclose(f), 0);
}

/* No temporary file is left in dir. */
static void no_leftovers(void) {
  DIR *d = opendir(dir);
  struct dirent *e;
  assert_non_null(d);
  while ((e = readdir(d)) != NULL)
    if (strncmp(e->d_name, ".memtop-", 8) == 0)
      fail_msg("temporary file left behind: %s", e->d_name);
  closedir(d);
}

/* memtop-PID.pb.gz -> victim (the default name, in the directory memtop
 * runs in, and -o's): refused, the victim untouched, the link still a
 * link. */
static void test_symlink_not_followed(void **state) {
  server_t s;
  char victim[PATH_MAX], link_path[PATH_MAX], cwd[PATH_MAX], *text;
  struct stat st;

  (void)state;
  snprintf(victim, sizeof victim, "%s/victim", dir);
  put_file(victim, "precious\n");
  snprintf(link_path, sizeof link_path, "%s/memtop-%d.pb.gz", dir,
           (int)getpid());
  assert_int_equal(symlink(victim, link_path), 0);
  assert_non_null(getcwd(cwd, sizeof cwd));
  assert_int_equal(chdir(dir), 0);
  server_start(&s, 2, 0);
  int rc = run_profile(NULL);
  int rc2 = run_profile("--format", "text", "-o", link_path, NULL);
  server_stop(&s);
  assert_int_equal(chdir(cwd), 0);
  assert_int_equal(rc, 1);
  assert_int_equal(rc2, 1);
  text = host_read_all(victim, NULL);
  assert_string_equal(text, "precious\n");
  free(text);
  assert_int_equal(lstat(link_path, &st), 0);
  assert_true(S_ISLNK(st.st_mode));
  no_leftovers();
  unlink(link_path);
  unlink(victim);
}

/* -o FIFO: refused at once (it blocked for ever, or wrote into whoever
 * reads it); -o DIRECTORY: refused. */
static void test_fifo_and_directory_refused(void **state) {
  server_t s;
  char fifo[PATH_MAX], sub[PATH_MAX], buf[64];

  (void)state;
  snprintf(fifo, sizeof fifo, "%s/fifo", dir);
  snprintf(sub, sizeof sub, "%s/sub", dir);
  assert_int_equal(mkfifo(fifo, 0600), 0);
  assert_int_equal(mkdir(sub, 0700), 0);
  /* A reader, so that a writer would not block but write. */
  int rd = open(fifo, O_RDONLY | O_NONBLOCK);
  assert_true(rd >= 0);
  server_start(&s, 2, 0);
  int rc = run_profile("--format", "text", "-o", fifo, NULL);
  int rc2 = run_profile("--format", "text", "-o", sub, NULL);
  server_stop(&s);
  assert_int_equal(rc, 1);
  assert_int_equal(rc2, 1);
  assert_true(read(rd, buf, sizeof buf) <= 0);
  close(rd);
  no_leftovers();
  unlink(fifo);
  rmdir(sub);
}

/* An existing regular file is replaced, not truncated: a hard link to
 * it keeps the old bytes; the new file has a new file's mode. */
static void test_regular_file_replaced(void **state) {
  server_t s;
  char file[PATH_MAX], other[PATH_MAX], *text;
  struct stat st;
  mode_t mask = umask(022);

  (void)state;
  snprintf(file, sizeof file, "%s/report.txt", dir);
  snprintf(other, sizeof other, "%s/other", dir);
  put_file(other, "precious\n");
  chmod(other, 0600);
  assert_int_equal(link(other, file), 0);
  server_start(&s, 1, 0);
  assert_int_equal(run_profile("--format", "text", "-o", file, NULL), 0);
  server_stop(&s);
  umask(mask);
  text = host_read_all(other, NULL);
  assert_string_equal(text, "precious\n");
  free(text);
  text = host_read_all(file, NULL);
  assert_non_null(strstr(text, "leaky_cache_fill"));
  free(text);
  assert_int_equal(stat(file, &st), 0);
  assert_int_equal(st.st_mode & 07777, 0644);
  assert_int_equal(st.st_nlink, 1);
  no_leftovers();
  unlink(file);
  unlink(other);
}

/* ---- allocation wrappers, --focus, --ignore, --hide ---------------------- */

/* An allocation wrapper as gnulib's, and its caller: the site is the
 * caller (session_create), as with pprof's drop_frames. */
/* No clone of either (gcc's xmalloc.constprop.0): the list shows the
 * names as they are. */
#ifdef __clang__
#define NOCLONE
#else
#define NOCLONE __attribute__((noclone))
#endif

static __attribute__((noinline)) NOCLONE void xmalloc(uint64_t *ra) {
  mark = 3;
  capture(&ra[0]);
  ra[1] = (uint64_t)(uintptr_t)__builtin_return_address(0);
  __asm__ volatile("" ::: "memory");
}

static __attribute__((noinline)) NOCLONE void session_create(uint64_t *ra) {
  mark = 4;
  xmalloc(ra);
  __asm__ volatile("" ::: "memory");
}

static uint64_t g_wstack[2];

/* The two records and a third: 50 blocks of 1 KiB held through
 * session_create -> xmalloc. */
static void make_wrapped(int n, ms__profile_t *p) {
  static ms__profile_record_t rec[3];

  (void)n;
  memcpy(rec, p->records, 2 * sizeof rec[0]);
  rec[2] = (ms__profile_record_t){.size = 1024,
                                  .alloc_objects = 50,
                                  .alloc_bytes = 50 * 1024,
                                  .depth = 2,
                                  .stack = g_wstack};
  p->records = rec;
  p->nrecords = 3;
}

/* `memtop profile --format text ARGS` against the three records. */
static char *wrapped_text(const char *a1, const char *a2) {
  server_t s;
  char file[PATH_MAX], *text;

  snprintf(file, sizeof file, "%s/wrapped.txt", dir);
  session_create(g_wstack);
  g_make = make_wrapped;
  server_start(&s, 1, 0);
  assert_int_equal(run_profile("--format", "text", "-o", file, a1, a2, NULL),
                   0);
  server_stop(&s);
  g_make = NULL;
  text = host_read_all(file, NULL);
  assert_non_null(text);
  unlink(file);
  return text;
}

static void test_wrapper_skipped(void **state) {
  char *text;

  (void)state;
  /* The site is the wrapper's caller; the wrapper is nowhere. */
  text = wrapped_text(NULL, NULL);
  assert_non_null(strstr(text, "Total: 1.2MiB in 360 objects; 5 of 5 sites"));
  assert_non_null(strstr(text, "         50  session_create "));
  assert_null(strstr(text, "xmalloc"));
  assert_null(strstr(text, "Active filters"));
  free(text);
  /* --keep-wrappers: as before, the wrapper is the site. */
  text = wrapped_text("--keep-wrappers", NULL);
  assert_non_null(strstr(text, "         50  xmalloc "));
  free(text);
}

/* The pprof file names the wrappers in its drop_frames: the real pprof
 * shows the wrapper's caller as the site, as memtop's lists do, while the
 * file still holds every frame (the wrapper's location in the sample). */
static void test_pprof_drop_frames(void **state) {
  server_t s;
  char file[PATH_MAX], *top;
  uint8_t *raw;
  size_t cap = 1 << 20, len = 0;
  gzFile gz;
  int n;

  (void)state;
  snprintf(file, sizeof file, "%s/wrapped.pb.gz", dir);
  session_create(g_wstack);
  g_make = make_wrapped;
  server_start(&s, 1, 0);
  assert_int_equal(run_profile("-o", file, NULL), 0);
  server_stop(&s);
  g_make = NULL;

  /* The file: drop_frames is the built-in list, and the 50 blocks'
   * sample still goes through xmalloc to session_create. */
  raw = malloc(cap);
  assert_non_null(raw);
  gz = gzopen(file, "rb");
  assert_non_null(gz);
  while ((n = gzread(gz, raw + len, (unsigned)(cap - len))) > 0)
    len += (size_t)n;
  gzclose(gz);
  assert_true(len > 0 && len < cap);
  Perftools__Profiles__Profile *pb =
      perftools__profiles__profile__unpack(NULL, len, raw);
  assert_non_null(pb);
  assert_true(pb->drop_frames > 0 &&
              (size_t)pb->drop_frames < pb->n_string_table);
  /* The list, and the suffixes of a function's clones after it, which
   * the filter takes off a name ("xmalloc.constprop.0"). */
  char want[4096];
  snprintf(want, sizeof want, "(%s)(%s)?", MT_HEAP_WRAPPERS,
           MT_HEAP_CLONE_SUFFIX);
  assert_string_equal(pb->string_table[pb->drop_frames], want);
  assert_non_null(strstr(want, "\\.constprop\\."));
  int through = 0;
  for (size_t i = 0; i < pb->n_sample; i++) {
    const Perftools__Profiles__Sample *sm = pb->sample[i];
    const char *names[2] = {NULL, NULL};
    for (size_t j = 0; j < sm->n_location_id && j < 2; j++)
      for (size_t k = 0; k < pb->n_location; k++)
        if (pb->location[k]->id == sm->location_id[j] &&
            pb->location[k]->n_line > 0)
          for (size_t f = 0; f < pb->n_function; f++)
            if (pb->function[f]->id ==
                pb->location[k]->line[pb->location[k]->n_line - 1]->function_id)
              names[j] = pb->string_table[pb->function[f]->name];
    through |= names[0] != NULL && names[1] != NULL &&
               strcmp(names[0], "xmalloc") == 0 &&
               strcmp(names[1], "session_create") == 0;
  }
  assert_true(through);
  perftools__profiles__profile__free_unpacked(pb, NULL);
  free(raw);

  /* pprof: the site is session_create, xmalloc is nowhere. */
  if (system("command -v go >/dev/null 2>&1") != 0) {
    print_message("skipped: go (golang-go) is not installed\n");
    unlink(file);
    return;
  }
  top = pprof_top("-nodefraction=0", file);
  if (strstr(top, "50kB  3.99%") == NULL ||
      strstr(top, "session_create\n") == NULL || strstr(top, "xmalloc"))
    fail_msg("go tool pprof -top:\n%s", top);
  free(top);
  unlink(file);
}

/* pprof's -focus: only the samples with a frame matching (and the
 * total is theirs); -ignore: without them; -hide: the frame goes, its
 * caller takes the figures. */
static void test_focus_ignore_hide(void **state) {
  char *text;

  (void)state;
  text = wrapped_text("--focus", "request_buf");
  assert_non_null(strstr(text, "Active filters:\n   focus=request_buf\n"));
  assert_non_null(strstr(text, "Total: 2.5KiB in 10 objects; 2 of 2 sites"));
  assert_null(strstr(text, "leaky_cache_fill"));
  assert_null(strstr(text, "session_create"));
  free(text);
  /* The file name matches too, as in pprof: every sample. */
  text = wrapped_text("--ignore", "^leaky|session");
  assert_non_null(strstr(text, "Total: 2.5KiB in 10 objects"));
  assert_null(strstr(text, "leaky_cache_fill"));
  free(text);
  text = wrapped_text("--hide", "^leaky_cache_fill$");
  assert_null(strstr(text, "leaky_cache_fill tests"));
  assert_non_null(strstr(text, "1.2MiB  95.8%  95.8%      1.2MiB  95.8%"
                               "        300  server_start "));
  free(text);
  /* Not for a pprof file, which stays whole; a bad expression is bad
   * usage. */
  {
    mt_opts_t o;
    char err[256];
    char a[][16] = {"memtop",   "profile", "1",        "--focus", "x",
                    "--format", "text",    "--ignore", "("};
    char *argv[] = {a[0], a[1], a[2], a[3], a[4], NULL};
    char *argv2[] = {a[0], a[1], a[2], a[5], a[6], a[7], a[8], NULL};
    assert_int_equal(mt_cli_parse(5, argv, NULL, &o, err, sizeof err),
                     MS_EINVAL);
    assert_non_null(strstr(err, "a pprof file holds every sample"));
    assert_int_equal(mt_cli_parse(7, argv2, NULL, &o, err, sizeof err),
                     MS_EINVAL);
    assert_non_null(strstr(err, "invalid --ignore '('"));
  }
}

/* ---- debuginfod ------------------------------------------------------------
 */

/* The fake target's mappings name a stripped copy of this binary (the
 * same code at the same offsets, no symbol table, no DWARF). */
static char g_stripped[PATH_MAX];

static void make_stripped(int n, ms__profile_t *p) {
  (void)n;
  for (uint32_t i = 0; i < p->nmappings; i++)
    ((ms__profile_mapping_t *)p->mappings)[i].path = g_stripped;
}

static int own_build_id(struct dl_phdr_info *info, size_t size, void *arg) {
  unsigned char id[64];
  size_t len = host_note_build_id(info, id, sizeof id);
  char *hex = arg;

  (void)size;
  for (size_t i = 0; i < len; i++)
    snprintf(hex + 2 * i, 3, "%02x", id[i]);
  return 1; /* the first object is the program */
}

/* A debuginfod server: python3's http.server on a port of its choosing,
 * serving root (root/buildid/ID/debuginfo). Returns its PID, the port in
 * *port. */
static pid_t http_server(const char *root, int *port) {
  int fds[2];
  char line[512];
  pid_t pid;
  FILE *f;

  assert_int_equal(pipe(fds), 0);
  pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    dup2(fds[1], 1);
    dup2(null, 2);
    close(fds[0]);
    execlp("python3", "python3", "-u", "-m", "http.server", "0", "--bind",
           "127.0.0.1", "--directory", root, (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  f = fdopen(fds[0], "r");
  assert_non_null(f);
  /* "Serving HTTP on 127.0.0.1 port 41234 (http://127.0.0.1:41234/) ..." */
  assert_non_null(fgets(line, sizeof line, f));
  assert_int_equal(sscanf(line, "Serving HTTP on %*s port %d", port), 1);
  fclose(f);
  return pid;
}

/* `memtop profile --format text` of the fake target, its stderr in
 * *err. */
static char *stripped_text(char **err) {
  char file[PATH_MAX], errfile[PATH_MAX], *text;
  server_t s;
  int saved;

  snprintf(file, sizeof file, "%s/stripped.txt", dir);
  snprintf(errfile, sizeof errfile, "%s/stripped.err", dir);
  saved = stderr_into(errfile);
  g_make = make_stripped;
  server_start(&s, 1, 0);
  int rc = run_profile("--format", "text", "-o", file, NULL);
  server_stop(&s);
  g_make = NULL;
  stderr_back(saved);
  assert_int_equal(rc, 0);
  text = host_read_all(file, NULL);
  assert_non_null(text);
  *err = host_read_all(errfile, NULL);
  assert_non_null(*err);
  return text;
}

/* A stripped binary's names come from a debuginfod server when
 * DEBUGINFOD_URLS names one: the debug file is fetched (said on stderr),
 * kept in $XDG_CACHE_HOME/debuginfod_client, and read from there once
 * the server is gone. */
static void test_debuginfod(void **state) {
  char exe[PATH_MAX], id[129] = "", cmd[8 * PATH_MAX], path[2 * PATH_MAX];
  char srv[PATH_MAX], cache[PATH_MAX], url[64], *text, *err;
  struct stat st;
  int port = 0, status;
  ssize_t n;
  pid_t http;
  void *lib;

  (void)state;
  if (!host_have_program("python3") || !host_have_program("objcopy") ||
      !host_have_program("strip")) {
    print_message("skipped: python3, objcopy or strip is not installed\n");
    skip();
  }
  lib = dlopen("libdebuginfod.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (lib == NULL) {
    print_message("skipped: libdebuginfod1 is not installed\n");
    skip();
  }
  dlclose(lib);
  n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  assert_true(n > 0);
  exe[n] = '\0';
  dl_iterate_phdr(own_build_id, id);
  assert_true(strlen(id) >= 16);
  snprintf(g_stripped, sizeof g_stripped, "%s/stripped", dir);
  snprintf(srv, sizeof srv, "%s/srv", dir);
  snprintf(cache, sizeof cache, "%s/cache", dir);
  snprintf(cmd, sizeof cmd,
           "strip -s -o %s %s && mkdir -p %s/buildid/%s && "
           "objcopy --only-keep-debug %s %s/buildid/%s/debuginfo",
           g_stripped, exe, srv, id, exe, srv, id);
  assert_int_equal(system(cmd), 0);

  /* Without a server: no names. */
  unsetenv("DEBUGINFOD_URLS");
  text = stripped_text(&err);
  assert_non_null(strstr(text, "stripped+0x"));
  assert_null(strstr(text, "leaky_cache_fill"));
  free(text);
  free(err);

  g_http = http = http_server(srv, &port);
  snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
  setenv("DEBUGINFOD_URLS", url, 1);
  setenv("XDG_CACHE_HOME", cache, 1);
  unsetenv("DEBUGINFOD_CACHE_PATH");
  text = stripped_text(&err);
  assert_non_null(
      strstr(text, "leaky_cache_fill tests/integration/test_profile_cmd.c:"));
  assert_non_null(
      strstr(text, "request_buffers tests/integration/test_profile_cmd.c:"));
  assert_null(strstr(text, "stripped+0x"));
  assert_non_null(
      strstr(err, "memtop: fetching debug info for stripped from debuginfod"));
  free(text);
  free(err);
  snprintf(path, sizeof path, "%s/debuginfod_client/%s/debuginfo", cache, id);
  assert_int_equal(stat(path, &st), 0);

  /* The server gone: from the cache, nothing fetched. */
  kill(http, SIGTERM);
  assert_int_equal(waitpid(http, &status, 0), http);
  g_http = 0;
  text = stripped_text(&err);
  assert_non_null(
      strstr(text, "leaky_cache_fill tests/integration/test_profile_cmd.c:"));
  assert_null(strstr(err, "fetching debug info"));
  free(text);
  free(err);
  unsetenv("DEBUGINFOD_URLS");
  unsetenv("XDG_CACHE_HOME");
  snprintf(cmd, sizeof cmd, "rm -rf %s %s %s", srv, cache, g_stripped);
  assert_int_equal(system(cmd), 0);
}

/* -o -: standard output, written as it is. */
static void test_stdout(void **state) {
  server_t s;
  char file[PATH_MAX], *text;
  int saved, fd;

  (void)state;
  snprintf(file, sizeof file, "%s/stdout.txt", dir);
  fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  assert_true(fd >= 0);
  fflush(stdout);
  saved = dup(1);
  assert_true(saved >= 0);
  assert_int_equal(dup2(fd, 1), 1);
  server_start(&s, 1, 0);
  int rc = run_profile("--format", "text", "-o", "-", NULL);
  server_stop(&s);
  fflush(stdout);
  dup2(saved, 1);
  close(saved);
  close(fd);
  assert_int_equal(rc, 0);
  text = host_read_all(file, NULL);
  assert_non_null(strstr(text, "leaky_cache_fill"));
  free(text);
  unlink(file);
}

/* -o - on a terminal: a gzipped profile would garble the screen, so it
 * is refused before the process is asked (status 1, as gzip), saying
 * what to do instead; nothing reaches the terminal. */
static void test_stdout_terminal_refused(void **state) {
  server_t s;
  char file[PATH_MAX], *err, buf[64];
  int saved_out, saved_err, fd, master, slave;

  (void)state;
  master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  assert_true(master >= 0);
  assert_int_equal(grantpt(master), 0);
  assert_int_equal(unlockpt(master), 0);
  slave = open(ptsname(master), O_RDWR | O_NOCTTY | O_CLOEXEC);
  assert_true(slave >= 0);
  snprintf(file, sizeof file, "%s/stderr.txt", dir);
  fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  assert_true(fd >= 0);
  fflush(stdout);
  fflush(stderr);
  saved_out = dup(1);
  saved_err = dup(2);
  assert_true(saved_out >= 0 && saved_err >= 0);
  assert_int_equal(dup2(slave, 1), 1);
  assert_int_equal(dup2(fd, 2), 2);
  server_start(&s, 1, 0);
  int rc = run_profile("-o", "-", NULL);
  /* A refusal comes before the process is asked: a client of the test's
   * own then takes the server's one answer, so that it ends (after the
   * old code's request, the connect waits in the backlog). */
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s/%d.sock", dir, (int)getpid());
  int c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(c >= 0);
  assert_int_equal(connect(c, (struct sockaddr *)&sa, sizeof sa), 0);
  shutdown(c, SHUT_WR);
  server_stop(&s);
  close(c);
  fflush(stdout);
  fflush(stderr);
  dup2(saved_out, 1);
  dup2(saved_err, 2);
  close(saved_out);
  close(saved_err);
  close(fd);
  close(slave);
  assert_int_equal(rc, 1);
  /* Nothing was written to the terminal: its master has no byte. */
  assert_int_equal(fcntl(master, F_SETFL, O_NONBLOCK), 0);
  assert_true(read(master, buf, sizeof buf) <= 0);
  close(master);
  err = host_read_all(file, NULL);
  assert_non_null(
      strstr(err, "not writing a gzipped pprof profile to a terminal"));
  assert_non_null(strstr(err, "-o FILE"));
  free(err);
  unlink(file);
}

/* -o - into a pipe whose reader has gone (`memtop profile PID | head`):
 * SIGPIPE is ignored in every mode (the shell), and a reader that went
 * away is not memtop's failure, as with --once: status 0. */
static void test_stdout_reader_gone(void **state) {
  server_t s;
  int saved, p[2];

  (void)state;
  signal(SIGPIPE, SIG_IGN); /* this test's own, whatever memtop does */
  assert_int_equal(pipe(p), 0);
  close(p[0]);
  fflush(stdout);
  saved = dup(1);
  assert_true(saved >= 0);
  assert_int_equal(dup2(p[1], 1), 1);
  close(p[1]);
  server_start(&s, 1, 0);
  int rc = run_profile("--format", "text", "-o", "-", NULL);
  server_stop(&s);
  dup2(saved, 1);
  close(saved);
  assert_int_equal(rc, 0);
}

/* memtop loads libdw and libelf when it first resolves names, protobuf-c
 * and zlib when it first writes a profile.proto file (pprof/libs.h): a
 * library that is not installed makes `memtop profile` fail, naming the
 * library and its package. The real memtop, with libnodlopen.so refusing
 * that library's dlopen as if it were missing. */
static void test_library_missing(void **state) {
  static const struct {
    const char *soname, *package, *format;
  } cases[] = {
      {"libdw.so.1", "libdw1", "text"},
      {"libelf.so.1", "libelf1", "text"},
      {"libprotobuf-c.so.1", "libprotobuf-c1", "pprof"},
      {"libz.so.1", "zlib1g", "pprof"},
  };
  static run_result_t res;
  char build[PATH_MAX], memtop[PATH_MAX + 16], shim[PATH_MAX + 32];
  char pid[16], file[PATH_MAX];
  server_t s;
  size_t i;

  (void)state;
  assert_int_equal(host_build_dir(build, sizeof build), 0);
  snprintf(memtop, sizeof memtop, "%s/memtop", build);
  snprintf(shim, sizeof shim, "%s/progs/libnodlopen.so", build);
  snprintf(pid, sizeof pid, "%d", (int)getpid());
  snprintf(file, sizeof file, "%s/missing.out", dir);
  /* Under AddressSanitizer its runtime need not come first. */
  const char *asan = getenv("ASAN_OPTIONS");
  char asan_was[512], asan_now[600];
  snprintf(asan_was, sizeof asan_was, "%s", asan != NULL ? asan : "");
  snprintf(asan_now, sizeof asan_now, "%s%sverify_asan_link_order=0", asan_was,
           asan_was[0] ? ":" : "");
  for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    server_start(&s, 1, 0);
    setenv("LD_PRELOAD", shim, 1);
    setenv("ASAN_OPTIONS", asan_now, 1);
    setenv("MT_TEST_NO_DLOPEN", cases[i].soname, 1);
    char *argv[] = {memtop,
                    (char *)"profile",
                    pid,
                    (char *)"--format",
                    (char *)cases[i].format,
                    (char *)"-o",
                    file,
                    NULL};
    run_capture(&res, argv, -1);
    unsetenv("LD_PRELOAD");
    if (asan != NULL)
      setenv("ASAN_OPTIONS", asan_was, 1);
    else
      unsetenv("ASAN_OPTIONS");
    unsetenv("MT_TEST_NO_DLOPEN");
    server_stop(&s);
    if (res.status != 1 || strstr(res.err, cases[i].soname) == NULL ||
        strstr(res.err, cases[i].package) == NULL)
      fail_msg("without %s, memtop profile --format %s: status %d, "
               "stderr:\n%s",
               cases[i].soname, cases[i].format, res.status, res.err);
    assert_int_equal(access(file, F_OK), -1); /* nothing written */
  }
}

/* Under a sanitizer, instructions are not counted (valgrind cannot run
 * an instrumented binary) and memory is the sanitizer's: those checks are
 * the plain build's. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define PLAIN_BUILD 0
#else
#define PLAIN_BUILD 1
#endif

/* ---- the largest profile: memtop's memory stays bounded ----------------- */

/* The worst profile memtop reads whole, twice (--seconds: two of them,
 * disjoint, held and subtracted): every bound of wire/profile.h reached
 * (2^18 records of 32 frames, 2^23 stack words; 2,048 mappings with
 * 4,000-byte paths, 8 MiB) and `g_naddr` distinct return addresses
 * across the two, each frame of each record another one, so that every
 * location, sample and string is as many as can be. */
static uint32_t g_naddr;
static ms__profile_record_t *g_hrec;
static uint64_t *g_hstack;
static ms__profile_mapping_t g_hmap[2048];
static char g_hpath[2048][4000];

#define H_BASE 0x10000000ull
#define H_DEPTH 32u

static void make_hostile(int n, ms__profile_t *p) {
  uint32_t nrec = MS__PROFILE_MAX_FRAMES / H_DEPTH;
  uint64_t span = ((uint64_t)g_naddr * 16 / 2048 + 4095) & ~4095ull;

  if (g_hrec == NULL) {
    g_hrec = calloc(nrec, sizeof *g_hrec);
    g_hstack = malloc((size_t)MS__PROFILE_MAX_FRAMES * 8);
    if (g_hrec == NULL || g_hstack == NULL)
      _exit(3);
  }
  for (uint32_t r = 0; r < nrec; r++) {
    for (uint32_t j = 0; j < H_DEPTH; j++) {
      uint64_t k =
          ((uint64_t)n * MS__PROFILE_MAX_FRAMES + (uint64_t)r * H_DEPTH + j) %
          g_naddr;
      g_hstack[(size_t)r * H_DEPTH + j] = H_BASE + k * 16 + 1;
    }
    g_hrec[r] = (ms__profile_record_t){
        .size = 16 + (uint64_t)n, /* the two profiles share no bucket */
        .alloc_objects = 3,
        .alloc_bytes = 3 * (16 + (uint64_t)n),
        .free_objects = 1,
        .free_bytes = 16 + (uint64_t)n,
        .depth = H_DEPTH,
        .stack = &g_hstack[(size_t)r * H_DEPTH],
    };
  }
  for (uint32_t m = 0; m < 2048; m++) {
    memset(g_hpath[m], 'x', sizeof g_hpath[m] - 1);
    snprintf(g_hpath[m], 40, "/nonexistent/%u/", m);
    g_hpath[m][strlen(g_hpath[m])] = 'x';
    g_hpath[m][sizeof g_hpath[m] - 1] = '\0';
    g_hmap[m] = (ms__profile_mapping_t){
        H_BASE + m * span, H_BASE + (m + 1) * span, 0, g_hpath[m], NULL, 0};
  }
  p->rate = 524288;
  p->nrecords = nrec;
  p->records = g_hrec;
  p->nmappings = 2048;
  p->mappings = g_hmap;
}

/* A target of its own (a child: memtop's child must be forked from this
 * small process, since a child's peak RSS counts what it inherited)
 * serving `answers` profiles made by `make`. Returns its PID once it
 * listens. */
static pid_t hostile_target(int answers,
                            void (*make)(int n, ms__profile_t *p)) {
  char sock[PATH_MAX];
  struct stat st;
  pid_t pid = fork();

  assert_true(pid >= 0);
  if (pid == 0) {
    server_t s;
    g_make = make;
    server_start(&s, answers, 0);
    server_stop(&s);
    _exit(0);
  }
  snprintf(sock, sizeof sock, "%s/%d.sock", dir, (int)pid);
  for (int i = 0; i < 3000 && stat(sock, &st) != 0; i++)
    usleep(10000);
  assert_int_equal(stat(sock, &st), 0);
  return pid;
}

/* Runs the real memtop with argv (argv[0] left for its path), its
 * stdout in dir/out.txt and stderr in dir/err.txt. Returns its exit
 * status, with its peak RSS in KiB (wait4). */
static int run_peak(char *argv[], long *maxrss_kib) {
  char build[1024], memtop[1200], out[PATH_MAX], err[PATH_MAX];
  struct rusage ru;
  int st;

  assert_int_equal(host_build_dir(build, sizeof build), 0);
  snprintf(memtop, sizeof memtop, "%s/memtop", build);
  snprintf(out, sizeof out, "%s/out.txt", dir);
  snprintf(err, sizeof err, "%s/err.txt", dir);
  argv[0] = memtop;
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    int o = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int e = open(err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (o < 0 || e < 0 || dup2(o, 1) != 1 || dup2(e, 2) != 2)
      _exit(126);
    execv(memtop, argv);
    _exit(127);
  }
  assert_int_equal(wait4(child, &st, 0, &ru), child);
  *maxrss_kib = ru.ru_maxrss;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* memtop ARGS... (NULL-ended) through run_peak. */
static int memtop_run_peak(long *maxrss_kib, const char *arg, ...) {
  char *argv[16];
  int argc = 1;
  va_list ap;

  va_start(ap, arg);
  for (; arg != NULL && argc < 15; arg = va_arg(ap, const char *))
    argv[argc++] = (char *)arg;
  va_end(ap);
  argv[argc] = NULL;
  return run_peak(argv, maxrss_kib);
}

/* memtop profile PID ARGS... (NULL-ended) through run_peak. */
static int memtop_peak(pid_t pid, long *maxrss_kib, const char *arg, ...) {
  char *argv[16];
  int argc = 1;
  va_list ap;

  argv[argc++] = (char *)"profile";
  argv[argc++] = run_pidstr(pid);
  va_start(ap, arg);
  for (; arg != NULL && argc < 15; arg = va_arg(ap, const char *))
    argv[argc++] = (char *)arg;
  va_end(ap);
  argv[argc] = NULL;
  return run_peak(argv, maxrss_kib);
}

/* The largest profiles memtop accepts, as a --seconds delta: written, in
 * less than 512 MiB at its peak (4.9 GB before: a location per address,
 * no bound on stack words). One distinct address more than a heap holds:
 * refused as too large, saying what to do. */
static void test_peak_memory_bounded(void **state) {
  char file[PATH_MAX], errf[PATH_MAX], outf[PATH_MAX], *text;
  long kib = 0;
  int st;

  (void)state;
  snprintf(file, sizeof file, "%s/big.pb.gz", dir);
  snprintf(errf, sizeof errf, "%s/err.txt", dir);
  snprintf(outf, sizeof outf, "%s/out.txt", dir);
  g_naddr = MT_HEAP_MAX_LOCATIONS;
  pid_t t = hostile_target(2, make_hostile);
  int rc = memtop_peak(t, &kib, "--seconds", "1", "-o", file, NULL);
  waitpid(t, &st, 0);
  text = host_read_all(errf, NULL);
  print_message("memtop's peak RSS on the largest delta: %ld MiB\n",
                kib / 1024);
  if (rc != 0)
    fail_msg("memtop profile: exit %d: %s", rc, text);
  free(text);
  if (PLAIN_BUILD)
    assert_true(kib < 512 * 1024);

  /* The same as a top list: the sites of a million addresses; and
   * --once --sites over three such targets. (Under a sanitizer these add
   * minutes and no check: the bound is the plain build's.) */
  if (!PLAIN_BUILD)
    goto too_large;
  t = hostile_target(2, make_hostile);
  rc = memtop_peak(t, &kib, "--seconds", "1", "--format", "text", "-o", file,
                   NULL);
  waitpid(t, &st, 0);
  print_message("the same as a top list: %ld MiB\n", kib / 1024);
  assert_int_equal(rc, 0);
  assert_true(kib < 512 * 1024);

  /* --once --sites 3: the three profiles are read at once, and together
   * may hold no more than two of the largest. */
  pid_t ts[3];
  for (int i = 0; i < 3; i++)
    ts[i] = hostile_target(1, make_hostile);
  rc = memtop_run_peak(&kib, "--once", "--sites", "3", run_pidstr(ts[0]),
                       run_pidstr(ts[1]), run_pidstr(ts[2]), NULL);
  for (int i = 0; i < 3; i++) {
    kill(ts[i], SIGKILL);
    waitpid(ts[i], &st, 0);
  }
  print_message("--once --sites 3, three such targets: %ld MiB (exit %d)\n",
                kib / 1024, rc);
  text = host_read_all(outf, NULL);
  assert_non_null(strstr(text, "Top allocation sites:\nPID "));
  free(text);
  text = host_read_all(errf, NULL);
  assert_non_null(strstr(text, "would hold more than 192 MiB"));
  free(text);
  assert_true(kib < 512 * 1024);

too_large:
  g_naddr = MT_HEAP_MAX_LOCATIONS + 1;
  t = hostile_target(1, make_hostile);
  rc = memtop_peak(t, &kib, "-o", file, NULL);
  waitpid(t, &st, 0);
  text = host_read_all(errf, NULL);
  assert_int_equal(rc, 1);
  assert_non_null(strstr(text, "profile too large"));
  assert_non_null(strstr(text, "MEMSTATS_PROFILE_BUCKETS"));
  free(text);
  if (PLAIN_BUILD)
    assert_true(kib < 512 * 1024);
  unlink(file);
}

/* ---- many mappings: memtop's work stays linear -------------------------- */

/* `g_nmap` mappings, each a file that does not exist (so left
 * unresolved, and said so), and one record in each. */
static uint32_t g_nmap;

static void make_many_mappings(int n, ms__profile_t *p) {
  static ms__profile_record_t rec[65536];
  static uint64_t st[65536];
  static ms__profile_mapping_t map[65536];
  static char path[65536][48];

  (void)n;
  for (uint32_t m = 0; m < g_nmap; m++) {
    snprintf(path[m], sizeof path[m], "/nonexistent/lib%u.so", m);
    map[m] = (ms__profile_mapping_t){H_BASE + m * 0x10000ull,
                                     H_BASE + (m + 1) * 0x10000ull,
                                     0,
                                     path[m],
                                     NULL,
                                     0};
    st[m] = H_BASE + m * 0x10000ull + 0x100;
    rec[m] = (ms__profile_record_t){.size = 32,
                                    .alloc_objects = 1,
                                    .alloc_bytes = 32,
                                    .depth = 1,
                                    .stack = &st[m]};
  }
  p->nrecords = g_nmap;
  p->records = rec;
  p->nmappings = g_nmap;
  p->mappings = map;
}

/* The instructions memtop profile runs (callgrind) on a profile of
 * `nmap` mappings. */
static unsigned long long memtop_instructions(uint32_t nmap) {
  char build[1024], memtop[1200], file[PATH_MAX], why[512];
  unsigned long long n = 0;
  int st;

  g_nmap = nmap;
  pid_t t = hostile_target(1, make_many_mappings);
  assert_int_equal(host_build_dir(build, sizeof build), 0);
  snprintf(memtop, sizeof memtop, "%s/memtop", build);
  snprintf(file, sizeof file, "%s/maps.txt", dir);
  const char *argv[] = {memtop, "profile", run_pidstr(t), "--format",
                        "text", "-o",      file,          NULL};
  const char *env[] = {"MEMTOP_TIMEOUT_MS=60000", NULL};
  int rc = cg_count(argv, env, &n, why, sizeof why);
  kill(t, SIGKILL);
  waitpid(t, &st, 0);
  if (rc != 0)
    fail_msg("%s", why);
  unlink(file);
  return n;
}

/* Each mapping costs memtop a bounded number of instructions, however
 * many there are: finding an address's mapping and saying which files
 * were left unresolved once each were linear scans, quadratic over
 * 65,536 mappings. */
static void test_many_mappings_linear(void **state) {
  (void)state;
  if (!PLAIN_BUILD) {
    print_message("skipped: built with a sanitizer, which valgrind cannot "
                  "run\n");
    skip();
  }
  if (system("command -v valgrind >/dev/null 2>&1") != 0) {
    print_message("skipped: valgrind is not installed\n");
    skip();
  }
  unsigned long long a = memtop_instructions(4096);
  unsigned long long b = memtop_instructions(8192);
  unsigned long long per = b > a ? (b - a) / 4096 : 0;
  print_message("memtop profile: %llu instructions per mapping\n", per);
  assert_true(b > a);
  assert_true(per < 20000);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pprof_file),
      cmocka_unit_test(test_text),
      cmocka_unit_test(test_wrote_count),
      cmocka_unit_test(test_seconds_delta),
      cmocka_unit_test(test_exit_between_profiles),
      cmocka_unit_test(test_error_answer),
      cmocka_unit_test(test_not_sampling),
      cmocka_unit_test(test_symlink_not_followed),
      cmocka_unit_test(test_fifo_and_directory_refused),
      cmocka_unit_test(test_regular_file_replaced),
      cmocka_unit_test(test_stdout),
      cmocka_unit_test(test_stdout_reader_gone),
      cmocka_unit_test(test_stdout_terminal_refused),
      cmocka_unit_test(test_wrapper_skipped),
      cmocka_unit_test(test_pprof_drop_frames),
      cmocka_unit_test(test_focus_ignore_hide),
      cmocka_unit_test(test_debuginfod),
      cmocka_unit_test(test_library_missing),
      cmocka_unit_test(test_peak_memory_bounded),
      cmocka_unit_test(test_many_mappings_linear),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
