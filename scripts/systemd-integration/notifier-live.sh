#!/usr/bin/env bash
# Runs SystemdLiveTests (PushSystemdTests) as the main process of the user-mode variant of
# pushspoold.service under a real systemd user manager and journald, then checks what
# systemd saw: start blocked until READY=1, STATUS= with live counts, watchdog pings kept
# the unit alive past WatchdogSec=, clean exit, and the structured event in journald.
#   scripts/systemd-integration/notifier-live.sh     # after `swift build --build-tests`
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.."
# shellcheck source=lib.sh
source "$here/lib.sh"

bundle=$(ls -d "$PWD"/.build/debug/*.xctest 2>/dev/null | head -1)
[[ -x "$bundle" ]] || { echo "notifier-live: no test bundle; run swift build --build-tests" >&2; exit 1; }

failures=0
check() { local what=$1; shift; if "$@"; then echo "PASS: $what"; else echo "FAIL: $what"; failures=$((failures + 1)); fi; }

work=$(mktemp -d)
si_on_exit "rm -rf '$work'"
si_setup
"$here/render-user-unit.sh" \
  --exec "$bundle --testing-library swift-testing --filter SystemdLiveTests" \
  --set WatchdogSec=2s --set Restart=no --set LimitCORE=0 \
  --env PUSHSPOOL_LIVE_SYSTEMD=1 >"$work/pushspoold.service"
si_install_unit pushspoold.service "$work/pushspoold.service"

# This run's entries only: journald here lives as long as the machine, so earlier runs'
# events stay in it (they had grown past what one argument to bash -c may hold).
since=$(date +%s)
check "start returns after READY=1" si_start pushspoold.service
status_has_counts() { [[ "$(si_prop pushspoold.service StatusText)" =~ ^ingested\ [1-9][0-9]*,\ refused\ 0, ]]; }
check "STATUS= carries live counts while running" si_wait_until 3 status_has_counts
check "forced STATUS= after the loop" si_wait_prop pushspoold.service StatusText "live: loop finished" 10
check "exited on its own" si_wait_prop pushspoold.service ActiveState inactive 15
check "test passed inside the unit, no watchdog abort (Result=success, status 0)" \
  bash -c "[[ \$(systemctl --user show -p Result --value pushspoold.service) == success && \$(systemctl --user show -p ExecMainStatus --value pushspoold.service) == 0 ]]"
# The loop ran 4 s after READY=1 with WatchdogSec=2s: only the pings prevent a timeout.
# (The test process survives SIGABRT while Swift's backtracer runs, so look at the manager.)
no_watchdog_timeout() { ! journalctl --no-pager --since "@$since" -o cat _PID="$si_manager_pid" | grep -q 'Watchdog timeout'; }
check "watchdog pings kept systemd's watchdog quiet for 2x WatchdogSec" no_watchdog_timeout
si_journal pushspoold.service --since "@$since" -o json MESSAGE_ID=6050c3f9aa004cadafb3c0abd490d9b5 >"$work/ready-events.json" 2>/dev/null || true
ready_event_logged() {
  grep -q '"PUSH_ID":"live-ready"' "$work/ready-events.json" && grep -q '"_SYSTEMD_UNIT":"pushspoold.service"' "$work/ready-events.json"
}
check "ready event in journald with MESSAGE_ID, PUSH_ID and _SYSTEMD_UNIT" ready_event_logged
if ((failures)); then
  systemctl --user show -p Result -p ExecMainCode -p ExecMainStatus pushspoold.service
  echo "--- manager:"; journalctl --no-pager -o cat _PID="$si_manager_pid" | tail -10
  echo "--- unit output:"; si_journal pushspoold.service --since "@$since" -o cat | tail -40
  echo "notifier-live: $failures check(s) failed"; exit 1
fi
echo "notifier-live: all checks passed"
