#!/bin/sh
# vm-aarch64.sh - memtop attach on a real aarch64 Linux kernel: a VM under
# qemu-system-aarch64 (-M virt -cpu max: software emulation, SVE on),
# built from Debian's packages only, no disk image.
#
#   tests/cross/vm-aarch64.sh fetch BUILD   Debian's arm64 kernel, busybox
#       (static) and cmocka, downloaded once into BUILD/vm-aarch64 with an
#       apt of their own (its lists there too; the host's apt and dpkg are
#       not changed), and unpacked there.
#   tests/cross/vm-aarch64.sh run BUILD     packs an initramfs (busybox,
#       the cross compiler's C library, BUILD/cross-aarch64/vm: what
#       `make vm-aarch64-files` built), boots it (-smp 2, 1 GiB) with
#       tests/cross/vm-init.sh as /init, which runs
#       tests/cross/vm_attach.c's cmocka tests and powers off; their
#       output comes on the console, copied here and kept in
#       BUILD/vm-aarch64/console.log. Exits 0 if they all passed, 1 if not,
#       77 (and says why) if a tool is missing or Debian's mirrors cannot
#       be reached. VM_TIMEOUT (seconds, 900)
#       bounds the whole boot; VM_TESTS=GLOB runs those tests only,
#       VM_CYCLES=N makes N attach/detach cycles (10).
#
# `make check-aarch64-vm` does both, with the build between; test_cross_aarch64
# runs that where qemu-system-aarch64 is installed. Debian: qemu-system-arm
# gcc-aarch64-linux-gnu libc6-dev-arm64-cross cpio.
set -eu

what=${1:-}
B=${2:-build}
mkdir -p "$B/vm-aarch64"
V=$(cd "$B/vm-aarch64" && pwd)

skip() {
  echo "vm-aarch64: skipped: $*"
  exit 77
}

need() {
  command -v "$1" >/dev/null 2>&1 || skip "no $1 (Debian: apt-get install $2)"
}

# apt, with its lists, cache and status in $V/apt and arm64 its one
# architecture; the host's sources (Debian's mirrors).
apt_a64() {
  cmd=$1
  shift
  "$cmd" -q -o Dir::State="$V/apt/state" -o Dir::Cache="$V/apt/cache" \
    -o Dir::State::Status="$V/apt/status" \
    -o Dir::Etc::Preferences=/dev/null -o Dir::Etc::PreferencesParts=/dev/null \
    -o APT::Architecture=arm64 -o APT::Architectures::=arm64 \
    -o Debug::NoLocking=1 "$@"
}

fetch() {
  [ -f "$V/debs/.done" ] && return 0
  need apt-get apt
  need dpkg-deb dpkg
  mkdir -p "$V/apt/state/lists/partial" "$V/apt/cache/archives/partial" "$V/dl"
  : >"$V/apt/status"
  apt_a64 apt-get update >"$V/apt/update.log" 2>&1 ||
    { cat "$V/apt/update.log"; skip "apt-get update failed: Debian's mirrors cannot be reached"; }
  kernel=$(apt_a64 apt-cache depends linux-image-arm64 |
    sed -n 's/^ *Depends: \(linux-image-[0-9].*-arm64\)$/\1/p' | head -1)
  [ -n "$kernel" ] || { echo "vm-aarch64: no arm64 kernel package found"; exit 1; }
  # apt-get download writes into the current folder; as root it warns
  # that _apt cannot reach it (nothing to fix: it downloads as root).
  (cd "$V/dl" && apt_a64 apt-get download "$kernel" busybox-static libcmocka0) 2>&1 |
    grep -v '^W: Download is performed unsandboxed' || true
  rm -rf "$V/debs"
  mkdir -p "$V/debs"
  [ -n "$(ls "$V"/dl/*.deb 2>/dev/null)" ] || { echo "vm-aarch64: nothing downloaded"; exit 1; }
  for d in "$V"/dl/*.deb; do
    dpkg-deb -x "$d" "$V/debs"
  done
  rm -f "$V"/dl/*.deb
  # The kernel's modules are not used (no disk, no network): 300 MB.
  rm -rf "$V/debs/lib/modules" "$V/debs/usr/share"
  echo "$kernel" >"$V/debs/.done"
}

run() {
  need qemu-system-aarch64 qemu-system-arm
  need cpio cpio
  need gzip gzip
  need timeout coreutils
  fetch
  sysroot=/usr/aarch64-linux-gnu/lib
  [ -f "$sysroot/libc.so.6" ] || skip "no aarch64 C library in $sysroot (Debian: libc6-dev-arm64-cross)"
  files=$B/cross-aarch64/vm
  [ -x "$files/tests/vm_attach" ] || { echo "vm-aarch64: $files/tests/vm_attach is missing: make vm-aarch64-files"; exit 1; }
  kimg=$(find "$V/debs/boot" -name 'vmlinuz-*' | head -1)
  root=$V/root
  rm -rf "$root"
  mkdir -p "$root/bin" "$root/lib/aarch64-linux-gnu" "$root/proc" "$root/sys" \
    "$root/dev" "$root/tmp" "$root/m"
  cp "$V/debs/bin/busybox" "$root/bin/"
  cp -P "$V"/debs/usr/lib/aarch64-linux-gnu/libcmocka.so* "$root/lib/aarch64-linux-gnu/"
  for l in ld-linux-aarch64.so.1 libc.so.6 libm.so.6 libdl.so.2 \
    libpthread.so.0 librt.so.1 libgcc_s.so.1 libstdc++.so.6; do
    [ ! -e "$sysroot/$l" ] || cp -L "$sysroot/$l" "$root/lib/aarch64-linux-gnu/"
  done
  ln -s aarch64-linux-gnu/ld-linux-aarch64.so.1 "$root/lib/ld-linux-aarch64.so.1"
  cp -R "$files/." "$root/m/"
  cp tests/cross/vm-init.sh "$root/init"
  chmod +x "$root/init"
  (cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$V/initrd.gz"
  log=$V/console.log
  echo "vm-aarch64: booting $(basename "$kimg") (qemu-system-aarch64 -M virt -cpu max -smp 2, TCG)"
  rc=0
  timeout "${VM_TIMEOUT:-900}" qemu-system-aarch64 -M virt -cpu max -smp 2 -m 1024 \
    -nographic -no-reboot -nic none -kernel "$kimg" -initrd "$V/initrd.gz" \
    -append "console=ttyAMA0 quiet panic=-1 rdinit=/init${VM_TESTS:+ VM_TESTS=$VM_TESTS}${VM_CYCLES:+ VM_CYCLES=$VM_CYCLES}" </dev/null >"$log" 2>&1 || rc=$?
  tr -d '\r' <"$log"
  if [ "$rc" -eq 124 ]; then
    echo "vm-aarch64: FAILED: the VM did not power off in ${VM_TIMEOUT:-900} s"
    exit 1
  fi
  if grep -q '^vm-aarch64: exit 0' "$log"; then
    echo "vm-aarch64: passed"
    exit 0
  fi
  echo "vm-aarch64: FAILED (qemu exit $rc; the console is in $log)"
  exit 1
}

case $what in
fetch) need aarch64-linux-gnu-gcc gcc-aarch64-linux-gnu; fetch ;;
run) run ;;
*)
  echo "usage: $0 fetch|run BUILD" >&2
  exit 2
  ;;
esac
