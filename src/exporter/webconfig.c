/*
 * webconfig.c - exporter-toolkit's web configuration file, read with
 * libyaml (see webconfig.h). The file is the operator's, but it is read
 * as any outside bytes are: bounded in size, its tree walked to a fixed
 * depth (an alias cannot make the walk loop), every value checked before
 * it is kept.
 */
#include "exporter/webconfig.h"

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
#include <gnutls/gnutls.h>
#include <pthread.h>
#include <yaml.h>

#include "memstats.h"
#include "common/strbuf.h"

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

/* ------------------------------------------------------------------------
 * TLS: exporter-toolkit's names, GnuTLS's priority string
 * ------------------------------------------------------------------------ */

/* The suites Go's tls.CipherSuites() names (the ones exporter-toolkit
 * takes), with their IANA number and GnuTLS's names of their parts. */
typedef struct suite_s {
  const char *name;
  unsigned char id[2];
  const char *kx, *cipher, *mac; /* kx NULL: a TLS 1.3 suite */
} suite_t;

static const suite_t suites[] = {
    {"TLS_RSA_WITH_AES_128_CBC_SHA",
     {0x00, 0x2f},
     "RSA",
     "AES-128-CBC",
     "SHA1"},
    {"TLS_RSA_WITH_AES_256_CBC_SHA",
     {0x00, 0x35},
     "RSA",
     "AES-256-CBC",
     "SHA1"},
    {"TLS_RSA_WITH_AES_128_GCM_SHA256",
     {0x00, 0x9c},
     "RSA",
     "AES-128-GCM",
     "AEAD"},
    {"TLS_RSA_WITH_AES_256_GCM_SHA384",
     {0x00, 0x9d},
     "RSA",
     "AES-256-GCM",
     "AEAD"},
    {"TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
     {0xc0, 0x09},
     "ECDHE-ECDSA",
     "AES-128-CBC",
     "SHA1"},
    {"TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
     {0xc0, 0x0a},
     "ECDHE-ECDSA",
     "AES-256-CBC",
     "SHA1"},
    {"TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
     {0xc0, 0x13},
     "ECDHE-RSA",
     "AES-128-CBC",
     "SHA1"},
    {"TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
     {0xc0, 0x14},
     "ECDHE-RSA",
     "AES-256-CBC",
     "SHA1"},
    {"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
     {0xc0, 0x2b},
     "ECDHE-ECDSA",
     "AES-128-GCM",
     "AEAD"},
    {"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
     {0xc0, 0x2c},
     "ECDHE-ECDSA",
     "AES-256-GCM",
     "AEAD"},
    {"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
     {0xc0, 0x2f},
     "ECDHE-RSA",
     "AES-128-GCM",
     "AEAD"},
    {"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
     {0xc0, 0x30},
     "ECDHE-RSA",
     "AES-256-GCM",
     "AEAD"},
    {"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
     {0xcc, 0xa8},
     "ECDHE-RSA",
     "CHACHA20-POLY1305",
     "AEAD"},
    {"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
     {0xcc, 0xa9},
     "ECDHE-ECDSA",
     "CHACHA20-POLY1305",
     "AEAD"},
    {"TLS_AES_128_GCM_SHA256", {0x13, 0x01}, NULL, "AES-128-GCM", "AEAD"},
    {"TLS_AES_256_GCM_SHA384", {0x13, 0x02}, NULL, "AES-256-GCM", "AEAD"},
    {"TLS_CHACHA20_POLY1305_SHA256",
     {0x13, 0x03},
     NULL,
     "CHACHA20-POLY1305",
     "AEAD"},
};
#define NSUITES (sizeof suites / sizeof suites[0])

static const struct {
  const char *name, *group;
} curves[] = {{"CurveP256", "GROUP-SECP256R1"},
              {"CurveP384", "GROUP-SECP384R1"},
              {"CurveP521", "GROUP-SECP521R1"},
              {"X25519", "GROUP-X25519"}};
#define NCURVES (sizeof curves / sizeof curves[0])

/* What tls_server_config asks for, before it becomes a priority string. */
typedef struct tls_want_s {
  int min, max; /* 0 (TLS 1.0) .. 3 (TLS 1.3); -1: not given */
  int prefer_server;
  int nsuites, ncurves;         /* -1: not given */
  unsigned char suite[NSUITES]; /* indexes into suites[], in order */
  unsigned char curve[NCURVES];
  const yaml_node_t *suites_at; /* for the errors */
} tls_want_t;

