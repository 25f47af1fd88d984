@preconcurrency import Glibc
import PushSystem
import PushPayload
import PushJournal
import PushMediaCore
import PushFetchClient
import PushSystemd
import PushConfig
import PushModuleOptions
import PushDaemonOptions

/// The options each part is opened with, derived from the configuration in one place.
extension Daemon {
    static func normalizerOptions(for configuration: Configuration) throws(CategoryTableError) -> NormalizerOptions {
        var options = NormalizerOptions()
        options.maxPayloadBytes = configuration.limits.maxPayloadBytes
        options.maxDepth = configuration.limits.maxDepth
        // The loader checks categories by the same rule, so this refuses only what it let through
        // by mistake; the caller reports that instead of dropping the category silently.
        options.categories = try configuration.categoryTable()
        return options
    }
}

/// The media hand-off: downloads and image decoding run in `pushspool-fetch`, never in this
/// process (it writes the journal). See `FetchSupervisor` for what happens when it fails.
extension Daemon {
    /// Names the socket of systemd's pushspool-fetch.socket; set by pushspoold.service. Unset:
    /// pushspoold spawns `pushspool-fetch` from its own directory.
    static let fetcherSocketVariable = "PUSHSPOOL_FETCHER_SOCKET"
    static let fetcherExecutableName = "pushspool-fetch"
    /// Room past `PayloadDeadlineSec=` for storing and thumbnailing before a silent fetcher
    /// counts as hung.
    static let fetcherGrace: Duration = .seconds(10)

    static func mediaSource(for configuration: Configuration, reporter: Reporter) throws(MediaFailure) -> any MediaSource {
        let options = MediaOptions(settings: configuration.media,
                                   storeDirectory: StateLayout(root: configuration.journal.stateDirectory).media)
        let launch: FetchSupervisor.Launch
        if let socket = getenv(fetcherSocketVariable).map({ String(cString: $0) }), !socket.isEmpty {
            launch = .connect(path: socket)
        } else {
            launch = .spawn(executable: siblingExecutable(fetcherExecutableName), arguments: [])
        }
        let events = reporter.events
        let supervisor = try FetchSupervisor(options: options, launch: launch,
                                             requestDeadline: options.payloadDeadline + fetcherGrace) { event in
            switch event {
            case .started(let pid):
                events.log(.started, "media fetcher started", fields: [("FETCHER_PID", String(pid))])
            case .lost(let reason, let failed, let restartIn):
                reporter.error("media fetcher lost: \(reason)")
                events.log(.mediaFailed, "media fetcher lost; its downloads fail with their fallback and it is restarted",
                           fields: [(EventField.reasonCode, "fetcher_lost"), ("FETCHER_REASON", reason),
                                    ("FAILED_REQUESTS", String(failed)), ("RESTART_IN_MS", String(restartIn))])
            case .startFailed(let reason, let restartIn):
                reporter.error("media fetcher did not start: \(reason)")
                events.log(.mediaFailed, "media fetcher did not start; retrying",
                           fields: [(EventField.reasonCode, "fetcher_start_failed"), ("FETCHER_REASON", reason),
                                    ("RESTART_IN_MS", String(restartIn))])
            }
        }
        // Not fatal either way: without a fetcher, payloads land with their media failed.
        supervisor.waitUntilReady(timeout: .seconds(10))
        return supervisor
    }

    /// `<directory of /proc/self/exe>/name`: pushspool-fetch is installed next to pushspoold.
    static func siblingExecutable(_ name: String) -> String {
        var buffer = [CChar](repeating: 0, count: 4096)
        let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard count > 0 else { return "/usr/sbin/" + name }
        let path = String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard let slash = path.lastIndex(of: "/") else { return "/usr/sbin/" + name }
        return String(path[..<slash]) + "/" + name
    }
}

/// pushspoold.service runs without network (media goes through pushspool-fetch). Features that
/// connect out from pushspoold itself need the drop-in; without it their connections fail
/// fast (no route, no IP sockets), and this says why once at start instead of leaving an
/// operator to guess from per-delivery errors.
enum NetworkProbe {
    /// Why outbound IP connections cannot work from this process, or nil when they may.
    static func outboundDenied() -> String? {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        if fd < 0 {
            let code = errno
            return "IP sockets are refused (\(SystemError(call: "socket", errno: code).errnoName)); "
                + "the unit's RestrictAddressFamilies= allows only AF_UNIX"
        }
        close(fd)
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0, let first = list else { return nil }
        defer { freeifaddrs(list) }
        var cursor: UnsafeMutablePointer<ifaddrs>? = first
        while let entry = cursor {
            if entry.pointee.ifa_flags & UInt32(IFF_LOOPBACK) == 0 { return nil }
            cursor = entry.pointee.ifa_next
        }
        return "only the loopback interface exists (PrivateNetwork=yes)"
    }

    /// The error to log when `feature` is enabled but the network is denied, or nil.
    static func problem(feature: String) -> String? {
        guard let reason = outboundDenied() else { return nil }
        return "\(feature) is enabled but pushspoold has no network: \(reason). Install the drop-in "
            + "pushspoold-network.conf as /etc/systemd/system/pushspoold.service.d/network.conf (docs/operations.md, \"Network\")"
    }
}
