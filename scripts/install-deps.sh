#!/usr/bin/env bash
# Installs the Debian packages pushspool needs (as root). Idempotent and quiet when all are present.
set -euo pipefail
cd "$(dirname "$0")"
mapfile -t packages < <(grep -v '^\s*#' apt-packages | grep -v '^\s*$')
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
export PATH="/opt/swift/usr/bin:$PATH"
command -v swift >/dev/null || { echo "install-deps: Swift 6 toolchain not found (expected /opt/swift)" >&2; exit 1; }
