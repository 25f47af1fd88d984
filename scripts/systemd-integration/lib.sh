# shellcheck shell=bash
# Bash library for live tests against a real journald and a real systemd user manager on
# machines whose PID 1 is not systemd (see docs/design/systemd-testing.md).
#
#   source scripts/systemd-integration/lib.sh
#   si_setup                        # journald + user manager (SI_MANAGER=0: journald only)
#   si_install_unit NAME FILE       # into the manager's runtime unit dir, daemon-reload
#   si_start NAME                   # blocks until READY=1 (Type=notify)
#   si_prop NAME StatusText         # any `systemctl show` property
#   si_wait_prop NAME Prop VALUE [SECONDS]
#   si_journal NAME [journalctl args...]
#   si_cleanup                      # idempotent; also runs on EXIT/INT/TERM/HUP
#
# What it guarantees:
# - Cleanup always runs (EXIT trap; INT/TERM/HUP exit through it): the user manager is told
#   to exit and then killed by pid, every unit main pid we saw is killed, journald is killed
#   if we started it, and /run/systemd/system is removed (while it exists apt believes
#   systemd is PID 1 and package installs fail). Nothing is killed by name.
# - One session at a time per machine (flock): the user manager runs at the cgroup root
#   here, so two would fight over the same slices.
# - The manager gets a private XDG_RUNTIME_DIR (and XDG_CONFIG_HOME etc.) under /run, so
#   no unit outside this session is seen, and nothing is written to ~/.config.
# - On a machine where PID 1 really is systemd, /run/systemd/system and journald are the
#   real ones and are left alone.
#
# Add your own cleanup with si_on_exit 'command' (runs before the manager is stopped).
# Set SI_VERBOSE=1 for progress on stderr. Needs root.

SI_LOCK_FILE=${SI_LOCK_FILE:-/run/lock/pushspool-systemd-integration.lock}
SI_LOCK_WAIT=${SI_LOCK_WAIT:-300}
SI_JOURNALD=${SI_JOURNALD:-/lib/systemd/systemd-journald}
SI_SYSTEMD=${SI_SYSTEMD:-/lib/systemd/systemd}
# SI_MANAGER=0: journald only, no user manager (and no /run/systemd/system).
SI_MANAGER=${SI_MANAGER:-1}

si_runtime_dir=""
si_manager_pid=""
si_journald_pid=""
si_created_system_dir=0
si_started=0
si_cleaned=0
si_lock_fd=""
si_unit_pids=()
si_exit_hooks=()

si_log() { [[ "${SI_VERBOSE:-0}" == 1 ]] && echo "si: $*" >&2; return 0; }
si_die() { echo "si: error: $*" >&2; exit 1; }

si_pid1_is_systemd() { [[ "$(cat /proc/1/comm 2>/dev/null)" == systemd ]]; }

si_on_exit() { si_exit_hooks+=("$1"); }

# Waits until COMMAND succeeds, up to SECONDS (fractions allowed). si_wait_until 5 test -S x
si_wait_until() {
  local seconds=$1; shift
  local tries
  tries=$(awk -v s="$seconds" 'BEGIN { printf "%d", s * 20 }')
  until "$@"; do
    (( tries-- > 0 )) || return 1
    sleep 0.05
  done
}

# A TCP port on 127.0.0.1 for a server this run starts: free now, below the kernel's ephemeral
# range, and not handed out before in this run. A port from bind(0) is an ephemeral one: an
# outgoing connection made meanwhile (a NATS node dialling its routes) may take it as its
# source port before the server binds it, which left a cluster node without its route port.
si_free_port() {
  python3 - "${SI_PORTS_TAKEN:=/tmp/si-ports-$$}" <<'PY'
import os, random, socket, sys
taken_path = sys.argv[1]
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
taken = set()
if os.path.exists(taken_path):
    taken = {int(word) for word in open(taken_path).read().split()}
for _ in range(1000):
    port = random.randrange(10000, max(10001, low))
    if port in taken:
        continue
    probe = socket.socket()
    try:
        probe.bind(("127.0.0.1", port))
    except OSError:
        continue
    finally:
        probe.close()
    with open(taken_path, "a") as taken_file:
        taken_file.write(f"{port}\n")
    print(port)
    sys.exit(0)
sys.exit("si_free_port: no free port below the ephemeral range")
PY
}

