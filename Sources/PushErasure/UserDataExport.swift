@preconcurrency import Glibc
import PushInbox
import PushJournal
import PushMediaCore
import PushOutboxStore
import PushSpool
import PushSystem

/// Where pushspool keeps what it holds about people: the paths of one instance.
///
/// `Sendable`: a plain value.
package struct UserDataSources: Sendable, Equatable {
    /// `<state>/journal`: live segments and `archive/*.zst`.
    package var journalDirectory: String
    /// `<state>/inbox/index.sqlite`.
    package var inboxIndexPath: String
    /// `<state>`: the outbox keeps `outbox/pending` and `outbox/parked` under it.
    package var stateDirectory: String
    /// `<state>/media`: the content-addressed store the records' `media.path` point into.
    package var mediaDirectory: String
    package var spool: SpoolLayout

    package init(stateDirectory: String, spool: SpoolLayout) {
        self.stateDirectory = stateDirectory
        journalDirectory = StateLayout(root: stateDirectory).journal
        inboxIndexPath = InboxIndex.path(stateDirectory: stateDirectory)
        mediaDirectory = StateLayout(root: stateDirectory).media
        self.spool = spool
    }
}

/// A failure that stops an export part-way; the document then has no `summary` line.
///
/// `Sendable`: a plain value.
package struct UserDataError: Error, Sendable, CustomStringConvertible {
    package enum Code: String, Sendable {
        /// No journal at the configured path (a wrong `--state-dir`, or a daemon that never ran).
        case noJournal = "no_journal"
        case journal
        case inbox
        case outbox
        case spool
        /// pushspoold holds the journal (an erasure needs it stopped).
        case busy
        /// A media file could not be removed.
        case media
        /// The export stream could not be reached or refused a read or an erase.
        case stream
    }

    package var code: Code
    package var message: String

    package init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    package var shortDescription: String { code.rawValue }
    package var description: String { message }
}

/// What an export wrote, by kind: the `summary` line's counts.
///
/// `Sendable`: a plain value.
package struct UserDataCounts: Sendable, Equatable {
    package var journalRecords = 0
    package var archivedRecords = 0
    package var inboxItems = 0
    package var outboxDeliveries = 0
    package var quarantined = 0
    package var mediaFiles = 0
    package var warnings = 0

    package init() {}

    var jsonValue: JSONValue {
        .object([
            "journalRecords": .integer(journalRecords), "archivedRecords": .integer(archivedRecords),
            "inboxItems": .integer(inboxItems), "outboxDeliveries": .integer(outboxDeliveries),
            "quarantined": .integer(quarantined), "mediaFiles": .integer(mediaFiles), "warnings": .integer(warnings),
        ])
    }
}

