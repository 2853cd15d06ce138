/*
 * test_engine.c - the statistics engine: size classes, the pause ring and
 * histogram (against Go's own bucket edges), and the consistency of
 * snapshots under concurrent writers, thread exit, fork and signals.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "core/engine.h"
#include "core/hotpath.h"
#include "core/sizeclass.h"
#include "memstats.h"

static ms_snapshot_t *snap_new(void) {
  ms_snapshot_t *s = malloc(sizeof *s);
  assert_non_null(s);
  assert_int_equal(ms_snapshot_read(s, sizeof *s), 0);
  return s;
}

/* ---- size classes ---------------------------------------------------------*/

static void test_size_classes(void **state) {
  (void)state;
  int prev = 0;
  for (uint64_t sz = 1; sz <= MS__MAX_SMALL; sz++) {
    int c = ms__size_class(sz);
    assert_true(c >= 0 && c < MS__NCLASSES);
    assert_true(c >= prev); /* monotonic */
    assert_true(ms__class_size(c) >= sz);
    if (c > 0)
      assert_true(ms__class_size(c - 1) < sz); /* the smallest that fits */
    prev = c;
  }
  assert_int_equal(ms__size_class(MS__MAX_SMALL + 1), -1);
  assert_int_equal(ms__class_size(MS__NCLASSES - 1), MS__MAX_SMALL);
  /* At most 25% rounding above 128 bytes. */
  for (int c = 9; c < MS__NCLASSES; c++)
    assert_true(ms__class_size(c) * 4 <= ms__class_size(c - 1) * 5 + 4);
}

/* The class the hot path computes (ms__size_class_small: the table up to
 * MS__CLASS_TABLE_MAX, arithmetic above) is the smallest class that holds
 * the size, for every size up to the largest class; above 128 bytes the
 * arithmetic alone equals the table wherever both apply; and on either
 * side of every class boundary. */
static void test_size_class_fast(void **state) {
  (void)state;
  int c = 0;
  for (uint64_t sz = 0; sz <= MS__MAX_SMALL; sz++) {
    while (ms__class_size(c) < sz)
      c++;
    assert_int_equal(ms__size_class_small(sz), c);
  }
  for (uint64_t sz = 129; sz <= MS__CLASS_TABLE_MAX; sz++)
    assert_int_equal(ms__size_class_log(sz), ms__class_by8[(sz + 7) >> 3]);
  for (c = 0; c < MS__NCLASSES; c++) {
    uint64_t top = ms__class_size(c);
    assert_int_equal(ms__size_class_small(top), c);
    assert_int_equal(ms__size_class_small(top - 1), top - 1 <= 8 ? 0 : c);
    if (c + 1 < MS__NCLASSES)
      assert_int_equal(ms__size_class_small(top + 1), c + 1);
    if (top > 128)
      assert_int_equal(ms__size_class_log(top), c);
  }
  assert_int_equal(ms__size_class(MS__MAX_SMALL + 1), -1);
  assert_int_equal(ms__size_class(UINT64_MAX), -1);
}

/* The slot this thread's fast path writes. */
static ms__delta_t *own_slot(void) {
  uint64_t w = __atomic_load_n(&ms__gen_word, __ATOMIC_ACQUIRE);
  return (ms__delta_t *)((char *)ms__tls.shard +
                         (w & ~(uint64_t)MS__GEN_FENCE));
}

/* Every size up to MS__MAX_SMALL is counted on the fast path, in its
 * class, by the thread's own shard (blocks over 1 KiB went to the slow
 * path until issue 24); larger ones are left to the slow path. */
