/*
 * at_sve.c - a program whose one thread holds known values in every
 * register memtop attach must put back, for the aarch64 VM
 * (tests/cross/vm_attach.c): SVE's z0-z29 (whole, at the vector length it
 * runs with), p0-p6, p8-p14 and FFR, FPCR (rounding toward zero), and x19-x28.
 * It loops in user code with no system call, so the kernel keeps its SVE
 * state live (a system call would discard all but the FP/SIMD part):
 * memtop attach stops it there, takes NT_ARM_SVE whole, makes its calls
 * (dlopen, which uses the vector registers) and puts it back. The loop
 * checks every held register against its value each round, with z30,
 * z31, p7 (all true), p15 and x9-x13 as scratch, until SIGUSR1 sets the flag it
 * reads (the kernel saves and restores SVE state around the handler), or
 * about two minutes of the virtual counter have passed.
 *
 * Prints "ready PID vl BYTES", then "held ROUNDS" and exits 0, or
 * "changed WHAT" and exits 1 (z N, p N, ffr, fpcr, x N), or "timeout"
 * and exits 2. Built with -march=armv8.2-a+sve; on a processor without
 * SVE it says "no sve" and exits 3.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#ifndef HWCAP_SVE
#define HWCAP_SVE (1 << 22)
#endif

/* Returns the rounds made (>= 0) or -(code): 100 + N z N, 200 + N p N,
 * 300 FFR, 301 FPCR, 400 + N x N, 1 the time ran out. */
int64_t sve_hold(volatile int *done, uint64_t ticks);

/* The values: zN.b = index(N * 7 + 3, N + 1); pN = ptrue with pattern
 * PAT_N and element size SZ_N; FFR = p5; xN = 0x5a5a0000 + N * 0x111. */
