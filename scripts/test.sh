#!/usr/bin/env bash
# Builds warning-free and runs every test. The README's test command and .ci/run both call this.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
export PATH="/opt/swift/usr/bin:$PATH"
swift build -Xswiftc -warnings-as-errors --build-tests
swift test --skip-build --parallel
