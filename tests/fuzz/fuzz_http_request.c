/*
 * fuzz_http_request.c - `memtop serve`'s HTTP side (httpd.c: the request
 * line and headers as libmicrohttpd parses them, the routing, Basic
 * authentication with its checks on libuv's workers and the per-address
 * limit, content negotiation, the answer) on hostile bytes: the input is
 * sent as it is over a real connection to a server running in this
 * process, with a web config that has a user (alice:s3cret, a cheap
 * bcrypt), and the loop is run until the server has answered and closed.
 * Each input comes from the next of 4096 loopback addresses, so the
 * limit's table fills and turns over.
 *
 * It may refuse anything, but never crash, leak, hang (the loop must
 * finish every input), or answer anything but HTTP/1.x with a status it
 * means to send.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "common/strbuf.h"
#include "exporter/httpd.h"
#include "exporter/webconfig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* "s3cret", bcrypt cost 4. */
#define HASH "$2y$04$cF9RwSEtD0rMHdRC6By.SeT5NEogdNKIpubymmZ/QCHAEfwcRsNuq"

static uv_loop_t loop;
static mt_httpd_t *server;
static mt_webconfig_t web;
static int port;
static unsigned next_src;

static void on_scrape(void *arg, mt_scrape_t *s) {
  (void)arg;
  ms__strbuf_t body = MS_STRBUF_INIT;
  ms__strbuf_printf(&body, "# memtop\nmemtop_targets 0\n");
  mt_scrape_answer(s, &body);
  ms__strbuf_free(&body);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  static const char cfg[] = "basic_auth_users:\n  alice: " HASH "\n";
  char err[512], url[160];
  if (mt_webconfig_parse(cfg, sizeof cfg - 1, NULL, &web, err, sizeof err) !=
          0 ||
      uv_loop_init(&loop) != 0)
    abort();
  mt_httpd_hooks_t hooks = {.scrape = on_scrape};
  if (mt_httpd_start(&loop, "127.0.0.1:0", &web, &hooks, &server, err,
                     sizeof err) != 0) {
    fprintf(stderr, "fuzz_http_request: %s\n", err);
    abort();
  }
  mt_httpd_url(server, url, sizeof url);
  port = atoi(strrchr(url, ':') + 1);
  return 0;
}

static const int statuses[] = {200, 400, 401, 404, 405, 413, 414,
                               429, 431, 500, 501, 503, 505};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 65536)
    return 0;
  if (!server)
    LLVMFuzzerInitialize(NULL, NULL);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    abort();
  /* No TIME_WAIT left behind: a reset when this side closes. */
  struct linger lg = {1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
  struct sockaddr_in me = {0}, sa = {0};
  me.sin_family = sa.sin_family = AF_INET;
  unsigned n = next_src++ % 4096;
  me.sin_addr.s_addr = htonl(0x7f010000u | (n / 255) << 8 | (n % 255 + 1));
  sa.sin_port = htons((uint16_t)port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, (struct sockaddr *)&me, sizeof me) != 0)
    abort();
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 &&
      errno != EINPROGRESS)
    abort();
  size_t sent = 0, got = 0;
  static char reply[1 << 16];
  int done = 0, shut = 0;
  /* The loop and the client take turns until the server closes; the
   * deadlines of httpd.h bound every input (a minute of turns here). */
  for (int turn = 0; turn < 6000 && !done; turn++) {
    uv_run(&loop, UV_RUN_NOWAIT);
    if (sent < size) {
      ssize_t k = send(fd, data + sent, size - sent, MSG_NOSIGNAL);
      if (k > 0)
        sent += (size_t)k;
      else if (k < 0 && errno != EAGAIN && errno != ENOTCONN)
        done = 1; /* refused before reading everything */
    } else if (!shut) {
      shutdown(fd, SHUT_WR);
      shut = 1;
    }
    /* Waits for the client's socket or the loop's descriptor (which a
     * worker's finished check wakes too). */
    struct pollfd p[2] = {{fd, POLLIN, 0}, {uv_backend_fd(&loop), POLLIN, 0}};
    int wait = uv_backend_timeout(&loop);
    if (poll(p, 2, wait < 0 || wait > 10 ? 10 : wait) > 0 &&
        (p[0].revents & (POLLIN | POLLHUP | POLLERR))) {
      for (;;) {
        /* Only the beginning is kept: the rest is read and dropped. */
        static char rest[4096];
        ssize_t k = got < sizeof reply - 1
                        ? recv(fd, reply + got, sizeof reply - 1 - got, 0)
                        : recv(fd, rest, sizeof rest, 0);
        if (k > 0) {
          got += got < sizeof reply - 1 ? (size_t)k : 0;
          continue;
        }
        if (k == 0 || errno != EAGAIN)
          done = 1;
        break;
      }
    }
  }
  close(fd);
  if (!done)
    abort(); /* the server neither answered nor closed */
  reply[got] = '\0';
  /* Whatever came back is HTTP with a status meant to be sent. */
  if (got >= 12) {
    if (strncmp(reply, "HTTP/1.", 7) != 0)
      abort();
    int status = atoi(reply + 9), known = 0;
    for (size_t i = 0; i < sizeof statuses / sizeof statuses[0]; i++)
      known |= status == statuses[i];
    if (!known) {
      fprintf(stderr, "fuzz_http_request: status %d\n", status);
      abort();
    }
  }
  return 0;
}
