#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and kubectl of $KUBE_VERSION from the
# `k8s.io/kubernetes` Go module and its staging modules (k8s.io/api, client-go, ... at v0.<minor>.<patch>) into
# $KUBE_BIN. No prebuilt Kubernetes binary is reachable from these machines; the Go module proxy is.
# Cached by version: a second call returns at once. Cold: ~8 min on 2 cores (460 s measured, docs/lab.md), with a progress line every 30 s.
set -euo pipefail
. "$(dirname "$0")/common.sh"
. "$(dirname "$0")/kube-tree.sh"

out=$KUBE_BIN
want="kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl"
have=1; for b in $want; do [ -x "$out/$b" ] || have=0; done
if [ $have = 1 ]; then log "kube binaries $KUBE_VERSION cached in $out"; exit 0; fi
command -v go >/dev/null || die "go is not installed (apt golang-go, or the machine's Go)"

t0=$(now)
work=$LAB_CACHE/kube-build-$KUBE_VERSION
kube_tree "$work"   # lib/kube-tree.sh: the Go settings, the writable tree, the version ldflags
tree=$KUBE_TREE ld=$KUBE_LDFLAGS

# kubelet: never rewrite the machine's global sysctls (kernel.panic, vm.overcommit_memory...): with
# --protect-kernel-defaults a mismatch becomes a warning instead of a fatal error (the lab's nodes share the host
# kernel, which is not theirs to tune).
f="$tree/pkg/kubelet/cm/container_manager_linux.go"
grep -q 'b = KernelTunableError' "$f" || die "kubelet source changed: kernel-tunables patch no longer applies"
sed -i 's/b = KernelTunableError/b = KernelTunableWarn/' "$f"

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
