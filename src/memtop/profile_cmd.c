/*
 * profile_cmd.c - `memtop profile` (see profile_cmd.h): the profile is
 * fetched through the target set (targetset.h: one PID, not timed, a read
 * asking for the profile on memtop's libuv connection, conn.c), twice
 * --seconds apart for a delta (the second on a loop timer), built and
 * resolved into names, files and lines (src/pprof), and written as
 * pprof's gzipped profile.proto or as a top list.
 *
 * The target's files are read through /proc/PID/root when the process is
 * still there, so that a process in another mount namespace (a
 * container) is resolved from its own binaries; each file is checked
 * against the build id the target saw.
 */
#include "memtop/profile_cmd.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "common/strbuf.h"
#include "memstats.h"
#include "memtop/loop.h"
#include "memtop/out.h"
#include "memtop/outfile.h"
#include "memtop/profile_fetch.h"
#include "targets/targetset.h"
#include "client/client.h"
#include "pprof/heap.h"
#include "pprof/pprof.h"
#include "pprof/top.h"

#define SITES_DEFAULT 20

/* Says which mappings could not be resolved, once per file (the first
 * mapping's reason), at most 8. A file is a string index: one flag per
 * string says it was seen, so 65,536 mappings cost as many steps, not
 * their square. */
static void report_unresolved(const mt_heap_t *h) {
  unsigned char *seen = calloc(h->nstrings + 1, 1);
  size_t i, shown = 0;

  if (seen == NULL)
    return;
  for (i = 0; i < h->nmappings; i++) {
    const mt_heap_mapping_t *m = &h->mappings[i];

    if (m->unresolved == NULL || h->strings[m->filename][0] != '/' ||
        seen[m->filename])
      continue;
    seen[m->filename] = 1;
    if (shown++ == 8) {
      mt_warn("(more mappings left unresolved)");
      break;
    }
    mt_warn("%s: names not resolved: %s", h->strings[m->filename],
            m->unresolved);
  }
  free(seen);
}

/* The fetch on a loop of its own, run until the fetch is over. */
typedef struct pc_fetch_s {
  uv_loop_t loop;
  ms__profile_decoded_t *prof[2];
  int failed, got;
  char err[512];
} pc_fetch_t;

static void pc_done(void *arg, mt_pfetch_t *pf) {
  pc_fetch_t *f = arg;
  f->failed = pf->failed;
  f->got = pf->got;
  f->prof[0] = pf->prof[0];
  f->prof[1] = pf->prof[1];
  pf->prof[0] = pf->prof[1] = NULL;
  snprintf(f->err, sizeof f->err, "%s", pf->err);
  mt_pfetch_release(pf);
}

/* Fetches pid's profile, and with seconds > 0 another that many seconds
 * later (profile_fetch.h). Returns 0 with f->prof[0] (and [1]), or 1
 * with the reason in f->err. */
static int pc_fetch(pc_fetch_t *f, int pid, long seconds, int tmo) {
  memset(f, 0, sizeof *f);
  if (uv_loop_init(&f->loop) != 0) {
    snprintf(f->err, sizeof f->err, "cannot start an event loop");
    return 1;
  }
  mt_pfetch_t *pf = mt_pfetch_start(&f->loop, pid, seconds, tmo, pc_done, f,
                                    f->err, sizeof f->err);
  if (pf == NULL)
    f->failed = 1;
  else
    pf->verbose = 1;
  do
    uv_run(&f->loop, UV_RUN_DEFAULT);
  while (uv_loop_alive(&f->loop));
  uv_loop_close(&f->loop);
  return f->failed;
}

/* The sink of mt_pprof_write: the output file. */
typedef struct pc_outfile_s {
  mt_outfile_t f;
  const char *why;
  int err; /* the file's own error, not the encoder's */
} pc_outfile_t;

static int to_outfile(void *ctx, const void *data, size_t len) {
  pc_outfile_t *of = ctx;

  of->err = mt_outfile_write(&of->f, data, len, &of->why);
  return of->err;
}

int mt_profile_main(const mt_opts_t *o) {
  ms__profile_decoded_t *first = NULL, *second = NULL;
  mt_heap_t h;
  char path[64];
  const char *out, *why = "";
  pc_outfile_t of = {.why = ""};
  int pid = o->pids[0], tmo = o->timeout_ms, rc, status = 1, built = 0;

  pc_fetch_t f;

  if (pc_fetch(&f, pid, o->seconds, tmo) != 0 && f.got == 0) {
    mt_warn("%s", f.err);
    return 1;
  }
  first = f.prof[0];
  second = f.prof[1];
  /* A target that does not sample is said as such, whatever else. */
  if (f.failed && first->profile.rate != 0) {
    mt_warn("%s", f.err);
    goto out;
  }
  char why_build[600];
  rc =
      mt_profile_resolve(&first, &second, pid, &h, why_build, sizeof why_build);
  if (rc != 0) {
    mt_warn("%s", why_build);
    goto out;
  }
  built = 1;
  report_unresolved(&h);

  if (o->format == MT_PROFILE_TEXT) {
    ms__strbuf_t b = MS_STRBUF_INIT;

    rc = mt_top_text(&b, &h, MT_HEAP_INUSE_SPACE,
                     o->sites > 0 ? (size_t)o->sites : SITES_DEFAULT);
    if (rc == 0 && h.delta) {
      ms__strbuf_puts(&b, "\n");
      rc = mt_top_text(&b, &h, MT_HEAP_ALLOC_SPACE,
                       o->sites > 0 ? (size_t)o->sites : SITES_DEFAULT);
    }
    if (rc != 0) {
      ms__strbuf_free(&b);
      mt_warn("PID %d: cannot make the report: %s", pid, ms_strerror(rc));
      goto out;
    }
    rc = mt_outfile_save(o->output != NULL ? o->output : "-", b.data, b.len,
                         &why);
    ms__strbuf_free(&b);
    if (rc != 0) {
      mt_warn("PID %d: cannot write the report to %s: %s", pid,
              o->output != NULL ? o->output : "standard output", why);
      goto out;
    }
    status = 0;
    goto out;
  }

  snprintf(path, sizeof path, "memtop-%d.pb.gz", pid);
  out = o->output != NULL ? o->output : path;
  rc = mt_outfile_open(&of.f, out, &of.why);
  if (rc == 0) {
    /* Written as it is encoded: no copy of the whole file in memory. */
    rc = mt_pprof_write(&h, to_outfile, &of);
    if (rc != 0) {
      mt_outfile_abort(&of.f);
      if (of.err == 0) {
        mt_warn("PID %d: cannot encode the profile: %s", pid,
                mt_heap_strerror(rc));
        goto out;
      }
    } else {
      rc = mt_outfile_commit(&of.f, &of.why);
    }
  }
  if (rc != 0) {
    mt_warn("cannot write %s: %s", out, of.why);
    goto out;
  }
  if (strcmp(out, "-") != 0)
    mt_warn("wrote PID %d's heap profile%s to %s (%zu stacks and sizes, "
            "sampling rate "
            "%llu bytes); read it with: go tool pprof -top %s",
            pid, h.delta ? " (growth over the interval)" : "", out, h.nsamples,
            (unsigned long long)h.rate, out);
  status = 0;
out:
  if (built)
    mt_heap_free(&h);
  ms__profile_decoded_free(first);
  ms__profile_decoded_free(second);
  return status;
}
