#!/bin/sh
# The long crash-point enumeration (issue 13, item 2): the same test CI runs with a few
# thousand crash states, here with more seeds per damage model (>= 50,000 states) and a denser
# crash-during-recovery sample. Prints the number of crash states checked.
set -eu
cd "$(dirname "$0")/.."
export PATH=/opt/swift/usr/bin:$PATH
swift build -Xswiftc -warnings-as-errors --build-tests
PUSHSPOOL_CRASH_ENUM_SEEDS="${PUSHSPOOL_CRASH_ENUM_SEEDS:-40}" \
PUSHSPOOL_CRASH_ENUM_RECOVERY_STRIDE="${PUSHSPOOL_CRASH_ENUM_RECOVERY_STRIDE:-5}" \
    swift test --skip-build --filter 'PushJournalTests.CrashEnumerationTests' 2>&1 | tee /dev/stderr | grep 'crash-enumeration:'