static void test_fast_path_every_class(void **state) {
  (void)state;
  /* This thread gets a shard of its own, and snapshots count the objects
   * from now on (the other tests compare snapshots with this one's). */
  ms_object_alloc(16);
  ms_object_free(16);
  ms__tls_t *t = &ms__tls;
  assert_ptr_not_equal(t->shard, &ms__shard_none);
  for (int c = 0; c < MS__NCLASSES; c++) {
    uint64_t top = ms__class_size(c);
    uint64_t bottom = c > 0 ? ms__class_size(c - 1) + 1 : 1;
    const uint64_t sizes[] = {bottom, (bottom + top) / 2, top};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
      ms__delta_t *d = own_slot();
      uint64_t allocs = d->small_allocs[c], frees = d->small_frees[c];
      uint64_t in = d->alloc_bytes, out = d->free_bytes;
      assert_int_equal(ms__track_fast(t, sizes[i], 0), 1);
      assert_int_equal(ms__track_fast(t, sizes[i], 1), 1);
      assert_ptr_equal(own_slot(), d); /* no reader turned the generation */
      assert_int_equal(d->small_allocs[c], allocs + 1);
      assert_int_equal(d->small_frees[c], frees + 1);
      assert_int_equal(d->alloc_bytes, in + sizes[i]);
      assert_int_equal(d->free_bytes, out + sizes[i]);
    }
  }
  assert_int_equal(ms__track_fast(t, MS__MAX_SMALL + 1, 0), 0);
  assert_int_equal(ms__track_fast(t, MS__MAX_SMALL + 1, 1), 0);
}

static void test_bad_args(void **state) {
  (void)state;
  ms_snapshot_t s;
  assert_int_equal(ms_snapshot_read(NULL, sizeof s), MS_EINVAL);
  assert_int_equal(ms_snapshot_read(&s, sizeof s - 1), MS_EINVAL);
  assert_int_equal(ms_heap_move(MS_SPAN__COUNT, MS_SPAN_IDLE, 1), MS_EINVAL);
  assert_int_equal(ms_sys_add(MS_SYS__COUNT, 1, 0), MS_EINVAL);
  assert_int_equal(ms_sys_add(MS_SYS_GC, 1, 1), MS_EINVAL);
  assert_int_equal(ms_gc_pause(10, 5, 0), MS_EINVAL);
}

/* ---- pause histogram against Go's edges
 * ------------------------------------*/

static json_t *load_timehist(void) {
  json_error_t err;
  json_t *j = json_load_file("tests/data/go/timehistogram.json", 0, &err);
  if (!j)
    fail_msg("tests/data/go/timehistogram.json: %s (line %d)", err.text,
             err.line);
  return j;
}

