/*
 * negotiate.c - the request headers `memtop serve` acts on and its
 * --listen address (see negotiate.h). Headers are read as RFC 9110 lists:
 * elements separated by commas, each a token with ";"-separated
 * parameters; what does not parse is skipped, never trusted.
 */
#include "exporter/negotiate.h"

#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memstats.h"

/* One element of a list: [start, end) with blanks trimmed. */
typedef struct span_s {
  const char *p;
  size_t n;
} span_t;

static int blank(char c) {
  return c == ' ' || c == '\t';
}

static span_t trim(const char *p, size_t n) {
  while (n && blank(*p)) {
    p++;
    n--;
  }
  while (n && blank(p[n - 1]))
    n--;
  span_t s = {p, n};
  return s;
}

static int lower(int c) {
  return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c;
}

static int eq(span_t s, const char *word) {
  size_t n = strlen(word);
  if (s.n != n)
    return 0;
  for (size_t i = 0; i < n; i++)
    if (lower((unsigned char)s.p[i]) != word[i])
      return 0;
  return 1;
}

/* Splits off the next piece of [*p, end) up to `sep` (not inside a quoted
 * string). Returns 0 when nothing is left. */
static int next(const char **p, const char *end, char sep, span_t *piece) {
  if (*p >= end)
    return 0;
  const char *s = *p;
  int quoted = 0;
  while (*p < end && (quoted || **p != sep)) {
    if (**p == '"')
      quoted = !quoted;
    else if (**p == '\\' && quoted && *p + 1 < end)
      (*p)++;
    (*p)++;
  }
  *piece = trim(s, (size_t)(*p - s));
  if (*p < end)
    (*p)++; /* the separator */
  return 1;
}

/* A q value: 0 to 1 with up to three decimals, in thousandths; anything
 * else (malformed) counts as 0, not acceptable. */
static int qvalue(span_t v) {
  if (v.n == 0 || v.n > 5)
    return 0;
  if (v.p[0] != '0' && v.p[0] != '1')
    return 0;
  int q = (v.p[0] - '0') * 1000;
  if (v.n == 1)
    return q;
  if (v.p[1] != '.')
    return 0;
  int scale = 100;
  for (size_t i = 2; i < v.n; i++, scale /= 10) {
    if (v.p[i] < '0' || v.p[i] > '9')
      return 0;
    q += (v.p[i] - '0') * scale;
  }
  return q > 1000 ? 0 : q;
}

/* One element: its bare value, its q (1000 when not given), and its
 * version parameter (n == 0 when not given; quotes removed). */
typedef struct element_s {
  span_t value, version;
  int q;
} element_t;

static void element(span_t e, element_t *out) {
  const char *p = e.p, *end = e.p + e.n;
  span_t piece;
  out->q = 1000;
  out->version.p = out->value.p = "";
  out->version.n = out->value.n = 0;
  /* An empty element (",,") leaves the value empty. */
  next(&p, end, ';', &out->value);
  while (next(&p, end, ';', &piece)) {
    const char *eqs = memchr(piece.p, '=', piece.n);
    if (!eqs)
      continue;
    span_t k = trim(piece.p, (size_t)(eqs - piece.p));
    span_t v = trim(eqs + 1, (size_t)(piece.p + piece.n - eqs - 1));
    if (v.n >= 2 && v.p[0] == '"' && v.p[v.n - 1] == '"') {
      v.p++;
      v.n -= 2;
    }
    if (eq(k, "q"))
      out->q = qvalue(v);
    else if (eq(k, "version"))
      out->version = v;
  }
}

int mt_accept_openmetrics(const char *accept, size_t len) {
  if (!accept)
    return 0;
  const char *p = accept, *end = accept + strnlen(accept, len);
  /* The best q of each format, and where its best element stood. */
  int om_q = 0, text_q = 0;
  size_t om_at = 0, text_at = 0, at = 0;
  span_t e;
  while (next(&p, end, ',', &e)) {
    element_t el;
    element(e, &el);
    at++;
    if (el.q <= 0)
      continue;
    if (eq(el.value, "application/openmetrics-text")) {
      if (el.version.n && !eq(el.version, "1.0.0") && !eq(el.version, "0.0.1"))
        continue;
      if (el.q > om_q) {
        om_q = el.q;
        om_at = at;
      }
    } else if (eq(el.value, "text/plain") || eq(el.value, "text/*") ||
               eq(el.value, "*/*")) {
      if (el.version.n && !eq(el.version, "0.0.4"))
        continue;
      if (el.q > text_q) {
        text_q = el.q;
        text_at = at;
      }
    }
  }
  if (om_q == 0)
    return 0;
  return om_q > text_q || (om_q == text_q && om_at < text_at);
}