/* "TLS10".."TLS13" -> 0..3; -1 if none (a value the text does not
 * hold, not an MS_E* code: the caller words the error). */
static int tls_version(const char *v) {
  if (v && strlen(v) == 5 && strncmp(v, "TLS1", 4) == 0 && v[4] >= '0' &&
      v[4] <= '3')
    return v[4] - '0';
  return -1;
}

/* YAML 1.1's booleans, as Go's yaml.v2 reads them; -1 if none (a value
 * the text does not hold, not an MS_E* code: the caller words it). */
static int yaml_bool(const char *v) {
  static const char *const yes[] = {"true", "True", "TRUE", "yes", "Yes", "YES",
                                    "on",   "On",   "ON",   "y",   "Y"};
  static const char *const no[] = {"false", "False", "FALSE", "no", "No", "NO",
                                   "off",   "Off",   "OFF",   "n",  "N"};
  for (size_t i = 0; v && i < sizeof yes / sizeof yes[0]; i++) {
    if (strcmp(v, yes[i]) == 0)
      return 1;
    if (strcmp(v, no[i]) == 0)
      return 0;
  }
  return -1;
}

/* A sequence of names looked up in a table of n; their indexes in out. */
static int name_list(yaml_document_t *doc, yaml_node_t *seq, const char *key,
                     const char *(*name_at)(size_t), size_t n,
                     unsigned char *out, int *count, char *err, size_t errlen) {
  if (seq->type != YAML_SEQUENCE_NODE)
    return fail(err, errlen, seq, "%s must be a list ([A, B] or - A lines)",
                key);
  if (*count >= 0)
    return fail(err, errlen, seq, "%s is given twice: keep one", key);
  *count = 0;
  for (yaml_node_item_t *it = seq->data.sequence.items.start;
       it < seq->data.sequence.items.top; it++) {
    yaml_node_t *e = yaml_document_get_node(doc, *it);
    const char *v = scalar(e);
    size_t i = 0;
    while (v && i < n && strcmp(v, name_at(i)) != 0)
      i++;
    if (!v || i == n)
      return fail(err, errlen, e, "%s: unknown name '%.64s' (%s)", key,
                  v ? v : "",
                  n == NSUITES ? "Go's crypto/tls names, e.g. "
                                 "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"
                               : "CurveP256, CurveP384, CurveP521 or "
                                 "X25519");
    for (int j = 0; j < *count; j++)
      if (out[j] == i)
        return fail(err, errlen, e, "%s: '%s' is given twice", key, v);
    out[(*count)++] = (unsigned char)i;
  }
  if (*count == 0)
    return fail(err, errlen, seq, "%s is empty: remove it for the defaults",
                key);
  return 0;
}

static const char *suite_name(size_t i) {
  return suites[i].name;
}
static const char *curve_name(size_t i) {
  return curves[i].name;
}

/* Appends ":+word" to the priority string unless it is there. */
static void add_word(ms__strbuf_t *b, const char *sign, const char *word) {
  char w[64];
  snprintf(w, sizeof w, ":%s%s", sign, word);
  if (!b->data || !strstr(b->data, w))
    ms__strbuf_printf(b, "%s", w);
}

