// pl_cxx.cc linked with -ljemalloc (tests/progs/progs.mk): jemalloc's own
// operator new/delete must balance under the preload too.
#include "pl_cxx.cc"
