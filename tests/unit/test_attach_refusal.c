/*
 * test_attach_refusal.c - memtop attach's refusals (src/attach,
 * mt_attach_refusal), decided on the facts alone: each names its cause and
 * its fix, and a process that may be attached is not refused. The cases a
 * test machine cannot stage (Yama's scopes 2 and 3, a setuid process, a
 * non-dumpable one, seccomp's strict mode) are here; test_attach runs the
 * real ones it can (a static program, another tracer, another user).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "attach/attach.h"
#include "memstats.h"

static char err[1024];

/* A process of user 1000, memtop run by the same user, no Yama. */
static mt_attach_facts_t plain(void) {
  mt_attach_facts_t f;
  memset(&f, 0, sizeof f);
  strcpy(f.name, "server");
  for (int i = 0; i < 4; i++) {
    f.uid[i] = 1000;
    f.gid[i] = 100;
  }
  f.proc_owner = 1000;
  f.me = 1000;
  f.state = 'S';
  return f;
}

static int refuse(const mt_attach_facts_t *f) {
  err[0] = '\0';
  return mt_attach_refusal(1234, f, err, sizeof err);
}

static void test_plain_is_attached(void **state) {
  (void)state;
  mt_attach_facts_t f = plain();
  assert_int_equal(refuse(&f), 0);
  f.yama_scope = 1; /* the kernel decides (a parent, PR_SET_PTRACER) */
  assert_int_equal(refuse(&f), 0);
  f.yama_scope = 2;
  f.cap_ptrace = 1;
  assert_int_equal(refuse(&f), 0);
  f.seccomp = 2; /* read once the thread is stopped */
  assert_int_equal(refuse(&f), 0);
}

static void test_yama(void **state) {
  (void)state;
  mt_attach_facts_t f = plain();
  f.yama_scope = 2;
  assert_int_equal(refuse(&f), MS_EACCES);
  assert_non_null(strstr(err, "ptrace_scope is 2"));
  assert_non_null(strstr(err, "as root"));
  assert_non_null(strstr(err, "kernel.yama.ptrace_scope=1"));
  f.yama_scope = 3;
  f.cap_ptrace = 1; /* root cannot either */
  assert_int_equal(refuse(&f), MS_EACCES);
  assert_non_null(strstr(err, "ptrace_scope is 3"));
  assert_non_null(strstr(err, "memtop run"));
}

static void test_other_user(void **state) {
  (void)state;
  mt_attach_facts_t f = plain();
  f.me = 1001;
  assert_int_equal(refuse(&f), MS_EACCES);
  assert_non_null(strstr(err, "another user's (uid 1000)"));
  assert_non_null(strstr(err, "as root"));
  f.cap_ptrace = 1; /* root */
  assert_int_equal(refuse(&f), 0);
}

static void test_privileged(void **state) {
  (void)state;
  mt_attach_facts_t f = plain();
  f.uid[1] = 0; /* setuid root */
  f.cap_ptrace = 1;
  assert_int_equal(refuse(&f), MS_EACCES);
  assert_non_null(strstr(err, "setuid"));
  f = plain();
  f.gid[2] = 5; /* setgid */
  assert_int_equal(refuse(&f), MS_EACCES);
  f = plain();
  f.at_secure = 1; /* file capabilities */
  assert_int_equal(refuse(&f), MS_EACCES);
  assert_non_null(strstr(err, "-lmemstats"));
}

static void test_not_dumpable(void **state) {
  (void)state;
  mt_attach_facts_t f = plain();
  f.proc_owner = 0;
  f.cap_ptrace = 1;
  assert_int_equal(refuse(&f), MS_EACCES);
  assert_non_null(strstr(err, "non-dumpable"));
  assert_non_null(strstr(err, "memtop run"));
  /* One that runs the preload already (a server's worker that switched
   * user) is woken by root, no code loaded; not by its own user. */
  f.waking = 1;
  assert_int_equal(refuse(&f), 0);
  f.cap_ptrace = 0;
  assert_int_equal(refuse(&f), MS_EACCES);
}

/* A memory map the kernel will not show even to root (a process in a
 * user namespace memtop is not in: PID 1 of the machine's sandbox here)
 * names the cause and the fix, not a bare "permission denied". */
