import Foundation
import Testing
import PushSystem
@testable import PushConfig

/// Walks every key of the schema: each one is documented, refuses what it must with its name
/// in the error, and its largest value converts without trapping. A key added to the schema
/// is covered by these tests without touching them.
@Suite struct SchemaWalkTests {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()
    static var allPaths: [String] { Schema.keys.map(\.path) }
    static var boundedPaths: [String] { Schema.keys.filter { $0.bounds != nil }.map(\.path) }
    static var durationAndSizePaths: [String] {
        Schema.keys.filter {
            switch $0.bounds {
            case .duration?, .size?: true
            default: false
            }
        }.map(\.path)
    }

    /// Applies one assignment the way a file line is applied (no cross-key checks), so each
    /// key's own range is what is tested.
    static func apply(_ path: String, _ value: String, to configuration: inout Configuration) throws(ConfigError) {
        let spec = Schema.byPath[path]!
        var builder = ConfigurationLoader.Builder()
        builder.configuration = configuration
        try builder.apply(section: spec.section, key: spec.key, value: value, source: .file(path: "test.conf", line: 7))
        configuration = builder.configuration
    }

    static func refusal(_ path: String, _ value: String) -> ConfigError? {
        var configuration = Configuration()
        do {
            try apply(path, value, to: &configuration)
            return nil
        } catch {
            return error
        }
    }

    @Test(arguments: boundedPaths)
    func maximumIsAcceptedAndRendersBack(path: String) throws {
        let spec = try #require(Schema.byPath[path])
        let bounds = try #require(spec.bounds)
        var configuration = Configuration()
        try Self.apply(path, bounds.maximumText, to: &configuration)
        #expect(spec.render(configuration) == [bounds.maximumText])
    }

    /// One step past the maximum and the value that crashed the daemon are both refused,
    /// and the error names the key, the value and the allowed range.
    @Test(arguments: boundedPaths)
    func pastTheMaximumIsRefusedNamingKeyValueAndRange(path: String) throws {
        let spec = try #require(Schema.byPath[path])
        let bounds = try #require(spec.bounds)
        for value in [bounds.beyondMaximumText, "99999999999"] {
            let error = try #require(Self.refusal(path, value), "\(path)=\(value) was accepted")
            #expect(error.section == spec.section)
            #expect(error.key == spec.key)
            #expect(error.line == 7)
            #expect(error.message.contains("'\(value)'"), "\(error)")
            #expect(error.message.contains(bounds.rangeText), "\(error)")
            #expect(error.description.contains("[\(spec.section)] \(spec.key): "))
            if case .integer = bounds {} else {
                // Durations and sizes, too large to parse or past the range, say it one way.
                #expect(error.message == "must be from \(bounds.rangeText), got '\(value)'")
            }
        }
    }

    /// Every key, bounded or not, refuses its invalid example with its own name.
    @Test(arguments: allPaths)
    func invalidValueIsRefusedNamingTheKey(path: String) throws {
        let spec = try #require(Schema.byPath[path])
        let error = try #require(Self.refusal(path, spec.invalidExample), "\(path)=\(spec.invalidExample) was accepted")
        #expect(error.key == spec.key)
        #expect(error.section == spec.section)
        #expect(error.message.contains(spec.invalidExample), "\(error)")
    }

    /// Property: every key's maximum, and all maxima at once, convert to the numbers the
    /// daemon and C APIs use without trapping or overflowing: nanoseconds that can still be
    /// added to a monotonic clock reading, milliseconds for `long` options, seconds times
    /// 1e9 (the transitional conversions in Daemon.swift and PushMedia), `Int64` byte counts.
    @Test(arguments: allPaths)
    func maximumConvertsWithoutTrapping(path: String) throws {
        let spec = try #require(Schema.byPath[path])
        var configuration = Configuration()
        if let bounds = spec.bounds {
            try Self.apply(path, bounds.maximumText, to: &configuration)
        }
        Self.expectConvertible(configuration)
    }

    @Test func allMaximaAtOnceConvertWithoutTrapping() throws {
        var configuration = Configuration()
        for path in Self.boundedPaths {
            try Self.apply(path, Schema.byPath[path]!.bounds!.maximumText, to: &configuration)
        }
        Self.expectConvertible(configuration)
    }

