/*
 * httpd.c - libmicrohttpd on memtop's libuv loop (see httpd.h).
 *
 * libmicrohttpd runs without a thread of its own (MHD_USE_EPOLL, no
 * internal polling thread): its epoll descriptor, which becomes readable
 * whenever any of its sockets needs attention, is watched by a uv_poll_t,
 * and MHD_get_timeout() sets a uv_timer_t for its connection timeouts.
 * After each MHD_run() both are armed again. Everything therefore runs on
 * the loop's thread, the owner's hooks included.
 *
 * A scrape is a suspended connection (MHD_ALLOW_SUSPEND_RESUME): the
 * access handler hands it to the owner and suspends it unless the owner
 * answered at once; mt_scrape_answer() resumes it, libmicrohttpd calls the
 * handler again, and the handler queues the answer. A request whose
 * password must be checked waits suspended the same way while libuv's
 * workers check it (uv_queue_work): bcrypt costs 70 ms at cost 10, which
 * on the loop would stall every scrape for every wrong password sent.
 *
 * Every connection has a record (MHD_OPTION_NOTIFY_CONNECTION): its
 * address and the deadline of what it is doing (its headers, or sending
 * an answer), checked every second; the accept policy uses them to let a
 * new connection in when every slot is taken (httpd.h).
 */
#include "exporter/httpd.h"

#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <microhttpd.h>
#include <math.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include "memstats.h"
#include "exporter/negotiate.h"

#define CT_TEXT "text/plain; version=0.0.4; charset=utf-8"
#define CT_OPENMETRICS                                                         \
  "application/openmetrics-text; version=1.0.0; charset=utf-8"
#define REALM "memtop"
#define NS_PER_S 1000000000ull

/* An IPv4 address (as ::ffff:a.b.c.d) or an IPv6 /64. */
typedef struct addr_key_s {
  unsigned char b[16];
} addr_key_t;

/* A connection (its socket context). */
typedef struct conn_rec_s {
  struct conn_rec_s *prev, *next;
  struct MHD_Connection *conn;
  addr_key_t addr;
  int reading;           /* waiting for a request's headers */
  int evicted;           /* shut down by memtop: closing */
  mt_scrape_t *checking; /* its request, while its password is checked */
  uint64_t since_ns;     /* when it began to wait for its headers */
  uint64_t deadline_ns;  /* 0: none (it waits for memtop) */
} conn_rec_t;

/* An address's bucket of tries (wrong passwords, TLS handshakes). */
typedef struct bucket_s {
  addr_key_t addr;
  double tries; /* left, up to the bucket's size */
  uint64_t at_ns;
  int used;
} bucket_t;

/* The buckets of one kind: so many tries, one more every every_s. */
typedef struct buckets_s {
  bucket_t tab[MT_HTTPD_FAIL_ADDRS];
  double size, every_s;
} buckets_t;

enum { AUTH_NONE, AUTH_PENDING, AUTH_OK, AUTH_FAILED, AUTH_LIMITED };

/* What a request asks for. */
enum { REQ_METRICS, REQ_PPROF, REQ_LANDING };

/* A web config as read at one moment, with the certificate chain and key
 * handed to GnuTLS at handshakes: referenced by the server while it is
 * current and by each password check running on a worker; once replaced
 * it is kept MT_HTTPD_HEADERS_S * 2 more (a handshake begun with it has
 * ended by then: the headers must have come), then freed with its last
 * reference. The first one is the caller's (borrowed: never freed). */
#define WEB_CHAIN_MAX 16
typedef struct web_s {
  mt_webconfig_t *cfg;
  mt_webconfig_t own;
  int borrowed;
  int refs;
  struct web_s *next; /* the retired list */
  uint64_t retired_ns;
  mt_webstamp_t stamp;
  gnutls_pcert_st chain[WEB_CHAIN_MAX];
  unsigned nchain;
  gnutls_privkey_t key;
} web_t;

typedef struct auth_job_s auth_job_t;

struct mt_scrape_s {
  mt_httpd_t *h;
  struct MHD_Connection *conn;
  mt_scrape_t *next; /* the server's list of scrapes not yet answered */
  int kind;          /* REQ_* */
  int openmetrics, gzip;
  int answered;        /* mt_scrape_answer() ran: body holds the answer */
  int suspended;       /* the connection waits for it */
  int cancelled;       /* the server stops: answer 503 */
  mt_answer_t *answer; /* what it is answered (a reference) */
  /* The password check (AUTH_*), its credentials while it runs, the
   * connection's record, and the place in the queue for bcrypt. */
  int auth;
  unsigned retry_after_s;
  char *user, *pass;
  auth_job_t *job;
  conn_rec_t *rec;
  mt_scrape_t *next_check;
};

/* A check on a worker: its own copies of the credentials; s is NULL once
 * the request is gone (the answer is then dropped). */
struct auth_job_s {
  uv_work_t req;
  mt_httpd_t *h;
  mt_scrape_t *s;
  web_t *web; /* a reference */
  char *user, *pass;
  int full; /* 0: the cache only; 1: bcrypt if need be */
  int ok;
};

struct mt_httpd_s {
  uv_loop_t *loop;
  struct MHD_Daemon *d;
  web_t *web;     /* the current web config (a reference) */
  web_t *retired; /* replaced ones still referenced or recent */
  int web_bad;    /* the file no longer reads: requests get 500 */
  int cert_cb;    /* the certificate is given at each handshake */
  char web_err[512];
  mt_httpd_hooks_t hooks;
  const char *metrics_path;
  uv_poll_t poll;
  uv_timer_t timer;
  uv_timer_t sweep; /* the connections' deadlines, every second */
  int handles;      /* uv handles not yet closed */
  int jobs;         /* checks on the workers */
  int stopping;     /* freed when handles and jobs are both 0 */
  int listen_fd;
  mt_scrape_t *waiting;
  conn_rec_t *conns;
  size_t nconns, nevicted;
  mt_scrape_t *check_head, *check_tail; /* waiting for bcrypt */
  int bcrypts;                          /* bcrypt checks running */
  int tls;
  buckets_t fails;      /* wrong passwords */
  buckets_t handshakes; /* TLS connections */
  char url[128];
};

static uint64_t now_ns(void) {
  return uv_hrtime();
}

/* ------------------------------------------------------------------------
 * Running libmicrohttpd from the loop
 * ------------------------------------------------------------------------ */

static void run(mt_httpd_t *h);

static void timer_cb(uv_timer_t *t) {
  run(t->data);
}

static void poll_cb(uv_poll_t *p, int status, int events) {
  (void)status;
  (void)events;
  run(p->data);
}

/* Runs what libmicrohttpd has to do now, then arms the timer for what it
 * will have to do next (a connection's timeout). */
static void run(mt_httpd_t *h) {
  if (!h->d)
    return;
  MHD_run(h->d);
  MHD_UNSIGNED_LONG_LONG ms;
  if (MHD_get_timeout(h->d, &ms) == MHD_YES)
    uv_timer_start(&h->timer, timer_cb, (uint64_t)ms, 0);
  else
    uv_timer_stop(&h->timer);
}

