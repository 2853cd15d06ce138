/*
 * fuzz_web_config.c - `memtop serve --web-config`'s parser
 * (mt_webconfig_parse) on hostile bytes: YAML of any shape (aliases,
 * anchors, deep nesting, NULs, invalid UTF-8), files of the right shape
 * with wrong values. It may refuse anything, but never crash or
 * over-read; what it accepts holds what webconfig.h promises (both TLS
 * files or neither, a GnuTLS priority string with them, every user named
 * and with a bcrypt hash), and a refusal always says why.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "exporter/webconfig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 65536)
    return 0;
  mt_webconfig_t w;
  char err[512];
  err[0] = '\0';
  int rc = mt_webconfig_parse((const char *)data, size, "/base", &w, err,
                              sizeof err);
  if (rc != 0) {
    if (err[0] == '\0' && rc != -12 /* MS_ENOMEM */)
      abort();
    if (w.nusers || w.cert_file || w.key_file || w.users || w.tls_priority)
      abort();
    return 0;
  }
  if (!w.cert_file != !w.key_file || !w.cert_file != !w.tls_priority)
    abort();
  for (size_t i = 0; i < w.nusers; i++) {
    if (!w.users[i].name[0] || strlen(w.users[i].hash) != 60 ||
        strncmp(w.users[i].hash, "$2", 2) != 0)
      abort();
  }
  /* A check with a wrong password never passes (cost-4 hashes only, so
   * that fuzzing stays fast: others are skipped). */
  if (w.nusers && strncmp(w.users[0].hash + 3, "$04$", 4) == 0 &&
      mt_webconfig_check(&w, w.users[0].name, "\x01not the password"))
    abort();
  mt_webconfig_free(&w);
  return 0;
}
