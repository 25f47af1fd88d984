#!/usr/bin/env bash
# The fleet under a real systemd user manager (issue 23's "Done when"): a 3-node NATS
# JetStream cluster with an R3 stream, three ingest instances pushspoold@a/b/c exporting into
# it, and two inbox nodes (pushspool-inbox with [Inbox] Source=nats and the shipped fleet
# drop-in) that build their indexes from the stream. Builds nothing: run `swift build` first;
# binaries from `swift build --show-bin-path` (or $PUSHSPOOL_BIN_DIR).
#
#   scripts/systemd-integration/fleet-live.sh     # PASS/FAIL per check, exit 1 on any FAIL
#
# Everything runs as a unit of the session's user manager: fleet-nats@n1/n2/n3 (a template
# written here), pushspoold@a/b/c (systemd/pushspoold@.service rendered for user mode, as in
# instances-live.sh) and pushspool-inbox-n1/n2 (.socket and .service rendered from
# systemd/pushspool-inbox.*, with packaging/pushspool-inbox-fleet.conf installed as their
# drop-in, paths moved under the scratch tree). A stand-in vendor (scripts/demo-vendor.py)
# logs every POST it receives.
#
# 1. Pushes for $USERS users dropped on all three ingest hosts appear on both nodes: the same
#    items in the same order (`pushspoolctl nc list --json` and `nc count --json` of every user
#    byte-identical), as many as were dropped.
# 2. An item opened on node 1 (POST /v1/inbox/ITEM/open) is read on node 2.
# 3. While pushes (all three hosts) and opens (both nodes; a request that fails is retried on
#    the other node with the same Idempotency-Key, as a load balancer would) flow, a NATS node,
#    an ingest instance and an inbox node are each killed with `systemctl kill -s KILL` at
#    moments drawn from $FLEET_LIVE_SEED; the NATS node is started again afterwards, the other
#    two are restarted by their units' Restart=on-failure. Then: each journal holds what was
#    dropped into it once; the stream holds every journaled record and every accepted event
#    exactly once (a durable pull consumer reads it all); both nodes applied the whole stream;
#    every user's list and counts are byte-identical across the nodes, with every item once
#    and every open applied (unread = items - opens).
# 4. Node 2 stopped, its state directory deleted, rebuilt with `pushspoolctl nc reindex
#    --from-stream` and started again: every user's `nc list`/`nc count` byte-identical to
#    node 1's again.
# 5. Every instance (pushspoold@a/b/c and both nodes) given the same erasure key
#    ([Export] ErasureKeyFile=: this user manager cannot deliver LoadCredential= files),
#    restarted: each installed it as its erase.key. A
#    user erased through node 1's admin route (202, statusScope node): both nodes apply the
#    record from the stream and no longer list the user; every other user's `nc list`/`nc
#    count` is unchanged on both; every ingest host follows the erasure from the stream
#    (same erasure id, complete), its `journal cat` no longer names the user and its
#    `journal verify` is clean.
# Vendor deliveries (the stand-in receives exactly one NCPushOpen for the open of step 2, and
# one NCPushOpen transaction, i.e. one transactionId, for each open of step 3: a node killed
# mid-POST leaves a repeat of it to another node) need the outbox to run fleet-wide (issue 23).
# FLEET_LIVE_OUTBOX=auto (default) enables those checks when `pushspoolctl config reference`
# says `[Outbox] Enabled=` applies to Source=nats nodes, and reports them as skipped
# otherwise; =yes requires them, =no leaves them out.
#
# About 2-3 minutes (limit 300 s). FLEET_LIVE_WAIT= (default 90) bounds each wait,
# FLEET_LIVE_USERS= (default 6), FLEET_LIVE_ROUNDS= (default 30 rounds of pushes during the
# kills), FLEET_LIVE_SEED= (default: random, printed) replays a run's kill moments.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"

bin_dir=$(pushspool_bin_dir "$repo")
daemon_bin=$bin_dir/pushspoold ctl_bin=$bin_dir/pushspoolctl inbox_bin=$bin_dir/pushspool-inbox bench_bin=$bin_dir/pushspool-bench
nats_bin=${NATS_SERVER:-/usr/sbin/nats-server}
for binary in "$daemon_bin" "$ctl_bin" "$inbox_bin" "$bench_bin"; do
  [[ -x "$binary" ]] || { echo "fleet-live: $binary is missing; run 'swift build' first" >&2; exit 2; }
done
[[ -x "$nats_bin" ]] || { echo "fleet-live: $nats_bin is missing (scripts/apt-packages: nats-server)" >&2; exit 2; }
for tool in jq curl python3 openssl sqlite3; do
  command -v "$tool" >/dev/null || { echo "fleet-live: $tool is missing (scripts/install-deps.sh installs it)" >&2; exit 2; }
done

WAIT=${FLEET_LIVE_WAIT:-90}
USERS=${FLEET_LIVE_USERS:-6}
ROUNDS=${FLEET_LIVE_ROUNDS:-30}
OUTBOX=${FLEET_LIVE_OUTBOX:-auto}
SEED=${FLEET_LIVE_SEED:-$(( $(date +%s%N) % 32768 ))}
[[ "$OUTBOX" =~ ^(auto|yes|no)$ ]] || { echo "fleet-live: FLEET_LIVE_OUTBOX must be auto, yes or no" >&2; exit 64; }
[[ "$USERS" =~ ^[0-9]+$ && "$ROUNDS" =~ ^[0-9]+$ && "$SEED" =~ ^[0-9]+$ && "$WAIT" =~ ^[0-9]+$ ]] \
  || { echo "fleet-live: FLEET_LIVE_USERS, _ROUNDS, _SEED and _WAIT are numbers" >&2; exit 64; }
(( USERS >= 1 && USERS <= 50 && ROUNDS >= 30 && ROUNDS <= 200 )) || { echo "fleet-live: 1-50 users, 30-200 rounds (fewer would end before the kills)" >&2; exit 64; }
RANDOM=$SEED
instances=(a b c)
nodes=(1 2)
stream=FLEETLIVE
template=$repo/systemd/pushspoold@.service

