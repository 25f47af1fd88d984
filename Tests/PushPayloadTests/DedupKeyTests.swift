import Testing
@testable import PushPayload

@Suite struct DedupKeyTests {
    static let samples: [(vendor: Vendor, id: String, user: String?)] = [
        (.apns, "3f2a", nil), (.apns, "3f2a", "alice"), (.sfmc, "a:b", "c"), (.sfmc, "a", "b:c"),
        (.infobip, "x@1:y", nil), (.infobip, "y", "x"), (.mindbox, "", "u"), (.fcm, "0:1%a", "пользователь"),
        (.fcm, "café", "café\u{301}"), (.mindbox, "id", "\u{0}"), (.mindbox, "1:a:id", nil),
    ]

    @Test func keysRoundTripAndNeverCollide() throws {
        var seen: Set<[UInt8]> = []
        for sample in Self.samples {
            let key = DedupKey.make(vendor: sample.vendor, id: sample.id, user: sample.user)
            #expect(seen.insert(Array(key.utf8)).inserted, "\(key) made twice")
            let parsed = try #require(DedupKey.parse(key))
            #expect(parsed.vendor == sample.vendor.rawValue && parsed.id == sample.id && parsed.user == sample.user, "\(key)")
        }
    }

    @Test func anEmptyUserIsNoUser() {
        #expect(DedupKey.make(vendor: .apns, id: "i", user: "") == "apns:i")
        #expect(DedupKey.make(vendor: .apns, id: "i", user: nil) == "apns:i")
        #expect(DedupKey.make(vendor: .sfmc, id: "campaign-7", user: "alice") == "sfmc@5:alice:campaign-7")
    }

    @Test(arguments: ["", "apns", "APNS:x", ":x", "apns#x", "apns@:a:x", "apns@05:alice:x", "apns@5:alice", "apns@6:alice:x",
                      "apns@9999:a:x", "apns@99999999999999999999:a:x"])
    func malformedKeysDoNotParse(_ key: String) {
        #expect(DedupKey.parse(key) == nil)
    }

    @Test func theKeyLimitIsTheJournalFrames() {
        #expect(DedupKey.maxBytes == 255)
    }
}

@Suite struct CategoryIdentifierTests {
    @Test func theReservedPrefixRuleIsOneFunction() {
        #expect(CategoryTable.identifierProblem("mm_custom", what: "category id")?.contains("reserves") == true)
        #expect(CategoryTable.identifierProblem("", what: "action id") == "action id is empty")
        #expect(CategoryTable.identifierProblem("MEETING", what: "category id") == nil)
        // adding(_:) reports the same rule's words.
        #expect(throws: CategoryTableError(message: "action id 'mm_x' starts with 'mm_', which Infobip reserves for its predefined categories and actions (category 'ok')")) {
            try CategoryTable.builtIn.adding(NotificationCategory(id: "ok", actions: [CategoryAction(id: "mm_x", title: "x")]))
        }
    }
}
