#!/usr/bin/env bash
# The cloud: MariaDB, OVN central (NB/SB/northd), a userspace OVS (netdev datapath) + ovn-controller standing for
# the hypervisor, RabbitMQ, Keystone, Neutron on ML2/OVN (trunk + ovn-router) and Octavia (api + driver agent for
# the `ovn` provider, worker with noop drivers for the `amphora` provider).
set -euo pipefail
. "$(dirname "$0")/common.sh"
S=$LAB_STATE
VK=$LAB_CACHE/venv/keystone VN=$LAB_CACHE/venv/neutron VO=$LAB_CACHE/venv/octavia
mkdir -p "$S"/{log,pids,mysql/data,mysql/run,ovn,ovs,rabbitmq,keystone,neutron/etc,neutron/state,neutron/lock,neutron/tmp,octavia/etc,octavia/run,octavia/lock,octavia/tmp,octavia/certs}
NBCTL="ovn-nbctl --db=tcp:127.0.0.1:$P_NB"
SBCTL="ovn-sbctl --db=tcp:127.0.0.1:$P_SB"
export OVS_RUNDIR=$S/ovs OVS_LOGDIR=$S/ovs OVS_DBDIR=$S/ovs OVS_SYSCONFDIR=$S/ovs OVN_RUNDIR=$S/ovs OVN_LOGDIR=$S/ovs
VSCTL="ovs-vsctl --db=unix:$S/ovs/db.sock"
SQL="mariadb --socket=$S/mysql/run/mysqld.sock -uroot"

############################################ MariaDB ############################################
mariadb_up() {
  local t; t=$(now)
  if ! running mariadbd; then
    if [ ! -d "$S/mysql/data/mysql" ]; then
      chown -R mysql:mysql "$S/mysql"
      mariadb-install-db --user=mysql --datadir="$S/mysql/data" --auth-root-authentication-method=normal \
        --skip-test-db >"$S/log/mariadb-install.log" 2>&1 || fail_component mariadb-install-db "$S/log/mariadb-install.log"
    fi
    start mariadbd "$S/log/mariadb.log" mariadbd --no-defaults --user=mysql --datadir="$S/mysql/data" \
      --socket="$S/mysql/run/mysqld.sock" --pid-file="$S/mysql/run/mysqld.pid" --port=$P_DB --bind-address=127.0.0.1 \
      --skip-log-bin --innodb-flush-log-at-trx-commit=0 --max-connections=500
  fi
  waitfor mariadb 60 mariadb-admin --socket="$S/mysql/run/mysqld.sock" -uroot ping || fail_component mariadb "$S/log/mariadb.log"
  $SQL -e "CREATE USER IF NOT EXISTS 'os'@'127.0.0.1' IDENTIFIED BY 'os'; GRANT ALL ON *.* TO 'os'@'127.0.0.1';"
  log "mariadb ready ($(since "$t")s)"
}

