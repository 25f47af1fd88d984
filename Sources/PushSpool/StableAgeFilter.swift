/// The rule for files a rescan finds in `incoming/` (a plain `cp` straight into `incoming/`
/// may still be writing them; inotify's `IN_CLOSE_WRITE` covers files the watcher saw close).
///
/// A file is taken when its mtime is at least `stableAge` old — every `write(2)` bumps mtime, so
/// that alone says the size has not changed for `stableAge` — or, when its mtime is fresh or in
/// the future (clock skew, `touch -d`), when two looks at least `stableAge` apart saw the same
/// size and mtime. Otherwise it is deferred and handed back by `due` for another look. Deferred
/// names are bounded by `capacity`; past it `overflowed` is set and the caller rescans again
/// later instead of remembering more.
///
/// `Sendable`: a plain value; the ingest thread owns it.
package struct StableAgeFilter: Sendable {
    package enum Decision: Sendable, Equatable {
        case take
        /// Look again at (or after) this wall-clock time, nanoseconds since the epoch.
        case revisit(atNanos: Int64)
    }

    private struct Look: Sendable {
        var size: Int64
        var modifiedNanos: Int64
        var firstSeenNanos: Int64
        var revisitNanos: Int64
    }

    package let stableAgeNanos: Int64
    package let capacity: Int
    private var deferred: [String: Look] = [:]
    /// A fresh file could not be remembered (over `capacity`); rescan again after `stableAge`.
    package private(set) var overflowed = false

    package init(stableAgeNanos: Int64 = 1_000_000_000, capacity: Int = 4096) {
        precondition(stableAgeNanos >= 0 && capacity > 0)
        self.stableAgeNanos = stableAgeNanos
        self.capacity = capacity
    }

    /// How many names wait for another look.
    package var count: Int { deferred.count }

    /// Whether `name` waits for another look.
    package func isDeferred(_ name: String) -> Bool { deferred[name] != nil }

    /// Decides on `name` with its current `status`, at wall-clock `nowNanos`. Non-regular
    /// entries are taken at once: nothing writes into them, and `read` will refuse them.
    package mutating func decide(_ name: String, status: EntryStatus, nowNanos: Int64) -> Decision {
        if !status.isRegular || nowNanos - status.modifiedNanos >= stableAgeNanos {
            deferred[name] = nil
            return .take
        }
        if let look = deferred[name], look.size == status.size, look.modifiedNanos == status.modifiedNanos {
            if nowNanos - look.firstSeenNanos >= stableAgeNanos {
                deferred[name] = nil
                return .take
            }
            let revisit = look.firstSeenNanos + stableAgeNanos
            deferred[name]?.revisitNanos = revisit
            return .revisit(atNanos: revisit)
        }
        // New, or changed since the last look: start over from this look.
        let revisit = nowNanos + stableAgeNanos
        if deferred[name] != nil || deferred.count < capacity {
            deferred[name] = Look(size: status.size, modifiedNanos: status.modifiedNanos, firstSeenNanos: nowNanos, revisitNanos: revisit)
        } else {
            overflowed = true
        }
        return .revisit(atNanos: revisit)
    }

    /// Forgets `name` (it was claimed through an inotify event, or it vanished).
    package mutating func forget(_ name: String) {
        deferred[name] = nil
    }

    /// The names whose revisit time has come; they stay deferred until `decide` or `forget`.
    package func due(nowNanos: Int64) -> [String] {
        deferred.compactMap { $0.value.revisitNanos <= nowNanos ? $0.key : nil }.sorted()
    }

    /// The earliest revisit time, for the caller's poll timeout; `nil` when nothing waits.
    package var nextDueNanos: Int64? {
        deferred.values.map(\.revisitNanos).min()
    }

    /// Clears `overflowed` once the caller has scheduled the extra rescan.
    package mutating func acknowledgeOverflow() {
        overflowed = false
    }
}
