#!/usr/bin/env bash
# kubelet-nodes.sh up|down|status: real Kubernetes nodes on the lab VMs. For each of the first KURYR_LAB_KUBELETS
# (2) VMs, node `kubelet-vmN` gets its own containerd 2.x + runc (Debian), a kubelet of the lab's release and
# a kuryr-daemon (this repo's build). The kubelet runs in the VM's namespace, as on a VM: it reaches the API
# server through OVN at $KAPI_IP, the API server reaches it at the VM's address (through its egress proxy,
# lib/kapi-egress.py), and its probes reach the pods. containerd and the daemon stay in the root namespace
# (host-network pods, the installed controller among them, reach the API server and the cloud's APIs on
# 127.0.0.1 there); a relay carries containerd's streaming port (exec, attach, port-forward) into the VM's
# namespace. The daemon makes pod links from the VM's namespace (`--host-netns`), so pods are
# nested-macvlan children of the VM's eth0 (found by its Neutron port's MAC: no NIC name is configured) and
# their traffic crosses real OVN. Pods are created by
# kubelet → containerd → kuryr-cni → kuryr-daemon, images are built locally (static pause, busybox-static).
#
# The nodes are distinct from the bootstrap Nodes vm1..3 (which have no kubelet and stay that way), share their
# VM's InternalIP (so the controller finds the same parent port), carry label kuryr.lab/kubelet=true and taint
# kuryr.lab/kubelet=true:NoSchedule: only pods that tolerate it are scheduled there.
# `up` starts whatever is not running (idempotent; restarts a daemon whose binary changed); `down` deletes the
# nodes' pods, stops everything by pidfile and removes mounts, cgroups, state. Never touches the other lab parts.
set -euo pipefail
. "$(dirname "$0")/common.sh"
S=$LAB_STATE
N=$S/nodes
KUBECTL="kubectl --kubeconfig=$S/k8s/kubeconfig"
IMAGES=$LAB_CACHE/images

nodes() { # prints "index node vm netns ip" for each kubelet node
  local i
  for ((i = 1; i <= LAB_KUBELETS && i <= LAB_VMS; i++)); do
    jq -r --argjson i "$i" '.vms[$i-1] | "\($i) kubelet-\(.name) \(.name) \(.netns) \(.ip) \(.port_id)"' "$S/lab.json"
  done
}

build_images() { # static pause + busybox, as docker-archive tarballs (no registry here)
  [ -f "$IMAGES/.complete" ] && return 0
  log "kubelet nodes: building local images local.test/pause:1 and local.test/busybox:1"
  local w; w=$(mktemp -d); mkdir -p "$IMAGES"
  printf '#include <signal.h>\n#include <unistd.h>\nstatic void onsig(int s){(void)s;_exit(0);}\nint main(void){signal(SIGTERM,onsig);signal(SIGINT,onsig);for(;;)pause();}\n' >"$w/pause.c"
  mkdir -p "$w/pause-root" "$w/bb-root"/{bin,etc,proc,sys,dev,tmp,root}
  gcc -static -O2 -o "$w/pause-root/pause" "$w/pause.c"
  cp /bin/busybox "$w/bb-root/bin/busybox"
  for a in $(/bin/busybox --list); do [ "$a" = busybox ] || ln -sf busybox "$w/bb-root/bin/$a"; done
  echo 'root:x:0:0:root:/root:/bin/sh' >"$w/bb-root/etc/passwd"; echo 'root:x:0:' >"$w/bb-root/etc/group"
  mkimage local.test/pause:1 "$w/pause-root" "$IMAGES/pause.tar" '["/pause"]' 'null'
  mkimage local.test/busybox:1 "$w/bb-root" "$IMAGES/busybox.tar" 'null' '["/bin/sh"]'
  rm -rf "$w"; touch "$IMAGES/.complete"
}