############################################ OVN + OVS ############################################
ovn_up() {
  local t; t=$(now)
  if ! running ovn-nb; then
    [ -f "$S/ovn/nb.db" ] || ovsdb-tool create "$S/ovn/nb.db" "$OVN_ROOT/usr/share/ovn/ovn-nb.ovsschema"
    [ -f "$S/ovn/sb.db" ] || ovsdb-tool create "$S/ovn/sb.db" "$OVN_ROOT/usr/share/ovn/ovn-sb.ovsschema"
    OVS_RUNDIR=$S/ovn ovsdb-server "$S/ovn/nb.db" --remote="punix:$S/ovn/nb.sock" --remote="ptcp:$P_NB:127.0.0.1" \
      --pidfile="$(pidfile ovn-nb)" --unixctl="$S/ovn/nb.ctl" --log-file="$S/ovn/nb.log" --detach --no-chdir
    OVS_RUNDIR=$S/ovn ovsdb-server "$S/ovn/sb.db" --remote="punix:$S/ovn/sb.sock" --remote="ptcp:$P_SB:127.0.0.1" \
      --pidfile="$(pidfile ovn-sb)" --unixctl="$S/ovn/sb.ctl" --log-file="$S/ovn/sb.log" --detach --no-chdir
    OVS_RUNDIR=$S/ovn ovn-northd --ovnnb-db="unix:$S/ovn/nb.sock" --ovnsb-db="unix:$S/ovn/sb.sock" \
      --pidfile="$(pidfile ovn-northd)" --unixctl="$S/ovn/northd.ctl" --log-file="$S/ovn/northd.log" --detach --no-chdir
  fi
  waitfor ovn-nb 30 $NBCTL --timeout=2 show || fail_component ovn-nb "$S/ovn/nb.log"
  # Neutron's maintenance worker writes this ~40 s after start; LBs made before it get a black-holing VIP MAC.
  $NBCTL set NB_Global . options:ignore_lsp_down=false
  if ! running ovs-ovsdb; then
    [ -f "$S/ovs/conf.db" ] || ovsdb-tool create "$S/ovs/conf.db" "$OVN_ROOT/usr/share/openvswitch/vswitch.ovsschema"
    ovsdb-server "$S/ovs/conf.db" --remote="punix:$S/ovs/db.sock" --remote=db:Open_vSwitch,Open_vSwitch,manager_options \
      --pidfile="$(pidfile ovs-ovsdb)" --unixctl="$S/ovs/ovsdb-server.ctl" --log-file="$S/ovs/ovsdb.log" --detach --no-chdir
    $VSCTL --no-wait init
  fi
  if ! running ovs-vswitchd; then
    ovs-vswitchd "unix:$S/ovs/db.sock" --pidfile="$(pidfile ovs-vswitchd)" --unixctl="$S/ovs/ovs-vswitchd.ctl" \
      --log-file="$S/ovs/vswitchd.log" --detach --no-chdir
  fi
  $VSCTL --may-exist add-br br-int -- set bridge br-int datapath_type=netdev fail-mode=secure other_config:disable-in-band=true
  $VSCTL --may-exist add-br br-ex -- set bridge br-ex datapath_type=netdev
  $VSCTL set open . external_ids:system-id=$CHASSIS external_ids:hostname=$CHASSIS \
    external_ids:ovn-remote=tcp:127.0.0.1:$P_SB external_ids:ovn-encap-type=geneve external_ids:ovn-encap-ip=127.0.0.1 \
    external_ids:ovn-bridge=br-int external_ids:ovn-bridge-mappings=physnet1:br-ex \
    external_ids:ovn-cms-options=enable-chassis-as-gw
  if ! running ovn-controller; then
    ovn-controller "unix:$S/ovs/db.sock" --pidfile="$(pidfile ovn-controller)" --log-file="$S/ovs/ovn-controller.log" \
      --detach --no-chdir
  fi
  waitfor "ovn chassis $CHASSIS" 60 sh -c "$SBCTL --bare --columns=name list Chassis | grep -qx $CHASSIS" \
    || fail_component ovn-controller "$S/ovs/ovn-controller.log"
  log "ovn central + ovs(netdev) + ovn-controller ready ($(since "$t")s)"
}

############################################ RabbitMQ ############################################
RABBIT_ENV=(env HOME="$S/rabbitmq" RABBITMQ_NODENAME=kuryrlab@localhost RABBITMQ_NODE_IP_ADDRESS=127.0.0.1
  RABBITMQ_NODE_PORT=$P_AMQP RABBITMQ_DIST_PORT=$((P_AMQP + 20000)) ERL_EPMD_ADDRESS=127.0.0.1 ERL_EPMD_PORT=$P_EPMD
  RABBITMQ_MNESIA_BASE="$S/rabbitmq/mnesia" RABBITMQ_LOG_BASE="$S/rabbitmq/log" RABBITMQ_PID_FILE="$S/rabbitmq/pid"
  RABBITMQ_CONFIG_FILE="$S/rabbitmq/rabbitmq" RABBITMQ_ENABLED_PLUGINS_FILE="$S/rabbitmq/enabled_plugins"
  RABBITMQ_ADVANCED_CONFIG_FILE="$S/rabbitmq/advanced.config" RABBITMQ_CONF_ENV_FILE="$S/rabbitmq/rabbitmq-env.conf"
  setpriv --reuid=rabbitmq --regid=rabbitmq --init-groups)