/* A resumed connection is served by the next run: soon. */
static void run_soon(mt_httpd_t *h) {
  if (h->d)
    uv_timer_start(&h->timer, timer_cb, 0, 0);
}

/* ------------------------------------------------------------------------
 * Addresses
 * ------------------------------------------------------------------------ */

static addr_key_t key_of(const struct sockaddr *sa) {
  addr_key_t k;
  memset(&k, 0, sizeof k);
  if (sa && sa->sa_family == AF_INET) {
    k.b[10] = k.b[11] = 0xff;
    memcpy(k.b + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
  } else if (sa && sa->sa_family == AF_INET6) {
    const unsigned char *a =
        ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
    static const unsigned char v4mapped[12] = {0, 0, 0, 0, 0,    0,
                                               0, 0, 0, 0, 0xff, 0xff};
    if (memcmp(a, v4mapped, 12) == 0)
      memcpy(k.b, a, 16);
    else
      memcpy(k.b, a, 8); /* the /64: one host's addresses */
  }
  return k;
}

static int same_addr(const addr_key_t *a, const addr_key_t *b) {
  return memcmp(a->b, b->b, sizeof a->b) == 0;
}

static conn_rec_t *rec_of(struct MHD_Connection *c) {
  const union MHD_ConnectionInfo *i =
      MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  return i ? i->socket_context : NULL;
}

/* ------------------------------------------------------------------------
 * The web config, read again when it changes
 * ------------------------------------------------------------------------ */

static void web_free(web_t *w) {
  for (unsigned i = 0; i < w->nchain; i++)
    gnutls_pcert_deinit(&w->chain[i]);
  if (w->key)
    gnutls_privkey_deinit(w->key);
  if (!w->borrowed)
    mt_webconfig_free(&w->own);
  free(w);
}

/* The public key of a certificate or a private key, as DER: 0 or a
 * GnuTLS error. */
static int pub_der(gnutls_pubkey_t pub, gnutls_datum_t *out) {
  return gnutls_pubkey_export2(pub, GNUTLS_X509_FMT_DER, out);
}

/* The chain and key of w's config, made ready for the handshakes, and
 * checked to belong together (a rotation caught between writing the
 * certificate and the key is refused rather than served). */
static int web_load_tls(web_t *w, char *err, size_t errlen) {
  const mt_webconfig_t *c = w->cfg;
  if (!c->cert_pem || !c->key_pem)
    return 0;
  gnutls_datum_t cert = {(unsigned char *)c->cert_pem,
                         (unsigned)strlen(c->cert_pem)};
  gnutls_datum_t key = {(unsigned char *)c->key_pem,
                        (unsigned)strlen(c->key_pem)};
  unsigned n = WEB_CHAIN_MAX;
  int rc = gnutls_pcert_list_import_x509_raw(w->chain, &n, &cert,
                                             GNUTLS_X509_FMT_PEM, 0);
  if (rc < 0 || n == 0) {
    snprintf(err, errlen, "%s: no certificate GnuTLS takes (%s)", c->cert_file,
             rc < 0 ? gnutls_strerror(rc) : "none found");
    return MS_EINVAL;
  }
  w->nchain = n;
  rc = gnutls_privkey_init(&w->key);
  if (rc == 0)
    rc = gnutls_privkey_import_x509_raw(w->key, &key, GNUTLS_X509_FMT_PEM, NULL,
                                        0);
  if (rc < 0) {
    snprintf(err, errlen, "%s: no private key GnuTLS takes (%s)", c->key_file,
             gnutls_strerror(rc));
    return MS_EINVAL;
  }
  gnutls_pubkey_t mine = NULL;
  gnutls_datum_t a = {NULL, 0}, b = {NULL, 0};
  int same = gnutls_pubkey_init(&mine) == 0 &&
             gnutls_pubkey_import_privkey(mine, w->key, 0, 0) == 0 &&
             pub_der(mine, &a) == 0 && pub_der(w->chain[0].pubkey, &b) == 0 &&
             a.size == b.size && memcmp(a.data, b.data, a.size) == 0;
  gnutls_free(a.data);
  gnutls_free(b.data);
  if (mine)
    gnutls_pubkey_deinit(mine);
  if (!same) {
    snprintf(err, errlen, "%s is not the key of the certificate %s",
             c->key_file, c->cert_file);
    return MS_EINVAL;
  }
  return 0;
}

static void web_unref(web_t *w) {
  if (w)
    w->refs--;
}

/* Frees the replaced configs no one uses any more (see web_t); all of
 * them when the server is freed. */
static void web_sweep(mt_httpd_t *h, uint64_t now, int all) {
  for (web_t **p = &h->retired; *p;) {
    web_t *w = *p;
    if (all ||
        (w->refs <= 0 &&
         now - w->retired_ns > (uint64_t)MT_HTTPD_HEADERS_S * 2 * NS_PER_S)) {
      *p = w->next;
      web_free(w);
    } else {
      p = &w->next;
    }
  }
}

/* Says on stderr once why the web config no longer serves. */
static void web_failed(mt_httpd_t *h, const char *why) {
  if (h->web_bad && strcmp(h->web_err, why) == 0)
    return;
  h->web_bad = 1;
  snprintf(h->web_err, sizeof h->web_err, "%s", why);
  fprintf(stderr,
          "memtop: the web config changed and cannot be used: %s; "
          "requests are refused (500) until it is fixed\n",
          h->web_err);
}

static int same_str(const char *a, const char *b) {
  return a == b || (a && b && strcmp(a, b) == 0);
}

/* The web config a request or a handshake uses now: read again first if
 * its file, certificate or key changed. NULL when the file does not read
 * (or asks what takes a restart): the caller refuses. */
static web_t *web_current(mt_httpd_t *h) {
  const char *path = h->hooks.web_path;
  if (!path)
    return h->web;
  mt_webstamp_t before;
  mt_webconfig_stamp(path, h->web->cfg, &before);
  if (mt_webstamp_same(&before, &h->web->stamp))
    return h->web_bad ? NULL : h->web;
  web_t *n = calloc(1, sizeof *n);
  char err[512];
  if (!n) {
    web_failed(h, "out of memory");
    return NULL;
  }
  n->cfg = &n->own;
  int rc = mt_webconfig_load(path, &n->own, err, sizeof err);
  if (rc == 0)
    rc = web_load_tls(n, err, sizeof err);
  if (rc == 0 && (n->cfg->cert_pem != NULL) != h->tls) {
    snprintf(err, sizeof err,
             "%s: TLS is turned %s, which takes a restart of memtop serve",
             path, h->tls ? "off" : "on");
    rc = MS_EINVAL;
  }
  if (rc == 0 && h->tls && !h->cert_cb &&
      (!same_str(n->cfg->cert_pem, h->web->cfg->cert_pem) ||
       !same_str(n->cfg->key_pem, h->web->cfg->key_pem))) {
    snprintf(err, sizeof err,
             "%s: the certificate or key changed, and this libmicrohttpd "
             "cannot take a new one while it runs: restart memtop serve",
             path);
    rc = MS_EINVAL;
  }
  if (rc == 0 && !same_str(n->cfg->tls_priority, h->web->cfg->tls_priority)) {
    snprintf(err, sizeof err,
             "%s: the TLS versions, suites or curves changed, which takes a "
             "restart of memtop serve",
             path);
    rc = MS_EINVAL;
  }
  if (rc != 0) {
    /* Read again at the next request: it may be in the middle of being
     * written. */
    web_free(n);
    web_failed(h, err);
    return NULL;
  }
  mt_webconfig_stamp(path, n->cfg, &n->stamp);
  /* Written while it was read: read again next time. */
  if (memcmp(&n->stamp.f[0], &before.f[0], sizeof before.f[0]) != 0)
    memset(&n->stamp, 0, sizeof n->stamp);
  if (h->web_bad)
    fprintf(stderr, "memtop: the web config reads again: serving\n");
  h->web_bad = 0;
  n->refs = 1;
  web_t *old = h->web;
  h->web = n;
  old->refs--;
  old->retired_ns = now_ns();
  old->next = h->retired;
  h->retired = old;
  return n;
}

/* The server whose handshakes cert_cb serves: GnuTLS's callback has no
 * argument of its own, and memtop runs one server. */
static mt_httpd_t *tls_server;

/* A TLS handshake: the certificate of the web config as it is now (a
 * rotated one from the first handshake after the rotation). Returns 0,
 * or -1 when there is none: GnuTLS's contract for the retrieve
 * callback, not an MS_E* code. */
static int cert_cb(gnutls_session_t sess, const gnutls_datum_t *req_ca_dn,
                   int nreqs, const gnutls_pk_algorithm_t *pk_algos,
                   int pk_algos_length, gnutls_pcert_st **pcert,
                   unsigned int *pcert_length, gnutls_privkey_t *pkey) {
  (void)sess;
  (void)req_ca_dn;
  (void)nreqs;
  (void)pk_algos;
  (void)pk_algos_length;
  web_t *w = tls_server ? web_current(tls_server) : NULL;
  if (!w || w->nchain == 0 || !w->key)
    return -1;
  *pcert = w->chain;
  *pcert_length = w->nchain;
  *pkey = w->key;
  return 0;
}

/* ------------------------------------------------------------------------
 * Tries per address: wrong passwords, TLS handshakes
 * ------------------------------------------------------------------------ */

static void refill(const buckets_t *k, bucket_t *f, uint64_t now) {
  double add = (double)(now - f->at_ns) / (k->every_s * 1e9);
  f->tries = f->tries + add > k->size ? k->size : f->tries + add;
  f->at_ns = now;
}

/* The tries a has left (all of them if it has no bucket). */
static double tries_left(buckets_t *k, const addr_key_t *a, uint64_t now) {
  for (size_t i = 0; i < MT_HTTPD_FAIL_ADDRS; i++)
    if (k->tab[i].used && same_addr(&k->tab[i].addr, a)) {
      refill(k, &k->tab[i], now);
      return k->tab[i].tries;
    }
  return k->size;
}

/* One try fewer for a. The table full, the address that has the most
 * tries left (the least suspect) makes room. */
static void take_try(buckets_t *k, const addr_key_t *a, uint64_t now) {
  bucket_t *f = NULL;
  for (size_t i = 0; i < MT_HTTPD_FAIL_ADDRS && !f; i++)
    if (k->tab[i].used && same_addr(&k->tab[i].addr, a))
      f = &k->tab[i];
  if (!f) {
    for (size_t i = 0; i < MT_HTTPD_FAIL_ADDRS; i++) {
      bucket_t *e = &k->tab[i];
      if (e->used)
        refill(k, e, now);
      if (!f || !e->used || (f->used && e->tries > f->tries))
        f = e;
      if (!e->used)
        break;
    }
    f->used = 1;
    f->addr = *a;
    f->tries = k->size;
    f->at_ns = now;
  }
  refill(k, f, now);
  f->tries = f->tries >= 1 ? f->tries - 1 : 0;
}

/* 1 if the address has no try left; *retry: the seconds until it has. */
static int fail_blocked(mt_httpd_t *h, const addr_key_t *a, unsigned *retry) {
  double left = tries_left(&h->fails, a, now_ns());
  if (left >= 1)
    return 0;
  *retry = (unsigned)ceil((1 - left) * h->fails.every_s);
  if (*retry < 1)
    *retry = 1;
  return 1;
}

static void fail_count(mt_httpd_t *h, const addr_key_t *a) {
  take_try(&h->fails, a, now_ns());
}

/* ------------------------------------------------------------------------
 * Connections: their records, deadlines and the accept policy
 * ------------------------------------------------------------------------ */

static void forget_check(mt_httpd_t *h, mt_scrape_t *s);
static void check_done(mt_scrape_t *s, int auth);

/* Whether the connection may be closed to make room: it sends its
 * headers, or its password waits to be checked (a bcrypt already running
 * is let finish). */
static int evictable(const conn_rec_t *r) {
  if (r->evicted)
    return 0;
  if (r->checking)
    return !(r->checking->job && r->checking->job->full);
  return r->reading;
}

/* Closes a connection memtop gave up on: shut down, libmicrohttpd sees it
 * at its next run and closes it (its slot is counted free at once). One
 * whose password waits to be checked is refused (429) and resumed, to be
 * seen closed. */
static void evict(mt_httpd_t *h, conn_rec_t *r) {
  if (r->evicted)
    return;
  const union MHD_ConnectionInfo *i =
      MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
  if (!i)
    return;
  shutdown(i->connect_fd, SHUT_RDWR);
  r->evicted = 1;
  h->nevicted++;
  if (r->checking) {
    mt_scrape_t *s = r->checking;
    forget_check(h, s);
    s->retry_after_s = 1;
    check_done(s, AUTH_LIMITED);
  }
}

static void notify_cb(void *cls, struct MHD_Connection *c, void **ctx,
                      enum MHD_ConnectionNotificationCode toe) {
  mt_httpd_t *h = cls;
  if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
    conn_rec_t *r = calloc(1, sizeof *r);
    *ctx = r;
    if (!r)
      return; /* untracked: bounded by libmicrohttpd's limits alone */
    const union MHD_ConnectionInfo *i =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    r->conn = c;
    r->addr = key_of(i ? i->client_addr : NULL);
    r->reading = 1;
    r->since_ns = now_ns();
    r->deadline_ns = r->since_ns + (uint64_t)MT_HTTPD_HEADERS_S * NS_PER_S;
    r->next = h->conns;
    if (h->conns)
      h->conns->prev = r;
    h->conns = r;
    h->nconns++;
    return;
  }
  conn_rec_t *r = *ctx;
  if (!r)
    return;
  if (r->prev)
    r->prev->next = r->next;
  else
    h->conns = r->next;
  if (r->next)
    r->next->prev = r->prev;
  h->nconns--;
  if (r->evicted)
    h->nevicted--;
  free(r);
  *ctx = NULL;
}

