/*
 * at_memtop.c - memtop attach and memtop detach for the aarch64 VM
 * (tests/cross/vm-aarch64.sh): what src/memtop/main.c's attach_main does,
 * mt_attach_main with the preload's absolute path, without the rest of
 * memtop (libuv, ncurses, libdw, GnuTLS ... are not cross-installed).
 * Installed in the VM as $BUILD/memtop, so tests/cross/vm_attach.c runs
 * it as test_attach runs memtop.
 *
 * Usage: memtop attach [--track] PID | memtop detach PID; the library is
 * $MEMTOP_PRELOAD.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attach/attach.h"

int main(int argc, char **argv) {
  int track = argc == 4 && strcmp(argv[2], "--track") == 0;
  const char *lib = getenv("MEMTOP_PRELOAD");
  char path[PATH_MAX];
  if ((argc != 3 && !track) ||
      (strcmp(argv[1], "attach") != 0 && strcmp(argv[1], "detach") != 0) ||
      (track && strcmp(argv[1], "attach") != 0) || !lib) {
    fprintf(stderr, "usage: MEMTOP_PRELOAD=LIB memtop attach [--track] PID | "
                    "detach PID\n");
    return 2;
  }
  if (realpath(lib, path) == NULL) {
    perror(lib);
    return 1;
  }
  mt_attach_req_t req = {.pid = atoi(argv[argc - 1]),
                         .detach = argv[1][0] == 'd',
                         .flags = track ? MT_ATTACH_TRACK : 0,
                         .lib = path};
  return mt_attach_main(&req, stdout, stderr) || fflush(stdout) != 0;
}
