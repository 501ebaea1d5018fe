#!/usr/bin/env bash
# The main job on the embedded default: brings up the lab (real Kubernetes API + Keystone + Neutron on ML2/OVN +
# Octavia, worker "VMs" as network namespaces, two of them real nodes with containerd + kubelet + kuryr-daemon),
# installs the kuryr-rs CRDs, runs kuryr-controller against it, applies the sample workload in examples/ (pods
# created by kubelet → containerd → kuryr-cni → kuryr-daemon) and prints pod → Neutron port → VLAN/IP → node,
# each Service's Octavia load balancer (listeners, members, floating IP), then a ping matrix between the pods
# (through real OVN) and between the VMs. Idempotent: a second run reuses
# the running lab, controller and workload.
set -euo pipefail
cd "$(dirname "$0")"
[ "$(id -u)" = 0 ] || { echo "demo.sh needs root (network namespaces, OVS)" >&2; exit 1; }
lab/lab up
eval "$(lab/lab env)"
echo
echo "== kuryr-rs CRDs (deploy/crds/)"
kubectl apply -f deploy/crds/ | sed 's/^/  /'
echo
# The VMs are namespaces on this machine's kernel: nested-vlan needs 802.1Q there, else nested-macvlan.
probe=kuryr-demo-probe-$$
ip netns add "$probe"
ip -n "$probe" link add p0 type veth peer name p1
if ip -n "$probe" link add link p0 name p0.5 type vlan id 5 2>/dev/null; then driver=nested-vlan
  why="every pod a VLAN subport of its VM's trunk"
else driver=nested-macvlan
  why="this kernel has no 802.1Q, so every pod is a macvlan of its VM's eth0 with a VRRP MAC paired with its IP on the VM's port"
fi
ip netns del "$probe"
echo "== kuryr-controller ($driver: $why)"
cargo build -q --locked -p kuryr-controller
. lab/lib/common.sh
bin=$(cargo metadata --format-version 1 --no-deps | jq -r .target_directory)/debug/kuryr-controller
args=(--kubeconfig "$KUBECONFIG" --clouds-yaml "$OS_CLIENT_CONFIG_FILE" --os-cloud "$OS_CLOUD" --cluster-id kuryr-lab
  --pod-subnet "$(jq -r .pod_subnet_id "$KURYR_LAB_STATE/lab.json")" --vif-driver "$driver" --namespace kuryr-demo
  --metrics-addr 127.0.0.1:28082
  --service-subnet "$(jq -r .service_subnet_id "$KURYR_LAB_STATE/lab.json")"
  --external-network "$(jq -r .external_network_id "$KURYR_LAB_STATE/lab.json")" --lb-provider ovn)
# A controller started with other settings (an older demo) is replaced.
if running kuryr-controller && [ "$(cat "$LAB_STATE/pids/kuryr-controller.args" 2>/dev/null)" != "${args[*]}" ]; then
  pid=$(cat "$(pidfile kuryr-controller)"); kill "$pid"; waitfor "old kuryr-controller to exit" 30 sh -c "! kill -0 $pid"
fi
if running kuryr-controller; then
  echo "  already running (pid $(cat "$(pidfile kuryr-controller)"))"
else
  start kuryr-controller "$LAB_STATE/log/kuryr-controller.log" "$bin" "${args[@]}"
  echo "${args[*]}" >"$LAB_STATE/pids/kuryr-controller.args"
  waitfor kuryr-controller 60 curl -sf http://127.0.0.1:28082/readyz || fail_component kuryr-controller "$LAB_STATE/log/kuryr-controller.log"
  echo "  started (log $LAB_STATE/log/kuryr-controller.log, metrics http://127.0.0.1:28082/metrics)"