/* A new connection from addr: in, if a slot is free or can be freed by
 * closing the oldest connection still sending its headers (or waiting for
 * its password's check) from the address that holds the most. */
static enum MHD_Result accept_cb(void *cls, const struct sockaddr *addr,
                                 socklen_t len) {
  mt_httpd_t *h = cls;
  (void)len;
  /* A TLS handshake costs the loop milliseconds of CPU before any
   * password is seen: one address has so many a second. */
  if (h->tls) {
    addr_key_t k = key_of(addr);
    uint64_t now = now_ns();
    if (tries_left(&h->handshakes, &k, now) < 1)
      return MHD_NO;
    take_try(&h->handshakes, &k, now);
  }
  if (h->nconns - h->nevicted < MT_HTTPD_CONNECTIONS)
    return MHD_YES;
  conn_rec_t *victim = NULL;
  size_t victim_n = 0;
  for (conn_rec_t *r = h->conns; r; r = r->next) {
    if (!evictable(r))
      continue;
    size_t n = 0;
    for (conn_rec_t *o = h->conns; o; o = o->next)
      n += !o->evicted && same_addr(&o->addr, &r->addr);
    if (n > victim_n || (n == victim_n && r->since_ns < victim->since_ns)) {
      victim = r;
      victim_n = n;
    }
  }
  if (!victim)
    return MHD_NO; /* every connection waits for memtop or sends */
  evict(h, victim);
  return MHD_YES;
}

