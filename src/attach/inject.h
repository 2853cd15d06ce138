/*
 * inject.h - calling functions inside another running process with
 * ptrace, no debugger (memtop side; x86-64).
 *
 * mt_inj_stop() stops every thread of the process (PTRACE_SEIZE and
 * PTRACE_INTERRUPT, the threads created meanwhile too), reads where each
 * is, and chooses the thread the calls will run on: one whose program
 * counter, and every return address near the top of its stack, is
 * outside the dynamic loader's text and the allocator's (the part of libc
 * around its exported malloc family, where the arena locks are held): a
 * thread inside either may hold a lock the calls take (dlopen takes the
 * loader's, and allocates), and would wait for itself. If no thread is
 * clear, all are let go and the stop is tried again a little later, a
 * bounded number of times (MS_EAGAIN then).
 *
 * mt_inj_release_others() then lets every other thread go before the
 * calls: the calls take the loader's and the allocator's locks as any
 * thread of the program may, so the others must be free to run to the
 * end of what they hold (one stopped inside malloc would make the call
 * wait for ever). The process as a whole is stopped only from the first
 * interrupt to that release (world_ns); the calling thread until its
 * registers are back (stop_ns).
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
  /* The thread the calls run on, its saved registers (user_regs_struct)
   * and FP state (NT_X86_XSTATE or NT_PRFPREG), while saved. */
  size_t call_th;
  int saved;
  unsigned char regs[27 * 8];
  unsigned char *fp;
  size_t fp_len;
  unsigned fp_type;
  uint64_t sp_top, sp_cur; /* the room below the red zone; used down to */
  /* The stop's figures: CLOCK_MONOTONIC ns at the first interrupt of the
   * try that held, then (after mt_inj_resume) how long the calling thread
   * was held; how long every thread was (world_ns); the tries it took and
   * how many threads were busy at the last. */
  uint64_t stop_ns, world_ns;
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

/* Lets every held thread but the calling one go (see above). */
void mt_inj_release_others(mt_inj_t *inj);

/* Calls fn(a0, a1) on the chosen thread and returns its result in *ret.
 * Strings the call needs are written first with mt_inj_push_str, which
 * returns their address in the target (below the red zone; at most a
 * page in all, kept until mt_inj_resume). Returns 0, or MS_ETIMEDOUT (no
 * return in timeout_ms; the other threads are let go after a second so
 * that a lock they hold cannot hold the call), MS_EPROTO (the call ended
 * in another fault: the reason in inj->why), MS_ESRCH. */
int mt_inj_call(mt_inj_t *inj, uint64_t fn, uint64_t a0, uint64_t a1,
                uint64_t *ret, int timeout_ms);
int mt_inj_push_str(mt_inj_t *inj, const char *s, uint64_t *addr);

/* Reads up to len - 1 bytes of a NUL-terminated string at addr in the
 * target into buf (always terminated). Returns 0 or -1. */
int mt_inj_read_str(mt_inj_t *inj, uint64_t addr, char *buf, size_t len);

/* Restores the calling thread's registers, lets every thread go and frees
 * what inj holds. Sets stop_ns to the time the process was held. Safe
 * after any failure. Returns 0, or MS_EPROTO if the registers could not
 * be put back (inj->why). */
int mt_inj_resume(mt_inj_t *inj);

#endif
