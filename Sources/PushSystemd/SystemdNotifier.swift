@preconcurrency import Glibc
internal import CSystemd
import PushSystem

/// Tells the service manager about the daemon's state through `sd_notify(3)` (libsystemd).
///
/// Without `$NOTIFY_SOCKET` (not started by systemd, or in tests) every call is a cheap
/// no-op: libsystemd returns 0. libsystemd reads `$NOTIFY_SOCKET` at each call, so the
/// environment is left in place for children that are meant to inherit it.
///
/// `Sendable`: throttling state is behind a lock; `sd_notify` itself is thread-safe.
package final class SystemdNotifier: Sendable {
    /// Half of `$WATCHDOG_USEC`, the period at which `watchdogPing()` actually sends; `nil`
    /// when the watchdog is off, including when `$WATCHDOG_PID` names another process
    /// (`sd_watchdog_enabled(3)` checks it).
    package let watchdogInterval: Duration?
    private let watchdogNanos: UInt64
    private let statusIntervalNanos: UInt64
    private let state = Locked(State())

    private struct State {
        var lastStatusNanos: UInt64?
        var lastStatus: String?
        var pendingStatus: String?
        var lastWatchdogNanos: UInt64?
        var lastExtendNanos: UInt64?
    }

    /// Reads the watchdog settings now (`sd_watchdog_enabled`). `statusInterval` is the least
    /// time between two throttled `STATUS=` updates.
    package init(statusInterval: Duration = .seconds(1)) {
        var usec: UInt64 = 0
        if sd_watchdog_enabled(0, &usec) > 0, usec > 0 {
            // $WATCHDOG_USEC comes from outside: Duration arithmetic, not `usec * 1000`, which
            // traps on a huge value; the result saturates at Int64.max nanoseconds.
            let half = Duration.microseconds(Int64(clamping: usec)) / 2
            watchdogNanos = half.clampedUInt64Nanoseconds
            watchdogInterval = half
        } else {
            watchdogNanos = 0
            watchdogInterval = nil
        }
        statusIntervalNanos = statusInterval.clampedUInt64Nanoseconds
    }

    /// Whether a service manager listens (`$NOTIFY_SOCKET` is set).
    package var isSupervised: Bool { getenv("NOTIFY_SOCKET") != nil }

    /// `READY=1` with a status line: start-up (journal recovery and the first full scan) is
    /// done. Also sent after a reload.
    package func ready(status: String) {
        send(["READY=1", "STATUS=" + Self.oneLine(status)])
        recordStatusSent(status)
    }

    /// `STATUS=`, at most once per `statusInterval`: a newer line within the interval
    /// replaces the pending one and goes out with the next call after the interval, or with
    /// `flushStatus()`. `force` sends at once (state changes, errors). An unchanged line is
    /// not resent.
    package func status(_ line: String, force: Bool = false) {
        let now = Posix.monotonicNanos()
        let toSend: String? = state.withLock { state in
            if !force, state.lastStatus == line { state.pendingStatus = nil; return nil }
            if force || state.lastStatusNanos.map({ now &- $0 >= statusIntervalNanos }) ?? true {
                state.lastStatusNanos = now
                state.lastStatus = line
                state.pendingStatus = nil
                return line
            }
            state.pendingStatus = line
            return nil
        }
        if let toSend { send(["STATUS=" + Self.oneLine(toSend)]) }
    }

    /// Sends the status line that throttling held back, once the interval has passed. Call
    /// from a periodic tick so the last update of a burst is not lost.
    package func flushStatus() {
        let now = Posix.monotonicNanos()
        let toSend: String? = state.withLock { state in
            guard let pending = state.pendingStatus,
                  state.lastStatusNanos.map({ now &- $0 >= statusIntervalNanos }) ?? true else { return nil }
            state.pendingStatus = nil
            state.lastStatusNanos = now
            state.lastStatus = pending
            return pending
        }
        if let toSend { send(["STATUS=" + Self.oneLine(toSend)]) }
    }

    /// `EXTEND_TIMEOUT_USEC=`: asks for more start-up (or stop) time while a long scan or
    /// recovery runs. Send again before the extension runs out. systemd applies it to the
    /// watchdog timer as well, so keep extensions short (see `extendTimeoutIfDue(by:)`).
    package func extendTimeout(microseconds: UInt64) {
        send(["EXTEND_TIMEOUT_USEC=\(microseconds)"])
    }

    /// `EXTEND_TIMEOUT_USEC=` for `span`, sent at most every third of it: cheap enough
    /// to call per file during a long start-up scan. While the scan makes progress, systemd
    /// keeps waiting; when it stalls, the extension runs out and TimeoutStartSec= applies.
    package func extendTimeoutIfDue(by span: Duration) {
        let nanos = span.clampedUInt64Nanoseconds
        guard nanos > 0 else { return }
        let now = Posix.monotonicNanos()
        let due = state.withLock { state -> Bool in
            if let last = state.lastExtendNanos, now &- last < nanos / 3 { return false }
            state.lastExtendNanos = now
            return true
        }
        if due { extendTimeout(microseconds: nanos / 1000) }
    }

    /// `WATCHDOG=1`, sent at most once per `watchdogInterval`. Cheap enough to call on every
    /// turn of the ingest loop — which must be where it is called from, so a wedged loop stops
    /// the pings and systemd restarts the daemon. The loop must wake at least once per
    /// interval even when idle.
    package func watchdogPing() {
        guard watchdogNanos > 0 else { return }
        let now = Posix.monotonicNanos()
        let due = state.withLock { state -> Bool in
            if let last = state.lastWatchdogNanos, now &- last < watchdogNanos { return false }
            state.lastWatchdogNanos = now
            return true
        }
        if due { send(["WATCHDOG=1"]) }
    }

    /// `STOPPING=1` with a status line: SIGTERM received, draining in-flight work.
    package func stopping(status: String) {
        send(["STOPPING=1", "STATUS=" + Self.oneLine(status)])
        recordStatusSent(status)
    }

    /// `RELOADING=1` with `MONOTONIC_USEC=` (systemd 253's `Type=notify-reload` requires it,
    /// 252 ignores it). Follow with `ready(status:)` once the new configuration is in force
    /// or the old one is kept.
    package func reloading(status: String = "Reloading configuration") {
        send(["RELOADING=1", "MONOTONIC_USEC=\(Posix.monotonicNanos() / 1000)", "STATUS=" + Self.oneLine(status)])
        recordStatusSent(status)
    }

    /// `STATUS=` and `ERRNO=` right before a failing exit, so `systemctl status` shows why.
    package func failing(errno: Int32, status: String) {
        send(["STATUS=" + Self.oneLine(status), "ERRNO=\(errno)"])
        recordStatusSent(status)
    }

    private func recordStatusSent(_ line: String) {
        let now = Posix.monotonicNanos()
        state.withLock { state in
            state.lastStatusNanos = now
            state.lastStatus = line
            state.pendingStatus = nil
        }
    }

    /// One `sd_notify` datagram of newline-separated assignments. Failures are ignored on
    /// purpose: a daemon must not stop because its supervisor went away.
    private func send(_ assignments: [String]) {
        _ = sd_notify(0, assignments.joined(separator: "\n"))
    }

    /// A STATUS= value is one line; newlines would start new assignments.
    static func oneLine(_ text: String) -> String {
        String(text.map { $0 == "\n" || $0 == "\r" ? " " : $0 })
    }
}

/// The live counts the daemon shows in `STATUS=`, formatted the same way everywhere.
///
/// `Sendable`: a plain value.
package struct LiveCounts: Sendable, Equatable {
    package var ingested = 0
    package var refused = 0
    package var duplicates = 0
    package var backlog = 0
    package var mediaInFlight = 0
    /// The short, stable description of the last error, or `nil`.
    package var lastError: String?

    package init(ingested: Int = 0, refused: Int = 0, duplicates: Int = 0, backlog: Int = 0, mediaInFlight: Int = 0, lastError: String? = nil) {
        self.ingested = ingested
        self.refused = refused
        self.duplicates = duplicates
        self.backlog = backlog
        self.mediaInFlight = mediaInFlight
        self.lastError = lastError
    }

    /// `ingested 120, refused 3, duplicates 1, backlog 0, media in flight 2, last error: none`
    package var statusLine: String {
        "ingested \(ingested), refused \(refused), duplicates \(duplicates), backlog \(backlog), media in flight \(mediaInFlight), last error: \(lastError ?? "none")"
    }
}
