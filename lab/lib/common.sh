# Shared settings and helpers for the lab scripts. Sourced, never run.
# Everything lives on 127.0.0.1 or inside network namespaces the lab creates; nothing gets an address in the root
# namespace, and 192.0.2.0/24 (the machine's own eth0) is never used.
LAB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REPO_DIR=$(cd "$LAB_DIR/.." && pwd)
LAB_STATE=${KURYR_LAB_STATE:-/var/lib/kuryr-lab}
LAB_CACHE=${KURYR_LAB_CACHE:-/var/cache/kuryr-lab}
# The Kubernetes release the lab builds and runs (lib/build-kube.sh, from Go modules). Any release the Go module
# proxy serves with a matching staging release works; the product supports >= 1.30 (docs/lab.md).
KUBE_VERSION=${KURYR_LAB_K8S:-1.37.2}
KUBE_BIN=${KUBE_BIN:-$LAB_CACHE/kube-$KUBE_VERSION/bin}
# The lab's scripts use the kubectl of the lab's release (the machine's may be several minors behind).
[ -d "$KUBE_BIN" ] && PATH=$KUBE_BIN:$PATH
# OVN and OVS: trixie's, unpacked with their own libc by lib/newer-debs.sh (bookworm's are older than Neutron 29
# supports); their schemas are read from this tree.
OVN_ROOT=$LAB_CACHE/debs/ovn-current
LAB_VMS=${KURYR_LAB_VMS:-3}
# How many of the VMs also get a real node: containerd + kubelet + kuryr-daemon (lib/kubelet-nodes.sh).
LAB_KUBELETS=${KURYR_LAB_KUBELETS:-2}
# Lab option: auth for Neutron/Octavia. keystone (default, as every real cloud) or noauth.
LAB_AUTH=${KURYR_LAB_AUTH:-keystone}
# Keystone token lifetime in seconds (short values let tests see tokens expire mid-run).
LAB_TOKEN_EXPIRATION=${KURYR_LAB_TOKEN_EXPIRATION:-3600}
# A second Keystone API on the same database and keys issues tokens that expire after this many seconds, so tests
# can watch a client's token expire mid-run while the rest of the lab keeps normal tokens.
LAB_SHORT_TOKEN_EXPIRATION=${KURYR_LAB_SHORT_TOKEN_EXPIRATION:-20}

# Ports, all on 127.0.0.1.
P_ETCD=22379 P_ETCD_PEER=22380 P_KAPI=26443 P_KCM=20257 P_KSCHED=20259
P_DB=23306 P_NB=26641 P_SB=26642 P_KEYSTONE=25000 P_NEUTRON=29696 P_OCTAVIA=29876
P_KEYSTONE_SHORT=25001 P_AMQP=25673 P_EPMD=24369 P_OCT_HM=25555
# kubelet nodes: base + node index (kubelet API and healthz, in the VM's namespace; kuryr-daemon health/metrics
# and containerd's streaming server, in the root namespace).
P_KUBELET=21250 P_KUBELET_HEALTHZ=21260 P_KDAEMON=21270 P_CSTREAM=21280

# Addresses (documentation/benchmark ranges, confined to the lab's namespaces).
POD_CIDR=198.18.0.0/18 POD_GW=198.18.0.1
SVC_CIDR=198.19.0.0/16 SVC_GW=198.19.255.254
# Dual-stack (docs/dual-stack.md): IPv6 subnets (unique local) on the same pod and service networks; the API
# server's second service range is SVC_CIDR6 (Kubernetes takes at most a /108 of IPv6 service addresses).
POD_CIDR6=fd42:18::/64 POD_GW6=fd42:18::1
SVC_CIDR6=fd42:19::/112 SVC_GW6=fd42:19::ffff
# The API server's address on the pod network (lib/bootstrap.sh gives it a Neutron port in netns kuryr-kapi) and
# the `kubernetes` Service's clusterIP (the first of SVC_CIDR): pods reach the API through that Service.
KAPI_IP=198.18.0.10 KAPI_SVC_IP=198.19.0.1
# The cluster DNS (lib/dns.sh): CoreDNS on a Neutron port at DNS_IP, behind the Service kube-system/kube-dns at
# DNS_SVC_IP (the kubelets' --cluster-dns), domain CLUSTER_DOMAIN; COREDNS_VERSION is built by lib/build-coredns.sh.
DNS_IP=198.18.0.9 DNS_SVC_IP=198.19.0.10 CLUSTER_DOMAIN=cluster.local
# 1.15.0: the newest release the Go module proxy served on 2026-11-29; its go.mod asks for Go >= 1.26.0, the machine's.
COREDNS_VERSION=${KURYR_LAB_COREDNS:-1.15.0}
EXT_CIDR=203.0.113.0/24 EXT_GW=203.0.113.1
# A host outside the cluster on the external network (netns kuryr-outside), for floating IPs: the external
# subnet's gateway, as the upstream router of a real provider network (Neutron never allocates that address).
OUTSIDE_IP=$EXT_GW
CHASSIS=lab-hv1
NETNS_PREFIX=kuryr-
LAB_PROJECT=kuryr
LAB_REGION=RegionOne
ADMIN_PASSWORD=lab-admin-secret
SERVICE_PASSWORD=lab-service-secret

