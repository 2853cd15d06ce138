/*
 * test_sym_rights.c - memtop, as root, reads the files a target's heap
 * profile names only as the target itself could (pprof/tfiles.h,
 * pprof/sym.c): the target here is a child of this test running as
 * nobody, a hostile fake agent whose profile names, besides its own
 * readable binary,
 *
 *   - a device node (of /dev/null's numbers, private to the test: a
 *     /dev/ptmx would allocate a pty, a /dev/watchdog arm a watchdog),
 *   - a FIFO,
 *   - a root-only (0600) copy of this binary, which nobody cannot read,
 *   - a readable copy whose .gnu_debuglink names a FIFO (libdwfl's own
 *     search for debug files opened it, and waited for a writer),
 *
 * each with a stack address that would resolve to a function of this
 * binary if the file were read. inotify tells every real open (O_PATH
 * lookups make no event). Symbolised directly (mt_heap_symbolize with the
 * child's PID) and end to end (`memtop profile PID --format text`, the
 * child serving its socket with the agent's wire encoders). Also: the
 * rights are the one thread's, a debug link to a readable file still
 * gives lines, a split unit's .dwo is never opened, and memtop run by a
 * user reads its own user's target with its own rights and refuses
 * another's. Needs root (a target of another user): skipped otherwise.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
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
#include <sys/inotify.h>
#include <sys/fsuid.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client/client.h"
#include "common/strbuf.h"
#include "memstats.h"
#include "memtop/cli.h"
#include "memtop/profile_cmd.h"
#include "pprof/heap.h"
#include "pprof/tfiles.h"
#include "wire/profile.h"
#include "wire/wire.h"
#include "support/host.h"
#include "support/target.h"

#define NOBODY 65534
/* Where each fake mapping is placed: this binary's text, shifted. */
#define SHIFT ((uint64_t)1 << 32)

enum { OWN, SECRET, LINKED, FIFO, DEV, SPLIT, GOOD, LEASED, NSITES };
static const char *const file_of[NSITES] = {
    "own.bin", "secret.bin",  "linked.bin", "fifo",
    "dev",     "libsplit.so", "good.bin",   "leased.bin"};
/* Where libsplit.so is placed, and its function's offset in it. */
#define SPLIT_BASE ((uint64_t)0x7e0000000000)
static uint64_t split_fn_at;

static char sockdir[64], files[64];
static int have_debuglink, have_dev, have_split, have_lease;

/* The target: its PID, the pipe that keeps it alive. */
static pid_t child = -1;
static int hold = -1;

static __attribute__((noinline)) uint64_t here(void) {
  return (uint64_t)(uintptr_t)__builtin_return_address(0);
}

/* One site per file: each stores its own mark, so that the compiler
 * cannot fold them into one. */
static volatile int mark;
static __attribute__((noinline)) uint64_t site_own(void) {
  uint64_t ra;

  mark = 1;
  ra = here();
  __asm__ volatile("" : "+r"(ra)::"memory"); /* no tail call */
  return ra;
}
static __attribute__((noinline)) uint64_t site_secret(void) {
  uint64_t ra;

  mark = 2;
  ra = here();
  __asm__ volatile("" : "+r"(ra)::"memory"); /* no tail call */
  return ra;
}
static __attribute__((noinline)) uint64_t site_good(void) {
  uint64_t ra;

  mark = 4;
  ra = here();
  __asm__ volatile("" : "+r"(ra)::"memory"); /* no tail call */
  return ra;
}
static __attribute__((noinline)) uint64_t site_linked(void) {
  uint64_t ra;

  mark = 3;
  ra = here();
  __asm__ volatile("" : "+r"(ra)::"memory"); /* no tail call */
  return ra;
}

static const char *const site_name[NSITES] = {
    "site_own", "site_secret", "site_linked", NULL,
    NULL,       "split_fn",    "site_good"};

/* The profile the target names: one record per file. */
static uint64_t stack[NSITES];
static char paths[NSITES][PATH_MAX];
static ms__profile_mapping_t maps[NSITES];
static ms__profile_record_t recs[NSITES];

