/*
 * test_attach_arch.c - memtop attach's processor tables (src/attach/
 * arch.h) and the relocations --track rewrites (src/preload/got_reloc.h),
 * x86-64's and aarch64's both, on whatever host runs the test: the
 * tables are computation on NT_PRSTATUS's bytes, laid out by arch.h, not
 * by the host's headers. What it checks of aarch64 is all that is checked
 * without an aarch64 machine (with `make cross-aarch64`, which builds
 * src/attach and got.c for it against its own headers): the call's frame
 * (pc, x0, x1, the return address 0 in x30, sp 16-aligned in the room,
 * every other register as saved), its end, the registers that hold code
 * addresses, the restart decision and the regsets saved. And that
 * rsym.c reads no object built for another processor than memtop's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "attach/arch.h"
#include "attach/inject.h"
#include "attach/rsym.h"
#include "memstats.h"
#include "preload/got_reloc.h"

/* Registers no call would leave as they are: each word its own. */
static void pattern(void *regs, size_t n) {
  uint64_t *w = regs;
  for (size_t i = 0; i < n / 8; i++)
    w[i] = 0x1111111111111111ull * (i % 15 + 1) + i;
}

static void test_aarch64_layout(void **state) {
  (void)state;
  const mt_arch_t *a = &mt_arch_aarch64;
  /* struct user_pt_regs: x0..x30, sp, pc, pstate. */
  assert_int_equal(a->regs_size, 272);
  assert_int_equal(offsetof(mt_arch_aarch64_regs_t, sp), 248);
  assert_int_equal(offsetof(mt_arch_aarch64_regs_t, pc), 256);
  assert_int_equal(offsetof(mt_arch_aarch64_regs_t, pstate), 264);
  assert_true(a->regs_size <= MT_ARCH_REGS_MAX);
  assert_int_equal(a->machine, EM_AARCH64);
  /* SVE's whole state first, the FP/SIMD registers (528 bytes) else;
   * the system call's number saved and put back. */
  assert_int_equal(a->fp[0].type, 0x405);
  assert_int_equal(a->fp[0].size, 0);
  assert_int_equal(a->fp[1].type, 2);
  assert_int_equal(a->fp[1].size, 528);
  assert_int_equal(a->sysno_type, 0x404);
}

static void test_aarch64_call_frame(void **state) {
  (void)state;
  const mt_arch_t *a = &mt_arch_aarch64;
  mt_arch_aarch64_regs_t saved, r;
  pattern(&saved, sizeof saved);
  saved.sp = 0x7ffc12345678;
  saved.pstate = 0x60000000ull | (1ull << 21) | (2ull << 10); /* Z C, SS,
                                                                  BTYPE */
  r = saved;
  uint64_t room = 0x7ffc12345000 - 64 - 3; /* not aligned */
  uint64_t push = a->call_frame(&r, 0x7f0000001230, 11, 22, room);
  assert_int_equal(push, 0); /* nothing written to the stack */
  assert_int_equal(r.pc, 0x7f0000001230);
  assert_int_equal(r.x[0], 11);
  assert_int_equal(r.x[1], 22);
  assert_int_equal(r.x[30], 0); /* returns to 0, where it faults */
  assert_int_equal(r.sp % 16, 0);
  assert_true(r.sp <= room && r.sp > room - 16);
  /* The flags kept, single step and the branch type cleared. */
  assert_int_equal(r.pstate, 0x60000000ull);
  for (int i = 2; i < 30; i++)
    assert_int_equal(r.x[i], saved.x[i]);
  /* The saved registers are what is put back: the frame was built on a
   * copy. */
  assert_int_not_equal(memcmp(&r, &saved, sizeof r), 0);
}

static void test_aarch64_returned(void **state) {
  (void)state;
  const mt_arch_t *a = &mt_arch_aarch64;
  mt_arch_aarch64_regs_t r;
  pattern(&r, sizeof r);
  uint64_t ret = 77;
  r.pc = 0x400123; /* a fault elsewhere: not the call's end */
  assert_false(a->returned(&r, &ret));
  assert_int_equal(ret, 77);
  r.pc = 0;
  r.x[0] = 0x55aa;
  assert_true(a->returned(&r, &ret));
  assert_int_equal(ret, 0x55aa);
}

