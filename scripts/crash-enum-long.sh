#!/bin/sh
# The long crash-point enumeration (issue 13, item 2): the same tests CI runs with about
# 2,000 crash states, here with 50 seeds for the zero and scramble damage models (102 states
# per crash point, about 50,000 in all) and a denser crash-during-recovery sample. Prints the
# number of crash states checked. Override with PUSHSPOOL_CRASH_ENUM_SEEDS / _PAYLOADS /
# _RECOVERY_STRIDE.
# Then the intake path (spool claim -> journal -> unlink / quarantine, the daemon's FilePipeline
# over the simulated file system): 150 dropped payloads and 10 seeds for zero and scramble
# (CI: 72 payloads, 1 seed), and a crash during the restart after every one of its mutating
# calls at every 7th intake crash point (CI: every 3rd call at every 41st point). Override with
# PUSHSPOOL_INTAKE_CRASH_PAYLOADS / _SEEDS / _RESTART_STRIDE / _RESTART_STEP.
set -eu
cd "$(dirname "$0")/.."
export PATH=/opt/swift/usr/bin:$PATH
swift build -Xswiftc -warnings-as-errors --build-tests
PUSHSPOOL_CRASH_ENUM_SEEDS="${PUSHSPOOL_CRASH_ENUM_SEEDS:-50}" \
PUSHSPOOL_CRASH_ENUM_RECOVERY_STRIDE="${PUSHSPOOL_CRASH_ENUM_RECOVERY_STRIDE:-5}" \
    swift test --skip-build --filter 'PushJournalTests.CrashEnumerationTests' 2>&1 | tee /dev/stderr | grep 'crash-enumeration:'
PUSHSPOOL_INTAKE_CRASH_PAYLOADS="${PUSHSPOOL_INTAKE_CRASH_PAYLOADS:-150}" \
PUSHSPOOL_INTAKE_CRASH_SEEDS="${PUSHSPOOL_INTAKE_CRASH_SEEDS:-10}" \
PUSHSPOOL_INTAKE_CRASH_RESTART_STRIDE="${PUSHSPOOL_INTAKE_CRASH_RESTART_STRIDE:-7}" \
PUSHSPOOL_INTAKE_CRASH_RESTART_STEP="${PUSHSPOOL_INTAKE_CRASH_RESTART_STEP:-1}" \
    swift test --skip-build --filter 'PushspoolDaemonTests.IntakeCrashEnumerationTests' 2>&1 | tee /dev/stderr | grep 'intake-crash-enumeration:'
