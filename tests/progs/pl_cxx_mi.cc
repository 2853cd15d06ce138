// pl_cxx.cc linked with -lmimalloc (tests/progs/progs.mk): mimalloc's own
// operator new/delete must balance under the preload too.
#include "pl_cxx.cc"
