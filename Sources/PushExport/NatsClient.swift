@preconcurrency import Glibc
import PushSystem
internal import CNats

/// Where PubAcks land: libnats calls the ack handler on its own thread with this object as
/// the closure. It outlives every connection that points at it (the exporter holds it), so a
/// late callback after a connection is torn down still finds it alive. `Sendable`: locked.
package final class AckSink: Sendable {
    package let window: Locked<AckWindow>
    /// The last publish error text, for status.
    let lastFailure = Locked<String?>(nil)
    /// Called after every PubAck, failure and connection change (the exporter's runner wakes).
    package let onChange = CallbackSlot<Void>()

    func changed() { onChange() }

    /// Stage timestamps for the benchmark; `nil` in the daemon.
    let trace: ExportTrace?

    package init(acknowledged: UInt64, trace: ExportTrace? = nil) {
        window = Locked(AckWindow(acknowledged: acknowledged))
        self.trace = trace
    }

    func handle(seq: UInt64?, ok: Bool, failure: @autoclosure () -> String) {
        guard let seq else { return }
        if ok {
            if let trace {
                let now = Posix.monotonicNanos()
                let (before, after) = window.withLock { window in
                    let before = window.acknowledged
                    window.acked(seq)
                    return (before, window.acknowledged)
                }
                trace.acked(seq, at: now)
                trace.cursorMoved(from: before, through: after, at: now)
            } else {
                window.withLock { _ = $0.acked(seq) }
            }
        } else {
            let text = failure()
            window.withLock { $0.failed(seq) }
            lastFailure.withLock { $0 = text }
        }
        changed()
    }
}

/// libnats' text for a status code.
func natsText(_ status: natsStatus) -> String {
    var text = String(cString: natsStatus_GetText(status))
    var last = NATS_OK
    if let detail = nats_GetLastError(&last), last == status {
        let more = String(cString: detail)
        if !more.isEmpty, more != text { text += ": " + more }
    }
    return text
}