static void test_hist_edges(void **state) {
  (void)state;
  json_t *j = load_timehist();
  json_t *g = json_object_get(j, "go120plus");
  json_t *edges = json_object_get(g, "boundaries_ns");
  assert_int_equal(json_integer_value(json_object_get(g, "counts_len")),
                   MS_PAUSE_HIST_BUCKETS);
  assert_int_equal(json_array_size(edges), MS_PAUSE_HIST_BUCKETS + 1);
  /* edges[i] is the lower edge of bucket i ("-Inf" for underflow) and
   * edges[i+1] its upper edge ("+Inf" for overflow). */
  for (int i = 1; i < MS_PAUSE_HIST_BUCKETS; i++) {
    json_t *e = json_array_get(edges, (size_t)i);
    assert_true(json_is_integer(e));
    assert_int_equal(ms_pause_hist_lower(i), json_integer_value(e));
    if (i + 1 < MS_PAUSE_HIST_BUCKETS)
      assert_int_equal(
          ms_pause_hist_upper(i),
          json_integer_value(json_array_get(edges, (size_t)i + 1)));
  }
  json_t *probes = json_object_get(j, "probes");
  size_t k;
  json_t *p;
  json_array_foreach(probes, k, p) {
    json_int_t ns = json_integer_value(json_object_get(p, "ns"));
    json_int_t want = json_integer_value(json_object_get(p, "go120_index"));
    assert_int_equal(ms_pause_hist_bucket((int64_t)ns), want);
  }
  /* Every bucket's edges map back to it. */
  for (int i = 1; i < MS_PAUSE_HIST_BUCKETS - 1; i++) {
    assert_int_equal(ms_pause_hist_bucket(ms_pause_hist_lower(i)), i);
    assert_int_equal(ms_pause_hist_bucket(ms_pause_hist_upper(i) - 1), i);
  }
  json_decref(j);

  /* A histogram from a stranger with a total near 2^64: the maximum's rank
   * is the total, not a double of 2^64 cast to an integer (undefined; 0 on
   * x86, which gave the first bucket as the maximum). */
  ms_pause_hist_t h;
  memset(&h, 0, sizeof h);
  h.counts[3] = 1;
  h.counts[10] = UINT64_MAX - 1;
  assert_int_equal(ms_pause_hist_quantile(&h, 1.0), ms_pause_hist_upper(10));
  assert_int_equal(ms_pause_hist_quantile(&h, 0.0), ms_pause_hist_upper(3));
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* The ring wraps past 256 exactly as Go's; the histogram keeps every pause;
 * quantiles fall within the bucket holding the true value. Runs in a child
 * process so the pause state starts empty. */
static void ring_and_hist_child(void) {
  enum { N = 300 };
  static uint64_t durs[N];
  uint64_t sum = 0;
  for (int i = 0; i < N; i++) {
    /* Spread over 1 us .. ~10 ms, deterministic. */
    durs[i] = 1000 + ((uint64_t)i * 7919u * 7919u) % 10000000u;
    uint64_t start = 1000000000ull + (uint64_t)i * 20000000ull;
    if (ms_gc_pause(start, start + durs[i], i % 10 == 0) != 0)
      _exit(10);
    sum += durs[i];
  }
  ms_snapshot_t *s = malloc(sizeof *s);
  if (!s || ms_snapshot_read(s, sizeof *s) != 0)
    _exit(11);
  if (s->num_gc != N || s->num_forced_gc != N / 10 || s->pause_total_ns != sum)
    _exit(12);
  /* Newest at (NumGC+255)%256, and the 256 before it going back. */
  for (int back = 0; back < MS_PAUSE_RING; back++) {
    unsigned idx = (s->num_gc + 255u - (unsigned)back) % MS_PAUSE_RING;
    if (s->pause_ns[idx] != durs[N - 1 - back])
      _exit(13);
  }
  if (s->last_gc != s->pause_end[(s->num_gc + 255) % 256] || s->last_gc == 0)
    _exit(14);
  if (ms_pause_hist_total(&s->pause_hist) != N)
    _exit(15);
  if (s->quality[MS_F_NUM_GC] != MS_Q_EXACT ||
      s->quality[MS_F_GC_CPU_FRACTION] != MS_Q_ESTIMATED || s->enable_gc != 1)
    _exit(16);
  qsort(durs, N, sizeof durs[0], cmp_u64);
  static const double qs[] = {0.0, 0.5, 0.9, 0.99, 1.0};
  for (size_t i = 0; i < sizeof qs / sizeof qs[0]; i++) {
    size_t rank = (size_t)(qs[i] * N + 0.999999);
    if (rank == 0)
      rank = 1;
    uint64_t truth = durs[rank - 1];
    int64_t got = ms_pause_hist_quantile(&s->pause_hist, qs[i]);
    int b = ms_pause_hist_bucket((int64_t)truth);
    /* The estimate is the upper edge of the true value's bucket: at most
     * 25% above the truth, never below it. */
    if (got != ms_pause_hist_upper(b) || (uint64_t)got < truth ||
        (double)got > 1.25 * (double)truth + 64)
      _exit(17);
  }
  ms_pause_hist_t empty;
  memset(&empty, 0, sizeof empty);
  if (ms_pause_hist_quantile(&empty, 0.5) != -1)
    _exit(18);
  free(s);
  _exit(0);
}

static void run_in_child(void (*fn)(void)) {
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0)
    fn();
  int st;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
}

static void test_pause_ring(void **state) {
  (void)state;
  run_in_child(ring_and_hist_child);
}

static void gc_begin_end_child(void) {
  if (ms_gc_end() != MS_EINVAL) /* end without begin */
    _exit(1);
  for (int i = 0; i < 5; i++) {
    ms_gc_begin(i == 0);
    usleep(1000);
    if (ms_gc_end() != 0)
      _exit(2);
  }
  ms_gc_set_next(12345);
  ms_snapshot_t s;
  ms_snapshot_read(&s, sizeof s);
  if (s.num_gc != 5 || s.num_forced_gc != 1 || s.next_gc != 12345)
    _exit(3);
  uint64_t sum = 0;
  for (int i = 0; i < 5; i++) {
    if (s.pause_ns[i] < 1000000) /* slept 1 ms inside each */
      _exit(4);
    sum += s.pause_ns[i];
  }
  if (sum != s.pause_total_ns)
    _exit(5);
  _exit(0);
}

static void test_gc_begin_end(void **state) {
  (void)state;
  run_in_child(gc_begin_end_child);
}

/* ---- accounting API
 * ---------------------------------------------------------*/

