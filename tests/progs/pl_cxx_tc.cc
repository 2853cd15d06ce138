// pl_cxx.cc linked with -ltcmalloc (tests/progs/progs.mk): gperftools'
// own operator new/delete must balance under the preload, and the program
// must start at all (its size lookup once re-entered operator new).
#include "pl_cxx.cc"
