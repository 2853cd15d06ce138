/*
 * attach.c - memtop attach and memtop detach (see attach.h): the checks
 * that refuse with words, then the calls in the process.
 */
#include "attach/attach.h"

#include <dlfcn.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "attach/arch.h"
#include "attach/inject.h"
#include "attach/rsym.h"
#include "common/procfs.h"
#include "common/sanitize.h"
#include "common/sockdir.h"
#include "memstats.h"

#ifndef KCMP_VM
#define KCMP_VM 1
#endif
#ifndef PTRACE_SECCOMP_GET_FILTER
#define PTRACE_SECCOMP_GET_FILTER 0x420c
#endif

/* Stops tried before giving up on a process whose threads are all in the
 * loader or the allocator each time (1 to 20 ms apart: about 1.5 s). */
#define MAX_TRIES 100
/* A call's longest wait (dlopen reads and maps the library). */
#define CALL_MS 10000
/* A wake's search of the calling thread's stack for return addresses into
 * the loader, the allocator or libmemstats (inject.h): the innermost
 * frames only. A wake loads nothing, and the locks its call takes
 * (pthread_create's, the arenas', the library's own) are held by the
 * frames just above a system call or a lock wait. An idle process waits
 * deep in its own frames, whose locals keep stale return addresses from
 * its start: PostgreSQL's background writer, in epoll_wait, had
 * libmemstats' mmap bookkeeping 432 bytes up and the loader's
 * _dl_map_object 1672 bytes up, and attach's 2048 found it busy at
 * every stop. */
#define WAKE_SCAN_BYTES 256

static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t errlen, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
  return code;
}

/* ---- what /proc says of the process ---------------------------------------*/

typedef mt_attach_facts_t proc_info_t;

/* The nth number after `name` in text, or -1 when there is none (a value
 * the text does not hold, not an error). */
static long field(const char *text, const char *name, int nth) {
  const char *p = strstr(text, name);
  if (!p)
    return -1;
  p += strlen(name);
  long v = -1;
  for (int i = 0; i <= nth; i++) {
    char *end;
    v = strtol(p, &end, 10);
    if (end == p)
      return -1;
    p = end;
  }
  return v;
}

/* What /proc/PID/status says of pid into *pi. Returns 0, or MS_ESRCH
 * when it cannot be read (the process is gone, or not ours to read). */
static int read_status(pid_t pid, proc_info_t *pi) {
  char path[64], text[8192];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  if (ms__read_small_file(path, text, sizeof text) <= 0)
    return MS_ESRCH;
  memset(pi, 0, sizeof *pi);
  const char *n = strstr(text, "Name:");
  if (n) {
    n += 5;
    n += strspn(n, " \t");
    size_t len = strcspn(n, "\n");
    char raw[64];
    if (len >= sizeof raw)
      len = sizeof raw - 1;
    memcpy(raw, n, len);
    raw[len] = '\0';
    ms__sanitize(pi->name, sizeof pi->name, raw, len, (size_t)-1);
  }
  for (int i = 0; i < 4; i++) {
    pi->uid[i] = field(text, "\nUid:", i);
    pi->gid[i] = field(text, "\nGid:", i);
  }
  pi->tracer = field(text, "\nTracerPid:", 0);
  const char *st = strstr(text, "\nState:");
  pi->state = st ? st[7 + strspn(st + 7, " \t")] : '?';
  pi->seccomp = field(text, "\nSeccomp:", 0);
  return 0;
}

/* Whether memtop has CAP_SYS_PTRACE (bit 19 of CapEff). */
static int have_cap_ptrace(void) {
  char text[8192];
  if (ms__read_small_file("/proc/self/status", text, sizeof text) <= 0)
    return 0;
  const char *p = strstr(text, "\nCapEff:");
  if (!p)
    return 0;
  unsigned long long caps = strtoull(p + 8, NULL, 16);
  return (caps >> 19) & 1;
}

static int yama_scope(void) {
  char t[16];
  if (ms__read_small_file("/proc/sys/kernel/yama/ptrace_scope", t, sizeof t) <=
      0)
    return 0;
  return atoi(t);
}

/* AT_SECURE from /proc/PID/auxv: 1, 0, or -1 if it cannot be read. */
static int at_secure(pid_t pid) {
  char path[64];
  unsigned long long av[256];
  snprintf(path, sizeof path, "/proc/%d/auxv", (int)pid);
  ssize_t n = ms__read_small_file(path, (char *)av, sizeof av);
  if (n <= 0)
    return -1;
  for (size_t i = 0; i + 1 < (size_t)n / 8; i += 2) {
    if (av[i] == 0)
      break;
    if (av[i] == 23) /* AT_SECURE */
      return av[i + 1] != 0;
  }
  return 0;
}

