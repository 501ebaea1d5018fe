#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and kubectl of $KUBE_VERSION from the
# `k8s.io/kubernetes` Go module and its staging modules (k8s.io/api, client-go, ... at v0.<minor>.<patch>) into
# $KUBE_BIN. No prebuilt Kubernetes binary is reachable from these machines; the Go module proxy is.
# Cached by version: a second call returns at once. Cold: ~8 min on 2 cores (460 s measured, docs/lab.md), with a progress line every 30 s.
set -euo pipefail
. "$(dirname "$0")/common.sh"

out=$KUBE_BIN
want="kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl"
have=1; for b in $want; do [ -x "$out/$b" ] || have=0; done
if [ $have = 1 ]; then log "kube binaries $KUBE_VERSION cached in $out"; exit 0; fi
command -v go >/dev/null || die "go is not installed (apt golang-go, or the machine's Go)"

t0=$(now)
work=$LAB_CACHE/kube-build-$KUBE_VERSION
rm -rf "$work"; mkdir -p "$work/home"
export GOPATH=$LAB_CACHE/gopath GOMODCACHE=$LAB_CACHE/gopath/pkg/mod GOCACHE=$LAB_CACHE/go-build-cache
export GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0 HOME=$work/home
log "fetching k8s.io/kubernetes@v$KUBE_VERSION from the Go module proxy"
src=$( (cd "$work" && go mod download -json "k8s.io/kubernetes@v$KUBE_VERSION") | jq -r .Dir)
[ -d "$src/cmd/kube-apiserver" ] || die "k8s.io/kubernetes@v$KUBE_VERSION has no cmd/kube-apiserver (download failed?)"
# The module is read-only in the module cache and its go.mod points the staging modules at ./staging, which the
# module's zip does not carry: build a writable copy whose go.mod pins every staging module at its release.
tree=$work/kubernetes
cp -r "$src" "$tree"; chmod -R u+w "$tree"; rm -f "$tree/go.work" "$tree/go.work.sum"
staging_ver="v0.${KUBE_VERSION#1.}"
sed -i -E "s#^(\s*)(k8s\.io/[a-z0-9-]+) => \./staging/src/k8s\.io/[a-z0-9-]+\$#\1\2 => \2 $staging_ver#" "$tree/go.mod"
if grep -q '=> ./staging' "$tree/go.mod"; then die "go.mod still replaces into ./staging: $(grep '=> ./staging' "$tree/go.mod")"; fi

# kubelet: never rewrite the machine's global sysctls (kernel.panic, vm.overcommit_memory...): with
# --protect-kernel-defaults a mismatch becomes a warning instead of a fatal error (the lab's nodes share the host
# kernel, which is not theirs to tune).
f="$tree/pkg/kubelet/cm/container_manager_linux.go"
grep -q 'b = KernelTunableError' "$f" || die "kubelet source changed: kernel-tunables patch no longer applies"
sed -i 's/b = KernelTunableError/b = KernelTunableWarn/' "$f"

# The version stamps hack/lib/version.sh would set, so `kubectl version` and the Node report the real release.
major=${KUBE_VERSION%%.*}; minor=${KUBE_VERSION#*.}; minor=${minor%%.*}
ld="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ld="$ld -X $pkg.gitVersion=v$KUBE_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
  ld="$ld -X $pkg.gitTreeState=clean -X $pkg.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
done
mkdir -p "$out.tmp"
cd "$tree"
progress "kubernetes $KUBE_VERSION: downloading its modules" "$work/mod.log" probe_last go mod download \
  || die "kubernetes: go mod download failed (log: $work/mod.log)"
cmds=(./cmd/kube-apiserver ./cmd/kube-controller-manager ./cmd/kube-scheduler ./cmd/kubelet ./cmd/kubectl)
# How many packages the build compiles, for its progress lines (go build -v names each one it compiles).
total=$(go list -deps -tags providerless "${cmds[@]}" 2>/dev/null | wc -l) || total='?'
log "building $want $KUBE_VERSION with $(go version | awk '{print $3}') ($total packages; ~8 min cold on 2 cores)"
progress "kubernetes $KUBE_VERSION: building" "$work/build.log" "probe_lines $total" \
  go build -v -trimpath -tags providerless -ldflags "$ld" -o "$out.tmp/" "${cmds[@]}" \
  || die "kubernetes build failed (log: $work/build.log)"
cd "$LAB_DIR"
for b in $want; do [ -x "$out.tmp/$b" ] || die "build produced no $b"; done
"$out.tmp/kube-apiserver" --version | grep -qx "Kubernetes v$KUBE_VERSION" || die "kube-apiserver reports $("$out.tmp/kube-apiserver" --version)"
rm -rf "$out"; mv "$out.tmp" "$out"
echo "$(since "$t0")" >"$out/.build-seconds"
rm -rf "$work"
log "kube binaries $KUBE_VERSION built into $out in $(since "$t0")s"
