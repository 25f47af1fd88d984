#!/usr/bin/env bash
# Benchmarks pushspool-inbox on loopback with wrk (Debian's wrk):
#   1. GET /v1/inbox (first page of 20) for a user holding 100,000 items among 1,000,000:
#      latency distribution at a fixed 1,000 requests/s (an open-loop generator compiled
#      from the C below: wrk cannot hold a rate), with one HTTP thread and with the thread
#      pool (--threads = CPUs); then wrk's closed-loop distribution and peak throughput;
#   2. 1,000 concurrent SSE streams held open: the server's RSS before and after;
#   3. slowloris: 200 clients trickling headers while wrk measures normal requests.
# Debian ships wrk, not wrk2: it cannot hold a fixed request rate, so the fixed-rate figures
# come from rate.c (below); wrk gives the closed-loop percentiles and the peak rate.
# RATE (1000), RATE_SECONDS (20), THREADS (CPUs online) change the fixed-rate run.
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
start_server() {  # start_server THREADS — sets pid and port
  "$bin/pushspool-inbox" --listen 127.0.0.1:0 --threads "$1" --spool "$work/spool" --state-dir "$state" --config "$work/conf" >"$work/out" 2>"$work/err" &
  pid=$!; pids+=("$pid")
  for _ in $(seq 100); do grep -q listening "$work/out" && break; sleep 0.1; done
  port=$(sed -n 's/.*:\([0-9]*\)$/\1/p' "$work/out")
}
stop_server() { kill "$pid"; wait "$pid" 2>/dev/null || true; }
threads=${THREADS:-$(nproc)}
rate=${RATE:-1000}
rate_seconds=${RATE_SECONDS:-20}
cat >"$work/rate.c" <<'C'
/* Fixed-rate HTTP/1.1 load generator for scripts/bench-inbox.sh (Debian's wrk cannot hold a
   rate). Open loop: request i is due at start + i/rate whatever the server does; its latency
   is measured from when it was due, so a stall counts against every request it delays
   (no coordinated omission). Keep-alive connections, one request in flight on each.
   usage: rate PORT PATH HEADERS_FILE RATE SECONDS CONNECTIONS   (host 127.0.0.1) */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct conn { int fd; int busy; double due; char buf[1 << 16]; size_t have; };

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
static int cmp(const void *a, const void *b) { double x = *(const double *) a, y = *(const double *) b; return (x > y) - (x < y); }

static int dial(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(fd, (struct sockaddr *) &a, sizeof a) != 0) { perror("connect"); exit(1); }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

/* Length of a complete response at the start of buf, 0 if incomplete. */
static size_t complete(const char *buf, size_t have, int *status) {
    const char *end = memmem(buf, have, "\r\n\r\n", 4);
    if (!end) return 0;
    size_t head = (size_t) (end - buf) + 4, length = 0;
    *status = atoi(buf + 9);
    const char *p = buf;
    while ((p = memmem(p, head - (size_t) (p - buf), "\n", 1)) != NULL) {
        p++;
        if (strncasecmp(p, "content-length:", 15) == 0) { length = strtoul(p + 15, NULL, 10); break; }
    }
    return have >= head + length ? head + length : 0;
}

