@preconcurrency import Glibc
import PushInbox
import PushJournal
import PushOutboxStore
import PushSystem

/// An inbox node's part of an erasure it reads from the stream (`[Inbox] Source=nats`;
/// docs/design/fleet-inbox.md, "Erasure"). The record names its subject only by the keyed
/// hash under the fleet erasure key, so the node resolves it against what it holds: it hashes
/// the users (owners `u:<user>`) — or, for a device's erasure, the devices — of its own index
/// with `<state>/erase.key` and keeps the one that matches. Then it erases that subject's
/// items that came before the record in stream order (item ids are stream seqs), the owner
/// row once none is left, and the fleet outbox's files naming the subject, and writes
/// `<state>/erase/<erasureId>.status` (``ErasureRequests/Status`` with `statusScope` `node`;
/// no plain id).
///
/// Idempotent: run again after a crash it finds the same subject (or, once the rows are gone,
/// none) and erases what is left; a status already complete is not redone.
///
/// `Sendable`: paths.
package struct NodeErasure: Sendable {
    /// The node's own state directory (`erase.key`, `erase/`).
    package var stateDirectory: String
    package var indexPath: String
    /// The fleet outbox's store (`<state>/inbox/outbox`), whose files name users by `orderKey`.
    package var fleetOutboxDirectory: String

    package init(stateDirectory: String, indexPath: String, fleetOutboxDirectory: String) {
        self.stateDirectory = stateDirectory
        self.indexPath = indexPath
        self.fleetOutboxDirectory = fleetOutboxDirectory
    }

    /// What the node did with one erasure record. `Sendable` value.
    package enum Outcome: Sendable, Equatable {
        /// The subject was found here and erased (`subject` in memory only, for the caller to
        /// drop what it holds in memory, e.g. the SSE ring).
        case erased(subject: DataSubject, status: ErasureRequests.Status)
        /// Nothing of this node matched, or it has no key: `reason` is `no_match` or `no_key`.
        case unmatched(reason: String, status: ErasureRequests.Status)
        /// A status file says this node finished it already.
        case alreadyDone
    }

    /// Applies the erasure `erasureID` (scope, subject hash) read at stream seq `streamSeq`.
    /// `rebuilding`: the index at ``indexPath`` is being built anew from the stream (`nc
    /// reindex --from-stream`), so the erasure is done again whatever the status says (the
    /// stream may still hold the subject's messages), and a status already there is kept.
    /// - Throws: the index or a store could not be changed (the caller retries; nothing
    ///   counts as done until the status is written).
    package func apply(erasureID: String, scope: ErasureScope, subjectHash: String,
                       streamSeq: UInt64, rebuilding: Bool = false) throws(UserDataError) -> Outcome {
        let requests = ErasureRequests(stateDirectory: stateDirectory)
        if !rebuilding, let done = requests.status(erasureID), done.complete { return .alreadyDone }
        let keep = rebuilding && requests.status(erasureID)?.complete == true
        var status = ErasureRequests.Status(erasureID: erasureID, scope: scope.rawValue, subject: subjectHash, seq: streamSeq)
        status.statusScope = "node"
        let secret: ErasureSecret?
        do { secret = try ErasureSecret.load(stateDirectory: stateDirectory) } catch {
            throw UserDataError(.journal, "\(error)")
        }
        guard let secret else { return try finishUnmatched("no_key", status, requests, write: !keep) }
        guard let subject = try resolve(scope: scope, subjectHash: subjectHash, secret: secret) else {
            return try finishUnmatched("no_match", status, requests, write: !keep)
        }
        let items: Int
        do { items = try InboxIndex.erase(path: indexPath, subject: subject, before: streamSeq) } catch {
            throw UserDataError(.inbox, "erasing from the inbox index: \(error)")
        }
        status.steps.append("inbox-done")
        let deliveries = try eraseOutbox(subject)
        status.steps.append("outbox-done")
        status.inboxItems = items
        status.outboxDeliveries = deliveries
        status.complete = true
        if !keep { try write(status, requests) }
        return .erased(subject: subject, status: status)
    }

    /// The subject whose keyed hash is `subjectHash`, among the ids this node's index holds.
    func resolve(scope: ErasureScope, subjectHash: String, secret: ErasureSecret) throws(UserDataError) -> DataSubject? {
        guard UserDataExport.isRegularFile(indexPath) else { return nil }
        let candidates: [String]
        do { candidates = try InboxIndex.erasureCandidates(path: indexPath, device: scope == .device) } catch {
            throw UserDataError(.inbox, "reading the inbox index: \(error)")
        }
        for id in candidates {
            switch scope {
            case .user where secret.subjectHash(.user(id)) == subjectHash: return .user(id)
            case .device where secret.subjectHash(.device(id)) == subjectHash: return .device(id)
            default: continue
            }
        }
        return nil
    }

    /// Removes the fleet outbox's pending, parked and retried files that name `subject`.
    private func eraseOutbox(_ subject: DataSubject) throws(UserDataError) -> Int {
        let store = OutboxStore(directory: fleetOutboxDirectory)
        var removed = 0
        for directory in [store.pendingDirectory, store.parkedDirectory, store.retryDirectory] {
            guard UserDataExport.isDirectory(directory) else { continue }
            let names: [String]
            do { names = try store.names(directory) } catch { throw UserDataError(.outbox, "listing \(directory): \(error)") }
            for name in names {
                guard let delivery = store.read(directory + "/" + name) else { continue }
                let names = switch subject {
                case .user(let id): delivery.orderKey == "u:" + id
                case .device(let id): delivery.device == id || delivery.orderKey == "d:" + id
                }
                guard names else { continue }
                do { try store.remove(name, in: directory) } catch { throw UserDataError(.outbox, "\(error)") }
                removed += 1
            }
        }
        return removed
    }

    private func finishUnmatched(_ reason: String, _ status: ErasureRequests.Status,
                                 _ requests: ErasureRequests, write writing: Bool) throws(UserDataError) -> Outcome {
        var status = status
        status.unmatched = reason
        status.inboxItems = 0
        status.complete = true
        if writing { try write(status, requests) }
        return .unmatched(reason: reason, status: status)
    }

    private func write(_ status: ErasureRequests.Status, _ requests: ErasureRequests) throws(UserDataError) {
        do { try requests.write(status) } catch { throw UserDataError(.journal, "writing \(requests.directory): \(error)") }
    }
}
