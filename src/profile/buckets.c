/*
 * buckets.c - the heap profile's bucket table, after Go's mprof.go.
 *
 * A bucket counts the sampled objects of one size allocated from one call
 * stack. Its counts go through Go's three stages: events of cycle c
 * (allocations and frees) are added to future[c % 3]; the profile cut
 * (ms__prof_table_cut, at each profile request) ends cycle c, starting
 * c + 1 in the next slot, and folds future[c % 3] into `active`, which is
 * what a profile reports. A profile is therefore the state at its last
 * completed cut, never a table half-way through an update. Go needs the
 * stages because it learns of frees only when it sweeps; here every event
 * and the cut run under the table's lock, so the profile at a cut holds
 * every event before it, and the third slot is the one cleared ahead of
 * its cycle.
 *
 * Frees are matched by address: the table of sampled addresses (open
 * addressing, linear probing, deletion by backward shift, so no
 * tombstones) maps each live sampled block to its bucket. In front of it,
 * a filter of 65,536 saturating byte counts indexed by a hash of the
 * address answers "certainly not sampled" for almost every free without
 * taking the lock.
 *
 * Memory: everything lives in one anonymous mapping, made when the table
 * is first needed (the first sample, or the first profile asked for:
 * sampler.c), never with malloc (this runs inside malloc), with the raw
 * system call: the
 * preload's mmap interposer would list it among the program's own
 * mappings (OtherSys, OffHeapReleased), and it is BuckHashSys alone. The
 * fixed parts (filter, hash heads, address table: written anywhere) are
 * backed page by page as they are first written, each page noted in a
 * bitmap on the mapping's first page (`seen`, written when the table is
 * made) and counted then; a page only read (every free reads the filter)
 * is the kernel's zero page, backed by nothing. The
 * bucket array and the stack words are filled from their start, so only
 * their used prefix is ever touched. BuckHashSys counts exactly those
 * backed pages. A process with a few live samples (a shell, make, a
 * short program: issue 18 item 12) backs a few pages of the 352 KiB of
 * fixed parts at the default size, not all 88: its RSS is that much
 * smaller, and each fork copies that many fewer page table entries and
 * its child's exit frees them (88 written pages cost a fork about 10 us,
 * parent and child, in a process of 30 pages otherwise). When a part is
 * full the sample is dropped and counted (`dropped`, sent as the profile's
 * buckets_dropped): a bounded table, a known loss.
 */
#include <linux/futex.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/sysstat.h"
#include "memstats.h"
#include "profile/profile.h"

#define FILTER_SIZE (1u << MS__PROF_FILTER_BITS)
#define PAGE 4096u

static uint32_t pow2_at_least(uint32_t n) {
  uint32_t p = 1;
  while (p < n && p < (1u << 30))
    p <<= 1;
  return p;
}

static size_t round_page(size_t n) {
  return (n + PAGE - 1) & ~(size_t)(PAGE - 1);
}

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

static uint32_t filter_index(const void *p) {
  return ms__prof_filter_index(p);
}

/* Counts the used prefixes of the bucket array and the stack words that
 * are backed now in BuckHashSys. */
static void account(ms__prof_table_t *t) {
  size_t fixed = (size_t)((uint8_t *)t->buckets - (uint8_t *)t->map);
  size_t used = round_page((size_t)t->nbuckets * sizeof(ms__prof_bucket_t)) +
                round_page((size_t)t->stack_used * 8);
  if (used > t->map_len - fixed)
    used = t->map_len - fixed;
  if (used > t->prefix) {
    ms__sys_add_internal(MS_SYS_BUCKHASH, (int64_t)(used - t->prefix));
    t->touched += used - t->prefix;
    t->prefix = used;
  }
}

/* Whether page `page` of the fixed parts (from the filter on) has been
 * written since the table was made. */
static int page_seen(const ms__prof_table_t *t, size_t page) {
  return (t->seen[page >> 3] & (1u << (page & 7))) != 0;
}

/* Before a write at w, in the fixed parts (the lock held): its page
 * counted in BuckHashSys the first time. */
static void touch(ms__prof_table_t *t, const void *w) {
  size_t page =
      (size_t)((const uint8_t *)w - (const uint8_t *)t->filter) / PAGE;
  if (page >= t->fixed_pages || page_seen(t, page))
    return;
  t->seen[page >> 3] |= (uint8_t)(1u << (page & 7));
  t->touched += PAGE;
  ms__sys_add_internal(MS_SYS_BUCKHASH, PAGE);
}

/* Everything but the lock: a table in static storage has a ready one,
 * and a thread may hold it while the table is made (a fork's handlers, a
 * gate being set: sampler.c). */