/* Every second: the connections past their deadline are closed. */
static void sweep_cb(uv_timer_t *t) {
  mt_httpd_t *h = t->data;
  uint64_t now = now_ns();
  for (conn_rec_t *r = h->conns; r; r = r->next)
    if (!r->evicted && r->deadline_ns && now >= r->deadline_ns)
      evict(h, r);
  web_sweep(h, now, 0);
}

/* ------------------------------------------------------------------------
 * Answers
 * ------------------------------------------------------------------------ */

static enum MHD_Result plain(struct MHD_Connection *c, unsigned status,
                             const char *text, const char *allow) {
  struct MHD_Response *r = MHD_create_response_from_buffer(
      strlen(text), (void *)(uintptr_t)text, MHD_RESPMEM_MUST_COPY);
  if (!r)
    return MHD_NO;
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
                          "text/plain; charset=utf-8");
  if (allow)
    MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
  enum MHD_Result rc = MHD_queue_response(c, status, r);
  MHD_destroy_response(r);
  return rc;
}

/* gzip of in[0..n) into a malloc'd buffer; NULL if it failed (the body
 * then goes uncompressed). */
static unsigned char *gzip_of(const char *in, size_t n, size_t *out_len) {
  z_stream z;
  memset(&z, 0, sizeof z);
  /* The fastest level: an exposition is very repetitive text, which level
   * 1 already shrinks about 25 times (1.5 MB of 200 processes to 60 KB),
   * and the default level took a fifth of a scrape's CPU. */
  if (deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8,
                   Z_DEFAULT_STRATEGY) != Z_OK)
    return NULL;
  uLong cap = deflateBound(&z, (uLong)n);
  unsigned char *out = malloc(cap);
  if (!out) {
    deflateEnd(&z);
    return NULL;
  }
  z.next_in = (Bytef *)(uintptr_t)in;
  z.avail_in = (uInt)n;
  z.next_out = out;
  z.avail_out = (uInt)cap;
  int rc = deflate(&z, Z_FINISH);
  *out_len = z.total_out;
  deflateEnd(&z);
  if (rc != Z_STREAM_END) {
    free(out);
    return NULL;
  }
  return out;
}

/* An exposition shared by the scrapes of one format answered at once: the
 * text is handed to libmicrohttpd as one response (which it frees when
 * the last connection sending it is done), gzipped at most once into
 * another. A reference per scrape holding it, and the owner's. */
struct mt_answer_s {
  int refs;
  int oom;
  int openmetrics;
  unsigned status;  /* 0: 200 */
  int raw;          /* sent as it is: never gzipped */
  const char *data; /* plain's buffer, alive while plain is held */
  size_t len;
  struct MHD_Response *plain, *gz;
  int gz_tried;
};

static void add_headers(struct MHD_Response *r, int openmetrics, int gz) {
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
                          openmetrics ? CT_OPENMETRICS : CT_TEXT);
  MHD_add_response_header(r, MHD_HTTP_HEADER_VARY, "Accept, Accept-Encoding");
  if (gz)
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_ENCODING, "gzip");
}

