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
# Python tools from PyPI, pinned, in a venv of Debian's python3: Debian's pip refuses to
# install into the system's Python (PEP 668), and a venv needs no override.
# - openapi-spec-validator: the OpenAPI test (Tests/IntegrationTests/OpenAPIDocTests.swift)
#   validates docs/openapi.yaml with it;
# - schemathesis and openapi-python-client: scripts/api-conformance.sh drives the running
#   server with requests generated from docs/openapi.yaml, and through a client generated
#   from it (scripts/api-client-roundtrip.py).
testenv=/opt/pushspool-testenv
pins=(openapi-spec-validator==0.9.0 schemathesis==4.32.5 openapi-python-client==0.29.1)
installed=$("$testenv/bin/pip" freeze 2>/dev/null || true)
wanted=()
for pin in "${pins[@]}"; do
  grep -qixF "$pin" <<<"$installed" || wanted+=("$pin")
done
if ((${#wanted[@]})); then
  echo "install-deps: installing ${wanted[*]} in $testenv" >&2
  [[ -x "$testenv/bin/pip" ]] || /usr/bin/python3 -m venv "$testenv"
  "$testenv/bin/pip" install --quiet --disable-pip-version-check "${wanted[@]}"
fi
export PATH="/opt/swift/usr/bin:$PATH"
command -v swift >/dev/null || { echo "install-deps: Swift 6 toolchain not found (expected /opt/swift)" >&2; exit 1; }
