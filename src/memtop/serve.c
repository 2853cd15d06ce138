/*
 * serve.c - `memtop serve` (see serve.h): one more owner of the target set
 * (targetset.h), the rounds that read it, and the answers they prepare
 * for the scrapes.
 *
 * The set discovers: serve lists the attachable processes every
 * MT_SERVE_RESCAN_MS (new ones join and are read at once, those that
 * exited are marked gone and dropped at the next listing, keep_gone_ms 0),
 * never while a round runs. Each target keeps its latest snapshot (the
 * `snapshot` callback), served with its age. A round asks every target at
 * once for a snapshot (mt_tset_fetch_all), on memtop's libuv loop; it ends
 * when every target asked has answered or failed, MT_SERVE_LATE_MS in for
 * the targets that have figures already (a late one is served its last
 * snapshot, its read goes on in the background, bounded by --timeout), or
 * after MT_SERVE_WAIT_MS. Its figures are then rendered and gzipped once
 * per format into the answer every scrape gets until the next round ends
 * (prepare); a target that joins or leaves between rounds has them made
 * again.
 *
 * A scrape waits for none of it: it is answered at once with the prepared
 * answer, after a check that no process it names has exited (kill(pid,
 * 0)); one that finds it older than -d starts the next round, timed to end
 * just before the next scrape is due (refresh_soon). Where a scrape of 200
 * processes spent its time when it waited for its round (bench_serve's
 * BENCH_TRACE, MEMTOP_SERVE_TRACE here): the round's wait for the targets,
 * mostly the loop's own work on their 200 answers and its thread's wait
 * for a CPU, then the rendering and the gzip. Only the first scrape, before
 * any round, waits for one.
 *
 * It is a mode of the shell (shell.h): the shell makes the loop, the set
 * and the signals (SIGINT, SIGTERM: stop, exit 0); this file the server
 * and the rounds.
 *
 * Reads happen for the scrapes, not on a cadence of their own: the set is
 * timed only for a new target's first read (`request` skips the rest), so
 * 200 processes scraped every 15 s are read every 15 s.
 */
#include "memtop/serve.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "memstats.h"
#include "client/client.h"
#include "common/procfs.h"
#include "common/sanitize.h"
#include "emit/emit.h"
#include "exporter/httpd.h"
#include "exporter/negotiate.h"
#include "memtop/profile_fetch.h"
#include "memtop/shell.h"
#include "pprof/debuginfod.h"
#include "pprof/pprof.h"
#include "targets/targetset.h"
#include "exporter/webconfig.h"

typedef struct serve_s serve_t;

/* A scraper (its address, httpd.h's mt_scrape_client) and the interval
 * its scrapes come at, to time the rounds before its next one. */
typedef struct sv_scraper_s {
  uint64_t client;
  uint64_t last_ns, period_ns; /* 0: not known yet */
} sv_scraper_t;

/* MEMTOP_SERVE_TRACE=1, a switch for bench_serve: where each answered
 * round's time went, one line on stderr ("memtop-trace: ..."): from the
 * first scrape's arrival to its answer, the wait for the targets, the
 * rendering, the gzip, the listings run meanwhile, the rest of the loop's
 * work (libuv's idle time subtracted) and how long the loop's thread
 * waited for a CPU (its run_delay in /proc/thread-self/schedstat), and
 * the age of the figures served (since their round ended); and, so that
 * a client can tell what the loop was doing before the scrape reached
 * serve (uv_hrtime is CLOCK_MONOTONIC, the client's clock), when the
 * scrape arrived and the spans of the last round and the last prepare. */
typedef struct sv_trace_s {
  int on;
  uint64_t arrive_ns, start_ns, end_ns; /* first scrape; round's ends */
  uint64_t idle0_ns, delay0_ns;         /* at the first scrape */
  uint64_t render_ns, gzip_ns, listing_ns;
  uint64_t round_from_ns, round_to_ns; /* the last round (to: 0 running) */
  uint64_t prep_from_ns, prep_to_ns;   /* the last prepare */
} sv_trace_t;

/* A /debug/pprof/heap request: fetched on the loop (profile_fetch.h),
 * then built, resolved and encoded on a libuv worker, one at a time (the
 * resolution reads the target's binaries and debug info: tens to
 * hundreds of milliseconds the loop does not spend). */
typedef struct sv_prof_s {
  serve_t *sv;
  mt_scrape_t *s; /* NULL once the server has stopped */
  mt_pfetch_t *f; /* while fetching */
  uv_work_t work;
  int on_worker;
  int pid;
  ms__profile_decoded_t *p[2];
  unsigned status;
  ms__strbuf_t body;
  char err[640];
  struct sv_prof_s *next;       /* every request's list */
  struct sv_prof_s *next_queue; /* waiting for the worker */
} sv_prof_t;

/* What serve keeps of a target (the set's target's `user`). */
typedef struct sv_target_s {
  ms_snapshot_t *snap; /* the latest answer; NULL until the first */
  uint64_t errors;     /* failed reads */
  int pending;         /* the current round waits for its answer */
  int late;            /* this round served its last figures: its read was
                        * later than MT_SERVE_LATE_MS */
  uint64_t read_ns;    /* how long the last answered read took */
  char exe[MT_PROM_EXE_MAX + 1];
  char group[MT_GROUP_MAX + 1]; /* --group-by's label; "" without */
} sv_target_t;

