#!/usr/bin/env bash
# Runtime pieces the lab needs that bookworm ships too old, taken from Debian's newer suites at pinned versions,
# downloaded and unpacked (`dpkg-deb -x`), never installed as packages, so bookworm's package database is
# untouched. Two sets, each cached under a key made of its pins:
# - etcd 3.5 (bookworm: 3.4) and containerd 2.x (bookworm: 1.6; kubelet >= 1.36 supports containerd 2.x only).
#   Their libc needs (>= 2.34) are met by bookworm's 2.36. bookworm's runc 1.1.5 stays (the newer suites' runc
#   needs glibc >= 2.38).
# - OVN and Open vSwitch (bookworm: OVN 23.03.1, OVS 3.1.0, both below Neutron 29's documented minimum, OVN
#   branch-24.03 / OVS branch-3.3, and both with bugs the lab hits: docs/lab.md). Trixie's need glibc >= 2.38,
#   so they come with trixie's own loader and libraries in one private tree, and every binary is patched
#   (patchelf: interpreter and RPATH into that tree) to run under its own name with nothing of the host's libc.
# The binaries are linked into /usr/local/bin, ahead of /usr/bin and /usr/sbin. Idempotent: a second call
# returns at once. The pins are listed in docs/lab.md.
set -euo pipefail
. "$(dirname "$0")/common.sh"

# package=version suite: versions as the suites served them on 2026-11-25 (etcd, containerd) and 2026-11-28 (OVN).
PINS=("etcd-server=3.5.16-4 trixie" "etcd-client=3.5.16-4 trixie" "containerd=2.1.9+ds1-5 sid")
# OVN 25.03 / OVS 3.5 from trixie (the stable suite: its versions stay served far longer than sid's 26.03 / 4.0,
# which change every few weeks; both meet Neutron 29's minimum). The libraries they load are the suite's current
# ones at fetch time (a point release drops superseded library files from the archive).
OVN_PINS=("ovn-central=25.03.0-1 trixie" "ovn-host=25.03.0-1 trixie" "ovn-common=25.03.0-1 trixie"
  "openvswitch-switch=3.5.0-1+b1 trixie" "openvswitch-common=3.5.0-1+b1 trixie")
OVN_LIBS=(libc6 libssl3t64 libunbound8 libcap-ng0 libnuma1 libbpf1 libxdp1 libudev1 zlib1g libzstd1 libelf1t64
  libevent-2.1-7t64 libcap2)

dest=$LAB_CACHE/debs
key=$(printf '%s\n' "${PINS[@]}" | sha256sum | cut -c1-12)
ovn_key=ovn-$(printf '%s\n' "${OVN_PINS[@]}" "${OVN_LIBS[@]}" | sha256sum | cut -c1-12)

link_bins() { # ROOT: etcd and containerd, linked into /usr/local/bin
  local b
  for b in etcd etcdctl etcdutl containerd containerd-shim-runc-v2 ctr; do
    [ -x "$1/usr/bin/$b" ] || die "newer debs: $b missing in $1"
    ln -sfn "$1/usr/bin/$b" "/usr/local/bin/$b"
  done
}
# The OVN/OVS executables of a tree (ovs-vswitchd lives in usr/lib/openvswitch-switch).
ovn_bins() { find "$1/usr/bin" "$1/usr/sbin" "$1/usr/lib/openvswitch-switch" -maxdepth 1 -type f \( -name 'ovn-*' -o -name 'ovs-*' -o -name 'ovsdb-*' \); }
is_elf() { [ "$(head -c4 "$1" | od -An -c | tr -d ' ')" = "177ELF" ]; }
link_ovn() { # ROOT: every OVN/OVS executable linked into /usr/local/bin; $dest/ovn-current names the tree
  local b
  for b in $(ovn_bins "$1"); do ln -sfn "$b" "/usr/local/bin/$(basename "$b")"; done
  ln -sfn "$1" "$dest/ovn-current"
}

have_etcd=0; have_ovn=0
[ -f "$dest/$key/.complete" ] && { link_bins "$dest/$key"; have_etcd=1; }
[ -f "$dest/$ovn_key/.complete" ] && { link_ovn "$dest/$ovn_key"; have_ovn=1; }
[ $have_etcd = 1 ] && [ $have_ovn = 1 ] && exit 0
command -v patchelf >/dev/null || die "newer debs: patchelf is missing (lib/install.sh installs it)"

