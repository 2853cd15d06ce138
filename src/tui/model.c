/*
 * model.c - what memtop knows about its targets (see model.h): the latest
 * snapshot and its breakdown, a ring of samples for trends, rates over the
 * last two samples, pause percentiles, the state of each target, and the
 * list order. No I/O and no drawing here.
 */
#include "tui/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "common/sanitize.h"

#include "common/fields.h"
#include "emit/emit.h"

void mt_model_init(mt_model_t *m) {
  memset(m, 0, sizeof *m);
  /* As htop opens on memory's biggest users: the most mapped first. */
  m->sort = MT_SORT_TOTAL;
  m->filter_uid = -1;
  m->show_cmdline = 1;
  m->mouse = 1;
  m->delay_s = 1.0;
  m->color = 1;
  m->utf8 = 1;
  m->detail_pid = -1;
  m->screen = MT_SCREEN_LIST;
  m->prev_screen = MT_SCREEN_LIST;
}

void mt_model_free(mt_model_t *m) {
  size_t i;

  for (i = 0; i < m->ntargets; i++) {
    mt_sites_free(m->targets[i]->sites, m->targets[i]->nsites);
    free(m->targets[i]->hist);
    free(m->targets[i]);
  }
  free(m->targets);
  m->targets = NULL;
  m->ntargets = m->cap = 0;
  m->selected = 0;
}

mt_target_t *mt_model_find(const mt_model_t *m, int pid) {
  size_t i;

  for (i = 0; i < m->ntargets; i++)
    if (m->targets[i]->pid == pid)
      return m->targets[i];
  return NULL;
}

static void reset_rates(mt_target_t *t) {
  t->mallocs_per_s = t->frees_per_s = t->bytes_per_s = t->gcs_per_s = -1;
}

mt_target_t *mt_model_target(mt_model_t *m, int pid) {
  mt_target_t *t, **grown;
  size_t cap;

  t = mt_model_find(m, pid);
  if (t != NULL)
    return t;
  if (m->ntargets == m->cap) {
    cap = m->cap ? m->cap * 2 : 16;
    grown = realloc(m->targets, cap * sizeof *grown);
    if (grown == NULL)
      return NULL;
    m->targets = grown;
    m->cap = cap;
  }
  t = calloc(1, sizeof *t);
  if (t == NULL)
    return NULL;
  t->pid = pid;
  t->state = MT_CONNECTING;
  t->proc.uid = -1;
  t->proc.ppid = -1;
  t->ident_uid = t->ident_ppid = -1;
  reset_rates(t);
  t->pause_p50_ns = t->pause_p99_ns = t->pause_max_ns = -1;
  /* New targets go to the end; the caller sorts when it wants order. */
  m->targets[m->ntargets++] = t;
  return t;
}

void mt_model_remove(mt_model_t *m, int pid) {
  size_t i;

  for (i = 0; i < m->ntargets; i++) {
    if (m->targets[i]->pid != pid)
      continue;
    mt_sites_free(m->targets[i]->sites, m->targets[i]->nsites);
    free(m->targets[i]->hist);
    free(m->targets[i]);
    memmove(&m->targets[i], &m->targets[i + 1],
            (m->ntargets - i - 1) * sizeof m->targets[0]);
    m->ntargets--;
    /* The selection stays on the same process where it can: rows after
     * the removed one move up by one. */
    if (m->selected > i || (m->selected == m->ntargets && m->selected > 0))
      m->selected--;
    if (m->detail_pid == pid && m->screen == MT_SCREEN_DETAIL)
      m->screen = MT_SCREEN_LIST;
    return;
  }
}

int mt_target_reserve_history(mt_target_t *t) {
  /* Not cleared: a sample is read only once written (nhist counts
   * them), and clearing these 47 KiB was most of `memtop --once`'s
   * memset and a dozen of its page faults, for one sample. */
  if (t->hist == NULL)
    t->hist = malloc(MT_HISTORY * sizeof *t->hist);
  return t->hist != NULL ? 0 : MS_ENOMEM;
}

