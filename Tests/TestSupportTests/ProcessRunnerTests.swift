@preconcurrency import Glibc
import Foundation
import Testing
import PushSystem
import TestSupport

@Suite struct ProcessRunnerTests {
    /// A child that fills the stderr pipe (64 KiB) before it writes stdout used to block for
    /// ever: the runner read stdout to its end first. The run is bounded here, not with
    /// timeout(1): children of the test process inherit a mask that blocks SIGALRM and
    /// SIGTERM. The child is one shell process (builtins only) that writes its pid first, so
    /// SIGKILL ends it and closes its pipes, and a regression fails instead of hanging.
    @Test func chattyStderrDoesNotDeadlock() throws {
        let dir = TempDir()
        let pidFile = dir.appending("pid")
        let script = """
            echo $$ >"$0"
            kib=$(printf '%01024d' 0)
            i=0; while [ $i -lt 1024 ]; do printf %s "$kib" >&2; i=$((i + 1)); done
            printf out
            i=0; while [ $i -lt 70 ]; do printf %s "$kib" >&2; i=$((i + 1)); done
            """
        let outcome = Locked<Result<ProcessResult, any Error>?>(nil)
        let finished = DispatchSemaphore(value: 0)
        Thread {
            let result = Result { try ProcessRunner.run("/bin/sh", ["-c", script, pidFile]) }
            outcome.withLock { $0 = result }
            finished.signal()
        }.start()
        if finished.wait(timeout: .now() + 60) == .timedOut {
            Issue.record("ProcessRunner still waiting after 60 s on a child that fills stderr")
            let text = (try? String(contentsOfFile: pidFile, encoding: .utf8)) ?? ""
            if let pid = Int32(text.filter(\.isNumber)), pid > 1 { kill(pid, SIGKILL) }
            finished.wait()
        }
        let result = try #require(outcome.withLock { $0 }).get()
        #expect(result.status == 0)
        #expect(result.stdout == "out")
        #expect(result.stderr.utf8.count == (1024 + 70) * 1024)
        #expect(result.stderr.utf8.allSatisfy { $0 == UInt8(ascii: "0") })
    }

    /// A child that writes a full pipe of output before it reads its input: stdin is fed
    /// from a thread of its own, so neither side waits on the other.
    @Test func largeStdinWhileTheChildWrites() throws {
        let input = [UInt8](repeating: UInt8(ascii: "i"), count: 1 << 20)
        let script = "head -c 200000 /dev/zero >&2; head -c 200000 /dev/zero; wc -c"
        let result = try ProcessRunner.run("/bin/sh", ["-c", script], stdin: input)
        #expect(result.status == 0)
        #expect(result.stderr.utf8.count == 200_000)
        #expect(result.stdout.utf8.count == 200_000 + "1048576\n".utf8.count)
        #expect(result.stdout.utf8.suffix(8).elementsEqual("1048576\n".utf8))
    }

    @Test func exitStatusAndNoInput() throws {
        let result = try ProcessRunner.run("/bin/sh", ["-c", "cat; exit 3"])
        #expect(result.status == 3)
        #expect(result.stdout.isEmpty)
        #expect(result.stderr.isEmpty)
    }
}

@Suite struct TempDirTests {
    @Test func ownsAFreshDirectoryAndRemovesIt() throws {
        var path = ""
        do {
            let a = TempDir(), b = TempDir()
            #expect(a.path != b.path)
            path = a.path
            #expect(try FileManager.default.contentsOfDirectory(atPath: path).isEmpty)
            try FileManager.default.createDirectory(atPath: a.appending("x/y"), withIntermediateDirectories: true)
            #expect(FileManager.default.createFile(atPath: a.appending("x/y/z"), contents: Data([1])))
            #expect(a.path.contains("ownsAFreshDirectoryAndRemovesIt"))
        }
        #expect(!FileManager.default.fileExists(atPath: path))
    }
}

@Suite struct NotifySocketTests {
    /// Sends like `sd_notify` does: one datagram to the socket path.
    private func send(_ text: String, to path: String) throws {
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        try #require(fd >= 0)
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8) + [0]) }
        let bytes = Array(text.utf8)
        let sent = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                sendto(fd, bytes, bytes.count, 0, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        #expect(sent == bytes.count)
    }

    /// More datagrams than the kernel queues (`max_dgram_qlen`, often 10) all arrive, in
    /// order, because a thread drains the socket; `receive` hands each out once.
    @Test func keepsEveryDatagramInOrder() throws {
        let socket = try NotifySocket()
        let sent = (1...50).map { "STATUS=\($0)" }
        for message in sent { try send(message, to: socket.path) }
        #expect(socket.receive() == "STATUS=1")
        #expect(socket.drain() == Array(sent.dropFirst()))
        #expect(socket.messages == sent)
        #expect(socket.receive(timeout: .milliseconds(20)) == nil)
    }
}

extension ProcessRunnerTests {
    /// A child that exits without reading its input: the write fails with EPIPE on the
    /// feeding thread instead of SIGPIPE ending the whole test process.
    @Test func childIgnoringItsInput() throws {
        let input = [UInt8](repeating: 0, count: 4 << 20)
        let result = try ProcessRunner.run("/bin/sh", ["-c", "echo gone"], stdin: input)
        #expect(result.status == 0)
        #expect(result.stdout == "gone\n")
    }
}
