@preconcurrency import Glibc
internal import CMicroHTTPD
internal import CMicroHTTPDShim
import PushSystem
import Synchronization

/// One HTTP request as the API sees it, after libmicrohttpd parsed it. `Sendable` value.
package struct HTTPRequest: Sendable {
    package var method: String
    /// The path without the query string, as sent: libmicrohttpd does not decode it (the
    /// shim's no-op `MHD_OPTION_UNESCAPE_CALLBACK`). The router splits it at `/` and decodes
    /// each component once (``PathComponent``); nothing else may decode it again.
    package var path: String
    /// Query arguments, names and values decoded once: `+` a space (libmicrohttpd), then
    /// `%XX` (``HTTPServer``, through ``PercentDecoding``). The first of repeated names wins.
    package var query: [String: String]
    /// Header names lower-cased; the first of repeated names wins.
    package var headers: [String: String]
    package var body: [UInt8]
    package var clientAddress: String

    package init(method: String, path: String, query: [String: String] = [:], headers: [String: String] = [:],
                 body: [UInt8] = [], clientAddress: String = "") {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        self.clientAddress = clientAddress
    }
}

/// What the API answers. `Sendable`; a stream body is a live ``EventStream``.
package struct HTTPResponse: Sendable {
    package enum Body: Sendable {
        case bytes([UInt8])
        case stream(EventStream)
    }

    package var status: Int
    package var headers: [(String, String)]
    package var body: Body

    package init(status: Int, headers: [(String, String)] = [], body: Body = .bytes([])) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}

/// Limits of one server; see the `[Inbox]` configuration keys. `Sendable` value.
package struct HTTPLimits: Sendable, Equatable {
    package var maxConnections: Int
    package var maxConnectionsPerIP: Int
    package var connectionTimeout: Duration
    package var maxRequestBytes: Int
    /// libmicrohttpd's per-connection buffer: request line plus headers must fit in it.
    package var headerBufferBytes = 32 << 10
    /// libmicrohttpd worker threads (`MHD_OPTION_THREAD_POOL_SIZE`), each with its own epoll
    /// set; 1 = one epoll thread. Requests on different connections then run in parallel.
    package var threads = 1

    package init(maxConnections: Int, maxConnectionsPerIP: Int, connectionTimeout: Duration, maxRequestBytes: Int) {
        self.maxConnections = maxConnections
        self.maxConnectionsPerIP = maxConnectionsPerIP
        self.connectionTimeout = connectionTimeout
        self.maxRequestBytes = maxRequestBytes
    }
}

/// A failure to start the HTTP server. `Sendable` value.
package struct HTTPServerError: Error, Sendable, CustomStringConvertible {
    package var message: String
    package var description: String { message }
}

/// The request handler: runs on libmicrohttpd's worker threads (``HTTPLimits/threads``),
/// several requests at once; one connection's requests always on the same thread, so
/// per-thread state (an SQLite connection each) needs no further locking.
package protocol HTTPHandler: AnyObject, Sendable {
    func handle(_ request: HTTPRequest) -> HTTPResponse
}

/// The body collected for one request, kept in libmicrohttpd's per-request pointer.
private final class RequestContext {
    var body: [UInt8] = []
    var tooLarge = false
}

