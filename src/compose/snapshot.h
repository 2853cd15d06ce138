/*
 * snapshot.h - the composed snapshot's options, cadences and self-checks
 * (internal to the target side: the agent and the preload read snapshots
 * through it; see snapshot.c).
 */
#ifndef MS_COMPOSE_SNAPSHOT_H
#define MS_COMPOSE_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "memstats.h"

/* ---- smaps_rollup on request ---- */

/* Flags of ms__snapshot_read_opts(). */
#define MS__READ_SMAPS 0x1u /* also read /proc/self/smaps_rollup */
/* Only what is safe in a signal handler that may have interrupted the
 * allocator (the _exit path, agent/final_send.c): no provider is looked for or
 * sampled (that takes the allocator's locks, and may allocate); their
 * last samples are merged as they are (shifted by what the tracked heap
 * did since, and then marked estimated). */
#define MS__READ_CACHED 0x2u

/* ms_snapshot_read() with options. With MS__READ_SMAPS the kernel's
 * smaps_rollup figures (LazyFree, AnonHugePages, Swap; Rss only where
 * statm could not be read) are added. smaps_rollup is read at most once per
 * max(1 s, 100 x the cost of its last read); a request inside that gets the
 * figures of the last read, marked estimated (exact only when read for this
 * snapshot). RSS is always statm's, read for every snapshot. Returns what
 * ms_snapshot_read() returns. */
int ms__snapshot_read_opts(ms_snapshot_t *s, size_t size, unsigned flags);

/* Runs fn once, before the next snapshot is read (on whichever thread
 * reads it: the agent's, or the program's own through ms_snapshot_read),
 * never in the _exit path's cached read: work memtop attach's call leaves
 * until after the program's thread is let go (the --track estimate's
 * base). A second hand-over before any read replaces the first. */
void ms__snapshot_defer(void (*fn)(void));

/* The smaps cadence: the shortest interval between two reads after one
 * that cost last_cost_ns, max(floor, 100 x last_cost_ns); the floor is
 * 1 s unless a test changed it with ms__smaps_set_floor(). */
uint64_t ms__smaps_interval_ns(uint64_t last_cost_ns);
void ms__smaps_set_floor(uint64_t ns);
/* How many times smaps_rollup was read in this process (tests, benches). */
uint64_t ms__smaps_reads(void);

/* sizeof(ms_snapshot_t) as 0.1 laid it out (tests: the ABI check). */
size_t ms__snapshot_size_0_1(void);

/* ---- self-checks ----
 * What every snapshot must satisfy (DESIGN.md), checked on every snapshot
 * when MEMSTATS_DEBUG=1 (a failure is said on stderr, never acted on) and
 * by the tests on the snapshots they read:
 *   - Sys = the sum of the *Sys fields, HeapSys = HeapIdle + HeapInuse,
 *     HeapReleased <= HeapIdle (where the fields are known);
 *   - Ready (Sys - HeapReleased, "mapped and backed") exceeds the kernel's
 *     RSS by at most MS__READY_OVER_RSS_MAX(rss): memory a program mapped
 *     and never touched, which no allocator tells apart (an allocation
 *     not yet written to), may make up that much;
 *   - no field is exact that came from an allocator sample cached from an
 *     earlier snapshot, when the tracked heap moved since (stale_exact:
 *     the number of such fields, from ms__providers_stale_exact()).
 * Returns 0 if all hold, else MS_EPROTO with the first failure in why. */
#define MS__READY_OVER_RSS_MAX(rss) (((uint64_t)4 << 20) + (rss) / 8)
int ms__snapshot_check(const ms_snapshot_t *s, unsigned stale_exact, char *why,
                       size_t len);

#endif
