#!/bin/bash
# PID 1 of a lab VM node once its root is up (lib/vm-guest/init): the VM's NIC on its Neutron parent port,
# containerd, kuryr-daemon (nested-vlan: pods are VLAN devices of that NIC) and a kubelet joined to the lab
# cluster through the API server's address on the pod network. Every binary is the machine's own, read over
# 9p; state is tmpfs. Logs go to /var/log/kuryr-guest, the host's $KURYR_LAB_STATE/vm-nodes/<node>/log.
# Settings: /var/lib/kuryr-guest/env (written by lib/vm-nodes.sh).
set -u
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
G=/var/lib/kuryr-guest
L=/var/log/kuryr-guest
. "$G/env"
exec >>"$L/node.log" 2>&1
# Every command traced with the guest's uptime: the VM has no shell to look in with.
PS4='+ [$(cut -d" " -f1 /proc/uptime)] '
set -x
say() { echo "[$NODE $(cut -d' ' -f1 /proc/uptime)s] $*"; }
# Never return: PID 1 exiting panics the kernel. A failure is reported and the VM idles for the host to see.
halt_with() { say "FAILED: $*"; echo "failed: $*" >"$L/state"; while :; do sleep 3600; done; }
waitfor() { local what=$1 secs=$2 i; shift 2
  for ((i = 0; i < secs * 5; i++)); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  say "timed out after ${secs}s waiting for $what"; return 1; }
bg() { local name=$1; shift; setsid "$@" >"$L/$name.log" 2>&1 </dev/null & echo $! >"/run/$name.pid"; }
echo starting >"$L/state"
say "node init"

mkdir -p /dev/pts /dev/shm /sys/fs/cgroup
mount -t devpts devpts /dev/pts; mount -t tmpfs shm /dev/shm
mount -t cgroup2 cgroup2 /sys/fs/cgroup || halt_with "cannot mount cgroup2"
for c in cpuset cpu io memory pids; do echo "+$c" >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true; done
hostname "$NODE"; echo "$NODE" >/etc/hostname
printf '127.0.0.1 localhost\n%s %s\n' "$IP" "$NODE" >/etc/hosts
: >/etc/resolv.conf
sysctl -qw net.ipv4.ip_forward=1 net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0

# The NIC: the one with the Neutron port's MAC (its name is the guest kernel's business).
ip link set lo up
nic=
for l in /sys/class/net/*; do [ "$(cat "$l/address")" = "$MAC" ] && nic=$(basename "$l"); done
[ -n "$nic" ] || halt_with "no NIC with MAC $MAC"
ip link set "$nic" up
ip addr add "$IP/$PREFIX" dev "$nic"
ip route add default via "$GW"
say "$nic up: $IP/$PREFIX via $GW"
waitfor "the API server at $KAPI" 120 curl -sf --cacert "$G/ca.crt" "https://$KAPI/livez" \
  || halt_with "the API server at $KAPI does not answer through OVN"
say "API server reachable at $KAPI"

# containerd (config version 3, as the namespace nodes': lib/kubelet-nodes.sh)
mkdir -p /etc/cni/net.d "$G/cni-bin" /var/lib/containerd /run/containerd /run/kuryr
ln -sfn "$TARGET/kuryr-cni" "$G/cni-bin/kuryr-cni"; ln -sfn /usr/lib/cni/loopback "$G/cni-bin/loopback"
cat >"$G/containerd.toml" <<EOC
version = 3
root = "/var/lib/containerd"
state = "/run/containerd"
[grpc]
  address = "/run/containerd/containerd.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "/var/lib/containerd-opt"
[plugins."io.containerd.nri.v1.nri"]
  disable = true
[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "local.test/pause:1"
[plugins."io.containerd.cri.v1.runtime"]
  disable_apparmor = true
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["$G/cni-bin"]
    conf_dir = "/etc/cni/net.d"
    max_conf_num = 1
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "/usr/sbin/runc"
EOC
bg containerd /usr/local/bin/containerd --config "$G/containerd.toml"
waitfor "containerd" 120 timeout 20 ctr --address /run/containerd/containerd.sock -n k8s.io version || halt_with "containerd did not start"
for img in "$IMAGES"/pause.tar "$IMAGES"/busybox.tar; do
  timeout 120 ctr --address /run/containerd/containerd.sock -n k8s.io images import "$img" >/dev/null || halt_with "importing $img failed"
done
say "containerd up, images imported"

# kuryr-daemon: in the VM's own namespace (hostNetwork, as in production: no --host-netns)
KUBECONFIG=$G/kubeconfig NO_COLOR=1 RUST_LOG=${DAEMON_LOG:-info} bg kuryr-daemon "$TARGET/kuryr-daemon" \
  --node-name "$NODE" --socket /run/kuryr/cni.sock --health-addr 127.0.0.1:8090 --cni-conf-dir /etc/cni/net.d
waitfor "kuryr-daemon's conflist" 180 test -s /etc/cni/net.d/10-kuryr.conflist || halt_with "kuryr-daemon did not write its conflist"
say "kuryr-daemon serving"

# kubelet
mkdir -p /var/lib/kubelet /var/log/pods
cat >"$G/kubelet.yaml" <<EOK
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
clusterDNS: [${CLUSTER_DNS:?}]
clusterDomain: ${CLUSTER_DOMAIN:?}
EOK
bg kubelet "$KUBE_BIN/kubelet" --config="$G/kubelet.yaml" --kubeconfig="$G/kubeconfig" \
  --container-runtime-endpoint=unix:///run/containerd/containerd.sock --runtime-request-timeout=5m \
  --hostname-override="$NODE" --node-ip="$IP" --node-labels="$NODE_LABELS" --register-with-taints="$NODE_TAINTS" \
  --cgroup-driver=cgroupfs --fail-swap-on=false --protect-kernel-defaults=false \
  --image-gc-high-threshold=100 --image-gc-low-threshold=99 --eviction-hard= --sync-frequency=10s --v=1
say "kubelet started"
echo running >"$L/state"

# The host's way in (lab/lab vms exec): a script dropped into the log share's exec/ runs as root in the VM's
# own namespaces; its output and exit code are written back beside it. Polled twice a second.
mkdir -p "$L/exec"
agent() {
  local f b
  while :; do
    for f in "$L"/exec/*.sh; do
      [ -e "$f" ] || continue
      b=${f%.sh}
      mv "$f" "$b.run" || continue
      ( bash "$b.run" >"$b.out" 2>&1; echo $? >"$b.rc.tmp"; mv "$b.rc.tmp" "$b.rc" ) &
    done
    sleep 0.5
  done
}
agent &
# PID 1 reaps what the others leave behind.
while :; do wait -n 2>/dev/null || sleep 5; done
