/*
 * heap.c - building an mt_heap_t from a decoded profile (see heap.h).
 *
 * The values are Go's: runtime/pprof/protomem.go writes, per bucket,
 * scaleHeapSample(AllocObjects, AllocBytes, rate) and
 * scaleHeapSample(InUseObjects, InUseBytes, rate); a delta (Go's
 * ?seconds=N in net/http/pprof) is the later profile less the earlier one,
 * each scaled first, as pprof's Merge of the earlier profile scaled by -1
 * computes it.
 *
 * Strings, functions, locations and (for a delta) the earlier profile's
 * buckets are found again through small open-addressing indexes of
 * uint32 entries (the entry's index + 1; 0 is empty), each keyed by a hash
 * and confirmed by comparing the entry itself.
 */
#include "pprof/heap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "memstats.h"
#include "pprof/libs.h"

typedef struct index_s {
  uint32_t *slot;
  size_t cap; /* a power of two, or 0 */
  size_t used;
} index_t;

typedef struct heap_int_s {
  index_t strings, functions, locations;
  size_t cap_strings, cap_functions, cap_locations;
  uint32_t *by_start; /* mapping indexes, by start address */
  int oom;
  int too_large; /* more distinct locations than MT_HEAP_MAX_LOCATIONS */
} heap_int_t;

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  size_t i;

  /* FNV-1a, 64 bits. */
  for (i = 0; i < n; i++) {
    h ^= b[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

#define HASH_SEED 0xcbf29ce484222325ull

/* Grows ix to hold one more entry (rehashing with `rehash`, which gives
 * the hash of entry i). Returns 0 or MS_ENOMEM. */
static int index_reserve(index_t *ix, uint64_t (*rehash)(void *, uint32_t),
                         void *ctx) {
  size_t cap, i, j;
  uint32_t *slot;

  if ((ix->used + 1) * 2 <= ix->cap)
    return 0;
  cap = ix->cap ? ix->cap * 2 : 64;
  slot = calloc(cap, sizeof *slot);
  if (slot == NULL)
    return MS_ENOMEM;
  for (i = 0; i < ix->cap; i++) {
    if (ix->slot[i] == 0)
      continue;
    j = rehash(ctx, ix->slot[i] - 1) & (cap - 1);
    while (slot[j] != 0)
      j = (j + 1) & (cap - 1);
    slot[j] = ix->slot[i];
  }
  free(ix->slot);
  ix->slot = slot;
  ix->cap = cap;
  return 0;
}

/* Makes room for need elements of size bytes in *arr. Returns 0 or
 * MS_ENOMEM (*arr as it was). */
static int grow(void **arr, size_t *cap, size_t need, size_t size) {
  size_t n;
  void *p;

  if (need <= *cap)
    return 0;
  n = *cap ? *cap * 2 : 64;
  while (n < need)
    n *= 2;
  p = realloc(*arr, n * size);
  if (p == NULL)
    return MS_ENOMEM;
  *arr = p;
  *cap = n;
  return 0;
}

/* ---- strings ----------------------------------------------------------- */

static uint64_t string_hash(void *ctx, uint32_t i) {
  mt_heap_t *h = ctx;
  return hash_bytes(HASH_SEED, h->strings[i], strlen(h->strings[i]));
}

uint32_t mt_heap_string(mt_heap_t *h, const char *s) {
  heap_int_t *in = h->internal;
  uint64_t hv;
  size_t j;
  char *copy;

  if (s == NULL || s[0] == '\0')
    return 0;
  if (in == NULL || in->oom)
    return 0;
  if (index_reserve(&in->strings, string_hash, h) != 0)
    goto oom;
  hv = hash_bytes(HASH_SEED, s, strlen(s));
  for (j = hv & (in->strings.cap - 1); in->strings.slot[j] != 0;
       j = (j + 1) & (in->strings.cap - 1))
    if (strcmp(h->strings[in->strings.slot[j] - 1], s) == 0)
      return in->strings.slot[j] - 1;
  if (grow((void **)&h->strings, &in->cap_strings, h->nstrings + 1,
           sizeof *h->strings) != 0)
    goto oom;
  copy = strdup(s);
  if (copy == NULL)
    goto oom;
  h->strings[h->nstrings] = copy;
  in->strings.slot[j] = (uint32_t)++h->nstrings;
  in->strings.used++;
  return (uint32_t)(h->nstrings - 1);
oom:
  in->oom = 1;
  return 0;
}

/* ---- functions --------------------------------------------------------- */

static uint64_t function_key(const mt_heap_function_t *f) {
  uint64_t hv = HASH_SEED;

  hv = hash_bytes(hv, &f->name, sizeof f->name);
  hv = hash_bytes(hv, &f->system_name, sizeof f->system_name);
  hv = hash_bytes(hv, &f->filename, sizeof f->filename);
  return hash_bytes(hv, &f->start_line, sizeof f->start_line);
}

static uint64_t function_hash(void *ctx, uint32_t i) {
  mt_heap_t *h = ctx;
  return function_key(&h->functions[i]);
}

uint32_t mt_heap_function(mt_heap_t *h, const char *name,
                          const char *system_name, const char *file,
                          int64_t start_line) {
  heap_int_t *in = h->internal;
  mt_heap_function_t f;
  uint64_t hv;
  size_t j;

  /* Compared whole (memcmp) below: its padding must be zero too. */
  memset(&f, 0, sizeof f);
  f.name = mt_heap_string(h, name);
  f.system_name = mt_heap_string(h, system_name);
  f.filename = mt_heap_string(h, file);
  f.start_line = start_line;
  if (in->oom || index_reserve(&in->functions, function_hash, h) != 0)
    goto oom;
  hv = function_key(&f);
  for (j = hv & (in->functions.cap - 1); in->functions.slot[j] != 0;
       j = (j + 1) & (in->functions.cap - 1))
    if (memcmp(&h->functions[in->functions.slot[j] - 1], &f, sizeof f) == 0)
      return in->functions.slot[j] - 1;
  if (grow((void **)&h->functions, &in->cap_functions, h->nfunctions + 1,
           sizeof *h->functions) != 0)
    goto oom;
  h->functions[h->nfunctions] = f;
  in->functions.slot[j] = (uint32_t)++h->nfunctions;
  in->functions.used++;
  return (uint32_t)(h->nfunctions - 1);
oom:
  in->oom = 1;
  return 0;
}

/* ---- locations --------------------------------------------------------- */

static uint64_t location_hash(void *ctx, uint32_t i) {
  mt_heap_t *h = ctx;
  return hash_bytes(HASH_SEED, &h->locations[i].address,
                    sizeof h->locations[i].address);
}

/* The mapping holding addr (index + 1; 0: none), by binary search of the
 * mappings sorted by start: a profile may hold 65,536 mappings and a
 * million locations. Of overlapping mappings (a stranger's) the one that
 * starts last before addr is taken. */
static uint32_t mapping_of(const mt_heap_t *h, uint64_t addr) {
  const heap_int_t *in = h->internal;
  size_t lo = 0, hi = h->nmappings;

  /* The first mapping starting after addr is at lo. */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (h->mappings[in->by_start[mid]].start <= addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0)
    return 0;
  lo = in->by_start[lo - 1];
  return addr < h->mappings[lo].limit ? (uint32_t)(lo + 1) : 0;
}

static int by_start(const void *a, const void *b, void *arg) {
  const mt_heap_mapping_t *m = arg;
  uint64_t x = m[*(const uint32_t *)a].start;
  uint64_t y = m[*(const uint32_t *)b].start;
  if (x != y)
    return x < y ? -1 : 1;
  return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

/* The location of return address ra, added if new. Returns 0 with its
 * index in *out, MS_ENOMEM, or MS_ENOSPC past MT_HEAP_MAX_LOCATIONS. */
static int location_of(mt_heap_t *h, uint64_t ra, uint32_t *out) {
  heap_int_t *in = h->internal;
  /* A return address of 0 cannot come from a call; kept as 0. */
  uint64_t addr = ra != 0 ? ra - 1 : 0;
  uint64_t hv;
  size_t j;
  mt_heap_location_t *l;

  if (index_reserve(&in->locations, location_hash, h) != 0)
    return MS_ENOMEM;
  hv = hash_bytes(HASH_SEED, &addr, sizeof addr);
  for (j = hv & (in->locations.cap - 1); in->locations.slot[j] != 0;
       j = (j + 1) & (in->locations.cap - 1)) {
    if (h->locations[in->locations.slot[j] - 1].address == addr) {
      *out = in->locations.slot[j] - 1;
      return 0;
    }
  }
  if (h->nlocations >= MT_HEAP_MAX_LOCATIONS) {
    in->too_large = 1;
    return MS_ENOSPC;
  }
  if (grow((void **)&h->locations, &in->cap_locations, h->nlocations + 1,
           sizeof *h->locations) != 0)
    return MS_ENOMEM;
  l = &h->locations[h->nlocations];
  memset(l, 0, sizeof *l);
  l->address = addr;
  l->mapping = mapping_of(h, addr);
  in->locations.slot[j] = (uint32_t)++h->nlocations;
  in->locations.used++;
  *out = (uint32_t)(h->nlocations - 1);
  return 0;
}

/* ---- values ------------------------------------------------------------ */

/* A double as an int64, truncated, saturated at the range's ends (a
 * hostile count scaled can exceed it; the cast would be undefined). */
static int64_t to_i64(double v) {
  if (!(v == v))
    return 0;
  if (v >= 9223372036854775807.0)
    return INT64_MAX;
  if (v <= -9223372036854775808.0)
    return INT64_MIN;
  return (int64_t)v;
}

/* A counter from the wire as a signed figure: saturated, not wrapped. */
static int64_t sat(uint64_t v) {
  return v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
}

void mt_heap_scale(int64_t count, int64_t bytes, uint64_t rate,
                   int64_t *out_count, int64_t *out_bytes) {
  double avg, scale;

  if (count == 0 || bytes == 0) {
    *out_count = 0;
    *out_bytes = 0;
    return;
  }
  /* Without libm (mt_heap_build fails first then), left as sampled. */
  if (rate <= 1 || mt_libs_m() != 0) {
    *out_count = count;
    *out_bytes = bytes;
    return;
  }
  /* As Go computes it, in float64, truncated toward zero by int64(). */
  avg = (double)bytes / (double)count;
  scale = 1 / (1 - mt_m.exp(-avg / (double)rate));
  *out_count = to_i64((double)count * scale);
  *out_bytes = to_i64((double)bytes * scale);
}

static void record_values(const ms__profile_record_t *r, uint64_t rate,
                          int64_t v[MT_HEAP_NVALUES]) {
  int64_t ao = sat(r->alloc_objects), ab = sat(r->alloc_bytes);
  int64_t io = sat(r->alloc_objects - r->free_objects);
  int64_t ib = sat(r->alloc_bytes - r->free_bytes);

  /* A record whose frees exceed its allocations is torn or hostile: in
   * use cannot be negative. */
  if (r->free_objects > r->alloc_objects || r->free_bytes > r->alloc_bytes)
    io = ib = 0;
  mt_heap_scale(ao, ab, rate, &v[MT_HEAP_ALLOC_OBJECTS],
                &v[MT_HEAP_ALLOC_SPACE]);
  mt_heap_scale(io, ib, rate, &v[MT_HEAP_INUSE_OBJECTS],
                &v[MT_HEAP_INUSE_SPACE]);
}

static int same_bucket(const ms__profile_record_t *a,
                       const ms__profile_record_t *b) {
  return a->size == b->size && a->depth == b->depth &&
         memcmp(a->stack, b->stack, a->depth * sizeof *a->stack) == 0;
}

static uint64_t bucket_hash(const ms__profile_record_t *r) {
  uint64_t hv = hash_bytes(HASH_SEED, &r->size, sizeof r->size);
  return hash_bytes(hv, r->stack, r->depth * sizeof *r->stack);
}

static int check_record(const ms__profile_record_t *r) {
  return r->depth <= MS__PROFILE_MAX_DEPTH &&
         (r->depth == 0 || r->stack != NULL);
}

/* Checks p's records and bounds: 0, MS_EINVAL (a record with no stack, a
 * depth or a rate past the limit) or MS_ENOSPC (more records, stack words
 * or mappings than a profile holds: wire/profile.h's bounds, which the
 * decoder applies too, kept here for a profile made some other way). */
static int check_profile(const ms__profile_t *p) {
  uint64_t words = 0;
  uint32_t i;

  if ((p->nrecords > 0 && p->records == NULL) ||
      (p->nmappings > 0 && p->mappings == NULL) ||
      p->rate > MS__PROFILE_MAX_RATE)
    return MS_EINVAL;
  for (i = 0; i < p->nrecords; i++) {
    if (!check_record(&p->records[i]))
      return MS_EINVAL;
    words += p->records[i].depth;
  }
  if (p->nrecords > MS__PROFILE_MAX_RECORDS || words > MS__PROFILE_MAX_FRAMES ||
      p->nmappings > MS__PROFILE_MAX_MAPPINGS)
    return MS_ENOSPC;
  return 0;
}

/* Keeps every figure within INT64_MAX / n, n the number of samples, so
 * that any sum of them (a total, a node's cum in pprof, which adds in
 * int64 and would wrap) stays a figure: no real profile comes near (4,096
 * samples leave 2 PiB each), a stranger's impossible counts do. */
static void cap_values(mt_heap_t *h) {
  int64_t cap = INT64_MAX / (int64_t)(h->nsamples > 0 ? h->nsamples : 1);
  size_t i;
  int k;

  for (i = 0; i < h->nsamples; i++)
    for (k = 0; k < MT_HEAP_NVALUES; k++) {
      int64_t *v = &h->samples[i].value[k];
      if (*v > cap || *v < -cap) {
        *v = *v > 0 ? cap : -cap;
        h->capped = 1;
      }
    }
}

/* Adds record r with values v as a sample. Returns 0, or location_of's
 * code. */
static int add_sample(mt_heap_t *h, const ms__profile_record_t *r,
                      const int64_t v[MT_HEAP_NVALUES]) {
  mt_heap_sample_t *s = &h->samples[h->nsamples];
  uint32_t i;

  /* A delta leaves out what did not change, as pprof's Merge drops a
   * sample whose values are all zero. */
  if (h->delta && v[0] == 0 && v[1] == 0 && v[2] == 0 && v[3] == 0)
    return 0;
  memset(s, 0, sizeof *s);
  memcpy(s->value, v, sizeof s->value);
  s->size = sat(r->size);
  s->truncated = r->truncated != 0;
  if (r->depth > 0) {
    s->locations = malloc(r->depth * sizeof *s->locations);
    if (s->locations == NULL)
      return MS_ENOMEM;
  }
  h->nsamples++;
  for (i = 0; i < r->depth; i++) {
    int rc = location_of(h, r->stack[i], &s->locations[i]);
    if (rc != 0)
      return rc;
    s->nlocations++;
  }
  return 0;
}

int mt_heap_since_text(const mt_heap_t *h, char *buf, size_t len) {
  if (len > 0)
    buf[0] = '\0';
  if (h->since_nanos == 0 || len == 0)
    return 0;
  /* The target's figure, in UTC: any u64 of nanoseconds is a date before
   * 2555, which gmtime_r places; in seconds should it not. */
  time_t secs = (time_t)(h->since_nanos / 1000000000u);
  struct tm tm;
  char at[40];
  if (gmtime_r(&secs, &tm) == NULL ||
      strftime(at, sizeof at, "%Y-%m-%d %H:%M:%S UTC", &tm) == 0)
    snprintf(at, sizeof at, "%llu s after the epoch", (unsigned long long)secs);
  snprintf(buf, len,
           "samples since memtop attach --track at %s; blocks allocated "
           "before are not in the profile",
           at);
  return 1;
}

int mt_heap_build(const ms__profile_t *p, const ms__profile_t *base,
                  mt_heap_t *h) {
  heap_int_t *in;
  uint32_t *bix = NULL, *matched = NULL;
  size_t bcap = 0, i, j;
  int64_t v[MT_HEAP_NVALUES], bv[MT_HEAP_NVALUES];
  int k, rc = MS_ENOMEM;

  memset(h, 0, sizeof *h);
  if (p == NULL)
    return MS_EINVAL;
  if ((rc = check_profile(p)) != 0 ||
      (base != NULL && (rc = check_profile(base)) != 0))
    return rc;
  /* libm's exp unsamples the figures (mt_heap_scale). */
  if ((rc = mt_libs_m()) != 0)
    return rc;
  rc = MS_ENOMEM;

  in = calloc(1, sizeof *in);
  h->strings = calloc(1, sizeof *h->strings);
  if (in == NULL || h->strings == NULL)
    goto out;
  h->internal = in;
  in->cap_strings = 1;
  h->strings[0] = strdup("");
  if (h->strings[0] == NULL)
    goto out;
  h->nstrings = 1;

  h->pid = p->pid;
  h->time_nanos = p->time_unix_ns;
  h->rate = p->rate;
  h->buckets_dropped = p->buckets_dropped;
  h->frees_lost = p->frees_lost;
  h->since_nanos = p->since_unix_ns;
  if (base != NULL) {
    h->delta = 1;
    h->duration_nanos = p->time_unix_ns > base->time_unix_ns
                            ? p->time_unix_ns - base->time_unix_ns
                            : 0;
  }

  if (p->nmappings > 0) {
    h->mappings = calloc(p->nmappings, sizeof *h->mappings);
    if (h->mappings == NULL)
      goto out;
  }
  for (i = 0; i < p->nmappings; i++) {
    const ms__profile_mapping_t *m = &p->mappings[i];
    mt_heap_mapping_t *hm = &h->mappings[h->nmappings];
    char hex[2 * 64 + 1];

    if (m->limit <= m->start)
      continue; /* an empty or inverted range maps nothing */
    hm->start = m->start;
    hm->limit = m->limit;
    hm->offset = m->offset;
    hm->filename = mt_heap_string(h, m->path);
    if (m->build_id != NULL && m->build_id_len > 0 && m->build_id_len <= 64) {
      for (j = 0; j < m->build_id_len; j++)
        snprintf(hex + 2 * j, 3, "%02x", m->build_id[j]);
      hm->build_id = mt_heap_string(h, hex);
    }
    h->nmappings++;
  }
  if (h->nmappings > 0) {
    in->by_start = malloc(h->nmappings * sizeof *in->by_start);
    if (in->by_start == NULL)
      goto out;
    for (i = 0; i < h->nmappings; i++)
      in->by_start[i] = (uint32_t)i;
    qsort_r(in->by_start, h->nmappings, sizeof *in->by_start, by_start,
            h->mappings);
  }

  /* The earlier profile's buckets, indexed, for a delta. */
  if (base != NULL && base->nrecords > 0) {
    for (bcap = 64; bcap < 2 * (size_t)base->nrecords;)
      bcap *= 2;
    bix = calloc(bcap, sizeof *bix);
    matched = calloc(base->nrecords, sizeof *matched);
    if (bix == NULL || matched == NULL)
      goto out;
    for (i = 0; i < base->nrecords; i++) {
      for (j = bucket_hash(&base->records[i]) & (bcap - 1); bix[j] != 0;)
        j = (j + 1) & (bcap - 1);
      bix[j] = (uint32_t)(i + 1);
    }
  }

  h->samples = calloc((size_t)p->nrecords +
                          (base != NULL ? (size_t)base->nrecords : 0) + 1,
                      sizeof *h->samples);
  if (h->samples == NULL)
    goto out;
  for (i = 0; i < p->nrecords; i++) {
    const ms__profile_record_t *r = &p->records[i];

    record_values(r, p->rate, v);
    if (bix != NULL) {
      for (j = bucket_hash(r) & (bcap - 1); bix[j] != 0;
           j = (j + 1) & (bcap - 1)) {
        const ms__profile_record_t *b = &base->records[bix[j] - 1];
        if (!matched[bix[j] - 1] && same_bucket(b, r)) {
          matched[bix[j] - 1] = 1;
          record_values(b, base->rate, bv);
          /* Both in [0, INT64_MAX]: the difference fits. */
          for (k = 0; k < MT_HEAP_NVALUES; k++)
            v[k] -= bv[k];
          break;
        }
      }
    }
    if (add_sample(h, r, v) != 0)
      goto out;
  }
  /* A bucket only the earlier profile has (the sampler dropped it since)
   * counts negatively, as pprof's merge of the earlier profile scaled by
   * -1 would count it. */
  for (i = 0; base != NULL && i < base->nrecords; i++) {
    if (matched[i])
      continue;
    record_values(&base->records[i], base->rate, bv);
    for (k = 0; k < MT_HEAP_NVALUES; k++)
      v[k] = -bv[k];
    if (add_sample(h, &base->records[i], v) != 0)
      goto out;
  }
  cap_values(h);
  rc = in->oom ? MS_ENOMEM : 0;
out:
  if (rc != 0 && in != NULL && in->too_large)
    rc = MS_ENOSPC;
  free(bix);
  free(matched);
  if (rc != 0)
    mt_heap_free(h);
  return rc;
}

void mt_heap_free(mt_heap_t *h) {
  heap_int_t *in;
  size_t i;

  if (h == NULL)
    return;
  in = h->internal;
  for (i = 0; i < h->nsamples; i++)
    free(h->samples[i].locations);
  for (i = 0; i < h->nlocations; i++)
    free(h->locations[i].lines);
  for (i = 0; i < h->nstrings; i++)
    free(h->strings[i]);
  free(h->samples);
  free(h->locations);
  free(h->functions);
  free(h->mappings);
  free(h->strings);
  if (in != NULL) {
    free(in->strings.slot);
    free(in->functions.slot);
    free(in->locations.slot);
    free(in->by_start);
    free(in);
  }
  memset(h, 0, sizeof *h);
}

int mt_heap_oom(const mt_heap_t *h) {
  const heap_int_t *in = h->internal;
  return in == NULL || in->oom;
}

const char *mt_heap_strerror(int rc) {
  if (rc == MS_ENOSPC)
    return "profile too large (more records, stack frames, mappings or "
           "distinct addresses than memtop reads): lower the target's "
           "MEMSTATS_PROFILE_BUCKETS or MEMSTATS_PROFILE_DEPTH";
  if (rc == MS_ENOSYS && mt_libs_error() != NULL)
    return mt_libs_error();
  return ms_strerror(rc);
}
