@preconcurrency import Glibc
import Foundation
import PushSystem
import PushConfig
import PushExport
import PushFleetOutbox
import PushFollow
import PushJournal
import PushModuleOptions
import PushDaemonOptions
import PushOutbox
import TestSupport

/// `pushspool-bench fleet-outbox [--events N] [--nodes K]`, against a local single-node
/// JetStream (Debian's nats-server, started here on a free loopback port).
///
/// Fleet outbox throughput: N pushes (Mindbox iOS records) and one NCPushOpen-causing
/// `nc.open` event for each are published into a fresh stream as inbox nodes publish them;
/// then K fleet outboxes (default 2, each as pushspool-inbox runs it: its own NATS
/// connection, its own thread, the shared durable consumer) deliver them to a stand-in
/// Mindbox on 127.0.0.1 (one new TCP connection per POST, as the outbox makes them).
/// Prints events/s from the start of the outboxes until the vendor held N POSTs, and checks
/// that each event reached it exactly once.
func runFleetOutboxBench(arguments: [String]) {
    var events = 5_000
    var nodes = 2
    var index = 0
    while index < arguments.count {
        let value = index + 1 < arguments.count ? Int(arguments[index + 1]) : nil
        switch (arguments[index], value) {
        case ("--events", let v?) where v > 0 && v <= 1_000_000: events = v
        case ("--nodes", let v?) where v > 0 && v <= 16: nodes = v
        default:
            print("usage: pushspool-bench fleet-outbox [--events N] [--nodes K]")
            exit(64)
        }
        index += 2
    }
    if !fleetOutboxBench(events: events, nodes: nodes) { exit(1) }
}

/// The fleet outbox bench; false (and a results row saying why) when it could not measure.
func fleetOutboxBench(events: Int, nodes: Int) -> Bool {
    let rowName = "fleet outbox, \(nodes) nodes"
    print("== fleet-outbox: \(events) nc.open events through \(nodes) fleet outboxes (one shared consumer) to a stand-in Mindbox on 127.0.0.1")
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("pushspool-bench-fleet-\(UUID().uuidString.prefix(8))").path
    defer { try? FileManager.default.removeItem(atPath: root) }
    let server: NatsServer
    let vendor: LoopbackHTTPServer
    do {
        try Posix.mkdirs(root)
        server = try NatsServer(storeDirectory: root + "/nats")
        try server.start()
        vendor = try LoopbackHTTPServer()
    } catch {
        print("fleet-outbox: \(error)")
        BenchResults.shared.add(rowName, "not measured: \(error)")
        return false
    }
    defer { server.stop() }
    defer { vendor.stop() }
    vendor.route("/v3/operations/async", .ok(Array("{\"status\":\"Success\"}".utf8), contentType: "application/json"))

    let stream = "BENCHFLEET"
    var exportSettings = ExportSettings()
    exportSettings.urls = [server.url]
    exportSettings.stream = stream
    let export = ExportOptions(settings: exportSettings, stateDirectory: root, instance: nil)
    let template = SubjectTemplate(export.subject)!
    var eventIds: [String] = []
    do {
        let client = try NatsClient(urls: [server.url], name: "bench-fleet")
        defer { client.close() }
        try client.ensureStream(name: stream, subjects: [template.streamSubject], replicas: 1, duplicateWindow: .seconds(60))
        let now = Posix.wallClockMillis()
        for i in 0..<events {
            let user = "u\(i % 1000)"
            let item = """
                {"kind":"notification","vendor":"mindbox","platform":"ios","format":"mindbox-ios-current","id":"fo-\(i)","user":"\(user)","title":"Sale \(i)","customPayload":"{\\"pushName\\":\\"sale\\",\\"pushDate\\":\\"2026-11-29T10:00:00Z\\"}"}
                """
            let itemAck = try client.publish(subject: template.subject(vendor: "mindbox", platform: "ios"), msgId: "bench:item-\(i)",
                                             body: Array(item.utf8), headers: [(ExportMessage.ingestHeader, String(now))])
            let eventId = "bench-open-\(i)"
            let event = """
                {"kind":"event","type":"nc.open","eventId":"\(eventId)","user":"\(user)","item":\(itemAck.streamSeq)}
                """
            _ = try client.publish(subject: template.subject(vendor: "event", platform: "event"), msgId: EventPublisher.messageId(eventId: eventId),
                                   body: Array(event.utf8), headers: [(ExportMessage.ingestHeader, String(now))])
            eventIds.append(eventId)
        }
    } catch {
        print("fleet-outbox: publishing: \(error)")
        BenchResults.shared.add(rowName, "not measured: \(error)")
        return false
    }

    let keyFile = root + "/mindbox.key"
    var settings = OutboxSettings()
    settings.enabled = true
    settings.allowHTTP = true
    settings.allowNetworks = ["127.0.0.1/32"]
    settings.mindboxURL = vendor.url("")
    settings.mindboxEndpointId = "bench-ios"
    settings.mindboxSecretKeyFile = keyFile
    var groups: [FollowerGroup] = []
    do {
        try Posix.writeFileAtomically(directory: root, name: "mindbox.key", bytes: Array("bench-secret-key\n".utf8), mode: 0o600)
        for node in 0..<nodes {
            let outbox = try OutboxOptions.load(settings: settings, stateDirectory: root + "/node\(node)")
            let options = FleetOutboxOptions(outbox: outbox, export: export, directory: root + "/node\(node)/inbox/outbox")
            // The index gate is pushspool-inbox's: here every event counts as applied.
            groups.append(FollowerGroup([try FleetOutbox(options: options, appliedSeq: { UInt64.max })], commits: CommitFeed(), niceness: 0))
        }
    } catch {
        print("fleet-outbox: \(error)")
        BenchResults.shared.add(rowName, "not measured: \(error)")
        return false
    }
    let begin = Posix.monotonicNanos()
    for group in groups {
        do { try group.start() } catch {
            print("fleet-outbox: \(error)")
            return false
        }
    }
    waitFor(seconds: 600, "  \(events) POSTs at the vendor") { vendor.hits("/v3/operations/async") >= events }
    let seconds = Double(Posix.monotonicNanos() - begin) / 1e9
    usleep(500_000)
    for group in groups { _ = group.stop(deadline: Posix.monotonicNanos() + 5_000_000_000) }
    let sent = vendor.requests("/v3/operations/async").compactMap { request -> String? in
        guard let range = request.target.range(of: "transactionId=") else { return nil }
        return String(request.target[range.upperBound...].prefix { $0 != "&" })
    }
    let once = sent.count == events && Set(sent) == Set(eventIds)
    let rate = Double(min(events, sent.count)) / max(seconds, 0.001)
    print(String(format: "fleet outbox: %.0f events/s through %d nodes (%d events in %.2f s); vendor received %d POSTs, %@",
                 rate, nodes, events, seconds, sent.count, once ? "each event exactly once" : "NOT each event exactly once"))
    BenchResults.shared.add(rowName, String(format: "%.0f events/s", rate),
                            ratio: once ? "each event delivered once" : "duplicates or losses: \(sent.count) POSTs for \(events) events")
    return once
}
