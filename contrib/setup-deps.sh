#!/bin/sh
# setup-deps.sh - installs every Debian/Ubuntu package that building and
# testing memtop needs, and nothing when they are all present already.
# Used by `make demo`, `make deps` and CI. Runs apt-get as root, or
# through sudo when it is available; otherwise says what to install.
#
# To add a package the build or the tests need, append it to PACKAGES.
set -eu

PACKAGES="
build-essential
pkg-config
libuv1-dev
libcmocka-dev
libncurses-dev
zlib1g-dev
libjansson-dev
libjemalloc-dev
libgc-dev
libgoogle-perftools-dev
libmimalloc-dev
clang
libclang-rt-14-dev
tmux
sqlite3
git
python3
heaptrack
hyperfine
"

if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "setup-deps: this is not a Debian-based system; install the" \
       "equivalents of:" $PACKAGES >&2
  exit 1
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
