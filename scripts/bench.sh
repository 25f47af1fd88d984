#!/bin/sh
# The performance suite, one command: builds the release binaries, runs
# `pushspool-bench all` and rewrites the results table in docs/performance.md (between the
# bench-table markers). `scripts/bench.sh --full` adds the 1,000,000-file backlog and a
# 5,000,000-record journal (slow: staging a million files takes minutes). The export rows
# need Debian's nats-server (/usr/sbin/nats-server); without it they say "not measured". The
# idle and drop-to-visible rows run the release pushspoold and pushspool-inbox built here.
# Not part of scripts/test.sh: figures need a quiet machine, and they are not pass/fail.
set -eu
cd "$(dirname "$0")/.."
swift build -c release --product pushspool-bench
swift build -c release --product pushspoold
swift build -c release --product pushspoolctl
swift build -c release --product pushspool-inbox
exec .build/release/pushspool-bench all "$@" --write-readme-table docs/performance.md