si_pid_alive() { [[ -n "$1" ]] && kill -0 "$1" 2>/dev/null; }

# Sends SIGTERM to PID, waits up to SECONDS, then SIGKILL.
si_stop_pid() {
  local pid=$1 seconds=${2:-5}
  si_pid_alive "$pid" || return 0
  kill -TERM "$pid" 2>/dev/null || true
  if ! si_wait_until "$seconds" bash -c "! kill -0 $pid 2>/dev/null"; then
    si_log "pid $pid ignored SIGTERM, killing"
    kill -KILL "$pid" 2>/dev/null || true
    si_wait_until 5 bash -c "! kill -0 $pid 2>/dev/null" || true
  fi
  wait "$pid" 2>/dev/null || true
}

si_setup() {
  (( EUID == 0 )) || si_die "must run as root (journald and the user manager need /run)"
  (( si_started == 0 )) || si_die "si_setup called twice"
  [[ -x "$SI_JOURNALD" && -x "$SI_SYSTEMD" ]] || si_die "systemd is not installed ($SI_SYSTEMD)"

  exec {si_lock_fd}>"$SI_LOCK_FILE"
  si_log "waiting for $SI_LOCK_FILE"
  flock -w "$SI_LOCK_WAIT" "$si_lock_fd" || si_die "another systemd integration session holds $SI_LOCK_FILE"

  si_started=1
  trap 'si_cleanup' EXIT
  trap 'exit 129' HUP
  trap 'exit 130' INT
  trap 'exit 143' TERM

  # journald: reuse a running one (a real one, or another tool's), else start our own.
  if [[ -S /run/systemd/journal/socket ]] && pgrep -x systemd-journal >/dev/null; then
    si_log "journald already running; using it"
  else
    "$SI_JOURNALD" </dev/null >/dev/null 2>&1 &
    si_journald_pid=$!
    si_wait_until 10 test -S /run/systemd/journal/socket -a -S /run/systemd/journal/stdout \
      || si_die "journald did not create its sockets"
    si_log "journald started (pid $si_journald_pid)"
  fi

  if [[ "${SI_MANAGER:-1}" != 1 ]]; then
    si_log "SI_MANAGER=0: no user manager"
    return 0
  fi

  if ! si_pid1_is_systemd; then
    if [[ ! -d /run/systemd/system ]]; then
      mkdir -p /run/systemd/system
      si_created_system_dir=1
    else
      # A crashed earlier session left it; it is ours to remove as well.
      si_created_system_dir=1
    fi
  fi

  si_runtime_dir=$(mktemp -d /run/pushspool-si.XXXXXX)
  chmod 700 "$si_runtime_dir"
  mkdir -p "$si_runtime_dir/systemd/user" "$si_runtime_dir/config" "$si_runtime_dir/data" \
           "$si_runtime_dir/state" "$si_runtime_dir/cache"
  export XDG_RUNTIME_DIR=$si_runtime_dir
  export XDG_CONFIG_HOME=$si_runtime_dir/config XDG_DATA_HOME=$si_runtime_dir/data
  export XDG_STATE_HOME=$si_runtime_dir/state XDG_CACHE_HOME=$si_runtime_dir/cache
  unset DBUS_SESSION_BUS_ADDRESS NOTIFY_SOCKET WATCHDOG_USEC WATCHDOG_PID

  # The manager logs to the journal (journalctl _PID=$si_manager_pid), and to manager.log
  # only if journald is unreachable.
  SYSTEMD_LOG_TARGET=journal-or-kmsg "$SI_SYSTEMD" --user </dev/null >"$si_runtime_dir/manager.log" 2>&1 &
  si_manager_pid=$!
  si_wait_until 15 test -S "$si_runtime_dir/systemd/private" \
    || si_die "user manager did not start: $(tail -5 "$si_runtime_dir/manager.log")"
  si_wait_until 15 si__manager_answers || si_die "user manager does not answer systemctl --user"
  si_log "user manager started (pid $si_manager_pid, XDG_RUNTIME_DIR=$si_runtime_dir)"
}

si__manager_answers() { systemctl --user show -p Version --value >/dev/null 2>&1; }

