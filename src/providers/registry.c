/*
 * registry.c - the list of providers and their cadence (see provider.h).
 * The allocator providers land in their own issue; until then the engine's
 * own figures are all a snapshot has.
 */
#include "core/provider.h"

void ms__providers_fill(ms_snapshot_t *snap) {
  (void)snap;
}
