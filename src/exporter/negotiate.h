/*
 * negotiate.h - what `memtop serve` reads of an HTTP request and of its
 * own command line, as pure functions (no I/O, no allocation): the
 * exposition format a scraper's Accept header asks for, whether its
 * Accept-Encoding takes gzip, and the --listen address. Every input is a
 * stranger's bytes (tests/fuzz/fuzz_negotiate.c): each function reads at
 * most the bytes it is given and never fails on garbage, it only answers
 * the plainest choice.
 */
#ifndef MS_EXPORTER_NEGOTIATE_H
#define MS_EXPORTER_NEGOTIATE_H

#include <stddef.h>
#include <sys/socket.h>

/* The default --listen: loopback only, Prometheus's port for memtop. */
#define MT_LISTEN_DEFAULT "127.0.0.1:9464"

/* 1 if an Accept header (NULL: absent) prefers OpenMetrics 1.0
 * (application/openmetrics-text, version 1.0.0 or 0.0.1 or none) to the
 * text format 0.0.4 (text/plain, version 0.0.4 or none, or a wildcard),
 * by its q values; ties go to the one listed first. 0 otherwise: the text
 * format is the answer to everything else, as Prometheus's own exporters
 * answer. */
int mt_accept_openmetrics(const char *accept, size_t len);

/* 1 if an Accept-Encoding header (NULL: absent) accepts gzip (gzip,
 * x-gzip or *, with q above 0), else 0. */
int mt_accept_gzip(const char *accept_encoding, size_t len);

/* A --listen address: "HOST:PORT", ":PORT" (every interface),
 * "[IPV6]:PORT". HOST is numeric or a name in /etc/hosts or DNS (looked
 * up once, here); PORT 0 to 65535 (0: any free port). Fills *ss and *len
 * with the first address found ("every interface": [::], with IPv4 too).
 * Returns 0, or MS_EINVAL with the reason and the expected form in err. */
int mt_listen_parse(const char *addr, struct sockaddr_storage *ss,
                    socklen_t *len, char *err, size_t errlen);

#endif
