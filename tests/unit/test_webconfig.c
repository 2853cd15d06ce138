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

#include "memstats.h"
#include "memtop/webconfig.h"

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
      {"tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: "
       "TLS13\n",
       "line 4: tls_server_config: min_version is not supported"},
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_full_file),   cmocka_unit_test(test_cache),
      cmocka_unit_test(test_empty_files), cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_load),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
