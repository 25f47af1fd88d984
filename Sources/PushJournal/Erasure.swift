@preconcurrency import Glibc
import PushSystem

/// Erasure of one user's or device's records from the journal (docs/design/erasure.md): every
/// frame that names the subject is replaced, in place and at the same length, by a tombstone —
/// same seq, ingest time and frame length, key `erased:<HMAC(secret, original key)>`, JSON
/// `{"kind":"erased","erasure":"<id>"}` padded with blanks — so framing, CRCs, seqs, offsets
/// and `journal verify` all stay as they were. Files are replaced whole (temp file, sync,
/// rename, directory sync), like every other whole-file replacement of the journal.

/// Why an erasure step failed. `Sendable` value; `description` says what to do.
package struct ErasureError: Error, Sendable, CustomStringConvertible {
    package enum Code: String, Sendable {
        /// Reading or writing a journal file failed.
        case journal
        /// The instance secret (`erase.key`) is missing, unreadable or malformed.
        case secret
        /// Another process (pushspoold) holds the journal's `LOCK`.
        case busy
        /// A frame is too short to hold a tombstone (not one pushspool writes).
        case frameTooShort = "frame_too_short"
        /// A test hook stopped the erasure at a named step.
        case stopped
        /// The state directory's `erase.key` is not the configured fleet key.
        case keyMismatch = "key_mismatch"
    }

    package var code: Code
    package var message: String

    package init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    init(_ error: JournalError) { self.init(.journal, error.description) }

    /// Stable, without data: for metrics and journald fields.
    package var shortDescription: String { code.rawValue }
    package var description: String { message }
}

