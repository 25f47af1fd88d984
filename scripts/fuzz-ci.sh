#!/usr/bin/env bash
# CI's fuzzing: every target of Fuzz/ for 60 s (FUZZ_SECONDS) under libFuzzer +
# AddressSanitizer, from the checked-in seeds, in a scratch work directory so the repository's
# corpora stay as committed. One fuzz build for all targets (about the time of a debug build);
# then 7 targets x 60 s. A crash or a broken invariant fails CI with the input's path.
set -euo pipefail
cd "$(dirname "$0")/.."
work="$(mktemp -d /tmp/pushspool-fuzz-ci.XXXXXX)"
trap 'rm -rf "$work"' EXIT
set +e
SECONDS_PER_TARGET="${FUZZ_SECONDS:-60}" WORK="$work" ./Fuzz/run-long.sh "$@"
status=$?
set -e
if [ "$status" -ne 0 ]; then
    # Keep the crashing inputs where CI keeps artifacts.
    mkdir -p .build/fuzz-crashes && cp -a "$work/crashes/." "$work"/*.log .build/fuzz-crashes/ 2>/dev/null || true
    echo "fuzz-ci: a target failed; inputs and logs in .build/fuzz-crashes/" >&2
fi
exit $status
