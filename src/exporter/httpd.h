/*
 * httpd.h - the HTTP side of `memtop serve`: libmicrohttpd driven by
 * memtop's libuv loop (its epoll descriptor watched by a uv_poll_t, its
 * timeout by a uv_timer_t; no thread of its own), serving GET and HEAD of
 * the metrics path (/metrics, or --web.telemetry-path), a landing page at
 * / linking to it, and /debug/pprof/heap when the owner serves profiles:
 * 404 for other paths, 405 for other methods, 401 without the right user
 * and password when the web config has users (429 after too many wrong
 * ones; every path, the landing page too, as exporter-toolkit does), TLS
 * when it has a certificate (the versions and suites of webconfig.h).
 * Connections are kept alive (HTTP/1.1). The exposition format follows the
 * Accept header, gzip the Accept-Encoding (negotiate.h).
 *
 * The web config is read again, as exporter-toolkit reads it, whenever
 * the file, its certificate or its key changed (mt_webconfig_stamp: three
 * stat()s per request and per TLS handshake): users and passwords apply
 * from the next request, a rotated certificate from the next connection.
 * A file that no longer reads answers 500 (and fails handshakes), saying
 * why on stderr once; so does one that turns TLS on or off or changes its
 * versions or suites, which take a restart (libmicrohttpd sets them when
 * it starts).
 *
 * A scrape is handed to the owner (hooks.scrape), which answers it at
 * once or later, when its targets have answered; the connection waits
 * suspended meanwhile, costing nothing but its memory. A profile request
 * is handed the same way (hooks.pprof).
 */
#ifndef MS_EXPORTER_HTTPD_H
#define MS_EXPORTER_HTTPD_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "common/strbuf.h"
#include "exporter/webconfig.h"

/* Limits on what a client may cost. An address is an IPv4 address or an
 * IPv6 /64. */
#define MT_HTTPD_CONNECTIONS 128    /* at once, in all */
#define MT_HTTPD_PER_IP 64          /* at once, from one address */
#define MT_HTTPD_TIMEOUT_S 10       /* an idle client is dropped */
#define MT_HTTPD_HEADER_BYTES 16384 /* request line and headers */
/* The TLS handshake, the request line and the headers must have come
 * this long after the connection was opened or its last request was
 * answered, however steadily they trickle in; an answer must be sent in
 * MT_HTTPD_SEND_S. When every connection is taken, a new one is let in
 * by closing the oldest connection still sending its headers, or whose
 * password waits to be checked (refused 429), from the address that holds
 * the most connections (MT_HTTPD_SLACK more are accepted while those
 * close), so that a scraper from an address with no connection is served
 * whatever the others hold. */
#define MT_HTTPD_HEADERS_S 10
#define MT_HTTPD_SEND_S 60
#define MT_HTTPD_SLACK 32
/* Passwords are checked on libuv's workers, never on the loop: first
 * against the cache of passwords proven right (cheap, for everyone),
 * then, if that fails, with bcrypt, MT_HTTPD_BCRYPTS at a time, at most
 * MT_HTTPD_CHECKS_PER_ADDR waiting from one address. An address that
 * gave MT_HTTPD_FAILS wrong passwords gets 429 with Retry-After and no
 * bcrypt, and one more try every MT_HTTPD_REFILL_S seconds; up to
 * MT_HTTPD_FAIL_ADDRS addresses are remembered (a new one takes the place
 * of the least suspect). A password proven right still passes from such
 * an address (the cache does not cost a bcrypt). */
#define MT_HTTPD_BCRYPTS 2
#define MT_HTTPD_CHECKS_PER_ADDR 4
#define MT_HTTPD_FAILS 10
#define MT_HTTPD_REFILL_S 6
#define MT_HTTPD_FAIL_ADDRS 256
/* A TLS handshake costs the loop milliseconds of CPU before any password
 * is seen: one address opens at most MT_HTTPD_TLS_CONNS TLS connections
 * at once, then MT_HTTPD_TLS_CONNS_PER_S a second (a scraper keeps its
 * connection alive); the others are closed as they come. */
