/*
 * inject.c - calling functions inside another running process with ptrace
 * (see inject.h). What is the processor's (the registers, the call's
 * frame) is in arch.h: x86-64 and aarch64. Elsewhere every entry point
 * says so (MS_ENOSYS) and memtop attach refuses.
 */
#include "attach/inject.h"

#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "attach/arch.h"
#include "common/procfs.h"
#include "memstats.h"

uint64_t mt_inj_strip(uint64_t w, uint64_t insn_mask) {
  return insn_mask ? w & ~(insn_mask | 0xff00000000000000ull) : w;
}

int mt_inj_frames_busy(const mt_inj_t *inj, const uint64_t *words,
                       size_t nwords, uint64_t sp, uint64_t fp,
                       uint64_t insn_mask) {
  uint64_t end = sp + nwords * 8;
  for (size_t k = 0; k < nwords; k++) {
    if (fp == 0)
      return 0; /* the outermost frame */
    if (fp < sp || (fp & 15) != 0)
      return -1;
    if (fp >= end || end - fp < 16)
      return 0; /* the rest is beyond what was read */
    const uint64_t *rec = &words[(fp - sp) / 8];
    uint64_t lr = mt_inj_strip(rec[1], insn_mask);
    if (lr == 0 || (rec[0] != 0 && rec[0] <= fp))
      return -1;
    for (size_t i = 0; i < inj->nbusy; i++)
      if (lr >= inj->busy[i].lo && lr < inj->busy[i].hi)
        return 1;
    fp = rec[0];
  }
  return -1;
}

#if defined(MT_ARCH_HOST)
#include <sys/user.h>

#define ARCH MT_ARCH_HOST
_Static_assert(sizeof(struct user_regs_struct) == sizeof(MT_ARCH_HOST_REGS) &&
                   sizeof(struct user_regs_struct) <= MT_ARCH_REGS_MAX &&
                   MT_ARCH_REGS_MAX <= sizeof(((mt_inj_t *)0)->regs),
               "arch.h's NT_PRSTATUS is the host's, and inject.h holds it");

/* How much of the top of each thread's stack is searched for return
 * addresses into the loader or the allocator: the frames of a call made
 * from there (a lock wait, an mmap of sysmalloc's) are within it. */
#define STACK_SCAN 2048
/* Below the interrupted code's stack pointer: the red zone (128 bytes),
 * and some room. */
#define STACK_GAP 512
/* The most bytes of strings pushed for the calls. */
#define STR_ROOM 4096
/* The FP state's buffer: XSAVE's area is at most a few KiB (AMX's tiles
 * make it 11 KiB). */
#define FP_MAX 16384
#define MAX_THREADS 65536
/* A thread's stop, waited for this long. */
#define STOP_WAIT_MS 2000

/* The boost (inject.h): SCHED_FIFO at this priority, the lowest, for at
 * most BOOST_MS of one call. */
