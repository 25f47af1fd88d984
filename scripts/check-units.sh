#!/usr/bin/env bash
# Checks the systemd integration files the way CI requires; exits non-zero on any problem.
#
#   1. systemd-analyze verify systemd/pushspoold.service, pushspool-inbox.service (with
#      pushspool-inbox.socket) and pushspool-fetch@.service (with pushspool-fetch.socket) are
#      clean (no output at all).
#   2. systemd-analyze security --offline=true rates pushspoold.service 1.0 or lower (it has no
#      network: media goes through pushspool-fetch), pushspool-inbox.service 1.5 or lower and
#      pushspool-fetch@.service 2.0 or lower (downloading is its job, so it keeps the network).
#      systemd/pushspoold@.service is verified as an instance.
#      pushspoold@.service (instances spawn their own fetcher inside their unit, so they keep
#      the network) is rated 1.5 or lower.
#   3. pushspool.sysusers and pushspool.tmpfiles apply cleanly to a scratch root.
#   4. pushspool.catalog compiles with journalctl --update-catalog and has every entry.
#
# About ExecStart=/usr/sbin/pushspoold: `verify` insists that the command exists and is
# executable, and on a build machine it is not installed. We do not install anything on
# the host. `verify --root=` does not help either: it resolves every unit (sysinit.target,
# ...) and every command (/bin/kill) inside that root too. So we verify a temporary copy
# of the unit, under the same file name, in which only the ExecStart= path is rewritten to
# a stub executable in the same temporary directory; the script checks that the copy
# differs from the original in that one line and nowhere else. `security --offline=true`
# does not look at the binary and runs on the original file.
set -euo pipefail
cd "$(dirname "$0")/.."

failures=0
fail() { echo "check-units: FAIL: $*" >&2; failures=$((failures + 1)); }