cgroup_root() { echo "kuryr-lab-$1"; }
mk_cgroups() { # the kubelet's --cgroup-root must exist in every v1 hierarchy (cpuset needs cpus/mems)
  local c=$1 s
  for s in /sys/fs/cgroup/*/; do
    [ -d "$s" ] || continue
    mkdir -p "$s$c" 2>/dev/null || true
  done
  if [ -d /sys/fs/cgroup/cpuset/$c ]; then
    cat /sys/fs/cgroup/cpuset/cpuset.cpus >/sys/fs/cgroup/cpuset/$c/cpuset.cpus
    cat /sys/fs/cgroup/cpuset/cpuset.mems >/sys/fs/cgroup/cpuset/$c/cpuset.mems
  fi
}

containerd_config() { # DIR NODE STREAM_PORT: containerd 2.x, config version 3
  local d=$1
  cat <<EOC
version = 3
root = "$d/containerd/root"
state = "$d/containerd/state"
[grpc]
  address = "$d/containerd.sock"
[ttrpc]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$d/containerd/opt"
# Two containerds share this host: NRI's socket is machine-wide, and nothing here uses it.
[plugins."io.containerd.nri.v1.nri"]
  disable = true
[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "local.test/pause:1"
  # Every registry resolves to a closed port here: an image nobody imported fails to pull at once instead of
  # being fetched from beyond this machine (images are imported archives, lib/kubelet-nodes.sh and lab/e2e).
  [plugins."io.containerd.cri.v1.images".registry]
    config_path = "$d/registries"
[plugins."io.containerd.cri.v1.runtime"]
  disable_apparmor = true
  # the lab runs without CAP_SYS_RESOURCE: oom_score_adj below our own is refused, so clamp it
  restrict_oom_score_adj = true
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["$N/cni-bin"]
    conf_dir = "$d/cni-conf"
    max_conf_num = 1
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "/usr/sbin/runc"
        Root = "$d/runc"
[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "$3"
EOC
}

node_ready_api() { $KUBECTL get node "$1" >/dev/null 2>&1; }
# kuryr-rs runs from its image on these nodes (lab/lib/kuryr-install.sh): no host-process daemons.
installed() { [ -f "$N/kuryr-installed" ]; }

# Stops the host-process daemons (SIGTERM: each removes its conflist) for the DaemonSet to take over.
cmd_daemons_off() {
  while read -r idx node vm ns ip port; do
    stop_one "kuryr-daemon-$node"
  done < <(nodes)
}

cmd_up() {
  [ -f "$S/lab.json" ] || die "kubelet nodes: the lab is not bootstrapped"
  local t; t=$(now)
  build_images
  TARGET=$(node_binaries) || die "kubelet nodes: building kuryr-daemon and kuryr-cni failed"
  mkdir -p "$N/cni-bin"
  # Installed from its image (lab/lab kuryr install): the DaemonSet put its own kuryr-cni there.
  installed || ln -sfn "$TARGET/kuryr-cni" "$N/cni-bin/kuryr-cni"
  ln -sfn /usr/lib/cni/loopback "$N/cni-bin/loopback"   # containerd runs loopback itself
  # The daemons watch KuryrPorts: on a fresh lab their CRD must exist before they can become ready.
  $KUBECTL apply -f "$REPO_DIR/deploy/crds/" >/dev/null || die "kubelet nodes: installing the kuryr CRDs failed"
  $KUBECTL wait --for condition=established --timeout=60s -f "$REPO_DIR/deploy/crds/" >/dev/null \
    || die "kubelet nodes: the kuryr CRDs were not established"
  local token; token=$(cat "$S/k8s/admin.token")
  local idx node vm ns ip port d
  while read -r idx node vm ns ip port; do
    d=$N/$node; mkdir -p "$d/cni-conf" "$d/kuryr" "$d/containerd"
    # containerd (one from before its streaming port was fixed is started again: its shims keep the pods)
    if running "containerd-$node" && grep -q 'stream_server_port = "0"' "$d/containerd.toml"; then
      log "kubelet nodes: restarting the containerd of $node with a fixed streaming port"
      stop_one "containerd-$node"
    fi
    if ! running "containerd-$node"; then
      containerd_config "$d" "$node" "$((P_CSTREAM + idx))" >"$d/containerd.toml"
      mkdir -p "$d/registries/_default"
      printf 'server = "http://127.0.0.1:9"\n[host."http://127.0.0.1:9"]\n  capabilities = ["pull", "resolve"]\n' \
        >"$d/registries/_default/hosts.toml"
      start "containerd-$node" "$S/log/containerd-$node.log" /usr/local/bin/containerd --config "$d/containerd.toml"
      waitfor "containerd $node" 30 test -S "$d/containerd.sock" || fail_component "containerd-$node" "$S/log/containerd-$node.log"
      waitfor "containerd $node CRI" 30 ctr --address "$d/containerd.sock" -n k8s.io version \
        || fail_component "containerd-$node" "$S/log/containerd-$node.log"
    fi
    for img in pause busybox; do
      ctr --address "$d/containerd.sock" -n k8s.io images ls -q | grep -qx "local.test/$img:1" \
        || ctr --address "$d/containerd.sock" -n k8s.io images import "$IMAGES/$img.tar" >/dev/null
    done
    # kuryr-rs installed from its image: a node made again (down, then up) gets that image back too, or its
    # DaemonSet and controller pods would try to pull it from a registry.
    if installed && [ -s "$S/install/tag" ]; then
      local tag; tag=$(cat "$S/install/tag")
      ctr --address "$d/containerd.sock" -n k8s.io images ls -q | grep -qx "docker.io/library/kuryr-rs:$tag\|kuryr-rs:$tag" \
        || ctr --address "$d/containerd.sock" -n k8s.io images import "/var/cache/kuryr-rs/image/kuryr-rs-$tag.oci.tar" >/dev/null \
        || log "kubelet nodes: could not import kuryr-rs:$tag into $node (lab/lab kuryr install makes it again)"
    fi
    # kuryr-daemon (restarted when the binary changed); the DaemonSet's when installed from the image
    if ! installed; then
    local sum; sum=$(sha256sum "$TARGET/kuryr-daemon" | cut -c1-16)
    if running "kuryr-daemon-$node" && [ "$(cat "$d/kuryr/daemon.sum" 2>/dev/null)" != "$sum" ]; then
      log "kubelet nodes: kuryr-daemon binary changed, restarting the one of $node"
      kill "$(cat "$(pidfile "kuryr-daemon-$node")")" 2>/dev/null || true
      waitfor "old kuryr-daemon $node to exit" 10 sh -c "! kill -0 $(cat "$(pidfile "kuryr-daemon-$node")") 2>/dev/null" || true
    fi
    if ! running "kuryr-daemon-$node"; then
      cp "$TARGET/kuryr-daemon" "$d/kuryr/kuryr-daemon"; echo "$sum" >"$d/kuryr/daemon.sum"
      KUBECONFIG=$S/k8s/kubeconfig NO_COLOR=1 RUST_LOG=${KURYR_DAEMON_LOG:-info} start "kuryr-daemon-$node" "$S/log/kuryr-daemon-$node.log" \
        "$d/kuryr/kuryr-daemon" --node-name "$node" --socket "$d/kuryr/cni.sock" \
        --health-addr "127.0.0.1:$((P_KDAEMON + idx))" --host-netns "/var/run/netns/$ns" \
        --bridge-netns /proc/self/ns/net --ovsdb "$S/ovs/db.sock" --cni-conf-dir "$d/cni-conf"
      waitfor "kuryr-daemon $node" 30 curl -sf "http://127.0.0.1:$((P_KDAEMON + idx))/readyz" \
        || fail_component "kuryr-daemon-$node" "$S/log/kuryr-daemon-$node.log"
    fi
    # The daemon writes this node's CNI network (kuryr-cni talking to it) once it serves.
    if ! waitfor "kuryr-daemon $node to write its conflist" 30 test -s "$d/cni-conf/10-kuryr.conflist"; then
      fail_component "kuryr-daemon-$node" "$S/log/kuryr-daemon-$node.log"
    fi
    fi
    # containerd's streaming server (127.0.0.1 of the root namespace) as the kubelet sees it: the same port on
    # 127.0.0.1 of the VM's namespace, relayed through a unix socket.
    netns_relay "cstream-relay-$node" "$ns" 127.0.0.1 "$((P_CSTREAM + idx))" "$d/cstream.sock" "$((P_CSTREAM + idx))"
    # kubelet, in the VM's namespace (a kubelet from before that, in the root namespace, is started again)
    if running "kubelet-$node" && [ "$(readlink "/proc/$(cat "$(pidfile "kubelet-$node")")/ns/net")" != "$(ip netns exec "$ns" readlink /proc/self/ns/net)" ]; then
      log "kubelet nodes: moving the kubelet of $node into its VM's namespace"
      stop_one "kubelet-$node"
    fi
    if ! running "kubelet-$node"; then
      mk_cgroups "$(cgroup_root "$node")"
      mkdir -p "$d/kubelet/root" "$d/kubelet/pki" "$d/kubelet/volplugins" "$d/pod-logs"
      # Container logs per node: two kubelets sharing /var/log/pods each delete the other's pods' log
      # directories as orphans, and `kubectl logs` then reads empty files. The file's auth defaults differ
      # from the flags' (webhook): keep the flags' (anonymous, AlwaysAllow), the API server has no client cert.
      cat >"$d/kubelet/config.yaml" <<EOK
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
podLogsDir: $d/pod-logs
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
clusterDNS: [$DNS_SVC_IP]
clusterDomain: $CLUSTER_DOMAIN
EOK
      sed "s#https://127.0.0.1:$P_KAPI#https://$KAPI_IP:$P_KAPI#" "$S/k8s/kubeconfig" >"$d/kubelet/kubeconfig"
      start "kubelet-$node" "$S/log/kubelet-$node.log" nsenter --net="/var/run/netns/$ns" "$KUBE_BIN/kubelet" \
        --config="$d/kubelet/config.yaml" --kubeconfig="$d/kubelet/kubeconfig" \
        --container-runtime-endpoint="unix://$d/containerd.sock" --runtime-request-timeout=2m \
        --root-dir="$d/kubelet/root" --cert-dir="$d/kubelet/pki" --volume-plugin-dir="$d/kubelet/volplugins" \
        --hostname-override="$node" --cloud-provider=external \
        --node-labels="kuryr.lab/kubelet=true,kuryr.lab/vm-netns=$ns" \
        --register-with-taints="kuryr.lab/kubelet=true:NoSchedule" \
        --cgroup-driver=cgroupfs --cgroup-root="/$(cgroup_root "$node")" \
        --fail-swap-on=false --fail-cgroupv1=false --protect-kernel-defaults=true --oom-score-adj=0 \
        --address="$ip" --port="$((P_KUBELET + idx))" --read-only-port=0 --node-ip="$ip" \
        --healthz-bind-address=127.0.0.1 --healthz-port="$((P_KUBELET_HEALTHZ + idx))" \
        --image-gc-high-threshold=100 --image-gc-low-threshold=99 --eviction-hard= \
        --sync-frequency=10s --v=1
      waitfor "kubelet $node" 60 ip netns exec "$ns" curl -sf "http://127.0.0.1:$((P_KUBELET_HEALTHZ + idx))/healthz" \
        || fail_component "kubelet-$node" "$S/log/kubelet-$node.log"
    fi
    waitfor "Node $node registered" 60 node_ready_api "$node" || fail_component "kubelet-$node" "$S/log/kubelet-$node.log"
    # What a cloud controller manager does for --cloud-provider=external: the VM's address (where the API server
    # reaches the kubelet for logs and exec, through its egress proxy), then lift the uninitialized taint. A
    # merge patch replaces the whole list (a node from before kept an InternalDNS `localhost` otherwise).
    curl -sf --cacert "$S/k8s/ca.crt" -H "Authorization: Bearer $token" -X PATCH \
      -H 'Content-Type: application/merge-patch+json' "https://127.0.0.1:$P_KAPI/api/v1/nodes/$node/status" \
      -d "{\"status\":{\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"$ip\"},{\"type\":\"Hostname\",\"address\":\"$node\"}]}}" >/dev/null \
      || die "kubelet nodes: cannot set the addresses of Node $node"
    $KUBECTL annotate --overwrite node "$node" "kuryr.lab/neutron-port=$port" >/dev/null
    $KUBECTL taint node "$node" node.cloudprovider.kubernetes.io/uninitialized- >/dev/null 2>&1 || true
  done < <(nodes)
  log "kubelet nodes ready: $(nodes | awk '{printf "%s ", $2}')($(since "$t")s)"
}

# All processes (by /proc) whose command line names FILE: the shims a containerd started carry its socket path.
pids_naming() { local p; for p in /proc/[0-9]*; do { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -qF -- "$1" && echo "${p#/proc/}"; done; true; }

cmd_down() {
  [ -d "$N" ] || exit 0
  local t; t=$(now)
  local node d
  for d in "$N"/kubelet-*/; do
    [ -d "$d" ] || continue
    d=${d%/}; node=$(basename "$d")
    # No new pods for this node from here on (the scheduler skips a tainted node).
    $KUBECTL taint node "$node" kuryr.lab/stopping=true:NoSchedule --overwrite >/dev/null 2>&1 || true
  done
  for d in "$N"/kubelet-*/; do
    [ -d "$d" ] || continue
    d=${d%/}; node=$(basename "$d")
    # Let the kubelet stop its pods properly (CNI DEL, netns removed) while everything still runs.
    if running "kubelet-$node"; then
      $KUBECTL delete pods -A --field-selector "spec.nodeName=$node" --grace-period=0 --force --wait=false >/dev/null 2>&1 || true
      waitfor "pods of $node stopped" 60 sh -c "[ -z \"\$(ctr --address $d/containerd.sock -n k8s.io tasks ls -q 2>/dev/null)\" ]" || true
    fi
    $KUBECTL delete node "$node" --wait=false >/dev/null 2>&1 || true
  done
  for d in "$N"/kubelet-*/; do
    [ -d "$d" ] || continue
    d=${d%/}; node=$(basename "$d")
    for c in "kubelet-$node" "kuryr-daemon-$node" "cstream-relay-$node-ns" "cstream-relay-$node"; do stop_one "$c"; done
    # anything still running in this containerd: kill the tasks, then containerd, then its shims
    local sock=$d/containerd.sock task
    if running "containerd-$node"; then
      for task in $(ctr --address "$sock" -n k8s.io tasks ls -q 2>/dev/null); do
        ctr --address "$sock" -n k8s.io tasks kill -s KILL "$task" >/dev/null 2>&1 || true
      done
    fi
    stop_one "containerd-$node"
    for p in $(pids_naming "$sock"); do kill -KILL "$p" 2>/dev/null || true; done
    sleep 0.5
    # mounts under the node's dirs (kubelet volumes, overlay rootfs, the shm of sandboxes), deepest first
    awk -v d="$d/" 'index($2, d) == 1 {print $2}' /proc/mounts | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
    local cg; cg=$(cgroup_root "$node")
    for s in /sys/fs/cgroup/*/; do [ -d "$s$cg" ] && find "$s$cg" -depth -type d -exec rmdir {} \; 2>/dev/null; done
  done
  # sandbox namespaces the kubelets could not clean: empty CNI netns that one of our containerds recorded
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^cni-' || true); do
    if [ -z "$(ip netns pids "$ns" 2>/dev/null)" ] && grep -rqsa -- "$ns" "$N"/*/containerd/root/io.containerd.metadata.v1.bolt/; then
      ip netns del "$ns" || true
    fi
  done
  rm -rf "$N" /var/lib/kubelet/device-plugins /var/log/pods /var/log/containers
  rmdir /var/lib/kubelet 2>/dev/null || true
  log "kubelet nodes stopped and cleaned ($(since "$t")s)"
}

cmd_status() {
  local idx node vm ns ip port c
  [ -f "$S/lab.json" ] || return 0
  while read -r idx node vm ns ip port; do
    for c in containerd kuryr-daemon kubelet; do
      if running "$c-$node"; then st=up; else st=down; fi
      printf '%-24s %-8s %s\n' "$c-$node" "$st" "$(cat "$(pidfile "$c-$node")" 2>/dev/null || true)"
    done
  done < <(nodes)
}

case "${1:-}" in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  daemons-off) cmd_daemons_off ;;
  *) die "usage: kubelet-nodes.sh up|down|status|daemons-off" ;;
esac
