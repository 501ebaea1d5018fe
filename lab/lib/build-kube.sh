#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager, kube-scheduler and kubelet 1.20.2 from Debian's `kubernetes`
# source package (no prebuilt binary is reachable from these machines) into $KURYR_LAB_CACHE/kube-<version>/bin.
# Cached by version: a second call returns at once. ~10 min cold on 2 cores.
set -euo pipefail
. "$(dirname "$0")/common.sh"

KUBE_DEB_VERSION=${KUBE_DEB_VERSION:-1.20.5+really1.20.2-1.1+deb12u1}
out=$KUBE_BIN
want="kube-apiserver kube-controller-manager kube-scheduler kubelet"
have=1; for b in $want; do [ -x "$out/$b" ] || have=0; done
if [ $have = 1 ]; then log "kube binaries cached in $out"; exit 0; fi

work=$LAB_CACHE/kube-build; rm -rf "$work"; mkdir -p "$work"/{apt/lists/partial,apt/cache/archives/partial,home,src}
# A private deb-src list: apt-get source needs one and the machine's sources.list has none.
mirror=$(awk '$1=="deb" && $0 ~ /bookworm / {print $2; exit}' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true)
if [ -z "$mirror" ]; then
  mirror=$(grep -h '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1 | awk '{print $2}')
fi
[ -n "$mirror" ] || die "no Debian mirror found in the apt sources (needed for 'apt-get source kubernetes')"
echo "deb-src $mirror bookworm main" > "$work/apt/sources.list"
echo "deb-src $mirror bookworm-updates main" >> "$work/apt/sources.list"
secmirror=$(grep -rhoE 'https?://[^ ]*debian-security[^ ]*' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null | head -1 || true)
[ -n "$secmirror" ] && echo "deb-src $secmirror bookworm-security main" >> "$work/apt/sources.list"
aptopts=(-o Dir::Etc::sourcelist="$work/apt/sources.list" -o Dir::Etc::sourceparts=/dev/null
         -o Dir::State::Lists="$work/apt/lists" -o Dir::Cache="$work/apt/cache")
log "fetching Debian source kubernetes=$KUBE_DEB_VERSION"
apt-get "${aptopts[@]}" update -q >"$work/apt-update.log" 2>&1 || { tail "$work/apt-update.log"; die "apt-get update (deb-src) failed"; }
( cd "$work/src" && apt-get "${aptopts[@]}" source --download-only "kubernetes=$KUBE_DEB_VERSION" ) >"$work/apt-source.log" 2>&1 \
  || { tail "$work/apt-source.log"; die "apt-get source kubernetes failed"; }
orig=$(ls "$work"/src/kubernetes_*.orig.tar.* | head -1)
tar -C "$work/src" -xf "$orig"
tree=$(find "$work/src" -maxdepth 1 -mindepth 1 -type d -name 'kubernetes*' | head -1)
[ -d "$tree/vendor" ] || die "unexpected source layout in $work/src"
# The vendored reflect2 1.0.1 panics on every POST under Go >= 1.18: swap in Debian's 1.0.2.
r2=/usr/share/gocode/src/github.com/modern-go/reflect2
[ -d "$r2" ] || die "golang-github-modern-go-reflect2-dev is not installed"
rm -rf "$tree/vendor/github.com/modern-go/reflect2"; mkdir -p "$tree/vendor/github.com/modern-go/reflect2"
cp "$r2"/*.go "$r2"/*.s "$tree/vendor/github.com/modern-go/reflect2/" 2>/dev/null || cp "$r2"/*.go "$tree/vendor/github.com/modern-go/reflect2/"
# go-openapi/validate (and kube-openapi's fork of it, which CRD validation uses) compares two reflect.Value structs with DeepEqual to spot "zero" data. Under Go >= 1.19 that
# is true for "" (reflect.Zero shares one zero buffer), so custom resources' empty strings were refused as null
# ("spec.x in body must be of type string: null"); built with the Go 1.15 of its day the check only ever
# matched nil, which is what it is reduced to here.
for tv in "$tree/vendor/github.com/go-openapi/validate/type.go" "$tree/vendor/k8s.io/kube-openapi/pkg/validation/validate/type.go"; do
  grep -q 'if data == nil || reflect.DeepEqual(reflect.Zero(reflect.TypeOf(data)), reflect.ValueOf(data)) {' "$tv" \
    || die "$tv changed: the empty-string patch no longer applies"
  sed -i 's/if data == nil || reflect.DeepEqual(reflect.Zero(reflect.TypeOf(data)), reflect.ValueOf(data)) {/if data == nil {/' "$tv"
done
# kubelet: never rewrite the machine's global sysctls (kernel.panic, vm.overcommit_memory...): with
# --protect-kernel-defaults a mismatch becomes a warning instead of a fatal error.
f="$tree/pkg/kubelet/cm/container_manager_linux.go"
grep -q 'b = KernelTunableError' "$f" || die "kubelet source changed: kernel-tunables patch no longer applies"
sed -i 's/b = KernelTunableError/b = KernelTunableWarn/' "$f"
log "building $want (go $(go version | awk '{print $3}')); log: $work/build.log"
# Kubernetes' build sets GOCACHE=_output/local/go/cache itself: point that at a cache that outlives the tree, so a
# rebuild after a new patch recompiles only what the patch touched.
mkdir -p "$tree/_output/local/go" "$LAB_CACHE/go-build-cache"
ln -sfn "$LAB_CACHE/go-build-cache" "$tree/_output/local/go/cache"
( cd "$tree" && HOME="$work/home" GOPROXY=off GOFLAGS=-mod=vendor \
    make WHAT="cmd/kube-apiserver cmd/kube-controller-manager cmd/kube-scheduler cmd/kubelet" KUBE_BUILD_PLATFORMS=linux/amd64 ) \
  >"$work/build.log" 2>&1 || { tail -30 "$work/build.log"; die "kubernetes build failed"; }
mkdir -p "$out.tmp"
for b in $want; do cp "$tree/_output/local/bin/linux/amd64/$b" "$out.tmp/"; done
rm -rf "$out"; mv "$out.tmp" "$out"
rm -rf "$work"
# builds of earlier patch levels are dead weight (a few hundred MB each)
for old in "$LAB_CACHE"/kube-"$KUBE_VERSION"*; do [ "$old" = "$(dirname "$out")" ] || rm -rf "$old"; done
log "kube binaries built into $out"