/* What the refusals are decided on, beyond /proc/PID/status. */
static void gather(pid_t pid, mt_attach_facts_t *f) {
  f->cap_ptrace = have_cap_ptrace();
  f->yama_scope = yama_scope();
  f->me = (long)geteuid();
  f->at_secure = at_secure(pid);
  char path[64];
  struct stat st;
  snprintf(path, sizeof path, "/proc/%d", (int)pid);
  f->proc_owner = stat(path, &st) == 0 ? (long)st.st_uid : -1;
  /* A vfork child: the same memory as its parent (kcmp needs the right
   * to read both; without it, or without kcmp, it is not known). */
  char text[8192];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  long ppid = ms__read_small_file(path, text, sizeof text) > 0
                  ? field(text, "\nPPid:", 0)
                  : -1;
  f->shares_vm = ppid > 0 && syscall(SYS_kcmp, (pid_t)pid, (pid_t)ppid, KCMP_VM,
                                     0UL, 0UL) == 0;
  f->tracer_name[0] = '\0';
  proc_info_t tp;
  if (f->tracer > 0 && read_status((pid_t)f->tracer, &tp) == 0)
    memcpy(f->tracer_name, tp.name, sizeof f->tracer_name);
}

static int stopped_refusal(pid_t pid, const mt_attach_facts_t *pi, char *err,
                           size_t errlen) {
  return fail(err, errlen, MS_EAGAIN,
              "process %d (%s) is stopped (SIGSTOP, Ctrl-Z): its threads "
              "may hold locks a load needs. Continue it first (kill -CONT "
              "%d)",
              (int)pid, pi->name, (int)pid);
}

int mt_attach_call_failure(pid_t pid, int code, const mt_attach_facts_t *now,
                           char *err, size_t errlen) {
  if (code != MS_ETIMEDOUT || now == NULL || now->state != 'T')
    return code;
  int r = stopped_refusal(pid, now, err, errlen);
  size_t n = strlen(err);
  snprintf(err + n, errlen - n,
           ". It was stopped during memtop's call, which did not return and "
           "was abandoned: once it runs, `memtop %d` says whether its agent "
           "started",
           (int)pid);
  return r;
}

int mt_attach_refusal(pid_t pid, const mt_attach_facts_t *pi, char *err,
                      size_t errlen) {
  int cap = pi->cap_ptrace;
  int scope = pi->yama_scope;
  if (scope >= 3)
    return fail(err, errlen, MS_EACCES,
                "Yama's ptrace_scope is 3 (/proc/sys/kernel/yama/"
                "ptrace_scope): no process may be traced, by anyone, until "
                "reboot. Start the program with `memtop run -- CMD` instead");
  if (scope == 2 && !cap)
    return fail(err, errlen, MS_EACCES,
                "Yama's ptrace_scope is 2 (/proc/sys/kernel/yama/"
                "ptrace_scope): only root (CAP_SYS_PTRACE) may attach. Run "
                "memtop attach as root, or set the scope to 1 or 0 "
                "(sysctl kernel.yama.ptrace_scope=1)");
  long me = pi->me;
  if (!cap && (pi->uid[0] != me || pi->uid[1] != me || pi->uid[2] != me))
    return fail(err, errlen, MS_EACCES,
                "process %d (%s) is another user's (uid %ld): attach as "
                "that user, or as root",
                (int)pid, pi->name, pi->uid[0]);
  if (pi->uid[0] != pi->uid[1] || pi->uid[0] != pi->uid[2] ||
      pi->gid[0] != pi->gid[1] || pi->gid[0] != pi->gid[2] ||
      pi->at_secure == 1)
    return fail(err, errlen, MS_EACCES,
                "process %d (%s) runs with privileges its user does not "
                "have (setuid, setgid or file capabilities): memtop loads "
                "no code into it. Link it with -lmemstats to watch it",
                (int)pid, pi->name);
  /* A process that made itself non-dumpable (PR_SET_DUMPABLE 0: ssh-agent,
   * gpg-agent) has its /proc files owned by root. */
  if (pi->uid[0] > 0 && pi->proc_owner == 0 && !(pi->waking && cap))
    return fail(err, errlen, MS_EACCES,
                "process %d (%s) made itself non-dumpable (PR_SET_DUMPABLE "
                "0) to keep debuggers out; memtop respects that. Start it "
                "with `memtop run -- CMD` to watch it",
                (int)pid, pi->name);
  if (pi->state == 'T')
    return stopped_refusal(pid, pi, err, errlen);
  if (pi->shares_vm)
    return fail(err, errlen, MS_EAGAIN,
                "process %d (%s) is a vfork() child (posix_spawn's), sharing "
                "its parent's memory until it runs its program: nothing may "
                "be started in it. Try again once it has",
                (int)pid, pi->name);
  if (pi->tracer > 0)
    return fail(err, errlen, MS_EEXIST,
                "process %d (%s) is being traced by process %ld (%s: a "
                "debugger, strace?); a process has one tracer at a time. "
                "Detach that one and try again",
                (int)pid, pi->name, pi->tracer,
                pi->tracer_name[0] ? pi->tracer_name : "?");
  if (pi->seccomp == 1)
    return fail(err, errlen, MS_EACCES,
                "process %d (%s) runs in seccomp's strict mode: the system "
                "calls of loading a library would kill it",
                (int)pid, pi->name);
  return 0;
}

