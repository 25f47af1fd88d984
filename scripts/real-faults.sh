#!/usr/bin/env bash
# The real-fault suite (Tests/IntegrationTests/RealFaultTests.swift) against the real
# pushspoold: ENOSPC on a loop-mounted ext4 and on a tmpfs, the state directory's ext4 turning
# read-only under the daemon, SIGKILL at each named point of the write path. Needs root
# (mount, losetup, mkfs.ext4 from e2fsprogs); the tests skip with a reason otherwise.
#
#   scripts/real-faults.sh            the CI size (3 kills per named point), as run by
#                                     `swift test --filter IntegrationTests` in scripts/test.sh
#   scripts/real-faults.sh --long     100 kills per named point, then the kill soak's 10,000 cycles
#   scripts/real-faults.sh --rounds N N kills per named point
#
# Each test detaches its own mounts; the trap below also detaches any left by a test process
# that died, and the loop devices go with them.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=3
long=no
while [ $# -gt 0 ]; do
    case "$1" in
        --long) long=yes; rounds=100; shift ;;
        --rounds) rounds="${2:?--rounds needs a number}"; shift 2 ;;
        -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "real-faults.sh: unknown argument $1" >&2; exit 64 ;;
    esac
done
case "$rounds" in ''|*[!0-9]*) echo "real-faults.sh: --rounds needs a number" >&2; exit 64 ;; esac

sweep() {
    # Mount points of this suite live under the temp directory as pushspool-it-realfault-*.
    # Runs at every exit: finding none is the usual case and must not change the status.
    local status=$?
    findmnt -rn -o TARGET | { grep -E '/pushspool-it-realfault-[^/]+/' || true; } | sort -r | while read -r target; do
        umount -l "$target" || true
    done
    exit "$status"
}
trap sweep EXIT
trap 'exit 130' INT TERM

export PATH="/opt/swift/usr/bin:$PATH"
swift build -Xswiftc -warnings-as-errors --build-tests
PUSHSPOOL_REAL_FAULT_ROUNDS="$rounds" swift test --skip-build --filter 'RealFaultTests' \
    --skip 'killSoakLosesAndDoublesNothing'
if [ "$long" = yes ]; then
    ./scripts/kill-soak.sh --cycles 10000 --lanes 6 --release
fi