const mt_sample_t *mt_target_sample(const mt_target_t *t, size_t i) {
  if (t->hist == NULL || i >= t->nhist || i >= MT_HISTORY)
    return NULL;
  return &t->hist[(t->nhist - 1 - i) % MT_HISTORY];
}

/* A per-second rate of a cumulative counter between two samples; -1 when
 * it cannot be told (the counter went back, e.g. a provider restarted):
 * a value shown as "-", no error, not an MS_E* code. */
static double rate(uint64_t now, uint64_t then, double dt_s) {
  if (now < then || dt_s <= 0)
    return -1;
  return (double)(now - then) / dt_s;
}

static void update_rates(mt_target_t *t) {
  const mt_sample_t *a = mt_target_sample(t, 0), *b = mt_target_sample(t, 1);
  double dt;

  reset_rates(t);
  if (a == NULL || b == NULL || a->mono_ns <= b->mono_ns)
    return;
  dt = (double)(a->mono_ns - b->mono_ns) / 1e9;
  if (ms__field_known(&t->snap, MS_F_MALLOCS))
    t->mallocs_per_s = rate(a->mallocs, b->mallocs, dt);
  if (ms__field_known(&t->snap, MS_F_FREES))
    t->frees_per_s = rate(a->frees, b->frees, dt);
  if (ms__field_known(&t->snap, MS_F_TOTAL_ALLOC))
    t->bytes_per_s = rate(a->total_alloc, b->total_alloc, dt);
  if (ms__field_known(&t->snap, MS_F_NUM_GC))
    t->gcs_per_s = rate(a->num_gc, b->num_gc, dt);
}

/* The pause figures, as every output shows them (mt_pauses): percentiles
 * from the histogram, the maximum exact from the ring while it holds
 * every pause. */
static void update_pauses(mt_target_t *t) {
  mt_pauses_t p;
  mt_pauses(&t->snap, &p);
  t->pause_p50_ns = p.p50;
  t->pause_p99_ns = p.p99;
  t->pause_max_ns = p.max;
}

unsigned long mt_model_provider_joins;

int mt_target_measure_providers(const mt_target_t *t) {
  char prov[MS_MAX_PROVIDERS * (MS_NAME_MAX + 1)], buf[1024];
  return (int)ms__sanitize(buf, sizeof buf,
                           mt_target_providers(t, prov, sizeof prov),
                           sizeof prov, (size_t)-1);
}

int mt_target_measure_user(const mt_target_t *t) {
  char buf[1024];
  return (int)ms__sanitize(buf, sizeof buf, t->proc.user, sizeof t->proc.user,
                           (size_t)-1);
}

/* Whether t is on screen: one of the list's rows as mt_model_sort last
 * laid them out (m->page_rows of them from first_row), or the process
 * of the detail view. */
static int on_screen(const mt_model_t *m, const mt_target_t *t) {
  if (m->screen == MT_SCREEN_DETAIL)
    return t->pid == m->detail_pid;
  return m->screen == MT_SCREEN_LIST && m->page_rows > 0 && t->row >= 0 &&
         (size_t)t->row >= m->first_row &&
         (size_t)t->row < m->first_row + (size_t)m->page_rows;
}

/* Who runs the process, its parent and its command line: once per process
 * (a new start time is a new process), then again every
 * MT_PROC_REREAD_NS while it is on screen (what is not shown is not
 * read: a list of 200 reads some 40); and the machine's memory at most
 * twice per refresh: /proc, read only when the live view gave its root.
 * Read as a snapshot comes, from the process's own connection: it is the
 * process the target set verified, so no start time is compared. The
 * first read takes the owner's record of uid and parent (read at the
 * listing, moments before) and reads only the command line; a later one
 * reads the status again, as a process may change its uid (a server
 * dropping its privileges after its agent started). */