failures=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
skip() { echo "SKIP: $*"; }
check() {  # check DESCRIPTION COMMAND...
  local what=$1; shift
  if "$@"; then pass "$what"; else fail "$what"; fi
}
note() { echo "---- $*"; }
poll() {  # poll SECONDS COMMAND... — wall-clock deadline, every 0.2 s
  local deadline=$(( $(date +%s) + $1 )); shift
  until "$@"; do
    (( $(date +%s) < deadline )) || return 1
    sleep 0.2
  done
}
started_at=$(date +%s)
echo "fleet-live: seed $SEED (FLEET_LIVE_SEED=$SEED replays the kill moments)"

trap 'echo "FAIL: line $LINENO: \"$BASH_COMMAND\" failed (exit $?)"' ERR
si_setup
work=$(mktemp -d /tmp/pushspool-fleet.XXXXXX)
root=$work/root
run=${work##*.}
bg_pids=()
# Hooks run in this order before the manager exits: the evidence, background loops, the
# units (they write under $work), then the scratch tree.
si_on_exit 'if ((failures)); then for u in pushspool-inbox-n1 pushspool-inbox-n2 pushspoold@a pushspoold@b pushspoold@c fleet-nats@n1 fleet-nats@n2 fleet-nats@n3; do echo "---- $u journal (last 20 lines):"; si_journal "$u.service" --since "@$started_at" -o short-monotonic -n 20 2>/dev/null; done; fi'
si_on_exit 'for pid in "${bg_pids[@]+"${bg_pids[@]}"}"; do kill "$pid" 2>/dev/null; done'
si_on_exit 'timeout 40 systemctl --user stop pushspool-inbox-n1.socket pushspool-inbox-n2.socket pushspool-inbox-n1.service pushspool-inbox-n2.service pushspoold@a.service pushspoold@b.service pushspoold@c.service fleet-vendor.service fleet-nats@n1.service fleet-nats@n2.service fleet-nats@n3.service >/dev/null 2>&1'
si_on_exit "rm -rf '$work'"

accepts() { python3 -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 0.5)' "$1" 2>/dev/null; }
unit_active() { [[ "$(si_prop "$1" ActiveState)" == active ]]; }

# ---------------------------------------------------------------- 0. NATS cluster
note "0. three nats-server units, one JetStream cluster"
declare -a client_port cluster_port monitor_port
for n in 1 2 3; do client_port[n]=$(si_free_port); cluster_port[n]=$(si_free_port); monitor_port[n]=$(si_free_port); done
mkdir -p "$work/nats"
for n in 1 2 3; do
  routes=""
  for m in 1 2 3; do (( m == n )) || routes+="${routes:+, }\"nats://127.0.0.1:${cluster_port[m]}\""; done
  cat >"$work/nats/n$n.conf" <<EOF
server_name: fleet-n$n
listen: 127.0.0.1:${client_port[n]}
http: 127.0.0.1:${monitor_port[n]}
jetstream { store_dir: "$work/nats/n$n" }
cluster {
  name: pushspool-fleet-$run
  listen: 127.0.0.1:${cluster_port[n]}
  routes: [ $routes ]
}
EOF
done
# Restart=no: a killed node stays down until this script starts it again.
cat >"$work/fleet-nats@.service" <<EOF
[Unit]
Description=fleet-live NATS node %i
[Service]
Type=simple
ExecStart=$nats_bin -c $work/nats/%i.conf
Restart=no
EOF
si_install_unit "fleet-nats@.service" "$work/fleet-nats@.service"
for n in 1 2 3; do check "systemctl --user start fleet-nats@n$n" si_start "fleet-nats@n$n.service"; done
for n in 1 2 3; do check "nats n$n listens on 127.0.0.1:${client_port[n]}" poll "$WAIT" accepts "${client_port[n]}"; done
jsz() {  # jsz PATH-AND-QUERY: from the first node whose monitor answers
  local n
  for n in 1 2 3; do curl -fsS --max-time 2 "http://127.0.0.1:${monitor_port[n]}/jsz$1" 2>/dev/null && return 0; done
  return 1
}
meta_leader() { jsz "" | jq -e '.meta_cluster.leader // empty' >/dev/null; }
check "the JetStream cluster elected a meta leader" poll "$WAIT" meta_leader
urls="nats://127.0.0.1:${client_port[1]} nats://127.0.0.1:${client_port[2]} nats://127.0.0.1:${client_port[3]}"

# ---------------------------------------------------------------- 0. stand-in vendor
mkdir -p "$work/vendor"
# The manager's PATH is not ours: the interpreter by its absolute path.
python=$(command -v python3.11 || command -v python3)
[[ -x /usr/bin/python3 ]] && python=/usr/bin/python3
si_run_vendor() {
  systemd-run --user --unit=fleet-vendor --quiet -p Type=simple \
    "$python" "$repo/scripts/demo-vendor.py" "$work/vendor/port" "$work/vendor/requests.jsonl"
}
check "stand-in vendor (scripts/demo-vendor.py) started" si_run_vendor
check "stand-in vendor wrote its port" poll "$WAIT" test -s "$work/vendor/port"
vendor_port=$(cat "$work/vendor/port" 2>/dev/null || echo 0)
si_track_pid fleet-vendor.service

# ---------------------------------------------------------------- 1. ingest instances
note "1. pushspoold@a/b/c from the template unit, exporting (Replicas=3)"
template_exec=$(sed -n 's/^ExecStart=//p' "$template")
exec_line=$(sed -e "s#^/usr/sbin/pushspoold #$daemon_bin #" -e "s# /etc/# $root/etc/#g" -e "s# /var/# $root/var/#g" <<<"$template_exec")
template_env=()
while IFS= read -r assignment; do template_env+=(--env "$assignment"); done < <(sed -n 's/^Environment=//p' "$template" | tr -d '"')
"$here/render-user-unit.sh" --unit "$template" --exec "$exec_line" --set LimitCORE=0 "${template_env[@]}" >"$work/pushspoold@.service"
si_install_unit "pushspoold@.service" "$work/pushspoold@.service"
mkdir -p "$root/etc/pushspool" "$root/var/spool/pushspool" "$root/var/lib/pushspool"
for i in "${instances[@]}"; do
  cat >"$root/etc/pushspool/$i.conf" <<EOF
# fleet-live.sh: ingest host $i
[Media]
Enabled=no
[Journal]
MaxBatchDelaySec=0
[Status]
IntervalSec=200ms
[Outbox]
Enabled=no
[Export]
Enabled=yes
URL=$urls
Stream=$stream
Replicas=3
HostId=ingest-$i
AckTimeoutSec=2s
EOF
done
for i in "${instances[@]}"; do check "systemctl --user start pushspoold@$i (READY=1)" si_start "pushspoold@$i.service"; done
ctl_i() { local i=$1; shift; "$ctl_bin" --instance "$i" --root "$root" "$@"; }

# ---------------------------------------------------------------- 1. inbox nodes
note "1. inbox nodes pushspool-inbox-n1/n2: Source=nats, the shipped fleet drop-in"
secret="fleet-live-secret-$run-0123456789abcdef"
printf '%s\n' "$secret" >"$work/inbox-token-secret"
chmod 600 "$work/inbox-token-secret"
printf 'fleet-live-mindbox-key\n' >"$work/mindbox-key"
chmod 600 "$work/mindbox-key"
declare -a node_port
node_root() { echo "$work/node$1"; }
node_conf() { echo "$work/node$1/etc/pushspool/pushspool.conf"; }
node_state() { echo "$work/node$1/var/lib/pushspool"; }
write_node_conf() {  # write_node_conf N OUTBOX(yes|no)
  local n=$1 r
  r=$(node_root "$n")
  mkdir -p "$r/etc/pushspool" "$r/var/spool/pushspool/incoming" "$r/var/spool/pushspool/tmp" "$(node_state "$n")/inbox"
  {
    printf '# fleet-live.sh: inbox node %s\n' "$n"
    printf '[Spool]\nDirectory=%s\n[Journal]\nStateDirectory=%s\n[Media]\nEnabled=no\n' "$r/var/spool/pushspool" "$(node_state "$n")"
    printf '[Export]\nURL=%s\nStream=%s\nHostId=inbox-n%s\nAckTimeoutSec=2s\n' "$urls" "$stream" "$n"
    printf '[Inbox]\nEnabled=yes\nSource=nats\nTokenSecretFile=%s\n' "$work/inbox-token-secret"
    if [[ "$2" == yes ]]; then
      printf '[Outbox]\nEnabled=yes\nAllowHTTP=yes\nAllowNetworks=127.0.0.0/8\nMindboxURL=http://127.0.0.1:%s\n' "$vendor_port"
      printf 'MindboxEndpointId=fleet-live\nMindboxSecretKeyFile=%s\n' "$work/mindbox-key"
    else
      printf '[Outbox]\nEnabled=no\n'
    fi
  } >"$(node_conf "$n")"
}

# Vendor deliveries: on only when this build's outbox runs on Source=nats nodes, which its
# key reference says (`[Outbox] Enabled=` names what pushspool-inbox does with Source=nats).
outbox_line=$("$ctl_bin" config reference --markdown | grep -F '| `[Outbox] Enabled=`' || true)
[[ $outbox_line == *'Source=nats'* ]] && outbox_ok=yes || outbox_ok=no
case "$OUTBOX:$outbox_ok" in
  auto:yes|yes:yes) outbox=yes ;;
  yes:no) fail "FLEET_LIVE_OUTBOX=yes, but this build's outbox does not run on Source=nats nodes (config reference: $outbox_line)"; outbox=no ;;
  no:*) outbox=no; skip "vendor deliveries (NCPushOpen at the stand-in vendor): FLEET_LIVE_OUTBOX=no" ;;
  *) outbox=no; skip "vendor deliveries (NCPushOpen at the stand-in vendor): this build's outbox does not run on Source=nats nodes (config reference names no Source=nats for [Outbox] Enabled=)" ;;
