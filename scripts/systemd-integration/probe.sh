#!/usr/bin/env bash
# Self-test of the harness: a real journald and a real systemd user manager run a notify
# probe through the user-mode variant of pushspoold.service, and everything is cleaned up.
#
#   scripts/systemd-integration/probe.sh          # prints PASS/FAIL lines, exit 0 if all pass
#
# The lead wires the real daemon in the same way: render the user unit with
# --exec '/path/to/pushspoold --config ...', si_install_unit, si_start, then assert.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"

failures=0
check() {  # check DESCRIPTION COMMAND...
  local what=$1; shift
  if "$@"; then echo "PASS: $what"; else echo "FAIL: $what"; failures=$((failures + 1)); fi
}
contains() { grep -q -- "$2" <<<"$1"; }

# 1. Cleanup runs on every way out; run sessions in child shells and look for leftovers.
leftovers() {
  [[ ! -e /run/systemd/system ]] && ! compgen -G '/run/pushspool-si.*' >/dev/null
}
for way in 'exit 3' 'kill -TERM $$' 'kill -INT $$' 'false'; do
  rc=0
  bash -c "set -e; source '$here/lib.sh'; si_setup; echo \$si_manager_pid >'${TMPDIR:-/tmp}/si-probe-manager'; $way" || rc=$?
  manager=$(cat "${TMPDIR:-/tmp}/si-probe-manager" 2>/dev/null || true); rm -f "${TMPDIR:-/tmp}/si-probe-manager"
  check "cleanup after '$way' (rc $rc): no /run/systemd/system, no runtime dir" leftovers
  check "cleanup after '$way': user manager $manager is gone" bash -c "[[ -n '$manager' ]] && ! kill -0 '$manager' 2>/dev/null"
done

# 2. A live session.
probe_dir=$(mktemp -d)
si_on_exit "rm -rf '$probe_dir'"
si_setup
check "journald socket present" test -S /run/systemd/journal/socket
check "/run/systemd/system exists during the session" test -d /run/systemd/system

unit_file="$probe_dir/pushspoold.service"
# Same Type/Notify/Exec/Restart/Watchdog lines as the system unit; only the watchdog period
# is shortened so the wedge test is quick, and no core file is left by its SIGABRT.
"$here/render-user-unit.sh" --exec "$here/notify-probe.sh" --set WatchdogSec=2s --set LimitCORE=0 \
  --env "PROBE_DIR=$probe_dir" >"$unit_file"
check "user unit keeps Type=notify, NotifyAccess=main, ExecReload, Restart=on-failure" \
  bash -c "grep -qx Type=notify '$unit_file' && grep -qx NotifyAccess=main '$unit_file' && grep -q '^ExecReload=/bin/kill -HUP' '$unit_file' && grep -qx Restart=on-failure '$unit_file'"
check "user unit drops the sandboxing (no User=, ProtectSystem=)" bash -c "! grep -qE '^(User|ProtectSystem|CapabilityBoundingSet)=' '$unit_file'"
si_install_unit pushspoold.service "$unit_file"

start=$(date +%s%N)
check "start blocks until READY=1 and succeeds" si_start pushspoold.service
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
check "start took at least the probe's 0.3 s recovery (${elapsed_ms} ms)" test "$elapsed_ms" -ge 300
check "ActiveState=active" si_wait_prop pushspoold.service ActiveState active 5
check "STATUS= shown by systemctl" si_wait_prop pushspoold.service StatusText "ingested 0, refused 0, duplicates 0, backlog 0" 5
check "WatchdogUSec=2s is in force" test "$(si_prop pushspoold.service WatchdogUSec)" = 2s

check "reload sends RELOADING=1 then READY=1" systemctl --user reload pushspoold.service
check "status after reload" si_wait_prop pushspoold.service StatusText "reloaded 1" 5

# Watchdog: the probe stops pinging; the manager must abort and restart it.
first_pid=$(si_prop pushspoold.service MainPID)
touch "$probe_dir/wedge"
check "watchdog restarts a wedged service" si_wait_prop pushspoold.service NRestarts 1 15
check "restarted service is ready again" si_wait_prop pushspoold.service StatusText "ingested 0, refused 0, duplicates 0, backlog 0" 10
si_track_pid pushspoold.service
check "main pid changed ($first_pid -> $(si_prop pushspoold.service MainPID))" test "$(si_prop pushspoold.service MainPID)" != "$first_pid"

journal=$(si_journal pushspoold.service -o cat)
check "unit output reached journald under _SYSTEMD_UNIT" contains "$journal" "probe: ready"
check "journal shows the reload" contains "$journal" "probe: reload 1"
manager_log=$(journalctl --no-pager -o cat _PID="$si_manager_pid" 2>/dev/null; cat "$si_runtime_dir/manager.log")
check "manager logged the watchdog timeout" contains "$manager_log" "Watchdog timeout"

check "stop succeeds" systemctl --user stop pushspoold.service
check "probe saw SIGTERM and sent STOPPING=1" contains "$(si_journal pushspoold.service -o cat)" "probe: stopping"
check "stopped cleanly (Result=success)" si_wait_prop pushspoold.service Result success 5

pids=$(cat "$probe_dir/pids")
si_cleanup
check "after cleanup: no /run/systemd/system, no runtime dir" leftovers
check "after cleanup: user manager gone" bash -c "! kill -0 '$si_manager_pid' 2>/dev/null"
for pid in $pids; do check "after cleanup: probe pid $pid gone" bash -c "! kill -0 '$pid' 2>/dev/null"; done

if ((failures)); then echo "probe: $failures check(s) failed"; exit 1; fi
echo "probe: all checks passed"
