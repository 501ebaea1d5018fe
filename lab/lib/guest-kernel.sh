#!/usr/bin/env bash
# Fetches Debian's stock kernel (the one `linux-image-amd64` names; it has 802.1Q as a module, which this
# machine's kernel lacks) for the qemu guest that runs the VLAN binding test. The package is downloaded and
# unpacked, never installed; only vmlinuz and the modules the guest loads are kept, in
# $KURYR_LAB_CACHE/guest-kernel/<version>/ (+ a `current` link). Idempotent: a second call returns at once.
set -euo pipefail
. "$(dirname "$0")/common.sh"

dest=$LAB_CACHE/guest-kernel
# llc stp garp mrp 8021q: the VLAN stack in dependency order; veth and bridge for the guest's "switch".
MODULES="llc stp garp mrp 8021q veth bridge"
if [ -f "$dest/current/.complete" ]; then exit 0; fi
pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-/{print $2; exit}')
[ -n "$pkg" ] || die "guest kernel: apt-cache does not know linux-image-amd64 (apt-get update?)"
kver=${pkg#linux-image-}
work=$(mktemp -d "$LAB_CACHE/guest-kernel.XXXXXX")
trap 'rm -rf "$work"' EXIT
log "guest kernel: fetching $pkg (download only, not installed)"
(cd "$work" && apt-get download -q "$pkg" >/dev/null 2>&1) || die "guest kernel: apt-get download $pkg failed"
dpkg-deb -x "$work"/"$pkg"_*.deb "$work/x"
out=$dest/$kver
rm -rf "$out"; mkdir -p "$out/modules"
cp "$work/x/boot/vmlinuz-$kver" "$out/vmlinuz"
for m in $MODULES; do
  f=$(find "$work/x/lib/modules/$kver/kernel" -name "$m.ko*" | head -1)
  [ -n "$f" ] || die "guest kernel: module $m not found in $pkg"
  case $f in
    *.xz) xz -dc "$f" >"$out/modules/$m.ko" ;;
    *.zst) zstd -dc "$f" >"$out/modules/$m.ko" ;;
    *) cp "$f" "$out/modules/$m.ko" ;;
  esac
done
echo "$MODULES" >"$out/modules/order"
echo "$kver" >"$out/version"
touch "$out/.complete"
ln -sfn "$kver" "$dest/current"
log "guest kernel $kver cached in $out"