#define BOOST_PRIO 1
#define BOOST_MS 20
#define SCHED_FLAG_RESET_ON_FORK_ 0x01

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void say(mt_inj_t *inj, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void say(mt_inj_t *inj, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(inj->why, sizeof inj->why, fmt, ap);
  va_end(ap);
}

void mt_inj_init(mt_inj_t *inj, pid_t pid, const mt_inj_range_t *busy,
                 size_t nbusy) {
  memset(inj, 0, sizeof *inj);
  inj->pid = pid;
  if (nbusy > MT_INJ_MAX_RANGES)
    nbusy = MT_INJ_MAX_RANGES;
  memcpy(inj->busy, busy, nbusy * sizeof *busy);
  inj->nbusy = nbusy;
}

/* ---- waiting for a thread's stop -------------------------------------------
 * SIGCHLD is blocked on this thread while memtop holds the process, so
 * that a stop can be waited for with a deadline (sigtimedwait) rather than
 * a blocking waitpid. */

/* Waits for tid to change state; *st gets waitpid's status. Returns 0,
 * MS_ETIMEDOUT, or waitpid's -errno (ECHILD: tid is no child of ours any
 * more). */
static int wait_tid(pid_t tid, int *st, int timeout_ms) {
  uint64_t end = now_ns() + (uint64_t)timeout_ms * 1000000ull;
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  for (;;) {
    pid_t r = waitpid(tid, st, __WALL | WNOHANG);
    if (r == tid)
      return 0;
    if (r < 0 && errno != EINTR)
      return -errno;
    uint64_t t = now_ns();
    if (t >= end)
      return MS_ETIMEDOUT;
    /* At most a millisecond at a time: a SIGCHLD another child's change
     * took is not waited for long. */
    uint64_t left = end - t;
    if (left > 1000000)
      left = 1000000;
    struct timespec ts = {0, (long)left};
    (void)sigtimedwait(&chld, NULL, &ts);
  }
}

/* ---- holding the threads ------------------------------------------------*/

static int add_th(mt_inj_t *inj, pid_t tid) {
  if (inj->nth == inj->cap) {
    size_t cap = inj->cap ? inj->cap * 2 : 64;
    if (cap > MAX_THREADS)
      return MS_ENOMEM;
    mt_inj_thread_t *n = realloc(inj->th, cap * sizeof *n);
    if (!n)
      return MS_ENOMEM;
    inj->th = n;
    inj->cap = cap;
  }
  memset(&inj->th[inj->nth], 0, sizeof inj->th[0]);
  inj->th[inj->nth++].tid = tid;
  return 0;
}

/* Keeps a signal that arrived while the thread is held, for the resume. */
static void keep_sig(mt_inj_thread_t *t, int sig) {
  if (t->sig == 0)
    t->sig = sig;
  else if (sig != t->sig && sig >= 1 && sig <= 64)
    t->more |= 1ull << (sig - 1);
}

/* Takes one stop status of a held thread: its interrupt, or a signal it
 * was about to get (kept for the resume; the interrupt's stop follows
 * later and is dropped by the detach). Returns 0 if it is stopped,
 * MS_ESRCH if it is gone. */
static int took_stop(mt_inj_thread_t *t, int st) {
  if (WIFEXITED(st) || WIFSIGNALED(st))
    return MS_ESRCH;
  if (WIFSTOPPED(st)) {
    int sig = WSTOPSIG(st);
    if ((st >> 16) != PTRACE_EVENT_STOP && sig != SIGTRAP)
      keep_sig(t, sig);
    t->stopped = 1;
  }
  return 0;
}

/* ---- the boost
 * -------------------------------------------------------------*/

static int sched_get(pid_t tid, mt_inj_sched_t *a) {
  memset(a, 0, sizeof *a);
  return syscall(SYS_sched_getattr, (int)tid, a, (unsigned)sizeof *a, 0u) == 0
             ? 0
             : -errno;
}

/* Puts back attributes sched_get read: the policy, its priority or nice
 * value, and whether children start afresh; never the utilisation clamps
 * (not asked for, so left as they are). */
static int sched_put(pid_t tid, const mt_inj_sched_t *a) {
  mt_inj_sched_t b = *a;
  b.size = sizeof b;
  b.flags &= SCHED_FLAG_RESET_ON_FORK_;
  return syscall(SYS_sched_setattr, (int)tid, &b, 0u) == 0 ? 0 : -errno;
}

/* Raises tid to the boost's priority if it runs under the fair scheduler
 * (one that runs real-time already is left as it is), its own attributes
 * kept in *saved. Returns 1 if raised. Its nice value stays in the kernel's
 * record meanwhile (a real-time policy does not use it): what a thread
 * that it creates while raised inherits. */
static int boost_tid(pid_t tid, mt_inj_sched_t *saved) {
  if (sched_get(tid, saved) != 0 ||
      (saved->policy != SCHED_OTHER && saved->policy != SCHED_BATCH &&
       saved->policy != SCHED_IDLE))
    return 0;
  mt_inj_sched_t b;
  memset(&b, 0, sizeof b);
  b.size = sizeof b;
  b.policy = SCHED_FIFO;
  b.prio = BOOST_PRIO;
  return syscall(SYS_sched_setattr, (int)tid, &b, 0u) == 0;
}

static void unboost_th(mt_inj_thread_t *t) {
  if (t->boosted && t->tid != 0)
    (void)sched_put(t->tid, &t->sched);
  t->boosted = 0;
}

static size_t list_threads(pid_t pid, pid_t *out, size_t max);
static int thread_dead(pid_t pid, pid_t tid);

/* The ids in /proc/PID/task (at most max), sorted: one directory read,
 * none of each thread's files (a program of thousands of threads is held
 * while this runs). */
static int cmp_tid(const void *a, const void *b) {
  pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
  return (x > y) - (x < y);
}

static size_t task_ids(pid_t pid, pid_t *out, size_t max) {
  char path[64];
  size_t n = 0;
  snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
  DIR *d = opendir(path);
  if (!d)
    return 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL && n < max) {
    char *end;
    long tid = strtol(e->d_name, &end, 10);
    if (e->d_name[0] >= '0' && e->d_name[0] <= '9' && !*end && tid > 0)
      out[n++] = (pid_t)tid;
  }
  closedir(d);
  qsort(out, n, sizeof *out, cmp_tid);
  return n;
}