/// `pushspoolctl user export`: everything pushspool holds about one user or device, as JSON
/// Lines — one object per line, each with a `kind` — so that a subject with 100,000 records
/// is streamed, not gathered. The document starts with a `header` line and ends with a
/// `summary` line; a document without its summary is incomplete (the export failed part-way).
/// Kinds, in this order: `header`, `journal` (archives first, then the live segments),
/// `inbox-owner`, `inbox-item`, `outbox`, `quarantine`, `media`, `warning` (anywhere: something
/// that may hold the subject's data could not be read), `summary`.
///
/// Read-only: safe while pushspoold runs (readers see committed records only).
/// `Sendable`: a plain value; ``run(generatedAtMillis:_:)`` works on the caller's thread.
package struct UserDataExport: Sendable {
    package var subject: DataSubject
    package var sources: UserDataSources
    /// Whether each media file's bytes go into its line (`base64`), not only path, size and digest.
    package var includeMedia: Bool
    /// Media files and quarantined payloads larger than this are described, not read.
    package var readLimit: Int

    package init(subject: DataSubject, sources: UserDataSources, includeMedia: Bool = false, readLimit: Int = 64 << 20) {
        self.subject = subject
        self.sources = sources
        self.includeMedia = includeMedia
        self.readLimit = readLimit
    }

    /// One media file the subject's records point at; `firstSeq` and `records` say which.
    private struct MediaReference {
        var role: String
        var firstSeq: UInt64
        var records = 1
    }

    /// Writes the document through `emit`, one serialized line (without its newline) per call.
    package func run(generatedAtMillis: Int64 = Posix.wallClockMillis(), _ emit: ([UInt8]) -> Void) throws(UserDataError) -> UserDataCounts {
        var counts = UserDataCounts()
        func line(_ kind: String, _ fields: JSONObject) {
            var object = fields
            object["kind"] = .string(kind)
            emit(JSONValue.object(object).serialized())
        }
        func warn(_ source: String, _ message: String) {
            counts.warnings += 1
            line("warning", ["source": .string(source), "message": .string(message)])
        }
        line("header", ["format": .string("pushspool-user-export"), "version": .integer(1), "subject": subjectJSON,
                        "generatedAt": .string(Timestamp.iso8601(millis: generatedAtMillis))])

        // Media in first-reference order; a path seen again only counts. Bounded by the
        // number of distinct files, not of records.
        var media: [String: MediaReference] = [:]
        var mediaOrder: [String] = []
        func noteMedia(_ path: String?, role: String, seq: UInt64) {
            guard let path, !path.isEmpty else { return }
            if media[path] == nil {
                media[path] = MediaReference(role: role, firstSeq: seq)
                mediaOrder.append(path)
            } else {
                media[path]?.records += 1
            }
        }
        func consider(_ record: JournalRecord, source: String) -> Bool {
            guard case .object(let body)? = try? JSONParser(maxDepth: 64).parse(record.body), names(body) else { return false }
            line("journal", ["seq": .number(String(record.seq)), "key": .string(record.key), "source": .string(source),
                             "ingestedAt": .string(Timestamp.iso8601(millis: record.ingestMillis)), "record": .object(body)])
            if let recordMedia = body["media"]?.objectValue {
                noteMedia(recordMedia["path"]?.stringValue, role: "image", seq: record.seq)
                noteMedia(recordMedia["thumbnail"]?["path"]?.stringValue, role: "thumbnail", seq: record.seq)
            }
            counts.journalRecords += 1
            return true
        }

        // The journal: archives hold the oldest seqs, the live segments continue after them
        // (as `journal cat --archive` reads them).
        guard Self.isDirectory(sources.journalDirectory) else {
            throw UserDataError(.noJournal, "no journal at \(sources.journalDirectory); check --state-dir or the configuration's [Journal] StateDirectory=")
        }
        do throws(JournalError) {
            try JournalArchive.forEachRecord(directory: sources.journalDirectory) { record, archive in
                if let archive {
                    if consider(record, source: "archive/" + archive) { counts.archivedRecords += 1 }
                } else {
                    _ = consider(record, source: "live")
                }
                return true
            }
        } catch {
            throw UserDataError(.journal, "reading the journal: \(error)")
        }

        // The inbox index: every item naming the subject, with its states.
        do throws(InboxError) {
            let index = try InboxIndex(path: sources.inboxIndexPath, readOnly: true)
            let owner: InboxOwner = switch subject {
            case .user(let id): .user(id)
            case .device(let id): .device(id)
            }
            if let row = try index.ownerRow(owner) {
                line("inbox-owner", ["unseen": .integer(row.unseen), "unread": .integer(row.unread), "optOut": .bool(row.optout)])
            }
            try index.forEachItem(naming: subject) { item in
                // A deleted item's row is a tombstone that still holds the push: say so, since
                // the inbox no longer shows it to the user.
                line("inbox-item", ["item": item.jsonValue(), "deleted": .bool(item.deleted)])
                counts.inboxItems += 1
            }
        } catch {
            // No index (inbox disabled, or never built) holds nothing; anything else is a failure.
            if case .missing = error.kind {} else { throw UserDataError(.inbox, "reading the inbox index: \(error)") }
        }

        // The outbox: deliveries still pending or parked. Files are read one at a time.
        let store = OutboxStore(stateDirectory: sources.stateDirectory)
        for (state, directory) in [("pending", store.pendingDirectory), ("parked", store.parkedDirectory)] {
            let fileNames: [String]
            do { fileNames = try store.names(directory) } catch { throw UserDataError(.outbox, "listing \(directory): \(error)") }
            for name in fileNames {
                guard let delivery = store.read(directory + "/" + name) else {
                    if Self.isRegularFile(directory + "/" + name) { warn("outbox", "\(directory)/\(name) is not a readable delivery; check it by hand") }
                    continue
                }
                guard names(delivery) else { continue }
                line("outbox", ["state": .string(state), "file": .string(directory + "/" + name), "delivery": delivery.jsonValue])
                counts.outboxDeliveries += 1
            }
        }

        // Quarantined spool files: the payload as it arrived, when it names the subject.
        do throws(SpoolError) {
            try FailedQueue.forEach(layout: sources.spool) { entry in
                guard !entry.payloadMissing else { return }
                let path = sources.spool.failed + "/" + entry.name
                let bytes: [UInt8]
                switch Self.readRegularFile(path, limit: readLimit) {
                case .bytes(let read): bytes = read
                case .unread(let problem):
                    warn("quarantine", "failed/\(entry.name) not read (\(problem)); check by hand whether it names the subject")
                    return
                }
                guard let match = quarantineMatch(bytes) else { return }
                var fields: JSONObject = ["name": .string(entry.name), "size": .integer(bytes.count), "match": .string(match),
                                                   "sha256": .string(SHA256.hex(of: bytes))]
                if let text = String(validating: bytes, as: UTF8.self) {
                    fields["payload"] = .string(text)
                } else {
                    fields["payloadBase64"] = .string(Base64.encode(bytes))
                }
                if let reason = try? Posix.readFile(path + SpoolName.reasonSuffix, limit: 1 << 20),
                   let parsed = try? JSONParser(maxDepth: 64).parse(reason) {
                    fields["reason"] = parsed
                }
                line("quarantine", fields)
                counts.quarantined += 1
            }
        } catch {
            // A spool without failed/ yet holds no quarantined file.
            if Self.isDirectory(sources.spool.failed) { throw UserDataError(.spool, "reading \(sources.spool.failed): \(error)") }
        }

        // The media files the subject's records point at.
        for path in mediaOrder {
            guard let reference = media[path] else { continue }
            var fields: JSONObject = ["path": .string(path), "role": .string(reference.role),
                                               "firstSeq": .number(String(reference.firstSeq)), "records": .integer(reference.records)]
            if !isInMediaStore(path) {
                // A record is trusted for what it says, not for where it points: nothing outside
                // the store is read.
                fields["error"] = .string("outside the media store \(sources.mediaDirectory); not read")
            } else {
                switch Self.readRegularFile(path, limit: readLimit) {
                case .bytes(let bytes):
                    fields["size"] = .integer(bytes.count)
                    fields["sha256"] = .string(SHA256.hex(of: bytes))
                    if includeMedia { fields["base64"] = .string(Base64.encode(bytes)) }
                case .unread(let problem):
                    // Removed by media retention, or never stored: the record still says what it was.
                    fields["error"] = .string(problem)
                }
            }
            line("media", fields)
            counts.mediaFiles += 1
        }

        line("summary", ["complete": .bool(true), "counts": counts.jsonValue])
        return counts
    }

    private var subjectJSON: JSONValue {
        switch subject {
        case .user(let id): .object(["user": .string(id)])
        case .device(let id): .object(["device": .string(id)])
        }
    }

    /// Whether a record (a push or an event) names the subject: its `user`, or its `device`.
    func names(_ body: JSONObject) -> Bool {
        switch subject {
        case .user(let id): body["user"]?.stringValue == id
        case .device(let id): body["device"]?.stringValue == id
        }
    }

    /// Whether an outbox delivery is the subject's: a user's deliveries are ordered under
    /// `u:<user>`; a device's name it (`device`) or are ordered under `d:<device>`.
    func names(_ delivery: OutboxDelivery) -> Bool {
        switch subject {
        case .user(let id): delivery.orderKey == "u:" + id
        case .device(let id): delivery.device == id || delivery.orderKey == "d:" + id
        }
    }

    /// How a quarantined payload names the subject: `envelope` when it parses and its
    /// `user`/`device` is the subject; `text` when it does not parse but holds a
    /// `"user": "<id>"` (or `"device"`) member, which an operator should review before
    /// handing it out; `nil` otherwise.
    package func quarantineMatch(_ bytes: [UInt8]) -> String? {
        if case .object(let top)? = try? JSONParser(maxDepth: 64).parse(bytes) {
            return names(top) ? "envelope" : nil
        }
        let (member, id) = switch subject {
        case .user(let id): ("user", id)
        case .device(let id): ("device", id)
        }
        return Self.containsMember(bytes, name: member, value: JSONValue.string(id).serialized()) ? "text" : nil
    }

    /// Whether `bytes` hold `"name"`, optional blanks, `:`, optional blanks, then `value`.
    package static func containsMember(_ bytes: [UInt8], name: String, value: [UInt8]) -> Bool {
        let key = Array("\"\(name)\"".utf8)
        guard bytes.count >= key.count else { return false }
        var start = 0
        while start + key.count <= bytes.count {
            guard bytes[start..<(start + key.count)].elementsEqual(key) else {
                start += 1
                continue
            }
            var i = start + key.count
            func skipBlanks() { while i < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[i]) { i += 1 } }
            skipBlanks()
            if i < bytes.count, bytes[i] == UInt8(ascii: ":") {
                i += 1
                skipBlanks()
                if i + value.count <= bytes.count, bytes[i..<(i + value.count)].elementsEqual(value) { return true }
            }
            start += 1
        }
        return false
    }

    /// Whether `path` lies inside the media store: under it, with no `.` or `..` component.
    package func isInMediaStore(_ path: String) -> Bool {
        let prefix = sources.mediaDirectory + "/"
        guard path.hasPrefix(prefix) else { return false }
        return !path.dropFirst(prefix.count).split(separator: "/", omittingEmptySubsequences: false)
            .contains { $0.isEmpty || $0 == "." || $0 == ".." }
    }

    static func isDirectory(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR
    }

    static func isRegularFile(_ path: String) -> Bool {
        var st = stat()
        return lstat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG
    }

    /// A file's bytes, or why they were not read (for the document, not an error: the export goes on).
    enum FileRead {
        case bytes([UInt8])
        case unread(String)
    }

    /// The bytes of a regular file, or why not. Never follows a symlink, never blocks on a FIFO
    /// (quarantine holds whatever was dropped into the spool).
    static func readRegularFile(_ path: String, limit: Int) -> FileRead {
        let fd: Int32
        do { fd = try Posix.open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) } catch { return .unread("\(error)") }
        defer { close(fd) }
        do {
            let st = try Posix.fstat(fd, subject: path)
            guard (st.st_mode & S_IFMT) == S_IFREG else { return .unread("not a regular file") }
            guard st.st_size <= Int64(limit) else { return .unread("\(st.st_size) bytes, over the \(limit)-byte read limit") }
            return .bytes(try Posix.readAll(fd, limit: limit, sizeHint: Int(st.st_size), regularFile: true, subject: path))
        } catch {
            return .unread("\(error)")
        }
    }
}

/// RFC 4648 base64 with padding, for media bytes and binary quarantined payloads.
package enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    package static func encode(_ bytes: [UInt8]) -> String {
        var out = [UInt8]()
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var i = 0
        while i + 3 <= bytes.count {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
            out += [alphabet[Int(n >> 18)], alphabet[Int(n >> 12 & 63)], alphabet[Int(n >> 6 & 63)], alphabet[Int(n & 63)]]
            i += 3
        }
        let rest = bytes.count - i
        if rest == 1 {
            let n = UInt32(bytes[i]) << 16
            out += [alphabet[Int(n >> 18)], alphabet[Int(n >> 12 & 63)], UInt8(ascii: "="), UInt8(ascii: "=")]
        } else if rest == 2 {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8
            out += [alphabet[Int(n >> 18)], alphabet[Int(n >> 12 & 63)], alphabet[Int(n >> 6 & 63)], UInt8(ascii: "=")]
        }
        return String(decoding: out, as: UTF8.self)
    }
}