int mt_attach_maps_refusal(pid_t pid, const mt_attach_facts_t *f, int code,
                           char *err, size_t errlen) {
  if (code != MS_EACCES)
    return fail(err, errlen, code, "cannot read /proc/%d/maps: %s", (int)pid,
                ms_strerror(code));
  return fail(err, errlen, code,
              "the kernel refused memtop the memory map of process %d (%s) "
              "(/proc/%d/maps: permission denied)%s: memtop's user "
              "namespace has no rights over it (one of the two runs in a "
              "container), or a security module (AppArmor, SELinux) keeps it "
              "from being traced. Run memtop attach inside its container, as "
              "its user there, or start the program with `memtop run -- CMD`",
              (int)pid, f->name, (int)pid,
              f->cap_ptrace ? ", though memtop has CAP_SYS_PTRACE" : "");
}

/* With the process stopped: whether a seccomp filter of it may kill a
 * thread or the process for a system call (loading the library and the
 * agent's socket and thread make many). Returns 0 or a refusal. */
static int seccomp_check(const mt_attach_req_t *req, pid_t tid,
                         const proc_info_t *pi, char *err, size_t errlen) {
  if (pi->seccomp != 2)
    return 0;
  static struct sock_filter prog[BPF_MAXINSNS];
  for (long i = 0; i < 64; i++) {
    long n = ptrace(PTRACE_SECCOMP_GET_FILTER, tid, (void *)i, prog);
    if (n < 0) {
      if (errno == ENOENT)
        return 0; /* every filter read: none kills */
      return fail(err, errlen, MS_EACCES,
                  "process %d (%s) runs under a seccomp filter that memtop "
                  "cannot read (%s; root with CAP_SYS_ADMIN can): it could "
                  "kill the process for a system call of the load. Attach "
                  "as root, or start it with `memtop run -- CMD`",
                  (int)req->pid, pi->name, strerror(errno));
    }
    for (long k = 0; k < n && k < BPF_MAXINSNS; k++) {
      if (BPF_CLASS(prog[k].code) != BPF_RET || BPF_RVAL(prog[k].code) != BPF_K)
        continue;
      uint32_t act = prog[k].k & SECCOMP_RET_ACTION_FULL;
      if (act == SECCOMP_RET_KILL_PROCESS || act == SECCOMP_RET_KILL_THREAD)
        return fail(err, errlen, MS_EACCES,
                    "process %d (%s) runs under a seccomp filter that kills "
                    "it for some system calls; loading the library could "
                    "make one. Start it with `memtop run -- CMD` instead",
                    (int)req->pid, pi->name);
    }
  }
  return 0;
}

/* ---- the calls ------------------------------------------------------------*/

typedef struct entry_s {
  uint64_t dlopen, dlsym, dlerror;
} entry_t;

/* What glibc's malloc.c exports (with arena.c, hooks.c and morecore.c,
 * which it includes): its text lies around them, its static functions
 * (_int_malloc, _int_free, sysmalloc, malloc_consolidate, arena_get2 ...)
 * among them. */
static const char *const malloc_family[] = {"malloc",
                                            "free",
                                            "cfree",
                                            "calloc",
                                            "realloc",
                                            "memalign",
                                            "posix_memalign",
                                            "aligned_alloc",
                                            "valloc",
                                            "pvalloc",
                                            "malloc_trim",
                                            "mallinfo",
                                            "mallinfo2",
                                            "malloc_stats",
                                            "malloc_info",
                                            "mallopt",
                                            "malloc_usable_size",
                                            "malloc_get_state",
                                            "malloc_set_state",
                                            "__default_morecore",
                                            "__libc_malloc",
                                            "__libc_free",
                                            "__libc_calloc",
                                            "__libc_realloc",
                                            "__libc_memalign",
                                            "__libc_valloc",
                                            "__libc_pvalloc",
                                            "__libc_mallinfo",
                                            "__libc_mallopt",
                                            "__posix_memalign",
                                            "__malloc_initialize_hook",
                                            NULL};
static const char *const create_family[] = {"pthread_create", NULL};
static const char *const phdr_family[] = {"dl_iterate_phdr", NULL};