static void text_mapping(uint64_t *start, uint64_t *end, uint64_t *off) {
  char exe[PATH_MAX], line[PATH_MAX + 256], path[PATH_MAX], perms[8];
  unsigned long long s, e, o;
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  FILE *f = fopen("/proc/self/maps", "r");
  uint64_t ra = site_own();

  assert_true(n > 0);
  exe[n] = '\0';
  assert_non_null(f);
  *start = 0;
  while (fgets(line, sizeof line, f) != NULL) {
    path[0] = '\0';
    if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %4095s", &s, &e, perms, &o,
               path) < 4 ||
        strcmp(path, exe) != 0 || perms[2] != 'x' || ra < s || ra >= e)
      continue;
    *start = s;
    *end = e;
    *off = o;
  }
  fclose(f);
  assert_true(*start != 0);
}

static void profile_init(ms__profile_t *p, pid_t pid) {
  uint64_t start, end, off;
  int i;

  text_mapping(&start, &end, &off);
  stack[OWN] = site_own();
  stack[SECRET] = site_secret() + SHIFT;
  stack[LINKED] = site_linked() + 2 * SHIFT;
  stack[FIFO] = site_own() + 3 * SHIFT;
  stack[DEV] = site_own() + 4 * SHIFT;
  stack[SPLIT] = SPLIT_BASE + split_fn_at + 4;
  stack[GOOD] = site_good() + GOOD * SHIFT;
  stack[LEASED] = site_own() + LEASED * SHIFT;
  memset(p, 0, sizeof *p);
  memset(recs, 0, sizeof recs);
  for (i = 0; i < NSITES; i++) {
    snprintf(paths[i], PATH_MAX, "%s/%s", files, file_of[i]);
    maps[i] = (ms__profile_mapping_t){start + (uint64_t)i * SHIFT,
                                      end + (uint64_t)i * SHIFT,
                                      off,
                                      paths[i],
                                      NULL,
                                      0};
    if (i == SPLIT)
      maps[i] = (ms__profile_mapping_t){
          SPLIT_BASE, SPLIT_BASE + (1u << 20), 0, paths[i], NULL, 0};
    recs[i].size = 4096;
    recs[i].alloc_objects = 10 + (uint64_t)i;
    recs[i].alloc_bytes = recs[i].alloc_objects * 4096;
    recs[i].depth = 1;
    recs[i].stack = &stack[i];
  }
  p->pid = (int32_t)pid;
  assert_int_equal(msc_proc_start_time(pid, &p->start_time), 0);
  p->time_unix_ns = 1700000000000000000ull;
  p->rate = 1;
  p->nrecords = NSITES;
  p->records = recs;
  p->nmappings = NSITES;
  p->mappings = maps;
}

static int write_all(int fd, const uint8_t *b, size_t n) {
  while (n > 0) {
    ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
    if (w <= 0)
      return -1;
    b += w;
    n -= (size_t)w;
  }
  return 0;
}

/* The fake agent, in the child, as nobody: each connection gets its
 * hello, a snapshot and the profile, as the agent answers memtop. */
static void serve(int lfd) {
  for (;;) {
    ms__wire_hello_t h;
    ms__wire_writer_t w;
    ms__profile_t p;
    ms_snapshot_t snap;
    uint8_t req[4096], *buf;
    size_t cap, plen = 0;
    int c = accept(lfd, NULL, NULL);

    if (c < 0)
      _exit(0);
    (void)recv(c, req, sizeof req, 0);
    profile_init(&p, getppid());
    memset(&h, 0, sizeof h);
    h.pid = p.pid;
    h.start_time = p.start_time;
    snprintf(h.comm, sizeof h.comm, "hostile");
    snprintf(h.lib_version, sizeof h.lib_version, "%s", MS_VERSION_STRING);
    h.proto_version = MS__WIRE_VERSION;
    h.capabilities = MS__CAP_SNAPSHOT | MS__CAP_PROFILE;
    cap = 4096 + sizeof snap * 2 +
          ms__profile_encoded_bound(&p, "hostile", MS__PROFILE_MIN_PAYLOAD);
    buf = malloc(cap);
    if (buf == NULL)
      _exit(1);
    ms__wire_writer_init(&w, buf, cap);
    ms__wire_encode_hello(&w, &h);
    memset(&snap, 0, sizeof snap);
    snap.pid = h.pid;
    snap.start_time = h.start_time;
    snprintf(snap.comm, sizeof snap.comm, "hostile");
    if (ms__wire_encode_snapshot(&w, &snap, NULL) != 0 ||
        ms__profile_encode(&p, "hostile", buf + w.len, cap - w.len,
                           MS__PROFILE_MIN_PAYLOAD, &plen) != 0)
      _exit(1);
    (void)write_all(c, buf, w.len + plen);
    free(buf);
    close(c);
  }
}

/* Starts the target: its socket made as root (as a program that drops
 * its privileges keeps it), then it runs as nobody until `hold` closes. */
