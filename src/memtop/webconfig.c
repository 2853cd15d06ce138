/*
 * webconfig.c - exporter-toolkit's web configuration file, read with
 * libyaml (see webconfig.h). The file is the operator's, but it is read
 * as any outside bytes are: bounded in size, its tree walked to a fixed
 * depth (an alias cannot make the walk loop), every value checked before
 * it is kept.
 */
#include "memtop/webconfig.h"

#include <crypt.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "memstats.h"

static int fail(char *err, size_t errlen, const yaml_node_t *at,
                const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static int fail(char *err, size_t errlen, const yaml_node_t *at,
                const char *fmt, ...) {
  char msg[384];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (at)
    snprintf(err, errlen, "line %lu: %s",
             (unsigned long)at->start_mark.line + 1, msg);
  else
    snprintf(err, errlen, "%s", msg);
  return MS_EINVAL;
}

/* A scalar's text, or NULL if the node is not a scalar. libyaml ends
 * every scalar with a NUL; one inside the value (from "\0" in quotes)
 * would cut it short, so such a value is refused too. */
static const char *scalar(const yaml_node_t *n) {
  if (!n || n->type != YAML_SCALAR_NODE)
    return NULL;
  const char *s = (const char *)n->data.scalar.value;
  if (strlen(s) != n->data.scalar.length)
    return NULL;
  return s;
}

static char *join(const char *dir, const char *path) {
  if (path[0] == '/' || !dir || !dir[0])
    return strdup(path);
  size_t n = strlen(dir) + strlen(path) + 2;
  char *p = malloc(n);
  if (p)
    snprintf(p, n, "%s/%s", dir, path);
  return p;
}

/* A bcrypt hash as htpasswd and Go's bcrypt write it:
 * $2a$/$2b$/$2y$, a two-digit cost 04..31, '$', 53 characters of bcrypt's
 * base64. */
static int is_bcrypt(const char *h) {
  static const char b64[] =
      "./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  if (strlen(h) != 60 || h[0] != '$' || h[1] != '2' ||
      (h[2] != 'a' && h[2] != 'b' && h[2] != 'y') || h[3] != '$' || h[6] != '$')
    return 0;
  if (h[4] < '0' || h[4] > '3' || h[5] < '0' || h[5] > '9')
    return 0;
  int cost = (h[4] - '0') * 10 + (h[5] - '0');
  if (cost < 4 || cost > 31)
    return 0;
  return strspn(h + 7, b64) == 53;
}

