/*
 * fuzz_negotiate.c - the request headers `memtop serve` reads
 * (negotiate.h): the input, cut at its first NUL, is an Accept header and
 * an Accept-Encoding header. Any bytes give an answer, 0 or 1, without
 * reading past the given length (the buffer is exactly that long, so
 * ASan sees an over-read).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "exporter/negotiate.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 65536)
    return 0;
  char *buf = malloc(size ? size : 1);
  if (!buf)
    return 0;
  memcpy(buf, data, size);
  int a = mt_accept_openmetrics(buf, size);
  int g = mt_accept_gzip(buf, size);
  if ((a != 0 && a != 1) || (g != 0 && g != 1))
    abort();
  free(buf);
  return 0;
}