static void test_aarch64_code_addrs(void **state) {
  (void)state;
  const mt_arch_t *a = &mt_arch_aarch64;
  mt_arch_aarch64_regs_t r;
  pattern(&r, sizeof r);
  r.pc = 0x1000;
  r.x[30] = 0x2000;
  r.sp = 0x3000;
  uint64_t c[2];
  /* A leaf function's caller is in the link register: looked at too. */
  assert_int_equal(a->code_addrs(&r, c), 2);
  assert_int_equal(c[0], 0x1000);
  assert_int_equal(c[1], 0x2000);
  assert_int_equal(a->sp(&r), 0x3000);
}

static void test_aarch64_restart(void **state) {
  (void)state;
  const mt_arch_t *a = &mt_arch_aarch64;
  mt_arch_aarch64_regs_t r;
  pattern(&r, sizeof r);
  /* By the stop the kernel has put x0 back (orig_x0) and pc on the svc;
   * x8 says which call is issued again. */
  r.x[8] = 101; /* nanosleep */
  assert_true(a->restart_block(&r));
  r.x[8] = 115; /* clock_nanosleep */
  assert_true(a->restart_block(&r));
  r.x[8] = 63; /* read: restarted as it is */
  assert_false(a->restart_block(&r));
  r.x[8] = 22; /* epoll_pwait */
  assert_false(a->restart_block(&r));
}

/* A word on a stack pointing into the loader or the allocator is taken
 * for a return address only after a call instruction: glibc's startup
 * frames, just under main's, keep the loader's _dl_audit_preinit (a
 * function's first instruction, after a branch), which made a main thread
 * near its stack's start busy at every stop (seen on an aarch64 kernel,
 * tests/cross/vm-aarch64.sh: at_sve could never be attached to). */
static void test_aarch64_after_call(void **state) {
  (void)state;
  int (*after)(uint32_t) = mt_arch_aarch64.after_call;
  assert_non_null(after);
  assert_true(after(0x94000010u));  /* bl .+64 */
  assert_true(after(0x97fffff0u));  /* bl .-64 */
  assert_true(after(0xd63f0060u));  /* blr x3 */
  assert_true(after(0xd63f0a3fu));  /* blraaz x17 */
  assert_true(after(0xd63f0e3fu));  /* blrabz x17 */
  assert_true(after(0xd73f0a30u));  /* blraa x17, x16 */
  assert_true(after(0xd73f0e30u));  /* blrab x17, x16 */
  assert_false(after(0x17ffffd8u)); /* b .-160: _dl_audit_preinit's before */
  assert_false(after(0xa9bb7bfdu)); /* stp x29, x30, [sp, #-80]! */
  assert_false(after(0xd65f03c0u)); /* ret */
  assert_false(after(0xd61f0220u)); /* br x17 */
  assert_false(after(0xd503201fu)); /* nop */
  assert_false(after(0xd4000001u)); /* svc #0 */
  assert_false(after(0x00000000u));
  /* x86-64 takes every such word (its calls have many lengths). */
  assert_null(mt_arch_x86_64.after_call);
}

/* An SME header: size, max_size, vl, max_vl, flags. */
static void sme_hdr(unsigned char *h, uint32_t size, uint16_t flags) {
  uint32_t max = 1 << 16;
  uint16_t vl = 64;
  memset(h, 0, 16);
  memcpy(h, &size, 4);
  memcpy(h + 4, &max, 4);
  memcpy(h + 8, &vl, 2);
  memcpy(h + 10, &vl, 2);
  memcpy(h + 12, &flags, 2);
}

/* SME's state the calls would not keep: a thread in streaming mode
 * (NT_ARM_SSVE with SVE's registers after its header) or with ZA live
 * (NT_ARM_ZA with rows after its header) is not called on. Off, the
 * kernel gives the header alone, or the FP/SIMD registers (flags 0). */
