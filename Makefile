# memtop / libmemstats - GNU make.
#
#   make                 build the library, the preload library and memtop
#   make check           build and run every test (unit, integration, fuzz
#                        corpus replay); the README's test command
#   make check-clang     the same suite built with clang (BUILD=build/clang)
#   make demo            install what is missing, build, watch the demo
#   make asan / tsan     the whole suite under Address+UB / Thread sanitizer
#   make bench           benchmarks, printed as ratios against a baseline
#   make fuzz            libFuzzer harnesses (FUZZ_SECONDS each)
#   make install         PREFIX (/usr/local) and DESTDIR honoured
#   make installcheck    a staged install (DESTDIR), its memtop and a
#                        pkg-config consumer of its libmemstats checked
#
# Sources are found by folder: each folder under src/ is a concern, and its
# .c files are built into the product that concern belongs to. Tests are
# found by name: tests/unit/test_*.c and tests/integration/test_*.c each
# become one cmocka binary.

CC ?= cc
CXX ?= c++
CLANG ?= clang
CLANGXX ?= clang++
PKG_CONFIG ?= pkg-config
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
DATADIR ?= $(PREFIX)/share
MANDIR ?= $(DATADIR)/man
# The preload has a directory of its own: it carries libmemstats' soname
# (see $(PRELOAD_SO)'s rule), and beside libmemstats.so.0 in LIBDIR
# ldconfig would pick one of the two for that name.
PRELOADDIR ?= $(LIBDIR)/memtop
DESTDIR ?=
BUILD ?= build
SAN ?=
WERROR ?=

# The version is the header's (MS_VERSION_STRING in include/memstats.h),
# written once: the library's file name, memstats.pc and memtop --version
# all read it from there (test_version checks the header agrees with itself
# and with this).
VERSION := $(shell sed -n 's/^\#define MS_VERSION_STRING "\([0-9.]*\)"$$/\1/p' include/memstats.h)
SOVERSION := 0

WARN := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
        -Wformat=2 -Wundef -Wwrite-strings -Wpointer-arith
ifneq ($(WERROR),)
WARN += -Werror
endif
OPT ?= -O2 -g
SANFLAGS := $(if $(SAN),-fsanitize=$(SAN) -fno-omit-frame-pointer,)
CPPFLAGS ?=
CFLAGS ?=
LDFLAGS ?=

# ---- hardening ----------------------------------------------------------------
# The flags Debian builds packages with (dpkg-buildflags, hardening=+all):
# stack protector, _FORTIFY_SOURCE=3, format-string errors, CET where the
# compiler has it, full RELRO (-z relro -z now), and memtop as a PIE. They
# apply to every product, the preload's hot path included. Measured with
# tests/progs/pl_loop (bench_preload's malloc loop, glibc, 10M pairs, the
# fastest of 11 interleaved runs; ns per malloc/free pair), preload built
#                       1 thread   2 threads
#   without the flags     12.9       15.3
#   with them             12.9       20.1
#   without, but with
#   -falign-functions=64  12.7       19.3
#   with, and align=64    12.7       19.2
# malloc and free themselves get no canary nor checking call; the 2-thread
# loop moves by as much with a code-layout change alone, so what it shows is
# the hot path's sensitivity to code placement, not a cost of the flags:
# they stay on. HARDEN=0 leaves them all out. _FORTIFY_SOURCE needs optimisation and is left out of -O0
# and sanitizer builds (the sanitizers intercept the plain functions, not
# glibc's checking ones). A packager's CPPFLAGS or CFLAGS that set
# _FORTIFY_SOURCE themselves (dpkg-buildflags) are left to decide it.
HARDEN ?= 1
cc_accepts = $(shell $(CC) -Werror $(1) -x c -c /dev/null -o /dev/null 2>/dev/null && echo $(1))
ifneq ($(HARDEN),0)
FORTIFY := $(if $(SAN)$(filter -O0,$(OPT))$(findstring _FORTIFY_SOURCE,$(CPPFLAGS) $(CFLAGS)),,-U_FORTIFY_SOURCE -D_FORTIFY_SOURCE=3)
# (Debian's -Wformat is not repeated: WARN has -Wformat=2, and a later
# plain -Wformat would lower gcc back to level 1.)
HARDEN_CFLAGS := -fstack-protector-strong $(FORTIFY) -Werror=format-security \
                 $(call cc_accepts,-fcf-protection)
HARDEN_LDFLAGS := -Wl,-z,relro -Wl,-z,now
PIE_LDFLAGS := -pie
endif

# clang writes DWARF 5 forms (DW_FORM_strx1, DW_FORM_addrx) that Debian 12's
# valgrind cannot read (it gives up on the whole file), and test_hotpath_cost
# runs the preload and its target programs under callgrind: DWARF 4 for
# clang. gcc's DWARF 5 reads fine.
DWARF := $(if $(findstring clang,$(shell $(CC) --version 2>/dev/null | head -n 1)),-gdwarf-4,)
BASE_CFLAGS := -std=gnu11 $(OPT) $(DWARF) $(WARN) -fPIC -D_GNU_SOURCE -pthread \
               -Iinclude -Isrc $(SANFLAGS) $(HARDEN_CFLAGS) $(CPPFLAGS) $(CFLAGS)
BASE_LDFLAGS := -pthread $(SANFLAGS) $(HARDEN_LDFLAGS) $(LDFLAGS)