static void child_start(void) {
  struct sockaddr_un sa;
  char path[PATH_MAX];
  int ready[2], keep[2], lfd, leased;
  pid_t server;
  char c;

  assert_int_equal(pipe(ready), 0);
  assert_int_equal(pipe(keep), 0);
  child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    gid_t none = NOBODY;

    prctl(PR_SET_PDEATHSIG, SIGKILL);
    close(ready[0]);
    close(keep[1]);
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s/%d.sock", sockdir,
             (int)getpid());
    lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        chmod(sa.sun_path, 0600) != 0 || listen(lfd, 4) != 0 ||
        setgroups(1, &none) != 0 || setresgid(NOBODY, NOBODY, NOBODY) != 0 ||
        setresuid(NOBODY, NOBODY, NOBODY) != 0)
      _exit(1);
    /* A write lease on a file of its own: an open for reading by anyone
     * else waits for it to be given up (lease-break-time, 45 s by
     * default) unless that open does not block. */
    signal(SIGIO, SIG_IGN);
    snprintf(path, sizeof path, "%s/leased.bin", files);
    leased = open(path, O_RDWR | O_CLOEXEC | O_NONBLOCK);
    c = leased >= 0 && fcntl(leased, F_SETLEASE, F_WRLCK) == 0 ? 'L' : 'r';
    if (write(ready[1], &c, 1) != 1)
      _exit(1);
    close(ready[1]);
    /* The server lives as long as its parent, the target's PID, which
     * ends it. */
    server = fork();
    if (server == 0)
      serve(lfd);
    while (read(keep[0], &c, 1) > 0)
      ;
    if (server > 0) {
      kill(server, SIGKILL);
      waitpid(server, NULL, 0);
    }
    _exit(0);
  }
  close(ready[1]);
  close(keep[0]);
  hold = keep[1];
  assert_int_equal(read(ready[0], &c, 1), 1);
  close(ready[0]);
  have_lease = c == 'L';
}

static void child_stop(void) {
  int status;

  if (child <= 0)
    return;
  close(hold);
  waitpid(child, &status, 0);
  child = -1;
}

static void copy_file(const char *from, const char *to, mode_t mode) {
  char buf[65536];
  ssize_t n;
  int in = open(from, O_RDONLY | O_CLOEXEC);
  int out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);

  assert_true(in >= 0 && out >= 0);
  while ((n = read(in, buf, sizeof buf)) > 0)
    assert_int_equal(write(out, buf, (size_t)n), n);
  close(in);
  assert_int_equal(fchmod(out, mode), 0);
  close(out);
}

