import Foundation
import Testing
@testable import PushPayload

/// A row of the table in spool-examples/README.md.
struct ExampleRow: Sendable, CustomTestStringConvertible {
    var file: String
    /// `accepted <vendor>/<format>`, `event <type>` or `refused <code>`.
    var expected: String
    var warnings: [String]
    var testDescription: String { file }
}

let examplesDirectory = repositoryRoot + "/spool-examples"

/// Rows are `| `file` | expected | `w1`, `w2` or — | description |`.
let exampleRows: [ExampleRow] = {
    guard let readme = try? String(contentsOfFile: examplesDirectory + "/README.md", encoding: .utf8) else { return [] }
    return readme.split(separator: "\n").compactMap { line -> ExampleRow? in
        let cells = line.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        guard cells.count >= 5, cells[1].hasPrefix("`"), cells[1].hasSuffix(".json`") else { return nil }
        let warnings = cells[3] == "—" ? [] : cells[3].components(separatedBy: ", ").map { $0.trimmingCharacters(in: CharacterSet(charactersIn: "`")) }
        return ExampleRow(file: cells[1].trimmingCharacters(in: CharacterSet(charactersIn: "`")), expected: cells[2], warnings: warnings)
    }
}()

func outcomeSummary(_ outcome: IntakeOutcome) -> (String, [String]) {
    switch outcome {
    case .notification(let n): ("accepted \(n.vendor.rawValue)/\(n.format)", n.warnings.map(\.description))
    case .event(let e): ("event \(e.type.rawValue)", [])
    case .erasure: ("erasure", [])
    case .refused(let r): ("refused \(r.code.rawValue)", [])
    }
}

@Suite struct ExamplesTests {
    @Test(arguments: exampleRows)
    func exampleMatchesTheTable(_ row: ExampleRow) throws {
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: examplesDirectory + "/" + row.file)))
        let (expected, warnings) = outcomeSummary(Normalizer.classify(bytes, options: NormalizerOptions()))
        #expect(expected == row.expected)
        #expect(warnings == row.warnings)
    }

    @Test func everyExampleHasARowAndTheSetIsBigEnough() throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: examplesDirectory).filter { $0.hasSuffix(".json") }
        #expect(Set(files) == Set(exampleRows.map(\.file)))
        #expect(files.count >= 25)
    }

    @Test func examplesCoverEveryVendorFormatAndManyCodes() {
        let accepted = Set(exampleRows.map(\.expected).filter { $0.hasPrefix("accepted") })
        for format in ["mindbox/mindbox-ios", "mindbox/mindbox-ios-legacy", "mindbox/mindbox-android", "mindbox/mindbox-android-converted",
                       "infobip/infobip-ios", "infobip/infobip-android", "sfmc/sfmc-ios", "sfmc/sfmc-android", "apns/apns", "fcm/fcm"] {
            #expect(accepted.contains("accepted \(format)"), "no example for \(format)")
        }
        let refused = Set(exampleRows.map(\.expected).filter { $0.hasPrefix("refused") })
        #expect(refused.count >= 12)
        #expect(refused.contains("refused invalid_event"))
        let events = Set(exampleRows.map(\.expected).filter { $0.hasPrefix("event ") })
        #expect(events == Set(EventType.allCases.map { "event \($0.rawValue)" }), "one example per event type")
    }
}
