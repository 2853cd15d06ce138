/*
 * test_hostile.c - a hostile local user, played for real.
 *
 * The test runs as root (as CI does; it is skipped, saying why, otherwise).
 * A forked child switches to `nobody` (setresgid, setgroups, setresuid)
 * and plays the attacker: it squats a socket directory before the victim
 * uses it, plants sockets under other processes' PIDs, claims PID 1 from
 * its own directory, and runs a fake agent that speaks the real protocol
 * (encoded with src/wire) and answers as the PID it impersonates, with the
 * right start time, so that only memtop's checks of the directory and of
 * the socket's server (SO_PEERCRED) stand between it and root's screen.
 * Its own snapshot's strings are hostile (support/hostile.h).
 *
 * As root, the real memtop runs `ps`, `--once`, `--once -n 3` and the live
 * view (in tmux): no crash, no spoofed figure shown as the victim's (the
 * refusal and its reason instead), no byte a terminal would act on.
 *
 * No timing is asserted: the only clock is a generous limit that turns a
 * hung memtop into a failure instead of a hung test run.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
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
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "client/client.h"
#include "support/foreign.h"
#include "support/host.h"
#include "support/hostile.h"
#include "support/run.h"
#include "wire/wire.h"

static char build[1024], memtop[1200];
static char dir[64];  /* root's own MEMSTATS_DIR (0700) */
static char area[64]; /* a place nobody may write to */
static uid_t nobody_uid;
static gid_t nobody_gid;
static const char *skip_reason;
static char tmux_sock[160], screen[64 * 1024]; /* the live view's session */

static run_result_t res;
/* Another user's libmemstats process (nobody's, in its default directory)
 * alive for the whole run, as on a shared machine (support/foreign.h). */
static foreign_t foreign;

/* Runs memtop with the given arguments (NULL-terminated) into res. */
static int mt(const char *first, ...) {
  va_list ap;
  va_start(ap, first);
  int r = run_capture_va(&res, memtop, -1, NULL, first, ap);
  va_end(ap);
  return r;
}

/* ---- running memtop ---- */

/* Nonzero if memtop's output shows figures of pid: a report's first line,
 * a JSON object or a ps row. */
static int shows_figures_of(pid_t pid) {
  char report[32], ps[32], json[32];
  const char *line = res.out;

  snprintf(report, sizeof report, "%d ", (int)pid);
  snprintf(ps, sizeof ps, "%7d ", (int)pid);
  snprintf(json, sizeof json, "\"pid\":%d,", (int)pid);
  while (*line != '\0') {
    const char *end = strchr(line, '\n');
    size_t len = end != NULL ? (size_t)(end - line) : strlen(line);
    char buf[4096];
    snprintf(buf, sizeof buf, "%.*s", (int)(len < 4095 ? len : 4095), line);
    if ((strncmp(buf, report, strlen(report)) == 0 &&
         strstr(buf, "Ready+Prepared=") != NULL) ||
        strncmp(buf, ps, strlen(ps)) == 0 || strstr(buf, json) != NULL)
      return 1;
    line += len + (end != NULL);
  }
  return 0;
}

/* ---- the victim and the attacker ---- */

/* A process of root's that runs no libmemstats: what the attacker
 * impersonates. */
static pid_t start_victim(void) {
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    for (;;)
      pause();
  }
  return pid;
}

static void stop(pid_t pid) {
  int st;
  if (pid <= 0)
    return;
  kill(pid, SIGKILL);
  waitpid(pid, &st, 0);
}

static void become_nobody(void) {
  if (setgroups(0, NULL) != 0 ||
      setresgid(nobody_gid, nobody_gid, nobody_gid) != 0 ||
      setresuid(nobody_uid, nobody_uid, nobody_uid) != 0)
    _exit(3);
}

/* Serves one connection as an agent of `claim` (0: its own PID) would:
 * the hello and snapshots of that PID, with its real start time, and the
 * hostile strings of support/hostile.h. */