__asm__(".arch armv8.2-a+sve\n"
        ".text\n"
        ".globl sve_hold\n"
        ".type sve_hold, %function\n"
        "sve_hold:\n"
        "  stp x29, x30, [sp, #-160]!\n"
        "  mov x29, sp\n"
        "  stp x19, x20, [sp, #16]\n"
        "  stp x21, x22, [sp, #32]\n"
        "  stp x23, x24, [sp, #48]\n"
        "  stp x25, x26, [sp, #64]\n"
        "  stp x27, x28, [sp, #80]\n"
        "  stp d8, d9, [sp, #96]\n"
        "  stp d10, d11, [sp, #112]\n"
        "  stp d12, d13, [sp, #128]\n"
        "  stp d14, d15, [sp, #144]\n"
        "  mov x14, x0\n" /* done */
        "  mrs x15, cntvct_el0\n"
        "  add x15, x15, x1\n" /* the end, in counter ticks */
        "  mov x16, #0\n"      /* rounds */
        "  mrs x17, fpcr\n"    /* the caller's, put back at the end */
        "  orr x12, x17, #(3 << 22)\n"
        "  msr fpcr, x12\n"
        /* the values */
        "  .irp n, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,"
        "23,24,25,26,27,28,29\n"
        "  mov w12, #(\\n * 7 + 3)\n"
        "  mov w13, #(\\n + 1)\n"
        "  index z\\n\\().b, w12, w13\n"
        "  .endr\n"
        "  .irp n, 19,20,21,22,23,24,25,26,27,28\n"
        "  movz x\\n, #(\\n * 0x111)\n"
        "  movk x\\n, #0x5a5a, lsl #16\n"
        "  .endr\n"
        "  ptrue p0.b, vl1\n"
        "  ptrue p1.b, vl2\n"
        "  ptrue p2.h, vl3\n"
        "  ptrue p3.b, vl4\n"
        "  ptrue p4.s, vl5\n"
        "  ptrue p5.b, vl6\n"
        "  ptrue p6.h, vl7\n"
        "  ptrue p14.b, vl8\n"
        "  ptrue p8.b, vl16\n"
        "  ptrue p9.h, pow2\n"
        "  ptrue p10.b, mul3\n"
        "  ptrue p11.s, mul4\n"
        "  ptrue p12.d, all\n"
        "  ptrue p13.b, vl32\n"
        "  setffr\n"
        "  wrffr p5.b\n"
        "  ptrue p7.b\n"
        "1:\n"
        "  ldr w9, [x14]\n"
        "  cbnz w9, 8f\n"
        "  mrs x9, cntvct_el0\n"
        "  cmp x9, x15\n"
        "  b.hs 7f\n"
        "  add x16, x16, #1\n"
        "  .irp n, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,"
        "23,24,25,26,27,28,29\n"
        "  mov w12, #(\\n * 7 + 3)\n"
        "  mov w13, #(\\n + 1)\n"
        "  index z31.b, w12, w13\n"
        "  cmpne p15.b, p7/z, z\\n\\().b, z31.b\n"
        "  mov x0, #(-100 - \\n)\n"
        "  b.ne 9f\n"
        "  .endr\n"
        "  .macro chkp n, sz, pat\n"
        "  ptrue p15.\\sz, \\pat\n"
        "  eors p15.b, p7/z, p\\n\\().b, p15.b\n"
        "  mov x0, #(-200 - \\n)\n"
        "  b.ne 9f\n"
        "  .endm\n"
        "  chkp 0, b, vl1\n"
        "  chkp 1, b, vl2\n"
        "  chkp 2, h, vl3\n"
        "  chkp 3, b, vl4\n"
        "  chkp 4, s, vl5\n"
        "  chkp 5, b, vl6\n"
        "  chkp 6, h, vl7\n"
        "  chkp 14, b, vl8\n"
        "  chkp 8, b, vl16\n"
        "  chkp 9, h, pow2\n"
        "  chkp 10, b, mul3\n"
        "  chkp 11, s, mul4\n"
        "  chkp 12, d, all\n"
        "  chkp 13, b, vl32\n"
        "  .purgem chkp\n"
        "  rdffr p15.b\n"
        "  eors p15.b, p7/z, p15.b, p5.b\n"
        "  mov x0, #-300\n"
        "  b.ne 9f\n"
        "  mrs x9, fpcr\n"
        "  orr x12, x17, #(3 << 22)\n"
        "  cmp x9, x12\n"
        "  mov x0, #-301\n"
        "  b.ne 9f\n"
        "  .irp n, 19,20,21,22,23,24,25,26,27,28\n"
        "  movz x9, #(\\n * 0x111)\n"
        "  movk x9, #0x5a5a, lsl #16\n"
        "  cmp x\\n, x9\n"
        "  mov x0, #(-400 - \\n)\n"
        "  b.ne 9f\n"
        "  .endr\n"
        "  b 1b\n"
        "7:\n"
        "  mov x0, #-1\n"
        "  b 9f\n"
        "8:\n"
        "  mov x0, x16\n"
        "9:\n"
        "  msr fpcr, x17\n"
        "  ldp x19, x20, [sp, #16]\n"
        "  ldp x21, x22, [sp, #32]\n"
        "  ldp x23, x24, [sp, #48]\n"
        "  ldp x25, x26, [sp, #64]\n"
        "  ldp x27, x28, [sp, #80]\n"
        "  ldp d8, d9, [sp, #96]\n"
        "  ldp d10, d11, [sp, #112]\n"
        "  ldp d12, d13, [sp, #128]\n"
        "  ldp d14, d15, [sp, #144]\n"
        "  ldp x29, x30, [sp], #160\n"
        "  ret\n"
        ".size sve_hold, . - sve_hold\n"
        ".text\n");

static volatile int done;

static void on_usr1(int sig) {
  (void)sig;
  done = 1;
}

int main(void) {
  if (!(getauxval(AT_HWCAP) & HWCAP_SVE)) {
    printf("no sve\n");
    return 3;
  }
  signal(SIGUSR1, on_usr1);
  uint64_t vl, freq;
  __asm__ volatile(".arch armv8.2-a+sve\n rdvl %0, #1" : "=r"(vl));
  __asm__ volatile("mrs %0, cntfrq_el0" : "=r"(freq));
  printf("ready %d vl %u\n", (int)getpid(), (unsigned)vl);
  fflush(stdout);
  int64_t r = sve_hold(&done, freq * 120);
  if (r >= 0) {
    printf("held %lld\n", (long long)r);
    return 0;
  }
  if (r == -1) {
    printf("timeout\n");
    return 2;
  }
  r = -r;
  static const char *const what[] = {"z", "p", "ffr/fpcr", "x"};
  if (r == 300 || r == 301)
    printf("changed %s\n", r == 300 ? "ffr" : "fpcr");
  else
    printf("changed %s%lld\n", what[r / 100 - 1], (long long)(r % 100));
  return 1;
}
