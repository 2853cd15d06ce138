#!/bin/sh
# make installcheck: checks an install staged in DESTDIR (the Makefile
# installs into a fresh directory, then runs this):
#   - the files are where PREFIX/LIBDIR/PRELOADDIR say, the preload in its
#     own directory and not beside libmemstats.so.0;
#   - the staged memtop finds the staged preload (../lib/memtop relative to
#     itself) and `memtop --once run` watches a program under it;
#   - a program built against the staged libmemstats through pkg-config
#     (PKG_CONFIG_PATH, PKG_CONFIG_SYSROOT_DIR) links and runs with it.
# Usage: installcheck.sh DESTDIR PREFIX BINDIR LIBDIR PRELOADDIR INCLUDEDIR VERSION
set -eu
stage=$1 prefix=$2 bindir=$3 libdir=$4 preloaddir=$5 includedir=$6 version=$7
CC=${CC:-cc}
PKG_CONFIG=${PKG_CONFIG:-pkg-config}
work=$(mktemp -d "${TMPDIR:-/tmp}/memtop-installcheck.XXXXXX")
trap 'rm -rf "$work"' EXIT

fail() { echo "installcheck: $*" >&2; exit 1; }

for f in "$bindir/memtop" "$libdir/libmemstats.so.$version" \
         "$libdir/libmemstats.so.0" "$libdir/libmemstats.so" \
         "$libdir/libmemstats.a" "$preloaddir/libmemstats-preload.so" \
         "$preloaddir/memtop-serve" \
         "$includedir/memstats.h" "$libdir/pkgconfig/memstats.pc"; do
  [ -e "$stage$f" ] || fail "$f was not installed"
done
[ ! -e "$stage$libdir/libmemstats-preload.so" ] ||
  fail "the preload is beside libmemstats.so.0 ($libdir), not in $preloaddir"
echo "installcheck: files in place under $prefix (preload in $preloaddir)"

# The staged memtop runs a program under the staged preload.
export MEMSTATS_DIR="$work/sockets"
mkdir -m 0700 "$MEMSTATS_DIR"
if [ "$libdir" = "$prefix/lib" ] && [ "$bindir" = "$prefix/bin" ]; then
  out=$(cd "$work" && env -u MEMTOP_PRELOAD -u LD_PRELOAD \
        "$stage$bindir/memtop" --once run -- sh -c 'echo "preload=$LD_PRELOAD"' 2>&1) ||
    fail "memtop --once run failed: $out"
  want="preload=$stage$bindir/../lib/memtop/libmemstats-preload.so"
  printf '%s\n' "$out" | grep -qx "$want" ||
    fail "the staged memtop did not preload the staged library ($want): $out"
  printf '%s\n' "$out" | grep -q "libmemstats $version" ||
    fail "no report of the program run under the preload: $out"
  echo "installcheck: the staged memtop ran a program under the staged preload"
  # `memtop serve` is memtop-serve from the private directory: reached, it
  # reads the web config (and says it cannot), where a memtop that cannot
  # find it says so instead.
  out=$("$stage$bindir/memtop" serve --listen 127.0.0.1:0 \
        --web-config "$work/none.yml" 2>&1) && fail "serve with no web config ran: $out"
  printf '%s\n' "$out" | grep -q "cannot open $work/none.yml" ||
    fail "the staged memtop did not run the staged memtop-serve: $out"
  echo "installcheck: the staged memtop serve ran the staged memtop-serve"
else
  echo "installcheck: BINDIR/LIBDIR are not PREFIX/bin and PREFIX/lib: the" \
       "staged memtop looks in $preloaddir only (not staged), not run"
fi

# A pkg-config consumer of the staged library.
export PKG_CONFIG_PATH="$stage$libdir/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$stage"
export PKG_CONFIG_LIBDIR="$stage$libdir/pkgconfig"
v=$($PKG_CONFIG --modversion memstats) || fail "pkg-config knows no memstats"
[ "$v" = "$version" ] || fail "memstats.pc says version $v, not $version"
cat >"$work/consumer.c" <<'EOC'
#include <stdio.h>
#include <string.h>
#include <memstats.h>

int main(void) {
  ms_snapshot_t s;
  memset(&s, 0, sizeof s);
  if (strcmp(ms_version_string(), MS_VERSION_STRING) != 0)
    return 2;
  if (ms_snapshot_read(&s, sizeof s) != 0)
    return 3;
  printf("%s %llu\n", ms_version_string(), (unsigned long long)s.sys);
  return 0;
}
EOC
# shellcheck disable=SC2046 # pkg-config's words
$CC -o "$work/consumer" "$work/consumer.c" $($PKG_CONFIG --cflags --libs memstats) ||
  fail "a program cannot be built with pkg-config --cflags --libs memstats"
out=$(LD_LIBRARY_PATH="$stage$libdir" "$work/consumer") || fail "the consumer failed: $out"
case $out in
  "$version "*) ;;
  *) fail "the consumer printed '$out'" ;;
esac
LD_LIBRARY_PATH="$stage$libdir" ldd "$work/consumer" | grep -q "$stage$libdir/libmemstats.so.0" ||
  fail "the consumer did not load the staged libmemstats"
echo "installcheck: a pkg-config consumer built and ran against the staged libmemstats ($out)"
