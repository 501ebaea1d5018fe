# Neutron as the lab's scripts call it (curl + jq), as the project's `kuryr` user. Sourced after common.sh,
# never run. Sets N (the API root), TOKEN (keystone auth), PROJECT_ID and AUTH (curl's auth arguments);
# defines api, port_active, find_id, ensure. LAB_SCRIPT names the caller in errors.
N=http://127.0.0.1:$P_NEUTRON/v2.0
if [ "$LAB_AUTH" = keystone ]; then
  TOKEN=$(curl -sf -D - -o /dev/null -H 'Content-Type: application/json' "http://127.0.0.1:$P_KEYSTONE/v3/auth/tokens" \
    -d "{\"auth\":{\"identity\":{\"methods\":[\"password\"],\"password\":{\"user\":{\"name\":\"kuryr\",\"domain\":{\"id\":\"default\"},\"password\":\"$ADMIN_PASSWORD\"}}},\"scope\":{\"project\":{\"name\":\"$LAB_PROJECT\",\"domain\":{\"id\":\"default\"}}}}}" \
    | awk 'tolower($1)=="x-subject-token:"{print $2}' | tr -d '\r')
  [ -n "$TOKEN" ] || die "${LAB_SCRIPT:-lab}: no Keystone token for user kuryr"
  PROJECT_ID=$(cat "$LAB_STATE/keystone/kuryr-project-id")
  AUTH=(-H "X-Auth-Token: $TOKEN")
else
  # noauth Neutron acts as admin when no X-Project-Id is sent; the project goes into each body.
  PROJECT_ID=0c8d1f4e6a7b4b1f9a3e5d2c1b0a9f8e
  AUTH=()
fi

api() { # METHOD URL [BODY]
  local out code
  out=$(curl -s -w '\n%{http_code}' -X "$1" "${AUTH[@]}" -H 'Content-Type: application/json' "$2" ${3:+-d "$3"})
  code=${out##*$'\n'}; out=${out%$'\n'*}
  case $code in 2*) printf '%s' "$out" ;; *) log "${LAB_SCRIPT:-lab}: $1 $2 -> $code: $out"; return 1 ;; esac
}
port_active() { api GET "$N/ports/$1" | jq -e '.port.status == "ACTIVE"' >/dev/null; }
find_id() { api GET "$N/$1?name=$2" | jq -r --arg c "${1//-/_}" ".[\$c][0].id // empty"; }
default_sg() { api GET "$N/security-groups?name=default&project_id=$PROJECT_ID" | jq -r '.security_groups[0].id // empty'; }
# worker_groups PORT DEFAULT_SG NODES_SG: a worker VM's port carries `default` and the workers' group (set when
# it lacks the latter).
worker_groups() {
  api GET "$N/ports/$1" | jq -e --arg g "$3" '.port.security_groups | index($g)' >/dev/null \
    || api PUT "$N/ports/$1" "{\"port\":{\"security_groups\":[\"$2\",\"$3\"]}}" >/dev/null
}
ensure() { # COLLECTION NAME BODY-JSON -> id
  local id; id=$(find_id "$1" "$2")
  if [ -z "$id" ]; then id=$(api POST "$N/$1" "{\"${1%s}\": $3}" | jq -r ".${1%s}.id"); fi
  echo "$id"
}
