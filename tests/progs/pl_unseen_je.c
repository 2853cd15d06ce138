/* pl_unseen.c linked with -ljemalloc (tests/progs/progs.mk): memory
 * outside the allocator next to jemalloc's, whose own mappings (made
 * through the interposed mmap too) must not be counted twice. */
#include "pl_unseen.c"
