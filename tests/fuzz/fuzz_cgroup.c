/*
 * fuzz_cgroup.c - who a process is, from the text of its /proc/PID/cgroup
 * (client/procns.c, msc_cgroup_ident): a process names its own cgroups
 * where it is delegated some, so the text is a stranger's. Nothing may
 * crash or over-read (the sanitizers watch), every string comes out
 * NUL-ended within its member, and what is kept is what the engines
 * write: a container id of 64 lowercase hex digits, a pod UID in UUID
 * form, a unit of systemd's characters.
 */
#include <ctype.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_chars(const char *s, size_t cap, const char *extra) {
  size_t n = strnlen(s, cap);
  if (n == cap)
    abort();
  for (size_t i = 0; i < n; i++)
    if (!isalnum((unsigned char)s[i]) && strchr(extra, s[i]) == NULL)
      abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  msc_ident_t id;
  if (text == NULL)
    return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  memset(&id, 0x55, sizeof id);
  msc_cgroup_ident(text, &id);
  check_chars(id.container, sizeof id.container, "");
  if (id.container[0] != '\0' && strlen(id.container) != 64)
    abort();
  check_chars(id.engine, sizeof id.engine, "-");
  check_chars(id.pod, sizeof id.pod, "-");
  if (id.pod[0] != '\0' && strlen(id.pod) != 36)
    abort();
  check_chars(id.unit, sizeof id.unit, ":-_.\\@");
  free(text);
  return 0;
}