/* Raises the threads mt_inj_boost_named found, with the calling thread. */
static void boost_helpers(mt_inj_t *inj) {
  for (size_t i = 0; i < inj->nhelper; i++)
    if (!inj->helper_boosted[i])
      inj->helper_boosted[i] = boost_tid(inj->helper[i], &inj->helper_sched[i]);
}

/* The calling thread back to its own attributes, and so is any thread the
 * calls made (the agent's, made raised as its creator was): a thread of
 * the process not there before the calls and at the boost's priority. */
static void unboost_calls(mt_inj_t *inj) {
  mt_inj_thread_t *t = &inj->th[inj->call_th];
  for (size_t i = 0; i < inj->nhelper; i++) {
    if (inj->helper_boosted[i])
      (void)sched_put(inj->helper[i], &inj->helper_sched[i]);
    inj->helper_boosted[i] = 0;
  }
  inj->nhelper = 0;
  if (!t->boosted)
    return;
  unboost_th(t);
  /* What a child of the thread gets from the kernel: its attributes, but
   * where it asked for reset-on-fork, the flag cleared and a negative
   * nice value made 0 (sched_fork). */
  mt_inj_sched_t child = t->sched;
  if (child.flags & SCHED_FLAG_RESET_ON_FORK_) {
    child.flags &= ~(uint64_t)SCHED_FLAG_RESET_ON_FORK_;
    if (child.nice < 0)
      child.nice = 0;
  }
  pid_t *now = malloc(MAX_THREADS * sizeof *now);
  size_t n = now ? task_ids(inj->pid, now, MAX_THREADS) : 0;
  for (size_t i = 0; i < n; i++) {
    int old = bsearch(&now[i], inj->before, inj->nbefore, sizeof now[i],
                      cmp_tid) != NULL;
    mt_inj_sched_t a;
    if (!old && sched_get(now[i], &a) == 0 && a.policy == SCHED_FIFO &&
        a.prio == BOOST_PRIO)
      (void)sched_put(now[i], &child);
  }
  free(now);
}

/* The live threads of pid that name themselves `name` (their comm), at
 * most max of them, into out: how many, or -1 if pid's threads cannot be
 * listed (no memory, or no /proc/PID/task: a live process has one). */
static int named_threads(pid_t pid, const char *name, pid_t *out, size_t max) {
  pid_t *tids = malloc(MAX_THREADS * sizeof *tids);
  if (!tids)
    return -1;
  size_t n = list_threads(pid, tids, MAX_THREADS), found = 0;
  for (size_t i = 0; i < n && found < max; i++) {
    char path[64], comm[32];
    snprintf(path, sizeof path, "/proc/%d/task/%d/comm", (int)pid,
             (int)tids[i]);
    if (ms__read_small_file(path, comm, sizeof comm) <= 0)
      continue;
    comm[strcspn(comm, "\n")] = '\0';
    if (strcmp(comm, name) == 0)
      out[found++] = tids[i];
  }
  free(tids);
  return n == 0 ? -1 : (int)found;
}

int mt_inj_boost_named(mt_inj_t *inj, const char *name) {
  pid_t tids[4];
  int n = named_threads(inj->pid, name, tids, 4 - inj->nhelper);
  for (int i = 0; i < n; i++) {
    inj->helper_boosted[inj->nhelper] = 0;
    inj->helper[inj->nhelper++] = tids[i];
  }
  return n < 0 ? 0 : n;
}

int mt_inj_count_named(pid_t pid, const char *name) {
  pid_t tid;
  return named_threads(pid, name, &tid, 1);
}

/* Seizes and interrupts thread tid and waits for its stop; it is then
 * the one held thread (inj->th[0]). Returns 0, 1 if it is gone, or a
 * negative code (MS_EACCES: ptrace refused, the reason in inj->why). */