/* Finds dlopen and the busy ranges. Returns 0 or a refusal. */
static int find_entries(const mt_attach_req_t *req, const proc_info_t *pi,
                        const mt_rmaps_t *m, entry_t *e, mt_inj_range_t *busy,
                        size_t *nbusy, char *err, size_t errlen) {
  pid_t pid = req->pid;
  memset(e, 0, sizeof *e);
  *nbusy = 0;
  if (!m->ld.found)
    return fail(err, errlen, MS_ENOSYS,
                "process %d (%s) is statically linked: it has no dynamic "
                "loader, so nothing can be loaded into it. Link it with "
                "-lmemstats (or libmemstats.a) to watch it",
                (int)pid, pi->name);
  if (!m->libc.found)
    return fail(err, errlen, MS_ENOSYS,
                "process %d (%s) has no glibc (another C library, musl?): "
                "memtop attach knows glibc's dlopen only. Start it with "
                "`memtop run -- CMD`",
                (int)pid, pi->name);
  mt_rsyms_t libc;
  int r = mt_rsym_load(pid, m->libc.base, &libc);
  if (r != 0)
    return fail(err, errlen, r, "cannot read the symbols of %s in process %d",
                m->libc.path, (int)pid);
  /* glibc 2.34 and later: dlopen is libc's; before, libdl's if the
   * program loaded it, else libc's own private one. */
  e->dlopen = mt_rsym_find(&libc, "dlopen");
  e->dlsym = mt_rsym_find(&libc, "dlsym");
  e->dlerror = mt_rsym_find(&libc, "dlerror");
  if ((!e->dlopen || !e->dlsym) && m->libdl.found) {
    mt_rsyms_t dl;
    if (mt_rsym_load(pid, m->libdl.base, &dl) == 0) {
      e->dlopen = mt_rsym_find(&dl, "dlopen");
      e->dlsym = mt_rsym_find(&dl, "dlsym");
      e->dlerror = mt_rsym_find(&dl, "dlerror");
      mt_rsym_free(&dl);
    }
  }
  if (!e->dlopen || !e->dlsym) {
    e->dlopen = mt_rsym_find(&libc, "__libc_dlopen_mode");
    e->dlsym = mt_rsym_find(&libc, "__libc_dlsym");
    e->dlerror = 0;
  }
  /* The calling thread must hold none of the locks the calls take: the
   * allocator's (malloc.c), the thread stacks' cache (pthread_create's
   * file: the agent's thread is made), the loader's write lock that
   * dl_iterate_phdr holds around its callback (an unwinder's, during a C++
   * throw). The loader's own text is added below. */
  static const char *const *const families[] = {malloc_family, create_family,
                                                phdr_family};
  for (size_t f = 0; f < sizeof families / sizeof families[0]; f++) {
    uint64_t lo, hi;
    if (mt_rsym_around(&libc, families[f], &lo, &hi) == 0) {
      busy[*nbusy].lo = lo;
      busy[(*nbusy)++].hi = hi;
    }
  }
  mt_rsym_free(&libc);
  if (!e->dlopen || !e->dlsym)
    return fail(err, errlen, MS_ENOSYS,
                "no dlopen found in process %d (%s)'s C library (%s)", (int)pid,
                pi->name, m->libc.path);
  busy[*nbusy].lo = m->ld.text_lo;
  busy[(*nbusy)++].hi = m->ld.text_hi;
  return 0;
}

/* What ms__attach_start said (code): 0, or a refusal in err. */
static int started(const mt_attach_req_t *req, const char *sym, int code,
                   mt_attach_res_t *res, char *err, size_t errlen) {
  if (code == MS_EEXIST && !req->detach) {
    res->already = 1;
    return 0;
  }
  if (code == MS_EINVAL && req->detach)
    return fail(err, errlen, MS_EINVAL,
                "process %d runs libmemstats from its start (linked, or "
                "memtop run): not memtop attach's to detach",
                (int)req->pid);
  if (code != 0)
    return fail(err, errlen, code, "%s in process %d: %s", sym, (int)req->pid,
                ms_strerror(code));
  return 0;
}

/* The address of sym in the library mapped at base in process pid, from
 * its own dynamic symbols in the process's memory (rsym.h): what dlsym
 * would say, with no call. 0 if it cannot be read or has none. */
static uint64_t lib_entry(pid_t pid, uint64_t base, const char *sym) {
  mt_rsyms_t s;
  if (base == 0 || (base & 4095) != 0 || mt_rsym_load(pid, base, &s) != 0)
    return 0;
  uint64_t a = mt_rsym_find(&s, sym);
  mt_rsym_free(&s);
  return a;
}

/* The entry point of the library dlopen returned handle for: a handle is
 * glibc's struct link_map, whose first member (l_addr, <link.h>) is where
 * the library is mapped. 0 if it cannot be read. */
static uint64_t handle_entry(pid_t pid, uint64_t handle, const char *sym) {
  uint64_t base = 0;
  struct iovec local = {&base, sizeof base},
               remote = {(void *)(uintptr_t)handle, sizeof base};
  if (process_vm_readv(pid, &local, 1, &remote, 1, 0) != (ssize_t)sizeof base)
    return 0;
  return lib_entry(pid, base, sym);
}

