/*
 * arch_aarch64.c - memtop attach's calls on aarch64 (see arch.h). Checked
 * by its unit test (tests/unit/test_attach_arch.c, on any host), a cross
 * build, and run on Debian's arm64 kernel (6.1) under qemu-system-aarch64
 * -cpu max (tests/cross/vm-aarch64.sh: attach, --track, detach, SVE's
 * registers held); not yet on aarch64 hardware.
 */
#include <elf.h>
#include <string.h>

#include "attach/arch.h"

#ifndef EM_AARCH64
#define EM_AARCH64 183
#endif
#ifndef NT_ARM_SYSTEM_CALL
#define NT_ARM_SYSTEM_CALL 0x404
#endif
#ifndef NT_ARM_SVE
#define NT_ARM_SVE 0x405
#endif
#ifndef NT_ARM_PAC_MASK
#define NT_ARM_PAC_MASK 0x406
#endif
#ifndef NT_ARM_SSVE
#define NT_ARM_SSVE 0x40b
#endif
#ifndef NT_ARM_ZA
#define NT_ARM_ZA 0x40c
#endif
/* The headers of NT_ARM_SSVE (struct user_sve_header) and NT_ARM_ZA
 * (struct user_za_header): u32 size, u32 max_size, u16 vl, u16 max_vl,
 * u16 flags, u16 reserved; size counts the header (16) and the registers
 * that follow it. */
#define SME_HDR 16
#define SVE_PT_REGS_SVE_ 1

/* The calls whose restart goes through the restart block, by their
 * numbers in x8 (asm-generic/unistd.h, which aarch64 uses). */
#define NR_NANOSLEEP 101
#define NR_CLOCK_NANOSLEEP 115
/* PSTATE's software step bit and branch type (BTI): neither is carried
 * into the call, whose first instruction is then never checked as a
 * branch target. */
#define PSTATE_SS (1ull << 21)
#define PSTATE_BTYPE (3ull << 10)
/* The FP/SIMD registers as NT_PRFPREG gives them (struct
 * user_fpsimd_state: 32 128-bit registers, fpsr, fpcr, 8 reserved). */
#define FPSIMD_SIZE (32 * 16 + 16)
#define LR 30

#if defined(__aarch64__)
/* Built for aarch64 (memtop's own build there, make cross-aarch64): the
 * layout above is the kernel's. */
#include <asm/ptrace.h>
#include <stddef.h>
_Static_assert(sizeof(struct user_pt_regs) == sizeof(mt_arch_aarch64_regs_t) &&
                   offsetof(struct user_pt_regs, sp) ==
                       offsetof(mt_arch_aarch64_regs_t, sp) &&
                   offsetof(struct user_pt_regs, pc) ==
                       offsetof(mt_arch_aarch64_regs_t, pc) &&
                   sizeof(struct user_fpsimd_state) == FPSIMD_SIZE,
               "arch.h's aarch64 registers are the kernel's");
#if defined(ZA_PT_SIZE)
_Static_assert(sizeof(struct user_sve_header) == SME_HDR &&
                   offsetof(struct user_sve_header, flags) == 12 &&
                   sizeof(struct user_za_header) == SME_HDR &&
                   SVE_PT_REGS_SVE == SVE_PT_REGS_SVE_,
               "the SME regsets' headers are the kernel's");
#endif
#endif

static mt_arch_aarch64_regs_t get(const void *regs) {
  mt_arch_aarch64_regs_t r;
  memcpy(&r, regs, sizeof r);
  return r;
}

/* pc, and the link register: a leaf function (a lock's wait, a system
 * call's wrapper) keeps its caller there, never on the stack. */
static size_t code_addrs(const void *regs, uint64_t *out) {
  mt_arch_aarch64_regs_t r = get(regs);
  out[0] = r.pc;
  out[1] = r.x[LR];
  return 2;
}

/* BL; BLR; BLRAAZ and BLRABZ; BLRAA and BLRAB (pointer authentication):
 * the instructions whose next one a return address is. */
static int after_call(uint32_t insn) {
  return (insn & 0xfc000000u) == 0x94000000u ||
         (insn & 0xfffffc1fu) == 0xd63f0000u ||
         (insn & 0xfffff81fu) == 0xd63f081fu ||
         (insn & 0xfffff800u) == 0xd73f0800u;
}

/* Whether the header of NT_ARM_SSVE says streaming mode is on (SVE's
 * registers follow, not the FP/SIMD ones or nothing), or NT_ARM_ZA's
 * that ZA is (its rows follow). */
static int live_state(unsigned type, const void *hdr, size_t len) {
  uint32_t size;
  uint16_t flags;
  if (len < SME_HDR)
    return 0;
  memcpy(&size, hdr, sizeof size);
  memcpy(&flags, (const char *)hdr + 12, sizeof flags);
  if (type == NT_ARM_SSVE)
    return (flags & SVE_PT_REGS_SVE_) != 0 && size > SME_HDR;
  return type == NT_ARM_ZA && size > SME_HDR;
}

static uint64_t frame(const void *regs) {
  return get(regs).x[29];
}

static uint64_t sp(const void *regs) {
  return get(regs).sp;
}

/* The kernel has put x0 back before the stop, so the call's return value
 * is gone: x8 naming a sleep is all there is (x8 is a scratch register
 * elsewhere, so this may be a coincidence: it only makes another thread
 * preferred, for a try or two). */
static int restart_block(const void *regs) {
  uint64_t nr = get(regs).x[8];
  return nr == NR_NANOSLEEP || nr == NR_CLOCK_NANOSLEEP;
}

/* The return address 0 is in x30; the stack pointer 16-aligned (checked
 * by the processor at every use), with no red zone to keep. */
static uint64_t call_frame(void *regs, uint64_t fn, uint64_t a0, uint64_t a1,
                           uint64_t room) {
  mt_arch_aarch64_regs_t r = get(regs);
  r.pc = fn;
  r.x[0] = a0;
  r.x[1] = a1;
  r.x[LR] = 0;
  r.sp = room & ~(uint64_t)15;
  r.pstate &= ~(PSTATE_SS | PSTATE_BTYPE);
  memcpy(regs, &r, sizeof r);
  return 0;
}

static int returned(const void *regs, uint64_t *ret) {
  mt_arch_aarch64_regs_t r = get(regs);
  if (r.pc != 0)
    return 0;
  *ret = r.x[0];
  return 1;
}

const mt_arch_t mt_arch_aarch64 = {
    .name = "aarch64",
    .machine = EM_AARCH64,
    .regs_size = sizeof(mt_arch_aarch64_regs_t),
    /* SVE's registers whole where the thread has them (NT_ARM_SVE gives
     * the FP/SIMD layout otherwise, with its header), else FP/SIMD. */
    .fp = {{NT_ARM_SVE, 0}, {NT_PRFPREG, FPSIMD_SIZE}},
    .frame = frame,
    .pac_type = NT_ARM_PAC_MASK,
    .live = {{NT_ARM_SSVE, SME_HDR}, {NT_ARM_ZA, SME_HDR}},
    .live_state = live_state,
    .sysno_type = NT_ARM_SYSTEM_CALL,
    .code_addrs = code_addrs,
    .after_call = after_call,
    .sp = sp,
    .restart_block = restart_block,
    .call_frame = call_frame,
    .returned = returned,
};
