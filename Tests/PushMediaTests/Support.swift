@preconcurrency import Glibc
import PushMedia
import PushMediaCore
import PushSystem
import TestSupport
import PushConfig
import PushModuleOptions
import PushDaemonOptions

extension TempDir {
    var store: String { path + "/media" }
}

/// Options with short limits so failure tests finish in a few seconds, loopback allowed.
func testOptions(_ dir: TempDir) -> MediaOptions {
    var options = MediaOptions(settings: Configuration().media, storeDirectory: dir.store)
    options.allowHTTP = true
    options.allowNetworks = ["127.0.0.1/32"]
    options.connectTimeout = .seconds(2)
    options.transferDeadline = .seconds(2)
    options.payloadDeadline = .seconds(6)
    options.lowSpeedLimitBytesPerSecond = 1
    options.lowSpeedTime = .seconds(30)
    options.retryBaseDelay = 0.05
    options.thumbnailMaxEdge = 0
    return options
}

func elapsedSeconds(since start: UInt64) -> Double {
    Double(Posix.monotonicNanos() - start) / 1e9
}

/// Regular files under `directory`, recursively (temp dir included).
func filesUnder(_ directory: String) -> [String] {
    guard let dir = opendir(directory) else { return [] }
    defer { closedir(dir) }
    var result: [String] = []
    while let entry = readdir(dir) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        if name == "." || name == ".." { continue }
        let path = directory + "/" + name
        if entry.pointee.d_type == UInt8(DT_DIR) {
            result += filesUnder(path)
        } else {
            result.append(path)
        }
    }
    return result
}

func readBytes(_ path: String) -> [UInt8]? {
    try? Posix.readFile(path)
}


extension MediaFetcher {
    /// The callback form, awaited: what a test needs to read one outcome in order. Production
    /// callers (the daemon's pipeline, pushspool-fetch) use the callback form as it is.
    func fetched(url: String) async -> MediaOutcome {
        await withCheckedContinuation { continuation in
            fetch(url: url) { continuation.resume(returning: $0) }
        }
    }
}
