@preconcurrency import Glibc
import Foundation

/// A real `nats-server` (Debian's /usr/sbin/nats-server) with JetStream on 127.0.0.1, started
/// and stopped by a test or the benchmark, storing into a directory the caller owns; with
/// `tls`, clients must speak TLS and present a certificate the given CA signed; with
/// `accounts`, they must log in as a user of those accounts (a `.creds` file).
///
/// Not `Sendable`: one test drives it.
package final class NatsServer {
    package static let executable = "/usr/sbin/nats-server"

    /// Mutual TLS on the client port (`tls { ... verify: true }`): the certificate and key the
    /// server presents and the CA client certificates must chain to.
    package struct TLS: Sendable {
        package var certificate: String
        package var key: String
        package var ca: String
        package init(certificate: String, key: String, ca: String) {
            self.certificate = certificate
            self.key = key
            self.ca = ca
        }
    }

    package let name: String
    package let port: Int
    package let clusterPort: Int?
    package let storeDirectory: String
    /// Route URLs of the other cluster members (empty = single node).
    package var routes: [String]
    package let tls: TLS?
    package let accounts: NatsOperator?
    private var process: Process?
    private let logFile: String

    package var url: String { (tls == nil ? "nats" : "tls") + "://127.0.0.1:\(port)" }
    package var routeURL: String? { clusterPort.map { "nats://127.0.0.1:\($0)" } }
    package var isRunning: Bool { process?.isRunning ?? false }
    package var log: String { (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? "" }

    /// `clustered`: also listens for cluster routes on a port of its own (see ``cluster(count:in:)``).
    package init(name: String = "n1", storeDirectory: String, clustered: Bool = false, tls: TLS? = nil,
                 accounts: NatsOperator? = nil) throws {
        self.name = name
        self.tls = tls
        self.accounts = accounts
        self.storeDirectory = storeDirectory
        port = try Self.freePort()
        clusterPort = clustered ? try Self.freePort() : nil
        routes = []
        logFile = storeDirectory + ".log"
        try FileManager.default.createDirectory(atPath: storeDirectory, withIntermediateDirectories: true)
    }

    deinit { stop(signal: SIGKILL) }

    /// Three (or `count`) servers routed to each other on loopback ports, not started.
    package static func cluster(count: Int = 3, in directory: String) throws -> [NatsServer] {
        let servers = try (1...count).map { try NatsServer(name: "n\($0)", storeDirectory: directory + "/n\($0)", clustered: true) }
        for server in servers { server.routes = servers.filter { $0 !== server }.compactMap(\.routeURL) }
        return servers
    }

    /// Starts the server (again, on the same port and store) and waits until it accepts TCP.
    package func start(timeout: Double = 20) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.executable)
        var arguments = ["-a", "127.0.0.1", "-p", String(port), "-js", "-sd", storeDirectory, "-n", name]
        if let clusterPort {
            arguments += ["--cluster_name", "pushspool-test", "--cluster", "nats://127.0.0.1:\(clusterPort)",
                          "--routes", routes.joined(separator: ",")]
        }
        var configuration = accounts?.serverConfiguration ?? ""
        if let tls {
            // In the configuration file, not --tlsverify: the handshake timeout (2 s by
            // default, tight on a loaded 2-core machine) has no flag.
            configuration += """
                tls {
                  cert_file: "\(tls.certificate)"
                  key_file: "\(tls.key)"
                  ca_file: "\(tls.ca)"
                  verify: true
                  timeout: 5
                }

                """
        }
        if !configuration.isEmpty {
            // The flags above still apply beside the file.
            let file = storeDirectory + ".conf"
            try configuration.write(toFile: file, atomically: true, encoding: .utf8)
            arguments += ["-c", file]
        }
        process.arguments = arguments
        _ = FileManager.default.createFile(atPath: logFile, contents: nil)
        process.standardError = FileHandle(forWritingAtPath: logFile)
        process.standardOutput = FileHandle(forWritingAtPath: logFile)
        try process.run()
        self.process = process
        var exited = false
        let listening = eventually(within: timeout) {
            exited = !process.isRunning
            return exited || Self.accepts(port: port)
        }
        if exited { throw NatsServerError(description: "nats-server \(name) exited: \(log.suffix(2000))") }
        if listening { return }
        throw NatsServerError(description: "nats-server \(name) did not listen on \(port) within \(timeout) s")
    }

    /// Stops the server (SIGTERM: clean shutdown; SIGKILL: a crash) and waits for it.
    package func stop(signal: Int32 = SIGTERM) {
        guard let process, process.isRunning else { return }
        kill(process.processIdentifier, signal)
        process.waitUntilExit()
        self.process = nil
    }

    /// A TCP port free on 127.0.0.1 now (bound to port 0 and released).
    package static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw NatsServerError(description: "socket: errno \(errno)") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else { throw NatsServerError(description: "bind: errno \(errno)") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    static func accepts(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }
}

package struct NatsServerError: Error, CustomStringConvertible {
    package var description: String
    package init(description: String) { self.description = description }
}