static void test_aarch64_live_state(void **state) {
  (void)state;
  const mt_arch_t *a = &mt_arch_aarch64;
  unsigned char h[16];
  assert_int_equal(a->live[0].type, 0x40b); /* NT_ARM_SSVE */
  assert_int_equal(a->live[1].type, 0x40c); /* NT_ARM_ZA */
  assert_int_equal(a->live[0].size, 16);
  assert_int_equal(a->live[1].size, 16);
  sme_hdr(h, 16 + 34 * 64, 1); /* streaming: SVE_PT_REGS_SVE */
  assert_true(a->live_state(0x40b, h, 16));
  assert_false(a->live_state(0x40b, h, 12)); /* short: not read */
  sme_hdr(h, 16 + 34 * 64, 1 | 2);           /* and SVE_PT_VL_INHERIT */
  assert_true(a->live_state(0x40b, h, 16));
  sme_hdr(h, 16 + 528, 0); /* not streaming: the FP/SIMD registers */
  assert_false(a->live_state(0x40b, h, 16));
  sme_hdr(h, 16, 1); /* not streaming: the header alone */
  assert_false(a->live_state(0x40b, h, 16));
  sme_hdr(h, 16 + 64 * 64, 0); /* ZA live: vl rows of vl bytes */
  assert_true(a->live_state(0x40c, h, 16));
  sme_hdr(h, 16, 0); /* ZA off */
  assert_false(a->live_state(0x40c, h, 16));
  /* x86-64 has none. */
  assert_int_equal(mt_arch_x86_64.live[0].type, 0);
  assert_int_equal(mt_arch_x86_64.live[1].type, 0);
}

/* A return address signed with a pointer authentication code (PAC in
 * the bits NT_ARM_PAC_MASK's insn_mask names, here 54..48 of a 48-bit
 * address space) is looked at as the address it is: without that, a
 * thread whose frames keep signed return addresses into malloc (code
 * built with -mbranch-protection) was never found busy (the aarch64 VM's
 * at_pac). */
static void test_pac_strip(void **state) {
  (void)state;
  uint64_t mask = 0x007f000000000000ull, ra = 0x0000ffff8f95ea78ull;
  assert_int_equal(mt_arch_aarch64.pac_type, 0x406); /* NT_ARM_PAC_MASK */
  assert_int_equal(mt_arch_x86_64.pac_type, 0);
  assert_int_equal(mt_inj_strip(ra | 0x0035000000000000ull, mask), ra);
  assert_int_equal(mt_inj_strip(ra, mask), ra);
  /* The top byte (a tag) is never a user code address's. */
  assert_int_equal(mt_inj_strip(ra | 0x5a7f000000000000ull, mask), ra);
  /* No PAC (mask 0, x86-64): the word as it is. */
  assert_int_equal(mt_inj_strip(ra | 0x0035000000000000ull, 0),
                   ra | 0x0035000000000000ull);
}

/* The stack search through frame records (aarch64): a stale return
 * address into a busy range in a frame's locals (the lazy binder's, in
 * the aarch64 VM: at_alloc's and at_cxx's main thread busy at every stop)
 * no longer counts; a record's does, signed or not; a chain that is not
 * one (-1) sends the search back to every word. */
static void test_frames_busy(void **state) {
  (void)state;
  const mt_inj_range_t busy = {0x9000, 0xa000};
  static mt_inj_t inj;
  mt_inj_init(&inj, 0, &busy, 1);
  uint64_t w[64] = {0}, sp = 0x1000, pac = 0x007f000000000000ull;
  assert_non_null(mt_arch_aarch64.frame);
  assert_null(mt_arch_x86_64.frame);
  /* Records at 0x1010 and 0x1040, the outermost (its caller's record 0). */
  w[2] = 0x1040, w[3] = 0x5000;
  w[8] = 0, w[9] = 0x5004;
  w[5] = 0x9004; /* stale, in the first frame's locals */
  assert_int_equal(mt_inj_frames_busy(&inj, w, 64, sp, 0x1010, pac), 0);
  w[9] = 0x9004; /* the second frame returns into the busy range */
  assert_int_equal(mt_inj_frames_busy(&inj, w, 64, sp, 0x1010, pac), 1);
  w[9] = 0x0035000000009004ull; /* the same, signed */
  assert_int_equal(mt_inj_frames_busy(&inj, w, 64, sp, 0x1010, pac), 1);
  assert_int_equal(mt_inj_frames_busy(&inj, w, 64, sp, 0x1010, 0), 0);
  w[9] = 0x5004;
  /* The chain leaves what was read: what it holds was searched. */
  w[8] = 0x2000;
  assert_int_equal(mt_inj_frames_busy(&inj, w, 64, sp, 0x1010, pac), 0);
  w[8] = 0;
  /* No chain: misaligned, below sp, going down, no return address. */
  assert_int_equal(mt_inj_frames_busy(&inj, w, 64, sp, 0x1018, pac), -1);
  assert_int_equal(mt_inj_frames_busy(&inj, w, 64, sp, 0x0ff0, pac), -1);
  w[2] = 0x1000;
  assert_int_equal(mt_inj_frames_busy(&inj, w, 64, sp, 0x1010, pac), -1);
  w[2] = 0x1040, w[9] = 0;
  assert_int_equal(mt_inj_frames_busy(&inj, w, 64, sp, 0x1010, pac), -1);
}

