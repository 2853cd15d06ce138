/*
 * abi_old.c - a caller built against libmemstats 0.1's header
 * (tests/data/abi/0.1/memstats.h, the header as 0.1 shipped it), run
 * against this library: ms_snapshot_read() with 0.1's sizeof must fill
 * 0.1's layout, write nothing past it, and keep 0.1's identities; and
 * ms_breakdown() on it must read nothing past it either, and write
 * nothing past 0.1's ms_breakdown_t.
 * Prints "sizeof N" and "breakdown sizeof N" first (the test compares them
 * with the library's idea of 0.1's layouts), then "ok ..."/"FAIL ..." lines
 * and "abi_old: K failed".
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "memstats.h"

static int failed;

static void check(int ok, const char *what) {
  printf("%s %s\n", ok ? "ok  " : "FAIL", what);
  failed += !ok;
}

int main(void) {
  /* The struct, then a canary the library must not touch. */
  static struct {
    ms_snapshot_t s;
    unsigned char canary[4096];
  } buf;
  /* The same for 0.1's breakdown. */
  static struct {
    ms_breakdown_t b;
    unsigned char canary[256];
  } bbuf;
  memset(&buf, 0xa5, sizeof buf);
  memset(&bbuf, 0xa5, sizeof bbuf);
  printf("sizeof %zu\n", sizeof buf.s);
  printf("breakdown sizeof %zu\n", sizeof bbuf.b);

  int r = ms_snapshot_read(&buf.s, sizeof buf.s);
  check(r == 0, "ms_snapshot_read accepts 0.1's size");
  int canary = 1;
  for (size_t i = 0; i < sizeof buf.canary; i++)
    canary &= buf.canary[i] == 0xa5;
  check(canary, "nothing written past 0.1's struct");
  const ms_snapshot_t *s = &buf.s;
  check(s->struct_size == sizeof *s, "struct_size is the caller's");
  check(s->pid == (int32_t)getpid(), "the identity is in place");
  /* Every quality byte a quality, the kernel's figures (always there)
   * exact, every source a provider or none. */
  int valid = 1;
  for (int f = 0; f < MS_F__COUNT; f++)
    valid &= s->quality[f] <= MS_Q_EXACT &&
             (s->source[f] < s->nproviders || s->source[f] == 0xff);
  check(valid && s->quality[MS_F_KERNEL_RSS] == MS_Q_EXACT &&
            s->quality[MS_F_KERNEL_VSZ] == MS_Q_EXACT,
        "quality[] and source[] are where 0.1 has them");
  check(s->quality[MS_F_KERNEL_RSS] == MS_Q_EXACT && s->kernel_rss > 0,
        "the last fields of 0.1 are in place");
  /* 0.1's identity: Sys is the sum of its *Sys fields, wherever all of
   * them are known (a malloc no provider reads, as under a sanitizer, has
   * no heap figures: the identity is then unverifiable, not broken). */
  static const ms_field_t terms[] = {
      MS_F_SYS,        MS_F_HEAP_SYS,      MS_F_STACK_SYS, MS_F_MSPAN_SYS,
      MS_F_MCACHE_SYS, MS_F_BUCK_HASH_SYS, MS_F_GC_SYS,    MS_F_OTHER_SYS};
  int known = 1;
  for (size_t i = 0; i < sizeof terms / sizeof terms[0]; i++)
    known &= s->quality[terms[i]] != MS_Q_UNAVAILABLE;
  uint64_t sum = s->heap_sys + s->stack_sys + s->mspan_sys + s->mcache_sys +
                 s->buck_hash_sys + s->gc_sys + s->other_sys;
  if (known)
    check(s->sys == sum, "Sys = the sum of 0.1's *Sys fields");
  else
    printf("skip Sys = the sum of 0.1's *Sys fields: a term is unknown\n");
  ms_breakdown_t *b = &bbuf.b;
  check(ms_breakdown(s, b) == 0 && !b->sys_mismatch,
        "ms_breakdown of 0.1's layout: no Sys mismatch");
  check(b->ready == (int64_t)(s->sys - s->heap_released),
        "Ready = Sys - HeapReleased, as 0.1 computes it");
  check(b->total == (int64_t)s->sys && b->q_total == s->quality[MS_F_SYS],
        "the breakdown's last 0.1 figures are in place");
  canary = 1;
  for (size_t i = 0; i < sizeof bbuf.canary; i++)
    canary &= bbuf.canary[i] == 0xa5;
  check(canary, "nothing written past 0.1's ms_breakdown_t");
  /* A size that is no version's layout is refused. */
  check(ms_snapshot_read(&buf.s, sizeof buf.s - 8) == MS_EINVAL,
        "a size of no layout is refused");
  printf("abi_old: %d failed\n", failed);
  return failed != 0;
}