esac
for n in "${nodes[@]}"; do write_node_conf "$n" "$outbox"; done
node_config_ok() {  # node_config_ok N — config check --for pushspool-inbox accepts node N's file
  local out
  out=$("$ctl_bin" config check --for pushspool-inbox "$(node_conf "$1")" 2>&1 >/dev/null) && return 0
  echo "     $out"
  return 1
}
for n in "${nodes[@]}"; do check "config check --for pushspool-inbox accepts node $n's configuration" node_config_ok "$n"; done

for n in "${nodes[@]}"; do
  node_port[n]=$(si_free_port)
  unit=pushspool-inbox-n$n
  # The service as the system unit has it (Type=notify, Restart=on-failure, timeouts), plus
  # the one confinement the fleet drop-in changes that a user manager applies: the address
  # families (AF_UNIX only in the unit; the drop-in lets the node reach NATS).
  "$here/render-user-unit.sh" --unit "$repo/systemd/pushspool-inbox.service" --exec "$inbox_bin --config $(node_conf "$n")" \
    --set LimitCORE=0 --set "$(grep -m1 '^RestrictAddressFamilies=' "$repo/systemd/pushspool-inbox.service")" \
    | sed "s/^Requires=pushspool-inbox.socket/Requires=$unit.socket/" >"$work/$unit.service"
  grep -q '^RestrictAddressFamilies=AF_UNIX$' "$work/$unit.service"
  awk -v listen="ListenStream=127.0.0.1:${node_port[n]}" '
    /^\[/ { section = $0; if (section != "[Install]") print section; next }
    /^[ \t]*($|#|;)/ || section == "[Install]" || /^IPAddress(Allow|Deny)=/ { next }
    /^ListenStream=/ { print listen; next }
    { print }' "$repo/systemd/pushspool-inbox.socket" >"$work/$unit.socket"
  mkdir -p "$si_runtime_dir/systemd/user/$unit.service.d"
  # The shipped drop-in, its path moved to this node's state directory.
  sed "s#/var/lib/pushspool/#$(node_state "$n")/#g" "$repo/packaging/pushspool-inbox-fleet.conf" \
    >"$si_runtime_dir/systemd/user/$unit.service.d/fleet.conf"
  si_install_unit "$unit.service" "$work/$unit.service"
  si_install_unit "$unit.socket" "$work/$unit.socket"
done
for n in "${nodes[@]}"; do
  unit=pushspool-inbox-n$n
  check "$unit.service has the fleet drop-in" bash -c '[[ $(systemctl --user show -p DropInPaths --value "$1") == *fleet.conf* ]]' _ "$unit.service"
  check "$unit.service: the drop-in opens AF_INET (RestrictAddressFamilies=$(si_prop "$unit.service" RestrictAddressFamilies))" \
    bash -c '[[ $(systemctl --user show -p RestrictAddressFamilies --value "$1") == *AF_INET* ]]' _ "$unit.service"
  check "systemctl --user start $unit.socket" systemctl --user start "$unit.socket"
  check "systemctl --user start $unit.service (READY=1)" si_start "$unit.service"
done

token() { printf %s "$1" | openssl dgst -sha256 -mac HMAC -macopt "key:$secret" | awk '{print $NF}'; }
declare -A tokens
users=()
for ((u = 1; u <= USERS; u++)); do users+=("u$u"); tokens[u$u]=$(token "u$u"); done
# api NODE METHOD PATH USER [curl args...] — the status; the body in $work/body.NODE
api() {
  local n=$1 method=$2 path=$3 user=$4; shift 4
  curl -s --max-time 15 -X "$method" -o "$work/body.$n" -w '%{http_code}' \
    -H "X-Pushspool-User: $user" -H "Authorization: Bearer ${tokens[$user]}" "$@" "http://127.0.0.1:${node_port[n]}$path" || true
}
ctl_n() { local n=$1; shift; "$ctl_bin" --config "$(node_conf "$n")" "$@"; }
applied_seq() { sqlite3 "file:$(node_state "$1")/inbox/index.sqlite?mode=ro" "SELECT value FROM meta WHERE key = 'last_seq'" 2>/dev/null || echo 0; }
stream_last_seq() { jsz "?streams=true" | jq -r --arg s "$stream" '[.account_details[]?.stream_detail[]? | select(.name == $s) | .state.last_seq] | max // 0'; }
# The answers a node gives for every user: nc list --json and nc count --json, as printed.
answers() {  # answers NODE > file
  local user
  for user in "${users[@]}"; do
    echo "== $user"
    ctl_n "$1" nc list --user "$user" --json --limit 500
    ctl_n "$1" nc count --user "$user" --json
  done
}

# ---------------------------------------------------------------- payloads
mkdir -p "$work/payloads"
declare -A dropped_into expected_items
for i in "${instances[@]}"; do dropped_into[$i]=0; done
for user in "${users[@]}"; do expected_items[$user]=0; done
# drop_round HOST TAG — one push per user into HOST's spool (one pushspoolctl drop). Each
# push names itself (title and pushName) so a vendor delivery can be traced back to it.
drop_round() {
  local host=$1 tag=$2 user files=() f
  for user in "${users[@]}"; do
    f=$work/payloads/$host-$tag-$user.json
    printf '{"pushspool":1,"user":"%s","platform":"ios","payload":{"aps":{"alert":{"title":"%s","body":"b"}},"clickUrl":"https://x.example/","uniqueKey":"%s","payload":"{\\"pushName\\":\\"%s\\",\\"pushDate\\":\\"2026-12-01T10:00:00Z\\"}"}}\n' \
      "$user" "$host-$tag-$user" "fl-$run-$host-$tag-$user" "$host-$tag-$user" >"$f"
    files+=("$f")
  done
  ctl_i "$host" drop --raw "${files[@]}" >/dev/null
}
journal_last() { ctl_i "$1" export status --json | jq -r '.journalLastSeq // 0'; }
export_lag() { ctl_i "$1" export status --json | jq -r '.lag // -1'; }
# Settled: every instance journaled what was dropped into it and exported all of it, and both
# nodes applied the stream up to its last seq.
settled() {
  local i last n
  for i in "${instances[@]}"; do
    [[ $(journal_last "$i") == "${dropped_into[$i]}" && $(export_lag "$i") == 0 ]] || return 1
  done
  last=$(stream_last_seq) || return 1
  (( last > 0 )) || return 1
  for n in "${nodes[@]}"; do [[ $(applied_seq "$n") == "$last" ]] || return 1; done
}
wait_settled() {
  local t0=$SECONDS
  if poll "$WAIT" settled; then pass "settled in $((SECONDS - t0)) s: stream last seq $(stream_last_seq), both nodes applied it"
  else
    fail "settled (journals, export lag 0, both nodes at the stream's last seq)"
    for i in "${instances[@]}"; do echo "     $i: dropped ${dropped_into[$i]}, $(ctl_i "$i" export status --json | jq -c '{journalLastSeq, acknowledgedSeq, lag, connected}')"; done
    echo "     stream last seq $(stream_last_seq || echo '?'), node 1 $(applied_seq 1), node 2 $(applied_seq 2)"
  fi
}
# Both nodes' answers for every user byte-identical; every user has the expected item count,
# each title once.
compare_nodes() {  # compare_nodes LABEL
  answers 1 >"$work/answers.1.$1"
  answers 2 >"$work/answers.2.$1"
  check "$1: nc list/count --json of all $USERS users byte-identical on both nodes ($(wc -c <"$work/answers.1.$1") bytes)" \
    cmp -s "$work/answers.1.$1" "$work/answers.2.$1"
  local user bad=""
  for user in "${users[@]}"; do
    local listed distinct
    listed=$(ctl_n 1 nc list --user "$user" --json --limit 500 | jq -s '[.[] | select(.item != null)] | length')
    distinct=$(ctl_n 1 nc list --user "$user" --json --limit 500 | jq -r 'select(.item != null) | .title' | sort -u | wc -l)
    [[ "$listed" == "${expected_items[$user]}" && "$distinct" == "$listed" ]] || bad+=" $user:$listed/$distinct/${expected_items[$user]}"
  done
  check "$1: every user's items listed once each, as many as were dropped${bad:+ (user:listed/distinct/expected$bad)}" test -z "$bad"
}

# ---------------------------------------------------------------- 1. pushes from all three hosts
note "1. pushes for $USERS users dropped on all three hosts"
for r in 1 2; do
  for i in "${instances[@]}"; do
    drop_round "$i" "p$r"
    dropped_into[$i]=$(( ${dropped_into[$i]} + USERS ))
  done
  for user in "${users[@]}"; do expected_items[$user]=$(( ${expected_items[$user]} + 3 )); done
done
wait_settled
compare_nodes "after the first pushes"
hosts_of_u1=$(ctl_n 2 nc list --user u1 --json --limit 500 | jq -r 'select(.item != null) | .title' | cut -d- -f1 | sort -u | paste -sd, -)
check "u1's list on node 2 holds pushes from all three hosts ($hosts_of_u1)" test "$hosts_of_u1" = "a,b,c"
# Stream order: the items' ids are stream seqs, so a list (newest first) descends.
check "node 2 lists u1's items in stream order (ids descending)" \
  bash -c '"$@" | jq -s -e "[.[] | select(.item != null) | .item | tonumber] as \$s | \$s == (\$s | sort | reverse) and (\$s | length) > 1" >/dev/null' _ \
    "$ctl_bin" --config "$(node_conf 2)" nc list --user u1 --json --limit 500

# ---------------------------------------------------------------- 2. opened on node 1, read on node 2
note "2. an item opened on node 1 is read on node 2"
item_state() {  # item_state NODE USER ITEM — its state JSON from GET /v1/inbox on NODE
  [[ $(api "$1" GET "/v1/inbox?limit=500" "$2") == 200 ]] || return 1
  jq -c --arg i "$3" '.items[] | select(.item == $i) | .state' "$work/body.$1"
}
[[ $(api 1 GET "/v1/inbox?limit=500" u1) == 200 ]] || true
first_item=$(jq -r '.items[-1].item // empty' "$work/body.1" 2>/dev/null || true)
first_title=$(jq -r '.items[-1].title // empty' "$work/body.1" 2>/dev/null || true)
check "node 1 serves u1's inbox over HTTP (oldest item $first_item, $first_title)" test -n "$first_item"
check "item $first_item is unread on node 2 before" bash -c '[[ $(jq -r .read <<<"$1") == false ]]' _ "$(item_state 2 u1 "$first_item" || true)"
status=$(api 1 POST "/v1/inbox/$first_item/open" u1 -H "Idempotency-Key: open-$run-first")
check "POST /v1/inbox/$first_item/open on node 1: 202" test "$status" = 202
opened_first_event=$(jq -r '.eventId // empty' "$work/body.1" 2>/dev/null || true)
is_read_on_2() { [[ $(item_state 2 u1 "$first_item" | jq -r .read) == true ]]; }
check "node 2 shows item $first_item read" poll "$WAIT" is_read_on_2
# Opens: "user item title eventId" for every accepted open, checked at the end.
printf '%s %s %s %s\n' u1 "$first_item" "$first_title" "$opened_first_event" >"$work/opens"
ncpushopen_count() {  # ncpushopen_count PUSHNAME — NCPushOpen POSTs the vendor received for it
  [[ -f "$work/vendor/requests.jsonl" ]] || { echo 0; return; }
  # The operation is in the request line (?operation=mobileapp.NCPushOpen), the push's name in
  # the body (mobPushTranslateName: ASCII names pass the transliteration unchanged).
  jq -r --arg n "$1" 'select((.requestLine | contains("NCPushOpen")) and (.body | contains("\"" + $n + "\""))) | 1' "$work/vendor/requests.jsonl" | wc -l
}
ncpushopen_transactions() {  # ncpushopen_transactions PUSHNAME — distinct transactionIds among them
  [[ -f "$work/vendor/requests.jsonl" ]] || { echo 0; return; }
  jq -r --arg n "$1" 'select((.requestLine | contains("NCPushOpen")) and (.body | contains("\"" + $n + "\"")))
    | .requestLine | capture("[?&]transactionId=(?<t>[^& ]*)").t' "$work/vendor/requests.jsonl" | sort -u | wc -l
}
if [[ $outbox == yes ]]; then
  ncpushopen_seen() { (( $(ncpushopen_count "$1") >= 1 )); }
  check "the stand-in vendor received an NCPushOpen for $first_title" poll "$WAIT" ncpushopen_seen "$first_title"
  sleep 2
  check "... exactly one" test "$(ncpushopen_count "$first_title")" = 1
fi

# ---------------------------------------------------------------- 3. kill -9 while pushes and events flow
note "3. kill -9 of a NATS node, an ingest instance and an inbox node while pushes and opens flow"
# Producer: ROUNDS rounds, each one push per user on every host, about 3 rounds a second
# (30 rounds outlast the three kill pauses, at most 9 s together).
producer() {
  local r i
  for ((r = 1; r <= ROUNDS; r++)); do
    for i in "${instances[@]}"; do drop_round "$i" "c$r" || echo "drop $i c$r failed" >>"$work/producer.err"; done
    sleep 0.3
  done
}
# Opener: opens unread items of random users, alternating nodes; a request that does not get
# its 202 is sent again, to the other node, with the same Idempotency-Key (the same event id).
opener() {
  local k=0 n user item title key status tries deadline
  while [[ ! -e "$work/producer.done" ]]; do
    k=$((k + 1)); n=$(( k % 2 + 1 )); user=${users[$(( RANDOM % USERS ))]}
    [[ $(api "$n" GET "/v1/inbox?limit=500" "$user") == 200 ]] || { sleep 0.2; continue; }
    read -r item title < <(jq -r '[.items[] | select(.state.read == false)] | .[length / 2 | floor] | "\(.item) \(.title)"' "$work/body.$n" 2>/dev/null) || true
    [[ -n "$item" && "$item" != null ]] || { sleep 0.2; continue; }
    grep -q " $item " "$work/opens" && { sleep 0.1; continue; }
    key="open-$run-$k" tries=0 deadline=$(( SECONDS + 60 ))
    until [[ $(api "$n" POST "/v1/inbox/$item/open" "$user" -H "Idempotency-Key: $key") == 202 ]]; do
      tries=$((tries + 1)); n=$(( 3 - n ))
      (( SECONDS < deadline )) || { echo "open $user $item: no 202 within 60 s" >>"$work/opener.err"; break; }
      sleep 0.3
    done
    if [[ -s "$work/body.$n" ]] && jq -e .eventId "$work/body.$n" >/dev/null 2>&1; then
      printf '%s %s %s %s\n' "$user" "$item" "$title" "$(jq -r .eventId "$work/body.$n")" >>"$work/opens"
      (( tries == 0 )) || echo "$user $item $tries" >>"$work/opens.retried"
    fi
    sleep 0.1
  done
}
for ((r = 1; r <= ROUNDS; r++)); do
  for i in "${instances[@]}"; do dropped_into[$i]=$(( ${dropped_into[$i]} + USERS )); done
  for user in "${users[@]}"; do expected_items[$user]=$(( ${expected_items[$user]} + 3 )); done
done
declare -A restarts_before
for i in "${instances[@]}"; do restarts_before[pushspoold@$i]=$(si_prop "pushspoold@$i.service" NRestarts); done
for n in "${nodes[@]}"; do restarts_before[pushspool-inbox-n$n]=$(si_prop "pushspool-inbox-n$n.service" NRestarts); done
: >"$work/opens.retried"
{ producer; touch "$work/producer.done"; } &
producer_pid=$!; bg_pids+=("$producer_pid")
opener &
opener_pid=$!; bg_pids+=("$opener_pid")

flowing() { kill -0 "$producer_pid" 2>/dev/null && kill -0 "$opener_pid" 2>/dev/null; }
victim_nats=$(( RANDOM % 3 + 1 )) victim_ingest=${instances[$(( RANDOM % 3 ))]} victim_node=$(( RANDOM % 2 + 1 ))
# The three kills in a random order, each after a random pause of 0.5-3 s.
order=(nats ingest node)
for ((x = 2; x > 0; x--)); do y=$(( RANDOM % (x + 1) )); t=${order[x]}; order[x]=${order[y]}; order[y]=$t; done
killed_mid_flow=0
for what in "${order[@]}"; do
  sleep "$(( RANDOM % 26 / 10 + 0 )).$(( RANDOM % 10 ))"
  case $what in
    nats) unit=fleet-nats@n$victim_nats.service ;;
    ingest) unit=pushspoold@$victim_ingest.service ;;
    node) unit=pushspool-inbox-n$victim_node.service ;;
  esac
  flowing && killed_mid_flow=$((killed_mid_flow + 1))
  echo "     $(date +%T.%N | cut -c1-12) systemctl --user kill -s KILL $unit (pid $(si_prop "$unit" MainPID))"
  systemctl --user kill -s KILL "$unit" || fail "systemctl --user kill -s KILL $unit"
