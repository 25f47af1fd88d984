#!/usr/bin/env bash
# Three pushspoold instances from the template unit pushspoold@.service under a real systemd
# user manager, exporting into a real 3-node NATS JetStream cluster with an R3 stream (issue
# 14's last "Done when" item). Builds nothing: run `swift build` first; the binaries are taken
# from `swift build --show-bin-path` (or $PUSHSPOOL_BIN_DIR).
#
#   scripts/systemd-integration/instances-live.sh     # PASS/FAIL per check, exit 1 on any FAIL
#
# 1. Three nats-server processes (-js, cluster routes on free loopback ports, a store each
#    under the scratch tree, monitoring ports to see who is connected where).
# 2. The template unit rendered for the user manager: its own ExecStart= with %i kept (the
#    manager expands it), only /usr/sbin/pushspoold replaced by the binary under test and the
#    absolute paths moved under a scratch root ($root/etc/pushspool/%i.conf, ...). Instances
#    a, b, c each get $root/etc/pushspool/NAME.conf ([Export] Enabled=yes, URL= all three
#    servers, Replicas=3, no HostId=: the template's PUSHSPOOL_INSTANCE=%i makes the default
#    <machine-id>.NAME, distinct per instance) and start (systemctl --user start blocks on READY=1).
#    `pushspoolctl --instance NAME --root $root` must find each instance's paths: every drop
#    and status below goes through it.
# 3. The same N payload ids dropped into every spool (the host part of Nats-Msg-Id is what
#    keeps them apart); once export is under way, N more are dropped and, while they flow, the
#    node holding most daemon connections is SIGKILLed; the daemons fail over to the other two
#    and every instance's `export status --json` must reach lag 0.
# 4. A durable pull consumer (`pushspool-bench nats-consume`, a shared NatsPullConsumer)
#    reads the stream from the surviving nodes: every id of all three journals exactly once,
#    nothing else; the same durable read again gets nothing (acks are remembered).
# 5. Units stop with Result=success; cleanup (traps) stops the units, kills the servers by pid
#    and removes the scratch tree.
#
# About 40 s. INSTANCES_LIVE_WAIT= (default 60) bounds each wait, INSTANCES_LIVE_N= (default
# 200) is the payloads per instance per phase.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"

bin_dir=$(pushspool_bin_dir "$repo")
daemon_bin=$bin_dir/pushspoold
ctl_bin=$bin_dir/pushspoolctl
bench_bin=$bin_dir/pushspool-bench
nats_bin=${NATS_SERVER:-/usr/sbin/nats-server}
for binary in "$daemon_bin" "$ctl_bin" "$bench_bin"; do
  [[ -x "$binary" ]] || { echo "instances-live: $binary is missing; run 'swift build' first" >&2; exit 2; }
done
[[ -x "$nats_bin" ]] || { echo "instances-live: $nats_bin is missing (scripts/apt-packages: nats-server)" >&2; exit 2; }
for tool in jq curl python3; do
  command -v "$tool" >/dev/null || { echo "instances-live: $tool is missing (scripts/install-deps.sh installs it)" >&2; exit 2; }
done
template=$repo/systemd/pushspoold@.service

WAIT=${INSTANCES_LIVE_WAIT:-60}
N=${INSTANCES_LIVE_N:-200}
instances=(a b c)
stream=SIINSTANCES
durable=si-reader

failures=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
check() {  # check DESCRIPTION COMMAND...
  local what=$1; shift
  if "$@"; then pass "$what"; else fail "$what"; fi
}
note() { echo "---- $*"; }
poll() {  # poll SECONDS COMMAND... — every 0.2 s of wall-clock time
  local deadline=$(( $(date +%s) + $1 )); shift
  until "$@"; do
    (( $(date +%s) < deadline )) || return 1
    sleep 0.2
  done
}
started_at=$(date +%s)

