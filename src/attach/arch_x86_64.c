/*
 * arch_x86_64.c - memtop attach's calls on x86-64 (see arch.h).
 */
#include <elf.h>
#include <string.h>

#include "attach/arch.h"

/* Linux's -ERESTART_RESTARTBLOCK, returned by a call its restart block
 * restarts (include/linux/errno.h; not in the user headers). */
#define ERESTART_RESTARTBLOCK_ 516
/* RFLAGS' trap flag (single step) and direction flag (clear at a call,
 * the ABI says). */
#define RFLAGS_TF 0x100ull
#define RFLAGS_DF 0x400ull
/* The FP state as FXSAVE lays it (struct user_fpregs_struct). */
#define FXSAVE_SIZE 512

#if defined(__x86_64__)
/* Built for x86-64: the layout arch.h gives is the kernel's. */
#include <stddef.h>
#include <sys/user.h>
_Static_assert(sizeof(struct user_regs_struct) ==
                       sizeof(mt_arch_x86_64_regs_t) &&
                   offsetof(struct user_regs_struct, orig_rax) ==
                       offsetof(mt_arch_x86_64_regs_t, orig_rax) &&
                   offsetof(struct user_regs_struct, rip) ==
                       offsetof(mt_arch_x86_64_regs_t, rip) &&
                   offsetof(struct user_regs_struct, rsp) ==
                       offsetof(mt_arch_x86_64_regs_t, rsp) &&
                   sizeof(struct user_fpregs_struct) == FXSAVE_SIZE,
               "arch.h's x86-64 registers are the kernel's");
#endif

static mt_arch_x86_64_regs_t get(const void *regs) {
  mt_arch_x86_64_regs_t r;
  memcpy(&r, regs, sizeof r);
  return r;
}

static size_t code_addrs(const void *regs, uint64_t *out) {
  out[0] = get(regs).rip;
  return 1;
}

static uint64_t sp(const void *regs) {
  return get(regs).rsp;
}

static int restart_block(const void *regs) {
  mt_arch_x86_64_regs_t r = get(regs);
  return (int64_t)r.orig_rax >= 0 &&
         (int64_t)r.rax == -(int64_t)ERESTART_RESTARTBLOCK_;
}

/* The return address 0 is pushed: at the entry rsp is 8 past a 16-byte
 * boundary. orig_rax -1: no system call restart for the call (the
 * interrupted one's comes back with the saved registers). */
static uint64_t call_frame(void *regs, uint64_t fn, uint64_t a0, uint64_t a1,
                           uint64_t room) {
  mt_arch_x86_64_regs_t r = get(regs);
  uint64_t s = (room & ~(uint64_t)15) - 8;
  r.rip = fn;
  r.rdi = a0;
  r.rsi = a1;
  r.rax = 0; /* no vector registers for a variadic callee */
  r.rsp = s;
  r.orig_rax = (uint64_t)-1;
  r.eflags &= ~(RFLAGS_DF | RFLAGS_TF);
  memcpy(regs, &r, sizeof r);
  return s;
}

static int returned(const void *regs, uint64_t *ret) {
  mt_arch_x86_64_regs_t r = get(regs);
  if (r.rip != 0)
    return 0;
  *ret = r.rax;
  return 1;
}

const mt_arch_t mt_arch_x86_64 = {
    .name = "x86-64",
    .machine = EM_X86_64,
    .regs_size = sizeof(mt_arch_x86_64_regs_t),
    .fp = {{NT_X86_XSTATE, 0}, {NT_PRFPREG, FXSAVE_SIZE}},
    .sysno_type = 0,
    .code_addrs = code_addrs,
    .sp = sp,
    .restart_block = restart_block,
    .call_frame = call_frame,
    .returned = returned,
};
