#!/usr/bin/env bash
# Builds warning-free and runs every test. The README's test command and .ci/run both call this.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
# The version is set once (Sources/PushPayload/Version.swift); debian/changelog must agree.
./packaging/build-deb --check-version
export PATH="/opt/swift/usr/bin:$PATH"
# One lock type, PushSystem's Locked (a pthread mutex TSan sees): a Synchronization.Mutex would
# blind the thread sanitizer stage below to everything it guards.
if grep -rnE '\bMutex *[<(]' Sources Tests Fuzz --include='*.swift'; then
    echo "test.sh: use PushSystem's Locked, not Synchronization.Mutex (see docs/development.md, "Fuzzing and sanitizers")" >&2
    exit 1
fi
swift build -Xswiftc -warnings-as-errors --build-tests
# Privilege separation: libvips (and the ~70 libraries it drags in) belongs to pushspool-fetch
# only. A target of pushspoold that depends on PushMedia again would link it back silently.
daemon="$(swift build --show-bin-path)/pushspoold"
if ldd "$daemon" | grep -E 'libvips'; then
    echo "test.sh: $daemon links libvips; keep PushMedia out of PushspoolDaemon's dependencies (see Package.swift)" >&2
    exit 1
fi
# Three runs. The media tests await real downloads against deadlines; on two cores the
# cooperative thread pool has two threads, and long synchronous suites (200,000-file scans,
# fault loops) occupy them for many seconds, so those awaits would resume late. They run
# alone, after the other unit tests, and before the integration tests, which drive the real
# daemon (10,000-file ingest, 20 SIGKILL cycles) and load both cores.
swift test --skip-build --parallel --skip IntegrationTests --skip PushMediaTests
swift test --skip-build --parallel --filter PushMediaTests
swift test --skip-build --parallel --filter IntegrationTests
# The server against its document: Schemathesis (every check) and a generated Python client
# against a live pushspoold and pushspool-inbox of this debug build (about 40 s).
./scripts/api-conformance.sh --bin-dir "$(swift build --show-bin-path)"
# Fuzzing: each target of Fuzz/ for 60 s under libFuzzer + ASan (one fuzz build, ~8 min in
# all), then the thread sanitizer on the daemon, journal and media suites (its own build
# directory, .build-tsan). Both after the plain tests: a plain failure should show first.
./scripts/fuzz-ci.sh
./scripts/sanitizers.sh
# The unit files as CI requires them (systemd-analyze verify/security, sysusers, tmpfiles, catalog).
./scripts/check-units.sh
# Real journald and systemd user manager (need root; each cleans up after itself, one at a
# time): EventLog against journald, SystemdNotifier as a Type=notify unit with a watchdog,
# then the real daemon, then the inbox API in front of it.
./scripts/systemd-integration/journald-events.sh
./scripts/systemd-integration/notifier-live.sh
./scripts/systemd-integration/daemon-live.sh
# pushspool-fetch behind its socket unit (Accept=yes), killed and replaced.
./scripts/systemd-integration/fetch-live.sh
# pushspool-inbox socket-activated next to pushspoold, driven with curl (about 30 s).
./scripts/systemd-integration/inbox-live.sh
# pushspoold@a/b/c from the template unit exporting into a 3-node NATS cluster (R3), a node
# killed mid-export, a durable pull consumer reading every id once (about 40 s).
./scripts/systemd-integration/instances-live.sh
# The fleet: three ingest instances into an R3 cluster, two inbox nodes following the stream
# (Source=nats, the fleet drop-in); kill -9 of a NATS node, an instance and a node while pushes
# and opens flow; a node rebuilt from the stream (about 2-3 minutes).
./scripts/systemd-integration/fleet-live.sh
# The Debian package end to end: release build, lintian --pedantic, install with apt-get,
# the installed unit under the systemd manager, upgrade, remove, purge (about 5 minutes on
# top of the release build; it cleans up after itself and purges the package).
./scripts/deb-test.sh
