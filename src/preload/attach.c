/*
 * attach.c - the preload loaded into a running program by `memtop attach`
 * (src/attach on memtop's side): what its constructor leaves undone, and
 * the two entry points memtop calls in the program.
 *
 * memtop loads the library with dlopen(path, RTLD_NOW | RTLD_LOCAL), run
 * on one of the program's threads, stopped with ptrace. Loaded so, its
 * malloc is not the one the program calls: every call site is bound to
 * the allocator of the program's start already, and a RTLD_LOCAL object
 * never enters the global scope. Counting would then show zeros as exact
 * figures, so the constructor does nothing at all (preload.c asks
 * ms__preload_loaded_late() first) and the library waits, inert, until
 * memtop calls ms__attach_start(): the agent serves what can be known
 * without having seen the allocations made so far (the allocator's own
 * figures, the mappings, the kernel's); the tracked fields stay
 * unavailable, and the provider list says why ("tracked(off: attached
 * late)"). With MS__ATTACH_TRACK (memtop attach --track) it also counts
 * from then on: the allocator is found as the program is bound
 * (resolve.c), the heap profiler samples from the attach on (its profile
 * says since when), the modules' GOT entries are pointed at this library
 * (got.c), and the engine counts since the attach, HeapAlloc estimated
 * from the allocator's in-use bytes at the attach (ms__track_since).
 * ms__attach_stop() (memtop detach) writes the GOT entries back, ends the
 * profile, stops the agent and removes its socket; the library stays
 * mapped, inert, and a later attach finds it (dlopen returns the same
 * handle) and calls ms__attach_start again.
 *
 * Started with the program (LD_PRELOAD, memtop run), the library finds its
 * own entry point in the global scope (the program's handle, dlopen(NULL));
 * loaded late with RTLD_LOCAL, it does not.
 *
 * ms__attach_wake() is memtop's call in a process that was started with the
 * preload but serves nothing (issue 21): a fork() child that has not
 * allocated since the fork, whose agent starts at an allocation only
 * (preload.c), such as nginx's master in sigsuspend or an idle worker.
 * memtop calls it through the same ptrace injection, with no dlopen (the
 * library is mapped already): the agent starts as in any preloaded
 * process, with the preload's full counting.
 */
#include <dlfcn.h>
#include <stdint.h>

#include <string.h>

#include "agent/agent.h"
#include "common/env.h"
#include "compose/snapshot.h"
#include "core/engine.h"
#include "memstats.h"
#include "preload/preload.h"

/* 1 once the constructor found the library loaded late. Written by the
 * constructor only (dlopen runs it once, before any call of memtop's);
 * exported so that memtop reads it before it stops the process
 * (src/attach/attach.c): a library an attach loaded gets attach's one
 * call, a preloaded one the wake's. */
MS__PRELOAD_API int ms__attach_late;

int ms__preload_loaded_late(void) {
  /* dlsym(RTLD_DEFAULT) would search this library's own scope, which
   * holds it however it was loaded; the program's handle searches the
   * global scope only. */
  void *prog = dlopen(NULL, RTLD_NOW);
  if (!prog)
    return 0; /* cannot tell: as at start */
  ms__attach_late = dlsym(prog, "ms__attach_start") != (void *)ms__attach_start;
  dlclose(prog);
  return ms__attach_late;
}

/* glibc's struct mallinfo2 (2.33+), as src/providers/glibc.c has it. */
struct ms__pl_mallinfo2 {
  size_t arena, ordblks, smblks, hblks, hblkhd, usmblks, fsmblks, uordblks,
      fordblks, keepcost;
};

/* The allocator's in-use bytes now (glibc: uordblks + hblkhd, what its
 * provider calls HeapAlloc's base), or -1 if it cannot say. */
static int64_t allocator_inuse(void) {
  if (!ms__real.is_glibc)
    return -1;
  struct ms__pl_mallinfo2 (*mi)(void);
  *(void **)&mi = ms__preload_next("mallinfo2");
  if (!mi)
    return -1;
  struct ms__pl_mallinfo2 m = mi();
  return (int64_t)(m.uordblks + m.hblkhd);
}