    static func expectConvertible(_ configuration: Configuration) {
        let durations: [Duration] = [
            configuration.spool.rescanInterval, configuration.spool.stableAge, configuration.journal.maxBatchDelay,
            configuration.journal.checkpointInterval, configuration.media.connectTimeout, configuration.media.transferTimeout,
            configuration.media.lowSpeedTime, configuration.media.payloadDeadline, configuration.media.dedupWindow,
            configuration.metrics.interval, configuration.status.interval,
        ]
        for duration in durations {
            #expect(duration >= .zero)
            let nanos = duration.clampedNanoseconds
            // Not saturated: the value is exact, and a clock reading (< 2^62 ns, 146 years of
            // uptime) plus it still fits UInt64 and Int64.
            #expect(nanos < Int64.max / 2)
            #expect(Duration.nanoseconds(nanos) == duration)
            #expect(Int32(exactly: duration.clampedMilliseconds / 1000) != nil)
            #expect(duration.secondsValue * 1e9 < Double(Int64.max / 2))
            #expect(duration.secondsValue * 1000 < Double(Int32.max) * 1000)
        }
        let sizes = [configuration.spool.maxFileBytes, configuration.journal.segmentBytes, configuration.media.lowSpeedLimitBytes,
                     configuration.media.maxBytes, configuration.limits.maxPayloadBytes]
        for size in sizes {
            #expect(size >= 0)
            #expect(Int64(exactly: size) != nil)
            // Room to add a record or a header to it without overflow.
            #expect(size <= 16 << 30)
        }
        let integers = [configuration.journal.maxBatchRecords, configuration.media.maxRedirects, configuration.media.maxConcurrent,
                        configuration.media.maxWaiting, configuration.media.attempts, configuration.media.thumbnailMaxEdge,
                        configuration.media.thumbnailMaxPixels, configuration.limits.maxDepth, configuration.log.maxEventsPerSecond]
        for integer in integers {
            // Every integer fits a C int, whatever API it ends up in.
            #expect(Int32(exactly: integer) != nil)
        }
    }

    // MARK: - Documentation

    /// The reference rows of docs/configuration.md: `| `[Section] Key=` | default | range | reload | meaning |`.
    static func referenceRows() throws -> [String: [String]] {
        let text = try String(contentsOf: packageRoot.appendingPathComponent("docs/configuration.md"), encoding: .utf8)
        var rows: [String: [String]] = [:]
        for line in text.split(separator: "\n") where line.hasPrefix("| `[") {
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).dropFirst().dropLast()
                .map { $0.trimmingCharacters(in: .whitespaces) }
            guard let first = cells.first, first.hasPrefix("`["), first.hasSuffix("=`"),
                  let close = first.firstIndex(of: "]") else { continue }
            let section = String(first[first.index(first.startIndex, offsetBy: 2)..<close])
            let key = String(first[first.index(after: close)...].dropLast(2)).trimmingCharacters(in: .whitespaces)
            rows["\(section).\(key)"] = Array(cells)
        }
        return rows
    }

    @Test func configurationReferenceListsExactlyTheSchemaKeys() throws {
        let rows = try Self.referenceRows()
        #expect(Set(rows.keys) == Set(Self.allPaths), "docs/configuration.md keys differ from the schema")
    }

    /// Each key's row in docs/configuration.md gives its default as `config show` prints it, its range as the
    /// error message says it, and whether a reload applies it.
    @Test(arguments: allPaths)
    func configurationReferenceDocumentsTheKey(path: String) throws {
        let spec = try #require(Schema.byPath[path])
        let row = try #require(try Self.referenceRows()[path], "\(path) is missing from docs/configuration.md")
        try #require(row.count == 5, "\(path): expected 5 cells, got \(row)")
        let rendered = spec.render(Configuration()).joined(separator: " ")
        #expect(row[1] == (rendered.isEmpty ? "empty" : "`\(rendered)`"), "\(path) default")
        if let bounds = spec.bounds {
            #expect(row[2] == bounds.rangeText, "\(path) range")
        }
        #expect(row[3] == (Schema.restartRequired.contains(path) ? "restart" : "reload"), "\(path) reload")
        #expect(!row[4].isEmpty)
    }

    /// Each key appears in the shipped default file, commented out, in its own section.
    @Test(arguments: allPaths)
    func shippedFileDocumentsTheKey(path: String) throws {
        let spec = try #require(Schema.byPath[path])
        let text = try String(contentsOf: Self.packageRoot.appendingPathComponent("packaging/pushspool.conf"), encoding: .utf8)
        var section = ""
        var found = false
        for line in text.split(separator: "\n") {
            if line.hasPrefix("[") { section = String(line.dropFirst().prefix { $0 != "]" }) }
            if section == spec.section, line.hasPrefix("#\(spec.key)=") { found = true }
        }
        #expect(found, "#\(spec.key)= is missing from [\(spec.section)] in packaging/pushspool.conf")
    }

    @Test func restartRequiredNamesOnlySchemaKeys() {
        #expect(Schema.restartRequired.isSubset(of: Set(Self.allPaths)))
        // Held by objects made once at start: reporting them as applied on SIGHUP was a lie.
        for path in ["Log.Identifier", "Log.MaxEventsPerSec", "Status.IntervalSec"] {
            #expect(Schema.restartRequired.contains(path), "\(path)")
        }
        // The spool reads its limit per file, so a reload applies it (the daemon sets it).
        #expect(!Schema.restartRequired.contains("Spool.MaxFileSize"))
    }
}

