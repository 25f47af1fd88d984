import PushJournal

extension JournalWriter {
    /// `submit`, awaited: a test writes a record and reads its outcome in order. The daemons
    /// submit with a completion (the ingest pipeline, the erasure, the inbox's write port).
    package func append(key: String, body: [UInt8], ingestMillis: Int64) async -> AppendResult {
        await withCheckedContinuation { continuation in
            submit(key: key, body: body, ingestMillis: ingestMillis) { continuation.resume(returning: $0) }
        }
    }
}