static int hold_one(mt_inj_t *inj, pid_t tid) {
  if (ptrace(PTRACE_SEIZE, tid, NULL, NULL) != 0) {
    /* It exited meanwhile: gone, or a zombie (EPERM, as for a thread
     * another tracer has: told apart by its state). */
    int e = errno;
    if (e == ESRCH || (e == EPERM && thread_dead(inj->pid, tid)))
      return 1;
    say(inj, "ptrace(PTRACE_SEIZE, %d): %s", (int)tid, strerror(e));
    return e == EPERM ? MS_EACCES : -e;
  }
  int r = add_th(inj, tid);
  if (r != 0) {
    ptrace(PTRACE_DETACH, tid, NULL, NULL);
    return r;
  }
  mt_inj_thread_t *t = &inj->th[inj->nth - 1];
  (void)ptrace(PTRACE_INTERRUPT, tid, NULL, NULL);
  /* Raised after the interrupt: until its stop it runs the kernel's way
   * to it only, never its own code; and at once, not when the fair
   * scheduler gives it a turn among the process's busy threads. */
  if (inj->self_boosted)
    t->boosted = boost_tid(tid, &t->sched);
  int st;
  if (wait_tid(tid, &st, STOP_WAIT_MS) != 0) {
    if (errno == ECHILD || errno == ESRCH) {
      t->tid = 0;
      return 1;
    }
    say(inj, "thread %d did not stop in %d ms", (int)tid, STOP_WAIT_MS);
    return MS_ETIMEDOUT;
  }
  if (took_stop(t, st) != 0) {
    t->tid = 0;
    return 1;
  }
  return 0;
}

/* Whether thread tid of pid has exited (a zombie main thread, whose
 * process goes on with its other threads, never stops for ptrace). */
static int thread_dead(pid_t pid, pid_t tid) {
  char path[64], text[512];
  snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)pid, (int)tid);
  FILE *f = fopen(path, "re");
  if (!f)
    return 1;
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = '\0';
  const char *close = strrchr(text, ')'); /* after the name, which may hold
                                            anything */
  return !close || close[1] != ' ' || close[2] == 'Z' || close[2] == 'X';
}

/* The process's threads (at most max), the main thread first: it is most
 * often the one waiting in a system call, outside everything. Exited
 * threads are left out. */
static size_t list_threads(pid_t pid, pid_t *out, size_t max) {
  size_t n = task_ids(pid, out, max), k = 0;
  /* The others alive, in place (k never passes i), then the main thread
   * in front. */
  for (size_t i = 0; i < n; i++)
    if (out[i] != pid && !thread_dead(pid, out[i]))
      out[k++] = out[i];
  if (max > 0 && !thread_dead(pid, pid)) {
    if (k == max)
      k--;
    memmove(out + 1, out, k * sizeof *out);
    out[0] = pid;
    k++;
  }
  return k;
}

/* Lets every held thread go, each with the signal it stopped for. */
static void release_all(mt_inj_t *inj, pid_t except) {
  for (size_t i = 0; i < inj->nth; i++) {
    mt_inj_thread_t *t = &inj->th[i];
    if (t->tid == 0 || t->tid == except)
      continue;
    unboost_th(t);
    if (!t->stopped) {
      /* Still running (traced): stop it to detach it. */
      int st;
      (void)ptrace(PTRACE_INTERRUPT, t->tid, NULL, NULL);
      if (wait_tid(t->tid, &st, STOP_WAIT_MS) != 0 || took_stop(t, st) != 0) {
        t->tid = 0;
        continue;
      }
    }
    (void)ptrace(PTRACE_DETACH, t->tid, NULL, (void *)(intptr_t)t->sig);
    for (int s = 1; s <= 64; s++)
      if (t->more & (1ull << (s - 1)))
        (void)syscall(SYS_tgkill, (int)inj->pid, (int)t->tid, s);
    t->tid = 0;
  }
}

static int get_regs(pid_t tid, struct user_regs_struct *r) {
  memset(r, 0, sizeof *r);
  struct iovec io = {r, ARCH->regs_size};
  return ptrace(PTRACE_GETREGSET, tid, (void *)NT_PRSTATUS, &io) == 0 ? 0 : -1;
}

static int set_regs(pid_t tid, const struct user_regs_struct *r) {
  struct iovec io = {(void *)r, ARCH->regs_size};
  return ptrace(PTRACE_SETREGSET, tid, (void *)NT_PRSTATUS, &io) == 0 ? 0 : -1;
}

/* The system call's number where it is a regset of its own (arch.h's
 * sysno_type): read into *nr, or written. Returns 0 or -1 (errno). */
static int sysno_io(pid_t tid, int req, int32_t *nr) {
  struct iovec io = {nr, sizeof *nr};
  return ptrace(req, tid, (void *)(uintptr_t)ARCH->sysno_type, &io) == 0 ? 0
                                                                         : -1;
}

static int in_busy(const mt_inj_t *inj, uint64_t a) {
  for (size_t i = 0; i < inj->nbusy; i++)
    if (a >= inj->busy[i].lo && a < inj->busy[i].hi)
      return 1;
  return 0;
}

/* Whether a word pointing into a busy range can be a return address
 * (arch.h's after_call): the code before it, unreadable, is no call. */
