internal import CICU
import PushSystem

/// Why a transliteration could not be opened or applied.
///
/// `Sendable`: a plain value.
package struct TransliterationError: Error, Sendable, Equatable, CustomStringConvertible {
    package enum Code: String, Sendable {
        /// ICU has no transliterator by that id (a misspelt id, or rules ICU cannot parse).
        case invalidId = "invalid_id"
        /// The text is longer than ``Transliterator/maxInputUnits``.
        case tooLong = "too_long"
        /// ICU failed while transliterating (out of memory, a result past the output limit).
        case failed
    }

    package var code: Code
    /// ICU's `UErrorCode` (`U_INVALID_ID` is 65569), 0 when ICU was not asked.
    package var icuStatus: Int32
    /// What happened and what to do, for people.
    package var message: String

    package init(_ code: Code, _ message: String, icuStatus: Int32 = 0) {
        self.code = code
        self.message = message
        self.icuStatus = icuStatus
    }

    package var description: String { message }

    /// ICU's name for a status (`U_INVALID_ID`).
    static func icuName(_ status: Int32) -> String {
        guard let name = cicu_error_name(status) else { return "ICU error \(status)" }
        return String(cString: name)
    }
}

/// An ICU transform from Debian's libicu, by its transform id: `Any-Latin; Latin-ASCII` turns
/// "Весенняя распродажа" into "Vesennaa rasprodaza". Wraps `utrans_openU` and
/// `utrans_transUChars` (through the `CICU` shim).
///
/// `Sendable`: the ICU handle is used only under a lock; an ICU transliterator keeps caches
/// and is not safe for concurrent use.
package final class Transliterator: Sendable {
    /// The transform id it was opened with.
    package let id: String
    private let handle: Locked<UnsafeMutableRawPointer>

    /// The longest text ``apply(_:)`` takes, in UTF-16 units. Callers bound their input well
    /// below this; the limit keeps every length a valid `Int32` for ICU.
    package static let maxInputUnits = 1 << 20
    /// The longest result ICU may produce, in UTF-16 units (Latin forms of CJK text run a few
    /// times longer than the original; past this the text is refused, not truncated).
    package static let maxOutputUnits = 1 << 23
    /// The longest transform id accepted.
    package static let maxIdBytes = 512

    /// Opens the transform `id` (`utrans_openU`, forward direction).
    /// - Throws: `invalidId` with ICU's reason when ICU has no such transform.
    package init(id: String) throws(TransliterationError) {
        let units = Array(id.utf16)
        guard !id.isEmpty, id.utf8.count <= Transliterator.maxIdBytes else {
            throw TransliterationError(.invalidId, "a transliteration id is 1 to \(Transliterator.maxIdBytes) bytes, like 'Any-Latin; Latin-ASCII'")
        }
        var status: Int32 = 0
        let opened = units.withUnsafeBufferPointer { buffer in
            // At most maxIdBytes units (checked above): clamping never changes it.
            cicu_transliterator_open(buffer.baseAddress, Int32(clamping: buffer.count), &status)
        }
        guard let opened else {
            throw TransliterationError(.invalidId,
                                       "ICU has no transliterator '\(id)' (\(TransliterationError.icuName(status))); use an ICU transform id such as 'Any-Latin; Latin-ASCII' (see `uconv -L` for the names ICU knows)",
                                       icuStatus: status)
        }
        self.id = id
        handle = Locked(opened)
    }

    deinit {
        handle.withLock { cicu_transliterator_close($0) }
    }

    /// Whether ICU can open `id`; `nil` when it can, else the error (with its message).
    package static func check(id: String) -> TransliterationError? {
        do {
            _ = try Transliterator(id: id)
            return nil
        } catch {
            return error
        }
    }

    /// `text` transformed. A Swift string is valid Unicode, so bytes that were not UTF-8 reach
    /// here as U+FFFD and leave as ICU maps it (`Latin-ASCII` keeps it).
    /// - Throws: `tooLong` past ``maxInputUnits``; `failed` when ICU fails or the result would
    ///   exceed ``maxOutputUnits``.
    package func apply(_ text: String) throws(TransliterationError) -> String {
        let source = Array(text.utf16)
        guard source.count <= Transliterator.maxInputUnits else {
            throw TransliterationError(.tooLong, "text of \(source.count) UTF-16 units is longer than the \(Transliterator.maxInputUnits) the transliterator takes")
        }
        if source.isEmpty { return text }
        // Most transforms shorten or keep the length; twice the input plus a margin fits nearly
        // every result in one call, and ICU says exactly how much it needs when not.
        var capacity = min(Transliterator.maxOutputUnits, source.count * 2 + 16)
        for _ in 0..<2 {
            var output = [UInt16](repeating: 0, count: capacity)
            var status: Int32 = 0
            let length = handle.withLock { transliterator in
                source.withUnsafeBufferPointer { input in
                    output.withUnsafeMutableBufferPointer { buffer in
                        // Both at most maxInputUnits / maxOutputUnits (checked above): clamping never
                        // changes them, and a value past Int32 could not trap here if it did.
                        cicu_transliterate(transliterator, input.baseAddress, Int32(clamping: input.count), buffer.baseAddress,
                                           Int32(clamping: buffer.count), &status)
                    }
                }
            }
            if status == CICU_BUFFER_OVERFLOW, length > capacity, length <= Transliterator.maxOutputUnits {
                capacity = Int(length)
                continue
            }
            guard status <= 0, length >= 0, Int(length) <= capacity else {
                throw TransliterationError(.failed, "ICU could not transliterate the text with '\(id)' (\(TransliterationError.icuName(status)))",
                                           icuStatus: status)
            }
            return String(decoding: output[0..<Int(length)], as: UTF16.self)
        }
        throw TransliterationError(.failed, "the text transliterated with '\(id)' would be longer than \(Transliterator.maxOutputUnits) UTF-16 units")
    }
}
