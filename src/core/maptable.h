/*
 * maptable.h - the table of the anonymous mappings a program makes through
 * the preload's mmap interposer, with who made each (internal; see
 * maptable.c). What they are and how they count is read from it by the
 * mappings reader (src/providers/mappings.h).
 */
#ifndef MS_CORE_MAPTABLE_H
#define MS_CORE_MAPTABLE_H

#include <stddef.h>
#include <stdint.h>

/* ---- the writers: the preload's mmap interposer. Lock-free and
 * allocation-free: any thread, any time. */

/* A private anonymous mapping [addr, addr+len) was made by code at ra (the
 * caller's return address). */
void ms__map_note(void *addr, size_t len, const void *ra);
/* [addr, addr+len) is about to be unmapped (or mapped over): whatever the
 * table holds of it goes. Called before the real munmap, so the range
 * cannot be handed to another thread's mmap while it is still listed. */
void ms__map_forget(void *addr, size_t len);
/* The table's caller address of the entry holding addr, or NULL. */
const void *ms__map_owner(void *addr);
/* The allocator's malloc (the preload's next one): mappings made from its
 * object are the allocator's own, counted by its provider. */
void ms__map_set_allocator(const void *malloc_fn);

/* ---- the readers (a snapshot's, under the reader lock). A slot may
 * change while it is read: the figures could then be wrong, never the
 * memory touched (nothing dereferences a listed address). */

/* Slots [0, ms__map_used()) have been used (the number never drops). */
unsigned ms__map_used(void);
/* Slot i's range [*start, *end) and its caller's address; 0 if the slot
 * holds none now. */
int ms__map_get(unsigned i, uintptr_t *start, uintptr_t *end, const void **ra);
/* 1 once a mapping found no free slot: some are not listed. */
int ms__map_lost(void);
/* What ms__map_set_allocator() was given, or NULL. */
const void *ms__map_allocator(void);

#endif