static int setup(void **state) {
  char p[PATH_MAX], q[PATH_MAX], cmd[4 * PATH_MAX];

  (void)state;
  if (geteuid() != 0)
    return 0;
  if (target_dir_setup(sockdir, sizeof sockdir,
                       "/tmp/test_sym_rights.XXXXXX") != 0)
    return -1;
  snprintf(files, sizeof files, "/tmp/test_sym_rights_files.XXXXXX");
  if (mkdtemp(files) == NULL || chmod(files, 0755) != 0)
    return -1;
  snprintf(p, sizeof p, "%s/own.bin", files);
  copy_file("/proc/self/exe", p, 0755);
  snprintf(q, sizeof q, "%s/secret.bin", files);
  copy_file("/proc/self/exe", q, 0600);
  snprintf(q, sizeof q, "%s/leased.bin", files);
  copy_file("/proc/self/exe", q, 0644);
  if (chown(q, NOBODY, NOBODY) != 0)
    return -1;
  snprintf(q, sizeof q, "%s/fifo", files);
  if (mkfifo(q, 0666) != 0 || chmod(q, 0666) != 0)
    return -1;
  /* Without the right to make a device node (a container), a FIFO
   * stands in for it. */
  snprintf(q, sizeof q, "%s/dev", files);
  have_dev = mknod(q, S_IFCHR | 0666, makedev(1, 3)) == 0;
  if ((!have_dev && mkfifo(q, 0666) != 0) || chmod(q, 0666) != 0)
    return -1;
  /* linked.bin: own.bin without its DWARF, and a .gnu_debuglink to
   * evil.debug, which then becomes a FIFO. */
  snprintf(cmd, sizeof cmd,
           "cd %s && objcopy --only-keep-debug own.bin evil.debug && "
           "objcopy --strip-debug --add-gnu-debuglink=evil.debug own.bin "
           "linked.bin && chmod 0755 linked.bin && rm evil.debug && "
           "objcopy --only-keep-debug own.bin good.debug && "
           "objcopy --strip-debug --add-gnu-debuglink=good.debug own.bin "
           "good.bin && chmod 0755 good.bin good.debug",
           files);
  have_debuglink = system(cmd) == 0;
  if (have_debuglink) {
    snprintf(q, sizeof q, "%s/evil.debug", files);
    if (mkfifo(q, 0666) != 0 || chmod(q, 0666) != 0)
      return -1;
  } else {
    snprintf(q, sizeof q, "%s/linked.bin", files);
    copy_file(p, q, 0755);
    snprintf(q, sizeof q, "%s/good.bin", files);
    copy_file(p, q, 0755);
  }
  /* libsplit.so: its DWARF split off into split.dwo (a skeleton unit
   * names it), which then becomes a FIFO: libdw opens a split unit's file
   * by the name the DWARF gives. */
  snprintf(cmd, sizeof cmd,
           "cd %s && printf 'int split_fn(int x) { return x * 3 + 1; }\\n' "
           ">split.c && cc -g -gsplit-dwarf -O0 -fPIC -c split.c -o split.o "
           "&& cc -shared split.o -o libsplit.so && chmod 0755 libsplit.so "
           "&& rm split.dwo && nm -D libsplit.so | sed -n "
           "'s/^\\([0-9a-f]*\\) T split_fn$/\\1/p' >split.at",
           files);
  if (system(cmd) == 0) {
    FILE *f;
    unsigned long long at = 0;

    snprintf(q, sizeof q, "%s/split.at", files);
    f = fopen(q, "r");
    have_split = f != NULL && fscanf(f, "%llx", &at) == 1 && at != 0;
    if (f != NULL)
      fclose(f);
    split_fn_at = at;
    snprintf(q, sizeof q, "%s/split.dwo", files);
    if (have_split && (mkfifo(q, 0666) != 0 || chmod(q, 0666) != 0))
      return -1;
  }
  if (!have_debuglink)
    print_message("note: objcopy failed: a debug link is not tried\n");
  if (!have_split)
    print_message("note: cc -gsplit-dwarf failed: split units not tried\n");
  return 0;
}

static int teardown(void **state) {
  (void)state;
  child_stop();
  if (geteuid() != 0)
    return 0;
  target_dir_remove(files);
  return target_dir_remove(sockdir);
}

static void need_root(void) {
  if (geteuid() != 0) {
    print_message("skipped: needs root (a target that runs as another "
                  "user, and a device node)\n");
    skip();
  }
}

/* An inotify descriptor told of every open of the hostile files. */
static int watch_opens(void) {
  static const char *const watched[] = {"secret.bin", "fifo", "dev",
                                        "evil.debug"};
  char p[PATH_MAX];
  int in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  size_t i;

  assert_true(in >= 0);
  for (i = 0; i < sizeof watched / sizeof watched[0]; i++) {
    snprintf(p, sizeof p, "%s/%s", files, watched[i]);
    if (i == 3 && !have_debuglink)
      continue;
    assert_true(inotify_add_watch(in, p, IN_OPEN) >= 0);
  }
  return in;
}

/* Fails if a watched file was opened, naming it. */
static void assert_no_opens(int in) {
  union {
    struct inotify_event e;
    char bytes[4096];
  } u;
  ssize_t n = read(in, u.bytes, sizeof u.bytes);

  if (n > 0)
    fail_msg("memtop opened a file the target named that the target may "
             "not read or that is not a regular file (%zd bytes of inotify "
             "events, watch %d)",
             n, u.e.wd);
  close(in);
}

/* The function a sample's innermost frame resolved to, or NULL. */
static const char *site_of(const mt_heap_t *h, const char *name) {
  size_t i;

  for (i = 0; i < h->nfunctions; i++)
    if (strcmp(h->strings[h->functions[i].name], name) == 0)
      return name;
  return NULL;
}

/* mt_heap_symbolize with the target's PID: its own binary resolved; the
 * device, the FIFOs and the root-only file never opened; the stripped
 * binary's names from its symbol table. */
