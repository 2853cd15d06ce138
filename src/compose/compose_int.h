/*
 * compose_int.h - the parts of a snapshot's composition in files of their
 * own (internal to src/compose/).
 */
#ifndef MS_COMPOSE_COMPOSE_INT_H
#define MS_COMPOSE_COMPOSE_INT_H

#include "memstats.h"

/* Adds the stacks and the foreign mappings to *snap (offheap.c): their size
 * to StackSys and OtherSys, resident stack bytes to StackInuse, the rest of
 * their size to StackReleased, OtherReleased and OffHeapReleased; appends
 * "mappings" (and "python" when the program's Python object allocator has
 * arenas) to snap->providers. The mappings are read at the reader's own
 * cadence (ms__mappings_update, src/providers/mappings.h); between two
 * reads the last figures are used, marked estimated once older than
 * MS__MAPS_EXACT_NS. With cached_only nothing is read. With heap_backing
 * (the chosen malloc provider cannot tell backed memory from committed
 * memory: mimalloc) the allocator's own mappings are measured too, and the
 * heap figures its provider set are re-split by their resident pages
 * (HeapReleased = HeapSys - backed, HeapInuse at most backed, HeapIdle the
 * rest), estimated; without the preload no such mapping is listed and the
 * provider's figures stand. Called by ms_snapshot_read() with the reader
 * lock held, after the providers. */
void ms__offheap_fill(ms_snapshot_t *snap, int cached_only, int heap_backing);

#endif