static int after_call(mt_inj_t *inj, uint64_t a) {
  uint32_t insn;
  if (!ARCH->after_call)
    return 1;
  struct iovec local = {&insn, sizeof insn},
               remote = {(void *)(uintptr_t)(a - sizeof insn), sizeof insn};
  return process_vm_readv(inj->pid, &local, 1, &remote, 1, 0) ==
             (ssize_t)sizeof insn &&
         ARCH->after_call(insn);
}

/* Whether thread t may be stopped where it is: its PC and the words at
 * the top of its stack are outside the busy ranges. */
static int thread_clear(mt_inj_t *inj, pid_t tid,
                        struct user_regs_struct *out) {
  struct user_regs_struct r;
  if (get_regs(tid, &r) != 0)
    return 0; /* gone meanwhile: not one to call on */
  if (out)
    *out = r;
  for (size_t k = 0; k < sizeof ARCH->live / sizeof ARCH->live[0]; k++) {
    unsigned char hdr[16];
    struct iovec io = {hdr, ARCH->live[k].size};
    if (ARCH->live[k].type != 0 && io.iov_len <= sizeof hdr &&
        ptrace(PTRACE_GETREGSET, tid, (void *)(uintptr_t)ARCH->live[k].type,
               &io) == 0 &&
        ARCH->live_state(ARCH->live[k].type, hdr, io.iov_len)) {
      inj->live_seen++;
      return 0;
    }
  }
  /* Where the thread's return addresses keep a PAC (arch.h). */
  uint64_t pac[2] = {0, 0};
  struct iovec pio = {pac, sizeof pac};
  if (ARCH->pac_type == 0 ||
      ptrace(PTRACE_GETREGSET, tid, (void *)(uintptr_t)ARCH->pac_type, &pio) !=
          0 ||
      pio.iov_len != sizeof pac)
    pac[1] = 0;
  uint64_t code[2];
  for (size_t i = ARCH->code_addrs(&r, code); i-- > 0;)
    if (in_busy(inj, mt_inj_strip(code[i], pac[1])))
      return 0;
  uint64_t words[STACK_SCAN / 8];
  size_t scan = inj->scan_bytes > 0 && inj->scan_bytes < sizeof words
                    ? inj->scan_bytes & ~(size_t)7
                    : sizeof words;
  struct iovec local = {words, scan}, remote = {(void *)ARCH->sp(&r), scan};
  ssize_t n = process_vm_readv(inj->pid, &local, 1, &remote, 1, 0);
  if (n > 0 && ARCH->frame) {
    int b = mt_inj_frames_busy(inj, words, (size_t)n / 8, ARCH->sp(&r),
                               ARCH->frame(&r), pac[1]);
    if (b >= 0)
      return !b;
  }
  for (ssize_t i = 0; n > 0 && i < n / 8; i++) {
    uint64_t w = mt_inj_strip(words[i], pac[1]);
    if (in_busy(inj, w) && after_call(inj, w))
      return 0;
  }
  return 1;
}

/* One try: stops the threads one at a time until one is clear (see
 * inject.h) and has no signal to deliver; that one stays held, the others
 * ran on (each stopped only while it was looked at). Returns 0, 1 if none
 * was clear (nothing held), or a negative code. */
static int try_stop(mt_inj_t *inj) {
  pid_t *tids = malloc(MAX_THREADS * sizeof *tids);
  if (!tids)
    return MS_ENOMEM;
  size_t n = list_threads(inj->pid, tids, MAX_THREADS);
  if (n == 0) {
    free(tids);
    return MS_ESRCH;
  }
  int r = 1;
  /* The stop's time counts from the first thread interrupted in this try
   * (each one before the one kept was let go before the next). */
  inj->stop_ns = 0;
  for (size_t i = 0; i < n; i++) {
    inj->nth = 0;
    if (inj->stop_ns == 0)
      inj->stop_ns = now_ns();
    int h = hold_one(inj, tids[i]);
    if (h == 1)
      continue;
    if (h < 0) {
      release_all(inj, 0);
      r = h;
      break;
    }
    mt_inj_thread_t *t = &inj->th[0];
    struct user_regs_struct regs;
    /* Not one in a system call whose restart uses the kernel's per-thread
     * restart block (nanosleep, poll with a timeout) in the first two
     * tries: a call of ours that a signal interrupts inside such a call
     * would overwrite it. */
    if (t->sig == 0 && thread_clear(inj, t->tid, &regs) &&
        (inj->tries > 2 || !ARCH->restart_block(&regs))) {
      inj->call_th = 0;
      r = 0;
      break;
    }
    inj->busy_seen++;
    release_all(inj, 0);
  }
  free(tids);
  /* A try that kept none held its threads until here (one at a time). */
  if (r != 0 && inj->stop_ns != 0) {
    inj->held_ns += now_ns() - inj->stop_ns;
    inj->stop_ns = 0;
  }
  if (r == 1)
    say(inj, "no thread was outside the dynamic loader and the allocator");
  return r;
}

