#!/usr/bin/env bash
# Kubernetes control plane: etcd, kube-apiserver (token auth + RBAC, TLS from a lab CA with a CA:FALSE server
# certificate — rustls rejects a self-signed CA:TRUE cert), kube-controller-manager, kube-scheduler.
# The API server listens on 127.0.0.1 only and advertises $KAPI_IP, an address on the pod network that
# lib/bootstrap.sh relays to that loopback port: its endpoint reconciler publishes $KAPI_IP as the
# `default/kubernetes` endpoints, kuryr-rs gives that Service a load balancer, and pods reach the API through it
# as on a real cluster. ServiceAccount admission is on: pods run as their ServiceAccounts.
set -euo pipefail
. "$(dirname "$0")/common.sh"
K=$LAB_STATE/k8s
mkdir -p "$K/etcd" "$LAB_STATE/log"
cd "$K"
# Where this lab's binaries are, for whatever starts a control plane of its own (the chaos suite's private one).
ln -sfn "$KUBE_BIN" "$K/bin"

kapi_ready() { [ "$(curl -s --cacert "$K/ca.crt" -H "Authorization: Bearer $(cat "$K/admin.token")" "https://127.0.0.1:$P_KAPI/readyz")" = ok ]; }

if [ ! -f ca.crt ]; then
  openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 365 -subj "/CN=kuryr-lab-ca" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
  openssl genrsa -out sa.key 2048 2>/dev/null
  openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >admin.token
  # Tokens: the admin (system:masters) and the kube-system components.
  {
    echo "$(cat admin.token),admin,admin-uid,\"system:masters\""
  } >tokens.csv
  chmod 600 tokens.csv admin.token ca.key sa.key
  cat >kubeconfig <<EOK
apiVersion: v1
kind: Config
clusters: [{name: kuryr-lab, cluster: {server: "https://127.0.0.1:$P_KAPI", certificate-authority: "$K/ca.crt"}}]
users: [{name: admin, user: {token: "$(cat admin.token)"}}]
contexts: [{name: kuryr-lab, context: {cluster: kuryr-lab, user: admin}}]
current-context: kuryr-lab
EOK
  chmod 600 kubeconfig
fi

# The serving certificate names every address clients use: loopback, the advertised address, the `kubernetes`
# Service's clusterIP and DNS names (in-cluster clients verify them). Made again when an older lab's lacks them.
SANS="IP:127.0.0.1,DNS:localhost,IP:$KAPI_IP,IP:$KAPI_SVC_IP,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
if ! openssl x509 -in apiserver.crt -noout -ext subjectAltName 2>/dev/null | grep -q "IP Address:$KAPI_SVC_IP"; then
  openssl req -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr -subj "/CN=kube-apiserver" 2>/dev/null
  printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=%s\n' "$SANS" >srv.ext
  openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out apiserver.crt -days 365 -extfile srv.ext 2>/dev/null
  chmod 600 apiserver.key
fi

t=$(now)
if ! running etcd; then
  start etcd "$LAB_STATE/log/etcd.log" /usr/local/bin/etcd --name kuryr-lab --data-dir "$K/etcd" \
    --listen-client-urls "http://127.0.0.1:$P_ETCD" --advertise-client-urls "http://127.0.0.1:$P_ETCD" \
    --listen-peer-urls "http://127.0.0.1:$P_ETCD_PEER" --initial-advertise-peer-urls "http://127.0.0.1:$P_ETCD_PEER" \
    --initial-cluster "kuryr-lab=http://127.0.0.1:$P_ETCD_PEER"
fi
waitfor etcd 60 curl -sf "http://127.0.0.1:$P_ETCD/health" || fail_component etcd "$LAB_STATE/log/etcd.log"
log "etcd ready ($(since "$t")s)"

# The API server's `cluster` traffic (pod/service proxy, kubelets, webhooks) goes through lib/kapi-egress.py, an
# HTTP CONNECT proxy on a unix socket (started by lib/bootstrap.sh with the kuryr-kapi namespace it dials from):
# this namespace has no address on the pod network. A server started before this file existed is restarted.
cat >"$K/egress-selector.yaml.new" <<EOE
apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      uds:
        udsName: $LAB_STATE/kapi/egress.sock
EOE
mv "$K/egress-selector.yaml.new" "$K/egress-selector.yaml"
t=$(now)
if running kube-apiserver && ! tr '\0' ' ' <"/proc/$(cat "$(pidfile kube-apiserver)")/cmdline" | grep -q egress-selector; then
  log "kube-apiserver: restarting with its egress selector"
  stop_one kube-apiserver
fi
if ! running kube-apiserver; then
  start kube-apiserver "$LAB_STATE/log/kube-apiserver.log" "$KUBE_BIN/kube-apiserver" \
    --etcd-servers="http://127.0.0.1:$P_ETCD" --bind-address=127.0.0.1 --secure-port="$P_KAPI" \
    --advertise-address="$KAPI_IP" --tls-cert-file="$K/apiserver.crt" --tls-private-key-file="$K/apiserver.key" \
    --client-ca-file="$K/ca.crt" --token-auth-file="$K/tokens.csv" --authorization-mode=Node,RBAC \
    --service-account-key-file="$K/sa.pub" --service-account-signing-key-file="$K/sa.key" \
    --service-account-issuer=https://kubernetes.default.svc --service-cluster-ip-range="$SVC_CIDR,$SVC_CIDR6" \
    --allow-privileged=true --disable-admission-plugins=TaintNodesByCondition --event-ttl=2h \
    --endpoint-reconciler-type=lease --kubelet-preferred-address-types=InternalDNS,InternalIP,Hostname \
    --egress-selector-config-file="$K/egress-selector.yaml"
fi
waitfor kube-apiserver 120 kapi_ready || fail_component kube-apiserver "$LAB_STATE/log/kube-apiserver.log"
log "kube-apiserver ready ($(since "$t")s)"

t=$(now)
if ! running kube-controller-manager; then
  # Node lifecycle off: the lab's Nodes have no kubelet heartbeat yet must stay Ready.
  start kube-controller-manager "$LAB_STATE/log/kube-controller-manager.log" "$KUBE_BIN/kube-controller-manager" \
    --kubeconfig="$K/kubeconfig" --authentication-kubeconfig="$K/kubeconfig" --authorization-kubeconfig="$K/kubeconfig" \
    --leader-elect=false --bind-address=127.0.0.1 --secure-port="$P_KCM" \
    --controllers='*,-node-ipam-controller,-node-lifecycle-controller' \
    --service-account-private-key-file="$K/sa.key" --root-ca-file="$K/ca.crt" --use-service-account-credentials=false
fi
if ! running kube-scheduler; then
  start kube-scheduler "$LAB_STATE/log/kube-scheduler.log" "$KUBE_BIN/kube-scheduler" \
    --kubeconfig="$K/kubeconfig" --authentication-kubeconfig="$K/kubeconfig" --authorization-kubeconfig="$K/kubeconfig" \
    --leader-elect=false --bind-address=127.0.0.1 --secure-port="$P_KSCHED"
fi
waitfor kube-controller-manager 120 sh -c "[ \"\$(curl -sk https://127.0.0.1:$P_KCM/healthz)\" = ok ]" \
  || fail_component kube-controller-manager "$LAB_STATE/log/kube-controller-manager.log"
waitfor kube-scheduler 120 sh -c "[ \"\$(curl -sk https://127.0.0.1:$P_KSCHED/healthz)\" = ok ]" \
  || fail_component kube-scheduler "$LAB_STATE/log/kube-scheduler.log"
# the service-account controller creating default/default is the sign that kcm really works
waitfor "default service account" 120 kubectl --kubeconfig="$K/kubeconfig" -n default get sa default \
  || fail_component kube-controller-manager "$LAB_STATE/log/kube-controller-manager.log"
log "kube-controller-manager + kube-scheduler ready ($(since "$t")s)"