static void test_heap_and_sys(void **state) {
  (void)state;
  /* Once the program reports its own heap, the runtime API owns the heap
   * fields (not the malloc provider): take the baseline after that. */
  assert_int_equal(ms_heap_move(MS_SPAN_NONE, MS_SPAN_IDLE, 4096), 0);
  ms_snapshot_t *a = snap_new();
  assert_int_equal(a->heap_sys, 4096);
  assert_int_equal(ms_heap_move(MS_SPAN_NONE, MS_SPAN_IDLE, 1 << 20), 0);
  assert_int_equal(ms_heap_move(MS_SPAN_IDLE, MS_SPAN_INUSE, 256 << 10), 0);
  assert_int_equal(ms_heap_move(MS_SPAN_IDLE, MS_SPAN_RELEASED, 128 << 10), 0);
  assert_int_equal(ms_sys_add(MS_SYS_STACK, 8192, 4096), 0);
  assert_int_equal(ms_sys_add(MS_SYS_OTHER, 1000, 0), 0);
  ms_snapshot_t *b = snap_new();
  assert_int_equal(b->heap_sys - a->heap_sys, 1 << 20);
  assert_int_equal(b->heap_inuse - a->heap_inuse, 256 << 10);
  assert_int_equal(b->heap_released - a->heap_released, 128 << 10);
  assert_int_equal(b->heap_idle - a->heap_idle, (1 << 20) - (256 << 10));
  assert_int_equal(b->stack_sys - a->stack_sys, 8192);
  assert_int_equal(b->stack_inuse - a->stack_inuse, 4096);
  assert_int_equal(b->quality[MS_F_HEAP_SYS], MS_Q_EXACT);
  assert_int_equal(b->quality[MS_F_STACK_SYS], MS_Q_EXACT);
  /* Sys is the sum of the known *Sys fields: each holds its unbacked
   * part (OffHeapReleased is no term of its own). */
  assert_int_equal(b->sys, b->heap_sys + b->stack_sys + b->other_sys);
  assert_int_equal(b->quality[MS_F_SYS], MS_Q_EXACT);
  /* A class the runtime never reported is memory it has not mapped: 0. */
  assert_int_equal(b->quality[MS_F_MSPAN_SYS], MS_Q_EXACT);
  assert_int_equal(b->mspan_sys, 0);
  assert_true(b->seq > a->seq);
  assert_int_equal(b->pid, getpid());
  assert_true(b->start_time > 0);
  assert_string_equal(b->comm, "test_engine");
  assert_true(b->kernel_rss > 0);
  /* Put it back for the tests that follow. */
  ms_heap_move(MS_SPAN_RELEASED, MS_SPAN_NONE, 128 << 10);
  ms_heap_move(MS_SPAN_INUSE, MS_SPAN_NONE, 256 << 10);
  ms_heap_move(MS_SPAN_IDLE, MS_SPAN_NONE, (1 << 20) - (384 << 10) + 4096);
  free(a);
  free(b);
}

/* ---- the torture test
 * -------------------------------------------------------*/

/* Sizes equal to class sizes, so HeapAlloc must equal the sum over classes
 * of live objects times their size: a torn snapshot breaks that identity. */
static const uint64_t k_sizes[] = {16, 64, 256, 4096, 2u << 20 /* large */};
#define NSIZES (sizeof k_sizes / sizeof k_sizes[0])

enum { NWRITERS = 4, QCAP = 256, KEEP = 64 };

typedef struct {
  pthread_mutex_t mu;
  uint64_t items[QCAP];
  unsigned head, n;
} queue_t;

static queue_t g_q[NWRITERS];
static volatile int g_stop_writers;
static uint64_t g_ops_done[NWRITERS];

static int q_push(queue_t *q, uint64_t v) {
  pthread_mutex_lock(&q->mu);
  int ok = q->n < QCAP;
  if (ok) {
    q->items[(q->head + q->n) % QCAP] = v;
    q->n++;
  }
  pthread_mutex_unlock(&q->mu);
  return ok;
}

static int q_pop(queue_t *q, uint64_t *v) {
  pthread_mutex_lock(&q->mu);
  int ok = q->n > 0;
  if (ok) {
    *v = q->items[q->head];
    q->head = (q->head + 1) % QCAP;
    q->n--;
  }
  pthread_mutex_unlock(&q->mu);
  return ok;
}