struct serve_s {
  const mt_opts_t *o;
  mt_webconfig_t web;
  mt_httpd_t *http;
  mt_tset_t *set;
  uint64_t fresh_ns; /* -d: figures this young are served as they are */
  int in_round;
  size_t pending;
  uint64_t round_end_ns;
  mt_scrape_t **waiting; /* scrapes waiting for the round */
  size_t nwaiting, capwaiting;
  uv_timer_t bound;
  uv_timer_t late; /* MT_SERVE_LATE_MS into a round */
  mt_shell_t *sh;
  int stopping;
  sv_prof_t *profs; /* the profile requests */
  size_t nprofs;
  sv_prof_t *queue_head, *queue_tail; /* fetched, waiting for the worker */
  int working;                        /* a profile is on the worker */
  uv_timer_t rescan;                  /* the listing, serve's to time */
  int rescan_due;                     /* due during a round */
  /* The answers prepared from the last round's figures (prepare), one
   * per format (0 text, 1 OpenMetrics) asked for so far (bits of asked;
   * of asked_gz, those asked gzipped), served to every scrape until the
   * next round ends: when they were made, how many targets were late. */
  mt_answer_t *ready[2];
  unsigned asked, asked_gz;
  uint64_t ready_ns;
  long ready_late;
  int changed;         /* a target joined or left since they were made */
  uv_timer_t prep;     /* makes them again after such a change */
  uv_timer_t refresh;  /* starts the next round (refresh_soon) */
  uint64_t refresh_ns; /* when it is due, while armed */
  sv_scraper_t scrapers[MT_SERVE_SCRAPERS];
  uint64_t round_start_ns, round_ns; /* the last round's length */
  int closed;
  sv_trace_t tr;
};

static void answer_all(serve_t *sv);
static void bound_cb(uv_timer_t *timer);
static void round_check_end(serve_t *sv);
static void set_changed(serve_t *sv);

/* The loop's thread's wait for a CPU so far (ns); 0 if unknown. */
static uint64_t run_delay_ns(void) {
  char buf[128];
  unsigned long long run = 0, delay = 0;
  if (ms__read_small_file("/proc/thread-self/schedstat", buf, sizeof buf) <=
          0 ||
      sscanf(buf, "%llu %llu", &run, &delay) != 2)
    return 0;
  return delay;
}

static double ms_of(uint64_t ns) {
  return (double)ns / 1e6;
}

/* The first scrape of a round (or of a fresh answer) arrived. */
static void trace_arrive(serve_t *sv) {
  if (!sv->tr.on)
    return;
  sv->tr.arrive_ns = uv_hrtime();
  sv->tr.start_ns = sv->tr.end_ns = 0;
  sv->tr.idle0_ns = uv_metrics_idle_time(mt_shell_loop(sv->sh));
  sv->tr.delay0_ns = run_delay_ns();
  sv->tr.render_ns = sv->tr.gzip_ns = sv->tr.listing_ns = 0;
}

/* The scrapes waiting were answered (`late` targets served late). */
static void trace_answered(serve_t *sv, size_t scrapes, long late) {
  if (!sv->tr.on || sv->tr.arrive_ns == 0)
    return;
  uint64_t now = uv_hrtime();
  uint64_t total = now - sv->tr.arrive_ns;
  uint64_t idle = uv_metrics_idle_time(mt_shell_loop(sv->sh)) - sv->tr.idle0_ns;
  uint64_t busy = total > idle ? total - idle : 0;
  uint64_t own = sv->tr.render_ns + sv->tr.gzip_ns + sv->tr.listing_ns;
  uint64_t wait = sv->tr.start_ns && sv->tr.end_ns > sv->tr.start_ns
                      ? sv->tr.end_ns - sv->tr.start_ns
                      : 0;
  fprintf(stderr,
          "memtop-trace: scrapes=%zu targets=%zu total=%.3f wait=%.3f "
          "render=%.3f gzip=%.3f listing=%.3f loop_other=%.3f "
          "sched=%.3f late=%ld age=%.3f arrive=%llu round=%llu-%llu "
          "prep=%llu-%llu\n",
          scrapes, mt_tset_count(sv->set), ms_of(total), ms_of(wait),
          ms_of(sv->tr.render_ns), ms_of(sv->tr.gzip_ns),
          ms_of(sv->tr.listing_ns), ms_of(busy > own ? busy - own : 0),
          ms_of(run_delay_ns() - sv->tr.delay0_ns), late,
          ms_of(now - sv->ready_ns), (unsigned long long)sv->tr.arrive_ns,
          (unsigned long long)sv->tr.round_from_ns,
          (unsigned long long)sv->tr.round_to_ns,
          (unsigned long long)sv->tr.prep_from_ns,
          (unsigned long long)sv->tr.prep_to_ns);
  sv->tr.arrive_ns = 0;
}

/* ------------------------------------------------------------------------
 * The target set's callbacks
 * ------------------------------------------------------------------------ */

/* Whether t is still the process it was: alive, and not a new process
 * that has its PID (start time compared). */
static int target_alive(const mt_tset_target_t *t) {
  uint64_t st = 0;
  if (msc_proc_start_time(t->pid, &st) != 0)
    return 0;
  return t->start_time == 0 || st == t->start_time;
}

/* The round no longer waits for t's answer. */
static void round_drop(serve_t *sv, sv_target_t *u) {
  if (!u->pending)
    return;
  u->pending = 0;
  sv->pending--;
  round_check_end(sv);
}

/* The `group` label of --group-by (cli.h): what names the process
 * whatever its PID, read once when it is found. A value that cannot be
 * read stays empty (the label is then served empty, as Prometheus treats
 * a missing label). */
static void read_group(int pid, mt_group_by_t rule, char *out, size_t len) {
  static const char *const files[] = {"", "comm", "exe", "cmdline", "cgroup"};
  char path[64], buf[4096];
  out[0] = '\0';
  if (rule == MT_GROUP_NONE)
    return;
  snprintf(path, sizeof path, "/proc/%d/%s", pid, files[rule]);
  if (rule == MT_GROUP_EXE) {
    ssize_t n = readlink(path, out, len - 1);
    out[n > 0 ? (size_t)n : 0] = '\0';
    return;
  }
  ssize_t n = ms__read_small_file(path, buf, sizeof buf);
  if (n <= 0)
    return;
  const char *v = buf;
  size_t vl = (size_t)n;
  if (rule == MT_GROUP_CGROUP) {
    /* cgroup v2's line, "0::/system.slice/nginx.service". */
    if (strncmp(buf, "0::", 3) == 0) {
      v = buf + 3;
    } else {
      v = strstr(buf, "\n0::");
      if (!v)
        return;
      v += 4;
    }
    vl = strcspn(v, "\n");
  } else if (rule == MT_GROUP_COMM) {
    vl = strcspn(v, "\n");
  } else {
    /* The arguments' NULs as spaces, the last one dropped. */
    for (size_t i = 0; i < vl; i++)
      if (buf[i] == '\0')
        buf[i] = ' ';
    while (vl > 0 && buf[vl - 1] == ' ')
      vl--;
  }
  if (vl > len - 1)
    vl = len - 1;
  memcpy(out, v, vl);
  out[vl] = '\0';
}