static int tls_section(yaml_document_t *doc, yaml_node_t *at, yaml_node_t *map,
                       const char *base_dir, mt_webconfig_t *out, char *err,
                       size_t errlen) {
  if (map->type != YAML_MAPPING_NODE)
    return fail(err, errlen, map,
                "tls_server_config must be a mapping (cert_file: ..., "
                "key_file: ...)");
  for (yaml_node_pair_t *p = map->data.mapping.pairs.start;
       p < map->data.mapping.pairs.top; p++) {
    yaml_node_t *k = yaml_document_get_node(doc, p->key);
    yaml_node_t *v = yaml_document_get_node(doc, p->value);
    const char *key = scalar(k), *val = scalar(v);
    if (!key)
      return fail(err, errlen, k, "a key of tls_server_config is not a name");
    char **slot = NULL;
    if (strcmp(key, "cert_file") == 0)
      slot = &out->cert_file;
    else if (strcmp(key, "key_file") == 0)
      slot = &out->key_file;
    if (slot) {
      if (!val || !val[0])
        return fail(err, errlen, v, "%s must be a file name", key);
      if (*slot)
        return fail(err, errlen, k, "%s is given twice: keep one", key);
      *slot = join(base_dir, val);
      if (!*slot)
        return MS_ENOMEM;
      continue;
    }
    if (strcmp(key, "client_auth_type") == 0 && val &&
        strcmp(val, "NoClientCert") == 0)
      continue; /* the default: nothing to do */
    static const char *const known[] = {
        "client_auth_type",   "client_ca_file", "min_version",
        "max_version",        "cipher_suites",  "prefer_server_cipher_suites",
        "curve_preferences",  "cert",           "key",
        "client_allowed_sans"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
      if (strcmp(key, known[i]) == 0)
        return fail(err, errlen, k,
                    "tls_server_config: %s is not supported by memtop serve "
                    "(it takes cert_file and key_file, with GnuTLS's "
                    "defaults): remove it, or put memtop behind a proxy "
                    "that applies it",
                    key);
    return fail(err, errlen, k,
                "tls_server_config: unknown key '%.64s' (memtop takes "
                "cert_file and key_file)",
                key);
  }
  if (!out->cert_file != !out->key_file)
    return fail(err, errlen, at,
                "tls_server_config needs both cert_file and key_file");
  return 0;
}

static int users_section(yaml_document_t *doc, yaml_node_t *map,
                         mt_webconfig_t *out, char *err, size_t errlen) {
  if (map->type == YAML_SCALAR_NODE && map->data.scalar.length == 0)
    return 0; /* "basic_auth_users:" with nothing: no users */
  if (map->type != YAML_MAPPING_NODE)
    return fail(err, errlen, map,
                "basic_auth_users must be a mapping of user names to "
                "bcrypt hashes (alice: $2y$10$...)");
  size_t n =
      (size_t)(map->data.mapping.pairs.top - map->data.mapping.pairs.start);
  if (n > MT_WEB_USERS_MAX)
    return fail(err, errlen, map, "more than %d users in basic_auth_users",
                MT_WEB_USERS_MAX);
  if (n == 0)
    return 0;
  out->users = calloc(n, sizeof *out->users);
  if (!out->users)
    return MS_ENOMEM;
  for (yaml_node_pair_t *p = map->data.mapping.pairs.start;
       p < map->data.mapping.pairs.top; p++) {
    yaml_node_t *k = yaml_document_get_node(doc, p->key);
    yaml_node_t *v = yaml_document_get_node(doc, p->value);
    const char *name = scalar(k), *hash = scalar(v);
    if (!name || !name[0] || strchr(name, ':'))
      return fail(err, errlen, k,
                  "a user name must be a non-empty string without ':'");
    if (!hash || !is_bcrypt(hash))
      return fail(err, errlen, v,
                  "user '%.64s': the password must be a bcrypt hash "
                  "($2y$10$ and 53 more characters; make one with: "
                  "htpasswd -nBC 10 \"\" | tr -d ':\\n')",
                  name);
    for (size_t i = 0; i < out->nusers; i++)
      if (strcmp(out->users[i].name, name) == 0)
        return fail(err, errlen, k, "user '%.64s' is given twice: keep one",
                    name);
    mt_web_user_t *u = &out->users[out->nusers];
    u->name = strdup(name);
    u->hash = strdup(hash);
    if (!u->name || !u->hash) {
      free(u->name);
      free(u->hash);
      u->name = u->hash = NULL;
      return MS_ENOMEM;
    }
    out->nusers++;
  }
  return 0;
}

static int walk(yaml_document_t *doc, const char *base_dir, mt_webconfig_t *out,
                char *err, size_t errlen) {
  yaml_node_t *root = yaml_document_get_root_node(doc);
  if (!root)
    return 0; /* an empty file: plain HTTP, no authentication */
  if (root->type == YAML_SCALAR_NODE && root->data.scalar.length == 0)
    return 0;
  if (root->type != YAML_MAPPING_NODE)
    return fail(err, errlen, root,
                "the file must be a mapping (tls_server_config:, "
                "basic_auth_users:)");
  int seen_tls = 0, seen_users = 0;
  for (yaml_node_pair_t *p = root->data.mapping.pairs.start;
       p < root->data.mapping.pairs.top; p++) {
    yaml_node_t *k = yaml_document_get_node(doc, p->key);
    yaml_node_t *v = yaml_document_get_node(doc, p->value);
    const char *key = scalar(k);
    int rc;
    if (!key || !v)
      return fail(err, errlen, k, "a top-level key is not a name");
    if (strcmp(key, "tls_server_config") == 0) {
      if (seen_tls++)
        return fail(err, errlen, k, "tls_server_config is given twice");
      rc = tls_section(doc, k, v, base_dir, out, err, errlen);
    } else if (strcmp(key, "basic_auth_users") == 0) {
      if (seen_users++)
        return fail(err, errlen, k, "basic_auth_users is given twice");
      rc = users_section(doc, v, out, err, errlen);
    } else if (strcmp(key, "http_server_config") == 0) {
      return fail(err, errlen, k,
                  "http_server_config is not supported by memtop serve "
                  "(it serves HTTP/1.1 and sets its own headers): remove "
                  "it");
    } else {
      return fail(err, errlen, k,
                  "unknown key '%.64s' (memtop takes tls_server_config "
                  "and basic_auth_users, as exporter-toolkit names them)",
                  key);
    }
    if (rc != 0)
      return rc;
  }
  return 0;
}

int mt_webconfig_parse(const char *text, size_t len, const char *base_dir,
                       mt_webconfig_t *out, char *err, size_t errlen) {
  if (!out || (!text && len))
    return MS_EINVAL;
  memset(out, 0, sizeof *out);
  if (len > MT_WEB_FILE_MAX)
    return fail(err, errlen, NULL, "the file is larger than %d bytes",
                MT_WEB_FILE_MAX);
  yaml_parser_t parser;
  yaml_document_t doc;
  if (!yaml_parser_initialize(&parser))
    return MS_ENOMEM;
  yaml_parser_set_input_string(&parser,
                               (const unsigned char *)(text ? text : ""), len);
  int rc;
  if (!yaml_parser_load(&parser, &doc)) {
    snprintf(err, errlen, "line %lu: not valid YAML: %s",
             (unsigned long)parser.problem_mark.line + 1,
             parser.problem ? parser.problem : "parse error");
    yaml_parser_delete(&parser);
    return MS_EINVAL;
  }
  rc = walk(&doc, base_dir, out, err, errlen);
  yaml_document_delete(&doc);
  yaml_parser_delete(&parser);
  if (rc != 0)
    mt_webconfig_free(out);
  return rc;
}

/* Reads a whole file of at most MT_WEB_FILE_MAX bytes, NUL-terminated. */
static int slurp(const char *path, char **data, size_t *len, char *err,
                 size_t errlen) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
    return MS_ENOENT;
  }
  char *buf = malloc(MT_WEB_FILE_MAX + 1);
  if (!buf) {
    close(fd);
    return MS_ENOMEM;
  }
  size_t n = 0;
  for (;;) {
    ssize_t r = read(fd, buf + n, MT_WEB_FILE_MAX + 1 - n);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0) {
      snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
      free(buf);
      close(fd);
      return MS_EINVAL;
    }
    if (r == 0)
      break;
    n += (size_t)r;
    if (n > MT_WEB_FILE_MAX) {
      snprintf(err, errlen, "%s is larger than %d bytes", path,
               MT_WEB_FILE_MAX);
      free(buf);
      close(fd);
      return MS_EINVAL;
    }
  }
  close(fd);
  buf[n] = '\0';
  *data = buf;
  *len = n;
  return 0;
}

