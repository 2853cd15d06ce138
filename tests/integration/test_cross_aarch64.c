/*
 * test_cross_aarch64.c - memtop attach's aarch64 side, with no aarch64
 * machine: what `make cross-aarch64` built (make check's test-build
 * builds it where aarch64-linux-gnu-gcc is; see the Makefile):
 *   - every file of src/attach, compiled for aarch64 against its own
 *     headers with every warning an error (arch_aarch64.c checks its
 *     register layout against the kernel's there): each object is an
 *     aarch64 ELF file;
 *   - the preload built for aarch64, and tests/cross/at_got.c run under
 *     qemu-aarch64: memtop attach --track's calls made by the program
 *     itself (qemu-user has no ptrace), the GOT entries rewritten
 *     (R_AARCH64_JUMP_SLOT and GLOB_DAT), malloc/free counted through
 *     them, dlopen through the aarch64 stub both ways, all put back;
 *   - tests/cross/at_call.c under qemu-aarch64: the call inject.c makes,
 *     with arch_aarch64.c's frame, in a thread stopped in read(2) (a
 *     signal handler stands for the ptrace stop): its result, its end
 *     at address 0, the registers put back and the read issued again.
 *   - memtop attach, attach --track and detach on a real aarch64 kernel:
 *     Debian's arm64 kernel booted under qemu-system-aarch64 (-cpu max,
 *     software emulation) with tests/cross/vm_attach.c's cmocka tests in
 *     its initramfs (tests/cross/vm-aarch64.sh; the kernel, busybox and
 *     cmocka downloaded once into $BUILD/vm-aarch64): inject.c's ptrace
 *     and regsets there, SVE's registers held by a program it stops.
 * Each case skips, saying why, without the compiler (or the emulator, or
 * Debian's mirrors for the VM's first run).
 */
#include <elf.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/run.h"

#ifndef EM_AARCH64
#define EM_AARCH64 183
#endif

static char out[1 << 16];
static char dir[2048];
static char tmp[] = "/tmp/test_cross_aarch64.XXXXXX";
static const char *sysroot = "/usr/aarch64-linux-gnu";

static int setup(void **state) {
  (void)state;
  /* Run from the source tree (make check does). */
  if (access("Makefile", R_OK) != 0 || access("src/attach", R_OK) != 0)
    return -1;
  const char *b = getenv("BUILD");
  char cwd[1024];
  if (!getcwd(cwd, sizeof cwd))
    return -1;
  snprintf(dir, sizeof dir, "%s/%s/cross-aarch64", cwd, b && *b ? b : "build");
  return mkdtemp(tmp) != NULL ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  run_sh("rm -rf '%s'", tmp);
  return 0;
}

static int have(const char *cmd) {
  return run_sh("command -v %s >/dev/null 2>&1", cmd) == 0;
}

static void need_compiler(void) {
  if (!have("aarch64-linux-gnu-gcc")) {
    print_message("skipped: no aarch64-linux-gnu-gcc, so nothing was built "
                  "for aarch64 (Debian: apt-get install "
                  "gcc-aarch64-linux-gnu libc6-dev-arm64-cross)\n");
    skip();
  }
}