done
check "all three kills came while pushes and opens were flowing ($killed_mid_flow of 3)" test "$killed_mid_flow" = 3
sleep 2
check "fleet-nats@n$victim_nats was down (killed, Restart=no)" bash -c '[[ $(systemctl --user show -p ActiveState --value "$1") != active ]]' _ "fleet-nats@n$victim_nats.service"
check "systemctl --user start fleet-nats@n$victim_nats again" si_start "fleet-nats@n$victim_nats.service"
check "pushspoold@$victim_ingest restarted by its unit (NRestarts ${restarts_before[pushspoold@$victim_ingest]} -> +1)" \
  si_wait_prop "pushspoold@$victim_ingest.service" NRestarts $(( ${restarts_before[pushspoold@$victim_ingest]} + 1 )) "$WAIT"
check "pushspool-inbox-n$victim_node restarted by its unit (NRestarts +1)" \
  si_wait_prop "pushspool-inbox-n$victim_node.service" NRestarts $(( ${restarts_before[pushspool-inbox-n$victim_node]} + 1 )) "$WAIT"
wait "$producer_pid" 2>/dev/null || true
check "the producer finished: every drop succeeded" test ! -s "$work/producer.err"
touch "$work/producer.done"
wait "$opener_pid" 2>/dev/null || true
check "the opener's every open was accepted (202) by one node or the other" test ! -s "$work/opener.err"
opens=$(wc -l <"$work/opens")
check "opens accepted during the kills: $(( opens - 1 )) ($(wc -l <"$work/opens.retried") after a retry on the other node)" test "$opens" -gt 5
for i in "${instances[@]}"; do si_track_pid "pushspoold@$i.service"; done
for n in "${nodes[@]}"; do si_track_pid "pushspool-inbox-n$n.service"; done
si_track_pid "fleet-nats@n$victim_nats.service"
for unit in fleet-nats@n1 fleet-nats@n2 fleet-nats@n3 pushspoold@a pushspoold@b pushspoold@c pushspool-inbox-n1 pushspool-inbox-n2; do
  check "$unit.service active" si_wait_prop "$unit.service" ActiveState active "$WAIT"
