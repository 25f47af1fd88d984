#!/usr/bin/env bash
# The README's main job: install what is needed, build, run pushspoold on a throw-away spool,
# drop spool-examples/ into it, print journal records as they land and the refused files with
# their reasons, then stop the daemon cleanly.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
export PATH="/opt/swift/usr/bin:$PATH"
echo "== building (release)" >&2
swift build -c release --product pushspoold >&2
swift build -c release --product pushspoolctl >&2
bin=$(swift build -c release --show-bin-path)

demo=$(mktemp -d /tmp/pushspool-demo.XXXXXX)
spool=$demo/spool; state=$demo/state; conf=$demo/pushspool.conf
cat > "$conf" <<CONF
# Demo configuration: media downloads are off because the examples point at hosts on the
# internet; see packaging/pushspool.conf for every setting.
[Media]
Enabled=no
CONF
ctl() { "$bin/pushspoolctl" --spool "$spool" --state-dir "$state" --config "$conf" "$@"; }

echo "== starting pushspoold on $demo" >&2
"$bin/pushspoold" --spool "$spool" --state-dir "$state" --config "$conf" 2>"$demo/daemon.log" &
daemon=$!
cleanup() { kill -TERM "$daemon" 2>/dev/null || true; wait "$daemon" 2>/dev/null || true; }
trap cleanup EXIT
for _ in $(seq 100); do [ -f "$state/status.json" ] || [ -d "$spool/incoming" ] && break; sleep 0.1; done
sleep 0.5

ctl journal tail -f --json > "$demo/records.jsonl" &
tailer=$!

echo "== dropping $(ls spool-examples/*.json | wc -l) example payloads" >&2
ctl drop --raw spool-examples/*.json >/dev/null

# Wait until every dropped file is journaled or quarantined.
for _ in $(seq 200); do
  left=$(find "$spool/incoming" "$spool/processing" -type f | wc -l)
  [ "$left" -eq 0 ] && break
  sleep 0.1
done
sleep 0.5
kill "$tailer" 2>/dev/null || true; wait "$tailer" 2>/dev/null || true

echo
echo "== journal records ($(wc -l < "$demo/records.jsonl"))"
cat "$demo/records.jsonl"
echo
echo "== refused payloads (spool failed/)"
ctl failed list
echo
echo "== journal verify"
ctl journal verify || true
echo
echo "== stopping pushspoold (SIGTERM)"
kill -TERM "$daemon"; wait "$daemon" && echo "pushspoold exited 0"
trap - EXIT
echo "daemon log: $demo/daemon.log   (demo files kept under $demo)"
