@preconcurrency import Glibc
internal import CInih
import PushSystem

/// One `Key=value` assignment as libinih reported it, with the line it came from.
struct IniAssignment: Sendable, Equatable {
    var section: String
    var key: String
    var value: String
    var line: Int
}

/// Reads INI text through libinih (Debian's `libinih`), keeping line numbers.
///
/// Debian's libinih is built without `INI_HANDLER_LINENO`, so the handler does not learn
/// the line. We feed the text through `ini_parse_stream` with our own reader, which hands
/// libinih one line per call; when the handler runs, the last line handed out is the one it
/// is reporting.
enum IniFile {
    /// libinih's fixed line buffer (`INI_MAX_LINE`, 200 with the stack buffer Debian builds);
    /// the reader refuses longer lines rather than letting libinih split them silently.
    static let maxLineLength = 196

    private final class Context {
        let lines: [[UInt8]]
        var next = 0
        var assignments: [IniAssignment] = []
        var error: (line: Int, message: String)?

        init(lines: [[UInt8]]) { self.lines = lines }
    }

    /// systemd's INI has neither inline comments (`Title=Accept ; no` keeps the `;`) nor
    /// indented continuation lines; turn both off in libinih's process-wide settings once.
    private static let configured: Bool = {
        cinih_use_systemd_dialect()
        return true
    }()

    /// Parses `bytes`, attributing errors to `path`.
    static func parse(_ bytes: [UInt8], path: String) throws(ConfigError) -> [IniAssignment] {
        precondition(configured)
        if bytes.contains(0) {
            throw ConfigError(file: path, line: 0, message: "contains a NUL byte; expected a text file")
        }
        let lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).map(Array.init)
        let context = Context(lines: lines)
        let unmanaged = Unmanaged.passRetained(context)
        defer { unmanaged.release() }

        let reader: @convention(c) (UnsafeMutablePointer<CChar>?, Int32, UnsafeMutableRawPointer?) -> UnsafeMutablePointer<CChar>? = { buffer, size, stream in
            let context = Unmanaged<Context>.fromOpaque(stream!).takeUnretainedValue()
            guard context.error == nil, context.next < context.lines.count, let buffer else { return nil }
            // split() yields a final empty piece after a trailing newline; it is not a line.
            if context.next == context.lines.count - 1 && context.lines[context.next].isEmpty { return nil }
            let line = context.lines[context.next]
            context.next += 1
            guard line.count <= IniFile.maxLineLength, line.count + 2 <= Int(size) else {
                context.error = (context.next, "line is longer than \(IniFile.maxLineLength) characters; split a list over several assignments of the same key")
                return nil
            }
            line.withUnsafeBytes { raw in
                UnsafeMutableRawPointer(buffer).copyMemory(from: raw.baseAddress ?? UnsafeRawPointer(buffer), byteCount: line.count)
            }
            buffer[line.count] = CChar(bitPattern: UInt8(ascii: "\n"))
            buffer[line.count + 1] = 0
            return buffer
        }
        let handler: @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<CChar>?, UnsafePointer<CChar>?, UnsafePointer<CChar>?) -> Int32 = { user, section, name, value in
            let context = Unmanaged<Context>.fromOpaque(user!).takeUnretainedValue()
            guard let name, let value else { return 0 }
            context.assignments.append(IniAssignment(
                section: section.map { String(cString: $0) } ?? "",
                key: String(cString: name), value: String(cString: value), line: context.next))
            return 1
        }

        let opaque = unmanaged.toOpaque()
        let result = ini_parse_stream(reader, opaque, handler, opaque)
        if let error = context.error {
            throw ConfigError(file: path, line: error.line, message: error.message)
        }
        if result > 0 {
            throw ConfigError(file: path, line: Int(result), message: "syntax error; expected [Section], Key=value or a # comment")
        }
        if result < 0 {
            throw ConfigError(file: path, line: 0, message: "libinih could not parse the file (error \(result))")
        }
        return context.assignments
    }

    /// Reads and parses a file; `nil` when it does not exist.
    static func parseFile(_ path: String) throws(ConfigError) -> [IniAssignment]? {
        let bytes: [UInt8]
        do {
            bytes = try Posix.readFile(path, limit: 1 << 20)
        } catch where error.errno == ENOENT {
            return nil
        } catch {
            throw ConfigError(file: path, line: 0, message: "cannot read: \(error)")
        }
        return try parse(bytes, path: path)
    }
}
