@preconcurrency import Glibc
import Foundation
import PushMedia
import PushMediaCore
import TestSupport
import PushSystem
import Synchronization
import PushConfig
import PushModuleOptions
import PushDaemonOptions

/// `pushspool-bench media [--images N] [--concurrency N] [--thumbnails]`: fetches N distinct PNGs
/// from a loopback server running in a child process (so its CPU is not counted), with the
/// configured number in flight, against a baseline of one at a time; then measures the CPU
/// spent while 16 downloads wait on servers that trickle.
func runMediaBench(arguments: [String]) {
    if arguments.first == "--serve" {
        serveBenchImages(count: Int(arguments.dropFirst().first ?? "1000") ?? 1000)
        return
    }
    var images = 1000
    var concurrency = 16
    var thumbnails = false
    var index = 0
    while index < arguments.count {
        switch arguments[index] {
        case "--images": index += 1; images = Int(arguments[index]) ?? images
        case "--concurrency": index += 1; concurrency = Int(arguments[index]) ?? concurrency
        case "--thumbnails": thumbnails = true
        default: print("usage: pushspool-bench media [--images N] [--concurrency N] [--thumbnails]"); exit(64)
        }
        index += 1
    }

    let child = Process()
    // /proc/self/exe: argv[0] may be a bare name found through PATH.
    child.executableURL = URL(fileURLWithPath: "/proc/self/exe")
    child.arguments = ["media", "--serve", String(images)]
    let output = Pipe()
    let input = Pipe()
    child.standardOutput = output
    child.standardInput = input
    do { try child.run() } catch { print("cannot start the image server: \(error)"); exit(1) }
    let portLine = readLine(from: output.fileHandleForReading)
    guard let port = Int(portLine) else { print("image server did not report a port"); exit(1) }
    defer {
        try? input.fileHandleForWriting.close()
        child.waitUntilExit()
    }

    let baselineCount = max(1, images / 5)
    let baseline = fetchBatch(port: port, range: 0..<baselineCount, concurrency: 1, thumbnails: thumbnails, label: "baseline")
    let main = fetchBatch(port: port, range: 0..<images, concurrency: concurrency, thumbnails: thumbnails, label: "main")
    print(String(format: "media: %d images, %d in flight: %.0f images/s, %.2f CPU s (%.2f ms CPU/image); baseline 1 in flight: %.0f images/s; ratio %.2fx",
                 images, concurrency, main.rate, main.cpu, main.cpu * 1000 / Double(images), baseline.rate, main.rate / baseline.rate))
    stalledCPU(port: port)
    hashThroughput()
}

/// SHA-256 runs on the network thread for every body byte; its speed bounds throughput.
private func hashThroughput() {
    let block = (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 7) }
    let hasher = SHA256()
    let start = Posix.monotonicNanos()
    for _ in 0..<64 { hasher.update(block) }
    let digest = hasher.finalizeHex()
    let seconds = Double(Posix.monotonicNanos() - start) / 1e9
    print(String(format: "media sha256: %.0f MB/s (64 MiB, digest %@…)", 64 / seconds, String(digest.prefix(8))))
}

private struct BatchResult {
    var rate: Double
    var cpu: Double
}

private func fetchBatch(port: Int, range: Range<Int>, concurrency: Int, thumbnails: Bool, label: String) -> BatchResult {
    let directory = "/tmp/pushspool-media-bench-\(getpid())-\(label)"
    defer { _ = system("rm -rf '\(directory)'") }
    var options = MediaOptions(settings: Configuration().media, storeDirectory: directory)
    options.allowHTTP = true
    options.allowNetworks = ["127.0.0.1/32"]
    options.maxConcurrent = concurrency
    options.thumbnailMaxEdge = thumbnails ? 320 : 0
    let fetcher: MediaFetcher
    do { fetcher = try MediaFetcher(options: options) } catch { print("\(error)"); exit(1) }
    let remaining = Atomic<Int>(range.count)
    let failures = Atomic<Int>(0)
    let done = DispatchSemaphore(value: 0)
    let cpuStart = processCPUSeconds()
    let start = Posix.monotonicNanos()
    for image in range {
        fetcher.fetch(url: "http://127.0.0.1:\(port)/img/\(image).png") { outcome in
            if outcome.status != .stored {
                if failures.add(1, ordering: .relaxed).newValue == 1 { print("first failure: \(outcome.encodeJSON())") }
            }
            if remaining.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 { done.signal() }
        }
    }
    done.wait()
    let seconds = Double(Posix.monotonicNanos() - start) / 1e9
    let cpu = processCPUSeconds() - cpuStart
    fetcher.shutdown()
    if failures.load(ordering: .relaxed) > 0 { print("\(label): \(failures.load(ordering: .relaxed)) failures") }
    return BatchResult(rate: Double(range.count) / seconds, cpu: cpu)
}

