@preconcurrency import Glibc
import Testing
import PushOutbox
import PushOutboxStore
import PushSystem
import PushTransliteration

/// NCPushOpen's custom fields from the push's `pushName` / `pushDate` (issue 22): the name
/// transliterated by ICU, the date in one form whatever form the payload used.
@Suite struct MindboxFieldsTests {
    static let fields = MindboxFields(transliterator: try! Transliterator(id: OutboxOptions(stateDirectory: "/nonexistent").mindboxTransliteration))

    @Test(arguments: [
        (JSONValue.string("2026-03-01T10:00:00Z"), "2026-03-01T10:00:00.000Z"),
        (.string("2026-03-01T10:00:00.250Z"), "2026-03-01T10:00:00.250Z"),
        (.string("2026-03-01T10:00:00.123456789Z"), "2026-03-01T10:00:00.123Z"),
        (.string("2026-03-01T13:00:00+03:00"), "2026-03-01T10:00:00.000Z"),
        (.string("2026-03-01T13:00:00+0300"), "2026-03-01T10:00:00.000Z"),
        (.string("2026-03-01T13:00+03"), "2026-03-01T10:00:00.000Z"),
        (.string("2026-03-01T05:30:00-04:30"), "2026-03-01T10:00:00.000Z"),
        (.string("2026-03-01T10:00:00"), "2026-03-01T10:00:00.000Z"),
        (.string("2026-03-01 10:00"), "2026-03-01T10:00:00.000Z"),
        (.string("2026-03-01 13:00:00 +03:00"), "2026-03-01T10:00:00.000Z"),
        (.string("2026-03-02"), "2026-03-02T00:00:00.000Z"),
        (.string("01.03.2026 10:00"), "2026-03-01T10:00:00.000Z"),
        (.string("01.03.2026 10:00:30"), "2026-03-01T10:00:30.000Z"),
        (.string("01.03.2026 10:00:30.5"), "2026-03-01T10:00:30.500Z"),
        (.string("01.03.2026"), "2026-03-01T00:00:00.000Z"),
        (.string("29.02.2024 23:59"), "2024-02-29T23:59:00.000Z"),
        (.string(" 2026-03-01T10:00:00Z "), "2026-03-01T10:00:00.000Z"),
        (.number("1772359200"), "2026-03-01T10:00:00.000Z"),
        (.string("1772359200"), "2026-03-01T10:00:00.000Z"),
        (.number("0"), "1970-01-01T00:00:00.000Z"),
        (.number("253402300799"), "9999-12-31T23:59:59.000Z"),
        (.number("1772359200000"), "2026-03-01T10:00:00.000Z"),
        (.string("1772359200123"), "2026-03-01T10:00:00.123Z"),
        (.number("1000000000000"), "2001-09-09T01:46:40.000Z"),
        (.number("253402300799999"), "9999-12-31T23:59:59.999Z"),
        (.string("2000-01-01T00:00:00+23:59"), "1999-12-31T00:01:00.000Z"),
    ])
    func everyAcceptedFormBecomesOneForm(input: JSONValue, expected: String) {
        let millis = MindboxDate.epochMillis(input)
        #expect(millis.map(MindboxDate.format) == expected, "\(input)")
    }

