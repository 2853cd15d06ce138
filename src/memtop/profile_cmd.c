/*
 * profile_cmd.c - `memtop profile` (see profile_cmd.h): the profile is
 * fetched through the target set (targetset.h: one PID, not timed, a read
 * asking for the profile on memtop's libuv connection, conn.c), in the
 * shell (shell.h) as its one mode without a screen or a signal, twice
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
#include "memtop/out.h"
#include "memtop/outfile.h"
#include "memtop/shell.h"
#include "targets/targetset.h"
#include "client/client.h"
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

/* The fetches: the target set's owner for `memtop profile`, a mode of
 * the shell (shell.h: the loop, the set with the PID named, no signal of
 * its own). */
typedef struct pc_fetch_s {
  mt_shell_t *sh;
  uv_timer_t wait; /* --seconds between the two profiles */
  mt_tset_t *set;
  int pid;
  long seconds;
  int want, got; /* profiles wanted (1 or 2), received */
  ms__profile_decoded_t *prof[2];
  int failed;
  int profiled; /* the read being answered brought its profile */
  char err[512];
} pc_fetch_t;

/* The profile comes just before its read's snapshot. */
static void pc_profile(void *arg, mt_tset_target_t *t, mt_tset_profile_t *p) {
  pc_fetch_t *f = arg;

  (void)t;
  f->profiled = 1;
  if (p->prof == NULL) {
    f->failed = 1;
    snprintf(f->err, sizeof f->err, "%s", p->msg);
    return;
  }
  if (f->got < 2) {
    f->prof[f->got++] = p->prof;
    p->prof = NULL;
  }
}

static void pc_snapshot(void *arg, mt_tset_target_t *t,
                        const ms_snapshot_t *snap) {
  pc_fetch_t *f = arg;

  (void)t;
  (void)snap;
  if (!f->profiled) {
    f->failed = 1;
    snprintf(f->err, sizeof f->err, "%s", "the target sent no profile");
  }
  f->profiled = 0;
}

static uint64_t pc_failure(void *arg, mt_tset_target_t *t, int status,
                           const char *msg) {
  pc_fetch_t *f = arg;

  (void)t;
  (void)status;
  f->failed = 1;
  snprintf(f->err, sizeof f->err, "%s", msg);
  return MT_TSET_BACKOFF;
}

static void pc_gone(void *arg, mt_tset_target_t *t, int status,
                    const char *msg) {
  pc_fetch_t *f = arg;

  (void)status;
  f->failed = 1;
  if (msg != NULL)
    snprintf(f->err, sizeof f->err, "%s", msg);
  else
    snprintf(f->err, sizeof f->err, "PID %d has exited", t->pid);
}

/* Every read here asks for the profile. */
static const mt_tset_req_t pc_req = {.profile = 1};

static void pc_second(uv_timer_t *h) {
  pc_fetch_t *f = h->data;

  if (mt_tset_fetch_all(f->set, &pc_req) == 0) {
    f->failed = 1;
    snprintf(f->err, sizeof f->err, "PID %d: cannot ask for the profile",
             f->pid);
    mt_shell_stop(f->sh);
  }
}

/* The read has reported: wait for the second, or stop. */
static void pc_quiet(void *arg) {
  pc_fetch_t *f = arg;

  if (f->failed || f->got >= f->want) {
    mt_shell_stop(f->sh);
    return;
  }
  if (f->got == 1 && f->prof[0]->profile.rate == 0) {
    mt_shell_stop(f->sh); /* said by the caller: no second read */
    return;
  }
  fprintf(stderr, "memtop: PID %d: profiling for %ld s...\n", f->pid,
          f->seconds);
  uv_timer_start(&f->wait, pc_second, (uint64_t)f->seconds * 1000, 0);
}

static const mt_tset_cbs_t pc_cbs = {
    .profile = pc_profile,
    .snapshot = pc_snapshot,
    .failure = pc_failure,
    .gone = pc_gone,
    .quiet = pc_quiet,
};

/* One PID (the shell adds it), not timed, no discovery. */
static int pc_setup(void *self, mt_shell_t *sh, mt_shell_setup_t *su) {
  pc_fetch_t *f = self;
  const mt_opts_t *o = mt_shell_opts(sh);
  uint64_t st = 0;

  f->sh = sh;
  f->pid = o->pids[0];
  f->seconds = o->seconds;
  f->want = o->seconds > 0 ? 2 : 1;
  uv_timer_init(mt_shell_loop(sh), &f->wait);
  f->wait.data = f;
  if (msc_proc_start_time(f->pid, &st) != 0) {
    f->failed = 1;
    snprintf(f->err, sizeof f->err, "PID %d: no such process", f->pid);
    return 1;
  }
  su->set = (mt_tset_opts_t){.timeout_ms = su->set.timeout_ms};
  su->cbs = &pc_cbs;
  su->arg = f;
  su->set_out = &f->set;
  return 0;
}

static int pc_start(void *self) {
  pc_fetch_t *f = self;

  if (mt_tset_fetch_all(f->set, &pc_req) == 0) {
    f->failed = 1;
    snprintf(f->err, sizeof f->err, "PID %d: out of memory", f->pid);
    return 1;
  }
  return 0;
}

static int pc_status(void *self) {
  pc_fetch_t *f = self;

  if (!f->failed && f->got == 0) {
    f->failed = 1;
    snprintf(f->err, sizeof f->err, "PID %d: no profile came", f->pid);
  }
  return f->failed;
}

static void pc_close(void *self) {
  pc_fetch_t *f = self;

  if (!uv_is_closing((uv_handle_t *)&f->wait))
    uv_close((uv_handle_t *)&f->wait, NULL);
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
  ms__profile_decoded_t *first = NULL, *second = NULL;
  const ms__profile_decoded_t *last;
  mt_heap_t h;
  char path[64];
  const char *out, *why = "";
  pc_outfile_t of = {.why = ""};
  int pid = o->pids[0], rc, status = 1, built = 0;
  uint64_t start_time;
  pc_fetch_t f;

  memset(&f, 0, sizeof f);
  if (mt_shell_run(o, &pc_mode, &f) != 0 && f.got == 0) {
    if (f.err[0] != '\0') /* else the shell has said why */
      mt_warn("%s", f.err);
    return 1;
  }
  first = f.prof[0];
  second = f.prof[1];
  if (first->profile.rate == 0) {
    mt_warn("PID %d does not sample its allocations (MEMSTATS_PROFILE_RATE=0 "
            "in its environment): start it without that setting for a heap "
            "profile",
            pid);
    goto out;
  }
  if (f.failed) {
    mt_warn("%s", f.err);
    goto out;
  }
  last = second != NULL ? second : first;
  start_time = last->profile.start_time;
  rc = mt_heap_build(&last->profile, second != NULL ? &first->profile : NULL,
                     &h);
  /* What was received is in h now: freed before the larger steps. */
  ms__profile_decoded_free(first);
  ms__profile_decoded_free(second);
  first = second = NULL;
  if (rc != 0) {
    mt_warn("PID %d: cannot build the profile: %s", pid, mt_heap_strerror(rc));
    goto out;
  }
  built = 1;
  /* Debug files fetched from debuginfod (DEBUGINFOD_URLS) within the
   * request's deadline, each fetch said on stderr. */
  mt_debuginfod_configure(o->timeout_ms, 1);
  rc = mt_heap_symbolize(&h, pid, start_time);
  if (rc != 0) {
    mt_warn("PID %d: resolving names: %s", pid, ms_strerror(rc));
    goto out;
  }
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
