#!/usr/bin/env bash
# pushspool-inbox under a real systemd user manager, socket-activated, next to the real
# pushspoold, driven with curl and a small Python SSE client (issue 10's "Done when").
# Builds nothing: run `swift build` first; binaries from `swift build --show-bin-path` (or
# $PUSHSPOOL_BIN_DIR).
#
#   scripts/systemd-integration/inbox-live.sh     # PASS/FAIL per check, exit 1 on any FAIL
#
# 1. pushspool-inbox.socket (rendered from systemd/pushspool-inbox.socket with a free port)
#    listens while the service is inactive; the first connection starts it (sd_listen_fds);
#    STATUS= shows connections/requests. (The secret comes from [Inbox] TokenSecretFile=:
#    LoadCredential= does not deliver the file under this user manager; see below.)
# 2. every route: page, metrics, list, counts, inapp, seen/read/archive/action/read-all,
#    nc-open, media and thumb (ETag, immutable, If-None-Match -> 304).
# 3. auth: a missing, wrong and another user's token get the same 401; journald has the
#    catalogued inboxAuthFailed event with address and route and never the token.
# 4. cross-user: acting on another user's item is the 404 of a missing one, and changes nothing.
# 5. SSE: a push dropped into the spool reaches an open stream within 100 ms of its
#    journaling (pushspoold's ingested event); after a disconnect, Last-Event-ID resumes
#    with every item missed and nothing twice.
# 6. an idempotent read accepted while pushspoold is frozen, then pushspoold killed -9 and
#    restarted by the manager: applied once; the same request after the restart is the same
#    event; the journal holds it exactly once.
#
# Cleanup (lib.sh's trap) always runs. Unit names are pushspool-inbox.* and pushspoold.service
# inside this session's private user manager (lib.sh allows one session at a time).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"

bin_dir=$(pushspool_bin_dir "$root")
daemon_bin=$bin_dir/pushspoold ctl_bin=$bin_dir/pushspoolctl inbox_bin=$bin_dir/pushspool-inbox
for binary in "$daemon_bin" "$ctl_bin" "$inbox_bin"; do
  [[ -x "$binary" ]] || { echo "inbox-live: $binary is missing; run 'swift build' first" >&2; exit 2; }
done
for tool in jq curl python3 openssl; do
  command -v "$tool" >/dev/null || { echo "inbox-live: $tool is missing (scripts/install-deps.sh)" >&2; exit 2; }
done

WAIT=${INBOX_LIVE_WAIT:-60}
# The SSE latency bound of the issue; INBOX_LIVE_SSE_MS raises it on a machine known to be slow.
SSE_MS=${INBOX_LIVE_SSE_MS:-100}
daemon_unit=pushspoold.service
socket_unit=pushspool-inbox.socket
inbox_unit=pushspool-inbox.service
msg_ingested=19a1a1a31a6e4ff9b5e7b8c622799e9e
msg_auth=cd9b1fab57144f9fbc58ed63513e2d81

failures=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
check() {  # check DESCRIPTION COMMAND...
  local what=$1; shift
  if "$@"; then pass "$what"; else fail "$what"; fi
}
note() { echo "---- $*"; }
poll() {  # poll SECONDS COMMAND... — wall-clock deadline, every 0.1 s
  local deadline=$(( $(date +%s) + $1 )); shift
  until "$@"; do
    (( $(date +%s) < deadline )) || return 1
    sleep 0.1
  done
}