/* The ELF machine of file path, or -1. */
static int machine_of(const char *path) {
  Elf64_Ehdr eh;
  FILE *f = fopen(path, "rb");
  if (!f)
    return -1;
  size_t n = fread(&eh, 1, sizeof eh, f);
  fclose(f);
  if (n != sizeof eh || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
    return -1;
  return eh.e_machine;
}

static void test_attach_built(void **state) {
  (void)state;
  need_compiler();
  char list[1 << 14];
  assert_int_equal(
      run_output("ls src/attach/*.c src/preload/got.c", list, sizeof list), 0);
  int n = 0;
  for (char *save = NULL, *l = strtok_r(list, "\n", &save); l;
       l = strtok_r(NULL, "\n", &save)) {
    char obj[4096];
    snprintf(obj, sizeof obj, "%s/obj/%.*s.o", dir, (int)(strlen(l) - 2), l);
    int m = machine_of(obj);
    if (m != EM_AARCH64)
      fail_msg("%s: %s (make cross-aarch64 builds it)", obj,
               m < 0 ? "missing" : "not an aarch64 object");
    n++;
  }
  assert_true(n >= 6); /* attach arch_aarch64 arch_x86_64 inject rsym got */
  char so[4096];
  snprintf(so, sizeof so, "%s/libmemstats-preload.so", dir);
  assert_int_equal(machine_of(so), EM_AARCH64);
}

static void need_qemu(void) {
  need_compiler();
  if (!have("qemu-aarch64")) {
    print_message("skipped: no qemu-aarch64 to run the aarch64 programs "
                  "(Debian: apt-get install qemu-user)\n");
    skip();
  }
  if (access(sysroot, R_OK) != 0) {
    print_message("skipped: no aarch64 C library in %s (Debian: "
                  "libc6-dev-arm64-cross)\n",
                  sysroot);
    skip();
  }
}

static void test_got_under_qemu(void **state) {
  (void)state;
  need_qemu();
  char cmd[6144];
  snprintf(cmd, sizeof cmd,
           "MEMSTATS_DIR='%s' timeout 120 qemu-aarch64 -L '%s' '%s/at_got' "
           "'%s/libmemstats-preload.so'",
           tmp, sysroot, dir, dir);
  int rc = run_output(cmd, out, sizeof out);
  if (rc != 0 || strstr(out, "\nok\n") == NULL)
    fail_msg("%s: exit %d\n%s", cmd, rc, out);
  assert_non_null(strstr(out, "mallocs +"));
}

/* The call inject.c makes, with arch_aarch64.c's frame, from a signal
 * handler in a thread interrupted in read(2) (see tests/cross/at_call.c):
 * the result comes back, the read is issued again and gets its bytes. */
static void test_call_under_qemu(void **state) {
  (void)state;
  need_qemu();
  char cmd[6144];
  snprintf(cmd, sizeof cmd, "timeout 60 qemu-aarch64 -L '%s' '%s/at_call'",
           sysroot, dir);
  int rc = run_output(cmd, out, sizeof out);
  if (rc != 0 || strstr(out, "\nok\n") == NULL)
    fail_msg("%s: exit %d\n%s", cmd, rc, out);
  assert_non_null(strstr(out, "-> 11022"));
}

/* tests/cross/vm-aarch64.sh's steps: fetch (once), the build, the run;
 * its exit 77 is a skip, with its reason. */
static void test_attach_in_vm(void **state) {
  (void)state;
  need_compiler();
  if (!have("qemu-system-aarch64") || !have("cpio")) {
    print_message("skipped: no qemu-system-aarch64 or cpio to boot an "
                  "aarch64 kernel (Debian: apt-get install qemu-system-arm "
                  "cpio)\n");
    skip();
  }
  const char *b = getenv("BUILD");
  b = b && *b ? b : "build";
  static char big[1 << 18];
  char cmd[4096];
  snprintf(cmd, sizeof cmd,
           "sh tests/cross/vm-aarch64.sh fetch '%s' 2>&1 && "
           "make --no-print-directory -s BUILD='%s' vm-aarch64-files 2>&1 && "
           "VM_TIMEOUT=600 sh tests/cross/vm-aarch64.sh run '%s' 2>&1",
           b, b, b);
  int rc = run_output(cmd, big, sizeof big);
  if (rc == 77) {
    const char *why = strstr(big, "vm-aarch64: skipped: ");
    print_message("skipped: %s\n", why ? why + 21 : big);
    skip();
  }
  if (rc != 0 || !strstr(big, "vm-aarch64: passed"))
    fail_msg("%s: exit %d\n%s", cmd, rc, big);
  /* The figures measured in the VM (software emulation). */
  for (const char *p = big; (p = strstr(p, "stop ms")) != NULL; p++)
    print_message("in the VM: %.*s\n", (int)strcspn(p, "\n"), p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_attach_built),
      cmocka_unit_test(test_got_under_qemu),
      cmocka_unit_test(test_call_under_qemu),
      cmocka_unit_test(test_attach_in_vm),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