int mt_webconfig_load(const char *path, mt_webconfig_t *out, char *err,
                      size_t errlen) {
  char *text = NULL, *dir = NULL;
  size_t len = 0;
  memset(out, 0, sizeof *out);
  int rc = slurp(path, &text, &len, err, errlen);
  if (rc != 0)
    return rc;
  const char *slash = strrchr(path, '/');
  if (slash) {
    dir = strndup(path, (size_t)(slash - path) + (slash == path));
    if (!dir) {
      free(text);
      return MS_ENOMEM;
    }
  }
  char why[400];
  rc = mt_webconfig_parse(text, len, dir, out, why, sizeof why);
  free(text);
  free(dir);
  if (rc != 0) {
    snprintf(err, errlen, "%s: %s", path, why);
    return rc;
  }
  if (out->cert_file) {
    size_t n;
    rc = slurp(out->cert_file, &out->cert_pem, &n, err, errlen);
    if (rc == 0)
      rc = slurp(out->key_file, &out->key_pem, &n, err, errlen);
    if (rc != 0) {
      char tmp[512];
      snprintf(tmp, sizeof tmp, "%s (tls_server_config of %s)", err, path);
      snprintf(err, errlen, "%s", tmp);
      mt_webconfig_free(out);
      return rc;
    }
  }
  return 0;
}

