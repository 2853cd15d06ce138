/*
 * arch.h - what memtop attach's calls (inject.c) need to know of the
 * processor: the registers ptrace gives (NT_PRSTATUS), the FP/vector
 * state saved and put back whole, the call's frame, its end, and the
 * system call a thread was stopped in (memtop side).
 *
 * One table per architecture, each member's contract beside it. The
 * tables are plain computation on the bytes of NT_PRSTATUS, laid out here
 * (not through the host's <sys/user.h>), so both are built on every host
 * and tests/unit/test_attach_arch.c checks both where it runs; inject.c
 * makes the ptrace calls with the host's table, MT_ARCH_HOST (undefined
 * where memtop attach is not written: it refuses there).
 *
 * The call (both): fn(a0, a1) on the stopped thread's own stack, below
 * the room inject.c keeps under the interrupted code's stack pointer, and
 * returning to address 0: the fault there (SIGSEGV, pc 0) is the end of
 * the call, taken by memtop and never delivered. x86-64 pushes that
 * return address; aarch64 puts it in the link register (x30), with the
 * stack pointer 16-aligned as the architecture checks at every use.
 *
 * A system call the thread was stopped in (restart semantics, as gdb's):
 * - x86-64: the kernel decides the restart after the stop, from the
 *   registers it is given back: the call runs with orig_rax -1 (no
 *   restart), and restoring the saved registers gives it back the
 *   interrupted call's number and its -ERESTART* value.
 * - aarch64: the kernel has decided before the stop (arch/arm64/kernel/
 *   signal.c, do_signal): for a call to restart it has already put x0
 *   back from orig_x0 (which ptrace cannot read) and pc back by 4, on the
 *   svc, and forgotten the call's number (NT_ARM_SYSTEM_CALL reads -1).
 *   So the saved registers, put back, issue the same call again; the
 *   number is saved and put back too (NT_ARM_SYSTEM_CALL), and set to -1
 *   for the call, so that nothing is restarted into it. One difference
 *   with no stop: a call restarted through the restart block (nanosleep,
 *   clock_nanosleep; -ERESTART_RESTARTBLOCK) is issued again with its
 *   first arguments, so a relative sleep starts over (gdb's calls do the
 *   same). Its value is gone by the stop: x8 naming such a call is what
 *   restart_block() can see.
 */
#ifndef MT_ATTACH_ARCH_H
#define MT_ATTACH_ARCH_H

#include <stddef.h>
#include <stdint.h>

/* x86-64's NT_PRSTATUS (the kernel's struct user_regs_struct). */
typedef struct mt_arch_x86_64_regs_s {
  uint64_t r15, r14, r13, r12, rbp, rbx, r11, r10, r9, r8, rax, rcx, rdx, rsi,
      rdi, orig_rax, rip, cs, eflags, rsp, ss, fs_base, gs_base, ds, es, fs, gs;
} mt_arch_x86_64_regs_t;

/* aarch64's NT_PRSTATUS (the kernel's struct user_pt_regs). */
typedef struct mt_arch_aarch64_regs_s {
  uint64_t x[31]; /* x30 is the link register */
  uint64_t sp, pc, pstate;
} mt_arch_aarch64_regs_t;

/* The largest NT_PRSTATUS of the tables (inject.h's saved registers). */
#define MT_ARCH_REGS_MAX 272

/* A regset (PTRACE_GETREGSET's note type) and its size in bytes; size 0:
 * as large as the buffer (the kernel says how much it filled). */
typedef struct mt_arch_regset_s {
  unsigned type;
  size_t size;
} mt_arch_regset_t;