static void read_proc(mt_model_t *m, mt_target_t *t) {
  if (m->proc_root == NULL)
    return;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
  uint64_t at = m->now_mono_ns != 0 ? m->now_mono_ns : now;
  if (!t->proc_read) {
    mt_procinfo_reread(m->proc_root, t->pid, t->ident_uid, t->ident_ppid,
                       &t->proc);
    t->proc_read = 1;
    t->proc_read_ns = at;
    t->user_width = mt_target_measure_user(t);
  } else if (at - t->proc_read_ns >= MT_PROC_REREAD_NS && on_screen(m, t)) {
    /* What cannot be read now (the process is going) stays as it was. */
    mt_procinfo_t p;
    t->proc_read_ns = at;
    if (mt_procinfo_reread(m->proc_root, t->pid, -1, -1, &p) == 0) {
      int user_same = strcmp(p.user, t->proc.user) == 0;
      t->proc = p;
      if (!user_same)
        t->user_width = mt_target_measure_user(t);
    }
  }
  if (!m->machine.have ||
      now - m->machine.read_mono_ns >= (uint64_t)(m->delay_s * 0.5e9))
    mt_procinfo_meminfo(m->proc_root, &m->machine);
}

void mt_model_update(mt_model_t *m, mt_target_t *t, const ms_snapshot_t *s) {
  mt_sample_t *smp;
  const mt_sample_t *last;

  /* The same PID with another start time is another process (PID reuse,
   * or `run` restarted): its history would make nonsense rates. */
  if (t->have_snapshot && s->start_time != 0 && t->start_time != 0 &&
      s->start_time != t->start_time) {
    t->nhist = 0;
    t->proc_read = 0;
    memset(&t->proc, 0, sizeof t->proc);
    t->proc.uid = t->proc.ppid = -1;
    t->ident_uid = t->ident_ppid = -1; /* the record was the other's */
  }
  /* The provider list's width, measured again only when it changes. */
  int prov_same =
      t->have_snapshot && t->widths_known &&
      s->nproviders == t->snap.nproviders &&
      memcmp(s->providers, t->snap.providers, sizeof s->providers) == 0;
  /* A histogram that has not changed has the same percentiles: the same
   * pause count and total (a pause adds to both) and the same buckets'
   * total is the common case of a program that does not collect. */
  int pauses_same =
      t->have_snapshot && s->num_gc == t->snap.num_gc &&
      s->pause_total_ns == t->snap.pause_total_ns &&
      memcmp(&s->pause_hist, &t->snap.pause_hist, sizeof s->pause_hist) == 0 &&
      memcmp(s->quality, t->snap.quality, sizeof s->quality) == 0;
  t->snap = *s;
  t->have_snapshot = 1;
  ms_breakdown(&t->snap, &t->bd);
  if (s->start_time != 0)
    t->start_time = s->start_time;
  if (s->comm[0] != '\0') {
    memcpy(t->comm, s->comm, sizeof t->comm);
    t->comm[sizeof t->comm - 1] = '\0';
  }
  t->state = MT_LIVE;
  t->no_agent = 0;
  t->error[0] = '\0';
  t->exited_mono_ns = 0;
  if (!prov_same) {
    t->prov_width = mt_target_measure_providers(t);
    /* The user's width: measured with the user, or now. */
    if (!t->widths_known)
      t->user_width = mt_target_measure_user(t);
    t->widths_known = 1;
  }
  read_proc(m, t);

  /* Without memory for a history, the figures still show; trends and
   * rates wait for the next snapshot. */
  if (mt_target_reserve_history(t) != 0) {
    reset_rates(t);
    if (!pauses_same)
      update_pauses(t);
    return;
  }
  /* A cached snapshot served twice (the agent's rate limit) is one
   * sample, not two: replace instead of appending. */
  last = mt_target_sample(t, 0);
  if (last != NULL && last->mono_ns >= s->time_mono_ns && s->time_mono_ns != 0)
    smp = &t->hist[(t->nhist - 1) % MT_HISTORY];
  else
    smp = &t->hist[t->nhist++ % MT_HISTORY];
  smp->mono_ns = s->time_mono_ns;
  smp->data = t->bd.data;
  smp->frag_overhead = t->bd.frag_overhead;
  smp->idle = t->bd.idle;
  smp->prepared = t->bd.prepared;
  smp->mallocs = s->mallocs;
  smp->frees = s->frees;
  smp->total_alloc = s->total_alloc;
  smp->num_gc = s->num_gc;
  smp->pause_total_ns = s->pause_total_ns;

  update_rates(t);
  if (!pauses_same)
    update_pauses(t);
}

