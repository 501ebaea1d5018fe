#!/usr/bin/env bash
# Bootstraps the lab "cloud" and "cluster": pod network + subnet, a service subnet equal to the apiserver's
# service-cluster-ip-range, a router on both with a gateway on an external (floating IP) network, and N worker
# "VMs". A VM is a network namespace whose eth0 is one end of a veth pair plugged into br-int as the VM's Neutron
# parent port (MAC and IP of that port, binding:host_id = the chassis), with a trunk on that port, and a Kubernetes
# Node with the port's IP as InternalIP. Idempotent: every object is looked up by name before it is created.
set -euo pipefail
. "$(dirname "$0")/common.sh"
S=$LAB_STATE
N=http://127.0.0.1:$P_NEUTRON/v2.0
KUBECTL="kubectl --kubeconfig=$S/k8s/kubeconfig"
VSCTL="ovs-vsctl --db=unix:$S/ovs/db.sock"
t0=$(now)

if [ "$LAB_AUTH" = keystone ]; then
  TOKEN=$(curl -sf -D - -o /dev/null -H 'Content-Type: application/json' "http://127.0.0.1:$P_KEYSTONE/v3/auth/tokens" \
    -d "{\"auth\":{\"identity\":{\"methods\":[\"password\"],\"password\":{\"user\":{\"name\":\"kuryr\",\"domain\":{\"id\":\"default\"},\"password\":\"$ADMIN_PASSWORD\"}}},\"scope\":{\"project\":{\"name\":\"$LAB_PROJECT\",\"domain\":{\"id\":\"default\"}}}}}" \
    | awk 'tolower($1)=="x-subject-token:"{print $2}' | tr -d '\r')
  [ -n "$TOKEN" ] || die "bootstrap: no Keystone token for user kuryr"
  PROJECT_ID=$(cat "$S/keystone/kuryr-project-id")
  AUTH=(-H "X-Auth-Token: $TOKEN")
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
else
  # noauth Neutron acts as admin when no X-Project-Id is sent; the project goes into each body.
  PROJECT_ID=0c8d1f4e6a7b4b1f9a3e5d2c1b0a9f8e
  AUTH=()
fi

api() { # METHOD URL [BODY]
  local out code
  out=$(curl -s -w '\n%{http_code}' -X "$1" "${AUTH[@]}" -H 'Content-Type: application/json' "$2" ${3:+-d "$3"})
  code=${out##*$'\n'}; out=${out%$'\n'*}
  case $code in 2*) printf '%s' "$out" ;; *) log "bootstrap: $1 $2 -> $code: $out"; return 1 ;; esac
}
port_active() { api GET "$N/ports/$1" | jq -e '.port.status == "ACTIVE"' >/dev/null; }
find_id() { api GET "$N/$1?name=$2" | jq -r ".$1[0].id // empty"; }
ensure() { # COLLECTION NAME BODY-JSON -> id
  local id; id=$(find_id "$1" "$2")
  if [ -z "$id" ]; then id=$(api POST "$N/$1" "{\"${1%s}\": $3}" | jq -r ".${1%s}.id"); fi
  echo "$id"
}

