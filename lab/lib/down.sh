#!/usr/bin/env bash
# Stops everything the lab started — by pidfile only (TERM to each process group, KILL after 5 s: neutron-api,
# octavia-api and the driver agent ignore TERM) — then removes the OVS bridges, veths and network namespaces it
# made, and the state directory. Never touches processes or links it did not create.
set -uo pipefail
. "$(dirname "$0")/common.sh"

stop_group() { # NAME... : TERM every recorded process group, wait <= 5 s, KILL what is left
  local n pid pids=() i alive
  for n in "$@"; do
    local f; f=$(pidfile "$n")
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    if ours "$n"; then
      pids+=("$pid")
      # the group if the process leads one (started with setsid), else the process alone
      if [ "$(ps -o pgid= -p "$pid" | tr -d ' ')" = "$pid" ]; then kill -TERM -- "-$pid" 2>/dev/null; else kill -TERM "$pid" 2>/dev/null; fi
    fi
    rm -f "$f" "$f.start"
  done
  for ((i = 0; i < 50; i++)); do
    alive=0; for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && return 0; sleep 0.1
  done
  for pid in "${pids[@]}"; do kill -KILL -- "-$pid" 2>/dev/null; kill -KILL "$pid" 2>/dev/null; done
}

[ -d "$LAB_STATE" ] || { log "no lab state in $LAB_STATE: nothing to stop"; exit 0; }
t=$(now)
# The kubelet nodes first, while the API server still runs (their pods are deleted and stopped properly).
bash "$(dirname "$0")/kubelet-nodes.sh" down
# Anything the project's own binaries (controller, daemons, kubelets, containerd, sample servers) left behind.
extra=$(ls "$LAB_STATE/pids" 2>/dev/null | sed -n 's/\.pid$//p' | grep -vxE 'etcd|kube-.*|mariadbd|ovn-.*|ovs-.*|rabbitmq|keystone.*|neutron-api|octavia-.*' || true)
[ -n "$extra" ] && stop_group $extra
stop_group octavia-api octavia-worker octavia-driver-agent neutron-api keystone keystone-short kube-scheduler kube-controller-manager
stop_group kube-apiserver
stop_group etcd rabbitmq
# rabbitmq's epmd daemon runs detached from the server's group: stop the one on the lab's port only
pkill -u rabbitmq -f "epmd.*-port $P_EPMD" 2>/dev/null
for p in $(pgrep -u rabbitmq epmd 2>/dev/null); do
  tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "ERL_EPMD_PORT=$P_EPMD" && kill "$p" 2>/dev/null
done
if [ -S "$LAB_STATE/ovs/db.sock" ]; then
  VSCTL="ovs-vsctl --timeout=5 --db=unix:$LAB_STATE/ovs/db.sock"
  $VSCTL --if-exists del-br br-int; $VSCTL --if-exists del-br br-ex
fi
stop_group ovn-controller ovs-vswitchd ovs-ovsdb ovn-northd ovn-sb ovn-nb mariadbd
for ns in $(ip netns list | awk '{print $1}' | grep "^$NETNS_PREFIX" || true); do ip netns del "$ns"; done
lab_routes_down
for l in $(ip -o link show | awk -F': ' '{print $2}' | cut -d@ -f1 | grep "^$NETNS_PREFIX" || true); do ip link del "$l" 2>/dev/null; done
rm -rf "$LAB_STATE"
log "lab stopped and cleaned ($(since "$t")s)"
