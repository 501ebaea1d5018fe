#!/usr/bin/env bash
# Runtime pieces the lab's Kubernetes release needs that bookworm ships too old: etcd 3.5 (bookworm: 3.4) and
# containerd 2.x (bookworm: 1.6; kubelet >= 1.36 supports containerd 2.x only). Taken from Debian's newer suites
# at pinned versions, downloaded and unpacked (`dpkg -x`), never installed as packages, so bookworm's package
# database is untouched; their libc needs (>= 2.34) are met by bookworm's 2.36. bookworm's runc 1.1.5 stays (the
# newer suites' runc needs glibc >= 2.38). The binaries are linked into /usr/local/bin, ahead of /usr/bin.
# Idempotent: a second call returns at once. The pins are listed in docs/lab.md.
set -euo pipefail
. "$(dirname "$0")/common.sh"

# package=version suite: versions as the suites served them on 2026-11-25.
PINS=("etcd-server=3.5.16-4 trixie" "etcd-client=3.5.16-4 trixie" "containerd=2.1.9+ds1-5 sid")
dest=$LAB_CACHE/debs
key=$(printf '%s\n' "${PINS[@]}" | sha256sum | cut -c1-12)

link_bins() { # ROOT: the unpacked binaries, linked into /usr/local/bin
  local b
  for b in etcd etcdctl etcdutl containerd containerd-shim-runc-v2 ctr; do
    [ -x "$1/usr/bin/$b" ] || die "newer debs: $b missing in $1"
    ln -sfn "$1/usr/bin/$b" "/usr/local/bin/$b"
  done
}
if [ -f "$dest/$key/.complete" ]; then link_bins "$dest/$key"; exit 0; fi

w=$LAB_CACHE/newer-apt
mkdir -p "$w/lists/partial" "$w/cache/archives/partial" "$dest"
kr=/usr/share/keyrings/debian-archive-keyring.gpg
mirror=$(grep -h '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1 | awk '{print $2}')
[ -n "$mirror" ] || mirror=$(awk '$1=="deb" {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
[ -n "$mirror" ] || die "newer debs: no Debian mirror in the apt sources"
printf 'deb [signed-by=%s] %s trixie main\ndeb [signed-by=%s] %s sid main\n' "$kr" "$mirror" "$kr" "$mirror" >"$w/sources.list"
aptopts=(-o Dir::Etc::sourcelist="$w/sources.list" -o Dir::Etc::sourceparts=/dev/null
         -o Dir::State::Lists="$w/lists" -o Dir::Cache="$w/cache" -o Dir::State::status=/dev/null)
log "newer debs: fetching ${PINS[*]}"
apt-get "${aptopts[@]}" update -q >"$w/update.log" 2>&1 || { tail "$w/update.log"; die "newer debs: apt-get update failed"; }
tmp=$(mktemp -d "$dest/.unpack.XXXXXX")
for pin in "${PINS[@]}"; do
  pv=${pin% *}
  (cd "$tmp" && apt-get "${aptopts[@]}" download -q "$pv" >"$w/download.log" 2>&1) \
    || { tail "$w/download.log"; die "newer debs: $pv is not served any more: pick the suite's current version in lab/lib/newer-debs.sh and docs/lab.md"; }
done
for d in "$tmp"/*.deb; do dpkg-deb -x "$d" "$tmp/root"; done
rm -f "$tmp"/*.deb
rm -rf "$dest/$key"; mv "$tmp/root" "$dest/$key"; rm -rf "$tmp"
touch "$dest/$key/.complete"
link_bins "$dest/$key"
log "newer debs: $(/usr/local/bin/etcd --version | head -1), $(/usr/local/bin/containerd --version | awk '{print $1, $3}')"