    /// Not dates: impossible calendar days, out-of-range epochs and times, junk around a date,
    /// hostile sizes. None traps; each is refused.
    @Test(arguments: [
        JSONValue.string("31.02.2026 10:00"), .string("29.02.2025"), .string("2026-02-30"), .string("2026-13-01"),
        .string("2026-00-10"), .string("00.03.2026"), .string("2026-03-01T24:00"), .string("2026-03-01T10:60"),
        .string("2026-03-01T10:00:60"), .string("2026-03-01T10:00:00+24:00"), .string("2026-03-01T10:00:00+03:60"),
        .string("2026-03-01T10:00:00Zjunk"), .string("2026-03-01T10:00:00."), .string("2026-03-01T10:00:00.1234567890Z"),
        .string("1969-12-31T23:59:59Z"), .string("1970-01-01T00:30:00+01:00"), .string("9999-12-31T23:59:59-00:01"),
        .string("0001-01-01"), .string("10000-01-01"), .string(""), .string("   "), .string("tomorrow"), .string("test date push open"),
        .string("２０２６-０３-０１"), .string("2026-03-01T10:00:00\u{0}Z"), .string("1.03.2026"), .string("2026-3-1"),
        .number("-1"), .number("1.5"), .number("1e9"), .number("253402300800"), .number("253402300800000"), .string("9999999999999999"),
        .number(String(repeating: "9", count: 400)), .string("-1772359200"), .string(String(repeating: "1", count: 1 << 20)),
        .string(String(repeating: " ", count: 1 << 20) + "2026-03-01"), .bool(true), .null, .array([]), .object([:]),
    ])
    func hostileOrImpossibleDatesAreRefused(input: JSONValue) {
        #expect(MindboxDate.epochMillis(input) == nil, "\(input.serializedString().prefix(80))")
    }

    @Test func theNameIsTransliteratedAndTheDateNormalised() {
        let (fields, problems) = Self.fields.customFields(.object([
            "pushName": .string("Весенняя распродажа"), "pushDate": .string("01.03.2026 10:00"),
        ]))
        #expect(fields == ["mobPushTranslateName": .string("Vesennaa rasprodaza"), "mobPushSendDateTime": .string("2026-03-01T10:00:00.000Z")])
        #expect(problems.isEmpty)
    }

    /// The guide's step 4.7 spells the saved values `push_name` / `push_date`.
    @Test func theGuidesUnderscoreSpellingIsReadToo() {
        let (fields, _) = Self.fields.customFields(.object(["push_name": .string("Скидки"), "push_date": .number("1772359200")]))
        #expect(fields == ["mobPushTranslateName": .string("Skidki"), "mobPushSendDateTime": .string("2026-03-01T10:00:00.000Z")])
        // The camel-case spelling wins when both are there; an empty one does not count.
        let (both, _) = Self.fields.customFields(.object([
            "pushName": .string("A"), "push_name": .string("B"), "pushDate": .string(""), "push_date": .string("2026-03-02"),
        ]))
        #expect(both == ["mobPushTranslateName": .string("A"), "mobPushSendDateTime": .string("2026-03-02T00:00:00.000Z")])
    }

    @Test func anUnreadableDateIsLeftOutAndReported() {
        let (fields, problems) = Self.fields.customFields(.object(["pushName": .string("sale"), "pushDate": .string("31.02.2026 10:00")]))
        #expect(fields == ["mobPushTranslateName": .string("sale")])
        #expect(problems.map(\.field) == ["mobPushSendDateTime"])
        #expect(problems.map(\.reason) == ["unparseable_date"])
        #expect(problems.first?.message.contains("\"31.02.2026 10:00\"") == true, "\(problems)")
    }

    @Test func aNameThatIsNotTextIsLeftOutAndReported() {
        let (fields, problems) = Self.fields.customFields(.object(["pushName": .object(["ru": .string("x")]), "pushDate": .null]))
        #expect(fields.isEmpty)
        #expect(problems.map(\.reason) == ["name_not_text"])
        // A number is text enough.
        #expect(Self.fields.customFields(.object(["pushName": .number("2026")])).fields == ["mobPushTranslateName": .string("2026")])
        // Absent, null and empty sources are simply not sent.
        for custom: JSONValue? in [nil, .string("plain text payload"), .object([:]), .object(["pushName": .string(""), "pushDate": .null])] {
            let (none, quiet) = Self.fields.customFields(custom)
            #expect(none.isEmpty && quiet.isEmpty)
        }
    }

