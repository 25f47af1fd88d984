import Testing
@testable import PushConfig

/// `[Feed NAME]` sections: what they define, and each mistake refused at its line.
@Suite struct FeedConfigTests {
    @Test func feedSectionsDefineNamedFilters() throws {
        let dir = try ConfigDirectory()
        try dir.write("pushspool.conf", """
            [Feed promo]
            Categories=promo sale
            Categories=deals
            Vendors=mindbox,infobip
            [Feed vip]
            PayloadKey=tier
            PayloadValue=gold
            [Feed flagged]
            PayloadKey=flag
            [Feed rest]
            Other=yes
            """)
        try dir.write("pushspool.conf.d/10-more.conf", "[Feed promo]\nCategories=\nCategories=offers\n")
        let feeds = try dir.load().0.feeds
        var promo = FeedDefinition(name: "promo")
        promo.categories = ["offers"]
        promo.vendors = ["mindbox", "infobip"]
        var vip = FeedDefinition(name: "vip")
        vip.payloadKey = "tier"
        vip.payloadValue = "gold"
        var flagged = FeedDefinition(name: "flagged")
        flagged.payloadKey = "flag"
        var rest = FeedDefinition(name: "rest")
        rest.other = true
        #expect(feeds == [promo, vip, flagged, rest])
    }

    @Test(arguments: [
        ("[Feed promo]\nCategory=promo", 2, "unknown key; [Feed promo] knows Categories, Vendors, PayloadKey, PayloadValue, Other"),
        ("[Feed pro mo]\nCategories=promo", 2, "a feed name is 1 to 64 characters"),
        ("[Feed *]\nCategories=promo", 2, "a feed name is 1 to 64 characters"),
        ("[Feed promo]\nVendors=onesignal", 2, "unknown vendor 'onesignal'"),
        ("[Feed promo]\nOther=maybe", 2, "maybe"),
        ("[Feed promo]\nCategories=", 2, "feed 'promo' is empty"),
        ("[Feed promo]\nPayloadValue=gold", 2, "PayloadValue= without PayloadKey="),
        ("[Feed promo]\nCategories=promo\nOther=yes", 3, "Other=yes (everything no other feed takes) and has conditions"),
        ("[Feed a]\nOther=yes\n[Feed b]\nOther=yes", 4, "feeds 'a' and 'b' are both Other=yes"),
        ("[Feeds promo]\nCategories=promo", 2, "unknown section"),
    ])
    func mistakesAreErrorsAtTheirLine(text: String, line: Int, expected: String) throws {
        let dir = try ConfigDirectory()
        try dir.write("pushspool.conf", text + "\n")
        let error = try #require(dir.error())
        #expect(error.message.contains(expected), "\(error)")
        #expect(error.line == line, "\(error)")
    }

    @Test func atMost32Feeds() throws {
        let dir = try ConfigDirectory()
        try dir.write("pushspool.conf", (1...33).map { "[Feed f\($0)]\nCategories=c\($0)\n" }.joined())
        let error = try #require(dir.error())
        #expect(error.message.contains("more than 32 feeds"))
        #expect(error.line == 66, "the 33rd feed's first key")
    }

    @Test func configShowRoundTripsFeeds() throws {
        let dir = try ConfigDirectory()
        try dir.write("pushspool.conf", "[Feed promo]\nCategories=promo sale\nVendors=sfmc\n[Feed vip]\nPayloadKey=tier\nPayloadValue=gold bar\n[Feed rest]\nOther=yes\n")
        let (config, provenance) = try dir.load()
        let text = renderEffectiveConfiguration(config, provenance: provenance)
        #expect(text.contains("[Feed promo]\n# \(dir.main):2\nCategories=promo sale\n"))
        #expect(try ConfigurationLoader.load(text: text, path: "shown.conf").0 == config)
    }

    @Test func aReloadReportsChangedFeedsAsWaitingForARestart() throws {
        let dir = try ConfigDirectory()
        try dir.write("pushspool.conf", "[Feed promo]\nCategories=promo\n")
        let store = try ConfigurationStore(mainFile: dir.main)
        try dir.write("pushspool.conf", "[Feed promo]\nCategories=sale\n")
        #expect(store.reload() == .applied(changed: ["Feed promo"], restartRequired: ["Feed promo"]))
    }
}
