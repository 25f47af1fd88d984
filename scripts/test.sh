#!/usr/bin/env bash
# Builds warning-free and runs every test. The README's test command and .ci/run both call this.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
export PATH="/opt/swift/usr/bin:$PATH"
swift build -Xswiftc -warnings-as-errors --build-tests
swift test --skip-build --parallel
# The unit files as CI requires them (systemd-analyze verify/security, sysusers, tmpfiles, catalog).
./scripts/check-units.sh
# The real daemon under a real journald and systemd user manager (needs root; cleans up after itself).
./scripts/systemd-integration/daemon-live.sh