void mt_model_fail(mt_model_t *m, mt_target_t *t, int exited, const char *why) {
  /* Once gone, a process stays gone: a late error from a read that was in
   * flight must not bring it back as merely unreachable. */
  if (t->state == MT_EXITED && !exited)
    return;
  if (exited && t->state != MT_EXITED)
    t->exited_mono_ns = m->now_mono_ns ? m->now_mono_ns : 1;
  t->state = exited ? MT_EXITED : MT_UNREACHABLE;
  if (why != NULL) {
    strncpy(t->error, why, sizeof t->error - 1);
    t->error[sizeof t->error - 1] = '\0';
  }
  /* Rates describe a live process; the figures stay as they were. */
  reset_rates(t);
}

/* ---- sorting ---- */

/* The sort key of a target. Targets without figures sort after every
 * target with figures, whatever the key (but PID) and the direction. */
static int sort_value(const mt_target_t *t, mt_sort_t key, int64_t *v) {
  if (!t->have_snapshot)
    return 0;
  switch (key) {
  case MT_SORT_READY:
    *v = t->bd.ready;
    break;
  case MT_SORT_PREPARED:
    *v = t->bd.prepared;
    break;
  case MT_SORT_DATA:
    *v = t->bd.data;
    break;
  case MT_SORT_FRAG:
    *v = t->bd.frag_overhead;
    break;
  case MT_SORT_IDLE:
    *v = t->bd.idle;
    break;
  case MT_SORT_TOTAL:
    *v = t->bd.total;
    break;
  case MT_SORT_RSS:
    if (!ms__field_known(&t->snap, MS_F_KERNEL_RSS))
      return 0;
    *v = (int64_t)t->snap.kernel_rss;
    break;
  case MT_SORT_OBJECTS:
    *v = (int64_t)t->snap.heap_objects;
    break;
  case MT_SORT_PAUSE_P99:
    *v = t->pause_p99_ns;
    break;
  default:
    return 0;
  }
  return 1;
}

static int compare_targets(const mt_model_t *m, const mt_target_t *a,
                           const mt_target_t *b) {
  int64_t va = 0, vb = 0;
  int ha, hb, c = 0;
  mt_sort_t key = m->sort;
  int reverse = m->sort_reverse;
  int hidden_a = !mt_model_visible(m, a), hidden_b = !mt_model_visible(m, b);

  /* What the filters hide goes last, out of the list's rows. */
  if (hidden_a != hidden_b)
    return hidden_a ? 1 : -1;
  if (key == MT_SORT_PID) {
    c = (a->pid > b->pid) - (a->pid < b->pid);
    return reverse ? -c : c;
  }
  if (key == MT_SORT_NAME || key == MT_SORT_USER || key == MT_SORT_PROVIDER) {
    /* Words sort A to Z. */
    char pa[MS_MAX_PROVIDERS * (MS_NAME_MAX + 1)];
    char pb[MS_MAX_PROVIDERS * (MS_NAME_MAX + 1)];
    if (a->have_snapshot != b->have_snapshot)
      return a->have_snapshot ? -1 : 1;
    if (key == MT_SORT_NAME)
      c = strcmp(mt_target_name(m, a), mt_target_name(m, b));
    else if (key == MT_SORT_USER)
      c = strcmp(a->proc.user, b->proc.user);
    else
      c = strcmp(mt_target_providers(a, pa, sizeof pa),
                 mt_target_providers(b, pb, sizeof pb));
    c = (c > 0) - (c < 0);
    if (reverse)
      c = -c;
  } else {
    ha = sort_value(a, key, &va);
    hb = sort_value(b, key, &vb);
    if (ha != hb)
      return ha ? -1 : 1;
    /* Figures sort largest first, as in top; reverse flips that. */
    c = (va < vb) - (va > vb);
    if (reverse)
      c = -c;
  }
  /* Ties by PID, so the order is total and the list does not jitter. */
  if (c == 0)
    c = (a->pid > b->pid) - (a->pid < b->pid);
  return c;
}