static void clear_but_lock(ms__prof_table_t *t) {
  size_t off = offsetof(ms__prof_table_t, cycle);
  memset((char *)t + off, 0, sizeof *t - off);
}

int ms__prof_table_init(ms__prof_table_t *t, uint32_t buckets,
                        uint32_t addr_slots, uint32_t stack_words) {
  clear_but_lock(t);
  if (buckets == 0 || buckets > (1u << 24))
    buckets = MS__PROFILE_DEFAULT_BUCKETS;
  t->cap_buckets = buckets;
  t->nheads = pow2_at_least(buckets * 2);
  t->cap_addr = pow2_at_least(addr_slots < 16 ? 16 : addr_slots);
  t->stack_cap = stack_words;
  /* Laid out: the bitmap of the fixed parts' written pages, filter,
   * heads, addresses (the fixed parts, touched anywhere), then buckets
   * and stacks (filled from their start). */
  size_t fixed = round_page(FILTER_SIZE) + round_page((size_t)t->nheads * 4) +
                 round_page((size_t)t->cap_addr * sizeof(ms__prof_addr_t));
  size_t off_filter = round_page(fixed / PAGE / 8 + 1);
  size_t off_heads = off_filter + round_page(FILTER_SIZE);
  size_t off_addrs = off_heads + round_page((size_t)t->nheads * 4);
  size_t off_buckets =
      off_addrs + round_page((size_t)t->cap_addr * sizeof(ms__prof_addr_t));
  size_t off_stacks =
      off_buckets + round_page((size_t)buckets * sizeof(ms__prof_bucket_t));
  size_t len = off_stacks + round_page((size_t)stack_words * 8);
  void *m = (void *)syscall(SYS_mmap, NULL, len, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) {
    clear_but_lock(t);
    return MS_ENOMEM;
  }
  /* The bitmap is backed now; the fixed parts as they are written
   * (touch). */
  t->fixed_pages = (uint32_t)(fixed / PAGE);
  for (size_t off = 0; off < off_filter; off += PAGE)
    ((volatile uint8_t *)m)[off] = 0;
  t->touched = off_filter;
  ms__sys_add_internal(MS_SYS_BUCKHASH, (int64_t)off_filter);
  t->map = m;
  t->map_len = len;
  t->seen = m;
  t->filter = (uint8_t *)m + off_filter;
  t->heads = (uint32_t *)((uint8_t *)m + off_heads);
  t->addrs = (ms__prof_addr_t *)((uint8_t *)m + off_addrs);
  t->buckets = (ms__prof_bucket_t *)((uint8_t *)m + off_buckets);
  t->stacks = (uint64_t *)((uint8_t *)m + off_stacks);
  account(t);
  return 0;
}

void ms__prof_table_destroy(ms__prof_table_t *t) {
  if (t->map != NULL) {
    syscall(SYS_munmap, t->map, t->map_len);
    ms__sys_add_internal(MS_SYS_BUCKHASH, -(int64_t)t->touched);
  }
  memset(t, 0, sizeof *t);
}

/* The lock's waits (Drepper's "Futexes Are Tricky", mutex 2): a thread
 * that finds it held marks it 2 (held, someone waits) and sleeps until it
 * changes; the holder that gives up a 2 wakes one sleeper, which takes
 * it as 2 again (others may sleep still). */