/* The calls, with the process stopped: the library's entry point only, fn,
 * when it is mapped already (a second attach, a detach); else dlopen
 * first, and the entry point found in what it loaded (dlsym only if that
 * cannot be read). Each call waits for the thread to be given a CPU. */
static int calls(const mt_attach_req_t *req, mt_inj_t *inj, const entry_t *e,
                 uint64_t fn, mt_attach_res_t *res, char *err, size_t errlen) {
  uint64_t ret = 0;
  int r;
  const char *sym = req->detach ? "ms__attach_stop" : "ms__attach_start";
  if (fn == 0 && !req->detach) {
    uint64_t path, name, handle = 0;
    if ((r = mt_inj_push_str(inj, req->lib, &path)) != 0)
      return fail(err, errlen, r, "cannot set the call up: %s", inj->why);
    if ((r = mt_inj_call(inj, e->dlopen, path, RTLD_NOW | RTLD_LOCAL, &handle,
                         CALL_MS)) != 0)
      return fail(err, errlen, r, "dlopen in process %d failed: %s",
                  (int)req->pid, inj->why);
    if (handle == 0) {
      char why[512] = "";
      uint64_t msg = 0;
      if (e->dlerror &&
          mt_inj_call(inj, e->dlerror, 0, 0, &msg, CALL_MS) == 0 && msg != 0) {
        char raw[512];
        if (mt_inj_read_str(inj, msg, raw, sizeof raw) == 0)
          ms__sanitize(why, sizeof why, raw, strlen(raw), (size_t)-1);
      }
      return fail(err, errlen, MS_ENOENT, "process %d could not load %s: %s",
                  (int)req->pid, req->lib,
                  why[0] ? why : "dlopen returned NULL");
    }
    fn = handle_entry(req->pid, handle, sym);
    if (fn == 0) {
      if ((r = mt_inj_push_str(inj, sym, &name)) != 0)
        return fail(err, errlen, r, "cannot set the call up: %s", inj->why);
      if ((r = mt_inj_call(inj, e->dlsym, handle, name, &fn, CALL_MS)) != 0)
        return fail(err, errlen, r, "dlsym in process %d failed: %s",
                    (int)req->pid, inj->why);
    }
  }
  if (fn == 0)
    return fail(err, errlen, MS_EPROTO,
                "process %d loaded %s, which has no %s: a libmemstats "
                "older than this memtop?",
                (int)req->pid, req->lib, sym);
  if ((r = mt_inj_call(inj, fn, req->flags, 0, &ret, CALL_MS)) != 0)
    return fail(err, errlen, r, "%s in process %d failed: %s", sym,
                (int)req->pid, inj->why);
  return started(req, sym, (int)(int32_t)ret, res, err, errlen);
}

/* ---- waking a library that is there ---------------------------------------*/

typedef struct wake_s {
  uint64_t wake; /* ms__attach_wake; 0: none (an older library) */
  int late;      /* ms__attach_late: 1 loaded by an attach, 0 not, -1 unknown */
} wake_t;

/* The entry points of the libmemstats process pid maps (m->memstats),
 * read from its memory. Returns 0 (w->wake 0: an older library, which has
 * none), or a refusal. */
static int find_wake(const mt_attach_req_t *req, const proc_info_t *pi,
                     const mt_rmaps_t *m, wake_t *w, char *err, size_t errlen) {
  mt_rsyms_t lib;
  memset(w, 0, sizeof *w);
  int r = mt_rsym_load(req->pid, m->memstats.base, &lib);
  if (r != 0)
    return fail(err, errlen, r,
                "cannot read the symbols of %s in process %d (%s): %s",
                m->memstats.path, (int)req->pid, pi->name, ms_strerror(r));
  w->wake = mt_rsym_find(&lib, "ms__attach_wake");
  /* Whether an attach loaded it, read now (process_vm_readv, no stop): a
   * library attach loaded gets attach's one call, not a wake first. */
  w->late = -1;
  uint64_t at = mt_rsym_find(&lib, "ms__attach_late");
  int late = 0;
  struct iovec local = {&late, sizeof late},
               remote = {(void *)(uintptr_t)at, sizeof late};
  if (at != 0 &&
      process_vm_readv(req->pid, &local, 1, &remote, 1, 0) == sizeof late)
    w->late = late != 0;
  mt_rsym_free(&lib);
  return 0;
}

/* The wake, with the process stopped: ms__attach_wake(0). A library that
 * an earlier attach loaded does nothing and answers MS_EINVAL (res->late):
 * its start is attach's (mt_attach_run). */