    @Test func noneSendsTheNameAsItCame() {
        let raw = MindboxFields(transliterator: nil)
        #expect(raw.customFields(.object(["pushName": .string("Весенняя распродажа")])).fields
            == ["mobPushTranslateName": .string("Весенняя распродажа")])
    }

    /// A megabyte name (only a hostile record holds one: a push is at most 4 KiB) is cut
    /// before ICU sees it, and what goes out is bounded; invalid UTF-8 arrives replaced.
    @Test func hugeAndBrokenNamesAreBounded() {
        let huge = String(repeating: "Ж", count: 1 << 20)
        let clock = ContinuousClock()
        var result: JSONObject = [:]
        let elapsed = clock.measure { result = Self.fields.customFields(.object(["pushName": .string(huge)])).fields }
        let name = result["mobPushTranslateName"]?.stringValue ?? ""
        #expect(name == String(repeating: "Z", count: MindboxFields.maxNameCharacters))
        #expect(elapsed < .seconds(2), "\(elapsed)")
        // Expanding scripts are cut on a character boundary at the byte limit.
        let cjk = Self.fields.customFields(.object(["pushName": .string(String(repeating: "北", count: 1000))])).fields
        let latin = cjk["mobPushTranslateName"]?.stringValue ?? ""
        #expect(latin.utf8.count <= MindboxFields.maxNameBytes && latin.utf8.count > 900)
        #expect(latin.unicodeScalars.allSatisfy { $0.isASCII })
        // Emoji have no Latin form: cut between characters, never inside one.
        let emoji = Self.fields.customFields(.object(["pushName": .string(String(repeating: "🎉", count: 600))])).fields
        #expect(emoji["mobPushTranslateName"]?.stringValue == String(repeating: "🎉", count: MindboxFields.maxNameBytes / 4))
        let broken = String(decoding: Array("Скидка ".utf8) + [0xC0, 0xFF], as: UTF8.self)
        let mended = Self.fields.customFields(.object(["pushName": .string(broken)])).fields["mobPushTranslateName"]?.stringValue
        #expect(mended?.hasPrefix("Skidka ") == true, "\(mended ?? "nil")")
    }

    /// Through the mapper: the delivery carries the normalised fields and the item's
    /// platform; the problems become notices naming the delivery.
    @Test func theMapperUsesTheFieldsAndReportsProblems() {
        var item = mindboxItem()
        if case .object(var members) = item {
            members["platform"] = .string("android")
            members["customPayload"] = .object(["pushName": .string("Весенняя распродажа"), "pushDate": .string("soon")])
            item = .object(members)
        }
        let mapper = EventMapper(mindbox: true, infobip: false, mindboxFields: Self.fields)
        let mapping = mapper.map(seq: 2, ingestMillis: now, body: event("nc.open", "ev-x", item: 1).serialized()) { $0 == 1 ? item : nil }
        #expect(mapping.deliveries.count == 1)
        let delivery = mapping.deliveries[0]
        #expect(delivery.platform == "android")
        #expect(delivery.payload == .object(["customerAction": .object(["customFields": .object([
            "mobPushTranslateName": .string("Vesennaa rasprodaza"),
        ])])]))
        guard mapping.notices.count == 1, case .fieldProblem(let id, let target, let field, let reason, let message) = mapping.notices[0] else {
            Issue.record("expected one field notice, got \(mapping.notices)")
            return
        }
        #expect(id == "2-0" && target == "mindbox" && field == "mobPushSendDateTime" && reason == "unparseable_date")
        #expect(message.contains("\"soon\""), "\(message)")
        // The platform survives the pending file.
        #expect(OutboxDelivery(json: delivery.jsonValue)?.platform == "android")
    }
}

/// Which endpoint a Mindbox delivery goes to (issue 22: one endpoint per platform).
@Suite struct MindboxEndpointTests {
    static func options(id: String = "", ios: String = "", android: String = "") -> OutboxOptions {
        var options = OutboxOptions(stateDirectory: "/nonexistent")
        options.mindboxEndpointId = id
        options.mindboxEndpointIOS = ios
        options.mindboxEndpointAndroid = android
        return options
    }