void ms__prof_table_lock_wait(ms__prof_table_t *t) {
  while (__atomic_exchange_n(&t->lock, 2, __ATOMIC_ACQUIRE) != 0)
    syscall(SYS_futex, &t->lock, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
}

void ms__prof_table_wake(ms__prof_table_t *t) {
  syscall(SYS_futex, &t->lock, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* In a fork's child, where the forking thread held the lock across the
 * fork (sampler.c): a new, unlocked one. */
MS__FORK_TEXT void ms__prof_table_after_fork(ms__prof_table_t *t) {
  /* A plain store: the child has one thread, this one. */
  t->lock = 0;
}

int ms__prof_table_maybe(const ms__prof_table_t *t, const void *p) {
  return __atomic_load_n(&t->filter[filter_index(p)], __ATOMIC_RELAXED) != 0;
}

/* One multiply a frame and one mix at the end: the hash picks a chain
 * and tells most buckets apart before their stacks are compared. */
static uint64_t stack_hash(const uint64_t *stack, uint32_t depth, uint64_t size,
                           int truncated) {
  uint64_t h = size ^ ((uint64_t)depth << 32) ^ ((uint64_t)truncated << 63);
  for (uint32_t i = 0; i < depth; i++)
    h = (h ^ stack[i]) * 0x9e3779b97f4a7c15ull;
  return mix(h);
}

/* Whether two stacks of depth frames are the same: a loop, inline (the
 * stacks are short, and memcmp's call cost more than the loop). */
static int same_stack(const uint64_t *a, const uint64_t *b, uint32_t depth) {
  for (uint32_t i = 0; i < depth; i++)
    if (a[i] != b[i])
      return 0;
  return 1;
}

/* The bucket of (stack, size), made if missing; NULL when full. */
static ms__prof_bucket_t *bucket_for(ms__prof_table_t *t, const uint64_t *stack,
                                     uint32_t depth, int truncated,
                                     uint64_t size) {
  uint64_t h = stack_hash(stack, depth, size, truncated);
  uint32_t *head = &t->heads[h & (t->nheads - 1)];
  for (uint32_t i = *head; i != 0;) {
    ms__prof_bucket_t *b = &t->buckets[i - 1];
    if (b->hash == h && b->size == size && b->depth == depth &&
        b->truncated == (uint32_t)truncated &&
        same_stack(&t->stacks[b->stack_off], stack, depth))
      return b;
    i = b->next;
  }
  if (t->nbuckets >= t->cap_buckets || t->stack_cap - t->stack_used < depth)
    return NULL;
  ms__prof_bucket_t *b = &t->buckets[t->nbuckets];
  memset(b, 0, sizeof *b);
  b->hash = h;
  b->size = size;
  b->depth = depth;
  b->truncated = (uint32_t)truncated;
  b->stack_off = t->stack_used;
  memcpy(&t->stacks[t->stack_used], stack, (size_t)depth * 8);
  t->stack_used += depth;
  b->next = *head;
  touch(t, head);
  *head = ++t->nbuckets;
  account(t);
  return b;
}

static uint32_t addr_slot(const ms__prof_table_t *t, const void *p) {
  return (uint32_t)(mix((uint64_t)(uintptr_t)p) & (t->cap_addr - 1));
}

/* Enters p, sampled in bucket index `bucket`, in the address table (which
 * has room: the callers check), and tells the filter, the live count and
 * the gate. */
static void addr_insert(ms__prof_table_t *t, const void *p, uint64_t bucket) {
  uint32_t i = addr_slot(t, p);
  while (t->addrs[i].p != 0)
    i = (i + 1) & (t->cap_addr - 1);
  touch(t, &t->addrs[i]); /* a slot never straddles two pages */
  t->addrs[i].p = (uint64_t)(uintptr_t)p;
  t->addrs[i].bucket = bucket;
  t->naddr++;
  uint8_t *f = &t->filter[filter_index(p)];
  if (*f != 0xff) {
    touch(t, f);
    __atomic_store_n(f, (uint8_t)(*f + 1), __ATOMIC_RELAXED);
  }
  if (t->live != NULL)
    __atomic_store_n(t->live, t->naddr, __ATOMIC_RELAXED);
  if (t->gate != NULL && t->naddr == 1)
    __atomic_fetch_or(t->gate, t->gate_bit, __ATOMIC_RELEASE);
}

int ms__prof_table_alloc(ms__prof_table_t *t, const uint64_t *stack,
                         uint32_t depth, int truncated, uint64_t size,
                         const void *p) {
  if (p == NULL)
    return MS_EINVAL;
  /* A block still in the table was freed without our seeing it (a free
   * inside the guard, or by an allocator's own entry point): it is
   * counted freed now, at its address's reuse. */
  ms__prof_table_free(t, p);
  /* The address table is kept at most 3/4 full, so probes stay short. */
  if (t->naddr + 1 > t->cap_addr / 4 * 3)
    goto full;
  ms__prof_bucket_t *b = bucket_for(t, stack, depth, truncated, size);
  if (b == NULL)
    goto full;
  ms__prof_cycle_t *c = &b->future[t->slot];
  c->allocs++;
  c->alloc_bytes += size;
  addr_insert(t, p, (uint64_t)(b - t->buckets));
  return 0;
full:
  t->dropped++;
  return MS_ENOSPC;
}

uint64_t ms__prof_table_take(ms__prof_table_t *t, const void *p) {
  if (!ms__prof_table_maybe(t, p))
    return 0;
  uint64_t key = (uint64_t)(uintptr_t)p;
  uint32_t mask = t->cap_addr - 1;
  uint32_t i = addr_slot(t, p);
  while (t->addrs[i].p != key) {
    if (t->addrs[i].p == 0)
      return 0;
    i = (i + 1) & mask;
  }
  uint64_t bucket = t->addrs[i].bucket;
  /* Backward-shift deletion: move up every later entry of the run whose
   * home slot is not between the hole and it. Every slot written here
   * held an entry, and the filter's byte counted one: their pages are
   * backed already. */
  uint32_t hole = i;
  for (uint32_t j = (i + 1) & mask; t->addrs[j].p != 0; j = (j + 1) & mask) {
    uint32_t home = addr_slot(t, (const void *)(uintptr_t)t->addrs[j].p);
    if (((j - home) & mask) >= ((j - hole) & mask)) {
      t->addrs[hole] = t->addrs[j];
      hole = j;
    }
  }
  t->addrs[hole].p = 0;
  t->addrs[hole].bucket = 0;
  t->naddr--;
  uint8_t *f = &t->filter[filter_index(p)];
  if (*f != 0xff)
    __atomic_store_n(f, (uint8_t)(*f - 1), __ATOMIC_RELAXED);
  if (t->live != NULL)
    __atomic_store_n(t->live, t->naddr, __ATOMIC_RELAXED);
  if (t->gate != NULL && t->naddr == 0)
    __atomic_fetch_and(t->gate, ~t->gate_bit, __ATOMIC_RELEASE);
  return bucket + 1;
}

void ms__prof_table_put(ms__prof_table_t *t, const void *p, uint64_t taken) {
  if (p == NULL || taken == 0 || taken > t->nbuckets)
    return;
  /* Samples taken meanwhile may have filled the room it left: then the
   * block is counted freed rather than kept in use for ever. */
  if (t->naddr + 1 > t->cap_addr / 4 * 3) {
    ms__prof_table_count_free(t, taken);
    t->dropped++;
    return;
  }
  addr_insert(t, p, taken - 1);
}

void ms__prof_table_count_free(ms__prof_table_t *t, uint64_t taken) {
  if (taken == 0 || taken > t->nbuckets)
    return;
  ms__prof_bucket_t *b = &t->buckets[taken - 1];
  ms__prof_cycle_t *c = &b->future[t->slot];
  c->frees++;
  c->free_bytes += b->size;
}

int ms__prof_table_free(ms__prof_table_t *t, const void *p) {
  uint64_t taken = ms__prof_table_take(t, p);
  ms__prof_table_count_free(t, taken);
  return taken != 0;
}

void ms__prof_table_pin(ms__prof_table_t *t, uintptr_t lo, size_t len) {
  if (t->map == NULL)
    return;
  /* Its pages counted in BuckHashSys as any other write's (touch). */
  for (uintptr_t a = lo & ~(uintptr_t)15; a < lo + len; a += 16) {
    uint8_t *f = &t->filter[filter_index((const void *)a)];
    touch(t, f);
    __atomic_store_n(f, (uint8_t)0xff, __ATOMIC_RELAXED);
  }
}

void ms__prof_table_forget(ms__prof_table_t *t) {
  if (t->map == NULL)
    return;
  /* The backed pages of the fixed parts only (the others hold zeros and
   * are left unbacked). The filter is read without the lock by every
   * free: byte by byte, with the stores its readers' loads pair with. A
   * saturated byte stays (it is never counted down anyway): the pinned
   * ones among them (ms__prof_table_pin) are never missing, even to a
   * free that reads the filter while this runs. */
  size_t filter_pages = round_page(FILTER_SIZE) / PAGE;
  for (size_t page = 0; page < t->fixed_pages; page++) {
    if (!page_seen(t, page))
      continue;
    uint8_t *m = t->filter + page * PAGE;
    if (page < filter_pages) {
      for (uint32_t i = 0; i < PAGE; i++)
        if (m[i] != 0 && m[i] != 0xff)
          __atomic_store_n(&m[i], (uint8_t)0, __ATOMIC_RELAXED);
    } else {
      memset(m, 0, PAGE);
    }
  }
  t->nbuckets = 0;
  t->stack_used = 0;
  t->naddr = 0;
  t->dropped = 0;
  if (t->live != NULL)
    __atomic_store_n(t->live, 0, __ATOMIC_RELAXED);
  if (t->gate != NULL)
    __atomic_fetch_and(t->gate, ~t->gate_bit, __ATOMIC_RELEASE);
}

void ms__prof_table_cut(ms__prof_table_t *t) {
  unsigned done = t->slot;
  t->cycle++;
  t->slot = (uint32_t)(t->cycle % 3);
  /* The slot after the new cycle's was folded at an earlier cut and is
   * zero already; the one that ended is folded now. */
  for (uint32_t i = 0; i < t->nbuckets; i++) {
    ms__prof_bucket_t *b = &t->buckets[i];
    ms__prof_cycle_t *f = &b->future[done];
    b->active.allocs += f->allocs;
    b->active.frees += f->frees;
    b->active.alloc_bytes += f->alloc_bytes;
    b->active.free_bytes += f->free_bytes;
    memset(f, 0, sizeof *f);
  }
}
