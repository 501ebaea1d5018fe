#!/usr/bin/env bash
# qemu-run.sh EXE [ARGS...]: runs EXE (a host-built, dynamically linked binary, e.g. a test harness) as root inside a
# throwaway qemu guest booted from Debian's stock kernel (lab/lib/guest-kernel.sh), for what this machine's kernel
# cannot do (802.1Q VLAN devices). The initramfs holds static busybox, the host's iproute2 `ip` and `bridge`, EXE
# and the shared libraries of all three (same glibc as the host), and the kernel modules listed in the cache.
# /init loads the modules, runs EXE with ARGS and the environment in $QEMU_RUN_ENV (space-separated K=V), prints
# "GUEST-EXIT: <rc>" and powers off. Console output goes to stdout; the exit status is EXE's.
# Software emulation (TCG): /dev/kvm on these machines is PVM (kvm-pvm), which runs only PVM-built guest
# kernels; Debian's stock kernel hangs under it (docs/lab.md). QEMU_RUN_TIMEOUT (s, 300).
set -euo pipefail
. "$(dirname "$0")/common.sh"
[ $# -ge 1 ] || die "usage: qemu-run.sh EXE [ARGS...]"
exe=$1; shift
K=$LAB_CACHE/guest-kernel/current
[ -f "$K/.complete" ] || die "no guest kernel in $K (run lab/lib/guest-kernel.sh or lab/lab install)"
command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 is not installed (apt qemu-system-x86)"
file -L /bin/busybox 2>/dev/null | grep -q 'statically linked' || die "static /bin/busybox missing (apt busybox-static)"
command -v cpio >/dev/null || die "cpio is not installed"

w=$(mktemp -d /tmp/kuryr-qemu.XXXXXX)
trap 'rm -rf "$w"' EXIT
R=$w/root
mkdir -p "$R"/{bin,sbin,usr/bin,usr/sbin,proc,sys,dev,run,tmp,modules,etc,root}
mkdir -p "$R/var"; ln -s /run "$R/var/run"
cp /bin/busybox "$R/bin/busybox"
for a in $(/bin/busybox --list); do [ -e "$R/bin/$a" ] || ln -s busybox "$R/bin/$a"; done
rm -f "$R/bin/ip" "$R/bin/bridge" "$R/bin/init"   # busybox's ip cannot do veth/bridge/netns
echo 'root:x:0:0:root:/root:/bin/sh' >"$R/etc/passwd"
copy_dyn() { # ELF DEST: the binary and every library ldd names, at the same paths
  install -D -m755 "$1" "$R$2"
  ldd "$1" 2>/dev/null | grep -o '/[^ ]*' | while read -r lib; do
    [ -e "$R$lib" ] || install -D -m755 "$(readlink -f "$lib")" "$R$lib"
  done
}
copy_dyn "$(command -v ip)" /sbin/ip
copy_dyn "$(command -v bridge)" /sbin/bridge
copy_dyn "$exe" /bin/guest-exe
# Debug info is most of a test binary's size, and all of it would be unpacked into guest RAM.
objcopy --strip-debug "$R/bin/guest-exe" 2>/dev/null || true
for m in $(cat "$K/modules/order"); do cp "$K/modules/$m.ko" "$R/modules/"; done
cp "$K/modules/order" "$R/modules/order"
{
  echo '#!/bin/sh'
  echo 'export PATH=/sbin:/usr/sbin:/bin:/usr/bin HOME=/root'
  echo 'mount -t proc proc /proc; mount -t sysfs sysfs /sys; mount -t devtmpfs devtmpfs /dev'
  echo 'mount -t tmpfs tmpfs /run; mount -t tmpfs tmpfs /tmp'
  echo 'for m in $(cat /modules/order); do insmod /modules/$m.ko || echo "GUEST: insmod $m failed"; done'
  echo 'ip link set lo up'
  echo 'echo "GUEST: kernel $(uname -r), up $(cut -d" " -f1 /proc/uptime)s, running the binary"'
  printf 'env %s /bin/guest-exe' "${QEMU_RUN_ENV:-}"
  for a in "$@"; do printf ' %q' "$a"; done
  echo
  echo 'echo "GUEST-EXIT: $?"'
  echo 'sync; poweroff -f'
} >"$R/init"
chmod 755 "$R/init"
(cd "$R" && find . -print0 | cpio --null -o -H newc --quiet | gzip -1) >"$w/initrd.gz"

t=$(now)
timeout "${QEMU_RUN_TIMEOUT:-300}" qemu-system-x86_64 -accel tcg -cpu max -m 768 -smp 1 -nographic -no-reboot \
  -nic none -kernel "$K/vmlinuz" -initrd "$w/initrd.gz" -append "console=ttyS0 quiet panic=-1" \
  </dev/null | tee "$w/console.log" || true
echo "HOST: guest kernel $(cat "$K/version"), TCG, boot+run ${SECONDS}s ($(since "$t")s)"
rc=$(sed -n 's/^GUEST-EXIT: \([0-9]*\).*/\1/p' "$w/console.log" | tail -1)
[ -n "$rc" ] || { echo "HOST: the guest never reported an exit status (crash or timeout)"; exit 125; }
exit "$rc"