static void serve(int cfd, int claim) {
  static uint8_t in[8192], out[MS__WIRE_SNAPSHOT_MAX];
  static ms_snapshot_t snap;
  ms__wire_hello_t h;
  uint64_t start = 0;
  size_t have = 0;

  if (msc_proc_start_time(claim, &start) != 0)
    _exit(1);
  hostile_snapshot(&snap, claim);
  snap.start_time = start;
  memset(&h, 0, sizeof h);
  h.pid = claim;
  h.start_time = start;
  memcpy(h.comm, snap.comm, sizeof h.comm);
  snprintf(h.lib_version, sizeof h.lib_version, "0.1.0");
  h.proto_version = MS__WIRE_VERSION;
  h.nproviders = snap.nproviders;
  memcpy(h.providers, snap.providers, sizeof h.providers);
  h.capabilities = MS__CAP_SNAPSHOT;
  for (;;) {
    ssize_t n = read(cfd, in + have, sizeof in - have);
    ms__frame_t f;
    const char *why;
    if (n <= 0)
      _exit(0);
    have += (size_t)n;
    while (ms__wire_frame(in, have, MS__WIRE_MAX_REQUEST, &f, &why) == 0) {
      size_t flen = MS__WIRE_HEADER + f.length;
      ms__wire_writer_t w;
      ms__wire_writer_init(&w, out, sizeof out);
      if (f.type == MS__MSG_HELLO)
        ms__wire_encode_hello(&w, &h);
      else if (f.type == MS__MSG_SNAPSHOT_REQ)
        ms__wire_encode_snapshot(&w, &snap, NULL);
      run_send_all(cfd, out, w.len);
      memmove(in, in + flen, have - flen);
      have -= flen;
    }
  }
}

typedef struct sock_s {
  const char *path; /* where nobody binds it (claim 0: its directory) */
  int claim;        /* the PID it answers as (0: the fake's own, its
                     * socket <path>/<its pid>.sock) */
} sock_t;

/* The attacker: a child that becomes nobody, makes `mkdirs` (mode 0777
 * if `open_dirs`, else 0700; NULL-terminated, may be NULL), then listens
 * on each socket and serves every connection as its claimed PID. Returns its
 * PID once it listens. */
static pid_t start_attacker(const char *const *mkdirs, int open_dirs,
                            const sock_t *socks, int nsocks) {
  int ready[2];
  char c;
  pid_t pid;

  assert_int_equal(pipe(ready), 0);
  pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    struct pollfd pf[8];
    int claims[8];
    close(ready[0]);
    /* Changing credentials clears the parent-death signal: set it after. */
    become_nobody();
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    /* What a hostile process calls itself: a retitle, U+009B, U+202E. */
    prctl(PR_SET_NAME, "\x1b]2;pwn\x07\xc2\x9b\xe2\x80\xae", 0, 0, 0);
    for (int i = 0; mkdirs != NULL && mkdirs[i] != NULL; i++) {
      if (mkdir(mkdirs[i], 0700) != 0 && errno != EEXIST)
        _exit(4);
      if (chmod(mkdirs[i], open_dirs ? 0777 : 0700) != 0)
        _exit(4);
    }
    for (int i = 0; i < nsocks && i < 8; i++) {
      struct sockaddr_un sa;
      memset(&sa, 0, sizeof sa);
      sa.sun_family = AF_UNIX;
      if (socks[i].claim == 0)
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s/%d.sock", socks[i].path,
                 (int)getpid());
      else
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s", socks[i].path);
      unlink(sa.sun_path);
      pf[i].fd = socket(AF_UNIX, SOCK_STREAM, 0);
      pf[i].events = POLLIN;
      claims[i] = socks[i].claim ? socks[i].claim : (int)getpid();
      if (pf[i].fd < 0 ||
          bind(pf[i].fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
          listen(pf[i].fd, 16) != 0)
        _exit(5);
    }
    if (write(ready[1], "r", 1) != 1)
      _exit(1);
    signal(SIGCHLD, SIG_IGN);
    for (;;) {
      if (poll(pf, (nfds_t)nsocks, -1) <= 0)
        continue;
      for (int i = 0; i < nsocks; i++) {
        if (!(pf[i].revents & POLLIN))
          continue;
        int cfd = accept(pf[i].fd, NULL, NULL);
        if (cfd < 0)
          continue;
        if (fork() == 0) {
          prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
          serve(cfd, claims[i]);
        }
        close(cfd);
      }
    }
  }
  close(ready[1]);
  if (read(ready[0], &c, 1) != 1) {
    int st;
    waitpid(pid, &st, 0);
    fail_msg("the attacker did not start (exit %d)",
             WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  }
  close(ready[0]);
  return pid;
}