/// The per-instance secret of the keyed hashes (`<state>/erase.key`, 32 random bytes, mode
/// 0600, created at the first erasure). Without it nobody can tell which user a tombstone or
/// an erasure record stands for; with it an operator can still correlate.
///
/// `Sendable`: a value.
package struct ErasureSecret: Sendable, Equatable {
    package static let fileName = "erase.key"
    package static let size = 32
    /// The prefix of every tombstone's key; no vendor key starts with it (vendor names are
    /// lower-case letters followed by `:` or `@`, and `erased` is not a vendor).
    package static let tombstoneKeyPrefix = "erased:"

    package let bytes: [UInt8]
    /// The secret set up as an HMAC key once, not for every hash.
    private let key: HMACSHA256.Key

    package init(bytes: [UInt8]) {
        self.bytes = bytes
        key = HMACSHA256.Key(bytes)
    }

    package static func == (lhs: ErasureSecret, rhs: ErasureSecret) -> Bool { lhs.bytes == rhs.bytes }

    /// The secret of the instance whose state directory is `stateDirectory`, or `nil` when
    /// no erasure ever ran there.
    package static func load(stateDirectory: String) throws(ErasureError) -> ErasureSecret? {
        let path = stateDirectory + "/" + fileName
        let fd: Int32
        do { fd = try Posix.open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) } catch {
            if error.errno == ENOENT { return nil }
            throw ErasureError(.secret, "cannot open the erasure secret \(path): \(error)")
        }
        defer { Posix.close(fd) }
        let bytes: [UInt8]
        do {
            let info = try Posix.fstat(fd, subject: path)
            guard info.st_mode & S_IFMT == S_IFREG else { throw ErasureError(.secret, "erasure secret \(path) is not a regular file") }
            guard info.st_mode & 0o077 == 0 else {
                throw ErasureError(.secret, "erasure secret \(path) has mode \(String(info.st_mode & 0o777, radix: 8)); "
                                   + "it must not be accessible to group or others (chmod 600)")
            }
            bytes = try Posix.readAll(fd, limit: 4096, regularFile: true, subject: path)
        } catch let error as ErasureError {
            throw error
        } catch {
            throw ErasureError(.secret, "cannot read the erasure secret \(path): \(error)")
        }
        guard bytes.count == size else {
            throw ErasureError(.secret, "erasure secret \(path) holds \(bytes.count) bytes, not \(size); "
                               + "restore it from backup (tombstones already written cannot be matched without it)")
        }
        return ErasureSecret(bytes: bytes)
    }

    /// The instance's secret, created (32 random bytes, 0600, synced) if there is none yet.
    /// Two processes creating it at once end up with the same one: the loser of the
    /// no-replace rename reads the winner's.
    package static func loadOrCreate(stateDirectory: String) throws(ErasureError) -> ErasureSecret {
        if let existing = try load(stateDirectory: stateDirectory) { return existing }
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<size).map { _ in UInt8.random(in: 0...255, using: &generator) }
        try install(bytes, stateDirectory: stateDirectory)
        guard let made = try load(stateDirectory: stateDirectory) else {
            throw ErasureError(.secret, "the erasure secret \(stateDirectory)/\(fileName) vanished while it was created")
        }
        return made
    }

    /// What ``provision(stateDirectory:key:)`` did. `Sendable` value.
    package enum Provisioned: Sendable, Equatable {
        /// The state directory had no secret: the fleet key is now its `erase.key`.
        case installed
        /// Its `erase.key` already is the fleet key.
        case unchanged
    }

    /// Makes the fleet erasure key (`[Export] ErasureKeyFile=`, the same on every host and
    /// node) this instance's secret: installed as `<state>/erase.key` (0600, synced, renamed
    /// without replacing) when there is none, accepted when the one there is equal. One that
    /// differs is refused (``ErasureError/Code/keyMismatch``, the daemon exits 78): the
    /// tombstones, the dedup memory of erased pushes and the erasure records already written
    /// hold hashes under it, and replacing it would silently unmatch them all. Two processes
    /// installing at once both end with the key (the loser reads the winner's, equal).
    @discardableResult
    package static func provision(stateDirectory: String, key: ErasureSecret) throws(ErasureError) -> Provisioned {
        let path = stateDirectory + "/" + fileName
        guard key.bytes.count == size else {
            throw ErasureError(.secret, "the fleet erasure key holds \(key.bytes.count) bytes, not \(size)")
        }
        var outcome = Provisioned.unchanged
        if try load(stateDirectory: stateDirectory) == nil {
            try install(key.bytes, stateDirectory: stateDirectory)
            outcome = .installed
        }
        guard let present = try load(stateDirectory: stateDirectory) else {
            throw ErasureError(.secret, "the erasure secret \(path) vanished while it was installed")
        }
        guard present == key else {
            throw ErasureError(.keyMismatch, "\(path) differs from the fleet erasure key ([Export] ErasureKeyFile=, or the "
                               + "credential erase-key): this instance's tombstones, dedup memory and erasure records already "
                               + "hash under the key in \(path), so it is not replaced. Either configure that key as the fleet's "
                               + "(copy \(path) to every host and node), or, on an instance that never erased anyone "
                               + "(no erase/ directory and no tombstones), remove \(path) and start again")
        }
        return outcome
    }

    /// ``provision(stateDirectory:key:)`` with the key read from `keyFile` (32 raw bytes, a
    /// regular file without group or other bits, `owner`'s when given: ``KeyFile/readSecret(path:size:owner:)``).
    @discardableResult
    package static func provision(stateDirectory: String, keyFile: String, owner: uid_t?) throws(ErasureError) -> Provisioned {
        let bytes: [UInt8]
        do { bytes = try KeyFile.readSecret(path: keyFile, size: size, owner: owner) } catch {
            throw ErasureError(.secret, "the fleet erasure key: \(error.message)")
        }
        return try provision(stateDirectory: stateDirectory, key: ErasureSecret(bytes: bytes))
    }

    /// Writes `bytes` as `<state>/erase.key` when none is there: temp file (0600), fsync,
    /// rename without replacing, directory fsync. An existing file is left as it is.
    private static func install(_ bytes: [UInt8], stateDirectory: String) throws(ErasureError) {
        let temp = fileName + ".\(getpid()).tmp"
        let fs = RealFileSystem()
        do {
            let dirfd = try Posix.openDirectory(stateDirectory)
            defer { Posix.close(dirfd) }
            let fd = try Posix.openat(dirfd, temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode: 0o600)
            do {
                try Posix.writeAll(fd, bytes, subject: temp)
                try Posix.fsync(fd, subject: temp)
                Posix.close(fd)
            } catch {
                Posix.close(fd)
                try? Posix.unlinkat(dirfd, temp)
                throw error
            }
            do { try fs.renameNoReplace(dirfd, temp, dirfd, fileName) } catch {
                try? Posix.unlinkat(dirfd, temp)
                guard error.errno == EEXIST else { throw error }
            }
            try Posix.fsync(dirfd, subject: stateDirectory)
        } catch {
            throw ErasureError(.secret, "cannot create the erasure secret in \(stateDirectory): \(error)")
        }
    }

    /// HMAC-SHA256 of `text` under the secret, as hex.
    package func keyedHash(_ text: String) -> String { key.hex(text) }

    /// The key a tombstone of the record keyed `key` carries. A redelivery of the erased push
    /// computes the same key, so it is still recognised as a duplicate.
    package func tombstoneKey(for key: String) -> String { Self.tombstoneKeyPrefix + keyedHash(key) }

    package func subjectHash(_ subject: ErasureSubject) -> String { keyedHash(subject.hashInput) }

    /// How journald events name a user under `[Log] UserIds=hash`: the first 16 hex digits of
    /// the subject hash, enough to tell users apart in a log and to find an erasure record's
    /// subject by its prefix, short enough to read.
    package func logUserHash(_ user: String) -> String { String(subjectHash(.user(user)).prefix(16)) }
}