static int on_added(void *arg, mt_tset_target_t *t) {
  serve_t *sv = arg;
  sv_target_t *u = calloc(1, sizeof *u);
  if (!u)
    return MS_ENOMEM; /* refused: the set drops it (targetset.h) */
  /* The program's path, where /proc lets us read it (another user's
   * process, as a user, does not): a label, so made safe when written. */
  char link[64];
  snprintf(link, sizeof link, "/proc/%d/exe", t->pid);
  ssize_t n = readlink(link, u->exe, sizeof u->exe - 1);
  u->exe[n > 0 ? (size_t)n : 0] = '\0';
  read_group(t->pid, sv->o->group_by, u->group, sizeof u->group);
  t->user = u;
  return 0;
}

static void on_retired(void *arg, mt_tset_target_t *t) {
  serve_t *sv = arg;
  sv_target_t *u = t->user;
  if (!u)
    return;
  t->user = NULL;
  /* A target dropped while the round waited for it no longer holds the
   * round open (its reply will not come). */
  round_drop(sv, u);
  if (u->snap)
    set_changed(sv);
  free(u->snap);
  free(u);
}

/* A timed read is due: only a target never read yet is read between
 * scrapes (a new one, so that the next scrape has its figures). */
static int on_request(void *arg, mt_tset_target_t *t, mt_tset_req_t *req) {
  sv_target_t *u = t->user;
  (void)arg;
  (void)req;
  return u == NULL || u->snap != NULL;
}

static void on_snapshot(void *arg, mt_tset_target_t *t,
                        const ms_snapshot_t *s) {
  serve_t *sv = arg;
  sv_target_t *u = t->user;
  if (!u->snap) {
    u->snap = malloc(sizeof *u->snap);
    set_changed(sv); /* a new target's first figures */
  }
  if (u->snap)
    memcpy(u->snap, s, sizeof *u->snap);
  uint64_t now = mt_tset_now_ns(sv->set);
  /* Whoever asked: a round, or the listing that found it (its first read,
   * which no round asked for: its duration is known all the same). */
  if (t->asked_ns && now > t->asked_ns)
    u->read_ns = now - t->asked_ns;
  round_drop(sv, u);
}

static uint64_t on_failure(void *arg, mt_tset_target_t *t, int status,
                           const char *msg) {
  serve_t *sv = arg;
  sv_target_t *u = t->user;
  (void)msg;
  /* Replaced by a new process under its PID: served no more. */
  if (status == MS_ESTALE) {
    mt_tset_mark_gone(sv->set, t);
    set_changed(sv);
  }
  u->errors++;
  round_drop(sv, u);
  return MT_TSET_BACKOFF;
}

static void on_gone(void *arg, mt_tset_target_t *t, int status,
                    const char *msg) {
  serve_t *sv = arg;
  sv_target_t *u = t->user;
  (void)msg;
  if (status != 0)
    u->errors++;
  set_changed(sv);
  round_drop(sv, u);
}

/* ------------------------------------------------------------------------
 * Rounds
 * ------------------------------------------------------------------------ */

static void round_check_end(serve_t *sv) {
  /* A process just listed is waited for too, until its probe (its first
   * read) ends: the first scrape has the processes there are. */
  if (!sv->in_round || sv->pending > 0 ||
      (sv->set != NULL && mt_tset_probing(sv->set) > 0))
    return;
  sv->in_round = 0;
  sv->round_end_ns = uv_hrtime();
  sv->tr.end_ns = sv->round_end_ns;
  answer_all(sv);
}

static void on_probed(void *arg) {
  round_check_end(arg);
}

/* MT_SERVE_LATE_MS into the round: the targets that have figures and
 * have not answered yet are served their last ones (with their age) and
 * waited for no more; their reads go on, and their answers are kept for
 * the next round. Only a target with no figures at all (just found)
 * still holds the round, up to MT_SERVE_WAIT_MS. Under load, out of 200
 * processes some are always late to be scheduled: the slowest of them
 * made the tail (issue 24). */
static void late_cb(uv_timer_t *timer) {
  serve_t *sv = timer->data;
  if (!sv->in_round)
    return;
  size_t n = mt_tset_count(sv->set);
  for (size_t i = 0; i < n; i++) {
    sv_target_t *u = mt_tset_at(sv->set, i)->user;
    if (u && u->pending && u->snap) {
      u->pending = 0;
      u->late = 1;
      sv->pending--;
    }
  }
  round_check_end(sv);
}

static void round_start(serve_t *sv) {
  if (sv->in_round)
    return;
  sv->in_round = 1;
  sv->round_start_ns = sv->tr.start_ns = sv->tr.round_from_ns = uv_hrtime();
  sv->tr.round_to_ns = 0;
  uv_timer_start(&sv->late, late_cb, MT_SERVE_LATE_MS, 0);
  uv_timer_start(&sv->bound, bound_cb, MT_SERVE_WAIT_MS, 0);
  size_t n = mt_tset_count(sv->set);
  uint64_t now = mt_tset_now_ns(sv->set);
  /* A target still busy with an earlier request is not asked again: the
   * round waits for that answer if it was asked lately (just found), not
   * if it has been waiting longer than a scrape may (it hangs: its last
   * figures are served, with their age). The others are asked now, all
   * at once (2: to be asked). */
  for (size_t i = 0; i < n; i++) {
    mt_tset_target_t *t = mt_tset_at(sv->set, i);
    sv_target_t *u = t->user;
    u->late = 0;
    if (t->gone)
      u->pending = 0;
    else if (!mt_tset_busy(sv->set, t))
      u->pending = 2;
    else
      u->pending = now - t->asked_ns < (uint64_t)MT_SERVE_WAIT_MS * 1000000u;
  }
  /* No reply runs inside this call, no target joins or leaves. */
  mt_tset_fetch_all(sv->set, NULL);
  for (size_t i = 0; i < n; i++) {
    mt_tset_target_t *t = mt_tset_at(sv->set, i);
    sv_target_t *u = t->user;
    if (u->pending == 2)
      u->pending = mt_tset_busy(sv->set, t);
    sv->pending += (size_t)u->pending;
  }
  round_check_end(sv);
}

