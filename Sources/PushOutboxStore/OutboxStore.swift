@preconcurrency import Glibc
import PushSystem

/// The outbox's durable state under `<state>/outbox/`:
/// - `cursor`: the last journal seq whose deliveries are all in `pending/` (decimal text);
/// - `pending/<seq>-<index>.json`: deliveries not yet done, with attempts and backoff;
/// - `parked/…`: dead letters (status, first KiB of the response, reason);
/// - `retry/…`: parked deliveries `pushspoolctl outbox retry` handed back; the follower
///   moves them to `pending/` with their attempts reset.
/// Every file is written with `Posix.writeFileAtomically` and moved with `rename(2)`, so a
/// crash leaves each delivery in exactly one directory, whole. Shared by the follower and
/// `pushspoolctl outbox` (a target of its own so pushspoolctl does not link libcurl).
///
/// `Sendable`: holds only paths.
package struct OutboxStore: Sendable {
    package let directory: String
    package var pendingDirectory: String { directory + "/pending" }
    package var parkedDirectory: String { directory + "/parked" }
    package var retryDirectory: String { directory + "/retry" }

    /// `<stateDirectory>/outbox`.
    package init(stateDirectory: String) {
        directory = StateLayout(root: stateDirectory).outbox
    }

    /// A store at `directory` itself: the fleet outbox's dead letters on an inbox node, whose
    /// ids are stream seqs and must not meet the journal outbox's (journal seqs).
    package init(directory: String) {
        self.directory = directory
    }

    package func create() throws(OutboxError) {
        do {
            for path in [directory, pendingDirectory, parkedDirectory, retryDirectory] { try Posix.mkdirs(path, mode: 0o750) }
        } catch { throw OutboxError(.io, "creating \(directory)", cause: error) }
    }

    /// Moves a dead letter to `retry/` for the follower to take back (`pushspoolctl outbox
    /// retry`); creates `retry/` when the daemon has not yet.
    package func requeue(_ name: String) throws(OutboxError) {
        do { try Posix.mkdirIfMissing(retryDirectory, mode: 0o750) } catch { throw OutboxError(.io, "creating \(retryDirectory)", cause: error) }
        try move(name, from: parkedDirectory, to: retryDirectory)
    }

    /// The last fully handled seq; 0 when none yet (``CursorFile``).
    package func cursor() throws(OutboxError) -> UInt64 {
        do { return try CursorFile.read(directory: directory) } catch {
            throw OutboxError(.io, error.message, cause: error.cause)
        }
    }

    package func setCursor(_ seq: UInt64) throws(OutboxError) {
        do { try CursorFile.write(seq, directory: directory) } catch {
            throw OutboxError(.io, error.message, cause: error.cause)
        }
    }

    package func write(_ delivery: OutboxDelivery, in dir: String) throws(OutboxError) {
        do { try Posix.writeFileAtomically(directory: dir, name: delivery.fileName, bytes: delivery.jsonValue.serialized(), mode: 0o640) } catch {
            throw OutboxError(.io, "writing \(dir)/\(delivery.fileName)", cause: error)
        }
    }

    /// Deliveries in `dir`, in journal order. Files that do not parse are skipped.
    package func list(_ dir: String) throws(OutboxError) -> [OutboxDelivery] {
        var result: [OutboxDelivery] = []
        for name in try names(dir) {
            if let delivery = read(dir + "/" + name) { result.append(delivery) }
        }
        return result
    }

    package func names(_ dir: String) throws(OutboxError) -> [String] {
        guard let handle = opendir(dir) else {
            if errno == ENOENT { return [] }
            throw OutboxError(.io, "listing \(dir)", cause: SystemError(call: "opendir", errno: errno, subject: dir))
        }
        defer { closedir(handle) }
        var names: [String] = []
        while let entry = readdir(handle) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name.hasSuffix(".json"), !name.hasPrefix(".") { names.append(name) }
        }
        return names.sorted()
    }

    package func read(_ path: String) -> OutboxDelivery? {
        guard let bytes = try? Posix.readFile(path, limit: 1 << 20), let json = try? JSONParser(maxDepth: 64).parse(bytes) else { return nil }
        return OutboxDelivery(json: json)
    }

    /// `rename(2)` from one state directory to another, then fsync of both directories.
    package func move(_ name: String, from: String, to: String) throws(OutboxError) {
        do {
            _ = try Posix.call("rename", from + "/" + name) { Glibc.rename(from + "/" + name, to + "/" + name) }
            try Posix.syncDirectory(to)
            try Posix.syncDirectory(from)
        } catch { throw OutboxError(.io, "moving \(name) from \(from) to \(to)", cause: error) }
    }

    package func remove(_ name: String, in dir: String) throws(OutboxError) {
        do {
            _ = try Posix.call("unlink", dir + "/" + name) { Glibc.unlink(dir + "/" + name) }
            try Posix.syncDirectory(dir)
        } catch { throw OutboxError(.io, "removing \(dir)/\(name)", cause: error) }
    }
}
