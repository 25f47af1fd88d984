import Foundation
import PushFuzzTargets
import Testing

/// Replays every input the fuzzers ever crashed on (FuzzRegressions/<target>/) and every seed
/// (Fuzz/corpus/<target>/) through the same target code the libFuzzer binary runs, so a fixed
/// bug stays fixed under plain `swift test`, without the fuzz build.
@Suite struct FuzzRegressionTests {
    static let testsDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().path
    static let regressions = testsDirectory + "/FuzzRegressions"
    static let corpus = URL(fileURLWithPath: testsDirectory).deletingLastPathComponent().deletingLastPathComponent().path + "/Fuzz/corpus"

    static func inputs(_ directory: String) -> [(target: String, file: String)] {
        FuzzTargets.names.flatMap { target in
            let dir = directory + "/" + target
            let names = (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []
            return names.filter { !$0.hasPrefix(".") }.sorted().map { (target, dir + "/" + $0) }
        }
    }

    @Test func everySavedCrashPasses() throws {
        let cases = Self.inputs(Self.regressions)
        // A wrong path would make this replay pass on nothing.
        #expect(!cases.isEmpty, "no regression inputs under \(Self.regressions)")
        for (target, file) in cases {
            let bytes = try #require(FileManager.default.contents(atPath: file), "\(file)")
            #expect(throws: Never.self, "\(file)") { try FuzzTargets.run(target, Array(bytes)) }
        }
    }

    @Test func everySeedPasses() throws {
        let cases = Self.inputs(Self.corpus)
        #expect(cases.count >= 60, "the seed corpora are missing: \(Self.corpus)")
        for (target, file) in cases {
            let bytes = try #require(FileManager.default.contents(atPath: file), "\(file)")
            #expect(throws: Never.self, "\(file)") { try FuzzTargets.run(target, Array(bytes)) }
        }
    }

    @Test func anUnknownTargetIsRefused() {
        #expect(throws: FuzzFailure.self) { try FuzzTargets.run("no-such-target", []) }
    }
}