/* The listing (every MT_SERVE_RESCAN_MS: new processes, and those
 * that exited dropped) is serve's to time, not the set's: one that
 * falls due during a round would add its readdir and /proc reads
 * (milliseconds for 200 processes) to the round (and to the first
 * scrape, which waits for it), so it waits until the round's answers are
 * made. */
static void rescan_cb(uv_timer_t *timer) {
  serve_t *sv = timer->data;
  if (sv->stopping)
    return;
  if (sv->in_round || sv->nwaiting > 0) {
    sv->rescan_due = 1;
    return;
  }
  sv->rescan_due = 0;
  uint64_t t0 = uv_hrtime();
  mt_tset_rescan(sv->set);
  if (sv->tr.on)
    sv->tr.listing_ns += uv_hrtime() - t0;
}

/* ------------------------------------------------------------------------
 * Scrapes
 * ------------------------------------------------------------------------ */

/* memtop's own process now (process_*): /proc/self/stat for the CPU
 * time, start, sizes; /proc/self/fd and RLIMIT_NOFILE for the
 * descriptors. */
static void read_self(mt_prom_self_t *p) {
  char buf[1024];
  memset(p, 0, sizeof *p);
  long tick = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
  ssize_t n = ms__read_small_file("/proc/self/stat", buf, sizeof buf);
  const char *rp = n > 0 ? strrchr(buf, ')') : NULL;
  unsigned long long utime, stime, start, vsize;
  long long rss;
  /* After "pid (comm)": field 3 on; utime is 14, stime 15, starttime 22,
   * vsize 23, rss 24. */
  if (rp && tick > 0 &&
      sscanf(rp + 2,
             "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d "
             "%*d %*d %*d %*d %llu %llu %lld",
             &utime, &stime, &start, &vsize, &rss) == 5) {
    char st[8192];
    ssize_t m = ms__read_small_file("/proc/stat", st, sizeof st);
    const char *bt = m > 0 ? strstr(st, "\nbtime ") : NULL;
    if (bt) {
      p->cpu_seconds = (double)(utime + stime) / (double)tick;
      p->start_time_s =
          (double)strtoull(bt + 7, NULL, 10) + (double)start / (double)tick;
      p->virtual_bytes = vsize;
      p->resident_bytes = rss > 0 ? (uint64_t)rss * (uint64_t)page : 0;
      p->have_stat = 1;
    }
  }
  struct rlimit rl;
  if (getrlimit(RLIMIT_AS, &rl) == 0) {
    p->virtual_max_bytes =
        rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : (uint64_t)rl.rlim_cur;
    p->have_vmax = 1;
  }
  DIR *d = opendir("/proc/self/fd");
  if (d && getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    uint64_t open = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
      open += e->d_name[0] != '.';
    p->open_fds = open ? open - 1 : 0; /* not opendir's own */
    p->max_fds = (uint64_t)rl.rlim_cur;
    p->have_fds = 1;
  }
  if (d)
    closedir(d);
}

/* The exposition of every target now, in the text format or
 * OpenMetrics, into *body (its oom flag set if memory ran out). Returns
 * how many targets were served late. */
static long render(serve_t *sv, int openmetrics, ms__strbuf_t *body) {
  uint64_t t0 = sv->tr.on ? uv_hrtime() : 0;
  uint64_t now = mt_tset_now_ns(sv->set);
  size_t count = mt_tset_count(sv->set);
  mt_prom_target_t *pt = calloc(count ? count : 1, sizeof *pt);
  size_t n = 0;
  long late = 0;
  if (!pt) {
    body->oom = 1;
    return 0;
  }
  for (size_t i = 0; i < count; i++) {
    mt_tset_target_t *t = mt_tset_at(sv->set, i);
    sv_target_t *u = t->user;
    /* A process that exited since the round is served no more; the
     * round does not wait for it (its failure is not reported, the
     * set having been told), and the next listing drops it. One that
     * answered a moment ago (MT_SERVE_LATE_MS) is taken as alive: 200
     * reads of /proc cost the loop some 3 ms a scrape. */
    if (!t->gone &&
        now - t->last_ok_ns > (uint64_t)MT_SERVE_LATE_MS * 1000000u &&
        !target_alive(t))
      mt_tset_mark_gone(sv->set, t);
    if (t->gone) {
      if (u->pending) {
        u->pending = 0;
        sv->pending--;
      }
      continue;
    }
    pt[n].pid = t->pid;
    pt[n].snap = u->snap;
    pt[n].exe = u->exe[0] ? u->exe : NULL;
    pt[n].container = t->id.container;
    pt[n].pod = t->id.pod;
    pt[n].scrape_errors = u->errors;
    if (u->snap)
      pt[n].age_ns = u->snap->age_ns + (now - t->last_ok_ns);
    pt[n].group = sv->o->group_by != MT_GROUP_NONE ? u->group : NULL;
    pt[n].read_ns = u->read_ns;
    late += u->late;
    n++;
  }
  mt_prom_self_t self;
  read_self(&self);
  /* When these figures were gathered: now, the end of their round (or
   * of the change in the targets that made them again). */
  struct timespec wall;
  clock_gettime(CLOCK_REALTIME, &wall);
  mt_prom_opts_t po = {MS_VERSION_STRING, sv->o->no_size_classes, &self, late,
                       (uint64_t)wall.tv_sec * 1000000000u +
                           (uint64_t)wall.tv_nsec};
  mt_emit_prometheus_opts(body, openmetrics, pt, n, &po);
  free(pt);
  if (sv->tr.on)
    sv->tr.render_ns += uv_hrtime() - t0;
  return late;
}

/* One answer of the figures now in one format, gzipped here if a
 * scraper of that format takes gzip (NULL when out of memory). */
