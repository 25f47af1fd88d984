#!/usr/bin/env bash
# The README's first command: the whole product on this machine, on 127.0.0.1, in a throw-away
# directory. It installs what is needed and builds, then starts pushspoold (ingest, journal,
# inbox index, outbox), pushspool-inbox (the Notification Center over HTTP) and a stand-in for
# the vendors' APIs (scripts/demo-vendor.py); drops every example of spool-examples/ as a
# producer would, then the accepted pushes for two users (alice: iOS, bob: Android); shows
# alice's inbox, opens her Mindbox push and prints the NCPushOpen request the stand-in
# received; prints the inbox page's address with alice's token; then stops everything
# (or, with --keep, leaves it running and says how to stop it).
#
# Process handling, because a demo must not leave anything behind: every service is started
# with setsid(1) (its own session, so a terminal's hang-up or Ctrl-C reaches only this script)
# with stdin, stdout and stderr on files (so `out=$(./scripts/demo.sh)` returns even with
# --keep), and recorded by PID in DIR/pids; the EXIT trap stops them by PID, newest first,
# and only a process whose environment still carries this demo's PUSHSPOOL_DEMO_DIR (PIDs
# are reused). Nothing is run in the background through a shell function: killing the
# function's subshell would leave the program it started running.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
    cat <<'USAGE'
usage: scripts/demo.sh [--keep] [--bin-dir DIR]
       scripts/demo.sh --stop DIR

  --keep          leave pushspoold, pushspool-inbox and the stand-in vendor running, for a
                  person to open the inbox page; the last lines say how to stop them
  --bin-dir DIR   use pushspoold, pushspoolctl and pushspool-inbox from DIR (e.g. .build/debug)
                  instead of installing packages and building release binaries (the tests)
  --stop DIR      stop the services of a demo left running with --keep (DIR is its directory)
USAGE
}