# Installs FILE as unit NAME (e.g. pushspoold.service) and reloads the manager.
si_install_unit() {
  local name=$1 file=$2
  install -m 0644 "$file" "$si_runtime_dir/systemd/user/$name"
  systemctl --user daemon-reload
}

# Starts NAME; for Type=notify this returns once READY=1 arrived (or fails on timeout).
si_start() {
  local name=$1 rc=0
  systemctl --user start "$name" || rc=$?
  si_track_pid "$name"
  return $rc
}

# Remembers the unit's current main pid so cleanup can kill it if the manager cannot.
si_track_pid() {
  local pid
  pid=$(si_prop "$1" MainPID)
  [[ -n "$pid" && "$pid" != 0 ]] && si_unit_pids+=("$pid")
  return 0
}

si_prop() { systemctl --user show -p "$2" --value "$1"; }

# Waits until property PROP of NAME equals VALUE; prints the last value on failure.
si_wait_prop() {
  local name=$1 prop=$2 value=$3 seconds=${4:-10}
  if ! si_wait_until "$seconds" si__prop_is "$name" "$prop" "$value"; then
    echo "si: $name $prop is '$(si_prop "$name" "$prop")', expected '$value' after ${seconds}s" >&2
    return 1
  fi
}
si__prop_is() { [[ "$(si_prop "$1" "$2")" == "$3" ]]; }

# journalctl for the unit (the manager runs at the cgroup root here, so entries carry
# _SYSTEMD_UNIT=NAME and `-u NAME` finds them; `--user` would not).
si_journal() {
  local name=$1; shift
  journalctl --sync >/dev/null 2>&1 || true
  journalctl --no-pager -u "$name" "$@"
}

si_cleanup() {
  local status=$?
  (( si_started == 1 && si_cleaned == 0 )) || return 0
  si_cleaned=1
  set +e
  local hook
  for hook in "${si_exit_hooks[@]+"${si_exit_hooks[@]}"}"; do eval "$hook"; done

  if si_pid_alive "$si_manager_pid"; then
    # Stops every unit (their ExecStop/SIGTERM paths), then the manager itself.
    timeout 20 systemctl --user exit >/dev/null 2>&1
    si_wait_until 20 bash -c "! kill -0 $si_manager_pid 2>/dev/null" || si_log "manager did not exit in time"
    si_stop_pid "$si_manager_pid" 5
  fi
  local pid
  for pid in "${si_unit_pids[@]+"${si_unit_pids[@]}"}"; do
    # Still alive after its manager is gone; INVOCATION_ID (set by the manager for unit
    # processes) guards against a recycled pid.
    if si_pid_alive "$pid" && grep -qa "INVOCATION_ID=" "/proc/$pid/environ" 2>/dev/null; then
      si_log "killing leftover unit process $pid"
      kill -KILL "$pid" 2>/dev/null
    fi
  done
  if [[ -n "$si_journald_pid" ]]; then
    si_stop_pid "$si_journald_pid" 5
    # Its sockets would otherwise make clients believe journald still runs.
    rm -f /run/systemd/journal/socket /run/systemd/journal/stdout /run/systemd/journal/dev-log \
          /run/systemd/journal/io.systemd.journal /run/systemd/journal/syslog
  fi
  if (( si_created_system_dir == 1 )) && ! si_pid1_is_systemd; then
    rm -rf /run/systemd/system
  fi
  [[ -n "$si_runtime_dir" && "$si_runtime_dir" == /run/pushspool-si.* ]] && rm -rf "$si_runtime_dir"
  rm -f "/tmp/si-ports-$$"
  [[ -n "$si_lock_fd" ]] && exec {si_lock_fd}>&-
  si_log "cleaned up"
  return "$status"
}

# The directory of the binaries under test: $PUSHSPOOL_BIN_DIR, or SwiftPM's (debug) bin path
# of the checkout at $1.
pushspool_bin_dir() {
  if [[ -n "${PUSHSPOOL_BIN_DIR:-}" ]]; then
    echo "$PUSHSPOOL_BIN_DIR"
  else
    (cd "$1" && PATH="/opt/swift/usr/bin:$PATH" swift build --show-bin-path)
  fi
}
