/*
 * test_webconfig.c - `memtop serve --web-config`: exporter-toolkit's file
 * as memtop reads it (webconfig.h). A file as node_exporter's users write
 * it is taken (paths relative to the file, bcrypt hashes of every prefix
 * htpasswd and Go write); every key memtop does not apply is refused with
 * its line and a fix, never ignored; passwords are checked right and
 * wrong, for known and unknown users; the loader reads the certificate
 * and key the file names and says which file is missing.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <gnutls/gnutls.h>

#include "memstats.h"
#include "common/sanitize.h"
#include "exporter/webconfig.h"

/* "s3cret" and "hunter2", cost 4 (made with crypt_gensalt and crypt). */
#define HASH_ALICE                                                             \
  "$2y$04$cF9RwSEtD0rMHdRC6By.SeT5NEogdNKIpubymmZ/QCHAEfwcRsNuq"
#define HASH_BOB "$2b$04$C6JeooR9xiBi1lxWnhYGxelRn4VhM4mUarzmmzPmJqM8PXFCkNAwO"

static int parse(const char *text, mt_webconfig_t *w, char *err, size_t n) {
  err[0] = '\0';
  return mt_webconfig_parse(text, strlen(text), "/etc/memtop", w, err, n);
}

static void test_full_file(void **state) {
  (void)state;
  const char *text = "# node_exporter's file\n"
                     "tls_server_config:\n"
                     "  cert_file: server.crt\n"
                     "  key_file: /abs/server.key\n"
                     "  client_auth_type: NoClientCert\n"
                     "basic_auth_users:\n"
                     "  alice: " HASH_ALICE "\n"
                     "  'bob': \"" HASH_BOB "\"\n";
  mt_webconfig_t w;
  char err[512];
  assert_int_equal(parse(text, &w, err, sizeof err), 0);
  assert_string_equal(w.cert_file, "/etc/memtop/server.crt");
  assert_string_equal(w.key_file, "/abs/server.key");
  assert_null(w.cert_pem); /* parsing reads no file */
  assert_int_equal(w.nusers, 2);
  assert_true(mt_webconfig_check(&w, "alice", "s3cret"));
  assert_true(mt_webconfig_check(&w, "bob", "hunter2"));
  assert_false(mt_webconfig_check(&w, "alice", "hunter2"));
  assert_false(mt_webconfig_check(&w, "alice", "s3cre"));
  assert_false(mt_webconfig_check(&w, "alice", "s3cret "));
  assert_false(mt_webconfig_check(&w, "alice", ""));
  assert_false(mt_webconfig_check(&w, "carol", "s3cret"));
  assert_false(mt_webconfig_check(&w, "", ""));
  assert_false(mt_webconfig_check(&w, NULL, "s3cret"));
  mt_webconfig_free(&w);
  /* Freed: empty, and a second free does nothing. */
  assert_int_equal(w.nusers, 0);
  mt_webconfig_free(&w);
}

/* A password proven right is remembered: the same again costs no
 * bcrypt; a wrong one, another user's, or the right one for another user
 * still do, and are judged as before. */
static void test_cache(void **state) {
  (void)state;
  const char *text =
      "basic_auth_users:\n  alice: " HASH_ALICE "\n  bob: " HASH_BOB "\n";
  mt_webconfig_t w;
  char err[512];
  assert_int_equal(parse(text, &w, err, sizeof err), 0);
  assert_true(mt_webconfig_check(&w, "alice", "s3cret"));
  assert_int_equal(w.bcrypt_runs, 1);
  for (int i = 0; i < 5; i++)
    assert_true(mt_webconfig_check(&w, "alice", "s3cret"));
  assert_int_equal(w.bcrypt_runs, 1);
  assert_false(mt_webconfig_check(&w, "alice", "s3cret2"));
  assert_false(mt_webconfig_check(&w, "alice", "hunter2"));
  assert_false(mt_webconfig_check(&w, "bob", "s3cret"));
  assert_int_equal(w.bcrypt_runs, 4);
  assert_true(mt_webconfig_check(&w, "bob", "hunter2"));
  assert_true(mt_webconfig_check(&w, "bob", "hunter2"));
  assert_int_equal(w.bcrypt_runs, 5);
  /* Unknown users are never cached, and never pass. */
  assert_false(mt_webconfig_check(&w, "carol", "s3cret"));
  assert_false(mt_webconfig_check(&w, "carol", "s3cret"));
  assert_int_equal(w.bcrypt_runs, 7);
  /* The password itself is nowhere in the cache. */
  for (size_t i = 0; i < MT_WEB_CACHE; i++)
    assert_null(strstr(w.cache[i].digest, "s3cret"));
  mt_webconfig_free(&w);
}

