#!/bin/sh
# setup-deps.sh [build] - installs the Debian/Ubuntu packages that building
# and testing memtop need, and nothing when they are all present already.
# With `build` (what `make demo` uses) only those that `make` needs to
# build memtop and the library (BUILD_PACKAGES); with no
# argument (`make check`, `make deps`, CI) those and every package the
# tests, benches and lints use (TEST_PACKAGES). Runs apt-get as root, or
# through sudo when it is available; otherwise says what to install.
# Elsewhere (not Debian) it installs nothing and says what is missing and
# which packages provide it.
#
# To add a package the build needs, append it to BUILD_PACKAGES; one only
# the tests need, to TEST_PACKAGES.
set -eu

MODE=${1:-all}
case $MODE in
  build | all) ;;
  *)
    echo "setup-deps: unknown argument '$MODE' (give 'build', or nothing for" \
         "everything the tests need too)" >&2
    exit 2
    ;;
esac

BUILD_PACKAGES="
build-essential
pkg-config
libuv1-dev
libncurses-dev
zlib1g-dev
libprotobuf-c-dev
protobuf-c-compiler
libdw-dev
libmicrohttpd-dev
libgnutls28-dev
libyaml-dev
libcrypt-dev
"

TEST_PACKAGES="
libcmocka-dev
libjansson-dev
libjemalloc-dev
libgc-dev
libgoogle-perftools-dev
libmimalloc-dev
clang
libclang-rt-14-dev
clang-format
cppcheck
tmux
sqlite3
redis-server
git
python3
heaptrack
hyperfine
golang-go
prometheus
python3-prometheus-client
curl
openssl
valgrind
postgresql
"

PACKAGES=$BUILD_PACKAGES
[ "$MODE" = build ] || PACKAGES="$BUILD_PACKAGES $TEST_PACKAGES"

