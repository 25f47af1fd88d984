@preconcurrency import Glibc
import Foundation
import PushSystem

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
    ///
    /// stdin is written and stderr read on threads of their own while this thread reads
    /// stdout: a pipe holds 64 KiB, so a child that fills one pipe while the runner waits on
    /// another (or reads its input only after writing output) would otherwise block for ever.
    /// `environment`: the child's whole environment; `nil` = this process's.
    package static func run(_ executable: String, _ arguments: [String], stdin: [UInt8]? = nil,
                            currentDirectory: String? = nil, environment: [String: String]? = nil) throws -> ProcessResult {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment { process.environment = environment }
        if let currentDirectory { process.currentDirectoryURL = URL(fileURLWithPath: currentDirectory) }
        let out = Pipe(), err = Pipe(), input = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = input
        try process.run()
        let writer = input.fileHandleForWriting
        let inputDone = background {
            // A child may exit without reading its input. SIGPIPE from a write is sent to the
            // writing thread: blocked here, the write fails with EPIPE instead of killing the
            // test process, and the pending signal goes away with the thread.
            var pipeSignal = sigset_t()
            sigemptyset(&pipeSignal)
            sigaddset(&pipeSignal, SIGPIPE)
            pthread_sigmask(SIG_BLOCK, &pipeSignal, nil)
            if let stdin { try? writer.write(contentsOf: stdin) }
            try? writer.close()
        }
        let errReader = err.fileHandleForReading
        let errData = Locked(Data())
        let errDone = background { errData.withLock { $0 = errReader.readDataToEndOfFile() } }
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        errDone.wait()
        inputDone.wait()
        process.waitUntilExit()
        return ProcessResult(status: process.terminationStatus, stdout: String(decoding: outData, as: UTF8.self),
                             stderr: String(decoding: errData.withLock { $0 }, as: UTF8.self))
    }

    /// Runs `body` on a new thread; the semaphore is signalled when it returns.
    private static func background(_ body: @escaping @Sendable () -> Void) -> DispatchSemaphore {
        let done = DispatchSemaphore(value: 0)
        Thread {
            body()
            done.signal()
        }.start()
        return done
    }
}