static void *writer(void *arg) {
  int id = (int)(intptr_t)arg;
  uint64_t held[KEEP];
  unsigned nheld = 0;
  uint64_t rnd = 0x9e3779b97f4a7c15ull * (uint64_t)(id + 1), ops = 0;
  while (!__atomic_load_n(&g_stop_writers, __ATOMIC_RELAXED) || nheld > 0) {
    int stopping = __atomic_load_n(&g_stop_writers, __ATOMIC_RELAXED);
    rnd ^= rnd << 13, rnd ^= rnd >> 7, rnd ^= rnd << 17;
    uint64_t v;
    /* Free what others handed us. */
    while (q_pop(&g_q[id], &v))
      ms_object_free(v);
    if (!stopping && nheld < KEEP) {
      uint64_t sz = k_sizes[rnd % NSIZES];
      ms_object_alloc(sz);
      held[nheld++] = sz;
      ops++;
    } else if (nheld > 0) {
      uint64_t sz = held[--nheld];
      /* Half of the frees happen on another thread. */
      if ((rnd >> 8) & 1) {
        if (!q_push(&g_q[(id + 1) % NWRITERS], sz))
          ms_object_free(sz);
      } else {
        ms_object_free(sz);
      }
    }
  }
  g_ops_done[id] = ops;
  return NULL;
}

static void check_consistent(const ms_snapshot_t *s) {
  assert_int_equal(s->mallocs - s->frees, s->heap_objects);
  assert_true(s->mallocs >= s->frees);
  /* Every object in flight is held by a writer or sits in a queue. */
  assert_true(s->heap_objects <= (uint64_t)NWRITERS * (KEEP + QCAP));
  uint64_t live_bytes = 0, small_objects = 0;
  for (uint32_t c = 0; c < s->nsize_classes; c++) {
    assert_true(s->by_size[c].mallocs >= s->by_size[c].frees);
    live_bytes +=
        (s->by_size[c].mallocs - s->by_size[c].frees) * s->by_size[c].size;
    small_objects += s->by_size[c].mallocs - s->by_size[c].frees;
  }
  /* The rest are large objects of 2 MiB. */
  uint64_t large = s->heap_objects - small_objects;
  assert_int_equal(s->heap_alloc, live_bytes + large * (2u << 20));
}

static void test_torture(void **state) {
  (void)state;
  ms_snapshot_t *base = snap_new(), *s = malloc(sizeof *s);
  uint64_t prev_mallocs = base->mallocs, prev_frees = base->frees,
           prev_total = base->total_alloc;
  /* Start from zero live objects so the bound check is exact. */
  assert_int_equal(base->heap_objects, 0);
  pthread_t th[NWRITERS];
  for (int i = 0; i < NWRITERS; i++)
    pthread_mutex_init(&g_q[i].mu, NULL);
  for (int i = 0; i < NWRITERS; i++) {
    assert_int_equal(pthread_create(&th[i], NULL, writer, (void *)(intptr_t)i),
                     0);
  }
  enum { NSNAP = 100000 };
  for (int i = 0; i < NSNAP; i++) {
    assert_int_equal(ms_snapshot_read(s, sizeof *s), 0);
    check_consistent(s);
    /* Cumulative totals never decrease. */
    assert_true(s->mallocs >= prev_mallocs);
    assert_true(s->frees >= prev_frees);
    assert_true(s->total_alloc >= prev_total);
    prev_mallocs = s->mallocs;
    prev_frees = s->frees;
    prev_total = s->total_alloc;
  }
  __atomic_store_n(&g_stop_writers, 1, __ATOMIC_RELAXED);
  for (int i = 0; i < NWRITERS; i++)
    pthread_join(th[i], NULL);
  /* Drain whatever was handed over after its receiver stopped. */
  uint64_t v;
  for (int i = 0; i < NWRITERS; i++)
    while (q_pop(&g_q[i], &v))
      ms_object_free(v);
  uint64_t ops = 0;
  for (int i = 0; i < NWRITERS; i++)
    ops += g_ops_done[i];
  assert_int_equal(ms_snapshot_read(s, sizeof *s), 0);
  /* Exactly what was done, after the writers' shards were folded. */
  assert_int_equal(s->mallocs - base->mallocs, ops);
  assert_int_equal(s->frees - base->frees, ops);
  assert_int_equal(s->heap_objects, 0);
  assert_int_equal(s->heap_alloc, 0);
  ms__engine_stats_t es;
  ms__engine_stats(&es);
  print_message("torture: %llu objects, %llu snapshots, %llu reader spins\n",
                (unsigned long long)ops, (unsigned long long)es.reads,
                (unsigned long long)es.wait_spins);
  free(base);
  free(s);
}

