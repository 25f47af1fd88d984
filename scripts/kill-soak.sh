#!/usr/bin/env bash
# The long crash test: SIGKILL the daemon at random moments 500 times (override with the
# first argument) during a 20,000-file ingest, checking after every kill that nothing that
# left the spool is missing from the journal and nothing is journaled twice.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"
swift build --build-tests
PUSHSPOOL_KILL_CYCLES="${1:-500}" PUSHSPOOL_KILL_FILES="${2:-20000}" \
  swift test --skip-build --filter sigkillDuringIngestLosesNothingAndDuplicatesNothing
