#!/usr/bin/env bash
# The main job on the embedded default: brings up the lab (real Kubernetes API + Keystone + Neutron on ML2/OVN +
# Octavia, worker "VMs" as network namespaces), installs the kuryr-rs CRDs, runs kuryr-controller against it,
# applies the sample workload in examples/ and prints pod → Neutron port → VLAN/IP → node, then a ping matrix
# between the VMs. Idempotent: a second run reuses the running lab, controller and workload.
set -euo pipefail
cd "$(dirname "$0")"
[ "$(id -u)" = 0 ] || { echo "demo.sh needs root (network namespaces, OVS)" >&2; exit 1; }
lab/lab up
eval "$(lab/lab env)"
echo
echo "== kuryr-rs CRDs (deploy/crds/)"
kubectl apply -f deploy/crds/ | sed 's/^/  /'
echo
echo "== kuryr-controller (nested-vlan: every pod a VLAN subport of its VM's trunk)"
cargo build -q --locked -p kuryr-controller
. lab/lib/common.sh
if running kuryr-controller; then
  echo "  already running (pid $(cat "$(pidfile kuryr-controller)"))"
else
  bin=$(cargo metadata --format-version 1 --no-deps | jq -r .target_directory)/debug/kuryr-controller
  start kuryr-controller "$LAB_STATE/log/kuryr-controller.log" "$bin" --kubeconfig "$KUBECONFIG" \
    --clouds-yaml "$OS_CLIENT_CONFIG_FILE" --os-cloud "$OS_CLOUD" --cluster-id kuryr-lab \
    --pod-subnet "$(jq -r .pod_subnet_id "$KURYR_LAB_STATE/lab.json")" --metrics-addr 127.0.0.1:28082
  waitfor kuryr-controller 60 curl -sf http://127.0.0.1:28082/readyz || fail_component kuryr-controller "$LAB_STATE/log/kuryr-controller.log"
  echo "  started (log $LAB_STATE/log/kuryr-controller.log, metrics http://127.0.0.1:28082/metrics)"
fi
echo
echo "== sample workload (examples/demo.yaml)"
kubectl apply -f examples/demo.yaml | sed 's/^/  /'
ready() { [ "$(kubectl -n kuryr-demo get kuryrports -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c True)" -ge 6 ]; }
waitfor "6 KuryrPorts Ready" 180 ready || { echo "  not all pods wired yet; see $LAB_STATE/log/kuryr-controller.log"; }
echo
echo "== pod → Neutron port → VLAN/IP → node (KuryrPort status, Neutron says ACTIVE)"
kubectl -n kuryr-demo get kuryrports -o custom-columns='POD:.metadata.name,NODE:.spec.podNodeName,NEUTRON-PORT:.status.vifs.eth0.vif.portId,VLAN:.status.vifs.eth0.vif.vlanId,IP:.status.vifs.eth0.vif.ips[0].address,MAC:.status.vifs.eth0.vif.mac,ACTIVE:.status.vifs.eth0.vif.active' | sed 's/^/  /'
echo "  (pods stay Pending: no kubelet runs on the lab VMs yet, so nothing plugs these ports into pod namespaces)"
echo
echo "== Kubernetes Nodes (one per lab VM)"
kubectl get nodes -o custom-columns='NODE:.metadata.name,INTERNAL-IP:.status.addresses[?(@.type=="InternalIP")].address,READY:.status.conditions[?(@.type=="Ready")].status,NEUTRON-PORT:.metadata.annotations.kuryr\.lab/neutron-port' | sed 's/^/  /'
echo
echo "== ping matrix between the VMs (through OVN)"
mapfile -t vms < <(jq -r '.vms[] | "\(.name) \(.netns) \(.ip)"' "$KURYR_LAB_STATE/lab.json")
printf '  %-8s' from\\to; for v in "${vms[@]}"; do set -- $v; printf '%-8s' "$1"; done; echo
for a in "${vms[@]}"; do
  set -- $a; printf '  %-8s' "$1"; ns=$2
  for b in "${vms[@]}"; do
    set -- $b
    if ip netns exec "$ns" ping -c 1 -W 2 "$3" >/dev/null 2>&1; then printf '%-8s' ok; else printf '%-8s' FAIL; fi
  done; echo
done
