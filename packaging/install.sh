#!/usr/bin/env bash
# Installs pushspool into DESTDIR (default /) in the Debian 12 layout:
#   /usr/sbin/pushspoold, /usr/bin/pushspoolctl           (from --bindir, built binaries)
#   /usr/lib/systemd/system/pushspoold.service
#   /usr/lib/sysusers.d/pushspool.conf                     (user pushspool, group pushspool-drop)
#   /usr/lib/tmpfiles.d/pushspool.conf                     (the spool tree)
#   /usr/lib/systemd/catalog/pushspool.catalog            (journalctl -x texts)
#   /etc/pushspool/pushspool.conf + pushspool.conf.d/      (kept if already present)
# With DESTDIR=/ it then creates the user, the directories, the catalog index and reloads
# systemd, as a package's postinst would. Nothing is started or enabled.
#
# Usage: packaging/install.sh [--destdir DIR] [--bindir .build/release] [--no-binaries]
set -euo pipefail
cd "$(dirname "$0")/.."
destdir=/
bindir=.build/release
binaries=1
while (($#)); do
  case "$1" in
    --destdir) destdir=$2; shift 2 ;;
    --bindir) bindir=$2; shift 2 ;;
    --no-binaries) binaries=0; shift ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install: unknown argument '$1'" >&2; exit 64 ;;
  esac
done
d=${destdir%/}

if ((binaries)); then
  # The daemon in sbin, as the unit's ExecStart= and the Debian package have it.
  for binary in sbin/pushspoold bin/pushspoolctl; do
    [[ -x "$bindir/${binary#*/}" ]] || { echo "install: $bindir/${binary#*/} not built (swift build -c release)" >&2; exit 1; }
    install -D -m 0755 "$bindir/${binary#*/}" "$d/usr/$binary"
  done
fi
install -D -m 0644 systemd/pushspoold.service "$d/usr/lib/systemd/system/pushspoold.service"
install -D -m 0644 systemd/pushspool.sysusers "$d/usr/lib/sysusers.d/pushspool.conf"
install -D -m 0644 systemd/pushspool.tmpfiles "$d/usr/lib/tmpfiles.d/pushspool.conf"
install -D -m 0644 systemd/pushspool.catalog "$d/usr/lib/systemd/catalog/pushspool.catalog"
install -d -m 0755 "$d/etc/pushspool/pushspool.conf.d"
# A configuration file is the operator's: never overwrite one.
if [[ -e "$d/etc/pushspool/pushspool.conf" ]]; then
  install -m 0644 packaging/pushspool.conf "$d/etc/pushspool/pushspool.conf.dist"
  echo "install: kept existing /etc/pushspool/pushspool.conf; new default in pushspool.conf.dist"
else
  install -m 0644 packaging/pushspool.conf "$d/etc/pushspool/pushspool.conf"
fi

if [[ -z "$d" ]]; then
  systemd-sysusers pushspool.conf
  systemd-tmpfiles --create pushspool.conf
  journalctl --update-catalog
  if [[ "$(cat /proc/1/comm 2>/dev/null)" == systemd ]]; then systemctl daemon-reload; fi
  echo "install: done; start with: systemctl enable --now pushspoold"
else
  echo "install: installed into $destdir"
fi
