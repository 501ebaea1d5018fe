#!/usr/bin/env bash
# The main job on the embedded default: brings up the lab (real Kubernetes API + Keystone + Neutron on ML2/OVN +
# Octavia, worker "VMs" as network namespaces, two of them real nodes with containerd + kubelet), installs
# kuryr-rs from its image the way an operator does (lab/lab kuryr install: deploy/image/build, the archive
# imported into each node's containerd, kubectl apply -k of lab/overlay around deploy/: kuryr-controller and the
# kuryr-daemon DaemonSet run as pods under their own ServiceAccounts), applies the sample workload in examples/ (pods
# created by kubelet → containerd → kuryr-cni → kuryr-daemon) and prints pod → Neutron port → VLAN/IP → node,
# each Service's Octavia load balancer (listeners, members, floating IP), then a ping matrix between the pods
# (through real OVN) and between the VMs. Idempotent: a second run reuses
# the running lab, controller and workload.
set -euo pipefail
cd "$(dirname "$0")"
[ "$(id -u)" = 0 ] || { echo "demo.sh needs root (network namespaces, OVS)" >&2; exit 1; }
# The nodes' first kuryr-daemon comes from the image's static build (deploy/image/build-bins), which the image
# then reuses: a first run compiles the Rust tree once.
export KURYR_LAB_BINARIES=${KURYR_LAB_BINARIES:-static}
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
echo "== kuryr-rs installed from its image ($driver: $why)"
echo "   deploy/image/build → ctr images import on each kubelet node → kubectl apply -k (lab/overlay around deploy/)"
. lab/lib/common.sh
# Host-process controllers from an older demo give way to the installed ones.
for old in kuryr-controller kuryr-controller-policy; do
  if running "$old"; then
    pid=$(cat "$(pidfile "$old")"); kill "$pid"; waitfor "the old $old process to exit" 30 sh -c "! kill -0 $pid"
    rm -f "$(pidfile "$old")"
  fi