rabbit_up() {
  local t; t=$(now)
  if ! running rabbitmq; then
    mkdir -p "$S/rabbitmq/mnesia" "$S/rabbitmq/log"
    echo '[].' >"$S/rabbitmq/enabled_plugins"; : >"$S/rabbitmq/rabbitmq.conf"; : >"$S/rabbitmq/rabbitmq-env.conf"
    echo 'loopback_users = none' >"$S/rabbitmq/rabbitmq.conf"
    chown -R rabbitmq:rabbitmq "$S/rabbitmq"
    start rabbitmq "$S/log/rabbitmq.log" "${RABBIT_ENV[@]}" /usr/lib/rabbitmq/bin/rabbitmq-server
  fi
  waitfor rabbitmq 90 "${RABBIT_ENV[@]}" /usr/lib/rabbitmq/bin/rabbitmqctl -q status || fail_component rabbitmq "$S/log/rabbitmq.log"
  log "rabbitmq ready ($(since "$t")s)"
}

############################################ configs ############################################
write_configs() {
  local auth_neutron auth_octavia
  cat >"$S/keystone/keystone.conf" <<EOC
[DEFAULT]
debug = false
use_stderr = true
[database]
connection = mysql+pymysql://os:os@127.0.0.1:$P_DB/keystone
[token]
provider = fernet
expiration = $LAB_TOKEN_EXPIRATION
[fernet_tokens]
key_repository = $S/keystone/fernet-keys
[fernet_receipts]
key_repository = $S/keystone/fernet-keys
[credential]
key_repository = $S/keystone/credential-keys
EOC
  sed "s/^expiration = .*/expiration = $LAB_SHORT_TOKEN_EXPIRATION/" "$S/keystone/keystone.conf" >"$S/keystone/keystone-short.conf"
  if [ "$LAB_AUTH" = keystone ]; then
    auth_neutron="auth_strategy = keystone"
    auth_octavia="auth_strategy = keystone"
  else
    auth_neutron="auth_strategy = noauth"
    auth_octavia="auth_strategy = noauth"
  fi
  sed -e "s#/var/lib/neutron/healthcheck_disable#$S/neutron/state/healthcheck_disable#" \
    "$VN/etc/neutron/api-paste.ini" >"$S/neutron/etc/api-paste.ini"
  cat >"$S/neutron/etc/neutron.conf" <<EOC
[DEFAULT]
api_paste_config = $S/neutron/etc/api-paste.ini
bind_host = 127.0.0.1
bind_port = $P_NEUTRON
core_plugin = ml2
service_plugins = trunk,ovn-router
$auth_neutron
notify_nova_on_port_status_changes = false
notify_nova_on_port_data_changes = false
allow_overlapping_ips = true
transport_url = fake:/
api_workers = 1
rpc_workers = 0
rpc_state_report_workers = 0
state_path = $S/neutron/state
debug = false
use_stderr = true
[database]
connection = mysql+pymysql://os:os@127.0.0.1:$P_DB/neutron
[quotas]
# Neutron's default of 10 security groups per project is less than the demo's policy namespace and the
# NetworkPolicy tests hold at once on one lab (tests that need a quota set their own, per project).
quota_security_group = 100
quota_security_group_rule = 2000
[oslo_concurrency]
lock_path = $S/neutron/lock
[oslo_policy]
enforce_scope = false
enforce_new_defaults = false
[keystone_authtoken]
www_authenticate_uri = http://127.0.0.1:$P_KEYSTONE/v3
auth_url = http://127.0.0.1:$P_KEYSTONE/v3
auth_type = password
username = neutron
password = $SERVICE_PASSWORD
user_domain_id = default
project_name = service
project_domain_id = default
region_name = $LAB_REGION
EOC
  cat >"$S/neutron/etc/ml2_conf.ini" <<EOC
[ml2]
type_drivers = geneve,flat,vlan
tenant_network_types = geneve
mechanism_drivers = ovn
extension_drivers = port_security,tag_ports_during_bulk_creation
overlay_ip_version = 4
[ml2_type_geneve]
vni_ranges = 1:65536
max_header_size = 38
[ml2_type_vlan]
network_vlan_ranges = physnet1:100:200
[ml2_type_flat]
flat_networks = physnet1
[ovn]
ovn_nb_connection = tcp:127.0.0.1:$P_NB
ovn_sb_connection = tcp:127.0.0.1:$P_SB
ovn_l3_scheduler = leastloaded
ovn_metadata_enabled = false
neutron_sync_mode = log
EOC
  local svc_auth neutron_sect
  if [ "$LAB_AUTH" = keystone ]; then
    svc_auth="auth_url = http://127.0.0.1:$P_KEYSTONE/v3
auth_type = password
username = octavia
password = $SERVICE_PASSWORD
user_domain_id = default
project_name = service
project_domain_id = default
region_name = $LAB_REGION"
    neutron_sect="region_name = $LAB_REGION
valid_interfaces = public"
  else
    svc_auth="auth_type = none"
    neutron_sect="auth_type = none
endpoint_override = http://127.0.0.1:$P_NEUTRON"
  fi
  # API + driver agent (ovn provider) use the real Neutron network driver; the worker (amphora provider with noop
  # compute/amphora drivers) gets a copy with the noop network driver: it has no Nova to plug VIPs into.
  local conf="$S/octavia/etc/octavia.conf"
  cat >"$conf" <<EOC
[DEFAULT]
transport_url = rabbit://guest:guest@127.0.0.1:$P_AMQP/
debug = false
[api_settings]
bind_host = 127.0.0.1
bind_port = $P_OCTAVIA
$auth_octavia
enabled_provider_drivers = amphora:Amphora provider (noop compute and amphora drivers),ovn:OVN provider
default_provider_driver = ovn
[database]
connection = mysql+pymysql://os:os@127.0.0.1:$P_DB/octavia
[controller_worker]
network_driver = allowed_address_pairs_driver
amphora_driver = amphora_noop_driver
compute_driver = compute_noop_driver
volume_driver = volume_noop_driver
image_driver = image_noop_driver
loadbalancer_topology = SINGLE
workers = 1
client_ca = $S/octavia/certs/ca.pem
[networking]
allow_invisible_resource_usage = true
[neutron]
$neutron_sect
[service_auth]
$svc_auth
[keystone_authtoken]
www_authenticate_uri = http://127.0.0.1:$P_KEYSTONE/v3
$svc_auth
[task_flow]
jobboard_enabled = False
[oslo_messaging]
topic = octavia_prov
[health_manager]
bind_ip = 127.0.0.1
bind_port = $P_OCT_HM
heartbeat_key = lab-heartbeat-key
[certificates]
cert_generator = local_cert_generator
ca_certificate = $S/octavia/certs/ca.pem
ca_private_key = $S/octavia/certs/ca_enc.key
ca_private_key_passphrase = lab-ca-passphrase
server_certs_key_passphrase = kuryr-lab-server-certs-passphras
[haproxy_amphora]
client_cert = $S/octavia/certs/client.pem
server_ca = $S/octavia/certs/ca.pem
[driver_agent]
status_socket_path = $S/octavia/run/status.sock
stats_socket_path = $S/octavia/run/stats.sock
get_socket_path = $S/octavia/run/get.sock
enabled_provider_agents = ovn
[ovn]
ovn_nb_connection = tcp:127.0.0.1:$P_NB
ovn_sb_connection = tcp:127.0.0.1:$P_SB
[oslo_concurrency]
lock_path = $S/octavia/lock
[oslo_policy]
enforce_scope = false
enforce_new_defaults = false
EOC
  sed 's/^network_driver = allowed_address_pairs_driver/network_driver = network_noop_driver/' "$conf" >"$S/octavia/etc/octavia-worker.conf"
  if [ ! -f "$S/octavia/certs/client.pem" ]; then
    ( cd "$S/octavia/certs"
      openssl genrsa -aes256 -passout pass:lab-ca-passphrase -out ca_enc.key 2048 2>/dev/null
      openssl req -x509 -new -key ca_enc.key -passin pass:lab-ca-passphrase -out ca.pem -days 365 -subj /CN=octavia-lab-ca 2>/dev/null
      openssl req -newkey rsa:2048 -nodes -keyout client.key -out client.csr -subj /CN=octavia-lab-client 2>/dev/null
      openssl x509 -req -in client.csr -CA ca.pem -CAkey ca_enc.key -passin pass:lab-ca-passphrase -CAcreateserial \
        -out client.crt -days 365 2>/dev/null
      cat client.crt client.key >client.pem )
  fi
}

