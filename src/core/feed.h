/*
 * feed.h - what every part of the engine shares (internal to src/core and
 * its users through engine.h): the feeding flags, which say what the
 * engine has been told about, and the sections the fork handlers' data and
 * code go to. It includes no other part, so each part (engine.c, shard.c,
 * pause.c, sysstat.c) can include it without a circle between them.
 */
#ifndef MS_CORE_FEED_H
#define MS_CORE_FEED_H

/* ---- feeding flags: what the engine has been told about ----
 * The engine reports a field as exact only once something feeds it. */
#define MS__FEED_OBJECTS 0x1u           /* ms_object_alloc/free (tracking) */
#define MS__FEED_HEAP 0x2u              /* ms_heap_move */
#define MS__FEED_GC 0x4u                /* ms_gc_* or a collector provider */
#define MS__FEED_API 0x8u               /* a public accounting call was made */
#define MS__FEED_TRACKED 0x10u          /* the preload tracks every malloc */
#define MS__FEED_SYS(c) (0x100u << (c)) /* ms_sys_add(c, ...) */
unsigned ms__engine_fed(void);
/* Marks flags as fed: one load and a branch once they are, so the
 * accounting API's per-object calls may pay it on every call (inline, so
 * that an entry point outside src/core, ms_object_alloc_at's in
 * src/profile, pays what ms_object_alloc pays). */
extern unsigned ms__fed __attribute__((visibility("hidden")));
static inline void ms__feed(unsigned flags) {
  if (__builtin_expect(
          (__atomic_load_n(&ms__fed, __ATOMIC_RELAXED) & flags) != flags, 0))
    __atomic_fetch_or(&ms__fed, flags, __ATOMIC_RELAXED);
}
/* What the fork handlers write (each layer's prepare/parent/child: the
 * locks they hold across a fork, the child's flags) lives in one section,
 * "ms_fork", which agent.c (first in the library's link order) aligns to
 * a page: a forked child copies one page of the library for them, not one
 * a variable (each page of ours a child writes is a copy-on-write fault,
 * and a parent that forks again faults on it too, which a fork-heavy
 * shell's subshells pay each time). Only small variables go there; a child
 * handler that finds nothing to change writes nothing. */
#define MS__FORK_DATA __attribute__((section("ms_fork")))
/* And the code a fork child runs in the library (the fork handlers, the
 * allocation entry points, the exit path): with the hot text, which the
 * linker puts at the start of .text beside the PLT. A fork does not copy
 * the page table entries of code: each 64 KiB window of it a child runs
 * is a fault (with fault-around) in every child; spread over the library
 * they cost a subshell four or five. */
#define MS__FORK_TEXT __attribute__((section(".text.hot.ms_fork")))
/* The library's DT_FINI (-Wl,-fini in the Makefile): nothing to do, in
 * the fork text. The default, crti's _fini, is alone on the last page of
 * the code, one more fault in every process as it ends, fork children
 * included; the destructors run from .fini_array all the same. */
void ms__fini(void);

#endif
