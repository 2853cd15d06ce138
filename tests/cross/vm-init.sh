#!/bin/busybox sh
# shellcheck shell=dash
# vm-init.sh - /init of the aarch64 VM (tests/cross/vm-aarch64.sh): mounts
# what memtop attach reads, says what the kernel and processor are, runs
# tests/cross/vm_attach.c's cmocka tests from /m (the build's layout:
# /m/memtop, /m/libmemstats-preload.so, /m/progs, /m/tests) and powers
# off. Its last line, "vm-aarch64: exit N", is what the host reads.
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
export PATH=/bin HOME=/tmp
features=
for f in sve sve2 sme sme2 bti paca; do
  grep -m1 '^Features' /proc/cpuinfo | tr -s ' \t' '\n' | grep -qx "$f" && features="$features $f"
done
echo "vm-aarch64: kernel $(uname -r) $(uname -m), $(grep -c ^processor /proc/cpuinfo) cpus," \
  "features:$features, ptrace_scope $(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || echo none)," \
  "sve vl $(cat /proc/sys/abi/sve_default_vector_length 2>/dev/null || echo none)"
/m/tests/vm_attach 2>&1
echo "vm-aarch64: exit $?"
sync
poweroff -f
