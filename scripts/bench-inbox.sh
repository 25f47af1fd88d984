#!/usr/bin/env bash
# Benchmarks pushspool-inbox on loopback with wrk (Debian's wrk):
#   1. GET /v1/inbox (first page of 20) for a user holding 100,000 items among 1,000,000:
#      latency distribution at a modest closed-loop load, then peak throughput;
#   2. 1,000 concurrent SSE streams held open: the server's RSS before and after;
#   3. slowloris: 200 clients trickling headers while wrk measures normal requests.
# Debian ships wrk, not wrk2: it cannot hold a fixed request rate, so (1) reports the
# latency percentiles of a closed loop (4 connections) and the peak rate separately.
#
#   scripts/bench-inbox.sh [BIN_DIR]     (default .build/release; build with
#                                          swift build -c release --product pushspool-inbox --product pushspool-bench)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-.build/release}
# The index builder may come from another build (a debug pushspool-bench is fine).
bench_bin=${BENCH_BIN:-$bin}
items=${ITEMS:-1000000}
user_items=${USER_ITEMS:-100000}
work=$(mktemp -d "${TMPDIR:-/tmp}/bench-inbox.XXXXXX")
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
ulimit -n 8192 || true

echo "== building an index: $items items, $user_items for user 'big'"
out=$("$bench_bin/pushspool-bench" nc --items "$items" --user-items "$user_items" --calls 1 --dir "$work" --keep)
state=$(sed -n 's/.* in \(\/.*\)$/\1/p' <<<"$out" | head -1)
mkdir -p "$work/spool"/{tmp,incoming,processing,failed}
printf 'bench-secret-0123456789abcdef\n' >"$work/secret"
cat >"$work/conf" <<CONF
[Inbox]
TokenSecretFile=$work/secret
MaxConnections=2000
MaxConnectionsPerIP=2000
ConnectionTimeoutSec=10s
CONF
"$bin/pushspool-inbox" --listen 127.0.0.1:0 --spool "$work/spool" --state-dir "$state" --config "$work/conf" >"$work/out" 2>"$work/err" &
pid=$!; pids+=("$pid")
for _ in $(seq 100); do grep -q listening "$work/out" && break; sleep 0.1; done
port=$(sed -n 's/.*:\([0-9]*\)$/\1/p' "$work/out")
token=$(printf %s big | openssl dgst -sha256 -mac HMAC -macopt key:bench-secret-0123456789abcdef | awk '{print $2}')
cat >"$work/auth.lua" <<LUA
wrk.headers["Authorization"] = "Bearer $token"
wrk.headers["X-Pushspool-User"] = "big"
LUA
url="http://127.0.0.1:$port/v1/inbox?limit=20"
curl -sf -H "Authorization: Bearer $token" -H "X-Pushspool-User: big" "$url" >/dev/null

echo "== GET /v1/inbox, closed loop, 4 connections, 10 s"
wrk -t1 -c4 -d10s --latency -s "$work/auth.lua" "$url" | sed -n '/Latency Distribution/,/Requests\/sec/p'
echo "== GET /v1/inbox, peak, 64 connections, 10 s"
wrk -t2 -c64 -d10s --latency -s "$work/auth.lua" "$url" | grep -E 'Requests/sec|99%'

rss() { awk '/VmRSS/ {print $2 " kB"}' "/proc/$pid/status"; }
echo "== 1,000 SSE streams: RSS before $(rss)"
python3 - "$port" "$token" 1000 <<'PY' &
import socket, sys, time
port, token, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
socks = []
for i in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(f"GET /v1/inbox/stream HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nX-Pushspool-User: big\r\n\r\n".encode())
    socks.append(s)
time.sleep(8)
PY
streams=$!; pids+=("$streams")
sleep 5
echo "   open streams: $(curl -s "http://127.0.0.1:$port/metrics" | awk '/^pushspool_inbox_open_streams/ {print $2}'), RSS with them $(rss)"
echo "   GET /v1/inbox meanwhile:"
wrk -t1 -c4 -d3s --latency -s "$work/auth.lua" "$url" | grep -E 'Requests/sec|99%'
wait "$streams" || true

echo "== slowloris: 200 clients sending one header byte a second, 10 s"
python3 - "$port" 200 <<'PY' &
import socket, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]
for s in socks: s.sendall(b"GET /v1/inbox HTTP/1.1\r\nX-Slow: ")
for _ in range(12):
    for s in socks:
        try: s.sendall(b"a")
        except OSError: pass
    time.sleep(1)
PY
slow=$!; pids+=("$slow")
sleep 1
wrk -t1 -c4 -d8s --latency -s "$work/auth.lua" "$url" | grep -E 'Requests/sec|99%|Non-2xx|Socket errors' || true
wait "$slow" || true
echo "== done"