/// Whose records an erasure removes: the envelopes' `user`, or their `device`.
///
/// `Sendable`: a value.
package enum ErasureSubject: Sendable, Equatable {
    case user(String)
    case device(String)

    /// What the keyed hash is taken of: the scope's letter, so a user and a device with the
    /// same id hash differently.
    var hashInput: String {
        switch self {
        case .user(let id): "u:" + id
        case .device(let id): "d:" + id
        }
    }

    package var scope: ErasureScope {
        switch self {
        case .user: .user
        case .device: .device
        }
    }
}

package enum ErasureScope: String, Sendable {
    case user
    case device
}

/// One erasure as a rewrite knows it: its id and the subject's keyed hash, never the plain id
/// (an erasure record and its plan must not name whom they erase).
///
/// `Sendable`: a value.
package struct ErasureTarget: Sendable, Equatable {
    /// 32 lowercase hex digits.
    package var erasureID: String
    package var scope: ErasureScope
    package var subjectHash: String
    /// Only records below this seq are the erasure's: a live erasure covers what was
    /// journaled before its `erasure` record; what arrives later is new data. `UInt64.max`
    /// (offline, with the journal to itself) covers every record.
    package var before: UInt64
    /// The plain id, when the caller knows it (in memory only, never written anywhere): a
    /// record whose JSON does not contain it as pushspool writes it (a JSON string) cannot
    /// name it, so most records are skipped without parsing or hashing. `nil` = hash every one.
    package var plain: String? {
        didSet { needle = plain.map { Array(JSONValue.string($0).serialized()) } }
    }
    private var needle: [UInt8]?

    package init(erasureID: String, scope: ErasureScope, subjectHash: String, before: UInt64 = .max, plain: String? = nil) {
        self.erasureID = erasureID
        self.scope = scope
        self.subjectHash = subjectHash
        self.before = before
        self.plain = plain
        needle = plain.map { Array(JSONValue.string($0).serialized()) }
    }

    package init(erasureID: String, subject: ErasureSubject, secret: ErasureSecret) {
        self.init(erasureID: erasureID, scope: subject.scope, subjectHash: secret.subjectHash(subject))
    }

    /// A fresh erasure id: 16 random bytes as hex.
    package static func newID() -> String {
        var generator = SystemRandomNumberGenerator()
        return hexString((0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }

    /// Whether a record names the subject: its JSON's `user` (or `device`), or — for a user —
    /// the user inside its dedup key (`vendor@N:user:id`).
    func matches(key: String, json: [UInt8], secret: ErasureSecret) -> Bool {
        if matches(key: key, secret: secret) { return true }
        if let needle, !Self.contains(json, needle) { return false }
        guard let id = scope.subject(inBody: json) else { return false }
        return secret.keyedHash((scope == .user ? "u:" : "d:") + id) == subjectHash
    }

    /// Whether a dedup key carries the subject (only a user is ever part of a key).
    func matches(key: String, secret: ErasureSecret) -> Bool {
        guard scope == .user, let user = Self.user(inKey: key) else { return false }
        if let plain { return user.utf8.elementsEqual(plain.utf8) && secret.keyedHash("u:" + user) == subjectHash }
        return secret.keyedHash("u:" + user) == subjectHash
    }

    /// Whether `needle` occurs in `haystack`: `memchr(3)` for its first byte, `memcmp(3)` for
    /// the rest (Glibc's `memmem` needs `_GNU_SOURCE`, which Swift does not import).
    package static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard let first = needle.first else { return true }
        return haystack.withUnsafeBytes { h in
            needle.withUnsafeBytes { n in
                guard let base = h.baseAddress, let nb = n.baseAddress, h.count >= n.count else { return false }
                var at = 0
                let last = h.count - n.count
                while at <= last {
                    guard let hit = memchr(base + at, Int32(first), last - at + 1) else { return false }
                    let offset = base.distance(to: UnsafeRawPointer(hit))
                    if memcmp(base + offset, nb, n.count) == 0 { return true }
                    at = offset + 1
                }
                return false
            }
        }
    }

    /// The user of a `vendor@N:user:id` key (docs/journal-format.md, "The dedup key"), or nil.
    static func user(inKey key: String) -> String? {
        let bytes = Array(key.utf8)
        guard let at = bytes.firstIndex(of: UInt8(ascii: "@")),
              bytes[..<at].allSatisfy({ $0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "z") }), at > 0 else { return nil }
        var i = at + 1
        var length = 0
        while i < bytes.count, bytes[i] >= UInt8(ascii: "0"), bytes[i] <= UInt8(ascii: "9") {
            length = length * 10 + Int(bytes[i] - UInt8(ascii: "0"))
            guard length <= 255 else { return nil }
            i += 1
        }
        guard i > at + 1, i < bytes.count, bytes[i] == UInt8(ascii: ":"), i + 1 + length < bytes.count,
              bytes[i + 1 + length] == UInt8(ascii: ":") else { return nil }
        return UTF8Text.string(bytes[(i + 1)..<(i + 1 + length)])
    }
}