static mt_answer_t *answer_new(serve_t *sv, int om, int gzip, long *late) {
  ms__strbuf_t body = MS_STRBUF_INIT;
  *late = render(sv, om, &body);
  mt_answer_t *a = mt_answer_new(&body, om);
  if (gzip) {
    uint64_t t0 = sv->tr.on ? uv_hrtime() : 0;
    mt_answer_gzip(a);
    if (sv->tr.on)
      sv->tr.gzip_ns += uv_hrtime() - t0;
  }
  return a;
}

/* The answers of the figures memtop has now, one per format a scraper
 * has asked for (rendered and gzipped once, whatever the scrapes they
 * answer): made when a round ends, and again when a target joins or
 * leaves between rounds. */
static void prepare(serve_t *sv) {
  uv_timer_stop(&sv->prep);
  sv->tr.prep_from_ns = uv_hrtime();
  for (int om = 0; om < 2; om++) {
    mt_answer_release(sv->ready[om]);
    sv->ready[om] = NULL;
    if (sv->asked & (1u << om))
      sv->ready[om] =
          answer_new(sv, om, (sv->asked_gz >> om) & 1u, &sv->ready_late);
  }
  sv->ready_ns = sv->tr.prep_to_ns = uv_hrtime();
  sv->changed = 0;
}

static void prep_cb(uv_timer_t *timer) {
  serve_t *sv = timer->data;
  if (!sv->in_round && sv->changed && !sv->stopping)
    prepare(sv);
}

/* A target joined (its first figures) or left between rounds: the
 * answers are made again soon (MT_SERVE_PREP_MS, so that the targets a
 * listing finds are taken together), not on a scrape's path. */
static void set_changed(serve_t *sv) {
  sv->changed = 1;
  if (!sv->in_round && sv->ready_ns && !sv->stopping && !sv->closed &&
      !uv_is_active((uv_handle_t *)&sv->prep))
    uv_timer_start(&sv->prep, prep_cb, MT_SERVE_PREP_MS, 0);
}

/* Before a prepared answer is served: the processes it names that have
 * exited since are served no more (kill(pid, 0), not a read of /proc:
 * some microseconds for 200 processes); if there are any, the answer is
 * made again from the figures memtop has, without them. A PID reused
 * meanwhile is told by the next round (its start time). */
static void drop_exited(serve_t *sv) {
  size_t n = mt_tset_count(sv->set);
  int exited = 0;
  uint64_t made = sv->ready_ns;
  for (size_t i = 0; i < n; i++) {
    mt_tset_target_t *t = mt_tset_at(sv->set, i);
    if (!t->gone && kill(t->pid, 0) != 0 && errno == ESRCH) {
      mt_tset_mark_gone(sv->set, t);
      exited = 1;
      /* A round no longer waits for it (and may end here, making the
       * answers). */
      if (t->user)
        round_drop(sv, t->user);
    }
  }
  if (exited && sv->ready_ns == made)
    prepare(sv);
}

/* The next round, timed to end before the next scrape is due: a scrape
 * answered with figures older than -d asks for it. It starts `lead`
 * before the earliest next scrape of the scrapers seen (each at the
 * interval of its last two scrapes; one silent for two of its intervals
 * is not waited for), lead being MT_SERVE_LEAD_MS or four times the last
 * round, whichever is longer; at once if no interval is known yet. A
 * scraper at a steady interval then gets figures about `lead` old, at
 * once; a second one at another phase (Prometheus in pairs) those of the
 * round made for the first. */
static void refresh_cb(uv_timer_t *timer) {
  serve_t *sv = timer->data;
  if (!sv->stopping)
    round_start(sv);
}

static void refresh_soon(serve_t *sv, uint64_t now) {
  if (sv->in_round || sv->stopping)
    return;
  uint64_t lead = (uint64_t)MT_SERVE_LEAD_MS * 1000000u;
  if (lead < 4 * sv->round_ns)
    lead = 4 * sv->round_ns;
  uint64_t next = 0;
  for (size_t i = 0; i < MT_SERVE_SCRAPERS; i++) {
    const sv_scraper_t *c = &sv->scrapers[i];
    if (c->period_ns == 0 || now - c->last_ns > 2 * c->period_ns)
      continue;
    uint64_t due = c->last_ns + c->period_ns;
    if (due > now && (next == 0 || due < next))
      next = due;
  }
  uint64_t at = next > now + lead ? next - lead : now;
  /* Armed for later already: earlier only (a scraper back after a pause
   * must not wait for the round timed by its long interval). */
  if (uv_is_active((uv_handle_t *)&sv->refresh) && sv->refresh_ns <= at)
    return;
  sv->refresh_ns = at;
  uv_timer_start(&sv->refresh, refresh_cb, (at - now) / 1000000u, 0);
}

/* The scraper of s seen now: its interval learnt. A new one takes the
 * place of the one seen least lately. */
static void scraper_seen(serve_t *sv, const mt_scrape_t *s, uint64_t now) {
  uint64_t client = mt_scrape_client(s);
  sv_scraper_t *c = &sv->scrapers[0];
  for (size_t i = 0; i < MT_SERVE_SCRAPERS; i++) {
    sv_scraper_t *x = &sv->scrapers[i];
    if (x->last_ns && x->client == client) {
      c = x;
      break;
    }
    if (x->last_ns < c->last_ns)
      c = x;
  }
  if (c->client != client || c->last_ns == 0) {
    c->client = client;
    c->period_ns = 0;
  } else {
    c->period_ns = now - c->last_ns;
  }
  c->last_ns = now;
}

/* s answered with the prepared answer of its format, made now if there
 * is none (a format not asked for before, or memory short then). */
static void answer(serve_t *sv, mt_scrape_t *s) {
  int om = mt_scrape_openmetrics(s) != 0;
  if (!sv->ready[om])
    prepare(sv);
  mt_scrape_answer_with(s, sv->ready[om]);
  trace_answered(sv, 1, sv->ready_late);
}