scratch=$(mktemp -d "${TMPDIR:-/tmp}/check-units.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/bin"

# check_service NAME SBIN_OR_BIN MAX_EXPOSURE [COMPANION...]: steps 1 and 2 for
# systemd/NAME.service (whose ExecStart= is /usr/SBIN_OR_BIN/NAME, or for a template NAME@ of
# /usr/SBIN_OR_BIN/NAME without the @); companions (its .socket) are verified with it, unchanged.
check_service() {
  local name=$1 bindir=$2 max_exposure=$3; shift 3
  local unit=systemd/$name.service dir=$scratch/unit-$name program=${name%@}
  mkdir -p "$dir"
  # 1. verify, on a copy whose ExecStart points at a stub.
  cp /bin/true "$scratch/bin/$program"
  sed "s|^ExecStart=/usr/$bindir/$program\$|ExecStart=$scratch/bin/$program|" "$unit" >"$dir/$name.service"
  local changed
  changed=$(diff "$unit" "$dir/$name.service" | grep -c '^[<>]' || true)
  if [[ "$changed" != 2 ]]; then
    fail "$unit must have exactly one line 'ExecStart=/usr/$bindir/$program' (rewrite changed $changed lines)"
  fi
  local files=("$dir/$name.service") companion
  for companion in "$@"; do cp "systemd/$companion" "$dir/"; files+=("$dir/$companion"); done
  # --man=no: Documentation= names the man pages the package installs, which a build machine
  # does not have (packaging/build-deb checks them with man --warnings). Any output is a finding.
  local verify_output
  if ! verify_output=$(systemd-analyze verify --man=no "${files[@]}" 2>&1) || [[ -n "$verify_output" ]]; then
    fail "systemd-analyze verify $unit $*:"$'\n'"$verify_output"
  else
    echo "check-units: systemd-analyze verify $unit $*: clean"
  fi

  # 2. security rating. --threshold is on the 0..100 scale (1.5 -> 15); the parsed number is
  # checked as well so the message shows it. A template is rated as an instance (NAME@i).
  local security_output security_rc exposure threshold
  threshold=$(awk -v m="$max_exposure" 'BEGIN { printf "%d", m * 10 }')
  security_output=$(systemd-analyze security --offline=true --threshold="$threshold" "$unit" 2>&1) && security_rc=0 || security_rc=$?
  exposure=$(sed -n "s/.*Overall exposure level for $name[a-z]*\.service: \([0-9.]*\).*/\1/p" <<<"$security_output")
  if [[ -z "$exposure" ]]; then
    fail "systemd-analyze security printed no exposure level for $unit:"$'\n'"$security_output"
  elif [[ "$security_rc" != 0 ]] || ! awk -v e="$exposure" -v m="$max_exposure" 'BEGIN { exit !(e <= m) }'; then
    fail "$unit: exposure level $exposure is above $max_exposure:"$'\n'"$(grep '✗' <<<"$security_output")"
  else
    echo "check-units: systemd-analyze security $unit: $exposure (limit $max_exposure)"
  fi
}

# No network in pushspoold (PrivateNetwork=yes, IPAddressDeny=any, AF_UNIX only).
check_service pushspoold sbin 1.0

# check_template: steps 1 and 2 for the template systemd/pushspoold@.service, as the
# instance pushspoold@example.service (verify and security refuse a bare template). Its
# ExecStart= carries arguments, so only the program path is rewritten to the stub.
check_template() {
  local unit=systemd/pushspoold@.service dir=$scratch/unit-template name=pushspoold@example max_exposure=1.5
  mkdir -p "$dir"
  cp /bin/true "$scratch/bin/pushspoold"
  sed "s|^ExecStart=/usr/sbin/pushspoold |ExecStart=$scratch/bin/pushspoold |" "$unit" >"$dir/pushspoold@.service"
  local changed
  changed=$(diff "$unit" "$dir/pushspoold@.service" | grep -c '^[<>]' || true)
  if [[ "$changed" != 2 ]]; then
    fail "$unit must have exactly one line 'ExecStart=/usr/sbin/pushspoold ...' (rewrite changed $changed lines)"
  fi
  cp "$dir/pushspoold@.service" "$dir/$name.service"
  local verify_output
  if ! verify_output=$(systemd-analyze verify --man=no "$dir/$name.service" 2>&1) || [[ -n "$verify_output" ]]; then
    fail "systemd-analyze verify $unit (as $name.service):"$'\n'"$verify_output"
  else
    echo "check-units: systemd-analyze verify $unit (as $name.service): clean"
  fi
  local original=$scratch/original-template
  mkdir -p "$original"
  cp "$unit" "$original/$name.service"
  local security_output security_rc exposure
  security_output=$(systemd-analyze security --offline=true --threshold=15 "$original/$name.service" 2>&1) && security_rc=0 || security_rc=$?
  exposure=$(sed -n "s/.*Overall exposure level for $name.service: \([0-9.]*\).*/\1/p" <<<"$security_output")
  if [[ -z "$exposure" ]]; then
    fail "systemd-analyze security printed no exposure level for $unit:"$'\n'"$security_output"
  elif [[ "$security_rc" != 0 ]] || ! awk -v e="$exposure" -v m="$max_exposure" 'BEGIN { exit !(e <= m) }'; then
    fail "$unit: exposure level $exposure is above $max_exposure:"$'\n'"$(grep '✗' <<<"$security_output")"
  else
    echo "check-units: systemd-analyze security $unit (as $name.service): $exposure (limit $max_exposure)"
  fi
}
check_template
# The inbox HTTP API: socket activation, verified with its socket unit.
check_service pushspool-inbox sbin 1.5 pushspool-inbox.socket
# The media fetcher: one instance per connection on its socket; it needs the network.
check_service pushspool-fetch@ sbin 2.0 pushspool-fetch.socket

# check_dropin UNIT DROPIN MIN MAX: UNIT's exposure with the drop-in packaging/DROPIN applied lies
# above MIN (the drop-in took effect) and at or below MAX.
check_dropin() {
  local name=$1 dropin=$2 min=$3 max=$4
  local root=$scratch/dropin-$name exposure
  mkdir -p "$root/$name.service.d"
  cp "systemd/$name.service" "$root/"
  cp "packaging/$dropin" "$root/$name.service.d/$dropin"
  exposure=$(cd "$root" && SYSTEMD_UNIT_PATH="$root:" systemd-analyze security --offline=true "$name.service" 2>&1 \
    | sed -n "s/.*Overall exposure level for $name\.service: \([0-9.]*\).*/\1/p")
  if [[ -z "$exposure" ]] || ! awk -v e="$exposure" -v lo="$min" -v hi="$max" 'BEGIN { exit !(e <= hi && e > lo) }'; then
    fail "$name.service with packaging/$dropin: exposure '$exposure' (expected above $min: the drop-in must take effect; at most $max)"
  else
    echo "check-units: systemd-analyze security $name.service + $dropin: $exposure (limit $max)"
  fi
}
# pushspoold with the network drop-in stays within the inbox's limit: enabling
# [Outbox]/[Export] costs the network settings and nothing else.
check_dropin pushspoold pushspoold-network.conf 0.5 1.5
# An inbox node that follows the stream ([Inbox] Source=nats) connects to NATS itself.
check_dropin pushspool-inbox pushspool-inbox-fleet.conf 0.5 1.5

# 3. sysusers and tmpfiles, applied to a scratch root (users resolve in its /etc/passwd).
root="$scratch/root"
mkdir -p "$root/etc" "$root/usr/lib/sysusers.d" "$root/usr/lib/tmpfiles.d" "$root/usr/lib/systemd/catalog"
cp systemd/pushspool.sysusers "$root/usr/lib/sysusers.d/pushspool.conf"
cp systemd/pushspool.tmpfiles "$root/usr/lib/tmpfiles.d/pushspool.conf"
if ! out=$(systemd-sysusers --root="$root" 2>&1) || ! grep -q '^pushspool:' "$root/etc/passwd" \
   || ! grep -q '^pushspool-drop:x:[0-9]*:pushspool$' "$root/etc/group"; then
  fail "systemd-sysusers systemd/pushspool.sysusers:"$'\n'"$out"
else
  echo "check-units: systemd-sysusers: pushspool user and pushspool-drop group created"
fi
if ! out=$(systemd-tmpfiles --root="$root" --create 2>&1) || [[ -n "$out" ]] \
   || [[ "$(stat -c %a "$root/var/spool/pushspool/incoming" 2>/dev/null)" != 2770 ]]; then
  fail "systemd-tmpfiles systemd/pushspool.tmpfiles:"$'\n'"$out"
else
  echo "check-units: systemd-tmpfiles: spool tree created"
fi

# 4. the catalog, compiled by journalctl itself.
cp systemd/pushspool.catalog "$root/usr/lib/systemd/catalog/"
entries=$(grep -c '^-- [0-9a-f]\{32\}$' systemd/pushspool.catalog || true)
if ! out=$(journalctl --root="$root" --update-catalog 2>&1) || [[ -n "$out" ]]; then
  fail "journalctl --update-catalog systemd/pushspool.catalog:"$'\n'"$out"
else
  listed=$(journalctl --root="$root" --list-catalog 2>/dev/null | grep -c ' pushspool: ' || true)
  if [[ "$listed" != "$entries" || "$entries" == 0 ]]; then
    fail "catalog has $entries entries but journalctl lists $listed"
  else
    echo "check-units: catalog: $listed entries compile"
  fi
fi

if ((failures)); then
  echo "check-units: $failures check(s) failed" >&2
  exit 1
fi
echo "check-units: all checks passed"