static int wake_calls(const mt_attach_req_t *req, const proc_info_t *pi,
                      mt_inj_t *inj, const wake_t *w, mt_attach_res_t *res,
                      char *err, size_t errlen) {
  uint64_t ret = 0;
  int r = mt_inj_call(inj, w->wake, 0, 0, &ret, CALL_MS);
  if (r != 0)
    return fail(err, errlen, r, "ms__attach_wake in process %d failed: %s",
                (int)req->pid, inj->why);
  int code = (int)(int32_t)ret;
  if (code == MS_EINVAL) {
    res->late = 1;
    return fail(err, errlen, code,
                "process %d (%s) runs the libmemstats that memtop attach "
                "loaded, detached since: `memtop attach %d` starts it again",
                (int)req->pid, pi->name, (int)req->pid);
  }
  if (code == MS_EEXIST) {
    res->already = 1;
    return 0;
  }
  if (code == MS_EACCES)
    return fail(err, errlen, code,
                "process %d (%s) was started with MEMSTATS_AGENT=0: its "
                "library keeps statistics but opens no socket, as asked",
                (int)req->pid, pi->name);
  /* The usual cause: a worker that switched user (nginx's, as root) and
   * a socket directory memtop shares with it (MEMSTATS_DIR) that is its
   * first user's: an agent serves only in its own user's directory. */
  char dir[4096];
  struct stat st;
  if (code == MS_EUNSAFE && ms__sockdir_path(dir, sizeof dir) == 0 &&
      stat(dir, &st) == 0 && (long)st.st_uid != pi->uid[1])
    return fail(err, errlen, code,
                "process %d (%s) runs as uid %ld but %s is uid %u's: an "
                "agent serves only in its own user's directory; start it "
                "without MEMSTATS_DIR (then /tmp/memtop-%ld, which memtop as "
                "root reads)",
                (int)req->pid, pi->name, pi->uid[1], dir, (unsigned)st.st_uid,
                pi->uid[1]);
  if (code != 0)
    return fail(err, errlen, code,
                "process %d (%s) maps libmemstats, but its agent did not "
                "start: %s%s",
                (int)req->pid, pi->name, ms_strerror(code),
                code == MS_EUNSAFE ? " (MEMSTATS_DEBUG=1 in its environment "
                                     "says why)"
                                   : "");
  res->woke = 1;
  return 0;
}

/* Holds the process (one thread stopped, clear of busy[0..nbusy) down to
 * scan bytes of its stack: inject.h) and makes the calls on it: the wake's
 * (w not NULL) or attach's. */
static int held_calls(const mt_attach_req_t *req, const proc_info_t *pi,
                      const mt_inj_range_t *busy, size_t nbusy, size_t scan,
                      const wake_t *w, const entry_t *e, uint64_t fn,
                      int lib_mapped, mt_attach_res_t *res, char *err,
                      size_t errlen) {
  /* Stopped since its state was read (SIGSTOP, Ctrl-Z): said now, before
   * a call that would wait its whole deadline for the stopped threads. */
  proc_info_t now;
  if (read_status(req->pid, &now) == 0 && now.state == 'T')
    return stopped_refusal(req->pid, &now, err, errlen);
  mt_inj_t inj;
  mt_inj_init(&inj, req->pid, busy, nbusy);
  inj.scan_bytes = scan;
  /* MEMTOP_ATTACH_NOBOOST=1: the calls at the program's own priority. */
  const char *nb = getenv("MEMTOP_ATTACH_NOBOOST");
  inj.no_boost = nb && nb[0] == '1';
  /* A call into a library mapped already may wait for its agent's thread
   * (its start or its end). */
  if (lib_mapped)
    (void)mt_inj_boost_named(&inj, "memstats-agent");
  int r = mt_inj_stop(&inj, req->max_tries > 0 ? req->max_tries : MAX_TRIES);
  if (r != 0)
    mt_inj_resume(&inj); /* nothing is held: this frees and unblocks */
  if (r == MS_EACCES)
    return fail(err, errlen, r,
                "the kernel refused to trace process %d (%s): %s.%s",
                (int)req->pid, pi->name, inj.why,
                yama_scope() == 1 && !have_cap_ptrace()
                    ? " Yama's ptrace_scope is 1: only a parent may trace "
                      "its children. Run memtop attach as root, or set the "
                      "scope to 0 (sysctl kernel.yama.ptrace_scope=0)"
                    : " A container or a security module may forbid "
                      "ptrace here");
  if (r == MS_EAGAIN)
    return fail(err, errlen, r,
                "every thread of process %d (%s) was inside the dynamic "
                "loader or the allocator%s at each of %d stops; try again",
                (int)req->pid, pi->name,
                inj.live_seen ? " (or in SME's streaming mode, or with its "
                                "ZA array live, which the calls would not "
                                "keep)"
                              : "",
                inj.tries);
  if (r != 0)
    return fail(err, errlen, r, "cannot stop process %d: %s", (int)req->pid,
                inj.why[0] ? inj.why : ms_strerror(r));
  r = seccomp_check(req, inj.th[inj.call_th].tid, pi, err, errlen);
  if (r == 0)
    r = w != NULL ? wake_calls(req, pi, &inj, w, res, err, errlen)
                  : calls(req, &inj, e, fn, res, err, errlen);
  int rr = mt_inj_resume(&inj);
  /* A call that did not return in a process stopped meanwhile (its group
   * stop, put back at the detach, holds the threads the call waited for):
   * said as the stop it is. The detached threads take a moment to enter
   * the stop again: /proc is read again for up to 200 ms. */
  if (r == MS_ETIMEDOUT) {
    int gone = 1;
    for (int i = 0; i < 20; i++) {
      if ((gone = read_status(req->pid, &now) != 0) || now.state == 'T')
        break;
      struct timespec ts = {0, 10 * 1000000L};
      nanosleep(&ts, NULL);
    }
    r = mt_attach_call_failure(req->pid, r, gone ? NULL : &now, err, errlen);
  }
  res->stop_ns += inj.stop_ns;
  res->tries += inj.tries;
  res->calls += inj.calls;
  res->boosted |= inj.boosted;
  if (r == 0 && rr != 0)
    return fail(err, errlen, rr, "%s", inj.why);
  return r;
}

