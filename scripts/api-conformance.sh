#!/usr/bin/env bash
# Conformance of pushspool-inbox to docs/openapi.yaml (issue 33). Builds nothing: run
# `swift build` first; it takes pushspoold, pushspoolctl and pushspool-inbox from --bin-dir
# (default: `swift build --show-bin-path`).
#
#   scripts/api-conformance.sh [--bin-dir DIR] [--keep]
#
# 1. pushspoold and pushspool-inbox on 127.0.0.1 (a free port) in a throw-away directory, with
#    a token secret and an admin token; a few iOS pushes of spool-examples/ dropped for two
#    users (one for the client, one for Schemathesis).
# 2. A Python client generated from the document by openapi-python-client drives list, open
#    and counts (scripts/api-client-roundtrip.py) and asserts what they answer.
# 3. Schemathesis (every check; phases examples, coverage, fuzzing, stateful; a fixed seed and
#    few examples, so the run is bounded and repeatable) against every operation, configured
#    by scripts/schemathesis.toml: the /v1/ ones with the user's token, /v1/admin/ with the
#    admin token, the event stream read up to its first event.
#
# Exits non-zero on any failure. The tools come from the venv scripts/install-deps.sh makes
# (/opt/pushspool-testenv, or $PUSHSPOOL_TESTENV). Schemathesis's reports (JUnit, and the
# cassette of every request) and the services' logs are kept under the printed directory
# when something fails (always with --keep). API_CONFORMANCE_EXAMPLES=N runs N examples per
# operation instead of 20 (the whole script takes about 40 s on two cores), and
# API_CONFORMANCE_SEED=S another seed than 33: both for a longer search by hand.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

usage() {
    cat <<'USAGE'
usage: scripts/api-conformance.sh [--bin-dir DIR] [--keep]

  --bin-dir DIR   take pushspoold, pushspoolctl and pushspool-inbox from DIR
                  (default: the output of `swift build --show-bin-path`)
  --keep          keep the work directory (logs, Schemathesis reports) even on success
USAGE
}

