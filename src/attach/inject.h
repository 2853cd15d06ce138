/*
 * inject.h - calling functions inside another running process with
 * ptrace, no debugger (memtop side; x86-64 and aarch64: arch.h).
 *
 * mt_inj_stop() stops the process's threads one at a time
 * (PTRACE_SEIZE, PTRACE_INTERRUPT), the main thread first, until one is
 * clear: its program counter, and every return address near the top of
 * its stack, outside the dynamic loader's text and the allocator's (the
 * part of libc around its exported malloc family, where the arena locks
 * are held). That thread stays stopped and makes the calls; each other
 * one was stopped only while it was looked at. If none is clear, the stop
 * is tried again a little later, a bounded number of times (MS_EAGAIN).
 *
 * Why one thread, not all of them: the calls take the loader's and the
 * allocator's locks (dlopen allocates), as any thread of the program may,
 * so every other thread must be free to run to the end of what it holds;
 * one held stopped inside malloc, or in an mmap that sysmalloc made with
 * an arena locked, would make the call wait for ever. The calling thread
 * must hold none of them itself (hence the check), and dlopen is made to
 * be called while other threads run. So the program as a whole never
 * stops: one thread does, for as long as the library takes to load
 * (stop_ns).
 *
 * mt_inj_call() then runs one function on one stopped thread: its
 * registers (general and the whole FP/vector state) are saved once, the
 * call is set up on the thread's own stack below the red zone, returns to
 * address 0, and the fault that follows is taken by us and never
 * delivered. A thread stopped inside a system call keeps its restart: the
 * call runs with orig_rax -1 (no restart), and restoring the saved
 * registers gives the kernel back the interrupted call's number and its
 * -ERESTART* value, which it restarts as it would have (as gdb does).
 * mt_inj_resume() restores the registers exactly and lets every thread go,
 * with any signal that arrived meanwhile delivered then.
 *
 * Not thread-safe: one mt_inj_t per process, on one thread of memtop.
 */
#ifndef MT_ATTACH_INJECT_H
#define MT_ATTACH_INJECT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* An address range [lo, hi) of the target's text where no thread may be. */
typedef struct mt_inj_range_s {
  uint64_t lo, hi;
} mt_inj_range_t;

#define MT_INJ_MAX_RANGES 4

typedef struct mt_inj_thread_s {
  pid_t tid;
  int stopped;   /* 1 while we hold it stopped */
  int sig;       /* a signal it stopped for, delivered at the resume */
  uint64_t more; /* more signals (bit n-1: signal n), sent after it */
} mt_inj_thread_t;

typedef struct mt_inj_s {
  pid_t pid;
  mt_inj_thread_t *th; /* the threads we hold */
  size_t nth, cap;
  mt_inj_range_t busy[MT_INJ_MAX_RANGES]; /* no PC nor return address here */
  size_t nbusy;
  /* The thread the calls run on, its saved registers (NT_PRSTATUS), FP
   * state (arch.h's fp regsets) and, on aarch64, system call number
   * (NT_ARM_SYSTEM_CALL), while saved. */
  size_t call_th;
  int saved;
  unsigned char regs[34 * 8]; /* arch.h's MT_ARCH_REGS_MAX */
  int32_t sysno;
  unsigned char *fp;
  size_t fp_len;
  unsigned fp_type;
  uint64_t sp_top, sp_cur; /* the room below the red zone; used down to */
  /* The stop's figures: CLOCK_MONOTONIC ns at the interrupt of the
   * calling thread, then (after mt_inj_resume) how long it was held; the
   * tries it took and how many threads were found busy in all. */
  uint64_t stop_ns;
  int tries;
  size_t busy_seen;
  char why[256]; /* why the last step failed, for the user */
} mt_inj_t;

/* Prepares inj for process pid, with the ranges no thread may be in. */
void mt_inj_init(mt_inj_t *inj, pid_t pid, const mt_inj_range_t *busy,
                 size_t nbusy);

/* Stops every thread (see above). Returns 0, or MS_EACCES (ptrace refused:
 * the reason in inj->why), MS_ESRCH (gone), MS_EAGAIN (a thread was in
 * the loader or the allocator every time), MS_ENOMEM. On error nothing is
 * held. */
int mt_inj_stop(mt_inj_t *inj, int max_tries);

/* Calls fn(a0, a1) on the chosen thread and returns its result in *ret.
 * Strings the call needs are written first with mt_inj_push_str, which
 * returns their address in the target (below the red zone; at most a
 * page in all, kept until mt_inj_resume). Returns 0, or MS_ETIMEDOUT (no
 * return in timeout_ms), MS_EPROTO (the call ended
 * in another fault: the reason in inj->why), MS_ESRCH. */
int mt_inj_call(mt_inj_t *inj, uint64_t fn, uint64_t a0, uint64_t a1,
                uint64_t *ret, int timeout_ms);
int mt_inj_push_str(mt_inj_t *inj, const char *s, uint64_t *addr);

/* Reads up to len - 1 bytes of a NUL-terminated string at addr in the
 * target into buf (always terminated). Returns 0, MS_EINVAL (len 0), or
 * the -errno of the read (MS_ENOSYS where arch.h has no table). */
int mt_inj_read_str(mt_inj_t *inj, uint64_t addr, char *buf, size_t len);

/* Restores the calling thread's registers, lets every thread go and frees
 * what inj holds. Sets stop_ns to the time the process was held. Safe
 * after any failure. Returns 0, or MS_EPROTO if the registers could not
 * be put back (inj->why). */
int mt_inj_resume(mt_inj_t *inj);

#endif