static void test_empty_files(void **state) {
  (void)state;
  static const char *const texts[] = {"", "\n", "# nothing\n", "---\n",
                                      "basic_auth_users:\n"};
  for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
    mt_webconfig_t w;
    char err[512];
    if (parse(texts[i], &w, err, sizeof err) != 0)
      fail_msg("'%s' refused: %s", texts[i], err);
    assert_null(w.cert_file);
    assert_int_equal(w.nusers, 0);
    assert_false(mt_webconfig_check(&w, "a", "b"));
    mt_webconfig_free(&w);
  }
}

/* Each bad file is refused, on the right line, with words that say what
 * to do. */
static void test_refusals(void **state) {
  (void)state;
  static const struct {
    const char *text, *want;
  } bad[] = {
      {"tls_server_config:\n  cert_file: a.crt\n", "line 1: "
                                                   "tls_server_config needs "
                                                   "both"},
      {"tls_server_config:\n  key_file: a.key\n", "needs both"},
      {"tls_server_config:\n  cert_file: a\n  key_file: b\n  client_ca_file: "
       "ca.crt\n",
       "line 4: tls_server_config: client_ca_file is not supported"},
      {"tls_server_config:\n  client_auth_type: RequireAndVerifyClientCert\n",
       "line 2: tls_server_config: client_auth_type is not supported"},
      {"tls_server_config:\n  cert_fil: a\n", "line 2: tls_server_config: "
                                              "unknown key 'cert_fil'"},
      {"http_server_config:\n  http2: false\n", "line 1: http_server_config "
                                                "is not supported"},
      {"basic_auth_user:\n  a: b\n", "line 1: unknown key 'basic_auth_user'"},
      {"basic_auth_users:\n  alice: s3cret\n",
       "line 2: user 'alice': the password must be a bcrypt hash"},
      {"basic_auth_users:\n  alice: $1$abc$def\n", "bcrypt hash"},
      {"basic_auth_users:\n  alice: " HASH_ALICE "\n  alice: " HASH_BOB "\n",
       "line 3: user 'alice' is given twice"},
      {"basic_auth_users:\n  'a:b': " HASH_ALICE "\n", "line 2: a user name"},
      {"basic_auth_users:\n  - alice\n", "line 2: basic_auth_users must be a "
                                         "mapping"},
      {"- a\n- b\n", "line 1: the file must be a mapping"},
      {"tls_server_config: [\n", "not valid YAML"},
      {"a: b: c\n", "not valid YAML"},
      {"basic_auth_users:\n  alice: \"$2y$04$\\0\"\n", "bcrypt hash"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    mt_webconfig_t w;
    char err[512];
    int rc = parse(bad[i].text, &w, err, sizeof err);
    if (rc != MS_EINVAL || !strstr(err, bad[i].want))
      fail_msg("file %zu:\n%s\ngave %d '%s', want '%s'", i, bad[i].text, rc,
               err, bad[i].want);
    assert_int_equal(w.nusers, 0);
    assert_null(w.cert_file);
  }
}

static char *write_file(const char *dir, const char *name, const char *text) {
  char *path = malloc(strlen(dir) + strlen(name) + 2);
  assert_non_null(path);
  sprintf(path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
  return path;
}

/* A password that is no bcrypt hash: the refusal says how to make one,
 * with a command that reads on the terminal as it is to be typed (memtop
 * shows its messages sanitised, and a backslash there was shown doubled:
 * tr -d ':\\n' deleted the n's of the hash). */
static void test_bcrypt_fix_as_typed(void **state) {
  mt_webconfig_t w;
  char err[512], shown[4 * sizeof err + 1];

  (void)state;
  assert_int_equal(
      parse("basic_auth_users:\n  alice: s3cret\n", &w, err, sizeof err),
      MS_EINVAL);
  assert_non_null(strstr(err, "htpasswd -nBC 10 \"\" | cut -d: -f2"));
  ms__sanitize(shown, sizeof shown, err, strlen(err), (size_t)-1);
  assert_string_equal(shown, err);
}

static void test_load(void **state) {
  (void)state;
  char dir[] = "/tmp/test_webconfig.XXXXXX";
  assert_non_null(mkdtemp(dir));
  char *crt = write_file(dir, "s.crt", "CERT\n");
  char *key = write_file(dir, "s.key", "KEY\n");
  char *cfg = write_file(dir, "web.yml",
                         "tls_server_config:\n  cert_file: s.crt\n"
                         "  key_file: s.key\n");
  mt_webconfig_t w;
  char err[1024];
  assert_int_equal(mt_webconfig_load(cfg, &w, err, sizeof err), 0);
  assert_string_equal(w.cert_pem, "CERT\n");
  assert_string_equal(w.key_pem, "KEY\n");
  mt_webconfig_free(&w);

  /* A missing key file is named, with the config that names it. */
  unlink(key);
  assert_int_not_equal(mt_webconfig_load(cfg, &w, err, sizeof err), 0);
  assert_non_null(strstr(err, "s.key"));
  assert_non_null(strstr(err, "web.yml"));
  assert_null(w.cert_pem);
  /* A missing config file, and a bad one named with its path. */
  unlink(cfg);
  assert_int_not_equal(mt_webconfig_load(cfg, &w, err, sizeof err), 0);
  assert_non_null(strstr(err, "cannot open"));
  free(cfg);
  cfg = write_file(dir, "web.yml", "nope: 1\n");
  assert_int_equal(mt_webconfig_load(cfg, &w, err, sizeof err), MS_EINVAL);
  assert_non_null(strstr(err, "web.yml: line 1: unknown key 'nope'"));
  unlink(cfg);
  unlink(crt);
  rmdir(dir);
  free(cfg);
  free(crt);
  free(key);
}

/* ------------------------------------------------------------------------
 * TLS settings, as GnuTLS applies them
 * ------------------------------------------------------------------------ */

#define TLS_HEAD "tls_server_config:\n  cert_file: a.crt\n  key_file: a.key\n"

/* What GnuTLS enables for w's priority string: the protocols (a bit per
 * TLS 1.x), the TLS 1.2 suites' IANA numbers, the groups in order. */
typedef struct enabled_s {
  unsigned versions;
  unsigned suite[64];
  size_t nsuites;
  unsigned group[16];
  size_t ngroups;
} enabled_t;

static void enabled_of(const mt_webconfig_t *w, enabled_t *e) {
  memset(e, 0, sizeof *e);
  assert_non_null(w->tls_priority);
  gnutls_priority_t pc;
  const char *at;
  assert_int_equal(gnutls_priority_init(&pc, w->tls_priority, &at), 0);
  const unsigned *list;
  int n = gnutls_priority_protocol_list(pc, &list);
  for (int i = 0; i < n; i++)
    if (list[i] >= GNUTLS_TLS1_0 && list[i] <= GNUTLS_TLS1_3)
      e->versions |= 1u << (list[i] - GNUTLS_TLS1_0);
  for (unsigned i = 0;; i++) {
    unsigned idx;
    int r = gnutls_priority_get_cipher_suite_index(pc, i, &idx);
    if (r == GNUTLS_E_REQUESTED_DATA_NOT_AVAILABLE)
      break;
    if (r != 0)
      continue;
    unsigned char id[2];
    gnutls_protocol_t minv;
    if (!gnutls_cipher_suite_info(idx, id, NULL, NULL, NULL, &minv) ||
        minv >= GNUTLS_TLS1_3 || e->nsuites == 64)
      continue;
    e->suite[e->nsuites++] = (unsigned)id[0] << 8 | id[1];
  }
  n = gnutls_priority_group_list(pc, &list);
  for (int i = 0; i < n && e->ngroups < 16; i++)
    e->group[e->ngroups++] = list[i];
  gnutls_priority_deinit(pc);
}

static int has_suite(const enabled_t *e, unsigned id) {
  for (size_t i = 0; i < e->nsuites; i++)
    if (e->suite[i] == id)
      return 1;
  return 0;
}

/* No settings: TLS 1.2 and 1.3 only, and no TLS 1.2 suite without
 * forward secrecy or with CBC (the static-RSA and CBC-SHA1 suites GnuTLS's
 * NORMAL serves). */
static void test_tls_defaults(void **state) {
  (void)state;
  mt_webconfig_t w;
  char err[512];
  assert_int_equal(parse(TLS_HEAD, &w, err, sizeof err), 0);
  enabled_t e;
  enabled_of(&w, &e);
  assert_int_equal(e.versions, 1u << 2 | 1u << 3);
  assert_true(e.nsuites > 0);
  static const unsigned weak[] = {0x002f, 0x0035, 0x009c, 0x009d, 0xc009,
                                  0xc00a, 0xc013, 0xc014, 0xc027, 0xc023};
  for (size_t i = 0; i < sizeof weak / sizeof weak[0]; i++)
    if (has_suite(&e, weak[i]))
      fail_msg("suite %04x enabled by default (%s)", weak[i], w.tls_priority);
  assert_true(has_suite(&e, 0xc02f)); /* ECDHE_RSA_WITH_AES_128_GCM */
  assert_true(has_suite(&e, 0xc02b)); /* ECDHE_ECDSA_WITH_AES_128_GCM */
  mt_webconfig_free(&w);
  /* No TLS, no priority. */
  assert_int_equal(parse("basic_auth_users:\n", &w, err, sizeof err), 0);
  assert_null(w.tls_priority);
  mt_webconfig_free(&w);
}

/* exporter-toolkit's settings, under its names, applied exactly. */
static void test_tls_settings(void **state) {
  (void)state;
  mt_webconfig_t w;
  char err[512];
  enabled_t e;
  assert_int_equal(
      parse(TLS_HEAD "  min_version: TLS13\n", &w, err, sizeof err), 0);
  enabled_of(&w, &e);
  assert_int_equal(e.versions, 1u << 3);
  mt_webconfig_free(&w);

  assert_int_equal(parse(TLS_HEAD "  min_version: TLS10\n  max_version: "
                                  "TLS12\n",
                         &w, err, sizeof err),
                   0);
  enabled_of(&w, &e);
  /* Up to TLS 1.2 (1.0 and 1.1 as far as the system's GnuTLS policy
   * allows them). */
  assert_int_equal(e.versions & ~0x7u, 0);
  assert_true(e.versions & 1u << 2);
  mt_webconfig_free(&w);

  const char *list = TLS_HEAD "  cipher_suites:\n"
                              "    - TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256\n"
                              "    - TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384\n"
                              "    - TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256\n"
                              "    - TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384\n"
                              "  curve_preferences: [X25519, CurveP256]\n"
                              "  prefer_server_cipher_suites: false\n"
                              "  client_auth_type: NoClientCert\n";
  if (parse(list, &w, err, sizeof err) != 0)
    fail_msg("refused: %s", err);
  enabled_of(&w, &e);
  assert_int_equal(e.nsuites, 4);
  assert_true(has_suite(&e, 0xc02f) && has_suite(&e, 0xc030) &&
              has_suite(&e, 0xc02b) && has_suite(&e, 0xc02c));
  assert_int_equal(e.ngroups, 2);
  assert_int_equal(e.group[0], GNUTLS_GROUP_X25519);
  assert_int_equal(e.group[1], GNUTLS_GROUP_SECP256R1);
  assert_null(strstr(w.tls_priority, "SERVER_PRECEDENCE"));
  mt_webconfig_free(&w);

  /* An old suite, when asked for by name, with the version it needs
   * (unless the system's GnuTLS policy forbids it: then it is refused,
   * saying so). */
  int rc = parse(TLS_HEAD "  min_version: TLS10\n  cipher_suites: "
                          "[TLS_RSA_WITH_AES_128_CBC_SHA]\n",
                 &w, err, sizeof err);
  if (rc == 0) {
    enabled_of(&w, &e);
    assert_int_equal(e.nsuites, 1);
    assert_true(has_suite(&e, 0x002f));
    mt_webconfig_free(&w);
  } else if (!strstr(err, "no cipher suite is left")) {
    fail_msg("refused: %s", err);
  }
}

static void test_tls_refusals(void **state) {
  (void)state;
  static const struct {
    const char *text, *want;
  } bad[] = {
      {TLS_HEAD "  min_version: VersionTLS12\n",
       "line 4: min_version: 'VersionTLS12' is not a TLS version (TLS10"},
      {TLS_HEAD "  max_version: 1.3\n", "line 4: max_version"},
      {TLS_HEAD "  min_version: TLS13\n  max_version: TLS12\n",
       "min_version TLS13 is above max_version TLS12"},
      {TLS_HEAD "  min_version: TLS12\n  min_version: TLS13\n",
       "line 5: min_version is given twice"},
      {TLS_HEAD "  cipher_suites: [TLS_RSA_WITH_RC4_128_SHA]\n",
       "line 4: cipher_suites: unknown name 'TLS_RSA_WITH_RC4_128_SHA'"},
      {TLS_HEAD "  cipher_suites: TLS_AES_128_GCM_SHA256\n",
       "line 4: cipher_suites must be a list"},
      {TLS_HEAD "  cipher_suites: []\n", "cipher_suites is empty"},
      {TLS_HEAD "  curve_preferences: [P256]\n",
       "line 4: curve_preferences: unknown name 'P256'"},
      {TLS_HEAD "  curve_preferences: [X25519, X25519]\n", "given twice"},
      {TLS_HEAD "  prefer_server_cipher_suites: maybe\n", "true or false"},
      /* AES-128-GCM with ECDHE-RSA, AES-256-GCM with ECDHE-ECDSA: GnuTLS
       * would serve the two other combinations as well. */
      {TLS_HEAD "  cipher_suites:\n"
                "    - TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256\n"
                "    - TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384\n",
       "would also enable TLS_ECDHE_"},
      {"tls_server_config:\n  min_version: TLS13\n",
       "line 2: tls_server_config: TLS settings without cert_file"},
      {TLS_HEAD "  client_auth_type: RequireAndVerifyClientCert\n",
       "line 4: tls_server_config: client_auth_type is not supported"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    mt_webconfig_t w;
    char err[512];
    int rc = parse(bad[i].text, &w, err, sizeof err);
    if (rc != MS_EINVAL || !strstr(err, bad[i].want))
      fail_msg("file %zu:\n%s\ngave %d '%s', want '%s'", i, bad[i].text, rc,
               err, bad[i].want);
    assert_null(w.cert_file);
    assert_null(w.tls_priority);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_full_file),
      cmocka_unit_test(test_cache),
      cmocka_unit_test(test_empty_files),
      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_bcrypt_fix_as_typed),
      cmocka_unit_test(test_load),
      cmocka_unit_test(test_tls_defaults),
      cmocka_unit_test(test_tls_settings),
      cmocka_unit_test(test_tls_refusals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
