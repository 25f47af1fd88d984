@preconcurrency import Glibc
import PushSystem

/// One quarantined file as `pushspoolctl failed list` shows it.
package struct FailedEntry: Sendable, Equatable, Codable {
    /// The name in `failed/`.
    package var name: String
    /// Size of the payload entry; `nil` when it is missing (an orphan reason file).
    package var size: Int64?
    package var code: String
    package var message: String
    package var stage: String
    package var at: String
    /// The payload's name when it was quarantined (before any `~N` suffix).
    package var file: String?
    /// `failed/NAME` is gone but its reason file remains (a crash mid-quarantine); purge it.
    package var payloadMissing: Bool
    /// `failed/NAME` has no (readable) reason file.
    package var reasonMissing: Bool

    enum CodingKeys: String, CodingKey {
        case name, size, code, message, stage, at, file, payloadMissing, reasonMissing
    }
}

/// `pushspoolctl failed show NAME`.
package struct FailedDetail: Sendable, Equatable {
    package var name: String
    /// The reason file's text, `nil` when missing.
    package var reasonJSON: String?
    package var size: Int64?
    /// "regular file", "symbolic link", "FIFO", ...; `nil` when the payload is missing.
    package var fileType: String?
}

/// One file moved back by `retry`.
package struct FailedRetry: Sendable, Equatable {
    /// Its name in `failed/`.
    package var name: String
    /// Its new name in `incoming/`.
    package var incomingName: String
}

/// Which entries an admin command acts on.
package enum FailedSelection: Sendable, Equatable {
    case name(String)
    /// Every entry quarantined before the command started (entries that arrive while it runs
    /// are left alone, so `retry ALL` cannot chase files the daemon re-quarantines).
    case all
}