/* ---- the tree view ---- */

typedef struct tree_walk_s {
  mt_target_t **in, **out;
  size_t n, k;
  size_t *first, *next; /* each one's first child, next sibling; n: none */
  char *done;
} tree_walk_t;

/* The next sibling from c on (c included) not yet emitted, or n. */
static size_t tree_next(const tree_walk_t *w, size_t c) {
  while (c < w->n && w->done[c])
    c = w->next[c];
  return c;
}

/* Emits in[i] at `depth`, then its children in the sort's order. The
 * depth of the recursion is bounded: a chain deeper than MT_TREE_DEPTH is
 * taken up again as roots (tree_order's last pass). */
static void tree_emit(tree_walk_t *w, size_t i, int depth, unsigned more) {
  mt_target_t *t = w->in[i];
  w->done[i] = 1;
  w->out[w->k++] = t;
  t->tree_depth = depth;
  t->tree_more = more;
  if (depth >= MT_TREE_DEPTH)
    return;
  for (size_t c = tree_next(w, w->first[i]); c < w->n;
       c = tree_next(w, w->next[c])) {
    size_t after = tree_next(w, w->next[c]);
    tree_emit(w, c, depth + 1, more | (after < w->n ? 1u << depth : 0u));
  }
}

typedef struct pid_index_s {
  int pid;
  size_t i;
} pid_index_t;

static int by_pid(const void *a, const void *b) {
  int x = ((const pid_index_t *)a)->pid, y = ((const pid_index_t *)b)->pid;
  return (x > y) - (x < y);
}

/* Puts the visible targets, already sorted, in tree order: each after its
 * parent when the parent is shown. O(n log n): the parents are found by
 * PID in a sorted index, the children kept in lists in the sort's order.
 * Without memory it leaves the plain order (and depth 0). */
static void tree_order(mt_model_t *m) {
  size_t n = mt_model_nvisible(m);
  for (size_t i = 0; i < m->ntargets; i++) {
    m->targets[i]->tree_depth = 0;
    m->targets[i]->tree_more = 0;
  }
  if (!m->tree || n < 2)
    return;
  tree_walk_t w = {.in = m->targets, .n = n};
  pid_index_t *ix = malloc(n * sizeof *ix);
  size_t *parent = malloc(n * sizeof *parent);
  w.out = malloc(n * sizeof *w.out);
  w.first = malloc(n * sizeof *w.first);
  w.next = malloc(n * sizeof *w.next);
  w.done = calloc(n, 1);
  if (ix != NULL && parent != NULL && w.out != NULL && w.first != NULL &&
      w.next != NULL && w.done != NULL) {
    for (size_t i = 0; i < n; i++)
      ix[i] = (pid_index_t){w.in[i]->pid, i};
    qsort(ix, n, sizeof *ix, by_pid);
    for (size_t i = 0; i < n; i++) {
      pid_index_t key = {w.in[i]->proc.ppid, 0};
      const pid_index_t *p =
          key.pid > 0 ? bsearch(&key, ix, n, sizeof *ix, by_pid) : NULL;
      parent[i] = p != NULL && p->i != i ? p->i : n;
      w.first[i] = w.next[i] = n;
    }
    /* Pushed from the last, so each list is in the sort's order. */
    for (size_t i = n; i-- > 0;)
      if (parent[i] < n) {
        w.next[i] = w.first[parent[i]];
        w.first[parent[i]] = i;
      }
    for (size_t i = 0; i < n; i++)
      if (parent[i] == n)
        tree_emit(&w, i, 0, 0);
    /* What is left is in a loop of parents (PIDs reused) or too deep. */
    for (size_t i = 0; i < n; i++)
      if (!w.done[i])
        tree_emit(&w, i, 0, 0);
    memcpy(m->targets, w.out, n * sizeof *w.out);
  }
  free(ix);
  free(parent);
  free(w.out);
  free(w.first);
  free(w.next);
  free(w.done);
}