/* 1 while the GOT entries are ours (between a --track start and the
 * stop). Written by memtop's calls only, one at a time (ptrace); read by
 * the agent's thread (track_base). */
static int g_tracking;

/* The estimate's base, on the agent's thread before its first snapshot
 * (ms__snapshot_defer), with the program running: mallinfo2 takes each
 * arena's lock in turn, and in a program whose threads allocate all the
 * time on every CPU it waited tens of milliseconds for them (hundreds,
 * unraised), with memtop's thread held stopped. The snapshot reads
 * mallinfo2 anyway (the glibc provider). What the program allocated and
 * freed since the rewrite is in the counts and in the allocator's figure
 * both (ms__track_since takes the counts made until then off the base);
 * no snapshot is made before, so none shows the tracked fields without
 * it. A detach first makes it nothing (g_tracking). */
static void track_base(void) {
  if (__atomic_load_n(&g_tracking, __ATOMIC_ACQUIRE))
    ms__track_since(allocator_inuse());
}

/* --track: the allocator found as the program is bound, the GOT entries
 * rewritten (got.c), the estimate's base left to the agent's thread. Any
 * thread may run our entry points from the first rewritten entry on:
 * ms__real is complete before. */
static int track_start(void) {
  int r = ms__preload_resolve_late();
  if (r != 0)
    return r;
  /* The heap profiler as the constructor sets it up at a program's start
   * (the same sampler, at this process's MEMSTATS_PROFILE_RATE), sampling
   * from here on: the entry points run their profiling copies before the
   * first entry is ours. A free of an earlier block finds no sample of
   * its address (the table forgets an earlier attach's), so it leaves the
   * profile as it was. */
  ms__prof_begin_late();
  if (MS__PRELOAD_PROFILER && ms__prof_rate() != 0)
    ms__preload_profile_on();
  r = ms__got_hook();
  if (r < 0) {
    ms__prof_end_late();
    return r;
  }
  __atomic_store_n(&g_tracking, 1, __ATOMIC_RELEASE);
  ms__snapshot_defer(track_base);
  return 0;
}

MS__PRELOAD_API int ms__attach_start(unsigned flags) {
  /* An unknown flag (a newer memtop's) is refused, not half done. */
  if (flags & ~MS__ATTACH_TRACK)
    return MS_ENOSYS;
  if (!ms__attach_late)
    return MS_EEXIST; /* started with the program: it serves already */
  if (!g_tracking)
    ms__track_off("attached late");
  ms__agent_mark_attached();
  int tracked_now = 0;
  if ((flags & MS__ATTACH_TRACK) && !g_tracking) {
    int r = track_start();
    if (r != 0)
      return r;
    tracked_now = 1;
  }
  int r = ms_agent_start();
  /* Serving already, the agent now reads the counts too. */
  return r == MS_EEXIST && tracked_now ? 0 : r;
}

MS__PRELOAD_API int ms__attach_stop(void) {
  if (!ms__attach_late)
    return MS_EINVAL; /* started with the program: not memtop's to stop */
  /* The entries first: no call reaches the library's counters after. */
  if (g_tracking) {
    __atomic_store_n(&g_tracking, 0, __ATOMIC_RELEASE);
    ms__got_restore();
    ms__prof_end_late();
  }
  return ms_agent_stop();
}

MS__PRELOAD_API int ms__attach_wake(unsigned flags) {
  if (flags != 0)
    return MS_ENOSYS; /* a newer memtop's: refused, not half done */
  if (ms__attach_late)
    return MS_EINVAL; /* loaded by memtop attach: ms__attach_start's */
  /* The program's own choice stands (ms_agent_start would do nothing and
   * say 0). */
  const char *agent = ms__env("MEMSTATS_AGENT");
  if (agent && strcmp(agent, "0") == 0)
    return MS_EACCES;
  int r = ms_agent_start();
  /* A fork child that has not allocated since the fork: what its agent's
   * start from an allocation does beside the start is done now (its PID
   * noted, so that its _exit removes the socket). */
  if (r == 0)
    ms__preload_woken();
  return r;
}
