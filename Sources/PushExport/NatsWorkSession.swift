import PushSystem

extension NatsClient {
    /// A connection with `options`' servers, credentials, TLS files and ack timeout: the one
    /// place a follower's or a command's connection settings are read from.
    package convenience init(_ options: ExportOptions, name: String, reconnects: Bool = true, noEcho: Bool = false,
                             connectTimeout: Duration = .seconds(2)) throws(ExportError) {
        try self.init(urls: options.urls, credentialsFile: options.credentialsFile, tlsCAFile: options.tlsCAFile,
                      tlsCertFile: options.tlsCertFile, tlsKeyFile: options.tlsKeyFile, ackTimeout: options.ackTimeout,
                      connectTimeout: connectTimeout, name: name, reconnects: reconnects, noEcho: noEcho)
    }

    /// Creates the export stream as the exporter would (its subjects from `Subject=`), when it
    /// does not exist; whether it was created.
    @discardableResult
    package func ensureExportStream(_ options: ExportOptions) throws(ExportError) -> Bool {
        // A subject that does not parse is refused by the exporter at start; a listener that
        // runs without one still makes the stream the exporter's defaults would.
        let template = SubjectTemplate(options.subject) ?? SubjectTemplate(ExportOptions.defaultSubject)!
        return try ensureStream(name: options.stream, subjects: [template.streamSubject], replicas: options.replicas,
                                duplicateWindow: options.duplicateWindow)
    }
}

/// A work-queue worker's connection and its shared ``NatsPullConsumer`` (the fleet outbox's, the
/// fleet erasure's): made on first use, kept while the connection is up, made again after
/// ``close(_:)`` or a lost connection. Unanswered messages of a closed session come back to
/// some worker after the ack wait.
///
/// Not `Sendable`: one thread (the follower's) uses it.
package final class NatsWorkSession {
    package let options: ExportOptions
    private let clientName: String
    private let createsStream: Bool
    package private(set) var client: NatsClient?
    package private(set) var consumer: NatsPullConsumer?

    /// `createsStream`: the stream is made when missing (a listener that may start before any
    /// exporter); otherwise a missing stream fails the open.
    package init(options: ExportOptions, clientName: String, createsStream: Bool) {
        self.options = options
        self.clientName = clientName
        self.createsStream = createsStream
    }

    /// The consumer while its connection is up; `nil` when ``open(_:config:)`` must make one.
    package var openConsumer: NatsPullConsumer? {
        guard let consumer, let client, !client.isClosed else { return nil }
        return consumer
    }

    /// The consumer, after connecting (and making the stream) when there is none or the
    /// connection was lost; `config` is asked only when a consumer is made.
    package func open(_ interrupt: NatsInterrupt, config: () -> PullConsumerConfig) throws(ExportError) -> NatsPullConsumer {
        if let openConsumer { return openConsumer }
        close(interrupt)
        let client = try NatsClient(options, name: clientName, reconnects: false)
        self.client = client
        if createsStream { try client.ensureExportStream(options) }
        let consumer = try NatsPullConsumer(client: client, stream: options.stream, config: config())
        self.consumer = consumer
        return consumer
    }

    /// One fetch of the open consumer; `nil` when `stopRequested` said so first. Only the
    /// fetch may be cut short by `interrupt` (which closes the connection): a stop during the
    /// work after it must leave the connection up to answer what was fetched.
    package func fetch(_ consumer: NatsPullConsumer, batch: Int, timeout: Duration, interrupt: NatsInterrupt,
                       stopRequested: () -> Bool) throws(ExportError) -> [StreamRecord]? {
        client?.arm(interrupt)
        defer { interrupt.disarm() }
        if stopRequested() { return nil }
        return try consumer.fetch(batch: batch, timeout: timeout)
    }

    /// Drops the consumer and the connection.
    package func close(_ interrupt: NatsInterrupt) {
        interrupt.disarm()
        consumer = nil
        client?.close()
        client = nil
    }
}
