import PushSystem
/// Vendors pushspool normalises. Raw values are the ids used in records and `validate --json`.
package enum Vendor: String, Sendable, CaseIterable {
    case mindbox, infobip, sfmc, apns, fcm
}

package enum Platform: String, Sendable, CaseIterable {
    case ios, android
}

/// How the push asks to be presented beyond a plain notification.
package enum Presentation: String, Sendable {
    /// Infobip mirror push, `inAppStyle` 0/"MODAL" (or deprecated `inApp: true`).
    case modal
    /// Infobip mirror push, `inAppStyle` 1/"BANNER".
    case banner
    /// Infobip in-app message described by `internalData.inAppDetails`.
    case inApp = "in-app"
}

/// Options of an interactive action (Infobip's `MMNotificationAction` flags).
package enum ActionOption: String, Sendable, CaseIterable {
    case foreground, destructive, authenticationRequired, moRequired, chatCompatible
}

/// A button shown with the notification.
package struct NotificationButton: Sendable, Equatable {
    /// The identifier reported on click (Mindbox `uniqueKey`, Infobip action id).
    package var id: String?
    package var text: String
    package var url: String?
    package var options: [ActionOption]

    package init(id: String?, text: String, url: String?, options: [ActionOption] = []) {
        self.id = id
        self.text = text
        self.url = url
        self.options = options
    }

    package func jsonValue() -> JSONValue {
        var o: JSONObject = ["text": .string(text), "options": .array(options.map { .string($0.rawValue) })]
        if let id { o["id"] = .string(id) }
        if let url { o["url"] = .string(url) }
        return .object(o)
    }
}

/// The text field of a text-input action (iOS `UNTextInputNotificationAction`, Infobip
/// `MMTextInputNotificationAction`): the send button's title and the field's placeholder.
package struct TextInput: Sendable, Equatable {
    package var buttonTitle: String
    package var placeholder: String

    package init(buttonTitle: String, placeholder: String) {
        self.buttonTitle = buttonTitle
        self.placeholder = placeholder
    }

    package func jsonValue() -> JSONValue {
        .object(["buttonTitle": .string(buttonTitle), "placeholder": .string(placeholder)])
    }
}

/// An action of an interactive category, registered in the app (not carried by the push).
package struct CategoryAction: Sendable, Equatable {
    package var id: String
    package var title: String
    package var options: [ActionOption]
    /// Set for a text-input action: the user types a reply (sent as the event's `text`).
    package var textInput: TextInput?

    package init(id: String, title: String, options: [ActionOption] = [], textInput: TextInput? = nil) {
        self.id = id
        self.title = title
        self.options = options
        self.textInput = textInput
    }

    /// `{id, title, options[], textInput?: {buttonTitle, placeholder}}`, as records list it.
    package func jsonValue() -> JSONValue {
        var o: JSONObject = ["id": .string(id), "title": .string(title), "options": .array(options.map { .string($0.rawValue) })]
        if let textInput { o["textInput"] = textInput.jsonValue() }
        return .object(o)
    }
}

/// An interactive notification category: the push names it in `aps.category`.
package struct NotificationCategory: Sendable, Equatable {
    package var id: String
    package var actions: [CategoryAction]

    package init(id: String, actions: [CategoryAction]) {
        self.id = id
        self.actions = actions
    }
}

/// Why a category could not be added to a ``CategoryTable``.
package struct CategoryTableError: Error, Sendable, Equatable, CustomStringConvertible {
    package var message: String
    package var description: String { message }
}