/* Whether a thread of pid is the agent's (it names itself
 * "memstats-agent"): 1 when one is, or when the threads cannot be read
 * (a detach then says it stopped the agent, as before); 0 when none is. */
static int agent_thread_runs(pid_t pid) {
  return mt_inj_count_named(pid, "memstats-agent") != 0;
}

int mt_attach_run(const mt_attach_req_t *req, mt_attach_res_t *res, char *err,
                  size_t errlen) {
  memset(res, 0, sizeof *res);
  err[0] = '\0';
#if !defined(MT_ARCH_HOST)
  return fail(err, errlen, MS_ENOSYS,
              "memtop attach is written for x86-64 and aarch64 only; start "
              "the program with `memtop run -- CMD`");
#endif
  if (!req->wake_only && (req->lib == NULL || req->lib[0] != '/'))
    return fail(err, errlen, MS_EINVAL, "the library's path must be absolute");
  proc_info_t pi;
  if (req->pid <= 0 || read_status(req->pid, &pi) != 0)
    return fail(err, errlen, MS_ESRCH, "no process %d", (int)req->pid);
  if (req->pid == getpid())
    return fail(err, errlen, MS_EINVAL, "memtop does not attach to itself");
  gather(req->pid, &pi);
  mt_rmaps_t m;
  pi.waking =
      !req->detach && mt_rsym_maps(req->pid, &m) == 0 && m.memstats.found;
  int r = mt_attach_refusal(req->pid, &pi, err, errlen);
  if (r != 0)
    return r;
  /* A process that has only just started may still be in the dynamic
   * loader, its C library not mapped yet: a moment is given to it. */
  for (int i = 0;; i++) {
    if ((r = mt_rsym_maps(req->pid, &m)) != 0)
      return mt_attach_maps_refusal(req->pid, &pi, r, err, errlen);
    if (m.libc.found || !m.ld.found || i == 20)
      break;
    struct timespec ts = {0, 10 * 1000000L};
    nanosleep(&ts, NULL);
  }
  wake_t w = {0};
  if (!req->detach && m.memstats.found &&
      (r = find_wake(req, &pi, &m, &w, err, errlen)) != 0)
    return r;
  if (req->wake_only && w.wake == 0)
    return fail(
        err, errlen, m.memstats.found ? MS_ENOSYS : MS_ENOENT,
        m.memstats.found ? "process %d (%s) runs a libmemstats too old to be "
                           "woken (%s has no ms__attach_wake)"
                         : "process %d (%s) does not run libmemstats%s",
        (int)req->pid, pi.name, m.memstats.found ? m.memstats.path : "");
  if (req->wake_only && w.late == 1) {
    res->late = 1;
    return fail(err, errlen, MS_EINVAL,
                "process %d (%s) runs the libmemstats that memtop attach "
                "loaded, detached since: `memtop attach %d` starts it again",
                (int)req->pid, pi.name, (int)req->pid);
  }
  entry_t e;
  mt_inj_range_t busy[MT_INJ_MAX_RANGES];
  size_t nbusy;
  if ((r = find_entries(req, &pi, &m, &e, busy, &nbusy, err, errlen)) != 0)
    return r;
  if (w.wake != 0 && w.late != 1) {
    /* The wake's call runs the library's agent start, which takes its
     * lock and allocates through its own entry points: the calling
     * thread must be in none of its code (an allocation half counted, a
     * start of its own). */
    size_t nb = nbusy;
    if (m.memstats.text_hi > m.memstats.text_lo) {
      busy[nb].lo = m.memstats.text_lo;
      busy[nb++].hi = m.memstats.text_hi;
    }
    r = held_calls(req, &pi, busy, nb, WAKE_SCAN_BYTES, &w, NULL, 0, 1, res,
                   err, errlen);
    /* The library an earlier attach loaded answers that it is attach's
     * (nothing done): then attach's own path, its checks and its calls. */
    if (!(r == MS_EINVAL && res->late && !req->wake_only))
      return r;
    err[0] = '\0';
  }
  if (m.memstats.found && strcmp(m.memstats.path, req->lib) != 0)
    return fail(err, errlen, MS_EEXIST,
                "process %d (%s) runs libmemstats already (%s)%s",
                (int)req->pid, pi.name, m.memstats.path,
                req->detach ? ": not memtop attach's to detach"
                            : ": watch it with `memtop PID`");
  /* The process must see the library memtop sees, at the same path (not
   * so across mount namespaces: a container). */
  char there[MT_RSYM_PATH_MAX + 64];
  struct stat a, b;
  snprintf(there, sizeof there, "/proc/%d/root%s", (int)req->pid, req->lib);
  if (stat(req->lib, &a) != 0)
    return fail(err, errlen, MS_ENOENT, "no library %s: %s", req->lib,
                strerror(errno));
  if (stat(there, &b) == 0 && (a.st_dev != b.st_dev || a.st_ino != b.st_ino))
    return fail(err, errlen, MS_ENOENT,
                "process %d sees another file at %s (another mount "
                "namespace: a container?); install memtop inside it",
                (int)req->pid, req->lib);
  /* The library mapped already: its entry point is read now, before any
   * thread is stopped, and the stop makes that one call only. */
  uint64_t fn = 0;
  if (m.memstats.found)
    fn = lib_entry(req->pid, m.memstats.base,
                   req->detach ? "ms__attach_stop" : "ms__attach_start");
  else if (req->detach) {
    res->already = 1;
    return fail(err, errlen, MS_ENOENT,
                "process %d has no libmemstats that memtop attach loaded "
                "(%s): nothing to detach",
                (int)req->pid, req->lib);
  }
  /* A detach of a process that runs no agent thread (detached already)
   * still makes its call, which puts back any GOT entry left, but says
   * that there was no agent to stop. */
  if (req->detach)
    res->already = !agent_thread_runs(req->pid);
  if (m.memstats.found && fn == 0)
    return fail(err, errlen, MS_EPROTO,
                "process %d has %s loaded, which has no %s: a libmemstats "
                "older than this memtop?",
                (int)req->pid, req->lib,
                req->detach ? "ms__attach_stop" : "ms__attach_start");
  return held_calls(req, &pi, busy, nbusy, 0, NULL, &e, fn, m.memstats.found,
                    res, err, errlen);
}

