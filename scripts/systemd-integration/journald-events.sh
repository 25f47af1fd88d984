#!/usr/bin/env bash
# Runs the PushSystemd tests that need a real journald (JournaldLiveTests): starts journald
# through lib.sh (no user manager needed), runs them, cleans up.
#   scripts/systemd-integration/journald-events.sh     # after `swift build --build-tests`
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.."
# shellcheck source=lib.sh
SI_MANAGER=0
source "$here/lib.sh"
si_setup
export PATH="/opt/swift/usr/bin:$PATH"
PUSHSPOOL_LIVE_JOURNALD=1 swift test --skip-build --filter JournaldLiveTests
