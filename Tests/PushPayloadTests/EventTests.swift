import Testing
@testable import PushPayload
import PushSystem

/// An event envelope for `alice` with `members` in its event object (JSON text, no braces).
func eventJSON(_ members: String, envelope: String = #""user": "alice""#) -> String {
    #"{"pushspool": 1, \#(envelope), "event": {\#(members)}}"#
}

struct EventCase: Sendable, CustomTestStringConvertible {
    var type: EventType
    var members: String
    var testDescription: String { type.rawValue }
}

/// The smallest valid event of each type.
let minimalEvents: [EventCase] = EventType.allCases.map { type in
    switch type {
    case .seen, .read, .archive, .open, .inAppShown, .unread, .unarchive, .delete, .pin, .unpin, .unsnooze:
        EventCase(type: type, members: #""item": 42"#)
    case .snooze: EventCase(type: type, members: #""item": 42, "until": "2026-12-01T09:00:00Z""#)
    case .readAll, .archiveRead, .opened: EventCase(type: type, members: "")
    case .action, .actionRevert: EventCase(type: type, members: #""item": 42, "action": "mm_accept""#)
    case .inAppOptOut: EventCase(type: type, members: #""enabled": false"#)
    case .preferences: EventCase(type: type, members: #""muted": {"promo": true}"#)
    }
}

@Suite struct EventEnvelopeTests {
    @Test(arguments: minimalEvents)
    func everyTypeParsesAndRoundTripsThroughItsEnvelope(_ c: EventCase) throws {
        let extra = c.members.isEmpty ? "" : ", " + c.members
        let e = try acceptEvent(eventJSON(#""type": "\#(c.type.rawValue)", "eventId": "ev-\#(c.type.rawValue)""# + extra))
        #expect(e.type == c.type)
        #expect(e.eventId == "ev-\(c.type.rawValue)")
        #expect(e.user == "alice" && e.device == nil && e.at == nil)
        #expect((e.item != nil) == c.type.requiredMembers.contains("item"))
        #expect(e.dedupKey == "event:ev-\(c.type.rawValue)")
        // What pushspoolctl writes (PushEvent.envelope) is read back as the same event.
        #expect(Normalizer.classify(e.envelope().serialized()) == .event(e))
    }

    @Test func everyMemberIsTypedAndInTheRecordBody() throws {
        let e = try acceptEvent(eventJSON(#""type": "nc.action", "eventId": "app.ios:7f3a:0001", "item": 43, "action": "reply", "text": "On my way: 10 min", "at": "2026-11-30T12:00:00.000Z""#,
                                          envelope: #""user": "alice", "device": "dev-1""#))
        #expect(e == PushEvent(type: .action, eventId: "app.ios:7f3a:0001", user: "alice", device: "dev-1", item: 43,
                               action: "reply", text: "On my way: 10 min", at: "2026-11-30T12:00:00.000Z"))
        #expect(e.jsonValue() == .object([
            "kind": .string("event"), "type": .string("nc.action"), "eventId": .string("app.ios:7f3a:0001"),
            "user": .string("alice"), "device": .string("dev-1"), "item": .number("43"), "action": .string("reply"),
            "text": .string("On my way: 10 min"), "at": .string("2026-11-30T12:00:00.000Z"),
        ]))
        let optout = try acceptEvent(eventJSON(#""type": "nc.inapp-optout", "eventId": "e", "enabled": true"#, envelope: #""device": "d""#))
        #expect(optout.jsonValue() == .object(["kind": .string("event"), "type": .string("nc.inapp-optout"), "eventId": .string("e"),
                                               "device": .string("d"), "enabled": .bool(true)]))
    }

    @Test func deviceAloneNamesTheInboxAndAnEmptyUserIsAbsent() throws {
        let e = try acceptEvent(eventJSON(#""type": "nc.opened", "eventId": "e""#, envelope: #""user": "", "device": "shared-1""#))
        #expect(e.user == nil && e.device == "shared-1")
    }

    @Test(arguments: [
        ("0", false), ("-1", false), ("1e30", false), ("1E2", false), ("18446744073709551616", false),
        ("99999999999999999999999999999999999999999", false), ("1.5", false), ("42.0", false), ("-0", false),
        (#""42""#, false), ("true", false), ("[42]", false), ("{}", false),
        ("1", true), ("42", true), ("9007199254740993", true), ("18446744073709551615", true),
    ])
    func hostileItemNumbersAreRefusedNeverTrapped(lexeme: String, accepted: Bool) throws {
        let outcome = Normalizer.classify(Array(eventJSON(#""type": "nc.read", "eventId": "e", "item": \#(lexeme)"#).utf8))
        if accepted {
            guard case .event(let e) = outcome else { Issue.record("refused \(outcome)"); return }
            #expect(e.item.map(String.init) == lexeme, "exact at any width, no Double on the way")
        } else {
            guard case .refused(let r) = outcome else { Issue.record("accepted \(outcome)"); return }
            #expect(r.code == .invalidEvent)
            #expect(r.path == "event.item")
        }
    }

    @Test(arguments: [
        // (event members, envelope, expected code, expected path)
        (#""type": "nc.self-destruct", "eventId": "e""#, #""user": "u""#, ReasonCode.invalidEvent, "event.type"),
        (#""eventId": "e", "item": 1"#, #""user": "u""#, .invalidEvent, "event.type"),
        (#""type": 7, "eventId": "e""#, #""user": "u""#, .invalidEvent, "event.type"),
        (#""type": "NC.OPENED", "eventId": "e""#, #""user": "u""#, .invalidEvent, "event.type"),
        (#""type": "nc.opened""#, #""user": "u""#, .invalidEvent, "event.eventId"),
        (#""type": "nc.opened", "eventId": 12"#, #""user": "u""#, .invalidEvent, "event.eventId"),
        (#""type": "nc.opened", "eventId": """#, #""user": "u""#, .invalidEvent, "event.eventId"),
        (#""type": "nc.opened", "eventId": "has space""#, #""user": "u""#, .invalidEvent, "event.eventId"),
        (#""type": "nc.opened", "eventId": "é""#, #""user": "u""#, .invalidEvent, "event.eventId"),
        (#""type": "nc.opened", "eventId": "a/b""#, #""user": "u""#, .invalidEvent, "event.eventId"),
        (#""type": "nc.read", "eventId": "e""#, #""user": "u""#, .invalidEvent, "event.item"),
        (#""type": "nc.read", "eventId": "e", "item": null"#, #""user": "u""#, .invalidEvent, "event.item"),
        (#""type": "nc.action", "eventId": "e", "item": 1"#, #""user": "u""#, .invalidEvent, "event.action"),
        (#""type": "nc.action", "eventId": "e", "item": 1, "action": """#, #""user": "u""#, .invalidEvent, "event.action"),
        (#""type": "nc.action", "eventId": "e", "item": 1, "action": 3"#, #""user": "u""#, .invalidEvent, "event.action"),
        (#""type": "nc.action", "eventId": "e", "item": 1, "action": "a", "text": 5"#, #""user": "u""#, .invalidEvent, "event.text"),
        (#""type": "nc.inapp-optout", "eventId": "e""#, #""user": "u""#, .invalidEvent, "event.enabled"),
        (#""type": "nc.inapp-optout", "eventId": "e", "enabled": "false""#, #""user": "u""#, .invalidEvent, "event.enabled"),
        (#""type": "nc.inapp-optout", "eventId": "e", "enabled": 0"#, #""user": "u""#, .invalidEvent, "event.enabled"),
        // Members a type does not take are refused, not ignored.
        (#""type": "nc.opened", "eventId": "e", "item": 1"#, #""user": "u""#, .invalidEvent, "event.item"),
        (#""type": "nc.read", "eventId": "e", "item": 1, "text": "x""#, #""user": "u""#, .invalidEvent, "event.text"),
        (#""type": "nc.read", "eventId": "e", "item": 1, "itme": 2"#, #""user": "u""#, .invalidEvent, "event.itme"),
        (#""type": "nc.read-all", "eventId": "e", "enabled": true"#, #""user": "u""#, .invalidEvent, "event.enabled"),
        (#""type": "nc.opened", "eventId": "e", "at": "yesterday""#, #""user": "u""#, .invalidEvent, "event.at"),
        (#""type": "nc.opened", "eventId": "e", "at": 1764504000000"#, #""user": "u""#, .invalidEvent, "event.at"),
        // Whose inbox: at least one of user and device.
        (#""type": "nc.opened", "eventId": "e""#, #""pushspool": 1"#, .invalidEvent, "user"),
        (#""type": "nc.opened", "eventId": "e""#, #""user": "", "device": """#, .invalidEvent, "user"),
        // Envelope-level problems stay invalid_envelope.
        (#""type": "nc.opened", "eventId": "e""#, #""user": 5"#, .invalidEnvelope, "user"),
        (#""type": "nc.opened", "eventId": "e""#, #""user": "u", "device": ["d"]"#, .invalidEnvelope, "device"),
        (#""type": "nc.opened", "eventId": "e""#, #""user": "u", "platform": "ios""#, .invalidEnvelope, "platform"),
        (#""type": "nc.opened", "eventId": "e""#, #""user": "u", "payload": {"aps": {"alert": "x"}}"#, .invalidEnvelope, "event"),
    ])
    func refusals(members: String, envelope: String, code: ReasonCode, path: String) throws {
        // `"pushspool": 1` given twice would be a duplicate key; the envelope argument may
        // replace the user line with it to leave both user and device out.
        let json = envelope == #""pushspool": 1"# ? #"{"pushspool": 1, "event": {\#(members)}}"# : eventJSON(members, envelope: envelope)
        let r = try #require(refusal(json))
        #expect(r.code == code, "\(r)")
        #expect(r.path == path, "\(r)")
        #expect(!r.message.isEmpty)
    }

    @Test func eventNotAnObjectAndWrongVersion() throws {
        #expect(refusal(#"{"pushspool": 1, "user": "u", "event": "nc.opened"}"#)?.code == .invalidEvent)
        #expect(refusal(#"{"pushspool": 2, "user": "u", "event": {"type": "nc.opened", "eventId": "e"}}"#)?.code == .invalidEnvelope)
    }

    @Test func boundsOnIdsTextAndNames() throws {
        let id128 = String(repeating: "a", count: 128)
        #expect(try acceptEvent(eventJSON(#""type": "nc.opened", "eventId": "\#(id128)""#)).eventId == id128)
        #expect(refusal(eventJSON(#""type": "nc.opened", "eventId": "\#(id128)b""#))?.path == "event.eventId")

        // 4096 bytes of text (2048 two-byte characters) pass; one byte more does not.
        let text = String(repeating: "é", count: 2048)
        let action = #""type": "nc.action", "eventId": "e", "item": 1, "action": "reply", "text": "#
        #expect(try acceptEvent(eventJSON(action + "\"\(text)\"")).text == text)
        #expect(refusal(eventJSON(action + "\"\(text)x\""))?.path == "event.text")
        #expect(try acceptEvent(eventJSON(action + #""""#)).text == "", "an empty reply is still a reply")

        let name255 = String(repeating: "u", count: 255)
        #expect(try acceptEvent(eventJSON(#""type": "nc.opened", "eventId": "e""#, envelope: #""user": "\#(name255)""#)).user == name255)
        #expect(refusal(eventJSON(#""type": "nc.opened", "eventId": "e""#, envelope: #""user": "\#(name255)u""#))?.code == .invalidEnvelope)
        #expect(refusal(eventJSON(#""type": "nc.action", "eventId": "e", "item": 1, "action": "\#(name255)a""#))?.path == "event.action")
    }

    @Test(arguments: [
        "2026-11-30T12:00:00Z", "2026-11-30T12:00:00.000Z", "2026-11-30T12:00:00.123456789Z", "2026-11-30T13:00:00+01:00",
        "2026-11-30T06:30:00-05:30", "2024-02-29T00:00:00Z", "2026-12-31T23:59:60Z",
    ])
    func validAt(_ at: String) {
        #expect(ISO8601Check.isValid(at))
        #expect(refusal(eventJSON(#""type": "nc.opened", "eventId": "e", "at": "\#(at)""#)) == nil)
    }

    @Test(arguments: [
        "", "2026-11-30", "2026-11-30T12:00:00", "2026-11-30 12:00:00Z", "2026-13-01T00:00:00Z", "2026-02-29T00:00:00Z",
        "2026-11-31T00:00:00Z", "2026-11-30T24:00:00Z", "2026-11-30T12:60:00Z", "2026-11-30T12:00:00.Z",
        "2026-11-30T12:00:00.1234567890Z", "2026-11-30T12:00:00z", "2026-11-30T12:00:00+0100", "2026-11-30T12:00:00Zjunk",
        "+12026-11-30T12:00:00Z", "２０２６-11-30T12:00:00Z",
    ])
    func invalidAt(_ at: String) {
        #expect(!ISO8601Check.isValid(at))
    }

    @Test func onlyAnEnvelopeCanBeAnEvent() throws {
        // A push whose custom data has an `event` key stays a push.
        let n = try accept(#"{"aps": {"alert": "x"}, "event": {"type": "nc.opened", "eventId": "e"}}"#)
        #expect(n.vendor == .apns)
        guard case .notification(let other) = Normalizer.classify(Array(#"{"aps": {"alert": "x"}, "event": 1}"#.utf8)) else {
            Issue.record("a push with an event member is not a push")
            return
        }
        #expect(other.vendor == .apns)
        // An envelope whose `event` is null is a push envelope, as it was before events.
        #expect(try accept(#"{"pushspool": 1, "event": null, "payload": {"aps": {"alert": "x"}}}"#).vendor == .apns)
        // The old entry point refuses an event envelope rather than reading it as a push.
        let envelope = eventJSON(#""type": "nc.opened", "eventId": "e""#)
        guard case .refused(let r) = normalize(envelope) else { Issue.record("normalize accepted an event"); return }
        #expect(r.code == .invalidEnvelope && r.path == "event")
    }

    @Test func classifyAgreesWithNormalizeOnEveryExampleThatIsNotAnEvent() throws {
        for row in exampleRows where !row.expected.hasPrefix("event ") && row.expected != "refused invalid_event" {
            let bytes = try readExample(row.file)
            switch (Normalizer.classify(bytes), Normalizer.normalize(bytes)) {
            case (.notification(let a), .accepted(let b)): #expect(a == b, "\(row.file)")
            case (.refused(let a), .refused(let b)): #expect(a == b, "\(row.file)")
            case let (a, b): Issue.record("\(row.file): classify \(a), normalize \(b)")
            }
        }
    }
}

@Suite struct EventDedupKeyTests {
    @Test func eventKeysAreTheirOwnFormAndParse() throws {
        #expect(DedupKey.event("3f1c9a7e0b2d4c6e") == "event:3f1c9a7e0b2d4c6e")
        #expect(DedupKey.eventId(of: "event:a.b:c-d_e") == "a.b:c-d_e")
        let parsed = try #require(DedupKey.parse("event:abc"))
        #expect(parsed.vendor == "event" && parsed.id == "abc" && parsed.user == nil)
        // Push keys are never event keys, whatever their id.
        for vendor in Vendor.allCases {
            #expect(DedupKey.eventId(of: DedupKey.make(vendor: vendor, id: "event:x", user: nil)) == nil)
            #expect(DedupKey.eventId(of: DedupKey.make(vendor: vendor, id: "x", user: "event")) == nil)
            #expect(vendor.rawValue != "event")
        }
        #expect(DedupKey.eventId(of: "event:") == nil)
        #expect(DedupKey.eventId(of: "event:has space") == nil)
        // The longest event key fits the journal.
        #expect(DedupKey.event(String(repeating: "a", count: PushEvent.maxEventIdBytes)).utf8.count <= DedupKey.maxBytes)
    }
}

@Suite struct NotificationCenterModelTests {
    @Test func kindAndDeviceAreInTheRecord() throws {
        let n = try accept(#"{"pushspool": 1, "device": "ios-7f3a", "payload": {"aps": {"alert": "x"}}}"#)
        #expect(n.device == "ios-7f3a" && n.user == nil)
        let json = n.jsonValue()
        #expect(json["kind"] == .string("notification"))
        #expect(json["device"] == .string("ios-7f3a"))
        #expect(json["user"] == nil)
        // The device is not part of the dedup key (the contract's key is vendor, id, user).
        #expect(n.dedupKey == DedupKey.make(vendor: .apns, id: n.id, user: nil))
        #expect(try accept(#"{"pushspool": 1, "device": "", "payload": {"aps": {"alert": "x"}}}"#).device == nil)
        #expect(refusal(#"{"pushspool": 1, "device": 7, "payload": {"aps": {"alert": "x"}}}"#)?.code == .invalidEnvelope)
        #expect(refusal(#"{"pushspool": 1, "device": "\#(String(repeating: "d", count: 256))", "payload": {"aps": {"alert": "x"}}}"#)?.code == .invalidEnvelope)
    }

    @Test func infobipInAppTitlesAreCarriedOnBothPlatforms() throws {
        let ios = try accept(String(decoding: try readExample("infobip-ios-mirror-modal.json"), as: UTF8.self))
        #expect(ios.inAppOpenTitle == "Open" && ios.inAppDismissTitle == "Later")
        #expect(ios.jsonValue()["inAppOpenTitle"] == .string("Open") && ios.jsonValue()["inAppDismissTitle"] == .string("Later"))

        let inner = #"{\"messageId\":\"m1\",\"text\":\"t\",\"notification\":{\"inAppStyle\":\"MODAL\"},\"internal\":{\"inAppOpenTitle\":\"Go\",\"inAppDismissTitle\":\"No\"}}"#
        let android = try accept(#"{"data": {"org_ib_d": "\#(inner)"}}"#)
        #expect(android.inAppOpenTitle == "Go" && android.inAppDismissTitle == "No" && android.presentation == .modal)

        let plain = try accept(#"{"messageId": "m", "aps": {"alert": "x"}}"#)
        #expect(plain.jsonValue()["inAppOpenTitle"] == nil && plain.jsonValue()["inAppDismissTitle"] == nil)
        // Lenient like the rest of a push: a wrong type warns and reads as absent.
        let wrong = try accept(#"{"messageId": "m", "aps": {"alert": "x"}, "internalData": {"inAppOpenTitle": 3}}"#)
        #expect(wrong.inAppOpenTitle == nil && wrong.hasWarning(.wrongType))
    }

    /// A table with a six-action category whose second action takes text.
    var sixActions: NormalizerOptions {
        var options = NormalizerOptions()
        var actions = (1...6).map { CategoryAction(id: "a\($0)", title: "Action \($0)", options: [.foreground]) }
        actions[1].textInput = TextInput(buttonTitle: "Send", placeholder: "Your answer")
        actions[1].options = [.moRequired]
        options.categories = try! CategoryTable.builtIn.adding(NotificationCategory(id: "six", actions: actions))
        return options
    }

    @Test func categoryResolvesToAtMostFourActionsWithTextInputAndSaysHowManyWereCut() throws {
        let ios = try accept(#"{"messageId": "m", "aps": {"alert": {"body": "b"}, "category": "six"}}"#, options: sixActions)
        #expect(ios.actions.map(\.id) == ["a1", "a2", "a3", "a4"])
        #expect(ios.actionsCut == 2)
        #expect(ios.hasWarning(.actionsTruncated))
        let json = ios.jsonValue()
        #expect(json["actionsCut"] == .number("2"))
        #expect(json["actions"]?.arrayValue?.count == 4)
        #expect(json["actions"]?.arrayValue?[1] == .object([
            "id": .string("a2"), "title": .string("Action 2"), "options": .array([.string("moRequired")]),
            "textInput": .object(["buttonTitle": .string("Send"), "placeholder": .string("Your answer")]),
        ]))
        #expect(json["actions"]?.arrayValue?[0]["textInput"] == nil)

        // Android shows three.
        let inner = #"{\"messageId\":\"m1\",\"text\":\"t\",\"notification\":{\"category\":\"six\"}}"#
        let android = try accept(#"{"data": {"org_ib_d": "\#(inner)"}}"#, options: sixActions)
        #expect(android.actions.count == 3 && android.actionsCut == 3)
    }

    @Test func actionsAreAbsentWithoutACategoryAndCutIsAbsentWhenZero() throws {
        let none = try accept(#"{"messageId": "m", "aps": {"alert": "x"}}"#)
        #expect(none.jsonValue()["actions"] == nil && none.jsonValue()["actionsCut"] == nil)
        let unknown = try accept(#"{"messageId": "m", "aps": {"alert": "x", "category": "NOPE"}}"#)
        #expect(unknown.actions.isEmpty && unknown.jsonValue()["actions"] == nil)

        let builtIn = try accept(#"{"messageId": "m", "aps": {"alert": "x", "category": "mm_accept_decline"}}"#)
        #expect(builtIn.actions.map(\.id) == ["mm_decline", "mm_accept"])
        #expect(builtIn.actions.allSatisfy { $0.options.contains(.moRequired) && $0.textInput == nil })
        #expect(builtIn.jsonValue()["actionsCut"] == nil)
    }

    @Test func textInputActionsKeepTheReservedPrefixRule() {
        let reply = CategoryAction(id: "mm_reply", title: "Reply", textInput: TextInput(buttonTitle: "Send", placeholder: ""))
        #expect(throws: CategoryTableError.self) { try CategoryTable.builtIn.adding(NotificationCategory(id: "chat", actions: [reply])) }
        #expect(CategoryTable.builtIn["mm_accept_decline"] != nil)
    }
}

func readExample(_ file: String) throws -> [UInt8] {
    try Posix.readFile(examplesDirectory + "/" + file, limit: 1 << 20)
}

/// Collapse ids and APNs thread ids, where the normaliser reads them (docs/notification-center.md, "Collapse").
@Suite struct CollapseIdTests {
    @Test func theEnvelopesCollapseIdComesFirst() throws {
        let n = try accept(#"{"pushspool":1,"user":"alice","collapseId":"score-7","payload":{"notification":{"title":"t","body":"b"},"android":{"collapse_key":"other"}}}"#)
        #expect(n.collapseId == "score-7")
        #expect(n.jsonValue()["collapseId"] == .string("score-7"))
        // An empty one is none.
        #expect(try accept(#"{"pushspool":1,"collapseId":"","payload":{"aps":{"alert":"x"}}}"#).collapseId == nil)
    }

    @Test(arguments: [
        (#"{"notification":{"title":"t","body":"b"},"android":{"collapse_key":"v1"}}"#, "v1"),
        (#"{"notification":{"title":"t","body":"b"},"collapse_key":"legacy"}"#, "legacy"),
        (#"{"notification":{"title":"t","body":"b"},"collapse_key":"do_not_collapse"}"#, nil),
        (#"{"data":{"title":"t","body":"b"},"apns":{"headers":{"apns-collapse-id":"ios-1"}}}"#, "ios-1"),
        // The flat bundle an app receives: FCM's own collapse_key is the package name by default.
        (#"{"from":"1","google.message_id":"0:1","collapse_key":"com.example.app","gcm.notification.body":"b"}"#, nil),
        (#"{"aps":{"alert":"x","thread-id":"chat"}}"#, nil),
    ] as [(String, String?)])
    func aSendRequestsCollapseKey(_ payload: String, _ expected: String?) throws {
        #expect(try accept(payload).collapseId == expected)
    }

    @Test func aThreadIdGroupsAndAWrongOneWarns() throws {
        let n = try accept(#"{"aps":{"alert":"x","thread-id":"chat"}}"#)
        #expect(n.threadId == "chat" && n.collapseId == nil && n.jsonValue()["threadId"] == .string("chat"))
        let long = try accept(#"{"aps":{"alert":"x","thread-id":"\#(String(repeating: "t", count: 256))"}}"#)
        #expect(long.threadId == nil && long.hasWarning(.invalidValue))
        let typed = try accept(#"{"notification":{"title":"t","body":"b"},"android":{"collapse_key":7}}"#)
        #expect(typed.collapseId == nil && typed.hasWarning(.wrongType))
    }

    @Test(arguments: [(#""collapseId":7"#, ReasonCode.invalidEnvelope),
                      (#""collapseId":"\#(String(repeating: "k", count: 256))""#, .invalidEnvelope),
                      (#""collapseId":"a\nb""#, .controlCharacter)])
    func aBadEnvelopeCollapseIdIsRefused(_ member: String, _ code: ReasonCode) {
        let r = refusal(#"{"pushspool":1,\#(member),"payload":{"aps":{"alert":"x"}}}"#)
        #expect(r?.code == code && r?.path == "collapseId", "\(String(describing: r))")
    }
}
