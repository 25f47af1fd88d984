#!/usr/bin/env bash
# Builds warning-free and runs every test. The README's test command and .ci/run both call this.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
export PATH="/opt/swift/usr/bin:$PATH"
swift build -Xswiftc -warnings-as-errors --build-tests
# Unit tests first, in parallel; then the integration tests, which run the real daemon on
# real files and load both cores: the media deadline tests measure wall-clock bounds and
# must not share the machine with a 20,000-file SIGKILL run.
swift test --skip-build --parallel --skip IntegrationTests
swift test --skip-build --parallel --filter IntegrationTests
# The unit files as CI requires them (systemd-analyze verify/security, sysusers, tmpfiles, catalog).
./scripts/check-units.sh
# The real daemon under a real journald and systemd user manager (needs root; cleans up after itself).
./scripts/systemd-integration/daemon-live.sh
