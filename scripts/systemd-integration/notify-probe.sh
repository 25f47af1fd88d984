#!/bin/sh
# A stand-in for pushspoold in the harness self-test: it speaks to systemd the way the
# daemon does. Status while "recovering", EXTEND_TIMEOUT_USEC, READY=1, WATCHDOG=1 from its
# main loop (stopped while $PROBE_DIR/wedge exists, which the watchdog must punish),
# RELOADING=1 then READY=1 on SIGHUP, STOPPING=1 on SIGTERM.
# systemd-notify runs as a child; --pid=$$ makes it speak for the main process, which
# NotifyAccess=main requires (allowed because the tests run as root).
dir=${PROBE_DIR:?PROBE_DIR must be set}
n() { systemd-notify --pid="$$" "$@"; }

echo "probe: starting as pid $$"
echo $$ >>"$dir/pids"
rm -f "$dir/wedge"   # a restarted probe starts healthy
n --status="recovering journal"
n EXTEND_TIMEOUT_USEC=10000000
sleep 0.3
n --ready --status="ingested 0, refused 0, duplicates 0, backlog 0"
echo "probe: ready"

reloads=0
trap 'reloads=$((reloads + 1)); n RELOADING=1 --status="reloading"; echo "probe: reload $reloads"; n --ready --status="reloaded $reloads"' HUP
trap 'n STOPPING=1 --status="draining"; echo "probe: stopping"; exit 0' TERM

while :; do
  if [ -e "$dir/wedge" ]; then
    echo "probe: wedged, no watchdog pings"
    while [ -e "$dir/wedge" ]; do sleep 0.1; done
  fi
  n WATCHDOG=1
  sleep 0.2
done