int mt_inj_stop(mt_inj_t *inj, int max_tries) {
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  pthread_sigmask(SIG_BLOCK, &chld, NULL);
  /* memtop itself raised first: each stop it waits for and each call's
   * end is then seen at once (mt_inj_resume lowers it again). */
  if (!inj->no_boost && sched_get(0, &inj->self_sched) == 0 &&
      (inj->self_sched.policy == SCHED_OTHER ||
       inj->self_sched.policy == SCHED_BATCH)) {
    mt_inj_sched_t b;
    memset(&b, 0, sizeof b);
    b.size = sizeof b;
    b.policy = SCHED_FIFO;
    b.prio = BOOST_PRIO;
    inj->self_boosted = syscall(SYS_sched_setattr, 0, &b, 0u) == 0;
  }
  for (inj->tries = 1;; inj->tries++) {
    int r = try_stop(inj);
    if (r <= 0)
      return r;
    if (inj->tries >= max_tries)
      return MS_EAGAIN;
    /* Let it run on a little: 1, 2, 3 ... ms, at most 20. */
    int ms = inj->tries < 20 ? inj->tries : 20;
    struct timespec ts = {0, (long)ms * 1000000L};
    nanosleep(&ts, NULL);
  }
}

/* ---- the call -------------------------------------------------------------*/

static int save_regs(mt_inj_t *inj) {
  pid_t tid = inj->th[inj->call_th].tid;
  struct user_regs_struct r;
  if (get_regs(tid, &r) != 0) {
    say(inj, "cannot read thread %d's registers: %s", (int)tid,
        strerror(errno));
    return MS_ESRCH;
  }
  memcpy(inj->regs, &r, sizeof r);
  if (ARCH->sysno_type != 0 &&
      sysno_io(tid, PTRACE_GETREGSET, &inj->sysno) != 0) {
    say(inj, "cannot read thread %d's system call: %s", (int)tid,
        strerror(errno));
    return MS_EPROTO;
  }
  inj->fp = malloc(FP_MAX);
  if (!inj->fp)
    return MS_ENOMEM;
  /* The whole state where the kernel gives it, else the plain one. */
  struct iovec io;
  for (size_t k = 0;; k++) {
    io.iov_base = inj->fp;
    io.iov_len = ARCH->fp[k].size ? ARCH->fp[k].size : FP_MAX;
    inj->fp_type = ARCH->fp[k].type;
    if (ptrace(PTRACE_GETREGSET, tid, (void *)(uintptr_t)inj->fp_type, &io) ==
        0)
      break;
    if (k + 1 == sizeof ARCH->fp / sizeof ARCH->fp[0]) {
      say(inj, "cannot read thread %d's FP state: %s", (int)tid,
          strerror(errno));
      return MS_EPROTO;
    }
  }
  inj->fp_len = io.iov_len;
  /* Strings and calls go below the red zone, 16-aligned. */
  inj->sp_top = (ARCH->sp(&r) - STACK_GAP) & ~(uint64_t)15;
  inj->sp_cur = inj->sp_top;
  inj->saved = 1;
  return 0;
}

static int write_mem(mt_inj_t *inj, uint64_t addr, const void *buf,
                     size_t len) {
  struct iovec local = {(void *)buf, len}, remote = {(void *)addr, len};
  ssize_t n = process_vm_writev(inj->pid, &local, 1, &remote, 1, 0);
  if (n == (ssize_t)len)
    return 0;
  /* process_vm_writev may be filtered (seccomp) where ptrace is not. */
  const unsigned char *p = buf;
  for (size_t off = 0; off < len; off += 8) {
    long word;
    size_t k = len - off < 8 ? len - off : 8;
    errno = 0;
    word = ptrace(PTRACE_PEEKDATA, inj->th[inj->call_th].tid,
                  (void *)(addr + off), NULL);
    if (errno != 0)
      return -errno;
    memcpy(&word, p + off, k);
    if (ptrace(PTRACE_POKEDATA, inj->th[inj->call_th].tid, (void *)(addr + off),
               (void *)word) != 0)
      return -errno;
  }
  return 0;
}

