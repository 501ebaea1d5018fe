#!/usr/bin/env bash
# vm-nodes.sh up|down|status: Kubernetes nodes that are real VMs on the lab's OVN, for nested-vlan end to end.
# Node `qvmN` is a qemu guest booted from Debian's stock kernel (lib/guest-kernel.sh: it has 802.1Q, which this
# machine's kernel lacks), its NIC a tap on br-int bound to a Neutron port that is a trunk's parent, so OVN
# handles the pods' VLAN subports for real. Inside: containerd + kubelet of the lab's release + kuryr-daemon, all
# the machine's own binaries read over 9p (lib/vm-guest/); the kubelet reaches the API server through OVN at
# its pod-network address. Pods are VLAN devices of the VM's NIC, wired by a controller run with
# --vif-driver nested-vlan (the lab's installed one uses nested-macvlan for the namespace nodes).
#
# Software emulation (TCG): /dev/kvm on these machines is PVM, which boots only PVM-built guest kernels
# (docs/lab.md). The nodes carry label kuryr.lab/vm-node=true and taint kuryr.lab/vm-node=true:NoSchedule.
# Settings: KURYR_LAB_VM_NODES (1), KURYR_LAB_VM_NODE_CPUS (2), KURYR_LAB_VM_NODE_MEM_MB (2048).
# `up` is idempotent (a running VM is kept); `down` stops the VMs and deletes their Nodes, ports and trunks.
set -euo pipefail
. "$(dirname "$0")/common.sh"
S=$LAB_STATE
V=$S/vm-nodes
KUBECTL="kubectl --kubeconfig=$S/k8s/kubeconfig"
VSCTL="ovs-vsctl --db=unix:$S/ovs/db.sock"
COUNT=${KURYR_LAB_VM_NODES:-1}
CPUS=${KURYR_LAB_VM_NODE_CPUS:-2}
MEM=${KURYR_LAB_VM_NODE_MEM_MB:-2048}
K=$LAB_CACHE/guest-kernel/current
LAB_SCRIPT=vm-nodes

vm_name() { echo "qvm$1"; }
vm_ip() { echo "198.18.0.$((20 + $1))"; }
tap_name() { echo "${NETNS_PREFIX}qvm$1-t"; }

initramfs() { # DIR OUT: busybox, the modules and lib/vm-guest/init, plus DIR as /guest
  local dir=$1 out=$2 r
  r=$(mktemp -d)
  mkdir -p "$r"/{bin,sbin,proc,sys,dev,newroot,modules}
  cp /bin/busybox "$r/bin/busybox"
  for a in $(/bin/busybox --list); do [ -e "$r/bin/$a" ] || ln -s busybox "$r/bin/$a"; done
  rm -f "$r/bin/init"
  for m in $(cat "$K/modules/order"); do cp "$K/modules/$m.ko" "$r/modules/"; done
  cp "$K/modules/order" "$r/modules/order"
  cp "$LAB_DIR/lib/vm-guest/init" "$r/init"
  cp -a "$dir" "$r/guest"
  (cd "$r" && find . -print0 | cpio --null -o -H newc --quiet | gzip -1) >"$out"
  rm -rf "$r"
}