/* ---- 10,000 short-lived threads
 * ---------------------------------------------*/

static void *short_lived(void *arg) {
  (void)arg;
  ms_object_alloc(48);
  ms_object_alloc(48);
  ms_object_alloc(100000);
  ms_object_free(48);
  ms_object_free(100000);
  return NULL; /* one 48-byte object stays live */
}

static volatile int g_reader_stop;
static void *reader_loop(void *arg) {
  ms_snapshot_t *s = malloc(sizeof *s);
  uint64_t *nread = arg;
  while (!__atomic_load_n(&g_reader_stop, __ATOMIC_RELAXED)) {
    ms_snapshot_read(s, sizeof *s);
    if (s->mallocs < s->frees)
      abort();
    (*nread)++;
  }
  free(s);
  return NULL;
}

static void run_threads(int n, int batch) {
  for (int i = 0; i < n; i += batch) {
    pthread_t th[64];
    int k = 0;
    for (; k < batch && i + k < n; k++)
      assert_int_equal(pthread_create(&th[k], NULL, short_lived, NULL), 0);
    for (int j = 0; j < k; j++)
      pthread_join(th[j], NULL);
  }
}

static void test_thread_exit(void **state) {
  (void)state;
  enum { NTHREADS = 10000 };
  ms_snapshot_t *a = snap_new();
  uint64_t nread = 0;
  pthread_t r;
  /* Half with a reader running concurrently, half with nobody reading (the
   * threads then reclaim dead shards themselves). */
  assert_int_equal(pthread_create(&r, NULL, reader_loop, &nread), 0);
  run_threads(NTHREADS / 2, 8);
  __atomic_store_n(&g_reader_stop, 1, __ATOMIC_RELAXED);
  pthread_join(r, NULL);
  run_threads(NTHREADS / 2, 8);
  ms_snapshot_t *b = snap_new();
  assert_int_equal(b->mallocs - a->mallocs, 3 * NTHREADS);
  assert_int_equal(b->frees - a->frees, 2 * NTHREADS);
  assert_int_equal(b->heap_objects - a->heap_objects, NTHREADS);
  assert_int_equal(b->heap_alloc - a->heap_alloc, 48 * NTHREADS);
  assert_int_equal(b->total_alloc - a->total_alloc,
                   (48 * 2 + 100000) * (uint64_t)NTHREADS);
  ms__engine_stats_t es;
  ms__engine_stats(&es);
  /* Shards are reused: memory stays bounded by the concurrency, not by how
   * many threads ever ran. */
  print_message("thread exit: %llu shards for %d threads, %llu reads\n",
                (unsigned long long)es.shards_total, NTHREADS,
                (unsigned long long)nread);
  assert_true(es.shards_total < 64);
  for (int i = 0; i < NTHREADS; i++)
    ms_object_free(48);
  free(a);
  free(b);
}

/* ---- fork
 * ------------------------------------------------------------------*/

static pthread_mutex_t g_fork_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_fork_cv = PTHREAD_COND_INITIALIZER;
static int g_fork_phase;

static void *fork_bystander(void *arg) {
  (void)arg;
  ms_object_alloc(512); /* live in this thread's shard at the fork */
  ms_object_alloc(512);
  ms_object_free(512);
  pthread_mutex_lock(&g_fork_mu);
  g_fork_phase++;
  pthread_cond_broadcast(&g_fork_cv);
  while (g_fork_phase < 100)
    pthread_cond_wait(&g_fork_cv, &g_fork_mu);
  pthread_mutex_unlock(&g_fork_mu);
  ms_object_free(512);
  return NULL;
}