done
wait_settled

# Exactly once in the stream: a durable pull consumer reads every message.
host_ids() { local i; for i in "${instances[@]}"; do ctl_i "$i" journal cat | cut -f3 | sed "s/^/ingest-$i:/"; done; }
{ host_ids; awk '{ print "event:" $4 }' "$work/opens"; } | sort >"$work/expected.ids"
"$bench_bin" nats-consume --url "$urls" --stream "$stream" --durable fleet-live-reader --subject 'pushspool.*.*' \
  --at-least "$(wc -l <"$work/expected.ids")" >"$work/consumed.ids" 2>"$work/consume.err" || fail "nats-consume: $(tail -3 "$work/consume.err")"
sort "$work/consumed.ids" >"$work/consumed.sorted"
expected_total=$(( ${dropped_into[a]} + ${dropped_into[b]} + ${dropped_into[c]} + opens ))
check "the three journals hold what was dropped into them ($(( expected_total - opens )) records), each once" \
  test "$(host_ids | sort -u | wc -l)" -eq $(( expected_total - opens ))
check "the stream holds $expected_total messages (got $(wc -l <"$work/consumed.ids")): every push and every accepted open" \
  test "$(wc -l <"$work/consumed.ids")" -eq "$expected_total"
check "no message id twice in the stream ($(uniq -d "$work/consumed.sorted" | wc -l) duplicated)" test -z "$(uniq -d "$work/consumed.sorted")"
check "the stream's ids are exactly the journaled pushes and the accepted opens" cmp -s "$work/expected.ids" "$work/consumed.sorted"
compare_nodes "after the kills"
unread_ok() {  # every user's unread count on both nodes = items - opens
  local user n opened
  for user in "${users[@]}"; do
    opened=$(awk -v u="$user" '$1 == u' "$work/opens" | wc -l)
    for n in "${nodes[@]}"; do
      [[ $(ctl_n "$n" nc count --user "$user" --json | jq -r .unread) == $(( ${expected_items[$user]} - opened )) ]] || { echo "     $user on node $n: $(ctl_n "$n" nc count --user "$user" --json), items ${expected_items[$user]}, opens $opened"; return 1; }
    done
  done
}
check "every open applied on both nodes: unread = items - opens for every user" unread_ok
opened_read() {  # every opened item is read on node N
  local user item rest
  while read -r user item rest; do
    [[ $(ctl_n "$1" nc list --user "$user" --json --limit 500 | jq -r --arg i "$item" 'select(.item == $i) | .state.read') == true ]] || { echo "     node $1: $user item $item not read"; return 1; }
  done <"$work/opens"
}
for n in "${nodes[@]}"; do check "node $n: every opened item is read" opened_read "$n"; done
if [[ $outbox == yes ]]; then
  vendor_once() {
    local user item title rest c
    while read -r user item title rest; do
      c=$(ncpushopen_transactions "$title"); [[ $c == 1 ]] || { echo "     $title: $c NCPushOpen transactions"; return 1; }
    done <"$work/opens"
  }
  # A node that dies mid-POST leaves the delivery to be redelivered: Mindbox counts repeated
  # POSTs of one transactionId once, so per open one transaction, however many POSTs.
  check "the stand-in vendor received one NCPushOpen transaction per open" poll "$WAIT" vendor_once
