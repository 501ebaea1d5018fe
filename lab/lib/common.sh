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
# kubelet nodes: base + node index (kubelet API, kubelet healthz, kuryr-daemon health/metrics).
P_KUBELET=21250 P_KUBELET_HEALTHZ=21260 P_KDAEMON=21270

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

# waitfor WHAT TIMEOUT_S CMD...: run CMD every 0.2 s until it succeeds.
waitfor() {
  local what=$1 secs=$2 i; shift 2
  for ((i = 0; i < secs * 5; i++)); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  log "timed out after ${secs}s waiting for $what"; return 1
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
