@preconcurrency import Glibc
import Foundation
import PushSystem

/// A throwaway certificate authority with a server certificate for 127.0.0.1 and a client
/// certificate it signed, made with the `openssl` CLI: what mutual TLS against a real server
/// (nats-server with `verify: true`) needs. `TLSFileServer` only needs one self-signed
/// certificate; a server that checks its clients needs a CA to check them against.
///
/// `Sendable`: paths only.
package struct TestPKI: Sendable {
    package let caCertificate: String
    package let serverCertificate: String
    package let serverKey: String
    package let clientCertificate: String
    package let clientKey: String

    /// Writes `ca.pem`, `server.pem`/`server.key` and `client.pem`/`client.key` into `directory`
    /// (created), all valid for one day, P-256 keys.
    package init(directory: String) throws {
        try Posix.mkdirs(directory)
        caCertificate = directory + "/ca.pem"
        serverCertificate = directory + "/server.pem"
        serverKey = directory + "/server.key"
        clientCertificate = directory + "/client.pem"
        clientKey = directory + "/client.key"
        let caKey = directory + "/ca.key"
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1"]
        try Self.openssl(["req", "-x509"] + ec + ["-subj", "/CN=pushspool test CA", "-keyout", caKey, "-out", caCertificate,
                                                  "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign"])
        try Self.openssl(["req", "-x509"] + ec + ["-subj", "/CN=127.0.0.1", "-CA", caCertificate, "-CAkey", caKey,
                                                  "-keyout", serverKey, "-out", serverCertificate,
                                                  "-addext", "subjectAltName=IP:127.0.0.1", "-addext", "extendedKeyUsage=serverAuth"])
        try Self.openssl(["req", "-x509"] + ec + ["-subj", "/CN=pushspoold test client", "-CA", caCertificate, "-CAkey", caKey,
                                                  "-keyout", clientKey, "-out", clientCertificate,
                                                  "-addext", "extendedKeyUsage=clientAuth"])
    }

    private static func openssl(_ arguments: [String]) throws {
        let result = try ProcessRunner.run("/usr/bin/openssl", arguments)
        guard result.status == 0 else {
            throw TestPKIError(description: "openssl \(arguments.prefix(2).joined(separator: " ")) exited \(result.status): \(result.stderr)")
        }
    }
}

package struct TestPKIError: Error, CustomStringConvertible {
    package var description: String
}