int mt_inj_read_str(mt_inj_t *inj, uint64_t addr, char *buf, size_t len) {
  if (len == 0)
    return MS_EINVAL;
  buf[0] = '\0';
  /* A page at a time: the string may end just before an unmapped one. */
  size_t got = 0;
  while (got + 1 < len) {
    uint64_t a = addr + got;
    size_t n = 4096 - (size_t)(a % 4096);
    if (n > len - 1 - got)
      n = len - 1 - got;
    struct iovec local = {buf + got, n}, remote = {(void *)a, n};
    ssize_t r = process_vm_readv(inj->pid, &local, 1, &remote, 1, 0);
    if (r <= 0) {
      if (got == 0)
        return r < 0 ? -errno : MS_EPROTO;
      break;
    }
    void *nul = memchr(buf + got, '\0', (size_t)r);
    got += (size_t)r;
    if (nul)
      return 0;
  }
  buf[got] = '\0';
  return 0;
}

int mt_inj_push_str(mt_inj_t *inj, const char *s, uint64_t *addr) {
  if (!inj->saved) {
    int r = save_regs(inj);
    if (r != 0)
      return r;
  }
  size_t n = strlen(s) + 1;
  if (inj->sp_top - inj->sp_cur + n > STR_ROOM)
    return MS_ENOSPC;
  uint64_t a = (inj->sp_cur - n) & ~(uint64_t)15;
  if (write_mem(inj, a, s, n) != 0) {
    say(inj, "cannot write into the process: %s", strerror(errno));
    return MS_EACCES;
  }
  inj->sp_cur = a;
  *addr = a;
  return 0;
}

int mt_inj_call(mt_inj_t *inj, uint64_t fn, uint64_t a0, uint64_t a1,
                uint64_t *ret, int timeout_ms) {
  if (!inj->saved) {
    int r = save_regs(inj);
    if (r != 0)
      return r;
  }
  mt_inj_thread_t *t = &inj->th[inj->call_th];
  /* The threads there before the calls: any other one found raised after
   * them is one they made (unboost_calls). */
  if (t->boosted && inj->before == NULL) {
    inj->before = malloc(MAX_THREADS * sizeof *inj->before);
    if (!inj->before) {
      unboost_th(t);
    } else
      inj->nbefore = task_ids(inj->pid, inj->before, MAX_THREADS);
  }
  if (t->boosted)
    boost_helpers(inj);
  inj->calls++;
  if (t->boosted)
    inj->boosted = 1;
  struct user_regs_struct r;
  memcpy(&r, inj->regs, sizeof r);
  /* The return address 0, where the call's return faults: the fault is
   * the end of the call (arch.h: the frame, and no system call restart
   * for the call, the interrupted one's coming back with the saved
   * registers). */
  uint64_t push = ARCH->call_frame(&r, fn, a0, a1, inj->sp_cur - 64);
  uint64_t zero = 0;
  int32_t no_call = -1;
  if (push != 0 && write_mem(inj, push, &zero, sizeof zero) != 0) {
    say(inj, "cannot write into the process's stack: %s", strerror(errno));
    return MS_EACCES;
  }
  if (set_regs(t->tid, &r) != 0 ||
      (ARCH->sysno_type != 0 &&
       sysno_io(t->tid, PTRACE_SETREGSET, &no_call) != 0)) {
    say(inj, "cannot set thread %d's registers: %s", (int)t->tid,
        strerror(errno));
    return MS_ESRCH;
  }
  if (ptrace(PTRACE_CONT, t->tid, NULL, NULL) != 0)
    return MS_ESRCH;
  t->stopped = 0;
  uint64_t start = now_ns();
  int released = 0;
  for (;;) {
    int st;
    int waited = (int)((now_ns() - start) / 1000000ull);
    int slice = released ? timeout_ms - waited : 1000 - waited;
    if (slice < 1)
      slice = 1;
    /* A raised call that has not returned in BOOST_MS (it waits on a
     * thread of the process, say) goes on at its own priority. */
    if (t->boosted) {
      if (waited >= BOOST_MS)
        unboost_calls(inj);
      else if (slice > BOOST_MS - waited)
        slice = BOOST_MS - waited;
    }
    int w = wait_tid(t->tid, &st, slice);
    if (w != 0) {
      if (w != MS_ETIMEDOUT) {
        say(inj, "thread %d is gone", (int)t->tid);
        t->tid = 0;
        return MS_ESRCH;
      }
      if (t->boosted)
        continue;
      if (!released) {
        released = 1; /* the whole deadline now */
        continue;
      }
      say(inj, "the call did not return in %d ms", timeout_ms);
      return MS_ETIMEDOUT;
    }
    if (WIFEXITED(st) || WIFSIGNALED(st)) {
      say(inj, "the process ended during the call");
      t->tid = 0;
      return MS_ESRCH;
    }
    if (!WIFSTOPPED(st))
      continue;
    int sig = WSTOPSIG(st);
    if ((st >> 16) == 0 && sig == SIGSEGV) {
      struct user_regs_struct now;
      uint64_t pc[2] = {0, 0};
      if (get_regs(t->tid, &now) == 0 && ARCH->returned(&now, ret)) {
        t->stopped = 1;
        return 0;
      }
      t->stopped = 1;
      ARCH->code_addrs(&now, pc);
      say(inj, "the call faulted at %#llx", (unsigned long long)pc[0]);
      return MS_EPROTO;
    }
    /* Any other signal waits for the resume; stops of ours are passed. */
    if ((st >> 16) == 0 && sig != SIGTRAP)
      keep_sig(t, sig);
    if (ptrace(PTRACE_CONT, t->tid, NULL, NULL) != 0)
      return MS_ESRCH;
  }
}