done
# kuryr-demo-policy: a network of its own (namespace subnet driver) and NetworkPolicies as security groups; its
# pods are trunk subports on vm3 (no kubelet there, so they are wired but never start). Other settings than
# the first controller's: a second Deployment of the same image (kuryr-controller-policy, lib/kuryr-install.sh).
KURYR_INSTALL_NAMESPACE=kuryr-demo KURYR_INSTALL_POLICY_NAMESPACE=kuryr-demo-policy lab/lab kuryr install
lab/lab kuryr status | sed 's/^/  /'
lab_json() { jq -r ".$1" "$KURYR_LAB_STATE/lab.json"; }
# A request through a Ready Service (or its floating IP) that goes unanswered fails the demo: it is listed at the
# end and the exit status is 1, so a regression never passes as a shown failure.
FAILED=()
unanswered() { FAILED+=("$1"); }
ANSWERED=()
# requests FROM URL N WAIT CMD...: after the first answer (waiting up to WAIT s), N requests run through CMD
# (a namespace prefix), each printed with the pod that answered.
requests() {
  local from=$1 url=$2 n=$3 wait=$4 i ans; shift 4
  answers() { "$@" curl -s -m 3 "$url" 2>/dev/null | grep -q .; }
  waitfor "an answer from $url" "$wait" answers "$@" || true
  for ((i = 1; i <= n; i++)); do
    ans=$("$@" curl -s -m 3 "$url" 2>/dev/null || true)
    printf '  %s → %s : %s\n' "$from" "$url" "${ans:-no answer}"
    if [ -n "$ans" ]; then ANSWERED+=("$ans"); else unanswered "$from → $url (request $i of $n)"; fi
  done
}
# backends WHAT POD...: which of the Service's pods answered the requests made since the last call.
backends() {
  local what=$1 p name got=0 all=0 missing=(); shift
  for p in "$@"; do
    name=${p%% *}; all=$((all + 1))
    if printf '%s\n' "${ANSWERED[@]}" | grep -qx "$name"; then got=$((got + 1)); else missing+=("$name"); fi
  done
  echo "  $what: answered by $got of its $all pods${missing:+ (not by ${missing[*]})}"
  ANSWERED=()
}
finish() {
  echo
  if [ ${#FAILED[@]} -gt 0 ]; then
    echo "== FAILED: ${#FAILED[@]} request(s) through Ready Services went unanswered:"
    printf '  %s\n' "${FAILED[@]}"
    echo "  (docs/lab.md, Troubleshooting; kubectl -n kube-system logs deploy/kuryr-controller)"
    exit 1
  fi
  echo "== every request through a Service was answered"
  exit 0
}
echo
echo "== kuryr-daemon on each kubelet node (the DaemonSet's pods; kubectl -n kube-system logs ds/kuryr-daemon)"
for n in $(kubectl get nodes -l kuryr.lab/kubelet=true -o name); do
  n=${n#node/}; i=${n##*vm}
  printf '  %-12s %s\n' "$n" "$(curl -sf "http://127.0.0.1:$((P_KDAEMON + i))/readyz" || echo 'NOT READY')"
done
echo
echo "== sample workload (examples/demo.yaml, examples/demo-policy.yaml)"
kubectl apply -f examples/demo.yaml -f examples/demo-policy.yaml | sed 's/^/  /'
want=$(kubectl -n kuryr-demo get deploy demo -o jsonpath='{.spec.replicas}')
running_pods() { [ "$(kubectl -n kuryr-demo get pods -l app=demo --field-selector=status.phase=Running -o name | wc -l)" -ge "$want" ]; }
waitfor "$want demo pods Running" 300 running_pods \
  || echo "  not all pods are Running yet; see kubectl -n kube-system logs deploy/kuryr-controller and the kubelet logs"
echo
echo "== pod → Neutron port → VLAN/IP → node (KuryrPort status; the IP kubelet reports came from kuryr-cni)"
kubectl -n kuryr-demo get kuryrports -o custom-columns='POD:.metadata.name,NODE:.spec.podNodeName,NEUTRON-PORT:.status.vifs.eth0.vif.portId,TYPE:.status.vifs.eth0.vif.type,VLAN:.status.vifs.eth0.vif.vlanId,IP:.status.vifs.eth0.vif.ips[0].address,MAC:.status.vifs.eth0.vif.mac,VRRP-MAC:.status.vifs.eth0.vif.vrrpMac,ACTIVE:.status.vifs.eth0.vif.active' | sed 's/^/  /'
kubectl -n kuryr-demo get pods -l app=demo -o custom-columns='POD:.metadata.name,STATUS:.status.phase,POD-IP:.status.podIP,NODE:.spec.nodeName' | sed 's/^/  /'
echo
echo "== Services → Octavia load balancers (ovn provider; VIP = clusterIP, members = the Ready pods)"
lbs_ready() { [ "$(kubectl -n kuryr-demo get kuryrloadbalancers -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c True)" -ge 2 ]; }
waitfor "2 KuryrLoadBalancers Ready" 180 lbs_ready || echo "  load balancers not Ready yet; see kubectl -n kube-system logs deploy/kuryr-controller"
kubectl -n kuryr-demo get kuryrloadbalancers -o custom-columns='SERVICE:.metadata.name,TYPE:.spec.type,VIP:.status.loadbalancer.ip,LB:.status.loadbalancer.id,PROVIDER:.status.loadbalancer.provider,STATUS:.status.loadbalancer.provisioning_status,LISTENERS:.status.listeners[*].name,MEMBERS:.status.members[*].ip,FLOATING-IP:.status.service_pub_ip_info.ip_addr' | sed 's/^/  /'
kubectl -n kuryr-demo get services -o wide | sed 's/^/  /'
echo
echo "== namespaces → Neutron networks/subnets"
printf '  %-20s %s\n' kuryr-demo "the default pod subnet $(lab_json pod_subnet_cidr) (subnet $(lab_json pod_subnet_id); --subnet-driver default)"
kn_ready() { kubectl -n kuryr-demo-policy get kuryrnetwork kuryr-demo-policy -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null | grep -q True; }
waitfor "the KuryrNetwork of kuryr-demo-policy" 120 kn_ready || echo "  not Ready yet; see kubectl -n kube-system logs deploy/kuryr-controller-policy"
kubectl -n kuryr-demo-policy get kuryrnetworks -o custom-columns='NAMESPACE:.spec.nsName,NETWORK:.status.netId,SUBNET:.status.subnetId,CIDR:.status.subnetCIDR,ROUTER:.status.routerId' | sed 's/^/  /'
echo
echo "== kuryr-demo-policy pods → trunk subports on vm3 (wired by kuryr-controller; Pending: vm3 runs no kubelet)"
kps_ready() { [ "$(kubectl -n kuryr-demo-policy get kuryrports -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c True)" -ge 3 ]; }
waitfor "3 KuryrPorts Ready in kuryr-demo-policy" 180 kps_ready || echo "  not all Ready yet; see kubectl -n kube-system logs deploy/kuryr-controller-policy"
kubectl -n kuryr-demo-policy get kuryrports -o custom-columns='POD:.metadata.name,NODE:.spec.podNodeName,NEUTRON-PORT:.status.vifs.eth0.vif.portId,VLAN:.status.vifs.eth0.vif.vlanId,IP:.status.vifs.eth0.vif.ips[0].address,ACTIVE:.status.vifs.eth0.vif.active' | sed 's/^/  /'
echo
echo "== NetworkPolicy → security group and rules (KuryrNetworkPolicy status) → the pods' ports (Neutron)"
knp_ready() { kubectl -n kuryr-demo-policy get kuryrnetworkpolicies -o jsonpath='{.items[*].status.conditions[?(@.type=="Ready")].status}' 2>/dev/null | grep -q True; }
waitfor "the KuryrNetworkPolicy" 120 knp_ready || echo "  not Ready yet; see kubectl -n kube-system logs deploy/kuryr-controller-policy"
kubectl -n kuryr-demo-policy get kuryrnetworkpolicies -o json | jq -r '.items[] |
  "  \(.metadata.name) → security group \(.status.securityGroupId // "(none yet)"), \(.status.securityGroupRules | length) rules:",
  (.status.securityGroupRules[] | "    \(.direction) \(.ethertype) \(.protocol // "any")" +
    (if .port_range_min then " ports \(.port_range_min)-\(.port_range_max)" else "" end) +
    (if .remote_group_id then " from members of SG \(.remote_group_id)" elif .remote_ip_prefix then " from \(.remote_ip_prefix)" else "" end) +
    "  [\(.id // "-")]")'
echo "  ports of the web pods carry the policy's group; the client pod's port the groups its peers select:"
# Neutron, read directly (the lab has no openstack CLI): a token for the lab's kuryr user, unless noauth.
auth=()
if [ "$LAB_AUTH" = keystone ]; then
  token=$(curl -sf -D - -o /dev/null -H 'Content-Type: application/json' "http://127.0.0.1:$P_KEYSTONE/v3/auth/tokens" \
    -d "{\"auth\":{\"identity\":{\"methods\":[\"password\"],\"password\":{\"user\":{\"name\":\"kuryr\",\"domain\":{\"id\":\"default\"},\"password\":\"$ADMIN_PASSWORD\"}}},\"scope\":{\"project\":{\"name\":\"$LAB_PROJECT\",\"domain\":{\"id\":\"default\"}}}}}" \
    | awk 'tolower($1)=="x-subject-token:"{print $2}' | tr -d '\r')
  auth=(-H "X-Auth-Token: $token")
fi
for p in $(kubectl -n kuryr-demo-policy get kuryrports -o jsonpath='{range .items[*]}{.metadata.name}={.status.vifs.eth0.vif.portId}{" "}{end}'); do
  sgs=$(curl -sf "${auth[@]}" "http://127.0.0.1:$P_NEUTRON/v2.0/ports/${p#*=}" | jq -r '.port.security_groups | join(", ")' || echo '?')
  printf '    %-28s port %s  security groups: %s\n' "${p%%=*}" "${p#*=}" "$sgs"
done
echo
echo "== ping matrix between the pods (inside each pod's network namespace, through OVN)"
# A pod's namespace is its container's: the task PID comes from the node's containerd.
pods=()
while read -r name ip node cid; do
  [ -n "$cid" ] || continue
  pid=$(ctr --address "$LAB_STATE/nodes/$node/containerd.sock" -n k8s.io tasks ls 2>/dev/null | awk -v c="${cid#containerd://}" '$1==c {print $2}')
  [ -n "$pid" ] && pods+=("$name $ip $pid $node")
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
# From a worker VM that runs none of the demo's pods: a nested-macvlan pod reaches, through an ovn load
# balancer, only the backends on other VMs (its VM's port and conntrack zone are its own backends' too:
# docs/cni.md, Troubleshooting), so the demo's own pods ask the Services of other VMs below.
spare=$(jq -r --argjson k "$LAB_KUBELETS" '.vms[$k:][0] // empty | "\(.name) \(.netns)"' "$KURYR_LAB_STATE/lab.json")
vip=$(kubectl -n kuryr-demo get service demo -o jsonpath='{.spec.clusterIP}')
echo "== requests through a Service (VM ${spare%% *}, which runs none of its pods → the clusterIP $vip of Service demo → its Octavia ovn LB → a demo pod's httpd, which answers with its name)"
if [ ${#pods[@]} -eq 0 ] || [ -z "$vip" ]; then unanswered "Service demo: no running pods or no clusterIP"
elif [ -z "$spare" ]; then echo "  (no lab VM without a kubelet node: KURYR_LAB_VMS > KURYR_LAB_KUBELETS shows this)"; else
  requests "${spare%% *}" "http://$vip/" 8 60 ip netns exec "${spare#* }"
  backends "Service demo" "${pods[@]}"
fi
echo
fip=$(kubectl -n kuryr-demo get kuryrloadbalancer demo-public -o jsonpath='{.status.service_pub_ip_info.ip_addr}' 2>/dev/null || true)
echo "== from outside the cluster (netns ${NETNS_PREFIX}outside on the external network, $OUTSIDE_IP) → floating IP ${fip:-?} of Service demo-public"
if [ -z "$fip" ]; then unanswered "Service demo-public: no floating IP (kubectl -n kuryr-demo describe kuryrloadbalancer demo-public)"; else
  requests outside "http://$fip/" 6 60 ip netns exec "${NETNS_PREFIX}outside"
  backends "Service demo-public" "${pods[@]}"
fi
echo
kvip=$(kubectl -n default get service kubernetes -o jsonpath='{.spec.clusterIP}')
echo "== the API server from a pod, through Service default/kubernetes (clusterIP $kvip → Octavia → the API server's advertised $(jq -r .apiserver.ip "$KURYR_LAB_STATE/lab.json"))"
if [ ${#pods[@]} -eq 0 ]; then echo "  (no running pods)"; else
  set -- ${pods[0]}; from=$1 pid=$3
  sa=/proc/$pid/root/var/run/secrets/kubernetes.io/serviceaccount
  kapi() { nsenter -t "$pid" -n curl -s -m 5 --cacert "$sa/ca.crt" -H "Authorization: Bearer $(cat "$sa/token")" "https://$kvip/version"; }
  kapi_ok() { kapi 2>/dev/null | grep -q gitVersion; }
  waitfor "an answer from https://$kvip/version" 120 kapi_ok || true
  ver=$(kapi 2>/dev/null | jq -r .gitVersion 2>/dev/null || true)
  printf '  %s → https://%s/version (its ServiceAccount token, the cluster CA): %s\n' "$from" "$kvip" "${ver:-no answer}"
  [ -n "$ver" ] || unanswered "$from → https://$kvip/version (Service default/kubernetes)"
fi
echo
dvip=$(kubectl -n kube-system get service kube-dns -o jsonpath='{.spec.clusterIP}' 2>/dev/null || true)
echo "== a Service by name from a pod: the cluster DNS (CoreDNS, lib/dns.sh) through Service kube-system/kube-dns (clusterIP ${dvip:-?} → Octavia, UDP and TCP listeners → CoreDNS at $DNS_IP)"
if [ ${#pods[@]} -eq 0 ]; then echo "  (no running pods)"; else
  set -- ${pods[0]}; from=$1 pid=$3
  name=demo.kuryr-demo.svc.cluster.local want=$(kubectl -n kuryr-demo get service demo -o jsonpath='{.spec.clusterIP}')
  # The pod's own nslookup and /etc/resolv.conf (its nameserver is the kubelet's --cluster-dns).
  resolve() { nsenter -t "$pid" -n -m nslookup "$name" 2>/dev/null | awk '/^Name:/{n=1} n && /^Address/{print $NF; exit}'; }
  resolved() { [ "$(resolve)" = "$want" ]; }
  waitfor "$name to resolve in $from" 120 resolved || true
  got=$(resolve || true)
  printf '  %s (nameserver %s) → %s : %s\n' "$from" "$(nsenter -t "$pid" -m awk '/^nameserver/{print $2; exit}' /etc/resolv.conf 2>/dev/null)" "$name" "${got:-no answer}"
  [ "$got" = "$want" ] || unanswered "$from → DNS $name (want $want, Service kube-system/kube-dns)"
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
echo
# nested-vlan for real: a qemu guest (Debian's kernel has 802.1Q) whose NIC is bound to a Neutron trunk's parent
# port; its pods are VLAN subports that OVN handles (docs/lab.md, "VM nodes"). KURYR_DEMO_VM_NODE=0 skips it.
echo "== nested-vlan on a real VM: node qvm1 (qemu guest, containerd + kubelet + kuryr-daemon inside; lab/lab vms up)"
if [ "${KURYR_DEMO_VM_NODE:-1}" = 0 ]; then echo "  skipped: KURYR_DEMO_VM_NODE=0"; finish; fi
lab/lab vms up 2>&1 | sed 's/^/  /'
if [ -f "$KURYR_LAB_STATE/vm-nodes/unavailable" ]; then
  echo "  not shown: $(cat "$KURYR_LAB_STATE/vm-nodes/unavailable")"; finish
fi
kubectl get node qvm1 -o custom-columns='NODE:.metadata.name,INTERNAL-IP:.status.addresses[?(@.type=="InternalIP")].address,READY:.status.conditions[?(@.type=="Ready")].status,POD-VIF:.metadata.labels.kuryr\.openstack\.org/pod-vif,KERNEL:.status.nodeInfo.kernelVersion' | sed 's/^/  /'
kubectl apply -f examples/demo-vm.yaml | sed 's/^/  /'
vm_running() { [ "$(kubectl -n kuryr-demo get pods -l app=demo-vm --field-selector=status.phase=Running -o name | wc -l)" -ge 2 ]; }
waitfor "2 demo-vm pods Running on qvm1" 300 vm_running \
  || echo "  not Running yet; see $KURYR_LAB_STATE/vm-nodes/qvm1/log/ and kubectl -n kube-system logs deploy/kuryr-controller"
echo "  pod → Neutron port → VLAN (KuryrPort status):"
kubectl -n kuryr-demo get kuryrports -o custom-columns='POD:.metadata.name,NODE:.spec.podNodeName,NEUTRON-PORT:.status.vifs.eth0.vif.portId,TYPE:.status.vifs.eth0.vif.type,VLAN:.status.vifs.eth0.vif.vlanId,IP:.status.vifs.eth0.vif.ips[0].address,ACTIVE:.status.vifs.eth0.vif.active' \
  | awk 'NR==1 || $2=="qvm1"' | sed 's/^/    /'
trunk=$(jq -r .trunk_id "$KURYR_LAB_STATE/vm-nodes/qvm1/vm.json" 2>/dev/null || true)
if [ -n "$trunk" ]; then
  echo "  trunk $trunk (parent: Neutron port qvm1) as Neutron lists its subports (those no pod names: the pool's free ports, attached ahead):"
  curl -sf "${auth[@]}" "http://127.0.0.1:$P_NEUTRON/v2.0/trunks/$trunk" \
    | jq -r '.trunk.sub_ports[] | "    port \(.port_id)  \(.segmentation_type) \(.segmentation_id)"' || echo "    (Neutron did not answer)"
fi
vm_pods=$(kubectl -n kuryr-demo get pods -l app=demo-vm --field-selector=status.phase=Running -o jsonpath='{range .items[*]}{.metadata.name} {.status.podIP}{"\n"}{end}')
targets=$( { for p in "${pods[@]}"; do set -- $p; echo "$1 $2"; done; echo "$vm_pods"; } | awk 'NF==2')
if [ -z "$vm_pods" ]; then echo "  (no demo-vm pod running)"; else
  echo "  ping matrix across the namespace nodes' pods (macvlan) and qvm1's (VLAN subports):"
  printf '    %-36s' from\\to; while read -r n _; do printf '%-21s' "${n#demo-}"; done <<<"$targets"; echo
  for a in "${pods[@]}"; do
    set -- $a; printf '    %-36s' "$1"; pid=$3
    while read -r _ ip; do
      if [ "$ip" = "$2" ]; then printf '%-21s' -; continue; fi
      ok=FAIL; for _ in 1 2 3; do nsenter -t "$pid" -n ping -c 1 -W 2 "$ip" >/dev/null 2>&1 && { ok=ok; break; }; done
      printf '%-21s' "$ok"
    done <<<"$targets"; echo
  done
  # No exec into the guest's kubelet from here: a probe pod on qvm1 (a VLAN subport too) pings, kubelet
  # reports what it printed as its termination message.
  script=$(while read -r n ip; do printf 'if ping -c 3 -W 3 %s >/dev/null; then echo ok; else echo FAIL; fi; ' "$ip"; done <<<"$targets")
  kubectl -n kuryr-demo delete pod demo-vm-probe --ignore-not-found >/dev/null
  kubectl -n kuryr-demo apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: demo-vm-probe, labels: {app: demo-vm-probe}}
spec:
  nodeSelector: {kuryr.lab/vm-node: "true"}
  tolerations: [{key: kuryr.lab/vm-node, operator: Exists}]
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: probe
    image: local.test/busybox:1
    imagePullPolicy: Never
    command: ["sh", "-c", "( $script ) > /dev/termination-log 2>&1"]
YAML
  probe_done() { kubectl -n kuryr-demo get pod demo-vm-probe -o jsonpath='{.status.phase}' 2>/dev/null | grep -Eq 'Succeeded|Failed'; }
  if waitfor "the probe pod on qvm1" 300 probe_done; then
    pip=$(kubectl -n kuryr-demo get pod demo-vm-probe -o jsonpath='{.status.podIP}')
    printf '    %-36s' "vm-probe ($pip, qvm1)"
    kubectl -n kuryr-demo get pod demo-vm-probe -o jsonpath='{.status.containerStatuses[0].state.terminated.message}' \
      | while read -r r; do printf '%-21s' "$r"; done; echo
  else
    echo "    (the probe pod did not finish; kubectl -n kuryr-demo describe pod demo-vm-probe)"
  fi
  kubectl -n kuryr-demo delete pod demo-vm-probe --ignore-not-found --wait=false >/dev/null
  vmvip=$(kubectl -n kuryr-demo get service demo-vm -o jsonpath='{.spec.clusterIP}')
  if [ ${#pods[@]} -gt 0 ] && [ -n "$vmvip" ]; then
    set -- ${pods[0]}; from=$1 pid=$3
    echo "  requests from $from (macvlan, $2) → Service demo-vm (clusterIP $vmvip → Octavia ovn LB → members on qvm1's subports):"
    requests "$from" "http://$vmvip/" 4 120 nsenter -t "$pid" -n
    backends "Service demo-vm" $(kubectl -n kuryr-demo get pods -l app=demo-vm --field-selector=status.phase=Running -o name | sed 's|^pod/||')
  fi
fi
echo "  (the VM keeps running for a second ./demo.sh; lab/lab vms down stops it)"
finish
