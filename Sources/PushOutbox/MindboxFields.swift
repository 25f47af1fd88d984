import PushSystem
import PushTransliteration

/// The custom fields of Mindbox's `mobileapp.NCPushOpen` (`mobPushTranslateName`,
/// `mobPushSendDateTime`), made from a push's `pushName`/`pushDate` (or the guide's spelling
/// `push_name`/`push_date`) the way the Notification Center guide describes them: the
/// transliterated push name (a string field Mindbox looks the campaign up by) and the send
/// date in a date-and-time field. docs/vendor-rules.md, "Mindbox", states the rules.
///
/// `Sendable`: the transliterator locks internally.
package struct MindboxFields: Sendable {
    /// `nil` = `MindboxTransliteration=none`: the name goes out as the push had it.
    package var transliterator: Transliterator?

    /// At most this many characters (Unicode scalars) of a name are transliterated, and at
    /// most this many UTF-8 bytes of the result are sent. A push holds at most 4 KiB, so only
    /// a hostile record reaches the limit; the cut keeps ICU's work and the POST bounded.
    package static let maxNameCharacters = 1024
    package static let maxNameBytes = 1024

    package init(transliterator: Transliterator?) {
        self.transliterator = transliterator
    }

    /// Why a field was left out or sent as it was; for the journald event.
    ///
    /// `Sendable`: a plain value.
    package struct Problem: Sendable, Equatable {
        /// `mobPushTranslateName` or `mobPushSendDateTime`.
        package var field: String
        /// `unparseable_date`, `name_not_text`, `transliteration_failed`.
        package var reason: String
        package var message: String
    }

    /// The custom fields for `custom` (the item's `customPayload`) and what could not be
    /// normalised. A field whose source is absent, `null` or empty is left out silently.
    package func customFields(_ custom: JSONValue?) -> (fields: JSONObject, problems: [Problem]) {
        var fields: JSONObject = [:]
        var problems: [Problem] = []
        if let date = custom?.first(of: "pushDate", "push_date") {
            if let millis = MindboxDate.epochMillis(date) {
                fields["mobPushSendDateTime"] = .string(MindboxDate.format(millis))
            } else {
                // Mindbox would refuse a date-and-time field it cannot read, and with it the
                // whole action: the open still counts without the date.
                problems.append(Problem(field: "mobPushSendDateTime", reason: "unparseable_date",
                                        message: "the push's date \(MindboxFields.excerpt(date)) is not a date pushspool reads (ISO-8601, dd.MM.yyyy HH:mm, epoch seconds or milliseconds up to 9999); NCPushOpen went without mobPushSendDateTime"))
            }
        }
        if let name = custom?.first(of: "pushName", "push_name") {
            let text: String?
            switch name {
            case .string(let s): text = s
            case .number(let lexeme): text = lexeme
            default: text = nil
            }
            if let text {
                let (value, problem) = transliterate(text)
                if !value.isEmpty { fields["mobPushTranslateName"] = .string(value) }
                if let problem { problems.append(problem) }
            } else {
                problems.append(Problem(field: "mobPushTranslateName", reason: "name_not_text",
                                        message: "the push's name is a JSON \(name.typeName), not text; NCPushOpen went without mobPushTranslateName"))
            }
        }
        return (fields, problems)
    }

    /// The name as Mindbox gets it: cut to the limits, transliterated. When ICU fails the name
    /// goes as the push had it (cut), which is what an app without transliteration sends.
    func transliterate(_ name: String) -> (String, Problem?) {
        let cut = MindboxFields.prefix(name, characters: MindboxFields.maxNameCharacters)
        guard let transliterator else { return (MindboxFields.prefix(cut, bytes: MindboxFields.maxNameBytes), nil) }
        do {
            let latin = try transliterator.apply(cut)
            return (MindboxFields.prefix(latin, bytes: MindboxFields.maxNameBytes), nil)
        } catch {
            return (MindboxFields.prefix(cut, bytes: MindboxFields.maxNameBytes),
                    Problem(field: "mobPushTranslateName", reason: "transliteration_failed",
                            message: "\(error.message); NCPushOpen carries the name as the push had it"))
        }
    }

    static func prefix(_ text: String, characters: Int) -> String {
        var scalars = String.UnicodeScalarView()
        for scalar in text.unicodeScalars.prefix(characters) { scalars.append(scalar) }
        return String(scalars)
    }

    /// At most `bytes` UTF-8 bytes, never splitting a character's encoding.
    static func prefix(_ text: String, bytes: Int) -> String {
        guard text.utf8.count > bytes else { return text }
        var scalars = String.UnicodeScalarView()
        var used = 0
        for scalar in text.unicodeScalars {
            let size = UTF8.width(scalar)
            if used + size > bytes { break }
            used += size
            scalars.append(scalar)
        }
        return String(scalars)
    }

    /// A value for a log line: strings quoted and cut to 64 characters, control characters
    /// escaped by the JSON serialiser.
    static func excerpt(_ value: JSONValue) -> String {
        switch value {
        case .string(let s): return JSONValue.string(prefix(s, characters: 64)).serializedString()
        case .number(let n): return prefix(n, characters: 64)
        default: return "(a JSON \(value.typeName))"
        }
    }
}

