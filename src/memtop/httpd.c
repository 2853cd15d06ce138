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
 * handler again, and the handler queues the answer.
 */
#include "memtop/httpd.h"

#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include "memstats.h"
#include "memtop/negotiate.h"

#define CT_TEXT "text/plain; version=0.0.4; charset=utf-8"
#define CT_OPENMETRICS                                                         \
  "application/openmetrics-text; version=1.0.0; charset=utf-8"
#define REALM "memtop"

struct mt_scrape_s {
  mt_httpd_t *h;
  struct MHD_Connection *conn;
  mt_scrape_t *next; /* the server's list of scrapes not yet answered */
  int openmetrics, gzip;
  int answered;  /* mt_scrape_answer() ran: body holds the answer */
  int suspended; /* the connection waits for it */
  int cancelled; /* the server stops: answer 503 */
  ms__strbuf_t body;
};

struct mt_httpd_s {
  uv_loop_t *loop;
  struct MHD_Daemon *d;
  mt_webconfig_t *web;
  mt_httpd_hooks_t hooks;
  uv_poll_t poll;
  uv_timer_t timer;
  int handles; /* uv handles not yet closed */
  int listen_fd;
  mt_scrape_t *waiting;
  char url[128];
};

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

/* ------------------------------------------------------------------------
 * Answers
 * ------------------------------------------------------------------------ */

static enum MHD_Result plain(struct MHD_Connection *c, unsigned status,
                             const char *text, const char *allow) {
  struct MHD_Response *r = MHD_create_response_from_buffer(
      strlen(text), (void *)(uintptr_t)text, MHD_RESPMEM_PERSISTENT);
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

static enum MHD_Result answer_metrics(mt_scrape_t *s) {
  struct MHD_Connection *c = s->conn;
  if (s->cancelled)
    return plain(c, MHD_HTTP_SERVICE_UNAVAILABLE, "memtop is stopping\n", NULL);
  if (s->body.oom)
    return plain(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n", NULL);
  const char *data = s->body.data ? s->body.data : "";
  size_t n = s->body.len;
  struct MHD_Response *r = NULL;
  int gz = 0;
  if (s->gzip && n > 0) {
    size_t zn = 0;
    unsigned char *z = gzip_of(data, n, &zn);
    if (z) {
      r = MHD_create_response_from_buffer(zn, z, MHD_RESPMEM_MUST_FREE);
      if (!r)
        free(z);
      gz = r != NULL;
    }
  }
  if (!r) {
    /* The body's buffer is handed over: libmicrohttpd frees it. */
    char *owned = s->body.data;
    r = MHD_create_response_from_buffer(n, owned ? (void *)owned : (void *)"",
                                        owned ? MHD_RESPMEM_MUST_FREE
                                              : MHD_RESPMEM_PERSISTENT);
    if (r && owned)
      s->body.data = NULL, s->body.len = s->body.cap = 0;
  }
  if (!r)
    return MHD_NO;
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
                          s->openmetrics ? CT_OPENMETRICS : CT_TEXT);
  MHD_add_response_header(r, MHD_HTTP_HEADER_VARY, "Accept, Accept-Encoding");
  if (gz)
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_ENCODING, "gzip");
  enum MHD_Result rc = MHD_queue_response(c, MHD_HTTP_OK, r);
  MHD_destroy_response(r);
  return rc;
}

/* 1 if the request carries a user and password of the web config (or the
 * config has no users); else 401 has been queued and *rc says how. */
static int authorised(mt_httpd_t *h, struct MHD_Connection *c,
                      enum MHD_Result *rc) {
  if (!h->web || h->web->nusers == 0)
    return 1;
  char *pass = NULL;
  char *user = MHD_basic_auth_get_username_password(c, &pass);
  int ok = user && pass && mt_webconfig_check(h->web, user, pass);
  if (pass) {
    explicit_bzero(pass, strlen(pass));
    MHD_free(pass);
  }
  if (user)
    MHD_free(user);
  if (ok)
    return 1;
  static const char text[] = "401 Unauthorized\n";
  struct MHD_Response *r = MHD_create_response_from_buffer(
      sizeof text - 1, (void *)(uintptr_t)text, MHD_RESPMEM_PERSISTENT);
  *rc = MHD_NO;
  if (r) {
    *rc = MHD_queue_basic_auth_fail_response(c, REALM, r);
    MHD_destroy_response(r);
  }
  return 0;
}

static void unlink_waiting(mt_httpd_t *h, mt_scrape_t *s) {
  for (mt_scrape_t **p = &h->waiting; *p; p = &(*p)->next)
    if (*p == s) {
      *p = s->next;
      break;
    }
  s->next = NULL;
}