w=$LAB_CACHE/newer-apt
mkdir -p "$w/lists/partial" "$w/cache/archives/partial" "$dest"
kr=/usr/share/keyrings/debian-archive-keyring.gpg
mirror=$(grep -h '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1 | awk '{print $2}')
[ -n "$mirror" ] || mirror=$(awk '$1=="deb" {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
[ -n "$mirror" ] || die "newer debs: no Debian mirror in the apt sources"
printf 'deb [signed-by=%s] %s trixie main\ndeb [signed-by=%s] %s sid main\n' "$kr" "$mirror" "$kr" "$mirror" >"$w/sources.list"
aptopts=(-o Dir::Etc::sourcelist="$w/sources.list" -o Dir::Etc::sourceparts=/dev/null
         -o Dir::State::Lists="$w/lists" -o Dir::Cache="$w/cache" -o Dir::State::status=/dev/null)
log "newer debs: reading the trixie and sid package lists"
apt-get "${aptopts[@]}" update -q >"$w/update.log" 2>&1 || { tail "$w/update.log"; die "newer debs: apt-get update failed"; }

# fetch_set TARGET "pkg=version suite"... [-- lib...]: download, unpack into TARGET (replaced whole, marked
# complete last). A pinned version the suite no longer serves is an error naming the file to change.
fetch_set() {
  local target=$1 tmp pin pv lib n=0 total; shift
  total=$(printf '%s\n' "$@" | grep -vcx -- --)
  tmp=$(mktemp -d "$dest/.unpack.XXXXXX")
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    pin=$1; pv=${pin% *}; shift
    n=$((n + 1)); (( n % 5 )) || log "newer debs: downloading $n of $total packages"
    (cd "$tmp" && apt-get "${aptopts[@]}" download -q "$pv" >"$w/download.log" 2>&1) \
      || { tail "$w/download.log"; die "newer debs: $pv is not served any more: pick the suite's current version in lab/lib/newer-debs.sh and docs/lab.md"; }
  done
  [ "${1:-}" = -- ] && shift
  for lib in "$@"; do
    n=$((n + 1)); (( n % 5 )) || log "newer debs: downloading $n of $total packages"
    (cd "$tmp" && apt-get "${aptopts[@]}" download -q "$lib/trixie" >"$w/download.log" 2>&1) \
      || { tail "$w/download.log"; die "newer debs: trixie serves no $lib"; }
  done
  for d in "$tmp"/*.deb; do dpkg-deb -x "$d" "$tmp/root"; done
  rm -f "$tmp"/*.deb
  rm -rf "$target"; mv "$tmp/root" "$target"; rm -rf "$tmp"
}

if [ $have_etcd = 0 ]; then
  log "newer debs: fetching ${PINS[*]}"
  fetch_set "$dest/$key" "${PINS[@]}"
  touch "$dest/$key/.complete"
  link_bins "$dest/$key"
  log "newer debs: $(/usr/local/bin/etcd --version | head -1), $(/usr/local/bin/containerd --version | awk '{print $1, $3}')"
fi

if [ $have_ovn = 0 ]; then
  log "newer debs: fetching ${OVN_PINS[*]} with trixie's ${OVN_LIBS[*]}"
  r=$dest/$ovn_key
  fetch_set "$r" "${OVN_PINS[@]}" -- "${OVN_LIBS[@]}"
  loader=$r/usr/lib64/ld-linux-x86-64.so.2
  [ -e "$loader" ] || die "newer debs: no loader at $loader"
  for b in $(ovn_bins "$r"); do
    is_elf "$b" || continue
    patchelf --set-interpreter "$loader" --force-rpath --set-rpath "$r/usr/lib/x86_64-linux-gnu" "$b"
  done
  # Nothing may resolve to the host's libraries (a trixie binary on bookworm's libc fails at its first call).
  for b in ovn-northd ovn-controller ovs-vswitchd ovsdb-server; do
    p=$(ovn_bins "$r" | grep "/$b\$")
    leak=$("$loader" --list "$p" | grep '=>' | grep -v " $r/" || true)
    [ -z "$leak" ] || die "newer debs: $b loads host libraries: $leak"
  done
  touch "$r/.complete"
  link_ovn "$r"
  log "newer debs: $(/usr/local/bin/ovn-northd --version | head -1), $(/usr/local/bin/ovs-vswitchd --version | head -1)"
fi