static void test_x86_64(void **state) {
  (void)state;
  const mt_arch_t *a = &mt_arch_x86_64;
  assert_int_equal(a->regs_size, 27 * 8);
  assert_int_equal(a->machine, EM_X86_64);
  assert_int_equal(a->sysno_type, 0);
  mt_arch_x86_64_regs_t saved, r;
  pattern(&saved, sizeof saved);
  saved.eflags = 0x246 | 0x400 | 0x100;
  saved.orig_rax = 7;
  r = saved;
  uint64_t room = 0x7ffd00001000 - 64 - 5;
  uint64_t push = a->call_frame(&r, 0x401000, 1, 2, room);
  /* The return address 0 is pushed at rsp, 8 past a 16-byte boundary. */
  assert_int_equal(push, r.rsp);
  assert_int_equal(r.rsp % 16, 8);
  assert_true(r.rsp < room);
  assert_int_equal(r.rip, 0x401000);
  assert_int_equal(r.rdi, 1);
  assert_int_equal(r.rsi, 2);
  assert_int_equal(r.rax, 0);
  assert_int_equal(r.orig_rax, (uint64_t)-1);
  assert_int_equal(r.eflags, 0x246);
  assert_int_equal(r.rbx, saved.rbx);
  assert_int_equal(r.r15, saved.r15);
  uint64_t c[2], ret = 0;
  assert_int_equal(a->code_addrs(&r, c), 1);
  assert_int_equal(c[0], 0x401000);
  r.rip = 0;
  r.rax = 9;
  assert_true(a->returned(&r, &ret));
  assert_int_equal(ret, 9);
  /* nanosleep interrupted: -ERESTART_RESTARTBLOCK in rax. */
  r.orig_rax = 35;
  r.rax = (uint64_t)-516;
  assert_true(a->restart_block(&r));
  r.rax = (uint64_t)-512; /* -ERESTARTSYS */
  assert_false(a->restart_block(&r));
  r.orig_rax = (uint64_t)-1; /* not in a call */
  r.rax = (uint64_t)-516;
  assert_false(a->restart_block(&r));
}

static void test_got_relocs(void **state) {
  (void)state;
  assert_true(ms__got_slot_reloc(EM_AARCH64, R_AARCH64_JUMP_SLOT));
  assert_true(ms__got_slot_reloc(EM_AARCH64, R_AARCH64_GLOB_DAT));
  assert_int_equal(R_AARCH64_JUMP_SLOT, 1026);
  assert_int_equal(R_AARCH64_GLOB_DAT, 1025);
  /* Data, relative, TLS and the other processor's numbers are not. */
  assert_false(ms__got_slot_reloc(EM_AARCH64, 257));  /* ABS64 */
  assert_false(ms__got_slot_reloc(EM_AARCH64, 1027)); /* RELATIVE */
  assert_false(ms__got_slot_reloc(EM_AARCH64, 1031)); /* TLSDESC */
  assert_false(ms__got_slot_reloc(EM_AARCH64, R_X86_64_JUMP_SLOT));
  assert_false(ms__got_slot_reloc(EM_AARCH64, R_X86_64_GLOB_DAT));
  assert_true(ms__got_slot_reloc(EM_X86_64, R_X86_64_JUMP_SLOT));
  assert_true(ms__got_slot_reloc(EM_X86_64, R_X86_64_GLOB_DAT));
  assert_false(ms__got_slot_reloc(EM_X86_64, R_X86_64_64));
  assert_false(ms__got_slot_reloc(EM_X86_64, R_AARCH64_JUMP_SLOT));
  assert_false(ms__got_slot_reloc(0, R_X86_64_JUMP_SLOT));
#if defined(__x86_64__)
  assert_int_equal(MS__GOT_MACHINE, EM_X86_64);
  assert_ptr_equal(MT_ARCH_HOST, &mt_arch_x86_64);
#elif defined(__aarch64__)
  assert_int_equal(MS__GOT_MACHINE, EM_AARCH64);
  assert_ptr_equal(MT_ARCH_HOST, &mt_arch_aarch64);
#endif
}

