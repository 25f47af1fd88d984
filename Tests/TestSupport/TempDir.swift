@preconcurrency import Glibc
import Foundation

/// A directory owned by one test, created empty under the temporary directory and removed
/// with everything in it when the object goes away. Tests run in parallel in one process, so
/// each gets a fresh name from `mkdtemp(3)` (no guessing, no collision).
///
/// `Sendable`: it holds only its immutable path.
package final class TempDir: Sendable {
    package let path: String

    /// `label` only makes the name readable when a test leaves something behind (the
    /// calling function by default).
    package init(_ label: String = #function) {
        let clean = String(label.filter { $0.isASCII && ($0.isLetter || $0.isNumber) }.prefix(40))
        let base = FileManager.default.temporaryDirectory.path
        var template = Array("\(base)/pushspool-\(clean)-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(made != nil, "mkdtemp in \(base) failed: errno \(errno)")
        path = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }

    /// `path/name`.
    package func appending(_ name: String) -> String { path + "/" + name }
}