int main(int argc, char **argv) {
    if (argc != 7) { fprintf(stderr, "usage: rate PORT PATH HEADERS_FILE RATE SECONDS CONNECTIONS\n"); return 64; }
    int port = atoi(argv[1]), nconn = atoi(argv[6]);
    double rate = atof(argv[4]), seconds = atof(argv[5]);
    char headers[4096] = "", request[8192];
    FILE *f = fopen(argv[3], "r");
    if (f) { size_t n = fread(headers, 1, sizeof headers - 1, f); headers[n] = 0; fclose(f); }
    int reqlen = snprintf(request, sizeof request, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s\r\n", argv[2], headers);
    long total = (long) (rate * seconds);
    double *lat = calloc((size_t) total, sizeof *lat);
    struct conn *c = calloc((size_t) nconn, sizeof *c);
    int ep = epoll_create1(0);
    for (int i = 0; i < nconn; i++) {
        c[i].fd = dial(port);
        struct epoll_event ev = { .events = EPOLLIN, .data.u32 = (uint32_t) i };
        epoll_ctl(ep, EPOLL_CTL_ADD, c[i].fd, &ev);
    }
    long next = 0, done = 0, errors = 0, queued_max = 0;
    double start = now() + 0.05;
    while (done < total) {
        double t = now();
        /* Send every due request that has an idle connection. */
        while (next < total && start + next / rate <= t) {
            /* Round robin over the idle connections, so none sits idle past the server's
               ConnectionTimeoutSec= at low rates. */
            static int last = -1;
            int k = -1;
            for (int j = 1; j <= nconn; j++) { int i = (last + j) % nconn; if (!c[i].busy) { k = i; break; } }
            if (k < 0) break;
            last = k;
            long behind = (long) ((t - start) * rate) - next;
            if (behind > queued_max) queued_max = behind;
            c[k].busy = 1; c[k].due = start + next / rate; c[k].have = 0;
            if (write(c[k].fd, request, (size_t) reqlen) != reqlen) { perror("write"); return 1; }
            next++;
        }
        double wait = next < total ? start + next / rate - now() : 0.1;
        int ms = wait > 0 ? (int) (wait * 1000) : 0;
        struct epoll_event evs[64];
        int n = epoll_wait(ep, evs, 64, ms);
        for (int e = 0; e < n; e++) {
            struct conn *k = &c[evs[e].data.u32];
            ssize_t r = read(k->fd, k->buf + k->have, sizeof k->buf - k->have);
            if (r <= 0) {
                /* An idle keep-alive connection the server timed out: dial again. Mid-request
                   it is a failure. */
                if (k->busy) { fprintf(stderr, "connection closed by the server mid-request\n"); return 1; }
                epoll_ctl(ep, EPOLL_CTL_DEL, k->fd, NULL);
                close(k->fd);
                k->fd = dial(port);
                struct epoll_event ev = { .events = EPOLLIN, .data.u32 = evs[e].data.u32 };
                epoll_ctl(ep, EPOLL_CTL_ADD, k->fd, &ev);
                continue;
            }
            k->have += (size_t) r;
            int status = 0;
            if (k->busy && complete(k->buf, k->have, &status)) {
                lat[done++] = now() - k->due;
                if (status != 200) errors++;
                k->busy = 0;
            }
        }
    }
    double elapsed = now() - start;
    qsort(lat, (size_t) done, sizeof *lat, cmp);
#define P(q) (lat[(long) ((done - 1) * (q))] * 1000)
    printf("requests %ld in %.2f s = %.0f req/s (target %.0f), non-200 %ld, most behind schedule %ld\n",
           done, elapsed, done / elapsed, rate, errors, queued_max);
    printf("latency ms: p50 %.3f  p90 %.3f  p99 %.3f  p99.9 %.3f  max %.3f\n", P(0.5), P(0.9), P(0.99), P(0.999), lat[done - 1] * 1000);
    return 0;
}
C
cc -O2 -Wall -Wextra -Werror -o "$work/rate" "$work/rate.c"
token=$(printf %s big | openssl dgst -sha256 -mac HMAC -macopt key:bench-secret-0123456789abcdef | awk '{print $2}')
cat >"$work/auth.lua" <<LUA
wrk.headers["Authorization"] = "Bearer $token"
wrk.headers["X-Pushspool-User"] = "big"
LUA
printf 'Authorization: Bearer %s\r\nX-Pushspool-User: big\r\n' "$token" >"$work/headers"
path="/v1/inbox?limit=20"

for t in 1 "$threads"; do
  start_server "$t"
  curl -sf -H "Authorization: Bearer $token" -H "X-Pushspool-User: big" "http://127.0.0.1:$port$path" >/dev/null
  # Warm the page cache and the prepared statements, then measure.
  "$work/rate" "$port" "$path" "$work/headers" "$rate" 2 16 >/dev/null
  echo "== GET $path at a fixed $rate req/s for $rate_seconds s, 16 connections, --threads $t"
  "$work/rate" "$port" "$path" "$work/headers" "$rate" "$rate_seconds" 16 | sed 's/^/   /'
  [[ "$t" == "$threads" ]] || stop_server
done
url="http://127.0.0.1:$port$path"

echo "== GET /v1/inbox, closed loop, 4 connections, 10 s, --threads $threads"
wrk -t1 -c4 -d10s --latency -s "$work/auth.lua" "$url" | sed -n '/Latency Distribution/,/Requests\/sec/p'
echo "== GET /v1/inbox, peak, 64 connections, 10 s, --threads $threads"
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
"$work/rate" "$port" "$path" "$work/headers" "$rate" 3 16 | sed 's/^/   /'
wait "$streams" || true
sleep 1
echo "   streams closed: $(curl -s "http://127.0.0.1:$port/metrics" | awk '/^pushspool_inbox_open_streams/ {print $2}') open, RSS after $(rss)"

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
echo "   normal requests meanwhile, fixed $rate req/s for 8 s:"
"$work/rate" "$port" "$path" "$work/headers" "$rate" 8 16 | sed 's/^/   /'
wait "$slow" || true
echo "== done"