int mt_attach_main(const mt_attach_req_t *req, FILE *out, FILE *errf) {
  char err[1024];
  mt_attach_res_t res;
  int r = mt_attach_run(req, &res, err, sizeof err);
  if (r != 0) {
    fprintf(errf, "memtop: %s\n", err);
    return 1;
  }
  char held[160];
  snprintf(held, sizeof held,
           "one thread stopped %.2f ms for %d call%s%s, the others ran on",
           (double)res.stop_ns / 1e6, res.calls, res.calls == 1 ? "" : "s",
           res.boosted ? " at real-time priority" : "");
  if (req->detach && res.already)
    fprintf(out,
            "memtop: process %d ran no agent (detached already?): nothing "
            "to stop; the library stays loaded, inert (%s)\n",
            (int)req->pid, held);
  else if (req->detach)
    fprintf(out,
            "memtop: detached from process %d: its agent stopped and its "
            "socket is gone; the library stays loaded, inert (%s)\n",
            (int)req->pid, held);
  else if (res.woke)
    fprintf(out,
            "memtop: woke process %d: it had libmemstats preloaded but no "
            "agent (a forked child that has not allocated since the fork), "
            "which now serves with the preload's full counting; `memtop %d` "
            "watches it (%s; %d stop%s)\n",
            (int)req->pid, (int)req->pid, held, res.tries,
            res.tries == 1 ? "" : "s");
  else if (res.already)
    fprintf(out,
            "memtop: process %d serves already; `memtop %d` watches it (%s)\n",
            (int)req->pid, (int)req->pid, held);
  else if (req->flags & MT_ATTACH_TRACK)
    fprintf(out,
            "memtop: attached to process %d with --track: its allocator's "
            "figures, and its mallocs and frees counted from now on "
            "(HeapAlloc estimated: its blocks from before are not known "
            "one by one); `memtop %d` watches it, `memtop detach %d` "
            "restores its GOT entries (%s; %d stop%s)\n",
            (int)req->pid, (int)req->pid, (int)req->pid, held, res.tries,
            res.tries == 1 ? "" : "s");
  else
    fprintf(out,
            "memtop: attached to process %d: it serves its allocator's "
            "figures from now on (what it allocated before is not counted "
            "by block); `memtop %d` watches it, `memtop detach %d` undoes "
            "it (%s; %d stop%s)\n",
            (int)req->pid, (int)req->pid, (int)req->pid, held, res.tries,
            res.tries == 1 ? "" : "s");
  return 0;
}
