#!/usr/bin/env bash
# The Debian package end to end, on this machine (issue 12's "Done when"): builds it with
# packaging/build-deb (lintian --pedantic included), installs it with
# `apt-get install ./dist/pushspool_*.deb`, and checks
#   1. the binaries run without the Swift toolchain: ldd names nothing under /opt/swift, and
#      --version runs with `env -i` and /opt/swift hidden behind an empty tmpfs (a private
#      mount namespace); `man pushspoolctl` works; bash completion completes subcommands;
#   2. sysusers and tmpfiles made the user, the group and the directories with the modes of
#      systemd/pushspool.tmpfiles; the catalog trigger compiled the catalog;
#   3. under a systemd manager (scripts/systemd-integration/lib.sh: journald + a user manager,
#      as the live tests use; the installed unit rendered in user mode, running as the
#      pushspool user) the unit starts, ingests a dropped file (journal tail, journalctl -u),
#      quarantines a bad one (which completion then offers), and stops cleanly;
#   4. an upgrade to a rebuilt package (same payload, higher version) keeps a changed conffile;
#   5. `remove` keeps the configuration, the journal and the spool; `purge` removes them.
# The package is purged at the end, also on failure (and the pushspool user and group
# removed if the test created them). Needs root; refuses to run when
# pushspool is already installed (it would be purged).
#
# Usage: scripts/deb-test.sh [--skip-build]     (--skip-build: use the packages in dist/)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
skip_build=0
[[ "${1:-}" == --skip-build ]] && skip_build=1
(( EUID == 0 )) || { echo "deb-test: must run as root" >&2; exit 2; }
if dpkg-query -W -f='${Status}' pushspool 2>/dev/null | grep -q 'installed\|config-files'; then
  echo "deb-test: pushspool is already installed here; this test would purge it" >&2; exit 2
fi

