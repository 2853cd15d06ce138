/*
 * pl_forkpages.c - how many pages of the preload a fork child has copied
 * once the fork handlers have run (issue 18 item 12).
 *
 * A page of the library the child writes is a copy-on-write fault and a
 * page copied; the fork handlers of every layer (engine, snapshot, heap
 * profiler, agent, preload) write their locks and flags, which lie in one
 * page (core/engine.h, MS__FORK_DATA). The parent takes a snapshot first
 * (so that the caches its handlers reset are filled) and allocates, then
 * forks and waits, touching nothing of the library's until the child is
 * done. The child, before anything else, counts the pages of the
 * preload's writable mappings (its file-backed data and the anonymous
 * .bss after it) that are present and mapped by it alone
 * (/proc/self/pagemap bit 56): those it copied. No malloc in the child.
 *
 * Then it allocates and frees a block and counts the pages of the
 * preload's .rodata (the read-only mapping after its code's) it has
 * mapped: a fork does not copy those page table entries, so a page read
 * there is a fault in every child.
 *
 * Output: preload=1, fork.child_pages=N, fork.child_ro_pages=M, and a
 * fork.child_page=0xOFF line for each page counted in N (its offset in
 * the library's mappings, as nm and readelf -S show the .so's addresses).
 * A page the parent writes while the child lives is also counted: the
 * parent takes a copy and the child's is then mapped by it alone.
 *
 * "late": the agent thread's first step comes after the fork, and the
 * child counts once it has come. The program pins itself to the CPU it
 * is on and runs itself again, so that the preload's constructor makes
 * the agent thread there: the thread then usually waits for the main
 * thread to block (here: in the fork's parent, waiting for the child).
 * As root it also runs at real-time priority (SCHED_FIFO 1), so that
 * the thread always waits. fork.agent_late=1 says that its first step (which
 * names it "memstats-agent") had not come at the fork, 0 that it had (nothing
 * tested then).
 */
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pl_snap.h"

static char maps[1 << 16];
/* The offsets of the pages count_child_pages(0) counted (the first
 * MAX_SHOWN), from the library's first mapping. */
#define MAX_SHOWN 8
static uint64_t shown[MAX_SHOWN];
static int n_shown;

static uint64_t hex(const char **p) {
  uint64_t v = 0;
  for (;; (*p)++) {
    char c = **p;
    if (c >= '0' && c <= '9')
      v = v * 16 + (uint64_t)(c - '0');
    else if (c >= 'a' && c <= 'f')
      v = v * 16 + (uint64_t)(c - 'a' + 10);
    else
      return v;
  }
}

/* Pages of [lo, hi) present (and, with excl, mapped by this process
 * alone). */
static int pages(int pm, uint64_t lo, uint64_t hi, int excl, uint64_t base) {
  int n = 0;
  long page = sysconf(_SC_PAGESIZE);
  for (uint64_t a = lo; a < hi; a += (uint64_t)page) {
    uint64_t e;
    if (pread(pm, &e, sizeof e, (off_t)(a / (uint64_t)page * 8)) != sizeof e)
      return -1;
    if ((e >> 63) & 1 && (!excl || (e >> 56) & 1)) {
      n++;
      if (excl && n_shown < MAX_SHOWN)
        shown[n_shown++] = a - base;
    }
  }
  return n;
}

/* ro 0: the pages of the preload's writable mappings (its file-backed
 * data and the anonymous .bss after it) the child has copied; ro 1: the
 * pages of its read-only data (not code) present in the child. */
static int count_child_pages(int ro) {
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  size_t len = 0;
  ssize_t r;
  while (len < sizeof maps - 1 &&
         (r = read(fd, maps + len, sizeof maps - 1 - len)) > 0)
    len += (size_t)r;
  close(fd);
  maps[len] = '\0';
  int pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (pm < 0)
    return -1;
  int total = 0, in_lib = 0, after_code = 0;
  uint64_t lib_end = 0, base = 0;
  for (const char *l = maps; *l;) {
    const char *nl = strchr(l, '\n');
    const char *p = l;
    uint64_t lo = hex(&p);
    p++;
    uint64_t hi = hex(&p);
    int writable = p[2] == 'w', exec = p[3] == 'x';
    int ours = strstr(l, "libmemstats-preload.so") != NULL &&
               (nl == NULL || strstr(l, "libmemstats-preload.so") < nl);
    if (ours && base == 0)
      base = lo;
    /* The .bss past the file: the anonymous mapping right after the
     * library's last one. */
    int bss = !ours && in_lib && lo == lib_end;
    /* .rodata: the read-only mapping right after the code's. */
    int want = ro ? ours && !writable && !exec && after_code
                  : writable && (ours || bss);
    if (want) {
      int n = pages(pm, lo, hi, !ro, base);
      if (n < 0)
        return -1;
      total += n;
    }
    after_code = ours && exec;
    in_lib = ours;
    lib_end = hi;
    if (!nl)
      break;
    l = nl + 1;
  }
  close(pm);
  return total;
}