# memtop's libraries, through pkg-config (ncursesw first, then ncurses).
# libuv is linked statically where its archive is installed (Debian's
# libuv1-dev: libuv_a.a, pkg-config's libuv-static), named by its path so
# that a shared libuv beside it is not taken instead: loaded as a shared
# library it was the most of what the loader did before memtop's main
# (295 of the 564 symbol relocations of `memtop -V`, and a library to map).
# UV_STATIC=0 links the shared library.
UV_STATIC ?= 1
UV_CFLAGS := $(shell $(PKG_CONFIG) --cflags libuv 2>/dev/null)
UV_A := $(if $(filter 1,$(UV_STATIC)),$(firstword $(wildcard $(addprefix $(shell $(PKG_CONFIG) --variable=libdir libuv-static 2>/dev/null)/,libuv_a.a libuv.a))))
UV_LIBS_STATIC := $(if $(UV_A),$(UV_A) $(filter-out -luv_a -luv -L%,$(shell $(PKG_CONFIG) --libs --static libuv-static 2>/dev/null)))
UV_LIBS := $(or $(UV_LIBS_STATIC),$(shell $(PKG_CONFIG) --libs libuv 2>/dev/null || echo -luv))
CURSES_PC := $(shell $(PKG_CONFIG) --exists ncursesw && echo ncursesw || echo ncurses)
CURSES_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(CURSES_PC) 2>/dev/null)
CURSES_LIBS := $(shell $(PKG_CONFIG) --libs $(CURSES_PC) 2>/dev/null || echo -lncursesw)
Z_LIBS := $(shell $(PKG_CONFIG) --libs zlib 2>/dev/null || echo -lz)
CMOCKA_CFLAGS := $(shell $(PKG_CONFIG) --cflags cmocka 2>/dev/null)
CMOCKA_LIBS := $(shell $(PKG_CONFIG) --libs cmocka 2>/dev/null || echo -lcmocka)
JANSSON_LIBS := $(shell $(PKG_CONFIG) --libs jansson 2>/dev/null || echo -ljansson)
# memtop profile: pprof's profile.proto through protobuf-c, symbols through
# elfutils' libdw (libdwfl).
PROTOC_C ?= protoc-c
PROTOBUF_C_CFLAGS := $(shell $(PKG_CONFIG) --cflags libprotobuf-c 2>/dev/null)
PROTOBUF_C_LIBS := $(shell $(PKG_CONFIG) --libs libprotobuf-c 2>/dev/null || echo -lprotobuf-c)
DW_CFLAGS := $(shell $(PKG_CONFIG) --cflags libdw 2>/dev/null)
DW_LIBS := $(shell $(PKG_CONFIG) --libs libdw 2>/dev/null || echo -ldw -lelf)
# memtop serve: libmicrohttpd (HTTP and, through GnuTLS, TLS), libyaml
# (the web config), GnuTLS (the web config's TLS settings, checked with
# the library that applies them), libxcrypt (bcrypt).
MHD_CFLAGS := $(shell $(PKG_CONFIG) --cflags libmicrohttpd yaml-0.1 gnutls 2>/dev/null)
MHD_LIBS := $(shell $(PKG_CONFIG) --libs libmicrohttpd 2>/dev/null || echo -lmicrohttpd) \
            $(shell $(PKG_CONFIG) --libs yaml-0.1 2>/dev/null || echo -lyaml) \
            $(shell $(PKG_CONFIG) --libs gnutls 2>/dev/null || echo -lgnutls) \
            $(shell $(PKG_CONFIG) --libs libxcrypt 2>/dev/null || echo -lcrypt)
TOOL_CFLAGS := $(UV_CFLAGS) $(CURSES_CFLAGS) $(PROTOBUF_C_CFLAGS) $(DW_CFLAGS) $(MHD_CFLAGS) -I$(BUILD)/gen
TOOL_LIBS := $(UV_LIBS) $(CURSES_LIBS) $(PROTOBUF_C_LIBS) $(DW_LIBS) $(Z_LIBS) $(MHD_LIBS) -lm

# ---- what goes where --------------------------------------------------------
# The layers are in CONTRIBUTING.md (tests/lint-layers.sh checks them:
# make lint, and test_layers in make check).
# common and wire belong to both sides. They are built once, with the
# target side's flags, and linked into both: those flags change nothing in
# a static link into memtop (-fvisibility=hidden and MS_BUILDING_LIBRARY
# only say what a shared library exports, an executable exports nothing,
# and neither folder has thread-local data for -ftls-model to apply to),
# while building them without memtop's include paths keeps them free of
# libuv and curses. A second set of objects would cost build time only.
SHARED_DIRS := src/common src/wire
# The target-side library: libc, pthread and dl only.
LIB_DIRS := $(SHARED_DIRS) src/core src/providers src/compose src/profile \
            src/agent