log() { printf '[lab %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf '[lab %s] ERROR: %s\n' "$(date +%H:%M:%S)" "$*" >&2; exit 1; }
now() { date +%s.%N; }
since() { awk -v a="$(now)" -v b="$1" 'BEGIN{printf "%.1f", a-b}'; }

# waitfor WHAT TIMEOUT_S CMD...: run CMD every 0.2 s until it succeeds, saying every 30 s that it still waits.
waitfor() {
  local what=$1 secs=$2 i; shift 2
  for ((i = 0; i < secs * 5; i++)); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.2
    if (( i > 0 && i % (5 * ${KURYR_PROGRESS_EVERY:-30}) == 0 )); then log "still waiting for $what ($((i / 5)) s of ${secs} s)"; fi
  done
  log "timed out after ${secs}s waiting for $what"; return 1
}

# progress WHAT LOG PROBE CMD...: runs CMD with its output in LOG and, while it runs, says every
# ${KURYR_PROGRESS_EVERY:-30} s what it is doing and how far it is ("WHAT: <PROBE LOG>, 3 min 30 s so far; log: LOG"),
# so no step is silent for long. PROBE (split into words, LOG appended) prints how far, or nothing: probe_cargo,
# "probe_lines TOTAL", probe_last. A failure prints LOG's last lines and names it; the exit status is CMD's.
progress() {
  local what=$1 logf=$2 probe=$3 t0 pid rc=0 i=0 how el; shift 3
  t0=$(date +%s); mkdir -p "$(dirname "$logf")"
  # cargo draws its progress bar into a file too when asked (probe_cargo reads it).
  CARGO_TERM_PROGRESS_WHEN=always CARGO_TERM_PROGRESS_WIDTH=100 "$@" >"$logf" 2>&1 </dev/null & pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1; i=$((i + 1))
    if (( i % ${KURYR_PROGRESS_EVERY:-30} == 0 )) && kill -0 "$pid" 2>/dev/null; then
      el=$(( $(date +%s) - t0 )); how=$($probe "$logf" 2>/dev/null || true)
      log "$what: ${how:+$how, }$((el / 60)) min $((el % 60)) s so far; log: $logf"
    fi
  done
  wait "$pid" || rc=$?
  if [ $rc != 0 ]; then log "$what failed (exit $rc); last lines of $logf:"; tail -n 25 "$logf" >&2 || true; fi
  return $rc
}
# probe_cargo LOG: "compiling 143/310 crates (kube-client)" from cargo's progress bar while cargo compiles,
# else the log's last line (what the step does after cargo).
probe_cargo() {
  local last; last=$(tr '\r' '\n' <"$1" | grep -v '^[[:space:]]*$' | tail -n 1)
  case $last in
    *Compiling*|*Building\ \[*|*Downloaded*|*Downloading*)
      tr '\r' '\n' <"$1" | sed -n 's/^ *Building \[[^]]*\] \([0-9]*\/[0-9]*\): \([^ ,]*\).*/compiling \1 crates (\2)/p' | tail -n 1 ;;
    *) echo "${last:0:100}" | sed 's/^ *//' ;;
  esac
}
# probe_lines TOTAL LOG: "1234 of 2113 packages compiled" (go build -v prints one line per package).
probe_lines() { echo "$(wc -l <"$2") of $1 packages compiled"; }
# probe_last LOG: the log's last line, shortened.
probe_last() { tail -n 1 "$1" | tr -d '\r' | cut -c1-100; }

