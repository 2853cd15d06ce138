/*
 * pausehist.c - the pause histogram's maths (memstats.h): the bucket of a
 * duration, a bucket's edges, the total and a quantile. Laid out as Go
 * 1.20's timeHistogram. Pure: the library records into the histogram
 * (core/pause.c), memtop reads quantiles from the one a snapshot carries.
 */
#include <stdint.h>

#include "memstats.h"

MS_EXTERN int ms_pause_hist_bucket(int64_t ns) {
  if (ns < 0)
    return 0;
  unsigned bit, bucket;
  unsigned len = ns ? 64u - (unsigned)__builtin_clzll((uint64_t)ns) : 0;
  if (len < MS_PAUSE_HIST_MIN_BITS) {
    bit = MS_PAUSE_HIST_MIN_BITS;
    bucket = 0;
  } else {
    bit = len;
    bucket = len - MS_PAUSE_HIST_MIN_BITS + 1;
  }
  if (bucket >= MS_PAUSE_HIST_SUPER)
    return MS_PAUSE_HIST_BUCKETS - 1;
  unsigned sub =
      (unsigned)((uint64_t)ns >> (bit - 1 - MS_PAUSE_HIST_SUB_BITS)) %
      MS_PAUSE_HIST_SUB;
  return 1 + (int)(bucket * MS_PAUSE_HIST_SUB + sub);
}

MS_EXTERN int64_t ms_pause_hist_lower(int b) {
  if (b <= 0)
    return INT64_MIN;
  if (b >= MS_PAUSE_HIST_BUCKETS - 1)
    return (int64_t)1 << (MS_PAUSE_HIST_MAX_BITS - 1);
  int k = b - 1, super = k / MS_PAUSE_HIST_SUB, sub = k % MS_PAUSE_HIST_SUB;
  int shift = MS_PAUSE_HIST_MIN_BITS - 1 - MS_PAUSE_HIST_SUB_BITS; /* 6 */
  if (super == 0)
    return (int64_t)sub << shift;
  return ((int64_t)1 << (MS_PAUSE_HIST_MIN_BITS - 2 + super)) +
         ((int64_t)sub << (shift + super - 1));
}

MS_EXTERN int64_t ms_pause_hist_upper(int b) {
  if (b <= 0)
    return 0;
  if (b >= MS_PAUSE_HIST_BUCKETS - 1)
    return INT64_MAX;
  return ms_pause_hist_lower(b + 1);
}

MS_EXTERN uint64_t ms_pause_hist_total(const ms_pause_hist_t *h) {
  uint64_t n = 0;
  if (!h)
    return 0;
  for (int i = 0; i < MS_PAUSE_HIST_BUCKETS; i++)
    n += h->counts[i];
  return n;
}

MS_EXTERN int64_t ms_pause_hist_quantile(const ms_pause_hist_t *h, double q) {
  uint64_t n = ms_pause_hist_total(h);
  if (n == 0)
    return -1;
  if (!(q >= 0))
    q = 0;
  if (q > 1)
    q = 1;
  /* The rank of the q-quantile, 1-based: the smallest value with at least
   * q*n values at or below it. */
  double r = q * (double)n;
  /* A total near 2^64 (a histogram from outside) rounds to 2^64 as a
   * double, which no uint64_t holds: the rank is then the total. */
  uint64_t rank = r >= 0x1p64 ? n : (uint64_t)r;
  if ((double)rank < r)
    rank++;
  if (rank == 0)
    rank = 1;
  uint64_t cum = 0;
  for (int i = 0; i < MS_PAUSE_HIST_BUCKETS; i++) {
    cum += h->counts[i];
    if (cum >= rank) {
      if (i == MS_PAUSE_HIST_BUCKETS - 1)
        return ms_pause_hist_lower(i); /* overflow: clamp to 2^47 */
      return ms_pause_hist_upper(i);
    }
  }
  return ms_pause_hist_lower(MS_PAUSE_HIST_BUCKETS - 1);
}
