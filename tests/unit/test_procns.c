/*
 * test_procns.c - who a process is, from its /proc files (client/procns.c):
 * the container, engine, pod and systemd service a /proc/PID/cgroup text
 * names, as each engine and kubelet write them (cgroup v2 and v1, the
 * systemd and the cgroupfs drivers, rootless podman), and nothing from a
 * cgroup a process named itself to look like one (ids that are not 64
 * lowercase hex digits, a pod that is not a UUID, a unit with characters
 * systemd does not allow). And this process's own identity.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "client/client.h"

#define ID "3f1c0e5d8a7b6c4d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d"

static void expect(const char *cgroup, const char *container,
                   const char *engine, const char *pod, const char *unit) {
  msc_ident_t id;
  memset(&id, 0x55, sizeof id); /* all of them are written */
  msc_cgroup_ident(cgroup, &id);
  if (strcmp(id.container, container) != 0 || strcmp(id.engine, engine) != 0 ||
      strcmp(id.pod, pod) != 0 || strcmp(id.unit, unit) != 0)
    fail_msg("%s\n  gave container '%s' engine '%s' pod '%s' unit '%s'", cgroup,
             id.container, id.engine, id.pod, id.unit);
}

static void test_engines(void **state) {
  (void)state;
  expect("0::/system.slice/docker-" ID ".scope\n", ID, "docker", "", "");
  expect("12:memory:/docker/" ID "\n1:name=systemd:/docker/" ID "\n", ID,
         "docker", "", "");
  expect("0::/machine.slice/libpod-" ID ".scope/container\n", ID, "podman", "",
         "");
  /* Rootless podman, under the user's manager; conmon is no container. */
  expect("0::/user.slice/user-1000.slice/user@1000.service/user.slice/"
         "libpod-" ID ".scope\n",
         ID, "podman", "", "user@1000.service");
  expect("0::/machine.slice/libpod-conmon-" ID ".scope\n", "", "", "", "");
  expect("0::/system.slice/crio-" ID ".scope\n", ID, "cri-o", "", "");
  expect("0::/system.slice/redis-server.service\n", "", "", "",
         "redis-server.service");
  expect("0::/user.slice/user-1000.slice/session-3.scope\n", "", "", "", "");
  expect("", "", "", "", "");
}

static void test_kubernetes(void **state) {
  (void)state;
  /* The systemd driver: the pod's UID with '_' for '-'. */
  expect("0::/kubepods.slice/kubepods-burstable.slice/"
         "kubepods-burstable-pod5f2c0d0e_1b2a_4c3d_9e8f_0a1b2c3d4e5f.slice/"
         "cri-containerd-" ID ".scope\n",
         ID, "containerd", "5f2c0d0e-1b2a-4c3d-9e8f-0a1b2c3d4e5f", "");
  /* The cgroupfs driver, cgroup v1. */
  expect("4:memory:/kubepods/besteffort/"
         "pod5f2c0d0e-1b2a-4c3d-9e8f-0a1b2c3d4e5f/" ID "\n",
         ID, "", "5f2c0d0e-1b2a-4c3d-9e8f-0a1b2c3d4e5f", "");
  /* A guaranteed pod sits right under kubepods. */
  expect("0::/kubepods.slice/"
         "kubepods-pod5f2c0d0e_1b2a_4c3d_9e8f_0a1b2c3d4e5f.slice/"
         "docker-" ID ".scope\n",
         ID, "docker", "5f2c0d0e-1b2a-4c3d-9e8f-0a1b2c3d4e5f", "");
}

static void test_lookalikes(void **state) {
  (void)state;
  /* Not 64 digits, not lowercase hex: no container. */
  expect("0::/system.slice/docker-" ID "0.scope\n", "", "", "", "");
  expect("0::/system.slice/docker-3F1C0E5D8A7B6C4D2E1F0A9B8C7D6E5F4A3B2C1D0E9F"
         "8A7B6C5D4E3F2A1B0C9D.scope\n",
         "", "", "", "");
  expect("0::/docker/not-an-id\n", "", "", "", "");
  expect("0::/kubepods/podnot-a-uuid/" ID "\n", ID, "", "", "");
  /* A unit name with what a terminal acts on, or a quote. */
  expect("0::/system.slice/x\x1b[2J.service\n", "", "", "", "");
  expect("0::/system.slice/a\"b.service\n", "", "", "", "");
  /* No path at all, or a line cut short. */
  expect("garbage\n0:\n", "", "", "", "");
}

static void test_own_identity(void **state) {
  (void)state;
  msc_ident_t id;
  assert_int_equal(msc_proc_ident((int)getpid(), &id), 0);
  assert_true(id.have_uid);
  assert_int_equal(id.uid, getuid());
  assert_int_equal(id.nspid, (int)getpid());
  assert_int_equal(id.foreign, 0);
  assert_int_equal(id.ppid, (int)getppid());
  assert_int_equal(msc_proc_ppid((int)getpid()), (int)getppid());
  assert_int_equal(msc_proc_ident(0, &id), MS_EINVAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_engines),
      cmocka_unit_test(test_kubernetes),
      cmocka_unit_test(test_lookalikes),
      cmocka_unit_test(test_own_identity),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
