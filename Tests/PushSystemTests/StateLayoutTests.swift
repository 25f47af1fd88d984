import Testing
import PushSystem

/// The state directory's paths, which the daemon, pushspool-inbox, pushspoolctl and the user
/// export all take from `StateLayout`.
@Suite struct StateLayoutTests {
    @Test func pathsUnderTheRoot() {
        let state = StateLayout(root: "/var/lib/pushspool")
        #expect(state.journal == "/var/lib/pushspool/journal")
        #expect(state.journalArchive == "/var/lib/pushspool/journal/archive")
        #expect(state.inbox == "/var/lib/pushspool/inbox")
        #expect(state.inboxIndex == "/var/lib/pushspool/inbox/index.sqlite")
        #expect(state.inboxHTTP == "/var/lib/pushspool/inbox-http")
        #expect(state.media == "/var/lib/pushspool/media")
        #expect(state.outbox == "/var/lib/pushspool/outbox")
        #expect(state.export == "/var/lib/pushspool/export")
        #expect(state.exportStatus == "/var/lib/pushspool/export/status.json")
        #expect(state.status == "/var/lib/pushspool/status.json")
    }

    /// `--state-dir /srv/state/` and the root directory itself give the same paths as
    /// written without the slash, never `//journal`.
    @Test(arguments: ["/srv/state/", "/srv/state//", "/srv/state"])
    func trailingSlashesAreDropped(root: String) {
        #expect(StateLayout(root: root).journal == "/srv/state/journal")
        #expect(StateLayout(root: root) == StateLayout(root: "/srv/state"))
    }

    @Test func theRootDirectory() {
        #expect(StateLayout(root: "/").journal == "/journal")
        #expect(StateLayout(root: "/").root == "/")
    }
}