int mt_accept_gzip(const char *accept_encoding, size_t len) {
  if (!accept_encoding)
    return 0;
  const char *p = accept_encoding,
             *end = accept_encoding + strnlen(accept_encoding, len);
  int gzip = -1, star = -1;
  span_t e;
  while (next(&p, end, ',', &e)) {
    element_t el;
    element(e, &el);
    if (eq(el.value, "gzip") || eq(el.value, "x-gzip"))
      gzip = el.q;
    else if (eq(el.value, "*"))
      star = el.q;
  }
  /* An explicit gzip;q=0 refuses it even if * is accepted. */
  if (gzip >= 0)
    return gzip > 0;
  return star > 0;
}

static int fail(char *err, size_t errlen, const char *addr, const char *why) {
  snprintf(
      err, errlen,
      "--web.listen-address '%.200s': %s (expected HOST:PORT, :PORT for every "
      "interface, or [IPV6]:PORT, e.g. 127.0.0.1:9464)",
      addr, why);
  return MS_EINVAL;
}

int mt_listen_parse(const char *addr, struct sockaddr_storage *ss,
                    socklen_t *len, char *err, size_t errlen) {
  char host[256];
  const char *port;
  if (!addr || !ss || !len)
    return fail(err, errlen, addr ? addr : "", "no address");
  size_t n = strnlen(addr, 512);
  if (n == 0 || n >= 512)
    return fail(err, errlen, addr, "empty or too long");
  if (addr[0] == '[') {
    const char *close = strchr(addr, ']');
    if (!close || close[1] != ':')
      return fail(err, errlen, addr, "an IPv6 address needs ]:PORT");
    size_t hn = (size_t)(close - addr - 1);
    if (hn == 0 || hn >= sizeof host)
      return fail(err, errlen, addr, "bad IPv6 address");
    memcpy(host, addr + 1, hn);
    host[hn] = '\0';
    port = close + 2;
  } else {
    const char *colon = strrchr(addr, ':');
    if (!colon)
      return fail(err, errlen, addr, "no port");
    size_t hn = (size_t)(colon - addr);
    if (hn >= sizeof host)
      return fail(err, errlen, addr, "host name too long");
    if (memchr(addr, ':', hn))
      return fail(err, errlen, addr, "an IPv6 address goes in brackets");
    memcpy(host, addr, hn);
    host[hn] = '\0';
    port = colon + 1;
  }
  if (!*port || strlen(port) > 5 || strspn(port, "0123456789") != strlen(port))
    return fail(err, errlen, addr, "the port is not a number");
  long pn = strtol(port, NULL, 10);
  if (pn > 65535)
    return fail(err, errlen, addr, "the port is above 65535");

  memset(ss, 0, sizeof *ss);
  if (host[0] == '\0') {
    /* Every interface: IPv6's any address, which takes IPv4 too (the
     * server clears IPV6_V6ONLY; it falls back to 0.0.0.0 where the
     * machine has no IPv6). */
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
    s6->sin6_family = AF_INET6;
    s6->sin6_addr = in6addr_any;
    s6->sin6_port = htons((uint16_t)pn);
    *len = sizeof *s6;
    return 0;
  }
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | AI_ADDRCONFIG;
  int rc = getaddrinfo(host, port, &hints, &res);
  if (rc == EAI_ADDRFAMILY || rc == EAI_NONAME || rc == EAI_NODATA) {
    /* AI_ADDRCONFIG hides ::1 on a machine whose only address is
     * loopback; ask again without it. */
    hints.ai_flags = AI_NUMERICSERV;
    rc = getaddrinfo(host, port, &hints, &res);
  }
  if (rc != 0 || !res)
    return fail(err, errlen, addr, rc ? gai_strerror(rc) : "no address");
  if (res->ai_addrlen > sizeof *ss) {
    freeaddrinfo(res);
    return fail(err, errlen, addr, "address too long");
  }
  memcpy(ss, res->ai_addr, res->ai_addrlen);
  *len = res->ai_addrlen;
  freeaddrinfo(res);
  return 0;
}
