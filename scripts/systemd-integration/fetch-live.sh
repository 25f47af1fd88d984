#!/usr/bin/env bash
# pushspool-fetch behind a real systemd socket (Accept=yes), as pushspool-fetch.socket and
# pushspool-fetch@.service ship it, with pushspoold connecting to it. Builds nothing: run
# `swift build` first; binaries come from `swift build --show-bin-path` (or $PUSHSPOOL_BIN_DIR).
#
#   scripts/systemd-integration/fetch-live.sh     # PASS/FAIL per check, exit 1 on any FAIL
#
# 1. the socket unit listens; pushspoold (PUSHSPOOL_FETCHER_SOCKET=) connects and systemd
#    starts one pushspool-fetch@ instance, which is not a child of pushspoold.
# 2. a payload's image (from a loopback HTTP server) is stored by that instance, which runs
#    under its own seccomp filter and Landlock ruleset and logs so to the journal.
# 3. SIGKILL of the instance: pushspoold reconnects, systemd starts a new instance, the next
#    payload's image is stored; both payloads are journaled exactly once.
#
# The user manager cannot apply the system units' sandboxing (see docs/design/systemd-testing.md,
# "Traps"); the units are rendered from the shipped ones keeping the socket, Accept= and Exec lines.
# The sandboxing itself is checked by scripts/check-units.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"

bin_dir=$(pushspool_bin_dir "$root")
for binary in pushspoold pushspoolctl pushspool-fetch; do
  [[ -x "$bin_dir/$binary" ]] || { echo "fetch-live: $bin_dir/$binary is missing; run 'swift build' first" >&2; exit 2; }
done
command -v jq >/dev/null || { echo "fetch-live: jq is missing" >&2; exit 2; }
command -v python3 >/dev/null || { echo "fetch-live: python3 is missing (the loopback HTTP server)" >&2; exit 2; }

WAIT=${FETCH_LIVE_WAIT:-60}
failures=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
check() { local what=$1; shift; if "$@"; then pass "$what"; else fail "$what"; fi; }
poll() {  # poll SECONDS COMMAND...
  local deadline=$(( $(date +%s) + $1 )); shift
  until "$@"; do
    (( $(date +%s) < deadline )) || return 1
    sleep 0.2
  done
}
trap 'echo "FAIL: line $LINENO: \"$BASH_COMMAND\" failed (exit $?)"' ERR

si_setup
# This run's journal entries only: journald outlives the run, and instance names repeat.
since=$(date +%s)
work=$(mktemp -d /tmp/pushspool-fetch-live.XXXXXX)
si_on_exit "rm -rf '$work'"
spool=$work/spool state=$work/state conf=$work/pushspool.conf
socket_path=$si_runtime_dir/pushspool-fetch.sock

# The loopback image server: python's http.server on an ephemeral port, serving one PNG.
mkdir -p "$work/www"
printf '%s' 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==' \
  | base64 -d >"$work/www/a.png"
cp "$work/www/a.png" "$work/www/b.png"
python3 -c '
import http.server, functools, sys
handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[1])
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
open(sys.argv[2], "w").write(str(server.server_address[1]))
server.serve_forever()
' "$work/www" "$work/port" >"$work/http.log" 2>&1 &
http_pid=$!
si_on_exit "kill $http_pid 2>/dev/null || true"
poll 20 test -s "$work/port"
port=$(cat "$work/port")

# The shipped units in user mode: socket path under the manager's runtime dir, no SocketUser=
# (the user manager cannot chown), the binary under test as ExecStart=.
sed -e "s|^ListenSequentialPacket=.*|ListenSequentialPacket=$socket_path|" -e '/^Socket\(User\|Group\)=/d' \
  "$root/systemd/pushspool-fetch.socket" >"$work/pushspool-fetch.socket"
{
  echo "[Unit]"
  echo "Description=pushspool-fetch (user-mode rendering of systemd/pushspool-fetch@.service)"
  echo "[Service]"
  grep -E '^(Type|StandardInput|StandardOutput|StandardError|Restart|TimeoutStopSec|Environment)=' \
    "$root/systemd/pushspool-fetch@.service"
  echo "ExecStart=$bin_dir/pushspool-fetch"
} >"$work/pushspool-fetch@.service"
si_install_unit pushspool-fetch.socket "$work/pushspool-fetch.socket"
si_install_unit pushspool-fetch@.service "$work/pushspool-fetch@.service"
systemctl --user start pushspool-fetch.socket
check "pushspool-fetch.socket listens at $socket_path" poll "$WAIT" test -S "$socket_path"

