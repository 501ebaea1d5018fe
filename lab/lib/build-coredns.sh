#!/usr/bin/env bash
# Builds a static CoreDNS from the Go module github.com/coredns/coredns (no release binary can be downloaded here;
# the Go module proxy serves its source) into $LAB_CACHE/coredns-<version>/coredns, and beside it coredns.tar, the
# one-layer image local.test/coredns:<version> (`docker save` archive: no registry here) with /coredns as its
# entrypoint and an empty /etc/coredns for the Corefile a ConfigMap mounts.
# Cached by version: a second call returns at once. Cold: ~3 min on 2 cores, with a progress line every 30 s.
set -euo pipefail
. "$(dirname "$0")/common.sh"

# COREDNS_VERSION (common.sh, KURYR_LAB_COREDNS) is what lib/dns.sh runs.
v=${COREDNS_VERSION#v}
out=$LAB_CACHE/coredns-$v
ref=local.test/coredns:$v
if [ -x "$out/coredns" ] && [ -s "$out/coredns.tar" ]; then log "coredns $v cached in $out ($ref)"; exit 0; fi
command -v go >/dev/null || die "go is not installed (apt golang-go, or the machine's Go)"

t0=$(now)
work=$LAB_CACHE/coredns-build-$v
go_env "$work"
# A release's go.mod and go.sum are complete: build it as released, in its read-only module cache directory.
export GOFLAGS=-mod=readonly
log "fetching github.com/coredns/coredns@v$v from the Go module proxy"
src=$( (cd "$work" && go mod download -json "github.com/coredns/coredns@v$v") | jq -r .Dir)
[ -f "$src/coredns.go" ] || die "github.com/coredns/coredns@v$v: no coredns.go (download failed? KURYR_LAB_COREDNS=$COREDNS_VERSION)"
# The machine's Go runs a module asking for at most its own version (GOTOOLCHAIN=local here); a newer one is built
# with the one newer Go this workplace allows, which the go command takes from the Go module proxy.
need=$(awk '$1 == "go" { print $2; exit }' "$src/go.mod"); have=$(go env GOVERSION); have=${have#go}
if [ "$(printf '%s\n' "$need" "$have" | sort -V | tail -n 1)" != "$have" ]; then
  export GOTOOLCHAIN=go1.27.3
  log "coredns $v asks for Go $need (this machine: $have): building with $GOTOOLCHAIN"
fi

rm -rf "$out.tmp"; mkdir -p "$out.tmp"
cd "$src"
progress "coredns $v: downloading its modules" "$work/mod.log" probe_last go mod download \
  || die "coredns: go mod download failed (log: $work/mod.log)"
# As its Makefile: tag grpcnotrace, the commit stamp (the release tag: a module zip has no git).
total=$(go list -deps -tags grpcnotrace . 2>/dev/null | wc -l) || total='?'
log "building coredns $v with $(go version | awk '{print $3}') ($total packages)"
progress "coredns $v: building" "$work/build.log" "probe_lines $total" \
  go build -v -trimpath -tags grpcnotrace -ldflags "-s -w -X github.com/coredns/coredns/coremain.GitCommit=v$v" \
  -o "$out.tmp/coredns" . || die "coredns build failed (log: $work/build.log)"
cd "$LAB_DIR"
[[ $(ldd "$out.tmp/coredns" 2>&1 || true) == *"not a dynamic executable"* ]] || die "coredns is not static"
got=$("$out.tmp/coredns" -version | head -n 1)
[ "$got" = "CoreDNS-$v" ] || die "coredns -version says '$got', not CoreDNS-$v"

r=$work/root
mkdir -p "$r/etc/coredns" "$r/tmp"; chmod 1777 "$r/tmp"
cp "$out.tmp/coredns" "$r/coredns"
mkimage "$ref" "$r" "$out.tmp/coredns.tar" '["/coredns"]' 'null'
image_ok "$out.tmp/coredns.tar" "$ref" || die "coredns image: $out.tmp/coredns.tar is not an archive of $ref"

rm -rf "$out"; mv "$out.tmp" "$out"
echo "$(since "$t0")" >"$out/.build-seconds"
rm -rf "$work"
log "coredns $v built into $out in $(since "$t0")s (image $ref: $(du -h "$out/coredns.tar" | cut -f1))"
