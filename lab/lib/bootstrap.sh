#!/usr/bin/env bash
# Bootstraps the lab "cloud" and "cluster": pod network + subnet, a service subnet equal to the apiserver's
# service-cluster-ip-range, a router on both with a gateway on an external (floating IP) network, and N worker
# "VMs". A VM is a network namespace whose eth0 is one end of a veth pair plugged into br-int as the VM's Neutron
# parent port (MAC and IP of that port, binding:host_id = the chassis), with a trunk on that port, and a Kubernetes
# Node with the port's IP as InternalIP. Idempotent: every object is looked up by name before it is created.
set -euo pipefail
. "$(dirname "$0")/common.sh"
S=$LAB_STATE
KUBECTL="kubectl --kubeconfig=$S/k8s/kubeconfig"
VSCTL="ovs-vsctl --db=unix:$S/ovs/db.sock"
t0=$(now)

LAB_SCRIPT=bootstrap
. "$(dirname "$0")/neutron.sh"
if [ "$LAB_AUTH" = keystone ]; then
  # An application credential for the kuryr user (the auth kind operators are told to prefer).
  if [ ! -f "$S/keystone/appcred.json" ]; then
    uid=$(curl -sf -H "X-Auth-Token: $TOKEN" "http://127.0.0.1:$P_KEYSTONE/v3/auth/tokens" -H "X-Subject-Token: $TOKEN" | jq -r .token.user.id)
    curl -sf -H "X-Auth-Token: $TOKEN" -H 'Content-Type: application/json' \
      "http://127.0.0.1:$P_KEYSTONE/v3/users/$uid/application_credentials" \
      -d '{"application_credential":{"name":"kuryr-lab","description":"kuryr-rs lab"}}' >"$S/keystone/appcred.json.tmp" \
      || die "bootstrap: could not create an application credential"
    mv "$S/keystone/appcred.json.tmp" "$S/keystone/appcred.json"; chmod 600 "$S/keystone/appcred.json"
  fi
  APPCRED_ID=$(jq -r .application_credential.id "$S/keystone/appcred.json")
  APPCRED_SECRET=$(jq -r .application_credential.secret "$S/keystone/appcred.json")
fi

TAGS='["kuryr-lab"]'
POD_NET=$(ensure networks kuryr-pods "{\"name\":\"kuryr-pods\",\"project_id\":\"$PROJECT_ID\"}")
POD_SUBNET=$(ensure subnets kuryr-pods "{\"name\":\"kuryr-pods\",\"network_id\":\"$POD_NET\",\"cidr\":\"$POD_CIDR\",\"gateway_ip\":\"$POD_GW\",\"enable_dhcp\":false,\"ip_version\":4,\"project_id\":\"$PROJECT_ID\"}")
# IPv6 twins for dual-stack: no address mode (not SLAAC, so ports whose fixed_ips name the IPv4 subnet only
# -- kuryr's single-stack ports, the VM ports, VIP ports -- get no IPv6 address) and no router advertisements.
POD_SUBNET6=$(ensure subnets kuryr-pods-v6 "{\"name\":\"kuryr-pods-v6\",\"network_id\":\"$POD_NET\",\"cidr\":\"$POD_CIDR6\",\"gateway_ip\":\"$POD_GW6\",\"enable_dhcp\":false,\"ip_version\":6,\"project_id\":\"$PROJECT_ID\"}")
SVC_NET=$(ensure networks kuryr-services "{\"name\":\"kuryr-services\",\"project_id\":\"$PROJECT_ID\"}")
SVC_SUBNET=$(ensure subnets kuryr-services "{\"name\":\"kuryr-services\",\"network_id\":\"$SVC_NET\",\"cidr\":\"$SVC_CIDR\",\"gateway_ip\":\"$SVC_GW\",\"enable_dhcp\":false,\"ip_version\":4,\"project_id\":\"$PROJECT_ID\"}")
SVC_SUBNET6=$(ensure subnets kuryr-services-v6 "{\"name\":\"kuryr-services-v6\",\"network_id\":\"$SVC_NET\",\"cidr\":\"$SVC_CIDR6\",\"gateway_ip\":\"$SVC_GW6\",\"enable_dhcp\":false,\"ip_version\":6,\"project_id\":\"$PROJECT_ID\"}")
EXT_NET=$(ensure networks kuryr-public "{\"name\":\"kuryr-public\",\"router:external\":true,\"provider:network_type\":\"flat\",\"provider:physical_network\":\"physnet1\",\"project_id\":\"$PROJECT_ID\"}")
EXT_SUBNET=$(ensure subnets kuryr-public "{\"name\":\"kuryr-public\",\"network_id\":\"$EXT_NET\",\"cidr\":\"$EXT_CIDR\",\"gateway_ip\":\"$EXT_GW\",\"enable_dhcp\":false,\"ip_version\":4,\"project_id\":\"$PROJECT_ID\"}")
ROUTER=$(ensure routers kuryr-router "{\"name\":\"kuryr-router\",\"project_id\":\"$PROJECT_ID\",\"external_gateway_info\":{\"network_id\":\"$EXT_NET\"}}")
for sn in "$POD_SUBNET" "$SVC_SUBNET" "$POD_SUBNET6" "$SVC_SUBNET6"; do
  if ! api GET "$N/ports?device_id=$ROUTER&fixed_ips=subnet_id=$sn" | jq -e '.ports | length > 0' >/dev/null; then
    api PUT "$N/routers/$ROUTER/add_router_interface" "{\"subnet_id\":\"$sn\"}" >/dev/null
  fi