/* Whether a thread of process pid is named "memstats-agent" (the agent's
 * first step names it): its /proc task directory read with getdents64,
 * which allocates nothing. */
static char dents[1 << 14];
static int agent_named(pid_t pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
  int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0)
    return 0;
  int found = 0;
  long len;
  while (!found &&
         (len = syscall(SYS_getdents64, dfd, dents, sizeof dents)) > 0) {
    for (long off = 0; off < len && !found;) {
      const char *name = dents + off + 19; /* d_ino, d_off, d_reclen, d_type */
      unsigned short reclen;
      memcpy(&reclen, dents + off + 16, sizeof reclen);
      off += reclen;
      if (name[0] < '0' || name[0] > '9')
        continue;
      char comm[32] = {0};
      snprintf(path, sizeof path, "/proc/%d/task/%.16s/comm", (int)pid, name);
      int fd = open(path, O_RDONLY | O_CLOEXEC);
      if (fd < 0)
        continue;
      ssize_t r = read(fd, comm, sizeof comm - 1);
      close(fd);
      found = r > 0 && strncmp(comm, "memstats-agent", 14) == 0;
    }
  }
  close(dfd);
  return found;
}

int main(int argc, char **argv) {
  (void)pl_say_delta;
  int late = argc > 1 && strcmp(argv[1], "late") == 0;
  if (late && argc < 3) {
    /* On one CPU from the constructors on: run again, pinned. */
    cpu_set_t one;
    CPU_ZERO(&one);
    int cpu = sched_getcpu();
    CPU_SET(cpu < 0 ? 0 : cpu, &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0)
      return 1;
    /* Where allowed (root), at real-time priority too: the agent thread
     * the constructor makes inherits it and then runs only once the main
     * thread blocks (in the fork's parent, waiting for the child), which
     * makes "late" certain rather than usual. Otherwise as it comes. */
    struct sched_param sp = {.sched_priority = 1};
    (void)sched_setscheduler(0, SCHED_FIFO, &sp);
    static char late_s[] = "late", pinned_s[] = "pinned";
    char *args[] = {argv[0], late_s, pinned_s, NULL};
    execv("/proc/self/exe", args);
    return 1;
  }
  int have = pl_snap_init();
  prog_say("preload=%d", have);
  ms_snapshot_t s;
  pl_snap(&s);
  void *volatile keep = malloc(100);
  int pfd[2];
  if (pipe(pfd) != 0)
    return 1;
  int agent_late = late && !agent_named(getpid());
  pid_t pid = fork();
  if (pid < 0)
    return 1;
  if (pid == 0) {
    /* Late: the count once the parent's agent thread has taken its first
     * step (10 s at most). */
    for (int i = 0; agent_late && i < 10000 && !agent_named(getppid()); i++) {
      struct timespec ms = {0, 1000000};
      nanosleep(&ms, NULL);
    }
    int n[2 + MAX_SHOWN + 1];
    n[0] = count_child_pages(0);
    n[2] = n_shown;
    for (int i = 0; i < n_shown; i++)
      n[3 + i] = (int)shown[i];
    /* The first allocations of a child: the size-class table they read
     * is with the relocated data, whose page a fork keeps mapped. */
    void *volatile q = malloc(24);
    free(q);
    n[1] = count_child_pages(1);
    ssize_t w = write(pfd[1], n, sizeof n);
    (void)w;
    _exit(0);
  }
  int n[2 + MAX_SHOWN + 1] = {-1, -1, 0};
  ssize_t rd = read(pfd[0], n, sizeof n);
  int st;
  waitpid(pid, &st, 0);
  if (rd != sizeof n || !WIFEXITED(st))
    return 1;
  if (late)
    prog_say("fork.agent_late=%d", agent_late);
  prog_say("fork.child_pages=%d", n[0]);
  for (int i = 0; i < n[2] && i < MAX_SHOWN; i++)
    prog_say("fork.child_page=0x%x", (unsigned)n[3 + i]);
  prog_say("fork.child_ro_pages=%d", n[1]);
  free(keep);
  return 0;
}