/// Date-and-time values of pushes, read in the forms senders use and written in one.
///
/// Read: ISO-8601 (`2026-03-01T10:00:00Z`, with `+03:00`, `+0300`, `+03` or no offset, a
/// space instead of `T`, with or without seconds and fractions, or a date alone);
/// `dd.MM.yyyy` with an optional `HH:mm[:ss[.fff]]` (and offset); epoch seconds or
/// milliseconds (``EpochNumber``: 10^12 and more is milliseconds) as a JSON integer or a
/// string of digits. A form without an offset is UTC. Every field is checked
/// (31.02.2026 is no date); results outside 1970-01-01 to 9999-12-31 are refused.
///
/// Written: ISO-8601 in UTC with milliseconds, `2026-03-01T10:00:00.000Z`, the form the
/// Mindbox SDK reads date-times from its API in (`yyyy-MM-dd'T'HH:mm:ss.SSSXXXXX`).
package enum MindboxDate {
    /// 9999-12-31T23:59:59.999Z.
    static let maxMillis = EpochNumber.maxMillis
    /// Longer text is no date of any accepted form.
    static let maxTextBytes = 64

    /// Epoch milliseconds; `nil` when the value is none of the accepted forms.
    package static func epochMillis(_ value: JSONValue) -> Int64? {
        switch value {
        case .string(let text): return epochMillis(text: text)
        case .number(let lexeme): return EpochNumber.millis(digits: lexeme.utf8)
        default: return nil
        }
    }

    /// ``epochMillis(_:)`` for text.
    package static func epochMillis(text: String) -> Int64? {
        // Measured before copying: a hostile megabyte is refused without being walked twice.
        guard text.utf8.count <= maxTextBytes * 2 else { return nil }
        var bytes = Array(text.utf8)
        while bytes.first == UInt8(ascii: " ") { bytes.removeFirst() }
        while bytes.last == UInt8(ascii: " ") { bytes.removeLast() }
        guard !bytes.isEmpty, bytes.count <= maxTextBytes else { return nil }
        if bytes.allSatisfy(isDigit) { return EpochNumber.millis(digits: bytes) }
        var scanner = Scanner(bytes: bytes)
        return scanner.dateTime()
    }

    /// `2026-03-01T10:00:00.000Z`.
    package static func format(_ millis: Int64) -> String {
        Timestamp.iso8601(millis: millis)
    }

    static func isDigit(_ byte: UInt8) -> Bool { byte >= 48 && byte <= 57 }

    /// Days from 1970-01-01 to the proleptic Gregorian date (H. Hinnant's days_from_civil).
    static func days(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    static func daysInMonth(year: Int, month: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// A cursor over the text of one date-time.
    struct Scanner {
        let bytes: [UInt8]
        var index = 0

        init(bytes: [UInt8]) { self.bytes = bytes }

        var atEnd: Bool { index == bytes.count }
        var peek: UInt8? { index < bytes.count ? bytes[index] : nil }

        mutating func take(_ byte: UInt8) -> Bool {
            guard peek == byte else { return false }
            index += 1
            return true
        }

        /// Exactly `count` digits.
        mutating func number(_ count: Int) -> Int? {
            guard index + count <= bytes.count else { return nil }
            var value = 0
            for byte in bytes[index..<index + count] {
                guard MindboxDate.isDigit(byte) else { return nil }
                value = value * 10 + Int(byte - 48)
            }
            index += count
            return value
        }

        mutating func dateTime() -> Int64? {
            // The date: yyyy-MM-dd or dd.MM.yyyy.
            let year: Int, month: Int, day: Int
            if bytes.count >= 3, bytes[2] == UInt8(ascii: ".") {
                guard let d = number(2), take(UInt8(ascii: ".")), let m = number(2), take(UInt8(ascii: ".")), let y = number(4) else { return nil }
                (year, month, day) = (y, m, d)
            } else {
                guard let y = number(4), take(UInt8(ascii: "-")), let m = number(2), take(UInt8(ascii: "-")), let d = number(2) else { return nil }
                (year, month, day) = (y, m, d)
            }
            guard (1970...9999).contains(year), (1...12).contains(month),
                  (1...MindboxDate.daysInMonth(year: year, month: month)).contains(day) else { return nil }
            var hour = 0, minute = 0, second = 0, millis = 0
            if take(UInt8(ascii: "T")) || take(UInt8(ascii: "t")) || take(UInt8(ascii: " ")) {
                guard let h = number(2), take(UInt8(ascii: ":")), let m = number(2), h < 24, m < 60 else { return nil }
                (hour, minute) = (h, m)
                if take(UInt8(ascii: ":")) {
                    guard let s = number(2), s < 60 else { return nil }
                    second = s
                    if take(UInt8(ascii: ".")) || take(UInt8(ascii: ",")) {
                        // Milliseconds from the first three digits; further digits are read and dropped.
                        var digits = 0
                        while let byte = peek, MindboxDate.isDigit(byte) {
                            if digits < 3 { millis = millis * 10 + Int(byte - 48) }
                            digits += 1
                            index += 1
                        }
                        guard (1...9).contains(digits) else { return nil }
                        for _ in digits..<max(digits, 3) { millis *= 10 }
                    }
                }
            }
            guard let offset = zoneOffsetSeconds(), atEnd else { return nil }
            let seconds = Int64(MindboxDate.days(year: year, month: month, day: day)) * 86_400
                + Int64(hour * 3600 + minute * 60 + second) - Int64(offset)
            let result = seconds * 1000 + Int64(millis)
            guard result >= 0, result <= MindboxDate.maxMillis else { return nil }
            return result
        }

        /// `Z`, `±HH:MM`, `±HHMM`, `±HH` (optionally after one space) or nothing (UTC); `nil`
        /// for anything else.
        mutating func zoneOffsetSeconds() -> Int? {
            if atEnd { return 0 }
            if take(UInt8(ascii: "Z")) || take(UInt8(ascii: "z")) { return 0 }
            _ = take(UInt8(ascii: " "))
            let sign: Int
            if take(UInt8(ascii: "+")) { sign = 1 } else if take(UInt8(ascii: "-")) { sign = -1 } else { return nil }
            guard let hours = number(2), hours < 24 else { return nil }
            var minutes = 0
            if !atEnd {
                _ = take(UInt8(ascii: ":"))
                guard let m = number(2), m < 60 else { return nil }
                minutes = m
            }
            return sign * (hours * 3600 + minutes * 60)
        }
    }
}