/// Tombstones: building them, and recognising them.
package enum Tombstone {
    /// Whether a record (by its key) is a tombstone.
    package static func isTombstone(key: String) -> Bool { key.hasPrefix(ErasureSecret.tombstoneKeyPrefix) }

    /// The erasure id a tombstone's JSON names, for `journal cat`; nil for other records.
    package static func erasureID(json: [UInt8]) -> String? {
        guard case .object(let body)? = try? JSONParser(maxDepth: 4).parse(json) else { return nil }
        return erasureID(members: body)
    }

    /// The erasure id a tombstone body's members name: empty when the frame was too short to
    /// keep it (``body(bodyLength:originalKey:erasureID:secret:)``); nil when the members are
    /// not a tombstone's. The one reader of what ``body(bodyLength:originalKey:erasureID:secret:)``
    /// writes, for `journal cat` and for the followers' decoded record bodies alike.
    package static func erasureID(members body: JSONObject) -> String? {
        guard body["kind"]?.stringValue == "erased" else { return nil }
        return body["erasure"]?.stringValue ?? ""
    }

    /// Key and JSON of the tombstone replacing a record whose key and JSON together were
    /// `bodyLength` bytes: together they are exactly as long. The key is shortened (to no less
    /// than 16 hex digits of the MAC) and the erasure id dropped only for a body too short for
    /// the full form, which pushspool's own records never are.
    static func body(bodyLength: Int, originalKey: String, erasureID: String, secret: ErasureSecret) throws(ErasureError) -> (key: [UInt8], json: [UInt8]) {
        var key = Array(secret.tombstoneKey(for: originalKey).utf8)
        var json = Array("{\"kind\":\"erased\",\"erasure\":\"\(erasureID)\"}".utf8)
        if key.count + json.count > bodyLength {
            json = Array("{\"kind\":\"erased\"}".utf8)
            let minimumKey = ErasureSecret.tombstoneKeyPrefix.utf8.count + 16
            guard bodyLength - json.count >= minimumKey else {
                throw ErasureError(.frameTooShort, "a record of \(bodyLength) body bytes is too short for a tombstone")
            }
            key = Array(key.prefix(min(key.count, bodyLength - json.count)))
        }
        // JSON whitespace inside the object keeps it one valid document of the exact length.
        json.insert(contentsOf: repeatElement(UInt8(ascii: " "), count: bodyLength - key.count - json.count), at: json.count - 1)
        return (key, json)
    }
}