/// The Postfix-style admin side of `failed/`: list, show, retry, purge. Safe to run while the
/// daemon is running: every move is a rename that never replaces an existing entry.
///
/// `Sendable`: case-less namespace.
package enum FailedQueue {
    private static let reasonLimit = 1 << 20

    /// Every entry in `failed/`, streamed in batches and handed to `body` one at a time.
    package static func forEach(layout: SpoolLayout, fileSystem: any FileSystem = RealFileSystem(), _ body: (FailedEntry) throws(SpoolError) -> Void) throws(SpoolError) {
        let dirs = try Directories(layout: layout, fileSystem: fileSystem)
        let scanner = try DirectoryScanner(directoryFD: dirs.failed, path: layout.failed, filter: .noDotfiles, fileSystem: fileSystem)
        try scanner.forEachBatch { (batch) throws(SpoolError) in
            for entry in batch {
                if entry.name.hasSuffix(SpoolName.reasonSuffix) {
                    // A reason file: reported only when its payload is gone.
                    let payload = String(entry.name.dropLast(SpoolName.reasonSuffix.count))
                    if payload.isEmpty || dirs.exists(dirs.failed, payload) { continue }
                    try body(makeEntry(dirs: dirs, name: payload, payloadMissing: true))
                } else {
                    try body(makeEntry(dirs: dirs, name: entry.name, payloadMissing: false))
                }
            }
        }
    }

    /// Every entry in `failed/`, sorted by name.
    package static func list(layout: SpoolLayout, fileSystem: any FileSystem = RealFileSystem()) throws(SpoolError) -> [FailedEntry] {
        var entries: [FailedEntry] = []
        try forEach(layout: layout, fileSystem: fileSystem) { (entry) throws(SpoolError) in entries.append(entry) }
        return entries.sorted { $0.name < $1.name }
    }

    /// The reason file's text and the payload's size and type.
    package static func show(layout: SpoolLayout, name: String, fileSystem: any FileSystem = RealFileSystem()) throws(SpoolError) -> FailedDetail {
        try validatePayloadName(name)
        let dirs = try Directories(layout: layout, fileSystem: fileSystem)
        let reason = dirs.readReason(name)
        let st = try? dirs.fs.statusAt(dirs.failed, name)
        if st == nil && reason == nil {
            throw SpoolError(.notFound, "failed/\(name) does not exist; see `pushspoolctl failed list`")
        }
        return FailedDetail(
            name: name, reasonJSON: reason.map { String(decoding: $0, as: UTF8.self) },
            size: st.map(\.size), fileType: st.map { typeName(mode_t(truncatingIfNeeded: $0.type)) })
    }

    /// Moves `failed/NAME` back to `incoming/` — under the name it had when quarantined if that
    /// is free, else a `~N` variant — then removes its reason file and fsyncs both directories.
    package static func retry(layout: SpoolLayout, _ selection: FailedSelection, fileSystem: any FileSystem = RealFileSystem()) throws(SpoolError) -> [FailedRetry] {
        let dirs = try Directories(layout: layout, fileSystem: fileSystem)
        var moved: [FailedRetry] = []
        switch selection {
        case .name(let name):
            try validatePayloadName(name)
            guard dirs.exists(dirs.failed, name) else {
                if dirs.exists(dirs.failed, name + SpoolName.reasonSuffix) {
                    throw SpoolError(.notFound, "failed/\(name) is gone, only its reason file is left; remove it with `pushspoolctl failed purge \(name)`")
                }
                throw SpoolError(.notFound, "failed/\(name) does not exist; see `pushspoolctl failed list`")
            }
            moved.append(try retryOne(dirs: dirs, name: name))
        case .all:
            let started = wallNanos()
            try eachPayload(dirs: dirs, quarantinedBefore: started) { (name) throws(SpoolError) in
                moved.append(try retryOne(dirs: dirs, name: name))
            }
        }
        do {
            try dirs.fs.fsync(dirs.incoming, subject: layout.incoming)
            try dirs.fs.fsync(dirs.failed, subject: layout.failed)
        } catch {
            throw SpoolError(error, while: "syncing after retry")
        }
        return moved
    }

    /// Removes `failed/NAME` and its reason file (payload first, so a crash leaves an orphan
    /// reason, never an unexplained payload). Returns the names removed.
    ///
    /// With `.all`, an entry that cannot be removed on its own — a quarantined directory that
    /// is not empty (never removed recursively) — is skipped: `skipped` hears its name and
    /// why, and the purge goes on with the next entry. Other failures still end the purge.
    package static func purge(layout: SpoolLayout, _ selection: FailedSelection, fileSystem: any FileSystem = RealFileSystem(),
                              skipped: (_ name: String, _ why: SpoolError) -> Void = { _, _ in }) throws(SpoolError) -> [String] {
        let dirs = try Directories(layout: layout, fileSystem: fileSystem)
        var removed: [String] = []
        switch selection {
        case .name(let name):
            try validatePayloadName(name)
            guard try purgeOne(dirs: dirs, name: name) else {
                throw SpoolError(.notFound, "failed/\(name) does not exist; see `pushspoolctl failed list`")
            }
            removed.append(name)
        case .all:
            removed = try purgeQuarantined(dirs: dirs, before: wallNanos(), skipped: skipped)
        }
        do {
            try dirs.fs.fsync(dirs.failed, subject: layout.failed)
        } catch {
            throw SpoolError(error, while: "syncing after purge")
        }
        return removed
    }

    /// `[Spool] FailedRetainSec=`, Postfix's `maximal_queue_lifetime` for `failed/`: removes
    /// every entry (payload and reason file) quarantined longer than `retain` ago, judged by
    /// the reason file's mtime (written at quarantine), else the entry's own. Returns the names
    /// removed; a non-empty quarantined directory is skipped (`skipped`), never removed
    /// recursively. Blocking: the daemon runs it on its retention thread.
    package static func expire(layout: SpoolLayout, retain: Duration, nowNanos: Int64? = nil, fileSystem: any FileSystem = RealFileSystem(),
                               skipped: (_ name: String, _ why: SpoolError) -> Void = { _, _ in }) throws(SpoolError) -> [String] {
        let dirs = try Directories(layout: layout, fileSystem: fileSystem)
        let cutoff = (nowNanos ?? wallNanos()) &- retain.clampedNanoseconds
        let removed = try purgeQuarantined(dirs: dirs, before: cutoff, skipped: skipped)
        if !removed.isEmpty {
            do { try dirs.fs.fsync(dirs.failed, subject: layout.failed) } catch { throw SpoolError(error, while: "syncing after expiry") }
        }
        return removed
    }

    // MARK: Internals

    /// Removes every entry quarantined at or before `before` (wall-clock nanoseconds).
    private static func purgeQuarantined(dirs: Directories, before: Int64,
                                         skipped: (_ name: String, _ why: SpoolError) -> Void) throws(SpoolError) -> [String] {
        var removed: [String] = []
        let scanner = try DirectoryScanner(directoryFD: dirs.failed, path: dirs.layout.failed, filter: .noDotfiles, fileSystem: dirs.fs)
        try scanner.forEachBatch { (batch) throws(SpoolError) in
            for entry in batch {
                let name = entry.name.hasSuffix(SpoolName.reasonSuffix)
                    ? String(entry.name.dropLast(SpoolName.reasonSuffix.count)) : entry.name
                // A reason file whose payload exists is handled with the payload.
                if name != entry.name && dirs.exists(dirs.failed, name) { continue }
                if name.isEmpty || dirs.quarantinedAfter(name, before) { continue }
                do throws(SpoolError) {
                    if try purgeOne(dirs: dirs, name: name) { removed.append(name) }
                } catch where error.errno == ENOTEMPTY || error.errno == EEXIST {
                    // Only rmdir(2) of a non-empty quarantined directory fails this way.
                    skipped(name, error)
                }
            }
        }
        return removed
    }

    private static func validatePayloadName(_ name: String) throws(SpoolError) {
        try SpoolName.validate(name)
        if name.hasSuffix(SpoolName.reasonSuffix) {
            throw SpoolError(.invalidName, "\(name) is a reason file; give the quarantined file's name (without \(SpoolName.reasonSuffix))")
        }
    }

    private static func eachPayload(dirs: Directories, quarantinedBefore started: Int64, _ body: (String) throws(SpoolError) -> Void) throws(SpoolError) {
        let scanner = try DirectoryScanner(directoryFD: dirs.failed, path: dirs.layout.failed, filter: .noDotfiles, fileSystem: dirs.fs)
        try scanner.forEachBatch { (batch) throws(SpoolError) in
            for entry in batch where !entry.name.hasSuffix(SpoolName.reasonSuffix) {
                if dirs.quarantinedAfter(entry.name, started) { continue }
                try body(entry.name)
            }
        }
    }

    private static func retryOne(dirs: Directories, name: String) throws(SpoolError) -> FailedRetry {
        var original = name
        if let bytes = dirs.readReason(name), let reason = try? QuarantineReason.decode(bytes),
           (try? SpoolName.validateForIncoming(reason.file)) != nil {
            original = reason.file
        }
        // Back in incoming/ it must be a name the daemon takes.
        while original.hasPrefix(".") { original.removeFirst() }
        if original.hasSuffix(".tmp") { original += ".json" }
        if original.isEmpty { original = UniqueName.next(suffix: ".json") }
        for target in Spool.candidateNames(original) {
            do {
                try dirs.fs.renameNoReplace(dirs.failed, name, dirs.incoming, target)
            } catch where error.errno == EEXIST {
                continue
            } catch where error.errno == ENOENT {
                throw SpoolError(.notFound, "failed/\(name) vanished during retry", system: error)
            } catch {
                throw SpoolError(error, while: "moving failed/\(name) to incoming/\(target)")
            }
            do {
                try dirs.fs.unlinkat(dirs.failed, name + SpoolName.reasonSuffix, flags: 0)
            } catch where error.errno == ENOENT {
            } catch {
                throw SpoolError(error, while: "removing failed/\(name)\(SpoolName.reasonSuffix)")
            }
            return FailedRetry(name: name, incomingName: target)
        }
        throw SpoolError(.nameTaken, "no free name for \(original) in incoming/")
    }

    private static func purgeOne(dirs: Directories, name: String) throws(SpoolError) -> Bool {
        var removed = false
        for entry in [name, name + SpoolName.reasonSuffix] {
            do {
                try dirs.fs.unlinkat(dirs.failed, entry, flags: 0)
                removed = true
            } catch where error.errno == ENOENT {
            } catch where error.errno == EISDIR {
                // A quarantined directory: remove it only if empty, never recursively.
                do {
                    try dirs.fs.unlinkat(dirs.failed, entry, flags: AT_REMOVEDIR)
                    removed = true
                } catch where error.errno == ENOTEMPTY || error.errno == EEXIST {
                    throw SpoolError(error, while: "removing directory failed/\(entry) (not removed recursively; inspect and empty it first)")
                } catch {
                    throw SpoolError(error, while: "removing directory failed/\(entry)")
                }
            } catch {
                throw SpoolError(error, while: "removing failed/\(entry)")
            }
        }
        return removed
    }

    private static func makeEntry(dirs: Directories, name: String, payloadMissing: Bool) -> FailedEntry {
        let st = payloadMissing ? nil : try? dirs.fs.statusAt(dirs.failed, name)
        let reason = dirs.readReason(name).flatMap { try? ReasonFields.decode($0) }
        return FailedEntry(
            name: name, size: st.map(\.size),
            code: reason?.code ?? "unknown", message: reason?.message ?? "no readable reason file",
            stage: reason?.stage ?? "unknown", at: reason?.at ?? "", file: reason?.file,
            payloadMissing: payloadMissing, reasonMissing: reason == nil)
    }

    /// The fields `list` needs, decoded leniently (a reason written by another version may
    /// carry a stage this one does not know).
    private struct ReasonFields {
        var code: String?
        var message: String?
        var stage: String?
        var at: String?
        var file: String?

        static func decode(_ bytes: [UInt8]) throws(JSONParseError) -> ReasonFields {
            let value = try JSONParser(maxDepth: 4).parse(bytes)
            guard value.objectValue != nil else { throw JSONParseError(.notAnObject, "a reason file holds a JSON object") }
            return ReasonFields(code: value["code"]?.stringValue, message: value["message"]?.stringValue,
                                stage: value["stage"]?.stringValue, at: value["at"]?.stringValue, file: value["file"]?.stringValue)
        }
    }

    static func typeName(_ type: mode_t) -> String {
        type == S_IFREG ? "regular file" : Spool.typeName(type)
    }

    private static func wallNanos() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Spool.nanos(ts)
    }

    /// The directory fds an admin command needs.
    private final class Directories {
        let layout: SpoolLayout
        let incoming: Int32
        let failed: Int32
        let fs: any FileSystem

        init(layout: SpoolLayout, fileSystem: any FileSystem) throws(SpoolError) {
            self.layout = layout
            self.fs = fileSystem
            do {
                failed = try fileSystem.openDirectory(layout.failed)
            } catch {
                throw SpoolError(error, while: "opening \(layout.failed)")
            }
            do {
                incoming = try fileSystem.openDirectory(layout.incoming)
            } catch {
                fileSystem.close(failed)
                throw SpoolError(error, while: "opening \(layout.incoming)")
            }
        }

        deinit {
            fs.close(incoming)
            fs.close(failed)
        }

        func exists(_ dirfd: Int32, _ name: String) -> Bool {
            (try? fs.statusAt(dirfd, name)) != nil
        }

        func readReason(_ name: String) -> [UInt8]? {
            guard let fd = try? fs.openat(failed, name + SpoolName.reasonSuffix, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, mode: 0) else { return nil }
            defer { fs.close(fd) }
            return try? fs.readAll(fd, limit: FailedQueue.reasonLimit, subject: name)
        }

        /// Whether `name`'s reason file (or, without one, the entry) changed after `nanos`.
        func quarantinedAfter(_ name: String, _ nanos: Int64) -> Bool {
            let st = (try? fs.statusAt(failed, name + SpoolName.reasonSuffix)) ?? (try? fs.statusAt(failed, name))
            guard let st else { return false }
            return st.modifiedNanos > nanos
        }
    }
}

