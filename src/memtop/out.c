/*
 * out.c - memtop's plain output (see out.h).
 */
#include "memtop/out.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/sanitize.h"
#include "emit/emit.h"
#include "memtop/sites.h"

void mt_warn(const char *fmt, ...) {
  char raw[2048], safe[4 * sizeof raw + 1];
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(raw, sizeof raw, fmt, ap);
  va_end(ap);
  /* A message cut short may end inside a UTF-8 sequence: the sanitiser
   * shows those bytes as escapes. */
  ms__sanitize(safe, sizeof safe, raw, sizeof raw, (size_t)-1);
  fprintf(stderr, "memtop: %s\n", safe);
}

void mt_out_flush(mt_out_t *out) {
  if (out->buf.oom) {
    fprintf(stderr, "memtop: out of memory while formatting the report\n");
    out->failed = 1;
  } else if (out->buf.len > 0 && !out->broken) {
    if (fwrite(out->buf.data, 1, out->buf.len, stdout) != out->buf.len ||
        fflush(stdout) != 0) {
      /* A reader that went away (`memtop --once -n 100 | head`) is not
       * an error worth a message; anything else is. */
      if (errno == EBADF) {
        fprintf(stderr, "memtop: writing the report failed: standard "
                        "output is closed (give it a file, or >/dev/null "
                        "to discard the report)\n");
        out->failed = 1;
      } else if (errno != EPIPE) {
        fprintf(stderr, "memtop: writing the report failed: %s\n",
                strerror(errno));
        out->failed = 1;
      }
      out->broken = 1;
    }
  }
  ms__strbuf_reset(&out->buf);
}

/* A tree's report says its parent on its second line, after the first
 * (whose format is the seed program's). */
static void put_parent(mt_out_t *out, size_t at, int ppid) {
  char line[48];
  const char *nl = memchr(out->buf.data + at, '\n', out->buf.len - at);
  size_t n, pos;

  if (nl == NULL)
    return;
  pos = (size_t)(nl - out->buf.data) + 1;
  n = (size_t)snprintf(line, sizeof line, "  parent PID %d\n", ppid);
  ms__strbuf_puts(&out->buf, line); /* room for it */
  if (out->buf.oom)
    return;
  memmove(out->buf.data + pos + n, out->buf.data + pos, out->buf.len - n - pos);
  memcpy(out->buf.data + pos, line, n);
}

void mt_out_snapshot(mt_out_t *out, const ms_snapshot_t *s) {
  mt_out_snapshot_sites(out, s, NULL, NULL);
}

void mt_out_snapshot_sites(mt_out_t *out, const ms_snapshot_t *s,
                           const ms__profile_decoded_t *prof, const char *err) {
  mt_out_snapshot_who(out, s, NULL, NULL, prof, err);
}

void mt_out_snapshot_who(mt_out_t *out, const ms_snapshot_t *s,
                         const msc_ident_t *id, const char *user,
                         const ms__profile_decoded_t *prof, const char *err) {
  if (out->json) {
    mt_emit_json_who(&out->buf, s, id, user);
    if (out->sites > 0)
      mt_sites_append(&out->buf, s->pid, prof, err, out->sites, 1, out->filter);
    ms__strbuf_puts(&out->buf, "\n");
    return;
  }
  /* Reports are paragraphs: a blank line between processes and rounds. */
  if (out->nemitted++ > 0)
    ms__strbuf_puts(&out->buf, "\n");
  size_t at = out->buf.len;
  mt_emit_report(&out->buf, s);
  if (out->tree && id != NULL && id->ppid > 0 && !out->buf.oom)
    put_parent(out, at, id->ppid);
  if (out->sites > 0)
    mt_sites_append(&out->buf, s->pid, prof, err, out->sites, 0, out->filter);
}

void mt_out_free(mt_out_t *out) {
  ms__strbuf_free(&out->buf);
}
