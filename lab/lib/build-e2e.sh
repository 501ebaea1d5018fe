#!/usr/bin/env bash
# Builds Kubernetes' e2e suite of $KUBE_VERSION from the same k8s.io/kubernetes tree, Go settings and version stamps
# as lib/build-kube.sh (lib/kube-tree.sh), so e2e.test reports the lab's release. Into $LAB_CACHE/e2e-$KUBE_VERSION:
# - bin/e2e.test and bin/agnhost (static);
# - images.txt: the agnhost, busybox, nginx, pause and glibc-dns-testing images this e2e names (test/utils/image/manifest.go), one
#   registry/name:tag a line, for tagging local images with them;
# - images/agnhost.tar: a one-layer agnhost image under that exact name (`docker save` archive: no registry here).
# Cached by version: a second call returns at once. Cold after lib/build-kube.sh (most packages already in the Go
# build cache): 344 s measured, vet included (now off); from an empty build cache ~10 min on 2 cores (e2e.test
# alone took 587 s). A progress line every 30 s. Built whole in $out.tmp, then moved into place.
set -euo pipefail
. "$(dirname "$0")/common.sh"
. "$(dirname "$0")/kube-tree.sh"

out=$LAB_CACHE/e2e-$KUBE_VERSION
names() { log "e2e $KUBE_VERSION names: $(tr '\n' ' ' <"$1")"; }
# What the agnhost image holds besides agnhost (agnhost_image): a change makes the image again, not the binaries.
IMAGE_RECIPE="4: dash, busybox, curl, GNU wget, getent, netcat-openbsd, dig; glibc-dns-testing named"

# probe_compiles TOTAL LOG: "812 of 2950 packages compiled (k8s.io/...)", then "linking". `go test -c` has no
# per-package listing (its -v is the test binary's flag), so count the compile commands its -x prints; cached
# packages print none.
probe_compiles() {
  local n last
  if grep -q '/link -o ' "$2"; then echo "linking"; return 0; fi
  n=$(grep -c '/compile -o ' "$2" || true)
  last=$(grep '/compile -o ' "$2" | tail -n 1 | sed -n 's/.* -p \([^ ]*\) .*/\1/p')
  echo "$n of $1 packages compiled${last:+ ($last)}"
}