/* ---- fixtures ---- */

static int group_setup(void **state) {
  const struct passwd *pw;

  (void)state;
  if (geteuid() != 0) {
    skip_reason = "not root: playing another user needs setresuid (CI runs "
                  "as root)";
    return 0;
  }
  pw = getpwnam("nobody");
  if (pw == NULL) {
    skip_reason = "there is no user `nobody` to play the attacker";
    return 0;
  }
  nobody_uid = pw->pw_uid;
  nobody_gid = pw->pw_gid;
  if (host_build_dir(build, sizeof build) != 0)
    return -1;
  snprintf(memtop, sizeof memtop, "%s/memtop", build);
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

static int setup(void **state) {
  (void)state;
  if (skip_reason != NULL)
    return 0;
  snprintf(dir, sizeof dir, "/tmp/test_hostile.XXXXXX");
  snprintf(area, sizeof area, "/tmp/test_hostile_area.XXXXXX");
  if (mkdtemp(dir) == NULL || mkdtemp(area) == NULL)
    return -1;
  /* The attacker's own corner: nobody may create what it likes here,
   * as it may in /tmp. */
  if (chown(area, nobody_uid, nobody_gid) != 0 || chmod(area, 0755) != 0)
    return -1;
  setenv("MEMSTATS_DIR", dir, 1);
  unsetenv("XDG_RUNTIME_DIR");
  setenv("MEMTOP_TIMEOUT_MS", "2000", 1);
  return 0;
}

static int teardown(void **state) {
  char cmd[256];
  (void)state;
  if (skip_reason != NULL)
    return 0;
  if (tmux_sock[0] != '\0') {
    /* A test cut short leaves its tmux server: it goes with the test. */
    snprintf(cmd, sizeof cmd, "tmux -S '%s' kill-server >/dev/null 2>&1",
             tmux_sock);
    if (system(cmd) != 0) {
      /* already gone */
    }
    tmux_sock[0] = '\0';
  }
  snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", dir, area);
  return system(cmd) == 0 ? 0 : -1;
}

#define SKIP_UNLESS_ROOT()                                                     \
  do {                                                                         \
    if (skip_reason != NULL) {                                                 \
      print_message("skipped: %s\n", skip_reason);                             \
      skip();                                                                  \
    }                                                                          \
  } while (0)

/* ---- the tests ---- */

/* nobody made root's socket directory first (mode 0777) and serves a
 * socket there as root's process: memtop refuses the directory, with the
 * reason and the fix, and shows no figure of the victim. */
static void test_squatted_directory(void **state) {
  char squat[128], sock[160], link[128];
  pid_t victim, bad;

  (void)state;
  SKIP_UNLESS_ROOT();
  victim = start_victim();
  snprintf(squat, sizeof squat, "%s/squat", area);
  snprintf(sock, sizeof sock, "%s/%d.sock", squat, (int)victim);
  const char *mk[] = {squat, NULL};
  sock_t s[] = {{sock, victim}};
  bad = start_attacker(mk, 1, s, 1);
  setenv("MEMSTATS_DIR", squat, 1);

  assert_int_equal(mt("--once", run_pidstr(victim), NULL), 1);
  if (strstr(res.err, "not trusting the socket directory") == NULL)
    fail_msg("no refusal; stdout: %.400s stderr: %.400s", res.out, res.err);
  assert_non_null(strstr(res.err, "owned by another user"));
  assert_non_null(strstr(res.err, "remove"));
  assert_false(shows_figures_of(victim));
  assert_no_terminal_codes("stderr", res.err, res.nerr);

  assert_int_equal(
      mt("--once", "-n", "3", "-d", "0.1", run_pidstr(victim), NULL), 1);
  assert_non_null(strstr(res.err, "not trusting the socket directory"));
  assert_false(shows_figures_of(victim));
  assert_no_terminal_codes("stderr", res.err, res.nerr);

  assert_int_equal(mt("--once", "--json", run_pidstr(victim), NULL), 1);
  assert_false(shows_figures_of(victim));

  assert_int_equal(mt("ps", NULL), 0);
  assert_false(shows_figures_of(victim));
  assert_no_terminal_codes("ps", res.out, res.nout);
  /* ... and says why its list lacks them. */
  assert_non_null(strstr(res.err, "not trusting the socket directory"));
  assert_non_null(strstr(res.err, "owned by another user"));

  /* A symbolic link as MEMSTATS_DIR (to that directory): the fix is to
   * remove the link, not a chmod, which would act on what it points to. */
  snprintf(link, sizeof link, "%s/link", dir);
  assert_int_equal(symlink(squat, link), 0);
  setenv("MEMSTATS_DIR", link, 1);
  assert_int_equal(mt("--once", run_pidstr(victim), NULL), 1);
  assert_non_null(strstr(res.err, "symbolic link"));
  assert_non_null(strstr(res.err, "remove the symbolic link"));
  assert_null(strstr(res.err, "chmod 700"));
  assert_false(shows_figures_of(victim));
  setenv("MEMSTATS_DIR", dir, 1);
  stop(bad);
  stop(victim);
}

/* A user's own MEMSTATS_DIR (0700, theirs), kept for root by sudo -E:
 * memtop as root reads that user's process there, as it reads the
 * user's default directories, and is not told to remove the directory;
 * a socket of root's victim planted in it is still refused. */
static void test_users_own_directory(void **state) {
  char own[128], sock[160];
  pid_t victim, user;

  (void)state;
  SKIP_UNLESS_ROOT();
  victim = start_victim();
  snprintf(own, sizeof own, "%s/own", area);
  snprintf(sock, sizeof sock, "%s/%d.sock", own, (int)victim);
  const char *mk[] = {own, NULL};
  sock_t s[] = {{own, 0}, {sock, victim}};
  user = start_attacker(mk, 0, s, 2);
  setenv("MEMSTATS_DIR", own, 1);

  assert_int_equal(mt("--once", run_pidstr(user), NULL), 0);
  if (!shows_figures_of(user))
    fail_msg("stdout: %.400s stderr: %.400s", res.out, res.err);
  assert_null(strstr(res.err, "remove"));

  assert_int_equal(mt("--once", run_pidstr(victim), NULL), 1);
  assert_non_null(strstr(res.err, "not trusting the socket directory"));
  assert_false(shows_figures_of(victim));
  setenv("MEMSTATS_DIR", dir, 1);
  stop(user);
  stop(victim);
}

/* root's own directory is safe, but a socket of nobody's was put in it
 * under the victim's PID (moved there: how it got there does not matter).
 * Whatever the directory, the socket's server is checked: memtop says who
 * answered instead, and discovery does not list the victim. */
static void test_planted_socket(void **state) {
  char own[128], sock[160], planted[160];
  pid_t victim, bad;
  char want[96];

  (void)state;
  SKIP_UNLESS_ROOT();
  victim = start_victim();
  snprintf(own, sizeof own, "%s/own", area);
  snprintf(sock, sizeof sock, "%s/x.sock", own);
  const char *mk[] = {own, NULL};
  sock_t s[] = {{sock, victim}};
  bad = start_attacker(mk, 0, s, 1);
  snprintf(planted, sizeof planted, "%s/%d.sock", dir, (int)victim);
  assert_int_equal(rename(sock, planted), 0);

  assert_int_equal(mt("--once", run_pidstr(victim), NULL), 1);
  snprintf(want, sizeof want, "served by PID %d (uid %u)", (int)bad,
           (unsigned)nobody_uid);
  if (strstr(res.err, want) == NULL)
    fail_msg("no refusal naming PID %d; stdout: %.400s stderr: %.400s",
             (int)bad, res.out, res.err);
  assert_false(shows_figures_of(victim));

  assert_int_equal(
      mt("--once", "-n", "3", "-d", "0.1", run_pidstr(victim), NULL), 1);
  assert_non_null(strstr(res.err, want));
  assert_false(shows_figures_of(victim));

  /* Watching all: the victim is not attachable. */
  mt("--once", "--json", NULL);
  assert_false(shows_figures_of(victim));
  assert_int_equal(mt("ps", NULL), 0);
  assert_false(shows_figures_of(victim));
  stop(bad);
  stop(victim);
}

/* nobody's own directory (/tmp/memtop-<uid>, where root's discovery
 * looks) holds sockets named after PID 1 and after root's process, served
 * by nobody's fake agent answering as them, and its own socket, whose
 * strings are hostile. Root's ps and --once list only nobody's own
 * process, and nothing from it reaches the terminal raw. */
static void test_foreign_directory_claims(void **state) {
  char home[64], s1[96], sv[96], sown[96];
  struct stat st;
  pid_t victim, bad;
  int made = 0;

  (void)state;
  SKIP_UNLESS_ROOT();
  snprintf(home, sizeof home, "/tmp/memtop-%u", (unsigned)nobody_uid);
  if (lstat(home, &st) == 0) {
    if (!S_ISDIR(st.st_mode) || st.st_uid != nobody_uid) {
      print_message("skipped: %s exists and is not nobody's directory\n", home);
      skip();
    }
  } else {
    made = 1;
  }
  victim = start_victim();
  snprintf(s1, sizeof s1, "%s/1.sock", home);
  snprintf(sv, sizeof sv, "%s/%d.sock", home, (int)victim);
  snprintf(sown, sizeof sown, "%s", home);
  const char *mk[] = {home, NULL};
  sock_t s[] = {{s1, 1}, {sv, victim}, {sown, 0}};
  bad = start_attacker(mk, 0, s, 3);

  /* Root's view of the machine: with MEMSTATS_DIR set, memtop would list
   * that directory alone. */
  unsetenv("MEMSTATS_DIR");
  assert_int_equal(mt("ps", NULL), 0);
  assert_no_terminal_codes("ps stdout", res.out, res.nout);
  assert_no_terminal_codes("ps stderr", res.err, res.nerr);
  assert_false(shows_figures_of(1));
  assert_false(shows_figures_of(victim));
  if (!shows_figures_of(bad))
    fail_msg("nobody's own process %d is not listed: %.600s", (int)bad,
             res.out);

  mt("--once", NULL);
  assert_no_terminal_codes("report", res.out, res.nout);
  assert_no_terminal_codes("stderr", res.err, res.nerr);
  assert_null(strstr(res.out, "\n1 "));
  assert_false(shows_figures_of(1));
  assert_false(shows_figures_of(victim));

  /* Named: PID 1 is refused with who answered instead. */
  assert_int_equal(mt("--once", "1", NULL), 1);
  assert_false(shows_figures_of(1));
  assert_no_terminal_codes("stderr", res.err, res.nerr);

  /* nobody's own process, named, -n 3: its reports, safe. */
  assert_int_equal(mt("--once", "-n", "3", "-d", "0.1", run_pidstr(bad), NULL),
                   0);
  assert_no_terminal_codes("-n 3", res.out, res.nout);
  assert_no_terminal_codes("-n 3 stderr", res.err, res.nerr);
  assert_non_null(strstr(res.out, "\\u202e"));
  assert_int_equal(mt("--once", "--json", run_pidstr(bad), NULL), 0);
  assert_no_terminal_codes("json", res.out, res.nout);

  stop(bad);
  stop(victim);
  unlink(s1);
  unlink(sv);
  char own[96];
  snprintf(own, sizeof own, "%s/%d.sock", home, (int)bad);
  unlink(own);
  if (made)
    rmdir(home);
}

/* nobody asks about root's process, whose socket directory (a shared
 * MEMSTATS_DIR of root's, mode 0700) it may not enter: it is told about
 * that directory, not about /tmp/memtop-0, which it never used. */
static void test_refused_user_told_right_directory(void **state) {
  pid_t victim;
  int po[2], st;
  char err[4096] = {0};
  ssize_t n;
  size_t have = 0;

  (void)state;
  SKIP_UNLESS_ROOT();
  victim = start_victim();
  assert_int_equal(pipe(po), 0);
  pid_t m = fork();
  assert_true(m >= 0);
  if (m == 0) {
    become_nobody();
    int null = open("/dev/null", O_RDWR);
    dup2(null, 0);
    dup2(null, 1);
    dup2(po[1], 2);
    execl(memtop, memtop, "--once", run_pidstr(victim), (char *)NULL);
    _exit(126);
  }
  close(po[1]);
  while (have < sizeof err - 1 &&
         (n = read(po[0], err + have, sizeof err - 1 - have)) > 0)
    have += (size_t)n;
  close(po[0]);
  assert_int_equal(waitpid(m, &st, 0), m);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 1);
  if (strstr(err, dir) == NULL || strstr(err, "/tmp/memtop-0") != NULL)
    fail_msg("want the directory %s named; got: %s", dir, err);
  assert_non_null(strstr(err, "permission"));
  stop(victim);
}