fi

# ---------------------------------------------------------------- 4. a node rebuilt from the stream
note "4. node 2 loses its state directory and rebuilds from the stream"
check "systemctl --user stop pushspool-inbox-n2 (socket and service)" systemctl --user stop pushspool-inbox-n2.socket pushspool-inbox-n2.service
rm -rf "$(node_state 2)"
check "node 2's state directory is gone" test ! -e "$(node_state 2)"
# The drop-in's ReadWritePaths= must exist; in production StateDirectory= and the package make it.
mkdir -p "$(node_state 2)/inbox"
if ctl_n 2 nc reindex --from-stream >"$work/reindex.out" 2>&1; then pass "pushspoolctl nc reindex --from-stream on node 2: $(tail -1 "$work/reindex.out")"
else fail "pushspoolctl nc reindex --from-stream on node 2: $(tail -3 "$work/reindex.out")"; fi
check "node 2's rebuilt index is at the stream's last seq ($(applied_seq 2) = $(stream_last_seq))" test "$(applied_seq 2)" = "$(stream_last_seq)"
compare_nodes "node 2 rebuilt, before it starts"
check "systemctl --user start pushspool-inbox-n2 again" bash -c 'systemctl --user start pushspool-inbox-n2.socket && systemctl --user start pushspool-inbox-n2.service'
si_track_pid pushspool-inbox-n2.service
# One more round of pushes and an open on node 2: the rebuilt node follows the stream again.
for i in "${instances[@]}"; do drop_round "$i" "r"; dropped_into[$i]=$(( ${dropped_into[$i]} + USERS )); done
for user in "${users[@]}"; do expected_items[$user]=$(( ${expected_items[$user]} + 3 )); done
wait_settled
compare_nodes "node 2 rebuilt and following"

