#!/usr/bin/env bash
# The main job on the embedded default: brings up the lab (real Kubernetes API + Keystone + Neutron on ML2/OVN +
# Octavia, worker "VMs" as network namespaces), installs the kuryr-rs CRDs, and prints what runs where and what
# reaches what. Idempotent: a second run reuses the running lab.
set -euo pipefail
cd "$(dirname "$0")"
[ "$(id -u)" = 0 ] || { echo "demo.sh needs root (network namespaces, OVS)" >&2; exit 1; }
lab/lab up
eval "$(lab/lab env)"
echo
echo "== kuryr-rs CRDs (deploy/crds/)"
kubectl apply -f deploy/crds/ | sed 's/^/  /'
echo
echo "== Kubernetes Nodes (one per lab VM)"
kubectl get nodes -o custom-columns='NODE:.metadata.name,INTERNAL-IP:.status.addresses[?(@.type=="InternalIP")].address,READY:.status.conditions[?(@.type=="Ready")].status,NEUTRON-PORT:.metadata.annotations.kuryr\.lab/neutron-port' | sed 's/^/  /'
echo
echo "== ping matrix between the VMs (through OVN)"
mapfile -t vms < <(jq -r '.vms[] | "\(.name) \(.netns) \(.ip)"' "$KURYR_LAB_STATE/lab.json")
printf '  %-6s' from/to; for v in "${vms[@]}"; do set -- $v; printf '%-8s' "$1"; done; echo
for a in "${vms[@]}"; do
  set -- $a; printf '  %-6s ' "$1"; ns=$2
  for b in "${vms[@]}"; do
    set -- $b
    if ip netns exec "$ns" ping -c 1 -W 2 "$3" >/dev/null 2>&1; then printf '%-8s' ok; else printf '%-8s' FAIL; fi
  done; echo
done
