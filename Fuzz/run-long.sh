#!/usr/bin/env bash
# Runs every fuzz target (or those named) for SECONDS_PER_TARGET each (default 4 hours), one
# after the other, with libFuzzer + AddressSanitizer. The corpus grows in WORK/corpus/<target>
# (default Fuzz/.work, kept between runs and seeded from Fuzz/corpus/<target>); crashes land
# in WORK/crashes/ and stop the run with status 1. Copy a crash into
# Tests/FuzzRegressionTests/FuzzRegressions/<target>/ once it is fixed, so swift test replays it.
#
#   Fuzz/run-long.sh                          # all targets, 4 h each
#   SECONDS_PER_TARGET=600 Fuzz/run-long.sh json config
#   JOBS=2 Fuzz/run-long.sh journal-recovery  # libFuzzer -fork=2
set -euo pipefail
cd "$(dirname "$0")"
export PATH="/opt/swift/usr/bin:$PATH"
SECONDS_PER_TARGET="${SECONDS_PER_TARGET:-14400}"
WORK="${WORK:-$PWD/.work}"
JOBS="${JOBS:-1}"
TARGETS=("$@")
if [ ${#TARGETS[@]} -eq 0 ]; then
    TARGETS=(json envelope journal-frame journal-recovery journal-archive config media-sniff inbox-request)
fi

# One build serves every target (FUZZ_TARGET picks one at run time). SwiftPM hands swiftc
# -sanitize=fuzzer and -sanitize=address as two flags in no fixed order, and swiftc keeps only
# the last: the Swift code got either coverage (libFuzzer then reports ~88 counters, only the
# entry point's) or ASan, never both. The combined flag, passed last, gives both.
FLAGS=(--sanitize=fuzzer --sanitize=address -Xswiftc -sanitize=fuzzer,address -Xswiftc -warnings-as-errors)
swift build "${FLAGS[@]}" 2>&1 | grep -v "ld.gold: warning: Cannot export local symbol" | tail -3
BIN="$(swift build "${FLAGS[@]}" --show-bin-path)/pushspool-fuzz"
# Fail rather than fuzz blind: the library code must carry coverage counters.
if ! objdump -h "$(dirname "$BIN")/PushJournal.build/Format.swift.o" | grep -c sancov_cntrs >/dev/null; then
    echo "run-long.sh: the fuzz build has no coverage instrumentation in PushJournal" >&2
    exit 1
fi

# The recovery target makes and syncs a journal per input: on tmpfs the syncs cost nothing
# (measured: 46 inputs in 9.6 s on /dev/shm, 18.8 s on the disk).
if [ -z "${TMPDIR:-}" ] && [ -w /dev/shm ]; then export TMPDIR=/dev/shm; fi
mkdir -p "$WORK/crashes"
status=0
printf '%-18s %10s %8s %8s %8s %s\n' target execs/s runs cov ft result
for target in "${TARGETS[@]}"; do
    mkdir -p "$WORK/corpus/$target"
    log="$WORK/$target.log"
    fork=()
    [ "$JOBS" -gt 1 ] && fork=(-fork="$JOBS" -ignore_crashes=0)
    # -timeout: an input that takes 10 s is a hang worth a report; -rss_limit_mb: a leak or a
    # huge allocation is a finding too; -max_len: the daemon's payload limit is far above
    # this, but longer inputs only slow the search.
    set +e
    # SWIFT_BACKTRACE: the Swift runtime's backtracer reads memory ASan reports as a second crash.
    FUZZ_TARGET="$target" ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1" SWIFT_BACKTRACE=enable=no \
        "$BIN" "${fork[@]}" -max_total_time="$SECONDS_PER_TARGET" -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
        -print_final_stats=1 -artifact_prefix="$WORK/crashes/$target-" \
        "$WORK/corpus/$target" "corpus/$target" >"$log" 2>&1 </dev/null
    rc=$?
    set -e
    execs=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || true)
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || true)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || true)
    ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || true)
    result=ok
    if [ "$rc" -ne 0 ]; then
        result="FAILED (exit $rc; see $log)"
        status=1
        grep -E "ERROR: AddressSanitizer|Fatal error|deadly signal|Test unit written|SUMMARY" "$log" | head -8 >&2 || true
    fi
    printf '%-18s %10s %8s %8s %8s %s\n' "$target" "${execs:-?}" "${runs:-?}" "${cov:-?}" "${ft:-?}" "$result"
done
exit $status