# ---------------------------------------------------------------- 5. erasure through a node
note "5. one fleet erasure key for every instance; a user erased through node 1's admin route"
head -c 32 /dev/urandom >"$work/erase-key"
chmod 600 "$work/erase-key"
printf 'fleet-live-admin-token-%s-0123456789\n' "$run" >"$work/admin-token"
chmod 600 "$work/admin-token"
state_i() { ctl_i "$1" config show | sed -n 's/^StateDirectory=//p' | head -1; }
# The ingest hosts made keys of their own at their first start; they never erased anyone,
# so theirs may go (an instance that did erase would refuse the fleet key: its tombstones
# hash under its own).
for i in "${instances[@]}"; do check "systemctl --user stop pushspoold@$i" systemctl --user stop "pushspoold@$i.service"; done
for i in "${instances[@]}"; do rm -f "$(state_i "$i")/erase.key"; done
# By file ([Export] ErasureKeyFile=, [Inbox] AdminTokenFile=), not by the fleet drop-in's
# LoadCredential=erase-key:… line: this user manager (systemd 252, not PID 1) sets
# $CREDENTIALS_DIRECTORY but leaves the files out (as inbox-live.sh notes), and a
# LoadCredential= it handles creates /run/credentials, after which every unit with
# LoadCredential= (pushspool-inbox's token secret) fails to start under it. Reading the key
# from $CREDENTIALS_DIRECTORY is covered by ErasureKeyFileCheckTests.
for i in "${instances[@]}"; do sed -i "/^\[Export\]\$/a ErasureKeyFile=$work/erase-key" "$root/etc/pushspool/$i.conf"; done
for n in "${nodes[@]}"; do
  check "systemctl --user stop pushspool-inbox-n$n (socket and service)" systemctl --user stop "pushspool-inbox-n$n.socket" "pushspool-inbox-n$n.service"
  sed -i -e "/^\[Export\]\$/a ErasureKeyFile=$work/erase-key" -e "/^\[Inbox\]\$/a AdminTokenFile=$work/admin-token" "$(node_conf "$n")"
