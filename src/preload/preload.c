/*
 * preload.c - what libmemstats-preload.so does when it is loaded and when
 * the program exits.
 *
 * Loading: the next allocator is looked up (if no malloc did it already),
 * and the agent is started unless MEMSTATS_AGENT=0, so that
 * `LD_PRELOAD=libmemstats-preload.so CMD` makes CMD watchable with no
 * change. Children after fork are handled by the engine and the agent;
 * exec'd children inherit LD_PRELOAD and start their own.
 *
 * _exit() and _Exit() are interposed too: a program that ends that way
 * runs no exit handlers, so what the agent does at exit (its socket goes
 * away; the final snapshot `memtop run` asked for is sent) is done here,
 * and then the process ends as glibc's _exit ends it (exit_group). Never
 * in a vfork() child, which shares its parent's memory and may do nothing
 * but exec or _exit: it is told apart by its PID, which is not the one this
 * process had at start or at its last fork() (vfork runs no fork
 * handlers). libc's own calls (exit() ends in its internal _exit) do not
 * come here.
 *
 * Exit: MEMSTATS_EXIT_REPORT=FILE asks for a one-line summary of the final
 * snapshot, appended to FILE when the program exits normally (exit() or
 * return from main; not _exit() or a fatal signal). Each process, forked
 * children and exec'd programs included, appends its own line:
 *
 *   memstats pid=1234 mallocs=N frees=N heap_objects=N heap_alloc=N
 *   total_alloc=N tracked=1
 *
 * (one line). tracked=1 says the object figures are exact (the next
 * allocator has malloc_usable_size). It is written with open/write/close
 * and no stdio, and only when the variable is set: the library never
 * prints unless asked. Used by the tests and the benchmarks to read the
 * figures of programs that cannot call ms_snapshot_read themselves.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "common/env.h"
#include "compose/snapshot.h"
#include "memstats.h"
#include "preload/preload.h"

MS__PRELOAD_API void _exit(int status);
MS__PRELOAD_API void _Exit(int status);

/* This process's PID, set at load, and in a fork() child (not a vfork()
 * one) as its agent starts (ms__preload_forked): 0 until then. A child
 * that ends before, or whose parent ran no agent, has started no agent
 * (unless it called ms_agent_start itself, whose exit() still takes the
 * socket away) and is not the process a final snapshot is meant for (its
 * PID is new), so its _exit() has nothing to do, and neither its fork
 * handler nor its allocations make a system call (syscall()'s page of
 * libc's code is one more fault in a child). */
static pid_t g_pid MS__FORK_DATA;

/* ---- the child of a fork ---------------------------------------------------
 * The child's agent is started outside the fork handlers (agent.h,
 * ms__agent_after_fork): from an allocation of the child's, once it has
 * lived a while. The handler below only stores the state FORKED (or
 * FORKED_PROF), so that every allocation entry point takes its slow path
 * (ms__preload_forked), and the hot path stays what it was: one compare
 * of the state. The slow path counts the child's first FORK_FIRST_LOOK
 * allocations and only then looks at the coarse clock, at each of its
 * allocations until the agent starts: the first look starts the grace,
 * and the first allocation MS__FORK_GRACE_NS or more later starts the
 * agent. Most children of a shell or of make exec or exit within a
 * millisecond and a few dozen allocations: they never read the clock
 * (the vDSO's data page is one more page a child faults in) nor pay for
 * an agent. One that lives on gets its agent at an allocation; one that
 * allocates less than that gets none (memtop can start it:
 * ms_agent_start). */
#define FORK_FIRST_LOOK 64u
/* The child's allocations since the fork, and CLOCK_MONOTONIC_COARSE at
 * its first look at the clock (0: none yet). */
static uint32_t g_fork_allocs MS__FORK_DATA;
static uint64_t g_fork_ns MS__FORK_DATA;

/* The coarse clock (a few ms of resolution, plenty for the grace): a read
 * of the vDSO's page. */
MS__FORK_TEXT static uint64_t coarse_ns(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) != 0)
    return 0;
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

