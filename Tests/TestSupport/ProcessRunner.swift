import Foundation

/// What a finished child process left behind.
package struct ProcessResult: Sendable {
    package var status: Int32
    package var stdout: String
    package var stderr: String
}

/// Runs the package's built executables from tests (the CLI, the daemon's ctl), the way an
/// operator would: a real process, real pipes, real exit status.
package enum ProcessRunner {
    /// The directory holding the built products: the test runner sits next to them
    /// (`<bin>/pushspoolPackageTests.xctest`, possibly a bundle directory).
    package static let binDirectory: String = {
        if let dir = ProcessInfo.processInfo.environment["PUSHSPOOL_BIN_DIR"] { return dir }
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        var dir = URL(fileURLWithPath: exe).deletingLastPathComponent()
        if dir.lastPathComponent.hasSuffix(".xctest") { dir.deleteLastPathComponent() }
        return dir.path
    }()

    /// The path of the built product `name`.
    package static func executable(_ name: String) -> String { binDirectory + "/" + name }

    /// Runs `executable` with `arguments`, feeding `stdin`, and waits for it.
    package static func run(_ executable: String, _ arguments: [String], stdin: [UInt8]? = nil,
                            currentDirectory: String? = nil) throws -> ProcessResult {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let currentDirectory { process.currentDirectoryURL = URL(fileURLWithPath: currentDirectory) }
        let out = Pipe(), err = Pipe(), input = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = input
        try process.run()
        if let stdin { input.fileHandleForWriting.write(Data(stdin)) }
        try input.fileHandleForWriting.close()
        // Read both pipes to their end before waiting, so a chatty child cannot block on a full pipe.
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        let errData = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return ProcessResult(status: process.terminationStatus, stdout: String(decoding: outData, as: UTF8.self),
                             stderr: String(decoding: errData, as: UTF8.self))
    }
}