/// The pure part of a rewrite: one segment's bytes in, the same bytes with the subjects'
/// frames replaced by tombstones out. No I/O, so it is testable byte by byte.
package enum SegmentRedaction {
    /// Replaces in `bytes` (a whole segment file, header first) every frame that one of
    /// `targets` matches and that is not a tombstone already (so running it twice changes
    /// nothing the second time). Returns the seqs replaced. Throws on a frame that does not
    /// check: a damaged segment is never rewritten (its damage would get fresh CRCs).
    package static func redact(_ bytes: inout [UInt8], label: String, targets: [ErasureTarget],
                               secret: ErasureSecret) throws(ErasureError) -> [UInt64] {
        var tombstones: [UInt64: String] = [:]
        return try redact(&bytes, label: label, targets: targets, secret: secret, tombstones: &tombstones)
    }

    /// `redact`, also collecting the key of every tombstone in the segment, old and new, by
    /// seq (for the dedup checkpoint's fingerprints).
    static func redact(_ bytes: inout [UInt8], label: String, targets: [ErasureTarget], secret: ErasureSecret,
                       tombstones: inout [UInt64: String]) throws(ErasureError) -> [UInt64] {
        var replaced: [UInt64] = []
        var seen: [UInt64: String] = [:]
        var replacements: [(offset: Int, frame: [UInt8])] = []
        let scanned: Result<Void, ErasureError> = bytes.withUnsafeBytes { raw in
            guard case .success(let header) = SegmentHeader.decode(raw) else {
                return .failure(ErasureError(.journal, "\(label): segment header does not check; run `pushspoolctl journal verify`"))
            }
            var walker = SegmentFrameWalker(SegmentBuffer(raw), from: Int64(SegmentHeader.size), expectedSeq: header.firstSeq,
                                            mode: .full, policy: .closed)
            while true {
                let frame: RecordHeader
                let parts: (key: String, json: [UInt8])
                let offset: Int64
                switch walker.next() {
                case .end:
                    return .success(())
                case .record(let h, let key, let json, let at):
                    frame = h
                    parts = (key ?? "", json ?? [])
                    offset = at
                case .fault(.outOfOrderOrCut(let seq), let at, _):
                    return .failure(ErasureError(.journal, "\(label) at \(at): record \(seq) out of order or cut"))
                case .fault(let fault, let at, _):
                    return .failure(ErasureError(.journal, "\(label) at \(at): \(fault.detail); run `pushspoolctl journal verify`"))
                }
                if Tombstone.isTombstone(key: parts.key) {
                    seen[frame.seq] = parts.key
                } else if let target = targets.first(where: { frame.seq < $0.before && $0.matches(key: parts.key, json: parts.json, secret: secret) }) {
                    do throws(ErasureError) {
                        let body = try Tombstone.body(bodyLength: Int(frame.bodyLength), originalKey: parts.key,
                                                      erasureID: target.erasureID, secret: secret)
                        var encoded: [UInt8] = []
                        RecordFrame.encode(seq: frame.seq, ingestMillis: frame.ingestMillis, key: body.key, body: body.json, into: &encoded)
                        // Same body length, hence the same padded frame length: offsets stay valid.
                        guard encoded.count == frame.frameLength else {
                            return .failure(ErasureError(.journal, "\(label) at \(offset): tombstone length differs from the record's"))
                        }
                        replacements.append((Int(offset), encoded))
                        replaced.append(frame.seq)
                        seen[frame.seq] = String(decoding: body.key, as: UTF8.self)
                    } catch {
                        return .failure(error)
                    }
                }
            }
        }
        try scanned.get()
        tombstones.merge(seen) { _, new in new }
        for replacement in replacements {
            bytes.replaceSubrange(replacement.offset..<(replacement.offset + replacement.frame.count), with: replacement.frame)
        }
        return replaced
    }
}

/// A named step of a journal erasure, where the crash tests stop it (docs/design/erasure.md,
/// "Completion and crash points").
package enum ErasureStep: Sendable, Equatable, CustomStringConvertible {
    /// A segment's rewrite is in `NAME.tmp`, synced, not renamed.
    case segmentTemp(String)
    /// The rewrite is renamed over the segment; the directory is not synced.
    case segmentRenamed(String)
    /// An archive's rewrite is in `archive/NAME.zst.tmp`, synced, not renamed.
    case archiveTemp(String)
    case archiveRenamed(String)
    /// A retired segment's key file (`keys/NAME.keys`) is renamed into place, the directory not synced.
    case keysRewritten(String)
    /// Every segment is done; `dedup.ckpt` (fingerprints of the original keys) not yet rewritten.
    case beforeCheckpoint

    package var description: String {
        switch self {
        case .segmentTemp(let name): "segment-temp \(name)"
        case .segmentRenamed(let name): "segment-renamed \(name)"
        case .archiveTemp(let name): "archive-temp \(name)"
        case .archiveRenamed(let name): "archive-renamed \(name)"
        case .keysRewritten(let name): "keys-rewritten \(name)"
        case .beforeCheckpoint: "before-checkpoint"
        }
    }
}

/// What a journal erasure did. `Sendable` value.
package struct ErasureReport: Sendable, Equatable {
    /// Records turned into tombstones by this run (0 on a rerun of a finished erasure).
    package var records = 0
    package var segmentsRewritten: [String] = []
    package var archivesRewritten: [String] = []
    package var keyFilesRewritten: [String] = []
    /// `dedup.ckpt` had slots of erased records and was rewritten (or, undecodable, removed).
    package var checkpointRewritten = false

    package init() {}
}

