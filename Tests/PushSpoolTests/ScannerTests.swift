@preconcurrency import Glibc
import Foundation
import Testing
import PushSystem
@testable import PushSpool

@Suite struct ScannerTests {
    @Test func skipsDotfilesAndTmpAndReportsTypes() throws {
        let t = try TempSpool()
        let dir = t.layout.incoming
        try t.write(dir, "a.json", "{}")
        try t.write(dir, ".hidden.json", "{}")
        try t.write(dir, "partial.tmp", "{}")
        #expect(symlink("/etc/passwd", dir + "/link.json") == 0)
        #expect(mkfifo(dir + "/fifo.json", 0o600) == 0)
        try Posix.mkdirs(dir + "/sub")
        let scanner = try DirectoryScanner(path: dir)
        var entries: [DirectoryScanner.Entry] = []
        while let batch = try scanner.next() { entries += batch }
        #expect(entries.map(\.name).sorted() == ["a.json", "fifo.json", "link.json", "sub"])
        let types = Dictionary(uniqueKeysWithValues: entries.map { ($0.name, $0.type) })
        // ext4 and tmpfs fill in d_type; on others `.unknown` is allowed by the contract.
        #expect(types["a.json"] == .regular || types["a.json"] == .unknown)
        #expect(types["link.json"] == .symlink || types["link.json"] == .unknown)
        #expect(types["fifo.json"] == .fifo || types["fifo.json"] == .unknown)
        #expect(types["sub"] == .directory || types["sub"] == .unknown)
        #expect(scanner.skipped == 2)
        #expect(try scanner.next() == nil)
    }

    @Test func allFilterKeepsEverythingButDotAndDotDot() throws {
        let t = try TempSpool()
        try t.write(t.layout.processing, ".x", "")
        try t.write(t.layout.processing, "y.tmp", "")
        let spool = try Spool(layout: t.layout, maxFileBytes: 10)
        #expect(try spool.processingNames().sorted() == [".x", "y.tmp"])
    }

    @Test func streams200kFilesInBoundedBatches() throws {
        let t = try TempSpool(inMemory: true)
        let count = 200_000
        let dirfd = try Posix.openDirectory(t.layout.incoming)
        defer { Posix.close(dirfd) }
        for i in 0..<count {
            let fd = try Posix.openat(dirfd, "\(i).json", O_WRONLY | O_CREAT | O_EXCL, mode: 0o600)
            Posix.close(fd)
        }
        var seen = [Bool](repeating: false, count: count)
        var total = 0
        let scanner = try DirectoryScanner(directoryFD: dirfd, path: t.layout.incoming, batchSize: 1024)
        try scanner.forEachBatch { (batch) throws(SpoolError) in
            for entry in batch {
                guard let index = Int(entry.name.dropLast(5)), index < count, !seen[index] else {
                    Issue.record("unexpected or repeated \(entry.name)")
                    continue
                }
                seen[index] = true
                total += 1
            }
        }
        #expect(total == count)
        #expect(scanner.largestBatch == 1024)
        #expect(scanner.largestBatch <= scanner.batchSize)
        // Removing 200k files with FileManager takes a while; do it with unlinkat here.
        for i in 0..<count { try Posix.unlinkat(dirfd, "\(i).json") }
    }

    @Test func scansStartAtTheBeginningEvenOnASharedDirectoryFD() throws {
        let t = try TempSpool()
        for i in 0..<10 { try t.write(t.layout.incoming, "\(i).json", "") }
        let spool = try Spool(layout: t.layout, maxFileBytes: 10)
        let first = try spool.scanIncoming(batchSize: 3)
        _ = try first.next()
        let second = try spool.scanIncoming(batchSize: 100)
        #expect(try second.next()?.count == 10)
    }

    @Test func nonUTF8NamesAreRenamedToAnEscapedClaimableName() throws {
        let t = try TempSpool()
        let raw: [UInt8] = Array("caf".utf8) + [0xE9] + Array(".json".utf8)  // Latin-1 "café.json"
        let path = Array(t.layout.incoming.utf8) + [UInt8(ascii: "/")] + raw
        let cPath = path.map { CChar(bitPattern: $0) } + [0]
        let fd = Glibc.open(cPath, O_WRONLY | O_CREAT, 0o600)
        #expect(fd >= 0)
        close(fd)
        let spool = try Spool(layout: t.layout, maxFileBytes: 10)
        let scan = try spool.scanIncoming()
        let names = try #require(try scan.next()).map(\.name)
        #expect(names == ["caf%E9.json"])
        #expect(try spool.claim("caf%E9.json"))
    }

    @Test func nonUTF8NamesInProcessingAreRepairedForRecovery() throws {
        let t = try TempSpool()
        let path = Array(t.layout.processing.utf8) + Array("/p".utf8) + [0xFE]
        let fd = Glibc.open(path.map { CChar(bitPattern: $0) } + [0], O_WRONLY | O_CREAT, 0o600)
        #expect(fd >= 0)
        close(fd)
        let spool = try Spool(layout: t.layout, maxFileBytes: 10)
        #expect(try spool.processingNames() == ["p%FE"])
        guard case .contents = try spool.read(processing: "p%FE") else {
            Issue.record("cannot read the repaired name")
            return
        }
    }
}

@Suite struct NameTests {
    @Test(arguments: ["", ".", "..", "a/b", "../etc/passwd", String(repeating: "x", count: 256), "nul\u{0}byte"])
    func invalidNamesAreRefused(_ name: String) {
        #expect(throws: SpoolError.self) { try SpoolName.validate(name) }
    }

    @Test(arguments: [".hidden", "partial.tmp"])
    func ignoredNamesAreRefusedForDrops(_ name: String) throws {
        try SpoolName.validate(name)
        #expect(throws: SpoolError.self) { try SpoolName.validateForIncoming(name) }
    }

    @Test func escapeKeepsValidUTF8AndEscapesBadBytes() {
        #expect(SpoolName.escape(raw: Array("ok-ü.json".utf8)) == "ok-ü.json")
        #expect(SpoolName.escape(raw: [0x61, 0xFF, 0xFE, 0x62]) == "a%FF%FEb")
        #expect(SpoolName.escape(raw: [0x61] + Array("ü".utf8) + [0xC3]) == "aü%C3")
    }

    @Test func candidatesFitNameMax() {
        let long = String(repeating: "é", count: 200)  // 400 bytes
        let candidate = SpoolName.candidate(long, attempt: 12, reserve: 12)
        #expect(candidate.utf8.count <= 255 - 12)
        #expect(candidate.hasSuffix("~12"))
    }

    @Test func uniqueNamesAreMaildirShapedAndDistinct() {
        let a = UniqueName.next(suffix: ".json")
        let b = UniqueName.next(suffix: ".json")
        #expect(a != b)
        #expect(a.wholeMatch(of: /\d{13}\.\d+_\d+\..+\.json/) != nil, "\(a)")
        #expect(!a.dropLast(5).contains("/"))
    }
}