static void answer_all(serve_t *sv) {
  uv_timer_stop(&sv->bound);
  uv_timer_stop(&sv->late);
  /* The round's figures made into answers, once per format, and the
   * scrapes waiting answered with them (memtop's cost does not grow with
   * the scrapers but with the formats). Answering may not add scrapes
   * (the server calls the hook from its own run only), so the list is
   * stable here. */
  prepare(sv);
  if (sv->round_start_ns)
    sv->round_ns = uv_hrtime() - sv->round_start_ns;
  sv->round_start_ns = 0;
  sv->tr.round_to_ns = uv_hrtime();
  for (size_t i = 0; i < sv->nwaiting; i++)
    mt_scrape_answer_with(
        sv->waiting[i], sv->ready[mt_scrape_openmetrics(sv->waiting[i]) != 0]);
  trace_answered(sv, sv->nwaiting, sv->ready_late);
  sv->nwaiting = 0;
  /* The answers may have let the round's last waits go (processes that
   * exited): it ends here then, with no one left to answer. */
  if (sv->in_round && sv->pending == 0) {
    sv->in_round = 0;
    sv->round_end_ns = uv_hrtime();
  }
  /* A listing that fell due during the round runs now, after the
   * answers have gone (the server sends them first: its timer was
   * started before this one). */
  if (sv->rescan_due && !sv->stopping)
    uv_timer_start(&sv->rescan, rescan_cb, 0, MT_SERVE_RESCAN_MS);
}

/* The bound: the scrapes are answered with what memtop has, and the
 * round ends here. The reads still on their way go on in the background
 * (their answers are kept when they come); the next round asks
 * everyone else again and does not wait for them (asked longer ago than
 * the bound). Were the round left open until they end, every scrape would
 * wait the bound again and serve the others' figures of the first one,
 * for as long as a hung read may take (--timeout). */
static void bound_cb(uv_timer_t *timer) {
  serve_t *sv = timer->data;
  size_t n = mt_tset_count(sv->set);
  for (size_t i = 0; i < n; i++)
    ((sv_target_t *)mt_tset_at(sv->set, i)->user)->pending = 0;
  sv->pending = 0;
  answer_all(sv);
  sv->in_round = 0;
  sv->round_end_ns = uv_hrtime();
}

/* A scrape. Once a round has been made, it is answered at once with the
 * answer that round prepared (or the one made since a target joined or
 * left), whatever the targets are doing now: it never waits for a
 * target, a round or a rendering. If those figures are older than -d,
 * it asks for the next round (refresh_soon), whose answer the next
 * scrape gets; memtop_figures_timestamp_seconds says when they were
 * gathered, memstats_snapshot_age_seconds how old each target's figures
 * were then. Only the first scrape, before any round, waits for one (up
 * to MT_SERVE_WAIT_MS, MT_SERVE_LATE_MS for a target with figures). */
static void on_scrape(void *arg, mt_scrape_t *s) {
  serve_t *sv = arg;
  int om = mt_scrape_openmetrics(s) != 0;
  uint64_t now = uv_hrtime();
  sv->asked |= 1u << om;
  if (mt_scrape_gzip(s))
    sv->asked_gz |= 1u << om;
  scraper_seen(sv, s, now);
  if (sv->ready_ns) {
    trace_arrive(sv);
    drop_exited(sv);
    answer(sv, s);
    if (now - sv->ready_ns >= sv->fresh_ns)
      refresh_soon(sv, now);
    return;
  }
  if (sv->nwaiting == sv->capwaiting) {
    size_t cap = sv->capwaiting ? sv->capwaiting * 2 : 8;
    mt_scrape_t **w = realloc(sv->waiting, cap * sizeof *w);
    if (!w) {
      answer(sv, s); /* what memtop has, at once */
      return;
    }
    sv->waiting = w;
    sv->capwaiting = cap;
  }
  if (sv->nwaiting == 0 && !sv->in_round)
    trace_arrive(sv);
  sv->waiting[sv->nwaiting++] = s;
  round_start(sv);
}

/* ------------------------------------------------------------------------
 * Heap profiles: /debug/pprof/heap?pid=N[&seconds=S]
 * ------------------------------------------------------------------------ */

static void prof_start_work(serve_t *sv);

static void prof_answer_text(mt_scrape_t *s, unsigned status,
                             const char *text) {
  ms__strbuf_t b = MS_STRBUF_INIT;
  char safe[4 * 640 + 2];
  /* The reason may name a target's file: made safe for a terminal. */
  ms__sanitize(safe, sizeof safe - 1, text, strlen(text), (size_t)-1);
  ms__strbuf_printf(&b, "%s\n", safe);
  mt_scrape_answer_bytes(s, status, "text/plain; charset=utf-8", NULL, &b);
  ms__strbuf_free(&b);
}

/* The request is over: answered (unless the server stopped) and freed. */
static void prof_finish(sv_prof_t *j) {
  serve_t *sv = j->sv;
  if (j->s) {
    if (j->status == 200)
      mt_scrape_answer_bytes(j->s, 200, "application/octet-stream", "heap",
                             &j->body);
    else
      prof_answer_text(j->s, j->status, j->err);
  }
  for (sv_prof_t **p = &sv->profs; *p; p = &(*p)->next)
    if (*p == j) {
      *p = j->next;
      break;
    }
  sv->nprofs--;
  ms__strbuf_free(&j->body);
  ms__profile_decoded_free(j->p[0]);
  ms__profile_decoded_free(j->p[1]);
  free(j);
}

static int to_strbuf(void *ctx, const void *data, size_t len) {
  ms__strbuf_t *b = ctx;
  ms__strbuf_append(b, data, len);
  return b->oom ? MS_ENOMEM : 0;
}

/* On the worker: what the fetch brought, made a pprof file. */
static void prof_work(uv_work_t *w) {
  sv_prof_t *j = w->data;
  mt_heap_t h;
  if (mt_profile_resolve(&j->p[0], &j->p[1], j->pid, &h, j->err,
                         sizeof j->err) != 0) {
    j->status = 500;
    return;
  }
  int rc = mt_pprof_write(&h, to_strbuf, &j->body);
  mt_heap_free(&h);
  if (rc != 0) {
    snprintf(j->err, sizeof j->err, "PID %d: cannot encode the profile: %s",
             j->pid, mt_heap_strerror(rc));
    j->status = 500;
    return;
  }
  j->status = 200;
}