static void test_symbolize_as_target(void **state) {
  ms__profile_t p;
  mt_heap_t h;
  size_t i;
  int in;

  (void)state;
  need_root();
  child_start();
  profile_init(&p, child);
  assert_int_equal(mt_heap_build(&p, NULL, &h), 0);
  in = watch_opens();
  assert_int_equal(mt_heap_symbolize(&h, child, p.start_time), 0);
  assert_no_opens(in);
  assert_non_null(site_of(&h, site_name[OWN]));
  assert_non_null(site_of(&h, site_name[LINKED]));
  assert_null(site_of(&h, site_name[SECRET]));
  if (have_split)
    assert_non_null(site_of(&h, site_name[SPLIT]));
  /* good.bin's DWARF is in its debug-link file, which is found: the
   * site's file and line. */
  assert_non_null(site_of(&h, site_name[GOOD]));
  for (i = 0; i < h.nlocations; i++) {
    const mt_heap_location_t *l = &h.locations[i];

    if (l->mapping == GOOD + 1) {
      assert_true(l->nlines > 0);
      assert_true(l->lines[0].line > 0);
      assert_non_null(
          strstr(h.strings[h.functions[l->lines[0].function].filename],
                 "test_sym_rights.c"));
    }
  }
  assert_true(h.mappings[OWN].symbolized);
  assert_false(h.mappings[SECRET].symbolized);
  assert_false(h.mappings[FIFO].symbolized);
  assert_false(h.mappings[DEV].symbolized);
  /* Refused at once, not after the lease was broken. */
  if (have_lease)
    assert_false(h.mappings[LEASED].symbolized);
  else
    print_message("note: no lease could be taken: not tried\n");
  assert_non_null(h.mappings[SECRET].unresolved);
  assert_non_null(strstr(h.mappings[FIFO].unresolved, "not a regular file"));
  assert_non_null(strstr(h.mappings[DEV].unresolved, "not a regular file"));
  mt_heap_free(&h);

  /* The profile of a process that is not the one with this PID now: no
   * file is read at all. */
  profile_init(&p, child);
  p.start_time++;
  assert_int_equal(mt_heap_build(&p, NULL, &h), 0);
  assert_int_equal(mt_heap_symbolize(&h, child, p.start_time), 0);
  assert_false(h.mappings[OWN].symbolized);
  assert_non_null(strstr(h.mappings[OWN].unresolved, "exited"));
  mt_heap_free(&h);
  child_stop();
}

/* `memtop profile PID --format text` against the hostile agent: the
 * same, through the command's own path. */
static void test_profile_cmd_as_target(void **state) {
  static mt_opts_t o;
  char pid[16], err[256], out[PATH_MAX], *text;
  char *argv[] = {(char *)"memtop",
                  (char *)"profile",
                  pid,
                  (char *)"--format",
                  (char *)"text",
                  (char *)"--sites",
                  (char *)"10",
                  (char *)"-o",
                  out,
                  NULL};
  int in;

  (void)state;
  need_root();
  child_start();
  snprintf(pid, sizeof pid, "%d", (int)child);
  snprintf(out, sizeof out, "%s/top.txt", sockdir);
  if (mt_cli_parse(9, argv, NULL, &o, err, sizeof err) != 0)
    fail_msg("usage refused: %s", err);
  in = watch_opens();
  assert_int_equal(mt_profile_main(&o), 0);
  assert_no_opens(in);
  child_stop();
  text = host_read_all(out, NULL);
  assert_non_null(text);
  assert_non_null(strstr(text, site_name[OWN]));
  assert_non_null(strstr(text, site_name[LINKED]));
  assert_null(strstr(text, site_name[SECRET]));
  if (have_split)
    assert_non_null(strstr(text, site_name[SPLIT]));
  free(text);
}

static uint64_t start_of(pid_t pid) {
  uint64_t t = 0;

  msc_proc_start_time(pid, &t);
  return t;
}

/* The target's rights are the one thread's (as on a libuv worker): while
 * a thread holds them, the others keep memtop's; when it gives them back
 * it has its own again. */
typedef struct rights_s {
  mt_tfiles_t t;
  pthread_barrier_t held, checked;
  int entered, own_ok, secret_refused, fsuid_during, fsuid_after;
  int groups_after;
} rights_t;

static void *hold_rights(void *arg) {
  rights_t *r = arg;
  char p[PATH_MAX];
  const char *why;
  int fd;

  r->entered = mt_tfiles_enter(&r->t, &why) == 0;
  r->fsuid_during = setfsuid((uid_t)-1);
  snprintf(p, sizeof p, "%s/own.bin", files);
  fd = mt_tfiles_open(&r->t, p, &why);
  r->own_ok = fd >= 0;
  if (fd >= 0)
    close(fd);
  snprintf(p, sizeof p, "%s/secret.bin", files);
  fd = mt_tfiles_open(&r->t, p, &why);
  r->secret_refused = fd == MS_EACCES && strstr(why, "may not read") != NULL;
  if (fd >= 0)
    close(fd);
  pthread_barrier_wait(&r->held);
  pthread_barrier_wait(&r->checked);
  mt_tfiles_leave(&r->t);
  r->fsuid_after = setfsuid((uid_t)-1);
  r->groups_after = getgroups(0, NULL);
  return NULL;
}