/// 16 downloads from a server that sends one byte every half second: waiting must cost
/// (almost) no CPU.
private func stalledCPU(port: Int) {
    let directory = "/tmp/pushspool-media-bench-\(getpid())-stall"
    defer { _ = system("rm -rf '\(directory)'") }
    var options = MediaOptions(settings: Configuration().media, storeDirectory: directory)
    options.allowHTTP = true
    options.allowNetworks = ["127.0.0.1/32"]
    options.lowSpeedLimitBytesPerSecond = 1
    let fetcher: MediaFetcher
    do { fetcher = try MediaFetcher(options: options) } catch { print("\(error)"); exit(1) }
    for index in 0..<16 { fetcher.fetch(url: "http://127.0.0.1:\(port)/trickle/\(index)") { _ in } }
    Thread.sleep(forTimeInterval: 0.5)
    let cpuStart = processCPUSeconds()
    let wall = 4.0
    Thread.sleep(forTimeInterval: wall)
    let cpu = processCPUSeconds() - cpuStart
    let inFlight = fetcher.stats.inFlight
    let start = Posix.monotonicNanos()
    fetcher.shutdown()
    let shutdownMillis = Double(Posix.monotonicNanos() - start) / 1e6
    print(String(format: "media stalled: %d downloads trickling for %.0f s cost %.3f CPU s (%.2f%% of one core); shutdown cancelled them in %.0f ms",
                 inFlight, wall, cpu, cpu / wall * 100, shutdownMillis))
}

private func processCPUSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
        + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
}

private func readLine(from handle: FileHandle) -> String {
    var bytes: [UInt8] = []
    while true {
        let data = handle.readData(ofLength: 1)
        guard let byte = data.first, byte != 10 else { break }
        bytes.append(byte)
    }
    return String(decoding: bytes, as: UTF8.self)
}

/// Child-process mode: serves `/img/N.png` (distinct 96×96 PNGs) and `/trickle/N` until stdin closes.
private func serveBenchImages(count: Int) {
    let server: LoopbackHTTPServer
    do { server = try LoopbackHTTPServer() } catch { print("listen failed: \(error)"); exit(1) }
    for image in 0..<count {
        server.route("/img/\(image).png", .ok(BenchPNG.make(width: 96, height: 96, seed: image), contentType: "image/png"))
    }
    for index in 0..<16 {
        server.route("/trickle/\(index)", .trickle(headers: [], body: BenchPNG.make(width: 8, height: 8, seed: index), interval: 0.5))
    }
    // Written straight to fd 1: the parent reads one line and print() may buffer it.
    _ = Array("\(server.port)\n".utf8).withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
    while FileHandle.standardInput.availableData.count > 0 {}
    server.stop()
}

/// Minimal PNG writer (stored deflate blocks) so each bench image is a real, distinct PNG.
enum BenchPNG {
    static func make(width: Int, height: Int, seed: Int) -> [UInt8] {
        var raw: [UInt8] = []
        raw.reserveCapacity((width * 3 + 1) * height)
        for y in 0..<height {
            raw.append(0)
            for x in 0..<width {
                raw += [UInt8(truncatingIfNeeded: x &* 3 &+ seed), UInt8(truncatingIfNeeded: y &* 5 &+ seed >> 8), UInt8(truncatingIfNeeded: (x ^ y) &+ seed)]
            }
        }
        var zlib: [UInt8] = [0x78, 0x01]
        var offset = 0
        repeat {
            let length = min(65535, raw.count - offset)
            let final: UInt8 = offset + length == raw.count ? 1 : 0
            zlib += [final, UInt8(length & 0xFF), UInt8(length >> 8), UInt8(~length & 0xFF), UInt8((~length >> 8) & 0xFF)]
            zlib += raw[offset..<offset + length]
            offset += length
        } while offset < raw.count
        var a: UInt32 = 1, b: UInt32 = 0
        for byte in raw { a = (a + UInt32(byte)) % 65521; b = (b + a) % 65521 }
        zlib += bigEndian(b << 16 | a)
        var png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        png += chunk("IHDR", bigEndian(UInt32(width)) + bigEndian(UInt32(height)) + [8, 2, 0, 0, 0])
        png += chunk("IDAT", zlib)
        png += chunk("IEND", [])
        return png
    }

    private static func bigEndian(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF), UInt8(value & 0xFF)]
    }

    private static func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
        let body = Array(type.utf8) + data
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in body {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        return bigEndian(UInt32(data.count)) + body + bigEndian(~crc)
    }
}
