# tests/progs/progs.mk - per-program build settings for tests/progs/,
# included by the Makefile. PROG_LIBS_<name> adds libraries to one program.

# ---- the preload's target programs (pl_*) ----------------------------------
# They run under LD_PRELOAD=libmemstats-preload.so and read their figures
# through dlsym(RTLD_DEFAULT, "ms_snapshot_read") (tests/progs/pl_snap.h).
# They are not linked with -lmemstats: libmemstats.so would be a second
# engine in the process beside the preload's, so the program's public calls
# would go to one copy and the library's own constructors to the other.
# They are never built with a sanitizer either, since a sanitizer's runtime
# must come first in the process and the preload must be first too.
# Under a sanitizer build (make asan) the preload in $(BUILD) is itself
# instrumented and cannot be injected into the uninstrumented pl_* programs:
# the tests then use a plain preload built beside it, in $(BUILD)/plain.
ifneq ($(SAN),)
PL_PRELOAD := $(BUILD)/plain/libmemstats-preload.so
# The live-view test (test_tmux) runs the demo under the preload: a plain
# one too.
$(PL_PRELOAD): $(LIB_SRCS) $(PRELOAD_SRCS) contrib/demo.c
	$(MAKE) BUILD=$(BUILD)/plain SAN= OPT='$(OPT)' $(BUILD)/plain/libmemstats-preload.so $(BUILD)/plain/contrib/demo
endif

# ---- the providers' target programs (pv_*) ----------------------------------
# Like the pl_* programs: run under the preload, not linked with -lmemstats,
# each linked with the allocator whose provider it checks (tests/progs/
# pv_check.h; tests/integration/test_providers.c runs them).
PROG_LIBS_pv_jemalloc := -ljemalloc
PROG_LIBS_pv_tcmalloc := -ltcmalloc
PROG_LIBS_pv_mimalloc := -lmimalloc
PROG_LIBS_pv_boehm := -lgc
# pv_first: linked with no allocator, run with one preloaded ahead of the
# preload; pv_first_static: the same program with jemalloc linked in
# statically, so the program itself defines malloc (and exports mallctl,
# -rdynamic, for the provider to find).
PROG_LIBS_pv_first_static := -rdynamic -Wl,-Bstatic -ljemalloc_pic -Wl,-Bdynamic -lstdc++ -lm
$(BUILD)/progs/pv_%: tests/progs/pv_%.c tests/progs/pv_check.h $(PRELOAD_SO) $(PL_PRELOAD)
	@mkdir -p $(@D)
	$(CC) $(PL_CFLAGS) -Itests -Itests/progs -o $@ $< -ldl -pthread $(PROG_LIBS_pv_$*)

PROG_LIBS_pl_pattern_je := -ljemalloc
PROG_LIBS_pl_cxx_je := -ljemalloc
PROG_LIBS_pl_cxx_tc := -ltcmalloc
PROG_LIBS_pl_cxx_mi := -lmimalloc
PROG_LIBS_pl_threads_fork := -lpthread
PROG_LIBS_pl_unseen_je := -ljemalloc
PROG_LIBS_pl_startup_je := -ljemalloc
PROG_LIBS_pl_je_view := -ljemalloc
PL_CFLAGS = $(filter-out $(SANFLAGS),$(BASE_CFLAGS))

$(BUILD)/progs/pl_%: tests/progs/pl_%.c tests/progs/pl_snap.h $(PRELOAD_SO) $(PL_PRELOAD)
	@mkdir -p $(@D)
	$(CC) $(PL_CFLAGS) -Itests -Itests/progs -o $@ $< -ldl -pthread $(PROG_LIBS_pl_$*)
$(BUILD)/progs/pl_%: tests/progs/pl_%.cc tests/progs/pl_snap.h $(PRELOAD_SO) $(PL_PRELOAD)
	@mkdir -p $(@D)
	$(CXX) $(filter-out -std=gnu11 -Wstrict-prototypes -Wmissing-prototypes,$(PL_CFLAGS)) $(CXX_STD) -Itests -Itests/progs -o $@ $< -ldl -pthread $(PROG_LIBS_pl_$*)

# ---- jemalloc without the preload (pj_*) -------------------------------------
# Linked with -lmemstats (the Makefile's $(BUILD)/progs/% rule) and with
# -ljemalloc: nothing tracks objects, so the snapshot's size classes are
# jemalloc's own (tests/integration/test_providers.c runs them).
PROG_LIBS_pj_bins := -ljemalloc

# ---- allocators the programs run on (lib*.so) ------------------------------
# Loaded with LD_PRELOAD after the preload, like libjemalloc.so.2; plain
# (never sanitized) for the same reason as the pl_* programs.
$(BUILD)/progs/lib%.so: tests/progs/lib%.c
	@mkdir -p $(@D)
	$(CC) $(PL_CFLAGS) -shared -fvisibility=hidden -o $@ $<

$(BUILD)/progs/lib%.so: tests/progs/lib%.cc
	@mkdir -p $(@D)
	$(CXX) $(filter-out -std=gnu11 -Wstrict-prototypes -Wmissing-prototypes,$(PL_CFLAGS)) $(CXX_STD) -shared -fvisibility=hidden -o $@ $<

