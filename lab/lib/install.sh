#!/usr/bin/env bash
# Installs what the lab needs: Debian packages, etcd and containerd from Debian's newer suites, one pinned Python
# venv per OpenStack service, and the Kubernetes binaries (built from the Go modules of the release). Everything heavy is cached in $KURYR_LAB_CACHE, keyed by what
# it was built from, so a second run takes about a second.
set -euo pipefail
. "$(dirname "$0")/common.sh"

# etcd, containerd, OVN and OVS come from Debian's newer suites (lib/newer-debs.sh): bookworm's are too old for the
# lab's Kubernetes and Neutron. Go is the machine's own (>= the release's go.mod); bookworm's golang-go 1.19 is too old.
APT_PACKAGES=(mariadb-server rabbitmq-server
  containernetworking-plugins patchelf iproute2 ethtool jq curl bc openssl
  python3-venv procps psmisc kmod iputils-ping socat
  qemu-system-x86 busybox-static cpio runc gcc)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "apt: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  progress "apt: installing ${#missing[@]} packages" "$LAB_CACHE.apt.log" probe_last \
    apt-get install -y -q --no-install-recommends "${missing[@]}" || die "apt-get install failed"
fi
mkdir -p "$LAB_CACHE"
# Kubernetes (CPU-bound, ~8 min cold), then CoreDNS (~2.5 min, lib/dns.sh), build beside the downloads below
# (OVN/OVS debs, venvs, guest kernel), in a session of their own so that a failure here stops them whole.
setsid bash -c "bash '$LAB_DIR/lib/build-kube.sh' && bash '$LAB_DIR/lib/build-coredns.sh'" & pk=$!
trap 'kill -- -$pk 2>/dev/null || true' EXIT
bash "$LAB_DIR/lib/newer-debs.sh"

# venv NAME: lab/requirements/NAME.txt is the full pinned freeze of a venv that worked here; the venv is cached
# under a key made of that file and the Python version, so a change of pins builds a new one.
venv() {
  local name=$1 req="$LAB_DIR/requirements/$1.txt" key dir
  key=$( (cat "$req"; python3 -V) | sha256sum | cut -c1-12)
  dir="$LAB_CACHE/venv/$name-$key"
  if [ ! -x "$dir/bin/python" ] || [ ! -f "$dir/.complete" ]; then
    log "venv $name: installing pinned requirements (first time ~1 min)"
    rm -rf "$dir"; python3 -m venv "$dir"
    progress "venv $name" "$dir.log" probe_last "$dir/bin/pip" install --progress-bar off --disable-pip-version-check \
      -r "$req" || die "pip install for the $name venv failed"
    touch "$dir/.complete"
  fi
  ln -sfn "$dir" "$LAB_CACHE/venv/$name"
}
mkdir -p "$LAB_CACHE/venv"
venv keystone & p1=$!
venv neutron & p2=$!
venv octavia & p3=$!
rc=0; wait $p1 || rc=1; wait $p2 || rc=1; wait $p3 || rc=1
[ $rc = 0 ] || die "a venv failed to install"

# The qemu guest kernel for the VLAN binding test (this machine's kernel has no 802.1Q).
bash "$LAB_DIR/lib/guest-kernel.sh"
wait $pk || die "building Kubernetes or CoreDNS failed (its lines above say where)"
trap - EXIT
