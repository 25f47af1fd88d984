import PushOutboxStore
import PushSystem

/// One POST to a vendor, built from deliveries by ``OutboxOptions/request(for:now:)``.
///
/// `Sendable`: a plain value (it holds the key in a header: never log it).
package struct OutboxRequest: Sendable {
    package var url: String
    package var headers: [String]
    package var body: [UInt8]
}

extension OutboxTarget {
    /// Which vendor (and so which rate limit) a target's POSTs go to.
    package var vendor: String { self == .mindbox ? "mindbox" : "infobip" }
}

extension OutboxOptions {
    /// The POST that delivers `batch` (one Mindbox operation, or Infobip reports of one user
    /// and device); `nil` when the vendor or the endpoint for the push's platform is not
    /// configured. Shared by the journal's outbox and the fleet outbox, so both send the same
    /// requests for the same events.
    package func request(for batch: [OutboxDelivery], now: Int64) -> OutboxRequest? {
        let head = batch[0]
        switch head.target {
        case .mindbox:
            guard let secret = mindboxSecret, let endpoint = mindboxEndpoint(platform: head.platform),
                  let operation = head.operation else { return nil }
            var url = mindboxURL + "/v3/operations/async?endpointId=" + Self.percentEncode(endpoint)
                + "&operation=" + Self.percentEncode(operation)
            if let device = head.device { url += "&deviceUUID=" + Self.percentEncode(device) }
            url += "&transactionId=" + Self.percentEncode(head.transactionId)
            return OutboxRequest(url: url, headers: ["Content-Type: application/json; charset=utf-8", "Accept: application/json",
                                                     "Authorization: SecretKey \(secret.value)"],
                                 body: head.payload.serialized())
        case .infobipSeen, .infobipMO:
            guard let key = infobipAppKey else { return nil }
            var messages: [JSONValue] = []
            for delivery in batch {
                guard case .object(var message) = delivery.payload else { continue }
                if head.target == .infobipSeen {
                    // Seconds between the user's seen and this report, as the SDK sends it.
                    message["timestampDelta"] = .integer(max(0, (now - delivery.atMillis) / 1000))
                }
                messages.append(.object(message))
            }
            var body: JSONObject = ["messages": .array(messages)]
            var headers = ["Content-Type: application/json; charset=utf-8", "Accept: application/json", "Authorization: App \(key.value)"]
            if let device = head.device, Self.isHeaderSafe(device) { headers.append("pushregistrationid: \(device)") }
            var path: String
            if head.target == .infobipMO {
                // Infobip refuses an MO without its sender: park it, saying what to send.
                guard let device = head.device else { return nil }
                path = "/mobile/1/messages/mo"
                if let platformType = Self.infobipPlatformType(head.platform) { path += "?platformType=" + platformType }
                body["from"] = .string(device)
            } else {
                // Both SDKs report seen on version 2 of the route (iOS `APIPath.SeenMessages`,
                // Android `MobileApiMessages.reportSeen`), with the same body as version 1.
                path = "/mobile/2/messages/seen"
            }
            return OutboxRequest(url: infobipURL + path, headers: headers, body: JSONValue.object(body).serialized())
        }
    }

    /// The `platformType` the SDKs send with an MO: `APNS` from iOS (`Consts.APIValues.platformType`),
    /// `GCM` from Android (`MobileApiMessages.sendMO`'s default); none for a push of unknown platform.
    static func infobipPlatformType(_ platform: String?) -> String? {
        switch platform {
        case "ios"?: "APNS"
        case "android"?: "GCM"
        default: nil
        }
    }

    /// Why `request(for:)` gave nothing for a delivery like `head`, for the dead letter.
    package static func unconfiguredMessage(_ head: OutboxDelivery) -> String {
        if head.target == .infobipMO, head.device == nil {
            return "the MO names no Infobip push registration id: send the event with the app's registration id as its device "
                + "(envelope device, X-Pushspool-Device, pushspoolctl nc action --device)"
        }
        if head.target == .mindbox, head.platform == "android" {
            return "no Mindbox endpoint for Android pushes: set [Outbox] MindboxEndpointAndroid= or MindboxEndpointId="
        }
        if head.target == .mindbox, head.platform == "ios" {
            return "no Mindbox endpoint for iOS pushes: set [Outbox] MindboxEndpointIOS= or MindboxEndpointId="
        }
        if head.target == .mindbox, head.platform == nil {
            return "\(head.operation ?? "the event") names no platform and [Outbox] MindboxEndpointId= is not set, so its endpoint "
                + "cannot be decided: send nc.opened with its platform (event.platform, X-Pushspool-Platform, "
                + "pushspoolctl nc opened --platform) or set MindboxEndpointId="
        }
        return "the \(head.target.rawValue) endpoint is not configured"
    }

    /// The delay before attempt `attempts + 1`, in ms. Exponential: base · 2^(attempts-1), at
    /// most `retryCeiling`, then "equal jitter" (a random point in the upper half) so a fleet
    /// that failed together does not retry together.
    package func backoffMillis(attempts: Int) -> Int64 {
        let base = max(1, retryBase.clampedMilliseconds)
        let ceiling = max(base, retryCeiling.clampedMilliseconds)
        let shift = min(max(0, attempts - 1), 40)
        let (scaled, overflow) = base.multipliedReportingOverflow(by: Int64(1) << shift)
        let delay = overflow ? ceiling : min(scaled, ceiling)
        return delay / 2 + Int64.random(in: 0...max(0, delay - delay / 2))
    }

    /// The delay a vendor's `Retry-After` asks for on a 429 or 503, at most the retry ceiling;
    /// `nil` when there is none or it cannot be read.
    package func retryAfterMillis(status: Int, header: String?, now: Int64) -> Int64? {
        guard status == 429 || status == 503, let header, let asked = RetryAfter.delayMillis(header, nowMillis: now) else { return nil }
        return min(asked, max(1, retryCeiling.clampedMilliseconds))
    }

    static func percentEncode(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = Array("0123456789ABCDEF".unicodeScalars)
                out += "%"
                out.unicodeScalars.append(hex[Int(byte >> 4)])
                out.unicodeScalars.append(hex[Int(byte & 0xF)])
            }
        }
        return out
    }

    static func isHeaderSafe(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 256 && text.utf8.allSatisfy { $0 >= 0x20 && $0 < 0x7F }
    }
}
