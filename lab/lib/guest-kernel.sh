#!/usr/bin/env bash
# Fetches Debian's stock kernel (the one `linux-image-amd64` names; it has 802.1Q as a module, which this
# machine's kernel lacks) for the qemu guests: the VLAN binding test (lib/qemu-run.sh) and the lab's VM nodes
# (lib/vm-nodes.sh). The package is downloaded and unpacked, never installed; only vmlinuz and the modules the
# guests load are kept, in $KURYR_LAB_CACHE/guest-kernel/<version>/ (+ a `current` link), with their load
# order (dependencies first, resolved by depmod/modprobe on the unpacked tree). Idempotent: a second call
# returns at once; a cache made for another module list is made again.
set -euo pipefail
. "$(dirname "$0")/common.sh"

dest=$LAB_CACHE/guest-kernel
# 8021q: VLAN subports; veth, bridge: the VLAN test's "switch"; virtio_net, virtio_pci: the VM node's NIC;
# 9pnet_virtio, 9p: the host's files the VM node runs from; overlay: containerd's snapshotter in the VM node;
# vxlan: the overlay the datapath comparison runs inside the VM nodes.
MODULES="8021q veth bridge virtio_net virtio_pci 9pnet_virtio 9p overlay vxlan"
if [ -f "$dest/current/.complete" ] && [ "$(cat "$dest/current/modules/wanted" 2>/dev/null)" = "$MODULES" ]; then
  exit 0
fi
pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-/{print $2; exit}')
[ -n "$pkg" ] || die "guest kernel: apt-cache does not know linux-image-amd64 (apt-get update?)"
kver=${pkg#linux-image-}
work=$(mktemp -d "$LAB_CACHE/guest-kernel.XXXXXX")
trap 'rm -rf "$work"' EXIT
log "guest kernel: fetching $pkg (download only, not installed)"
(cd "$work" && apt-get download -q "$pkg" >/dev/null 2>&1) || die "guest kernel: apt-get download $pkg failed"
dpkg-deb -x "$work"/"$pkg"_*.deb "$work/x"
depmod -b "$work/x" "$kver" || die "guest kernel: depmod on the unpacked $pkg failed"
out=$dest/$kver
rm -rf "$out"; mkdir -p "$out/modules"
cp "$work/x/boot/vmlinuz-$kver" "$out/vmlinuz"
order=()
for m in $MODULES; do
  deps=$(modprobe -d "$work/x" -S "$kver" --show-depends "$m" | awk '$1 == "insmod" {print $2}') \
    || die "guest kernel: module $m not found in $pkg"
  [ -n "$deps" ] || die "guest kernel: $m is built into $pkg or missing (no module to load)"
  for f in $deps; do
    name=$(basename "$f"); name=${name%%.ko*}
    [ -e "$out/modules/$name.ko" ] && continue
    case $f in
      *.xz) xz -dc "$f" >"$out/modules/$name.ko" ;;
      *.zst) zstd -dc "$f" >"$out/modules/$name.ko" ;;
      *) cp "$f" "$out/modules/$name.ko" ;;
    esac
    order+=("$name")
  done
done
echo "${order[*]}" >"$out/modules/order"
echo "$MODULES" >"$out/modules/wanted"
echo "$kver" >"$out/version"
touch "$out/.complete"
ln -sfn "$kver" "$dest/current"
log "guest kernel $kver cached in $out (modules: ${order[*]})"
