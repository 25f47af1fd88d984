import Foundation
import Testing
@testable import PushMedia
import PushSystem
import TestSupport

/// https against `openssl s_server -WWW` on 127.0.0.1 with a certificate made for the test.
@Suite struct TLSTests {
    /// A TLS file server serving `dir/www`, with a fresh self-signed certificate for 127.0.0.1.
    final class TLSServer {
        let process = Process()
        let port: Int
        let certificate: String

        init(_ dir: TempDir, files: [String: [UInt8]]) throws {
            let www = dir.path + "/www"
            try Posix.mkdirs(www)
            for (name, bytes) in files { try Posix.writeFileAtomically(directory: www, name: name, bytes: bytes) }
            let made = try TLSServer.makeCertificate(dir, name: "server")
            certificate = made.0
            let key = made.key
            port = closedPort()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
            process.arguments = ["s_server", "-quiet", "-accept", "127.0.0.1:\(port)", "-cert", certificate, "-key", key, "-WWW"]
            process.currentDirectoryURL = URL(fileURLWithPath: www)
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            process.standardInput = Pipe()
            try process.run()
            let start = Posix.monotonicNanos()
            while !TLSServer.accepting(port) {
                guard elapsedSeconds(since: start) < 5 else { throw WaitTimeout() }
                usleep(20_000)
            }
        }

        deinit {
            // s_server ignores SIGTERM.
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }

        /// A self-signed certificate for 127.0.0.1 and its key.
        static func makeCertificate(_ dir: TempDir, name: String) throws -> (String, key: String) {
            let certificate = dir.path + "/\(name).pem"
            let key = dir.path + "/\(name).key"
            let request = Process()
            request.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
            request.arguments = ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                                 "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-days", "1",
                                 "-keyout", key, "-out", certificate]
            request.standardError = FileHandle.nullDevice
            try request.run()
            request.waitUntilExit()
            return (certificate, key)
        }

        func url(_ name: String) -> String { "https://127.0.0.1:\(port)/\(name)" }

        static func accepting(_ port: Int) -> Bool {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(fd) }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = UInt16(port).bigEndian
            inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
            return withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            } == 0
        }
    }

    @Test func httpsWithTrustedCertificateStores() async throws {
        let dir = TempDir()
        let server = try TLSServer(dir, files: ["a.jpg": Fixtures.jpeg])
        var options = testOptions(dir)
        options.allowHTTP = false
        options.caFile = server.certificate
        let fetcher = try MediaFetcher(options: options)
        defer { fetcher.shutdown() }

        let outcome = await fetcher.fetch(url: server.url("a.jpg"))
        #expect(outcome.status == .stored, "\(outcome.encodeJSON())")
        #expect(outcome.sha256 == SHA256.hex(of: Fixtures.jpeg))
    }

    @Test func untrustedCertificateFailsWithoutRetry() async throws {
        let dir = TempDir()
        let server = try TLSServer(dir, files: ["a.jpg": Fixtures.jpeg])
        var options = testOptions(dir)
        options.allowHTTP = false
        // A valid certificate, but not the one the server presents.
        options.caFile = try TLSServer.makeCertificate(dir, name: "other").0
        let fetcher = try MediaFetcher(options: options)
        defer { fetcher.shutdown() }

        let outcome = await fetcher.fetch(url: server.url("a.jpg"))
        #expect(outcome.error?.code == .tls, "\(outcome.encodeJSON())")
        #expect(outcome.error?.curlCode == 60) // CURLE_PEER_FAILED_VERIFICATION
        #expect(outcome.attempts == 1)
    }
}