done
systemctl --user daemon-reload
for n in "${nodes[@]}"; do check "config check --for pushspool-inbox accepts node $n's configuration with the key" node_config_ok "$n"; done
for i in "${instances[@]}"; do check "systemctl --user start pushspoold@$i with the fleet erasure key" si_start "pushspoold@$i.service"; done
for n in "${nodes[@]}"; do
  check "systemctl --user start pushspool-inbox-n$n with the fleet erasure key" \
    bash -c 'systemctl --user start "$1.socket" && systemctl --user start "$1.service"' _ "pushspool-inbox-n$n"
  si_track_pid "pushspool-inbox-n$n.service"
done
for i in "${instances[@]}"; do check "pushspoold@$i installed the fleet key as its erase.key" cmp -s "$work/erase-key" "$(state_i "$i")/erase.key"; done
for n in "${nodes[@]}"; do check "node $n installed the fleet key as its erase.key" cmp -s "$work/erase-key" "$(node_state "$n")/erase.key"; done
erased_user=${users[0]}
others_answers() {  # others_answers NODE > file: every user's answers but the erased one's
  local user
  for user in "${users[@]:1}"; do
    echo "== $user"
    ctl_n "$1" nc list --user "$user" --json --limit 500
    ctl_n "$1" nc count --user "$user" --json
  done
}
for n in "${nodes[@]}"; do others_answers "$n" >"$work/others.before.$n"; done
listed_items() { ctl_n "$1" nc list --user "$2" --json --limit 500 | grep -c '"item"' || true; }
check "node 1 lists $erased_user's items before ($(listed_items 1 "$erased_user"))" test "$(listed_items 1 "$erased_user")" -gt 0
admin_token=$(tr -d '\n' <"$work/admin-token")
status=$(curl -s --max-time 15 -X POST -o "$work/erase.body" -w '%{http_code}' -H "Authorization: Bearer $admin_token" \
  "http://127.0.0.1:${node_port[1]}/v1/admin/users/$erased_user/erase" || true)
check "POST /v1/admin/users/$erased_user/erase on node 1: 202 ($(cat "$work/erase.body" 2>/dev/null))" test "$status" = 202
erasure_id=$(jq -r '.erasureId // empty' "$work/erase.body" 2>/dev/null || true)
check "the answer names the erasure and says it is node 1's ($erasure_id)" \
  bash -c '[[ -n $1 && $(jq -r .statusScope "$2") == node ]]' _ "$erasure_id" "$work/erase.body"
node_done() { [[ $(jq -r '.complete' "$(node_state "$1")/erase/$erasure_id.status" 2>/dev/null) == true ]]; }
for n in "${nodes[@]}"; do check "node $n applied erasure $erasure_id from the stream" poll "$WAIT" node_done "$n"; done
for n in "${nodes[@]}"; do check "node $n no longer lists $erased_user" test "$(listed_items "$n" "$erased_user")" = 0; done
for n in "${nodes[@]}"; do
  others_answers "$n" >"$work/others.after.$n"
  check "node $n: every other user's nc list/count unchanged" cmp -s "$work/others.before.$n" "$work/others.after.$n"
done
status=$(curl -s --max-time 15 -o "$work/erasure.body" -w '%{http_code}' -H "Authorization: Bearer $admin_token" \
  "http://127.0.0.1:${node_port[1]}/v1/admin/erasures/$erasure_id" || true)
check "GET /v1/admin/erasures/$erasure_id on node 1: node 1's status, complete ($(cat "$work/erasure.body" 2>/dev/null))" \
  bash -c '[[ $1 == 200 && $(jq -r "[.statusScope, .complete] | @tsv" "$2") == $(printf "node\ttrue") ]]' _ "$status" "$work/erasure.body"
check "no node's status names $erased_user" bash -c '! grep -rq -- "\"$1\"" "$2"/erase "$3"/erase' _ "$erased_user" "$(node_state 1)" "$(node_state 2)"
# Every ingest host follows the erasure from the stream: it finds the user among its own
# records by the same keyed hash, and its eraser tombstones them under the same erasure id.
ingest_done() {
  ctl_i "$1" user erase --status --json | jq -e --arg id "$erasure_id" 'select(.erasureId == $id and .complete)' >/dev/null
}
not() { ! "$@"; }
quietly() { "$@" >/dev/null; }
names_erased_user() { ctl_i "$1" journal cat | grep -qE -- "\"user\":\"$erased_user\"|@${#erased_user}:$erased_user:"; }
for i in "${instances[@]}"; do
  check "pushspoold@$i followed erasure $erasure_id from the stream and completed it" poll "$WAIT" ingest_done "$i"
  check "pushspoold@$i: journal cat names $erased_user no more" not names_erased_user "$i"
  check "pushspoold@$i: journal verify is clean" quietly ctl_i "$i" journal verify
done

# ---------------------------------------------------------------- stop
note "stop"
# A node's socket first: stopping the service alone leaves the socket to start it again.
for unit in pushspool-inbox-n1 pushspool-inbox-n2 pushspoold@a pushspoold@b pushspoold@c; do
  check "systemctl --user stop $unit: Result=success" \
    bash -c 'systemctl --user stop ${2:+"$2"} "$1" && [[ $(systemctl --user show -p Result --value "$1") == success ]]' _ "$unit.service" \
      "$([[ $unit == pushspool-inbox-* ]] && echo "$unit.socket")"
done
total=$(( $(date +%s) - started_at ))
check "finished within 300 s (took $total s)" test "$total" -le 300
echo
if ((failures)); then echo "fleet-live: $failures check(s) FAILED (seed $SEED)"; exit 1; fi
echo "fleet-live: all checks passed (seed $SEED)"