LIB_SRCS := $(sort $(foreach d,$(LIB_DIRS),$(wildcard $(d)/*.c)))
PRELOAD_SRCS := $(sort $(wildcard src/preload/*.c))
# memtop: these folders but main.c, and common and wire, go into an
# archive that is all memtop links (no engine, no provider, no agent) and
# that the tests link too; with it pprof's generated profile.proto code.
TOOL_DIRS := src/client src/emit src/pprof src/targets src/tui src/exporter src/attach src/memtop
TOOL_SRCS := $(filter-out src/memtop/main.c,$(sort $(foreach d,$(TOOL_DIRS),$(wildcard $(d)/*.c))))
SHARED_SRCS := $(sort $(foreach d,$(SHARED_DIRS),$(wildcard $(d)/*.c)))

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))
LIB_OBJS := $(call obj,$(LIB_SRCS))
PRELOAD_OBJS := $(call obj,$(PRELOAD_SRCS))
TOOL_OBJS := $(call obj,$(TOOL_SRCS)) $(BUILD)/obj/gen/pprof/profile.pb-c.o
SHARED_OBJS := $(call obj,$(SHARED_SRCS))

LIB_SO := $(BUILD)/libmemstats.so
LIB_A := $(BUILD)/libmemstats.a
PRELOAD_SO := $(BUILD)/libmemstats-preload.so
TOOL_A := $(BUILD)/libmemtop.a
MEMTOP := $(BUILD)/memtop
MEMTOP_SERVE := $(BUILD)/memtop-serve

UNIT_TESTS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(sort $(wildcard tests/unit/test_*.c)))
INTEG_TESTS := $(patsubst tests/integration/%.c,$(BUILD)/tests/%,$(sort $(wildcard tests/integration/test_*.c)))
# Helper programs the integration tests run (targets with known patterns).
# tests/progs/lib*.c and lib*.cc are shared libraries the programs run
# with (LD_PRELOAD) or the tests load.
TEST_SHLIBS := $(patsubst tests/progs/%.c,$(BUILD)/progs/%.so,$(sort $(wildcard tests/progs/lib*.c))) \
               $(patsubst tests/progs/%.cc,$(BUILD)/progs/%.so,$(sort $(wildcard tests/progs/lib*.cc)))
TEST_PROGS := $(patsubst tests/progs/%.c,$(BUILD)/progs/%,$(sort $(filter-out tests/progs/lib%,$(wildcard tests/progs/*.c)))) $(TEST_SHLIBS)
TEST_PROGS_CXX := $(patsubst tests/progs/%.cc,$(BUILD)/progs/%,$(sort $(filter-out tests/progs/lib%,$(wildcard tests/progs/*.cc))))
FUZZ_SRCS := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_REPLAY := $(patsubst tests/fuzz/%.c,$(BUILD)/fuzz-replay/%,$(FUZZ_SRCS))
BENCHES := $(patsubst tests/bench/%.c,$(BUILD)/bench/%,$(sort $(wildcard tests/bench/bench_*.c)))

# The contrib examples, each built when the library it needs is installed
# (CONTRIB_NEEDS_<name>: a pkg-config name; CONTRIB_PKG_<name>: what to
# install), and named by `make` as skipped otherwise.
CONTRIB_NEEDS_gc_example := bdw-gc
CONTRIB_PKG_gc_example := Boehm GC (Debian: libgc-dev; Fedora: gc-devel)
CONTRIB_LIBS_gc_example = $(shell $(PKG_CONFIG) --libs bdw-gc 2>/dev/null)
CONTRIB_ALL := $(sort $(patsubst contrib/%.c,%,$(wildcard contrib/*.c)))
contrib_ok = $(if $(CONTRIB_NEEDS_$(1)),$(shell $(PKG_CONFIG) --exists $(CONTRIB_NEEDS_$(1)) && echo y),y)
CONTRIB_SKIPPED := $(foreach c,$(CONTRIB_ALL),$(if $(call contrib_ok,$(c)),,$(c)))
CONTRIB := $(patsubst %,$(BUILD)/contrib/%,$(filter-out $(CONTRIB_SKIPPED),$(CONTRIB_ALL)))

.PHONY: all check check-clang test-build asan tsan bench fuzz install \
        uninstall installcheck clean demo deps format format-check lint \
        contrib-skipped
all: $(LIB_SO) $(LIB_A) $(PRELOAD_SO) $(MEMTOP) $(MEMTOP_SERVE) $(CONTRIB) contrib-skipped

contrib-skipped:
	@$(foreach c,$(CONTRIB_SKIPPED),echo "make: not building contrib/$(c).c: it needs $(CONTRIB_PKG_$(c)), which is not installed";)

# ---- compiling ---------------------------------------------------------------
# Each side gets only the flags it uses: the target-side objects (the
# library and the preload) no include path of memtop's libraries; memtop's
# objects libuv's and curses' include paths, and where `memtop run` looks
# for the preload once installed (PRELOADDIR). cmocka's are for the tests
# only.
$(LIB_OBJS) $(PRELOAD_OBJS): \
  OBJ_CFLAGS = -fvisibility=hidden -DMS_BUILDING_LIBRARY -ftls-model=initial-exec
$(TOOL_OBJS) $(BUILD)/obj/src/memtop/main.o $(BUILD)/obj/src/memtop/main-serve.o: \
  OBJ_CFLAGS = $(TOOL_CFLAGS) -DMT_PRELOAD_DIR='"$(PRELOADDIR)"'

# PRELOADDIR is compiled into memtop (and test_run): a build for another
# one rebuilds what uses it, through a file that changes only with it.
LIBDIR_STAMP := $(BUILD)/libdir.stamp
ifneq ($(shell cat $(LIBDIR_STAMP) 2>/dev/null),$(PRELOADDIR))
$(shell mkdir -p $(BUILD) && echo '$(PRELOADDIR)' > $(LIBDIR_STAMP))
endif
$(BUILD)/obj/src/memtop/run.o $(BUILD)/tests/test_run: $(LIBDIR_STAMP)

# The compiler and its flags, likewise: a build dir made with other flags
# (another OPT, a DWARF version, a compiler upgrade) is rebuilt rather
# than linked from stale objects (a build/clang made before its DWARF 4
# kept DWARF 5 objects that valgrind cannot read). -Werror changes no
# object: WERROR=1 and a plain make share their objects.
CFLAGS_STAMP := $(BUILD)/cflags.stamp
CFLAGS_NOW := $(CC) $(shell $(CC) -dumpversion 2>/dev/null) $(filter-out -Werror,$(BASE_CFLAGS))
ifneq ($(file <$(CFLAGS_STAMP)),$(CFLAGS_NOW))
$(shell mkdir -p $(BUILD))
$(file >$(CFLAGS_STAMP),$(CFLAGS_NOW))
endif

$(BUILD)/obj/%.o: %.c $(CFLAGS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) $(OBJ_CFLAGS) -MMD -MP -c $< -o $@

# protoc-c names its output after the .proto's path: run it from the
# .proto's folder. The generated code is not ours to warn about.
# One run writes both files: the header is made by the .c's rule.
$(BUILD)/gen/pprof/profile.pb-c.c: src/pprof/profile.proto
	@mkdir -p $(BUILD)/gen/pprof
	cd src/pprof && $(PROTOC_C) --c_out=$(abspath $(BUILD)/gen/pprof) profile.proto
$(BUILD)/gen/pprof/profile.pb-c.h: $(BUILD)/gen/pprof/profile.pb-c.c
	@test -f $@ || { rm -f $<; $(MAKE) --no-print-directory $<; }
# It calls protobuf-c through memtop's names (src/pprof/pb_dl.h), so that
# memtop loads the library only when it writes a profile (pprof/libs.h).
$(BUILD)/obj/gen/pprof/profile.pb-c.o: $(BUILD)/gen/pprof/profile.pb-c.c src/pprof/pb_dl.h
	@mkdir -p $(@D)
	$(CC) $(filter-out -Werror -Wmissing-prototypes,$(BASE_CFLAGS)) $(PROTOBUF_C_CFLAGS) -I$(BUILD)/gen/pprof -include src/pprof/pb_dl.h -c $< -o $@
$(call obj,$(wildcard src/pprof/*.c)): $(BUILD)/gen/pprof/profile.pb-c.h

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
# The tests' own dependencies (tests/support's headers, src's headers).
-include $(wildcard $(BUILD)/tests/*.d)

# ---- products ----------------------------------------------------------------
$(LIB_A): $(LIB_OBJS)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(LIB_SO): $(LIB_OBJS)
	$(CC) -shared -Wl,-soname,libmemstats.so.$(SOVERSION) -Wl,-fini=ms__fini $(BASE_LDFLAGS) -o $@ $^ -ldl
	ln -sf libmemstats.so $(BUILD)/libmemstats.so.$(SOVERSION)

# The preload carries libmemstats' soname: a program linked with -lmemstats
# and started under the preload (memtop run) then gets one engine, not two,
# since the loader sees libmemstats.so.0 already loaded.
$(PRELOAD_SO): $(LIB_OBJS) $(PRELOAD_OBJS)
	$(CC) -shared -Wl,-soname,libmemstats.so.$(SOVERSION) -Wl,-fini=ms__fini $(BASE_LDFLAGS) -o $@ $^ -ldl

$(TOOL_A): $(TOOL_OBJS) $(SHARED_OBJS)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

# memtop links only what its objects use (--as-needed): `serve` is
# memtop-serve, the same main with the exporter (main.c says why), which
# `make install` puts in PRELOADDIR, memtop's private directory.
$(MEMTOP): $(BUILD)/obj/src/memtop/main.o $(TOOL_A)
	$(CC) $(BASE_LDFLAGS) $(PIE_LDFLAGS) -o $@ $^ -Wl,--as-needed $(TOOL_LIBS)
$(MEMTOP_SERVE): $(BUILD)/obj/src/memtop/main-serve.o $(TOOL_A)
	$(CC) $(BASE_LDFLAGS) $(PIE_LDFLAGS) -o $@ $^ $(TOOL_LIBS)
$(BUILD)/obj/src/memtop/main-serve.o: src/memtop/main.c $(CFLAGS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) $(OBJ_CFLAGS) -DMT_WITH_SERVE=1 -MMD -MP -c $< -o $@

# Contrib programs link the library the way a user would (-lmemstats).
$(BUILD)/contrib/%: contrib/%.c $(LIB_SO)
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) -o $@ $< -L$(BUILD) -lmemstats -Wl,-rpath,'$$ORIGIN/..' $(BASE_LDFLAGS) $(CONTRIB_LIBS_$*) -ldl

# ---- tests -------------------------------------------------------------------
# Both archives hold the same common and wire objects: whichever is pulled
# first defines their symbols, and the other copy is never pulled.
TEST_LINK := $(TOOL_A) $(LIB_A)
# C++ test programs call the sized operator delete: on by default in g++,
# asked for in clang++ (before clang 17).
CXX_STD := -std=gnu++17 -fsized-deallocation
TEST_LDLIBS := $(CMOCKA_LIBS) $(JANSSON_LIBS) $(TOOL_LIBS) -ldl
TEST_CFLAGS = $(BASE_CFLAGS) $(TOOL_CFLAGS) $(CMOCKA_CFLAGS) \
              -DMT_PRELOAD_DIR='"$(PRELOADDIR)"' -DMS_TEST_VERSION='"$(VERSION)"' \
              -DMS_TEST_HARDEN=$(if $(HARDEN_LDFLAGS),1,0) \
              -DMT_TEST_UV_STATIC=$(if $(UV_LIBS_STATIC),1,0) \
              -DMS_TEST_FORTIFY=$(if $(FORTIFY),1,0) -Itests
$(BUILD)/tests/%: tests/unit/%.c $(TEST_LINK)
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -MMD -MP -MF $@.d -o $@ $< $(TEST_LINK) $(BASE_LDFLAGS) $(TEST_LDLIBS)
$(BUILD)/tests/%: tests/integration/%.c $(TEST_LINK)
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -MMD -MP -MF $@.d -o $@ $< $(TEST_LINK) $(BASE_LDFLAGS) $(TEST_LDLIBS)
$(BUILD)/progs/%: tests/progs/%.c $(LIB_SO)
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) -Itests -o $@ $< -L$(BUILD) -Wl,-rpath,'$$ORIGIN/..' -lmemstats -ldl $(PROG_LIBS_$*)
$(BUILD)/progs/%: tests/progs/%.cc $(LIB_SO)
	@mkdir -p $(@D)
	$(CXX) $(filter-out -std=gnu11 -Wstrict-prototypes -Wmissing-prototypes,$(BASE_CFLAGS)) $(CXX_STD) -Itests -o $@ $< -L$(BUILD) -Wl,-rpath,'$$ORIGIN/..' -lmemstats -ldl $(PROG_LIBS_$*)

# Each fuzz harness is also built with a small driver that replays its
# corpus, so `make check` runs every corpus file through the parser.
$(BUILD)/fuzz-replay/%: tests/fuzz/%.c tests/fuzz/replay.c $(TEST_LINK)
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) $(TOOL_CFLAGS) -Itests -o $@ $< tests/fuzz/replay.c $(TEST_LINK) $(BASE_LDFLAGS) $(TOOL_LIBS) -ldl

-include tests/progs/progs.mk

test-build: all $(UNIT_TESTS) $(INTEG_TESTS) $(TEST_PROGS) $(TEST_PROGS_CXX) $(FUZZ_REPLAY)

# `make check` first installs what is missing (a no-op when everything is
# there), then builds in a fresh make so pkg-config sees the new packages,
# then runs the tests: each test binary's run is a target of its own
# ($(BUILD)/test-logs/NAME.result, beside its log), so `make -j2 check`
# runs two tests at a time, as it builds two objects at a time. Each test's
# line is printed when it ends (--output-sync keeps a failing test's lines
# together), and tests/run-tests.sh --summary closes with the line CI reads
# ("N passed, N failed, N skipped"). The integration tests, the long ones,
# start first. Under TSAN_ONLY only tests/tsan.list's run.
check:
	@sh contrib/setup-deps.sh
	@$(MAKE) --no-print-directory test-build
	@$(MAKE) --no-print-directory test-run

TESTS_RUN := $(INTEG_TESTS) $(UNIT_TESTS) $(FUZZ_REPLAY)
ifneq ($(TSAN_ONLY),)
TESTS_RUN := $(filter $(addprefix %/,$(shell cat tests/tsan.list)),$(TESTS_RUN))
endif
# Tests that must not run beside another test (names): they run after the
# others, one at a time. A test belongs here only with its reason, and only
# when it cannot be made hermetic (its own MEMSTATS_DIR, port 0, figures of
# its own processes only). test_cross_aarch64: its VM (software
# emulation, -smp 2) keeps both of this machine's cores busy for about
# 20 s, under which test_attach's HeapAlloc estimate was seen out of its
# bounds (its tcache-sensitive base; it passes alone).
SERIAL_TESTS := test_cross_aarch64
SERIAL_RUN := $(filter $(addprefix %/,$(SERIAL_TESTS)),$(TESTS_RUN))
TEST_RESULTS := $(foreach t,$(filter-out $(SERIAL_RUN),$(TESTS_RUN)),$(BUILD)/test-logs/$(notdir $(t)).result)

.PHONY: test-run test-parallel FORCE
FORCE:
test-run:
	@rm -f $(BUILD)/test-logs/*.result
	@$(MAKE) --no-print-directory --output-sync=target test-parallel
	@for t in $(SERIAL_RUN); do BUILD=$(BUILD) sh tests/run-tests.sh --one $$t; done
	@BUILD=$(BUILD) sh tests/run-tests.sh --summary $(TESTS_RUN)
test-parallel: $(TEST_RESULTS)
$(filter $(BUILD)/test-logs/test_%,$(TEST_RESULTS)): $(BUILD)/test-logs/%.result: $(BUILD)/tests/% FORCE
	@BUILD=$(BUILD) sh tests/run-tests.sh --one $<
$(filter $(BUILD)/test-logs/fuzz_%,$(TEST_RESULTS)): $(BUILD)/test-logs/%.result: $(BUILD)/fuzz-replay/% FORCE
	@BUILD=$(BUILD) sh tests/run-tests.sh --one $<

# The same suite built with clang (and clang++), in its own tree; CI runs
# it beside the gcc build so that a compiler difference cannot hide.
check-clang:
	@$(MAKE) --no-print-directory CC=$(CLANG) CXX=$(CLANGXX) BUILD=build/clang check

asan:
	$(MAKE) BUILD=build/asan SAN=address,undefined OPT='-O1 -g' check

# A fork child of a threaded process starts threads in the fork tests:
# ThreadSanitizer supports that with die_after_fork=0.
tsan:
	TSAN_OPTIONS="die_after_fork=0 $(TSAN_OPTIONS)" $(MAKE) BUILD=build/tsan SAN=thread OPT='-O1 -g' TSAN_ONLY=1 check

# ---- aarch64, cross-built -----------------------------------------------------
# memtop attach's aarch64 side has no aarch64 machine to run on here
# (a VM, below, is its real kernel): `make cross-aarch64` builds it with an aarch64 compiler and that
# compiler's headers, every warning an error (src/attach, whose arch.h
# tables check their register layouts against the kernel's there), the
# whole target side into an aarch64 preload (got.c's GOT rewrite and its
# dlopen stub among it), and tests/cross/at_got.c and at_call.c (the
# attach's call made with arch_aarch64.c from a signal handler), which
# tests/integration/test_cross_aarch64.c runs under qemu-aarch64 (it
# skips, saying why, without the compiler or the emulator); test-build
# builds it where the compiler is. Debian:
# gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user (not in
# setup-deps.sh: about 270 MB).
CROSS_AARCH64 ?= aarch64-linux-gnu-gcc
CROSS_A64 := $(BUILD)/cross-aarch64
# A packager's CPPFLAGS reach these compiles too (test_install); their
# CFLAGS, for the host's processor, do not.
CROSS_A64_CFLAGS := -std=gnu11 -O2 -g $(WARN) -Werror -fPIC -D_GNU_SOURCE \
                    -pthread -Iinclude -Isrc -mbranch-protection=standard \
                    -fstack-protector-strong $(CPPFLAGS)
CROSS_A64_TOOL := $(patsubst %.c,$(CROSS_A64)/obj/%.o,$(sort $(wildcard src/attach/*.c)))
CROSS_A64_LIB := $(patsubst %.c,$(CROSS_A64)/obj/%.o,$(LIB_SRCS) $(PRELOAD_SRCS))
$(CROSS_A64_LIB): CROSS_A64_OBJ = -fvisibility=hidden -DMS_BUILDING_LIBRARY -ftls-model=initial-exec
$(CROSS_A64)/obj/%.o: %.c $(CFLAGS_STAMP)
	@mkdir -p $(@D)
	$(CROSS_AARCH64) $(CROSS_A64_CFLAGS) $(CROSS_A64_OBJ) -MMD -MP -c $< -o $@
$(CROSS_A64)/libmemstats-preload.so: $(CROSS_A64_LIB)
	$(CROSS_AARCH64) -shared -Wl,-soname,libmemstats.so.$(SOVERSION) -pthread \
	  -Wl,-z,relro -Wl,-z,now -o $@ $^ -ldl
$(CROSS_A64)/at_got: tests/cross/at_got.c include/memstats.h
	@mkdir -p $(@D)
	$(CROSS_AARCH64) $(CROSS_A64_CFLAGS) -fPIE -pie -Wl,-z,relro -Wl,-z,now -o $@ $< -ldl
$(CROSS_A64)/at_call: tests/cross/at_call.c $(CROSS_A64)/obj/src/attach/arch_aarch64.o
	$(CROSS_AARCH64) $(CROSS_A64_CFLAGS) -fPIE -pie -o $@ $^
-include $(shell find $(CROSS_A64)/obj -name '*.d' 2>/dev/null)
.PHONY: cross-aarch64
cross-aarch64: $(CROSS_A64_TOOL) $(CROSS_A64)/libmemstats-preload.so $(CROSS_A64)/at_got \
               $(CROSS_A64)/at_call
# make check builds it where the compiler is (its test then runs it).
test-build: $(if $(shell command -v $(CROSS_AARCH64) 2>/dev/null),cross-aarch64)

# On a real aarch64 kernel: `make check-aarch64-vm` boots Debian's arm64
# kernel under qemu-system-aarch64 (-cpu max, software emulation) with an
# initramfs holding what vm-aarch64-files builds, in the build's layout
# ($(CROSS_A64)/vm: memtop's attach code as memtop, the preload, at_alloc,
# libatmod.so, tests/cross/at_sve.c, at_sleep.c and at_pac.c, and
# tests/cross/vm_attach.c's cmocka
# tests, linked with Debian's arm64 cmocka), and reads their results on
# the console (tests/cross/vm-aarch64.sh; downloads cached in
# $(BUILD)/vm-aarch64). test_cross_aarch64 runs it where
# qemu-system-aarch64 is installed. Debian: qemu-system-arm cpio.
VM_A64 := $(CROSS_A64)/vm
VM_A64_CMOCKA := $(BUILD)/vm-aarch64/debs/usr/lib/aarch64-linux-gnu/libcmocka.so.0
CROSS_A64_CLIENT := $(patsubst %.c,$(CROSS_A64)/obj/%.o,$(sort $(wildcard src/client/*.c)))
CROSS_A64_SHARED := $(patsubst %.c,$(CROSS_A64)/obj/%.o,$(SHARED_SRCS))
$(VM_A64_CMOCKA): tests/cross/vm-aarch64.sh
	sh tests/cross/vm-aarch64.sh fetch $(BUILD)
	@touch $@
$(VM_A64)/memtop: tests/cross/at_memtop.c $(CROSS_A64_TOOL) $(CROSS_A64_SHARED)
	@mkdir -p $(@D)
	$(CROSS_AARCH64) $(CROSS_A64_CFLAGS) -fPIE -pie -o $@ $^ -ldl
$(VM_A64)/libmemstats-preload.so: $(CROSS_A64)/libmemstats-preload.so
	@mkdir -p $(@D)
	cp $< $@
$(VM_A64)/tests/vm_attach: tests/cross/vm_attach.c $(CROSS_A64_CLIENT) $(CROSS_A64_SHARED) $(VM_A64_CMOCKA)
	@mkdir -p $(@D)
	$(CROSS_AARCH64) $(CROSS_A64_CFLAGS) -Itests $(CMOCKA_CFLAGS) -fPIE -pie -o $@ $^
$(VM_A64)/progs/at_alloc: tests/progs/at_alloc.c
	@mkdir -p $(@D)
	$(CROSS_AARCH64) $(CROSS_A64_CFLAGS) -fPIE -pie -o $@ $<
$(VM_A64)/progs/libatmod.so: tests/progs/libatmod.c
	@mkdir -p $(@D)
	$(CROSS_AARCH64) $(CROSS_A64_CFLAGS) -shared -o $@ $<
# at_cxx where the aarch64 C++ compiler is (Debian: g++-aarch64-linux-gnu;
# vm_attach skips its case, saying why, without it).
CROSS_AARCH64_CXX ?= aarch64-linux-gnu-g++
$(VM_A64)/progs/at_cxx: tests/progs/at_cxx.cc
	@mkdir -p $(@D)
	$(CROSS_AARCH64_CXX) $(filter-out -std=gnu11 -Wstrict-prototypes -Wmissing-prototypes,$(CROSS_A64_CFLAGS)) $(CXX_STD) -fPIE -pie -o $@ $<
$(VM_A64)/progs/at_%: tests/cross/at_%.c
	@mkdir -p $(@D)
	$(CROSS_AARCH64) $(CROSS_A64_CFLAGS) -fPIE -pie -o $@ $<
.PHONY: vm-aarch64-files check-aarch64-vm
vm-aarch64-files: $(VM_A64)/memtop $(VM_A64)/libmemstats-preload.so \
                  $(VM_A64)/tests/vm_attach $(VM_A64)/progs/at_alloc \
                  $(VM_A64)/progs/libatmod.so $(VM_A64)/progs/at_sve \
                  $(VM_A64)/progs/at_sleep $(VM_A64)/progs/at_pac \
                  $(if $(shell command -v $(CROSS_AARCH64_CXX) 2>/dev/null),$(VM_A64)/progs/at_cxx)
check-aarch64-vm: vm-aarch64-files
	sh tests/cross/vm-aarch64.sh run $(BUILD)

# ---- benchmarks and fuzzing -----------------------------------------------
$(BUILD)/bench/%: tests/bench/%.c $(TEST_LINK)
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) -O2 $(TOOL_CFLAGS) -Itests -o $@ $< $(TEST_LINK) $(BASE_LDFLAGS) $(TOOL_LIBS) -ldl

# The preload built as its own floors: forwarding only (1), forwarding
# and measuring each block (2), and the naive exact counter (3: forward,
# measure, add to plain per-thread counters, no consistency), which the
# preload's goal is set against. Their src/preload/record.h is
# tests/bench/floor/preload/record.h (found first: -iquote), so the
# product's source has no floor in it. bench_preload runs the same loops
# on them.
BENCH_FLOORS := $(BUILD)/bench/floor1/libmemstats-preload.so \
                $(BUILD)/bench/floor2/libmemstats-preload.so \
                $(BUILD)/bench/floor3/libmemstats-preload.so
$(BUILD)/bench/floor%/libmemstats-preload.so: $(LIB_SRCS) $(PRELOAD_SRCS) \
    $(wildcard src/*/*.h) include/memstats.h tests/bench/floor/preload/record.h
	$(MAKE) BUILD=$(BUILD)/bench/floor$* SAN= \
	  OPT='-O2 -g -DMS__PRELOAD_FLOOR=$* -iquote tests/bench/floor' $@

# And without the heap profiler's hooks (MS__PRELOAD_PROFILER=0): the
# preload as it was before the profiler, the baseline of what
# MEMSTATS_PROFILE_RATE=0 may cost (nothing more).
BENCH_NOPROF := $(BUILD)/bench/noprof/libmemstats-preload.so
$(BENCH_NOPROF): $(LIB_SRCS) $(PRELOAD_SRCS) $(wildcard src/*/*.h) include/memstats.h
	$(MAKE) BUILD=$(BUILD)/bench/noprof SAN= OPT='$(OPT) -DMS__PRELOAD_PROFILER=0' $@
# tests/integration/test_hotpath_cost.c compares rate 0 with it.
test-build: $(BENCH_NOPROF)

bench: all $(BENCHES) $(TEST_PROGS) $(TEST_PROGS_CXX) $(BENCH_FLOORS) $(BENCH_NOPROF)
	@for b in $(BENCHES); do echo "== $$b"; BUILD=$(BUILD) $$b || exit 1; done

FUZZ_SECONDS ?= 60
FUZZ_BUILD := build/fuzz
fuzz:
	$(MAKE) BUILD=$(FUZZ_BUILD) CC=$(CLANG) SAN=fuzzer-no-link,address,undefined OPT='-O1 -g' $(FUZZ_BUILD)/libmemstats.a $(FUZZ_BUILD)/libmemtop.a
	@mkdir -p $(FUZZ_BUILD)/fuzzers
	@set -e; for f in $(FUZZ_SRCS); do n=$$(basename $$f .c); \
	  $(CLANG) -std=gnu11 -O1 -g $(WARN) -D_GNU_SOURCE -Iinclude -Isrc -Itests -I$(FUZZ_BUILD)/gen $(TOOL_CFLAGS) \
	    -fsanitize=fuzzer,address,undefined \
	    -o $(FUZZ_BUILD)/fuzzers/$$n $$f $(FUZZ_BUILD)/libmemtop.a $(FUZZ_BUILD)/libmemstats.a -pthread -ldl $(TOOL_LIBS); \
	  mkdir -p $(FUZZ_BUILD)/corpus/$$n; \
	  echo "== fuzzing $$n for $(FUZZ_SECONDS)s"; \
	  $(FUZZ_BUILD)/fuzzers/$$n -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	    $(FUZZ_BUILD)/corpus/$$n tests/fuzz/corpus/$$n; \
	done

# ---- the demo ----------------------------------------------------------------
# The demo installs only what building memtop needs (setup-deps.sh build);
# make check installs the rest.
demo:
	@sh contrib/setup-deps.sh build
	@$(MAKE) all
	$(MEMTOP) run -- $(BUILD)/contrib/demo

deps:
	@sh contrib/setup-deps.sh

# ---- installing --------------------------------------------------------------
install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(PRELOADDIR) $(DESTDIR)$(INCLUDEDIR) \
	  $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(MANDIR)/man1 \
	  $(DESTDIR)$(DATADIR)/bash-completion/completions
	install -m 0755 $(MEMTOP) $(DESTDIR)$(BINDIR)/memtop
	install -m 0755 $(LIB_SO) $(DESTDIR)$(LIBDIR)/libmemstats.so.$(VERSION)
	ln -sf libmemstats.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libmemstats.so.$(SOVERSION)
	ln -sf libmemstats.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/libmemstats.so
	install -m 0644 $(LIB_A) $(DESTDIR)$(LIBDIR)/libmemstats.a
	install -m 0755 $(PRELOAD_SO) $(DESTDIR)$(PRELOADDIR)/libmemstats-preload.so
	install -m 0755 $(MEMTOP_SERVE) $(DESTDIR)$(PRELOADDIR)/memtop-serve
	install -m 0644 include/memstats.h $(DESTDIR)$(INCLUDEDIR)/memstats.h
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' \
	    -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' -e 's|@VERSION@|$(VERSION)|g' \
	    share/pkgconfig/memstats.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/memstats.pc
	if [ -f share/man/man1/memtop.1 ]; then install -m 0644 share/man/man1/memtop.1 $(DESTDIR)$(MANDIR)/man1/memtop.1; fi
	if [ -f share/bash-completion/memtop ]; then install -m 0644 share/bash-completion/memtop $(DESTDIR)$(DATADIR)/bash-completion/completions/memtop; fi

# (LIBDIR/libmemstats-preload.so, where earlier builds installed the
# preload, is removed too.)
uninstall:
	rm -f $(DESTDIR)$(BINDIR)/memtop $(DESTDIR)$(LIBDIR)/libmemstats.so* \
	  $(DESTDIR)$(LIBDIR)/libmemstats.a $(DESTDIR)$(PRELOADDIR)/libmemstats-preload.so \
	  $(DESTDIR)$(PRELOADDIR)/memtop-serve \
	  $(DESTDIR)$(LIBDIR)/libmemstats-preload.so \
	  $(DESTDIR)$(INCLUDEDIR)/memstats.h $(DESTDIR)$(LIBDIR)/pkgconfig/memstats.pc \
	  $(DESTDIR)$(MANDIR)/man1/memtop.1 \
	  $(DESTDIR)$(DATADIR)/bash-completion/completions/memtop
	-rmdir $(DESTDIR)$(PRELOADDIR) 2>/dev/null

# An install staged in a fresh DESTDIR, checked (tests/installcheck.sh):
# the files where PREFIX/LIBDIR/PRELOADDIR say, the staged memtop running a
# program under the staged preload, and a program built against the staged
# libmemstats through pkg-config (PKG_CONFIG_SYSROOT_DIR); then make
# uninstall, which must leave no file. CI runs it.
installcheck: all
	@set -e; stage=$$(mktemp -d "$${TMPDIR:-/tmp}/memtop-stage.XXXXXX"); \
	  trap 'rm -rf "$$stage"' EXIT; \
	  $(MAKE) --no-print-directory -s install DESTDIR="$$stage"; \
	  CC='$(CC)' PKG_CONFIG='$(PKG_CONFIG)' sh tests/installcheck.sh "$$stage" \
	    '$(PREFIX)' '$(BINDIR)' '$(LIBDIR)' '$(PRELOADDIR)' '$(INCLUDEDIR)' '$(VERSION)'; \
	  $(MAKE) --no-print-directory -s uninstall DESTDIR="$$stage"; \
	  left=$$(find "$$stage" ! -type d); \
	  if [ -n "$$left" ]; then echo "installcheck: make uninstall left:"; echo "$$left"; exit 1; fi; \
	  echo "installcheck: make uninstall removed every file"

# clang-format (.clang-format) over the tracked C and C++ files but
# tests/data (other versions' headers, kept as they were) and FORMAT_SKIP
# (make patterns); format-check changes nothing and fails on the first
# file that is not formatted (CI).
FORMAT_SKIP ?=
FORMAT_FILES = $(filter-out tests/data/% $(FORMAT_SKIP),$(shell git ls-files '*.c' '*.h' '*.cc'))
format:
	clang-format -i $(FORMAT_FILES)
format-check:
	@clang-format --dry-run -Werror $(FORMAT_FILES) && echo "format-check: $(words $(FORMAT_FILES)) files formatted"

# The folder rules of CONTRIBUTING.md from the #include lines (make check
# runs the same script through tests/integration/test_layers.c), then
# cppcheck. Its false positives (cppcheck 2.10), by file, since their lines
# move: glibc.c's read_self() fills its out argument through
# process_vm_readv(), which cppcheck does not know (ctuuninitvar);
# view_detail.c's draw_sites() sorts the n entries it filled, n = 0 too
# (uninitvar).
LINT_SUPPRESS := ctuuninitvar:src/providers/glibc.c uninitvar:src/tui/view_detail.c
lint:
	sh tests/lint-layers.sh src
	cppcheck --quiet --error-exitcode=1 --enable=warning,performance,portability \
	  --inline-suppr $(addprefix --suppress=,$(LINT_SUPPRESS)) -Iinclude -Isrc src include

clean:
	rm -rf build
