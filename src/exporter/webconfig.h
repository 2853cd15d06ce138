/*
 * webconfig.h - `memtop serve --web-config FILE`: the web configuration
 * file of Prometheus's exporter-toolkit, so that a file written for
 * node_exporter serves memtop too. What memtop takes from it:
 *
 *   tls_server_config:
 *     cert_file: server.crt     # PEM; relative paths are relative to FILE
 *     key_file: server.key
 *     min_version: TLS12        # TLS10..TLS13; default TLS12
 *     max_version: TLS13        # default TLS13
 *     cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, ...]
 *     curve_preferences: [X25519, CurveP256]
 *     prefer_server_cipher_suites: true
 *   basic_auth_users:
 *     alice: $2y$10$...          # bcrypt hashes (htpasswd -nBC 10 "")
 *
 * The names and values are exporter-toolkit's (Go's crypto/tls names for
 * the suites). Without cipher_suites memtop serves TLS 1.2 and 1.3 with
 * ECDHE key exchange and AEAD ciphers only (no static RSA, no CBC). GnuTLS
 * enables suites by their parts (key exchange, cipher, MAC), so a list
 * whose parts would also enable a suite not listed is refused, naming it;
 * for TLS 1.3, as in Go, the list does not choose the suites, except that
 * memtop enables only the AEAD ciphers the list names, when it names any.
 *
 * The other keys exporter-toolkit knows (client certificates,
 * http_server_config) are refused with words saying so, rather than
 * ignored: a setting meant to secure the endpoint that memtop did not
 * apply would be worse than an error. Unknown keys are refused as
 * exporter-toolkit refuses them. Every error names the line and the fix.
 */
#ifndef MS_EXPORTER_WEBCONFIG_H
#define MS_EXPORTER_WEBCONFIG_H

#include <stddef.h>
#include <stdint.h>

#define MT_WEB_USERS_MAX 256
#define MT_WEB_FILE_MAX (1 << 20) /* the config, a certificate or a key */

typedef struct mt_web_user_s {
  char *name;
  char *hash; /* bcrypt: $2a$, $2b$ or $2y$ */
} mt_web_user_t;

/* Passwords recently proven right, so that a scraper's every request does
 * not cost a bcrypt (70 ms at cost 10, on memtop's one thread): kept as
 * SHA-512-crypt digests under a salt made at random for this process,
 * never as they were sent. */
#define MT_WEB_CACHE 16

typedef struct mt_web_cached_s {
  size_t user; /* index into users; the entry is empty if digest[0] == 0 */
  char digest[128];
} mt_web_cached_t;

typedef struct mt_webconfig_s {
  char *cert_file, *key_file; /* resolved paths; NULL: no TLS */
  char *cert_pem, *key_pem;   /* their contents (mt_webconfig_load) */
  /* GnuTLS's priority string for the versions, suites and curves of
   * tls_server_config (set whenever cert_file is). */
  char *tls_priority;
  mt_web_user_t *users;
  size_t nusers; /* 0: no authentication */
  /* The cache of proven passwords (see above), its salt, and how many
   * bcrypt hashes were computed (for tests). */
  mt_web_cached_t cache[MT_WEB_CACHE];
  size_t cache_next;
  char cache_salt[40];
  unsigned long bcrypt_runs;
} mt_webconfig_t;

/* Parses the YAML text (len bytes, which need not end in NUL) into *out,
 * paths resolved against base_dir (NULL: as written). Reads no file.
 * Returns 0, or MS_EINVAL (bad file: "line N: what, and the fix" in err)
 * or MS_ENOMEM; *out is then empty. */
int mt_webconfig_parse(const char *text, size_t len, const char *base_dir,
                       mt_webconfig_t *out, char *err, size_t errlen);

/* Reads FILE, parses it, and reads the certificate and key it names.
 * Returns 0 or a negative code with the reason (naming the file) in err. */
int mt_webconfig_load(const char *path, mt_webconfig_t *out, char *err,
                      size_t errlen);

/* 1 if user and password match a user of *w (the password checked against
 * its bcrypt hash with crypt_r, the results compared in constant time); 0
 * otherwise. An unknown user costs a bcrypt as a known one does, so the
 * time taken does not tell which users exist. A password proven right is
 * remembered (the cache above): the same user and password again cost a
 * SHA-512-crypt of 1000 rounds instead of a bcrypt. Safe to call from
 * several threads at once on the same *w (the cache has a lock; the
 * hashing runs outside it): `memtop serve` checks on libuv's workers. */
int mt_webconfig_check(mt_webconfig_t *w, const char *user,
                       const char *password);

/* 1 if user and password are in the cache of proven passwords (the cost
 * of a SHA-512-crypt of 1000 rounds, never a bcrypt); 0 otherwise, which
 * proves nothing: mt_webconfig_check() says. Thread-safe as it is. */
int mt_webconfig_check_cached(mt_webconfig_t *w, const char *user,
                              const char *password);

void mt_webconfig_free(mt_webconfig_t *w);

/* What tells that a web config must be read again, as exporter-toolkit
 * reads it for every request: the device, inode, size and times of the
 * file and of the certificate and key it names (a certificate rotated by
 * writing it anew, or renamed over, changes its stamp). Three stat()s,
 * no read. */
typedef struct mt_webstamp_s {
  struct {
    uint64_t dev, ino, size, mtime_ns, ctime_ns;
    int missing;
  } f[3];
} mt_webstamp_t;

/* The stamp of the config file `path` and of the certificate and key *w
 * (read from it) names. */
void mt_webconfig_stamp(const char *path, const mt_webconfig_t *w,
                        mt_webstamp_t *out);
int mt_webstamp_same(const mt_webstamp_t *a, const mt_webstamp_t *b);

#endif
