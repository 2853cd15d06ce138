/*
 * profile_cmd.c - `memtop profile` (see profile_cmd.h): the profile is
 * fetched, twice --seconds apart for a delta, and built and resolved into
 * names, files and lines by profile_fetch.h, the one path `memtop serve`'s
 * /debug/pprof/heap takes too; the fetch runs on the loop of the shell
 * (shell.h), whose one mode this is, without a screen, a signal or a set
 * of the shell's. What is left unresolved is said, and the profile is
 * written as pprof's gzipped profile.proto or as a top list.
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
#include <unistd.h>

#include "common/strbuf.h"
#include "memstats.h"
#include "memtop/out.h"
#include "memtop/outfile.h"
#include "memtop/profile_fetch.h"
#include "memtop/shell.h"
#include "pprof/debuginfod.h"
#include "pprof/filter.h"
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

/* What was asked of the samples, said as pprof says it before its top
 * list. */
static void put_filters(ms__strbuf_t *b, const mt_heap_filter_t *f) {
  if (f->focus == NULL && f->ignore == NULL && f->hide == NULL)
    return;
  ms__strbuf_puts(b, "Active filters:\n");
  if (f->focus != NULL) {
    ms__strbuf_puts(b, "   focus=");
    ms__strbuf_put_safe(b, f->focus, (size_t)-1);
    ms__strbuf_puts(b, "\n");
  }
  if (f->ignore != NULL) {
    ms__strbuf_puts(b, "   ignore=");
    ms__strbuf_put_safe(b, f->ignore, (size_t)-1);
    ms__strbuf_puts(b, "\n");
  }
  if (f->hide != NULL) {
    ms__strbuf_puts(b, "   hide=");
    ms__strbuf_put_safe(b, f->hide, (size_t)-1);
    ms__strbuf_puts(b, "\n");
  }
}

/* `memtop profile` as a mode of the shell (shell.h: its loop only, no
 * set, no signal): the fetch (profile_fetch.h, with its own set) runs on
 * the shell's loop, and stops it when it is over. */
typedef struct pc_run_s {
  mt_shell_t *sh;
  mt_pfetch_t *fetch;             /* while fetching */
  ms__profile_decoded_t *prof[2]; /* what it brought */
  int failed;
  char err[512];
} pc_run_t;

static void pc_fetched(void *arg, mt_pfetch_t *pf) {
  pc_run_t *r = arg;

  r->failed = mt_pfetch_take(pf, r->prof, r->err, sizeof r->err);
  r->fetch = NULL;
  mt_shell_stop(r->sh);
}

/* The fetch makes its own set (one PID, not timed): the shell makes none.
 * A gzipped profile is not written to a terminal (-o - on one), as gzip
 * refuses: it would only garble the screen, after the target was asked
 * for its profile. Returns 0, or 1 after saying so (as gzip: the file
 * could not be written). */
static int pc_setup(void *self, mt_shell_t *sh, mt_shell_setup_t *su) {
  pc_run_t *r = self;
  const mt_opts_t *o = mt_shell_opts(sh);

  r->sh = sh;
  su->cbs = NULL;
  if (o->format != MT_PROFILE_TEXT && o->output != NULL &&
      strcmp(o->output, "-") == 0 && isatty(STDOUT_FILENO)) {
    mt_warn("not writing a gzipped pprof profile to a terminal (-o -): "
            "redirect it (memtop profile -o - %d > FILE), give -o FILE, or "
            "use --format text for a top list",
            o->pids[0]);
    return 1;
  }
  return 0;
}

static int pc_start(void *self) {
  pc_run_t *r = self;
  const mt_opts_t *o = mt_shell_opts(r->sh);

  r->fetch =
      mt_pfetch_start(mt_shell_loop(r->sh), o->pids[0], o->seconds,
                      o->timeout_ms, pc_fetched, r, r->err, sizeof r->err);
  if (r->fetch == NULL) {
    r->failed = 1;
    return 1;
  }
  r->fetch->verbose = 1; /* "profiling for N s..." */
  return 0;
}

static int pc_status(void *self) {
  return ((pc_run_t *)self)->failed;
}

static void pc_close(void *self) {
  pc_run_t *r = self;

  mt_pfetch_release(r->fetch);
  r->fetch = NULL;
}

static const mt_mode_t pc_mode = {
    .setup = pc_setup,
    .start = pc_start,
    .status = pc_status,
    .close = pc_close,
};

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
  mt_heap_t h;
  char path[64], err[640];
  const char *out, *why = "";
  pc_outfile_t of = {.why = ""};
  int pid = o->pids[0], rc, status = 1, built = 0;
  pc_run_t r;

  memset(&r, 0, sizeof r);
  /* Its status is r.failed's, or the shell's own failure (said), r empty. */
  (void)mt_shell_run(o, &pc_mode, &r);
  if (r.failed || r.prof[0] == NULL) {
    if (r.err[0] != '\0') /* else the shell has said why */
      mt_warn("%s", r.err);
    goto out;
  }
  /* Debug files fetched from debuginfod (DEBUGINFOD_URLS) within the
   * request's deadline, each fetch said on stderr. */
  mt_debuginfod_configure(o->timeout_ms, 1);
  if (mt_profile_resolve(&r.prof[0], &r.prof[1], pid, &h, err, sizeof err) !=
      0) {
    mt_warn("%s", err);
    goto out;
  }
  built = 1;
  report_unresolved(&h);

  if (o->format == MT_PROFILE_TEXT) {
    ms__strbuf_t b = MS_STRBUF_INIT;

    /* The text only: the pprof file stays whole (filter.h). */
    rc = mt_heap_filter(&h, &o->filter);
    if (rc != 0) {
      mt_warn("PID %d: filtering the profile: %s", pid, ms_strerror(rc));
      goto out;
    }
    put_filters(&b, &o->filter);
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
    if (rc == -EPIPE) {
      status = 0; /* the reader went away (| head): as --once, not an error */
      goto out;
    }
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
  if (rc != 0 && of.err == -EPIPE) {
    status = 0; /* the reader of -o - went away, as above */
    goto out;
  }
  if (rc != 0) {
    mt_warn("cannot write %s: %s", out, of.why);
    goto out;
  }
  if (strcmp(out, "-") != 0)
    mt_warn("wrote PID %d's heap profile%s to %s (%zu %s, sampling rate "
            "%llu byte%s); read it with: go tool pprof -top %s",
            pid, h.delta ? " (growth over the interval)" : "", out, h.nsamples,
            h.nsamples == 1 ? "stack and size" : "stacks and sizes",
            (unsigned long long)h.rate, h.rate == 1 ? "" : "s", out);
  status = 0;
out:
  if (built)
    mt_heap_free(&h);
  ms__profile_decoded_free(r.prof[0]);
  ms__profile_decoded_free(r.prof[1]);
  return status;
}