since=$(date +%s)
trap 'echo "FAIL: line $LINENO: \"$BASH_COMMAND\" failed (exit $?)"' ERR
si_setup
work=$(mktemp -d /tmp/pushspool-inbox-live.XXXXXX)
# Hooks run in order, before the manager exits: the evidence first, then the units are
# stopped (pushspoold still writes under $work), then $work goes.
si_on_exit 'if ((failures)); then for u in '"$inbox_unit $daemon_unit"'; do echo "---- $u journal (last 40 lines):"; si_journal "$u" --since "@$since" -o short-monotonic -n 40 2>/dev/null; done; fi'
si_on_exit "timeout 20 systemctl --user stop $socket_unit $inbox_unit $daemon_unit >/dev/null 2>&1"
si_on_exit "rm -rf '$work'"
spool=$work/spool state=$work/state conf=$work/pushspool.conf
run=${work##*.}
secret="inbox-live-secret-$run-0123456789abcdef"
printf '%s\n' "$secret" >"$work/inbox-token-secret"
chmod 600 "$work/inbox-token-secret"

# A free loopback port: bound and released here, then handed to the socket unit.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
base="http://127.0.0.1:$port"

{
  printf '[Spool]\nDirectory=%s\nRescanIntervalSec=5s\n' "$spool"
  printf '[Journal]\nStateDirectory=%s\n' "$state"
  printf '[Media]\nEnabled=no\n'
  printf '[Status]\nIntervalSec=200ms\n'
  # An item takes only the actions its push offers: promo pushes offer "accept".
  printf '[Category promo]\nAction=accept:Accept:\n'
  # The secret by file: this user manager (systemd 252, not PID 1) sets
  # $CREDENTIALS_DIRECTORY for LoadCredential= but leaves the file out (ENOENT), so the
  # unit's LoadCredential= line is checked by deb-test.sh and check-units.sh, and reading the
  # secret from $CREDENTIALS_DIRECTORY by InboxServerTests.theSecretComesFromTheCredentialsDirectory.
  printf '[Inbox]\nEnabled=yes\nTokenSecretFile=%s\n' "$work/inbox-token-secret"
} >"$conf"

ctl() { "$ctl_bin" --spool "$spool" --state-dir "$state" --config "$conf" "$@"; }
token() { printf %s "$1" | openssl dgst -sha256 -mac HMAC -macopt "key:$secret" | awk '{print $NF}'; }
alice_token=$(token alice) bob_token=$(token bob)

# api METHOD PATH [USER [TOKEN]] [-- curl args...]: prints "STATUS\n" then the body to $work/body,
# headers to $work/headers.
api() {
  local method=$1 path=$2 user=${3:-alice} tok=${4:-}
  shift $(( $# < 4 ? $# : 4 ))
  [[ "${1:-}" == -- ]] && shift
  local auth=()
  if [[ "$user" != - ]]; then
    [[ -n "$tok" ]] || tok=$(token "$user")
    auth=(-H "X-Pushspool-User: $user" -H "Authorization: Bearer $tok")
  fi
  curl -s --max-time 10 -X "$method" -D "$work/headers" -o "$work/body" -w '%{http_code}' "${auth[@]}" "$@" "$base$path"
}
body() { cat "$work/body"; }
header() { tr -d '\r' <"$work/headers" | awk -v h="$(tr '[:upper:]' '[:lower:]' <<<"$1")" -F': ' 'tolower($1) == h { print $2 }'; }

# push USER TITLE [CATEGORY]: an NC envelope through pushspoolctl drop --raw.
pushes=0
push() {
  pushes=$((pushes + 1))
  local category=${3:+,\"category\":\"$3\"}
  printf '{"pushspool":1,"user":"%s","platform":"ios","payload":{"aps":{"alert":{"title":"%s","body":"b"}%s},"n":"%s-%d"}}' \
    "$1" "$2" "$category" "$run" "$pushes" >"$work/push-$pushes.json"
  ctl drop --raw "$work/push-$pushes.json" >/dev/null
}
counts_are() {  # counts_are USER UNSEEN UNREAD
  [[ "$(api GET /v1/inbox/counts "$1")" == 200 ]] || return 1
  [[ "$(jq -c '[.unseen, .unread]' "$work/body")" == "[$2,$3]" ]]
}
item_of() {  # item_of USER TITLE — the item id of USER's newest item with TITLE
  api GET "/v1/inbox?limit=100" "$1" >/dev/null
  jq -r --arg t "$2" '[.items[] | select(.title == $t)][0].item // empty' "$work/body"
}

# ---------------------------------------------------------------- units
"$here/render-user-unit.sh" --exec "$daemon_bin --config $conf" --set LimitCORE=0 >"$work/$daemon_unit"
si_install_unit "$daemon_unit" "$work/$daemon_unit"
# The service: Type=notify, NotifyAccess, Restart, timeouts as the system unit has them.
"$here/render-user-unit.sh" --unit "$root/systemd/$inbox_unit" --exec "$inbox_bin --config $conf" \
  --set LimitCORE=0 >"$work/$inbox_unit"
grep -q '^Type=notify$' "$work/$inbox_unit"
# The socket: [Unit] and [Socket] of the system unit, ListenStream= on this run's port; the
# IPAddress*= filters need cgroup BPF, which a user manager at the cgroup root here lacks.
awk -v listen="ListenStream=127.0.0.1:$port" '
  /^\[/ { section = $0; if (section != "[Install]") print section; next }
  /^[ \t]*($|#|;)/ || section == "[Install]" || /^IPAddress(Allow|Deny)=/ { next }
  /^ListenStream=/ { print listen; next }
  { print }' "$root/systemd/$socket_unit" >"$work/$socket_unit"
grep -q '^Accept=no$' "$work/$socket_unit"
si_install_unit "$inbox_unit" "$work/$inbox_unit"
si_install_unit "$socket_unit" "$work/$socket_unit"

# ---------------------------------------------------------------- 1. socket activation
note "1. socket activation"
check "pushspoold starts (READY=1)" si_start "$daemon_unit"
check "the NC index exists" poll "$WAIT" test -f "$state/inbox/index.sqlite"
check "systemctl --user start $socket_unit" systemctl --user start "$socket_unit"
check "$socket_unit is listening" si_wait_prop "$socket_unit" SubState listening 10
check "$inbox_unit is not running before the first connection" \
  bash -c "[[ \$(systemctl --user show -p ActiveState --value $inbox_unit) == inactive ]]"
status=$(api GET /v1/inbox/counts) || true
check "the first request (GET /v1/inbox/counts) is answered by the activated service: $status $(body)" \
  bash -c "[[ '$status' == 200 ]] && jq -e '.unseen == 0 and .unread == 0' '$work/body' >/dev/null"
check "$inbox_unit is active after the first connection" si_wait_prop "$inbox_unit" ActiveState active 10
si_track_pid "$inbox_unit"
inbox_pid=$(si_prop "$inbox_unit" MainPID)
check "the service got its socket from systemd (no --listen; LISTEN_FDS=1)" \
  bash -c "tr '\0' ' ' </proc/$inbox_pid/cmdline | grep -qv -- --listen && grep -qa LISTEN_FDS=1 /proc/$inbox_pid/environ"
check "STATUS= shows connections and requests" \
  poll 10 bash -c "systemctl --user show -p StatusText --value $inbox_unit | grep -q 'requests'"

# ---------------------------------------------------------------- 2. every route
note "2. every route"
push alice "one" promo
push alice "two"
push bob "for bob"
both_counts() { counts_are alice "$1" "$2" && counts_are bob "$3" "$4"; }
check "three pushes reach the index (alice 2 unread, bob 1)" poll "$WAIT" both_counts 2 2 1 1
one=$(item_of alice one || true) two=$(item_of alice two || true) bobs=$(item_of bob "for bob" || true)
check "GET /v1/inbox lists alice's two items newest first" \
  bash -c "[[ \$(curl -s -H 'X-Pushspool-User: alice' -H 'Authorization: Bearer $alice_token' '$base/v1/inbox' | jq -c '[.items[].title]') == '[\"two\",\"one\"]' ]]"
check "GET /v1/inbox?category=promo&limit=1" \
  bash -c "[[ \$(curl -s -H 'X-Pushspool-User: alice' -H 'Authorization: Bearer $alice_token' '$base/v1/inbox?category=promo&limit=1' | jq -c '[.items[].title]') == '[\"one\"]' ]]"
check "GET /v1/inbox?limit=0 is 400" test "$(api GET '/v1/inbox?limit=0')" = 400
check "GET /v1/inapp answers (no modal: item null)" bash -c "[[ \$(curl -s -H 'X-Pushspool-User: alice' -H 'Authorization: Bearer $alice_token' '$base/v1/inapp' | jq -c .item) == null ]]"
check "GET / serves the inbox page" bash -c "curl -sf '$base/' | grep -qi '<html'"
check "POST /v1/inbox/$one/seen is 202 with seen=true" \
  bash -c "[[ \$(curl -s -X POST -H 'X-Pushspool-User: alice' -H 'Authorization: Bearer $alice_token' '$base/v1/inbox/$one/seen' | jq -c '.item.state.seen') == true ]]"
check "POST /v1/inbox/$one/actions/accept with text is 202" \
  test "$(api POST "/v1/inbox/$one/actions/accept" alice "" -- -H 'Content-Type: application/json' --data-binary '{"text":"hi"}')" = 202
check "POST /v1/events/nc-open is 202" test "$(api POST /v1/events/nc-open alice "" -- -H 'X-Pushspool-Device: dev-1')" = 202
check "seen and action on one are journaled and applied: alice 1 unseen, 1 unread (two)" poll "$WAIT" counts_are alice 1 1
check "POST /v1/inbox/read-all is 202" test "$(api POST /v1/inbox/read-all)" = 202
check "read-all applied: alice 0/0" poll "$WAIT" counts_are alice 0 0
check "POST /v1/inbox/$two/archive is 202 with archived=true" \
  bash -c "[[ '$(api POST "/v1/inbox/$two/archive")' == 202 ]] && jq -e '.item.state.archived == true' '$work/body' >/dev/null"
check "GET /metrics counts requests by route" bash -c "curl -s '$base/metrics' | grep -q 'pushspool_inbox_requests_total{route=\"counts\",code=\"200\"}'"
# Media, stored by content address (media downloads are off here: the file is placed as the store would).
printf 'not really a png %s' "$run" >"$work/media.bin"
sha=$(sha256sum "$work/media.bin" | cut -d' ' -f1)
mkdir -p "$state/media/${sha:0:2}"
cp "$work/media.bin" "$state/media/${sha:0:2}/${sha:2}.png"
printf 'thumb' >"$state/media/${sha:0:2}/${sha:2}.thumb320.jpg"
status=$(api GET "/v1/media/$sha") || true
check "GET /v1/media/{sha256}: 200 image/png, ETag, immutable, the bytes" \
  bash -c "[[ '$status' == 200 && '$(header content-type)' == image/png && '$(header etag)' == '\"$sha\"' && '$(header cache-control)' == *immutable* ]] && cmp -s '$work/body' '$work/media.bin'"
check "GET /v1/media/{sha256} with If-None-Match: its ETag -> 304" test "$(api GET "/v1/media/$sha" alice "" -- -H "If-None-Match: \"$sha\"")" = 304
check "GET /v1/media/{sha256}/thumb: 200 image/jpeg" bash -c "[[ '$(api GET "/v1/media/$sha/thumb")' == 200 && '$(header content-type)' == image/jpeg ]]"
check "GET /v1/media/{sha256}/thumb with If-None-Match -> 304" test "$(api GET "/v1/media/$sha/thumb" alice "" -- -H "If-None-Match: \"$sha-thumb\"")" = 304

# ---------------------------------------------------------------- 3. auth refusals
note "3. auth refusals"
auth_since=$(date +%s.%N)
api GET /v1/inbox - >/dev/null || true; cp "$work/body" "$work/401-missing"
check "missing token -> 401 with WWW-Authenticate" bash -c "[[ '$(api GET /v1/inbox -)' == 401 && '$(header www-authenticate)' == 'Bearer realm=\"pushspool-inbox\"' ]]"
check "wrong token -> the same 401 body" bash -c "[[ '$(api GET /v1/inbox alice 0000)' == 401 ]] && cmp -s '$work/body' '$work/401-missing'"
check "bob's token for alice -> the same 401 body" bash -c "[[ '$(api GET /v1/inbox alice "$bob_token")' == 401 ]] && cmp -s '$work/body' '$work/401-missing'"
check "unknown user and unknown route -> the same 401 body" \
  bash -c "[[ '$(api GET /v1/no-such-route nobody x)' == 401 ]] && cmp -s '$work/body' '$work/401-missing'"
auth_events() { si_journal "$inbox_unit" --since "@$auth_since" -o json MESSAGE_ID="$msg_auth" 2>/dev/null || true; }
auth_event_count_at_least() { [[ "$(auth_events | grep -c .)" -ge "$1" ]]; }
auth_fields_right() {
  auth_events | jq -se 'length >= 4 and all(.[]; .REMOTE_ADDR == "127.0.0.1" and .PRIORITY == "4" and .HTTP_METHOD == "GET"
    and (.INBOX_ROUTE == "/v1/inbox" or .INBOX_ROUTE == "other")
    and (.REASON_CODE == "missing_credentials" or .REASON_CODE == "invalid_token"))' >/dev/null
}
no_token_logged() { ! journalctl --no-pager -u "$inbox_unit" --since "@$since" -o json | grep -qF -e "$bob_token" -e "$alice_token" -e 0000; }
check "journald: 4 inboxAuthFailed events (MESSAGE_ID=$msg_auth)" poll 20 auth_event_count_at_least 4
check "journald: they carry REMOTE_ADDR, HTTP_METHOD, INBOX_ROUTE, REASON_CODE, PRIORITY=4" auth_fields_right
check "journald: no token (nor the wrong one) anywhere in the unit's journal" no_token_logged

# ---------------------------------------------------------------- 4. cross-user
note "4. cross-user"
api POST /v1/inbox/99999999/read >/dev/null || true; cp "$work/body" "$work/404-none"
check "alice reading bob's item $bobs -> the 404 of a missing item" \
  bash -c "[[ '$(api POST "/v1/inbox/$bobs/read")' == 404 ]] && cmp -s '$work/body' '$work/404-none'"
check "alice's action on bob's item -> 404" test "$(api POST "/v1/inbox/$bobs/actions/accept")" = 404
sleep 0.5
check "bob's item is still unread" counts_are bob 1 1

# ---------------------------------------------------------------- 5. SSE
note "5. SSE"
# A stream client that stamps each line with the wall clock (ns) as it arrives.
cat >"$work/sse.py" <<'PY'
import socket, sys, time
port, user, token, last = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
s = socket.create_connection(("127.0.0.1", port))
extra = f"Last-Event-ID: {last}\r\n" if last else ""
s.sendall(f"GET /v1/inbox/stream HTTP/1.1\r\nHost: x\r\nX-Pushspool-User: {user}\r\nAuthorization: Bearer {token}\r\n{extra}\r\n".encode())
buf = b""
while True:
    data = s.recv(65536)
    if not data:
        break
    now = time.time_ns()
    buf += data
    while b"\n" in buf:
        line, buf = buf.split(b"\n", 1)
        print(now, line.decode(errors="replace"), flush=True)
PY
python3 -u "$work/sse.py" "$port" alice "$alice_token" "" >"$work/sse1" 2>&1 &
sse_pid=$!
si_on_exit "kill $sse_pid 2>/dev/null"
check "the stream opened (retry: line)" poll 10 grep -q 'retry:' "$work/sse1"
push alice "live-1"
check "an item event for live-1 arrives on the stream" poll "$WAIT" grep -q '"title":"live-1"' "$work/sse1"
# Its seq is the SSE id; pushspoold's ingested event for that seq says when it was journaled.
live_seq=$(grep -B2 '"title":"live-1"' "$work/sse1" | awk '$2 == "id:" { print $3 }' | tail -1)
arrived_ns=$(grep '"title":"live-1"' "$work/sse1" | head -1 | cut -d' ' -f1)
journaled_us() { si_journal "$daemon_unit" --since "@$since" -o json MESSAGE_ID="$msg_ingested" JOURNAL_SEQ="$live_seq" 2>/dev/null | jq -r '.__REALTIME_TIMESTAMP' | head -1; }
has_journaled() { [[ -n "$(journaled_us)" ]]; }
poll 20 has_journaled || true
journaled=$(journaled_us)
if [[ -n "$journaled" && -n "$arrived_ns" ]]; then
  latency_ms=$(( (arrived_ns / 1000 - journaled) / 1000 ))
  check "SSE delivery of seq $live_seq ${latency_ms} ms after its journaling (<= ${SSE_MS} ms)" test "$latency_ms" -le "$SSE_MS"
else
  fail "SSE latency: no ingested event for seq '$live_seq' in journald, or no arrival time"
fi
check "a counts event follows (unread 1)" poll 10 grep -q 'event: counts' "$work/sse1"
kill "$sse_pid" 2>/dev/null || true; wait "$sse_pid" 2>/dev/null || true
# Disconnected: two pushes and a state change the client misses, then resume.
push alice "missed-1"
push alice "missed-2"
has_item() { [[ -n "$(item_of "$1" "$2")" ]]; }
check "both missed pushes are applied" poll "$WAIT" has_item alice missed-2
python3 -u "$work/sse.py" "$port" alice "$alice_token" "$live_seq" >"$work/sse2" 2>&1 &
sse_pid=$!
si_on_exit "kill $sse_pid 2>/dev/null"
check "resume with Last-Event-ID: $live_seq delivers missed-1 and missed-2" \
  poll "$WAIT" bash -c "grep -q '\"title\":\"missed-1\"' '$work/sse2' && grep -q '\"title\":\"missed-2\"' '$work/sse2'"
check "resume does not repeat live-1" bash -c "! grep -q '\"title\":\"live-1\"' '$work/sse2'"
check "resumed ids are all past $live_seq" bash -c "awk '\$2 == \"id:\" && \$3 + 0 <= $live_seq { bad = 1 } END { exit bad }' '$work/sse2'"
kill "$sse_pid" 2>/dev/null || true; wait "$sse_pid" 2>/dev/null || true

# ---------------------------------------------------------------- 6. kill -9 between drop and apply
note "6. state change across a pushspoold kill -9"
target=$(item_of alice missed-1 || true)
check "missed-1 is unread before" bash -c "[[ \$(curl -s -H 'X-Pushspool-User: alice' -H 'Authorization: Bearer $alice_token' '$base/v1/inbox?limit=100' | jq -r '.items[] | select(.item == \"$target\") | .state.read') == false ]]"
daemon_pid=$(si_prop "$daemon_unit" MainPID)
restarts=$(si_prop "$daemon_unit" NRestarts)
kill -STOP "$daemon_pid"
status=$(api POST "/v1/inbox/$target/read" alice "" -- -H "Idempotency-Key: tap-$run") || true
event_id=$(jq -r .eventId "$work/body")
check "POST read while pushspoold is frozen: 202, read=true in the answer" \
  bash -c "[[ '$status' == 202 ]] && jq -e '.item.state.read == true' '$work/body' >/dev/null"
check "the same request again: the same event id" \
  bash -c "[[ '$(api POST "/v1/inbox/$target/read" alice "" -- -H "Idempotency-Key: tap-$run")' == 202 && \$(jq -r .eventId '$work/body') == '$event_id' ]]"
kill -KILL "$daemon_pid"
check "the manager restarts pushspoold after kill -9 (NRestarts $restarts -> $((restarts + 1)))" \
  si_wait_prop "$daemon_unit" NRestarts $((restarts + 1)) "$WAIT"
check "pushspoold active again" si_wait_prop "$daemon_unit" ActiveState active "$WAIT"
si_track_pid "$daemon_unit"
check "the read is applied after the restart" \
  poll "$WAIT" bash -c "[[ \$(curl -s -H 'X-Pushspool-User: alice' -H 'Authorization: Bearer $alice_token' '$base/v1/inbox?limit=100' | jq -r '.items[] | select(.item == \"$target\") | .state.read') == true ]]"
check "the same request after the restart: the same event id" \
  bash -c "[[ '$(api POST "/v1/inbox/$target/read" alice "" -- -H "Idempotency-Key: tap-$run")' == 202 && \$(jq -r .eventId '$work/body') == '$event_id' ]]"
spool_empty() { [[ -z "$(find "$spool/incoming" "$spool/processing" -mindepth 1 -print -quit)" ]]; }
check "the spool drains" poll "$WAIT" spool_empty
# Every journal record mentioning the event id (its key, or its body's eventId).
journal_count=$(ctl journal cat --json | grep -cF -- "$event_id" || true)
check "the journal holds event $event_id exactly once (found $journal_count)" test "$journal_count" -eq 1
check "$inbox_unit kept running through it (same pid $inbox_pid)" test "$(si_prop "$inbox_unit" MainPID)" = "$inbox_pid"

# ---------------------------------------------------------------- stop
note "stop"
check "systemctl --user stop $inbox_unit: Result=success" \
  bash -c "systemctl --user stop $inbox_unit && [[ \$(systemctl --user show -p Result --value $inbox_unit) == success ]]"
# The service must leave the shared listening socket usable (closed, not shut down).
again=$(curl -s --max-time 20 -o /dev/null -w '%{http_code}' -H 'X-Pushspool-User: alice' -H "Authorization: Bearer $alice_token" "$base/v1/inbox/counts") || true
check "the socket still listens and activates the service again (HTTP $again)" test "$again" = 200
si_track_pid "$inbox_unit"

echo
if ((failures)); then echo "inbox-live: $failures check(s) FAILED"; exit 1; fi
echo "inbox-live: all checks passed"