/// Categories the normaliser resolves `category` against.
///
/// ``builtIn`` holds Infobip's predefined `mm_accept_decline`; the app's own categories come
/// from configuration through ``adding(_:)``, which refuses the reserved `mm_` prefix as the
/// Infobip SDKs do.
package struct CategoryTable: Sendable, Equatable {
    package private(set) var categories: [String: NotificationCategory]

    /// Infobip's predefined table. The vendor's document tabulates Accept before Decline,
    /// but says actions are displayed in the order they are set, and both SDKs set Decline
    /// first: the iOS SDK's
    /// `Classes/MobileMessaging/Resources/InteractiveNotifications/PredefinedNotificationCategories.plist`
    /// lists `mm_decline` then `mm_accept`, and the Android SDK's
    /// `interactive/predefined/PredefinedNotificationCategories.java` builds the category from
    /// `decline()` then `accept()`. So Decline comes first here too. The titles are the
    /// English ones; pushspool-inbox and `pushspoolctl nc` serve them translated (PushInbox's
    /// `PredefinedTitles`).
    package static let builtIn = CategoryTable(categories: [
        NotificationCategory(id: "mm_accept_decline", actions: [
            CategoryAction(id: "mm_decline", title: "Decline", options: [.destructive, .authenticationRequired, .moRequired]),
            CategoryAction(id: "mm_accept", title: "Accept", options: [.foreground, .authenticationRequired, .moRequired]),
        ]),
    ])

    /// A table holding exactly `categories` (a later duplicate id replaces an earlier one).
    package init(categories: [NotificationCategory]) {
        var table: [String: NotificationCategory] = [:]
        for category in categories { table[category.id] = category }
        self.categories = table
    }

    package subscript(id: String) -> NotificationCategory? { categories[id] }

    /// The prefix Infobip reserves for its predefined categories and actions.
    package static let reservedPrefix = "mm_"

    /// Infobip's rule for app-defined category and action ids (`MMNotificationCategory`,
    /// `MMNotificationAction` refuse them): not empty, not starting with ``reservedPrefix``.
    /// Returns what is wrong, for people, or `nil`. The one copy of the rule: ``adding(_:)``
    /// and the configuration loader both call it. `what` names the id ("category id").
    package static func identifierProblem(_ id: String, what: String) -> String? {
        if id.isEmpty { return "\(what) is empty" }
        if id.hasPrefix(reservedPrefix) {
            return "\(what) '\(id)' starts with '\(reservedPrefix)', which Infobip reserves for its predefined categories and actions"
        }
        return nil
    }

    /// This table plus app-defined `category`. Refuses ids ``identifierProblem(_:what:)``
    /// refuses (empty, `mm_`) and ids already present.
    package func adding(_ category: NotificationCategory) throws(CategoryTableError) -> CategoryTable {
        if let problem = Self.identifierProblem(category.id, what: "category id") { throw CategoryTableError(message: problem) }
        if categories[category.id] != nil {
            throw CategoryTableError(message: "category '\(category.id)' is defined twice")
        }
        for action in category.actions {
            if let problem = Self.identifierProblem(action.id, what: "action id") {
                throw CategoryTableError(message: "\(problem) (category '\(category.id)')")
            }
        }
        var copy = self
        copy.categories[category.id] = category
        return copy
    }

    /// This table plus every category in `appCategories`, checked as ``adding(_:)`` does.
    package func adding(contentsOf appCategories: [NotificationCategory]) throws(CategoryTableError) -> CategoryTable {
        var table = self
        for category in appCategories { table = try table.adding(category) }
        return table
    }
}

/// Bounds and tables for ``Normalizer``.
package struct NormalizerOptions: Sendable {
    /// Largest compact vendor payload accepted (APNs and FCM cap payloads at 4 KB).
    package var maxPayloadBytes = 4096
    /// Largest raw input (envelope, whitespace and all) that is parsed at all.
    package var maxInputBytes = 65536
    /// Deepest nesting accepted by the parser.
    package var maxDepth = 32
    package var categories = CategoryTable.builtIn

    package init() {}
}

package enum NormalizeOutcome: Sendable, Equatable {
    case accepted(PushNotification)
    case refused(PayloadRefusal)
}