fi
echo
echo "== kuryr-daemon on each kubelet node (started by lab/lab up; logs $LAB_STATE/log/kuryr-daemon-<node>.log)"
for n in $(kubectl get nodes -l kuryr.lab/kubelet=true -o name); do
  n=${n#node/}; i=${n##*vm}
  printf '  %-12s %s\n' "$n" "$(curl -sf "http://127.0.0.1:$((P_KDAEMON + i))/readyz" || echo 'NOT READY')"
done
echo
echo "== sample workload (examples/demo.yaml)"
kubectl apply -f examples/demo.yaml | sed 's/^/  /'
want=$(kubectl -n kuryr-demo get deploy demo -o jsonpath='{.spec.replicas}')
running_pods() { [ "$(kubectl -n kuryr-demo get pods -l app=demo --field-selector=status.phase=Running -o name | wc -l)" -ge "$want" ]; }
waitfor "$want demo pods Running" 300 running_pods \
  || echo "  not all pods are Running yet; see $LAB_STATE/log/kuryr-controller.log and the kubelet/kuryr-daemon logs"
echo
echo "== pod → Neutron port → VLAN/IP → node (KuryrPort status; the IP kubelet reports came from kuryr-cni)"
kubectl -n kuryr-demo get kuryrports -o custom-columns='POD:.metadata.name,NODE:.spec.podNodeName,NEUTRON-PORT:.status.vifs.eth0.vif.portId,TYPE:.status.vifs.eth0.vif.type,VLAN:.status.vifs.eth0.vif.vlanId,IP:.status.vifs.eth0.vif.ips[0].address,MAC:.status.vifs.eth0.vif.mac,VRRP-MAC:.status.vifs.eth0.vif.vrrpMac,ACTIVE:.status.vifs.eth0.vif.active' | sed 's/^/  /'
kubectl -n kuryr-demo get pods -l app=demo -o custom-columns='POD:.metadata.name,STATUS:.status.phase,POD-IP:.status.podIP,NODE:.spec.nodeName' | sed 's/^/  /'
echo
echo "== Services → Octavia load balancers (ovn provider; VIP = clusterIP, members = the Ready pods)"
lbs_ready() { [ "$(kubectl -n kuryr-demo get kuryrloadbalancers -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c True)" -ge 2 ]; }
waitfor "2 KuryrLoadBalancers Ready" 180 lbs_ready || echo "  load balancers not Ready yet; see $LAB_STATE/log/kuryr-controller.log"
kubectl -n kuryr-demo get kuryrloadbalancers -o custom-columns='SERVICE:.metadata.name,TYPE:.spec.type,VIP:.status.loadbalancer.ip,LB:.status.loadbalancer.id,PROVIDER:.status.loadbalancer.provider,STATUS:.status.loadbalancer.provisioning_status,LISTENERS:.status.listeners[*].name,MEMBERS:.status.members[*].ip,FLOATING-IP:.status.service_pub_ip_info.ip_addr' | sed 's/^/  /'
kubectl -n kuryr-demo get services -o wide | sed 's/^/  /'
echo
echo "== ping matrix between the pods (inside each pod's network namespace, through OVN)"
# A pod's namespace is its container's: the task PID comes from the node's containerd.
pods=()
while read -r name ip node cid; do
  [ -n "$cid" ] || continue
  pid=$(ctr --address "$LAB_STATE/nodes/$node/containerd.sock" -n k8s.io tasks ls 2>/dev/null | awk -v c="${cid#containerd://}" '$1==c {print $2}')
  [ -n "$pid" ] && pods+=("$name $ip $pid")
done < <(kubectl -n kuryr-demo get pods -l app=demo --field-selector=status.phase=Running \
  -o jsonpath='{range .items[*]}{.metadata.name} {.status.podIP} {.spec.nodeName} {.status.containerStatuses[0].containerID}{"\n"}{end}')
if [ ${#pods[@]} -eq 0 ]; then echo "  (no running pods)"; else
  printf '  %-36s' from\\to; for p in "${pods[@]}"; do set -- $p; printf '%-18s' "${1#demo-}"; done; echo
  for a in "${pods[@]}"; do
    set -- $a; printf '  %-36s' "$1 ($2)"; pid=$3
    for b in "${pods[@]}"; do
      set -- $b
      if [ "$3" = "$pid" ]; then printf '%-18s' -; continue; fi
      ok=FAIL; for _ in 1 2 3; do nsenter -t "$pid" -n ping -c 1 -W 2 "$2" >/dev/null 2>&1 && { ok=ok; break; }; done
      printf '%-18s' "$ok"
    done; echo
  done
fi
echo
echo "== Kubernetes Nodes (vm1..3: the lab VMs, no kubelet; kubelet-vm1/2: real nodes on vm1/vm2)"
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
