import PushSystem

extension ErasureScope {
    /// The id of this scope a journal record's body names: the `user` (for a device: `device`)
    /// member of the body's JSON object, when it is a string; `nil` when the body is not a
    /// JSON object (or nests deeper than 64) or names none. Every kind of record is read alike
    /// — a push, an event, an unknown or malformed kind — so what an erasure takes never
    /// depends on whether this version can decode the record.
    ///
    /// The one reading of a body's subject: the journal's erasure (``ErasureTarget``) and the
    /// export stream's (PushExport's `StreamSubjectMatcher`, whose messages carry the same
    /// bodies). Here rather than in PushFollow's typed `RecordBody`, which the journal cannot
    /// import (PushFollow is above it) and which keeps no members of an erasure, a tombstone
    /// or a body it cannot decode.
    package func subject(inBody body: [UInt8]) -> String? {
        guard case .object(let members)? = try? JSONParser(maxDepth: 64).parse(body) else { return nil }
        return members[rawValue]?.stringValue
    }
}