/// What ``Normalizer/classify(_:options:)`` made of a spool file.
package enum IntakeOutcome: Sendable, Equatable {
    /// A push, journaled under ``PushNotification/dedupKey``.
    case notification(PushNotification)
    /// A Notification Center event, journaled under ``PushEvent/dedupKey``.
    case event(PushEvent)
    /// An erasure request (docs/design/erasure.md), journaled under ``ErasureRequest/dedupKey``
    /// as a record that names only the subject's keyed hash.
    case erasure(ErasureRequest)
    case refused(PayloadRefusal)
}

/// One push in pushspool's vendor-neutral model. Fields are `var` so the daemon can apply
/// media fallbacks (`body = mediaAlt`, keeping `originalBody`) before journaling.
package struct PushNotification: Sendable, Equatable {
    package var vendor: Vendor
    package var platform: Platform
    /// The detected wire format, e.g. `mindbox-ios-legacy`, `infobip-android`, `apns`.
    package var format: String
    package var id: String
    package var title: String?
    package var subtitle: String?
    package var body: String?
    /// The body before a fallback replaced it.
    package var originalBody: String?
    /// The link a tap opens. For Infobip it is derived: the first valid of ``deeplink``,
    /// ``webViewUrl``, ``browserUrl`` (then `inAppDetails.clickUrl`), kept for readers of
    /// records written before the three were carried apart.
    package var clickUrl: String?
    /// Infobip's three link kinds, kept apart because the app opens each its own way: a
    /// screen of the app (`deeplink`), a page in an in-app web view (`webViewUrl`), a page in
    /// the system browser (`browserUrl`).
    package var deeplink: String?
    package var webViewUrl: String?
    package var browserUrl: String?
    package var mediaUrl: String?
    package var mediaAlt: String?
    package var buttons: [NotificationButton] = []
    package var category: String?
    /// The category's actions as the platform shows them (at most 4 on iOS, 3 on Android),
    /// text input included; empty when the push names no known category.
    package var actions: [CategoryAction] = []
    /// How many of the category's actions were cut beyond what the platform shows.
    package var actionsCut = 0
    /// Infobip mirror push (`inAppOpenTitle` / `inAppDismissTitle`): the in-app message's
    /// open and dismiss button titles.
    package var inAppOpenTitle: String?
    package var inAppDismissTitle: String?
    /// Decoded when the vendor sends JSON in a string; otherwise the string or object as sent.
    package var customPayload: JSONValue?
    package var presentation: Presentation?
    package var silent = false
    package var sound: String?
    package var badge: Int?
    /// ISO-8601 UTC (or, for Mindbox `pushDate`, the string as sent).
    package var sentAt: String?
    package var expiresAt: String?
    package var locKey: String?
    package var locArgs: [String]?
    package var titleLocKey: String?
    package var titleLocArgs: [String]?
    /// Vendor message type (SFMC `_mt`, Infobip `messageType`).
    package var messageType: String?
    /// SFMC's request id (`_r`) and hash id (`_h`): with `_m` (the ``id``) they name the send
    /// a push belongs to, for attribution (SFMC's SDK keeps them with the message).
    package var requestId: String?
    package var hashId: String?
    /// Infobip's `bulkId` (`internalData.bulkId`, Android `org_ib_d.internal.bulkId`): the
    /// send the message was part of; the SDKs put it into the MO an action sends.
    package var bulkId: String?
    /// Replaces the inbox's earlier item with the same id (the same owner and vendor), as the
    /// device replaces a shown notification: the envelope's `collapseId`, else FCM's
    /// `android.collapse_key` / `collapse_key` or APNs' `apns-collapse-id` where the payload
    /// is a send request carrying them (``Session/collapseId(wrapper:flatBundle:)``).
    package var collapseId: String?
    /// APNs `aps.thread-id`: a group the device shows together. Grouping only, never
    /// replacement: kept on the item for the app to group by.
    package var threadId: String?
    package var user: String?
    /// The envelope's `device`: the shared-device inbox of a push without a user.
    package var device: String?
    package var receivedAt: String?
    package var warnings: [PayloadWarning] = []
    /// FCM's time to live (`android.ttl`, `ttl`, `time_to_live`) in ms, 0...28 days: the
    /// item expires that long after it was ingested (the inbox index decides the moment).
    package var ttlMillis: Int64? = nil

    package init(vendor: Vendor, platform: Platform, format: String, id: String) {
        self.vendor = vendor
        self.platform = platform
        self.format = format
        self.id = id
    }

    /// The journal's de-duplication key: (vendor, id), plus the envelope's user when it
    /// names one (``DedupKey``). Compared as UTF-8 bytes; at most ``DedupKey/maxBytes`` of
    /// them, which the normaliser enforces (`id_too_long`).
    package var dedupKey: String { DedupKey.make(vendor: vendor, id: id, user: user) }

    /// The model as JSON: camelCase keys, absent values omitted; `kind` ("notification"),
    /// `silent`, `buttons` and `warnings` (strings `code` or `code:detail`) always present;
    /// `actions` when the category resolved, `actionsCut` when not 0.
    package func jsonValue() -> JSONValue {
        .object(JSONObject(uniqueKeysWithValues: jsonMembers()))
    }

    /// ``jsonValue()``'s members in no particular order, each key once: the record builder
    /// adds its own and serialises them without building a dictionary (hashing every key
    /// twice per file showed in the burst profile).
    package func jsonMembers() -> [(String, JSONValue)] {
        var o: [(String, JSONValue)] = []
        o.reserveCapacity(48)
        o.append(("kind", .string("notification")))
        o.append(("vendor", .string(vendor.rawValue)))
        o.append(("platform", .string(platform.rawValue)))
        o.append(("format", .string(format)))
        o.append(("id", .string(id)))
        o.append(("silent", .bool(silent)))
        o.append(("buttons", .array(buttons.map { $0.jsonValue() })))
        o.append(("warnings", .array(warnings.map { .string($0.description) })))
        func put(_ key: String, _ value: String?) { if let value { o.append((key, .string(value))) } }
        func put(_ key: String, _ values: [String]?) { if let values { o.append((key, .array(values.map { .string($0) }))) } }
        put("title", title)
        put("subtitle", subtitle)
        put("body", body)
        put("originalBody", originalBody)
        put("clickUrl", clickUrl)
        put("deeplink", deeplink)
        put("webViewUrl", webViewUrl)
        put("browserUrl", browserUrl)
        put("mediaUrl", mediaUrl)
        put("mediaAlt", mediaAlt)
        put("category", category)
        put("presentation", presentation?.rawValue)
        put("sound", sound)
        put("sentAt", sentAt)
        put("expiresAt", expiresAt)
        put("locKey", locKey)
        put("locArgs", locArgs)
        put("titleLocKey", titleLocKey)
        put("titleLocArgs", titleLocArgs)
        put("messageType", messageType)
        put("requestId", requestId)
        put("hashId", hashId)
        put("bulkId", bulkId)
        put("collapseId", collapseId)
        put("threadId", threadId)
        put("user", user)
        put("device", device)
        put("inAppOpenTitle", inAppOpenTitle)
        put("inAppDismissTitle", inAppDismissTitle)
        put("receivedAt", receivedAt)
        if !actions.isEmpty { o.append(("actions", .array(actions.map { $0.jsonValue() }))) }
        if actionsCut > 0 { o.append(("actionsCut", .integer(actionsCut))) }
        if let badge { o.append(("badge", .number(String(badge)))) }
        if let ttlMillis { o.append(("ttlMillis", .number(String(ttlMillis)))) }
        if let customPayload, !customPayload.isNull { o.append(("customPayload", customPayload)) }
        return o
    }

    package func hasWarning(_ code: WarningCode) -> Bool { warnings.contains { $0.code == code } }
}