done
for r in "networks/$POD_NET" "networks/$SVC_NET" "networks/$EXT_NET" "routers/$ROUTER"; do
  api PUT "$N/$r/tags" "{\"tags\": $TAGS}" >/dev/null
done
log "networks, subnets, router ready ($(since "$t0")s)"


t=$(now)
VMS_JSON="[]"
for i in $(seq 1 "$LAB_VMS"); do
  vm=vm$i ns=${NETNS_PREFIX}vm$i hl=${NETNS_PREFIX}vm$i-h
  ip_addr=198.18.0.$((10 + i))
  PORT=$(ensure ports "$vm" "{\"name\":\"$vm\",\"network_id\":\"$POD_NET\",\"project_id\":\"$PROJECT_ID\",\"binding:host_id\":\"$CHASSIS\",\"device_owner\":\"compute:nova\",\"device_id\":\"$vm\",\"fixed_ips\":[{\"subnet_id\":\"$POD_SUBNET\",\"ip_address\":\"$ip_addr\"}]}")
  pj=$(api GET "$N/ports/$PORT")
  MAC=$(jq -r .port.mac_address <<<"$pj")
  TRUNK=$(ensure trunks "$vm-trunk" "{\"name\":\"$vm-trunk\",\"port_id\":\"$PORT\",\"project_id\":\"$PROJECT_ID\"}")
  plug_netns "$ns" "$hl" "$MAC" "$ip_addr/${POD_CIDR#*/}" "$POD_GW"
  $VSCTL --may-exist add-port br-int "$hl" -- set Interface "$hl" external_ids:iface-id="$PORT"
  VMS_JSON=$(jq -c --arg n "$vm" --arg ns "$ns" --arg p "$PORT" --arg m "$MAC" --arg ip "$ip_addr" --arg t "$TRUNK" \
    '. + [{name:$n, netns:$ns, port_id:$p, mac:$m, ip:$ip, trunk_id:$t}]' <<<"$VMS_JSON")
done
# Ports go ACTIVE once ovn-controller binds them (0.2-0.7 s, seconds on a loaded machine).
for p in $(jq -r '.[].port_id' <<<"$VMS_JSON"); do
  waitfor "port $p ACTIVE" 60 port_active "$p" \
    || die "VM parent port $p did not go ACTIVE (see $S/ovs/ovn-controller.log)"
done
log "$LAB_VMS VMs plugged, parent ports ACTIVE ($(since "$t")s)"

# The API server on the pod network, as a control-plane VM's: netns kuryr-kapi holds a Neutron port at $KAPI_IP
# (security group: the API port open), and a relay inside it hands each connection through a unix socket to the
# API server on 127.0.0.1 (the root namespace gets no address). The API server advertises $KAPI_IP.
t=$(now)
ns=${NETNS_PREFIX}kapi hl=${NETNS_PREFIX}kapi-h
KAPI_SG=$(find_id security-groups kuryr-lab-kapi)
if [ -z "$KAPI_SG" ]; then
  KAPI_SG=$(api POST "$N/security-groups" "{\"security_group\":{\"name\":\"kuryr-lab-kapi\",\"project_id\":\"$PROJECT_ID\"}}" | jq -r .security_group.id)
  api POST "$N/security-group-rules" "{\"security_group_rule\":{\"security_group_id\":\"$KAPI_SG\",\"direction\":\"ingress\",\"ethertype\":\"IPv4\",\"protocol\":\"tcp\",\"port_range_min\":$P_KAPI,\"port_range_max\":$P_KAPI,\"remote_ip_prefix\":\"0.0.0.0/0\"}}" >/dev/null