# go_env WORK: the Go settings of the lab's Go builds (lib/kube-tree.sh, build-coredns.sh): the module and build
# caches under $LAB_CACHE (shared, so a rebuild compiles only what changed), static binaries, no workspace, go.mod
# may be updated; WORK is emptied and gives the go command a private HOME.
go_env() {
  rm -rf "$1"; mkdir -p "$1/home"
  export GOPATH=$LAB_CACHE/gopath GOMODCACHE=$LAB_CACHE/gopath/pkg/mod GOCACHE=$LAB_CACHE/go-build-cache
  export GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0 HOME=$1/home
}

# mkimage REF ROOTFS OUT ENTRYPOINT CMD: a one-layer `docker save` archive of ROOTFS tagged REF (no registry here:
# `ctr images import` takes it); ENTRYPOINT and CMD are JSON (an array or null).
mkimage() {
  local ref=$1 rootfs=$2 out=$3 ep=$4 cmd=$5 w diff cfg
  w=$(mktemp -d)
  tar --numeric-owner --owner=0 --group=0 -C "$rootfs" -cf "$w/layer.tar" .
  diff=$(sha256sum "$w/layer.tar" | cut -d' ' -f1)
  printf '{"architecture":"amd64","os":"linux","created":"2024-01-01T00:00:00Z","config":{"Env":["PATH=/bin:/sbin:/usr/bin:/usr/sbin"],"Entrypoint":%s,"Cmd":%s,"WorkingDir":"/"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]},"history":[{"created":"2024-01-01T00:00:00Z","created_by":"kuryr-lab"}]}' \
    "$ep" "$cmd" "$diff" >"$w/config.json"
  cfg=$(sha256sum "$w/config.json" | cut -d' ' -f1)
  mv "$w/config.json" "$w/$cfg.json"; mkdir "$w/$diff"; mv "$w/layer.tar" "$w/$diff/layer.tar"
  echo "[{\"Config\":\"$cfg.json\",\"RepoTags\":[\"$ref\"],\"Layers\":[\"$diff/layer.tar\"]}]" >"$w/manifest.json"
  tar -C "$w" -cf "$out" manifest.json "$cfg.json" "$diff"
  rm -rf "$w"
}
# image_ok OUT REF: OUT is such an archive of REF: manifest.json names REF, one layer and a config the tar holds.
image_ok() {
  local files m; files=$(tar -tf "$1") || return 1
  m=$(tar -xOf "$1" manifest.json) || return 1
  jq -e --arg r "$2" 'length == 1 and .[0].RepoTags == [$r] and (.[0].Layers | length) == 1' <<<"$m" >/dev/null || return 1
  grep -qx "$(jq -r '.[0].Config' <<<"$m")" <<<"$files" && grep -qx "$(jq -r '.[0].Layers[0]' <<<"$m")" <<<"$files"
}

# The kuryr-daemon and kuryr-cni the lab's nodes run when kuryr-rs is not installed from its image:
# KURYR_LAB_BINARIES=debug (default: the workspace's debug build, which `cargo test` builds anyway) or static
# (deploy/image/build-bins, the image's own build: ./demo.sh asks for it, so a first run compiles the tree once).
LAB_BINARIES=${KURYR_LAB_BINARIES:-debug}
# node_binaries: builds them, saying how far every 30 s, and prints the directory that holds them.
node_binaries() {
  local logf=$LAB_STATE/log/node-binaries.log
  case $LAB_BINARIES in
    debug)
      progress "building kuryr-daemon and kuryr-cni (debug)" "$logf" probe_cargo \
        cargo build --locked --manifest-path "$REPO_DIR/Cargo.toml" -p kuryr-cni --bins || return 1
      echo "${CARGO_TARGET_DIR:-/var/cache/kuryr-rs/target}/debug" ;;
    static)
      progress "building the static binaries (the image's; ~8 min cold)" "$logf" probe_cargo \
        env CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/cache/kuryr-rs/target-static}" "$REPO_DIR/deploy/image/build-bins" \
        || return 1
      tail -n 1 "$logf" ;;
    *) log "KURYR_LAB_BINARIES=$LAB_BINARIES: debug or static"; return 1 ;;
  esac
}