/// The journal side of an erasure, on the files.
///
/// `run` needs the journal to itself (it takes `LOCK`): with no writer, every segment,
/// the newest included, can be rewritten, and so can the dedup checkpoint. Idempotent: a
/// rerun after a crash at any step finishes the work (tombstones are left as they are, and
/// every tombstone found, old or new, is what the checkpoint's slots are pointed at; a
/// leftover `.tmp` is removed by recovery or by the next run).
package enum JournalErasure {
    /// Erases `targets` from the journal in `directory` under `lock` (taken here when `nil`);
    /// `hook` is a test seam called at each `ErasureStep` (throwing from it stops the run
    /// there, as a crash would).
    package static func run(directory: String, targets: [ErasureTarget], secret: ErasureSecret, lock: JournalErasureLock? = nil,
                            hook: (ErasureStep) throws(ErasureError) -> Void = { _ throws(ErasureError) in }) throws(ErasureError) -> ErasureReport {
        let held: JournalErasureLock
        if let lock { held = lock } else { held = try JournalErasureLock(directory: directory) }
        defer { withExtendedLifetime(held) {} }
        let io = JournalIO(fs: RealFileSystem(faultScope: "erase"), directory: directory)
        let rewritten = try rewrite(directory: directory, dirfd: held.dirfd, io: io, targets: targets, secret: secret,
                                    sealedBelow: .max, hook: hook)
        var report = rewritten.0
        try hook(.beforeCheckpoint)
        report.checkpointRewritten = try rewriteCheckpoint(directory: directory, dirfd: held.dirfd, io: io, tombstones: rewritten.1)
        return report
    }

    /// The journal side of an erasure while pushspoold runs (docs/design/erasure.md, "Journal"):
    /// only segments below `sealedBelow` — the first seq of the active segment after the
    /// writer sealed it — are rewritten, with archives and retired key files; the caller holds
    /// the daemon's retention gate, so no segment is archived or retired under the rewrite.
    /// The dedup checkpoint is the writer's: the tombstone keys found, old and new, by seq,
    /// are returned for ``JournalWriter/replaceErasedFingerprints(_:)``.
    package static func runLive(directory: String, targets: [ErasureTarget], secret: ErasureSecret, sealedBelow: UInt64,
                                hook: (ErasureStep) throws(ErasureError) -> Void = { _ throws(ErasureError) in })
        throws(ErasureError) -> (report: ErasureReport, tombstones: [UInt64: String]) {
        let io = JournalIO(fs: RealFileSystem(faultScope: "erase"), directory: directory)
        let dirfd: Int32
        do { dirfd = try Posix.openDirectory(directory) } catch {
            throw ErasureError(.journal, "no journal at \(directory) (\(error)); check the configuration's [Journal] StateDirectory=")
        }
        defer { Posix.close(dirfd) }
        return try rewrite(directory: directory, dirfd: dirfd, io: io, targets: targets, secret: secret, sealedBelow: sealedBelow, hook: hook)
    }

    /// Segments (those below `sealedBelow`), archives and retired key files, rewritten.
    private static func rewrite(directory: String, dirfd: Int32, io: JournalIO, targets: [ErasureTarget], secret: ErasureSecret,
                                sealedBelow: UInt64, hook: (ErasureStep) throws(ErasureError) -> Void)
        throws(ErasureError) -> (ErasureReport, [UInt64: String]) {
        var report = ErasureReport()
        var tombstones: [UInt64: String] = [:]
        let names: [String]
        do { names = try io.fs.listDirectory(directory) } catch { throw ErasureError(io.err(error)) }
        // A rewrite a crash interrupted: the segment it came from is intact, so it is redone.
        // Live, only a sealed segment's: the writer's own `.tmp` of a segment it is cutting
        // has a name above every sealed one.
        for name in names where name.hasSuffix(JournalFiles.segmentSuffix + ".tmp") {
            guard let first = JournalFiles.firstSeq(ofSegment: String(name.dropLast(4))), first < sealedBelow else { continue }
            do { try io.unlinkat(dirfd, name) } catch { throw ErasureError(error) }
        }
        for sub in [JournalFiles.archive, RetiredKeys.directoryName] {
            let path = directory + "/" + sub
            let leftovers = ((try? io.fs.listDirectory(path)) ?? []).filter { $0.hasSuffix(".tmp") }
            for name in leftovers {
                do { try Posix.unlinkat(dirfd, sub + "/" + name) } catch { throw ErasureError(io.err(error)) }
            }
        }
        let segments = names.compactMap { name in JournalFiles.firstSeq(ofSegment: name).map { (name, $0) } }.sorted { $0.1 < $1.1 }
        for (name, first) in segments where first < sealedBelow {
            if try rewriteSegment(name, directory: directory, dirfd: dirfd, io: io, targets: targets, secret: secret, hook: hook,
                                  report: &report, tombstones: &tombstones) {
                report.segmentsRewritten.append(name)
            }
        }
        for archived in JournalArchive.list(directory: directory) {
            if try rewriteArchive(archived.name, directory: directory, io: io, targets: targets, secret: secret, hook: hook,
                                  report: &report, tombstones: &tombstones) {
                report.archivesRewritten.append(archived.name)
            }
        }
        for keyFile in RetiredKeys.list(directory: directory) {
            if try RetiredKeys.redact(directory: directory, name: keyFile.name, io: io, targets: targets, secret: secret,
                                      hook: hook, tombstones: &tombstones) {
                report.keyFilesRewritten.append(keyFile.name)
            }
        }
        return (report, tombstones)
    }

    /// Rewrites one live segment if it holds a target; true when it did.
    private static func rewriteSegment(_ name: String, directory: String, dirfd: Int32, io: JournalIO, targets: [ErasureTarget],
                                       secret: ErasureSecret, hook: (ErasureStep) throws(ErasureError) -> Void,
                                       report: inout ErasureReport, tombstones: inout [UInt64: String]) throws(ErasureError) -> Bool {
        var bytes: [UInt8]
        do { bytes = try Posix.readFile(directory + "/" + name, limit: 1 << 40) } catch { throw ErasureError(io.err(error)) }
        let replaced = try SegmentRedaction.redact(&bytes, label: name, targets: targets, secret: secret, tombstones: &tombstones)
        guard !replaced.isEmpty else { return false }
        try replaceFile(name, in: dirfd, directoryPath: directory, bytes: bytes, io: io, mode: 0o640)
        { step throws(ErasureError) in try hook(step ? .segmentTemp(name) : .segmentRenamed(name)) }
        report.records += replaced.count
        return true
    }

    private static func rewriteArchive(_ name: String, directory: String, io: JournalIO, targets: [ErasureTarget],
                                       secret: ErasureSecret, hook: (ErasureStep) throws(ErasureError) -> Void,
                                       report: inout ErasureReport, tombstones: inout [UInt64: String]) throws(ErasureError) -> Bool {
        var bytes: [UInt8]
        do { bytes = try JournalArchive.segmentBytes(directory: directory, archiveName: name) } catch { throw ErasureError(error) }
        let replaced = try SegmentRedaction.redact(&bytes, label: JournalFiles.archive + "/" + name, targets: targets, secret: secret,
                                                   tombstones: &tombstones)
        guard !replaced.isEmpty else { return false }
        let compressed: [UInt8]
        do { compressed = try Zstd.compress(bytes) } catch { throw ErasureError(.journal, "\(name): \(error.detail)") }
        let path = directory + "/" + JournalFiles.archive
        let afd: Int32
        do { afd = try Posix.openDirectory(path) } catch { throw ErasureError(io.err(error)) }
        defer { Posix.close(afd) }
        try replaceFile(name, in: afd, directoryPath: path, bytes: compressed, io: io, mode: 0o640)
        { step throws(ErasureError) in try hook(step ? .archiveTemp(name) : .archiveRenamed(name)) }
        report.records += replaced.count
        return true
    }

    /// Points the dedup checkpoint's slots of tombstoned records at their tombstone keys'
    /// fingerprints (the old ones are unkeyed hashes of keys that named the user). Rewritten,
    /// not removed: the checkpoint is the only dedup memory of retired segments' keys, which a
    /// rebuild from the live frames cannot recover. One that does not decode is removed
    /// (recovery would ignore it anyway). True when the file changed.
    private static func rewriteCheckpoint(directory: String, dirfd: Int32, io: JournalIO,
                                          tombstones: [UInt64: String]) throws(ErasureError) -> Bool {
        let bytes: [UInt8]
        do { bytes = try io.fs.readFile(directory + "/" + JournalFiles.checkpoint, limit: 1 << 30) } catch {
            if error.errno == ENOENT { return false }
            throw ErasureError(io.err(error))
        }
        guard var checkpoint = DedupCheckpoint.decode(bytes) else {
            do {
                try io.unlinkat(dirfd, JournalFiles.checkpoint)
                try io.fsync(dirfd, subject: directory)
            } catch { throw ErasureError(error) }
            return true
        }
        var changed = false
        for index in checkpoint.keys.indices where index < checkpoint.seqs.count {
            guard let key = tombstones[checkpoint.seqs[index]] else { continue }
            let fingerprint = KeyFingerprints.fingerprint(key)
            if checkpoint.keys[index] != fingerprint {
                checkpoint.keys[index] = fingerprint
                changed = true
            }
        }
        guard changed else { return false }
        try replaceFile(JournalFiles.checkpoint, in: dirfd, directoryPath: directory, bytes: checkpoint.encoded(), io: io, mode: 0o640)
        { _ throws(ErasureError) in }
        return true
    }

    /// `name` replaced durably by `bytes`: `name.tmp`, fdatasync, rename, directory fsync;
    /// `step(true)` after the temp file is synced, `step(false)` after the rename.
    static func replaceFile(_ name: String, in dirfd: Int32, directoryPath: String, bytes: [UInt8], io: JournalIO, mode: mode_t,
                                    step: (Bool) throws(ErasureError) -> Void) throws(ErasureError) {
        let temp = name + ".tmp"
        do throws(JournalError) {
            let fd = try io.openat(dirfd, temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode: mode)
            do throws(JournalError) {
                do { try io.writeAll(fd, bytes, subject: temp) } catch { throw io.err(error) }
                try io.fdatasync(fd, subject: temp)
                io.close(fd)
            } catch {
                io.close(fd)
                try? io.unlinkat(dirfd, temp)
                throw error
            }
        } catch {
            throw ErasureError(error)
        }
        try step(true)
        do { try io.renameat(dirfd, temp, dirfd, name) } catch { throw ErasureError(error) }
        try step(false)
        do { try io.fsync(dirfd, subject: directoryPath) } catch { throw ErasureError(error) }
    }
}