fi
KAPI_PORT=$(ensure ports kuryr-kapi "{\"name\":\"kuryr-kapi\",\"network_id\":\"$POD_NET\",\"project_id\":\"$PROJECT_ID\",\"binding:host_id\":\"$CHASSIS\",\"device_owner\":\"compute:nova\",\"device_id\":\"kuryr-kapi\",\"security_groups\":[\"$KAPI_SG\"],\"fixed_ips\":[{\"subnet_id\":\"$POD_SUBNET\",\"ip_address\":\"$KAPI_IP\"}]}")
plug_netns "$ns" "$hl" "$(api GET "$N/ports/$KAPI_PORT" | jq -r .port.mac_address)" "$KAPI_IP/${POD_CIDR#*/}" "$POD_GW"
$VSCTL --may-exist add-port br-int "$hl" -- set Interface "$hl" external_ids:iface-id="$KAPI_PORT"
mkdir -p "$S/kapi"
netns_relay kapi-relay "$ns" "$KAPI_IP" "$P_KAPI" "$S/kapi/api.sock" "$P_KAPI"
running kapi-egress || start kapi-egress "$S/log/kapi-egress.log" \
  python3 "$LAB_DIR/lib/kapi-egress.py" --listen "$S/kapi/egress.sock" --netns "$ns" \
  --via "${LAB_UNREACHABLE4// /,},${LAB_UNREACHABLE6// /,}"
waitfor "port $KAPI_PORT ACTIVE" 60 port_active "$KAPI_PORT" || die "the API server's port $KAPI_PORT did not go ACTIVE"
waitfor "the API server through $KAPI_IP" 30 ip netns exec "$ns" curl -sf --cacert "$S/k8s/ca.crt" "https://$KAPI_IP:$P_KAPI/livez" \
  || die "the API server does not answer on $KAPI_IP:$P_KAPI (see $S/log/kapi-relay*.log)"
log "API server on the pod network at $KAPI_IP ($(since "$t")s)"

# The ovn provider's VIP port carries the project's `default` security group (Octavia makes the port), and the
# client's address reaches it unchanged: a LoadBalancer Service's floating IP answers outside clients only if
# that group admits them. kuryr-rs does not manage VIP ports' groups (docs/services.md); the lab opens the
# default group to its external network, as an operator of public Services on the ovn provider would.
DEFAULT_SG=$(default_sg)
[ -n "$DEFAULT_SG" ] || die "bootstrap: the project has no default security group"
if ! api GET "$N/security-group-rules?security_group_id=$DEFAULT_SG&direction=ingress&remote_ip_prefix=$EXT_CIDR" \
    | jq -e '.security_group_rules | length > 0' >/dev/null; then
  api POST "$N/security-group-rules" "{\"security_group_rule\":{\"security_group_id\":\"$DEFAULT_SG\",\"direction\":\"ingress\",\"ethertype\":\"IPv4\",\"remote_ip_prefix\":\"$EXT_CIDR\"}}" >/dev/null
fi

# The worker VMs' group: a nested-macvlan pod's traffic enters through its VM's port, so that port's groups,
# not the pod's, decide what reaches it. Pods whose ports carry NetworkPolicy groups instead of `default`
# (nested-vlan subports, neutron-vif) are not members of `default`'s remote group; an operator admits the pod
# network on the workers, as this group does (docs/network-policy.md, "Peer modes").
NODES_SG=$(find_id security-groups kuryr-lab-nodes)
if [ -z "$NODES_SG" ]; then
  NODES_SG=$(api POST "$N/security-groups" "{\"security_group\":{\"name\":\"kuryr-lab-nodes\",\"description\":\"worker VMs: the pod network in\",\"project_id\":\"$PROJECT_ID\"}}" | jq -r .security_group.id)