/* ---- the live view, in tmux ---- */

static const char *tmux_out(const char *what) {
  char cmd[512];
  size_t n = 0;
  snprintf(cmd, sizeof cmd, "tmux -S %s %s 2>/dev/null", tmux_sock, what);
  FILE *p = popen(cmd, "r");
  screen[0] = '\0';
  if (p == NULL)
    return screen;
  n = fread(screen, 1, sizeof screen - 1, p);
  screen[n] = '\0';
  pclose(p);
  return screen;
}

/* Starts memtop with `args` (as root, MEMSTATS_DIR=memstats_dir) in a
 * fresh 100x30 tmux session, on a server of its own: kill-server returns
 * before the last server has gone, and a new session on that server's
 * socket connects to it and dies with it ("server exited unexpectedly",
 * 26 of 120 runs with two loops of this test at once). */
static void tui_start(const char *memstats_dir, const char *args) {
  static unsigned servers;
  char script[160];
  FILE *f;

  snprintf(script, sizeof script, "%s/tui.sh", dir);
  snprintf(tmux_sock, sizeof tmux_sock, "%s/tmux-%u", dir, ++servers);
  f = fopen(script, "w");
  assert_non_null(f);
  fprintf(f,
          "export MEMSTATS_DIR='%s' LANG=C.UTF-8 LC_ALL=C.UTF-8 "
          "MEMTOP_TIMEOUT_MS=2000\n"
          "'%s' -d 0.2 %s\n"
          "echo \"MEMTOP-EXIT=$?\"\n"
          "exec sleep 600\n",
          memstats_dir, memtop, args);
  fclose(f);
  assert_int_equal(
      run_sh("tmux -S %s -f /dev/null new-session -d -s v -x 100 -y "
             "30 \"sh '%s'\"",
             tmux_sock, script),
      0);
}

