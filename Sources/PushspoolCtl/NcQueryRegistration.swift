// TEMPORARY (index helper): routes `pushspoolctl nc <list|count|inapp|reindex|update>` to
// NcQueryCommands until the events helper's `nc` dispatcher lands. At merge, delete this
// file and its line in PushspoolCtl.subcommands; the dispatcher calls NcQueryCommands.run.
package struct NcQueryRegistration: CtlSubcommand {
    package static let name = "nc"
    package static let summary = "Notification Center inbox: list, count, inapp, reindex, update"
    package static var help: String { NcQueryCommands.help }

    let arguments: [String]

    package init(arguments: [String]) throws(UsageError) {
        guard let first = arguments.first else { throw UsageError("nc needs a subcommand") }
        guard NcQueryCommands.subcommands.contains(first) else { throw UsageError("no such nc subcommand: \(first)") }
        self.arguments = arguments
    }

    package func run(_ context: CtlContext) -> Int32 {
        NcQueryCommands.run(subcommand: arguments[0], arguments: Array(arguments.dropFirst()), context: context)
    }
}
