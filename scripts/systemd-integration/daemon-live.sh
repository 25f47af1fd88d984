#!/usr/bin/env bash
# The real pushspoold under a real systemd user manager and a real journald (issue 5's
# "Done when" test). Builds nothing: run `swift build` first; the binaries are taken from
# `swift build --show-bin-path` (or $PUSHSPOOL_BIN_DIR).
#
#   scripts/systemd-integration/daemon-live.sh     # PASS/FAIL per check, exit 1 on any FAIL
#
# 1. start: `systemctl --user start` returns once READY=1 came; active; STATUS= in status.
# 2. payloads dropped with pushspoolctl are journaled exactly once, and journald has their
#    ingested event under PUSH_ID=<id> (a user by PUSH_USER_HASH= only); an invalid one is
#    refused (REASON_CODE=invalid_json)
#    into failed/ with a reason file.
# 3. reload with a changed configuration takes effect; an invalid one is refused
#    (reloadFailed event) and the previous configuration stays in force.
# 4. stop: Result=success, exit 0, incoming/ and processing/ empty.
# 5. watchdog (WatchdogSec=2s): no timeout while the daemon runs; frozen with SIGSTOP it is
#    aborted and restarted (Restart=on-failure) with a new pid, and every payload dropped
#    before, during and after the freeze is journaled exactly once.
#
# Cleanup (lib.sh's trap) always runs: manager, unit processes, journald we started,
# /run/systemd/system and the scratch directory under /tmp.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"

bin_dir=$(pushspool_bin_dir "$root")
daemon_bin=$bin_dir/pushspoold
ctl_bin=$bin_dir/pushspoolctl
for binary in "$daemon_bin" "$ctl_bin"; do
  [[ -x "$binary" ]] || { echo "daemon-live: $binary is missing; run 'swift build' first" >&2; exit 2; }
done
command -v jq >/dev/null || { echo "daemon-live: jq is missing (scripts/install-deps.sh installs it)" >&2; exit 2; }

# Generous limits: CI machines have 2 cores and are busy. Every wait polls; none is a fixed sleep.
WAIT=${DAEMON_LIVE_WAIT:-60}
unit=pushspoold.service
msg_ingested=19a1a1a31a6e4ff9b5e7b8c622799e9e
msg_refused=5d326ab3d41446d7a1523ec1366bfad2
msg_reload=823bcc0bce114b9986687fc41b7321ad
msg_reload_failed=384fb5cb41914ef39e9c7721b06dd716
msg_stopping=e3553bd12ef147bbbb3b5b1bd9b4dae5
msg_duplicate=2550fa7d0e7d4fc598a3fdb881634e66

failures=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
check() {  # check DESCRIPTION COMMAND...
  local what=$1; shift
  if "$@"; then pass "$what"; else fail "$what"; fi
}
note() { echo "---- $*"; }
# Waits until COMMAND succeeds, polling every 0.2 s for up to SECONDS of wall-clock time
# (lib.sh's si_wait_until counts tries, which stretch on a loaded machine; either is fine,
# this one keeps journald's sync requests down).
poll() {  # poll SECONDS COMMAND...
  local deadline=$(( $(date +%s) + $1 )); shift
  until "$@"; do
    (( $(date +%s) < deadline )) || return 1
    sleep 0.2
  done
}
elapsed() { echo "$(( ($(date +%s%N) - $1) / 1000000 )) ms"; }