static int tui_wait(const char *text) {
  for (int waited = 0; waited < 20000; waited += 100) {
    if (strstr(tmux_out("capture-pane -p -J -t v"), text) != NULL)
      return 1;
    usleep(100000);
  }
  print_error("the screen never showed \"%s\":\n%s\n", text, screen);
  return 0;
}

static void tui_stop(void) {
  run_sh("tmux -S %s kill-server >/dev/null 2>&1", tmux_sock);
}

/* The live view, on nobody's own process with hostile strings and on the
 * victim behind a squatted directory: the names reach the screen only in
 * safe form (the window title stays tmux's), the victim shows the refusal
 * and no figure, and memtop quits cleanly. */
static void test_live_view(void **state) {
  char home[64], squat[128], sock[160], sown[96], args[64];
  struct stat st;
  pid_t victim, bad, bad2;

  (void)state;
  SKIP_UNLESS_ROOT();
  if (run_sh("command -v tmux >/dev/null") != 0) {
    print_message("skipped: tmux is not installed (apt-get install tmux)\n");
    skip();
  }
  snprintf(home, sizeof home, "/tmp/memtop-%u", (unsigned)nobody_uid);
  if (lstat(home, &st) == 0 &&
      (!S_ISDIR(st.st_mode) || st.st_uid != nobody_uid)) {
    print_message("skipped: %s exists and is not nobody's directory\n", home);
    skip();
  }
  victim = start_victim();
  snprintf(sown, sizeof sown, "%s", home);
  const char *mk[] = {home, NULL};
  sock_t s[] = {{sown, 0}};
  bad = start_attacker(mk, 0, s, 1);

  /* nobody's process: its hostile name and providers. */
  snprintf(args, sizeof args, "%d", (int)bad);
  tui_start(dir, args);
  assert_true(tui_wait("Ready+Prepared"));
  assert_true(tui_wait("Sys by class"));
  tmux_out("display -p -t v '#{pane_title}'");
  if (strstr(screen, "pwn") != NULL)
    fail_msg("the target's name retitled the window: %s", screen);
  run_sh("tmux -S %s send-keys -t v q", tmux_sock);
  assert_true(tui_wait("MEMTOP-EXIT=0"));
  tui_stop();

  /* The victim behind a squatted directory: refused, no figures. */
  snprintf(squat, sizeof squat, "%s/squat", area);
  snprintf(sock, sizeof sock, "%s/%d.sock", squat, (int)victim);
  const char *mk2[] = {squat, NULL};
  sock_t s2[] = {{sock, victim}};
  bad2 = start_attacker(mk2, 1, s2, 1);
  snprintf(args, sizeof args, "%d", (int)victim);
  tui_start(squat, args);
  assert_true(tui_wait("not trusting"));
  assert_null(strstr(screen, "Ready+Prepared 0"));
  assert_null(strstr(screen, "64.0MiB"));
  tmux_out("display -p -t v '#{pane_title}'");
  assert_null(strstr(screen, "pwn"));
  run_sh("tmux -S %s send-keys -t v q", tmux_sock);
  assert_true(tui_wait("MEMTOP-EXIT="));
  /* The reason stays after the view is gone, without "retrying": memtop
   * has left. */

  if (strstr(screen, "not trusting") == NULL ||
      strstr(screen, "retrying") != NULL)
    fail_msg("after quitting, the screen shows:\n%s", screen);
  tui_stop();

  stop(bad);
  stop(bad2);
  stop(victim);
  char own[96];
  snprintf(own, sizeof own, "%s/%d.sock", home, (int)bad);
  unlink(own);
  rmdir(home); /* only if empty: someone else's sockets stay */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_squatted_directory, setup, teardown),
      cmocka_unit_test_setup_teardown(test_users_own_directory, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_planted_socket, setup, teardown),
      cmocka_unit_test_setup_teardown(test_foreign_directory_claims, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_refused_user_told_right_directory,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_live_view, setup, teardown),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
