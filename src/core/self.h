/*
 * self.h - what libmemstats itself holds in the process (internal; see
 * self.c): its agent thread's stack, the mappings it makes, its own
 * static tables. memtop reports it apart (MemstatsSelf) and keeps it out
 * of the program's classes where it can tell it apart.
 */
#ifndef MS_CORE_SELF_H
#define MS_CORE_SELF_H

#include <stdint.h>

/* The agent's thread, by its pthread_t (the address of glibc's thread
 * descriptor, which lies inside the thread's stack mapping): the stack
 * mapping that holds it is the library's, not the program's. 0: none. */
void ms__self_set_thread(uintptr_t thread);
/* Whether [start, end) holds the agent thread's descriptor. */
int ms__self_stack(uintptr_t start, uintptr_t end);
/* Whether the object loaded at base (dladdr's dli_fbase) is this library
 * (libmemstats.so, or the preload that carries it). */
int ms__self_object(const void *base);
/* The library's own writable segments (data and bss: the mappings table,
 * the read buffers): their size in *mapped, their resident bytes
 * returned. */
uint64_t ms__self_static(uint64_t *mapped);

#endif
