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
 * The boost: memtop's thread, and the chosen thread from its interrupt on,
 * run SCHED_FIFO at the lowest real-time priority while it is held, where
 * the kernel allows it (root: CAP_SYS_NICE). Without it, a thread whose
 * process keeps every CPU busy waits for the fair scheduler's turn at
 * each step (its stop, each call, memtop's seeing the call end): with 8
 * threads allocating on 2 CPUs, tens of milliseconds per step, on the
 * scheduler's tick. Raised, each step is taken at once; a thread the
 * calls make (the agent's) is made raised as its creator and wait for
 * (mt_inj_boost_named raises the agent's thread that runs already). Every
 * thread raised gets back its own attributes (sched_getattr's policy,
 * priority, nice value, reset-on-fork) at the resume, a thread the calls
 * made its creator's; a call not back in BOOST_MS goes on unraised. A
 * thread that runs real-time already is left as it is.
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
 * with any signal that arrived meanwhile delivered then. stop_ns counts
 * from the first thread interrupted in the try that found the thread (each
 * before it was let go first) to the last one let go, plus the same span
 * of each try before that kept none (not the pauses between tries).
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

#define MT_INJ_MAX_RANGES 6

/* A thread's scheduling attributes (the kernel's struct sched_attr, as
 * sched_getattr(2) gives them). */
typedef struct mt_inj_sched_s {
  uint32_t size, policy;
  uint64_t flags;
  int32_t nice;
  uint32_t prio;
  uint64_t runtime, deadline, period;
  uint32_t util_min, util_max;
} mt_inj_sched_t;

typedef struct mt_inj_thread_s {
  pid_t tid;
  int stopped;          /* 1 while we hold it stopped */
  int sig;              /* a signal it stopped for, delivered at the resume */
  uint64_t more;        /* more signals (bit n-1: signal n), sent after it */
  int boosted;          /* 1 while it runs at the boost's priority */
  mt_inj_sched_t sched; /* its own attributes, put back at the resume */
} mt_inj_thread_t;

typedef struct mt_inj_s {
  pid_t pid;
  mt_inj_thread_t *th; /* the threads we hold */
  size_t nth, cap;
  mt_inj_range_t busy[MT_INJ_MAX_RANGES]; /* no PC nor return address here */
  size_t nbusy;
  /* How much of the top of each thread's stack is searched for return
   * addresses into the busy ranges (0: 2048 bytes, attach's). Set after
   * mt_inj_init(). */
  size_t scan_bytes;
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
  /* The boost (see above): memtop's own attributes while it is raised,
   * and the process's threads before the first call (any other thread of
   * it found at the boost's priority after the calls is one the calls
   * made: it gets the calling thread's own attributes). */
  int no_boost; /* 1: not even tried */
  int self_boosted;
  mt_inj_sched_t self_sched;
  pid_t *before;
  size_t nbefore;
  /* Threads of the process the calls wait for, raised with the calling
   * thread (mt_inj_boost_named), and their own attributes. */
  pid_t helper[4];
  int helper_boosted[4];
  mt_inj_sched_t helper_sched[4];
  size_t nhelper;
  /* The stop's figures: CLOCK_MONOTONIC ns at the first interrupt of the
   * try, then (after mt_inj_resume) how long the process was held (see
   * above); the tries it took and how many threads were found busy. */
  uint64_t stop_ns;
  uint64_t held_ns; /* what the tries that kept none held, in all */
  int tries;
  size_t busy_seen;
  size_t live_seen; /* of them, with state the calls would not keep */
  int calls;        /* the functions called (mt_inj_call) */
  int boosted;      /* 1 if the calls ran raised (root; see above) */
  char why[256];    /* why the last step failed, for the user */
} mt_inj_t;

/* Prepares inj for process pid, with the ranges no thread may be in. */
void mt_inj_init(mt_inj_t *inj, pid_t pid, const mt_inj_range_t *busy,
                 size_t nbusy);

/* Address w with the bits of a pointer authentication code cleared:
 * insn_mask's (arch.h's pac_type; 0 when the thread has none) and the
 * top byte, which a user-space code address never has set. Pure. */
uint64_t mt_inj_strip(uint64_t w, uint64_t insn_mask);

/* The stack search through linked frame records (arch.h's frame):
 * words[0..nwords) are the thread's stack from sp up, fp its frame
 * pointer, insn_mask its PAC bits (mt_inj_strip). Follows the records
 * from fp while they lie in words, 16-aligned and going up: returns 1 if
 * a record's return address is in inj's busy ranges, 0 if none is and
 * the chain ended (fp 0, the outermost frame) or left words, -1 if it is
 * no chain (fp outside words or below sp, misaligned, not going up, a
 * record with no return address): then every word is searched. Pure. */
int mt_inj_frames_busy(const mt_inj_t *inj, const uint64_t *words,
                       size_t nwords, uint64_t sp, uint64_t fp,
                       uint64_t insn_mask);

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

/* Notes the threads of the process named name (the library's agent
 * thread, which a call waits for), before mt_inj_stop: reading each
 * thread's name then holds nothing. They are raised with the calling
 * thread for the calls (see above) and get their own attributes back with
 * it. Returns how many were found (at most 4). */
int mt_inj_boost_named(mt_inj_t *inj, const char *name);

/* Whether a live thread of pid names itself name: 1 if one does, 0 if
 * none, -1 if pid's threads cannot be listed. Needs no mt_inj_t. */
int mt_inj_count_named(pid_t pid, const char *name);

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