mt_answer_t *mt_answer_new(ms__strbuf_t *body, int openmetrics) {
  mt_answer_t *a = calloc(1, sizeof *a);
  if (!a) {
    ms__strbuf_free(body);
    return NULL;
  }
  a->refs = 1;
  a->openmetrics = openmetrics;
  a->oom = body->oom;
  if (!a->oom) {
    char *owned = body->data;
    a->len = body->len;
    a->plain = MHD_create_response_from_buffer(
        a->len, owned ? (void *)owned : (void *)"",
        owned ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (a->plain) {
      /* The buffer is libmicrohttpd's now. */
      a->data = owned ? owned : "";
      memset(body, 0, sizeof *body);
      add_headers(a->plain, openmetrics, 0);
    } else {
      a->oom = 1;
    }
  }
  ms__strbuf_free(body);
  return a;
}

void mt_scrape_answer_bytes(mt_scrape_t *s, unsigned status, const char *ctype,
                            const char *filename, ms__strbuf_t *body) {
  if (!s || s->answered) {
    ms__strbuf_free(body);
    return;
  }
  mt_answer_t *a = mt_answer_new(body, 0);
  if (a) {
    a->raw = 1;
    a->status = status;
    if (a->plain) {
      /* The metrics' headers replaced: this is no exposition. */
      MHD_del_response_header(a->plain, MHD_HTTP_HEADER_CONTENT_TYPE, CT_TEXT);
      MHD_del_response_header(a->plain, MHD_HTTP_HEADER_VARY,
                              "Accept, Accept-Encoding");
      MHD_add_response_header(a->plain, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
      if (filename) {
        char v[160];
        snprintf(v, sizeof v, "attachment; filename=\"%s\"", filename);
        MHD_add_response_header(a->plain, "Content-Disposition", v);
      }
    }
  }
  mt_scrape_answer_with(s, a);
  mt_answer_release(a);
}

const char *mt_scrape_arg(const mt_scrape_t *s, const char *name) {
  if (!s || !s->conn)
    return NULL;
  return MHD_lookup_connection_value(s->conn, MHD_GET_ARGUMENT_KIND, name);
}

void mt_answer_release(mt_answer_t *a) {
  if (!a || --a->refs > 0)
    return;
  if (a->plain)
    MHD_destroy_response(a->plain);
  if (a->gz)
    MHD_destroy_response(a->gz);
  free(a);
}

void mt_answer_gzip(mt_answer_t *a) {
  if (!a || a->oom || a->raw || a->len == 0 || a->gz_tried)
    return;
  a->gz_tried = 1;
  size_t zn = 0;
  unsigned char *z = gzip_of(a->data, a->len, &zn);
  if (z) {
    a->gz = MHD_create_response_from_buffer(zn, z, MHD_RESPMEM_MUST_FREE);
    if (a->gz)
      add_headers(a->gz, a->openmetrics, 1);
    else
      free(z);
  }
}

static enum MHD_Result answer_metrics(mt_scrape_t *s) {
  struct MHD_Connection *c = s->conn;
  mt_answer_t *a = s->answer;
  if (s->cancelled)
    return plain(c, MHD_HTTP_SERVICE_UNAVAILABLE, "memtop is stopping\n", NULL);
  if (!a || a->oom)
    return plain(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n", NULL);
  struct MHD_Response *r = a->plain;
  if (s->gzip && !a->raw && a->len > 0) {
    mt_answer_gzip(a);
    if (a->gz)
      r = a->gz; /* else the body goes uncompressed */
  }
  if (a->raw)
    r = a->plain;
  enum MHD_Result rc =
      MHD_queue_response(c, a->status ? a->status : MHD_HTTP_OK, r);
  /* Queued: libmicrohttpd holds the response as long as it sends it. */
  s->answer = NULL;
  mt_answer_release(a);
  return rc;
}

/* ------------------------------------------------------------------------
 * Password checks, off the loop
 * ------------------------------------------------------------------------ */

static void run_soon(mt_httpd_t *h);
static void start_check(mt_httpd_t *h, mt_scrape_t *s, int full);

static void free_creds(char **user, char **pass) {
  if (*pass) {
    explicit_bzero(*pass, strlen(*pass));
    free(*pass);
  }
  free(*user);
  *user = *pass = NULL;
}

static void maybe_free(mt_httpd_t *h) {
  if (h->stopping && h->handles == 0 && h->jobs == 0) {
    web_sweep(h, 0, 1);
    web_free(h->web);
    free(h);
  }
}

/* The check is over: the connection is served again. */
static void check_done(mt_scrape_t *s, int auth) {
  s->auth = auth;
  free_creds(&s->user, &s->pass);
  if (s->rec)
    s->rec->checking = NULL;
  if (s->suspended) {
    s->suspended = 0;
    MHD_resume_connection(s->conn);
    run_soon(s->h);
  }
}

/* Starts the checks waiting for bcrypt, as many as may run. */
static void pump(mt_httpd_t *h) {
  while (h->bcrypts < MT_HTTPD_BCRYPTS && h->check_head) {
    mt_scrape_t *s = h->check_head;
    h->check_head = s->next_check;
    if (!h->check_head)
      h->check_tail = NULL;
    s->next_check = NULL;
    start_check(h, s, 1);
  }
}

static void unqueue_check(mt_httpd_t *h, mt_scrape_t *s) {
  mt_scrape_t *prev = NULL;
  for (mt_scrape_t *q = h->check_head; q; prev = q, q = q->next_check)
    if (q == s) {
      if (prev)
        prev->next_check = s->next_check;
      else
        h->check_head = s->next_check;
      if (h->check_tail == s)
        h->check_tail = prev;
      s->next_check = NULL;
      return;
    }
}

static void work_cb(uv_work_t *req) {
  auth_job_t *j = req->data;
  j->ok = j->full ? mt_webconfig_check(j->web->cfg, j->user, j->pass)
                  : mt_webconfig_check_cached(j->web->cfg, j->user, j->pass);
}

static void after_cb(uv_work_t *req, int status) {
  auth_job_t *j = req->data;
  mt_httpd_t *h = j->h;
  mt_scrape_t *s = j->s;
  int ok = status == 0 && j->ok, full = j->full;
  free_creds(&j->user, &j->pass);
  web_unref(j->web);
  free(j);
  h->jobs--;
  if (full)
    h->bcrypts--;
  if (s) {
    s->job = NULL;
    if (ok) {
      check_done(s, AUTH_OK);
    } else if (full) {
      fail_count(h, &s->rec->addr);
      check_done(s, AUTH_FAILED);
    } else if (h->stopping) {
      check_done(s, AUTH_FAILED);
    } else if (fail_blocked(h, &s->rec->addr, &s->retry_after_s)) {
      check_done(s, AUTH_LIMITED);
    } else {
      /* Not a password proven right: bcrypt, in turn. */
      if (h->check_tail)
        h->check_tail->next_check = s;
      else
        h->check_head = s;
      h->check_tail = s;
    }
  }
  if (!h->stopping)
    pump(h);
  maybe_free(h);
}

static void start_check(mt_httpd_t *h, mt_scrape_t *s, int full) {
  auth_job_t *j = calloc(1, sizeof *j);
  if (j) {
    j->h = h;
    j->s = s;
    j->web = h->web;
    h->web->refs++;
    j->full = full;
    j->user = strdup(s->user);
    j->pass = strdup(s->pass);
    j->req.data = j;
  }
  if (!j || !j->user || !j->pass ||
      uv_queue_work(h->loop, &j->req, work_cb, after_cb) != 0) {
    if (j) {
      free_creds(&j->user, &j->pass);
      web_unref(j->web);
    }
    free(j);
    check_done(s, AUTH_FAILED); /* no check, no entry */
    return;
  }
  s->job = j;
  h->jobs++;
  if (full)
    h->bcrypts++;
}

/* The check of a request that has left (closed, or the server stops):
 * its job runs on, and its answer is dropped. */
static void forget_check(mt_httpd_t *h, mt_scrape_t *s) {
  if (s->job)
    s->job->s = NULL;
  s->job = NULL;
  unqueue_check(h, s);
  free_creds(&s->user, &s->pass);
}

static enum MHD_Result refuse_auth(struct MHD_Connection *c, int limited,
                                   unsigned retry) {
  if (limited) {
    static const char text[] = "429 Too Many Requests: too many wrong "
                               "passwords from this address; try again "
                               "later\n";
    struct MHD_Response *r = MHD_create_response_from_buffer(
        sizeof text - 1, (void *)(uintptr_t)text, MHD_RESPMEM_PERSISTENT);
    if (!r)
      return MHD_NO;
    char v[16];
    snprintf(v, sizeof v, "%u", retry);
    MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, v);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
                            "text/plain; charset=utf-8");
    enum MHD_Result rc = MHD_queue_response(c, MHD_HTTP_TOO_MANY_REQUESTS, r);
    MHD_destroy_response(r);
    return rc;
  }
  static const char text[] = "401 Unauthorized\n";
  struct MHD_Response *r = MHD_create_response_from_buffer(
      sizeof text - 1, (void *)(uintptr_t)text, MHD_RESPMEM_PERSISTENT);
  if (!r)
    return MHD_NO;
  enum MHD_Result rc = MHD_queue_basic_auth_fail_response(c, REALM, r);
  MHD_destroy_response(r);
  return rc;
}

static void unlink_waiting(mt_httpd_t *h, mt_scrape_t *s) {
  for (mt_scrape_t **p = &h->waiting; *p; p = &(*p)->next)
    if (*p == s) {
      *p = s->next;
      break;
    }
  s->next = NULL;
}

/* The connection now waits for memtop (deadline_ns 0), or sends what
 * it was given (MT_HTTPD_SEND_S). */
static void rec_waits(conn_rec_t *r) {
  if (r) {
    r->reading = 0;
    r->deadline_ns = 0;
  }
}
static void rec_sends(conn_rec_t *r) {
  if (r) {
    r->reading = 0;
    r->deadline_ns = now_ns() + (uint64_t)MT_HTTPD_SEND_S * NS_PER_S;
  }
}

/* The landing page at /, as node_exporter has one: what this is, and
 * links to the metrics (and the profiles, when served). The metrics path
 * is --web.telemetry-path's, made of URL-safe characters only (cli.c). */
static enum MHD_Result landing(mt_httpd_t *h, struct MHD_Connection *c) {
  char page[2048];
  snprintf(page, sizeof page,
           "<!DOCTYPE html>\n<html lang=\"en\">\n<head><meta "
           "charset=\"utf-8\"><title>memtop exporter</title></head>\n"
           "<body>\n<h1>memtop exporter</h1>\n"
           "<p>Where the memory of every attachable process goes "
           "(libmemstats), for Prometheus. memtop %s.</p>\n<ul>\n"
           "<li><a href=\"%s\">Metrics</a></li>\n%s</ul>\n</body>\n"
           "</html>\n",
           MS_VERSION_STRING, h->metrics_path,
           h->hooks.pprof ? "<li>Heap profiles: /debug/pprof/heap?pid=PID"
                            "[&amp;seconds=S], for <code>go tool pprof</code>"
                            "</li>\n"
                          : "");
  struct MHD_Response *r = MHD_create_response_from_buffer(
      strlen(page), page, MHD_RESPMEM_MUST_COPY);
  if (!r)
    return MHD_NO;
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
                          "text/html; charset=utf-8");
  enum MHD_Result rc = MHD_queue_response(c, MHD_HTTP_OK, r);
  MHD_destroy_response(r);
  return rc;
}

