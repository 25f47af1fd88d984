#!/usr/bin/env bash
# Builds warning-free and runs every test. The README's test command and .ci/run both call this.
#
# Every stage runs even after another one failed (a red fuzz target should not hide a red
# systemd test behind it), fast stages first; at the end one table says what passed, what
# failed and how long each took, and the exit status is non-zero if any stage failed. Stages
# that need the debug build are skipped when it fails. `TEST_STAGES="unit media"` runs only the
# stages named (see the table for their names); the build always runs.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
export PATH="/opt/swift/usr/bin:$PATH"

results=()
failures=0
built=no

# stage NAME [needs-build] -- COMMAND...: runs COMMAND, records its outcome and goes on.
stage() {
    local name=$1; shift
    local needs_build=no
    if [[ $1 == needs-build ]]; then needs_build=yes; shift; fi
    [[ $1 == -- ]] && shift
    if [[ -n ${TEST_STAGES:-} && " $TEST_STAGES " != *" $name "* && $name != build ]]; then
        return 0
    fi
    if [[ $needs_build == yes && $built != yes ]]; then
        results+=("$(printf '%-22s %-24s %6s' "$name" "skipped (build failed)" "-")")
        return 0
    fi
    echo "=== test.sh: stage $name: $*"
    local start=$SECONDS status=0
    "$@" || status=$?
    local took=$((SECONDS - start)) outcome
    if ((status == 0)); then outcome=passed; else outcome="FAILED (exit $status)"; failures=$((failures + 1)); fi
    results+=("$(printf '%-22s %-24s %5ds' "$name" "$outcome" "$took")")
    echo "=== test.sh: stage $name $outcome in ${took}s"
    return 0
}

# The version is set once (Sources/PushPayload/Version.swift); debian/changelog must agree.
stage version -- ./packaging/build-deb --check-version

# One lock type, PushSystem's Locked (a pthread mutex TSan sees): a Synchronization.Mutex would
# blind the thread sanitizer stage below to everything it guards.
one_lock_type() {
    if grep -rnE '\bMutex *[<(]' Sources Tests Fuzz --include='*.swift'; then
        echo "test.sh: use PushSystem's Locked, not Synchronization.Mutex (see docs/development.md, \"Fuzzing and sanitizers\")" >&2
        return 1
    fi
}
stage lock-type -- one_lock_type

build() {
    swift build -Xswiftc -warnings-as-errors --build-tests && built=yes
}
# Called in this shell (no subshell), so `built` stays set for the stages after it.
stage build -- build

# Privilege separation: libvips (and the ~70 libraries it drags in) belongs to pushspool-fetch
# only. A target of pushspoold that depends on PushMedia again would link it back silently.
daemon_links_no_vips() {
    local daemon
    daemon="$(swift build --show-bin-path)/pushspoold"
    if ldd "$daemon" | grep -E 'libvips'; then
        echo "test.sh: $daemon links libvips; keep PushMedia out of PushspoolDaemon's dependencies (see Package.swift)" >&2
        return 1
    fi
}
stage no-vips needs-build -- daemon_links_no_vips

# The unit files as CI requires them (systemd-analyze verify/security, sysusers, tmpfiles,
# catalog): seconds, and needs no build.
stage unit-files -- ./scripts/check-units.sh

# The media tests run alone: they await real downloads against deadlines; on two cores the
# cooperative thread pool has two threads, and long synchronous suites (200,000-file scans,
# fault loops) occupy them for many seconds, so those awaits would resume late. They run
# after the fast unit tests and before the integration tests, which drive the real daemon
# (10,000-file ingest, 20 SIGKILL cycles) and load both cores.
#
# Fast set first: suites tagged `.slow` (crash enumerations, fault loops), `.nats` (a real
# nats-server) or `.root` (Tests/TestTraits) run after the rest of their kind, in the -slow
# stages; scripts/test-sets.py turns the tags into suite names, since `swift test` filters by
# name only. A red fast test shows in a minute or two instead of after the slow ones.
tagged_suites=$(python3 scripts/test-sets.py)
stage unit needs-build -- swift test --skip-build --parallel --skip IntegrationTests --skip PushMediaTests --skip "$tagged_suites"
stage media needs-build -- swift test --skip-build --parallel --filter PushMediaTests
stage integration needs-build -- swift test --skip-build --parallel --filter IntegrationTests --skip "$tagged_suites"
stage unit-slow needs-build -- swift test --skip-build --parallel --filter "$tagged_suites" --skip IntegrationTests
stage integration-slow needs-build -- swift test --skip-build --parallel --filter "$(python3 scripts/test-sets.py --targets IntegrationTests)"

# The server against its document: Schemathesis (every check) and a generated Python client
# against a live pushspoold and pushspool-inbox of this debug build (about 40 s).
stage api-conformance needs-build -- ./scripts/api-conformance.sh --bin-dir "$(swift build --show-bin-path)"

# Real journald and systemd user manager (need root; each cleans up after itself, one at a
# time): EventLog against journald, SystemdNotifier as a Type=notify unit with a watchdog,
# then the real daemon, then the inbox API in front of it.
stage journald needs-build -- ./scripts/systemd-integration/journald-events.sh
stage notifier needs-build -- ./scripts/systemd-integration/notifier-live.sh
stage daemon-live needs-build -- ./scripts/systemd-integration/daemon-live.sh
# pushspool-fetch behind its socket unit (Accept=yes), killed and replaced.
stage fetch-live needs-build -- ./scripts/systemd-integration/fetch-live.sh
# pushspool-inbox socket-activated next to pushspoold, driven with curl (about 30 s).
stage inbox-live needs-build -- ./scripts/systemd-integration/inbox-live.sh
# pushspoold@a/b/c from the template unit exporting into a 3-node NATS cluster (R3), a node
# killed mid-export, a durable pull consumer reading every id once (about 40 s).
stage instances-live needs-build -- ./scripts/systemd-integration/instances-live.sh
# The fleet: three ingest instances into an R3 cluster, two inbox nodes following the stream
# (Source=nats, the fleet drop-in); kill -9 of a NATS node, an instance and a node while pushes
# and opens flow; a node rebuilt from the stream (about 2-3 minutes).
stage fleet-live needs-build -- ./scripts/systemd-integration/fleet-live.sh

# Fuzzing: each target of Fuzz/ for 60 s under libFuzzer + ASan (one fuzz build, ~8 min in
# all), then the thread sanitizer on the daemon, journal and media suites (its own build
# directory, .build-tsan). Both have builds of their own, so they run even if the debug
# build failed, after the plain tests: a plain failure should show first.
stage fuzz -- ./scripts/fuzz-ci.sh
stage tsan -- ./scripts/sanitizers.sh

# The Debian package end to end: release build, lintian --pedantic, install with apt-get,
# the installed unit under the systemd manager, upgrade, remove, purge (about 5 minutes on
# top of the release build; it cleans up after itself and purges the package).
stage deb -- ./scripts/deb-test.sh

echo
echo "test.sh: results"
printf '%-22s %-24s %6s\n' stage outcome took
for line in "${results[@]}"; do echo "$line"; done
if ((failures > 0)); then
    echo "test.sh: $failures stage(s) failed" >&2
    exit 1
fi
echo "test.sh: every stage passed"
