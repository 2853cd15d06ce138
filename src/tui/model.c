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

#include "common/fields.h"

void mt_model_init(mt_model_t *m) {
  memset(m, 0, sizeof *m);
  m->sort = MT_SORT_PID;
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
  if (t->hist == NULL)
    t->hist = calloc(MT_HISTORY, sizeof *t->hist);
  return t->hist != NULL ? 0 : MS_ENOMEM;
}

const mt_sample_t *mt_target_sample(const mt_target_t *t, size_t i) {
  if (t->hist == NULL || i >= t->nhist || i >= MT_HISTORY)
    return NULL;
  return &t->hist[(t->nhist - 1 - i) % MT_HISTORY];
}

/* A per-second rate of a cumulative counter between two samples; -1 when
 * it cannot be told (the counter went back, e.g. a provider restarted). */
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

/* Pause percentiles come from the histogram, which holds every pause since
 * the start (the ring holds only the last 256, so percentiles from it
 * would forget). The maximum is exact from the ring while the ring still
 * holds every pause; after that the histogram's bucket edge bounds it. */
static void update_pauses(mt_target_t *t) {
  const ms_snapshot_t *s = &t->snap;
  uint64_t ring_max = 0;
  uint32_t i, n;

  t->pause_p50_ns = t->pause_p99_ns = t->pause_max_ns = -1;
  if (ms__field_known(s, MS_F_PAUSE_HIST) &&
      ms_pause_hist_total(&s->pause_hist) > 0) {
    t->pause_p50_ns = ms_pause_hist_quantile(&s->pause_hist, 0.50);
    t->pause_p99_ns = ms_pause_hist_quantile(&s->pause_hist, 0.99);
    t->pause_max_ns = ms_pause_hist_quantile(&s->pause_hist, 1.0);
  }
  if (ms__field_known(s, MS_F_PAUSE_NS) && s->num_gc > 0) {
    n = s->num_gc < MS_PAUSE_RING ? s->num_gc : MS_PAUSE_RING;
    for (i = 0; i < n; i++)
      if (s->pause_ns[(s->num_gc + MS_PAUSE_RING - 1 - i) % MS_PAUSE_RING] >
          ring_max)
        ring_max =
            s->pause_ns[(s->num_gc + MS_PAUSE_RING - 1 - i) % MS_PAUSE_RING];
    if (s->num_gc <= MS_PAUSE_RING || t->pause_max_ns < 0) {
      t->pause_max_ns = (int64_t)ring_max;
      /* A histogram quantile is its bucket's upper edge; no pause was
       * longer than the exact maximum, so neither is any quantile. */
      if (t->pause_p50_ns > t->pause_max_ns)
        t->pause_p50_ns = t->pause_max_ns;
      if (t->pause_p99_ns > t->pause_max_ns)
        t->pause_p99_ns = t->pause_max_ns;
    }
  }
}

void mt_model_update(mt_model_t *m, mt_target_t *t, const ms_snapshot_t *s) {
  mt_sample_t *smp;
  const mt_sample_t *last;

  (void)m;
  /* The same PID with another start time is another process (PID reuse,
   * or `run` restarted): its history would make nonsense rates. */
  if (t->have_snapshot && s->start_time != 0 && t->start_time != 0 &&
      s->start_time != t->start_time)
    t->nhist = 0;
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
  t->error[0] = '\0';
  t->exited_mono_ns = 0;

  /* Without memory for a history, the figures still show; trends and
   * rates wait for the next snapshot. */
  if (mt_target_reserve_history(t) != 0) {
    reset_rates(t);
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

static int compare_targets(const mt_target_t *a, const mt_target_t *b,
                           mt_sort_t key, int reverse) {
  int64_t va = 0, vb = 0;
  int ha, hb, c = 0;

  if (key == MT_SORT_PID) {
    c = (a->pid > b->pid) - (a->pid < b->pid);
    return reverse ? -c : c;
  }
  if (key == MT_SORT_NAME) {
    if (a->have_snapshot != b->have_snapshot)
      return a->have_snapshot ? -1 : 1;
    c = strcmp(a->comm, b->comm);
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

void mt_model_sort(mt_model_t *m) {
  int sel_pid = -1;
  size_t i, j;
  mt_target_t *t;

  if (m->ntargets == 0)
    return;
  if (m->selected < m->ntargets)
    sel_pid = m->targets[m->selected]->pid;
  /* Insertion sort: the list is nearly sorted from the previous frame,
   * small (hundreds), and it is stable. */
  for (i = 1; i < m->ntargets; i++) {
    t = m->targets[i];
    for (j = i; j > 0 && compare_targets(m->targets[j - 1], t, m->sort,
                                         m->sort_reverse) > 0;
         j--)
      m->targets[j] = m->targets[j - 1];
    m->targets[j] = t;
  }
  for (i = 0; i < m->ntargets; i++)
    if (m->targets[i]->pid == sel_pid)
      m->selected = i;
  if (m->selected >= m->ntargets)
    m->selected = m->ntargets - 1;
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
