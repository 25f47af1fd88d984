import Testing
@testable import PushspoolCtl

/// `pushspoolctl --instance NAME --root DIR`: the template unit's three paths under DIR, so an
/// instance inside an image or a test's scratch tree (scripts/systemd-integration/
/// instances-live.sh) is found with the same relative paths the unit passes its daemon.
@Suite struct InstanceRootTests {
    func globals(_ arguments: [String]) throws -> GlobalOptions? {
        guard case .run(_, let globals) = try PushspoolCtl.parse(arguments) else { return nil }
        return globals
    }

    @Test func rootPrefixesAllThreeInstancePaths() throws {
        let g = try #require(try globals(["--instance", "b", "--root", "/tmp/scratch/", "export", "status"]))
        #expect(g.config == "/tmp/scratch/etc/pushspool/b.conf")
        #expect(g.spool == "/tmp/scratch/var/spool/pushspool/b")
        #expect(g.stateDir == "/tmp/scratch/var/lib/pushspool/b")
        // Order on the command line does not matter; "/" is the real root.
        let real = try #require(try globals(["--root=/", "--instance", "b", "export", "status"]))
        #expect(real.config == "/etc/pushspool/b.conf")
        #expect(real.stateDir == "/var/lib/pushspool/b")
    }

    @Test(arguments: [
        ["--root", "/tmp/x", "journal", "stats"],                       // no --instance: nothing to prefix
        ["--instance", "a", "--root", "relative/dir", "journal", "stats"], // relative: ambiguous
        ["--instance", "a", "--root", "", "journal", "stats"],
    ])
    func rootMisuseIsAUsageError(arguments: [String]) {
        #expect(throws: UsageError.self) { try PushspoolCtl.parse(arguments) }
    }
}
