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
 * late)"). ms__attach_stop() (memtop detach) stops the agent and removes
 * its socket; the library stays mapped, inert, and a later attach finds
 * it (dlopen returns the same handle) and calls ms__attach_start again.
 *
 * Started with the program (LD_PRELOAD, memtop run), the library finds its
 * own entry point in the global scope (the program's handle, dlopen(NULL));
 * loaded late with RTLD_LOCAL, it does not.
 */
#include <dlfcn.h>

#include "agent/agent.h"
#include "core/engine.h"
#include "memstats.h"
#include "preload/preload.h"

/* 1 once the constructor found the library loaded late. Written by the
 * constructor only (dlopen runs it once, before any call of memtop's). */
static int g_late;

int ms__preload_loaded_late(void) {
  /* dlsym(RTLD_DEFAULT) would search this library's own scope, which
   * holds it however it was loaded; the program's handle searches the
   * global scope only. */
  void *prog = dlopen(NULL, RTLD_NOW);
  if (!prog)
    return 0; /* cannot tell: as at start */
  g_late = dlsym(prog, "ms__attach_start") != (void *)ms__attach_start;
  dlclose(prog);
  return g_late;
}

MS__PRELOAD_API int ms__attach_start(unsigned flags) {
  /* No flag is known yet (counting from the attach on, --track, would be
   * one): a newer memtop's request is refused, not half done. */
  if (flags != 0)
    return MS_ENOSYS;
  if (!g_late)
    return MS_EEXIST; /* started with the program: it serves already */
  ms__track_off("attached late");
  ms__agent_mark_attached();
  return ms_agent_start();
}

MS__PRELOAD_API int ms__attach_stop(void) {
  if (!g_late)
    return MS_EINVAL; /* started with the program: not memtop's to stop */
  return ms_agent_stop();
}