/* The request, its password proven (or none needed): the landing page
 * is answered here; a scrape or a profile is handed to the owner. */
static enum MHD_Result hand_over(mt_httpd_t *h, mt_scrape_t *s) {
  struct MHD_Connection *c = s->conn;
  if (s->kind == REQ_LANDING) {
    rec_sends(s->rec);
    return landing(h, c);
  }
  const char *accept =
      MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);
  const char *enc = MHD_lookup_connection_value(
      c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT_ENCODING);
  s->openmetrics = mt_accept_openmetrics(accept, MT_HTTPD_HEADER_BYTES);
  s->gzip = mt_accept_gzip(enc, MT_HTTPD_HEADER_BYTES);
  s->next = h->waiting;
  h->waiting = s;
  if (s->kind == REQ_PPROF)
    h->hooks.pprof(h->hooks.arg, s);
  else
    h->hooks.scrape(h->hooks.arg, s);
  if (s->answered) {
    rec_sends(s->rec);
    return answer_metrics(s);
  }
  rec_waits(s->rec);
  s->suspended = 1;
  MHD_suspend_connection(c);
  return MHD_YES;
}

/* A request whose headers have come (see access_cb). */
static char headers_seen;

static enum MHD_Result access_cb(void *cls, struct MHD_Connection *c,
                                 const char *url, const char *method,
                                 const char *version, const char *upload,
                                 size_t *upload_size, void **con_cls) {
  mt_httpd_t *h = cls;
  (void)version;
  (void)upload;
  /* The first call, with the headers only: nothing is answered yet. An
   * answer queued there makes libmicrohttpd close the connection after
   * it (it cannot tell that no body follows), and a scraper's
   * connection is kept alive. A body (on a GET) is read and dropped. */
  if (*con_cls == NULL) {
    *con_cls = &headers_seen;
    rec_sends(rec_of(c));
    return MHD_YES;
  }
  if (*con_cls == &headers_seen) {
    if (*upload_size) {
      *upload_size = 0;
      return MHD_YES;
    }
    *con_cls = NULL;
  }
  mt_scrape_t *s = *con_cls;
  if (s) {
    /* Called again: after a resume, or with upload data (a body on a
     * GET, which is read and dropped). */
    if (*upload_size) {
      *upload_size = 0;
      return MHD_YES;
    }
    if (s->auth == AUTH_PENDING)
      return MHD_YES; /* still being checked */
    if (s->auth == AUTH_FAILED || s->auth == AUTH_LIMITED) {
      rec_sends(s->rec);
      return refuse_auth(c, s->auth == AUTH_LIMITED, s->retry_after_s);
    }
    if (s->auth == AUTH_OK) {
      s->auth = AUTH_NONE;
      if (s->cancelled) {
        rec_sends(s->rec);
        return answer_metrics(s);
      }
      return hand_over(h, s);
    }
    if (!s->answered && !s->cancelled)
      return MHD_YES; /* not answered yet: keep waiting */
    rec_sends(s->rec);
    return answer_metrics(s);
  }
  conn_rec_t *rec = rec_of(c);
  /* The headers are in: what follows is answered at once (sent under
   * its deadline) or waits for memtop. */
  rec_sends(rec);
  int get = strcmp(method, MHD_HTTP_METHOD_GET) == 0;
  int head = strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
  int kind;
  char text[512];
  if (strcmp(url, h->metrics_path) == 0)
    kind = REQ_METRICS;
  else if (strcmp(url, "/") == 0)
    kind = REQ_LANDING;
  else if (h->hooks.pprof && strcmp(url, "/debug/pprof/heap") == 0)
    kind = REQ_PPROF;
  else {
    snprintf(text, sizeof text, "404 Not Found: memtop serves %s\n",
             h->metrics_path);
    return plain(c, MHD_HTTP_NOT_FOUND, text, NULL);
  }
  if (!get && !head) {
    snprintf(text, sizeof text, "405 Method Not Allowed: GET or HEAD %s\n",
             kind == REQ_METRICS ? h->metrics_path
             : kind == REQ_PPROF ? "/debug/pprof/heap"
                                 : "/");
    return plain(c, MHD_HTTP_METHOD_NOT_ALLOWED, text, "GET, HEAD");
  }
  /* The web config as it is now (read again if it changed). */
  web_t *web = web_current(h);
  if (!web)
    return plain(c, MHD_HTTP_INTERNAL_SERVER_ERROR,
                 "500 Internal Server Error: memtop's web config cannot be "
                 "used (its log says why)\n",
                 NULL);
  int need_auth = web->cfg->nusers > 0;
  char *pass = NULL, *user = NULL;
  if (need_auth) {
    user = MHD_basic_auth_get_username_password(c, &pass);
    if (!user || !pass) {
      /* Nothing to check: refused at once, at no cost. */
      if (pass) {
        explicit_bzero(pass, strlen(pass));
        MHD_free(pass);
      }
      if (user)
        MHD_free(user);
      return refuse_auth(c, 0, 0);
    }
    size_t pending = 0;
    for (conn_rec_t *r = h->conns; r; r = r->next)
      pending += rec && r->checking != NULL && same_addr(&r->addr, &rec->addr);
    unsigned retry = 0;
    int limited = !rec || h->stopping || pending >= MT_HTTPD_CHECKS_PER_ADDR;
    if (limited)
      retry = 1;
    s = limited ? NULL : calloc(1, sizeof *s);
    if (s) {
      s->user = strdup(user);
      s->pass = strdup(pass);
    }
    explicit_bzero(pass, strlen(pass));
    MHD_free(pass);
    MHD_free(user);
    if (limited)
      return refuse_auth(c, 1, retry);
    if (!s || !s->user || !s->pass) {
      if (s)
        free_creds(&s->user, &s->pass);
      free(s);
      return plain(c, MHD_HTTP_SERVICE_UNAVAILABLE, "out of memory\n", NULL);
    }
  } else {
    s = calloc(1, sizeof *s);
    if (!s)
      return plain(c, MHD_HTTP_SERVICE_UNAVAILABLE, "out of memory\n", NULL);
  }
  s->h = h;
  s->conn = c;
  s->rec = rec;
  s->kind = kind;
  *con_cls = s;
  if (!need_auth)
    return hand_over(h, s);
  /* The cache first (any address), then bcrypt in turn (after_cb). */
  s->auth = AUTH_PENDING;
  rec->checking = s;
  rec_waits(rec);
  s->suspended = 1;
  MHD_suspend_connection(c);
  start_check(h, s, 0);
  return MHD_YES;
}

