import Testing
@testable import PushPayload

/// Issue 25, the time-driven part: the envelope's `expiresAt` (the earliest of it and the
/// vendor's expiry wins), `nc.snooze`'s `until`, and the writers' check of it.
@Suite struct TimedEventTests {
    static let ios = #""payload":{"aps":{"alert":{"title":"t","body":"b"}},"n":"x"}"#
    static let infobip = #""payload":{"messageId":"ib-1","aps":{"alert":{"body":"b"}},"internalData":{"inAppStyle":1,"inAppExpiryDateTime":1800000000000}}"#

    @Test func theEnvelopesExpiryAndTheVendorsTheEarlierWins() throws {
        #expect(try accept(#"{"pushspool":1,"expiresAt":"2026-12-01T10:00:00+02:00",\#(Self.ios)}"#).expiresAt == "2026-12-01T08:00:00.000Z")
        #expect(try accept(#"{"pushspool":1,\#(Self.ios)}"#).expiresAt == nil)
        // Infobip's is 2027-01-15T08:00:00.000Z.
        #expect(try accept(#"{"pushspool":1,"expiresAt":"2026-12-01T10:00:00Z",\#(Self.infobip)}"#).expiresAt == "2026-12-01T10:00:00.000Z")
        #expect(try accept(#"{"pushspool":1,"expiresAt":"2030-01-01T00:00:00Z",\#(Self.infobip)}"#).expiresAt == "2027-01-15T08:00:00.000Z")
        for bad in [#""tomorrow""#, "1800000000000", #""2026-13-01T00:00:00Z""#, #""1969-12-31T23:59:59Z""#] {
            #expect(refusal(#"{"pushspool":1,"expiresAt":\#(bad),\#(Self.ios)}"#)?.code == .invalidEnvelope, "\(bad)")
        }
    }

    @Test func millisOfISO8601() {
        #expect(ISO8601Check.millis("1970-01-01T00:00:00Z") == 0)
        #expect(ISO8601Check.millis("2026-12-01T09:00:00.5Z") == 1_796_115_600_500)
        #expect(ISO8601Check.millis("2026-12-01T10:30:00.123+01:30") == 1_796_115_600_123)
        #expect(ISO8601Check.millis("2000-02-29T00:00:00Z") == 951_782_400_000)
        #expect(ISO8601Check.millis("9999-12-31T23:59:59.999999999Z") == 253_402_300_799_999)
        #expect(ISO8601Check.millis("0000-01-01T00:00:00Z") == -62_167_219_200_000)
        #expect(ISO8601Check.millis("2026-02-30T00:00:00Z") == nil)
        #expect(ISO8601Check.millis("") == nil)
    }

    @Test func aSnoozeNeedsAnUntilThatIsAheadAndWithinAYear() throws {
        let e = try acceptEvent(#"{"pushspool":1,"user":"alice","event":{"type":"nc.snooze","eventId":"s1","item":7,"until":"2026-12-01T09:00:00Z"}}"#)
        #expect(e.type == .snooze && e.item == 7 && e.until == "2026-12-01T09:00:00Z")
        #expect(Normalizer.classify(e.envelope().serialized()) == .event(e))
        for event in [#"{"type":"nc.snooze","eventId":"s2","item":7}"#,
                      #"{"type":"nc.snooze","eventId":"s3","item":7,"until":"soon"}"#,
                      #"{"type":"nc.snooze","eventId":"s4","item":7,"until":1800000000000}"#,
                      #"{"type":"nc.unsnooze","eventId":"s5","item":7,"until":"2026-12-01T09:00:00Z"}"#] {
            #expect(refusal(#"{"pushspool":1,"user":"alice","event":\#(event)}"#)?.code == .invalidEvent, "\(event)")
        }
        let now = ISO8601Check.millis("2026-12-01T09:00:00Z")!
        #expect(PushEvent.snoozeProblem(until: "2026-12-01T09:00:01Z", now: now) == nil)
        #expect(PushEvent.snoozeProblem(until: "2027-12-02T09:00:00Z", now: now) == nil)
        #expect(PushEvent.snoozeProblem(until: "2026-12-01T09:00:00Z", now: now) != nil, "now is not ahead")
        #expect(PushEvent.snoozeProblem(until: "2027-12-02T09:00:01Z", now: now) != nil, "over 366 days")
        #expect(PushEvent.snoozeProblem(until: "9999-12-31T23:59:59Z", now: .min) != nil, "no overflow")
        #expect(PushEvent.snoozeProblem(until: "x", now: now) != nil)
    }
}

/// FCM's time to live, as the send APIs spell it, kept in ms for the index to end the item
/// that long after its ingest.
@Suite struct FCMTimeToLiveTests {
    static func fcm(_ members: String) -> String {
        #"{"pushspool":1,"user":"u","payload":{\#(members)"notification":{"title":"t","body":"b"},"data":{"k":"v"}}}"#
    }

    @Test(arguments: [(#""android":{"ttl":"3.5s"},"#, Int64(3500)), (#""android":{"ttl":"86400s"},"#, 86_400_000),
                      (#""ttl":"0s","#, 0), (#""time_to_live":60,"#, 60_000), (#""android":{"ttl":"2419200s"},"#, 2_419_200_000),
                      (#""android":{"ttl":"0.123456789s"},"#, 123)])
    func readsTheTTL(_ members: String, _ millis: Int64) throws {
        let n = try accept(Self.fcm(members))
        #expect(n.vendor == .fcm && n.ttlMillis == millis)
        #expect(n.jsonValue()["ttlMillis"] == .number(String(millis)))
    }

    @Test(arguments: [#""android":{"ttl":"2419201s"},"#, #""android":{"ttl":"1e9s"},"#, #""android":{"ttl":"-1s"},"#,
                      #""time_to_live":1e999,"#, #""android":{"ttl":"s"},"#, #""android":{"ttl":"99999999999999999999s"},"#,
                      #""android":{"ttl":true},"#, #""ttl":"3.s","#])
    func anInvalidTTLIsWarnedAndAbsent(_ members: String) throws {
        let n = try accept(Self.fcm(members))
        #expect(n.ttlMillis == nil)
        #expect(n.warnings.contains { $0.code == .invalidValue || $0.code == .wrongType }, "\(n.warnings)")
    }

    @Test func noTTLNoWarning() throws {
        let n = try accept(Self.fcm(""))
        // (derived_id: these test pushes carry no message id.)
        #expect(n.ttlMillis == nil && !n.warnings.contains { $0.code == .invalidValue || $0.code == .wrongType }, "\(n.warnings)")
    }
}