/* GnuTLS's priority string for *t; NULL if out of memory. */
static char *priority_of(const tls_want_t *t) {
  ms__strbuf_t b = MS_STRBUF_INIT;
  ms__strbuf_printf(&b, "NORMAL:-VERS-ALL");
  static const char *const vers[] = {"VERS-TLS1.0", "VERS-TLS1.1",
                                     "VERS-TLS1.2", "VERS-TLS1.3"};
  for (int v = t->max; v >= t->min; v--)
    add_word(&b, "+", vers[v]);
  ms__strbuf_printf(&b, ":-KX-ALL:-CIPHER-ALL:-MAC-ALL");
  if (t->nsuites > 0) {
    for (int i = 0; i < t->nsuites; i++) {
      const suite_t *s = &suites[t->suite[i]];
      if (s->kx)
        add_word(&b, "+", s->kx);
      add_word(&b, "+", s->cipher);
      add_word(&b, "+", s->mac);
    }
  } else {
    /* The modern defaults: forward secrecy and AEAD; with TLS 1.0 or 1.1
     * allowed (which have no AEAD), Go's CBC-SHA1 suites for them too. */
    static const char *const words[] = {"ECDHE-ECDSA",       "ECDHE-RSA",
                                        "AES-128-GCM",       "AES-256-GCM",
                                        "CHACHA20-POLY1305", "AEAD"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
      add_word(&b, "+", words[i]);
    if (t->min < 2) {
      add_word(&b, "+", "AES-128-CBC");
      add_word(&b, "+", "AES-256-CBC");
      add_word(&b, "+", "SHA1");
    }
  }
  if (t->ncurves > 0) {
    ms__strbuf_printf(&b, ":-GROUP-ALL");
    for (int i = 0; i < t->ncurves; i++)
      add_word(&b, "+", curves[t->curve[i]].group);
  }
  if (t->prefer_server)
    ms__strbuf_printf(&b, ":%%SERVER_PRECEDENCE");
  if (b.oom) {
    ms__strbuf_free(&b);
    return NULL;
  }
  return b.data;
}

/* Checks the priority string with GnuTLS itself: it must parse, and the
 * TLS 1.2 suites it enables must be exactly the ones listed (GnuTLS
 * combines the parts of the listed suites; a combination not listed is
 * refused, named). */
static int check_priority(const char *prio, const tls_want_t *t, char *err,
                          size_t errlen) {
  gnutls_priority_t pc;
  const char *at = NULL;
  if (gnutls_priority_init(&pc, prio, &at) != GNUTLS_E_SUCCESS)
    return fail(err, errlen, t->suites_at,
                "tls_server_config: GnuTLS refuses '%.200s' near '%.40s'", prio,
                at ? at : "");
  int rc = 0, usable = 0;
  for (unsigned i = 0; rc == 0; i++) {
    unsigned idx;
    int r = gnutls_priority_get_cipher_suite_index(pc, i, &idx);
    if (r == GNUTLS_E_REQUESTED_DATA_NOT_AVAILABLE)
      break;
    if (r != GNUTLS_E_SUCCESS)
      continue; /* a suite this GnuTLS cannot use */
    unsigned char id[2];
    gnutls_protocol_t minv;
    const char *gname =
        gnutls_cipher_suite_info(idx, id, NULL, NULL, NULL, &minv);
    if (!gname)
      continue;
    usable++;
    if (t->nsuites <= 0 || minv >= GNUTLS_TLS1_3)
      continue;
    int listed = 0;
    const char *go = NULL;
    for (int j = 0; j < t->nsuites; j++)
      if (memcmp(suites[t->suite[j]].id, id, 2) == 0)
        listed = 1;
    for (size_t j = 0; j < NSUITES; j++)
      if (memcmp(suites[j].id, id, 2) == 0)
        go = suites[j].name;
    if (!listed)
      rc = fail(err, errlen, t->suites_at,
                "cipher_suites: GnuTLS enables suites by their parts (key "
                "exchange, cipher, MAC), and these would also enable %s: "
                "list it too, or list suites whose parts combine to no "
                "other",
                go ? go : gname);
  }
  gnutls_priority_deinit(pc);
  if (rc == 0 && usable == 0)
    rc = fail(err, errlen, t->suites_at,
              "tls_server_config: no cipher suite is left for the TLS "
              "versions allowed (min_version, max_version, cipher_suites)");
  return rc;
}

static int tls_section(yaml_document_t *doc, yaml_node_t *at, yaml_node_t *map,
                       const char *base_dir, mt_webconfig_t *out, char *err,
                       size_t errlen) {
  if (map->type != YAML_MAPPING_NODE)
    return fail(err, errlen, map,
                "tls_server_config must be a mapping (cert_file: ..., "
                "key_file: ...)");
  tls_want_t t = {
      .min = -1, .max = -1, .prefer_server = -1, .nsuites = -1, .ncurves = -1};
  const yaml_node_t *tls_key_at = NULL; /* a TLS setting, for the errors */
  for (yaml_node_pair_t *p = map->data.mapping.pairs.start;
       p < map->data.mapping.pairs.top; p++) {
    yaml_node_t *k = yaml_document_get_node(doc, p->key);
    yaml_node_t *v = yaml_document_get_node(doc, p->value);
    const char *key = scalar(k), *val = scalar(v);
    if (!key || !v)
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
        (strcmp(val, "NoClientCert") == 0 || val[0] == '\0'))
      continue; /* the default: nothing to do */
    if (strcmp(key, "min_version") == 0 || strcmp(key, "max_version") == 0) {
      int *slotv = key[1] == 'i' ? &t.min : &t.max;
      if (*slotv >= 0)
        return fail(err, errlen, k, "%s is given twice: keep one", key);
      *slotv = tls_version(val);
      if (*slotv < 0)
        return fail(err, errlen, v,
                    "%s: '%.32s' is not a TLS version (TLS10, TLS11, TLS12 "
                    "or TLS13)",
                    key, val ? val : "");
      tls_key_at = k;
      continue;
    }
    if (strcmp(key, "prefer_server_cipher_suites") == 0) {
      if (t.prefer_server >= 0)
        return fail(err, errlen, k, "%s is given twice: keep one", key);
      t.prefer_server = yaml_bool(val);
      if (t.prefer_server < 0)
        return fail(err, errlen, v, "%s must be true or false", key);
      continue;
    }
    if (strcmp(key, "cipher_suites") == 0 ||
        strcmp(key, "curve_preferences") == 0) {
      int s = key[1] == 'i';
      int rc = s ? name_list(doc, v, key, suite_name, NSUITES, t.suite,
                             &t.nsuites, err, errlen)
                 : name_list(doc, v, key, curve_name, NCURVES, t.curve,
                             &t.ncurves, err, errlen);
      if (rc != 0)
        return rc;
      if (s)
        t.suites_at = k;
      tls_key_at = k;
      continue;
    }
    static const char *const known[] = {
        "client_auth_type",   "client_ca_file", "client_ca", "cert", "key",
        "client_allowed_sans"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
      if (strcmp(key, known[i]) == 0)
        return fail(err, errlen, k,
                    "tls_server_config: %s is not supported by memtop serve "
                    "(client certificates and inline keys are not: it takes "
                    "cert_file and key_file): remove it, or put memtop "
                    "behind a proxy that applies it",
                    key);
    return fail(err, errlen, k,
                "tls_server_config: unknown key '%.64s' (memtop takes "
                "cert_file, key_file, min_version, max_version, "
                "cipher_suites, curve_preferences, "
                "prefer_server_cipher_suites)",
                key);
  }
  if (!out->cert_file != !out->key_file)
    return fail(err, errlen, at,
                "tls_server_config needs both cert_file and key_file");
  if (!out->cert_file) {
    if (tls_key_at)
      return fail(err, errlen, tls_key_at,
                  "tls_server_config: TLS settings without cert_file and "
                  "key_file would serve plain HTTP: add them, or remove "
                  "the settings");
    return 0;
  }
  /* exporter-toolkit's defaults: TLS 1.2 to 1.3, the server's order. */
  if (t.min < 0)
    t.min = 2;
  if (t.max < 0)
    t.max = 3;
  if (t.prefer_server < 0)
    t.prefer_server = 1;
  if (t.min > t.max)
    return fail(err, errlen, at,
                "tls_server_config: min_version TLS1%d is above max_version "
                "TLS1%d",
                t.min, t.max);
  if (!t.suites_at)
    t.suites_at = at;
  out->tls_priority = priority_of(&t);
  if (!out->tls_priority)
    return MS_ENOMEM;
  return check_priority(out->tls_priority, &t, err, errlen);
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
                  "htpasswd -nBC 10 \"\" | cut -d: -f2)",
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

/* The cache (and bcrypt_runs) of every config, for checks that run on
 * several of libuv's workers at once. The hashing runs outside it. */
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

/* The cache's digest of a password: SHA-512-crypt, 1000 rounds, under
 * this process's random salt (made on first use). Returns 0, or, when no
 * digest could be made (the cache is then not used), MS_EAGAIN (no
 * random salt yet: getrandom failed, the next check tries again) or
 * MS_ENOSYS (crypt_r has no SHA-512-crypt here). */
static int cache_digest(mt_webconfig_t *w, const char *password,
                        struct crypt_data *cd, char out[128]) {
  char salt_spec[sizeof w->cache_salt];
  pthread_mutex_lock(&cache_lock);
  if (!w->cache_salt[0]) {
    static const char b64[] =
        "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    unsigned char r[16];
    if (getrandom(r, sizeof r, 0) == (ssize_t)sizeof r) {
      char salt[17];
      for (size_t i = 0; i < 16; i++)
        salt[i] = b64[r[i] & 63];
      salt[16] = '\0';
      snprintf(w->cache_salt, sizeof w->cache_salt, "$6$rounds=1000$%s$", salt);
    }
  }
  memcpy(salt_spec, w->cache_salt, sizeof salt_spec);
  pthread_mutex_unlock(&cache_lock);
  if (!salt_spec[0])
    return MS_EAGAIN;
  const char *d = crypt_r(password, salt_spec, cd);
  if (!d || d[0] == '*' || strlen(d) >= 128)
    return MS_ENOSYS;
  memcpy(out, d, strlen(d) + 1);
  return 0;
}

static int check(mt_webconfig_t *w, const char *user, const char *password,
                 int cache_only) {
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
    pthread_mutex_lock(&cache_lock);
    for (size_t i = 0; i < MT_WEB_CACHE; i++)
      if (w->cache[i].digest[0] && w->cache[i].user == ui &&
          same(digest, w->cache[i].digest))
        ok = 1;
    pthread_mutex_unlock(&cache_lock);
  }
  if (!ok && !cache_only) {
    /* An unknown user is hashed against a known user's hash all the
     * same. */
    const char *hash = ui < w->nusers ? w->users[ui].hash : w->users[0].hash;
    const char *got = crypt_r(password, hash, cd);
    ok = got && got[0] != '*' && same(got, hash) && ui < w->nusers;
    pthread_mutex_lock(&cache_lock);
    w->bcrypt_runs++;
    if (ok && have_digest) {
      mt_web_cached_t *c = &w->cache[w->cache_next++ % MT_WEB_CACHE];
      c->user = ui;
      memcpy(c->digest, digest, sizeof c->digest);
    }
    pthread_mutex_unlock(&cache_lock);
  }
  explicit_bzero(digest, sizeof digest);
  explicit_bzero(cd, sizeof *cd);
  free(cd);
  return ok;
}

int mt_webconfig_check(mt_webconfig_t *w, const char *user,
                       const char *password) {
  return check(w, user, password, 0);
}

int mt_webconfig_check_cached(mt_webconfig_t *w, const char *user,
                              const char *password) {
  return check(w, user, password, 1);
}

void mt_webconfig_free(mt_webconfig_t *w) {
  if (!w)
    return;
  free(w->cert_file);
  free(w->key_file);
  free(w->tls_priority);
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

static void stamp_one(const char *path, uint64_t *dev, uint64_t *ino,
                      uint64_t *size, uint64_t *mtime_ns, uint64_t *ctime_ns,
                      int *missing) {
  struct stat st;
  *dev = *ino = *size = *mtime_ns = *ctime_ns = 0;
  *missing = !path || stat(path, &st) != 0;
  if (*missing)
    return;
  *dev = (uint64_t)st.st_dev;
  *ino = (uint64_t)st.st_ino;
  *size = (uint64_t)st.st_size;
  *mtime_ns =
      (uint64_t)st.st_mtim.tv_sec * 1000000000u + (uint64_t)st.st_mtim.tv_nsec;
  *ctime_ns =
      (uint64_t)st.st_ctim.tv_sec * 1000000000u + (uint64_t)st.st_ctim.tv_nsec;
}

void mt_webconfig_stamp(const char *path, const mt_webconfig_t *w,
                        mt_webstamp_t *out) {
  const char *paths[3] = {path, w ? w->cert_file : NULL,
                          w ? w->key_file : NULL};
  memset(out, 0, sizeof *out);
  for (int i = 0; i < 3; i++)
    stamp_one(paths[i], &out->f[i].dev, &out->f[i].ino, &out->f[i].size,
              &out->f[i].mtime_ns, &out->f[i].ctime_ns, &out->f[i].missing);
}

int mt_webstamp_same(const mt_webstamp_t *a, const mt_webstamp_t *b) {
  return memcmp(a, b, sizeof *a) == 0;
}
