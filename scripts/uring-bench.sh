#!/bin/bash
# io_uring against plain system calls for a spool reader's per-file work (issue 36; figures
# and conclusion in docs/performance.md, "Batched system calls"). Not part of the test run.
set -euo pipefail
cd "$(dirname "$0")/uring-bench"
if ! dpkg -s liburing-dev >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q liburing-dev >/dev/null
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
gcc -O2 -o "$out/spoolread" spoolread.c -luring
URING_BENCH_DIR="$out/work" "$out/spoolread"
