# The buildable k8s.io/kubernetes tree of $KUBE_VERSION, shared by lib/build-kube.sh (the lab's binaries) and
# lib/build-e2e.sh (e2e.test, agnhost): both must come from the same source with the same version stamps. Sourced
# after common.sh, never run.

# kube_src WORK: prints the (read-only) module cache directory of k8s.io/kubernetes@v$KUBE_VERSION, downloading it
# from the Go module proxy if needed.
kube_src() {
  local src
  log "fetching k8s.io/kubernetes@v$KUBE_VERSION from the Go module proxy"
  src=$( (cd "$1" && go mod download -json "k8s.io/kubernetes@v$KUBE_VERSION") | jq -r .Dir)
  [ -d "$src/cmd/kube-apiserver" ] || die "k8s.io/kubernetes@v$KUBE_VERSION has no cmd/kube-apiserver (download failed?)"
  echo "$src"
}

# kube_tree WORK: go_env (common.sh), then a writable copy of the module in WORK/kubernetes (KUBE_TREE) and the
# version ldflags (KUBE_LDFLAGS).
kube_tree() {
  local work=$1 src tree staging_ver major minor pkg ld
  go_env "$work"
  src=$(kube_src "$work") || exit 1
  # The module is read-only in the module cache and its go.mod points the staging modules at ./staging, which the
  # module's zip does not carry: build a writable copy whose go.mod pins every staging module at its release.
  tree=$work/kubernetes
  cp -r "$src" "$tree"; chmod -R u+w "$tree"; rm -f "$tree/go.work" "$tree/go.work.sum"
  staging_ver="v0.${KUBE_VERSION#1.}"
  sed -i -E "s#^(\s*)(k8s\.io/[a-z0-9-]+) => \./staging/src/k8s\.io/[a-z0-9-]+\$#\1\2 => \2 $staging_ver#" "$tree/go.mod"
  if grep -q '=> ./staging' "$tree/go.mod"; then die "go.mod still replaces into ./staging: $(grep '=> ./staging' "$tree/go.mod")"; fi

  # The version stamps hack/lib/version.sh would set, so `kubectl version` and the Node report the real release.
  major=${KUBE_VERSION%%.*}; minor=${KUBE_VERSION#*.}; minor=${minor%%.*}
  ld="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="$ld -X $pkg.gitVersion=v$KUBE_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    ld="$ld -X $pkg.gitTreeState=clean -X $pkg.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  done
  KUBE_TREE=$tree KUBE_LDFLAGS=$ld
}
