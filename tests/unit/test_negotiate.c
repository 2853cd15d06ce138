/*
 * test_negotiate.c - what `memtop serve` reads of a request and of
 * --listen (negotiate.h): the Accept headers Prometheus versions send
 * and odd ones, Accept-Encoding's q values, and the listen address forms
 * with their errors.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "memstats.h"
#include "exporter/negotiate.h"

static int om(const char *accept) {
  return mt_accept_openmetrics(accept, accept ? strlen(accept) : 0);
}

static void test_accept(void **state) {
  (void)state;
  /* Prometheus 2.x's scrape Accept header. */
  assert_true(om("application/openmetrics-text;version=1.0.0,application/"
                 "openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0."
                 "0.4;q=0.5,*/*;q=0.1"));
  /* Older Prometheus: OpenMetrics 0.0.1 first. */
  assert_true(om("application/openmetrics-text; version=0.0.1,text/plain;"
                 "version=0.0.4;q=0.5,*/*;q=0.1"));
  /* With Prometheus' scrape_protocols preferring the text format. */
  assert_false(om("text/plain;version=0.0.4;q=1,application/openmetrics-text;"
                  "version=1.0.0;q=0.9"));
  assert_false(om(NULL));
  assert_false(om(""));
  assert_false(om("*/*"));
  assert_false(om("text/plain"));
  assert_false(om("application/json"));
  assert_true(om("application/openmetrics-text"));
  assert_true(om("APPLICATION/OpenMetrics-Text; Version=\"1.0.0\""));
  /* A version we do not write, or q=0: not OpenMetrics. */
  assert_false(om("application/openmetrics-text;version=2.0.0"));
  assert_false(om("application/openmetrics-text;q=0"));
  assert_false(om("application/openmetrics-text;q=0.000"));
  /* Ties go to the first listed. */
  assert_true(om("application/openmetrics-text;q=0.5,text/plain;q=0.5"));
  assert_false(om("text/plain;q=0.5,application/openmetrics-text;q=0.5"));
  /* Malformed q reads as not acceptable; the other element decides. */
  assert_false(om("application/openmetrics-text;q=x,text/plain"));
  assert_false(om("application/openmetrics-text;q=1.5"));
  assert_true(om(",,application/openmetrics-text;;,"));
  /* The media type comes first: parameters alone name none. */
  assert_false(om(";;application/openmetrics-text"));
  /* Only len bytes are read. */
  assert_false(mt_accept_openmetrics("application/openmetrics-text", 11));
}

static int gz(const char *e) {
  return mt_accept_gzip(e, e ? strlen(e) : 0);
}

static void test_gzip(void **state) {
  (void)state;
  assert_true(gz("gzip"));
  assert_true(gz("gzip, deflate, br"));
  assert_true(gz("deflate, GZIP;q=0.3"));
  assert_true(gz("x-gzip"));
  assert_true(gz("*"));
  assert_false(gz(NULL));
  assert_false(gz(""));
  assert_false(gz("identity"));
  assert_false(gz("deflate, br"));
  assert_false(gz("gzip;q=0"));
  assert_false(gz("*, gzip;q=0"));
  assert_false(gz("gzipper"));
  assert_false(mt_accept_gzip("gzip", 2));
}

static void test_listen(void **state) {
  (void)state;
  struct sockaddr_storage ss;
  socklen_t len;
  char err[512];
  assert_int_equal(
      mt_listen_parse(MT_LISTEN_DEFAULT, &ss, &len, err, sizeof err), 0);
  assert_int_equal(ss.ss_family, AF_INET);
  struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
  assert_int_equal(ntohs(s4->sin_port), 9464);
  assert_int_equal(ntohl(s4->sin_addr.s_addr), INADDR_LOOPBACK);

  assert_int_equal(mt_listen_parse(":9464", &ss, &len, err, sizeof err), 0);
  assert_int_equal(ss.ss_family, AF_INET6);
  struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
  assert_true(IN6_IS_ADDR_UNSPECIFIED(&s6->sin6_addr));
  assert_int_equal(ntohs(s6->sin6_port), 9464);

  assert_int_equal(mt_listen_parse("[::1]:0", &ss, &len, err, sizeof err), 0);
  assert_int_equal(ss.ss_family, AF_INET6);
  assert_true(IN6_IS_ADDR_LOOPBACK(&s6->sin6_addr));
  assert_int_equal(mt_listen_parse("0.0.0.0:65535", &ss, &len, err, sizeof err),
                   0);

  static const struct {
    const char *addr, *why;
  } bad[] = {
      {"9464", "no port"},
      {"", "empty"},
      {"127.0.0.1:", "not a number"},
      {"127.0.0.1:http", "not a number"},
      {"127.0.0.1:65536", "above 65535"},
      {"127.0.0.1:-1", "not a number"},
      {"::1:9464", "in brackets"},
      {"[::1]9464", "]:PORT"},
      {"[]:9464", "bad IPv6"},
      {"[::1:9464", "]:PORT"},
      {"999.1.1.1:80", "--web.listen-address '999.1.1.1:80'"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    err[0] = '\0';
    int rc = mt_listen_parse(bad[i].addr, &ss, &len, err, sizeof err);
    if (rc != MS_EINVAL || !strstr(err, bad[i].why) ||
        !strstr(err, "expected HOST:PORT"))
      fail_msg("'%s' gave %d '%s', want '%s'", bad[i].addr, rc, err,
               bad[i].why);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_accept),
      cmocka_unit_test(test_gzip),
      cmocka_unit_test(test_listen),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