fi
for rule in "IPv4 $POD_CIDR" "IPv6 $POD_CIDR6"; do
  set -- $rule
  if ! api GET "$N/security-group-rules?security_group_id=$NODES_SG&direction=ingress&remote_ip_prefix=$2" \
      | jq -e '.security_group_rules | length > 0' >/dev/null; then
    api POST "$N/security-group-rules" "{\"security_group_rule\":{\"security_group_id\":\"$NODES_SG\",\"direction\":\"ingress\",\"ethertype\":\"$1\",\"remote_ip_prefix\":\"$2\"}}" >/dev/null
  fi
done
for p in $(jq -r '.[].port_id' <<<"$VMS_JSON"); do
  worker_groups "$p" "$DEFAULT_SG" "$NODES_SG" || die "bootstrap: cannot give port $p the workers' security group"
done

# A host outside the cluster, on the external network (br-ex, physnet1): what reaches a LoadBalancer Service's
# floating IP from there reaches it from the Internet. Not a Neutron port: an address of the flat network.
ns=${NETNS_PREFIX}outside hl=${NETNS_PREFIX}outside-h
plug_netns "$ns" "$hl" "" "$OUTSIDE_IP/${EXT_CIDR#*/}" ""
$VSCTL --may-exist add-port br-ex "$hl"

t=$(now)
for row in $(jq -c '.[]' <<<"$VMS_JSON"); do
  vm=$(jq -r .name <<<"$row") ip_addr=$(jq -r .ip <<<"$row") port=$(jq -r .port_id <<<"$row")
  if ! $KUBECTL get node "$vm" >/dev/null 2>&1; then
    cat <<EON | $KUBECTL create -f - >/dev/null
apiVersion: v1
kind: Node
metadata:
  name: $vm
  labels: {kubernetes.io/hostname: $vm, kubernetes.io/os: linux, kubernetes.io/arch: amd64, kuryr.lab/vm: "true"}
  annotations: {kuryr.lab/neutron-port: "$port"}
spec:
  providerID: "openstack:///$vm"
status:
  addresses: [{type: InternalIP, address: "$ip_addr"}, {type: Hostname, address: "$vm"}]
  capacity: {cpu: "8", memory: 16Gi, pods: "110"}
  allocatable: {cpu: "8", memory: 16Gi, pods: "110"}
  conditions:
  - {type: Ready, status: "True", reason: KuryrLab, message: "lab VM (network namespace $NETNS_PREFIX$vm)"}
  nodeInfo: {kubeletVersion: v$KUBE_VERSION, architecture: amd64, operatingSystem: linux, bootID: "", containerRuntimeVersion: "", kernelVersion: "", kubeProxyVersion: "", machineID: "", osImage: "kuryr-lab netns", systemUUID: ""}
EON
  fi
  # No kubelet runs these Nodes: a pod the scheduler put here would be wired but never run (Kubernetes' e2e
  # suite counts untainted Ready Nodes as schedulable). Pods pinned by spec.nodeName are not affected.
  $KUBECTL taint node "$vm" kuryr.lab/no-kubelet=true:NoSchedule --overwrite >/dev/null
done
log "$LAB_VMS Nodes registered ($(since "$t")s)"

# A second project, for the tests of a project per namespace (docs/projects.md): Keystone's `service`
# project; under noauth any id is a project.
if [ "$LAB_AUTH" = keystone ]; then
  TENANT_PROJECT_ID=$(curl -sf -H "X-Auth-Token: $TOKEN" "http://127.0.0.1:$P_KEYSTONE/v3/projects?name=service" \
    | jq -r '.projects[0].id // empty')
  [ -n "$TENANT_PROJECT_ID" ] || die "bootstrap: Keystone has no project named service"
else
  TENANT_PROJECT_ID=5e1f0c0de5e1f0c0de5e1f0c0de5e1f0
fi

