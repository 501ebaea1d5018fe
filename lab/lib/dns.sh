#!/usr/bin/env bash
# dns.sh up|status: the lab's cluster DNS. CoreDNS (lib/build-coredns.sh) runs in netns kuryr-dns on a Neutron
# port of its own at $DNS_IP on the pod network, as on a control-plane VM; it reads the API server through
# $KAPI_IP with a ServiceAccount of its own (upstream's RBAC). The Service kube-system/kube-dns at $DNS_SVC_IP
# (53 UDP and TCP, metrics 9153) has an EndpointSlice naming $DNS_IP, so kuryr-rs gives it a load balancer like
# any Service, when a controller serves kube-system (the installed one does: lib/kuryr-install.sh). The kubelets'
# --cluster-dns is $DNS_SVC_IP.
# Not a CoreDNS Deployment: every lab node is nested-macvlan, and a macvlan pod cannot reach a backend on its own
# VM through an ovn load balancer (docs/cni.md); on a port of its own CoreDNS answers every pod.
# `up` is idempotent (what exists is kept, a dead CoreDNS started again); `down` is lib/down.sh's (pidfile, netns).
set -euo pipefail
. "$(dirname "$0")/common.sh"
S=$LAB_STATE
D=$S/dns
KUBECTL="kubectl --kubeconfig=$S/k8s/kubeconfig"
VSCTL="ovs-vsctl --db=unix:$S/ovs/db.sock"
COREDNS=$LAB_CACHE/coredns-${COREDNS_VERSION#v}/coredns
NS=${NETNS_PREFIX}dns

# The Kubernetes side: upstream's ServiceAccount and ClusterRole for CoreDNS, a token Secret for it, and the
# kube-dns Service with an EndpointSlice the lab manages (the endpoint slice controller leaves it alone).
k8s_objects() {
  cat <<EOF
apiVersion: v1
kind: ServiceAccount
metadata: {name: coredns, namespace: kube-system}
---
apiVersion: v1
kind: Secret
type: kubernetes.io/service-account-token
metadata: {name: coredns-token, namespace: kube-system, annotations: {kubernetes.io/service-account.name: coredns}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:coredns"}
rules:
- {apiGroups: [""], resources: [endpoints, services, pods, namespaces], verbs: [list, watch]}
- {apiGroups: [discovery.k8s.io], resources: [endpointslices], verbs: [list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "system:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:coredns"}
subjects: [{kind: ServiceAccount, name: coredns, namespace: kube-system}]
---
apiVersion: v1
kind: Service
metadata:
  name: kube-dns
  namespace: kube-system
  labels: {k8s-app: kube-dns, kubernetes.io/name: CoreDNS}
spec:
  clusterIP: $DNS_SVC_IP
  ports:
  - {name: dns, port: 53, protocol: UDP, targetPort: 53}
  - {name: dns-tcp, port: 53, protocol: TCP, targetPort: 53}
  - {name: metrics, port: 9153, protocol: TCP, targetPort: 9153}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: kube-dns-lab
  namespace: kube-system
  labels: {kubernetes.io/service-name: kube-dns, endpointslice.kubernetes.io/managed-by: kuryr-lab}
addressType: IPv4
endpoints:
- addresses: ["$DNS_IP"]
  conditions: {ready: true}
ports:
- {name: dns, port: 53, protocol: UDP}
- {name: dns-tcp, port: 53, protocol: TCP}
- {name: metrics, port: 9153, protocol: TCP}
EOF
}

corefile() { # no `forward`: the lab reaches no resolver outside; other names get SERVFAIL
  cat <<EOF
.:53 {
    errors
    health $DNS_IP:8080
    ready $DNS_IP:8181
    kubernetes $CLUSTER_DOMAIN in-addr.arpa ip6.arpa {
        kubeconfig $D/kubeconfig
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }
    prometheus $DNS_IP:9153
    cache 30
    loadbalance
}
EOF
}

cmd_up() {
  [ -f "$S/lab.json" ] || die "dns: the lab is not bootstrapped (lab/lab up)"
  [ -x "$COREDNS" ] || bash "$LAB_DIR/lib/build-coredns.sh"
  local t sg port mac token; t=$(now)
  LAB_SCRIPT=dns
  . "$LAB_DIR/lib/neutron.sh"
  sg=$(find_id security-groups kuryr-lab-dns)
  if [ -z "$sg" ]; then
    sg=$(api POST "$N/security-groups" "{\"security_group\":{\"name\":\"kuryr-lab-dns\",\"project_id\":\"$PROJECT_ID\"}}" | jq -r .security_group.id)
    for proto in udp tcp; do
      api POST "$N/security-group-rules" "{\"security_group_rule\":{\"security_group_id\":\"$sg\",\"direction\":\"ingress\",\"ethertype\":\"IPv4\",\"protocol\":\"$proto\",\"port_range_min\":53,\"port_range_max\":53,\"remote_ip_prefix\":\"0.0.0.0/0\"}}" >/dev/null
    done
    api POST "$N/security-group-rules" "{\"security_group_rule\":{\"security_group_id\":\"$sg\",\"direction\":\"ingress\",\"ethertype\":\"IPv4\",\"protocol\":\"tcp\",\"port_range_min\":9153,\"port_range_max\":9153,\"remote_ip_prefix\":\"0.0.0.0/0\"}}" >/dev/null
  fi
  port=$(ensure ports kuryr-dns "{\"name\":\"kuryr-dns\",\"network_id\":\"$(jq -r .pod_network_id "$S/lab.json")\",\"project_id\":\"$PROJECT_ID\",\"binding:host_id\":\"$CHASSIS\",\"device_owner\":\"compute:nova\",\"device_id\":\"kuryr-dns\",\"security_groups\":[\"$sg\"],\"fixed_ips\":[{\"subnet_id\":\"$(jq -r .pod_subnet_id "$S/lab.json")\",\"ip_address\":\"$DNS_IP\"}]}")
  [ -n "$port" ] && [ "$port" != null ] || die "dns: no Neutron port at $DNS_IP"
  mac=$(api GET "$N/ports/$port" | jq -r .port.mac_address)
  plug_netns "$NS" "$NS-h" "$mac" "$DNS_IP/${POD_CIDR#*/}" "$POD_GW"
  $VSCTL --may-exist add-port br-int "$NS-h" -- set Interface "$NS-h" external_ids:iface-id="$port"
  waitfor "the DNS port $port ACTIVE" 60 port_active "$port" || die "dns: port $port did not go ACTIVE"

  k8s_objects | $KUBECTL apply -f - >/dev/null || die "dns: applying CoreDNS's ServiceAccount, RBAC and kube-dns failed"
  token_ready() { [ -n "$($KUBECTL -n kube-system get secret coredns-token -o jsonpath='{.data.token}' 2>/dev/null)" ]; }
  waitfor "CoreDNS's ServiceAccount token" 60 token_ready || die "dns: the token controller filled no coredns-token"
  token=$($KUBECTL -n kube-system get secret coredns-token -o jsonpath='{.data.token}' | base64 -d)
  mkdir -p "$D"
  (umask 077; cat >"$D/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: lab, cluster: {server: "https://$KAPI_IP:$P_KAPI", certificate-authority: "$S/k8s/ca.crt"}}]
users: [{name: coredns, user: {token: "$token"}}]
contexts: [{name: lab, context: {cluster: lab, user: coredns}}]
current-context: lab
EOF
  )
  corefile >"$D/Corefile.new"
  if running coredns && ! cmp -s "$D/Corefile.new" "$D/Corefile"; then stop_one coredns; fi
  mv "$D/Corefile.new" "$D/Corefile"
  running coredns || start coredns "$S/log/coredns.log" ip netns exec "$NS" "$COREDNS" -conf "$D/Corefile"
  waitfor "CoreDNS ready (its Kubernetes caches synced)" 60 ip netns exec "$NS" curl -sf "http://$DNS_IP:8181/ready" \
    || fail_component coredns "$S/log/coredns.log"
  jq -n --arg ip "$DNS_IP" --arg ns "$NS" --arg svc "$DNS_SVC_IP" --arg dom "$CLUSTER_DOMAIN" \
    '{ip:$ip, netns:$ns, service_ip:$svc, domain:$dom}' >"$D/dns.json"
  log "cluster DNS: CoreDNS $COREDNS_VERSION at $DNS_IP, Service kube-system/kube-dns $DNS_SVC_IP ($(since "$t")s)"
}

cmd_status() {
  if running coredns; then echo "coredns                  up       $(cat "$(pidfile coredns)") ($DNS_IP, kube-dns $DNS_SVC_IP)"
  else echo "coredns                  down"; return 1; fi
}

case ${1:-up} in
  up) cmd_up ;;
  status) cmd_status ;;
  *) die "usage: dns.sh up|status" ;;
esac