/// The journal's `LOCK`, held for an erasure: no writer (pushspoold) can open the journal
/// meanwhile. Released when the value goes away. Not `Sendable`: owns descriptors.
package final class JournalErasureLock {
    let dirfd: Int32
    private let lockfd: Int32

    /// Takes the lock of the journal in `directory`, or throws `.busy` while pushspoold holds it.
    package init(directory: String) throws(ErasureError) {
        let dirfd: Int32
        do { dirfd = try Posix.openDirectory(directory) } catch {
            throw ErasureError(.journal, "no journal at \(directory) (\(error)); check --state-dir")
        }
        let lockfd: Int32
        do {
            lockfd = try Posix.openat(dirfd, JournalFiles.lock, O_RDWR | O_CREAT | O_CLOEXEC, mode: 0o640)
        } catch {
            Posix.close(dirfd)
            throw ErasureError(.journal, "cannot open \(directory)/\(JournalFiles.lock): \(error)")
        }
        let locked: Bool
        do { locked = try RealFileSystem().tryLock(lockfd, subject: JournalFiles.lock) } catch {
            Posix.close(lockfd)
            Posix.close(dirfd)
            throw ErasureError(.journal, "cannot lock \(directory)/\(JournalFiles.lock): \(error)")
        }
        guard locked else {
            Posix.close(lockfd)
            Posix.close(dirfd)
            throw ErasureError(.busy, "the journal \(directory) is in use by pushspoold; stop it (systemctl stop pushspoold), "
                               + "run the erasure, then start it again")
        }
        self.dirfd = dirfd
        self.lockfd = lockfd
    }

    deinit {
        Posix.close(lockfd)
        Posix.close(dirfd)
    }
}

