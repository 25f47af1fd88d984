@preconcurrency import Glibc
import PushCLI
import PushPayload
import PushSystem
import PushMediaCore

/// `pushspoolctl media stats [--json]`: what the media store holds (walked on disk, so it
/// works without a daemon) and the daemon's media counters from `<state>/status.json`.
package struct MediaCommand: CtlSubcommand {
    package static var command: CtlCommandSpec {
        Command("media", summary: "show the media store and the daemon's download counters", subcommands: [
            Command("stats", summary: "the media store's files and bytes, and the daemon's media counters",
                    options: [.flag("--json", help: "one JSON object: {\"store\":{...},\"daemon\":{...}}")], discussion: """
                        Prints the files and bytes in the media store (STATE_DIR/media: stored files,
                        thumbnails, leftovers of interrupted downloads) and, when pushspoold has written
                        STATE_DIR/status.json, its media counters: payloads waiting for media (inFlight),
                        open transfers, queued URLs, stored, failed (by reason code), skipped, reused.
                        With --json, "daemon" is absent until pushspoold has written status.json (its first
                        status interval); the store is read either way.
                        """,
                    exitStatus: "Exit status: 0 success, 1 the store or status file cannot be read, 64 usage error."
            ) { invocation throws(CLIError) in MediaCommand(json: invocation.flag("--json")) },
        ])
    }

    var json = false

    package func run(_ context: CtlContext) -> Int32 {
        guard let configuration = context.configurationOrReport() else { return ExitStatus.failure }
        let storeDirectory = StateLayout(root: configuration.journal.stateDirectory).media
        let store: MediaStore.Stats
        do {
            store = try MediaStore.stats(directory: storeDirectory)
        } catch where error.errno == ENOENT {
            // Media never ran with this state directory: an empty store, not an error.
            store = MediaStore.Stats()
        } catch {
            context.err("pushspoolctl: cannot read the media store \(storeDirectory): \(error)\n")
            return ExitStatus.failure
        }

        let statusPath = StateLayout(root: configuration.journal.stateDirectory).status
        var daemon: JSONObject?
        do {
            let bytes = try Posix.readFile(statusPath, limit: 1 << 20)
            guard case .object(let status)? = try? JSONParser().parse(bytes) else {
                context.err("pushspoolctl: \(statusPath) is not a JSON object\n")
                return ExitStatus.failure
            }
            daemon = Self.daemonCounters(status)
        } catch where error.errno == ENOENT {
            daemon = nil
        } catch {
            context.err("pushspoolctl: cannot read \(statusPath): \(error)\n")
            return ExitStatus.failure
        }

        if json {
            var object: JSONObject = [:]
            object["store"] = store.jsonValue
            if let daemon { object["daemon"] = .object(daemon) }
            context.out(String(decoding: JSONValue.object(object).serialized(), as: UTF8.self) + "\n")
            return ExitStatus.ok
        }
        var lines = [
            "store: \(storeDirectory)",
            "  files: \(store.files)",
            "  bytes: \(store.bytes)",
            "  thumbnails: \(store.thumbnails) (\(store.thumbnailBytes) bytes)",
            "  interrupted downloads: \(store.tempFiles)",
        ]
        if let daemon {
            lines.append("daemon: \(statusPath)")
            for key in daemon.keys.sorted() {
                lines.append("  \(key): \(Self.text(daemon[key]!))")
            }
        } else {
            // status.json appears only at the first status interval, so a missing file says
            // nothing about whether the daemon ran: report what is known instead.
            lines.append("daemon: no counters published yet (\(statusPath) does not exist; pushspoold writes it "
                         + "every [Status] IntervalSec while running, so it is missing until a running daemon's "
                         + "first interval, or if no daemon has used this state directory)")
        }
        context.out(lines.joined(separator: "\n") + "\n")
        return ExitStatus.ok
    }

    /// The media part of the status file under short names: the daemon's own counts
    /// (`mediaStored` → `stored`, …) plus the fetcher's (`failedByCode`, `reused`, …).
    static func daemonCounters(_ status: JSONObject) -> JSONObject {
        var counters: JSONObject = [:]
        let renames = ["mediaInFlight": "inFlight", "mediaStored": "stored", "mediaFailed": "failed", "mediaSkipped": "skipped"]
        for (from, to) in renames { counters[to] = status[from] }
        if case .object(let fetcher)? = status["media"] {
            for key in ["failedByCode", "queued", "reused", "retries", "bytesStored", "thumbnails", "undecodable"] {
                counters[key] = fetcher[key]
            }
            // `inFlight` above counts payloads waiting for media; this counts open transfers.
            counters["transfers"] = fetcher["inFlight"]
        }
        for key in ["updatedAt", "pid"] { counters[key] = status[key] }
        return counters
    }

    static func text(_ value: JSONValue) -> String {
        switch value {
        case .string(let s), .number(let s): s
        case .bool(let b): b ? "yes" : "no"
        case .object(let object):
            object.isEmpty ? "none" : object.keys.sorted().map { "\($0) \(text(object[$0]!))" }.joined(separator: ", ")
        default: String(decoding: value.serialized(), as: UTF8.self)
        }
    }
}