failures=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
check() { local what=$1; shift; if "$@"; then pass "$what"; else fail "$what"; fi; }
note() { echo "---- $*"; }
poll() {  # poll SECONDS COMMAND...
  local deadline=$(( $(date +%s) + $1 )); shift
  until "$@"; do (( $(date +%s) < deadline )) || return 1; sleep 0.2; done
}
export DEBIAN_FRONTEND=noninteractive
# Debian keeps system users on purge; a user and group this test made are removed again.
had_user=0 had_group=0
getent passwd pushspool >/dev/null && had_user=1
getent group pushspool-drop >/dev/null && had_group=1
work=$(mktemp -d /tmp/pushspool-debtest.XXXXXX)
cleanup() {
  set +e
  if dpkg-query -W -f='${Status}' pushspool 2>/dev/null | grep -q 'installed\|config-files'; then
    apt-get purge -y -qq pushspool >/dev/null 2>&1
  fi
  ((had_user)) || { userdel pushspool 2>/dev/null; groupdel pushspool 2>/dev/null; }
  ((had_group)) || groupdel pushspool-drop 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

if ((skip_build == 0)); then
  note "packaging/build-deb"
  packaging/build-deb
fi
version=$(dpkg-parsechangelog -S Version)
deb=$(ls dist/pushspool_"$version"_*.deb)
# While /run/systemd/system exists (a live test session), maintainer scripts think systemd is
# PID 1 and call systemctl; the apt steps must run outside such a session.
if [[ -d /run/systemd/system && "$(cat /proc/1/comm)" != systemd ]]; then
  echo "deb-test: /run/systemd/system exists (a systemd live test is running?); try again later" >&2; exit 2
fi

note "apt-get install ./$deb"
apt-get install -y -qq "./$deb" >"$work/install.log" 2>&1 || { cat "$work/install.log"; fail "apt-get install"; exit 1; }
pass "apt-get install ./$deb"

note "1. binaries without the toolchain, man page, completion"
for binary in /usr/sbin/pushspoold /usr/bin/pushspoolctl; do
  check "$binary: ldd names no /opt/swift library, none missing" \
    bash -c "! ldd $binary | grep -q -e /opt/swift -e 'not found'"
done
check "pushspoold links no libvips (only pushspool-fetch decodes images)" bash -c '! ldd /usr/sbin/pushspoold | grep -q libvips'
out=$(env -i PATH=/usr/sbin:/usr/bin pushspoold --version)
check "env -i pushspoold --version prints '$out' (= pushspoold $version)" test "$out" == "pushspoold $version"
hidden=$(unshare --mount sh -c 'mount -t tmpfs none /opt/swift 2>/dev/null || mount -t tmpfs none /opt; ls /opt/swift 2>/dev/null | wc -l; env -i PATH=/usr/sbin:/usr/bin pushspoold --version; env -i PATH=/usr/sbin:/usr/bin pushspoolctl --version')
check "with /opt/swift hidden (empty tmpfs): $(echo "$hidden" | tr '\n' ' ')" \
  test "$hidden" == $'0\n'"pushspoold $version"$'\n'"pushspoolctl $version"
check "man pushspoolctl renders (NAME section)" bash -c 'MANWIDTH=80 man pushspoolctl 2>/dev/null | grep -q "pushspoolctl - drop payloads"'
check "man 8 pushspoold and man 5 pushspool.conf render" bash -c 'man 8 pushspoold >/dev/null 2>&1 && man 5 pushspool.conf >/dev/null 2>&1'
complete_words() {  # complete_words WORD... -> what bash completion offers for the last word
  bash -c 'source /usr/share/bash-completion/bash_completion
           source /usr/share/bash-completion/completions/pushspoolctl
           COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
           _pushspoolctl; printf "%s\n" "${COMPREPLY[@]}"' complete "$@"
}
check "completion: 'pushspoolctl jo' -> journal" test "$(complete_words pushspoolctl jo)" == journal
check "completion: 'pushspoolctl journal t' -> tail" test "$(complete_words pushspoolctl journal t)" == tail
# README.md and docs/ as in the repository, uncompressed so their relative links resolve.
check "README.md and docs/ in /usr/share/doc/pushspool, uncompressed" \
  test -f /usr/share/doc/pushspool/README.md -a -f /usr/share/doc/pushspool/docs/configuration.md \
    -a -f /usr/share/doc/pushspool/docs/design/journal.md -a -f /usr/share/doc/pushspool/docs/architecture.svg
check "the installed pushspool.conf(5) points at the installed guides" \
  bash -c 'MANWIDTH=200 man 5 pushspool.conf 2>/dev/null | grep -q /usr/share/doc/pushspool/docs'

# Release binaries only: zstd archives written by retention read back. An optimised build
# once passed ISA-L's crc32_iscsi a length with garbage in its register's upper half, and
# reading any archive crashed (exit 139) while debug builds, which the unit tests use, did not.
archive_check() {
  local dir="$work/archive"; mkdir -p "$dir/spool" "$dir/state"
  printf '[Media]\nEnabled=no\n[Inbox]\nEnabled=no\n[Journal]\nSegmentSize=64K\nRetainBytes=64K\nArchive=zstd\n' >"$dir/p.conf"
  local ctl=(pushspoolctl --spool "$dir/spool" --state-dir "$dir/state" --config "$dir/p.conf") pad i
  pad=$(head -c 300 /dev/zero | tr '\0' x)
  for i in $(seq 1 400); do printf '{"aps":{"alert":"archive %d %s"}}' "$i" "$pad" >"$dir/p$i.json"; done
  pushspoold --spool "$dir/spool" --state-dir "$dir/state" --config "$dir/p.conf" >"$dir/d1.log" 2>&1 & local pid=$!
  poll 30 grep -q "pushspoold ready" "$dir/d1.log" || return 1
  "${ctl[@]}" drop --user archive-user --platform ios "$dir"/p*.json >/dev/null || return 1
  poll 60 bash -c "[ \"\$(${ctl[*]} journal cat --json 2>/dev/null | wc -l)\" -ge 400 ]" || return 1
  kill "$pid"; wait "$pid" || true
  # Retention runs at start: the sealed segments go to archive/.
  pushspoold --spool "$dir/spool" --state-dir "$dir/state" --config "$dir/p.conf" >"$dir/d2.log" 2>&1 & pid=$!
  poll 30 grep -q "pushspoold ready" "$dir/d2.log" || return 1
  kill "$pid"; wait "$pid" || true
  ls "$dir/state/journal/archive/"*.seg.zst >/dev/null 2>&1 || return 1
  [ "$("${ctl[@]}" journal cat --archive --json | wc -l)" -eq 400 ] || return 1
  "${ctl[@]}" user export archive-user >/dev/null
}
check "release binaries: zstd archives read back (journal cat --archive, user export)" archive_check

note "2. sysusers, tmpfiles, catalog"
check "user pushspool exists, shell nologin" bash -c 'getent passwd pushspool | grep -q ":/usr/sbin/nologin$"'
check "group pushspool-drop has member pushspool" bash -c 'getent group pushspool-drop | grep -q ":pushspool$"'
# The modes and owners are the ones systemd/pushspool.tmpfiles documents.
while read -r type path mode user group _; do
  [[ "$type" == d ]] || continue
  got=$(stat -c '%a %U %G' "$path" 2>/dev/null || echo missing)
  check "tmpfiles: $path is ${mode#0} $user $group (got $got)" test "$got" == "${mode#0} $user $group"
done < <(grep -v '^#' systemd/pushspool.tmpfiles)
check "catalog compiled by the trigger (journalctl --list-catalog)" \
  bash -c '[[ $(journalctl --list-catalog 2>/dev/null | grep -c " pushspool: ") -eq $(grep -c "^-- [0-9a-f]\{32\}$" systemd/pushspool.catalog) ]]'
check "the unit was enabled by the postinst snippet" test -L /etc/systemd/system/multi-user.target.wants/pushspoold.service
check "pushspool-inbox.socket was enabled by the postinst snippet" test -L /etc/systemd/system/sockets.target.wants/pushspool-inbox.socket
check "the postinst generated the inbox token secret, root-only (0600 root root)" \
  bash -c '[[ $(stat -c "%a %U %G" /etc/pushspool/inbox-token-secret) == "600 root root" && $(wc -c </etc/pushspool/inbox-token-secret) -ge 33 ]]'
check "pushspool-inbox links libmicrohttpd and the package depends on it (shlibs)" \
  bash -c 'ldd /usr/sbin/pushspool-inbox | grep -q libmicrohttpd && dpkg-query -W -f="\${Depends}" pushspool | grep -q libmicrohttpd'
check "pushspoold links Debian's ICU (the outbox's transliteration) and the package depends on it (shlibs)" \
  bash -c 'ldd /usr/sbin/pushspoold | grep -q libicui18n && dpkg-query -W -f="\${Depends}" pushspool | grep -q libicu'
check "pushspool-inbox --version" bash -c 'pushspool-inbox --version | grep -q "^pushspool-inbox "'
check "man pushspool-inbox" bash -c 'MANWIDTH=80 man -P cat pushspool-inbox 2>/dev/null | grep -q "serve the push Notification Center"'
check "conffile registered" bash -c "dpkg-query -W -f='\${Conffiles}' pushspool | grep -q /etc/pushspool/pushspool.conf"

note "3. the installed unit under a systemd manager"
token=debtest-$$-$(date +%s)
(
  set -euo pipefail
  # shellcheck source=systemd-integration/lib.sh
  source "$root/scripts/systemd-integration/lib.sh"
  si_setup
  # The daemon runs as pushspool and must reach the manager's notify socket
  # ($XDG_RUNTIME_DIR/systemd/notify, 0755: connecting needs write permission); this
  # session's runtime directory is otherwise root's alone.
  chmod 0711 "$XDG_RUNTIME_DIR" "$XDG_RUNTIME_DIR/systemd"
  chmod 0777 "$XDG_RUNTIME_DIR/systemd/notify"
  # The installed unit in user mode (render-user-unit keeps Type/Exec/Watchdog/...); the
  # user manager runs as root, so it can still run the daemon as the package's user.
  "$root/scripts/systemd-integration/render-user-unit.sh" --unit /usr/lib/systemd/system/pushspoold.service \
    --exec /usr/sbin/pushspoold --set User=pushspool --set Group=pushspool \
    --set SupplementaryGroups=pushspool-drop >"$work/pushspoold.service"
  grep -q '^ExecStart=/usr/sbin/pushspoold$' "$work/pushspoold.service"
  si_install_unit pushspoold.service "$work/pushspoold.service"
  since=$(date '+%Y-%m-%d %H:%M:%S')
  si_start pushspoold.service
  echo "PASS: unit started (READY=1): $(si_prop pushspoold.service ActiveState), status '$(si_prop pushspoold.service StatusText)'"
  runs_as=$(ps -o user:20= -p "$(si_prop pushspoold.service MainPID)")
  if [[ "$runs_as" == pushspool ]]; then echo "PASS: the daemon runs as $runs_as"; else echo "FAIL: the daemon runs as '$runs_as'"; exit 1; fi
  printf '{"aps":{"alert":{"title":"deb test","body":"%s"}},"id":"%s"}\n' "$token" "$token" >"$work/good.json"
  printf 'not json %s\n' "$token" >"$work/bad-$token.json"
  pushspoolctl drop --user deb-test --platform ios "$work/good.json"
  pushspoolctl drop --raw "$work/bad-$token.json"
  in_journal() { pushspoolctl journal tail -n 5 2>/dev/null | grep -q "$token"; }
  ingested_event() { si_journal pushspoold.service -q -o cat --since "$since" MESSAGE_ID=19a1a1a31a6e4ff9b5e7b8c622799e9e | grep -q .; }
  quarantined() { pushspoolctl failed list 2>/dev/null | grep -q "bad-$token"; }
  if poll 60 in_journal; then
    echo "PASS: dropped file ingested: $(pushspoolctl journal tail -n 5 | grep "$token")"
  else
    echo "FAIL: dropped file not in the journal"; exit 1
  fi
  if poll 30 ingested_event; then
    echo "PASS: journalctl -u pushspoold.service: $(si_journal pushspoold.service -q -o cat --since "$since" MESSAGE_ID=19a1a1a31a6e4ff9b5e7b8c622799e9e | tail -1)"
  else
    echo "FAIL: no ingested event in journalctl -u pushspoold.service"; exit 1
  fi
  if poll 30 quarantined; then
    echo "PASS: bad file quarantined: $(pushspoolctl failed list 2>/dev/null | grep "bad-$token" | cut -f1,2)"
  else
    echo "FAIL: bad file not in failed/"; exit 1
  fi
  # The installed socket and service: the socket listens on its shipped port, the first
  # connection starts the service as pushspool with the secret from LoadCredential=, and it
  # answers with the deb-test user's counts (the payload dropped above).
  sed -e '/^IPAddress\(Allow\|Deny\)=/d' -e '/^\[Install\]/,$d' /usr/lib/systemd/system/pushspool-inbox.socket >"$work/pushspool-inbox.socket"
  inbox_port=$(sed -n 's/^ListenStream=.*:\([0-9]*\)$/\1/p' "$work/pushspool-inbox.socket")
  # The secret: a user manager that is not PID 1 fails LoadCredential= (EPROTO), so the
  # generated secret is handed over as a file the pushspool user can read ([Inbox]
  # TokenSecretFile=); the installed unit's LoadCredential= line is checked below.
  grep -q '^LoadCredential=inbox-token-secret:/etc/pushspool/inbox-token-secret$' /usr/lib/systemd/system/pushspool-inbox.service
  chmod 0711 "$work"
  install -m 0400 -o pushspool -g pushspool /etc/pushspool/inbox-token-secret "$work/inbox-token-secret"
  printf '[Inbox]\nTokenSecretFile=%s\n' "$work/inbox-token-secret" >"$work/inbox.conf"
  chmod 0644 "$work/inbox.conf"
  "$root/scripts/systemd-integration/render-user-unit.sh" --unit /usr/lib/systemd/system/pushspool-inbox.service \
    --exec "/usr/sbin/pushspool-inbox --config $work/inbox.conf" --set User=pushspool --set Group=pushspool \
    --set SupplementaryGroups=pushspool-drop >"$work/pushspool-inbox.service"
  si_install_unit pushspool-inbox.service "$work/pushspool-inbox.service"
  si_install_unit pushspool-inbox.socket "$work/pushspool-inbox.socket"
  systemctl --user start pushspool-inbox.socket
  echo "PASS: pushspool-inbox.socket started: $(si_prop pushspool-inbox.socket SubState) on 127.0.0.1:$inbox_port"
  inbox_token=$(printf %s deb-test | openssl dgst -sha256 -mac HMAC -macopt "key:$(tr -d '\n' </etc/pushspool/inbox-token-secret)" | awk '{print $NF}')
  inbox_counts() { curl -s --max-time 5 -H "X-Pushspool-User: deb-test" -H "Authorization: Bearer $inbox_token" "http://127.0.0.1:$inbox_port/v1/inbox/counts"; }
  if poll 30 bash -c "$(declare -f inbox_counts); inbox_token=$inbox_token inbox_port=$inbox_port; inbox_counts | jq -e '.unread >= 1' >/dev/null"; then
    echo "PASS: the socket-activated pushspool-inbox answers on port $inbox_port: $(inbox_counts)"
  else
    echo "FAIL: pushspool-inbox did not answer on port $inbox_port: '$(inbox_counts)'"; si_journal pushspool-inbox.service -n 20; exit 1
  fi
  si_track_pid pushspool-inbox.service
  inbox_user=$(ps -o user:20= -p "$(si_prop pushspool-inbox.service MainPID)")
  if [[ "$inbox_user" == pushspool ]]; then echo "PASS: pushspool-inbox runs as $inbox_user"; else echo "FAIL: pushspool-inbox runs as '$inbox_user'"; exit 1; fi
  if [[ $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$inbox_port/v1/inbox") == 401 ]]; then
    echo "PASS: without a token: 401"
  else echo "FAIL: a request without a token was not refused"; exit 1; fi
  systemctl --user stop pushspool-inbox.service pushspool-inbox.socket
  systemctl --user stop pushspoold.service
  result=$(si_prop pushspoold.service Result) status=$(si_prop pushspoold.service ExecMainStatus)
  if [[ "$result" == success && "$status" == 0 ]]; then echo "PASS: unit stopped: Result=$result ExecMainStatus=$status"
  else echo "FAIL: unit stop: Result=$result ExecMainStatus=$status"; exit 1; fi
) 2>&1 | tee "$work/live.log"
live_status=${PIPESTATUS[0]}
failures=$(( failures + $(grep -c '^FAIL' "$work/live.log" || true) ))
(( live_status == 0 )) || fail "live unit test (exit $live_status)"
offered=$(complete_words pushspoolctl failed retry bad-)
check "completion: 'pushspoolctl failed retry bad-' offers the quarantined file ($offered)" \
  bash -c "grep -q 'bad-$token' <<<'$offered'"

note "4. upgrade to a rebuilt package keeps a changed conffile"
printf '\n# deb-test %s: a local change\n[Log]\nMaxEventsPerSec=50\n' "$token" >>/etc/pushspool/pushspool.conf
changed_sum=$(md5sum </etc/pushspool/pushspool.conf)
# The same files under a higher version, rebuilt with dpkg-deb: dpkg's conffile logic (the
# package's version of the file is unchanged, the local one changed -> keep it) is what is
# under test, not the compiler.
dpkg-deb -R "$deb" "$work/upgrade"
sed -i "s/^Version: .*/Version: $version+debtest1/" "$work/upgrade/DEBIAN/control"
dpkg-deb --root-owner-group -Zxz -z1 -b "$work/upgrade" "$work/pushspool_${version}+debtest1_amd64.deb" >/dev/null
apt-get install -y -qq "$work/pushspool_${version}+debtest1_amd64.deb" >"$work/upgrade.log" 2>&1 \
  || { cat "$work/upgrade.log"; fail "upgrade install"; }
check "upgraded to $(dpkg-query -W -f='${Version}' pushspool)" test "$(dpkg-query -W -f='${Version}' pushspool)" == "$version+debtest1"
check "the changed conffile was kept" test "$(md5sum </etc/pushspool/pushspool.conf)" == "$changed_sum"
check "pushspoolctl config show sees the local change" \
  bash -c "pushspoolctl config show 2>/dev/null | grep -q 'MaxEventsPerSec=50'"

note "5. remove keeps the data, purge removes it"
apt-get remove -y -qq pushspool >"$work/remove.log" 2>&1 || { cat "$work/remove.log"; fail "apt-get remove"; }
check "remove: binaries gone" test ! -e /usr/sbin/pushspoold -a ! -e /usr/bin/pushspoolctl
check "remove: changed conffile kept" test "$(md5sum </etc/pushspool/pushspool.conf)" == "$changed_sum"
check "remove: journal kept (/var/lib/pushspool/journal has segments)" \
  bash -c 'compgen -G "/var/lib/pushspool/journal/*" >/dev/null'
check "remove: spool kept (failed/ still holds the bad file)" bash -c "compgen -G '/var/spool/pushspool/failed/bad-$token*' >/dev/null"
apt-get purge -y -qq pushspool >"$work/purge.log" 2>&1 || { cat "$work/purge.log"; fail "apt-get purge"; }
check "purge: package gone" bash -c "! dpkg-query -W -f='\${Status}' pushspool 2>/dev/null | grep -q 'installed\|config-files'"
check "purge: /etc/pushspool gone" test ! -e /etc/pushspool
check "purge: /var/lib/pushspool gone" test ! -e /var/lib/pushspool
check "purge: /var/spool/pushspool gone" test ! -e /var/spool/pushspool
check "purge: unit no longer enabled" test ! -e /etc/systemd/system/multi-user.target.wants/pushspoold.service

if ((failures)); then echo "deb-test: $failures check(s) failed"; exit 1; fi
echo "deb-test: all checks passed"