TAGS='["kuryr-lab"]'
POD_NET=$(ensure networks kuryr-pods "{\"name\":\"kuryr-pods\",\"project_id\":\"$PROJECT_ID\"}")
POD_SUBNET=$(ensure subnets kuryr-pods "{\"name\":\"kuryr-pods\",\"network_id\":\"$POD_NET\",\"cidr\":\"$POD_CIDR\",\"gateway_ip\":\"$POD_GW\",\"enable_dhcp\":false,\"ip_version\":4,\"project_id\":\"$PROJECT_ID\"}")
SVC_NET=$(ensure networks kuryr-services "{\"name\":\"kuryr-services\",\"project_id\":\"$PROJECT_ID\"}")
SVC_SUBNET=$(ensure subnets kuryr-services "{\"name\":\"kuryr-services\",\"network_id\":\"$SVC_NET\",\"cidr\":\"$SVC_CIDR\",\"gateway_ip\":\"$SVC_GW\",\"enable_dhcp\":false,\"ip_version\":4,\"project_id\":\"$PROJECT_ID\"}")
EXT_NET=$(ensure networks kuryr-public "{\"name\":\"kuryr-public\",\"router:external\":true,\"provider:network_type\":\"flat\",\"provider:physical_network\":\"physnet1\",\"project_id\":\"$PROJECT_ID\"}")
EXT_SUBNET=$(ensure subnets kuryr-public "{\"name\":\"kuryr-public\",\"network_id\":\"$EXT_NET\",\"cidr\":\"$EXT_CIDR\",\"gateway_ip\":\"$EXT_GW\",\"enable_dhcp\":false,\"ip_version\":4,\"project_id\":\"$PROJECT_ID\"}")
ROUTER=$(ensure routers kuryr-router "{\"name\":\"kuryr-router\",\"project_id\":\"$PROJECT_ID\",\"external_gateway_info\":{\"network_id\":\"$EXT_NET\"}}")
for sn in "$POD_SUBNET" "$SVC_SUBNET"; do
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
  if ! ip netns list | awk '{print $1}' | grep -qx "$ns"; then
    ip netns add "$ns"
    ip link add "$hl" type veth peer name "$ns-g"
    ip link set "$ns-g" netns "$ns"
    ip -n "$ns" link set "$ns-g" name eth0
    ip -n "$ns" link set eth0 address "$MAC"
    ip -n "$ns" addr add "$ip_addr/${POD_CIDR#*/}" dev eth0
    # userspace OVS conntrack sees bad L4 checksums from offloaded veths, and OVN's ACLs then drop TCP/UDP
    ip netns exec "$ns" ethtool -K eth0 tx off >/dev/null
    ip -n "$ns" link set lo up
    ip -n "$ns" link set eth0 up
    ip -n "$ns" route add default via "$POD_GW"
    ip link set "$hl" up
  fi
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
done
log "$LAB_VMS Nodes registered ($(since "$t")s)"

jq -n --arg state "$S" --arg kc "$S/k8s/kubeconfig" --arg cy "$S/clouds.yaml" --arg auth "$LAB_AUTH" \
  --arg ks "$([ "$LAB_AUTH" = keystone ] && echo "http://127.0.0.1:$P_KEYSTONE/v3")" \
  --arg ks_short "$([ "$LAB_AUTH" = keystone ] && echo "http://127.0.0.1:$P_KEYSTONE_SHORT/v3")" --argjson short_exp "$LAB_SHORT_TOKEN_EXPIRATION" \
  --arg neutron "http://127.0.0.1:$P_NEUTRON" --arg octavia "http://127.0.0.1:$P_OCTAVIA" --arg project "$PROJECT_ID" \
  --arg region "$LAB_REGION" --arg chassis "$CHASSIS" --arg svc_range "$SVC_CIDR" \
  --arg pn "$POD_NET" --arg ps "$POD_SUBNET" --arg pc "$POD_CIDR" --arg sn "$SVC_NET" --arg ss "$SVC_SUBNET" --arg sc "$SVC_CIDR" \
  --arg r "$ROUTER" --arg en "$EXT_NET" --arg es "$EXT_SUBNET" --argjson vms "$VMS_JSON" \
  '{state_dir:$state, kubeconfig:$kc, clouds_yaml:$cy, cloud:(if $auth=="keystone" then "kuryr-lab" else "kuryr-lab-noauth" end),
    auth:$auth, keystone_url:(if $ks=="" then null else $ks end),
    keystone_short_token_url:(if $ks_short=="" then null else $ks_short end), short_token_expiration_s:$short_exp, neutron_url:$neutron, octavia_url:$octavia,
    project_id:$project, region:$region, chassis:$chassis, service_cluster_ip_range:$svc_range,
    pod_network_id:$pn, pod_subnet_id:$ps, pod_subnet_cidr:$pc, service_network_id:$sn, service_subnet_id:$ss,
    service_subnet_cidr:$sc, router_id:$r, external_network_id:$en, external_subnet_id:$es,
    octavia_providers:["ovn","amphora"], vms:$vms}' >"$S/lab.json.tmp"
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