/// One NATS connection with a JetStream context; wraps natsConnection_Connect(3) and the
/// `js_*` calls the exporter and `pushspoolctl export` need.
///
/// Not `Sendable`: owns the libnats handles; the exporter uses it from its thread only
/// (publishing), libnats' own threads only call the ack handler.
package final class NatsClient {
    private(set) var connection: OpaquePointer?
    private(set) var js: OpaquePointer?
    private var options: OpaquePointer?
    private let sink: AckSink?
    package let ackTimeout: Duration
    /// Whether `publishAsync` ran once (libnats then has its pending map).
    private var publishedAsync = false
    /// Core NATS subscriptions that live as long as the connection (``claimName(subject:answer:wait:)``).
    var ownedSubscriptions: [OpaquePointer] = []

    /// Connects to the first reachable of `urls` (and later fails over among them and the
    /// servers the cluster announces; libnats reconnects forever, buffering nothing we rely on).
    /// `sink` receives the PubAcks of `publishAsync`; `nil` for a client that only reads.
    /// `reconnects: false`: a lost connection closes the client instead (``isClosed``), so a
    /// publish made while it is down fails at once rather than waiting in libnats' reconnect
    /// buffer to be sent later — after its caller was told it failed.
    /// `noEcho`: this connection's own publishes never reach its subscriptions (natsOptions_SetNoEcho(3)).
    /// `sendAsap`: each publish is written to the socket by the calling thread at once
    /// (natsOptions_SetSendAsap(3)) instead of by libnats' flusher thread up to 1 ms later.
    package init(urls: [String], credentialsFile: String = "", tlsCAFile: String = "", tlsCertFile: String = "",
                 tlsKeyFile: String = "", maxPending: Int = 1024, ackTimeout: Duration = .seconds(5),
                 connectTimeout: Duration = .seconds(2), sink: AckSink? = nil, name: String = "pushspoold",
                 reconnects: Bool = true, sendAsap: Bool = true, noEcho: Bool = false) throws(ExportError) {
        self.sink = sink
        self.ackTimeout = ackTimeout
        var opts: OpaquePointer?
        func check(_ s: natsStatus, _ what: String) throws(ExportError) {
            guard s == NATS_OK else { throw ExportError(.connect, "\(what): \(natsText(s))", natsStatus: Int32(bitPattern: s.rawValue)) }
        }
        try check(natsOptions_Create(&opts), "natsOptions_Create")
        options = opts
        do throws(ExportError) {
            var cStrings = urls.map { strdup($0) }
            defer { cStrings.forEach { free($0) } }
            let status = cStrings.withUnsafeMutableBufferPointer { buffer in
                buffer.baseAddress!.withMemoryRebound(to: UnsafePointer<CChar>?.self, capacity: buffer.count) {
                    natsOptions_SetServers(opts, $0, Int32(clamping: buffer.count))
                }
            }
            try check(status, "servers \(urls.joined(separator: ","))")
            try check(natsOptions_SetName(opts, name), "name")
            try check(natsOptions_SetTimeout(opts, connectTimeout.clampedMilliseconds), "timeout")
            try check(natsOptions_SetMaxReconnect(opts, reconnects ? -1 : 0), "max reconnect")
            if !reconnects { try check(natsOptions_SetAllowReconnect(opts, false), "allow reconnect") }
            try check(natsOptions_SetReconnectWait(opts, 250), "reconnect wait")
            // Without it libnats hands each publish to its flusher thread, which waits 1 ms
            // for company before writing: a millisecond on every record's way to the PubAck.
            if sendAsap { try check(natsOptions_SetSendAsap(opts, true), "send asap") }
            // A request this connection publishes is not delivered to its own subscriptions:
            // with nobody else listening the server answers "no responders" at once.
            if noEcho { try check(natsOptions_SetNoEcho(opts, true), "no echo") }
            if let sink {
                // A lost or regained connection wakes the exporter, which otherwise sleeps.
                // Retained and never released: libnats may call the closed callback after
                // natsConnection_Destroy returns, when the exporter may be gone. One sink per
                // exporter, so each reconnect only raises its count.
                let closure = Unmanaged.passRetained(sink).toOpaque()
                let onConnection: natsConnectionHandler = { _, closure in
                    Unmanaged<AckSink>.fromOpaque(closure!).takeUnretainedValue().changed()
                }
                try check(natsOptions_SetDisconnectedCB(opts, onConnection, closure), "disconnected callback")
                try check(natsOptions_SetReconnectedCB(opts, onConnection, closure), "reconnected callback")
                try check(natsOptions_SetClosedCB(opts, onConnection, closure), "closed callback")
            }
            if !credentialsFile.isEmpty {
                try check(natsOptions_SetUserCredentialsFromFiles(opts, credentialsFile, nil), "credentials file \(credentialsFile)")
            }
            if !tlsCAFile.isEmpty || !tlsCertFile.isEmpty || urls.contains(where: { $0.hasPrefix("tls://") }) {
                try check(natsOptions_SetSecure(opts, true), "TLS")
                if !tlsCAFile.isEmpty { try check(natsOptions_LoadCATrustedCertificates(opts, tlsCAFile), "TLS CA file \(tlsCAFile)") }
                if !tlsCertFile.isEmpty {
                    try check(natsOptions_LoadCertificatesChain(opts, tlsCertFile, tlsKeyFile), "TLS certificate \(tlsCertFile)")
                }
            }
            var nc: OpaquePointer?
            try check(natsConnection_Connect(&nc, opts), "connect to \(urls.joined(separator: ","))")
            connection = nc
            var jsOpts = jsOptions()
            try check(jsOptions_Init(&jsOpts), "jsOptions_Init")
            jsOpts.Wait = ackTimeout.clampedMilliseconds
            // One more than our own window: the exporter never lets libnats stall a publish.
            jsOpts.PublishAsync.MaxPending = Int64(maxPending) + 1
            if let sink {
                jsOpts.PublishAsync.AckHandler = { _, msg, pa, pae, closure in
                    let sink = Unmanaged<AckSink>.fromOpaque(closure!).takeUnretainedValue()
                    var seqText: UnsafePointer<CChar>?
                    let seq: UInt64? = natsMsgHeader_Get(msg, ExportMessage.seqHeader, &seqText) == NATS_OK && seqText != nil
                        ? UInt64(String(cString: seqText!)) : nil
                    if pa != nil {
                        sink.handle(seq: seq, ok: true, failure: "")
                    } else if let pae {
                        let code = pae.pointee.ErrCode
                        let text = pae.pointee.ErrText.map { String(cString: $0) } ?? natsText(pae.pointee.Err)
                        sink.handle(seq: seq, ok: false, failure: "publish failed (\(code.rawValue)): \(text)")
                    }
                    natsMsg_Destroy(msg)
                }
                jsOpts.PublishAsync.AckHandlerClosure = Unmanaged.passUnretained(sink).toOpaque()
            }
            var ctx: OpaquePointer?
            try check(natsConnection_JetStream(&ctx, nc, &jsOpts), "JetStream context")
            js = ctx
        } catch {
            close()
            throw error
        }
    }

    deinit { close() }

    /// Closes and frees the connection; pending publishes are dropped (their records are
    /// published again from the cursor).
    package func close() {
        if let connection { natsConnection_Close(connection) }
        for subscription in ownedSubscriptions { natsSubscription_Destroy(subscription) }
        ownedSubscriptions = []
        if let js { jsCtx_Destroy(js) }
        if let connection { natsConnection_Destroy(connection) }
        if let options { natsOptions_Destroy(options) }
        js = nil
        connection = nil
        options = nil
    }

    /// Bytes published but still in libnats' buffer, not yet written to the socket; wraps
    /// natsConnection_Buffered(3).
    package var bufferedBytes: Int {
        guard let connection else { return 0 }
        return Int(natsConnection_Buffered(connection))
    }

    /// Connected now (not reconnecting, not closed).
    package var isConnected: Bool {
        guard let connection else { return false }
        return natsConnection_Status(connection) == NATS_CONN_STATUS_CONNECTED
    }

    /// Closed for good (libnats gave up); a new client is needed.
    package var isClosed: Bool {
        guard let connection else { return true }
        return natsConnection_Status(connection) == NATS_CONN_STATUS_CLOSED
    }

    /// Uses stream `name` as it is when it exists; otherwise creates it with file storage,
    /// `subjects`, `replicas` and the duplicate window. Returns whether it was created.
    @discardableResult
    package func ensureStream(name: String, subjects: [String], replicas: Int, duplicateWindow: Duration) throws(ExportError) -> Bool {
        var info: UnsafeMutablePointer<jsStreamInfo>?
        var code = jsErrCode(0)
        let lookup = js_GetStreamInfo(&info, js, name, nil, &code)
        if lookup == NATS_OK {
            jsStreamInfo_Destroy(info)
            return false
        }
        guard lookup == NATS_NOT_FOUND else {
            throw ExportError(.stream, "looking up stream \(name): \(natsText(lookup))", natsStatus: Int32(bitPattern: lookup.rawValue))
        }
        var config = jsStreamConfig()
        jsStreamConfig_Init(&config)
        let nameC = strdup(name)
        var subjectsC = subjects.map { UnsafePointer(strdup($0)) }
        defer {
            free(nameC)
            subjectsC.forEach { free(UnsafeMutablePointer(mutating: $0)) }
        }
        config.Name = UnsafePointer(nameC)
        config.Storage = js_FileStorage
        config.Replicas = Int64(replicas)
        config.Duplicates = duplicateWindow.clampedNanoseconds
        let created = subjectsC.withUnsafeMutableBufferPointer { buffer -> natsStatus in
            config.Subjects = buffer.baseAddress
            config.SubjectsLen = Int32(clamping: buffer.count)
            return js_AddStream(&info, js, &config, nil, &code)
        }
        guard created == NATS_OK else {
            throw ExportError(.stream, "creating stream \(name): \(natsText(created)) (JetStream error \(code.rawValue))",
                              natsStatus: Int32(bitPattern: created.rawValue))
        }
        jsStreamInfo_Destroy(info)
        return true
    }

    /// Deletes stream `name` and every message in it (tests, to take a stream away from a
    /// running exporter). Wraps js_DeleteStream(3).
    package func deleteStream(_ name: String) throws(ExportError) {
        var code = jsErrCode(0)
        let status = js_DeleteStream(js, name, nil, &code)
        guard status == NATS_OK else {
            throw ExportError(.stream, "deleting stream \(name): \(natsText(status)) (JetStream error \(code.rawValue))",
                              natsStatus: Int32(bitPattern: status.rawValue))
        }
    }

    /// Publishes without waiting for the PubAck, which goes to the sink. Wraps js_PublishMsgAsync(3).
    package func publishAsync(_ message: ExportMessage) throws(ExportError) {
        var msg: OpaquePointer?
        var status = message.body.withUnsafeBufferPointer { body in
            body.withMemoryRebound(to: CChar.self) { natsMsg_Create(&msg, message.subject, nil, $0.baseAddress, Int32(clamping: $0.count)) }
        }
        if status == NATS_OK { status = natsMsgHeader_Set(msg, "Nats-Msg-Id", message.msgId) }
        if status == NATS_OK { status = natsMsgHeader_Set(msg, ExportMessage.seqHeader, String(message.seq)) }
        if status == NATS_OK { status = natsMsgHeader_Set(msg, ExportMessage.ingestHeader, String(message.ingestMillis)) }
        if status == NATS_OK {
            var pub = jsPubOptions()
            jsPubOptions_Init(&pub)
            pub.MaxWait = ackTimeout.clampedMilliseconds
            status = js_PublishMsgAsync(js, &msg, &pub)
            publishedAsync = true
        }
        natsMsg_Destroy(msg)  // no-op when libnats took it
        guard status == NATS_OK else {
            throw ExportError(.publish, "publishing seq \(message.seq): \(natsText(status))", natsStatus: Int32(bitPattern: status.rawValue))
        }
    }

    /// Drops the publishes still waiting for a PubAck (their acks will be ignored); wraps
    /// js_PublishAsyncGetPendingList(3).
    package func dropPending() {
        // libnats 3.4.1 dereferences its pending map unchecked: before the first async
        // publish there is none, and the call crashes.
        guard publishedAsync else { return }
        var list = natsMsgList()
        if js_PublishAsyncGetPendingList(&list, js) == NATS_OK { natsMsgList_Destroy(&list) }
    }

    /// Waits up to `timeout` for every pending PubAck; wraps js_PublishAsyncComplete(3).
    package func waitForAcks(timeout: Duration) throws(ExportError) {
        guard publishedAsync else { return }
        var pub = jsPubOptions()
        jsPubOptions_Init(&pub)
        pub.MaxWait = timeout.clampedMilliseconds
        let status = js_PublishAsyncComplete(js, &pub)
        guard status == NATS_OK else { throw ExportError(.publish, "waiting for PubAcks: \(natsText(status))", natsStatus: Int32(bitPattern: status.rawValue)) }
    }

    /// Publishes one message and waits for its PubAck; returns whether the server called it a
    /// duplicate. Wraps js_PublishMsg(3).
    package func publish(_ message: ExportMessage) throws(ExportError) -> Bool {
        do throws(ExportError) {
            return try publish(subject: message.subject, msgId: message.msgId, body: message.body,
                               headers: [(ExportMessage.seqHeader, String(message.seq)),
                                         (ExportMessage.ingestHeader, String(message.ingestMillis))]).duplicate
        } catch {
            var error = error
            error.message = "publishing seq \(message.seq): " + error.message
            throw error
        }
    }

    /// What the server answered to a publish: where the stream stored the message, and
    /// whether it was a duplicate within the stream's window (then `streamSeq` is the earlier
    /// copy's). `Sendable` value.
    package struct PubAck: Sendable, Equatable {
        package var streamSeq: UInt64
        package var duplicate: Bool
    }

    /// Publishes `body` on `subject` with `Nats-Msg-Id: msgId` and `headers`, and waits up to
    /// ``ackTimeout`` for the PubAck. A `.publish` error means the stream did not confirm it
    /// (no stream takes the subject, the server is gone, no answer in time); the message may
    /// still have been stored when only the answer was lost. Wraps js_PublishMsg(3).
    package func publish(subject: String, msgId: String, body: [UInt8], headers: [(String, String)]) throws(ExportError) -> PubAck {
        guard let js else { throw ExportError(.connect, "not connected") }
        var msg: OpaquePointer?
        var status = body.withUnsafeBufferPointer { body in
            body.withMemoryRebound(to: CChar.self) { natsMsg_Create(&msg, subject, nil, $0.baseAddress, Int32(clamping: $0.count)) }
        }
        defer { natsMsg_Destroy(msg) }
        if status == NATS_OK { status = natsMsgHeader_Set(msg, "Nats-Msg-Id", msgId) }
        for (name, value) in headers where status == NATS_OK { status = natsMsgHeader_Set(msg, name, value) }
        var ack: UnsafeMutablePointer<jsPubAck>?
        var code = jsErrCode(0)
        if status == NATS_OK {
            var pub = jsPubOptions()
            jsPubOptions_Init(&pub)
            pub.MaxWait = ackTimeout.clampedMilliseconds
            status = js_PublishMsg(&ack, js, msg, &pub, &code)
        }
        guard status == NATS_OK, let ack else {
            throw ExportError(.publish, "\(natsText(status)) (JetStream error \(code.rawValue))", natsStatus: Int32(bitPattern: status.rawValue))
        }
        defer { jsPubAck_Destroy(ack) }
        return PubAck(streamSeq: ack.pointee.Sequence, duplicate: ack.pointee.Duplicate)
    }

    // MARK: Reading back (tests, benchmark, `pushspoolctl export status`)

    /// What a reader needs to know of a stream: its bounds and which stream it is. `Sendable` value.
    package struct StreamInfo: Sendable, Equatable {
        package var firstSeq: UInt64
        package var lastSeq: UInt64
        package var messages: UInt64
        /// When the server created the stream (nanoseconds since the epoch, `created` in the
        /// stream's info): a stream deleted and created again under the same name has another,
        /// and numbers its messages from 1 again.
        package var createdNanos: Int64
    }

    /// The bounds and creation time of `stream`. Wraps js_GetStreamInfo(3).
    package func streamInfo(_ stream: String) throws(ExportError) -> StreamInfo {
        var info: UnsafeMutablePointer<jsStreamInfo>?
        var code = jsErrCode(0)
        let status = js_GetStreamInfo(&info, js, stream, nil, &code)
        guard status == NATS_OK, let info else {
            throw ExportError(status == NATS_NOT_FOUND ? .noStream : .stream, "stream \(stream): \(natsText(status))",
                              natsStatus: Int32(bitPattern: status.rawValue))
        }
        defer { jsStreamInfo_Destroy(info) }
        return StreamInfo(firstSeq: info.pointee.State.FirstSeq, lastSeq: info.pointee.State.LastSeq, messages: info.pointee.State.Msgs,
                          createdNanos: info.pointee.Created)
    }

    /// The first and last sequence and the message count of `stream` (an empty stream that
    /// never held a message: 0, 0; one purged empty: last + 1, last). Wraps js_GetStreamInfo(3).
    package func streamBounds(_ stream: String) throws(ExportError) -> (firstSeq: UInt64, lastSeq: UInt64, messages: UInt64) {
        let info = try streamInfo(stream)
        return (info.firstSeq, info.lastSeq, info.messages)
    }

    /// Removes every message of `stream` below `keepFrom` (tests: a stream whose retention
    /// passed an index). Wraps js_PurgeStream(3) with `Sequence`.
    package func purgeStream(_ stream: String, keepFrom: UInt64) throws(ExportError) {
        var opts = jsOptions()
        jsOptions_Init(&opts)
        opts.Stream.Purge.Sequence = keepFrom
        var code = jsErrCode(0)
        let status = js_PurgeStream(js, stream, &opts, &code)
        guard status == NATS_OK else {
            throw ExportError(.stream, "purging \(stream): \(natsText(status))", natsStatus: Int32(bitPattern: status.rawValue))
        }
    }

    /// The number of messages and the last sequence of `stream`.
    package func streamState(_ stream: String) throws(ExportError) -> (messages: UInt64, lastSeq: UInt64) {
        var info: UnsafeMutablePointer<jsStreamInfo>?
        var code = jsErrCode(0)
        let status = js_GetStreamInfo(&info, js, stream, nil, &code)
        guard status == NATS_OK, let info else {
            throw ExportError(.stream, "stream \(stream): \(natsText(status))", natsStatus: Int32(bitPattern: status.rawValue))
        }
        defer { jsStreamInfo_Destroy(info) }
        return (info.pointee.State.Msgs, info.pointee.State.LastSeq)
    }

    /// One stored message as read back.
    package struct StoredMessage: Sendable, Equatable {
        package var subject: String
        package var msgId: String
        package var journalSeq: UInt64?
        package var body: [UInt8]
        /// `Pushspool-Request-Fingerprint` (``EventPublisher/fingerprintHeader``): the request an
        /// event published under an Idempotency-Key was accepted for.
        package var requestFingerprint: String? = nil
    }

    /// Every message of `stream`, by stream sequence; wraps js_GetMsg(3).
    package func readStream(_ stream: String) throws(ExportError) -> [StoredMessage] {
        let (_, last) = try streamState(stream)
        var out: [StoredMessage] = []
        var seq: UInt64 = 1
        while seq <= last {
            var msg: OpaquePointer?
            var code = jsErrCode(0)
            let status = js_GetMsg(&msg, js, stream, seq, nil, &code)
            seq += 1
            if status == NATS_NOT_FOUND { continue }
            guard status == NATS_OK, let msg else {
                throw ExportError(.stream, "reading \(stream) seq \(seq - 1): \(natsText(status))", natsStatus: Int32(bitPattern: status.rawValue))
            }
            out.append(Self.stored(msg))
            natsMsg_Destroy(msg)
        }
        return out
    }

    /// The message at `seq` of `stream`; `nil` when the stream does not hold it (never did,
    /// deleted, or past its retention). Wraps js_GetMsg(3).
    package func message(_ stream: String, seq: UInt64) throws(ExportError) -> StoredMessage? {
        var msg: OpaquePointer?
        var code = jsErrCode(0)
        let status = js_GetMsg(&msg, js, stream, seq, nil, &code)
        if status == NATS_NOT_FOUND { return nil }
        guard status == NATS_OK, let msg else {
            throw ExportError(.stream, "reading \(stream) seq \(seq): \(natsText(status)) (JetStream error \(code.rawValue))",
                              natsStatus: Int32(bitPattern: status.rawValue))
        }
        defer { natsMsg_Destroy(msg) }
        return Self.stored(msg)
    }

    static func stored(_ msg: OpaquePointer) -> StoredMessage {
        func header(_ key: String) -> String? {
            var value: UnsafePointer<CChar>?
            guard natsMsgHeader_Get(msg, key, &value) == NATS_OK, let value else { return nil }
            return String(cString: value)
        }
        let length = Int(natsMsg_GetDataLength(msg))
        let body: [UInt8] = natsMsg_GetData(msg).map { data in
            data.withMemoryRebound(to: UInt8.self, capacity: length) { Array(UnsafeBufferPointer(start: $0, count: length)) }
        } ?? []
        return StoredMessage(subject: String(cString: natsMsg_GetSubject(msg)), msgId: header("Nats-Msg-Id") ?? "",
                             journalSeq: header(ExportMessage.seqHeader).flatMap { UInt64($0) }, body: body,
                             requestFingerprint: header(EventPublisher.fingerprintHeader))
    }
}
