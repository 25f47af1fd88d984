/// The kinds of event the daemon logs to journald, each with a fixed `MESSAGE_ID` so
/// `journalctl MESSAGE_ID=...` finds them and `journalctl -x` shows the explanation from
/// systemd/pushspool.catalog.
///
/// Ids were generated once with `systemd-id128 new` and must never change: operators'
/// filters and the catalog depend on them. A test checks that every case is in the catalog.
package enum EventKind: String, CaseIterable, Sendable {
    case started
    case ready
    case ingested
    case refused
    case duplicate
    case mediaFailed
    case recovery
    case tornTail
    case corruption
    case reload
    case reloadFailed
    case inotifyOverflow
    case noSpace
    case metricsFailed
    case fatal
    case stopping
    case aggregated
    /// An outbox delivery was parked (4xx, attempts or age exhausted): it will not be sent
    /// until `pushspoolctl outbox retry`.
    case outboxParked
    /// One outbox POST failed and will be retried with backoff.
    case outboxFailed
    /// A field of an outbox delivery could not be normalised (a Mindbox push date pushspool
    /// cannot read, a push name ICU could not transliterate): left out or sent as received.
    case outboxFieldProblem
    /// The NATS export lag reached `[Export] LagWarnRecords=` (NATS down or slower than ingest).
    case exportLag
    /// The export lag fell back under half the threshold.
    case exportCaughtUp
    /// pushspool-inbox refused a request without a valid bearer token (fields `REMOTE_ADDR`,
    /// `HTTP_METHOD`, `INBOX_ROUTE`, `REASON_CODE`; never the token).
    case inboxAuthFailed
    /// The inbox index could not be read (SQLITE_CORRUPT/NOTADB): moved aside (fields
    /// `INBOX_INDEX_MOVED_TO`, `REASON_CODE`) and rebuilt from the journal; ingest goes on.
    case inboxIndexCorrupt
    /// The inbox index was built by another schema version or with another `[Inbox]
    /// ListModals=` (field `REASON_CODE`): replaced with a fresh one, rebuilt from the journal.
    case inboxIndexOutdated
    /// An erasure another host or an inbox node put into the export stream was looked up here
    /// (fields `ERASURE_ID`, `ERASURE_SUBJECT_PREFIX`, `FLEET_ERASURE_RESULT`: `dropped` = it
    /// names a user or device here and its request went into the spool, `nothing_here`,
    /// `unusable_id` = it names an id here no erasure request can carry).
    case fleetErasure
    /// An inbox node (`[Inbox] Source=nats`) read an erasure record from the stream that it
    /// could not resolve (field `REASON_CODE`: `no_key`, no `erase.key`; `no_match`, no user
    /// or device of its index hashes to the subject). Fields `ERASURE_ID`, `STREAM_SEQ`; never
    /// the plain id.
    case erasureUnmatched
    /// A follower's step failed after healthy ones (fields `FOLLOWER`, `ERROR`): it retries with
    /// backoff while ingest and the other followers go on; logged once, not per retry.
    case followerFailing
    /// A failing follower's step succeeded again (fields `FOLLOWER`, `FAILED_STEPS`).
    case followerRecovered
    /// A follower crashed pushspoold at its last starts (a crash signal on its thread) and is
    /// not started this time (fields `FOLLOWER`, `FOLLOWER_CRASHES`); the rest runs.
    case followerParked
    /// An inbox node (`[Inbox] Source=nats`) found the export stream is not the one its index
    /// was built from (deleted and created again: fields `STREAM_CREATED`, `INDEX_STREAM_CREATED`,
    /// `INBOX_APPLIED_SEQ`) and rebuilds its index from the new stream; `REASON_CODE` is
    /// `rebuilding`, then `rebuilt` (with `INBOX_APPLIED_SEQ` of the new index) or `rebuild_failed`.
    case inboxStreamReplaced
    /// pushspool-inbox refused to start: another live inbox node answered on its host id
    /// (fields `HOST_ID`, `OTHER_NODE`); set `[Export] HostId=` per node.
    case inboxHostIdInUse

    /// The 128-bit `MESSAGE_ID`, 32 lowercase hex digits.
    package var messageID: String {
        switch self {
        case .started: "f71abdaf28e1405482c51e50b109e11c"
        case .ready: "6050c3f9aa004cadafb3c0abd490d9b5"
        case .ingested: "19a1a1a31a6e4ff9b5e7b8c622799e9e"
        case .refused: "5d326ab3d41446d7a1523ec1366bfad2"
        case .duplicate: "2550fa7d0e7d4fc598a3fdb881634e66"
        case .mediaFailed: "421d872d9f984ce38618cd4117c3d9cf"
        case .recovery: "85020128bc914262b8d96b48306da031"
        case .tornTail: "381c60b04ccf4fb4b1859ff1646ab05b"
        case .corruption: "f633ce4f8fcf4b1eabf1374731f872a8"
        case .reload: "823bcc0bce114b9986687fc41b7321ad"
        case .reloadFailed: "384fb5cb41914ef39e9c7721b06dd716"
        case .inotifyOverflow: "6c3c5d7a2e284a3c87aa7dffb4fad40e"
        case .noSpace: "02dfcb2550bb4bc588b3da0ba1fd05a6"
        case .metricsFailed: "44d3070b0c4643babaf67e27fb66ea09"
        case .fatal: "31902be510be440599e03e1d09d723cf"
        case .stopping: "e3553bd12ef147bbbb3b5b1bd9b4dae5"
        case .aggregated: "9e7d11c59073424495f1ab099352ea7e"
        case .outboxParked: "4651bb63217a438db30b56bae8141766"
        case .outboxFailed: "7534750c0bbd4623b947e55c892f37c7"
        case .outboxFieldProblem: "68ce207bcc1740fbb11f64b6b9963775"
        case .exportLag: "0de39b8828f84baf9b45fc4a3a8161e2"
        case .exportCaughtUp: "da44f3dd8a1c4fff80b929118fbc8a0e"
        case .inboxAuthFailed: "cd9b1fab57144f9fbc58ed63513e2d81"
        case .inboxIndexCorrupt: "65bf91cc6dcc4d4ba021ecf5abfcf7f7"
        case .inboxIndexOutdated: "61369d1f291c4befa1fcbd46d67a089e"
        case .fleetErasure: "8858e5c495f147ac90a5cabaa27450a4"
        case .erasureUnmatched: "75ef0cf37621422494b89e353233a5ab"
        case .followerFailing: "187cc351d5a043f5b2ddfbb6250cac49"
        case .followerRecovered: "a02dc379003d4295bf9204e4e01f2575"
        case .followerParked: "7ffb53ca2a034425afca9bbc0c2fec11"
        case .inboxStreamReplaced: "be4763b1efc84c46a728f22bfbee78b1"
        case .inboxHostIdInUse: "bf25a978b3404c98bec9ae8f426c545e"
        }
    }

    /// syslog priority (`PRIORITY=`): 2 crit, 3 err, 4 warning, 5 notice, 6 info.
    package var defaultPriority: Int32 {
        switch self {
        case .noSpace, .fatal: 2
        case .corruption, .reloadFailed, .followerFailing, .followerParked, .inboxHostIdInUse: 3
        case .mediaFailed, .inboxIndexCorrupt, .outboxParked, .outboxFailed, .outboxFieldProblem, .exportLag, .inboxAuthFailed, .tornTail, .inotifyOverflow, .metricsFailed, .aggregated, .refused, .inboxStreamReplaced: 4
        case .started, .ready, .recovery, .reload, .stopping, .exportCaughtUp, .inboxIndexOutdated, .fleetErasure, .erasureUnmatched, .followerRecovered: 5
        case .ingested, .duplicate: 6
        }
    }
}