jq -n --arg state "$S" --arg kc "$S/k8s/kubeconfig" --arg cy "$S/clouds.yaml" --arg auth "$LAB_AUTH" \
  --arg ks "$([ "$LAB_AUTH" = keystone ] && echo "http://127.0.0.1:$P_KEYSTONE/v3")" \
  --arg ks_short "$([ "$LAB_AUTH" = keystone ] && echo "http://127.0.0.1:$P_KEYSTONE_SHORT/v3")" --argjson short_exp "$LAB_SHORT_TOKEN_EXPIRATION" \
  --arg neutron "http://127.0.0.1:$P_NEUTRON" --arg octavia "http://127.0.0.1:$P_OCTAVIA" --arg project "$PROJECT_ID" --arg tenant "$TENANT_PROJECT_ID" \
  --arg region "$LAB_REGION" --arg chassis "$CHASSIS" --arg svc_range "$SVC_CIDR" \
  --arg pn "$POD_NET" --arg ps "$POD_SUBNET" --arg pc "$POD_CIDR" --arg sn "$SVC_NET" --arg ss "$SVC_SUBNET" --arg sc "$SVC_CIDR" \
  --arg ps6 "$POD_SUBNET6" --arg pc6 "$POD_CIDR6" --arg ss6 "$SVC_SUBNET6" --arg sc6 "$SVC_CIDR6" \
  --arg r "$ROUTER" --arg en "$EXT_NET" --arg es "$EXT_SUBNET" --argjson vms "$VMS_JSON" --arg nsg "$NODES_SG" \
  --arg oip "$OUTSIDE_IP" --arg kip "$KAPI_IP" --arg kport "$KAPI_PORT" --arg ksvc "$KAPI_SVC_IP" --argjson kp "$P_KAPI" \
  '{state_dir:$state, kubeconfig:$kc, clouds_yaml:$cy, cloud:(if $auth=="keystone" then "kuryr-lab" else "kuryr-lab-noauth" end),
    auth:$auth, keystone_url:(if $ks=="" then null else $ks end),
    keystone_short_token_url:(if $ks_short=="" then null else $ks_short end), short_token_expiration_s:$short_exp, neutron_url:$neutron, octavia_url:$octavia,
    project_id:$project, tenant_project_id:$tenant, region:$region, chassis:$chassis, service_cluster_ip_range:$svc_range,
    pod_network_id:$pn, pod_subnet_id:$ps, pod_subnet_cidr:$pc, service_network_id:$sn, service_subnet_id:$ss,
    service_subnet_cidr:$sc, pod_subnet_v6_id:$ps6, pod_subnet_v6_cidr:$pc6, service_subnet_v6_id:$ss6,
    service_subnet_v6_cidr:$sc6, router_id:$r, external_network_id:$en, external_subnet_id:$es,
    octavia_providers:["ovn","amphora"], vms:$vms, nodes_security_group_id:$nsg,
    outside:{netns:"'"${NETNS_PREFIX}outside"'", ip:$oip},
    apiserver:{ip:$kip, port:$kp, port_id:$kport, netns:"'"${NETNS_PREFIX}kapi"'", service_ip:$ksvc}}' >"$S/lab.json.tmp"
mv "$S/lab.json.tmp" "$S/lab.json"

password_cloud() { # NAME KEYSTONE_URL: a clouds.yaml entry for the kuryr user
  cat <<EOC
  $1:
    auth_type: password
    auth:
      auth_url: $2
      username: kuryr
      password: $ADMIN_PASSWORD
      project_name: $LAB_PROJECT
      user_domain_id: default
      project_domain_id: default
    region_name: $LAB_REGION
    interface: public
    identity_api_version: 3
EOC
}
{
  echo "# Written by lab/lab up. OS_CLIENT_CONFIG_FILE=$S/clouds.yaml OS_CLOUD=kuryr-lab"
  echo "clouds:"
  password_cloud kuryr-lab "http://127.0.0.1:$P_KEYSTONE/v3"
  password_cloud kuryr-lab-short-token "http://127.0.0.1:$P_KEYSTONE_SHORT/v3"
  cat <<EOC
  kuryr-lab-appcred:
    auth_type: v3applicationcredential
    auth:
      auth_url: http://127.0.0.1:$P_KEYSTONE/v3
      application_credential_id: ${APPCRED_ID:-none}
      application_credential_secret: ${APPCRED_SECRET:-none}
    region_name: $LAB_REGION
    interface: public
    identity_api_version: 3
  kuryr-lab-noauth:
    auth_type: none
    auth:
      endpoint: http://127.0.0.1:$P_NEUTRON
    network_endpoint_override: http://127.0.0.1:$P_NEUTRON
    load_balancer_endpoint_override: http://127.0.0.1:$P_OCTAVIA
EOC
} >"$S/clouds.yaml.tmp"
mv "$S/clouds.yaml.tmp" "$S/clouds.yaml"
chmod 600 "$S/clouds.yaml"
log "bootstrap done ($(since "$t0")s)"