static int compare_ptrs(const void *a, const void *b, void *m) {
  return compare_targets(m, *(mt_target_t *const *)a, *(mt_target_t *const *)b);
}

void mt_model_sort(mt_model_t *m) {
  int sel_pid = -1;
  size_t i;

  if (m->ntargets == 0)
    return;
  if (m->selected < m->ntargets)
    sel_pid = m->targets[m->selected]->pid;
  /* The order is total (ties by PID), so any sort gives the same list;
   * O(n log n) whatever the order it starts from (the tree view's order
   * is far from the sort's). */
  qsort_r(m->targets, m->ntargets, sizeof m->targets[0], compare_ptrs, m);
  tree_order(m);
  for (i = 0; i < m->ntargets; i++)
    if (m->targets[i]->pid == sel_pid)
      m->selected = i;
  size_t nv = mt_model_nvisible(m);
  if (m->selected >= nv)
    m->selected = nv > 0 ? nv - 1 : 0;
  /* Where each is drawn (the visible ones first), and the list's first
   * row on screen as view_list.c scrolls: the selection on the last. */
  for (i = 0; i < m->ntargets; i++)
    m->targets[i]->row = i < nv ? (long)i : -1;
  m->first_row = 0;
  if (m->page_rows > 0 && m->selected >= (size_t)m->page_rows)
    m->first_row = m->selected - (size_t)m->page_rows + 1;
}

const char *mt_target_name(const mt_model_t *m, const mt_target_t *t) {
  if (m->show_cmdline && t->proc.cmdline[0] != '\0')
    return t->proc.cmdline;
  return t->comm;
}

const char *mt_target_providers(const mt_target_t *t, char *buf, size_t len) {
  size_t n = 0;
  mt_model_provider_joins++;
  if (len == 0)
    return "";
  buf[0] = '\0';
  for (uint32_t i = 0;
       t->have_snapshot && i < t->snap.nproviders && i < MS_MAX_PROVIDERS;
       i++) {
    /* A name fills its array without a NUL if the sender wants. */
    int w = snprintf(buf + n, len - n, "%s%.*s", i ? "+" : "", MS_NAME_MAX,
                     t->snap.providers[i]);
    if (w < 0 || (size_t)w >= len - n)
      break;
    n += (size_t)w;
  }
  return buf;
}

/* Case-insensitive substring, ASCII only (names are bytes). */
static int has_text(const char *hay, const char *needle) {
  size_t nl = strlen(needle);
  if (nl == 0)
    return 1;
  for (; *hay != '\0'; hay++)
    if (strncasecmp(hay, needle, nl) == 0)
      return 1;
  return 0;
}

int mt_target_matches(const mt_target_t *t, const char *text) {
  char pid[16];
  if (text[0] == '\0')
    return 1;
  snprintf(pid, sizeof pid, "%d", t->pid);
  return strcmp(pid, text) == 0 || has_text(t->comm, text) ||
         has_text(t->proc.cmdline, text) || has_text(t->proc.user, text);
}

int mt_model_visible(const mt_model_t *m, const mt_target_t *t) {
  if (m->filter_uid >= 0 && t->proc.uid != m->filter_uid)
    return 0;
  return mt_target_matches(t, m->filter);
}