# ---- the unwinder's stacks (test_unwind) ----------------------------------
# libuw.c's shapes without frame pointers (libuw.so, -O2's default) and
# with them; libuw_cxx.cc's C++ frames. test_unwind loads all three.
$(BUILD)/progs/libuw_fp.so: tests/progs/libuw.c
	@mkdir -p $(@D)
	$(CC) $(PL_CFLAGS) -fno-omit-frame-pointer -shared -fvisibility=hidden -o $@ $<
$(BUILD)/tests/test_unwind: $(BUILD)/progs/libuw.so $(BUILD)/progs/libuw_fp.so $(BUILD)/progs/libuw_cxx.so

$(BUILD)/progs/pv_first_static: tests/progs/pv_first.c
# pl_unseen_je is pl_unseen.c linked with jemalloc: rebuilt when it changes.
$(BUILD)/progs/pl_unseen_je: tests/progs/pl_unseen.c

# ---- the ABI: a caller built against 0.1's header ------------------------
# tests/data/abi/0.1/memstats.h is the header as 0.1 shipped it; the
# program links this build's libmemstats.so (test_abi runs it).
$(BUILD)/progs/abi_old: tests/progs/abi_old.c tests/data/abi/0.1/memstats.h $(LIB_SO)
	@mkdir -p $(@D)
	$(CC) $(filter-out -Iinclude,$(BASE_CFLAGS)) -Itests/data/abi/0.1 -o $@ $< -L$(BUILD) -Wl,-rpath,'$$ORIGIN/..' -lmemstats -ldl

# ---- the heap profile's program (pl_prof) ----------------------------------
# -rdynamic: it names its own functions' ranges (dladdr1) for the test.
PROG_LIBS_pl_prof := -rdynamic

# ---- memtop serve's Boehm target (sv_gc) ------------------------------------
# Runs under the preload like the pv_* programs (test_serve), so built like
# them: not linked with -lmemstats, never sanitized.
$(BUILD)/progs/sv_gc: tests/progs/sv_gc.c $(PRELOAD_SO) $(PL_PRELOAD)
	@mkdir -p $(@D)
	$(CC) $(PL_CFLAGS) -o $@ $< -ldl -pthread -lgc

# ---- linked with the preload (su_*) ------------------------------------------
# su_report: the preload is one of its DT_NEEDED (as /etc/ld.so.preload
# would put it in every program), found by an absolute RUNPATH, which the
# loader honours in a setuid program (it ignores LD_PRELOAD,
# LD_LIBRARY_PATH and $ORIGIN there): test_preload makes a setuid-root
# copy of it. The preload's soname is libmemstats.so.0, so its copy in
# $(BUILD)/progs/su-lib goes by that name. Not built with a sanitizer,
# like the pl_* programs.
SU_PRELOAD = $(if $(PL_PRELOAD),$(PL_PRELOAD),$(PRELOAD_SO))
$(BUILD)/progs/su_%: tests/progs/su_%.c $(PRELOAD_SO) $(PL_PRELOAD)
	@mkdir -p $(@D)/su-lib
	cp $(SU_PRELOAD) $(@D)/su-lib/libmemstats.so.0
	$(CC) $(PL_CFLAGS) -o $@ $< $(@D)/su-lib/libmemstats.so.0 -Wl,-rpath,$(abspath $(@D)/su-lib) -Wl,--enable-new-dtags -ldl -pthread

# ---- memtop attach's targets (at_*) ------------------------------------------
# Started bare: never linked with libmemstats (the pattern rule's -lmemstats
# would make them run the library from their start), never sanitized (as
# the pl_* programs: memtop attach loads the plain preload into them under
# a sanitizer build), and at_static with -static, where the C library's
# archive is installed (Debian: libc6-dev); test_attach skips its refusal
# where it is not.
$(BUILD)/progs/at_alloc: tests/progs/at_alloc.c $(PL_PRELOAD)
	@mkdir -p $(@D)
	$(CC) $(PL_CFLAGS) -o $@ $< -pthread
$(BUILD)/progs/at_cxx: tests/progs/at_cxx.cc $(PL_PRELOAD)
	@mkdir -p $(@D)
	$(CXX) $(filter-out -std=gnu11 -Wstrict-prototypes -Wmissing-prototypes,$(PL_CFLAGS)) $(CXX_STD) -o $@ $< -pthread
TEST_PROGS += $(BUILD)/progs/at_static
$(BUILD)/progs/at_static: tests/progs/at_alloc.c
	@mkdir -p $(@D)
	-$(CC) $(PL_CFLAGS) -static -DAT_STATIC -o $@ $< -pthread

# ---- the process trees' targets (tr_*) ----------------------------------------
# Run under `memtop run`'s preload (tests/integration/test_trees.c), so built
# as the pl_* programs are: never linked with libmemstats, never sanitized
# (under make asan the tests give them the plain preload).
$(BUILD)/progs/tr_%: tests/progs/tr_%.c $(PL_PRELOAD)
	@mkdir -p $(@D)
	$(CC) $(PL_CFLAGS) -o $@ $< -pthread
