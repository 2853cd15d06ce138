/* pl_pattern.c linked with -ljemalloc (tests/progs/progs.mk): the same
 * pattern must count the same on jemalloc. jemalloc has no pvalloc. */
#define PL_NO_PVALLOC 1
#include "pl_pattern.c"