size_t mt_model_nvisible(const mt_model_t *m) {
  size_t n = 0;
  for (size_t i = 0; i < m->ntargets; i++)
    n += mt_model_visible(m, m->targets[i]) != 0;
  return n;
}

size_t mt_model_tree_total(const mt_model_t *m, size_t root,
                           mt_tree_total_t *out) {
  size_t nv = mt_model_nvisible(m), i;
  int64_t shmem = 0, file = 0;

  memset(out, 0, sizeof *out);
  out->q_total = MS_Q_EXACT;
  out->have_rss = 1;
  if (root >= nv)
    return 0;
  for (i = root; i < nv; i++) {
    const mt_target_t *t = m->targets[i];
    if (i > root && t->tree_depth <= m->targets[root]->tree_depth)
      break;
    if (!t->have_snapshot || t->state == MT_EXITED)
      continue;
    const ms_snapshot_t *s = &t->snap;
    out->members++;
    out->total += t->bd.total;
    if (t->bd.q_total < out->q_total)
      out->q_total = t->bd.q_total;
    if (!ms__field_known(s, MS_F_KERNEL_ANON_RSS) ||
        !ms__field_known(s, MS_F_KERNEL_RSS_SHMEM) ||
        !ms__field_known(s, MS_F_KERNEL_RSS_FILE)) {
      out->have_rss = 0;
      continue;
    }
    out->rss += (int64_t)s->kernel_anon_rss;
    if ((int64_t)s->kernel_rss_shmem > shmem)
      shmem = (int64_t)s->kernel_rss_shmem;
    if ((int64_t)s->kernel_rss_file > file)
      file = (int64_t)s->kernel_rss_file;
  }
  out->shared = shmem + file;
  out->rss += out->shared;
  if (out->members == 0)
    out->have_rss = 0;
  return i - root;
}

/* ---- allocation sites ------------------------------------------------ */

void mt_sites_free(mt_site_t *sites, size_t n) {
  size_t i;

  for (i = 0; i < n; i++) {
    free(sites[i].function);
    free(sites[i].file);
    free(sites[i].module);
    for (size_t k = 0; k < sites[i].nchain; k++)
      free(sites[i].chain[k]);
    free(sites[i].chain);
  }
  free(sites);
}

static int same_site(const mt_site_t *a, const mt_site_t *b) {
  if ((a->function == NULL) != (b->function == NULL))
    return 0;
  if (a->function != NULL)
    return strcmp(a->function, b->function) == 0 &&
           strcmp(a->file, b->file) == 0 && a->line == b->line;
  return a->address == b->address;
}

void mt_model_set_sites(mt_target_t *t, mt_site_t *sites, size_t n,
                        int estimated, uint64_t mono_ns) {
  double dt = t->sites_mono_ns != 0 && mono_ns > t->sites_mono_ns
                  ? (double)(mono_ns - t->sites_mono_ns) / 1e9
                  : 0;
  size_t i, j;

  for (i = 0; i < n; i++) {
    sites[i].alloc_rate = -1;
    if (dt <= 0)
      continue;
    /* A site new since the last profile grew from nothing. */
    sites[i].alloc_rate = (double)sites[i].alloc_space / dt;
    for (j = 0; j < t->nsites; j++) {
      if (same_site(&sites[i], &t->sites[j])) {
        int64_t grew = sites[i].alloc_space - t->sites[j].alloc_space;
        sites[i].alloc_rate = grew > 0 ? (double)grew / dt : 0;
        break;
      }
    }
  }
  mt_sites_free(t->sites, t->nsites);
  t->sites = sites;
  t->nsites = n;
  t->sites_mono_ns = mono_ns;
  t->sites_estimated = estimated;
  t->sites_error[0] = '\0';
}

void mt_model_sites_error(mt_target_t *t, const char *why) {
  snprintf(t->sites_error, sizeof t->sites_error, "%s", why);
}
