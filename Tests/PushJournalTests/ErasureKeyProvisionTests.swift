@preconcurrency import Glibc
import Foundation
import Testing
import TestSupport
import PushJournal
import PushSystem

/// The fleet erasure key (`[Export] ErasureKeyFile=`): installed as `<state>/erase.key` when
/// there is none, accepted when equal, refused when a different key is there (its hashes are
/// already written), and a key file with a loose mode or the wrong size is refused.
@Suite struct ErasureKeyProvisionTests {
    static let fleet = ErasureSecret(bytes: Array(100..<132))

    static func write(_ bytes: [UInt8], to path: String, mode: mode_t = 0o600) throws {
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        chmod(path, mode)
    }

    static func mode(_ path: String) -> mode_t {
        var st = stat()
        return stat(path, &st) == 0 ? st.st_mode & 0o777 : 0
    }

    @Test func aStateDirectoryWithoutAKeyGetsTheFleetKey() throws {
        let temp = TempDir()
        #expect(try ErasureSecret.provision(stateDirectory: temp.path, key: Self.fleet) == .installed)
        #expect(try ErasureSecret.load(stateDirectory: temp.path) == Self.fleet)
        #expect(Self.mode(temp.path + "/erase.key") == 0o600)
        // What every existing reader (the daemon, `user hash`, an erasure) then gets.
        #expect(try ErasureSecret.loadOrCreate(stateDirectory: temp.path) == Self.fleet)
        // No temp file left behind.
        #expect(try FileManager.default.contentsOfDirectory(atPath: temp.path) == ["erase.key"])
    }

    @Test func theSameKeyAgainChangesNothing() throws {
        let temp = TempDir()
        try ErasureSecret.provision(stateDirectory: temp.path, key: Self.fleet)
        #expect(try ErasureSecret.provision(stateDirectory: temp.path, key: Self.fleet) == .unchanged)
        #expect(try ErasureSecret.load(stateDirectory: temp.path) == Self.fleet)
    }

    @Test func aDifferentKeyAlreadyThereIsRefusedAndKept() throws {
        let temp = TempDir()
        let own = try ErasureSecret.loadOrCreate(stateDirectory: temp.path)
        #expect(own != Self.fleet)
        #expect {
            try ErasureSecret.provision(stateDirectory: temp.path, key: Self.fleet)
        } throws: { error in
            guard let error = error as? ErasureError else { return false }
            return error.code == .keyMismatch && error.description.contains("tombstones")
                && error.description.contains(temp.path + "/erase.key")
        }
        #expect(try ErasureSecret.load(stateDirectory: temp.path) == own)
    }

    @Test func aKeyFileIsReadAndChecked() throws {
        let temp = TempDir()
        let state = temp.appending("state")
        try Posix.mkdirs(state)
        let good = temp.appending("good-key")
        try Self.write(Self.fleet.bytes, to: good)
        #expect(try ErasureSecret.provision(stateDirectory: state, keyFile: good, owner: geteuid()) == .installed)
        #expect(try ErasureSecret.load(stateDirectory: state) == Self.fleet)

        let cases: [(name: String, bytes: [UInt8], mode: mode_t, says: String)] = [
            ("loose", Self.fleet.bytes, 0o640, "chmod 600"),
            ("short", Array(Self.fleet.bytes.prefix(31)), 0o600, "holds 31 bytes, not 32"),
            ("long", Self.fleet.bytes + [0x0a], 0o600, "holds 33 bytes, not 32"),
        ]
        for bad in cases {
            let path = temp.appending(bad.name)
            try Self.write(bad.bytes, to: path, mode: bad.mode)
            let fresh = temp.appending("state-" + bad.name)
            try Posix.mkdirs(fresh)
            #expect {
                try ErasureSecret.provision(stateDirectory: fresh, keyFile: path, owner: nil)
            } throws: { error in
                (error as? ErasureError)?.code == .secret && "\(error)".contains(bad.says)
            }
            // Nothing installed from a refused file.
            #expect(try ErasureSecret.load(stateDirectory: fresh) == nil)
        }
        #expect {
            try ErasureSecret.provision(stateDirectory: state, keyFile: temp.appending("missing"), owner: nil)
        } throws: { error in
            (error as? ErasureError)?.code == .secret && "\(error)".contains("cannot open")
        }
    }
}
