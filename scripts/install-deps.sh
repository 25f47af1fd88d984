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
# The OpenAPI test (Tests/IntegrationTests/OpenAPIDocTests.swift) validates docs/openapi.yaml
# with openapi-spec-validator from PyPI, pinned, in a venv of Debian's python3: Debian's pip
# refuses to install into the system's Python (PEP 668), and a venv needs no override.
testenv=/opt/pushspool-testenv
validator=openapi-spec-validator==0.9.0
if [[ "$("$testenv/bin/pip" freeze 2>/dev/null | grep -i '^openapi-spec-validator==')" != "$validator" ]]; then
  echo "install-deps: installing $validator in $testenv" >&2
  /usr/bin/python3 -m venv "$testenv"
  "$testenv/bin/pip" install --quiet --disable-pip-version-check "$validator"
fi
export PATH="/opt/swift/usr/bin:$PATH"
command -v swift >/dev/null || { echo "install-deps: Swift 6 toolchain not found (expected /opt/swift)" >&2; exit 1; }