# plug_netns NS HOST_LINK MAC ADDR/LEN GATEWAY: netns NS whose eth0 is one end of a veth; the other end,
# HOST_LINK, is left for the caller to add to an OVS bridge. MAC and GATEWAY may be empty. Kept if it exists.
plug_netns() {
  local ns=$1 hl=$2 mac=$3 addr=$4 gw=$5
  ip netns list | awk '{print $1}' | grep -qx "$ns" && return 0
  ip netns add "$ns"
  ip link add "$hl" type veth peer name "$ns-g"
  ip link set "$ns-g" netns "$ns"
  ip -n "$ns" link set "$ns-g" name eth0
  [ -z "$mac" ] || ip -n "$ns" link set eth0 address "$mac"
  ip -n "$ns" addr add "$addr" dev eth0
  # userspace OVS conntrack sees bad L4 checksums from offloaded veths, and OVN's ACLs then drop TCP/UDP
  ip netns exec "$ns" ethtool -K eth0 tx off >/dev/null
  ip -n "$ns" link set lo up
  ip -n "$ns" link set eth0 up
  [ -z "$gw" ] || ip -n "$ns" route add default via "$gw"
  ip link set "$hl" up
}

# The root namespace has no address on the lab's networks, yet the machine's default route would carry a packet
# for them out of eth0: a kubelet's HTTP probe of a pod, the API server dialling port 10250 of a kubelet-less Node.
# Unreachable routes (routes, not addresses) keep every such packet on this machine: it fails at once instead.
# Not $EXT_CIDR: the machine's package registries answer at an address of 203.0.113.0/24 (the root namespace
# reaches them; the lab's external network lives in namespaces only).
LAB_UNREACHABLE4="198.18.0.0/15" LAB_UNREACHABLE6="fd42::/16"
lab_routes_up() {
  local r
  for r in $LAB_UNREACHABLE4; do ip route replace unreachable "$r"; done
  for r in $LAB_UNREACHABLE6; do ip -6 route replace unreachable "$r" 2>/dev/null || true; done
}
lab_routes_down() {
  local r
  for r in $LAB_UNREACHABLE4; do ip route del unreachable "$r" 2>/dev/null || true; done
  for r in $LAB_UNREACHABLE6; do ip -6 route del unreachable "$r" 2>/dev/null || true; done
}

# fail_component NAME LOGFILE: a failed start names the component and shows the tail of its log.
fail_component() {
  log "component '$1' failed to start; last lines of $2:"
  tail -n 25 "$2" >&2 2>/dev/null || true
  exit 1
}

pidfile() { echo "$LAB_STATE/pids/$1.pid"; }
starttime() { awk '{print $22}' "/proc/$1/stat" 2>/dev/null; }
# ours NAME: the pid recorded for NAME is alive AND is the process the lab started (after a reboot or a killed
# session a stale pid may belong to someone else: never signal that one). Processes started by `start` have their
# start time recorded; daemons that write their own pidfile (OVS, OVN) carry the state dir in their command line.
ours() {
  local f pid; f=$(pidfile "$1"); [ -f "$f" ] || return 1
  pid=$(cat "$f"); kill -0 "$pid" 2>/dev/null || return 1
  if [ -f "$f.start" ]; then [ "$(starttime "$pid")" = "$(cat "$f.start")" ]
  else tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "$LAB_STATE"; fi
}
running() { ours "$1"; }

# start NAME LOGFILE CMD...: start CMD in its own session (so 'down' can kill its whole group), record its pid.
start() {
  local name=$1 logf=$2; shift 2
  mkdir -p "$LAB_STATE/pids" "$(dirname "$logf")"
  setsid "$@" >"$logf" 2>&1 </dev/null &
  echo $! >"$(pidfile "$name")"
  starttime $! >"$(pidfile "$name").start"
}

# netns_relay NAME NS ADDR PORT SOCK TARGET_PORT: TCP ADDR:PORT inside netns NS reaches 127.0.0.1:TARGET_PORT
# of the root namespace through the unix socket SOCK (socat at both ends; pidfiles and logs NAME, NAME-ns).
netns_relay() {
  running "$1" || start "$1" "$LAB_STATE/log/$1.log" socat "UNIX-LISTEN:$5,fork,unlink-early" "TCP:127.0.0.1:$6"
  running "$1-ns" || start "$1-ns" "$LAB_STATE/log/$1-ns.log" \
    ip netns exec "$2" socat "TCP-LISTEN:$4,bind=$3,fork,reuseaddr" "UNIX-CONNECT:$5"
}

stop_one() { # NAME: TERM the recorded process group, KILL after 10 s
  local f pid i; f=$(pidfile "$1"); [ -f "$f" ] || return 0
  pid=$(cat "$f")
  if ours "$1"; then
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$pid" 2>/dev/null || true
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$f" "$f.start"
}