guest_files() { # I DIR: what the guest reads at /var/lib/kuryr-guest
  local i=$1 d=$2 node ip mac
  node=$(vm_name "$i"); ip=$(vm_ip "$i"); mac=$(jq -r .mac "$V/$node/vm.json")
  mkdir -p "$d"
  cp "$LAB_DIR/lib/vm-guest/node.sh" "$d/node.sh"
  cp "$S/k8s/ca.crt" "$d/ca.crt"
  cat >"$d/kubeconfig" <<EOC
apiVersion: v1
kind: Config
clusters: [{name: kuryr-lab, cluster: {server: "https://$KAPI_IP:$P_KAPI", certificate-authority: /var/lib/kuryr-guest/ca.crt}}]
users: [{name: admin, user: {token: "$(cat "$S/k8s/admin.token")"}}]
contexts: [{name: kuryr-lab, context: {cluster: kuryr-lab, user: admin}}]
current-context: kuryr-lab
EOC
  cat >"$d/env" <<EOE
NODE=$node
IP=$ip
PREFIX=${POD_CIDR#*/}
GW=$POD_GW
MAC=$mac
KAPI=$KAPI_IP:$P_KAPI
CLUSTER_DNS=$DNS_SVC_IP
CLUSTER_DOMAIN=$CLUSTER_DOMAIN
KUBE_BIN=$KUBE_BIN
TARGET=$TARGET
IMAGES=$LAB_CACHE/images
DAEMON_LOG=${KURYR_DAEMON_LOG:-info}
NODE_LABELS=kuryr.lab/vm-node=true,kuryr.openstack.org/pod-vif=nested-vlan
NODE_TAINTS=kuryr.lab/vm-node=true:NoSchedule
EOE
}

node_ready() { $KUBECTL get node "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null | grep -qx True; }

# unavailable WHY: this machine cannot run the guest at all; the lab tests read the reason and skip.
unavailable() { mkdir -p "$V"; echo "$*" >"$V/unavailable"; log "vm nodes: not started: $*"; exit 0; }

# The guest hangs now and then under TCG: both vCPUs spinning in its kernel (seen once in CI: "soft lockup -
# CPU#0 stuck for 659s! [ip6tables]" at 81 s of uptime, the Node never Ready). hung DIR says so: the guest kernel
# reports a lockup or stall, or none of its logs (the agent's is traced, written several times a second while it
# works; its longest quiet step is a 120 s image import) has moved for KURYR_LAB_VM_SILENT_S (180) s.
hung() {
  local last
  grep -qE 'soft lockup|rcu_.* detected stalls|Kernel panic' "$1/console.log" 2>/dev/null && return 0
  last=$(find "$1/log" -maxdepth 1 -type f -printf '%T@\n' 2>/dev/null | sort -n | tail -n 1)
  [ -n "$last" ] && (( $(date +%s) - ${last%.*} >= ${KURYR_LAB_VM_SILENT_S:-180} ))
}
# ready_or_hung NODE DIR ends the wait on either, or when the guest has powered off (its init gives up with a
# "GUEST:" line on the console, qemu then exits: -no-reboot).
ready_or_hung() { node_ready "$1" || hung "$2" || ! running "vm-$1"; }

# boot_until_ready I NODE DIR PORT: boots the VM and waits for its Node Ready; a hung guest is killed and booted
# again, as is one that powered off, up to KURYR_LAB_VM_BOOTS (3) boots; any other failure stops at once with
# the console and agent logs.
# (tap and mac: cmd_up's.)
boot_until_ready() {
  local i=$1 node=$2 d=$3 port=$4 boot boots=${KURYR_LAB_VM_BOOTS:-3}
  for ((boot = 1; boot <= boots; boot++)); do
    rm -rf "$d/guest" "$d/log"/*; mkdir -p "$d/log"
    guest_files "$i" "$d/guest"
    initramfs "$d/guest" "$d/initrd.gz"
    running "vm-$node" && stop_one "vm-$node"
    # A Node left from an earlier boot still reads Ready for ~40 s: only the new kubelet's counts.
    $KUBECTL delete node "$node" --wait=true --timeout=30s >/dev/null 2>&1 || true
    # -cpu Nehalem, not max: under TCG with `max` (AVX2 emulation of this qemu) the static busybox's wget
    # segfaults in the pods. csum=off: userspace OVS conntrack sees the partial checksums of offloaded frames as bad (OVN's ACLs
    # then drop TCP/UDP), as with the namespace VMs' veths (lib/bootstrap.sh).
    start "vm-$node" "$d/qemu.log" qemu-system-x86_64 -name "$node" -accel tcg,thread=multi -cpu Nehalem \
      -smp "$CPUS" -m "$MEM" -display none -no-reboot -serial "file:$d/console.log" \
      -kernel "$K/vmlinuz" -initrd "$d/initrd.gz" -append "console=ttyS0 quiet panic=-1" \
      -netdev "tap,id=n0,ifname=$tap,script=no,downscript=no" \
      -device "virtio-net-pci,netdev=n0,mac=$mac,csum=off,guest_csum=off" \
      -virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap" \
      -virtfs "local,path=$d/log,mount_tag=out,security_model=none,multidevs=remap"
    log "vm nodes: $node booting (TCG, $CPUS vCPUs, $MEM MiB; console $d/console.log, logs $d/log/)"
    waitfor "$node's port ACTIVE" 120 port_active "$port" || { tail -20 "$d/console.log" >&2; die "vm nodes: port of $node not ACTIVE"; }
    waitfor "Node $node Ready" 600 ready_or_hung "$node" "$d" || true
    node_ready "$node" && return 0
    tail -20 "$d/console.log" >&2; tail -30 "$d/log/node.log" >&2 2>/dev/null || true
    if ! running "vm-$node" && ((boot < boots)); then
      log "vm nodes: $node's guest powered off (its console above): booting it again ($((boot + 1)) of $boots)"
      continue
    fi
    if hung "$d" && ((boot < boots)); then
      log "vm nodes: $node's guest hung (its console and agent log above): killed, booting it again ($((boot + 1)) of $boots)"
      stop_one "vm-$node"
      continue
    fi
    die "vm nodes: $node did not become Ready (state: $(cat "$d/log/state" 2>/dev/null || echo none); boot $boot of $boots)"
  done
}

cmd_up() {
  [ -f "$S/lab.json" ] || die "vm nodes: the lab is not bootstrapped"
  rm -f "$V/unavailable"
  command -v qemu-system-x86_64 >/dev/null || unavailable "qemu-system-x86_64 is not installed (apt qemu-system-x86)"
  [ -c /dev/net/tun ] || unavailable "no /dev/net/tun: the VM's NIC cannot be a tap"
  qemu-system-x86_64 -netdev help 2>/dev/null | grep -qx tap || unavailable "this qemu has no tap networking"
  bash "$LAB_DIR/lib/guest-kernel.sh"
  [ -f "$LAB_CACHE/images/.complete" ] || die "vm nodes: no local images (lab/lab nodes up builds them)"
  TARGET=$(node_binaries) || die "vm nodes: building kuryr-daemon and kuryr-cni failed"
  . "$LAB_DIR/lib/neutron.sh"
  local pod_net pod_subnet i node ip tap port mac trunk d t
  pod_net=$(jq -r .pod_network_id "$S/lab.json"); pod_subnet=$(jq -r .pod_subnet_id "$S/lab.json")
  for ((i = 1; i <= COUNT; i++)); do
    node=$(vm_name "$i"); ip=$(vm_ip "$i"); tap=$(tap_name "$i"); d=$V/$node
    if running "vm-$node" && node_ready "$node"; then continue; fi
    t=$(now)
    mkdir -p "$d/log"
    port=$(ensure ports "$node" "{\"name\":\"$node\",\"network_id\":\"$pod_net\",\"project_id\":\"$PROJECT_ID\",\"binding:host_id\":\"$CHASSIS\",\"device_owner\":\"compute:nova\",\"device_id\":\"$node\",\"fixed_ips\":[{\"subnet_id\":\"$pod_subnet\",\"ip_address\":\"$ip\"}]}")
    [ -n "$port" ] && [ "$port" != null ] || die "vm nodes: cannot create port $node"
    # The workers' group beside `default`, as the namespace VMs' ports have it: the API server (its port is
    # not in `default`) reaches the kubelet for logs and exec through its egress proxy.
    worker_groups "$port" "$(default_sg)" "$(jq -r .nodes_security_group_id "$S/lab.json")" \
      || die "vm nodes: cannot give port $node the workers' security group"
    mac=$(api GET "$N/ports/$port" | jq -r .port.mac_address)
    trunk=$(ensure trunks "$node-trunk" "{\"name\":\"$node-trunk\",\"port_id\":\"$port\",\"project_id\":\"$PROJECT_ID\"}")
    jq -n --arg n "$node" --arg p "$port" --arg m "$mac" --arg ip "$ip" --arg t "$trunk" --arg tap "$tap" \
      '{name:$n, port_id:$p, mac:$m, ip:$ip, trunk_id:$t, tap:$tap}' >"$d/vm.json"
    # The tap exists before qemu so OVS binds it at once; no address in the root namespace.
    ip link show "$tap" >/dev/null 2>&1 || ip tuntap add dev "$tap" mode tap
    ip link set "$tap" up
    $VSCTL --may-exist add-port br-int "$tap" -- set Interface "$tap" external_ids:iface-id="$port"
    boot_until_ready "$i" "$node" "$d" "$port"
    $KUBECTL annotate --overwrite node "$node" "kuryr.lab/neutron-port=$port" >/dev/null
    log "vm nodes: $node Ready at $ip ($(since "$t")s from boot)"
  done
}

cmd_down() {
  [ -d "$V" ] || exit 0
  . "$LAB_DIR/lib/neutron.sh"
  local d node j
  for d in "$V"/*/; do
    [ -d "$d" ] || continue
    d=${d%/}; node=$(basename "$d")
    $KUBECTL delete pods -A --field-selector "spec.nodeName=$node" --grace-period=0 --force --wait=false >/dev/null 2>&1 || true
    $KUBECTL delete node "$node" --wait=false >/dev/null 2>&1 || true
    stop_one "vm-$node"
    if [ -f "$d/vm.json" ]; then
      j=$(cat "$d/vm.json")
      # Bounded: with ovs-vswitchd gone (it aborted under the overlay datapath run) ovs-vsctl waits for good.
      $VSCTL --timeout=20 --if-exists del-port br-int "$(jq -r .tap <<<"$j")" || true
      ip link del "$(jq -r .tap <<<"$j")" 2>/dev/null || true
      # Neutron refuses to delete the trunk of a bound parent port: unbind it first.
      api PUT "$N/ports/$(jq -r .port_id <<<"$j")" '{"port":{"binding:host_id":""}}' >/dev/null || true
      api DELETE "$N/trunks/$(jq -r .trunk_id <<<"$j")" >/dev/null || true
      api DELETE "$N/ports/$(jq -r .port_id <<<"$j")" >/dev/null || true
    fi
  done
  rm -rf "$V"
  log "vm nodes stopped and removed"
}

cmd_status() {
  local d node st
  [ -d "$V" ] || return 0
  for d in "$V"/*/; do
    [ -d "$d" ] || continue
    d=${d%/}; node=$(basename "$d")
    if running "vm-$node"; then st=up; else st=down; fi
    printf '%-24s %-8s %s\n' "vm-$node" "$st" "$(cat "$d/log/state" 2>/dev/null || echo -)"
  done
}

# exec NODE COMMAND...: COMMAND (one shell command line) run as root in VM NODE by its agent (lib/vm-guest/node.sh),
# through the VM's log share; prints its output, exits with its code (124 after KURYR_LAB_VM_EXEC_TIMEOUT, 600 s).
cmd_exec() {
  [ $# -ge 2 ] || die "usage: lab/lab vms exec NODE COMMAND..."
  local node=$1; shift
  local d=$V/$node/log/exec id rc ticks=0 limit=${KURYR_LAB_VM_EXEC_TIMEOUT:-600}
  running "vm-$node" && [ -d "$d" ] || die "vm nodes: $node is not running with an agent (lab/lab vms up)"
  id=$(date +%s%N)-$$
  printf '%s\n' "$*" >"$d/$id.tmp"
  mv "$d/$id.tmp" "$d/$id.sh"
  while [ ! -f "$d/$id.rc" ]; do
    sleep 0.2; ticks=$((ticks + 1))
    [ "$ticks" -lt $((limit * 5)) ] || { echo "vm nodes: $node: no answer within ${limit}s" >&2; exit 124; }
  done
  cat "$d/$id.out"
  rc=$(cat "$d/$id.rc")
  rm -f "$d/$id".*
  return "$rc"
}

case "${1:-}" in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  exec) shift; cmd_exec "$@" ;;
  *) die "usage: vm-nodes.sh up|down|status|exec NODE COMMAND..." ;;
esac