/* An ELF object in this process's memory, as rsym.c reads one from
 * another's: its header, PT_DYNAMIC, a hash table and one function. */
static struct {
  Elf64_Ehdr eh;
  Elf64_Phdr ph;
  Elf64_Dyn dyn[5];
  uint32_t hash[5];
  Elf64_Sym sym[2];
  char str[16];
} img;

static int load_img(unsigned machine, uint64_t *dlopen_at) {
  memset(&img, 0, sizeof img);
  memcpy(img.eh.e_ident, ELFMAG, SELFMAG);
  img.eh.e_ident[EI_CLASS] = ELFCLASS64;
  img.eh.e_machine = (Elf64_Half)machine;
  img.eh.e_phoff = offsetof(__typeof__(img), ph);
  img.eh.e_phentsize = sizeof(Elf64_Phdr);
  img.eh.e_phnum = 1;
  img.ph.p_type = PT_DYNAMIC;
  img.ph.p_vaddr = offsetof(__typeof__(img), dyn);
  img.ph.p_memsz = sizeof img.dyn;
  img.dyn[0].d_tag = DT_SYMTAB;
  img.dyn[0].d_un.d_ptr = (uintptr_t)img.sym;
  img.dyn[1].d_tag = DT_STRTAB;
  img.dyn[1].d_un.d_ptr = (uintptr_t)img.str;
  img.dyn[2].d_tag = DT_STRSZ;
  img.dyn[2].d_un.d_val = sizeof img.str;
  img.dyn[3].d_tag = DT_HASH;
  img.dyn[3].d_un.d_ptr = (uintptr_t)img.hash;
  img.hash[0] = 1; /* buckets */
  img.hash[1] = 2; /* symbols */
  strcpy(img.str + 1, "dlopen");
  img.sym[1].st_name = 1;
  img.sym[1].st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC);
  img.sym[1].st_shndx = 1;
  img.sym[1].st_value = 0x1000;
  img.sym[1].st_size = 16;
  mt_rsyms_t rs;
  int r = mt_rsym_load(getpid(), (uintptr_t)&img, &rs);
  if (r == 0) {
    *dlopen_at = mt_rsym_find(&rs, "dlopen");
    mt_rsym_free(&rs);
  }
  return r;
}

/* A C library for another processor (a program qemu-user runs) is not
 * one to call into: rsym refuses it, and attach says it found no
 * symbols. */
static void test_rsym_machine(void **state) {
  (void)state;
#if defined(MT_ARCH_HOST)
  uint64_t at = 0;
  assert_int_equal(load_img(MT_ARCH_HOST->machine, &at), 0);
  assert_int_equal(at, (uintptr_t)&img + 0x1000);
  unsigned other = MT_ARCH_HOST->machine == EM_X86_64 ? EM_AARCH64 : EM_X86_64;
  assert_int_equal(load_img(other, &at), MS_EPROTO);
#else
  skip();
#endif
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_aarch64_layout),
      cmocka_unit_test(test_aarch64_call_frame),
      cmocka_unit_test(test_aarch64_returned),
      cmocka_unit_test(test_aarch64_code_addrs),
      cmocka_unit_test(test_aarch64_restart),
      cmocka_unit_test(test_aarch64_after_call),
      cmocka_unit_test(test_aarch64_live_state),
      cmocka_unit_test(test_pac_strip),
      cmocka_unit_test(test_frames_busy),
      cmocka_unit_test(test_x86_64),
      cmocka_unit_test(test_got_relocs),
      cmocka_unit_test(test_rsym_machine),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