keep=0
bin=""
stop_dir=""
while (($#)); do
    case "$1" in
        --keep) keep=1 ;;
        --bin-dir|--stop)
            (($# >= 2)) && [ -n "$2" ] || { echo "demo.sh: $1 needs a directory" >&2; usage >&2; exit 64; }
            if [ "$1" = --stop ]; then stop_dir=$2; else bin=$2; fi
            shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "demo.sh: unknown argument: $1" >&2; usage >&2; exit 64 ;;
    esac
    shift
done

# Whether PID is a process of the demo in DIR: alive (not a zombie) and carrying the marker.
ours() {
    local pid=$1 dir=$2 state
    state=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1) || return 1
    [ -n "$state" ] && [ "$state" != Z ] || return 1
    { tr '\0' '\n' < "/proc/$pid/environ"; } 2>/dev/null | grep -qxF "PUSHSPOOL_DEMO_DIR=$dir"
}

# Stops the services listed in DIR/pids ("NAME PID" lines), newest first: SIGTERM, up to 30 s
# for a clean exit, then SIGKILL. A service started by this very shell is reaped with `wait`
# and its exit status reported; under --stop they are another shell's orphans, so only their
# disappearance can be seen.
stop_services() {
    local dir=$1 name pid i status lines=()
    [ -f "$dir/pids" ] || return 0
    mapfile -t lines < <(tac "$dir/pids")
    for line in "${lines[@]}"; do
        read -r name pid <<<"$line"
        if ours "$pid" "$dir"; then
            kill -TERM "$pid" 2>/dev/null || true
            for ((i = 0; i < 300; i++)); do ours "$pid" "$dir" || break; sleep 0.1; done
            if ours "$pid" "$dir"; then
                echo "$name (pid $pid) did not stop within 30 s of SIGTERM; sending SIGKILL" >&2
                kill -KILL "$pid" 2>/dev/null || true
            fi
        fi
        if [ -n "${started_here[$pid]:-}" ]; then
            status=0; wait "$pid" 2>/dev/null || status=$?
            echo "$name exited $status"
        else
            echo "$name (pid $pid) stopped"
        fi
    done
    rm -f "$dir/pids"
}
declare -A started_here=()

if [ -n "$stop_dir" ]; then
    [ -f "$stop_dir/pids" ] || { echo "demo.sh: no demo running under $stop_dir (no $stop_dir/pids)" >&2; exit 1; }
    stop_dir=$(cd "$stop_dir" && pwd)
    stop_services "$stop_dir"
    echo "demo files kept under $stop_dir"
    exit 0
fi

if [ -z "$bin" ]; then
    ./scripts/install-deps.sh
    export PATH="/opt/swift/usr/bin:$PATH"
    echo "== building (release)" >&2
    for product in pushspoold pushspoolctl pushspool-inbox; do
        swift build -c release --product "$product" >&2
    done
    bin=$(swift build -c release --show-bin-path)
fi
bin=$(cd "$bin" && pwd)
for program in pushspoold pushspoolctl pushspool-inbox; do
    [ -x "$bin/$program" ] || { echo "demo.sh: $bin/$program is missing; build it first" >&2; exit 1; }
done

demo=$(mktemp -d "${TMPDIR:-/tmp}/pushspool-demo.XXXXXX")
spool=$demo/spool; state=$demo/state; conf=$demo/pushspool.conf
export PUSHSPOOL_DEMO_DIR=$demo
# A demo under systemd (or in a unit's shell) must not talk to that unit's service manager.
unset NOTIFY_SOCKET JOURNAL_STREAM

# Stops what this run started, however it ends (error, Ctrl-C, normal end without --keep).
cleanup() {
    local status=$?
    trap - EXIT
    if ((keep && status == 0)); then exit 0; fi
    echo
    echo "== stopping (SIGTERM to each, newest first)"
    stop_services "$demo"
    echo "demo files kept under $demo (logs: $demo/*.log)"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

# start NAME LOG PROGRAM ARGS...: a service in its own session, recorded by PID. The subshell
# execs setsid, which runs PROGRAM in place (a background child of a shell without job control
# is no group leader, so setsid(1) needs no fork), so $! is the service itself. Only stdin,
# stdout and stderr go with it: a descriptor this script inherited (a CI runner's pipe, the
# socket a launcher watches to learn that its child has exited) would stay open as long as
# the service runs, and whoever waits for it to close would wait as long.
start() {
    local name=$1 log=$2
    shift 2
    (
        for fd in /proc/self/fd/*; do
            fd=${fd##*/}
            if ((fd > 2)); then eval "exec $fd>&-"; fi
        done
        exec setsid "$@"
    ) </dev/null >"$log" 2>&1 &
    started_here[$!]=1
    echo "$name $!" >>"$demo/pids"
}

# wait_for WHAT SECONDS COMMAND...: polls COMMAND every 0.1 s.
wait_for() {
    local what=$1 i
    local tries=$(($2 * 10))
    shift 2
    for ((i = 0; i < tries; i++)); do "$@" && return 0; sleep 0.1; done
    echo "demo.sh: timed out waiting for $what" >&2
    return 1
}

ctl() { "$bin/pushspoolctl" --spool "$spool" --state-dir "$state" --config "$conf" "$@"; }

# The spool is drained when nothing waits in incoming/ or processing/.
drained() { [ -z "$(find "$spool/incoming" "$spool/processing" -type f -print -quit)" ]; }

echo "== starting a stand-in vendor API, pushspoold and pushspool-inbox on 127.0.0.1 (under $demo)" >&2
start vendor "$demo/vendor.log" python3 scripts/demo-vendor.py "$demo/vendor.port" "$demo/vendor-requests.jsonl"
wait_for "the stand-in vendor" 10 test -s "$demo/vendor.port"
vendor="http://127.0.0.1:$(cat "$demo/vendor.port")"

# Keys as the vendors' consoles would issue them, in files only the service reads (the
# daemon refuses a key file open to group or others, as ssh does a private key).
umask 077
openssl rand -hex 16 >"$demo/mindbox-key"
openssl rand -hex 16 >"$demo/infobip-key"
openssl rand -hex 32 >"$demo/inbox-token-secret"
umask 022
cat >"$conf" <<CONF
# The demo's configuration; packaging/pushspool.conf documents every setting.
# Media downloads are off: the examples point at hosts on the internet.
[Media]
Enabled=no
# pushspool-inbox's user tokens are HMAC-SHA256(this secret, user id).
[Inbox]
TokenSecretFile=$demo/inbox-token-secret
# The outbox reports opens and actions to Mindbox and Infobip; here both are the stand-in,
# on loopback over plain HTTP, which the outbox refuses unless told otherwise.
[Outbox]
Enabled=yes
AllowHTTP=yes
AllowNetworks=127.0.0.0/8
MindboxURL=$vendor
MindboxEndpointId=pushspool-demo
MindboxSecretKeyFile=$demo/mindbox-key
InfobipURL=$vendor
InfobipAppKeyFile=$demo/infobip-key
CONF

start pushspoold "$demo/pushspoold.log" "$bin/pushspoold" --spool "$spool" --state-dir "$state" --config "$conf"
wait_for "pushspoold to start (see $demo/pushspoold.log)" 60 grep -q "pushspoold ready" "$demo/pushspoold.log"
start pushspool-inbox "$demo/pushspool-inbox.log" "$bin/pushspool-inbox" --listen 127.0.0.1:0 \
    --spool "$spool" --state-dir "$state" --config "$conf"
wait_for "pushspool-inbox to listen (see $demo/pushspool-inbox.log)" 30 grep -q "^listening on " "$demo/pushspool-inbox.log"
inbox="http://$(sed -n 's/^listening on //p' "$demo/pushspool-inbox.log" | head -n 1)"
echo "stand-in vendor $vendor, inbox API $inbox" >&2

examples=(spool-examples/*.json)
echo
echo "== 1. a producer drops all ${#examples[@]} files of spool-examples/ unchanged (pushspoolctl drop --raw)"
ctl drop --raw "${examples[@]}" >/dev/null
wait_for "the spool to drain" 60 drained
last=$(ctl journal cat --json | tail -n 1 | jq -r .seq)
echo
echo "== journal records ($(ctl journal cat --json | wc -l)) (pushspoolctl journal cat --json)"
ctl journal cat --json
echo
echo "== refused payloads ($(find "$spool/failed" -name '*.reason.json' | wc -l)) (pushspoolctl failed list)"
ctl failed list

# The accepted pushes (not the event envelopes) by platform: alice has an iPhone, bob an
# Android phone. `validate` runs the daemon's normaliser without ingesting anything.
mapfile -t ios < <(ctl validate --json "${examples[@]}" | jq -r 'select(.kind == "notification" and .platform == "ios") | .file')
mapfile -t android < <(ctl validate --json "${examples[@]}" | jq -r 'select(.kind == "notification" and .platform == "android") | .file')
echo
echo "== 2. the accepted pushes for two users: ${#ios[@]} iOS pushes for alice, ${#android[@]} Android pushes for bob"
echo "     (pushspoolctl drop --user alice FILE..., pushspoolctl drop --user bob FILE...)"
ctl drop --user alice --platform ios "${ios[@]}" >/dev/null
ctl drop --user bob --platform android "${android[@]}" >/dev/null
wait_for "the spool to drain" 60 drained
# The inbox index follows the journal on its own thread and writes the last seq it applied
# to inbox/APPLIED (20 digits): wait until it has caught up with the journal.
indexed() {
    local applied journaled
    applied=$(cat "$state/inbox/APPLIED" 2>/dev/null) || return 1
    journaled=$(ctl journal cat --json | tail -n 1 | jq -r .seq)
    ((10#$applied >= journaled))
}
wait_for "the inbox index to catch up" 30 indexed
echo "journal records now: $(ctl journal cat --json --from-seq "$((last + 1))" | wc -l) more"
echo
echo "== alice's inbox, newest first (pushspoolctl nc list --user alice --limit 5)"
ctl nc list --user alice --limit 5
echo
echo "== counts (pushspoolctl nc count --user alice; --user bob)"
echo "alice: $(ctl nc count --user alice --json)"
echo "bob:   $(ctl nc count --user bob --json)"

# Alice's Mindbox push: its item id is its journal seq.
item=$(ctl journal cat --json | jq -r 'select(.user == "alice" and .sourceFile == "mindbox-ios-current.json") | .seq' | head -n 1)
[ -n "$item" ] || { echo "demo.sh: alice's Mindbox push is not in the journal" >&2; exit 1; }
echo
echo "== 3. alice opens item $item, her Mindbox push (pushspoolctl nc open --user alice --device demo-iphone $item)"
ctl nc open --user alice --device demo-iphone "$item" >/dev/null
opened() { jq -e 'select(.requestLine | contains("operation=mobileapp.NCPushOpen"))' "$demo/vendor-requests.jsonl" >/dev/null; }
wait_for "the outbox to deliver NCPushOpen (see $demo/pushspoold.log)" 30 opened
echo "the event went through the spool into the journal; the outbox POSTed it to the stand-in vendor:"
echo
echo "== the NCPushOpen request the stand-in vendor received"
jq -r 'select(.requestLine | contains("operation=mobileapp.NCPushOpen")) | .requestLine, .body' "$demo/vendor-requests.jsonl" | head -n 2
echo
echo "== alice's item $item after the open"
ctl nc list --user alice --limit 500 --json | jq -r --arg item "$item" 'select(.item == $item) | "\(.item)  read=\(.state.read)  \(.title)"'
echo
echo "== journal verify"
ctl journal verify || true

# The app's back end hands each user hex(HMAC-SHA256(secret, user id)).
token=$(printf %s alice | openssl dgst -sha256 -mac HMAC -macopt "key:$(cat "$demo/inbox-token-secret")" | awk '{print $NF}')
echo
echo "== the inbox page, signed in as alice (pushspool-inbox)"
echo "$inbox/#user=alice&token=$token"
echo "the API the page uses: curl -H 'Authorization: Bearer $token' -H 'X-Pushspool-User: alice' $inbox/v1/inbox"

if ((keep)); then
    echo
    echo "== left running (--keep): pushspoold, pushspool-inbox and the stand-in vendor"
    cat "$demo/pids"
    echo "stop them with: scripts/demo.sh --stop $demo"
fi