/* Constant time in the length of want: every byte of it is compared,
 * whatever differs first (got is read up to its NUL, never past). */
static int same(const char *got, const char *want) {
  size_t n = strlen(want), j = 0;
  unsigned char diff = 0;
  for (size_t i = 0; i < n; i++) {
    diff |= (unsigned char)((unsigned char)got[j] ^ (unsigned char)want[i]);
    j += got[j] != '\0';
  }
  return diff == 0 && got[j] == '\0';
}

/* The cache's digest of a password: SHA-512-crypt, 1000 rounds, under
 * this process's random salt (made on first use). Returns 0, or -1 if no
 * digest could be made (the cache is then not used). */
static int cache_digest(mt_webconfig_t *w, const char *password,
                        struct crypt_data *cd, char out[128]) {
  if (!w->cache_salt[0]) {
    static const char b64[] =
        "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    unsigned char r[16];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
      return -1;
    char salt[17];
    for (size_t i = 0; i < 16; i++)
      salt[i] = b64[r[i] & 63];
    salt[16] = '\0';
    snprintf(w->cache_salt, sizeof w->cache_salt, "$6$rounds=1000$%s$", salt);
  }
  const char *d = crypt_r(password, w->cache_salt, cd);
  if (!d || d[0] == '*' || strlen(d) >= 128)
    return -1;
  memcpy(out, d, strlen(d) + 1);
  return 0;
}

int mt_webconfig_check(mt_webconfig_t *w, const char *user,
                       const char *password) {
  if (!w || w->nusers == 0 || !user || !password)
    return 0;
  size_t ui = w->nusers;
  for (size_t i = 0; i < w->nusers; i++)
    if (strcmp(w->users[i].name, user) == 0)
      ui = i;
  struct crypt_data *cd = calloc(1, sizeof *cd);
  if (!cd)
    return 0;
  char digest[128];
  int have_digest =
      ui < w->nusers && cache_digest(w, password, cd, digest) == 0;
  int ok = 0;
  if (have_digest) {
    for (size_t i = 0; i < MT_WEB_CACHE; i++)
      if (w->cache[i].digest[0] && w->cache[i].user == ui &&
          same(digest, w->cache[i].digest))
        ok = 1;
  }
  if (!ok) {
    /* An unknown user is hashed against a known user's hash all the
     * same. */
    const char *hash = ui < w->nusers ? w->users[ui].hash : w->users[0].hash;
    const char *got = crypt_r(password, hash, cd);
    w->bcrypt_runs++;
    ok = got && got[0] != '*' && same(got, hash) && ui < w->nusers;
    if (ok && have_digest) {
      mt_web_cached_t *c = &w->cache[w->cache_next++ % MT_WEB_CACHE];
      c->user = ui;
      memcpy(c->digest, digest, sizeof c->digest);
    }
  }
  explicit_bzero(digest, sizeof digest);
  explicit_bzero(cd, sizeof *cd);
  free(cd);
  return ok;
}

void mt_webconfig_free(mt_webconfig_t *w) {
  if (!w)
    return;
  free(w->cert_file);
  free(w->key_file);
  if (w->cert_pem)
    explicit_bzero(w->cert_pem, strlen(w->cert_pem));
  if (w->key_pem)
    explicit_bzero(w->key_pem, strlen(w->key_pem));
  free(w->cert_pem);
  free(w->key_pem);
  for (size_t i = 0; i < w->nusers; i++) {
    free(w->users[i].name);
    free(w->users[i].hash);
  }
  free(w->users);
  explicit_bzero(w, sizeof *w);
}