/// libmicrohttpd (`MHD_USE_EPOLL_INTERNAL_THREAD`, a pool of them) serving one ``HTTPHandler`` on a listening
/// socket it is handed (from `--listen` or systemd's socket activation). Connection, per-IP
/// and header-size limits are libmicrohttpd's; the body limit is enforced here (413 before the
/// body is read when `Content-Length` says so), and so are the deadline for a whole request
/// and the reserve of slots slow clients cannot take (``ConnectionTable``).
///
/// `Sendable`: the daemon pointer is set once in ``start()`` and cleared in ``stop()``, both
/// from the owning thread; libmicrohttpd's own calls are thread-safe.
package final class HTTPServer: @unchecked Sendable {
    private let listenFD: Int32
    private let limits: HTTPLimits
    private let handler: any HTTPHandler
    private var daemon: OpaquePointer?
    private var retainedSelf: Unmanaged<HTTPServer>?
    /// Deadlines and reserves for connections still sending their request, and hang-ups of
    /// streams (set in ``start()``).
    private var guardian: ConnectionGuard?

    package init(listenFD: Int32, limits: HTTPLimits, handler: any HTTPHandler) {
        self.listenFD = listenFD
        self.limits = limits
        self.handler = handler
    }

    /// Starts the epoll thread(s) and the connection guard. Wraps `MHD_start_daemon` (through
    /// the shim).
    package func start() throws(HTTPServerError) {
        let guardian: ConnectionGuard
        do {
            guardian = try ConnectionGuard(limits: ConnectionTable.Limits(
                deadline: limits.connectionTimeout, maxConnections: limits.maxConnections,
                maxConnectionsPerIP: limits.maxConnectionsPerIP, threads: limits.threads))
            try guardian.start()
        } catch {
            throw HTTPServerError(message: "cannot start the connection guard: \(error)")
        }
        self.guardian = guardian
        var c = cmhd_limits(
            connection_limit: UInt32(clamping: limits.maxConnections),
            per_ip_connection_limit: UInt32(clamping: limits.maxConnectionsPerIP),
            connection_timeout_seconds: Self.idleTimeoutSeconds(limits.connectionTimeout),
            connection_memory_limit: limits.headerBufferBytes,
            thread_pool_size: UInt32(clamping: limits.threads))
        let me = Unmanaged.passRetained(self)
        guard let daemon = cmhd_start(listenFD, &c, HTTPServer.accessHandler, me.toOpaque(),
                                      HTTPServer.completed, me.toOpaque(), HTTPServer.connectionNotice, me.toOpaque()) else {
            me.release()
            guardian.stop()
            self.guardian = nil
            throw HTTPServerError(message: "libmicrohttpd refused to start on fd \(listenFD)")
        }
        self.daemon = daemon
        retainedSelf = me
    }

    /// libmicrohttpd's idle timeout, in the whole seconds it takes: `timeout` rounded *up*, so
    /// it never ends a connection before the guard's exact deadline would. It still ends a
    /// response the client stops reading.
    static func idleTimeoutSeconds(_ timeout: Duration) -> UInt32 {
        let (seconds, attoseconds) = timeout.components
        let whole = attoseconds > 0 ? seconds.addingReportingOverflow(1).partialValue : seconds
        return UInt32(clamping: max(1, whole))
    }

    /// Connections open now (`MHD_DAEMON_INFO_CURRENT_CONNECTIONS`).
    package var currentConnections: Int {
        guard let daemon else { return 0 }
        return Int(cmhd_current_connections(daemon))
    }

    /// Stops accepting and closes every connection. Suspended streams must have been
    /// resumed first (``EventHub/shutdown()``); libmicrohttpd requires it. The listening
    /// socket is closed, never shut down: under socket activation systemd shares it and
    /// goes on listening for the next start. Wraps `MHD_quiesce_daemon` + `MHD_stop_daemon`.
    package func stop() {
        guard let daemon else { return }
        cmhd_stop(daemon)
        self.daemon = nil
        guardian?.stop()
        guardian = nil
        retainedSelf?.release()
        retainedSelf = nil
    }

    /// Connections whose request is not in yet (the guard's count).
    package var receivingConnections: Int { guardian?.receiving ?? 0 }

    /// Resumes a suspended connection (a stream with new data). Wraps `MHD_resume_connection`.
    static func resume(_ connection: OpaquePointer) { MHD_resume_connection(connection) }

    /// Suspends a connection from its content reader. Wraps `MHD_suspend_connection`.
    static func suspend(_ connection: OpaquePointer) { MHD_suspend_connection(connection) }

    // MARK: libmicrohttpd callbacks

    private static let completed: MHD_RequestCompletedCallback = { cls, connection, requestContext, _ in
        if let cls, let connection {
            // The response is out: a kept-alive connection waits for its next request, under
            // the same deadline as its first.
            Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue().guardian?.completed(connection)
        }
        guard let requestContext, let pointer = requestContext.pointee else { return }
        Unmanaged<RequestContext>.fromOpaque(pointer).release()
        requestContext.pointee = nil
    }

    private static let connectionNotice: MHD_NotifyConnectionCallback = { cls, connection, _, code in
        guard let cls, let connection else { return }
        let server = Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue()
        guard let guardian = server.guardian else { return }
        if code == .CONNECTION_NOTIFY_STARTED {
            guardian.opened(connection, fd: cmhd_connection_fd(connection), address: clientAddress(connection) ?? "")
        } else {
            guardian.closed(connection)
        }
    }

    private static let accessHandler: MHD_AccessHandlerCallback = { cls, connection, url, method, _, uploadData, uploadSize, requestContext in
        guard let cls, let connection, let url, let method, let uploadSize, let requestContext else { return .NO }
        let server = Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue()
        guard let pointer = requestContext.pointee else {
            // First call: headers are in. Refuse an announced over-size body before reading it.
            let context = RequestContext()
            requestContext.pointee = Unmanaged.passRetained(context).toOpaque()
            if let length = lookup(connection, .HEADER_KIND, "Content-Length"),
               let bytes = Int(length), bytes > server.limits.maxRequestBytes {
                return server.queue(connection, InboxAPI.problem(413, "request_too_large", "the request body is over \(server.limits.maxRequestBytes) bytes"))
            }
            return .YES
        }
        let context = Unmanaged<RequestContext>.fromOpaque(pointer).takeUnretainedValue()
        if uploadSize.pointee > 0 {
            if !context.tooLarge, let uploadData {
                if context.body.count + uploadSize.pointee > server.limits.maxRequestBytes {
                    context.tooLarge = true
                    context.body = []
                } else {
                    uploadData.withMemoryRebound(to: UInt8.self, capacity: uploadSize.pointee) {
                        context.body.append(contentsOf: UnsafeBufferPointer(start: $0, count: uploadSize.pointee))
                    }
                }
            }
            uploadSize.pointee = 0
            return .YES
        }
        if context.tooLarge {
            return server.queue(connection, InboxAPI.problem(413, "request_too_large", "the request body is over \(server.limits.maxRequestBytes) bytes"))
        }
        // The path as sent; bytes that are not UTF-8 (unescaped) are refused, not repaired.
        guard let path = String(validatingCString: url) else {
            return server.queue(connection, InboxAPI.problem(400, "invalid_path", "the path is not UTF-8"))
        }
        var request = HTTPRequest(method: String(cString: method), path: path)
        request.headers = values(connection, .HEADER_KIND, lowercase: true)
        switch decodedQuery(rawArguments(connection)) {
        case .success(let query): request.query = query
        case .failure(let refusal): return server.queue(connection, refusal.response)
        }
        request.body = context.body
        request.clientAddress = clientAddress(connection) ?? ""
        let response = server.handler.handle(request)
        if case .stream(let stream) = response.body { stream.connection = connection }
        return server.queue(connection, response)
    }

    private static func clientAddress(_ connection: OpaquePointer) -> String? {
        var address = [CChar](repeating: 0, count: 64)
        guard cmhd_client_address(connection, &address, address.count) == 0 else { return nil }
        return String(decoding: address.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private static func lookup(_ connection: OpaquePointer, _ kind: MHD_ValueKind, _ name: String) -> String? {
        MHD_lookup_connection_value(connection, kind, name).map { String(cString: $0) }
    }

    /// The query arguments decoded once (``HTTPRequest/query``), the first of a repeated name
    /// kept; a 400 naming the first argument whose name or value is not valid percent-encoded
    /// UTF-8. `raw`: names and values as libmicrohttpd hands them (`+` a space already).
    static func decodedQuery(_ raw: [(String, String)]) -> Result<[String: String], InboxAPI.Refusal> {
        var query: [String: String] = [:]
        for (rawName, rawValue) in raw {
            guard let name = PercentDecoding.decode(rawName) else {
                return .failure(InboxAPI.Refusal(InboxAPI.problem(400, "invalid_query", "a query argument name (\(rawName)) is not valid percent-encoded UTF-8")))
            }
            guard let value = PercentDecoding.decode(rawValue) else {
                return .failure(InboxAPI.Refusal(InboxAPI.problem(400, "invalid_query", "the query argument \(name) is not valid percent-encoded UTF-8")))
            }
            if query[name] == nil { query[name] = value }
        }
        return .success(query)
    }

    /// The query arguments in order, undecoded (`MHD_GET_ARGUMENT_KIND`).
    private static func rawArguments(_ connection: OpaquePointer) -> [(String, String)] {
        final class Arguments { var list: [(String, String)] = [] }
        let arguments = Arguments()
        let box = Unmanaged.passRetained(arguments)
        defer { box.release() }
        _ = MHD_get_connection_values(connection, .GET_ARGUMENT_KIND, { cls, _, key, value in
            guard let cls, let key else { return .YES }
            Unmanaged<Arguments>.fromOpaque(cls).takeUnretainedValue().list.append((String(cString: key), value.map { String(cString: $0) } ?? ""))
            return .YES
        }, box.toOpaque())
        return arguments.list
    }

    private final class Collector {
        var values: [String: String] = [:]
        let lowercase: Bool
        init(lowercase: Bool) { self.lowercase = lowercase }
    }

    private static func values(_ connection: OpaquePointer, _ kind: MHD_ValueKind, lowercase: Bool) -> [String: String] {
        let collector = Collector(lowercase: lowercase)
        let box = Unmanaged.passRetained(collector)
        defer { box.release() }
        _ = MHD_get_connection_values(connection, kind, { cls, _, key, value in
            guard let cls, let key else { return .YES }
            let collector = Unmanaged<Collector>.fromOpaque(cls).takeUnretainedValue()
            var name = String(cString: key)
            if collector.lowercase { name = name.lowercased() }
            if collector.values[name] == nil { collector.values[name] = value.map { String(cString: $0) } ?? "" }
            return .YES
        }, box.toOpaque())
        return collector.values
    }

    /// Queues the answer; the request is in (or refused before its body), so the guard's
    /// deadline no longer applies to it.
    private func queue(_ connection: OpaquePointer, _ response: HTTPResponse) -> MHD_Result {
        guardian?.received(connection)
        if case .stream(let stream) = response.body { guardian?.watchHangup(connection, stream) }
        let mhdResponse: OpaquePointer?
        switch response.body {
        case .bytes(let bytes):
            mhdResponse = bytes.withUnsafeBytes { raw in
                MHD_create_response_from_buffer(raw.count, UnsafeMutableRawPointer(mutating: raw.baseAddress), .RESPMEM_MUST_COPY)
            }
        case .stream(let stream):
            let box = Unmanaged.passRetained(stream)
            mhdResponse = MHD_create_response_from_callback(UInt64.max, 4096, { cls, _, buffer, max in
                guard let cls, let buffer else { return -2 }
                let stream = Unmanaged<EventStream>.fromOpaque(cls).takeUnretainedValue()
                return stream.read(into: UnsafeMutableRawBufferPointer(start: buffer, count: max))
            }, box.toOpaque(), { cls in
                guard let cls else { return }
                let stream = Unmanaged<EventStream>.fromOpaque(cls).takeRetainedValue()
                stream.closed()
            })
            if mhdResponse == nil { box.release() }
        }
        guard let mhdResponse else { return .NO }
        defer { MHD_destroy_response(mhdResponse) }
        for (name, value) in response.headers { _ = MHD_add_response_header(mhdResponse, name, value) }
        return MHD_queue_response(connection, UInt32(clamping: response.status), mhdResponse)
    }
}