############################################ databases ############################################
# Migrations are the slow part of a start (10-16 s): the migrated schemas are dumped into the cache, keyed by the
# venvs they came from, and a later start imports the dump (~2 s).
db_up() {
  local t key dump; t=$(now)
  if [ -f "$S/.db-ready" ]; then return 0; fi
  key=$( (readlink -f "$VK"; readlink -f "$VN"; readlink -f "$VO"; echo schema-v1) | sha256sum | cut -c1-12)
  dump="$LAB_CACHE/db/schemas-$key.sql"
  $SQL -e "DROP DATABASE IF EXISTS keystone; DROP DATABASE IF EXISTS neutron; DROP DATABASE IF EXISTS octavia;
    CREATE DATABASE keystone CHARACTER SET utf8mb4; CREATE DATABASE neutron CHARACTER SET utf8mb4;
    CREATE DATABASE octavia CHARACTER SET utf8mb4;"
  if [ -f "$dump" ]; then
    $SQL <"$dump" || die "importing the cached schemas $dump failed"
    log "database schemas imported from cache ($(since "$t")s)"
  else
    "$VK/bin/keystone-manage" --config-file "$S/keystone/keystone.conf" db_sync >"$S/log/keystone-db-sync.log" 2>&1 &
    local p1=$!
    "$VN/bin/neutron-db-manage" --config-file "$S/neutron/etc/neutron.conf" --config-file "$S/neutron/etc/ml2_conf.ini" \
      upgrade heads >"$S/log/neutron-db-manage.log" 2>&1 &
    local p2=$!
    TMPDIR=$S/octavia/tmp "$VO/bin/octavia-db-manage" --config-file "$S/octavia/etc/octavia.conf" upgrade head \
      >"$S/log/octavia-db-manage.log" 2>&1 &
    local p3=$!
    wait $p1 || fail_component keystone-db-sync "$S/log/keystone-db-sync.log"
    wait $p2 || fail_component neutron-db-manage "$S/log/neutron-db-manage.log"
    wait $p3 || fail_component octavia-db-manage "$S/log/octavia-db-manage.log"
    mkdir -p "$LAB_CACHE/db"
    mariadb-dump --socket="$S/mysql/run/mysqld.sock" -uroot --databases keystone neutron octavia >"$dump.tmp" \
      && mv "$dump.tmp" "$dump"
    log "database migrations done and cached ($(since "$t")s)"
  fi
  touch "$S/.db-ready"
}