# journald keeps earlier runs' entries (/run/log/journal): event queries look only at this run's
# time, and every id and file name carries this run's token.
since=$(date +%s)
# A command outside check() that fails ends the run (set -e); say which.
trap 'echo "FAIL: line $LINENO: \"$BASH_COMMAND\" failed (exit $?)"' ERR
si_setup
work=$(mktemp -d /tmp/pushspool-live.XXXXXX)
si_on_exit "rm -rf '$work'"
# On failure, leave the evidence in the log before it is cleaned up.
si_on_exit 'if ((failures)); then echo "---- unit journal (last 60 lines):"; si_journal '"$unit"' -o short-monotonic -n 60 2>/dev/null; fi'
spool=$work/spool state=$work/state conf=$work/pushspool.conf payloads=$work/payloads
mkdir -p "$payloads"
run=${work##*.}

write_config() {  # write_config [EXTRA LINES...]
  {
    printf '[Spool]\nDirectory=%s\nRescanIntervalSec=5s\n' "$spool"
    printf '[Journal]\nStateDirectory=%s\n' "$state"
    # No network in CI; nothing here carries media anyway.
    printf '[Media]\nEnabled=no\n'
    printf '[Status]\nIntervalSec=200ms\n'
    local line
    for line in "$@"; do printf '%s\n' "$line"; done
  } >"$conf.new"
  mv "$conf.new" "$conf"
}

ctl() { "$ctl_bin" --spool "$spool" --state-dir "$state" --config "$conf" "$@"; }

# A Mindbox iOS payload whose uniqueKey (the dedup key and PUSH_ID) is ID; extra JSON
# members may follow.
make_payload() {  # make_payload ID [EXTRA_JSON_MEMBERS]
  local id=$1 extra=${2:-}
  printf '{"aps":{"alert":{"title":"t %s","body":"b"}%s},"clickUrl":"https://x.example/","uniqueKey":"%s"}\n' \
    "$id" "$extra" "$id" >"$payloads/$id.json"
  echo "$payloads/$id.json"
}

dropped_ids=()
drop() {  # drop ID... — prints nothing, fails if pushspoolctl does
  local id files=()
  for id in "$@"; do files+=("$(make_payload "$id")"); dropped_ids+=("$id"); done
  ctl drop --platform ios "${files[@]}" >/dev/null
}

# Journal record counts per id, "COUNT ID" lines, from one pass over `journal cat --json`.
id_counts() { ctl journal cat --json | jq -r '.id' | sort | uniq -c; }
count_in_journal() {  # count_in_journal ID
  id_counts | awk -v id="$1" '$2 == id { n = $1 } END { print n + 0 }'
}
all_journaled() {  # all_journaled ID...
  local counts
  counts=$(id_counts) || return 1
  printf '%s\n' "$@" | awk 'NR == FNR { seen[$2] = $1; next } !($1 in seen) { missing++ } END { exit missing > 0 }' \
    <(echo "$counts") -
}
exactly_once() {  # exactly_once ID... — prints the offenders
  local counts
  counts=$(id_counts) || { echo "  journal cat failed"; return 1; }
  printf '%s\n' "$@" | awk 'NR == FNR { seen[$2] = $1; next }
    seen[$1] + 0 != 1 { printf "  %s journaled %d times\n", $1, seen[$1]; bad++ } END { exit bad > 0 }' <(echo "$counts") -
}
journaled_times() {  # journaled_times N ID — exactly N records with that id, else prints the count
  local n
  n=$(count_in_journal "$2") || { echo "  journal cat failed"; return 1; }
  [[ "$n" == "$1" ]] || { echo "  $2 journaled $n times, expected $1"; return 1; }
}
spool_empty() {
  [[ -d "$spool/incoming" && -d "$spool/processing" ]] &&
    [[ -z "$(find "$spool/incoming" "$spool/processing" -mindepth 1 -print -quit)" ]]
}
spool_listing() { echo "incoming: $(ls -A "$spool/incoming" | wc -l), processing: $(ls -A "$spool/processing" | wc -l)"; }

# journald: entries of the unit with FIELD=VALUE matches, as JSON lines.
events() { si_journal "$unit" --since "@$since" -o json "$@" 2>/dev/null || true; }
event_count() { events "$@" | grep -c . || true; }
has_event() { [[ "$(event_count "$@")" -ge 1 ]]; }
event_count_at_least() { local n=$1; shift; [[ "$(event_count "$@")" -ge "$n" ]]; }
status_text() { systemctl --user status --no-pager --lines=0 "$unit" 2>&1 || true; }
status_shows() { grep -q -- "$1" <<<"$(status_text)"; }
manager_logged() {  # manager_logged TEXT — the user manager's own log lines contain TEXT
  journalctl --sync >/dev/null 2>&1 || true
  { journalctl --no-pager -o cat _PID="$si_manager_pid" 2>/dev/null; cat "$si_runtime_dir/manager.log"; } | grep -qF -- "$1"
}

render_unit() {  # render_unit [render-user-unit.sh options...]
  # LimitCORE=0: the watchdog's SIGABRT must not leave a core dump on the CI machine.
  # ExecStopPost= records how each run ended ($$ is a literal $ in a unit file): the unit is
  # unloaded once inactive, so `systemctl show` no longer has ExecMainStatus= then.
  "$here/render-user-unit.sh" --exec "$daemon_bin --config $conf" --set LimitCORE=0 \
    --set "ExecStopPost=/bin/sh -c 'echo \"\$\$SERVICE_RESULT \$\$EXIT_CODE \$\$EXIT_STATUS\" >>$work/exits'" \
    "$@" >"$work/$unit"
  si_install_unit "$unit" "$work/$unit"
}

write_config
render_unit

# ---------------------------------------------------------------- 1. start
note "1. start"
started=$(date +%s%N)
if si_start "$unit"; then pass "systemctl --user start returned after READY=1 ($(elapsed "$started"))"
else fail "systemctl --user start (READY=1 within TimeoutStartSec)"; fi
check "ActiveState=active" si_wait_prop "$unit" ActiveState active 10
check "SubState=running" si_wait_prop "$unit" SubState running 10
check "Type=notify, NotifyAccess=main in force" \
  bash -c "[[ \$(systemctl --user show -p Type --value $unit) == notify && \$(systemctl --user show -p NotifyAccess --value $unit) == main ]]"
check "systemctl --user status shows the STATUS= line ('ingested 0, refused 0, ...')" \
  poll 10 status_shows "Status: \"ingested 0, refused 0, duplicates 0"
first_pid=$(si_prop "$unit" MainPID)

# ---------------------------------------------------------------- 2. payloads
note "2. payloads"
live_ids=(); for i in 1 2 3 4 5; do live_ids+=("live-$run-$i"); done
first_id=${live_ids[0]}
drop "${live_ids[@]}"
broken=$payloads/broken-$run.json
printf '{"aps": {"alert": "unterminated' >"$broken"
# drop prints "SOURCE<TAB>NAME IN incoming/".
broken_name=$(ctl drop --raw "$broken" | cut -f2)
check "ingested: all ${#live_ids[@]} payloads reach the journal" poll "$WAIT" all_journaled "${live_ids[@]}"
check "ingested: each id journaled exactly once (pushspoolctl journal cat --json)" exactly_once "${live_ids[@]}"
for id in "${live_ids[@]}"; do
  check "journald: journalctl PUSH_ID=$id finds the ingested event (MESSAGE_ID=$msg_ingested)" \
    poll 20 has_event PUSH_ID="$id" MESSAGE_ID="$msg_ingested"
done
ingested_event=$(events PUSH_ID="$first_id" MESSAGE_ID="$msg_ingested" | head -1)
check "journald: the event carries PUSH_VENDOR, JOURNAL_SEQ and _SYSTEMD_UNIT=$unit" \
  bash -c 'jq -e ".PUSH_VENDOR != null and .JOURNAL_SEQ != null and ._SYSTEMD_UNIT == \"'"$unit"'\"" >/dev/null <<<"$1"' _ "$ingested_event"
# [Log] UserIds=hash (the default): the event names the user by the keyed hash only.
hashed_id=hashed-$run person=person-$run
ctl drop --user "$person" --platform ios "$(make_payload "$hashed_id")" >/dev/null
dropped_ids+=("$hashed_id")
user_hash=$(ctl user hash "$person")
check "journald: journalctl PUSH_USER_HASH=\$(pushspoolctl user hash U) finds U's ingested event" \
  poll 20 has_event PUSH_USER_HASH="$user_hash" PUSH_ID="$hashed_id" MESSAGE_ID="$msg_ingested"
check "journald: no event of the unit names U in plain" \
  bash -c '! grep -qF -- "$1" <<<"$2"' _ "$person" "$(events)"
check "refused: $broken_name lands in failed/ with its reason file" \
  poll "$WAIT" test -f "$spool/failed/$broken_name" -a -f "$spool/failed/$broken_name.reason.json"
check "refused: the reason file says invalid_json" \
  bash -c "jq -e '.code == \"invalid_json\"' '$spool/failed/$broken_name.reason.json' >/dev/null 2>&1 || grep -q invalid_json '$spool/failed/$broken_name.reason.json'"
check "journald: refused event with REASON_CODE=invalid_json for $broken_name" \
  poll 20 has_event MESSAGE_ID="$msg_refused" REASON_CODE=invalid_json SPOOL_FILE="$broken_name"
check "incoming/ and processing/ drain" poll "$WAIT" spool_empty
# The live ids and the hashed-user one.
check "STATUS= counts them: 'ingested $((${#live_ids[@]} + 1)), refused 1'" \
  poll 10 status_shows "ingested $((${#live_ids[@]} + 1)), refused 1,"
# The same payload again: drop accepts it (the daemon is the one to find the duplicate), the
# daemon counts and reports it, and the journal still holds one record with that id. The
# count is taken after the duplicate event, so the daemon has finished with the second copy.
check "dropping the same payload again: pushspoolctl drop exits 0" bash -c '
  "$1" --spool "$2" --state-dir "$3" --config "$4" drop --platform ios "$5" >/dev/null' _ \
  "$ctl_bin" "$spool" "$state" "$conf" "$payloads/$first_id.json"
check "the duplicate is counted in STATUS= ('duplicates 1')" poll "$WAIT" status_shows "duplicates 1,"
check "journald: a duplicate event for PUSH_ID=$first_id" poll 20 has_event PUSH_ID="$first_id" MESSAGE_ID="$msg_duplicate"
check "not journaled twice: journal cat --json has exactly 1 record with id $first_id" \
  journaled_times 1 "$first_id"

# ---------------------------------------------------------------- 3. reload
note "3. reload"
# A payload nested 12 deep: accepted under the default [Limits] MaxDepth=32, refused (too_deep)
# once the reloaded configuration says MaxDepth=8.
deep='"x":{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":1}}}}}}}}}}'
reloads_before=$(event_count MESSAGE_ID="$msg_reload")
write_config '[Limits]' 'MaxDepth=8' '[Category shop]' 'Action=buy:Buy:foreground'  # a new section parses and applies too
check "systemctl --user reload succeeds" systemctl --user reload "$unit"
check "a reload event appears in journald" poll 20 event_count_at_least $((reloads_before + 1)) MESSAGE_ID="$msg_reload"
check "unit stays active after reload" si_wait_prop "$unit" ActiveState active 10
check "same main pid after reload" test "$(si_prop "$unit" MainPID)" = "$first_pid"
# Made after the reload event, so the new configuration is in force.
refused_before=$(event_count MESSAGE_ID="$msg_refused" REASON_CODE=too_deep)
make_payload deep-$run-1 ",$deep" >/dev/null
ctl drop --platform ios "$payloads/deep-$run-1.json" >/dev/null
check "new config applies: a 12-deep payload is refused (too_deep) under MaxDepth=8" \
  poll "$WAIT" event_count_at_least $((refused_before + 1)) MESSAGE_ID="$msg_refused" REASON_CODE=too_deep
failed_before=$(event_count MESSAGE_ID="$msg_reload_failed")
cp "$conf" "$work/good.conf"
write_config '[Limits]' 'MaxDepth=banana'
check "systemctl --user reload with an invalid config returns" systemctl --user reload "$unit"
check "a reloadFailed event appears in journald" \
  poll 20 event_count_at_least $((failed_before + 1)) MESSAGE_ID="$msg_reload_failed"
check "unit stays active after the failed reload" si_wait_prop "$unit" ActiveState active 10
check "same main pid after the failed reload" test "$(si_prop "$unit" MainPID)" = "$first_pid"
refused_before=$(event_count MESSAGE_ID="$msg_refused" REASON_CODE=too_deep)
make_payload deep-$run-2 ",$deep" >/dev/null
# pushspoolctl reads the configuration too; give it the last good one.
cp "$work/good.conf" "$conf.ctl"
"$ctl_bin" --spool "$spool" --state-dir "$state" --config "$conf.ctl" drop --platform ios "$payloads/deep-$run-2.json" >/dev/null
check "old config still applies: the 12-deep payload is still refused (MaxDepth=8 kept)" \
  poll "$WAIT" event_count_at_least $((refused_before + 1)) MESSAGE_ID="$msg_refused" REASON_CODE=too_deep
cp "$work/good.conf" "$conf"
check "incoming/ and processing/ drain" poll "$WAIT" spool_empty

# ---------------------------------------------------------------- 4. stop
note "4. stop"
stopping_before=$(event_count MESSAGE_ID="$msg_stopping")
started=$(date +%s%N)
check "systemctl --user stop returns" systemctl --user stop "$unit"
echo "     (stop took $(elapsed "$started"))"
check "ActiveState=inactive" si_wait_prop "$unit" ActiveState inactive 10
check "Result=success" si_wait_prop "$unit" Result success 5
last_exit=$(tail -1 "$work/exits" 2>/dev/null || true)
check "the daemon exited with status 0 (ExecStopPost saw '$last_exit')" test "$last_exit" = "success exited 0"
check "the stopping event was logged" \
  poll 20 event_count_at_least $((stopping_before + 1)) MESSAGE_ID="$msg_stopping"
check "no files left in incoming/ or processing/ ($(spool_listing))" spool_empty
check "process $first_pid is gone" bash -c "! kill -0 $first_pid 2>/dev/null"
check "everything dropped so far is journaled exactly once" exactly_once "${dropped_ids[@]}"

# ---------------------------------------------------------------- 5. watchdog
note "5. watchdog"
render_unit --set WatchdogSec=2s
started=$(date +%s%N)
check "start again with WatchdogSec=2s" si_start "$unit"
echo "     (start took $(elapsed "$started"))"
check "WatchdogUSec=2s is in force" test "$(si_prop "$unit" WatchdogUSec)" = 2s
pid_before=$(si_prop "$unit" MainPID)
restarts_before=$(si_prop "$unit" NRestarts)
# A healthy daemon pings from its loop: three watchdog periods pass without a timeout.
deadline=$(( $(date +%s) + 6 ))
healthy=1
while (( $(date +%s) < deadline )); do
  if [[ "$(si_prop "$unit" MainPID)" != "$pid_before" || "$(si_prop "$unit" ActiveState)" != active ]]; then
    healthy=0; break
  fi
  sleep 0.2
done
check "no watchdog timeout while the daemon runs normally (6 s at WatchdogSec=2s)" \
  bash -c "(( $healthy == 1 )) && [[ \$(systemctl --user show -p NRestarts --value $unit) == $restarts_before ]]"

before_ids=(); for i in $(seq 1 200); do before_ids+=("wd-$run-before-$i"); done
frozen_ids=(); for i in $(seq 1 10); do frozen_ids+=("wd-$run-frozen-$i"); done
after_ids=(); for i in $(seq 1 10); do after_ids+=("wd-$run-after-$i"); done
# Freeze in the middle of a burst (half of it dropped), so part of it may be claimed but not yet
# journaled, or journaled but not yet unlinked, and the rest arrives while the daemon is frozen.
before_files=(); for id in "${before_ids[@]}"; do before_files+=("$(make_payload "$id")"); done
dropped_ids+=("${before_ids[@]}")
# drop prints a line per file as it renames it into incoming/.
# Created first: the background job opens it only when it starts, and an absent file would
# make the wc below print nothing (an arithmetic syntax error, not a count).
: >"$work/burst.out"
ctl drop --platform ios "${before_files[@]}" >"$work/burst.out" &
drop_pid=$!
until (( $(wc -l <"$work/burst.out") >= ${#before_ids[@]} / 2 )) || ! kill -0 "$drop_pid" 2>/dev/null; do sleep 0.01; done
kill -STOP "$pid_before"
frozen_at=$(date +%s%N)
echo "     (SIGSTOP sent to $pid_before; files then in $(spool_listing))"
check "the burst of ${#before_ids[@]} was dropped (pushspoolctl drop exit 0)" wait "$drop_pid"
# Dropped while the daemon is frozen: only the restarted daemon can take these.
drop "${frozen_ids[@]}"
check "the manager restarts the frozen daemon (NRestarts $restarts_before -> $((restarts_before + 1)))" \
  si_wait_prop "$unit" NRestarts $((restarts_before + 1)) 120
restart_ms=$(( ($(date +%s%N) - frozen_at) / 1000000 ))
# WatchdogSec=2s + TimeoutAbortSec=10s + RestartSec=2s is about 14 s; without the unit's
# TimeoutAbortSec= the abort waits out TimeoutStopSec=60s (the backtracer keeps it alive).
check "restarted within 45 s of the freeze (took $restart_ms ms)" test "$restart_ms" -lt 45000
check "the manager logged the watchdog timeout" poll 20 manager_logged "$unit: Watchdog timeout"
check "the manager logged the unit's Result=watchdog" poll 20 manager_logged "$unit: Failed with result 'watchdog'"
check "ExecStopPost saw the frozen run end with SERVICE_RESULT=watchdog ($(grep -m1 '^watchdog' "$work/exits" || true))" \
  grep -q '^watchdog ' "$work/exits"
check "active again after the restart" si_wait_prop "$unit" ActiveState active "$WAIT"
si_track_pid "$unit"
pid_after=$(si_prop "$unit" MainPID)
check "new main pid ($pid_before -> $pid_after)" bash -c "[[ '$pid_after' != 0 && '$pid_after' != '$pid_before' ]]"
check "the frozen process $pid_before is gone" poll 30 bash -c "! kill -0 $pid_before 2>/dev/null"
drop "${after_ids[@]}"
all_wd=("${before_ids[@]}" "${frozen_ids[@]}" "${after_ids[@]}")
check "all ${#all_wd[@]} ids dropped before, during and after the freeze reach the journal" \
  poll "$WAIT" all_journaled "${all_wd[@]}"
check "incoming/ and processing/ drain" poll "$WAIT" spool_empty
check "every id dropped in this run (${#dropped_ids[@]}) is journaled exactly once" exactly_once "${dropped_ids[@]}"
check "pushspoolctl journal verify is clean" bash -c '"$@" >/dev/null' _ "$ctl_bin" --spool "$spool" --state-dir "$state" --config "$conf" journal verify
check "no new watchdog timeout after the restart" si_wait_prop "$unit" NRestarts $((restarts_before + 1)) 1
check "stop after the restart" systemctl --user stop "$unit"
last_exit=$(tail -1 "$work/exits" 2>/dev/null || true)
check "the restarted daemon exited with status 0 (ExecStopPost saw '$last_exit')" test "$last_exit" = "success exited 0"
check "no files left in incoming/ or processing/ ($(spool_listing))" spool_empty

# Cleanup, checked: the same function the EXIT trap runs (it is idempotent).
note "cleanup"
manager_pid=$si_manager_pid runtime_dir=$si_runtime_dir
si_cleanup
check "after cleanup: /run/systemd/system and $runtime_dir are gone" \
  bash -c "[[ ! -e /run/systemd/system || \$(cat /proc/1/comm) == systemd ]] && [[ ! -e '$runtime_dir' ]]"
check "after cleanup: the user manager ($manager_pid) is gone" bash -c "! kill -0 $manager_pid 2>/dev/null"
for pid in "$first_pid" "$pid_before" "$pid_after"; do
  check "after cleanup: daemon process $pid is gone" bash -c "! kill -0 $pid 2>/dev/null"
done
check "after cleanup: $work is gone" test ! -e "$work"

if ((failures)); then
  echo "daemon-live: $failures check(s) failed"
  exit 1
fi
echo "daemon-live: all checks passed"