static void prof_worked(uv_work_t *w, int status) {
  sv_prof_t *j = w->data;
  serve_t *sv = j->sv;
  if (status != 0 && j->status == 0) {
    j->status = 503;
    snprintf(j->err, sizeof j->err, "memtop is stopping");
  }
  sv->working = 0;
  prof_finish(j);
  if (!sv->stopping)
    prof_start_work(sv);
}

static void prof_start_work(serve_t *sv) {
  while (!sv->working && sv->queue_head) {
    sv_prof_t *j = sv->queue_head;
    sv->queue_head = j->next_queue;
    if (!sv->queue_head)
      sv->queue_tail = NULL;
    j->work.data = j;
    if (uv_queue_work(mt_shell_loop(sv->sh), &j->work, prof_work,
                      prof_worked) == 0) {
      sv->working = j->on_worker = 1;
      return;
    }
    j->status = 500;
    snprintf(j->err, sizeof j->err, "cannot start the work");
    prof_finish(j);
  }
}

/* The fetch is over: the profiles go to the worker, in turn. */
static void prof_fetched(void *arg, mt_pfetch_t *f) {
  sv_prof_t *j = arg;
  serve_t *sv = j->sv;
  int failed = mt_pfetch_take(f, j->p, j->err, sizeof j->err);
  j->f = NULL;
  if (failed) {
    j->status = 502;
    prof_finish(j);
    return;
  }
  if (sv->queue_tail)
    sv->queue_tail->next_queue = j;
  else
    sv->queue_head = j;
  sv->queue_tail = j;
  prof_start_work(sv);
}

static void on_pprof(void *arg, mt_scrape_t *s) {
  serve_t *sv = arg;
  const char *ps = mt_scrape_arg(s, "pid"), *ss = mt_scrape_arg(s, "seconds");
  long pid = 0, secs = 0;
  char err[512];
  if (!ps || ms__parse_long(ps, 1, MT_PID_MAX, &pid) != 0 ||
      (ss && ms__parse_long(ss, 0, MT_SERVE_PROFILE_SECONDS_MAX, &secs) != 0)) {
    snprintf(err, sizeof err,
             "400 Bad Request: ask for /debug/pprof/heap?pid=PID, and "
             "&seconds=S (0 to %d) for the growth over S seconds",
             MT_SERVE_PROFILE_SECONDS_MAX);
    prof_answer_text(s, 400, err);
    return;
  }
  if (sv->stopping || sv->nprofs >= MT_SERVE_PROFILES) {
    prof_answer_text(s, 503,
                     "503 Service Unavailable: memtop makes so many heap "
                     "profiles at once; try again when one is done");
    return;
  }
  sv_prof_t *j = calloc(1, sizeof *j);
  if (!j) {
    prof_answer_text(s, 503, "503 Service Unavailable: out of memory");
    return;
  }
  j->sv = sv;
  j->s = s;
  j->pid = (int)pid;
  j->f = mt_pfetch_start(mt_shell_loop(sv->sh), (int)pid, secs,
                         sv->o->timeout_ms, prof_fetched, j, err, sizeof err);
  if (!j->f) {
    free(j);
    prof_answer_text(s, 404, err);
    return;
  }
  j->next = sv->profs;
  sv->profs = j;
  sv->nprofs++;
}

/* The server stops: no request is answered any more (the server answers
 * them 503); fetches and waits end, the profile on the worker is dropped
 * when it is done. */
static void prof_stop(serve_t *sv) {
  sv->queue_head = sv->queue_tail = NULL;
  for (sv_prof_t *j = sv->profs, *next; j; j = next) {
    next = j->next;
    j->s = NULL;
    if (j->f) {
      mt_pfetch_release(j->f);
      j->f = NULL;
    }
  }
  /* Those not on the worker are freed now. */
  for (sv_prof_t *j = sv->profs, *next; j; j = next) {
    next = j->next;
    if (!j->on_worker)
      prof_finish(j);
  }
}

/* ------------------------------------------------------------------------
 * The command
 * ------------------------------------------------------------------------ */

/* SIGINT or SIGTERM: the scrapes waiting are answered, the server
 * stops, and so does memtop (exit 0). SIGHUP, which a service manager or
 * a closed terminal sends: nothing to do (the web config is read again
 * whenever it changes); it must only not end memtop, as its default
 * action would. */
static void on_signal(void *self, int signum) {
  serve_t *sv = self;
  if (signum == SIGHUP || sv->stopping)
    return;
  sv->stopping = 1;
  answer_all(sv);
  prof_stop(sv);
  mt_httpd_stop(sv->http);
  sv->http = NULL;
  /* No round is waited for any more: retiring the targets (the shell
   * frees the set) answers no one. */
  sv->in_round = 0;
  mt_shell_stop(sv->sh);
}

static const mt_tset_cbs_t serve_cbs = {.added = on_added,
                                        .retired = on_retired,
                                        .request = on_request,
                                        .snapshot = on_snapshot,
                                        .failure = on_failure,
                                        .gone = on_gone,
                                        .probed = on_probed};

/* Before the loop runs: the address, the web config, the refusal as root
 * without a password, the server; then the set's options. Returns 0, 2
 * for an address that is no address, or 1. */