static void test_rights_per_thread(void **state) {
  rights_t r;
  pthread_t th;
  char p[PATH_MAX];
  const char *why;
  int fd, groups = getgroups(0, NULL);

  (void)state;
  need_root();
  child_start();
  memset(&r, 0, sizeof r);
  assert_int_equal(mt_tfiles_init(&r.t, child, start_of(child), &why), 0);
  pthread_barrier_init(&r.held, NULL, 2);
  pthread_barrier_init(&r.checked, NULL, 2);
  assert_int_equal(pthread_create(&th, NULL, hold_rights, &r), 0);
  pthread_barrier_wait(&r.held);
  /* This thread is still root, with its groups. */
  assert_int_equal(setfsuid((uid_t)-1), 0);
  assert_int_equal(getgroups(0, NULL), groups);
  snprintf(p, sizeof p, "%s/secret.bin", files);
  fd = open(p, O_RDONLY | O_CLOEXEC);
  assert_true(fd >= 0);
  close(fd);
  pthread_barrier_wait(&r.checked);
  pthread_join(th, NULL);
  mt_tfiles_free(&r.t);
  child_stop();
  assert_true(r.entered);
  assert_int_equal(r.fsuid_during, NOBODY);
  assert_true(r.own_ok);
  assert_true(r.secret_refused);
  assert_int_equal(r.fsuid_after, 0);
  assert_int_equal(r.groups_after, groups);
  pthread_barrier_destroy(&r.held);
  pthread_barrier_destroy(&r.checked);
}

/* memtop run by a user, not root: a target of its own user is read with
 * memtop's own rights (the same user's), and another user's target is
 * refused rather than read with memtop's rights. Checked in a child that
 * runs as nobody: its exit status is the first check that failed. */
static int unprivileged_checks(pid_t same_user, pid_t other_user) {
  mt_tfiles_t t;
  char p[PATH_MAX];
  const char *why = NULL;
  int fd;

  if (mt_tfiles_init(&t, same_user, start_of(same_user), &why) != 0)
    return 10;
  if (mt_tfiles_enter(&t, &why) != 0)
    return 11;
  snprintf(p, sizeof p, "%s/own.bin", files);
  fd = mt_tfiles_open(&t, p, &why);
  if (fd < 0)
    return 12;
  close(fd);
  snprintf(p, sizeof p, "%s/secret.bin", files);
  fd = mt_tfiles_open(&t, p, &why);
  if (fd != MS_EACCES || strstr(why, "may not read") == NULL)
    return 13;
  snprintf(p, sizeof p, "%s/no-such.bin", files);
  if (mt_tfiles_open(&t, p, &why) != MS_ENOENT)
    return 17;
  mt_tfiles_leave(&t);
  mt_tfiles_free(&t);
  if (mt_tfiles_init(&t, other_user, start_of(other_user), &why) != 0)
    return 14;
  if (mt_tfiles_enter(&t, &why) != MS_EACCES)
    return 15;
  if (setfsuid((uid_t)-1) != NOBODY)
    return 16;
  mt_tfiles_free(&t);
  return 0;
}

static void test_unprivileged_memtop(void **state) {
  pid_t me = getpid(), pid;
  int status;

  (void)state;
  need_root();
  child_start();
  pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    gid_t none = NOBODY;

    if (setgroups(1, &none) != 0 || setresgid(NOBODY, NOBODY, NOBODY) != 0 ||
        setresuid(NOBODY, NOBODY, NOBODY) != 0)
      _exit(9);
    _exit(unprivileged_checks(child, me));
  }
  assert_int_equal(waitpid(pid, &status, 0), pid);
  child_stop();
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_symbolize_as_target),
      cmocka_unit_test(test_profile_cmd_as_target),
      cmocka_unit_test(test_rights_per_thread),
      cmocka_unit_test(test_unprivileged_memtop),
  };
  /* A FIFO open that waited for ever would hang the suite: fail instead. */
  alarm(120);
  return cmocka_run_group_tests(tests, setup, teardown);
}