############################################ Keystone ############################################
KS=http://127.0.0.1:$P_KEYSTONE/v3
ks_token() { # user password project -> token
  curl -sf -D - -o /dev/null -H 'Content-Type: application/json' "$KS/auth/tokens" -d "{\"auth\":{\"identity\":{\"methods\":[\"password\"],
    \"password\":{\"user\":{\"name\":\"$1\",\"domain\":{\"id\":\"default\"},\"password\":\"$2\"}}},
    \"scope\":{\"project\":{\"name\":\"$3\",\"domain\":{\"id\":\"default\"}}}}}" | awk 'tolower($1)=="x-subject-token:"{print $2}' | tr -d '\r'
}
keystone_up() {
  local t; t=$(now)
  [ "$LAB_AUTH" = keystone ] || return 0
  local K="$VK/bin/keystone-manage --config-file $S/keystone/keystone.conf"
  if [ ! -d "$S/keystone/fernet-keys" ]; then
    $K fernet_setup --keystone-user root --keystone-group root >"$S/log/keystone-setup.log" 2>&1
    $K credential_setup --keystone-user root --keystone-group root >>"$S/log/keystone-setup.log" 2>&1
    $K bootstrap --bootstrap-password "$ADMIN_PASSWORD" --bootstrap-username admin --bootstrap-project-name admin \
      --bootstrap-role-name admin --bootstrap-service-name keystone --bootstrap-region-id "$LAB_REGION" \
      --bootstrap-admin-url "$KS" --bootstrap-public-url "$KS" --bootstrap-internal-url "$KS" \
      >>"$S/log/keystone-setup.log" 2>&1 || fail_component keystone-bootstrap "$S/log/keystone-setup.log"
  fi
  if ! running keystone; then
    OS_KEYSTONE_CONFIG_FILES="$S/keystone/keystone.conf" start keystone "$S/log/keystone.log" \
      "$VK/bin/python" "$LAB_DIR/py/wsgi_serve.py" keystone $P_KEYSTONE
  fi
  if ! running keystone-short; then
    OS_KEYSTONE_CONFIG_FILES="$S/keystone/keystone-short.conf" start keystone-short "$S/log/keystone-short.log" \
      "$VK/bin/python" "$LAB_DIR/py/wsgi_serve.py" keystone $P_KEYSTONE_SHORT
  fi
  waitfor keystone 90 curl -sf "$KS" || fail_component keystone "$S/log/keystone.log"
  waitfor keystone-short 90 curl -sf "http://127.0.0.1:$P_KEYSTONE_SHORT/v3" || fail_component keystone-short "$S/log/keystone-short.log"
  if [ ! -f "$S/keystone/.registered" ]; then
    local tok; tok=$(ks_token admin "$ADMIN_PASSWORD" admin)
    [ -n "$tok" ] || fail_component keystone "$S/log/keystone.log"
    kpost() { curl -sf -H "X-Auth-Token: $tok" -H 'Content-Type: application/json' "$KS/$1" -d "$2"; }
    kput() { curl -sf -X PUT -H "X-Auth-Token: $tok" "$KS/$1" >/dev/null; }
    local admin_role svc_proj kuryr_proj uid sid
    admin_role=$(curl -sf -H "X-Auth-Token: $tok" "$KS/roles?name=admin" | jq -r '.roles[0].id')
    svc_proj=$(kpost projects '{"project":{"name":"service","domain_id":"default"}}' | jq -r .project.id)
    kuryr_proj=$(kpost projects "{\"project\":{\"name\":\"$LAB_PROJECT\",\"domain_id\":\"default\"}}" | jq -r .project.id)
    for u in neutron octavia; do
      uid=$(kpost users "{\"user\":{\"name\":\"$u\",\"domain_id\":\"default\",\"password\":\"$SERVICE_PASSWORD\"}}" | jq -r .user.id)
      kput "projects/$svc_proj/users/$uid/roles/$admin_role"
    done
    # The account kuryr-rs uses: admin in the cluster's project (binding:host_id and trunks need admin in
    # Neutron's default policy, as upstream's kuryr user had).
    uid=$(kpost users "{\"user\":{\"name\":\"kuryr\",\"domain_id\":\"default\",\"password\":\"$ADMIN_PASSWORD\",\"default_project_id\":\"$kuryr_proj\"}}" | jq -r .user.id)
    kput "projects/$kuryr_proj/users/$uid/roles/$admin_role"
    for svc in "network neutron $P_NEUTRON" "load-balancer octavia $P_OCTAVIA"; do
      set -- $svc
      sid=$(kpost services "{\"service\":{\"type\":\"$1\",\"name\":\"$2\",\"enabled\":true}}" | jq -r .service.id)
      for i in public internal admin; do
        kpost endpoints "{\"endpoint\":{\"service_id\":\"$sid\",\"interface\":\"$i\",\"region_id\":\"$LAB_REGION\",\"url\":\"http://127.0.0.1:$3\"}}" >/dev/null
      done
    done
    echo "$kuryr_proj" >"$S/keystone/kuryr-project-id"
    touch "$S/keystone/.registered"
  fi
  log "keystone ready ($(since "$t")s)"
}