trap 'echo "FAIL: line $LINENO: \"$BASH_COMMAND\" failed (exit $?)"' ERR
si_setup
work=$(mktemp -d /tmp/pushspool-instances.XXXXXX)
root=$work/root
run=${work##*.}
nats_pids=()
# Hooks run in this order before the manager exits: units first (they hold files under $work
# and connections to the servers), then the servers by pid, then the scratch tree.
si_on_exit 'for i in "${instances[@]}"; do timeout 30 systemctl --user stop "pushspoold@$i.service" >/dev/null 2>&1; done'
si_on_exit 'for pid in "${nats_pids[@]+"${nats_pids[@]}"}"; do si_stop_pid "$pid" 5; done'
si_on_exit 'if ((failures)); then for i in "${instances[@]}"; do echo "---- pushspoold@$i journal (last 25 lines):"; si_journal "pushspoold@$i.service" -o short-monotonic -n 25 2>/dev/null; done; for n in 1 2 3; do echo "---- nats n$n log (last 15 lines):"; tail -15 "$work/nats/n$n.log" 2>/dev/null; done; fi'
si_on_exit "rm -rf '$work'"

accepts() { python3 -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 0.5)' "$1" 2>/dev/null; }

# ---------------------------------------------------------------- 1. NATS cluster
note "1. three nats-server processes, one cluster"
declare -a client_port cluster_port monitor_port
for n in 1 2 3; do
  client_port[n]=$(si_free_port); cluster_port[n]=$(si_free_port); monitor_port[n]=$(si_free_port)
done
mkdir -p "$work/nats"
start_node() {  # start_node N
  local n=$1 routes=() m
  for m in 1 2 3; do (( m == n )) || routes+=("nats://127.0.0.1:${cluster_port[m]}"); done
  "$nats_bin" -a 127.0.0.1 -p "${client_port[n]}" -m "${monitor_port[n]}" -n "si-n$n" -js -sd "$work/nats/n$n" \
    --cluster_name "pushspool-si-$run" --cluster "nats://127.0.0.1:${cluster_port[n]}" \
    --routes "$(IFS=,; echo "${routes[*]}")" </dev/null >"$work/nats/n$n.log" 2>&1 &
  nats_pids[n]=$!
}
for n in 1 2 3; do start_node "$n"; done
for n in 1 2 3; do
  check "nats n$n (pid ${nats_pids[n]}) listens on 127.0.0.1:${client_port[n]}" poll "$WAIT" accepts "${client_port[n]}"
done
# JetStream in a cluster answers once a meta leader is elected; the daemons would retry, but
# starting them against a settled cluster keeps the export timing below meaningful.
meta_leader() { curl -fsS "http://127.0.0.1:${monitor_port[1]}/jsz" 2>/dev/null | jq -e '.meta_cluster.leader // empty' >/dev/null; }
check "the JetStream cluster elected a meta leader" poll "$WAIT" meta_leader
urls="nats://127.0.0.1:${client_port[1]} nats://127.0.0.1:${client_port[2]} nats://127.0.0.1:${client_port[3]}"

# ---------------------------------------------------------------- 2. instances
note "2. pushspoold@a/b/c from the template unit"
# The template's own ExecStart=, %i left for the manager to expand; only the binary and the
# root of its absolute paths change. Anything else in it (a new option, another path) stays.
template_exec=$(sed -n 's/^ExecStart=//p' "$template")
exec_line=$(sed -e "s#^/usr/sbin/pushspoold #$daemon_bin #" -e "s# /etc/# $root/etc/#g" -e "s# /var/# $root/var/#g" <<<"$template_exec")
check "the template's ExecStart= names the instance three times (%i)" test "$(grep -o '%i' <<<"$template_exec" | wc -l)" -eq 3
check "the rendered ExecStart= keeps no path outside the scratch root ($exec_line)" \
  bash -c '[[ -z $(tr " " "\n" <<<"$1" | grep "^/" | grep -v -e "^$2/" -e "^$3\$") ]]' _ "$exec_line" "$root" "$daemon_bin"
syslog_identifier=$(sed -n 's/^SyslogIdentifier=//p' "$template")
# render-user-unit.sh keeps Type/Notify/Exec/Restart/Timeout/Watchdog; SyslogIdentifier= is
# per instance here, so it is carried over from the template as well.
# ExecStopPost= records how each run ended: an inactive unit is unloaded, so `systemctl show`
# no longer has its exit status ($$ is a literal $ in a unit file).
# The template's Environment= lines too: PUSHSPOOL_INSTANCE=%i gives each instance its own
# default export host id, which this test relies on (no HostId= in the configs).
template_env=()
while IFS= read -r assignment; do template_env+=(--env "$assignment"); done < <(sed -n 's/^Environment=//p' "$template" | tr -d '"')
"$here/render-user-unit.sh" --unit "$template" --exec "$exec_line" --set LimitCORE=0 \
  ${syslog_identifier:+--set "SyslogIdentifier=$syslog_identifier"} "${template_env[@]}" \
  --set "ExecStopPost=/bin/sh -c 'echo \"%i \$\$SERVICE_RESULT \$\$EXIT_CODE \$\$EXIT_STATUS\" >>$work/exits'" \
  >"$work/pushspoold@.service"
si_install_unit "pushspoold@.service" "$work/pushspoold@.service"

# In system mode tmpfiles and StateDirectory= make these parents; the daemon makes the rest.
mkdir -p "$root/etc/pushspool" "$root/var/spool/pushspool" "$root/var/lib/pushspool"
for i in "${instances[@]}"; do
  cat >"$root/etc/pushspool/$i.conf" <<EOF
# instances-live.sh: instance $i
[Log]
Identifier=pushspoold-$i
[Media]
Enabled=no
[Journal]
MaxBatchDelaySec=0
[Status]
IntervalSec=200ms
[Export]
Enabled=yes
URL=$urls
Stream=$stream
Replicas=3
AckTimeoutSec=2s
EOF
done

ctl() { local i=$1; shift; "$ctl_bin" --instance "$i" --root "$root" "$@"; }
status_json() { ctl "$1" export status --json; }
status_field() { status_json "$1" | jq -r ".$2"; }

for i in "${instances[@]}"; do
  unit=pushspoold@$i.service
  t0=$(date +%s%N)
  if si_start "$unit"; then pass "systemctl --user start $unit returned after READY=1 ($(( ($(date +%s%N) - t0) / 1000000 )) ms)"
  else fail "systemctl --user start $unit"; fi
  check "$unit: ActiveState=active" si_wait_prop "$unit" ActiveState active 10
  check "$unit: the manager expanded %i (ExecStart= has $root/etc/pushspool/$i.conf)" \
    bash -c '[[ $(systemctl --user show -p ExecStart --value "$1") == *"--config $2/etc/pushspool/$3.conf --spool $2/var/spool/pushspool/$3 --state-dir $2/var/lib/pushspool/$3 "* ]]' _ "$unit" "$root" "$i"
  check "$unit: SyslogIdentifier=pushspoold-$i" test "$(si_prop "$unit" SyslogIdentifier)" = "pushspoold-$i"
done
for i in "${instances[@]}"; do
  check "pushspoolctl --instance $i --root: export status finds the daemon's state (enabled, stream $stream)" \
    poll 10 bash -c '[[ $("$@" | jq -r "[.enabled, .stream] | @tsv") == "true	'"$stream"'" ]]' _ \
      "$ctl_bin" --instance "$i" --root "$root" export status --json
  check "pushspoolctl --instance $i --root: the daemon's own spool is there ($root/var/spool/pushspool/$i/incoming)" \
    test -d "$root/var/spool/pushspool/$i/incoming"
done

# ---------------------------------------------------------------- 3. payloads, a node killed
note "3. $N + $N payloads per instance, one NATS node SIGKILLed in between"
mkdir -p "$work/payloads"
make_payloads() {  # make_payloads FIRST LAST — prints the files
  local k
  for ((k = $1; k <= $2; k++)); do
    printf '{"aps":{"alert":{"title":"t %s","body":"b"}},"clickUrl":"https://x.example/","uniqueKey":"si-%s-%s"}\n' \
      "$k" "$run" "$k" >"$work/payloads/$k.json"
    echo "$work/payloads/$k.json"
  done
}
drop_all() {  # drop_all FIRST LAST — the same files into every instance's spool
  local files i
  mapfile -t files < <(make_payloads "$1" "$2")
  for i in "${instances[@]}"; do ctl "$i" drop --platform ios "${files[@]}" >/dev/null; done
}
acked_above() {  # acked_above SEQ — every instance acknowledged past SEQ
  local i seq
  for i in "${instances[@]}"; do seq=$(status_field "$i" acknowledgedSeq) || return 1; (( ${seq:-0} > $1 )) || return 1; done
}
drop_all 1 "$N"
check "export under way on all three (acknowledged seq > 0)" poll "$WAIT" acked_above 0

# The daemons connect to a random one of the three URLs; kill the node holding most of them,
# so at least one exporter loses its server mid-run and must fail over.
daemon_connections() { curl -fsS "http://127.0.0.1:${monitor_port[$1]}/connz?limit=1000" | jq '[.connections[]? | select(.name == "pushspoold")] | length'; }
victim=1 most=-1
for n in 1 2 3; do
  c=$(daemon_connections "$n" || echo 0)
  echo "     (nats n$n holds $c pushspoold connection(s))"
  if (( c > most )); then most=$c victim=$n; fi
done
# Kill it mid-export: while the next N per instance are being dropped, as soon as instance a
# journaled the first of them. They are dropped in rounds of 10 per instance over about two
# seconds: the exporters wake on each commit and keep up with a burst within milliseconds, so
# a batch dropped at once would be acknowledged everywhere before any poll could see it start.
drop_in_rounds() {  # drop_in_rounds FIRST LAST
  local k
  for ((k = $1; k <= $2; k += 10)); do
    drop_all "$k" $(( k + 9 < $2 ? k + 9 : $2 )) || return 1
    sleep 0.1
  done
}
drop_in_rounds $((N + 1)) $((2 * N)) &
drop_pid=$!
journaled_above() { local seq; seq=$(status_field "$1" journalLastSeq) || return 1; (( ${seq:-0} > $2 )); }
check "instance a journals the second batch" poll "$WAIT" journaled_above a "$N"
kill -KILL "${nats_pids[victim]}"
at_kill=$(for i in "${instances[@]}"; do echo -n "$i:$(status_field "$i" acknowledgedSeq)/$(status_field "$i" journalLastSeq) "; done)
unacked=0
for i in "${instances[@]}"; do unacked=$(( unacked + 2 * N - $(status_field "$i" acknowledgedSeq) )); done
{ wait "${nats_pids[victim]}"; } 2>/dev/null || true
echo "     (SIGKILL to nats n$victim; acknowledged/journaled right after: $at_kill)"
check "the killed node held at least one daemon's connection ($most)" test "$most" -ge 1
check "nats n$victim is gone" bash -c "! kill -0 ${nats_pids[victim]} 2>/dev/null"
check "the kill came mid-export: $unacked of $((6 * N)) records not yet acknowledged then" test "$unacked" -gt 0
check "the second batch was dropped into all three spools (pushspoolctl drop exit 0)" wait "$drop_pid"

caught_up() {  # every instance: 2N journaled, all acknowledged, lag 0
  local i
  for i in "${instances[@]}"; do
    [[ $(status_json "$i" | jq -r '[.journalLastSeq, .acknowledgedSeq, .lag] | @tsv') == "$((2 * N))	$((2 * N))	0" ]] || return 1
  done
}
t0=$(date +%s)
if poll "$WAIT" caught_up; then pass "export continues after the node kill: every instance at lag 0 with $((2 * N)) records acknowledged ($(( $(date +%s) - t0 )) s)"
else
  fail "export continues after the node kill (lag 0 on all three)"
  for i in "${instances[@]}"; do echo "     $i: $(status_json "$i")"; done
fi
for i in "${instances[@]}"; do
  check "pushspoolctl --instance $i export status: connected again after the kill" \
    poll "$WAIT" bash -c '[[ $("$@" | jq -r .connected) == true ]]' _ "$ctl_bin" --instance "$i" --root "$root" export status --json
done
all_reconnected() {  # the three daemons' connections are on the surviving nodes
  local n total=0 c
  for n in 1 2 3; do
    (( n == victim )) && continue
    c=$(daemon_connections "$n") || return 1
    total=$(( total + c ))
  done
  (( total == 3 ))
}
check "the surviving nodes hold all three daemons' connections (failover)" poll "$WAIT" all_reconnected
surviving=()
for n in 1 2 3; do (( n == victim )) || surviving+=("nats://127.0.0.1:${client_port[n]}"); done
stream_replicas() { curl -fsS "http://127.0.0.1:${monitor_port[$1]}/jsz?streams=true&config=true" | jq -r --arg s "$stream" '[.account_details[]?.stream_detail[]? | select(.name == $s) | .config.num_replicas] | first // empty'; }
other=$(( victim == 1 ? 2 : 1 ))
check "the stream $stream is R3 (from n$other's /jsz: $(stream_replicas "$other" || true))" test "$(stream_replicas "$other" || true)" = 3

# ---------------------------------------------------------------- 4. durable pull consumer
note "4. a durable pull consumer reads every id of all three exactly once"
# The default host id of an instance: /etc/machine-id plus ".NAME" (PUSHSPOOL_INSTANCE=%i).
host_of() { printf '%s.%s' "$(tr -d '[:space:]' </etc/machine-id)" "$1"; }
for i in "${instances[@]}"; do ctl "$i" journal cat | cut -f3 | sed "s/^/$(host_of "$i"):/"; done | sort >"$work/expected"
check "the three journals hold $((6 * N)) records with distinct message ids" \
  test "$(wc -l <"$work/expected")" -eq $((6 * N)) -a "$(sort -u "$work/expected" | wc -l)" -eq $((6 * N))
consume() { "$bench_bin" nats-consume --url "${surviving[*]}" --stream "$stream" --durable "$durable" --subject 'pushspool.*.*' "$@"; }
if consume --at-least $((3 * 2 * N)) >"$work/consumed" 2>"$work/consume.err"; then pass "nats-consume read the stream through durable $durable"
else fail "nats-consume: $(tail -3 "$work/consume.err")"; fi
sort "$work/consumed" >"$work/consumed.sorted"
check "consumed $((6 * N)) messages (got $(wc -l <"$work/consumed"))" test "$(wc -l <"$work/consumed")" -eq $((6 * N))
dups=$(uniq -d "$work/consumed.sorted" | wc -l)
check "no id read twice ($dups duplicated)" test "$dups" -eq 0
missing=$(comm -23 "$work/expected" <(sort -u "$work/consumed.sorted") | wc -l)
extra=$(comm -13 "$work/expected" <(sort -u "$work/consumed.sorted") | wc -l)
check "every journaled id of all three instances was consumed ($missing missing)" test "$missing" -eq 0
check "nothing consumed that no journal holds ($extra extra)" test "$extra" -eq 0
for i in "${instances[@]}"; do
  check "instance $i: $((2 * N)) ids with host part $(host_of "$i")" test "$(grep -c "^$(host_of "$i"):" "$work/consumed")" -eq $((2 * N))
done
# The same payload id from the three spools is three messages: only the host part differs.
check "payload si-$run-1 arrived once from each instance" \
  test "$(grep -c ":si-$run-1\$" "$work/consumed")" -eq 3
if consume >"$work/consumed.again" 2>>"$work/consume.err"; then
  check "the durable remembers its acks: a second read gets nothing (got $(wc -l <"$work/consumed.again"))" \
    test ! -s "$work/consumed.again"
else fail "second nats-consume: $(tail -3 "$work/consume.err")"; fi

# ---------------------------------------------------------------- 5. stop
note "5. stop"
pids=()
for i in "${instances[@]}"; do
  unit=pushspoold@$i.service
  pids+=("$(si_prop "$unit" MainPID)")
  check "systemctl --user stop $unit" systemctl --user stop "$unit"
  check "$unit: ActiveState=inactive" si_wait_prop "$unit" ActiveState inactive 10
  check "$unit: the daemon exited with status 0 ($(grep "^$i " "$work/exits" | tail -1))" \
    test "$(grep "^$i " "$work/exits" | tail -1)" = "$i success exited 0"
done

note "cleanup"
manager_pid=$si_manager_pid runtime_dir=$si_runtime_dir
si_cleanup
check "after cleanup: /run/systemd/system and $runtime_dir are gone" \
  bash -c "[[ ! -e /run/systemd/system || \$(cat /proc/1/comm) == systemd ]] && [[ ! -e '$runtime_dir' ]]"
check "after cleanup: the user manager ($manager_pid) is gone" bash -c "! kill -0 $manager_pid 2>/dev/null"
for pid in "${pids[@]}" "${nats_pids[@]}"; do
  check "after cleanup: process $pid is gone" bash -c "! kill -0 $pid 2>/dev/null"
done
check "after cleanup: $work is gone" test ! -e "$work"

total=$(( $(date +%s) - started_at ))
check "finished within 90 s (took $total s)" test "$total" -le 90
if ((failures)); then
  echo "instances-live: $failures check(s) failed"
  exit 1
fi
echo "instances-live: all checks passed"