extension RetiredKeys {
    /// Rewrites `keys/NAME` with every key that names a target replaced by its tombstone key
    /// (the segment itself may be gone, so the key is matched on the user it carries). True
    /// when the file changed.
    static func redact(directory: String, name: String, io: JournalIO, targets: [ErasureTarget], secret: ErasureSecret,
                       hook: (ErasureStep) throws(ErasureError) -> Void, tombstones: inout [UInt64: String]) throws(ErasureError) -> Bool {
        let path = directory + "/" + directoryName
        let bytes: [UInt8]
        do { bytes = try Posix.readFile(path + "/" + name, limit: 1 << 30) } catch { throw ErasureError(io.err(error)) }
        guard bytes.count >= 24 else { return false }
        let valid = bytes.withUnsafeBytes { raw in
            raw.loadLE(0, as: UInt32.self) == magic
                && raw.loadLE(4, as: UInt32.self) == CRC32C.mask(CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[8...])))
        }
        guard valid else { throw ErasureError(.journal, "\(path)/\(name) does not check; remove it (it only confirms old duplicates)") }
        var body = Array(bytes[8..<24])
        var changed = false
        var at = 24
        while at + 9 <= bytes.count {
            let length = Int(bytes[at + 8])
            guard at + 9 + length <= bytes.count else { break }
            var key = Array(bytes[(at + 9)..<(at + 9 + length)])
            let seq = bytes.withUnsafeBytes { $0.loadLE(at, as: UInt64.self) }
            if let text = UTF8Text.string(key[...]) {
                if Tombstone.isTombstone(key: text) {
                    tombstones[seq] = text
                } else if targets.contains(where: { seq < $0.before && $0.matches(key: text, secret: secret) }) {
                    let tombstone = secret.tombstoneKey(for: text)
                    key = Array(tombstone.utf8)
                    tombstones[seq] = tombstone
                    changed = true
                }
            }
            body += bytes[at..<(at + 8)]
            body.append(UInt8(truncatingIfNeeded: key.count))
            body += key
            at += 9 + length
        }
        guard changed else { return false }
        var out: [UInt8] = []
        out.appendLE(magic)
        out.appendLE(CRC32C.mask(CRC32C.checksum(body)))
        out += body
        let kfd: Int32
        do { kfd = try Posix.openDirectory(path) } catch { throw ErasureError(io.err(error)) }
        defer { Posix.close(kfd) }
        try JournalErasure.replaceFile(name, in: kfd, directoryPath: path, bytes: out, io: io, mode: 0o640)
        { tempSynced throws(ErasureError) in if !tempSynced { try hook(.keysRewritten(name)) } }
        return true
    }
}