/// An explicit configuration path that does not exist is an error; only the default may be absent.
@Suite struct ExplicitConfigFileTests {
    @Test func missingExplicitMainFileIsAnErrorNamingIt() throws {
        let dir = try ConfigDirectory()
        do {
            _ = try ConfigurationLoader.load(mainFile: dir.main, mainFileRequired: true)
            Issue.record("a missing explicit file loaded as defaults")
        } catch {
            #expect(error.file == dir.main)
            #expect(error.message.contains("no such file"))
        }
        #expect(throws: ConfigError.self) { try ConfigurationStore(mainFile: dir.main, mainFileRequired: true) }
    }

    @Test func missingNonExplicitMainFileMeansDefaults() throws {
        let dir = try ConfigDirectory()
        #expect(try ConfigurationLoader.load(mainFile: dir.main, mainFileRequired: false).0 == Configuration())
    }

    @Test func existingExplicitMainFileLoads() throws {
        let dir = try ConfigDirectory()
        try dir.write("pushspool.conf", "[Limits]\nMaxDepth=9\n")
        #expect(try ConfigurationLoader.load(mainFile: dir.main, mainFileRequired: true).0.limits.maxDepth == 9)
    }

    /// An explicit file removed while the daemon runs: the reload is refused, the running
    /// configuration stays.
    @Test func reloadOfARemovedExplicitFileIsRejected() throws {
        let dir = try ConfigDirectory()
        try dir.write("pushspool.conf", "[Limits]\nMaxDepth=9\n")
        let store = try ConfigurationStore(mainFile: dir.main, mainFileRequired: true)
        try FileManager.default.removeItem(atPath: dir.main)
        guard case .rejected(let error) = store.reload() else {
            Issue.record("a removed explicit file reloaded as defaults")
            return
        }
        #expect(error.file == dir.main)
        #expect(store.current.limits.maxDepth == 9)
    }

    /// The SIGHUP half of the crash: a reload with a huge duration is refused, not applied
    /// (the daemon then died converting it).
    @Test(arguments: ["[Spool]\nRescanIntervalSec=99999999999\n", "[Metrics]\nIntervalSec=99999999999\n",
                      "[Media]\nDedupWindowSec=99999999999\n", "[Media]\nPayloadDeadlineSec=99999999999\n"])
    func reloadWithAHugeDurationIsRejected(text: String) throws {
        let dir = try ConfigDirectory()
        try dir.write("pushspool.conf", "")
        let store = try ConfigurationStore(mainFile: dir.main, mainFileRequired: true)
        try dir.write("pushspool.conf", text)
        guard case .rejected(let error) = store.reload() else {
            Issue.record("reload accepted \(text)")
            return
        }
        #expect(error.line == 2)
        #expect(error.message.contains("99999999999"))
        #expect(store.current == Configuration())
    }
}