MS__FORK_TEXT static void fork_child(void) {
  /* Async-signal-safe: plain stores. */
  g_pid = 0;
  g_fork_allocs = 0;
  g_fork_ns = 0;
  int st = __atomic_load_n(&ms__real_state, __ATOMIC_RELAXED);
  if (st == MS__REAL_READY)
    __atomic_store_n(&ms__real_state, MS__REAL_FORKED, __ATOMIC_RELEASE);
  else if (st == MS__REAL_PROF)
    __atomic_store_n(&ms__real_state, MS__REAL_FORKED_PROF, __ATOMIC_RELEASE);
  /* malloc and calloc to their slow path too (atomics, no lock). */
  if (st == MS__REAL_READY || st == MS__REAL_PROF)
    ms__malloc_gate_change(MS__MGATE_FORKED, 0);
}

MS__FORK_TEXT int ms__preload_forked(int st) {
  int prof = st == MS__REAL_FORKED_PROF;
  int m = prof ? MS__PL_PROF : MS__PL_PLAIN;
  /* Threads the child made may race here: they count together, and the
   * first clock read wins. */
  if (ms__agent_fork_pending()) {
    if (__atomic_load_n(&g_fork_allocs, __ATOMIC_RELAXED) < FORK_FIRST_LOOK &&
        __atomic_add_fetch(&g_fork_allocs, 1, __ATOMIC_RELAXED) <
            FORK_FIRST_LOOK)
      return m;
    uint64_t now = coarse_ns();
    uint64_t at = __atomic_load_n(&g_fork_ns, __ATOMIC_RELAXED);
    /* This read starts the grace, or another thread's did (a failed
     * exchange leaves that one in at). */
    if (at == 0 &&
        __atomic_compare_exchange_n(&g_fork_ns, &at, now, 0, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED))
      at = now;
    if (now < at || now - at < MS__FORK_GRACE_NS)
      return m;
  }
  /* One thread puts the state back and starts the agent; its own
   * allocations (the thread's stack, TLS) run the ordinary copies. */
  int expect = st;
  if (__atomic_compare_exchange_n(&ms__real_state, &expect,
                                  prof ? MS__REAL_PROF : MS__REAL_READY, 0,
                                  __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
    ms__malloc_gate_change(0, MS__MGATE_FORKED);
    if (ms__agent_fork_pending()) {
      __atomic_store_n(&g_pid, (pid_t)syscall(SYS_getpid), __ATOMIC_RELAXED);
      ms__agent_after_fork();
    }
  }
  return m;
}

MS__FORK_TEXT static _Noreturn void end_process(int status) {
  if (g_pid != 0 && (pid_t)syscall(SYS_getpid) == g_pid)
    ms__agent_quick_exit();
  for (;;)
    syscall(SYS_exit_group, status);
}

MS__FORK_TEXT void _exit(int status) {
  end_process(status);
}

MS__FORK_TEXT void _Exit(int status) {
  end_process(status);
}

#define REPORT_PATH_MAX 4096

static char report_path[REPORT_PATH_MAX];
/* Whether report_path is set: tested at every exit, on the fork section's
 * page, which a forked child has touched already (report_path's page, a
 * read of which faulted in each child, is read only when asked). */
static int g_report MS__FORK_DATA;

/* The snapshot is large (the pause ring, the size classes): static, not on
 * the stack of whichever thread runs the destructors. */
static ms_snapshot_t report_snap;

/* ---- a tiny formatter: no stdio in the target ---------------------------*/

typedef struct line_s {
  char buf[512];
  size_t len;
} line_t;

static void put_str(line_t *l, const char *s) {
  size_t n = strlen(s);
  if (n > sizeof l->buf - l->len)
    n = sizeof l->buf - l->len;
  memcpy(l->buf + l->len, s, n);
  l->len += n;
}

static void put_u64(line_t *l, uint64_t v) {
  char tmp[21];
  size_t i = sizeof tmp;
  do {
    tmp[--i] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  size_t n = sizeof tmp - i;
  if (n > sizeof l->buf - l->len)
    n = sizeof l->buf - l->len;
  memcpy(l->buf + l->len, tmp + i, n);
  l->len += n;
}

static void put_field(line_t *l, const char *name, uint64_t v) {
  put_str(l, " ");
  put_str(l, name);
  put_str(l, "=");
  put_u64(l, v);
}

MS__FORK_TEXT static void write_exit_report(void) {
  if (!g_report || !report_path[0])
    return;
  /* Only tracked figures are reported: no allocator is sampled (exit() may
   * run in a signal handler that interrupted it), and nothing from inside
   * an update of the counters on this thread (it could not finish). */
  if (ms__engine_busy_here() ||
      ms__snapshot_read_opts(&report_snap, sizeof report_snap,
                             MS__READ_CACHED) != 0)
    return;
  const ms_snapshot_t *s = &report_snap;
  line_t l = {.len = 0};
  put_str(&l, "memstats");
  put_field(&l, "pid", (uint64_t)getpid());
  put_field(&l, "mallocs", s->mallocs);
  put_field(&l, "frees", s->frees);
  put_field(&l, "heap_objects", s->heap_objects);
  put_field(&l, "heap_alloc", s->heap_alloc);
  put_field(&l, "total_alloc", s->total_alloc);
  put_field(&l, "tracked", s->quality[MS_F_HEAP_ALLOC] == MS_Q_EXACT);
  put_str(&l, "\n");
  if (l.buf[l.len - 1] != '\n')
    l.buf[l.len - 1] = '\n';
  int fd = open(report_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) {
    ms__debug("MEMSTATS_EXIT_REPORT: cannot open %s", report_path);
    return;
  }
  /* One write of one short line to an O_APPEND file: lines of processes
   * exiting together do not interleave. */
  ssize_t w = write(fd, l.buf, l.len);
  (void)w;
  close(fd);
}

__attribute__((constructor)) static void preload_init(void) {
  /* Loaded late (memtop attach), the library stays inert until memtop
   * calls ms__attach_start (attach.c). */
  if (ms__preload_loaded_late())
    return;
  g_pid = (pid_t)syscall(SYS_getpid);
  pthread_atfork(NULL, NULL, fork_child);
  ms__preload_resolve();
  ms__preload_cxx_resolve();
  ms__preload_size_init();
  /* The heap profiler: its table and unwinder are set up here, before any
   * sample, never from inside malloc. */
  ms__prof_init();
  /* With a rate, the entry points switch to their profiling copies (with
   * MEMSTATS_PROFILE_RATE=0 they keep the copies without a profiler). */
  if (MS__PRELOAD_PROFILER && ms__prof_rate() != 0)
    ms__preload_profile_on();
  const char *path = ms__env("MEMSTATS_EXIT_REPORT");
  if (path && path[0]) {
    size_t n = strlen(path);
    if (n < sizeof report_path) {
      memcpy(report_path, path, n + 1);
      g_report = 1;
    } else
      ms__debug("MEMSTATS_EXIT_REPORT: path too long, no report");
  }
  const char *agent = ms__env("MEMSTATS_AGENT");
  if (agent && strcmp(agent, "0") == 0)
    return;
  /* An unsafe socket directory the agent has named already, with its
   * fix: said once (DESIGN.md), not again in other words. */
  int r = ms__agent_start_deferred();
  if (r != 0 && r != MS_EEXIST && r != MS_EUNSAFE)
    ms__debug("preload: the agent did not start: %s", ms_strerror(r));
}

MS__FORK_TEXT __attribute__((destructor)) static void preload_fini(void) {
  write_exit_report();
}

/* memtop woke this process's agent (attach.c, ms__attach_wake): a fork
 * child that had not allocated since the fork is put where its agent's
 * start from an allocation puts it, its PID noted (its _exit removes the
 * socket), its entry points off their slow path. Not from a handler. */
void ms__preload_woken(void) {
  int st = __atomic_load_n(&ms__real_state, __ATOMIC_ACQUIRE);
  int expect = st;
  if ((st == MS__REAL_FORKED || st == MS__REAL_FORKED_PROF) &&
      __atomic_compare_exchange_n(&ms__real_state, &expect,
                                  st == MS__REAL_FORKED_PROF ? MS__REAL_PROF
                                                             : MS__REAL_READY,
                                  0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
    ms__malloc_gate_change(0, MS__MGATE_FORKED);
  __atomic_store_n(&g_pid, (pid_t)syscall(SYS_getpid), __ATOMIC_RELAXED);
}