    @Test func eachPlatformHasItsOwnWithTheSingleKeyAsFallback() {
        let both = Self.options(id: "app", ios: "app-ios", android: "app-android")
        #expect(both.mindboxEndpoint(platform: "ios") == "app-ios")
        #expect(both.mindboxEndpoint(platform: "android") == "app-android")
        #expect(both.mindboxEndpoint(platform: nil) == "app")
        let single = Self.options(id: "app")
        #expect(single.mindboxEndpoint(platform: "ios") == "app" && single.mindboxEndpoint(platform: "android") == "app")
        let iosOnly = Self.options(ios: "app-ios")
        #expect(iosOnly.mindboxEndpoint(platform: "ios") == "app-ios")
        #expect(iosOnly.mindboxEndpoint(platform: "android") == nil, "an Android push's event never goes to the iOS endpoint")
        // Issue 37: an event naming no platform goes to the single key only, never a guess.
        #expect(iosOnly.mindboxEndpoint(platform: nil) == nil)
        #expect(Self.options(ios: "a", android: "b").mindboxEndpoint(platform: nil) == nil)
        #expect(Self.options(android: "b").mindboxEndpoint(platform: nil) == nil)
        #expect(Self.options().mindboxEndpoint(platform: "ios") == nil)
    }

    @Test func aPlatformKeyAloneEnablesMindbox() throws {
        let fixture = try OutboxFixture()
        var options = try fixture.options()
        options.mindboxEndpointId = ""
        #expect(!options.mindboxEnabled)
        options.mindboxEndpointAndroid = "app-android"
        #expect(options.mindboxEnabled)
    }

    @Test func anUnknownTransliterationIsAConfigurationError() throws {
        var options = Self.options(id: "app")
        options.mindboxTransliteration = "Cyrillic-Klingon"
        #expect(throws: OutboxError.self) { _ = try options.transliterator() }
        options.mindboxTransliteration = "none"
        #expect(try options.transliterator() == nil)
        options.mindboxTransliteration = "NONE"
        #expect(try options.transliterator() == nil)
    }

    /// Through a real POST: events about an iOS and an Android push, and an NCOpen (no push),
    /// each reach their endpoint; with only the iOS key the Android event is parked, not sent
    /// to the wrong app.
    @Test func deliveriesGoToTheirPlatformsEndpoint() async throws {
        let fixture = try OutboxFixture()
        fixture.server.route("/v3/operations/async", .ok(Array("{}".utf8), contentType: "application/json"))
        var android = mindboxItem(id: "mb-2")
        if case .object(var members) = android {
            members["platform"] = .string("android")
            android = .object(members)
        }
        try await fixture.journal([
            ("mindbox:mb-1:alice", mindboxItem(), now),          // 1: iOS
            ("mindbox:mb-2:alice", android, now),                // 2: Android
            ("event:ev-1", event("nc.open", "ev-1", item: 1), now),
            ("event:ev-2", event("nc.open", "ev-2", item: 2), now),
            ("event:ev-3", event("nc.opened", "ev-3"), now),
        ])
        var options = try fixture.options()
        options.mindboxEndpointId = "app"
        options.mindboxEndpointIOS = "app-ios"
        options.mindboxEndpointAndroid = "app-android"
        let follower = try OutboxFollower(options: options)
        #expect(follower.catchUp().delivered == 3)
        let endpoints = fixture.server.requests("/v3/operations/async").map { request in
            request.target.split(separator: "&").first.map { String($0.split(separator: "=").last ?? "") } ?? ""
        }
        #expect(endpoints == ["app-ios", "app-android", "app"])

        let again = try OutboxFixture()
        again.server.route("/v3/operations/async", .ok(Array("{}".utf8), contentType: "application/json"))
        try await again.journal([
            ("mindbox:mb-2:alice", android, now),
            ("event:ev-2", event("nc.open", "ev-2", item: 1), now),
        ])
        var iosOnly = try again.options()
        iosOnly.mindboxEndpointId = ""
        iosOnly.mindboxEndpointIOS = "app-ios"
        let parked = try OutboxFollower(options: iosOnly).catchUp()
        #expect(parked.parked == 1 && parked.delivered == 0)
        #expect(again.server.requests("/v3/operations/async").isEmpty)
        #expect(parked.lastError?.contains("MindboxEndpointAndroid=") == true, "\(parked.lastError ?? "")")
    }

