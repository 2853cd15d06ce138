/* pv_first.c with jemalloc linked in statically (tests/progs/progs.mk):
 * the program defines malloc itself, ahead of the preload's. */
#include "pv_first.c"