# On a machine that is not Debian-based nothing is installed: each need is
# checked by what it provides (a program, or a pkg-config module), and what
# is missing is named with the packages that provide it elsewhere.
# One line per need:  check|Debian|Fedora|Arch|what it is for
# where check is cmd:NAME, pc:MODULE or lib:NAME (linkable as -lNAME),
# alternatives separated by '/'. REQUIRED stop the build, and so do
# TEST_REQUIRED but with `build` (the tests' target programs link every
# allocator); OPTIONAL only turn the tests or benches that use them into
# skips.
REQUIRED="
cmd:cc/gcc/clang|build-essential|gcc|gcc|a C compiler
cmd:make|build-essential|make|make|GNU make
cmd:pkg-config/pkgconf|pkg-config|pkgconf-pkg-config|pkgconf|pkg-config
pc:libuv|libuv1-dev|libuv-devel|libuv|libuv (memtop's event loop)
pc:ncursesw/ncurses|libncurses-dev|ncurses-devel|ncurses|ncurses (the live view)
pc:zlib|zlib1g-dev|zlib-devel|zlib|zlib
pc:libprotobuf-c|libprotobuf-c-dev|protobuf-c-devel|protobuf-c|protobuf-c (memtop profile writes profile.proto)
cmd:protoc-c|protobuf-c-compiler|protobuf-c-compiler|protobuf-c|protoc-c (generates the profile.proto code at build time)
pc:libdw|libdw-dev|elfutils-devel|elfutils|elfutils libdw (memtop profile resolves function names and lines)
pc:libmicrohttpd|libmicrohttpd-dev|libmicrohttpd-devel|libmicrohttpd|libmicrohttpd with GnuTLS (memtop serve)
pc:gnutls|libgnutls28-dev|gnutls-devel|gnutls|GnuTLS (memtop serve --web-config: TLS versions and suites)
pc:yaml-0.1|libyaml-dev|libyaml-devel|libyaml|libyaml (memtop serve --web-config)
pc:libxcrypt|libcrypt-dev|libxcrypt-devel|libxcrypt|libxcrypt (memtop serve's bcrypt)
"
TEST_REQUIRED="
pc:cmocka|libcmocka-dev|libcmocka-devel|cmocka|cmocka (the tests)
pc:jansson|libjansson-dev|jansson-devel|jansson|jansson (the JSON tests)
pc:jemalloc|libjemalloc-dev|jemalloc-devel|jemalloc|jemalloc (the providers' tests)
pc:libtcmalloc|libgoogle-perftools-dev|gperftools-devel|gperftools|tcmalloc (the providers' tests)
lib:mimalloc|libmimalloc-dev|mimalloc-devel|mimalloc|mimalloc (the providers' tests)
pc:bdw-gc|libgc-dev|gc-devel|gc|Boehm GC (the providers' tests, contrib/gc_example)
"
[ "$MODE" = build ] || REQUIRED="$REQUIRED$TEST_REQUIRED"
OPTIONAL="
cmd:clang|clang|clang|clang|clang (make check-clang, make fuzz: libFuzzer is clang's runtime, Debian's libclang-rt-14-dev)
cmd:clang-format|clang-format|clang-tools-extra|clang|clang-format (make format, make format-check)
cmd:cppcheck|cppcheck|cppcheck|cppcheck|cppcheck (make lint)
cmd:tmux|tmux|tmux|tmux|tmux (the live-view tests)
cmd:python3|python3|python3|python|python3 (a preload test, make bench)
cmd:sqlite3|sqlite3|sqlite|sqlite|sqlite3 (a preload test, make bench)
cmd:git|git|git|git|git (a preload test)
cmd:redis-server|redis-server|redis|redis|redis-server and redis-benchmark (memtop attach's and memtop run's tests)
cmd:heaptrack|heaptrack|heaptrack|heaptrack|heaptrack (make bench)
cmd:g++|g++|gcc-c++|gcc|g++ (make bench: the compiler workload)
cmd:curl|curl|curl|curl|curl (memtop serve's TLS and auth tests)
cmd:valgrind|valgrind|valgrind|valgrind|valgrind (the hot path's instruction counts: test_hotpath_cost, make bench)
cmd:prometheus-node-exporter|prometheus-node-exporter|node_exporter|prometheus-node-exporter|node_exporter (make bench: bench_serve's comparison)
cmd:promtool|prometheus|golang-github-prometheus-prometheus|prometheus|promtool and prometheus (the exposition's lint, the scrape test)
cmd:go|golang-go|golang-bin|go|go (go tool pprof reads memtop's heap profiles in the tests)
cmd:postgres/initdb|postgresql|postgresql-server|postgresql|PostgreSQL (test_trees: memtop run follows the postmaster and its backends)
cmd:aarch64-linux-gnu-gcc|gcc-aarch64-linux-gnu libc6-dev-arm64-cross|gcc-aarch64-linux-gnu|aarch64-linux-gnu-gcc|an aarch64 cross compiler (make cross-aarch64, test_cross_aarch64; never installed by this script: about 270 MB with qemu-user)
cmd:qemu-aarch64|qemu-user|qemu-user|qemu-user|qemu-aarch64 (test_cross_aarch64 runs the aarch64 preload under it)
cmd:qemu-system-aarch64|qemu-system-arm cpio|qemu-system-aarch64|qemu-system-aarch64|qemu-system-aarch64 and cpio (make check-aarch64-vm, test_cross_aarch64: memtop attach on a real arm64 kernel in a VM; never installed by this script)
cmd:aarch64-linux-gnu-g++|g++-aarch64-linux-gnu|gcc-c++-aarch64-linux-gnu|aarch64-linux-gnu-gcc|an aarch64 C++ cross compiler (the VM's C++ attach --track case)
"

# Whether one check (cmd:a/b or pc:a/b) is satisfied by any alternative.
have() {
  kind=${1%%:*}
  old_ifs=$IFS
  IFS=/
  # shellcheck disable=SC2086 # split on '/'
  set -- ${1#*:}
  IFS=$old_ifs
  for a in "$@"; do
    case $kind in
      cmd) command -v "$a" >/dev/null 2>&1 && return 0 ;;
      pc) command -v pkg-config >/dev/null 2>&1 &&
            pkg-config --exists "$a" 2>/dev/null && return 0 ;;
      lib) echo 'int main(void) { return 0; }' |
             ${CC:-cc} -x c - -o /dev/null "-l$a" >/dev/null 2>&1 &&
             return 0 ;;
    esac
  done
  return 1
}

# The word list $1 with $2 added at its end, unless it is there already.
add() {
  case " $1 " in
    *" $2 "*) echo "$1" ;;
    *) echo "$1 $2" ;;
  esac
}

# Prints what of the list $1 is missing, with the install commands, under
# the heading $2. Returns 1 if anything is missing.
report() {
  what="" fedora="" arch="" debian=""
  old_ifs=$IFS
  IFS='
'
  for line in $1; do
    IFS='|' read -r check deb fed arc desc <<EOL
$line
EOL
    if ! have "$check"; then
      what="$what
    $desc: ${check#*:}"
      debian=$(add "$debian" "$deb") fedora=$(add "$fedora" "$fed")
      arch=$(add "$arch" "$arc")
    fi
  done
  IFS=$old_ifs
  [ -z "$what" ] && return 0
  echo "setup-deps: $2:$what" >&2
  echo "  install them with your package manager, for example:" >&2
  echo "    Fedora:        dnf install$fedora" >&2
  echo "    Arch:          pacman -S$arch" >&2
  echo "    Debian/Ubuntu: apt-get install$debian" >&2
  return 1
}

if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "setup-deps: not a Debian-based system: installing nothing," \
       "checking what the build needs" >&2
  [ "$MODE" = build ] ||
    report "$OPTIONAL" "missing, optional (the tests that need them are skipped)" || true
  if ! report "$REQUIRED" "missing, needed to build and test"; then
    echo "setup-deps: install the packages above, then run make again" >&2
    exit 1
  fi
  echo "setup-deps: everything the build needs is there"
  exit 0
fi

missing=""
for p in $PACKAGES; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  case $status in
    *" installed") ;;
    *) missing="$missing $p" ;;
  esac
done

if [ -z "$missing" ]; then
  echo "setup-deps: every package is installed"
  exit 0
fi

echo "setup-deps: installing:$missing"
if [ "$(id -u)" -eq 0 ]; then
  SUDO=""
elif command -v sudo >/dev/null 2>&1; then
  SUDO="sudo"
else
  echo "setup-deps: not root and no sudo: as root, run" >&2
  echo "  apt-get update && apt-get install -y$missing" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
# shellcheck disable=SC2086 # one word per package
$SUDO apt-get install -y --no-install-recommends $missing
