import PushCLI
import PushPayload
import PushSpool
import PushSystem

/// `pushspoolctl drop`: hands payload files to the daemon the safe way (staged in `tmp/`,
/// renamed into `incoming/`).
package struct DropCommand: CtlSubcommand {
    package static var command: CtlCommandSpec {
        Command("drop", summary: "queue payload files for ingestion (atomically, via tmp/)",
                options: [
                    .value("--user", placeholder: "U", help: "the user the notification is for"),
                    .value("--platform", placeholder: "ios|android", help: "the device platform",
                           completion: .words(["ios", "android"])),
                    .flag("--raw", help: "copy the bytes unchanged (no envelope, no JSON check); malformed files then "
                          + "reach the daemon's quarantine as they are"),
                ],
                positionals: [Positional("FILE", repeated: true, completion: .file(suffix: nil))],
                discussion: """
                    Wraps each FILE ('-' reads stdin) in a pushspool envelope
                    {"pushspool":1,"user":U,"platform":P,"receivedAt":NOW,"payload":...}, writes it to the
                    spool's tmp/ and renames it into incoming/, where pushspoold takes it. A FILE that is
                    already an envelope keeps its fields unless --user/--platform override them.
                    Prints the name given to each file in incoming/: the FILE's own name when it is free,
                    else a unique one.
                    """,
                exitStatus: "Exit status: 0 all dropped, 1 a file could not be read or written, 65 a FILE is not "
                    + "JSON (without --raw), 64 usage error."
        ) { invocation throws(CLIError) in try DropCommand(invocation) }
    }

    var user: String?
    var platform: String?
    var raw = false
    var files: [String] = []

    package init(_ invocation: Invocation) throws(CLIError) {
        user = invocation.value("--user")
        platform = invocation.value("--platform")
        raw = invocation.flag("--raw")
        files = invocation.operands
        if let platform, platform != "ios", platform != "android" {
            throw invocation.error("--platform must be ios or android, not '\(platform)'")
        }
        if raw, user != nil || platform != nil {
            throw invocation.error("--raw copies bytes unchanged; it cannot add --user or --platform", .conflict)
        }
        if let user, ControlCharacters.first(in: user) != nil {
            throw invocation.error("--user must not hold control characters (U+0000-U+001F, U+007F)")
        }
    }

    package func run(_ context: CtlContext) -> Int32 {
        guard let configuration = context.configurationOrReport() else { return ExitStatus.failure }
        let layout = context.spoolLayout(configuration)
        var status = ExitStatus.ok
        for file in files {
            let bytes: [UInt8]
            do {
                bytes = file == "-" ? try Posix.readAll(0, limit: configuration.spool.maxFileBytes, subject: "stdin")
                    : try Posix.readFile(file, limit: configuration.spool.maxFileBytes)
            } catch {
                context.err("pushspoolctl: cannot read \(file): \(error)\n")
                status = ExitStatus.failure
                continue
            }
            let contents: [UInt8]
            if raw {
                contents = bytes
            } else {
                do {
                    contents = try envelope(bytes)
                } catch {
                    context.err("pushspoolctl: \(file) is not a JSON payload (\(error.message)); use --raw to drop it unchanged\n")
                    status = max(status, ExitStatus.dataError)
                    continue
                }
            }
            do {
                // Keep the producer's file name when it is free, so `failed list` speaks of
                // names the operator knows; otherwise a unique Maildir-style one.
                let base = file == "-" ? nil : String(file.split(separator: "/").last ?? "")
                let name: String
                if let base, !base.hasPrefix("."), !base.hasSuffix(".tmp"),
                   let kept = try? SpoolDropper.drop(bytes: contents, layout: layout, name: base) {
                    name = kept
                } else {
                    name = try SpoolDropper.drop(bytes: contents, layout: layout)
                }
                context.out("\(file)\t\(name)\n")
            } catch {
                context.err("pushspoolctl: cannot drop \(file): \(error)\n")
                status = ExitStatus.failure
            }
        }
        return status
    }

    private func envelope(_ bytes: [UInt8]) throws(JSONParseError) -> [UInt8] {
        let value = try JSONParser().parse(bytes)
        var envelope: JSONObject
        if case .object(let object) = value, object["pushspool"] != nil {
            envelope = object
        } else {
            envelope = ["pushspool": .number("1"), "payload": value]
        }
        if let user { envelope["user"] = .string(user) }
        if let platform { envelope["platform"] = .string(platform) }
        if envelope["receivedAt"] == nil { envelope["receivedAt"] = .string(Timestamp.now()) }
        return JSONValue.object(envelope).serialized() + [0x0a]
    }
}