typedef struct mt_arch_s {
  const char *name;
  unsigned machine; /* its ELF e_machine */
  size_t regs_size; /* NT_PRSTATUS's size */
  /* The FP/vector state, the first regset the kernel gives (the whole
   * one: XSAVE's area, SVE's registers), else the second. */
  mt_arch_regset_t fp[2];
  /* The frame pointer where frames are linked records {the caller's
   * record, the return address} (aarch64's x29: glibc's and most code's
   * non-leaf functions make one); NULL where they may not be (x86-64,
   * built without frame pointers). The stack search then reads the
   * return addresses of the records (mt_inj_frames_busy), not every word:
   * a stale return address in a frame's locals (the lazy binder's, left
   * by a PLT call at the same depth earlier) made a thread waiting in
   * read(2) busy at every stop. */
  uint64_t (*frame)(const void *regs);
  /* The regset giving where a return address keeps its pointer
   * authentication code (aarch64's NT_ARM_PAC_MASK: struct
   * user_pac_mask, data and instruction masks), 0 none: code signed
   * with PAC (-mbranch-protection, as Fedora's and Ubuntu's glibc are)
   * keeps its return addresses signed in its frames and, between
   * paciasp and autiasp, in x30. The code addresses and stack words are
   * looked at with those bits cleared (mt_inj_strip). */
  unsigned pac_type;
  /* State the calls would not keep, which the FP regsets above do not
   * hold: a thread that has it live is left as found, never called on
   * (as a busy one; another thread, or a later stop, is tried). Each a
   * regset whose header (its first size bytes, at most 16) live_state
   * reads; type 0: none. A regset the kernel lacks reads as not live.
   * aarch64: SME's streaming mode (NT_ARM_SSVE; a system call in the
   * calls would end it, and in it most FP/SIMD instructions fault) and
   * its ZA array (NT_ARM_ZA; ZT0 lives only with it). */
  mt_arch_regset_t live[2];
  int (*live_state)(unsigned type, const void *hdr, size_t len);
  /* The regset holding the system call's number (aarch64's
   * NT_ARM_SYSTEM_CALL, an int), saved, set to -1 for the calls and put
   * back; 0: the number is in NT_PRSTATUS (x86-64's orig_rax). */
  unsigned sysno_type;
  /* The code addresses the registers hold that a thread may return to:
   * pc, and the link register where there is one (a leaf function's
   * caller is there, not on the stack). Fills out (room for 2), returns
   * how many. */
  size_t (*code_addrs)(const void *regs, uint64_t *out);
  /* Whether a word on a thread's stack that points into the loader or
   * the allocator can be a return address, from insn, the 4 bytes of
   * code before the address it points at: the address after a call.
   * Other words there (function pointers the startup frames keep: glibc
   * keeps the loader's _dl_audit_preinit in __libc_start_main's, just
   * under main's) make no thread busy. NULL: every such word is taken
   * for one (x86-64, whose calls have many lengths). */
  int (*after_call)(uint32_t insn);
  uint64_t (*sp)(const void *regs);
  /* Whether the thread was stopped in a system call whose restart goes
   * through the kernel's per-thread restart block (see above). */
  int (*restart_block)(const void *regs);
  /* Makes regs (the saved registers, copied) call fn(a0, a1) with its
   * frame below room (an address in the thread's stack, the lowest byte
   * memtop does not use) and return to address 0. Returns the address
   * where a zero return address must be written to the stack first, or
   * 0 if none is (the link register holds it). */
  uint64_t (*call_frame)(void *regs, uint64_t fn, uint64_t a0, uint64_t a1,
                         uint64_t room);
  /* Whether regs, at a SIGSEGV stop, are the call's return to address 0;
   * if so *ret gets its result. */
  int (*returned)(const void *regs, uint64_t *ret);
} mt_arch_t;

extern const mt_arch_t mt_arch_x86_64;
extern const mt_arch_t mt_arch_aarch64;

/* The host's table, and its NT_PRSTATUS layout (which inject.c checks
 * against the host's <sys/user.h>). */
#if defined(__x86_64__)
#define MT_ARCH_HOST (&mt_arch_x86_64)
#define MT_ARCH_HOST_REGS mt_arch_x86_64_regs_t
#elif defined(__aarch64__)
#define MT_ARCH_HOST (&mt_arch_aarch64)
#define MT_ARCH_HOST_REGS mt_arch_aarch64_regs_t
#endif

#endif
