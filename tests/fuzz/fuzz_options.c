/*
 * fuzz_options.c - memtop's option parsing and the library's environment
 * parsing on hostile bytes. The input is split at NUL bytes into an argv
 * for mt_cli_parse() (as a shell would hand it over); each word also goes
 * through the strict number parsers, and through ms__parse_uint() as the
 * value of a MEMSTATS_* variable would. Parsing may refuse anything, but
 * never crash, over-read, or accept a result outside the range it was
 * given.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/procfs.h"
#include "memtop/cli.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_ARGS 32

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 4096)
    return 0;
  char *buf = malloc(size + 1);
  if (!buf)
    return 0;
  memcpy(buf, data, size);
  buf[size] = '\0';

  char *argv[MAX_ARGS + 2];
  int argc = 0;
  argv[argc++] = (char *)"memtop";
  for (size_t i = 0; i <= size && argc < MAX_ARGS;) {
    argv[argc++] = buf + i;
    i += strlen(buf + i) + 1;
  }
  argv[argc] = NULL;

  mt_opts_t o;
  char err[256];
  int rc =
      mt_cli_parse(argc, argv, (size & 1) ? "1" : NULL, &o, err, sizeof err);
  if (rc == 0) {
    if (o.delay_s < MT_DELAY_MIN || o.delay_s > MT_DELAY_MAX)
      abort();
    for (size_t i = 0; i < o.npids; i++)
      if (o.pids[i] <= 0 || o.pids[i] > MT_PID_MAX)
        abort();
  } else if (memchr(err, '\0', sizeof err) == NULL) {
    abort(); /* the reason must be a string */
  }

  for (int i = 1; i < argc; i++) {
    double d;
    long l;
    uint64_t u;
    if (ms__parse_double(argv[i], 0.1, 3600, &d) == 0 &&
        !(d >= 0.1 && d <= 3600))
      abort();
    if (ms__parse_long(argv[i], 1, 1000, &l) == 0 && (l < 1 || l > 1000))
      abort();
    if (ms__parse_uint(argv[i], 60000, &u) == 0 && u > 60000)
      abort();
  }
  free(buf);
  return 0;
}
