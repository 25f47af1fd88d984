@preconcurrency import Glibc
import Foundation
import PushExport
import PushSystem

/// `pushspool-bench nats-consume --url URL [--url URL]... --stream S --durable D --subject SUBJ
/// [--idle-sec N] [--attempts N]`
///
/// Not a benchmark: the reading side of scripts/systemd-integration/instances-live.sh. Reads
/// `S` through the durable pull consumer `D` — a shared `NatsPullConsumer`, created on first use and
/// bound as it stands afterwards, so a second run gets only what no run acknowledged —
/// acknowledging each message, until a fetch stays empty for `--idle-sec`; prints one
/// `Nats-Msg-Id` per line, in delivery order, so the caller can count each id. Lives here
/// rather than in pushspoolctl because it is a test tool: the shipped binaries do not consume
/// their own stream.
///
/// Creating an R3 consumer needs the cluster's meta leader, which may still be moving after a
/// node was killed: a failed attempt is retried (up to `--attempts`, 2 s apart) like any
/// client would. Exit status: 0 read, 1 NATS failure, 64 usage error.
func runNatsConsume(arguments: [String]) {
    var urls: [String] = []
    var stream = ""
    var durable = ""
    // Required: the consumer's filter must lie inside the stream's subjects (">" would not).
    var subject = ""
    var idleSeconds = 2
    var attempts = 10
    // Keep fetching through empty timeouts until this many arrived (or 60 s): right after a
    // cluster node died, the consumer has no leader for a moment.
    var atLeast = 0
    func usage() -> Never {
        FileHandle.standardError.write(Data("""
            usage: pushspool-bench nats-consume --url URL [--url URL]... --stream NAME --durable NAME
                                                --subject SUBJECT [--idle-sec N] [--attempts N] [--at-least N]

            """.utf8))
        exit(64)
    }
    var index = 0
    while index < arguments.count {
        guard index + 1 < arguments.count else { usage() }
        let value = arguments[index + 1]
        switch arguments[index] {
        case "--url": urls += value.split(whereSeparator: { $0 == " " || $0 == "," }).map(String.init)
        case "--stream": stream = value
        case "--durable": durable = value
        case "--subject": subject = value
        case "--idle-sec": guard let v = Int(value), (1...600).contains(v) else { usage() }; idleSeconds = v
        case "--attempts": guard let v = Int(value), (1...100).contains(v) else { usage() }; attempts = v
        case "--at-least": guard let v = Int(value), (0...10_000_000).contains(v) else { usage() }; atLeast = v
        default: usage()
        }
        index += 2
    }
    guard !urls.isEmpty, !stream.isEmpty, !durable.isEmpty, !subject.isEmpty else { usage() }

    var lastError = ""
    for attempt in 1...attempts {
        do throws(ExportError) {
            let client = try NatsClient(urls: urls, name: "pushspool-bench-consumer")
            defer { client.close() }
            // The limits a consumer made by a plain pull subscription would have had.
            let config = PullConsumerConfig(name: .shared(durable), ack: .explicit(wait: .seconds(30), maxDeliver: 1_000, maxPending: 1_000),
                                            filterSubject: subject)
            let consumer = try NatsPullConsumer(client: client, stream: stream, config: config)
            let patienceEnd = Posix.monotonicNanos() &+ Duration.seconds(60).clampedUInt64Nanoseconds
            var text = ""
            var count = 0
            while true {
                let messages = try consumer.fetch(batch: 256, timeout: .seconds(idleSeconds))
                for message in messages {
                    text += message.msgId + "\n"
                    try consumer.acknowledge(message.streamSeq)
                }
                count += messages.count
                if messages.isEmpty && (count >= atLeast || Posix.monotonicNanos() >= patienceEnd) { break }
            }
            FileHandle.standardOutput.write(Data(text.utf8))
            return
        } catch {
            lastError = "\(error)"
            FileHandle.standardError.write(Data("nats-consume: attempt \(attempt) of \(attempts): \(error)\n".utf8))
            if attempt < attempts { sleep(2) }
        }
    }
    FileHandle.standardError.write(Data("nats-consume: giving up: \(lastError)\n".utf8))
    exit(1)
}