static int serve_setup(void *self, mt_shell_t *sh, mt_shell_setup_t *su) {
  serve_t *sv = self;
  const mt_opts_t *o = mt_shell_opts(sh);
  char err[1024], safe[4 * sizeof err + 1];
  sv->sh = sh;
  sv->o = o;
  sv->fresh_ns = (uint64_t)(o->delay_s * 1e9);
  uv_timer_init(mt_shell_loop(sh), &sv->bound);
  sv->bound.data = sv;
  uv_timer_init(mt_shell_loop(sh), &sv->late);
  sv->late.data = sv;
  uv_timer_init(mt_shell_loop(sh), &sv->rescan);
  sv->rescan.data = sv;
  uv_timer_init(mt_shell_loop(sh), &sv->prep);
  sv->prep.data = sv;
  uv_timer_init(mt_shell_loop(sh), &sv->refresh);
  sv->refresh.data = sv;
  const char *trace = getenv("MEMTOP_SERVE_TRACE");
  if (trace && trace[0] == '1' &&
      uv_loop_configure(mt_shell_loop(sh), UV_METRICS_IDLE_TIME) == 0)
    sv->tr.on = 1;
  /* Debug files from debuginfod within --timeout, said on no stderr: not
   * a line per request. */
  mt_debuginfod_configure(o->timeout_ms, 0);

  /* An address that is no address is bad usage (exit 2), as the other
   * options' errors are; one that cannot be had is said below. */
  struct sockaddr_storage ss;
  socklen_t sslen;
  if (mt_listen_parse(o->listen ? o->listen : MT_LISTEN_DEFAULT, &ss, &sslen,
                      err, sizeof err) != 0) {
    ms__sanitize(safe, sizeof safe, err, sizeof err, (size_t)-1);
    fprintf(stderr, "memtop: %s\n", safe);
    return 2;
  }

  if (o->web_config &&
      mt_webconfig_load(o->web_config, &sv->web, err, sizeof err) != 0) {
    ms__sanitize(safe, sizeof safe, err, sizeof err, (size_t)-1);
    fprintf(stderr, "memtop: --web.config.file %s\n", safe);
    return 1;
  }
  /* As root memtop reads every user's processes: served with no password,
   * anyone who can connect (every local user, on loopback) would see
   * them all. */
  if (geteuid() == 0 && sv->web.nusers == 0 && !o->unsafe_no_auth) {
    char where[600];
    ms__sanitize(where, sizeof where, o->listen ? o->listen : MT_LISTEN_DEFAULT,
                 strlen(o->listen ? o->listen : MT_LISTEN_DEFAULT), 120);
    fprintf(stderr,
            "memtop: serve refuses to run as root without a password: it "
            "would show every user's processes (names, PIDs, memory) to "
            "anyone who can connect to %s, every local user included. Give "
            "--web.config.file FILE with basic_auth_users (bcrypt hashes: "
            "htpasswd -nBC 10 USER), or run it as the user whose processes "
            "it serves, or add --unsafe-no-auth to serve them anyway\n",
            where);
    return 1;
  }
  mt_httpd_hooks_t hooks = {.scrape = on_scrape,
                            .arg = sv,
                            .pprof = on_pprof,
                            .metrics_path = o->telemetry_path,
                            .web_path = o->web_config};
  int rc = mt_httpd_start(mt_shell_loop(sh), o->listen, &sv->web, &hooks,
                          &sv->http, err, sizeof err);
  if (rc != 0) {
    ms__sanitize(safe, sizeof safe, err, sizeof err, (size_t)-1);
    fprintf(stderr, "memtop: %s\n", safe);
    return 1;
  }
  /* Every attachable process, listed every MT_SERVE_RESCAN_MS (timed for
   * the listing and a new target's first read only: `request` skips the
   * rest), a process that exited dropped at the next listing. */
  su->set.timed = 1;
  su->set.interval_ms = MT_SERVE_RESCAN_MS;
  su->set.backoff_max_ms = MT_SERVE_RESCAN_MS;
  su->set.rescan_min_ms = 0; /* serve's own timer (rescan_cb) */
  su->set.retire_unlisted = 0;
  su->set.keep_gone_ms = 0;
  su->cbs = &serve_cbs;
  su->arg = sv;
  su->set_out = &sv->set;
  su->signals = MT_SIG_INT | MT_SIG_TERM | MT_SIG_HUP;
  return 0;
}

static int serve_start(void *self) {
  serve_t *sv = self;
  /* The processes there are now, asked at once: the first scrape has
   * them. */
  mt_tset_rescan(sv->set);
  mt_tset_start(sv->set);
  uv_timer_start(&sv->rescan, rescan_cb, MT_SERVE_RESCAN_MS,
                 MT_SERVE_RESCAN_MS);
  char url[160];
  mt_httpd_url(sv->http, url, sizeof url);
  fprintf(stderr, "memtop: serving %s%s\n", url,
          sv->web.nusers ? " (basic authentication)" : "");
  /* The user's own socket directory skipped as unsafe: its processes are
   * not served, which the scrapes alone would never say. */
  char why[MSC_PATH_MAX + 512];
  if (msc_sockdir_refusal(why, sizeof why)) {
    char safe[4 * sizeof why + 1];
    ms__sanitize(safe, sizeof safe, why, strlen(why), (size_t)-1);
    fprintf(stderr, "memtop: %s (its processes are not served)\n", safe);
  }
  fflush(stderr);
  return 0;
}

static void serve_close(void *self) {
  serve_t *sv = self;
  mt_httpd_stop(sv->http);
  sv->http = NULL;
  /* The set goes next: its targets retired answer no round. */
  sv->in_round = 0;
  if (!uv_is_closing((uv_handle_t *)&sv->bound))
    uv_close((uv_handle_t *)&sv->bound, NULL);
  if (!uv_is_closing((uv_handle_t *)&sv->late))
    uv_close((uv_handle_t *)&sv->late, NULL);
  uv_timer_t *timers[] = {&sv->rescan, &sv->prep, &sv->refresh};
  for (size_t i = 0; i < sizeof timers / sizeof timers[0]; i++)
    if (!uv_is_closing((uv_handle_t *)timers[i]))
      uv_close((uv_handle_t *)timers[i], NULL);
  sv->closed = 1;
  mt_answer_release(sv->ready[0]);
  mt_answer_release(sv->ready[1]);
  sv->ready[0] = sv->ready[1] = NULL;
}

static void serve_free(void *self) {
  serve_t *sv = self;
  free(sv->waiting);
  mt_webconfig_free(&sv->web);
}

static const mt_mode_t serve_mode = {
    .setup = serve_setup,
    .start = serve_start,
    .signal = on_signal,
    .close = serve_close,
    .free = serve_free,
};

int mt_serve_main(const mt_opts_t *o) {
  static serve_t sv; /* one per process, as the signals are */
  memset(&sv, 0, sizeof sv);
  return mt_shell_run(o, &serve_mode, &sv);
}
