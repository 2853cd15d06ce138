/*
 * got_reloc.h - which relocations fill the GOT slots memtop attach
 * --track rewrites (got.c), by processor: pure, so that
 * tests/unit/test_attach_arch.c checks every processor's on any host.
 */
#ifndef MS_PRELOAD_GOT_RELOC_H
#define MS_PRELOAD_GOT_RELOC_H

#include <elf.h>

#ifndef EM_AARCH64
#define EM_AARCH64 183
#endif
#ifndef R_AARCH64_GLOB_DAT
#define R_AARCH64_GLOB_DAT 1025
#define R_AARCH64_JUMP_SLOT 1026
#endif

/* Whether a relocation of type, in an object built for machine (its ELF
 * e_machine), writes a symbol's address into a GOT slot the program
 * calls or loads through: the PLT's (JUMP_SLOT) or an address taken
 * (GLOB_DAT). Not the ones that write into data (R_X86_64_64,
 * R_AARCH64_ABS64) nor TLS descriptors. */
static inline int ms__got_slot_reloc(unsigned machine, unsigned type) {
  switch (machine) {
  case EM_X86_64:
    return type == R_X86_64_JUMP_SLOT || type == R_X86_64_GLOB_DAT;
  case EM_AARCH64:
    return type == R_AARCH64_JUMP_SLOT || type == R_AARCH64_GLOB_DAT;
  default:
    return 0;
  }
}

/* The host's machine, where got.c knows its relocations and its dlopen
 * stub; 0 elsewhere (attach --track refuses). */
#if defined(__x86_64__)
#define MS__GOT_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define MS__GOT_MACHINE EM_AARCH64
#else
#define MS__GOT_MACHINE 0
#endif

#endif
