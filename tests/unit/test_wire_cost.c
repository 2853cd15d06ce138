/*
 * test_wire_cost.c - what decoding one snapshot costs memtop, counted in
 * instructions by callgrind (tests/support/callgrind.h): the list view
 * decodes one per target every second. A snapshot carries some 800
 * numbers (the pause rings, the size classes); read byte by byte (gcc
 * does not merge le.h's loop into one load) one cost 65,000
 * instructions, read with one load each on a little-endian host 22,000.
 * The test asks under 40,000: one number no longer costs a loop.
 */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memstats.h"
#include "support/callgrind.h"
#include "wire/wire.h"

static ms_snapshot_t snap, out;
static uint8_t buf[1 << 20];

/* `test_wire_cost decode N`: one full snapshot encoded, decoded N
 * times. */
static int decode(int n) {
  ms__wire_writer_t w;
  ms__frame_t f;
  const char *why = NULL;

  snap.struct_size = sizeof snap;
  snap.pid = 1234;
  snap.start_time = 99;
  strcpy(snap.comm, "cost");
  for (int i = 0; i < MS_F__COUNT; i++)
    snap.quality[i] = MS_Q_EXACT;
  for (int i = 0; i < MS_PAUSE_RING; i++) {
    snap.pause_ns[i] = 1000 + (uint64_t)i;
    snap.pause_end[i] = 5000 + (uint64_t)i;
  }
  snap.nsize_classes = 40;
  for (int i = 0; i < 40; i++) {
    snap.by_size[i].size = 16 * (uint64_t)i;
    snap.by_size[i].mallocs = 7 * (uint64_t)i;
    snap.by_size[i].frees = (uint64_t)i;
  }
  ms__wire_writer_init(&w, buf, sizeof buf);
  if (ms__wire_encode_snapshot(&w, &snap, NULL) != 0 ||
      ms__wire_frame(buf, w.len, sizeof buf, &f, &why) != 0)
    return 1;
  for (int i = 0; i < n; i++)
    if (ms__wire_decode_snapshot(buf + MS__WIRE_HEADER, f.length, &out, &why) !=
        0)
      return 2;
  return out.pause_ns[MS_PAUSE_RING - 1] == snap.pause_ns[MS_PAUSE_RING - 1]
             ? 0
             : 3;
}

static void test_decode_instructions(void **state) {
  char self[PATH_MAX], why[512];
  unsigned long long total[2];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);

  (void)state;
  assert_true(n > 0);
  self[n] = '\0';
  if (system("valgrind --version >/dev/null 2>&1") != 0) {
    print_message("valgrind is not installed: skipped\n");
    skip();
  }
  for (int i = 0; i < 2; i++) {
    const char *argv[] = {self, "decode", i == 0 ? "100" : "1100", NULL};
    if (cg_count(argv, NULL, &total[i], why, sizeof why) != 0) {
      print_message("%s: skipped\n", why);
      skip();
    }
  }
  unsigned long long each = (total[1] - total[0]) / 1000;
  print_message("one snapshot decoded: %llu instructions\n", each);
  assert_true(each < 40000);
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "decode") == 0)
    return decode(atoi(argv[2]));
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_decode_instructions),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