/// journald field names the daemon's events use, so call sites cannot misspell them
/// (journald silently drops fields whose names are not `[A-Z0-9_]`).
package enum EventField {
    package static let pushID = "PUSH_ID"
    package static let vendor = "PUSH_VENDOR"
    package static let user = "PUSH_USER"
    /// The user as `pushspoolctl user hash` prints it, under `[Log] UserIds=hash`.
    package static let userHash = "PUSH_USER_HASH"
    package static let spoolFile = "SPOOL_FILE"
    package static let journalSequence = "JOURNAL_SEQ"
    package static let reasonCode = "REASON_CODE"
    /// The follower a `followerFailing`/`followerRecovered` event is about (`inbox`, `eraser`).
    package static let follower = "FOLLOWER"
    /// The failed step's error, `shortDescription: message`.
    package static let error = "ERROR"
    /// Consecutive failed steps before a follower recovered.
    package static let failedSteps = "FAILED_STEPS"
    /// Crashes of pushspoold on a follower's thread, counted over unclean restarts.
    package static let followerCrashes = "FOLLOWER_CRASHES"
    package static let mediaHost = "MEDIA_HOST"
    package static let durationMicroseconds = "DURATION_USEC"
    package static let errno = "ERRNO"
    package static let aggregatedKind = "AGGREGATED_EVENT"
    /// Records in the journal not yet acknowledged by NATS JetStream.
    package static let exportLag = "EXPORT_LAG"
    package static let exportLagThreshold = "EXPORT_LAG_THRESHOLD"
    package static let aggregatedCount = "AGGREGATED_COUNT"
    /// The outbox delivery id (`<eventId>:<target>`).
    package static let outboxDelivery = "OUTBOX_DELIVERY"
    /// `mindbox`, `infobip-seen` or `infobip-mo`.
    package static let outboxTarget = "OUTBOX_TARGET"
    package static let httpStatus = "HTTP_STATUS"
    /// The field of an outbox delivery an `outboxFieldProblem` is about (`mobPushSendDateTime`).
    package static let outboxField = "OUTBOX_FIELD"
    /// Where a damaged inbox index was moved for a post-mortem.
    package static let inboxIndexMovedTo = "INBOX_INDEX_MOVED_TO"
    /// The 32 hex digits of an erasure request.
    package static let erasureID = "ERASURE_ID"
    /// The first 16 hex digits of an erasure's subject hash (never the plain id).
    package static let erasureSubjectPrefix = "ERASURE_SUBJECT_PREFIX"
    /// `dropped` or `nothing_here`: what a fleet erasure came to on this host.
    package static let fleetErasureResult = "FLEET_ERASURE_RESULT"
}