static void test_maps_refused(void **state) {
  (void)state;
  mt_attach_facts_t f = plain();
  f.cap_ptrace = 1;
  err[0] = '\0';
  assert_int_equal(mt_attach_maps_refusal(1, &f, MS_EACCES, err, sizeof err),
                   MS_EACCES);
  assert_non_null(strstr(err, "process 1 (server)"));
  assert_non_null(strstr(err, "though memtop has CAP_SYS_PTRACE"));
  assert_non_null(strstr(err, "user namespace"));
  assert_non_null(strstr(err, "inside its container"));
  f.cap_ptrace = 0;
  mt_attach_maps_refusal(1, &f, MS_EACCES, err, sizeof err);
  assert_null(strstr(err, "CAP_SYS_PTRACE"));
  /* Another failure is said as it is. */
  assert_int_equal(mt_attach_maps_refusal(1, &f, MS_ENOENT, err, sizeof err),
                   MS_ENOENT);
  assert_non_null(strstr(err, "cannot read /proc/1/maps"));
}

/* A vfork() child shares its parent's memory until its exec: a wake's
 * agent (or a load) there would be the parent's. */
static void test_vfork_child(void **state) {
  (void)state;
  mt_attach_facts_t f = plain();
  f.shares_vm = 1;
  f.waking = 1;
  assert_int_equal(refuse(&f), MS_EAGAIN);
  assert_non_null(strstr(err, "vfork() child"));
  assert_non_null(strstr(err, "Try again"));
}

static void test_traced(void **state) {
  (void)state;
  mt_attach_facts_t f = plain();
  f.tracer = 77;
  strcpy(f.tracer_name, "gdb");
  assert_int_equal(refuse(&f), MS_EEXIST);
  assert_non_null(strstr(err, "traced by process 77 (gdb"));
  assert_non_null(strstr(err, "Detach that one"));
}

static void test_stopped(void **state) {
  (void)state;
  mt_attach_facts_t f = plain();
  f.state = 'T';
  assert_int_equal(refuse(&f), MS_EAGAIN);
  assert_non_null(strstr(err, "is stopped"));
  assert_non_null(strstr(err, "kill -CONT 1234"));
}

/* A call that did not return because the process was stopped after the
 * refusals were decided (memtop attach racing a SIGSTOP) says the stop, as
 * the refusal does, not only that the call did not return. */
static void test_stopped_during_call(void **state) {
  (void)state;
  mt_attach_facts_t f = plain();
  f.state = 'T';
  strcpy(err, "ms__attach_start in process 1234 failed: the call did not "
              "return in 10000 ms");
  assert_int_equal(
      mt_attach_call_failure(1234, MS_ETIMEDOUT, &f, err, sizeof err),
      MS_EAGAIN);
  assert_non_null(strstr(err, "process 1234 (server) is stopped (SIGSTOP"));
  assert_non_null(strstr(err, "kill -CONT 1234"));
  assert_non_null(strstr(err, "during memtop's call"));
  assert_non_null(strstr(err, "`memtop 1234` says"));
  /* Not stopped, gone, or another failure: the call's own words. */
  f.state = 'S';
  strcpy(err, "did not return");
  assert_int_equal(
      mt_attach_call_failure(1234, MS_ETIMEDOUT, &f, err, sizeof err),
      MS_ETIMEDOUT);
  assert_string_equal(err, "did not return");
  assert_int_equal(
      mt_attach_call_failure(1234, MS_ETIMEDOUT, NULL, err, sizeof err),
      MS_ETIMEDOUT);
  f.state = 'T';
  assert_int_equal(mt_attach_call_failure(1234, MS_EPROTO, &f, err, sizeof err),
                   MS_EPROTO);
  assert_string_equal(err, "did not return");
}

static void test_seccomp_strict(void **state) {
  (void)state;
  mt_attach_facts_t f = plain();
  f.seccomp = 1;
  assert_int_equal(refuse(&f), MS_EACCES);
  assert_non_null(strstr(err, "strict mode"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_plain_is_attached),
      cmocka_unit_test(test_yama),
      cmocka_unit_test(test_other_user),
      cmocka_unit_test(test_privileged),
      cmocka_unit_test(test_vfork_child),
      cmocka_unit_test(test_not_dumpable),
      cmocka_unit_test(test_maps_refused),
      cmocka_unit_test(test_traced),
      cmocka_unit_test(test_stopped),
      cmocka_unit_test(test_stopped_during_call),
      cmocka_unit_test(test_seccomp_strict),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
