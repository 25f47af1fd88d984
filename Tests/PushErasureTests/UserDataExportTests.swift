import Testing
import PushInbox
import PushSpool
import PushErasure

/// The parts of `user export` that decide what belongs to a subject and how bytes are
/// written, without a daemon (UserExportTests in IntegrationTests drives the real one).
@Suite struct UserDataExportTests {
    static func export(_ subject: DataSubject) -> UserDataExport {
        UserDataExport(subject: subject, sources: UserDataSources(stateDirectory: "/var/lib/pushspool", spool: SpoolLayout(root: "/var/spool/pushspool")))
    }

    @Test(arguments: [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE="),
                      ("foobar", "Zm9vYmFy")])
    func base64MatchesRFC4648(_ input: String, _ expected: String) {
        #expect(Base64.encode(Array(input.utf8)) == expected)
    }

    @Test func base64OfEveryByte() {
        let encoded = Base64.encode(Array(0...255))
        #expect(encoded.hasPrefix("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8g"))
        #expect(encoded.hasSuffix("+/w=="))
        #expect(encoded.utf8.count == 344)
    }

    /// A quarantined envelope names the subject through its `user`; another user's, or a
    /// body that merely mentions the id, does not.
    @Test func quarantinedPayloadsMatchByEnvelopeOrMember() {
        let alice = Self.export(.user("alice"))
        #expect(alice.quarantineMatch(Array(#"{"pushspool":1,"user":"alice","payload":{}}"#.utf8)) == "envelope")
        #expect(alice.quarantineMatch(Array(#"{"pushspool":1,"user":"alicia","payload":{"body":"alice"}}"#.utf8)) == nil)
        // Not JSON (that may be why it was quarantined): a "user" member still names her.
        #expect(alice.quarantineMatch(Array(#"{"pushspool":1, "user" : "alice", "payload": {"#.utf8)) == "text")
        #expect(alice.quarantineMatch(Array(#"{"pushspool":1, "user":"alice2", "#.utf8)) == nil)
        #expect(alice.quarantineMatch(Array(#"{"note":"alice", "#.utf8)) == nil)
        let device = Self.export(.device("dev-a"))
        #expect(device.quarantineMatch(Array(#"{"pushspool":1,"user":"bob","device":"dev-a","payload":{}}"#.utf8)) == "envelope")
        #expect(device.quarantineMatch(Array(#"{"pushspool":1,"user":"dev-a","payload":{}}"#.utf8)) == nil)
    }

    /// A record points at a media file by path; only files inside the store are read.
    @Test(arguments: [
        ("/var/lib/pushspool/media/ab/cdef.png", true),
        ("/var/lib/pushspool/media/ab/cdef.thumb256.jpg", true),
        ("/var/lib/pushspool/media/../../../etc/shadow", false),
        ("/var/lib/pushspool/media/ab/../../status.json", false),
        ("/var/lib/pushspool/media//etc/passwd", false),
        ("/var/lib/pushspool/mediax/ab/cdef.png", false),
        ("/etc/passwd", false),
        ("ab/cdef.png", false),
    ])
    func mediaOutsideTheStoreIsNotRead(_ path: String, _ inside: Bool) {
        #expect(Self.export(.user("alice")).isInMediaStore(path) == inside)
    }
}