    /// Issue 37, rule 3: an NCOpen that names its platform goes to that platform's endpoint;
    /// one that names none, with only the per-platform keys set, is parked saying why instead
    /// of going to the iOS endpoint; with the single key it needs no platform.
    @Test func anNCOpenGoesToThePlatformItNamesAndIsParkedWithoutOne() async throws {
        func opened(_ id: String, _ platform: String?) -> JSONValue {
            guard case .object(var members) = event("nc.opened", id) else { return .null }
            if let platform { members["platform"] = .string(platform) }
            return .object(members)
        }
        let fixture = try OutboxFixture()
        fixture.server.route("/v3/operations/async", .ok(Array("{}".utf8), contentType: "application/json"))
        try await fixture.journal([("event:o-1", opened("o-1", "android"), now), ("event:o-2", opened("o-2", "ios"), now),
                                   ("event:o-3", opened("o-3", nil), now)])
        var options = try fixture.options()
        options.mindboxEndpointId = ""
        options.mindboxEndpointIOS = "app-ios"
        options.mindboxEndpointAndroid = "app-android"
        let result = try OutboxFollower(options: options).catchUp()
        #expect(result.delivered == 2 && result.parked == 1)
        let endpoints = fixture.server.requests("/v3/operations/async").map { request in
            request.target.split(separator: "&").first.map { String($0.split(separator: "=").last ?? "") } ?? ""
        }
        #expect(endpoints == ["app-android", "app-ios"])
        #expect(result.lastError?.contains("names no platform") == true && result.lastError?.contains("MindboxEndpointId=") == true,
                "\(result.lastError ?? "")")

        let single = try OutboxFixture()
        single.server.route("/v3/operations/async", .ok(Array("{}".utf8), contentType: "application/json"))
        try await single.journal([("event:o-3", opened("o-3", nil), now), ("event:o-4", opened("o-4", "android"), now)])
        var singleOptions = try single.options()
        singleOptions.mindboxEndpointId = "app"
        #expect(try OutboxFollower(options: singleOptions).catchUp().delivered == 2)
        #expect(single.server.requests("/v3/operations/async").allSatisfy { $0.target.hasPrefix("/v3/operations/async?endpointId=app&") })
    }

    /// The follower hands a field problem to `onNotice` (the daemon's journald event) once,
    /// and the delivery still goes out without the field.
    @Test func aFieldProblemReachesTheNoticeHandlerOnce() async throws {
        let fixture = try OutboxFixture()
        fixture.server.route("/v3/operations/async", .ok(Array("{}".utf8), contentType: "application/json"))
        var item = mindboxItem()
        if case .object(var members) = item {
            members["customPayload"] = .object(["pushName": .string("Скидки"), "pushDate": .string("31.02.2026 10:00")])
            item = .object(members)
        }
        try await fixture.journal([("mindbox:mb-1:alice", item, now), ("event:ev-1", event("nc.open", "ev-1", item: 1), now)])
        let notices = Locked<[OutboxNotice]>([])
        let follower = try OutboxFollower(options: fixture.options()) { notice in notices.withLock { $0.append(notice) } }
        #expect(follower.catchUp().delivered == 1)
        follower.catchUp()
        let seen = notices.withLock { $0 }
        #expect(seen.count == 1, "\(seen)")
        if case .fieldProblem(let id, _, let field, let reason, _)? = seen.first {
            #expect(id == "2-0" && field == "mobPushSendDateTime" && reason == "unparseable_date")
        } else {
            Issue.record("expected a field problem, got \(seen)")
        }
        let body = fixture.server.requests("/v3/operations/async").first.map { String(decoding: $0.body, as: UTF8.self) }
        #expect(body == #"{"customerAction":{"customFields":{"mobPushTranslateName":"Skidki"}}}"#)
    }
}
