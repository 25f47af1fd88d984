import PushSystem

/// What ``OutboxStore/takeRetried(_:now:keep:)`` did with one file of `retry/`. `Sendable` value.
package enum RetryTake: Sendable {
    /// In `pending/` now, with fresh attempts and age, and gone from `retry/`.
    case pending(OutboxDelivery)
    /// Unreadable (gone meanwhile, torn, not a delivery): left where it is.
    case unreadable
    /// `keep` refused it: left in `retry/` for the caller (an erased subject's, say).
    case refused(OutboxDelivery)
    /// Writing it to `pending/` or removing it from `retry/` failed; it may be in both.
    case failed(OutboxError)
}

/// The dead letters' side of the store, shared by the journal outbox and the fleet's retry
/// sender, so that both take a retried dead letter back and park one again the same way.
extension OutboxStore {
    /// Takes `name`, a dead letter `pushspoolctl outbox retry` renamed into `retry/`, back into
    /// `pending/` with fresh attempts. Written to `pending/` before it leaves `retry/`: a crash
    /// between leaves it in both, and the next take writes the same file again. `now` (epoch
    /// ms) is read only for a delivery that is taken.
    package func takeRetried(_ name: String, now: @autoclosure () -> Int64,
                             keep: (OutboxDelivery) -> Bool = { _ in true }) -> RetryTake {
        guard var delivery = read(retryDirectory + "/" + name) else { return .unreadable }
        guard keep(delivery) else { return .refused(delivery) }
        delivery.attempts = 0
        delivery.notBeforeMillis = 0
        delivery.parkedReason = nil
        delivery.parkedAtMillis = nil
        // A retried event is judged by its age from now on, or MaxAgeSec= would park it again at once.
        delivery.createdMillis = now()
        do {
            try write(delivery, in: pendingDirectory)
            try remove(name, in: retryDirectory)
        } catch {
            return .failed(error)
        }
        return .pending(delivery)
    }

    /// Moves `delivery` from `pending/` to `parked/` as a dead letter with `reason` and
    /// `message`. Written to `parked/` first: a crash between leaves both, and the dead letter
    /// wins at the next start.
    package func park(_ delivery: inout OutboxDelivery, reason: String, message: String, now: Int64) throws(OutboxError) {
        delivery.parkedReason = reason
        delivery.parkedAtMillis = now
        delivery.lastError = message
        try write(delivery, in: parkedDirectory)
        try remove(delivery.fileName, in: pendingDirectory)
    }
}

/// The inotify watch on an outbox's `retry/`: dead letters an operator sends again are taken
/// at once, not when something else wakes the sender. Shared by the journal outbox and the
/// fleet's retry sender.
///
/// `Sendable`: the watch under a lock.
package final class RetryWatch: Sendable {
    package let directory: String
    private let watch = Locked<DirectoryWatch?>(nil)

    package init(store: OutboxStore) {
        directory = store.retryDirectory
    }

    /// Watches `retry/` unless it does already. `onChange` is asked for only when a watch is
    /// to start; `nil` from it (nothing to wake yet) starts none. `creating`: make `retry/`
    /// first when it is missing. Returns whether it watches; throws when the watch cannot be had.
    package func start(creating: Bool = false, onChange: () -> (@Sendable () -> Void)?) throws(SystemError) -> Bool {
        try watch.withLock { watch throws(SystemError) -> Bool in
            if watch != nil { return true }
            guard let onChange = onChange() else { return false }
            if creating { try Posix.mkdirIfMissing(directory, mode: 0o750) }
            watch = try DirectoryWatch(path: directory, onChange: onChange)
            return true
        }
    }

    package func stop() {
        watch.withLock { watch in
            watch?.stop()
            watch = nil
        }
    }
}