############################################ Neutron + Octavia ############################################
neutron_up() {
  if ! running neutron-api; then
    # ASGI_WORKERS=1: otherwise every OVSDB event fails with "API workers count is zero" and no port goes ACTIVE.
    TMPDIR=$S/neutron/tmp ASGI_WORKERS=1 NEUTRON_CONF_DIR=$S/neutron/etc start neutron-api "$S/log/neutron-api.log" \
      "$VN/bin/python" "$LAB_DIR/py/wsgi_serve.py" neutron $P_NEUTRON
  fi
}
octavia_up() {
  export OCTAVIA_SOCK_DIR=$S/octavia/run LAB_AUTH
  if ! running octavia-driver-agent; then
    TMPDIR=$S/octavia/tmp start octavia-driver-agent "$S/log/octavia-driver-agent.log" "$VO/bin/python" \
      "$LAB_DIR/py/octavia_launch.py" driver-agent --config-file "$S/octavia/etc/octavia.conf"
  fi
  waitfor octavia-driver-agent 120 test -S "$S/octavia/run/get.sock" \
    || fail_component octavia-driver-agent "$S/log/octavia-driver-agent.log"
  if ! running octavia-api; then
    TMPDIR=$S/octavia/tmp start octavia-api "$S/log/octavia-api.log" "$VO/bin/python" \
      "$LAB_DIR/py/octavia_launch.py" api --config-file "$S/octavia/etc/octavia.conf"
  fi
  if ! running octavia-worker; then
    TMPDIR=$S/octavia/tmp start octavia-worker "$S/log/octavia-worker.log" "$VO/bin/python" \
      "$LAB_DIR/py/octavia_launch.py" worker --config-file "$S/octavia/etc/octavia-worker.conf"
  fi
}

t0=$(now)
# `cloud.sh ovn`: OVN and OVS alone (lab/lab up restarts an aborted ovs-vswitchd this way, the rest untouched).
if [ "${1:-}" = ovn ]; then ovn_up; exit 0; fi
mariadb_up
ovn_up & p_ovn=$!
rabbit_up & p_rabbit=$!
write_configs
db_up
keystone_up
neutron_up
wait $p_ovn || exit 1
octavia_up
wait $p_rabbit || exit 1
waitfor neutron-api 120 sh -c "curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$P_NEUTRON/ | grep -qE '^(200|300|401)$'" \
  || fail_component neutron-api "$S/log/neutron-api.log"
waitfor octavia-api 120 sh -c "curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$P_OCTAVIA/ | grep -qE '^(200|300|401)$'" \
  || fail_component octavia-api "$S/log/octavia-api.log"
log "cloud services up ($(since "$t0")s)"
