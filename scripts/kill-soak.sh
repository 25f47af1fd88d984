#!/usr/bin/env bash
# The long crash test: cycles of start, SIGKILL, check against the real pushspoold while
# payloads keep arriving. Half of the kills land at a random moment, half at a random named
# point of the write path (PUSHSPOOL_TEST_STOP_AT: before the write, between write and sync,
# between sync and unlink, mid segment roll, mid checkpoint, during recovery). After every
# cycle: every file that left the spool is journaled, nothing twice; at the end the spool
# drains and `journal verify` is clean. Prints cycles per minute.
#
#   scripts/kill-soak.sh [--cycles N] [--lanes L] [--release]
#     --cycles N   default 1000; the figure in docs/development.md is for 10000
#     --lanes L    run L daemons side by side (own spool and state each), sharing the N cycles;
#                  a cycle mostly waits for its kill, so 4 lanes on 2 cores give ~3-4x the rate
#     --release    soak the release build of pushspoold (.build/release) instead of the debug one
#
# The test is RealFaultTests/killSoakLosesAndDoublesNothing, which CI runs with 40 cycles.
set -euo pipefail
cd "$(dirname "$0")/.."
cycles=1000
lanes=1
release=no
while [ $# -gt 0 ]; do
    case "$1" in
        --cycles) cycles="${2:?--cycles needs a number}"; shift 2 ;;
        --cycles=*) cycles="${1#--cycles=}"; shift ;;
        --lanes) lanes="${2:?--lanes needs a number}"; shift 2 ;;
        --lanes=*) lanes="${1#--lanes=}"; shift ;;
        --release) release=yes; shift ;;
        [0-9]*) cycles="$1"; shift ;;   # the old positional form
        -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "kill-soak.sh: unknown argument $1 (usage: kill-soak.sh [--cycles N] [--lanes L] [--release])" >&2; exit 64 ;;
    esac
done
case "$cycles" in ''|*[!0-9]*) echo "kill-soak.sh: --cycles needs a number" >&2; exit 64 ;; esac
case "$lanes" in ''|*[!0-9]*) echo "kill-soak.sh: --lanes needs a number" >&2; exit 64 ;; esac
export PATH="/opt/swift/usr/bin:$PATH"
swift build -Xswiftc -warnings-as-errors --build-tests
if [ "$release" = yes ]; then
    swift build -c release --product pushspoold
    swift build -c release --product pushspoolctl
    export PUSHSPOOL_BIN_DIR="$PWD/.build/release"
fi
PUSHSPOOL_KILL_SOAK_CYCLES="$cycles" PUSHSPOOL_KILL_SOAK_LANES="$lanes" \
  swift test --skip-build --filter 'RealFaultTests/killSoakLosesAndDoublesNothing'