cat >"$conf" <<CONF
[Spool]
Directory=$spool
StableAgeSec=0
[Journal]
StateDirectory=$state
[Media]
Enabled=yes
AllowHTTP=yes
AllowNetworks=127.0.0.0/8
CONF
PUSHSPOOL_FETCHER_SOCKET=$socket_path "$bin_dir/pushspoold" --config "$conf" >"$work/daemon.log" 2>&1 &
daemon_pid=$!
si_on_exit "kill -TERM $daemon_pid 2>/dev/null; wait $daemon_pid 2>/dev/null || true"

instances() { systemctl --user list-units --no-legend --plain --state=running 'pushspool-fetch@*.service' | awk '{ print $1 }'; }
instance_pid() { systemctl --user show -p MainPID --value "$1"; }
one_instance() { [[ "$(instances | wc -l)" == 1 ]]; }
check "pushspoold's connection started one pushspool-fetch@ instance" poll "$WAIT" one_instance
first=$(instances | head -1)
first_pid=$(instance_pid "$first")
si_track_pid "$first"
parent=$(awk '{ print $4 }' "/proc/$first_pid/stat")
check "the instance (pid $first_pid) is systemd's, not a child of pushspoold ($daemon_pid; parent $parent)" \
  test "$parent" != "$daemon_pid"

ctl() { "$bin_dir/pushspoolctl" --spool "$spool" --state-dir "$state" --config "$conf" "$@"; }
drop_with_image() {  # drop_with_image ID IMAGE
  printf '{"aps":{"alert":{"title":"t","body":"b"},"mutable-content":1},"clickUrl":"https://x.example/","imageUrl":"http://127.0.0.1:%s/%s","uniqueKey":"%s"}\n' \
    "$port" "$2" "$1" >"$work/$1.json"
  ctl drop --platform ios "$work/$1.json" >/dev/null
}
media_status() { ctl journal cat --json 2>/dev/null | jq -r --arg id "$1" 'select(.id == $id) | .media.status'; }
stored() { [[ "$(media_status "$1")" == stored ]]; }

poll "$WAIT" test -d "$spool/incoming"
drop_with_image "live-a-$$" a.png
check "the first image is stored through the socket-activated fetcher" poll "$WAIT" stored "live-a-$$"
# Its own seccomp filter (the user manager applies none of the unit's), logged to the journal.
seccomp_on() { grep -Eq '^Seccomp:[[:space:]]+2$' "/proc/$first_pid/status"; }
check "the instance runs under its own seccomp filter (Seccomp: 2)" seccomp_on
seccomp_logged() { journalctl --no-pager --since "@$since" -u "$first" 2>/dev/null | grep -q 'seccomp filter active'; }
check "the instance logged that its seccomp filter is active" poll "$WAIT" seccomp_logged
# Its own Landlock ruleset too: writes only beneath the media store, whoever started it.
landlock_logged() { journalctl --no-pager --since "@$since" -u "$first" 2>/dev/null | grep -q 'landlock active'; }
check "the instance logged that its Landlock ruleset is active" poll "$WAIT" landlock_logged

kill -KILL "$first_pid"
new_instance() { local name; name=$(instances | head -1); [[ -n "$name" && "$name" != "$first" ]]; }
check "after SIGKILL of $first, pushspoold reconnects and systemd starts a new instance" poll "$WAIT" new_instance
si_track_pid "$(instances | head -1)"
drop_with_image "live-b-$$" b.png
check "the next image is stored by the new instance" poll "$WAIT" stored "live-b-$$"
check "pushspoold logged the lost fetcher" grep -q "media fetcher lost" "$work/daemon.log"
once() { [[ "$(ctl journal cat --json | jq -r '.id' | grep -c "^live-")" == 2 ]]; }
check "both payloads journaled exactly once" once

kill -TERM "$daemon_pid"
wait "$daemon_pid" && status=0 || status=$?
check "pushspoold stops cleanly (exit $status)" test "$status" == 0
no_instances() { [[ -z "$(instances)" ]]; }
check "the instance exits when pushspoold closes its connection" poll "$WAIT" no_instances

if ((failures)); then
  echo "---- pushspoold log:"; tail -30 "$work/daemon.log"
  echo "fetch-live: $failures check(s) failed"
  exit 1
fi
echo "fetch-live: all checks passed"