int mt_inj_resume(mt_inj_t *inj) {
  int r = 0;
  if (inj->saved && inj->nth > 0) {
    mt_inj_thread_t *t = &inj->th[inj->call_th];
    /* A call that did not return (it waits for a lock its own thread
     * held when stopped, say) is abandoned: the thread is stopped where
     * it waits and put back where it was, so that it finishes what it was
     * doing. What the call took meanwhile stays taken (the loader's lock,
     * perhaps): better than a thread that waits for ever, or returns to
     * address 0 one day. */
    if (t->tid != 0 && !t->stopped) {
      int st;
      (void)ptrace(PTRACE_INTERRUPT, t->tid, NULL, NULL);
      while (wait_tid(t->tid, &st, STOP_WAIT_MS) == 0) {
        if (took_stop(t, st) != 0) {
          t->tid = 0;
          break;
        }
        if (t->stopped)
          break;
      }
    }
    if (t->tid != 0 && t->stopped) {
      struct user_regs_struct regs;
      memcpy(&regs, inj->regs, sizeof regs);
      struct iovec io = {inj->fp, inj->fp_len};
      if (set_regs(t->tid, &regs) != 0 ||
          ptrace(PTRACE_SETREGSET, t->tid, (void *)(uintptr_t)inj->fp_type,
                 &io) != 0 ||
          (ARCH->sysno_type != 0 &&
           sysno_io(t->tid, PTRACE_SETREGSET, &inj->sysno) != 0)) {
        say(inj, "cannot restore thread %d's registers: %s", (int)t->tid,
            strerror(errno));
        r = MS_EPROTO;
      }
    }
  }
  if (inj->nth > 0)
    unboost_calls(inj);
  release_all(inj, 0);
  if (inj->stop_ns != 0)
    inj->stop_ns = now_ns() - inj->stop_ns + inj->held_ns;
  else
    inj->stop_ns = inj->held_ns;
  inj->held_ns = 0;
  if (inj->self_boosted)
    (void)sched_put(0, &inj->self_sched);
  inj->self_boosted = 0;
  free(inj->th);
  free(inj->fp);
  free(inj->before);
  inj->before = NULL;
  inj->nbefore = 0;
  inj->th = NULL;
  inj->fp = NULL;
  inj->nth = inj->cap = 0;
  inj->saved = 0;
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  pthread_sigmask(SIG_UNBLOCK, &chld, NULL);
  return r;
}

#else /* no arch.h table for this processor */

void mt_inj_init(mt_inj_t *inj, pid_t pid, const mt_inj_range_t *busy,
                 size_t nbusy) {
  (void)busy;
  (void)nbusy;
  memset(inj, 0, sizeof *inj);
  inj->pid = pid;
}
int mt_inj_stop(mt_inj_t *inj, int max_tries) {
  (void)max_tries;
  snprintf(inj->why, sizeof inj->why,
           "memtop attach is written for x86-64 and aarch64 only");
  return MS_ENOSYS;
}
int mt_inj_call(mt_inj_t *inj, uint64_t fn, uint64_t a0, uint64_t a1,
                uint64_t *ret, int timeout_ms) {
  (void)inj, (void)fn, (void)a0, (void)a1, (void)ret, (void)timeout_ms;
  return MS_ENOSYS;
}
int mt_inj_push_str(mt_inj_t *inj, const char *s, uint64_t *addr) {
  (void)inj, (void)s, (void)addr;
  return MS_ENOSYS;
}
int mt_inj_read_str(mt_inj_t *inj, uint64_t addr, char *buf, size_t len) {
  (void)inj, (void)addr, (void)buf, (void)len;
  return MS_ENOSYS;
}
int mt_inj_resume(mt_inj_t *inj) {
  (void)inj;
  return 0;
}
#endif
