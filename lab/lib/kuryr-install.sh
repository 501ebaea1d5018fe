#!/usr/bin/env bash
# kuryr-rs on the lab the way an operator installs it: the image (deploy/image/build, an OCI archive, no
# registry) imported into each kubelet node's containerd, and `kubectl apply -k` of a kustomization written
# to $KURYR_LAB_STATE/install around the lab overlay lab/overlay: the image tag, the lab's ids
# (kuryr.yaml), its clouds.yaml as the `kuryr-clouds` Secret, and the node directories. The host-process
# kuryr-daemons of the kubelet nodes make way for the DaemonSet while it is installed.
#
#   lab/lab kuryr install      build (or reuse) the image, import it, apply, wait for the rollout
#   lab/lab kuryr uninstall [--no-restore]
#                              delete what install applied (not the CRDs: lab tests use them), wait until
#                              no kuryr-rs pod and no conflist is left, start the host-process daemons again
#                              (not with --no-restore: `lab/lab nodes up` does it later)
#   lab/lab kuryr status       the installed tag and the pods
#   lab/lab kuryr instance e2e one more controller, for the namespaces of Kubernetes' e2e suite (lab/e2e)
#
# Settings: KURYR_INSTALL_NAMESPACE (the namespace the installed controller serves besides kube-system, default
# kuryr-demo: lab tests run controllers of their own in theirs), KURYR_INSTALL_CLUSTER_ID (default kuryr-lab),
# KURYR_INSTALL_POLICY_NAMESPACE (unset: none; ./demo.sh: kuryr-demo-policy): a second controller Deployment
# of the same image for that namespace, with a network of its own and NetworkPolicies (write_policy_instance).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/common.sh"
S=$LAB_STATE
N=$S/nodes
INST=$S/install
MARK=$N/kuryr-installed
KUBECTL=${KUBECTL:-kubectl}
export KUBECONFIG=$S/k8s/kubeconfig
lab_json() { jq -r ".$1" "$S/lab.json"; }
kubelet_nodes() { $KUBECTL get nodes -l kuryr.lab/kubelet=true -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}'; }

# The VMs are namespaces on this machine's kernel: nested-vlan needs 802.1Q there, else nested-macvlan.
vif_driver() {
  local probe=kuryr-install-probe-$$ d=nested-macvlan
  ip netns add "$probe"
  ip -n "$probe" link add p0 type veth peer name p1
  ip -n "$probe" link add link p0 name p0.5 type vlan id 5 2>/dev/null && d=nested-vlan
  ip netns del "$probe"
  echo "$d"
}