bin=""
keep=0
while (($#)); do
    case "$1" in
        --bin-dir)
            (($# >= 2)) && [ -n "$2" ] || { echo "api-conformance: --bin-dir needs a directory" >&2; usage >&2; exit 64; }
            bin=$2; shift ;;
        --keep) keep=1 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "api-conformance: unknown argument: $1" >&2; usage >&2; exit 64 ;;
    esac
    shift
done
if [ -z "$bin" ]; then
    export PATH="/opt/swift/usr/bin:$PATH"
    bin=$(swift build --show-bin-path)
fi
bin=$(cd "$bin" && pwd)
for program in pushspoold pushspoolctl pushspool-inbox; do
    [ -x "$bin/$program" ] || { echo "api-conformance: $bin/$program is missing; run 'swift build' first" >&2; exit 2; }
done
testenv=${PUSHSPOOL_TESTENV:-/opt/pushspool-testenv}
for tool in "$testenv/bin/schemathesis" "$testenv/bin/openapi-python-client" "$testenv/bin/python3"; do
    [ -x "$tool" ] || { echo "api-conformance: $tool is missing (scripts/install-deps.sh)" >&2; exit 2; }
done
for tool in jq openssl curl setsid; do
    command -v "$tool" >/dev/null || { echo "api-conformance: $tool is missing (scripts/install-deps.sh)" >&2; exit 2; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/pushspool-conformance.XXXXXX")
spool=$work/spool state=$work/state conf=$work/pushspool.conf
# A run under systemd must not talk to that unit's service manager.
unset NOTIFY_SOCKET JOURNAL_STREAM
pids=()

# Stops the services by PID, newest first (SIGTERM, up to 30 s, then SIGKILL); keeps the work
# directory when the run failed or --keep asked for it.
cleanup() {
    local status=$? i pid
    trap - EXIT
    for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
        pid=${pids[i]}
        kill -TERM "$pid" 2>/dev/null || continue
        for ((t = 0; t < 300; t++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    if ((status != 0 || keep)); then
        echo "api-conformance: work directory kept: $work (logs, schemathesis-*/ reports)" >&2
    else
        rm -rf "$work"
    fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

# start LOG PROGRAM ARGS...: a service in its own session with no descriptor of ours but
# stdin, stdout and stderr (as scripts/demo.sh does); $! is the service itself.
start() {
    local log=$1
    shift
    (
        for fd in /proc/self/fd/*; do
            fd=${fd##*/}
            if ((fd > 2)); then eval "exec $fd>&-"; fi
        done
        exec setsid "$@"
    ) </dev/null >"$log" 2>&1 &
    pids+=("$!")
}

# wait_for WHAT SECONDS COMMAND...: polls COMMAND every 0.1 s.
wait_for() {
    local what=$1 i
    local tries=$(($2 * 10))
    shift 2
    for ((i = 0; i < tries; i++)); do "$@" && return 0; sleep 0.1; done
    echo "api-conformance: timed out waiting for $what" >&2
    return 1
}

ctl() { "$bin/pushspoolctl" --spool "$spool" --state-dir "$state" --config "$conf" "$@"; }
drained() { [ -z "$(find "$spool/incoming" "$spool/processing" -type f -print -quit 2>/dev/null)" ]; }
indexed() {
    local applied journaled
    applied=$(cat "$state/inbox/APPLIED" 2>/dev/null) || return 1
    journaled=$(ctl journal cat --json | tail -n 1 | jq -r .seq)
    ((10#$applied >= journaled))
}

umask 077
openssl rand -hex 32 >"$work/inbox-token-secret"
openssl rand -hex 32 >"$work/inbox-admin-token"
umask 022
cat >"$conf" <<CONF
[Media]
Enabled=no
[Inbox]
TokenSecretFile=$work/inbox-token-secret
AdminTokenFile=$work/inbox-admin-token
CONF
# The app's back end hands each user hex(HMAC-SHA256(secret, user id)).
token() { printf %s "$1" | openssl dgst -sha256 -mac HMAC -macopt "key:$(cat "$work/inbox-token-secret")" | awk '{print $NF}'; }

SECONDS=0
start "$work/pushspoold.log" "$bin/pushspoold" --spool "$spool" --state-dir "$state" --config "$conf"
wait_for "pushspoold to start (see $work/pushspoold.log)" 60 grep -q "pushspoold ready" "$work/pushspoold.log"
start "$work/pushspool-inbox.log" "$bin/pushspool-inbox" --listen 127.0.0.1:0 --spool "$spool" --state-dir "$state" --config "$conf"
wait_for "pushspool-inbox to listen (see $work/pushspool-inbox.log)" 30 grep -q "^listening on " "$work/pushspool-inbox.log"
base="http://$(sed -n 's/^listening on //p' "$work/pushspool-inbox.log" | head -n 1)"
case "$base" in http://127.0.0.1:*) ;; *) echo "api-conformance: pushspool-inbox listens on $base, not on loopback" >&2; exit 1 ;; esac
echo "== pushspool-inbox on $base (under $work)"

# The accepted iOS pushes of spool-examples/ (validate runs the daemon's normaliser).
mapfile -t ios < <(ctl validate --json spool-examples/*.json | jq -r 'select(.kind == "notification" and .platform == "ios") | .file')
((${#ios[@]} >= 3)) || { echo "api-conformance: fewer than 3 accepted iOS pushes in spool-examples/" >&2; exit 1; }
ios=("${ios[@]:0:5}")
ctl drop --user client --platform ios "${ios[@]}" >/dev/null
ctl drop --user fuzz --platform ios "${ios[@]}" >/dev/null
wait_for "the spool to drain" 60 drained
wait_for "the inbox index to catch up" 30 indexed
echo "== seeded ${#ios[@]} iOS pushes each for users client and fuzz ($SECONDS s)"

echo "== a client generated by openapi-python-client: list, open, counts"
# (The venv's bin on PATH: the generator formats its output with the ruff installed there.)
PATH="$testenv/bin:$PATH" "$testenv/bin/openapi-python-client" generate --path docs/openapi.yaml \
    --output-path "$work/client/pushspool_inbox_client" --meta none \
    >"$work/client-generate.log" 2>&1 || { cat "$work/client-generate.log" >&2; exit 1; }
PYTHONPATH=$work/client "$testenv/bin/python3" scripts/api-client-roundtrip.py \
    --url "$base" --user client --token "$(token client)" --package pushspool_inbox_client
echo "(client round trip done at $SECONDS s)"

# Schemathesis: every operation, every check, the four phases, a fixed seed and few examples.
# scripts/schemathesis.toml gives /v1/ the user's token and /v1/admin/ the admin token, and
# says which 422s are right; its reports (JUnit, the cassette of every request) go to
# $work/schemathesis/.
echo "== Schemathesis"
failures=0
(cd "$work" && PUSHSPOOL_USER=fuzz PUSHSPOOL_USER_TOKEN=$(token fuzz) PUSHSPOOL_ADMIN_TOKEN=$(cat "$work/inbox-admin-token") \
    "$testenv/bin/schemathesis" --config-file "$root/scripts/schemathesis.toml" run "$root/docs/openapi.yaml" --url "$base" \
    --checks all --phases examples,coverage,fuzzing,stateful \
    --max-examples "${API_CONFORMANCE_EXAMPLES:-20}" --seed "${API_CONFORMANCE_SEED:-33}" --workers 1 --request-timeout 10 \
    --report junit,vcr --report-dir "$work/schemathesis") || failures=1
echo "== done in $SECONDS s"
if ((failures)); then
    echo "api-conformance: FAIL: Schemathesis found failures (reports under $work/schemathesis)" >&2
    exit 1
fi
echo "api-conformance: PASS"
