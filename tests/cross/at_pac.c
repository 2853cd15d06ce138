/*
 * at_pac.c - a program whose one thread waits in read(2) with a return
 * address into malloc in its stack, for the aarch64 VM
 * (tests/cross/vm_attach.c). The address is the one after a BL in
 * malloc's first instructions. argv[1]:
 *   record  it is the return address of a live frame's record (the
 *           waiting function's own, put back after the wait), signed with
 *           a pointer authentication code as code built with
 *           -mbranch-protection signs them (pacia1716: key A; a no-op
 *           without PAC): memtop attach must strip the code
 *           (NT_ARM_PAC_MASK) and find the thread busy;
 *   local   it is plain, in a local array of a live frame (as a stale one
 *           a earlier call at that depth left): no record holds it, and
 *           memtop attach, following the records, finds the thread clear.
 * Prints "ready PID pac 1" (0: the processor signs nothing), then waits
 * until EOF and exits 0; "no bl" and exits 1 if malloc's first 4 KiB has
 * no BL.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The address after malloc's first BL, signed if sign (and in *pac
 * whether that changed it). */
static __attribute__((noinline)) uint64_t malloc_ra(int sign, int *pac) {
  const uint32_t *code = (const uint32_t *)dlsym(RTLD_DEFAULT, "malloc");
  uint64_t ra = 0;
  for (int i = 0; code && i < 1024 && !ra; i++)
    if ((code[i] & 0xfc000000u) == 0x94000000u)
      ra = (uint64_t)(uintptr_t)&code[i + 1];
  if (!ra || !sign)
    return ra;
  register uint64_t x17 __asm__("x17") = ra;
  register uint64_t x16 __asm__("x16");
  __asm__ volatile("mov %0, sp\n hint #8" : "=&r"(x16), "+r"(x17));
  *pac = x17 != ra;
  return x17;
}

static void wait_eof(void) {
  char c;
  while (read(0, &c, 1) > 0) {
  }
}

/* Waits with its frame record's return address replaced by ra. */
static __attribute__((noinline)) void wait_record(uint64_t ra) {
  volatile uint64_t *rec = __builtin_frame_address(0);
  uint64_t keep = rec[1];
  rec[1] = ra;
  wait_eof();
  rec[1] = keep;
}

/* Waits with ra in a local array. */
static __attribute__((noinline)) int wait_local(uint64_t ra) {
  volatile uint64_t local[8] = {0, 0, ra, 0, 0, 0, 0, 0};
  wait_eof();
  return local[2] == ra;
}

int main(int argc, char **argv) {
  int record = argc > 1 && strcmp(argv[1], "record") == 0, pac = 0;
  uint64_t ra = malloc_ra(record, &pac);
  if (!ra) {
    printf("no bl\n");
    return 1;
  }
  printf("ready %d pac %d\n", (int)getpid(), pac);
  fflush(stdout);
  if (record)
    wait_record(ra);
  else if (!wait_local(ra))
    return 2;
  return 0;
}