cmd_install() {
  [ -f "$S/lab.json" ] || die "kuryr install: the lab is not bootstrapped (lab/lab up)"
  local t; t=$(now)
  local archive tag
  # The build prints the archive's path last; cargo's and buildah's output go to the log, a line every 30 s here.
  progress "kuryr install: building the image (deploy/image/build)" "$S/log/image-build.log" probe_cargo \
    "$REPO_DIR/deploy/image/build" || die "kuryr install: building the image failed"
  archive=$(tail -n 1 "$S/log/image-build.log")
  [ -s "$archive" ] || die "kuryr install: the image build named no archive (log: $S/log/image-build.log)"
  tag=$(basename "$archive" .oci.tar); tag=${tag#kuryr-rs-}
  local nodes; nodes=$(kubelet_nodes)
  [ -n "$nodes" ] || die "kuryr install: no kubelet nodes (lab/lab nodes up)"
  for node in $nodes; do
    ctr --address "$N/$node/containerd.sock" -n k8s.io images import "$archive" >/dev/null \
      || die "kuryr install: importing $archive into $node's containerd failed"
  done
  log "kuryr install: image kuryr-rs:$tag imported into $(echo $nodes | wc -w) nodes"
  # The DaemonSet replaces the host-process daemons (same sockets, ports and conflists).
  touch "$MARK"
  bash "$HERE/kubelet-nodes.sh" daemons-off

  mkdir -p "$INST"
  cp "$S/clouds.yaml" "$INST/clouds.yaml"
  cat >"$INST/kuryr.yaml" <<EOC
cluster_id: ${KURYR_INSTALL_CLUSTER_ID:-kuryr-lab}
# Its namespace, and kube-system for the cluster DNS's Service (lib/dns.sh); every namespace carries its name
# as a label, so no namespace needs labelling (nor existing yet).
namespace_selector: "kubernetes.io/metadata.name in (${KURYR_INSTALL_NAMESPACE:-kuryr-demo},kube-system)"
os_cloud: kuryr-lab
clouds_yaml: /etc/kuryr/clouds/clouds.yaml
pod_subnet: $(lab_json pod_subnet_id)
vif_driver: $(vif_driver)
service_subnet: $(lab_json service_subnet_id)
external_network: $(lab_json external_network_id)
lb_provider: ovn
lb_default_provider: ovn
# the API Service too (pods read the API through it), though the controller is scoped to one namespace
lb_default_kubernetes: always
metrics_addr: 127.0.0.1:8082
leader_elect: true
leader_lease_seconds: 10
leader_renew_grace_seconds: 3
gc_interval_seconds: 300
gc_grace_seconds: 600
log_format: json
EOC
  local sum; sum=$(cat "$INST/kuryr.yaml" "$INST/clouds.yaml" | sha256sum | cut -c1-16)
  cat >"$INST/paths.yaml" <<EOC
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: kuryr-daemon
  namespace: kube-system
spec:
  template:
    spec:
      containers:
        - name: daemon
          env:
            - name: KURYR_LAB_NODES
              value: $N
      volumes:
        - name: lab-nodes
          hostPath:
            path: $N
            type: Directory
        - name: cni-bin
          hostPath:
            path: $N/cni-bin
        - name: cni-net
          hostPath:
            path: $INST/unused-net.d
        - name: run-kuryr
          hostPath:
            path: $INST/unused-run
        # The lab's Open vSwitch keeps its database socket in its state directory.
        - name: openvswitch
          hostPath:
            path: $S/ovs
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: kuryr-controller
  namespace: kube-system
spec:
  template:
    metadata:
      annotations:
        kuryr.lab/config-sum: "$sum"
EOC
  local policy_res="" policy_cm=""
  [ -z "${KURYR_INSTALL_POLICY_NAMESPACE:-}" ] || {
    write_policy_instance
    policy_res="  - policy-controller.yaml"
    policy_cm="  - name: kuryr-config-policy
    namespace: kube-system
    files:
      - kuryr.yaml=kuryr-policy.yaml"
  }
  cat >"$INST/kustomization.yaml" <<EOC
# Written by lab/lab kuryr install: the lab overlay with this lab's image tag, ids and credentials.
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - $(realpath --relative-to="$INST" "$REPO_DIR/lab/overlay")
$policy_res
images:
  - name: kuryr-rs
    newTag: "$tag"
configMapGenerator:
  - name: kuryr-config
    namespace: kube-system
    behavior: replace
    files:
      - kuryr.yaml
$policy_cm
secretGenerator:
  - name: kuryr-clouds
    namespace: kube-system
    files:
      - clouds.yaml
generatorOptions:
  disableNameSuffixHash: true
patches:
  - path: paths.yaml
EOC
  $KUBECTL apply -k "$INST" >"$INST/apply.log" 2>&1 || { cat "$INST/apply.log" >&2; die "kuryr install: kubectl apply -k $INST failed"; }
  $KUBECTL -n kube-system rollout status ds/kuryr-daemon --timeout=180s >/dev/null \
    || { pods_report; die "kuryr install: the kuryr-daemon DaemonSet did not roll out"; }
  $KUBECTL -n kube-system rollout status deploy/kuryr-controller --timeout=180s >/dev/null \
    || { pods_report; die "kuryr install: the kuryr-controller Deployment did not roll out"; }
  [ -z "$policy_res" ] || $KUBECTL -n kube-system rollout status deploy/kuryr-controller-policy --timeout=180s >/dev/null \
    || { pods_report; die "kuryr install: the kuryr-controller-policy Deployment did not roll out"; }
  for node in $nodes; do
    waitfor "the conflist of $node" 60 test -s "$N/$node/cni-conf/10-kuryr.conflist" \
      || { pods_report; die "kuryr install: no conflist on $node"; }
  done
  # The cluster DNS's Service, which uninstall takes away (release_dns_lb), back for this controller to serve.
  bash "$HERE/dns.sh" up
  echo "$tag" >"$INST/tag"
  echo "${KURYR_INSTALL_NAMESPACE:-kuryr-demo}" >"$INST/namespace"
  log "kuryr install: kuryr-rs:$tag running from its image ($(since "$t")s)"
}

# A second controller from the same image for one more namespace with other settings: its own network (the
# namespace subnet driver) and NetworkPolicies as security groups, nested-vlan subports on vm3. The main one
# serves its namespace and kube-system, and the lab's tests run controllers of their own in theirs, hence
# scoped instances (own ConfigMap, Lease, admin port; same ServiceAccount and RBAC).
write_policy_instance() {
  cat >"$INST/kuryr-policy.yaml" <<EOC
cluster_id: ${KURYR_INSTALL_CLUSTER_ID:-kuryr-lab}-policy
namespace: $KURYR_INSTALL_POLICY_NAMESPACE
os_cloud: kuryr-lab
clouds_yaml: /etc/kuryr/clouds/clouds.yaml
pod_subnet: $(lab_json pod_subnet_id)
vif_driver: nested-vlan
ports_pool: false
subnet_driver: namespace
namespace_prefixes: 198.18.64.0/20
namespace_prefixlen: 24
metrics_addr: 127.0.0.1:28083
leader_elect: true
leader_lease_name: kuryr-controller-policy
service_cidrs: $SVC_CIDR,$SVC_CIDR6
leader_lease_seconds: 10
leader_renew_grace_seconds: 3
log_format: json
EOC
  derive_controller policy 28083 --network-policy >"$INST/policy-controller.yaml"
}

# derive_controller NAME PORT [FLAG]: the installed controller's Deployment (what lab/overlay patches) renamed
# kuryr-controller-NAME, reading ConfigMap kuryr-config-NAME, its admin port PORT, with FLAG added.
derive_controller() {
  local name=$1 port=$2 flag=${3:-} out
  out=$($KUBECTL kustomize "$REPO_DIR/lab/overlay" | awk 'BEGIN{RS="\n---\n"} /\nkind: Deployment\n/ && /name: kuryr-controller\n/' \
    | sed -e "s/^  name: kuryr-controller\$/  name: kuryr-controller-$name/" \
      -e "s|app.kubernetes.io/name: kuryr-controller\$|app.kubernetes.io/name: kuryr-controller-$name|" \
      -e "s/name: kuryr-config\$/name: kuryr-config-$name/" \
      -e "s/containerPort: 8082\$/containerPort: $port/" -e "s|http://127.0.0.1:8082/|http://127.0.0.1:$port/|" \
      -e "s|^\( *\)- /etc/kuryr/kuryr.yaml\$|&${flag:+\\n\\1- $flag}|")
  grep -q "name: kuryr-controller-$name" <<<"$out" || die "kuryr install: could not derive the $name controller's Deployment from lab/overlay"
  printf '%s\n' "$out"
}

# instance e2e: one more controller for the namespaces Kubernetes' e2e framework makes (lab/e2e): every one
# carries the label e2e-run. Cluster id <cluster id>-e2e, NetworkPolicies on (with the Service CIDRs: policies
# judge traffic to a clusterIP by the backends behind it, docs/network-policy.md), the main one's Services settings
# (default/kubernetes stays the main one's: `default` is not selected here). Applied beside an install.
cmd_instance_e2e() {
  [ -f "$INST/kuryr.yaml" ] || die "kuryr instance e2e: kuryr-rs is not installed (lab/lab kuryr install)"
  local t; t=$(now)
  sed -e '/^namespace_selector:/d' -e '/^namespace:/d' -e '/^lb_default_kubernetes:/d' -e '/^# /d' \
      -e '/^cluster_id:/d' -e '/^metrics_addr:/d' -e '/^leader_lease_name:/d' "$INST/kuryr.yaml" >"$INST/kuryr-e2e.yaml"
  cat >>"$INST/kuryr-e2e.yaml" <<EOC
cluster_id: $(sed -n 's/^cluster_id: //p' "$INST/kuryr.yaml")-e2e
namespace_selector: e2e-run
service_cidrs: $SVC_CIDR,$SVC_CIDR6
metrics_addr: 127.0.0.1:28084
leader_lease_name: kuryr-controller-e2e
EOC
  derive_controller e2e 28084 --network-policy >"$INST/e2e-controller.yaml"
  # The image the install runs (the derived Deployment names the overlay's untagged one).
  sed -i "s|image: kuryr-rs\(:[^ ]*\)\?\$|image: kuryr-rs:$(cat "$INST/tag")|" "$INST/e2e-controller.yaml"
  $KUBECTL -n kube-system create configmap kuryr-config-e2e --from-file=kuryr.yaml="$INST/kuryr-e2e.yaml" \
    --dry-run=client -o yaml | $KUBECTL apply -f - >/dev/null || die "kuryr instance e2e: its ConfigMap was refused"
  $KUBECTL apply -f "$INST/e2e-controller.yaml" >/dev/null || die "kuryr instance e2e: its Deployment was refused"
  $KUBECTL -n kube-system rollout restart deploy/kuryr-controller-e2e >/dev/null
  $KUBECTL -n kube-system rollout status deploy/kuryr-controller-e2e --timeout=180s >/dev/null \
    || { pods_report; die "kuryr instance e2e: kuryr-controller-e2e did not roll out"; }
  log "kuryr instance e2e: kuryr-controller-e2e serves the namespaces labelled e2e-run ($(since "$t")s)"
}

pods_report() {
  $KUBECTL -n kube-system get pods -l 'app.kubernetes.io/name in (kuryr-controller,kuryr-controller-policy,kuryr-controller-e2e,kuryr-daemon)' -o wide >&2 || true
  $KUBECTL -n kube-system describe pods -l 'app.kubernetes.io/name in (kuryr-controller,kuryr-controller-policy,kuryr-controller-e2e,kuryr-daemon)' 2>/dev/null | tail -40 >&2 || true
}

no_kuryr_pods() { [ -z "$($KUBECTL -n kube-system get pods -l 'app.kubernetes.io/name in (kuryr-controller,kuryr-controller-policy,kuryr-controller-e2e,kuryr-daemon)' -o name 2>/dev/null)" ]; }
no_conflists() { ! ls "$N"/*/cni-conf/10-kuryr.conflist >/dev/null 2>&1; }

# The `kubernetes` Service's load balancer is the cluster's, not a workload's: before the controller goes it
# is told to leave that Service alone (the environment beats kuryr.yaml), and releases the load balancer.
kapi_lb_gone() { ! $KUBECTL -n default get kuryrloadbalancer kubernetes >/dev/null 2>&1; }
release_kapi_lb() {
  kapi_lb_gone && return 0
  $KUBECTL -n kube-system get deploy/kuryr-controller >/dev/null 2>&1 || return 0
  $KUBECTL -n kube-system set env deploy/kuryr-controller KURYR_LB_DEFAULT_KUBERNETES=never >/dev/null
  $KUBECTL -n kube-system rollout status deploy/kuryr-controller --timeout=180s >/dev/null || true
  waitfor "the kubernetes Service's load balancer to be released" 180 kapi_lb_gone \
    || log "kuryr uninstall: KuryrLoadBalancer default/kubernetes is still there (its load balancer may be left)"
}

# The cluster DNS's Service (lib/dns.sh) is served by the installed controller (it selects kube-system): the
# Service goes, so that controller releases its load balancer before it goes itself; install makes it again.
dns_lb_gone() { ! $KUBECTL -n kube-system get kuryrloadbalancer kube-dns >/dev/null 2>&1; }
release_dns_lb() {
  dns_lb_gone && return 0
  $KUBECTL -n kube-system delete service kube-dns --ignore-not-found --wait=false >/dev/null || true
  waitfor "the cluster DNS Service's load balancer to be released" 180 dns_lb_gone \
    || log "kuryr uninstall: KuryrLoadBalancer kube-system/kube-dns is still there (its load balancer may be left)"
}

cmd_uninstall() {
  if [ -f "$INST/kustomization.yaml" ]; then
    local t; t=$(now)
    release_kapi_lb
    release_dns_lb
    # The e2e instance (lab/e2e) is not in the kustomization: it goes first, by name.
    $KUBECTL -n kube-system delete deploy/kuryr-controller-e2e configmap/kuryr-config-e2e --ignore-not-found >/dev/null || true
    # Everything install applied except the CRDs (their deletion would take every test's objects along).
    $KUBECTL kustomize "$INST" | yq_drop_crds | $KUBECTL delete --ignore-not-found --wait=true --timeout=120s -f - >/dev/null \
      || die "kuryr uninstall: kubectl delete failed"
    waitfor "the kuryr-rs pods to go" 120 no_kuryr_pods || die "kuryr uninstall: kuryr-rs pods left"
    waitfor "the conflists to go" 60 no_conflists || die "kuryr uninstall: conflists left: $(ls "$N"/*/cni-conf/10-kuryr.conflist)"
    rm -rf "$INST"
    log "kuryr uninstall: removed ($(since "$t")s)"
  fi
  rm -f "$MARK"
  [ "${1:-}" = --no-restore ] || bash "$HERE/kubelet-nodes.sh" up
}

# The multi-document YAML on stdin without its CustomResourceDefinitions.
yq_drop_crds() { awk 'BEGIN{RS="\n---\n"; ORS="\n---\n"} !/\nkind: CustomResourceDefinition\n/ && !/^kind: CustomResourceDefinition\n/'; }

cmd_status() {
  if [ -f "$INST/tag" ]; then echo "kuryr-rs:$(cat "$INST/tag") installed from its image"; else echo "not installed"; fi
  $KUBECTL -n kube-system get pods -l 'app.kubernetes.io/name in (kuryr-controller,kuryr-controller-policy,kuryr-controller-e2e,kuryr-daemon)' -o wide 2>/dev/null || true
}

case "${1:-}" in
  install) cmd_install ;;
  instance) [ "${2:-}" = e2e ] || die "kuryr instance: e2e is the one instance"; cmd_instance_e2e ;;
  uninstall) cmd_uninstall "${2:-}" ;;
  status) cmd_status ;;
  *) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