static void test_fork(void **state) {
  (void)state;
  pthread_t th[3];
  for (int i = 0; i < 3; i++)
    pthread_create(&th[i], NULL, fork_bystander, NULL);
  pthread_mutex_lock(&g_fork_mu);
  while (g_fork_phase < 3)
    pthread_cond_wait(&g_fork_cv, &g_fork_mu);
  pthread_mutex_unlock(&g_fork_mu);
  ms_object_alloc(4096);
  ms_snapshot_t *at_fork = snap_new();
  int pipefd[2];
  assert_int_equal(pipe(pipefd), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    ms_snapshot_t s;
    ms_snapshot_read(&s, sizeof s);
    int ok = s.mallocs == at_fork->mallocs && s.frees == at_fork->frees &&
             s.heap_alloc == at_fork->heap_alloc && s.pid == getpid();
    /* The child's own work adds to the parent's totals. */
    for (int i = 0; i < 1000; i++)
      ms_object_alloc(32);
    ms_object_free(4096);
    ms_snapshot_read(&s, sizeof s);
    ok = ok && s.mallocs == at_fork->mallocs + 1000 &&
         s.frees == at_fork->frees + 1 &&
         s.heap_alloc == at_fork->heap_alloc + 32000 - 4096;
    /* Threads in the child work too (new shards). ThreadSanitizer cannot
     * start threads in the child of a threaded process ("dup thread with
     * used id"), so under TSan this part is left to the other builds. */
#ifndef __SANITIZE_THREAD__
    pthread_t t;
    pthread_create(&t, NULL, (void *(*)(void *))short_lived, NULL);
    pthread_join(t, NULL);
    ms_snapshot_read(&s, sizeof s);
    ok = ok && s.mallocs == at_fork->mallocs + 1003;
#endif
    ssize_t w = write(pipefd[1], &ok, sizeof ok);
    _exit(w == sizeof ok ? 0 : 1);
  }
  close(pipefd[1]);
  int ok = 0;
  assert_int_equal(read(pipefd[0], &ok, sizeof ok), sizeof ok);
  close(pipefd[0]);
  int st;
  waitpid(pid, &st, 0);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  assert_true(ok);
  /* The parent is unaffected. */
  ms_snapshot_t *after = snap_new();
  assert_int_equal(after->mallocs, at_fork->mallocs);
  pthread_mutex_lock(&g_fork_mu);
  g_fork_phase = 100;
  pthread_cond_broadcast(&g_fork_cv);
  pthread_mutex_unlock(&g_fork_mu);
  for (int i = 0; i < 3; i++)
    pthread_join(th[i], NULL);
  ms_object_free(4096);
  free(at_fork);
  free(after);
}

/* ---- signals
 * ---------------------------------------------------------------*/

static volatile sig_atomic_t g_sig_count;
static void on_alarm(int sig) {
  (void)sig;
  ms_object_alloc(64);
  ms_object_free(64);
  ms_object_alloc(64);
  g_sig_count++;
}

static void test_signal_nesting(void **state) {
  (void)state;
  ms_snapshot_t *a = snap_new();
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_alarm;
  sigaction(SIGALRM, &sa, NULL);
  struct itimerval it = {{0, 200}, {0, 200}};
  setitimer(ITIMER_REAL, &it, NULL);
  uint64_t n = 0;
  while (g_sig_count < 200) {
    ms_object_alloc(16);
    ms_object_free(16);
    n++;
  }
  struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_REAL, &off, NULL);
  signal(SIGALRM, SIG_DFL);
  uint64_t sigs = (uint64_t)g_sig_count;
  ms_snapshot_t *b = snap_new();
  assert_int_equal(b->mallocs - a->mallocs, n + 2 * sigs);
  assert_int_equal(b->frees - a->frees, n + sigs);
  assert_int_equal(b->heap_alloc - a->heap_alloc, 64 * sigs);
  for (uint64_t i = 0; i < sigs; i++)
    ms_object_free(64);
  free(a);
  free(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_size_classes),
      cmocka_unit_test(test_size_class_fast),
      cmocka_unit_test(test_fast_path_every_class),
      cmocka_unit_test(test_bad_args),
      cmocka_unit_test(test_hist_edges),
      cmocka_unit_test(test_pause_ring),
      cmocka_unit_test(test_gc_begin_end),
      cmocka_unit_test(test_heap_and_sys),
      cmocka_unit_test(test_torture),
      cmocka_unit_test(test_thread_exit),
      cmocka_unit_test(test_fork),
      cmocka_unit_test(test_signal_nesting),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
