/*
 * test_profile_e2e.c - `memtop profile` and `--once --sites` on a real
 * target: tests/progs/pl_prof under the preload at
 * MEMSTATS_PROFILE_RATE=1 (every allocation recorded), f_big holding
 * three times f_small's bytes (48 and 16 blocks of 1000 bytes) and
 * f_freed's 16 blocks all freed. The real memtop binary writes the
 * profile; the real `go tool pprof -top` names the functions with the
 * exact in-use bytes, and shows f_freed in alloc_space only; memtop's own
 * JSON (--once --json --sites) and text report carry the same figures.
 */
#include <errno.h>
#include <jansson.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/strbuf.h"
#include "support/host.h"

static char g_build[1024], g_preload[1200], g_dir[64], g_prog[1200];

typedef struct proc_s {
  pid_t pid;
  int in_w;
  FILE *out;
  int ready;
} proc_t;

/* Starts pl_prof sites under the preload at rate 1, and waits for it to
 * say it is ready. */
static void start(proc_t *p) {
  int in[2], out[2];
  char line[256];

  memset(p, 0, sizeof *p);
  assert_int_equal(pipe(in), 0);
  assert_int_equal(pipe(out), 0);
  p->pid = fork();
  assert_true(p->pid >= 0);
  if (p->pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    close(in[1]);
    close(out[0]);
    setenv("LD_PRELOAD", g_preload, 1);
    setenv("MEMSTATS_PROFILE_RATE", "1", 1);
    unsetenv("MEMSTATS_AGENT");
    execl(g_prog, g_prog, "sites", (char *)NULL);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  p->in_w = in[1];
  p->out = fdopen(out[0], "r");
  assert_non_null(p->out);
  while (fgets(line, sizeof line, p->out) != NULL)
    if (sscanf(line, "ready %d", &p->ready) == 1)
      break;
  assert_int_equal(p->ready, p->pid);
}

/* Debian's /usr/bin/python3 (built without frame pointers, its static
 * functions without symbols unless python3-dbg is installed) under the
 * preload at rate 1, running a script that builds lists and waits. */
static const char k_script[] =
    "import sys\n"
    "keep = []\n"
    "for i in range(3000):\n"
    "    l = []\n"
    "    for j in range(50):\n"
    "        l.append(j)\n"
    "    keep.append(l)\n"
    "sys.stdout.write('ready %d\\n' % __import__('os').getpid())\n"
    "sys.stdout.flush()\n"
    "sys.stdin.read()\n";

static void start_python(proc_t *p) {
  int in[2], out[2];
  char line[256];

  memset(p, 0, sizeof *p);
  assert_int_equal(pipe(in), 0);
  assert_int_equal(pipe(out), 0);
  p->pid = fork();
  assert_true(p->pid >= 0);
  if (p->pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    close(in[1]);
    close(out[0]);
    setenv("LD_PRELOAD", g_preload, 1);
    setenv("MEMSTATS_PROFILE_RATE", "1", 1);
    unsetenv("MEMSTATS_AGENT");
    execl("/usr/bin/python3", "python3", "-c", k_script, (char *)NULL);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  p->in_w = in[1];
  p->out = fdopen(out[0], "r");
  assert_non_null(p->out);
  while (fgets(line, sizeof line, p->out) != NULL)
    if (sscanf(line, "ready %d", &p->ready) == 1)
      break;
  assert_int_equal(p->ready, p->pid);
}

static void stop(proc_t *p) {
  int st;

  close(p->in_w);
  fclose(p->out);
  while (waitpid(p->pid, &st, 0) < 0 && errno == EINTR) {
  }
}

/* Runs a shell command and returns its standard output (malloc'd); its
 * exit status in *status. */
static char *run(const char *cmd, int *status) {
  ms__strbuf_t b = MS_STRBUF_INIT;
  char buf[4096];
  size_t n;
  FILE *f = popen(cmd, "r");

  assert_non_null(f);
  while ((n = fread(buf, 1, sizeof buf, f)) > 0)
    ms__strbuf_append(&b, buf, n);
  *status = pclose(f);
  return b.data != NULL ? b.data : strdup("");
}

static char *memtop(const char *args, int pid) {
  char cmd[2048];
  char *out;
  int st;

  snprintf(cmd, sizeof cmd, "MEMSTATS_DIR=%s %s/memtop %s %d", g_dir, g_build,
           args, pid);
  out = run(cmd, &st);
  if (st != 0)
    fail_msg("%s: exit status %d", cmd, st);
  return out;
}

/* The line of `go tool pprof -top` for function fn, or NULL. */
static const char *top_line(const char *top, const char *fn) {
  static char line[256];
  const char *p = top;
  size_t n;

  while (p != NULL && *p != '\0') {
    n = strcspn(p, "\n");
    if (n < sizeof line) {
      memcpy(line, p, n);
      line[n] = '\0';
      if (n > strlen(fn) && strcmp(line + n - strlen(fn), fn) == 0 &&
          line[n - strlen(fn) - 1] == ' ')
        return line;
    }
    p += n + (p[n] == '\n');
  }
  return NULL;
}

static void test_pprof_top(void **state) {
  proc_t p;
  char cmd[2048], file[128], *out, *top, *alloc;
  const char *l;
  int st;

  (void)state;
  if (!host_have_program("go")) {
    print_message("skipped: go (golang-go) is not installed\n");
    skip();
  }
  start(&p);
  snprintf(file, sizeof file, "%s/pl.pb.gz", g_dir);
  snprintf(cmd, sizeof cmd, "profile -o %s", file);
  out = memtop(cmd, p.pid);
  free(out);
  stop(&p);
  snprintf(cmd, sizeof cmd,
           "HOME=%s GOCACHE=%s/gocache go tool pprof -top -symbolize=none "
           "-nodefraction=0 %s",
           g_dir, g_dir, file);
  top = run(cmd, &st);
  assert_int_equal(st, 0);
  snprintf(cmd, sizeof cmd,
           "HOME=%s GOCACHE=%s/gocache go tool pprof -top -symbolize=none "
           "-nodefraction=0 -sample_index=alloc_space %s",
           g_dir, g_dir, file);
  alloc = run(cmd, &st);
  assert_int_equal(st, 0);
  /* 48000 and 16000 bytes, exactly (pprof's kB are KiB). */
  l = top_line(top, "f_big");
  assert_non_null(l);
  assert_true(strncmp(l, "   46.88kB ", 11) == 0);
  l = top_line(top, "f_small");
  assert_non_null(l);
  assert_true(strncmp(l, "   15.62kB ", 11) == 0);
  l = top_line(top, "f_freed");
  assert_true(l == NULL || strncmp(l, "         0 ", 11) == 0);
  l = top_line(alloc, "f_freed");
  assert_non_null(l);
  assert_true(strncmp(l, "   15.62kB ", 11) == 0);
  free(top);
  free(alloc);
}

/* The figures of one site in memtop's JSON line. */
static json_t *json_site(json_t *sites, const char *fn) {
  size_t i;
  json_t *s;

  json_array_foreach(sites, i, s) {
    const char *f = json_string_value(json_object_get(s, "function"));
    if (f != NULL && strcmp(f, fn) == 0)
      return s;
  }
  return NULL;
}

static void test_once_sites(void **state) {
  proc_t p;
  char *json, *text;
  json_t *root, *prof, *sites, *s;
  json_error_t err;

  (void)state;
  start(&p);
  json = memtop("--once --json --sites 3", p.pid);
  text = memtop("--once --sites 2", p.pid);
  stop(&p);
  root = json_loads(json, 0, &err);
  assert_non_null(root);
  prof = json_object_get(root, "profile");
  assert_non_null(prof);
  assert_int_equal(json_integer_value(json_object_get(prof, "rate")), 1);
  assert_true(json_is_false(json_object_get(prof, "estimated")));
  sites = json_object_get(prof, "sites");
  assert_int_equal(json_array_size(sites), 3);
  /* The top two by in-use space, exact at rate 1. */
  s = json_array_get(sites, 0);
  assert_string_equal(json_string_value(json_object_get(s, "function")),
                      "f_big");
  assert_int_equal(json_integer_value(json_object_get(s, "inuse_space")),
                   48000);
  assert_int_equal(json_integer_value(json_object_get(s, "inuse_objects")), 48);
  assert_non_null(
      strstr(json_string_value(json_object_get(s, "file")), "pl_prof.c"));
  assert_true(json_integer_value(json_object_get(s, "line")) > 0);
  s = json_array_get(sites, 1);
  assert_string_equal(json_string_value(json_object_get(s, "function")),
                      "f_small");
  assert_int_equal(json_integer_value(json_object_get(s, "inuse_space")),
                   16000);
  /* f_freed holds nothing: not among the top in use. */
  assert_null(json_site(sites, "f_freed"));
  json_decref(root);
  free(json);

  assert_non_null(strstr(text, "Top allocation sites:\n"));
  assert_non_null(strstr(text, "Every allocation recorded: figures are "
                               "exact\n"));
  assert_non_null(strstr(text, "         48  f_big "));
  assert_non_null(strstr(text, "         16  f_small "));
  free(text);
}

/* Through a Debian binary without frame pointers or symbols for its
 * static functions: every sampled stack reaches Py_BytesMain (an exported
 * name: the whole heap is under it), and the interpreter's loop is named
 * from the dynamic symbol table. (Static functions show as
 * python3.11+0xOFFSET unless python3's debug symbols are installed.) */
static void test_python(void **state) {
  proc_t p;
  char *text;

  (void)state;
  if (access("/usr/bin/python3", X_OK) != 0) {
    print_message("skipped: /usr/bin/python3 is not installed\n");
    skip();
  }
  start_python(&p);
  text = memtop("profile --format text --sites 1000", p.pid);
  stop(&p);
  assert_non_null(strstr(text, "Every allocation recorded"));
  /* cum 100.0% at Py_BytesMain. */
  assert_non_null(strstr(text, " 100.0%          0  Py_BytesMain"));
  assert_non_null(strstr(text, " PyEval_EvalCode"));
  free(text);
}

static int setup(void **state) {
  (void)state;
  if (host_build_dir(g_build, sizeof g_build) != 0 ||
      host_preload_path(g_build, g_preload, sizeof g_preload) != 0)
    return -1;
  snprintf(g_prog, sizeof g_prog, "%s/progs/pl_prof", g_build);
  snprintf(g_dir, sizeof g_dir, "/tmp/ms-prof-e2e-XXXXXX");
  if (mkdtemp(g_dir) == NULL)
    return -1;
  setenv("MEMSTATS_DIR", g_dir, 1);
  signal(SIGPIPE, SIG_IGN);
  return 0;
}

static int teardown(void **state) {
  char cmd[128];

  (void)state;
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  return system(cmd) == 0 ? 0 : -1;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pprof_top),
      cmocka_unit_test(test_once_sites),
      cmocka_unit_test(test_python),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
