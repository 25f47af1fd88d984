@preconcurrency import Glibc
import Foundation
import PushSystem

/// NATS decentralized authentication for a test server, without `nsc` (not in Debian): an
/// operator, a system account (JetStream needs one in operator mode), an account with
/// JetStream enabled and a user of it, as nkeys (Ed25519 keys from the `openssl` CLI) and
/// JWTs signed with `openssl pkeyutl`. `serverConfiguration` is what nats-server needs
/// (`operator`, `system_account`, a MEMORY resolver preloaded with both accounts);
/// `credentialsFile` is the user's `.creds` file, as `nsc generate creds` writes it.
///
/// `Sendable`: strings only.
package struct NatsOperator: Sendable {
    package let serverConfiguration: String
    package let credentialsFile: String
    /// The user's public nkey (`U…`), as the server logs it.
    package let userPublicKey: String

    /// Writes keys, the operator JWT and `user.creds` into `directory` (created).
    package init(directory: String) throws {
        try Posix.mkdirs(directory)
        let op = try NKey(.operator, directory: directory, name: "operator")
        let system = try NKey(.account, directory: directory, name: "system")
        let account = try NKey(.account, directory: directory, name: "account")
        let user = try NKey(.user, directory: directory, name: "user")
        let unlimited = #""subs":-1,"data":-1,"payload":-1,"imports":-1,"exports":-1,"wildcards":true,"conn":-1,"leaf":-1"#
        let operatorJWT = try Self.jwt(signer: op, subject: op, name: "pushspool-test", directory: directory,
                                       nats: #"{"type":"operator","version":2}"#)
        let systemJWT = try Self.jwt(signer: op, subject: system, name: "SYS", directory: directory,
                                     nats: #"{"limits":{\#(unlimited)},"default_permissions":{"pub":{},"sub":{}},"type":"account","version":2}"#)
        // Any non-zero JetStream limit enables JetStream for the account; -1 = unlimited.
        let jetstream = #""mem_storage":-1,"disk_storage":-1,"streams":-1,"consumer":-1"#
        let accountJWT = try Self.jwt(signer: op, subject: account, name: "pushspool", directory: directory,
                                      nats: #"{"limits":{\#(unlimited),\#(jetstream)},"default_permissions":{"pub":{},"sub":{}},"type":"account","version":2}"#)
        let userJWT = try Self.jwt(signer: account, subject: user, name: "pushspoold", directory: directory,
                                   nats: #"{"pub":{},"sub":{},"subs":-1,"data":-1,"payload":-1,"type":"user","version":2}"#)
        let operatorFile = directory + "/operator.jwt"
        try operatorJWT.write(toFile: operatorFile, atomically: true, encoding: .utf8)
        serverConfiguration = """
            operator: "\(operatorFile)"
            system_account: \(system.publicKey)
            resolver: MEMORY
            resolver_preload: {
              \(system.publicKey): "\(systemJWT)"
              \(account.publicKey): "\(accountJWT)"
            }

            """
        credentialsFile = directory + "/user.creds"
        try """
            -----BEGIN NATS USER JWT-----
            \(userJWT)
            ------END NATS USER JWT------

            ************************* IMPORTANT *************************
            NKEY Seed printed below can be used to sign and prove identity.
            NKEYs are sensitive and should be treated as secrets.

            -----BEGIN USER NKEY SEED-----
            \(user.seed)
            ------END USER NKEY SEED------

            """.write(toFile: credentialsFile, atomically: true, encoding: .utf8)
        userPublicKey = user.publicKey
    }

    /// A JWT as the nats `jwt` library encodes one: header, claims, Ed25519 signature by the
    /// issuer's key; `jti` is the base32 SHA-256 of the claims without it, like the library's.
    private static func jwt(signer: NKey, subject: NKey, name: String, directory: String, nats: String) throws -> String {
        let header = base64URL(Array(#"{"typ":"JWT","alg":"ed25519-nkey"}"#.utf8))
        func claims(_ jti: String) -> String {
            #"{"jti":"\#(jti)","iat":\#(time(nil)),"iss":"\#(signer.publicKey)","name":"\#(name)","sub":"\#(subject.publicKey)","nats":\#(nats)}"#
        }
        let jti = base32(Array(claims("").utf8).withUnsafeBytes { SHA256.digest(of: $0) })
        let signed = header + "." + base64URL(Array(claims(jti).utf8))
        return signed + "." + base64URL(try signer.sign(Array(signed.utf8), directory: directory))
    }

    /// An nkey: an Ed25519 key pair in the openssl PEM file, and its NATS encodings.
    private struct NKey {
        enum Kind: UInt8 {
            case `operator` = 112  // 14 << 3: public keys start with "O"
            case account = 0       // "A"
            case user = 160        // 20 << 3: "U"
        }
        let pem: String
        let publicKey: String
        let seed: String

        init(_ kind: Kind, directory: String, name: String) throws {
            pem = directory + "/" + name + ".pem"
            _ = try openssl(["genpkey", "-algorithm", "ed25519", "-out", pem])
            // The DER forms end with the raw 32-byte private seed and public key.
            let privateKey = Array(try openssl(["pkey", "-in", pem, "-outform", "DER"]).suffix(32))
            let publicRaw = Array(try openssl(["pkey", "-in", pem, "-pubout", "-outform", "DER"]).suffix(32))
            let prefix = kind.rawValue
            publicKey = base32(withCRC([prefix] + publicRaw))
            // Seeds carry the seed prefix ("S") and the kind in their first two bytes.
            seed = base32(withCRC([18 << 3 | prefix >> 5, (prefix & 31) << 3] + privateKey))
        }

        func sign(_ message: [UInt8], directory: String) throws -> [UInt8] {
            let file = directory + "/to-sign"
            try Data(message).write(to: URL(fileURLWithPath: file))
            return try openssl(["pkeyutl", "-sign", "-inkey", pem, "-rawin", "-in", file])
        }
    }

    private static func openssl(_ arguments: [String]) throws -> [UInt8] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = arguments
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        let bytes = [UInt8](out.fileHandleForReading.readDataToEndOfFile())
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw TestPKIError(description: "openssl \(arguments.prefix(2).joined(separator: " ")) exited \(process.terminationStatus)")
        }
        return bytes
    }

    /// `bytes` followed by their CRC-16/XMODEM, little-endian, as nkeys checksum them.
    private static func withCRC(_ bytes: [UInt8]) -> [UInt8] {
        var crc: UInt16 = 0
        for byte in bytes {
            crc ^= UInt16(byte) << 8
            for _ in 0..<8 { crc = crc & 0x8000 != 0 ? (crc << 1) ^ 0x1021 : crc << 1 }
        }
        return bytes + [UInt8(crc & 0xff), UInt8(crc >> 8)]
    }

    /// RFC 4648 base32 without padding.
    private static func base32(_ bytes: [UInt8]) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
        var out = ""
        var buffer: UInt32 = 0
        var bits = 0
        for byte in bytes {
            buffer = buffer << 8 | UInt32(byte)
            bits += 8
            while bits >= 5 {
                out.append(alphabet[Int(buffer >> UInt32(bits - 5) & 31)])
                bits -= 5
            }
        }
        if bits > 0 { out.append(alphabet[Int(buffer << UInt32(5 - bits) & 31)]) }
        return out
    }

    private static func base64URL(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