#define MT_HTTPD_TLS_CONNS 32
#define MT_HTTPD_TLS_CONNS_PER_S 4

typedef struct mt_httpd_s mt_httpd_t;
typedef struct mt_scrape_s mt_scrape_t;
typedef struct mt_answer_s mt_answer_t;

typedef struct mt_httpd_hooks_s {
  /* A GET or HEAD of the metrics path that passed every check: the owner
   * calls mt_scrape_answer() exactly once, from this call or later. */
  void (*scrape)(void *arg, mt_scrape_t *s);
  void *arg;
  /* GET /debug/pprof/heap that passed every check (NULL: 404): the owner
   * calls mt_scrape_answer_bytes() exactly once, now or later. */
  void (*pprof)(void *arg, mt_scrape_t *s);
  /* Where the metrics are (NULL: "/metrics"; borrowed). */
  const char *metrics_path;
  /* The web config's file, read again when it changes (NULL: the config
   * given to mt_httpd_start is kept as it is). */
  const char *web_path;
} mt_httpd_hooks_t;

/* Listens on `listen` (negotiate.h's forms) with the web config *web
 * (NULL or empty: plain HTTP, no authentication; borrowed until
 * mt_httpd_stop; read again from hooks->web_path when it changes). Returns 0
 * and the server in *out, or a negative code with the reason and a fix in err
 * (the address in use, TLS not built into libmicrohttpd, a certificate GnuTLS
 * refuses...). */
int mt_httpd_start(uv_loop_t *loop, const char *listen, mt_webconfig_t *web,
                   const mt_httpd_hooks_t *hooks, mt_httpd_t **out, char *err,
                   size_t errlen);

/* The address listened on, as a URL ("http://127.0.0.1:9464/metrics"). */
void mt_httpd_url(const mt_httpd_t *h, char *buf, size_t len);

/* Whether the scraper asked for OpenMetrics (else the text format). */
int mt_scrape_openmetrics(const mt_scrape_t *s);

/* Whether the scraper accepts gzip (its answer is then gzipped). */
int mt_scrape_gzip(const mt_scrape_t *s);

/* A number standing for the scraper's address (an IPv4 address, an IPv6
 * /64), the same for every request from there; 0 if unknown. */
uint64_t mt_scrape_client(const mt_scrape_t *s);

/* A query argument of the request ("pid" of ?pid=N); NULL if absent. */
const char *mt_scrape_arg(const mt_scrape_t *s, const char *name);

/* Answers the request with status and *body (taken over) as it is (no
 * gzip), of the content type ctype (a string that lives as long as the
 * server); filename non-NULL adds a Content-Disposition naming it. */
void mt_scrape_answer_bytes(mt_scrape_t *s, unsigned status, const char *ctype,
                            const char *filename, ms__strbuf_t *body);

/* Answers the scrape with *body (taken over: *body is left empty), 200,
 * gzipped when the scraper accepts it; s is freed by the server later. */
void mt_scrape_answer(mt_scrape_t *s, ms__strbuf_t *body);

/* One answer for many scrapes of the same format (the owner's figures of
 * one moment): the body (taken over) is kept once, gzipped at most once,
 * and sent to each scrape answered with it, whatever their number. The
 * owner releases its reference when it has answered them; NULL when out
 * of memory (those scrapes then get 500). */
mt_answer_t *mt_answer_new(ms__strbuf_t *body, int openmetrics);
void mt_scrape_answer_with(mt_scrape_t *s, mt_answer_t *a);
void mt_answer_release(mt_answer_t *a);
/* Gzips the answer now, once (its first gzipped send would otherwise do
 * it): the owner decides when that work is done. A no-op for an answer
 * gzipped already, empty or out of memory. */
void mt_answer_gzip(mt_answer_t *a);

/* Stops listening, answers scrapes still waiting with 503, and frees the
 * server once libuv has closed its handles. */
void mt_httpd_stop(mt_httpd_t *h);

#endif