static void completed_cb(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode code) {
  mt_httpd_t *h = cls;
  (void)code;
  /* Kept alive: the next request's headers have their deadline. */
  conn_rec_t *rec = rec_of(c);
  if (rec) {
    rec->reading = 1;
    rec->since_ns = now_ns();
    rec->deadline_ns = rec->since_ns + (uint64_t)MT_HTTPD_HEADERS_S * NS_PER_S;
    rec->checking = NULL;
  }
  mt_scrape_t *s = *con_cls;
  *con_cls = NULL;
  if (!s || (void *)s == (void *)&headers_seen)
    return;
  forget_check(h, s);
  /* A scrape ends here whether answered or not: the owner may still hold
   * it only while it is on the waiting list, which it leaves now, and
   * mt_scrape_answer() is never called on it again. */
  unlink_waiting(h, s);
  mt_answer_release(s->answer);
  free(s);
  *con_cls = NULL;
}

int mt_scrape_openmetrics(const mt_scrape_t *s) {
  return s && s->openmetrics;
}

int mt_scrape_gzip(const mt_scrape_t *s) {
  return s && s->gzip;
}

uint64_t mt_scrape_client(const mt_scrape_t *s) {
  /* FNV-1a over the address key. */
  uint64_t h = 14695981039346656037ull;
  if (!s || !s->rec)
    return 0;
  for (size_t i = 0; i < sizeof s->rec->addr.b; i++)
    h = (h ^ s->rec->addr.b[i]) * 1099511628211ull;
  return h;
}

void mt_scrape_answer(mt_scrape_t *s, ms__strbuf_t *body) {
  if (!s || s->answered) {
    ms__strbuf_free(body);
    return;
  }
  mt_answer_t *a = mt_answer_new(body, s->openmetrics);
  mt_scrape_answer_with(s, a);
  mt_answer_release(a);
}

void mt_scrape_answer_with(mt_scrape_t *s, mt_answer_t *a) {
  if (!s || s->answered)
    return;
  s->answered = 1;
  unlink_waiting(s->h, s);
  if (a)
    a->refs++;
  s->answer = a;
  if (s->suspended) {
    s->suspended = 0;
    MHD_resume_connection(s->conn);
    run_soon(s->h);
  }
}

/* ------------------------------------------------------------------------
 * Starting and stopping
 * ------------------------------------------------------------------------ */

/* The listening socket, made here so that its errors are said plainly
 * (the address in use, no permission for a low port). */
static int listen_on(const char *addr, int *fd_out, char *url, size_t urllen,
                     char *err, size_t errlen) {
  struct sockaddr_storage ss;
  socklen_t len;
  int rc = mt_listen_parse(addr, &ss, &len, err, errlen);
  if (rc != 0)
    return rc;
  int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0 && ss.ss_family == AF_INET6 &&
      IN6_IS_ADDR_UNSPECIFIED(&((struct sockaddr_in6 *)&ss)->sin6_addr)) {
    /* No IPv6 here: every interface is IPv4's any address. */
    struct sockaddr_in s4;
    memset(&s4, 0, sizeof s4);
    s4.sin_family = AF_INET;
    s4.sin_port = ((struct sockaddr_in6 *)&ss)->sin6_port;
    s4.sin_addr.s_addr = htonl(INADDR_ANY);
    memcpy(&ss, &s4, sizeof s4);
    len = sizeof s4;
    fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  }
  if (fd < 0) {
    snprintf(err, errlen, "cannot make a socket for %s: %s", addr,
             strerror(errno));
    return -errno;
  }
  int one = 1, zero = 0;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (ss.ss_family == AF_INET6)
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
  if (bind(fd, (struct sockaddr *)&ss, len) != 0 || listen(fd, 128) != 0) {
    int e = errno;
    snprintf(err, errlen, "cannot listen on %s: %s%s", addr, strerror(e),
             e == EADDRINUSE ? " (another program serves that port: choose "
                               "another with --listen)"
             : e == EACCES   ? " (ports below 1024 need privileges: choose "
                               "another with --listen)"
                             : "");
    close(fd);
    return -e;
  }
  /* The port really bound (0 asks for any free one). */
  len = sizeof ss;
  getsockname(fd, (struct sockaddr *)&ss, &len);
  char host[64] = "?";
  unsigned port = 0;
  if (ss.ss_family == AF_INET6) {
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
    char a[48];
    inet_ntop(AF_INET6, &s6->sin6_addr, a, sizeof a);
    snprintf(host, sizeof host, "[%s]", a);
    port = ntohs(s6->sin6_port);
  } else {
    struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
    inet_ntop(AF_INET, &s4->sin_addr, host, sizeof host);
    port = ntohs(s4->sin_port);
  }
  snprintf(url, urllen, "%s:%u", host, port);
  *fd_out = fd;
  return 0;
}