static enum MHD_Result access_cb(void *cls, struct MHD_Connection *c,
                                 const char *url, const char *method,
                                 const char *version, const char *upload,
                                 size_t *upload_size, void **con_cls) {
  mt_httpd_t *h = cls;
  (void)version;
  (void)upload;
  mt_scrape_t *s = *con_cls;
  if (s) {
    /* Called again: after a resume, or with upload data (a body on a
     * GET, which is read and dropped). */
    if (*upload_size) {
      *upload_size = 0;
      return MHD_YES;
    }
    if (!s->answered && !s->cancelled)
      return MHD_YES; /* not answered yet: keep waiting */
    return answer_metrics(s);
  }
  int get = strcmp(method, MHD_HTTP_METHOD_GET) == 0;
  int head = strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
  if (strcmp(url, "/metrics") != 0)
    return plain(c, MHD_HTTP_NOT_FOUND,
                 "404 Not Found: memtop serves /metrics\n", NULL);
  if (!get && !head)
    return plain(c, MHD_HTTP_METHOD_NOT_ALLOWED,
                 "405 Method Not Allowed: GET or HEAD /metrics\n", "GET, HEAD");
  enum MHD_Result rc;
  if (!authorised(h, c, &rc))
    return rc;

  s = calloc(1, sizeof *s);
  if (!s)
    return plain(c, MHD_HTTP_SERVICE_UNAVAILABLE, "out of memory\n", NULL);
  s->h = h;
  s->conn = c;
  const char *accept =
      MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);
  const char *enc = MHD_lookup_connection_value(
      c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT_ENCODING);
  s->openmetrics = mt_accept_openmetrics(accept, MT_HTTPD_HEADER_BYTES);
  s->gzip = mt_accept_gzip(enc, MT_HTTPD_HEADER_BYTES);
  *con_cls = s;
  s->next = h->waiting;
  h->waiting = s;
  h->hooks.scrape(h->hooks.arg, s);
  if (s->answered)
    return answer_metrics(s);
  s->suspended = 1;
  MHD_suspend_connection(c);
  return MHD_YES;
}

static void completed_cb(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode code) {
  mt_httpd_t *h = cls;
  (void)c;
  (void)code;
  mt_scrape_t *s = *con_cls;
  if (!s)
    return;
  /* A scrape ends here whether answered or not: the owner may still hold
   * it only while it is on the waiting list, which it leaves now, and
   * mt_scrape_answer() is never called on it again. */
  unlink_waiting(h, s);
  ms__strbuf_free(&s->body);
  free(s);
  *con_cls = NULL;
}

int mt_scrape_openmetrics(const mt_scrape_t *s) {
  return s && s->openmetrics;
}

void mt_scrape_answer(mt_scrape_t *s, ms__strbuf_t *body) {
  if (!s || s->answered)
    return;
  s->answered = 1;
  unlink_waiting(s->h, s);
  s->body = *body;
  memset(body, 0, sizeof *body);
  if (s->suspended) {
    s->suspended = 0;
    MHD_resume_connection(s->conn);
    /* The resumed connection is served by the next run: soon. */
    uv_timer_start(&s->h->timer, timer_cb, 0, 0);
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
  int tls = web && web->cert_pem && web->key_pem;
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
  h->web = web;
  h->hooks = *hooks;
  char where[96];
  int rc = listen_on(listen ? listen : MT_LISTEN_DEFAULT, &h->listen_fd, where,
                     sizeof where, err, errlen);
  if (rc != 0) {
    free(h);
    return rc;
  }
  snprintf(h->url, sizeof h->url, "%s://%s/metrics", tls ? "https" : "http",
           where);

  unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME;
  if (tls)
    flags |= MHD_USE_TLS;
  struct MHD_OptionItem tls_opts[] = {
      {tls ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0,
       tls ? web->cert_pem : NULL},
      {MHD_OPTION_HTTPS_MEM_KEY, 0, tls ? web->key_pem : NULL},
      {MHD_OPTION_END, 0, NULL}};
  h->d = MHD_start_daemon(
      flags, 0, NULL, NULL, access_cb, h, MHD_OPTION_LISTEN_SOCKET,
      h->listen_fd, MHD_OPTION_CONNECTION_LIMIT, (unsigned)MT_HTTPD_CONNECTIONS,
      MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)MT_HTTPD_PER_IP,
      MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)MT_HTTPD_TIMEOUT_S,
      MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)MT_HTTPD_HEADER_BYTES * 2,
      MHD_OPTION_NOTIFY_COMPLETED, completed_cb, h, MHD_OPTION_ARRAY, tls_opts,
      MHD_OPTION_END);
  if (!h->d) {
    snprintf(err, errlen, "cannot start the HTTP server on %s%s", where,
             tls ? " (is the certificate or the key of the web config "
                   "malformed, or do they not match?)"
                 : "");
    close(h->listen_fd);
    free(h);
    return MS_EINVAL;
  }
  const union MHD_DaemonInfo *info =
      MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_EPOLL_FD);
  if (!info || uv_poll_init(loop, &h->poll, info->epoll_fd) != 0) {
    snprintf(err, errlen, "cannot watch the HTTP server's descriptor");
    MHD_stop_daemon(h->d);
    close(h->listen_fd);
    free(h);
    return MS_EINVAL;
  }
  uv_timer_init(loop, &h->timer);
  h->poll.data = h->timer.data = h;
  h->handles = 2;
  uv_poll_start(&h->poll, UV_READABLE, poll_cb);
  run(h);
  *out = h;
  return 0;
}

void mt_httpd_url(const mt_httpd_t *h, char *buf, size_t len) {
  snprintf(buf, len, "%s", h ? h->url : "");
}

static void closed_cb(uv_handle_t *hd) {
  mt_httpd_t *h = hd->data;
  if (--h->handles == 0)
    free(h);
}

void mt_httpd_stop(mt_httpd_t *h) {
  if (!h)
    return;
  if (h->d) {
    /* libmicrohttpd stops only with no connection suspended. */
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
  uv_close((uv_handle_t *)&h->poll, closed_cb);
  uv_close((uv_handle_t *)&h->timer, closed_cb);
}