# with_libs ROOT BIN PATH [LIBDIR]: BIN at ROOT/PATH with every shared library ldd resolves for it (LIBDIR first:
# libraries unpacked from .debs), the loader included (the host's binaries are dynamic; the image has no libc).
with_libs() {
  local r=$1 libs lib dest
  libs=$(LD_LIBRARY_PATH=${4:-} ldd "$2") || die "agnhost image: ldd $2 failed"
  [[ $libs != *"not found"* ]] || die "agnhost image: $2 misses libraries: $(grep 'not found' <<<"$libs" | tr -s ' \t\n' ' ')"
  install -D -m 755 "$2" "$r$3"
  for lib in $(grep -o '/[^ ]*' <<<"$libs"); do
    dest=$lib
    # An unpacked .deb's library goes where its package puts it.
    [ -z "${4:-}" ] || [[ $lib != "$4"/* ]] || dest=/usr/lib/x86_64-linux-gnu/${lib#"$4"/}
    [ -e "$r$dest" ] || install -D -m 755 "$lib" "$r$dest"
  done
}

# unpack_debs DIR PKG...: the packages unpacked into DIR/root (apt's cache, else `apt-get download`), never
# installed system-wide; prints DIR/root.
unpack_debs() {
  local d=$1 p deb; shift
  mkdir -p "$d/root"
  for p in "$@"; do
    deb=$(ls /var/cache/apt/archives/"${p}"_*_amd64.deb "$d/${p}"_*.deb 2>/dev/null | tail -n 1 || true)
    if [ -z "$deb" ]; then
      # apt's download runs as _apt, which cannot write into the lab's cache: download as root.
      (cd "$d" && { apt-get -o APT::Sandbox::User=root download -q "$p" \
        || { apt-get update -q && apt-get -o APT::Sandbox::User=root download -q "$p"; }; }) >>"$d/apt.log" 2>&1 \
        || die "agnhost image: apt-get download $p failed (log: $d/apt.log)"
      deb=$(ls "$d/${p}"_*.deb | tail -n 1)
    fi
    dpkg-deb -x "$deb" "$d/root"
  done
  echo "$d/root"
}

# parse_images TREE OUT: the names e2e gives its images (its defaults, without KUBE_TEST_REPO_LIST): registries from initRegistry, images
# from initImageConfigs (`configs[Agnhost] = Config{list.PromoterE2eRegistry, "agnhost", "2.66.1"}`).
parse_images() {
  awk -v want="Agnhost BusyBox Nginx NginxNew Pause GlibcDnsTesting" '
    BEGIN { n = split(want, w, " "); for (i = 1; i <= n; i++) wanted[w[i]] = i }
    /initRegistry = RegistryList[{]/ { inreg = 1; next }
    inreg && /^[ \t]*[}]/ { inreg = 0 }
    inreg && /^[ \t]*[A-Za-z0-9]+:[ \t]*"/ { k = $1; sub(/:$/, "", k); v = $2; gsub(/[",]/, "", v); reg[k] = v }
    /^[ \t]*configs\[[A-Za-z0-9]+\] = Config[{]list\.[A-Za-z0-9]+, "[^"]*", "[^"]*"[}]/ {
      l = $0; gsub(/[][{}(),"=]/, " ", l); split(l, f, " "); sub(/^list\./, "", f[4])
      if ((f[2] in wanted) && (f[4] in reg)) out[wanted[f[2]]] = reg[f[4]] "/" f[5] ":" f[6] }
    END { for (i = 1; i <= n; i++) { if (!(i in out)) { print "no image " w[i] > "/dev/stderr"; exit 1 } print out[i] } }
  ' "$1/test/utils/image/manifest.go" >"$2" || die "test/utils/image/manifest.go changed: its images no longer parse"
}

# agnhost_image REF AGNHOST SRC OUT: the image e2e's pods run as REF, as upstream's (SRC/test/images/agnhost/
# Dockerfile): entrypoint /agnhost with CMD pause, the /agnhost-2 link, /uploads, porter's certificates and the
# user/group one test expects; then busybox-static's applets, and the real tools e2e runs (below).
# /bin/sh is dash: busybox's sh runs its own nc applet ahead of $PATH, and e2e's `nc -v -t ...` fails with it.
agnhost_image() {
  local ref=$1 r=$work/agnhost-root nc a
  mkdir -p "$r"/{bin,etc,proc,sys,dev,tmp,root,uploads}; chmod 1777 "$r/tmp"
  cp "$2" "$r/agnhost"; ln -s agnhost "$r/agnhost-2"
  cp "$3/test/images/agnhost/porter/localhost.crt" "$3/test/images/agnhost/porter/localhost.key" "$r/"
  chmod 644 "$r/localhost.crt" "$r/localhost.key"
  # e2e's DNS tests run dig (+tcp, +search) and getent; its Service checks run `wget -T` (busybox's wget
  # segfaults with -T), curl and `nc -v -t`.
  debs=$(unpack_debs "$work/debs" netcat-openbsd bind9-dnsutils bind9-libs libjemalloc2 libmaxminddb0 libfstrm0 \
    libprotobuf-c1 liblmdb0) || exit 1
  with_libs "$r" "$debs/bin/nc.openbsd" /bin/nc
  with_libs "$r" "$debs/usr/bin/dig" /usr/bin/dig "$debs/usr/lib/x86_64-linux-gnu"
  for tool in curl dash wget getent; do with_libs "$r" "$(command -v $tool)" "/bin/$tool"; done
  ln -s dash "$r/bin/sh"
  cp /bin/busybox "$r/bin/busybox"
  for a in $(/bin/busybox --list); do [ -e "$r/bin/$a" ] || [ -L "$r/bin/$a" ] || ln -s busybox "$r/bin/$a"; done
  printf '%s\n' 'root:x:0:0:root:/root:/bin/sh' 'user-defined-in-image:x:1000:1000::/tmp:/bin/sh' \
    'nobody:x:65534:65534:nobody:/:/bin/sh' >"$r/etc/passwd"
  printf '%s\n' 'root:x:0:' 'user-defined-in-image:x:1000:' 'group-defined-in-image:x:50000:user-defined-in-image' \
    'nobody:x:65534:' >"$r/etc/group"
  echo 'hosts: files dns' >"$r/etc/nsswitch.conf"
  # The tools must run from the image's own files: a missing library shows here, not in a test pod.
  # (No redirection inside: the image's /dev is empty, and /dev/null would become a file.)
  chroot "$r" /bin/sh -c 'curl --version && nc -h 2>&1 | grep -q OpenBSD && dig -v && wget --version && getent passwd root && ls / && /agnhost --help' >/dev/null 2>&1 \
    || die "agnhost image: its tools do not run in $r"
  [ -z "$(ls -A "$r/dev")" ] || die "agnhost image: the check left files in $r/dev"
  mkimage "$ref" "$r" "$4" '["/agnhost"]' '["pause"]'
  image_ok "$4" "$ref" || die "agnhost image: $4 is not an archive of $ref"
}

have=1; for f in bin/e2e.test bin/agnhost images.txt; do [ -s "$out/$f" ] || have=0; done
if [ $have = 1 ]; then
  if [ -s "$out/images/agnhost.tar" ] && [ "$(cat "$out/images/.recipe" 2>/dev/null)" = "$IMAGE_RECIPE" ]; then
    log "e2e $KUBE_VERSION cached in $out"; names "$out/images.txt"; exit 0
  fi
  # The binaries are current, the image is not: make it again from them (porter's certificates come from the
  # module cache's read-only tree).
  t=$(now) work=$LAB_CACHE/e2e-image-$KUBE_VERSION
  rm -rf "$work"; mkdir -p "$work"
  parse_images "$LAB_CACHE/gopath/pkg/mod/k8s.io/kubernetes@v$KUBE_VERSION" "$out/images.txt"
  ref=$(grep '/agnhost:' "$out/images.txt")
  agnhost_image "$ref" "$out/bin/agnhost" "$LAB_CACHE/gopath/pkg/mod/k8s.io/kubernetes@v$KUBE_VERSION" "$work/agnhost.tar"
  mkdir -p "$out/images"; mv "$work/agnhost.tar" "$out/images/agnhost.tar"; echo "$IMAGE_RECIPE" >"$out/images/.recipe"
  rm -rf "$work"
  log "image $ref made again ($IMAGE_RECIPE) in $(since "$t")s"; names "$out/images.txt"; exit 0
fi
command -v go >/dev/null || die "go is not installed (apt golang-go, or the machine's Go)"

t0=$(now)
work=$LAB_CACHE/e2e-build-$KUBE_VERSION
kube_tree "$work"   # lib/kube-tree.sh: the Go settings, the writable tree, the version ldflags
tree=$KUBE_TREE ld=$KUBE_LDFLAGS
rm -rf "$out.tmp"; mkdir -p "$out.tmp/bin" "$out.tmp/images"
cd "$tree"
progress "kubernetes $KUBE_VERSION: downloading its modules" "$work/mod.log" probe_last go mod download \
  || die "kubernetes: go mod download failed (log: $work/mod.log)"

parse_images "$tree" "$out.tmp/images.txt"
agnhost_ref=$(grep '/agnhost:' "$out.tmp/images.txt")
agnhost_ver=$(cat test/images/agnhost/VERSION)
# upstream stamps the image's tag into agnhost (test/images/agnhost/Makefile): `agnhost --version` then matches it.
[ "${agnhost_ref##*:}" = "$agnhost_ver" ] || log "warning: e2e names $agnhost_ref, its agnhost source says $agnhost_ver"

t=$(now)
total=$(go list -deps -tags providerless ./test/images/agnhost 2>/dev/null | wc -l) || total='?'
progress "agnhost $agnhost_ver: building" "$work/agnhost.log" "probe_lines $total" \
  go build -v -trimpath -tags providerless -ldflags "$ld -X main.Version=$agnhost_ver" -o "$out.tmp/bin/agnhost" ./test/images/agnhost \
  || die "agnhost build failed (log: $work/agnhost.log)"
[[ $(ldd "$out.tmp/bin/agnhost" 2>&1 || true) == *"not a dynamic executable"* ]] || die "agnhost is not static"
log "agnhost $agnhost_ver built in $(since "$t")s"

t=$(now)
total=$(go list -deps -test -tags providerless ./test/e2e 2>/dev/null | wc -l) || total='?'
log "building e2e.test $KUBE_VERSION with $(go version | awk '{print $3}') ($total packages; ~10 min on 2 cores from an empty build cache)"
# -vet=off: `go test -c` vets the suite and every package it imports (~2 min more here), which checks
# upstream's code, not the lab's.
progress "e2e.test $KUBE_VERSION: building" "$work/e2e.log" "probe_compiles $total" \
  go test -c -x -vet=off -trimpath -tags providerless -ldflags "$ld" -o "$out.tmp/bin/e2e.test" ./test/e2e \
  || die "e2e.test build failed (log: $work/e2e.log)"
v=$("$out.tmp/bin/e2e.test" --version 2>&1 | tail -n 1)
[ "$v" = "v$KUBE_VERSION" ] || die "e2e.test reports $v"
# images.txt must name what the built suite pulls (it lists its images itself).
listed=$("$out.tmp/bin/e2e.test" --list-images 2>/dev/null) || die "e2e.test --list-images failed"
while read -r i; do
  grep -qxF "$i" <<<"$listed" || die "e2e.test does not list $i: test/utils/image/manifest.go parsed wrong"
done <"$out.tmp/images.txt"
log "e2e.test $KUBE_VERSION built in $(since "$t")s"

t=$(now)
agnhost_image "$agnhost_ref" "$out.tmp/bin/agnhost" "$tree" "$out.tmp/images/agnhost.tar"
echo "$IMAGE_RECIPE" >"$out.tmp/images/.recipe"
log "image $agnhost_ref made in $(since "$t")s ($(du -h "$out.tmp/images/agnhost.tar" | cut -f1))"

cd "$LAB_DIR"
rm -rf "$out"; mv "$out.tmp" "$out"
echo "$(since "$t0")" >"$out/.build-seconds"
rm -rf "$work"
log "e2e $KUBE_VERSION built into $out in $(since "$t0")s"
names "$out/images.txt"
