@preconcurrency import Glibc
import Foundation
import PushSystem

/// `openssl s_server -WWW` on 127.0.0.1 serving `files` from `dir/www`, with a fresh
/// self-signed certificate for 127.0.0.1: a real TLS peer for the https tests of the media
/// fetcher and of the fetcher process under its seccomp filter.
package final class TLSFileServer {
    private let process = Process()
    package let port: Int
    /// The server's certificate, usable as a CA file that trusts it.
    package let certificate: String

    package init(_ dir: TempDir, files: [String: [UInt8]]) throws {
        let www = dir.path + "/www"
        try Posix.mkdirs(www)
        for (name, bytes) in files { try Posix.writeFileAtomically(directory: www, name: name, bytes: bytes) }
        let made = try Self.makeCertificate(dir, name: "server")
        certificate = made.0
        port = closedLoopbackPort()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = ["s_server", "-quiet", "-accept", "127.0.0.1:\(port)", "-cert", certificate, "-key", made.key, "-WWW"]
        process.currentDirectoryURL = URL(fileURLWithPath: www)
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        process.standardInput = Pipe()
        try process.run()
        guard eventually(within: 5, { Self.accepting(port) }) else { throw TLSFileServerError.notAccepting(port: port) }
    }

    deinit {
        // s_server ignores SIGTERM.
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    package func url(_ name: String) -> String { "https://127.0.0.1:\(port)/\(name)" }

    /// A self-signed certificate for 127.0.0.1 and its key.
    package static func makeCertificate(_ dir: TempDir, name: String) throws -> (String, key: String) {
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

    static func accepting(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(clamping: port).bigEndian
        inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } == 0
    }
}

package enum TLSFileServerError: Error, CustomStringConvertible {
    case notAccepting(port: Int)

    package var description: String {
        switch self {
        case .notAccepting(let port): "openssl s_server did not accept on 127.0.0.1:\(port) within 5 s"
        }
    }
}

/// A port on 127.0.0.1 that nothing listens on (bound, then closed): free a moment ago, for
/// a server that cannot report the port it bound, or for a refused connection.
package func closedLoopbackPort() -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
    _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
    return Int(UInt16(bigEndian: address.sin_port))
}
