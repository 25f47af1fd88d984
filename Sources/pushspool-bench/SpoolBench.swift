import Foundation
import PushSpool
import PushSystem

/// `pushspool-bench spool [--files N] [--dir DIR]`: the spool's scan and claim → read →
/// complete path against Foundation's `FileManager` doing the same moves on the same files in
/// the same run. DIR (default the temp directory) decides the file system measured.
func runSpoolBench(arguments: [String]) {
    var files = 20_000
    var base = FileManager.default.temporaryDirectory.path
    var i = 0
    while i + 1 < arguments.count {
        switch arguments[i] {
        case "--files": files = Int(arguments[i + 1]) ?? files
        case "--dir": base = arguments[i + 1]
        default: break
        }
        i += 2
    }
    let root = base + "/pushspool-bench-spool-\(getpid())"
    defer { try? FileManager.default.removeItem(atPath: root) }
    let layout = SpoolLayout(root: root)
    let payload = Array("{\"aps\":{\"alert\":{\"title\":\"bench\",\"body\":\"spool\"}},\"uniqueKey\":\"k\"}".utf8)

    func fill() {
        for n in 0..<files {
            let fd = try! Posix.open(layout.incoming + "/\(n).json", O_WRONLY | O_CREAT | O_TRUNC)
            try! Posix.writeAll(fd, payload)
            Posix.close(fd)
        }
    }
    func seconds(_ body: () throws -> Void) rethrows -> Double {
        let start = Posix.monotonicNanos()
        try body()
        return Double(Posix.monotonicNanos() - start) / 1e9
    }

    do {
        try layout.create()
        print("spool bench: \(files) files of \(payload.count) bytes under \(base)")

        fill()
        let fmScan = try seconds { _ = try FileManager.default.contentsOfDirectory(atPath: layout.incoming).count }
        var largest = 0
        let ourScan = try seconds {
            let scanner = try DirectoryScanner(path: layout.incoming)
            while try scanner.next() != nil {}
            largest = scanner.largestBatch
        }
        print(String(format: "  scan   FileManager %8.0f names/s   DirectoryScanner %8.0f names/s   ratio %.2fx   (largest batch %d)",
                     Double(files) / fmScan, Double(files) / ourScan, fmScan / ourScan, largest))

        let fm = FileManager.default
        let fmProcess = try seconds {
            for name in try fm.contentsOfDirectory(atPath: layout.incoming) {
                try fm.moveItem(atPath: layout.incoming + "/" + name, toPath: layout.processing + "/" + name)
                _ = try Data(contentsOf: URL(fileURLWithPath: layout.processing + "/" + name))
                try fm.removeItem(atPath: layout.processing + "/" + name)
            }
        }

        fill()
        let spool = try Spool(layout: layout, maxFileBytes: 1 << 20)
        var processed = 0
        let ourProcess = try seconds {
            let scan = try spool.scanIncoming()
            while let batch = try scan.next() {
                for entry in batch where try spool.claim(entry.name) {
                    if case .contents = try spool.read(processing: entry.name) { processed += 1 }
                    try spool.complete(processing: entry.name)
                }
            }
        }
        print(String(format: "  claim+read+complete   FileManager %8.0f files/s   Spool %8.0f files/s   ratio %.2fx   (%d read)",
                     Double(files) / fmProcess, Double(files) / ourProcess, fmProcess / ourProcess, processed))
    } catch {
        print("spool bench failed: \(error)")
    }
}