int mt_httpd_start(uv_loop_t *loop, const char *listen, mt_webconfig_t *web,
                   const mt_httpd_hooks_t *hooks, mt_httpd_t **out, char *err,
                   size_t errlen) {
  if (!loop || !hooks || !hooks->scrape || !out)
    return MS_EINVAL;
  const char *mpath = hooks->metrics_path ? hooks->metrics_path : "/metrics";
  if (mpath[0] != '/' || strlen(mpath) > 256)
    return MS_EINVAL;
  int tls = web && web->cert_pem && web->key_pem;
  if (tls && tls_server) {
    snprintf(err, errlen, "one TLS server at a time");
    return MS_EINVAL;
  }
  if (tls && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
    snprintf(err, errlen,
             "this libmicrohttpd was built without TLS: serve plain HTTP "
             "(no tls_server_config) or install one built with GnuTLS");
    return MS_ENOSYS;
  }
  mt_httpd_t *h = calloc(1, sizeof *h);
  if (!h)
    return MS_ENOMEM;
  h->loop = loop;
  h->hooks = *hooks;
  h->metrics_path = mpath;
  h->tls = tls;
  /* The config given, as the first of those read (see web_t). */
  static mt_webconfig_t none;
  h->web = calloc(1, sizeof *h->web);
  if (!h->web) {
    free(h);
    return MS_ENOMEM;
  }
  h->web->cfg = web ? web : &none;
  h->web->borrowed = 1;
  h->web->refs = 1;
  if (hooks->web_path)
    mt_webconfig_stamp(hooks->web_path, h->web->cfg, &h->web->stamp);
  int rc0 = web_load_tls(h->web, err, errlen);
  if (rc0 != 0) {
    web_free(h->web);
    free(h);
    return rc0;
  }
  h->fails.size = MT_HTTPD_FAILS;
  h->fails.every_s = MT_HTTPD_REFILL_S;
  h->handshakes.size = MT_HTTPD_TLS_CONNS;
  h->handshakes.every_s = 1.0 / MT_HTTPD_TLS_CONNS_PER_S;
  char where[96];
  int rc = listen_on(listen ? listen : MT_LISTEN_DEFAULT, &h->listen_fd, where,
                     sizeof where, err, errlen);
  if (rc != 0) {
    web_free(h->web);
    free(h);
    return rc;
  }
  snprintf(h->url, sizeof h->url, "%s://%s%s", tls ? "https" : "http", where,
           mpath);

  unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME;
  if (tls)
    flags |= MHD_USE_TLS;
  /* The versions, suites and curves of the web config (TLS 1.2 and 1.3,
   * ECDHE and AEAD by default: webconfig.h). */
  /* The certificate and key are given at each handshake (cert_cb), so
   * that a rotated one is served from the next connection; a
   * libmicrohttpd without the callback gets them once. */
  h->cert_cb = tls && MHD_is_feature_supported(
                          MHD_FEATURE_HTTPS_CERT_CALLBACK) == MHD_YES;
  struct MHD_OptionItem tls_opts[4];
  size_t nopt = 0;
  if (tls && h->cert_cb) {
    tls_opts[nopt++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_CERT_CALLBACK,
                                               0, (void *)(uintptr_t)cert_cb};
  } else if (tls) {
    tls_opts[nopt++] =
        (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, web->cert_pem};
    tls_opts[nopt++] =
        (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, web->key_pem};
  }
  if (tls && web->tls_priority)
    tls_opts[nopt++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_PRIORITIES, 0,
                                               web->tls_priority};
  tls_opts[nopt] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
  /* libmicrohttpd's own limit leaves room for the connections the accept
   * policy closes to make room (they close at the next run). */
  h->d = MHD_start_daemon(
      flags, 0, accept_cb, h, access_cb, h, MHD_OPTION_LISTEN_SOCKET,
      h->listen_fd, MHD_OPTION_CONNECTION_LIMIT,
      (unsigned)(MT_HTTPD_CONNECTIONS + MT_HTTPD_SLACK),
      MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)MT_HTTPD_PER_IP,
      MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)MT_HTTPD_TIMEOUT_S,
      MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)MT_HTTPD_HEADER_BYTES * 2,
      MHD_OPTION_NOTIFY_COMPLETED, completed_cb, h,
      MHD_OPTION_NOTIFY_CONNECTION, notify_cb, h, MHD_OPTION_ARRAY, tls_opts,
      MHD_OPTION_END);
  if (!h->d) {
    snprintf(err, errlen, "cannot start the HTTP server on %s%s", where,
             tls ? " (is the certificate or the key of the web config "
                   "malformed, or do they not match?)"
                 : "");
    close(h->listen_fd);
    web_free(h->web);
    free(h);
    return MS_EINVAL;
  }
  const union MHD_DaemonInfo *info =
      MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_EPOLL_FD);
  if (!info || uv_poll_init(loop, &h->poll, info->epoll_fd) != 0) {
    snprintf(err, errlen, "cannot watch the HTTP server's descriptor");
    MHD_stop_daemon(h->d);
    close(h->listen_fd);
    web_free(h->web);
    free(h);
    return MS_EINVAL;
  }
  uv_timer_init(loop, &h->timer);
  uv_timer_init(loop, &h->sweep);
  h->poll.data = h->timer.data = h->sweep.data = h;
  h->handles = 3;
  uv_poll_start(&h->poll, UV_READABLE, poll_cb);
  uv_timer_start(&h->sweep, sweep_cb, 1000, 1000);
  if (tls)
    tls_server = h;
  run(h);
  *out = h;
  return 0;
}

void mt_httpd_url(const mt_httpd_t *h, char *buf, size_t len) {
  snprintf(buf, len, "%s", h ? h->url : "");
}

static void closed_cb(uv_handle_t *hd) {
  mt_httpd_t *h = hd->data;
  h->handles--;
  maybe_free(h);
}

void mt_httpd_stop(mt_httpd_t *h) {
  if (!h)
    return;
  h->stopping = 1;
  if (tls_server == h)
    tls_server = NULL;
  if (h->d) {
    /* libmicrohttpd stops only with no connection suspended: those whose
     * password is being checked are refused (their checks run on, their
     * answers dropped), the scrapes answered 503. */
    for (conn_rec_t *r = h->conns; r; r = r->next)
      if (r->checking) {
        mt_scrape_t *s = r->checking;
        forget_check(h, s);
        check_done(s, AUTH_FAILED);
      }
    for (mt_scrape_t *s = h->waiting; s; s = s->next) {
      s->cancelled = 1;
      if (s->suspended) {
        s->suspended = 0;
        MHD_resume_connection(s->conn);
      }
    }
    MHD_run(h->d);
    h->waiting = NULL;
    MHD_stop_daemon(h->d);
    h->d = NULL;
    close(h->listen_fd);
  }
  uv_poll_stop(&h->poll);
  uv_timer_stop(&h->timer);
  uv_timer_stop(&h->sweep);
  uv_close((uv_handle_t *)&h->poll, closed_cb);
  uv_close((uv_handle_t *)&h->timer, closed_cb);
  uv_close((uv_handle_t *)&h->sweep, closed_cb);
}
